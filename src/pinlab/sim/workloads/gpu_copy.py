"""How a GPU copy travels: over NVLink, over PCIe peer-to-peer (posted writes or reads with a
bounded window), staged through host memory by the driver, or inside the device
(``docs/cost-model/gpu.md`` §G1, §G2). Shared by the GPU tools' workloads (``nvbandwidth``,
``p2p``, ``nccl``).

:func:`copy_flow` answers, for a copy from ``src`` to ``dst`` (a device or ``host:<s>``) run by
the engine of ``initiator``: the links the bytes cross, the rate cap the mechanism puts on them
(NVLink payload efficiency, the PCIe read window, the staging pipeline) and what a small copy
costs the GPU. The flow network shares the links between concurrent copies; nothing here is a
ratio fitted to a result.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from pinlab.platform import pcie_model
from pinlab.platform.gpu_model import CopyEngine, nvlink_rate, read_window, staged_rate
from pinlab.platform.pcie_model import PcieLink
from pinlab.platform.topology import LinkUse, Machine
from pinlab.sim.copy_engine import local_rate
from pinlab.sim.engine import Ctx
from pinlab.sim.workloads.base import Gen

__all__ = [
    "CopyFlow",
    "Via",
    "copy_flow",
    "cpu_bar_write_rate",
    "jittered",
    "pcie_read_rate",
    "pcie_write_rate",
    "peer_access",
    "run_copy",
    "shared_caps",
]

Via = Literal["local", "nvlink", "pcie", "staged"]
"""How a copy's bytes travel."""


Stream = Literal["write_up", "write_down", "read_up", "read_down"]
"""What a copy is on one PCIe link (:class:`pinlab.platform.pcie_model.LinkDemand`): posted
writes going up or down, or reads whose data goes up or down (their requests the other way)."""


@dataclass(frozen=True, slots=True)
class CopyFlow:
    """One copy's flow: the links crossed in order, the mechanism's rate cap (bytes/s), the
    GPU time of a small copy (``latency``: ``gpucopy.launch_gpu``, plus the staging handoff and
    a second launch when staged), how it travels, and what it is on each PCIe link it crosses
    (``(link, stream, MRRS)``, for :func:`shared_caps`). ``memory``: the device whose memory
    a copy inside it reads and writes when the platform has no ``mem:<d>`` link for it (its
    spec gives no memory bandwidth), so that :func:`shared_caps` splits the assumed rate
    between the copies that run there at once, as a link would."""

    uses: tuple[LinkUse, ...]
    cap: float
    latency: float
    via: Via
    pcie: tuple[tuple[PcieLink, Stream, int], ...] = ()
    memory: str | None = None


def _is_host(name: str) -> bool:
    return name.startswith("host:")


def peer_access(machine: Machine, a: str, b: str) -> bool:
    """Whether GPU ``a`` can map GPU ``b``'s memory (``cudaDeviceCanAccessPeer``): an NVLink
    between them, or a PCIe path the kernel's P2PDMA rules allow (CPU vendor, host-bridge
    whitelist; ``Machine.p2p_path_class``)."""
    if a == b:
        return True
    if machine.nvlink_path(a, b) is not None:
        return True
    return machine.p2p_path_class(a, b) is not None


