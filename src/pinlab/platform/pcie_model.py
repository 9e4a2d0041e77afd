"""PCIe mechanisms: what a transfer over a PCIe path can move, and how long one access takes.

Pure functions of the cost model (:class:`~pinlab.platform.cost.CostModel`, ``pcie.*``) and a
path description (:class:`PciePath`, made by :meth:`Machine.pcie_path
<pinlab.platform.topology.Machine.pcie_path>`); nothing here knows about time or the simulator.

**Links.** One direction of a link carries ``raw × link_efficiency``: the raw rate is
``GT/s × lanes × 128b/130b`` (``pcie.genN.raw``), and the link layer spends ``pcie.tlp.dllp``
bytes on an ACK and on an UpdateFC DLLP every so many bytes (the PCIe Base Spec 5.0 tables
2-46…48 and 3-7…9, :data:`ACK_INTERVAL`, :data:`FC_INTERVAL`) and ``pcie.tlp.skp_length``
bytes per ``pcie.tlp.skp_interval`` on SKP ordered sets: at x16 and MPS 256,
``1 − 8/168 − 8/168 − 4/1538 = 0.902``.

**Posted writes** (:func:`write_rate`) carry MPS bytes of payload per TLP of
``MPS + pcie.tlp.mwr_overhead`` (24 B): Gen3/4/5 x16 at MPS 256 → 12.99 / 25.99 / 51.98 GB/s.

**Reads** are non-posted: the requester sends read requests of at most MRRS bytes
(``pcie.tlp.mrd_overhead`` each, in the request direction) and the completer returns the data
in completions of at most ``min(MPS, completer's size)`` bytes (``pcie.tlp.cpld_overhead``
each). At most ``window`` bytes are requested and not yet returned, so (:func:`read_rate`)::

    read rate = min(completion rate of every link, window / read latency, host-bridge limit)

with ``window = requester tags × MRRS`` -- the read requests *one requester stream* keeps
outstanding (a NIC's QP, a GPU's copy engine or copy kernel): every stream has its own window,
so two streams reading one BAR each get theirs (the completer is not a shared slot pool; its
share of the link is what the links' completion rates and :func:`share_link` give) -- and the
**read latency** (:func:`read_latency`) of
the path: host DRAM on the same socket ``pcie.lat.host_read`` (0.55 µs), a device BAR its
completer latency (the ``pcie.bar_read`` row the device names, ``DeviceSpec.bar_read``) plus
``pcie.lat.rc_p2p`` when a host bridge turns the request around, ``pcie.lat.switch`` per switch
on the path and ``pcie.lat.remote_socket`` per socket crossing. This is what makes a NIC
*reading* device memory slower than one reading host memory, and slower than one *writing*
device memory (posted writes need no window).

**Host bridges** (:func:`rc_forwarding`): P2P between two root ports is forwarded by the host
bridge as its CPU class allows (``pcie.rc.<class>``): Intel client root ports forward writes
only, Intel Xeon host bridges both at limited rates, AMD Zen both at link rate.

**Both directions at once** (:func:`share_link`): a read's requests travel against its data,
and the completions of reads in one direction share that direction with the other direction's
writes' ACKs -- every stream's wire bytes are charged to the direction it uses, and the demands
are cut back max-min fairly until both directions fit.

The API (stable; the GPU side uses it for host↔GPU and GPU↔GPU copies over PCIe):
:class:`PcieLink`, :class:`HostBridgeCrossing`, :class:`PciePath`, :func:`link_efficiency`,
:func:`write_efficiency`, :func:`completion_efficiency`, :func:`write_rate`,
:func:`completion_rate`, :func:`path_write_rate`, :func:`read_latency`, :func:`write_latency`,
:func:`read_window`, :func:`read_rate`, :func:`read_time`, :func:`rc_forwarding`,
:func:`p2p_reads_forwarded`, :func:`p2p_writes_forwarded`, :class:`LinkDemand`,
:func:`share_link`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pinlab.platform.cost import CostModel, PcieRcClass, RcClass

__all__ = [
    "ACK_INTERVAL",
    "FC_INTERVAL",
    "HostBridgeCrossing",
    "LinkDemand",
    "PcieLink",
    "PciePath",
    "completion_efficiency",
    "completion_rate",
    "link_efficiency",
    "p2p_reads_forwarded",
    "p2p_writes_forwarded",
    "path_write_rate",
    "rc_forwarding",
    "read_latency",
    "read_rate",
    "read_time",
    "read_window",
    "share_link",
    "write_efficiency",
    "write_latency",
    "write_rate",
]

# Bytes between ACK DLLPs and between UpdateFC DLLPs by link width and MPS: the PCIe Base Spec
# 5.0 tables 3-7…3-9 (Ack) and 2-46…2-48 (FC), Gen3 and later (the same values), as tabulated
# in pcie-bench/pcie-model model/pcie.py (Ack_Limits, FC_Guide).
_INTERVALS_GEN3: dict[int, dict[int, int]] = {
    1: {128: 333, 256: 512, 512: 655, 1024: 1167, 2048: 2191, 4096: 4239},
    2: {128: 224, 256: 313, 512: 385, 1024: 641, 2048: 1153, 4096: 2177},
    4: {128: 169, 256: 214, 512: 250, 1024: 378, 2048: 634, 4096: 1146},
    8: {128: 163, 256: 203, 512: 182, 1024: 246, 2048: 374, 4096: 630},
    16: {128: 144, 256: 168, 512: 182, 1024: 246, 2048: 374, 4096: 630},
}
ACK_INTERVAL = _INTERVALS_GEN3
"""Bytes of TLP traffic per ACK DLLP, ``[width][mps]`` (PCIe 5.0 tables 3-7…3-9)."""
FC_INTERVAL = _INTERVALS_GEN3
"""Bytes of TLP traffic per UpdateFC DLLP, ``[width][mps]`` (PCIe 5.0 tables 2-46…2-48)."""


@dataclass(frozen=True, slots=True)
class PcieLink:
    """One PCIe link of a path: its name (``pcie:<x>``, a :class:`PlatformLink` of the
    machine), generation, width, the MPS both its ends use, and the direction the path crosses
    it going from the initiator to the target (``up`` toward the root, ``down`` away)."""

    name: str
    gen: int
    width: int
    mps: int
    direction: Literal["up", "down"]

    @property
    def reverse(self) -> Literal["up", "down"]:
        """The other direction (where a read's data travels)."""
        return "down" if self.direction == "up" else "up"


@dataclass(frozen=True, slots=True)
class HostBridgeCrossing:
    """A host bridge the path goes through: its name and socket, its CPU class (``None``: a
    CPU whose P2P forwarding pcie.rc does not describe) and whether it turns a *peer-to-peer*
    request around between two root ports (``p2p``) rather than passing it to host memory."""

    name: str
    socket: int
    rc_class: RcClass | None
    p2p: bool


@dataclass(frozen=True, slots=True)
class PciePath:
    """The PCIe route from an initiator (the requester: a NIC, a GPU's DMA engine) to the
    memory it reads or writes.

    Attributes:
        initiator: the requesting device's name.
        target: ``"host:<socket>"`` or the name of the device whose BAR is accessed.
        links: the PCIe links crossed, in order from initiator to target.
        switches: PCIe switches the path goes through (each adds ``pcie.lat.switch``).
        host_bridges: the host bridges crossed (one, or one per socket across sockets).
        sockets: socket crossings (0 or 1).
        socket_link: the inter-socket link's capacity per direction (bytes/s), None if none.
        target_kind: ``"host"`` (DRAM behind the root complex) or ``"device"`` (a BAR).
        completer_latency: the target device's BAR read latency (its ``pcie.bar_read`` row;
            None: ``pcie.bar_read.default``; unused for host memory).
        mps: the smallest Max_Payload_Size along the path.
        mrrs: the initiator's Max_Read_Request_Size.
    """

    initiator: str
    target: str
    links: tuple[PcieLink, ...]
    switches: int
    host_bridges: tuple[HostBridgeCrossing, ...]
    sockets: int
    socket_link: float | None
    target_kind: Literal["host", "device"]
    completer_latency: float | None
    mps: int
    mrrs: int

    @property
    def p2p_bridge(self) -> HostBridgeCrossing | None:
        """The first host bridge that turns a P2P request around, if any."""
        for hb in self.host_bridges:
            if hb.p2p:
                return hb
        return None


# -- links --------------------------------------------------------------------------------------


def _interval(table: dict[int, dict[int, int]], width: int, mps: int) -> int:
    row = table.get(width)
    if row is None:
        raise ValueError(f"PCIe width must be one of {sorted(table)}, not {width!r}")
    if mps not in row:
        raise ValueError(f"MPS must be one of {sorted(row)} bytes, not {mps!r}")
    return row[mps]


def link_efficiency(cost: CostModel, width: int, mps: int) -> float:
    """Share of a link direction's raw rate left for TLPs after the ACK and UpdateFC DLLPs
    and the SKP ordered sets: ``1 − dllp/ack − dllp/fc − skp_length/skp_interval``
    (x16, MPS 256: 0.902)."""
    tlp = cost.pcie.tlp
    ack = _interval(ACK_INTERVAL, width, mps)
    fc = _interval(FC_INTERVAL, width, mps)
    return 1.0 - tlp.dllp / ack - tlp.dllp / fc - tlp.skp_length / tlp.skp_interval


def write_efficiency(cost: CostModel, mps: int) -> float:
    """Payload share of a stream of MPS-sized posted writes: ``MPS / (MPS + mwr_overhead)``."""
    return mps / (mps + cost.pcie.tlp.mwr_overhead)


def completion_efficiency(cost: CostModel, completion: int) -> float:
    """Payload share of a stream of read completions of ``completion`` bytes each."""
    return completion / (completion + cost.pcie.tlp.cpld_overhead)


def write_rate(cost: CostModel, gen: int, width: int, mps: int) -> float:
    """Payload rate of posted writes over one direction of a link, bytes/s:
    raw × :func:`link_efficiency` × :func:`write_efficiency`."""
    raw = cost.raw_rate(gen, width)
    return raw * link_efficiency(cost, width, mps) * write_efficiency(cost, mps)


def completion_rate(cost: CostModel, gen: int, width: int, mps: int, completion: int) -> float:
    """Payload rate of read completions of ``completion`` bytes over one direction, bytes/s."""
    raw = cost.raw_rate(gen, width)
    return raw * link_efficiency(cost, width, mps) * completion_efficiency(cost, completion)


def _completion_size(cost: CostModel, path: PciePath) -> int:
    """Bytes per completion: at most the MPS; a root complex returning host memory uses at
    most ``pcie.tlp.host_completion``."""
    if path.target_kind == "host":
        return min(path.mps, cost.pcie.tlp.host_completion)
    return path.mps


# -- host bridges -----------------------------------------------------------------------------


def rc_forwarding(cost: CostModel, rc_class: RcClass | None) -> PcieRcClass | None:
    """The P2P forwarding rules of a host-bridge class (None for an unknown class)."""
    return None if rc_class is None else cost.pcie.rc.of(rc_class)


def _forwarded(cost: CostModel, path: PciePath, *, reads: bool) -> bool:
    hb = path.p2p_bridge
    if hb is None:
        return True
    rules = rc_forwarding(cost, hb.rc_class)
    if rules is None:
        return False
    return rules.p2p_reads if reads else rules.p2p_writes


def p2p_reads_forwarded(cost: CostModel, path: PciePath) -> bool:
    """Whether the path's reads get through: True unless a host bridge that turns them around
    does not forward P2P reads (Intel client root ports) or is of an unknown class."""
    return _forwarded(cost, path, reads=True)


def p2p_writes_forwarded(cost: CostModel, path: PciePath) -> bool:
    """Whether the path's posted writes get through (see :func:`p2p_reads_forwarded`)."""
    return _forwarded(cost, path, reads=False)


# -- rates and latencies of a path ------------------------------------------------------------


def path_write_rate(cost: CostModel, path: PciePath) -> float:
    """Payload rate of posted writes from the initiator to the target, bytes/s: the slowest
    link at its MPS, the inter-socket link, and the write limit of a host bridge that forwards
    them peer to peer (0 when it does not forward them; ``inf`` for a path with no link)."""
    if not p2p_writes_forwarded(cost, path):
        return 0.0
    links = (write_rate(cost, x.gen, x.width, x.mps) for x in path.links)
    return _path_limits(cost, path, min(links, default=math.inf), reads=False)


def _path_limits(cost: CostModel, path: PciePath, rate: float, *, reads: bool) -> float:
    """``rate`` capped by the inter-socket link and the forwarding limit (reads or writes) of
    a host bridge that turns the path's requests around."""
    if path.socket_link is not None:
        rate = min(rate, path.socket_link)
    hb = path.p2p_bridge
    rules = None if hb is None else rc_forwarding(cost, hb.rc_class)
    if rules is not None:
        limit = rules.read_limit if reads else rules.write_limit
        if limit is not None:
            rate = min(rate, limit)
    return rate


def read_latency(cost: CostModel, path: PciePath) -> float:
    """Seconds from a read request leaving the initiator to its completion arriving:
    host DRAM ``pcie.lat.host_read``, a device BAR its completer latency (+ ``pcie.lat.rc_p2p``
    when a host bridge turns the request around), + ``pcie.lat.switch`` per switch and
    ``pcie.lat.remote_socket`` per socket crossing."""
    lat = cost.pcie.lat
    if path.target_kind == "host":
        base = lat.host_read
    else:
        bar = cost.pcie.bar_read.default
        base = bar if path.completer_latency is None else path.completer_latency
        if path.p2p_bridge is not None:
            base += lat.rc_p2p
    return base + lat.switch * path.switches + lat.remote_socket * path.sockets


def write_latency(cost: CostModel, path: PciePath) -> float:
    """Seconds until a posted write from the initiator is visible at the target: host DRAM
    ``pcie.lat.write``, + half of a read's switch and socket round-trip costs (one way)."""
    lat = cost.pcie.lat
    return lat.write + 0.5 * (lat.switch * path.switches + lat.remote_socket * path.sockets)


def read_window(path: PciePath, requester_tags: int) -> int:
    """Bytes of reads one requester stream keeps outstanding: ``requester tags × MRRS`` (the
    window is the stream's own; neither host memory nor a device BAR caps it)."""
    if requester_tags < 1:
        raise ValueError(f"requester_tags must be >= 1, not {requester_tags!r}")
    return requester_tags * path.mrrs


def read_rate(cost: CostModel, path: PciePath, requester_tags: int) -> float:
    """Payload rate at which the initiator reads the target, bytes/s: the slowest link for
    completions (in the reverse direction, at the completion size), the inter-socket link,
    ``window / latency`` (:func:`read_window`, :func:`read_latency`) and the read limit of a
    host bridge that forwards them peer to peer -- 0 when it does not forward reads."""
    if not p2p_reads_forwarded(cost, path):
        return 0.0
    completion = _completion_size(cost, path)
    latency = read_latency(cost, path)
    window = read_window(path, requester_tags)
    rate = window / latency if latency > 0 else math.inf
    for link in path.links:
        rate = min(rate, completion_rate(cost, link.gen, link.width, link.mps, completion))
    return _path_limits(cost, path, rate, reads=True)


def read_time(cost: CostModel, path: PciePath, nbytes: int, requester_tags: int) -> float:
    """Seconds to read ``nbytes`` on an idle path: the read latency, then the bytes at the
    read rate (``inf`` when the path cannot read)."""
    rate = read_rate(cost, path, requester_tags)
    if rate <= 0:
        return math.inf
    return read_latency(cost, path) + nbytes / rate


# -- both directions of one link ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkDemand:
    """The payload rates (bytes/s, ``inf`` = as fast as possible) four kinds of stream ask of
    one link: posted writes going up or down, and reads whose *data* goes up or down (their
    requests go the other way)."""

    write_up: float = 0.0
    write_down: float = 0.0
    read_up: float = 0.0
    read_down: float = 0.0


def share_link(
    cost: CostModel,
    gen: int,
    width: int,
    mps: int,
    mrrs: int,
    demand: LinkDemand,
    *,
    completion: int | None = None,
) -> LinkDemand:
    """The payload rates the four streams of ``demand`` get when they share one link.

    Each direction carries ``raw × link_efficiency`` wire bytes per second. A write of ``p``
    payload bytes costs ``p × (1 + mwr/MPS)`` in its direction; a read's data costs ``p × (1 +
    cpld/completion)`` in the data direction and ``p × mrd/MRRS`` of requests in the other.
    Rates are raised together (max-min fair by payload) until a direction is full; the
    streams using that direction stop, the others go on."""
    tlp = cost.pcie.tlp
    comp = mps if completion is None else min(completion, mps)
    cap = cost.raw_rate(gen, width) * link_efficiency(cost, width, mps)
    w = 1 + tlp.mwr_overhead / mps
    d = 1 + tlp.cpld_overhead / comp
    r = tlp.mrd_overhead / mrrs
    # wire bytes per payload byte, per direction (up, down), of each stream
    streams = {
        "write_up": ((w, 0.0), demand.write_up),
        "write_down": ((0.0, w), demand.write_down),
        "read_up": ((d, r), demand.read_up),
        "read_down": ((r, d), demand.read_down),
    }
    rate = {k: 0.0 for k in streams}
    active = {k for k, (_, want) in streams.items() if want > 0}
    left = [cap, cap]
    while active:
        # the largest common increment before a stream reaches its demand or a direction fills
        step = min(streams[k][1] - rate[k] for k in active)
        for side in (0, 1):
            use = sum(streams[k][0][side] for k in active)
            if use > 0:
                step = min(step, left[side] / use)
        for k in active:
            rate[k] += step
            for side in (0, 1):
                left[side] -= step * streams[k][0][side]
        full = {side for side in (0, 1) if left[side] <= cap * 1e-12}
        active = {
            k
            for k in active
            if rate[k] < streams[k][1] * (1 - 1e-12)
            and not any(streams[k][0][side] > 0 for side in full)
        }
    return LinkDemand(rate["write_up"], rate["write_down"], rate["read_up"], rate["read_down"])
