"""``nccl``: NCCL's collectives as nccl-tests' ``*_perf`` binaries run them (all-reduce;
all-gather and reduce-scatter as rings) -- rings over NVLink or PCIe inside a node and over the
NICs between nodes, or a tree across nodes, with GPUDirect RDMA or host staging as NCCL decides
(``docs/cost-model/gpu.md`` §G5; the tool: ``tools-and-mechanisms.md`` A4).

One all-reduce of S bytes over n ranks costs:

* the **launch**: each process's thread launches one kernel per GPU it drives
  (``nccl.launch`` × ``-g``);
* the **latency** NCCL's own model gives the algorithm and protocol: a base
  (``nccl.ring_base``, ``nccl.tree_base``) plus, for a ring, 2(n − 1) hops -- over NVLink/PCIe
  (``nccl.ring_nvlink``/``ring_pci``) or, 2(nodes − 1) of them, across the network
  (``nccl.ring_net`` + the NIC path's own latency); for a tree, two passes of the intra-node
  chain and log2(nodes) network levels (``nccl.tree_*``). Every hop is jittered from the
  tenant's seeded generator;
* the **data**, as flows on the platform's links: a ring's 2(n − 1) steps each move S/n from
  every rank to its successor (``model = "aggregate"``: one flow of 2(n − 1)/n × S per edge);
  a tree moves S up and down each node's chain and S per node each way across the network.
  Each edge is capped by its transport (NVLink at copy-kernel payloads, PCIe peer writes,
  shared memory through the host, the NIC with GPUDirect RDMA or host staging) times the
  protocol's efficiency (LL 0.5, LL128 120/128 and a per-channel ceiling, Simple
  ``nccl.simple_efficiency``).

With ``algo``/``proto`` ``auto`` NCCL's rule picks the pair with the least predicted time --
its latency plus the bytes over the slowest edge's capacity. nccl-tests then prints ``time``
= the mean over ``iters`` iterations, ``algbw = S / time`` and ``busbw = algbw × 2(n − 1)/n``
(:func:`bus_bandwidth`). Multi-node runs are one tenant per node in one group (``group``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import model_validator

from pinlab.kernel.umem import IB_ACCESS_REMOTE_WRITE
from pinlab.platform.gpu_model import nvlink_rate
from pinlab.platform.topology import LinkUse
from pinlab.sim.collective import Collective, FlowSpec
from pinlab.sim.engine import Ctx
from pinlab.sim.flows import Link
from pinlab.sim.metrics import TenantResult, metric
from pinlab.sim.workloads.base import Gen, ToolTable, WorkloadParams, idle, param
from pinlab.sim.workloads.gpu_copy import CopyFlow, copy_flow, jittered, peer_access
from pinlab.sim.workloads.nic import nearest_nic
from pinlab.sim.workloads.paths import Side, nic_side, route, staged_side
from pinlab.units import Size

__all__ = [
    "DTYPE_SIZE",
    "PATH_LEVELS",
    "NcclParams",
    "NcclResult",
    "NcclRow",
    "bus_bandwidth",
    "nccl",
]

Algo = Literal["ring", "tree", "nvls", "nvls_tree"]
Proto = Literal["LL", "LL128", "Simple"]
PathLevel = Literal["LOC", "NVL", "PIX", "PXB", "PHB", "SYS"]
PATH_LEVELS: tuple[str, ...] = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
"""NCCL's path types in distance order (``PATH_LOC`` … ``PATH_SYS``; ``nvidia-smi``'s NODE
is NCCL's PHB)."""
_PROTOS: tuple[Proto, ...] = ("LL", "LL128", "Simple")
NCCL_STEPS = 8
"""Steps of a channel's buffer (``NCCL_STEPS``, ``src/include/device.h``): a network message
is ``NCCL_BUFFSIZE / NCCL_STEPS``."""

