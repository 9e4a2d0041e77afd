"""``p2p``: cuda-samples' ``p2pBandwidthLatencyTest`` as a workload -- GPU-to-GPU bandwidth and
latency matrices with peer access disabled (the driver stages through host memory) and enabled
(NVLink or PCIe peer writes; with ``p2p_read`` also peer reads) (``docs/cost-model/gpu.md``
§G2; the tool: ``tools-and-mechanisms.md`` A3).

As the sample measures them: a bandwidth cell is ``repeat`` (5) copies of ``elements`` × 4 bytes
(160 MB) from GPU *i* to GPU *j* on *i*'s stream, GB/s = bytes / time; the diagonal is a copy
inside the GPU counted twice (read and write); a bidirectional cell runs *i*→*j* and *j*→*i*
at once and counts both. A latency cell is 100 copies of 16 bytes: the GPU matrix is the
GPU's time per copy, the CPU matrix the host's time to enqueue one. Without peer access a
pair's "P2P=Enabled" cells are staged too, as the sample falls back to a normal copy.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Literal

import simpy

from pinlab.sim.engine import Ctx
from pinlab.sim.metrics import TenantResult, metric
from pinlab.sim.workloads.base import Gen, WorkloadParams, idle, param
from pinlab.sim.workloads.gpu_copy import (
    CopyFlow,
    copy_flow,
    jittered,
    peer_access,
    run_copy,
    shared_caps,
)

__all__ = ["P2pMatrices", "P2pParams", "P2pResult", "p2p"]

MatrixName = Literal[
    "uni_disabled",
    "uni_writes",
    "uni_reads",
    "bidir_disabled",
    "bidir_enabled",
    "lat_disabled_gpu",
    "lat_disabled_cpu",
    "lat_writes_gpu",
    "lat_writes_cpu",
    "lat_reads_gpu",
    "lat_reads_cpu",
]


class P2pParams(WorkloadParams):
    """``p2p``: p2pBandwidthLatencyTest over the node's GPUs."""

    workload: Literal["p2p"] = "p2p"

    devices: list[str] | Literal["all"] = param("all", "the GPUs, in CUDA device order")
    elements: int = param(40_000_000, "ints per bandwidth copy (--numElems)", ge=1)
    repeat: int = param(5, "copies per bandwidth cell", ge=1, le=1000)
    latency_repeat: int = param(100, "16-byte copies per latency cell", ge=1, le=100000)
    p2p_read: bool = param(False, "also measure peer reads (--p2p_read)")
    sm_copy: bool = param(False, "copy kernels instead of copy engines (--sm_copy)")


P2pMatrices = dict[str, dict[tuple[int, int], float]]
"""Matrix name (:data:`MatrixName`) → cells: bandwidths in bytes/s, latencies in seconds."""


@dataclass(slots=True)
class P2pResult(TenantResult):
    """What ``p2p`` measured: its matrices (not metrics) and two headline numbers."""

    p2p_bandwidth_min: float | None = metric(
        "B/s", "slowest off-diagonal cell of the unidirectional P2P=Enabled matrix"
    )
    staged_bandwidth_min: float | None = metric(
        "B/s", "slowest off-diagonal cell of the unidirectional P2P=Disabled matrix"
    )
    matrices: P2pMatrices = field(default_factory=dict)
    access: dict[tuple[int, int], bool] = field(default_factory=dict)
    device_names: list[str] = field(default_factory=list)


