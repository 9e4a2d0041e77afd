"""``pinlab bench perftest``: the curves come from the mechanisms (issue 11's Done-when), the
output is perftest's (tools-and-mechanisms.md A1.2-A1.5), bad flags are one line."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from pinlab.bench import run_bench
from pinlab.bench.perftest import RESULT_LINE, parse_args
from pinlab.cli import main
from pinlab.errors import ConfigError
from pinlab.platform import CostModel, cx_pair
from pinlab.sim.engine import Simulation
from pinlab.sim.workloads import spawn
from pinlab.sim.workloads.perftest import ALL_SIZES, PerftestParams, _bw_row, _lat_row

CX6_100G = {"nic": "cx6", "line_rate": "100Gbps"}
CX7_H200 = {"nic": "cx7", "link": "roce", "gpu": "h200"}
NO_JITTER = ("rdma.jitter=0", "rdma.tail_prob=0")
NO_READ_LATENCY = (
    "pcie.lat.host_read=0us",
    "pcie.lat.switch=0us",
    "pcie.lat.rc_p2p=0us",
    "pcie.lat.remote_socket=0us",
    "pcie.bar_read.default=0us",
    "pcie.bar_read.a100=0us",
    "pcie.bar_read.h200=0us",
)


def bw(argv: list[str], params: dict[str, str], sets: tuple[str, ...] = (), seed: int = 0):
    t = run_bench(
        "perftest", argv, platform="cx-pair", platform_params=params, sets=sets, seed=seed
    )
    unit = "Gb/sec" if "--report_gbits" in argv else "MiB/sec"
    return dict(zip(t.column("#bytes"), t.column(f"BW average[{unit}]"), strict=True))


# -- the curve comes from the mechanisms -------------------------------------------------------


def _hand_curve(c: CostModel) -> dict[int, float]:
    """ib_write_bw on cx-pair (ConnectX-6 at 100 Gb/s, IB, MTU 4096, host memory below one
    switch), computed from the parameters by hand: per message the slowest of the post, the
    QP's WQE, the message-rate ceiling, the QP's read slots (read latency + size / read rate,
    over qp_read_slots), the PCIe read, the wire and the PCIe write; Gb/s."""
    nic = c.nic.cx6
    raw = c.pcie.gen4.raw
    link = 1 - 2 * 8 / 168 - 4 / 1538  # x16, MPS 256 (PCIe 5.0 tables)
    read_lat = c.pcie.lat.host_read + c.pcie.lat.switch
    read = min(raw * link * 256 / 276, nic.read_tags * 512 / read_lat)
    write = raw * link * 256 / 280
    line = 12.5e9 * c.rdma.ib_link_eff
    out = {}
    for s in ALL_SIZES:
        wire = (s + math.ceil(s / 4096) * 26 + 16) / line
        t = max(
            c.rdma.post_cost,
            nic.qp_msg_cost,
            1 / (nic.msg_rate * 1e6),
            (read_lat + s / read) / nic.qp_read_slots,
            s / read,
            wire,
            s / write,
        )
        out[s] = s / t * 8 / 1e9
    return out


def test_knee_and_plateau_come_from_the_mechanisms() -> None:
    """Every size within 1 % of the hand computation; the plateau (100G IB at MTU 4096) and
    the knee (the first size at 90 % of it) are the hand computation's."""
    sim = bw(["ib_write_bw", "-a", "--report_gbits"], CX6_100G, NO_JITTER)
    hand = _hand_curve(CostModel())
    for size, value in sim.items():
        assert value == pytest.approx(hand[size], rel=0.01), size
    plateau = hand[1 << 23]
    assert sim[1 << 23] == pytest.approx(plateau, rel=0.005)
    knee = min(s for s in ALL_SIZES if hand[s] >= 0.9 * plateau)
    assert min(s for s in ALL_SIZES if sim[s] >= 0.9 * sim[1 << 23]) == knee