def copy_flow(
    machine: Machine,
    src: str,
    dst: str,
    *,
    initiator: str,
    engine: CopyEngine = "ce",
    p2p: bool = True,
) -> CopyFlow:
    """The flow of a copy from ``src`` to ``dst`` (device names or ``host:<s>``) run by
    ``initiator``'s copy engine or copy kernel (``engine``):

    * ``src == dst``: the device reads and writes its own memory (``mem:<d>`` twice; a device
      whose spec gives no memory bandwidth has no such link, and the copy gets half of
      :func:`~pinlab.sim.copy_engine.local_rate`'s assumed on-device rate, as the link would
      give, shared with the copies inside that device that run at once: ``memory``);
    * two GPUs in one NVLink domain: ``Machine.nvlink_path``, capped at the NVLink data rate
      for ``engine``'s payloads (:func:`~pinlab.platform.gpu_model.nvlink_rate`);
    * otherwise PCIe (``Machine.path``): a write by the source's engine is posted (the PCIe
      model's write rate on the path); a read by the destination's engine is bounded by its
      read window over the read latency (:func:`~pinlab.platform.gpu_model.read_window`);
    * two GPUs without P2P (``p2p`` false, or P2PDMA refuses the pair): the driver stages
      through pinned memory on the source's socket, both halves at once
      (:func:`~pinlab.platform.gpu_model.staged_rate`).
    """
    cost = machine.cost
    launch = cost.gpucopy.launch_gpu
    if src == dst:
        mem = machine.path(src, dst)
        if not mem:  # no mem:<d> link: the assumed rate, each byte read and written there
            return CopyFlow((), local_rate(machine, src) / 2, launch, "local", memory=src)
        return CopyFlow((*mem, *mem), math.inf, launch, "local")
    if not _is_host(src) and not _is_host(dst):
        if not p2p:
            return _staged(machine, src, dst)
        nv = machine.nvlink_path(src, dst)
        if nv is not None:
            dom = machine.nvlink_domain(src)
            assert dom is not None
            links = dom.links if dom.links is not None else None
            cap = nvlink_rate(cost, dom.gen, links, engine=engine)
            return CopyFlow(tuple(nv), cap, launch, "nvlink")
        if machine.p2p_path_class(src, dst) is None:
            return _staged(machine, src, dst)
    uses = tuple(machine.path(src, dst))
    if initiator == dst:
        path = machine.pcie_path(initiator, src)
        cap = pcie_read_rate(machine, initiator, src, read_window(cost, engine))
        roles = tuple((link, _stream("read", link.reverse), path.mrrs) for link in path.links)
    else:
        path = machine.pcie_path(initiator, dst)
        cap = pcie_write_rate(machine, initiator, dst)
        roles = tuple((link, _stream("write", link.direction), path.mrrs) for link in path.links)
    if cap <= 0 and not _is_host(src) and not _is_host(dst):
        return _staged(machine, src, dst)  # the host bridge forwards no such P2P requests
    return CopyFlow(uses, cap, launch, "pcie", roles)


def _stream(kind: str, direction: str) -> Stream:
    return (
        "write_up"
        if (kind, direction) == ("write", "up")
        else (
            "write_down" if kind == "write" else ("read_up" if direction == "up" else "read_down")
        )
    )


def pcie_write_rate(machine: Machine, initiator: str, target: str) -> float:
    """Posted writes from ``initiator`` into ``target``'s memory (``host:<s>`` or a device's
    BAR), bytes/s: the PCIe model's write rate on the path (0 when a host bridge forwards no
    P2P writes)."""
    return pcie_model.path_write_rate(machine.cost, machine.pcie_path(initiator, target))


