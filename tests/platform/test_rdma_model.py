"""The RDMA NIC mechanisms (``platform/rdma_model.py``): packets and header bytes per link
layer (tools-and-mechanisms.md B2.1), per-message service times and the stream rate, one
message's latency, the ends of a flow-level transfer."""

from __future__ import annotations

import pytest

from pinlab.platform import CostModel, build, cx_pair
from pinlab.platform import pcie_model as pm
from pinlab.platform import rdma_model as rm
from pinlab.platform.rdma_model import MessagePath, NicPort

COST = CostModel()


def port(link: str = "ib", mtu: int = 4096, model: str = "cx6", gbps: float = 100) -> NicPort:
    return NicPort("n", model, COST.nic.model(model), gbps * 1.25e8, link, mtu)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mtu", "ib_local", "ib_grh", "roce4", "roce6"),
    [
        (256, 0.908, 0.795, 0.757, 0.715),
        (512, 0.952, 0.886, 0.862, 0.834),
        (1024, 0.975, 0.939, 0.926, 0.909),
        (2048, 0.988, 0.969, 0.962, 0.953),
        (4096, 0.994, 0.984, 0.980, 0.976),
    ],
)
def test_payload_efficiency_per_link_layer_and_mtu(
    mtu: int, ib_local: float, ib_grh: float, roce4: float, roce6: float
) -> None:
    """B2.1's table: IB LRH+BTH+ICRC+VCRC 26 B (+ GRH 40), RoCEv2 82 B over IPv4 and 102 over
    IPv6 of line time per packet; IB links also lose 1 − rdma.ib_link_eff."""
    line = 12.5e9
    eff = COST.rdma.ib_link_eff
    assert rm.wire_rate(COST, port("ib", mtu)) / line / eff == pytest.approx(ib_local, abs=6e-4)
    grh = COST.with_overrides({"rdma.grh": True})
    assert rm.wire_rate(grh, port("ib", mtu)) / line / eff == pytest.approx(ib_grh, abs=6e-4)
    assert rm.wire_rate(COST, port("roce", mtu)) / line == pytest.approx(roce4, abs=6e-4)
    v6 = COST.with_overrides({"rdma.roce_ip": "ipv6"})
    assert rm.wire_rate(v6, port("roce", mtu)) / line == pytest.approx(roce6, abs=6e-4)


def test_a_100g_ib_port_moves_98_4_gbps_of_payload() -> None:
    """validation-tables.md A1's plateau: 98.38 Gb/s on 100G IB at MTU 4096."""
    assert rm.wire_rate(COST, port()) * 8 / 1e9 == pytest.approx(98.38, abs=0.05)


def test_wire_bytes_of_one_message() -> None:
    h = COST.rdma.hdr
    p = port()
    per = rm.packet_overhead(COST, "ib")
    assert per == h.lrh + h.bth + h.icrc + h.vcrc == 26
    assert rm.packets(0, 4096) == rm.packets(1, 4096) == rm.packets(4096, 4096) == 1
    assert rm.packets(4097, 4096) == 2
    assert rm.wire_bytes(COST, p, "write", 8192) == (8192 + 2 * per + h.reth, 0)
    assert rm.wire_bytes(COST, p, "send", 100) == (100 + per, 0)
    assert rm.wire_bytes(COST, p, "read", 4096) == (4096 + per + h.aeth, per + h.reth)
    assert rm.wire_bytes(COST, p, "read", 3 * 4096)[0] == 3 * 4096 + 3 * per + 2 * h.aeth


def _pair_path(gpu: str | None = None, nic: str = "cx6", link: str = "ib") -> MessagePath:
    spec = cx_pair(nic=nic, link=link, gpu=gpu)  # type: ignore[arg-type]
    m = build(spec.node)
    mem = "gpu0" if gpu else "host:0"
    p = m.nic_port_model("mlx5_0")
    return MessagePath(
        p,
        p,
        m.pcie_path("mlx5_0", mem),
        m.pcie_path("mlx5_0", mem),
        m.pcie_path("mlx5_0", "host:0"),
        spec.fabric.latency,
    )


