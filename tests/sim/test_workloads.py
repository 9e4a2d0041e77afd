"""The built-in workloads and fault injection on small machines (``cost-model.md`` §1, §6, §7;
K-39, K-41, K-42 for the ODP paths; zero stale-DMA incidents wherever the model is correct)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
import simpy
from pydantic import ValidationError

from pinlab.kernel import get_profile
from pinlab.kernel.errno import KernelError
from pinlab.platform.presets import PRESETS
from pinlab.platform.topology import LinkUse
from pinlab.sim.collective import Collective
from pinlab.sim.engine import Ctx, Simulation, Tenant
from pinlab.sim.faults import inject
from pinlab.sim.flows import FlowNetwork
from pinlab.sim.metrics import TenantResult, metric
from pinlab.sim.workloads import (
    WORKLOADS,
    AllreduceParams,
    KvTransferParams,
    dmabuf_reg_cost,
    nearest_nic,
    nic_access,
    nic_side,
    param_unit,
    register_dmabuf,
    send,
    spawn,
)
from pinlab.units import STRICT_UNITS

MiB = 1 << 20
GiB = 1 << 30


def workstation(**params: Any) -> Simulation:
    """The §9.3 desktop under 6.16 with MOVE_NOTIFY (amdgpu pins P2P exports in VRAM)."""
    spec = PRESETS["workstation"](resizable_bar=True, **params)
    return Simulation(spec, get_profile("6.16", move_notify=True), seed=1, sample_interval=0.1)


def start(
    sim: Simulation,
    tenant: str,
    workload: str,
    *,
    node: str | None = None,
    at: float = 0.0,
    process_args: dict[str, Any] | None = None,
    **params: Any,
) -> Tenant:
    """Start built-in ``workload`` with ``params`` validated into its parameter model."""
    model = WORKLOADS[workload].params(**params)
    return spawn(sim, tenant, model, node=node, start=at, process_args=process_args)


def result(sim: Simulation, tenant: str) -> Any:
    """The tenant's typed result (its workload's ``TenantResult`` subclass)."""
    return sim.tenants[tenant].result


# -- registry and parameters -----------------------------------------------------------------------


def test_registry_has_the_workloads_with_parameter_models() -> None:
    assert {
        "allreduce",
        "kv-transfer",
        "perftest",
        "compositor",
        "app",
        "pin-hog",
        "pressure",
        "nvbandwidth",
        "p2p",
        "nccl",
        "gdrcopy",
    } <= set(WORKLOADS)
    for name, wd in WORKLOADS.items():
        p = wd.params.model_validate({})  # every parameter has a default
        assert p.workload == name == wd.name  # the discriminator is the workload's name
        assert wd.summary and wd.fn.__doc__
        for field, info in wd.params.model_fields.items():
            if field != "workload":  # the discriminator, not a parameter
                assert info.description, f"{name}.{field} has no description"
        for spec in wd.metrics():  # what it reports, with units
            assert spec.unit in {"B/s", "B", "s", "count", "ratio"} and spec.description
    assert param_unit(KvTransferParams, "block") == "B"
    assert param_unit(KvTransferParams, "rate") == "1/s"
    assert "setup_time" in [m.name for m in WORKLOADS["allreduce"].metrics()]


def test_parameters_take_units_and_refuse_bare_times_in_files() -> None:
    p = KvTransferParams.model_validate({"buffer": "2GiB", "block": "256MiB"}, context=STRICT_UNITS)
    assert (p.buffer, p.block) == (2 * GiB, 256 * MiB)
    with pytest.raises(ValidationError, match="block <= buffer"):
        KvTransferParams.model_validate({"buffer": "1GiB", "block": "2GiB"})
    with pytest.raises(ValidationError, match="time like"):
        WORKLOADS["pressure"].params.model_validate({"hold": 1}, context=STRICT_UNITS)
    with pytest.raises(ValidationError):
        AllreduceParams.model_validate({"nope": 1})


# -- registration, P2P, staging --------------------------------------------------------------------


def test_dmabuf_registration_cost_grows_with_what_is_registered() -> None:
    """§6.2, EFA (the driver declares reg.efa): fixed + per_own_byte × length +
    per_registered × bytes already registered on the NIC by this process; the pin-hog's third
    256 MiB buffer lands when the sum says (an admin command per MR, Mooncake PR #3210)."""
    chunk = 256 * MiB
    sim = Simulation(PRESETS["dl1"](efa_behind_switch=True), "5.16", seed=1, sample_interval=0.1)
    start(
        sim, "hog", "pin-hog", device="gaudi0", nic="efa0", chunk=chunk, limit=3 * chunk, retry="0s"
    )
    reg = sim.node().machine.cost.reg.efa
    one = reg.fixed + reg.per_own_byte * chunk
    t3 = 3 * one + reg.per_registered * (chunk + 2 * chunk)
    sim.run(t3 - 0.05)
    assert result(sim, "hog").pinned_bytes == 2 * chunk
    sim.run(t3 + 0.05)
    assert result(sim, "hog").pinned_bytes == 3 * chunk
    assert sim.stale_incidents() == 0


def test_mlx5_registration_is_a_umr_post() -> None:
    """§6.2, mlx5 (reg.mlx5): an mkey-cache hit and a UMR post, fixed + per_page × pages; an
    ODP MR writes no pages up front; nothing grows with what is registered."""
    chunk = 256 * MiB
    sim = workstation()
    start(sim, "hog", "pin-hog", chunk=chunk, limit=3 * chunk, retry="0s")
    sim.run(0.5)
    assert result(sim, "hog").pinned_bytes == 3 * chunk
    ctx = sim.tenants["hog"].ctx
    reg = ctx.cost.reg.mlx5
    assert dmabuf_reg_cost(ctx, "mlx5_0", chunk, odp=True) == pytest.approx(reg.fixed)
    assert dmabuf_reg_cost(ctx, "mlx5_0", chunk, odp=False) == pytest.approx(reg.fixed)
    slow = ctx.cost.with_overrides({"reg.mlx5.per_page": "10ns"}).reg.mlx5
    pages = chunk // 4096
    assert slow.dmabuf(chunk, 0, odp=False) == pytest.approx(reg.fixed + 10e-9 * pages)
    assert slow.dmabuf(chunk, 10 * chunk, odp=False) == slow.dmabuf(chunk, 0, odp=False)
    assert slow.dmabuf(chunk, 0, odp=True) == pytest.approx(reg.fixed)


def test_kv_transfer_runs_at_the_p2p_capacity() -> None:
    """§1 items 2, 3: back-to-back blocks at the NIC's end of the mechanism for one 64 MiB
    message (the P2P capacity: its read window through the AMD root complex, its port), each
    after that end's message latency."""
    sim = workstation()
    start(sim, "kv", "kv-transfer", buffer=512 * MiB, block=64 * MiB, produce=False)
    sim.run(4.0)
    machine = sim.node().machine
    cap = machine.p2p_capacity("gpu0", "mlx5_0", nic_reads=True)
    assert cap is not None
    end = machine.nic_end("mlx5_0", "gpu0", 64 * MiB, write=False)
    n = result(sim, "kv")
    assert n.path_rate == pytest.approx(end.rate)
    assert end.rate == pytest.approx(cap, rel=1e-5)
    stats = sim.tenants["kv"].stats
    per_block = 64 * MiB / end.rate + end.latency
    assert stats.percentile(50) == pytest.approx(per_block, rel=1e-6)
    assert n.staged == 0 and sim.stale_incidents() == 0


def _staging(c: Any, write: bool = False) -> tuple[float, float]:
    """(copy seconds, NIC seconds) of one chunk on dl1's Gaudi 0 and EFA 0 (100 Gbps at MTU
    8192, Ethernet-framed SRD)."""
    chunk = c.stage.chunk
    copy = c.restore_h2d(3) if write else c.evict_d2h(3)
    return c.stage.copy_launch + chunk / copy, chunk / 12.5e9 * (8192 + 82) / 8192


def _staged_kv(cost: dict[str, object] | None = None, **params: Any) -> Simulation:
    """A kv-transfer from Gaudi 0 staged through host memory (a kernel without P2PDMA)."""
    spec = PRESETS["dl1"](efa_behind_switch=True)
    profile = get_profile("5.16", pci_p2pdma=False)
    sim = Simulation(spec, profile, cost_overrides=cost, seed=1, sample_interval=0.1)
    start(sim, "kv", "kv-transfer", process_args={"memlock": 1 << 30}, device="gaudi0", **params)
    sim.run(1.0)
    return sim


def test_without_p2p_the_habanalabs_buffer_is_staged_through_host_memory() -> None:
    """A kernel without CONFIG_PCI_P2PDMA: habanalabs refuses the EFA mapping (-EPERM,
    K-52); the workload bounces through a pinned host buffer (§1 item 5): the chunk pipeline
    of a D2H copy (stage.copy_launch + chunk at evict.d2h.gen3) and the EFA's send from host
    memory, at chunk / the slower stage."""
    sim = _staged_kv(buffer=256 * MiB, block=64 * MiB)
    assert sim.tenants["kv"].proc.stats.denials["-EPERM"] == 1
    n = result(sim, "kv")
    assert n.staged == 1 and n.fallback_staged == 1
    cost = sim.node().machine.cost
    t_copy, t_nic = _staging(cost)
    assert n.path_rate == pytest.approx(cost.stage.chunk / max(t_copy, t_nic), rel=1e-3)


def test_staged_pipeline_follows_the_chunk_algebra() -> None:
    """§1 item 5, the explicit pipeline: T ≈ t_copy + t_nic + (k − 1) · max(t_copy, t_nic) +
    the NIC's message delay once (later chunks overlap it)."""
    sim = _staged_kv(buffer=64 * MiB, block=16 * MiB, produce=False, requests=1)
    machine = sim.node().machine
    c = machine.cost
    chunk = c.stage.chunk
    k = 16 * MiB // chunk
    t_copy, t_nic = _staging(c)
    delay = machine.nic_end("efa0", "host:0", chunk, write=False).latency
    expected = t_copy + t_nic + (k - 1) * max(t_copy, t_nic) + delay
    assert sim.tenants["kv"].stats.latencies[0] == pytest.approx(expected, rel=0.02)


def test_aggregate_staging_is_only_a_fallback() -> None:
    """stage.mode = "aggregate" (the documented fallback, unused by built-in scenarios): one
    flow at stage.pipeline_eff × the slower stage's rate."""
    sim = _staged_kv(
        {"stage.mode": "aggregate"}, buffer=64 * MiB, block=16 * MiB, produce=False, requests=1
    )
    c = sim.node().machine.cost
    _, t_nic = _staging(c)
    eff = c.stage.pipeline_eff * min(c.evict_d2h(3), c.stage.chunk / t_nic)
    assert result(sim, "kv").path_rate == pytest.approx(eff, rel=1e-3)


def test_odp_transfers_fault_after_pressure_and_never_touch_stale_memory() -> None:
    """K-41/K-42: eviction invalidates the whole ODP MR, the next send faults (odp.fault)
    after the move's fence; a pinned MR in the same place takes no fault."""
    results = {}
    for access in ("odp", "pinned"):
        sim = workstation()
        start(sim, "kv", "kv-transfer", buffer=2 * GiB, block=64 * MiB, access=access)
        start(sim, "p", "pressure", at=0.5, burst=15 * GiB, buffer=15 * GiB, period="1s")
        sim.run(3.0)
        results[access] = (sim.tenants["kv"].stats, result(sim, "p"), sim.stale_incidents())
    odp, pressure_odp, stale_odp = results["odp"]
    pinned, pressure_pinned, stale_pinned = results["pinned"]
    assert odp.odp_faults >= 2 and odp.stall_time > 0.01
    assert pressure_odp.alloc_failures == 0
    assert pinned.odp_faults == 0 and pressure_pinned.alloc_failures >= 2
    assert stale_odp == stale_pinned == 0


def test_odp_fault_tail_uses_the_tenant_generator() -> None:
    """§7: with odp.tail_prob = 1 every fault costs odp.fault × odp.tail_multiplier."""
    cost: dict[str, object] = {"odp.tail_prob": 1.0, "odp.tail_multiplier": 10}
    spec = PRESETS["workstation"](resizable_bar=True)
    sim = Simulation(spec, get_profile("6.16", move_notify=True), cost_overrides=cost, seed=1)
    start(sim, "kv", "kv-transfer", buffer=2 * GiB, block=64 * MiB, access="odp", produce=False)
    start(sim, "p", "pressure", at=0.2, burst=15 * GiB, buffer=15 * GiB, bursts=1)
    sim.run(2.0)
    stats = sim.tenants["kv"].stats
    assert stats.odp_faults == 1
    assert max(stats.latencies) > 10 * sim.node().machine.cost.odp.fault


def test_open_loop_requests_follow_the_seed() -> None:
    def run(seed: int) -> list[float]:
        spec = PRESETS["workstation"](resizable_bar=True)
        sim = Simulation(spec, get_profile("6.16", move_notify=True), seed=seed)
        start(sim, "kv", "kv-transfer", buffer=GiB, block=64 * MiB, rate=100.0)
        sim.run(9.0)
        return sim.tenants["kv"].stats.latencies

    a, b, c = run(1), run(1), run(2)
    assert a == b and a != c
    assert len(a) > 50 and max(a) > min(a)  # queueing: latencies vary with the arrivals


# -- the desktop workloads -------------------------------------------------------------------------


def test_compositor_scans_out_every_frame_and_reallocates() -> None:
    sim = workstation()
    start(sim, "comp", "compositor", fps=60, realloc_every="250ms")
    sim.run(1.0)
    n = result(sim, "comp")
    assert n.frames == pytest.approx(60, abs=1)
    assert n.missed_frames == 0 and n.framebuffers >= 4
    detector = sim.node().machine.system.detector
    assert detector.accesses >= 60 and sim.stale_incidents() == 0


def test_compositor_counts_enomem_and_missed_frames_when_vram_is_pinned_full() -> None:
    sim = workstation(vram=2 * GiB)
    start(sim, "hog", "pin-hog", chunk=GiB, min_chunk=64 * MiB, retry="0s")
    start(sim, "comp", "compositor", at=20.0, fps=60, realloc_every="100ms")
    sim.run(21.0)
    n = result(sim, "comp")
    assert result(sim, "hog").pinned_bytes == 2 * GiB
    assert n.missed_frames == n.frames > 50
    assert sim.tenants["comp"].proc.stats.denials["-ENOMEM"] == n.alloc_failures > 0
    assert sim.stale_incidents() == 0


def test_app_is_evicted_by_pressure_and_moves_back() -> None:
    sim = workstation(vram=4 * GiB)
    start(sim, "app", "app", working_set=2 * GiB, touch=1.0, period="100ms")
    start(sim, "p", "pressure", at=0.5, burst=3 * GiB, buffer=GiB, hold="100ms")
    sim.run(3.0)
    vram = sim.node().machine.exporters["gpu0"].bdev.managers  # type: ignore[attr-defined]
    evictions = sum(m.evictions for m in vram.values())
    stats = sim.tenants["app"].stats
    assert evictions > 0 and stats.stall_time > 0
    assert max(stats.latencies) > 5 * min(stats.latencies)  # touching over PCIe is slower
    assert sim.stale_incidents() == 0


# -- allreduce -------------------------------------------------------------------------------------


def test_allreduce_ring_across_nodes_and_a_member_dying() -> None:
    """One ring over two nodes' ranks; killing one tenant shrinks the ring, nobody hangs."""
    spec = PRESETS["cluster"](nodes=2)
    sim = Simulation(spec, "6.16", seed=1, sample_interval=0.5)
    params: dict[str, Any] = {
        "buffer": 256 * MiB,
        "size": 64 * MiB,
        "process_args": {"memlock": 1 << 40},
    }
    start(sim, "a", "allreduce", node="node0", **params)
    start(sim, "b", "allreduce", node="node1", **params)
    t_setup = 8.0
    sim.run(t_setup)
    assert result(sim, "a").world_ranks == 16
    it = result(sim, "a").iterations
    assert it == result(sim, "b").iterations > 0
    inject(sim, t_setup + 0.01, "kill", "b")
    sim.run(t_setup + 1.0)
    assert not sim.tenants["b"].proc.alive
    assert result(sim, "a").iterations > it + 5  # the ring goes on with node0's 8 ranks
    assert sim.stale_incidents() == 0


def test_allreduce_models_agree_for_symmetric_ranks() -> None:
    """'aggregate' is the α–β form of 'steps' (§1 item 2): same bytes, same time ± α terms."""
    times = {}
    for model in ("steps", "aggregate"):
        sim = Simulation(PRESETS["dl1"](efa_behind_switch=True), "5.16", seed=1)
        start(
            sim,
            "t",
            "allreduce",
            buffer=256 * MiB,
            size=128 * MiB,
            iterations=2,
            model=model,
            compute=False,
        )
        sim.run(10.0)
        n = result(sim, "t")
        times[model] = (n.data_end - n.data_start, sim.tenants["t"].stats.bytes)
    assert times["steps"][1] == pytest.approx(times["aggregate"][1], rel=1e-6)
    assert times["steps"][0] == pytest.approx(times["aggregate"][0], rel=0.01)


def test_nearest_nic_pairs_dl1_gaudis_with_their_efa() -> None:
    sim = Simulation(PRESETS["dl1"](), "5.16", seed=1)
    machine = sim.node().machine
    assert [nearest_nic(machine, f"gaudi{i}") for i in range(8)] == [
        "efa0",
        "efa0",
        "efa1",
        "efa1",
        "efa2",
        "efa2",
        "efa3",
        "efa3",
    ]


def test_collective_barrier_waits_for_every_member() -> None:
    env = simpy.Environment()
    coll = Collective(env, Simulation(PRESETS["workstation"](), "6.16").net, "g")
    coll.join("a")
    coll.join("b")
    ev = coll.barrier("a")
    assert not ev.triggered
    coll.leave("b")
    assert ev.triggered


class _Rank:
    def __init__(self, owner: str) -> None:
        self.owner = owner


def _member(
    env: simpy.Environment, coll: Collective[_Rank], name: str, log: list[tuple[float, str]]
) -> Generator[simpy.Event, Any, None]:
    """Joins, waits at the first barrier, logs it, and stays in the group."""
    coll.join(name)
    coll.add_ranks(name, [_Rank(name)])
    yield coll.barrier(name)
    log.append((env.now, name))


def test_a_group_without_a_world_forms_when_its_first_instant_ends() -> None:
    """Tenants that join and wait in the same instant form one group, whichever process runs
    first (nccl's workload joins and waits at once: the first tenant went through alone and
    the second hung); one joining later is not a member and its ranks stay out of the ring."""
    env = simpy.Environment()
    coll: Collective[_Rank] = Collective(env, FlowNetwork(env), "g")
    log: list[tuple[float, str]] = []
    env.process(_member(env, coll, "a", log))
    env.process(_member(env, coll, "b", log))
    env.run(1.0)
    assert log == [(0.0, "a"), (0.0, "b")] and coll.formed
    env.process(_member(env, coll, "c", log))
    env.run(2.0)
    assert list(coll.members) == ["a", "b"] and list(coll.joining) == ["c"]
    assert [r.owner for r in coll.ranks] == ["a", "b"]  # c waits to be admitted
    coll.leave("a")
    coll.leave("b")  # nobody left: c is admitted
    env.run(3.0)
    assert log[-1] == (2.0, "c") and list(coll.members) == ["c"]


def test_a_tenant_joining_a_running_group_is_admitted_when_an_iteration_ends() -> None:
    """A joiner waits at its first barrier while the members step -- the steps do not wait for
    it, and its barrier completes no step -- and enters the ring after the step submitted with
    ``last`` (the end of an iteration): a late allreduce tenant stopped both before."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    link = net.add_link("l", 1.0)
    coll: Collective[_Rank] = Collective(env, net, "g")
    log: list[tuple[float, str]] = []
    steps: list[tuple[float, str, int]] = []

    def iterate(name: str) -> Generator[simpy.Event, Any, None]:
        yield from _member(env, coll, name, log)
        for k in range(6):
            n = len(coll.ranks)
            yield coll.submit(name, [(1.0, [link], None, name)], 0.0, last=k % 2 == 1)
            steps.append((env.now, name, n))
        coll.leave(name)

    env.process(iterate("a"))
    env.process(iterate("b"))
    env.run(0.5)
    env.process(iterate("c"))  # joins at 0.5, mid-way through the first iteration's first step
    env.run(100.0)
    assert log == [(0.0, "a"), (0.0, "b"), (4.0, "c")]  # 2 steps of 2 s: an iteration
    assert [s for s in steps if s[1] == "a"] == [(2.0, "a", 2), (4.0, "a", 2), (7.0, "a", 3),
        (10.0, "a", 3), (13.0, "a", 3), (16.0, "a", 3)]  # fmt: skip
    assert [s for s in steps if s[1] == "c"] == [
        (7.0, "c", 3),
        (10.0, "c", 3),
        (13.0, "c", 3),
        (16.0, "c", 3),
        (17.0, "c", 3),
        (18.0, "c", 1),
    ]  # then alone: a and b left at 16 s


def test_a_world_holds_only_the_first_barrier() -> None:
    """``world`` waits for that many tenants before the group forms; a member leaving later
    does not stop the others' barriers."""
    env = simpy.Environment()
    coll: Collective[_Rank] = Collective(env, FlowNetwork(env), "g", world=2)
    log: list[tuple[float, str]] = []
    env.process(_member(env, coll, "a", log))
    env.run(1.0)
    assert log == []
    env.process(_member(env, coll, "b", log))
    env.run(2.0)
    assert [n for _, n in log] == ["a", "b"]
    coll.leave("b")
    again = coll.barrier("a")
    assert again.triggered  # one member of a formed world-2 group


def test_late_and_same_instant_collective_tenants_across_nodes_all_move_data() -> None:
    """On two nodes: an allreduce tenant starting 2 s after the other joins the ring at an
    iteration's end and both keep iterating; nccl with the default world forms one
    communicator of both nodes' ranks."""
    sim = Simulation(PRESETS["cluster"](nodes=2), "6.16", seed=1, sample_interval=0.5)
    params: dict[str, Any] = {"buffer": 256 * MiB, "size": 64 * MiB}
    start(sim, "a", "allreduce", node="node0", **params)
    start(sim, "b", "allreduce", node="node1", at=2.0, **params)
    sim.run(5.0)
    a, b = result(sim, "a"), result(sim, "b")
    assert (a.world_ranks, b.world_ranks) == (8, 16)  # the ring at each one's first barrier
    assert b.iterations > 10 and a.iterations > b.iterations
    a_bytes = sim.recorder.series["tenant.a.bytes"].points
    assert a_bytes[-1][0] > 4.5  # a still moved data near the end (it stopped at 3.08 s)

    sim = Simulation(PRESETS["cluster"](nodes=2), "6.16", seed=1, sample_interval=0.5)
    for node in ("node0", "node1"):
        start(sim, f"t{node}", "nccl", node=node, minbytes=MiB, maxbytes=MiB, iters=1)
    sim.run(5.0)
    for node in ("node0", "node1"):
        r = result(sim, f"t{node}")
        assert r.world_ranks == 16 and r.rows and sim.tenants[f"t{node}"].stats.bytes > 0


# -- faults and custom workloads -------------------------------------------------------------------


def test_nic_reset_drops_every_mr_and_the_workload_registers_again() -> None:
    sim = workstation()
    start(sim, "kv", "kv-transfer", buffer=GiB, block=64 * MiB)
    inject(sim, 5.0, "nic-reset", "mlx5_0")
    sim.run(12.0)
    n = result(sim, "kv")
    assert n.reregistrations == 1
    assert [(f.kind, f.mrs_dropped) for f in sim.recorder.faults] == [("nic-reset", 1)]
    assert sim.tenants["kv"].proc.stats.denials["-EINVAL"] == 1
    assert sim.tenants["kv"].error is None and sim.stale_incidents() == 0


def test_hot_unplug_kills_the_users_of_a_device() -> None:
    sim = workstation()
    start(sim, "comp", "compositor")
    start(sim, "kv", "kv-transfer", buffer=GiB, block=64 * MiB)
    inject(sim, 1.0, "hot-unplug", "mlx5_0")
    sim.run(2.0)
    assert not sim.tenants["kv"].proc.alive
    assert sim.tenants["comp"].proc.alive
    system = sim.node().machine.system
    with pytest.raises(KernelError, match="ENODEV"):
        system.nic("mlx5_0")
    gpu = system.exporters["gpu0"]
    assert all(r.pinned == 0 for r in gpu.regions() if r.name == "vram")  # its pin is gone


def test_kill_releases_the_hogs_pins() -> None:
    sim = workstation(vram=2 * GiB)
    start(sim, "hog", "pin-hog", chunk=GiB, retry="0s")
    inject(sim, 20.0, "kill", "hog")
    sim.run(19.0)
    vram = next(r for r in sim.node().machine.exporters["gpu0"].regions() if r.name == "vram")
    assert vram.pinned == 2 * GiB
    sim.run(21.0)
    vram = next(r for r in sim.node().machine.exporters["gpu0"].regions() if r.name == "vram")
    assert vram.pinned == 0 and vram.used == 0


def test_a_kill_before_the_start_ends_the_tenant_before_its_workload_runs() -> None:
    """A process killed while it waits for its ``start`` never runs its workload: the run goes
    on (before, the interrupt escaped the start's wait and ended the run with a traceback),
    the tenant is reported killed, with no data phase and nothing pinned."""
    sim = workstation(vram=2 * GiB)
    start(sim, "comp", "compositor")
    hog = start(sim, "hog", "pin-hog", chunk=GiB, retry="0s", at=2.0)
    inject(sim, 1.0, "kill", "hog")
    sim.run(5.0)
    assert not hog.proc.alive and hog.stats.started is None and hog.error is None
    report = hog.report(5.0)
    assert report["tenant.hog.killed"].value == 1 and report["tenant.hog.bytes"].value == 0
    vram = next(r for r in sim.node().machine.exporters["gpu0"].regions() if r.name == "vram")
    assert vram.pinned == 0
    assert sim.tenants["comp"].proc.alive


@dataclass(slots=True)
class CustomResult(TenantResult):
    elapsed: float | None = metric("s", "one send of 64 MiB")


def custom(ctx: Ctx, r: CustomResult) -> Generator[simpy.Event, Any, None]:
    """A custom workload built from the public helpers."""
    handle = yield from ctx.call(ctx.proc.gem_create, "gpu0", 256 * MiB)
    fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
    mr, _cost = yield from register_dmabuf(ctx, "mlx5_0", fd, 256 * MiB)
    access = yield from nic_access(ctx, mr, 64 * MiB)
    side = nic_side(
        ctx,
        ctx.node.name,
        ctx.machine,
        "gpu0",
        "mlx5_0",
        p2p=access.p2p,
        write=False,
        nbytes=64 * MiB,
    )
    r.elapsed = yield from send(ctx, side, 64 * MiB)


def test_custom_workloads_use_the_same_helpers_and_report_their_own_metrics() -> None:
    sim = workstation()
    r = CustomResult()
    tenant = sim.spawn("c", partial(custom, r=r), result=r)
    sim.run(5.0)
    machine = sim.node().machine
    end = machine.nic_end("mlx5_0", "gpu0", 64 * MiB, write=False)
    assert r.elapsed == pytest.approx(64 * MiB / end.rate + end.latency)
    reported = tenant.report(5.0)["tenant.c.elapsed"]
    assert reported.unit == "s" and reported.value == pytest.approx(r.elapsed)


def test_transfer_many_gives_the_rates_of_one_by_one_starts() -> None:
    """The batch start the collectives use (FlowNetwork.transfer_many) is only an
    optimisation: the same completion times as starting the flows one by one."""

    def run(batch: bool) -> list[float]:
        sim = Simulation(PRESETS["dl1"](), "5.16", seed=1)
        net = sim.net
        links = [sim.links("node", sim.node().machine.path(f"gaudi{i}", "efa0")) for i in (0, 1)]
        specs = [(float(GiB), ls, None, f"f{i}") for i, ls in enumerate(links)]
        if batch:
            events = net.transfer_many(specs)
        else:
            events = [net.transfer(n, ls, cap=c, label=lbl) for n, ls, c, lbl in specs]
        done: list[float] = []
        for ev in events:
            ev.callbacks.append(lambda _e: done.append(float(sim.env.now)))
        sim.env.run(until=10)
        return done

    assert run(True) == pytest.approx(run(False))


def test_hot_unplug_of_the_gpu_ends_its_users_and_frees_its_memory() -> None:
    sim = workstation()
    start(sim, "comp", "compositor")
    start(sim, "app", "app", working_set=GiB)
    inject(sim, 1.0, "hot-unplug", "gpu0")
    sim.run(1.5)
    assert not sim.tenants["comp"].proc.alive and not sim.tenants["app"].proc.alive
    assert sim.recorder.series["device.node/gpu0.vram.used"].last == 0
    with pytest.raises(KernelError, match="ENODEV"):
        sim.node().machine.system.exporter("gpu0")
    assert sim.stale_incidents() == 0


def test_cross_node_ring_steps_cross_the_fabric_core() -> None:
    spec = PRESETS["cluster"](nodes=2, core_bandwidth="50GB/s")
    sim = Simulation(spec, "6.16", seed=1, sample_interval=0.5)
    params: dict[str, Any] = {"buffer": 256 * MiB, "size": 64 * MiB, "iterations": 1}
    start(sim, "a", "allreduce", node="node0", **params)
    start(sim, "b", "allreduce", node="node1", **params)
    sim.run(8.0)
    assert result(sim, "a").iterations == result(sim, "b").iterations == 1
    assert sim.net.links["fabric:core/xfer"].bytes_carried > 0
    assert sim.links("node0", [LinkUse("fabric:core", "xfer")])[0].name == "fabric:core/xfer"


def test_an_efa_without_rdma_write_registers_what_it_reports() -> None:
    """p4d's first-generation EFAs have RDMA read, not write: ``ibv_query_device`` reports
    local write and remote read, so the kv-transfer's dma-buf MR asks for those (as UCX's and
    libfabric's EFA registrations do) and the A100's memory is read in place, pinned in
    VRAM (K-45); an MR that asks for remote write is refused with ``-EOPNOTSUPP``."""
    from pinlab.kernel.umem import (
        IB_ACCESS_LOCAL_WRITE,
        IB_ACCESS_REMOTE_READ,
        IB_ACCESS_REMOTE_WRITE,
    )

    sim = Simulation(PRESETS["p4d"](), get_profile("6.16"), seed=1, sample_interval=0.1)
    start(sim, "kv", "kv-transfer", device="gpu0", nic="efa0", buffer=256 * MiB, block=64 * MiB)
    sim.run(2.0)  # registration of 256 MiB on an EFA takes about 1 s (reg.efa.*)
    proc = sim.tenants["kv"].proc
    assert proc.ibv_query_device("efa0") == IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ
    n = result(sim, "kv")
    assert n.staged == 0 and not n.fallback_staged and not proc.stats.denials
    gpu = sim.node().machine.exporters["gpu0"]
    assert next(r for r in gpu.regions() if r.name == "vram").pinned >= 256 * MiB
    fd = proc.prime_handle_to_fd(proc.gem_create("gpu0", 2 * MiB, "vram"))
    with pytest.raises(KernelError) as e:
        proc.ibv_reg_dmabuf_mr(
            "efa0", fd, 0, 2 * MiB, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE
        )
    assert e.value.errno.name == "EOPNOTSUPP"
