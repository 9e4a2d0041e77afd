"""Copy engines carry out TTM moves in simulated time and signal their fences (K-64)."""

from __future__ import annotations

import pytest
import simpy

from pinlab.kernel.kernel import Kernel
from pinlab.kernel.resv import DmaResvUsage
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_validate
from pinlab.sim.copy_engine import CopyEngine, CopyRates
from pinlab.sim.fences import fence_event, wait_all
from pinlab.sim.flows import FlowNetwork
from tests.kernel.fakes import GiB, TtmExporter, make_ttm_device

GB = 1e9


def setup() -> tuple[simpy.Environment, FlowNetwork, TtmExporter, CopyEngine]:
    env = simpy.Environment()
    net = FlowNetwork(env)
    up = net.add_link("gpu0.up", 12 * GB)
    down = net.add_link("gpu0.down", 12 * GB)
    kernel = Kernel("6.16")
    bdev = make_ttm_device(kernel, vram=4 * GiB)
    exporter = TtmExporter(bdev)
    engine = CopyEngine(
        env,
        net,
        bdev,
        CopyRates(d2h=12 * GB, h2d=10 * GB, local=400 * GB),
        to_host=[up],
        from_host=[down],
    )
    return env, net, exporter, engine


def test_k64_eviction_copy_takes_size_over_rate_and_signals_the_kernel_fence() -> None:
    env, net, exporter, engine = setup()
    bo = exporter.create_bo(3 * 10**9 // 2 // 4096 * 4096)  # ~1.5 GB in VRAM
    with bo.resv:
        ttm_bo_validate(bo, (TtmPlace(TtmMemType.TT),))
        (fence,) = bo.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True)
    done = fence_event(env, fence)
    env.run(until=done)
    assert env.now == pytest.approx(bo.size / (12 * GB))
    assert fence.signaled and fence.timestamp == env.now
    assert engine.stats.moves == 1 and engine.stats.bytes_migrated == bo.size
    assert net.links["gpu0.up"].bytes_carried == pytest.approx(bo.size)


def test_one_channel_runs_jobs_in_order() -> None:
    env, _net, exporter, _engine = setup()
    a = exporter.create_bo(1 << 30)
    b = exporter.create_bo(1 << 30)
    fences = []
    for bo in (a, b):
        with bo.resv:
            ttm_bo_validate(bo, (TtmPlace(TtmMemType.TT),))
            fences += bo.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True)
    env.run(until=wait_all(env, fences))
    t1, t2 = (f.timestamp for f in fences)
    assert t1 == pytest.approx((1 << 30) / (12 * GB))
    assert t2 == pytest.approx(2 * (1 << 30) / (12 * GB))


def test_restore_uses_the_host_to_device_rate() -> None:
    env, net, exporter, _engine = setup()
    bo = exporter.create_bo(1 << 30, where=TtmMemType.TT)
    with bo.resv:
        ttm_bo_validate(bo, (TtmPlace(TtmMemType.VRAM),))
        (fence,) = bo.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True)
    env.run(until=fence_event(env, fence))
    assert env.now == pytest.approx((1 << 30) / (10 * GB))
    assert net.links["gpu0.down"].bytes_carried == pytest.approx(1 << 30)