def test_without_the_per_message_cost_small_messages_go_faster() -> None:
    """Set the post and per-QP costs to 0: the small-size bandwidth rises, to what the next
    bound (the QP's read slots) allows."""
    base = bw(["ib_write_bw", "-s", "64", "--report_gbits"], CX6_100G, NO_JITTER)[64]
    free = bw(
        ["ib_write_bw", "-s", "64", "--report_gbits"],
        CX6_100G,
        (*NO_JITTER, "rdma.post_cost=0us", "nic.cx6.qp_msg_cost=0us"),
    )[64]
    assert free > 1.2 * base
    c = CostModel()
    hold = (c.pcie.lat.host_read + c.pcie.lat.switch) / c.nic.cx6.qp_read_slots
    assert free == pytest.approx(64 / hold * 8 / 1e9, rel=0.02)


def test_without_read_latency_a_nic_reads_gpu_memory_as_fast_as_host_memory() -> None:
    """ConnectX-7 + H200: the NIC reading GPU memory (ib_write_bw --use_cuda) plateaus far
    below host memory -- the read window over the BAR read latency; with every PCIe read
    latency set to 0 the two are the same (the port binds)."""
    argv = ["ib_write_bw", "-s", "1048576", "--report_gbits"]
    host = bw(argv, CX7_H200, NO_JITTER)[1 << 20]
    gpu = bw([*argv, "--use_cuda=0", "--use_cuda_dmabuf"], CX7_H200, NO_JITTER)[1 << 20]
    assert gpu < 0.5 * host
    host0 = bw(argv, CX7_H200, (*NO_JITTER, *NO_READ_LATENCY))[1 << 20]
    gpu0 = bw([*argv, "--use_cuda=0"], CX7_H200, (*NO_JITTER, *NO_READ_LATENCY))[1 << 20]
    assert gpu0 == pytest.approx(host0, rel=0.01)


def _one_sided(client_gpu: bool, server_gpu: bool, sets: dict[str, str]) -> float:
    """ib_write_bw with GPU memory on one side only (the workload allows it)."""
    sim = Simulation(cx_pair(**CX7_H200), cost_overrides=sets, seed=0, sample_interval=1e9)
    root = {"uid": 0, "cap_ipc_lock": True}
    base = {"sizes": [1 << 20], "iterations": 1000}
    spawn(
        sim,
        "server",
        PerftestParams(role="server", device="gpu0" if server_gpu else None, **base),
        node="node1",
        process_args=root,
    )
    client = spawn(
        sim,
        "client",
        PerftestParams(device="gpu0" if client_gpu else None, **base),
        node="node0",
        process_args=root,
    )
    sim.run(1e6)
    row = client.result.rows[0]
    return float(row.average)


def test_a_nic_writing_gpu_memory_is_faster_than_one_reading_it_unless_reads_cost_nothing() -> None:
    """read ≠ write: the remote NIC *writing* GPU memory (posted writes) runs at the port's
    rate, the local NIC *reading* it at the read window's; without read latency they meet."""
    jit = {"rdma.jitter": "0", "rdma.tail_prob": "0"}
    reads = _one_sided(True, False, jit)
    writes = _one_sided(False, True, jit)
    assert reads < 0.5 * writes
    flat = {**jit, **dict(s.split("=") for s in NO_READ_LATENCY)}
    assert _one_sided(True, False, flat) == pytest.approx(_one_sided(False, True, flat), rel=0.01)