def test_service_times_are_the_mechanism_parameters() -> None:
    mp = _pair_path()
    st = rm.service_times(COST, mp, "write", 4096)
    model = COST.nic.cx6
    assert st.post == COST.rdma.post_cost
    assert st.qp == model.qp_msg_cost
    assert st.nic == pytest.approx(1 / (model.msg_rate * 1e6))
    read_rate = pm.read_rate(COST, mp.src, model.read_tags)
    assert st.read == pytest.approx(4096 / read_rate)
    assert st.wire == pytest.approx((4096 + 26 + 16) / (mp.requester.line_rate * 0.99))
    assert st.write == pytest.approx(4096 / pm.path_write_rate(COST, mp.dst))
    assert st.read_hold == pytest.approx(pm.read_latency(COST, mp.src) + st.read)
    assert st.read_slots == model.qp_read_slots
    assert rm.service_times(COST, mp, "write", 64, inline=True).read == 0.0
    send = rm.service_times(COST, mp, "send", 64)
    assert send.recv_qp == model.qp_msg_cost and send.recv_post == COST.rdma.post_cost


def test_stream_rate_small_messages_per_message_bound_large_the_port() -> None:
    """Small messages: size / the slowest per-message stage (post, per-QP, read slots); long
    ones: the slowest of PCIe read, wire and PCIe write."""
    mp = _pair_path()
    st = rm.service_times(COST, mp, "write", 2)
    assert rm.stream_rate(COST, mp, "write", 2) == pytest.approx(2 / st.bottleneck(1))
    assert st.bottleneck(1) == max(
        COST.rdma.post_cost, COST.nic.cx6.qp_msg_cost, st.read_hold / st.read_slots
    )
    big = rm.stream_rate(COST, mp, "write", 1 << 23)
    assert big == pytest.approx(rm.wire_rate(COST, mp.requester), rel=1e-3)
    # more QPs lift the per-QP stages until the one posting thread binds
    two = rm.service_times(COST, mp, "write", 2).bottleneck(2)
    assert two == pytest.approx(max(COST.rdma.post_cost, COST.nic.cx6.qp_msg_cost / 2))
    # READs: at most max_rd_atom outstanding per QP over the round trip
    window = rm.stream_rate(COST, mp, "read", 4096, window=1)
    assert window == pytest.approx(4096 / rm.message_latency(COST, mp, "read", 4096))


def test_a_nic_reading_gpu_memory_is_slower_than_one_reading_host_memory() -> None:
    """One QP's read window over the BAR latency (nic.cx7.p2p_read_tags × MRRS / latency)
    bounds a NIC reading device memory; writing it, posted, does not."""
    host = _pair_path(None, "cx7", "roce")
    gpu = _pair_path("h200", "cx7", "roce")
    big = 1 << 22
    host_rate = rm.stream_rate(COST, host, "write", big)
    gpu_rate = rm.stream_rate(COST, gpu, "write", big)
    window = COST.nic.cx7.p2p_read_tags * 512
    latency = COST.pcie.bar_read.h200 + COST.pcie.lat.switch
    assert gpu_rate == pytest.approx(window / latency, rel=1e-3)
    # the window is per QP: two QPs read twice as fast (the wire is far from full)
    two = rm.stream_rate(COST, gpu, "write", big, qps=2)
    assert two == pytest.approx(2 * gpu_rate, rel=1e-3)
    assert gpu_rate < 0.5 * host_rate
    m = build(cx_pair(nic="cx7", link="roce", gpu="h200").node)
    writing = m.nic_end("mlx5_0", "gpu0", big, write=True).rate
    reading = m.nic_end("mlx5_0", "gpu0", big, write=False).rate
    assert writing > 2 * reading


def test_message_latency_parts() -> None:
    """ib_write_lat-like: post, doorbell, send pipeline, the PCIe read of the payload (none
    when inline), the bytes, fabric, receive pipeline, the write latency, the ACK, the CQE."""
    mp = _pair_path()
    inline = rm.latency_parts(COST, mp, "write", inline=True)
    assert inline.read == 0.0 and inline.wqe_fetch == 0.0  # BlueFlame, idle queue
    dma = rm.latency_parts(COST, mp, "write")
    assert dma.read == pytest.approx(pm.read_latency(COST, mp.src))
    busy = rm.latency_parts(COST, mp, "write", idle=False)
    assert busy.wqe_fetch == pytest.approx(pm.read_latency(COST, mp.requester_host))
    read = rm.latency_parts(COST, mp, "read")
    assert read.ack == 0.0 and read.request > 0 and read.responder_tx > 0
    st = rm.service_times(COST, mp, "write", 1 << 20)
    # cut-through: the slowest of read, wire and write counts in full, the others one packet
    first = 4096 / (1 << 20)
    slowest = max(st.read, st.wire, st.write)
    assert rm.serialization(st, 1 << 20, 4096) == pytest.approx(
        slowest + (st.read + st.wire + st.write - slowest) * first
    )