DTYPE_SIZE: dict[str, int] = {
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float": 4,
    "double": 8,
    "bfloat16": 2,
}
"""Bytes per element of nccl-tests' ``-d`` types."""


CollectiveName = Literal["all_reduce", "all_gather", "reduce_scatter"]


def ring_passes(collective: str) -> int:
    """How many times a ring moves every chunk around: 2 for all-reduce (reduce-scatter then
    all-gather), 1 for all-gather and reduce-scatter; a ring call takes passes × (n − 1)
    steps."""
    return 2 if collective == "all_reduce" else 1


def bus_bandwidth(algbw: float, ranks: int, collective: str = "all_reduce") -> float:
    """nccl-tests' bus bandwidth: all-reduce ``algbw × 2(n − 1)/n`` (``AllReduceGetBw``),
    all-gather and reduce-scatter ``algbw × (n − 1)/n``."""
    if ranks <= 1:
        return 0.0
    return algbw * ring_passes(collective) * (ranks - 1) / ranks


class NcclParams(WorkloadParams):
    """``nccl``: all_reduce_perf's sweep over sizes on this node's GPUs (one rank each)."""

    workload: Literal["nccl"] = "nccl"

    collective: CollectiveName = param("all_reduce", "the collective (nccl-tests' *_perf binary)")
    devices: list[str] | Literal["all"] = param("all", "the node's GPUs that are ranks")
    minbytes: Size = param("32MiB", "smallest size (-b)", unit="B")
    maxbytes: Size = param("32MiB", "largest size (-e)", unit="B")
    stepfactor: int = param(2, "size multiplier between sizes (-f; 1: add stepbytes)", ge=1)
    stepbytes: Size = param(
        "1MiB", "size increment between sizes when stepfactor is 1 (-i)", unit="B"
    )
    iters: int = param(20, "timed iterations per size and placement (-n)", ge=1)
    warmup: int = param(1, "untimed iterations before them (-w)", ge=0)
    gpus_per_thread: int = param(1, "GPUs one thread drives (-g): its launches are serial", ge=1)
    datatype: str = param("float", "element type (-d)")
    algo: Literal["auto", "ring", "tree", "nvls", "nvls_tree"] = param("auto", "NCCL_ALGO")
    proto: Literal["auto", "LL", "LL128", "Simple"] = param("auto", "NCCL_PROTO")
    p2p_level: PathLevel = param("PXB", "NCCL_P2P_LEVEL: farthest PCIe path for peer copies")
    net_gdr_level: PathLevel = param("PXB", "NCCL_NET_GDR_LEVEL: farthest GPU-NIC path for GDR")
    net_gdr_read: Literal["auto", "on", "off"] = param(
        "auto", "NCCL_NET_GDR_READ (auto: on from Ampere, or with an NVLink peer)"
    )
    channels: int | None = param(
        None,
        "channels (default nccl.channels; nccl.channels_one_gpu when every node has one rank)",
        ge=1,
        le=64,
    )
    model: Literal["steps", "aggregate"] = param(
        "aggregate",
        "'aggregate': every edge's bytes of a call in one flow phase, as NCCL's pipelined ring "
        "streams them; 'steps': 2(n-1) phases of S/n each, every rank waiting for the slowest",
    )
    check: bool = param(True, "nccl-tests -c 1: print #wrong (always 0), else N/A")
    group: str = param("nccl", "ranks of one group form one communicator")
    world: int = param(
        0,
        "tenants the communicator waits for before it forms (0: those starting together); a "
        "later one waits until it is empty",
        ge=0,
    )

    def events(self, duration: float) -> float:
        # every size runs its warm-up and timed iterations, out of place and in place
        return float(size_count(self) * (self.iters + self.warmup) * 2)

    @model_validator(mode="after")
    def _check(self) -> NcclParams:
        if self.stepfactor == 1 and self.stepbytes < 1:
            raise ValueError("expected stepbytes >= 1 beside stepfactor 1, found 0")
        return self