def test_a_clients_bytes_count_when_each_sizes_run_has_ended() -> None:
    """tenant.<client>.bytes steps up at the end of each size's run, not at its start: the
    series reached all of a run's bytes while its messages were still on the wire."""
    sim = Simulation(cx_pair(**CX7_H200), seed=0, sample_interval=1e-4)
    root = {"uid": 0, "cap_ipc_lock": True}
    base = {"sizes": [1 << 16, 1 << 20], "iterations": 200}
    spawn(sim, "server", PerftestParams(role="server", **base), node="node1", process_args=root)
    client = spawn(sim, "client", PerftestParams(**base), node="node0", process_args=root)
    sim.run(1.0)
    r = client.result
    points = [(t, v) for t, v in sim.recorder.series["tenant.client.bytes"].points if v > 0]
    first, total = 200 * (1 << 16), 200 * ((1 << 16) + (1 << 20))
    assert points[0][1] == first and points[-1][1] == total
    assert r.data_end <= points[-1][0] < r.data_end + 1e-4  # the tick after the last run's end
    # 13 MB at under 50 GB/s take over 0.26 ms: the first step comes ticks after the start
    assert points[0][0] - r.data_start > 2e-4


# -- randomness --------------------------------------------------------------------------------


def test_same_seed_same_bytes_other_seed_other_run() -> None:
    argv = ["ib_write_bw", "-a", "--report_gbits"]
    a = run_bench("perftest", argv, platform_params=CX6_100G, seed=7)
    b = run_bench("perftest", argv, platform_params=CX6_100G, seed=7)
    c = run_bench("perftest", argv, platform_params=CX6_100G, seed=8)
    assert a.text == b.text and a.rows == b.rows
    assert a.rows != c.rows
    for ra, rc in zip(a.rows, c.rows, strict=True):  # a replication, not another machine
        assert float(rc[3]) == pytest.approx(float(ra[3]), rel=0.03)
    lat_a = run_bench("perftest", ["ib_send_lat"], seed=1)
    lat_b = run_bench("perftest", ["ib_send_lat"], seed=2)
    assert lat_a.rows != lat_b.rows


# -- perftest's output -------------------------------------------------------------------------


def test_bw_header_block_and_columns() -> None:
    t = run_bench("perftest", ["ib_write_bw"], platform_params=CX6_100G)
    lines = t.text.splitlines()
    assert lines[0] == RESULT_LINE == "-" * 87
    assert lines[1] == " " * 20 + "RDMA_Write BW Test"
    assert lines[2] == " Dual-port       : OFF\t\tDevice         : mlx5_0"
    assert lines[3] == " Number of qps   : 1\t\tTransport type : IB"
    assert lines[4] == " Connection type : RC\t\tUsing SRQ      : OFF"
    assert " TX depth        : 128" in lines
    assert " CQ Moderation   : 1" in lines  # 64 KiB > 8 KiB without -a: moderation off
    assert " Mtu             : 4096[B]" in lines
    assert " Link type       : IB" in lines
    assert " Max inline data : 0[B]" in lines
    assert " rdma_cm QPs\t : OFF" in lines
    header = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
    assert header in lines
    assert t.columns == (
        "#bytes",
        "#iterations",
        "BW peak[MiB/sec]",
        "BW average[MiB/sec]",
        "MsgRate[Mpps]",
    )
    row = lines[lines.index(header) + 1]
    # " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf"
    assert re.fullmatch(r" 65536 {6}5000 {13}\d+\.\d\d {12}\d+\.\d\d\t\t {5}\d\.\d{6}", row), row
    assert lines[-1] == RESULT_LINE
    assert t.rows[0][:2] == (65536, 5000)  # ib_write_bw: 5000 iterations by default
    assert re.fullmatch(
        r" local address: LID 0x01 QPN 0x[0-9a-f]{4} PSN 0x[0-9a-f]{6} RKey 0x[0-9a-f]{6} "
        r"VAddr 0x[0-9a-f]{14}",
        next(x for x in lines if x.startswith(" local address")),
    )


