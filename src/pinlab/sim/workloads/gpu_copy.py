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
import random
from dataclasses import dataclass
from typing import Literal

from pinlab.platform.gpu_model import CopyEngine, nvlink_rate, read_window, staged_rate
from pinlab.platform.topology import LinkUse, Machine

__all__ = [
    "CopyFlow",
    "Via",
    "copy_flow",
    "jittered",
    "pcie_read_rate",
    "pcie_write_rate",
    "peer_access",
]

Via = Literal["local", "nvlink", "pcie", "staged"]
"""How a copy's bytes travel."""


@dataclass(frozen=True, slots=True)
class CopyFlow:
    """One copy's flow: the links crossed in order, the mechanism's rate cap (bytes/s), the
    GPU time of a small copy (``latency``: ``gpucopy.launch_gpu``, plus the staging handoff and
    a second launch when staged) and how it travels."""

    uses: tuple[LinkUse, ...]
    cap: float
    latency: float
    via: Via


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

    * ``src == dst``: the device reads and writes its own memory (``mem:<d>`` twice);
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
        cap = pcie_read_rate(machine, initiator, src, read_window(cost, engine))
    else:
        cap = pcie_write_rate(machine, initiator, dst)
    return CopyFlow(uses, cap, launch, "pcie")


def pcie_write_rate(machine: Machine, initiator: str, target: str) -> float:
    """Posted writes from ``initiator`` into ``target``'s memory over PCIe, bytes/s."""
    return machine.bottleneck(machine.path(initiator, target))


def pcie_read_rate(machine: Machine, initiator: str, target: str, window: int) -> float:
    """Reads of ``target``'s memory by ``initiator`` with ``window`` bytes outstanding, bytes/s."""
    del window
    return machine.bottleneck(machine.path(target, initiator))


def _staged(machine: Machine, src: str, dst: str) -> CopyFlow:
    """A peer copy the driver bounces through pinned host memory on ``src``'s socket: the source
    writes the chunk to host memory, the destination's engine reads it back."""
    cost = machine.cost
    host = machine.host_of(src)
    down = copy_flow(machine, src, host, initiator=src)
    up = copy_flow(machine, host, dst, initiator=dst)
    cap = staged_rate(
        cost, min(down.cap, machine.bottleneck(down.uses)), min(up.cap, machine.bottleneck(up.uses))
    )
    latency = 2 * cost.gpucopy.launch_gpu + cost.gpucopy.staged_handoff
    return CopyFlow((*down.uses, *up.uses), cap, latency, "staged")


def jittered(rng: random.Random, spread: float, value: float) -> float:
    """``value`` × a lognormal draw of median 1 and shape ``spread`` (``gpucopy.jitter``): the
    run-to-run variation of a GPU operation's latency, from the tenant's seeded generator."""
    if spread <= 0 or value <= 0:
        return value
    return value * rng.lognormvariate(0.0, spread)