@dataclass(frozen=True, slots=True)
class NcclRow:
    """One printed size: bytes, elements, and per placement the time (s), algbw and busbw
    (B/s); the algorithm and protocol NCCL used."""

    size: int
    count: int
    time: float
    algbw: float
    busbw: float
    time_ip: float
    algbw_ip: float
    busbw_ip: float
    algo: str
    proto: str


@dataclass(slots=True)
class NcclResult(TenantResult, ToolTable[NcclRow]):
    """What ``nccl`` measured: all_reduce_perf's rows, its headline numbers and the
    transports the communicator used."""

    ranks: int | None = metric("count", "this tenant's ranks (its GPUs)")
    world_ranks: int | None = metric("count", "ranks in the communicator")
    busbw_peak: float | None = metric("B/s", "largest bus bandwidth of the sweep")
    avg_busbw: float | None = metric("B/s", "mean bus bandwidth over every printed cell")
    time_min: float | None = metric("s", "time of the smallest size")
    transports: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Rail:
    """A NIC a rank sends and receives through, and whether NCCL uses GPUDirect RDMA on it for
    sends (the NIC reads GPU memory) and receives (it writes GPU memory)."""

    nic: str
    gdr_send: bool
    gdr_recv: bool


@dataclass(slots=True)
class _Rank:
    """One GPU of the communicator: its tenant (``owner``), node, device and NIC rails -- every
    NIC behind the GPU's own PCIe switch, else the nearest one (NCCL's network plugins stripe
    a GPU's traffic over all its close NICs, as aws-ofi-nccl does on p5)."""

    owner: str
    node: str
    device: str
    rails: tuple[_Rail, ...]


@dataclass(frozen=True, slots=True)
class _Edge:
    """One hop of a ring or a tree: the links its flow crosses, the rate cap of its transport
    and protocol, whether it crosses the network, its hop latency and its transport name."""

    links: tuple[Link, ...]
    cap: float
    net: bool
    latency: float
    transport: str


@dataclass(frozen=True, slots=True)
class _Plan:
    """One (algorithm, protocol) on this communicator: the base latency, the hop latencies a
    call pays in sequence, and the edges with their share of S (bytes per byte all-reduced)
    and the rank that drives them."""

    algo: str
    proto: Proto
    base: float
    hops: tuple[float, ...]
    edges: tuple[tuple[float, _Edge, str], ...]

    def predicted(self, size: int) -> float:
        """NCCL-style estimate: latency + the busiest link's or edge's bytes over its rate."""
        load: dict[int, tuple[float, float]] = {}
        t = 0.0
        for share, edge, _ in self.edges:
            nbytes = share * size
            t = max(t, nbytes / edge.cap)
            for link in edge.links:
                done, cap = load.get(id(link), (0.0, link.capacity))
                load[id(link)] = (done + nbytes, cap)
        for nbytes, cap in load.values():
            t = max(t, nbytes / cap)
        return self.base + sum(self.hops) + t


def _sizes(p: NcclParams) -> list[int]:
    """The sizes nccl-tests' ``common.cu`` runs: from ``minbytes`` (at least 1) up to
    ``maxbytes``, multiplied by ``stepfactor`` when it is above 1, else ``stepbytes`` added."""
    out, s = [], max(p.minbytes, 1)
    while s <= p.maxbytes:
        out.append(s)
        s = s * p.stepfactor if p.stepfactor > 1 else s + p.stepbytes
    return out or [p.minbytes]


def size_count(p: NcclParams) -> int:
    """How many sizes :func:`_sizes` gives, without listing them (a stepbytes sweep may ask
    for billions)."""
    low = max(p.minbytes, 1)
    if low > p.maxbytes:
        return 1
    if p.stepfactor > 1:
        n, s = 0, low
        while s <= p.maxbytes:
            n, s = n + 1, s * p.stepfactor
        return n
    return (p.maxbytes - low) // p.stepbytes + 1


