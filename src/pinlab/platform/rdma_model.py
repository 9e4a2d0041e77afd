"""RDMA NIC mechanisms: packets and wire bytes, per-message service times, the steady-state
stream rate of a window of messages, and the latency of one message.

Pure functions of the cost model (``nic.<model>.*``, ``rdma.*``, ``pcie.*``) and a message
path (:class:`MessagePath`: the two NIC ports and the PCIe paths to the source and the
destination memory, :meth:`Machine.pcie_path <pinlab.platform.topology.Machine.pcie_path>`);
no time, no simulator. The message-level simulation (``sim/workloads/perftest.py``) runs the
per-message recurrence on :func:`service_times` and :func:`latency_parts`; flow-level transfers
(``sim/workloads/nic.py``) use :func:`stream_rate` and the fixed part of :func:`latency_parts`.

**Wire.** A message of ``size`` bytes is ``⌈size / MTU⌉`` packets (at least one). Every packet
carries the link layer's headers (:func:`packet_overhead`): InfiniBand LRH + BTH + ICRC + VCRC
(26 B; + GRH 40 B with ``rdma.grh``), RoCEv2 Ethernet + IP + UDP + BTH + ICRC + FCS plus the
preamble and inter-frame gap (82 B over IPv4); EFA's SRD is framed like RoCEv2 [assumption].
A WRITE's first packet adds a RETH (16 B); a READ sends one request packet (headers + RETH)
the other way and its first/last/only response packets carry an AETH (4 B). InfiniBand links
lose ``1 − rdma.ib_link_eff`` more to link-level packets. :func:`wire_rate` is the payload
rate of long messages: 100G IB at MTU 4096 → 98.4 Gb/s.

**A message's stages** (:func:`service_times`), each a server that takes one message at a
time:

1. *post*: the requester's CPU builds the WQE and rings the doorbell, ``rdma.post_cost`` --
   one thread posts every QP, so this stage is shared by all QPs;
2. *qp*: the NIC processes the QP's WQE, ``nic.<model>.qp_msg_cost`` -- one per QP;
3. *nic*: the NIC's message-rate ceiling, ``1 / nic.<model>.msg_rate`` -- shared;
4. *read*: the NIC that has the data reads it from its memory over PCIe: size / the path's
   read rate (:func:`pinlab.platform.pcie_model.read_rate` with the NIC's ``read_tags``),
   shared by the NIC's QPs. Each QP is also a read stream of its own: to a device BAR it
   keeps at most ``nic.<model>.p2p_read_tags`` requests outstanding (to host memory the NIC's
   tags), so one QP reads at most ``p2p_read_tags × MRRS / read latency`` (:func:`qp_read_rate`:
   the single-QP plateau of a NIC reading GPU memory; more QPs read more), and it reads the
   payloads of at most ``nic.<model>.qp_read_slots`` messages at a time, each for the read
   latency plus its bytes at the QP's rate -- so one QP moves at most ``slots × size /
   (latency + size / rate)``, which bends the curve below the plateau -- skipped when the
   payload is inline in the WQE;
5. *wire*: the message's packets on the sending port, wire bytes / line rate;
6. *write*: the receiving NIC writes the data to its memory, size / posted-write rate;
7. for a SEND the receiver also consumes a receive WQE (its qp stage) and its CPU polls the
   receive completion and posts a new receive (its post stage).

Each stage's latency (the first byte's delay, not its occupancy) is in :func:`latency_parts`:
doorbell (``rdma.mmio_latency``), WQE fetch (a read of host memory, saved by BlueFlame for one
message on an idle queue), the NIC pipelines (``tx_latency``/``rx_latency``), the PCIe read
latency of the source (:func:`pinlab.platform.pcie_model.read_latency`), the fabric, the
posted-write latency of the destination, the ACK back and the completion (a CQE written to
host memory, then the CPU's poll, ``rdma.poll_latency``).

**Stream rate** (:func:`stream_rate`): with ``qps`` QPs each keeping at most ``window``
messages outstanding (RDMA READs also at most ``nic.<model>.max_rd_atom``), messages leave at
``min(1 / slowest stage, qps × window / round trip)`` -- the plateau is the slowest of wire,
PCIe read and PCIe write; small messages are bound by the post, per-QP and message-rate stages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

from pinlab.platform import pcie_model
from pinlab.platform.pcie_model import PciePath

if TYPE_CHECKING:
    from pinlab.platform.cost import CostModel, LinkLayer, NicModel

__all__ = [
    "EndRate",
    "LatencyParts",
    "MessagePath",
    "NicPort",
    "Op",
    "ServiceTimes",
    "latency_parts",
    "message_latency",
    "packet_overhead",
    "packets",
    "qp_read_rate",
    "read_tags",
    "recv_end",
    "send_end",
    "serialization",
    "service_times",
    "stream_rate",
    "wire_bytes",
    "wire_rate",
]

Op = Literal["send", "write", "read"]
"""The RDMA operation: SEND/RECV, RDMA WRITE, RDMA READ."""


@dataclass(frozen=True, slots=True)
class NicPort:
    """One NIC as the mechanism sees it (:meth:`Machine.nic_port_model
    <pinlab.platform.topology.Machine.nic_port_model>`): its model's parameters and the line
    rate (bytes/s), link layer and MTU it runs at."""

    name: str
    model_name: str
    model: NicModel
    line_rate: float
    link_layer: LinkLayer
    mtu: int


@dataclass(frozen=True, slots=True)
class MessagePath:
    """Where one RDMA message's bytes go.

    ``requester`` posts the work request; ``responder`` is the other NIC. ``src`` is the PCIe
    path from the NIC that *reads* the payload to the source memory (the requester's for
    SEND/WRITE, the responder's for READ), ``dst`` from the NIC that *writes* it to the
    destination memory; ``requester_host`` the requester NIC's path to its own host memory
    (WQEs and CQEs live there). ``fabric_latency`` is one way across cables and switches."""

    requester: NicPort
    responder: NicPort
    src: PciePath
    dst: PciePath
    requester_host: PciePath
    fabric_latency: float = 0.0


@dataclass(frozen=True, slots=True)
class ServiceTimes:
    """Seconds each stage is busy with one message (module docstring): ``post``, ``qp`` and
    ``nic`` at the requester, ``read`` (0 when inline), ``wire`` (data packets on the sending
    port), ``request_wire`` (a READ's request packet on the requester's port), ``write`` at
    the destination, and for SEND the receiver's ``recv_qp`` and ``recv_post``; ``read_hold``,
    ``read_slots`` and ``qp_read`` are the per-QP read stream's (module docstring, stage 4)."""

    post: float
    qp: float
    nic: float
    read: float
    wire: float
    request_wire: float
    write: float
    recv_qp: float
    recv_post: float
    read_hold: float = 0.0
    read_slots: int = 1
    qp_read: float = 0.0

    def bottleneck(self, qps: int = 1) -> float:
        """Seconds per message of the slowest stage with ``qps`` QPs sharing the NIC (the
        per-QP stages run in parallel across QPs; a QP keeps at most ``read_slots`` messages'
        payload reads in flight, each for ``read_hold``, and reads at most at its own window's
        rate, ``qp_read`` per message)."""
        hold = self.read_hold / max(self.read_slots, 1)
        per_qp = max(self.qp, self.recv_qp, hold, self.qp_read) / max(qps, 1)
        shared = max(
            self.post,
            self.nic,
            self.read,
            self.wire,
            self.request_wire,
            self.write,
            self.recv_post,
        )
        return max(per_qp, shared)


@dataclass(frozen=True, slots=True)
class LatencyParts:
    """The delays of one message on idle hardware, seconds (module docstring); the stages'
    service times of that message come on top (:func:`message_latency`).

    ``post`` (the CPU's ibv_post_send on an idle thread), ``doorbell`` (CPU store to the
    NIC), ``wqe_fetch`` (0 with BlueFlame on an idle queue),
    ``tx`` (requester NIC pipeline), ``request`` (a READ request's trip: fabric, the
    responder's receive pipeline; 0 otherwise), ``read`` (PCIe read latency of the source; 0
    when inline), ``responder_tx`` (a READ response leaves the responder's pipeline),
    ``fabric`` (the data's trip), ``rx`` (receiving NIC pipeline), ``write`` (PCIe posted-write
    latency at the destination), ``ack`` (the RC ACK back to the requester: 0 for READ, whose
    data is the answer), ``completion`` (the CQE written to host memory) and ``poll`` (the CPU
    sees it)."""

    post: float
    doorbell: float
    wqe_fetch: float
    tx: float
    request: float
    read: float
    responder_tx: float
    fabric: float
    rx: float
    write: float
    ack: float
    completion: float
    poll: float

    @property
    def total(self) -> float:
        """Sum of every delay."""
        return float(sum(getattr(self, f.name) for f in fields(self)))

    @property
    def to_placement(self) -> float:
        """Delays until the data is in the destination memory (a one-way latency: what
        ``ib_write_lat``'s receiver waits for before it polls)."""
        return (
            self.post
            + self.doorbell
            + self.wqe_fetch
            + self.tx
            + self.request
            + self.read
            + self.responder_tx
            + self.fabric
            + self.rx
            + self.write
        )


# -- wire -------------------------------------------------------------------------------------


def packet_overhead(cost: CostModel, link_layer: LinkLayer) -> int:
    """Line bytes every packet adds to its payload (base and transport headers, CRCs; for
    Ethernet also the preamble and inter-frame gap)."""
    h = cost.rdma.hdr
    if link_layer == "ib":
        grh = h.grh if cost.rdma.grh else 0
        return h.lrh + grh + h.bth + h.icrc + h.vcrc
    ip = h.ipv4 if cost.rdma.roce_ip == "ipv4" else h.ipv6
    return h.preamble + h.eth + ip + h.udp + h.bth + h.icrc + h.fcs + h.ifg


def packets(size: int, mtu: int) -> int:
    """Packets of one message: ``⌈size / mtu⌉``, at least one (a zero-byte message is one)."""
    return max(1, -(-size // mtu))


def _line(cost: CostModel, port: NicPort) -> float:
    """Bytes per second of the port's line available to packets."""
    eff = cost.rdma.ib_link_eff if port.link_layer == "ib" else 1.0
    return port.line_rate * eff


def wire_bytes(cost: CostModel, port: NicPort, op: Op, size: int) -> tuple[int, int]:
    """Line bytes of one message: (data direction, request direction). WRITE: the payload in
    packets, a RETH on the first; SEND: no RETH; READ: the response packets (AETH on the first
    and last, one if only one) and one request packet (RETH) the other way. ACKs are
    coalesced and not counted."""
    h = cost.rdma.hdr
    per = packet_overhead(cost, port.link_layer)
    n = packets(size, port.mtu)
    data = size + n * per
    if op == "write":
        return data + h.reth, 0
    if op == "send":
        return data, 0
    return data + h.aeth * (1 if n == 1 else 2), per + h.reth


def wire_rate(cost: CostModel, port: NicPort) -> float:
    """Payload bytes per second of long messages on the port (the flow network's
    ``net:<nic>`` capacity): line × MTU / (MTU + packet overhead)."""
    per = packet_overhead(cost, port.link_layer)
    return _line(cost, port) * port.mtu / (port.mtu + per)


# -- stages ------------------------------------------------------------------------------------


def read_tags(port: NicPort, path: PciePath) -> int:
    """Outstanding PCIe reads one QP of the NIC issues on ``path``: ``p2p_read_tags`` to a
    device BAR, the NIC's ``read_tags`` to host memory (shared with its other QPs)."""
    return port.model.p2p_read_tags if path.target_kind == "device" else port.model.read_tags


def qp_read_rate(cost: CostModel, port: NicPort, path: PciePath) -> float:
    """Bytes/s one QP reads from the memory at the end of ``path``: the PCIe read rate with the
    QP's window (:func:`read_tags`), at most the NIC's (its ``read_tags`` for all QPs)."""
    own = pcie_model.read_rate(cost, path, read_tags(port, path))
    return min(own, pcie_model.read_rate(cost, path, port.model.read_tags))


def _reader(mp: MessagePath, op: Op) -> NicPort:
    return mp.responder if op == "read" else mp.requester


def _writer(mp: MessagePath, op: Op) -> NicPort:
    return mp.requester if op == "read" else mp.responder


def service_times(
    cost: CostModel, mp: MessagePath, op: Op, size: int, *, inline: bool = False
) -> ServiceTimes:
    """Seconds each stage is busy with one message of ``size`` bytes (module docstring).
    ``inline``: the payload travels in the WQE (no PCIe read)."""
    req = mp.requester.model
    reader = _reader(mp, op)
    if inline or size == 0:
        read = qp_read = 0.0
    else:
        rate = pcie_model.read_rate(cost, mp.src, reader.model.read_tags)
        read = math.inf if rate <= 0 else size / rate
        own = qp_read_rate(cost, reader, mp.src)
        qp_read = math.inf if own <= 0 else size / own
    data, request = wire_bytes(cost, reader, op, size)
    wire = data / _line(cost, reader)
    request_wire = request / _line(cost, mp.requester) if request else 0.0
    wrate = pcie_model.path_write_rate(cost, mp.dst)
    write = 0.0 if size == 0 else (math.inf if wrate <= 0 else size / wrate)
    recv = op == "send"
    hold = 0.0 if read == 0.0 else pcie_model.read_latency(cost, mp.src) + qp_read
    return ServiceTimes(
        post=cost.rdma.post_cost,
        qp=req.qp_msg_cost,
        nic=1.0 / (req.msg_rate * 1e6),
        read=read,
        wire=wire,
        request_wire=request_wire,
        write=write,
        recv_qp=mp.responder.model.qp_msg_cost if recv else 0.0,
        recv_post=cost.rdma.post_cost if recv else 0.0,
        read_hold=hold,
        read_slots=reader.model.qp_read_slots,
        qp_read=qp_read,
    )


def latency_parts(
    cost: CostModel,
    mp: MessagePath,
    op: Op,
    *,
    inline: bool = False,
    idle: bool = True,
) -> LatencyParts:
    """The delays of one message (:class:`LatencyParts`). ``idle``: the send queue was empty,
    so a BlueFlame NIC got the WQE with the doorbell; otherwise it fetches it from host
    memory. ``inline``: no PCIe read of the payload."""
    req = mp.requester.model
    resp = mp.responder.model
    host_read = pcie_model.read_latency(cost, mp.requester_host)
    wqe_fetch = 0.0 if (req.blueflame and idle) else host_read
    read = 0.0 if inline else pcie_model.read_latency(cost, mp.src)
    write = pcie_model.write_latency(cost, mp.dst)
    cqe = pcie_model.write_latency(cost, mp.requester_host)
    if op == "read":
        request = mp.fabric_latency + resp.rx_latency
        responder_tx = resp.tx_latency
        rx = req.rx_latency
        ack = 0.0
    else:
        request = 0.0
        responder_tx = 0.0
        rx = resp.rx_latency
        # the responder acknowledges once the data is placed: its send pipeline, the fabric,
        # the requester's receive pipeline
        ack = resp.tx_latency + mp.fabric_latency + req.rx_latency
    return LatencyParts(
        post=cost.rdma.post_latency,
        doorbell=cost.rdma.mmio_latency,
        wqe_fetch=wqe_fetch,
        tx=req.tx_latency,
        request=request,
        read=read,
        responder_tx=responder_tx,
        fabric=mp.fabric_latency,
        rx=rx,
        write=write,
        ack=ack,
        completion=cqe,
        poll=cost.rdma.poll_latency,
    )


def serialization(st: ServiceTimes, size: int, mtu: int) -> float:
    """Seconds one message's bytes add to its latency: the PCIe read, the wire and the PCIe
    write overlap packet by packet (cut-through), so the slowest of them counts in full and
    the others only for the first packet."""
    stages = (st.read, st.wire, st.write)  # read_hold is occupancy, not part of one trip
    slowest = max(stages)
    first = min(size, mtu) / size if size > 0 else 1.0
    return slowest + (sum(stages) - slowest) * first


def message_latency(
    cost: CostModel, mp: MessagePath, op: Op, size: int, *, inline: bool = False
) -> float:
    """Seconds from posting one message on idle hardware to its completion being seen: every
    delay (:func:`latency_parts`), the QP's processing, the request packet of a READ and the
    message's bytes (:func:`serialization`)."""
    st = service_times(cost, mp, op, size, inline=inline)
    parts = latency_parts(cost, mp, op, inline=inline)
    reader = _reader(mp, op)
    return st.qp + st.request_wire + serialization(st, size, reader.mtu) + parts.total


def stream_rate(
    cost: CostModel,
    mp: MessagePath,
    op: Op,
    size: int,
    *,
    qps: int = 1,
    window: int | None = None,
    inline: bool = False,
) -> float:
    """Steady-state payload rate (bytes/s) of back-to-back messages of ``size`` bytes on
    ``qps`` QPs, each with at most ``window`` outstanding (default ``rdma.flow_window``;
    READs at most ``max_rd_atom``): ``size / max(slowest stage, round trip / (qps × window))``
    (0 when a stage cannot move the bytes at all: a host bridge that forwards no P2P reads)."""
    st = service_times(cost, mp, op, size, inline=inline)
    per_message = st.bottleneck(qps)
    if math.isinf(per_message) or size <= 0:
        return 0.0
    w = cost.rdma.flow_window if window is None else window
    if op == "read":
        w = min(w, mp.requester.model.max_rd_atom)
    rtt = message_latency(cost, mp, op, size, inline=inline)
    per_message = max(per_message, rtt / (max(qps, 1) * max(w, 1)))
    return size / per_message


# -- the two ends of a flow-level transfer ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EndRate:
    """One end of a flow-level transfer (``sim/workloads/nic.py``): the payload rate it allows
    (bytes/s, 0 when it cannot move the bytes) and the delay it adds before the bytes flow
    (seconds)."""

    rate: float
    latency: float


def send_end(
    cost: CostModel,
    port: NicPort,
    src: PciePath,
    host: PciePath,
    size: int,
    *,
    op: Op = "write",
    qps: int = 1,
) -> EndRate:
    """The sending end of ``size``-byte messages from memory ``src`` through ``port`` on
    ``qps`` QPs at once (``host``: the NIC's path to its own host memory, for WQEs and CQEs):
    a message goes through the post, per-QP, message-rate, PCIe-read and wire stages; the
    per-QP ones (the QP's WQE processing, its read window and read slots) serve ``qps``
    messages side by side, the others one, so the rate is ``size / max(per-QP / qps,
    shared)``; its delay is the doorbell, the WQE fetch (the queue is busy), the send pipeline
    and the PCIe read latency, and -- once the data is placed -- the ACK back (the far NIC's
    pipelines taken as this model's), the CQE and the poll."""
    model = port.model
    rate = qp_read_rate(cost, port, src)
    if rate <= 0:
        return EndRate(0.0, math.inf)
    nic_read = pcie_model.read_rate(cost, src, model.read_tags)
    data, _ = wire_bytes(cost, port, op, size)
    hold = (pcie_model.read_latency(cost, src) + size / rate) / max(model.qp_read_slots, 1)
    per_qp = max(model.qp_msg_cost, size / rate, hold) / max(qps, 1)
    busy = max(
        per_qp,
        cost.rdma.post_cost,
        1.0 / (model.msg_rate * 1e6),
        size / nic_read,
        data / _line(cost, port),
    )
    latency = (
        cost.rdma.mmio_latency
        + pcie_model.read_latency(cost, host)
        + model.tx_latency
        + pcie_model.read_latency(cost, src)
        + model.tx_latency
        + model.rx_latency
        + pcie_model.write_latency(cost, host)
        + cost.rdma.poll_latency
    )
    return EndRate(size / busy if size > 0 else math.inf, latency)


def recv_end(cost: CostModel, port: NicPort, dst: PciePath, size: int) -> EndRate:
    """The receiving end of one ``size``-byte message into memory ``dst`` through ``port``:
    its rate is the posted-write rate of the path (0 when a host bridge forwards no P2P
    writes); its delay the receive pipeline and the write latency."""
    rate = pcie_model.path_write_rate(cost, dst)
    if rate <= 0:
        return EndRate(0.0, math.inf)
    return EndRate(rate, port.model.rx_latency + pcie_model.write_latency(cost, dst))