def pcie_read_rate(machine: Machine, initiator: str, target: str, window: int) -> float:
    """Reads of ``target``'s memory by ``initiator`` with ``window`` bytes outstanding,
    bytes/s: the PCIe model's read rate (window / read latency, the completions' link rate,
    host-bridge limits) with the window as ``window / MRRS`` requests."""
    path = machine.pcie_path(initiator, target)
    tags = max(1, window // path.mrrs)
    return pcie_model.read_rate(machine.cost, path, tags)


def cpu_bar_write_rate(machine: Machine, device: str) -> float:
    """How fast the path from the CPU to ``device``'s BAR carries the CPU's write-combined
    stores: posted writes of ``cpu.wc_flush`` bytes on every link (its link-level efficiency at
    its MPS × 64 / (64 + TLP overhead)), the slowest link (Gen3 x16: 10.3 GB/s)."""
    cost = machine.cost
    path = machine.pcie_path(device, machine.host_of(device))
    rate = math.inf
    for link in path.links:
        rate = min(
            rate,
            cost.raw_rate(link.gen, link.width)
            * pcie_model.link_efficiency(cost, link.width, link.mps)
            * pcie_model.write_efficiency(cost, cost.cpu.wc_flush),
        )
    return rate


def shared_caps(machine: Machine, flows: list[CopyFlow]) -> list[float]:
    """The caps of copies that run at once, each cut to what it gets where it shares a PCIe
    link with a copy in the other direction: reads' requests travel against their data and
    writes' ACKs against theirs, so a read stream and a write stream on one link take from
    both directions (:func:`pinlab.platform.pcie_model.share_link`, max-min by payload). A
    copy's demand is its own cap (or the link's rate); streams of one kind share their
    allotment in proportion to their demands. Copies inside one device without a memory link
    (``CopyFlow.memory``) split its rate evenly."""
    cost = machine.cost
    demand: dict[str, dict[Stream, float]] = {}
    links: dict[str, tuple[PcieLink, int]] = {}
    for fl in flows:
        for link, stream, mrrs in fl.pcie:
            full = cost.pcie_rate(link.gen, link.width, link.direction, link.mps)
            want = min(fl.cap, full)
            per = demand.setdefault(link.name, {})
            per[stream] = per.get(stream, 0.0) + want
            links[link.name] = (link, mrrs)
    factor: dict[tuple[str, Stream], float] = {}
    for name, per in demand.items():
        if len(per) < 2:
            continue
        link, mrrs = links[name]
        got = pcie_model.share_link(
            cost, link.gen, link.width, link.mps, mrrs, pcie_model.LinkDemand(**per)
        )
        for stream, want in per.items():
            factor[(name, stream)] = min(1.0, getattr(got, stream) / want) if want > 0 else 1.0
    inside = Counter(fl.memory for fl in flows if fl.memory is not None)
    out = []
    for fl in flows:
        cap = fl.cap
        for link, stream, _ in fl.pcie:
            f = factor.get((link.name, stream), 1.0)
            if f < 1.0:
                full = cost.pcie_rate(link.gen, link.width, link.direction, link.mps)
                cap = min(cap, min(fl.cap, full) * f)
        if fl.memory is not None:
            cap /= inside[fl.memory]
        out.append(cap)
    return out


def _staged(machine: Machine, src: str, dst: str) -> CopyFlow:
    """A peer copy the driver bounces through pinned host memory on ``src``'s socket: the source
    writes the chunk to host memory, the destination's engine reads it back."""
    cost = machine.cost
    host = machine.host_of(src)
    down = copy_flow(machine, src, host, initiator=src)
    up = copy_flow(machine, host, dst, initiator=dst)
    cap = staged_rate(
        cost,
        min(down.cap, machine.bottleneck(down.uses)),
        min(up.cap, machine.bottleneck(up.uses)),
    )
    latency = 2 * cost.gpucopy.launch_gpu + cost.gpucopy.staged_handoff
    return CopyFlow((*down.uses, *up.uses), cap, latency, "staged", (*down.pcie, *up.pcie))


def run_copy(ctx: Ctx, flow: CopyFlow, nbytes: float, delay: float) -> Gen:
    """One stream of copies in simulated time: the GPU's per-copy costs (``delay``), then the
    bytes over the flow's links at its cap; records the transfer and returns the time its
    last byte arrived."""
    yield ctx.sleep(delay)
    links = ctx.sim.links(ctx.node.name, flow.uses)
    cap = None if flow.cap == math.inf else flow.cap
    t0 = ctx.now
    yield ctx.sim.net.transfer(nbytes, links, cap=cap, label=f"{ctx.proc.comm}:{flow.via}")
    ctx.stats.record_transfer(nbytes, ctx.now - t0)
    return ctx.now


def jittered(ctx: Ctx, spread: float, value: float) -> float:
    """``value`` × a lognormal draw of median 1 and shape ``spread`` (``gpucopy.jitter``): the
    run-to-run variation of a GPU operation's latency, from the tenant's seeded ``jitter``
    stream (``ctx.random("jitter")``; nothing is drawn, and the run stays deterministic, when
    ``spread`` is 0)."""
    if spread <= 0 or value <= 0:
        return value
    return value * float(ctx.random("jitter").lognormal(0.0, spread))