def _rails(ctx: Ctx, device: str, p: NcclParams) -> tuple[_Rail, ...]:
    """The NICs ``device`` uses: those ``PIX`` to it (behind its switch), else the nearest."""
    machine = ctx.machine
    if not machine.spec.nics:
        return ()
    close = [n.name for n in machine.spec.nics if machine.pci_distance(device, n.name) == "PIX"]
    nics = close or [nearest_nic(machine, device)]
    return tuple(_Rail(nic, *_gdr(ctx, device, nic, p)) for nic in nics)


def _gdr(ctx: Ctx, device: str, nic: str | None, p: NcclParams) -> tuple[bool, bool]:
    """NCCL's ``ncclTopoCheckGdr``: GDR for receives when the GPU–NIC distance is at most
    ``net_gdr_level``; for sends (the NIC reads GPU memory) also ``net_gdr_read`` (auto: from
    compute capability 8.0, or when the GPU has an NVLink peer)."""
    if nic is None:
        return False, False
    machine = ctx.machine
    close = PATH_LEVELS.index(_level(machine.pci_distance(device, nic))) <= PATH_LEVELS.index(
        p.net_gdr_level
    )
    spec = machine.spec.device(device)
    if p.net_gdr_read == "auto":
        cc = spec.compute_capability or 0
        read_ok = cc >= 80 or machine.nvlink_domain(device) is not None
    else:
        read_ok = p.net_gdr_read == "on"
    return close and read_ok, close


def _level(distance: str) -> str:
    return {"X": "LOC", "NODE": "PHB"}.get(distance, distance)


def nccl(ctx: Ctx, p: NcclParams, r: NcclResult) -> Gen:
    """all_reduce_perf over ``p.devices`` (module docstring)."""
    machine = ctx.machine
    if p.datatype not in DTYPE_SIZE:
        raise ValueError(f"expected a datatype of {', '.join(DTYPE_SIZE)}, found {p.datatype!r}")
    devices = [d.name for d in machine.spec.devices] if p.devices == "all" else list(p.devices)
    coll = ctx.sim.collectives.group(p.group, p.world)
    me = ctx.proc.comm
    coll.join(me)
    try:
        ranks = [_Rank(me, ctx.node.name, dev, _rails(ctx, dev, p)) for dev in devices]
        coll.add_ranks(me, ranks)
        yield coll.barrier(me)
        world: list[_Rank] = list(coll.ranks)
        r.ranks, r.world_ranks = len(ranks), len(world)
        n = len(world)
        algos = [p.algo] if p.algo != "auto" else _algorithms(ctx, p, world)
        protos: list[Proto] = list(_PROTOS) if p.proto == "auto" else [p.proto]
        if p.proto == "auto" and not _ll_over_network(ctx, world):
            protos = ["Simple"]
        simple: list[Proto] = ["Simple"]
        plans = [
            _plan_nvls(ctx, p, world, a) if a.startswith("nvls") else _plan(ctx, p, world, a, pr)
            for a in algos
            for pr in (simple if a.startswith("nvls") else protos)
        ]
        r.transports = sorted(
            {e.transport for pl in plans for _, e, owner in pl.edges if owner == me}
        )
        r.data_start = ctx.now
        rows: list[NcclRow] = []
        for size in _sizes(p):
            plan = _choose(plans, size)
            times = []
            for _placement in range(2):
                for _ in range(p.warmup):
                    yield from _iteration(ctx, p, coll, plan, size)
                t0 = ctx.now
                for _ in range(p.iters):
                    yield from _iteration(ctx, p, coll, plan, size)
                times.append((ctx.now - t0) / p.iters)
            algbw = [size / t for t in times]
            rows.append(
                NcclRow(
                    size,
                    size // DTYPE_SIZE[p.datatype] // (1 if p.collective == "all_reduce" else n),
                    times[0],
                    algbw[0],
                    bus_bandwidth(algbw[0], n, p.collective),
                    times[1],
                    algbw[1],
                    bus_bandwidth(algbw[1], n, p.collective),
                    plan.algo,
                    plan.proto,
                )
            )
        r.rows = rows
        r.data_end = ctx.now
        r.busbw_peak = max(max(row.busbw, row.busbw_ip) for row in rows)
        r.avg_busbw = sum(row.busbw + row.busbw_ip for row in rows) / (2 * len(rows))
        r.time_min = rows[0].time
    finally:
        coll.leave(me)
    yield from idle(ctx)


