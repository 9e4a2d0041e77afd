"""The simulation engine: a platform on one clock, tenants, NIC transfers, determinism."""

from __future__ import annotations

from collections.abc import Generator
from functools import partial
from typing import Any

import pytest
import simpy

from pinlab.kernel import get_profile
from pinlab.kernel.umem import IB_ACCESS_LOCAL_WRITE, IB_ACCESS_ON_DEMAND
from pinlab.platform.presets import PRESETS
from pinlab.sim.engine import Ctx, Simulation
from pinlab.sim.workloads import nic_access, nic_side, send

MiB = 1 << 20


def sender(ctx: Ctx, odp: bool, size: int = 256 * MiB) -> Generator[simpy.Event, Any, None]:
    """Sends 16 MiB messages through one MR: the NIC access (an ODP fault after a move), then
    the flow over the P2P path or, after a migration, through host memory."""
    h = yield from ctx.call(ctx.proc.gem_create, "gpu0", size)
    fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, h)
    access = IB_ACCESS_LOCAL_WRITE | (IB_ACCESS_ON_DEMAND if odp else 0)
    mr = yield from ctx.call(ctx.proc.ibv_reg_dmabuf_mr, "mlx5_0", fd, 0, size, access)
    while True:
        t0 = ctx.now
        result = yield from nic_access(ctx, mr, 16 * MiB)
        side = nic_side(
            ctx,
            ctx.node.name,
            ctx.machine,
            "gpu0",
            "mlx5_0",
            p2p=result.p2p,
            write=False,
            nbytes=16 * MiB,
        )
        yield from send(ctx, side, 16 * MiB)
        ctx.stats.record_transfer(16 * MiB, ctx.now - t0)


def hog(ctx: Ctx, count: int) -> Generator[simpy.Event, Any, None]:
    yield ctx.sleep(0.02)
    for _ in range(count):
        yield from ctx.call(ctx.proc.gem_create, "gpu0", 512 * MiB)
    yield ctx.sleep(1.0)


def run(seed: int = 1, until: float = 0.2, hog_count: int = 32) -> Simulation:
    sim = Simulation(PRESETS["workstation"](), get_profile("6.16", move_notify=True), seed=seed)
    sim.spawn("odp", partial(sender, odp=True))
    # 16 GiB of VRAM plus the 256 MiB sender: with 32 x 512 MiB one buffer must go
    sim.spawn("hog", partial(hog, count=hog_count))
    sim.run(until)
    return sim


def test_p2p_transfers_run_at_the_p2p_capacity() -> None:
    sim = run(hog_count=0)
    stats = sim.recorder.tenants["odp"]
    machine = sim.node().machine
    cap = machine.p2p_capacity("gpu0", "mlx5_0", nic_reads=True)
    assert cap is not None
    # every transfer carries 16 MiB after the message latency of the NIC's end; the mean rate
    # is the P2P capacity (the NIC reading GPU memory through the AMD root complex)
    end = machine.nic_end("mlx5_0", "gpu0", 16 * MiB, write=False)
    assert end.rate == pytest.approx(cap, rel=1e-5)  # + one RETH per message
    assert stats.transfers > 10
    assert stats.bytes / (stats.transfers * 16 * MiB) == 1
    mean_rate = 16 * MiB / (sum(stats.latencies) / stats.transfers - end.latency)
    assert mean_rate == pytest.approx(cap, rel=0.05)


def test_vram_pressure_evicts_the_odp_buffer_and_the_next_send_faults() -> None:
    """§10.2: eviction notifies the ODP importer; its next access faults and waits for the
    move fence (K-39, K-41, K-42); zero stale-DMA incidents (a correct importer)."""
    sim = run(until=0.5)
    stats = sim.recorder.tenants["odp"]
    assert stats.odp_faults >= 1
    assert sim.node().engines["gpu0"].stats.moves >= 1
    assert sim.stale_incidents() == 0


def test_same_seed_same_results() -> None:
    a, b = run(seed=3), run(seed=3)
    assert a.recorder.series_csv() == b.recorder.series_csv()
    assert a.recorder.tenants["odp"].latencies == b.recorder.tenants["odp"].latencies