def p2p(ctx: Ctx, p: P2pParams, r: P2pResult) -> Gen:
    """Every matrix of the sample over ``p.devices`` (module docstring)."""
    machine = ctx.machine
    devs = [d.name for d in machine.spec.devices] if p.devices == "all" else list(p.devices)
    for dev in devs:
        machine.spec.device(dev)
    n = len(devs)
    r.device_names = [machine.spec.device(d).model or d for d in devs]
    r.access = {(i, j): peer_access(machine, devs[i], devs[j]) for i in range(n) for j in range(n)}
    engine = "sm" if p.sm_copy else "ce"
    size = p.elements * 4
    r.data_start = ctx.now
    mats: P2pMatrices = {}
    modes: list[tuple[str, bool, bool]] = [("disabled", False, False), ("writes", True, False)]
    if p.p2p_read:
        modes.append(("reads", True, True))
    for label, enabled, reads in modes:
        uni = mats.setdefault(f"uni_{label}", {})
        for i in range(n):
            for j in range(n):
                fl = _flow(ctx, devs, i, j, enabled and r.access[(i, j)], reads, engine)
                uni[(i, j)] = yield from _bandwidth(ctx, [fl], size, p.repeat, diagonal=i == j)
    for label, enabled in (("disabled", False), ("enabled", True)):
        bidir = mats.setdefault(f"bidir_{label}", {})
        for i in range(n):
            for j in range(n):
                on = enabled and r.access[(i, j)]
                there = _flow(ctx, devs, i, j, on, False, engine)
                back = _flow(ctx, devs, j, i, on, False, engine)
                flows = [there, there] if i == j else [there, back]
                bidir[(i, j)] = yield from _bandwidth(ctx, flows, size, p.repeat, diagonal=i == j)
    for label, enabled, reads in modes:
        gpu = mats.setdefault(f"lat_{label}_gpu", {})
        cpu = mats.setdefault(f"lat_{label}_cpu", {})
        for i in range(n):
            for j in range(n):
                fl = _flow(ctx, devs, i, j, enabled and r.access[(i, j)], reads, engine)
                g, c = yield from _latency(ctx, fl, p.latency_repeat)
                gpu[(i, j)], cpu[(i, j)] = g, c
    r.matrices = mats
    r.data_end = ctx.now
    off = [(i, j) for i in range(n) for j in range(n) if i != j]
    if off:
        r.p2p_bandwidth_min = min(mats["uni_writes"][k] for k in off)
        r.staged_bandwidth_min = min(mats["uni_disabled"][k] for k in off)
    yield from idle(ctx)


def _flow(
    ctx: Ctx, devs: list[str], i: int, j: int, enabled: bool, reads: bool, engine: str
) -> CopyFlow:
    """Cell (``i``, ``j``): a copy inside the GPU on the diagonal; else GPU ``i`` writing into
    GPU ``j`` (with ``reads``: ``i`` reading ``j``'s memory) when enabled, staged by the driver
    otherwise."""
    src, dst = (devs[j], devs[i]) if reads else (devs[i], devs[j])
    initiator = devs[i]
    return copy_flow(
        ctx.machine,
        src,
        dst,
        initiator=initiator,
        engine="sm" if engine == "sm" else "ce",
        p2p=enabled or i == j,
    )


def _bandwidth(ctx: Ctx, flows: list[CopyFlow], size: int, repeat: int, *, diagonal: bool) -> Gen:
    """``repeat`` copies of ``size`` bytes on each flow at once: bytes / time, every copy's
    bytes counted, twice on the diagonal (the sample counts a copy inside a GPU's read and
    write)."""
    spread = ctx.cost.gpucopy.jitter
    caps = shared_caps(ctx.machine, flows)
    flows = [dataclasses.replace(fl, cap=cap) for fl, cap in zip(flows, caps, strict=True)]
    t0 = ctx.now
    events = []
    for fl in flows:
        delay = sum(jittered(ctx, spread, fl.latency) for _ in range(repeat))
        events.append(ctx.env.process(run_copy(ctx, fl, size * repeat, delay)))
    yield simpy.AllOf(ctx.env, events)
    counted = size * repeat * len(flows) * (2 if diagonal else 1)
    return counted / (ctx.now - t0)


def _latency(ctx: Ctx, fl: CopyFlow, repeat: int) -> Gen:
    """``repeat`` 16-byte copies: the GPU's time per copy (the flow's small-copy latency and the
    path's own latency) and the CPU's time to enqueue one (``gpucopy.enqueue_cpu``, or
    ``gpucopy.staged_enqueue_cpu`` for a copy the driver stages); both jittered."""
    cost = ctx.cost
    spread = cost.gpucopy.jitter
    path = ctx.machine.latency(fl.uses)
    enqueue = cost.gpucopy.staged_enqueue_cpu if fl.via == "staged" else cost.gpucopy.enqueue_cpu
    gpu = [jittered(ctx, spread, fl.latency + path) for _ in range(repeat)]
    cpu = [jittered(ctx, spread, enqueue) for _ in range(repeat)]
    yield ctx.sleep(sum(gpu))
    return statistics.fmean(gpu), statistics.fmean(cpu)