# -- the communicator's edges ------------------------------------------------------------------


def _intra(ctx: Ctx, p: NcclParams, a: _Rank, b: _Rank) -> tuple[CopyFlow, str]:
    """Rank ``a`` → rank ``b`` on one node: NVLink, PCIe peer writes (distance ≤
    ``p2p_level``), else shared memory through the host."""
    machine = ctx.sim.node(a.node).machine
    if machine.nvlink_path(a.device, b.device) is not None:
        return copy_flow(machine, a.device, b.device, initiator=a.device, engine="sm"), "P2P/NVL"
    dist = _level(machine.pci_distance(a.device, b.device))
    near = PATH_LEVELS.index(dist) <= PATH_LEVELS.index(p.p2p_level)
    if near and peer_access(machine, a.device, b.device):
        return copy_flow(machine, a.device, b.device, initiator=a.device, engine="sm"), "P2P/PCI"
    flow = copy_flow(machine, a.device, b.device, initiator=a.device, engine="sm", p2p=False)
    return flow, "SHM"


def _side(ctx: Ctx, rank: _Rank, rail: _Rail, *, write: bool, channels: int) -> Side:
    """One end of a network hop: GPUDirect RDMA through ``rail`` when NCCL enables it, else
    through a bounce buffer in host memory. Each of the hop's ``channels`` has its own
    connection (a QP), so the NIC reads the GPU's memory through that many read windows."""
    machine = ctx.sim.node(rank.node).machine
    if rail.gdr_recv if write else rail.gdr_send:
        chunk = machine.cost.nccl.buffsize // NCCL_STEPS
        return nic_side(
            ctx,
            rank.node,
            machine,
            rank.device,
            rail.nic,
            p2p=True,
            write=write,
            nbytes=chunk,
            qps=channels,
        )
    return staged_side(ctx, rank.node, machine, rank.device, rail.nic, write=write)


def _net_overhead(ctx: Ctx, proto: Proto) -> float:
    """NCCL's per-step network post overhead for the CPU vendor (× 3 with Simple)."""
    c = ctx.cost.nccl
    base = c.net_overhead_amd if ctx.machine.spec.cpu.vendor == "amd" else c.net_overhead_intel
    return base * (3 if proto == "Simple" else 1)


def _edge(
    ctx: Ctx,
    p: NcclParams,
    a: _Rank,
    b: _Rank,
    proto: Proto,
    channels: int,
    *,
    tree: bool,
    rails: tuple[int, int] = (0, 0),
) -> _Edge:
    """The hop ``a`` → ``b`` with ``proto`` over ``channels`` channels: its flow's links, its
    transport's cap × the protocol's efficiency (and per-channel ceiling), its hop latency.
    Across nodes it leaves by ``a``'s rail ``rails[0]`` and enters by ``b``'s ``rails[1]``."""
    c = ctx.cost.nccl
    i = _PROTOS.index(proto)
    multinode = a.node != b.node or len(ctx.sim.nodes) > 1
    if a.node == b.node:
        flow, transport = _intra(ctx, p, a, b)
        links = tuple(ctx.sim.links(a.node, flow.uses))
        nv = transport == "P2P/NVL"
        table = (
            (c.tree_nvlink if nv else c.ring_pci) if tree else (c.ring_nvlink if nv else c.ring_pci)
        )
        lat = table[i]
        if multinode:
            lat = max(lat, _net_overhead(ctx, proto))
        cap = _proto_cap(ctx, proto, flow.cap, channels)
        return _Edge(links, cap, False, lat, transport)
    out, into = a.rails[rails[0] % len(a.rails)], b.rails[rails[1] % len(b.rails)]
    sender = _side(ctx, a, out, write=False, channels=channels)
    receiver = _side(ctx, b, into, write=True, channels=channels)
    net_links, cap, path_latency = route(ctx.sim, sender, receiver)
    gdr = "GDRDMA" if out.gdr_send and into.gdr_recv else "host"
    lat = (c.tree_net if tree else c.ring_net)[i] + path_latency
    return _Edge(tuple(net_links), _proto_cap(ctx, proto, cap, channels), True, lat, f"NET/{gdr}")