def test_units_mib_and_gbits_and_six_decimals_below_a_tenth() -> None:
    """MiB/sec is 2^20 B/s, Gb/sec 10^9 bit/s (factor 10^9/(2^20·8) = 119.2); under 0.1 Gb/s
    all three numbers get six decimals (REPORT_FMT_EXT)."""
    mib = run_bench("perftest", ["ib_write_bw", "-s", "2"], seed=3)
    gb = run_bench("perftest", ["ib_write_bw", "-s", "2", "--report_gbits"], seed=3)
    ratio = float(mib.rows[0][3]) / float(gb.rows[0][3])
    assert ratio == pytest.approx(1e9 / (1 << 20) / 8)
    row = gb.text.splitlines()[-2]
    assert re.fullmatch(r" 2 {10}5000 {11}0\.\d{6} {12}0\.\d{6} {12}\d\.\d{6}", row), row
    assert " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]" in (
        gb.text.splitlines()
    )


def test_latency_output_and_statistics() -> None:
    t = run_bench("perftest", ["ib_read_lat", "-s", "64"])
    lines = t.text.splitlines()
    assert " " * 20 + "RDMA_Read Latency Test" in lines
    assert " Outstand reads  : 16" in lines and " TX depth        : 1" in lines
    head = (
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
        "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
    )
    assert head in lines
    row = lines[lines.index(head) + 1]
    num = r"\d+\.\d\d"
    assert re.fullmatch(
        rf" 64      1000 {{10}}{num} +{num} +{num} +\t +{num} +\t{num} +\t\t{num} +\t\t{num} +",
        row,
    ), row
    r = t.rows[0]
    assert r[2] <= r[4] <= r[3]  # t_min <= t_typical <= t_max
    assert 1.5 < r[4] < 3.0  # a READ reports a full round trip, ≈ 2 µs back to back
    half = run_bench("perftest", ["ib_write_lat", "-s", "64"]).rows[0][4]
    assert 0.7 < half < 1.3  # write and send report half a round trip


def test_perftest_statistics_are_perftests() -> None:
    """print_report_lat: N − 1 deltas, sorted, top two dropped, median of the kept, stdev of
    integer-truncated deviations, 99 % / 99.9 % at ceil(n·q); print_report_bw's peak."""
    deltas = np.array([1.0, 1.2, 0.9, 5.0, 1.1, 1.0, 9.0, 1.3]) * 1e-6
    posted = np.concatenate(([0.0], np.cumsum(deltas)))
    row = _lat_row(2, len(posted), posted, 2)
    kept = np.sort(deltas)[:-2] * 1e6 / 2
    assert row.t_min == pytest.approx(kept[0])
    assert row.t_max == pytest.approx(np.sort(deltas)[6] * 1e6 / 2)
    assert row.t_typical == pytest.approx((kept[2] + kept[3]) / 2)  # n = 6: two middles
    assert row.t_avg == pytest.approx(kept.mean())
    assert row.t_stdev == 0.0  # deviations < 1 µs truncate to 0 (perftest's int temp_var)
    assert row.p99 == pytest.approx(np.sort(deltas)[6] * 1e6 / 2)
    tposted = np.arange(10) * 1.0
    tcompleted = tposted + 2.0
    peak = _bw_row(100, 10, tposted, tcompleted, 5, peak=True)
    assert peak.average == pytest.approx(100 * 10 / 11)
    assert peak.msg_rate == pytest.approx(10 / 11 / 1e6)
    # the best window: from post 4 (or 9) to the completion at index 4 (9): 3 s for 1 message
    assert peak.peak == pytest.approx(100 / min(3.0, (11 - 0) / 10))


