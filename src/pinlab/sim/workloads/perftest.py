"""``perftest``: the linux-rdma perftest tools (``ib_{send,write,read}_{lat,bw}``) as a
message-level workload between two nodes.

Two tenants take part: a ``server`` (``role = "server"``) and a ``client`` on another node,
joined by ``group``. Each allocates its buffer -- host memory (``ibv_reg_mr``) or, with
``device``, device memory exported as a dma-buf and registered with ``ibv_reg_dmabuf_mr``
(perftest's ``--use_cuda_dmabuf`` / ``--use_rocm_dmabuf``, pinlab's ``--use_dmabuf``), so the
kernel model decides whether the NIC reaches it peer to peer or through host memory -- and
registers it on its NIC (the registration costs its driver's model, ``reg.<model>``). Then the
client runs the test, size by size, in simulated time.

**Bandwidth tests** (``kind = "bw"``): ``iterations`` messages per QP on ``qps`` QPs, posted
round robin by one thread, each QP with at most ``tx_depth`` unacknowledged messages, every
``cq_mod``-th signalled (RDMA READs also at most ``max_rd_atom`` per QP). Each message goes
through the stages of :mod:`pinlab.platform.rdma_model` as a tandem queue -- the recurrence
``start = max(this stage free, the message's arrival from the previous stage + delay)``:
post (one CPU thread), the QP's WQE processing, the NIC's message-rate ceiling, the PCIe read
of the payload (shared by the NIC's QPs), the sending port, the PCIe write at the far end, the
ACK back and the CQE polled. Service times and delays are drawn around the mechanism's values
(log-normal, coefficient of variation ``rdma.jitter``) from the tenant's seeded generator, so
different seeds give different runs and the same seed the same bytes. BW peak, BW average and
MsgRate are computed from the post and completion times as perftest computes them
(``print_report_bw``).

**Latency tests** (``kind = "lat"``): ``iterations`` ping-pongs (RDMA WRITE of the last byte
polled by the other side, SEND/RECV polled on the receive queue) or READs one at a time; the
samples are post-to-post times (halved for write and send, as perftest reports half a round
trip), with a host interruption (``rdma.tail_prob``, ``rdma.tail_time``) now and then; the
statistics are perftest's (``print_report_lat``: sorted, the top two dropped, the median, the
truncated-integer standard deviation ...).

The rows are in ``result.rows`` (one :class:`BwRow` or :class:`LatRow` per size);
``pinlab bench perftest`` prints them as perftest does. The client's bytes count in
``tenant.<t>.bytes`` when each size's run ends. The messages are modelled stage by stage, not
as flows of the network: the links' byte counters and utilisation do not see them.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from pydantic import model_validator

from pinlab.drivers.rdma import MemoryRegion
from pinlab.platform.rdma_model import (
    LatencyParts,
    MessagePath,
    NicPort,
    Op,
    ServiceTimes,
    latency_parts,
    serialization,
    service_times,
)
from pinlab.platform.topology import Machine
from pinlab.sim.engine import Ctx
from pinlab.sim.metrics import metric
from pinlab.sim.workloads.base import Gen, ToolTable, WorkloadParams, idle, param
from pinlab.sim.workloads.nic import nic_access
from pinlab.sim.workloads.registration import RdmaResult, mr_access, register_dmabuf
from pinlab.units import Size

__all__ = [
    "ALL_SIZES",
    "BwRow",
    "LatRow",
    "PerftestParams",
    "PerftestResult",
    "perftest",
]

ALL_SIZES = tuple(1 << i for i in range(1, 24))
"""perftest ``-a``: 2 B … 8 MiB in powers of two (``for (i = 1; i < 24; ++i)``)."""

LAT_MEASURE_TAIL = 2
"""Samples perftest drops from the top of the sorted latencies (``LAT_MEASURE_TAIL``)."""


class PerftestParams(WorkloadParams):
    """``perftest``: one side of an ``ib_<test>_<kind>`` run (module docstring)."""

    workload: Literal["perftest"] = "perftest"
    role: Literal["client", "server"] = param(
        "client", "client (measures) or server (serves); both join one group"
    )
    test: Literal["send", "write", "read"] = param("write", "the verb: SEND, RDMA WRITE, READ")
    kind: Literal["bw", "lat"] = param("bw", "bandwidth or latency test")
    sizes: list[Size] = param(["64KiB"], "message sizes, one row each (-s, or -a's sizes)")
    iterations: int = param(1000, "iterations per size and QP (-n)", ge=5)
    tx_depth: int = param(128, "outstanding messages per QP (-t)", ge=1, le=15000)
    rx_depth: int = param(512, "receive WQEs posted per QP for SEND (-r)", ge=1)
    qps: int = param(1, "queue pairs (-q)", ge=1, le=16384)
    cq_mod: int = param(100, "every cq_mod-th WQE is signalled (-Q)", ge=1)
    mtu: int | None = param(None, "MTU (-m; default the port's active MTU)")
    inline_size: int = param(0, "payloads up to this size travel in the WQE (-I)", ge=0)
    out_reads: int | None = param(None, "outstanding RDMA READs per QP (-o; default the NIC's)")
    device: str | None = param(
        None,
        "device whose memory holds the buffer (dma-buf MR); None: host memory",
        ref="device",
        ref_optional=True,
    )
    nic: str | None = param(None, "the RDMA NIC (-d; default the node's first)", ref="nic")
    group: str = param("perftest", "the client and its server share a group name")

    def events(self, duration: float) -> float:
        # every message (a latency test: both trips) is computed one by one, on every QP
        return float(
            len(self.sizes) * self.iterations * self.qps * (2 if self.kind == "lat" else 1)
        )

    @model_validator(mode="after")
    def _check(self) -> PerftestParams:
        if not self.sizes:
            raise ValueError("expected at least one message size, found none")
        if self.mtu is not None and self.mtu not in (256, 512, 1024, 2048, 4096):
            raise ValueError(f"expected an MTU of 256, 512, 1024, 2048 or 4096, found {self.mtu}")
        return self


@dataclass(frozen=True, slots=True)
class BwRow:
    """One line of a bandwidth test: bytes per message, messages, peak and average bytes per
    second (perftest's BW peak / BW average before the unit), million messages per second."""

    size: int
    iterations: int
    peak: float
    average: float
    msg_rate: float


@dataclass(frozen=True, slots=True)
class LatRow:
    """One line of a latency test, microseconds (perftest's ``t_min`` … ``99.9%``)."""

    size: int
    iterations: int
    t_min: float
    t_max: float
    t_typical: float
    t_avg: float
    t_stdev: float
    p99: float
    p999: float


@dataclass(slots=True)
class PerftestResult(RdmaResult, ToolTable[BwRow | LatRow]):
    """What ``perftest`` reports: the client's rows and headline metrics, and the port the
    test ran on."""

    sizes: int | None = metric("count", "message sizes measured")
    bw_average: float | None = metric("B/s", "BW average of the largest size (bandwidth tests)")
    msg_time: float | None = metric(
        "s", "seconds per message of the smallest size, 1 / MsgRate (bandwidth tests)"
    )
    t_typical: float | None = metric("s", "typical latency of the smallest size (latency tests)")
    p2p: int | None = metric("count", "1 if the NIC reaches the buffer peer to peer")
    link_layer: str = ""
    mtu: int = 0
    out_reads: int = 0
    device: str = ""


@dataclass(eq=False, slots=True)
class _Side:
    """One tenant's end: its NIC, its buffer's memory (a device, or ``host:<s>``) and MR."""

    node: str
    machine: Machine
    nic: str
    memory: str
    owner: str
    mr: MemoryRegion | None = None


def perftest(ctx: Ctx, p: PerftestParams, r: PerftestResult) -> Gen:
    """One side of a perftest run (module docstring)."""
    machine = ctx.machine
    t0 = ctx.now
    nic = p.nic or (machine.spec.nics[0].name if machine.spec.nics else None)
    if nic is None:
        raise ValueError(f"perftest: platform {machine.name} has no RDMA NIC")
    side = _Side(ctx.node.name, machine, nic, machine.host_of(nic), ctx.proc.comm)
    length = 2 * max(max(p.sizes), 4096) * p.qps
    if p.device is not None:
        handle = yield from ctx.call(ctx.proc.gem_create, p.device, length, "vram")
        fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
        mr, _cost = yield from register_dmabuf(ctx, nic, fd, length)
        side.mr = mr
        access = yield from nic_access(ctx, mr, 1, write=False)
        side.memory = p.device if access.p2p else machine.host_of(nic)
        r.p2p = 1 if access.p2p else 0
    else:
        ctx.call_nowait(ctx.proc.ibv_reg_mr, length, mr_access(ctx, nic), nic=nic)
        yield ctx.sleep(ctx.cost.reg.host.fixed + ctx.cost.reg.host.per_byte * length)
        r.p2p = 0
    coll = ctx.sim.collectives.group(p.group, 2)
    coll.join(ctx.proc.comm)
    coll.add_ranks(ctx.proc.comm, [side])
    yield coll.barrier(ctx.proc.comm)
    r.setup_time = ctx.now - t0
    if p.role == "server":
        yield coll.barrier(ctx.proc.comm)  # the client's run
        yield from idle(ctx)
        return
    peer = next((s for s in coll.ranks if s is not side), None)
    if peer is None:
        raise ValueError("perftest: the client found no server in its group")
    r.data_start = ctx.now
    port = machine.nic_port_model(nic)
    r.link_layer = port.link_layer
    r.mtu = port.mtu if p.mtu is None else min(p.mtu, port.mtu)
    r.out_reads = p.out_reads or port.model.max_rd_atom
    r.device = side.memory
    for size in p.sizes:
        mp = _message_path(ctx, side, peer, p.test, r.mtu)
        inline = p.kind == "lat" and size <= p.inline_size
        row: BwRow | LatRow
        if p.kind == "bw":
            row, elapsed = _bw_run(ctx, mp, p, size, r.out_reads)
            moved = size * p.iterations * p.qps
        else:
            row, elapsed = _lat_run(ctx, mp, p, size, inline)
            moved = size * p.iterations
        r.rows.append(row)
        yield ctx.sleep(elapsed)
        ctx.stats.record_transfer(moved, elapsed)  # the bytes count once they have arrived
    r.sizes = len(r.rows)
    first, last = r.rows[0], r.rows[-1]
    if isinstance(last, BwRow) and isinstance(first, BwRow):
        r.bw_average = last.average
        r.msg_time = 1e-6 / first.msg_rate
    elif isinstance(first, LatRow):
        r.t_typical = first.t_typical * 1e-6
    r.data_end = ctx.now
    yield coll.barrier(ctx.proc.comm)
    yield from idle(ctx)


def _message_path(ctx: Ctx, client: _Side, server: _Side, op: Op, mtu: int) -> MessagePath:
    """The client's and server's NICs and buffers as a :class:`MessagePath` for ``op``."""
    cport = replace(client.machine.nic_port_model(client.nic), mtu=mtu)
    sport: NicPort = replace(server.machine.nic_port_model(server.nic), mtu=mtu)
    c_buf = client.machine.pcie_path(client.nic, client.memory)
    s_buf = server.machine.pcie_path(server.nic, server.memory)
    src, dst = (s_buf, c_buf) if op == "read" else (c_buf, s_buf)
    cluster = ctx.sim.cluster
    fabric = cluster.spec.fabric.latency if cluster is not None else 0.0
    return MessagePath(
        requester=cport,
        responder=sport,
        src=src,
        dst=dst,
        requester_host=client.machine.pcie_path(client.nic, client.machine.host_of(client.nic)),
        fabric_latency=fabric,
    )


# -- random service times ------------------------------------------------------------------


class _Jitter:
    """Log-normal multipliers with mean 1 and coefficient of variation ``cv``, drawn in
    batches from the tenant's seeded ``jitter`` stream (``ctx.random``: reproducible from the
    run seed, asked for only when a number is drawn). ``draw(x, n)`` gives ``n`` values
    around ``x``."""

    __slots__ = ("ctx", "mu", "sigma")

    def __init__(self, ctx: Ctx, cv: float) -> None:
        self.ctx = ctx
        self.sigma = math.sqrt(math.log1p(cv * cv)) if cv > 0 else 0.0
        self.mu = -0.5 * self.sigma * self.sigma

    @property
    def gen(self) -> np.random.Generator:
        return self.ctx.random("jitter")

    def draw(self, x: float, n: int) -> list[float]:
        if self.sigma == 0.0 or x == 0.0 or math.isinf(x):
            return [x] * n
        out: list[float] = (x * self.gen.lognormal(self.mu, self.sigma, n)).tolist()
        return out


# -- bandwidth -------------------------------------------------------------------------------


def _bw_run(
    ctx: Ctx, mp: MessagePath, p: PerftestParams, size: int, out_reads: int
) -> tuple[BwRow, float]:
    """One size of a bandwidth test: the tandem-queue recurrence (module docstring); returns
    the row and the simulated seconds it took."""
    op: Op = p.test
    cost = ctx.cost
    st = service_times(cost, mp, op, size)
    lp = latency_parts(cost, mp, op)
    if math.isinf(st.bottleneck(p.qps)) or math.isinf(lp.read):
        raise ValueError(
            f"perftest: the PCIe path of {mp.requester.name} cannot carry "
            f"{'reads' if op != 'read' else 'writes'} of this memory (its host bridge does not "
            "forward them peer to peer)"
        )
    j = _Jitter(ctx, cost.rdma.jitter)
    qps, n = p.qps, p.iterations
    total = n * qps
    depth = min(p.tx_depth, n)
    cq_mod = min(p.cq_mod, depth)
    rx_depth = min(p.rx_depth, n)
    first_pkt = min(size, mp.requester.mtu) / size if size else 1.0
    # per-QP state: the QP stage, completions seen, READ data placed, the receiver's side
    q_free = [0.0] * qps
    qread_free = [0.0] * qps
    seen_q: list[list[float]] = [[] for _ in range(qps)]
    placed_q: list[list[float]] = [[] for _ in range(qps)]
    ready_q: list[list[float]] = [[] for _ in range(qps)]  # payload read done, per QP
    slots = st.read_slots
    rq_free = [0.0] * qps
    reposted: list[list[float]] = [[] for _ in range(qps)]
    post_free = nic_free = read_free = wire_free = req_wire_free = write_free = 0.0
    rpost_free = 0.0
    tposted = np.empty(total)
    completions: list[tuple[float, int]] = []
    k_of = [0] * qps
    d = {
        name: j.draw(value, total)
        for name, value in (
            ("post", st.post),
            ("doorbell", lp.doorbell),
            ("qp", st.qp),
            ("nic", st.nic),
            ("tx", lp.tx),
            ("read", st.read),
            ("qp_read", st.qp_read),
            ("read_lat", lp.read),
            ("wire", st.wire),
            ("rx", lp.rx),
            ("recv_qp", st.recv_qp),
            ("write", st.write),
            ("write_lat", lp.write),
            ("recv_post", st.recv_post),
            ("ack", lp.ack),
            ("completion", lp.completion),
        )
    }
    for m in range(total):
        q = m % qps
        k = k_of[q]
        k_of[q] += 1
        gate = 0.0
        if k >= depth:
            # a slot frees when the signalled completion covering message k - depth is polled
            need = k - depth
            sig = min((need // cq_mod + 1) * cq_mod - 1, n - 1)
            gate = seen_q[q][sig]
        start = max(post_free, gate)
        tposted[m] = start
        post_free = start + d["post"][m]
        arrive = post_free + d["doorbell"][m] + lp.wqe_fetch
        q_end = max(q_free[q], arrive) + d["qp"][m]
        q_free[q] = q_end
        nic_end = max(nic_free, q_end) + d["nic"][m]
        nic_free = nic_end
        t_tx = nic_end + d["tx"][m]
        if op == "read":
            if k >= out_reads:  # at most out_reads READs outstanding per QP
                t_tx = max(t_tx, placed_q[q][k - out_reads])
            req_end = max(req_wire_free, t_tx) + st.request_wire
            req_wire_free = req_end
            t_tx = req_end + lp.request
            extra = lp.responder_tx
        else:
            extra = 0.0
        r_start = max(read_free, t_tx, qread_free[q])
        if k >= slots and st.read > 0:  # the QP's read slots: message k - slots is read
            r_start = max(r_start, ready_q[q][k - slots])
        r_busy = d["read"][m]
        read_free = r_start + r_busy
        # the QP's own read window moves the payload at its rate (st.qp_read per message)
        r_busy = max(r_busy, d["qp_read"][m])
        r_end = r_start + r_busy
        qread_free[q] = r_end
        read_lat = d["read_lat"][m]
        data_ready = r_end + read_lat + extra
        ready_q[q].append(r_end + read_lat)
        first_ready = r_start + r_busy * first_pkt + read_lat + extra
        w_busy = d["wire"][m]
        wire_end = max(max(wire_free, first_ready) + w_busy, data_ready + w_busy * first_pkt)
        wire_free = wire_end
        arrive_far = wire_end + lp.fabric + d["rx"][m]
        if op == "send":
            rq_end = max(rq_free[q], arrive_far) + d["recv_qp"][m]
            rq_free[q] = rq_end
            if k >= rx_depth:  # end-to-end credits: a posted receive for every SEND
                rq_end = max(rq_end, reposted[q][k - rx_depth])
            arrive_far = rq_end
        x_busy = d["write"][m]
        x_end = max(write_free + x_busy, arrive_far + x_busy * first_pkt)
        write_free = x_end
        placed = x_end + d["write_lat"][m]
        if op == "send":
            # the server polls the receive completion and posts a new receive
            rpost_free = max(rpost_free, placed + lp.completion + lp.poll) + d["recv_post"][m]
            reposted[q].append(rpost_free)
        if op == "read":
            placed_q[q].append(placed)
            seen = placed + d["completion"][m] + lp.poll
        else:
            seen = x_end + d["ack"][m] + d["completion"][m] + lp.poll
        seen_q[q].append(seen)
        if (k + 1) % cq_mod == 0 or k == n - 1:
            completions.append((seen, k % cq_mod + 1))
    comp = sorted(completions)
    tcompleted = np.empty(total)
    count = 0
    for t, c in comp:
        tcompleted[count : count + c] = t
        count += c
    row = _bw_row(size, total, tposted, tcompleted, cq_mod, peak=total <= 20000)
    return row, float(tcompleted[-1] - tposted[0])


def _bw_row(
    size: int,
    total: int,
    tposted: np.ndarray,
    tcompleted: np.ndarray,
    cq_mod: int,
    *,
    peak: bool,
) -> BwRow:
    """perftest's BW peak, BW average (bytes/s) and MsgRate (Mpps) from post and completion
    times (``print_report_bw``): the average over the whole run; the peak over every window
    from a post to a polled completion at a ``cq_mod`` boundary (and the last one)."""
    span = float(tcompleted[total - 1] - tposted[0])
    average = size * total / span
    msg_rate = total / span / 1e6
    best = span
    if peak:
        ends = list(range(cq_mod - 1, total, cq_mod))
        if total % cq_mod:
            ends.append(total - 1)
        ends_a = np.asarray(ends)
        tc = tcompleted[ends_a]
        for i in range(total):
            lo = bisect_left(ends, i)
            if lo >= len(ends):
                break
            per = (tc[lo:] - tposted[i]) / (ends_a[lo:] - i + 1)
            best = min(best, float(per.min()))
    return BwRow(size, total, size / best if peak else 0.0, average, msg_rate)


# -- latency ----------------------------------------------------------------------------------


def _one_way(st: ServiceTimes, lp: LatencyParts, op: Op, size: int, mtu: int) -> tuple[float, ...]:
    """The parts of one message's trip in a latency test, in order (each drawn with jitter):
    the post, doorbell, send pipeline and PCIe read latency, the bytes (:func:`serialization`),
    the fabric and receive pipeline, the PCIe write latency and the poll that sees it; SEND's
    receiver also posts a new receive before it answers; a READ's request crosses the fabric
    first and its response leaves the responder's pipeline."""
    data = serialization(st, size, mtu)
    head = (lp.post, lp.doorbell, lp.wqe_fetch, lp.tx)
    tail = (lp.fabric, lp.rx, lp.write, lp.poll)
    if op == "read":
        return (*head, st.request_wire, lp.request, lp.read, data, lp.responder_tx, *tail)
    if op == "send":
        return (*head, lp.read, data, *tail, lp.post)
    return (*head, lp.read, data, *tail)


def _lat_run(
    ctx: Ctx, mp: MessagePath, p: PerftestParams, size: int, inline: bool
) -> tuple[LatRow, float]:
    """One size of a latency test: ``iterations`` samples of post-to-post time (two one-way
    trips for WRITE and SEND, one round trip for READ), with perftest's statistics."""
    op: Op = p.test
    cost = ctx.cost
    st = service_times(cost, mp, op, size, inline=inline)
    lp = latency_parts(cost, mp, op, inline=inline)
    parts = _one_way(st, lp, op, size, mp.requester.mtu)
    if any(math.isinf(x) for x in parts):
        raise ValueError(
            f"perftest: the PCIe path of {mp.requester.name} cannot carry this memory's "
            "traffic (its host bridge does not forward it peer to peer)"
        )
    j = _Jitter(ctx, cost.rdma.jitter)
    tail_p, tail_t = cost.rdma.tail_prob, cost.rdma.tail_time
    trips = 1 if op == "read" else 2
    n = p.iterations * trips
    trip = np.zeros(n)
    for x in parts:
        trip += np.asarray(j.draw(x, n))
    if tail_p > 0:
        hit = j.gen.random(n) < tail_p
        trip += np.where(hit, j.gen.exponential(tail_t, n), 0.0)
    rtt = trip.reshape(p.iterations, trips).sum(axis=1)
    samples = np.concatenate(([0.0], np.cumsum(rtt)[:-1]))
    row = _lat_row(size, p.iterations, samples, 1 if op == "read" else 2)
    return row, float(rtt.sum())


def _lat_row(size: int, iters: int, tposted: np.ndarray, rtt_factor: int) -> LatRow:
    """perftest's latency statistics (``print_report_lat``), microseconds: ``iters − 1``
    post-to-post deltas, sorted, the top :data:`LAT_MEASURE_TAIL` dropped; median as
    ``get_median``; the standard deviation of integer-truncated deviations; 99 % and 99.9 %
    at ``⌈0.99 n⌉`` and ``⌈0.999 n⌉``."""
    delta = np.sort(np.diff(tposted)) * 1e6 / rtt_factor
    n = len(delta) - LAT_MEASURE_TAIL
    # get_median: the mean of the two middle samples when n is even
    median = (delta[n // 2] + delta[n // 2 - 1]) / 2 if n % 2 == 0 else delta[n // 2]
    kept = delta[:n]
    avg = float(kept.mean())
    dev = np.trunc(avg - kept)
    stdev = math.sqrt(float((dev * dev).sum()) / n)
    return LatRow(
        size,
        iters,
        float(delta[0]),
        float(delta[n]),
        float(median),
        avg,
        stdev,
        float(delta[math.ceil(n * 0.99)]),
        float(delta[math.ceil(n * 0.999)]),
    )