def _proto_cap(ctx: Ctx, proto: Proto, cap: float, channels: int) -> float:
    """A transport's cap under ``proto``: LL moves half its lines' bytes, at most
    ``nccl.ll_channel_max`` per channel; LL128 120/128, at most ``nccl.ll128_channel_max``
    per channel; Simple ``nccl.simple_efficiency``."""
    c = ctx.cost.nccl
    if proto == "LL":
        return min(cap * c.ll_efficiency, channels * c.ll_channel_max)
    if proto == "LL128":
        return min(cap * c.ll128_efficiency, channels * c.ll128_channel_max)
    return cap * c.simple_efficiency


def _by_node(world: Sequence[_Rank]) -> dict[str, list[_Rank]]:
    nodes: dict[str, list[_Rank]] = {}
    for rk in world:
        nodes.setdefault(rk.node, []).append(rk)
    return nodes


def _rings(world: Sequence[_Rank], channels: int) -> list[list[_Rank]]:
    """The rings NCCL's channels run: inside one node one ring (every channel on the same
    links); across nodes one per NIC rail, each node's ranks rotated so that a different GPU --
    and NIC -- leaves the node in every ring."""
    nodes = _by_node(world)
    if len(nodes) == 1:
        return [list(world)]
    per_node = min(len(v) for v in nodes.values())
    rails = len(_rail_ranks(next(iter(nodes.values()))))
    k = max(1, min(max(channels, rails), rails))
    rings = []
    for c in range(k):
        shift = (c * per_node) // k
        ring: list[_Rank] = []
        for members in nodes.values():
            ring += members[shift:] + members[:shift]
        rings.append(ring)
    return rings


def _rail_ranks(members: Sequence[_Rank]) -> list[tuple[_Rank, int]]:
    """Every NIC rail of a node once, as (the first rank using it, the rail's index in that
    rank's rails), in NIC order: where network traffic leaves and enters the node."""
    seen: dict[str, tuple[_Rank, int]] = {}
    for rk in members:
        for i, rail in enumerate(rk.rails):
            seen.setdefault(rail.nic, (rk, i))
    return [seen[nic] for nic in sorted(seen)]


def _channels(ctx: Ctx, p: NcclParams, world: Sequence[_Rank]) -> int:
    """The channels NCCL runs: ``channels`` when given, else ``nccl.channels_one_gpu`` when
    every node has one rank (the topology search finds one ring through the node's NIC and
    duplicates it), else ``nccl.channels``."""
    if p.channels is not None:
        return p.channels
    c = ctx.cost.nccl
    one = all(len(members) == 1 for members in _by_node(world).values())
    return c.channels_one_gpu if one else c.channels