# -- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ib_foo_bw"], "perftest: test: expected one of ib_send_lat"),
        (["ib_write_bw", "--bogus"], "unrecognized arguments: --bogus"),
        (["ib_write_bw", "-m", "3000"], "perftest: -m: expected an MTU of 256"),
        (["ib_write_bw", "-n", "3"], "perftest: -n: expected an iteration count of at least 5"),
        (["ib_write_lat", "--use_cuda=0"], "Perftest doesn't support device memory latency"),
        (["ib_write_bw", "--use_cuda_dmabuf"], "--use_cuda_dmabuf: expected --use_cuda=<id>"),
        (["ib_send_lat", "-q", "2"], "perftest: -q: expected no -q in a latency test"),
        (["ib_write_bw", "-t", "0"], "perftest: -t: expected a TX depth of 1 to 15000"),
        (["ib_write_bw", "-o", "4"], "perftest: -o: expected -o only with RDMA READ"),
        (["ib_write_bw", "-c", "UD"], "perftest: -c: expected RC"),
        (["ib_write_bw", "--use_cuda=0", "-I", "64", "-s", "64"], "with inline messages"),
        (
            ["ib_write_bw", "-n", "10000001"],
            "perftest: -n: expected at most 1e+07 workload iterations in a run, found 10000001",
        ),
        (["ib_write_bw", "-n", "99999999999999"], "found 99999999999999 (99999999999999 iter"),
        (["ib_write_lat", "-a", "-n", "300000"], "found 13800000 (300000 iterations x 23"),
    ],
)
def test_bad_arguments_are_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_args(argv)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_iterations_up_to_a_tenants_bound_are_taken() -> None:
    """The bound is a scenario tenant's (MAX_EVENTS): exactly that many runs."""
    from pinlab.sim.workloads.base import MAX_EVENTS

    assert parse_args(["ib_write_bw", "-n", str(MAX_EVENTS)]).params.iterations == MAX_EVENTS


def test_bad_platform_choices_are_one_line() -> None:
    with pytest.raises(ConfigError, match=r"-d: expected an IB device of .* found 'mlx5_9'"):
        run_bench("perftest", ["ib_write_bw", "-d", "mlx5_9"])
    with pytest.raises(ConfigError, match=r"--use_cuda: expected a nvidia-compute device index"):
        run_bench("perftest", ["ib_write_bw", "--use_cuda=0"])
    with pytest.raises(ConfigError, match="--nodes: expected 2"):
        run_bench("perftest", ["ib_write_bw"], nodes=3)
    with pytest.raises(ConfigError, match="--set"):
        run_bench("perftest", ["ib_write_bw"], sets=["rdma.post_cost"])


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"seed": -1}, r"^seed: expected an integer seed from 0 to 2\^63-1, found -1$"),
        ({"seed": "x"}, r"^seed: expected an integer seed from 0 to 2\^63-1, found 'x'$"),
        ({"platform": 5}, r"^platform: expected a preset name or a platform file's path, found 5$"),
        (
            {"platform_params": 5},
            r"^platform_params: expected a table of preset parameters, found 5$",
        ),
        ({"sets": [1]}, r"^sets\[0\]: expected a key=value string, found 1$"),
        (
            {"sets": "rdma.jitter=0"},
            r"^sets: expected a list of key=value strings, found the string",
        ),
    ],
)
def test_run_benchs_own_arguments_are_checked_first(
    keywords: dict[str, object], message: str
) -> None:
    """Its keywords are validated as the scenario API's are (docs/api.md): a ConfigError
    naming the argument, not a TypeError from pathlib or a ValueError from simpy's seed."""
    with pytest.raises(ConfigError, match=message):
        run_bench("perftest", ["ib_write_bw", "-n", "5"], **keywords)  # type: ignore[arg-type]


def test_perftest_defaults() -> None:
    o = parse_args(["ib_send_bw", "-a"]).params
    assert (o.iterations, o.tx_depth, o.cq_mod, o.rx_depth) == (1000, 128, 100, 512)
    assert len(o.sizes) == 23
    assert o.sizes[0] == 2 and o.sizes[-1] == 8 * 1024 * 1024
    w = parse_args(["ib_write_bw"]).params
    assert (w.test, w.kind, w.iterations, w.sizes, w.cq_mod) == ("write", "bw", 5000, [65536], 1)
    lat = parse_args(["ib_write_lat"]).params
    assert (lat.iterations, lat.tx_depth, lat.sizes) == (1000, 1, [2])
    assert parse_args(["ib_write_bw", "-n", "20", "-t", "64"]).params.tx_depth == 20  # <= iters