def _plan(ctx: Ctx, p: NcclParams, world: Sequence[_Rank], algo: str, proto: Proto) -> _Plan:
    """The edges and hop latencies of ``algo`` with ``proto`` (module docstring)."""
    c = ctx.cost.nccl
    i = _PROTOS.index(proto)
    n = len(world)
    channels = _channels(ctx, p, world)
    nodes = _by_node(world)
    edges: list[tuple[float, _Edge, str]] = []
    passes = ring_passes(p.collective)
    if algo == "ring":
        rings = _rings(world, channels)
        per = max(1, channels // len(rings))
        hops: list[float] = []
        for k, ring in enumerate(rings):
            for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
                e = _edge(ctx, p, a, b, proto, per, tree=False, rails=(k, k))
                edges.append((passes * (n - 1) / n / len(rings), e, a.owner))
                if k == 0:
                    hops.append(e.latency)
        intra = max(
            (h for h, (_, e, _) in zip(hops, edges, strict=False) if not e.net), default=0.0
        )
        inter = max((h for h, (_, e, _) in zip(hops, edges, strict=False) if e.net), default=0.0)
        steps, inter_steps = passes * (n - 1), passes * (len(nodes) - 1)
        seq = [intra] * (steps - inter_steps) + [inter] * inter_steps
        return _Plan(algo, proto, c.ring_base[i], tuple(seq), tuple(edges))
    names = list(nodes)
    intra_lat, inter_lat = 0.0, 0.0
    rails = {node: _rail_ranks(members) for node, members in nodes.items()}
    for k, node in enumerate(names):
        chain = nodes[node]
        for a, b in itertools.pairwise(chain):
            for x, y in ((a, b), (b, a)):
                e = _edge(ctx, p, x, y, proto, channels, tree=True)
                edges.append((1.0, e, x.owner))
                intra_lat = max(intra_lat, e.latency)
        users, peer = rails[node], rails[names[(k + 1) % len(names)]]
        per = max(1, channels // len(users))
        for j, (a, ia) in enumerate(users):
            b, ib = peer[j % len(peer)]
            e = _edge(ctx, p, a, b, proto, per, tree=True, rails=(ia, ib))
            edges.append((1.0 / len(users), e, a.owner))
            inter_lat = max(inter_lat, e.latency)
    ppn = n // len(nodes)
    levels = math.ceil(math.log2(len(nodes))) if len(nodes) > 1 else 0
    seq = ([intra_lat] * (ppn - 1) + [inter_lat] * levels) * 2
    return _Plan(algo, proto, c.tree_base[i], tuple(seq), tuple(edges))


def _ll_over_network(ctx: Ctx, world: Sequence[_Rank]) -> bool:
    """Whether the network plugin lets NCCL use LL and LL128 across nodes. LL/LL128 read their
    flags as the data lands, so they need a transport that delivers writes in order: over one
    that does not (EFA's SRD) aws-ofi-nccl sets ``NCCL_PROTO=simple``, except on devices that
    report RDMA write (P5) (``aws/aws-ofi-nccl`` #76, PR #280). An unplugged NIC carries
    nothing and limits nothing."""
    if len(_by_node(world)) == 1:
        return True
    for rk in world:
        nics = ctx.sim.node(rk.node).machine.nics
        for rail in rk.rails:
            nic = nics.get(rail.nic)
            if (
                nic is not None
                and not nic.ordered_delivery
                and not nic.supported_access & IB_ACCESS_REMOTE_WRITE
            ):
                return False
    return True


def _nvls_capable(ctx: Ctx, world: Sequence[_Rank]) -> bool:
    """NVLink SHARP: every rank's GPU in an NVSwitch domain of NVLink 4 (Hopper's third
    generation NVSwitch reduces in the switch)."""
    for rk in world:
        dom = ctx.sim.node(rk.node).machine.nvlink_domain(rk.device)
        if dom is None or not dom.switches or dom.gen < 4:
            return False
    return True


def _algorithms(ctx: Ctx, p: NcclParams, world: Sequence[_Rank]) -> list[str]:
    """The algorithms NCCL considers: ring always; for all-reduce the tree across nodes, and
    NVLS (NVLS-tree across nodes) on NVSwitch systems that reduce in the switch."""
    out = ["ring"]
    if p.collective != "all_reduce":
        return out
    multi = len(_by_node(world)) > 1
    if multi:
        out.append("tree")
    if _nvls_capable(ctx, world) and len(world) > 1:
        out.append("nvls_tree" if multi else "nvls")
    return out


def _plan_nvls(ctx: Ctx, p: NcclParams, world: Sequence[_Rank], algo: str) -> _Plan:
    """NVLS (single node) and NVLS-tree: every GPU sends S into the NVSwitch, which reduces,
    and receives S back (its port's two directions, at ``nccl.nvls_efficiency``); across nodes
    one GPU per rail exchanges S/rails with the peer node, as in the tree. Simple only."""
    c = ctx.cost.nccl
    nodes = _by_node(world)
    edges: list[tuple[float, _Edge, str]] = []
    for rk in world:
        machine = ctx.sim.node(rk.node).machine
        dom = machine.nvlink_domain(rk.device)
        assert dom is not None
        rate = nvlink_rate(machine.cost, dom.gen, dom.links, engine="sm")
        for direction in ("tx", "rx"):
            link = ctx.sim.links(rk.node, [LinkUse(f"nvlink:{rk.device}", direction)])
            edge = _Edge(tuple(link), rate * c.nvls_efficiency, False, c.nvls_latency, "NVLS")
            edges.append((1.0, edge, rk.owner))
    hops = [c.nvls_latency]
    if algo == "nvls_tree":
        names = list(nodes)
        channels = _channels(ctx, p, world)
        rails = {node: _rail_ranks(members) for node, members in nodes.items()}
        inter = 0.0
        for k, node in enumerate(names):
            users, peer = rails[node], rails[names[(k + 1) % len(names)]]
            per = max(1, channels // len(users))
            for j, (a, ia) in enumerate(users):
                b, ib = peer[j % len(peer)]
                e = _edge(ctx, p, a, b, "Simple", per, tree=True, rails=(ia, ib))
                lat = c.nvls_tree_net + (e.latency - c.tree_net[2])
                edges.append((1.0 / len(users), e, a.owner))
                inter = max(inter, lat)
        levels = math.ceil(math.log2(len(nodes)))
        hops += [inter] * (2 * levels)
    return _Plan(algo, "Simple", 0.0, tuple(hops), tuple(edges))


def _choose(plans: Sequence[_Plan], size: int) -> _Plan:
    """NCCL's choice (``ncclTopoTuneModel`` + ``getAlgoInfo``): least predicted time."""
    return min(plans, key=lambda pl: pl.predicted(size))


def _iteration(ctx: Ctx, p: NcclParams, coll: Collective[_Rank], plan: _Plan, size: int) -> Gen:
    """One all-reduce call: the launches, the plan's latency (every hop jittered), then the data
    as flows, every member's at once (:meth:`Collective.submit`)."""
    cost = ctx.cost
    me = ctx.proc.comm
    spread = cost.gpucopy.jitter
    t0 = ctx.now
    launch = sum(jittered(ctx, spread, cost.nccl.launch) for _ in range(p.gpus_per_thread))
    latency = launch + plan.base + sum(jittered(ctx, spread, h) for h in plan.hops)
    mine = [(share * size, e) for share, e, owner in plan.edges if owner == me]
    n = len(coll.ranks)
    steps = ring_passes(p.collective) * (n - 1)
    phases = steps if (p.model == "steps" and plan.algo == "ring" and n > 1) else 1
    for k in range(phases):
        flows: list[FlowSpec] = [
            (nbytes / phases, list(e.links), None if e.cap == math.inf else e.cap, f"{me}:nccl")
            for nbytes, e in mine
        ]
        yield coll.submit(me, flows, latency if k == 0 else 0.0)
    elapsed = ctx.now - t0
    for nbytes, _ in mine:
        ctx.stats.record_transfer(nbytes, elapsed)