def test_cli_bench(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--param", "nic=cx5", "perftest", "ib_write_bw", "-s", "4096"]) == 0
    out = capsys.readouterr().out
    assert "RDMA_Write BW Test" in out and out.endswith(RESULT_LINE + "\n")
    assert main(["bench", "perftest", "ib_write_bw", "-m", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "perftest: -m: expected an MTU" in err
    assert main(["bench", "--json", "perftest", "ib_read_bw", "-s", "4096"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["tool"] == "perftest" and data["test"] == "ib_read_bw"
    assert data["meta"]["nic_model"] == "cx6" and data["rows"][0][0] == 4096


def _dmabuf_curve(verb: str, sets: tuple[str, ...] = ()) -> dict[int, float]:
    """``<verb> -a --use_dmabuf --device gpu0`` on a ConnectX-7 + H200 pair (issue 11's curve)."""
    argv = [verb, "-a", "--report_gbits", "--use_dmabuf", "--device", "gpu0", "-n", "200"]
    return {int(k): float(v) for k, v in bw(argv, CX7_H200, (*NO_JITTER, *sets)).items()}


def test_the_dmabuf_send_curve_knee_comes_from_the_per_message_cost() -> None:
    """issue 11 'Done when': remove the per-message cost (post, per-QP WQE, NIC message rate)
    and the small-size bandwidth of ``ib_send_bw -a --use_dmabuf`` changes -- up to the next
    per-message bound, the QP's read slots, each held for the BAR read latency; free those too
    and it rises far. The plateau (the QP's read window over the BAR latency) stays."""
    c = CostModel()
    no_msg_cost = ("rdma.post_cost=0us", "nic.cx7.qp_msg_cost=0us", "nic.cx7.msg_rate=1e6")
    with_cost = _dmabuf_curve("ib_send_bw")
    free = _dmabuf_curve("ib_send_bw", no_msg_cost)
    latency = c.pcie.bar_read.h200 + c.pcie.lat.switch
    for size in (2, 64, 1024):
        assert free[size] > with_cost[size], size
    for size in (2, 64):  # bytes too few to matter: one slot per read latency
        slots = size * 8 / (latency / c.nic.cx7.qp_read_slots) / 1e9
        assert free[size] == pytest.approx(slots, rel=0.03), size
    wide = _dmabuf_curve("ib_send_bw", (*no_msg_cost, "nic.cx7.qp_read_slots=8"))
    for size in (2, 64, 1024):
        assert wide[size] > 1.5 * with_cost[size], size
    big = 1 << 23
    assert free[big] == pytest.approx(with_cost[big], rel=0.02)
    assert with_cost[big] == pytest.approx(
        c.nic.cx7.p2p_read_tags * 512 / latency * 8 / 1e9, rel=0.02
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ("ib_write_bw", r"^argv: expected a list of arguments, found a string 'ib_write_bw'$"),
        (5, r"^argv: expected a list of arguments, found 5$"),
        (["ib_write_bw", 5], r"^argv\[1\]: expected an argument \(a string\), found 5$"),
    ],
)
def test_argv_is_a_list_of_strings(argv: object, message: str) -> None:
    """One string would be read a character at a time (``found 'i'``): refused, naming it."""
    with pytest.raises(ConfigError, match=message):
        run_bench("perftest", argv)  # type: ignore[arg-type]


def test_an_unknown_platform_lists_the_presets() -> None:
    """``--platform PRESET|FILE``: a name that is neither says so and lists the presets."""
    from pinlab.platform.presets import PRESETS

    with pytest.raises(ConfigError) as bad:
        run_bench("perftest", ["ib_write_bw"], platform="nope")
    assert str(bad.value) == (
        f"--platform nope: expected a preset ({', '.join(PRESETS)}) or a platform file, "
        "found neither"
    )
    assert "cx-pair" in PRESETS and "workstation" in PRESETS
