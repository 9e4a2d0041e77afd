"""``pinlab bench`` GPU tools: the real tools' flags and output formats (``tools-and-
mechanisms.md`` A2–A5), one-line errors for bad flags, byte-identical tables per seed."""

from __future__ import annotations

import re

import pytest

from pinlab.bench import run_bench
from pinlab.bench.nccl_tests import float_str, parse_size
from pinlab.errors import ConfigError

NVB_SMALL = ["-b", "32", "-i", "1", "--loopCount", "2"]


def test_nvbandwidth_prints_matrices_as_nvbandwidth_does() -> None:
    t = run_bench(
        "nvbandwidth", ["-t", "device_to_device_memcpy_write_ce", *NVB_SMALL], platform="dgx-a100"
    )
    lines = t.text.splitlines()
    assert lines[:2] == ["nvbandwidth Version: v0.8", lines[1]] and lines[2] == ""
    assert re.fullmatch(
        r"Device 0: NVIDIA A100-SXM4-40GB \([0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2}\)", lines[4]
    )
    i = lines.index("Running device_to_device_memcpy_write_ce.")
    assert lines[i + 1] == "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"
    assert lines[i + 2] == "  " + "".join(f"{c:>10d}" for c in range(8))
    row0 = lines[i + 3]
    assert row0.startswith(" 0       N/A") and len(row0) == 2 + 8 * 10
    assert re.fullmatch(r"SUM device_to_device_memcpy_write_ce \d+\.\d\d", lines[i + 12])
    assert t.text.rstrip().endswith("hardware clocks, and system topology.")
    assert t.columns == ("row", *(f"gpu{c}" for c in range(8)))
    assert t.cell("gpu0", "gpu1") == pytest.approx(274.5, rel=0.01)
    assert t.column("gpu0")[0] == "N/A"


def test_nvbandwidth_takes_names_or_indices_and_lists() -> None:
    by_index = run_bench("nvbandwidth", ["nvbandwidth", "-t", "0", *NVB_SMALL], platform="gpu-box")
    by_name = run_bench("nvbandwidth", ["host_to_device_memcpy_ce", *NVB_SMALL], platform="gpu-box")
    assert by_index.text == by_name.text
    assert "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)" in by_index.text
    assert by_index.cell("cpu0", "gpu1") > 20
    bidir = run_bench(
        "nvbandwidth",
        ["-t", "device_to_device_bidirectional_memcpy_write_ce", *NVB_SMALL],
        platform="gpu-box",
    )
    assert bidir.columns[:2] == ("matrix", "row")
    titles = {row[0] for row in bidir.rows}
    assert "memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)" in titles
    listed = run_bench("nvbandwidth", ["-l"], platform="gpu-box")
    assert "0, host_to_device_memcpy_ce:" in listed.text and len(listed.rows) == 33
    perf = run_bench("nvbandwidth", ["-t", "0", "--perfFormatter", *NVB_SMALL], platform="gpu-box")
    assert re.search(r"^&&&& PERF host_to_device_memcpy_ce [\d.]+GB/s$", perf.text, re.M)
    # no test case named: every one, in -l order, as nvbandwidth runs with no -t
    every = run_bench("nvbandwidth", NVB_SMALL, platform="gpu-box")
    running = re.findall(r"^Running (\w+)\.$", every.text, re.M)
    assert running == [row[1] for row in listed.rows]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-t", "host_to_gpu"], r"nvbandwidth: -t/--testcase: expected a test case"),
        (["-t", "0", "-b", "0"], r"nvbandwidth: -b/--bufferSize: expected a positive size"),
        (["-t", "0", "-b", "lots"], r"nvbandwidth: arguments: argument -b/--bufferSize"),
        (["-t", "0", "--frobnicate"], r"nvbandwidth: arguments: unrecognized arguments"),
    ],
)
def test_nvbandwidth_bad_flags_are_one_line(argv: list[str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as e:
        run_bench("nvbandwidth", argv, platform="gpu-box")
    assert "\n" not in str(e.value)


def test_p2p_prints_the_samples_blocks() -> None:
    t = run_bench(
        "p2p", ["p2pBandwidthLatencyTest", "--numElems=4000000", "--p2p_read"], platform="gpu-box"
    )
    text = t.text
    assert text.startswith("[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n")
    assert re.search(
        r"^Device: 0, NVIDIA RTX 6000 Ada Generation, pciBusID: [0-9a-f]+, "
        r"pciDeviceID: [0-9a-f]+, pciDomainID:0$",
        text,
        re.M,
    )
    assert "Device=0 CAN Access Peer Device=1\n" in text
    order = [
        "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
        "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
        "Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)",
        "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
        "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)",
        "P2P=Disabled Latency Matrix (us)",
        "P2P=Enabled Latency (P2P Writes) Matrix (us)",
        "P2P=Enabled Latency (P2P Reads) Matrix (us)",
    ]
    positions = [text.index(title + "\n") for title in order]
    assert positions == sorted(positions)
    lines = text.splitlines()
    k = lines.index(order[1])
    assert lines[k + 1] == "   D\\D     0      1 "
    assert re.fullmatch(r"     0 [ \d]{2}\d\.\d\d [ \d]{2}\d\.\d\d ", lines[k + 2])
    assert "   GPU     0      1 " in lines and "   CPU     0      1 " in lines
    assert lines[-1].startswith("NOTE: The CUDA Samples are not meant")
    assert t.columns == ("matrix", "row", "gpu0", "gpu1")

    def cell(title: str, row: str, col: str) -> float:
        (hit,) = [r for r in t.rows if r[0] == title and r[1] == row]
        value = hit[t.columns.index(col)]
        assert isinstance(value, float)
        return value

    staged = cell(order[0], "gpu0", "gpu1")
    p2p = cell(order[1], "gpu0", "gpu1")
    assert staged < p2p < 30  # Gen4 x16
    lat = cell(order[5] + " GPU", "gpu0", "gpu1"), cell(order[6] + " GPU", "gpu0", "gpu1")
    assert lat[0] > 5 * lat[1]
    assert cell(order[6] + " CPU", "gpu0", "gpu1") > 1


def test_p2p_on_a_gpu_without_a_memory_bandwidth_copies_at_the_assumed_rate() -> None:
    """The workstation's GPU has no memory bandwidth in its spec, so no ``mem:gpu0`` link: a
    copy inside it (the diagonal) ran over no link and no cap and the sample failed. It now
    runs at the assumed on-device rate (``copy_engine.local_rate``), read and written there as
    over the link, and the bidirectional pair of copies shares it, as a link is shared."""
    from pinlab.platform.builder import build
    from pinlab.platform.presets import resolve_platform
    from pinlab.sim.copy_engine import local_rate

    t = run_bench("p2p", ["--numElems=1000000"], platform="workstation")
    assert t.columns == ("matrix", "row", "gpu0")

    def diagonal(title: str) -> float:
        (hit,) = [r for r in t.rows if r[0] == title and r[1] == "gpu0"]
        value = hit[2]
        assert isinstance(value, float)
        return value

    uni = diagonal("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)")
    bidir = diagonal("Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)")
    spec = resolve_platform("workstation")
    assert spec.kind == "node" and spec.device("gpu0").memory_bandwidth is None
    machine = build(spec)
    rate = local_rate(machine, "gpu0") * 1e-9  # each copy also pays its launches
    assert 0.9 * rate < uni <= rate
    assert bidir == pytest.approx(uni, rel=0.05)  # the launches overlap, the bytes share


def test_p2p_bad_flags_are_one_line() -> None:
    with pytest.raises(ConfigError, match=r"--numElems: expected a positive number"):
        run_bench("p2p", ["--numElems=0"], platform="gpu-box")
    with pytest.raises(ConfigError, match=r"unrecognized arguments: --p2p-read"):
        run_bench("p2p", ["--p2p-read"], platform="gpu-box")


def test_nccl_tests_prints_all_reduce_perf_lines() -> None:
    t = run_bench(
        "nccl-tests",
        ["all_reduce_perf", "-b", "8K", "-e", "1M", "-f", "4", "-g", "8", "-n", "2"],
        platform="dgx-a100",
    )
    lines = t.text.splitlines()
    assert lines[0].startswith("# nccl-tests version 2.19.6 nccl-headers=")
    assert lines[1] == "# Collective test starting: all_reduce_perf"
    assert lines[2] == (
        "# nThread 1 nGpus 8 minBytes 8192 maxBytes 1048576 step: 4(factor) "
        "warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0"
    )
    assert lines[4] == "# Using devices"
    assert re.fullmatch(
        r"#  Rank  0 Group  0 Pid +\d+ on +node device  0 \[0000:[0-9a-f]{2}:"
        r"[0-9a-f]{2}\] NVIDIA A100-SXM4-40GB",
        lines[5],
    )
    head = 5 + 8  # after the eight rank lines
    assert lines[head] == "#" and lines[head + 1].endswith(
        "out-of-place                       in-place          "
    )
    assert lines[head + 2] == (
        "#       size         count      type   redop    root     time   algbw"
        "   busbw  #wrong     time   algbw   busbw  #wrong "
    )
    assert lines[head + 3].startswith("#        (B)    (elements)")
    data = lines[head + 4]
    assert re.fullmatch(
        r" {8}8192 {10}2048     float     sum      -1  [ \d.]{7}  [ \d.]{6}  "
        r"[ \d.]{6}       0  [ \d.]{7}  [ \d.]{6}  [ \d.]{6}       0",
        data,
    )
    assert [r[0] for r in t.rows] == [8192, 32768, 131072, 524288]
    assert re.fullmatch(r"# Avg bus bandwidth    : [\d.]+ ", lines[-3])
    assert lines[-1] == "# Collective test concluded: all_reduce_perf"
    assert t.columns[5:9] == (
        "out-of-place time",
        "out-of-place algbw",
        "out-of-place busbw",
        "out-of-place #wrong",
    )
    assert t.columns[9] == "in-place time"
    for algbw, busbw in zip(
        t.column("out-of-place algbw"), t.column("out-of-place busbw"), strict=True
    ):
        assert isinstance(algbw, float) and isinstance(busbw, float)
        assert busbw == pytest.approx(algbw * 2 * 7 / 8, abs=0.02)  # busbw = algbw·2(n−1)/n


def test_nccl_tests_spans_nodes_and_reports_no_check() -> None:
    t = run_bench(
        "nccl-tests",
        ["all_reduce_perf", "-b", "1M", "-e", "1M", "-f", "2", "-n", "1", "-c", "0"],
        platform="dgx-a100",
        nodes=2,
    )
    assert t.meta["nodes"] == 2 and "NET/GDRDMA" in t.meta["transports"]
    assert t.text.count("#  Rank ") == 16
    assert re.search(r"    N/A  [ \d.]{7}", t.text)
    flag = run_bench(
        "nccl-tests",
        ["all_reduce_perf", "-b", "1M", "-e", "1M", "-f", "2", "-n", "1", "--nodes", "2"],
        platform="dgx-a100",
    )
    assert flag.meta["nodes"] == 2


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["alltoall_perf"], r"nccl-tests: test: expected all_reduce_perf, all_gather_perf"),
        (["all_reduce_perf", "-b", "lots"], r"all_reduce_perf: -b/--minbytes: expected a size"),
        (["all_reduce_perf", "-b", "1M", "-e", "1K"], r"-e/--maxbytes: expected a size >="),
        (["all_reduce_perf", "-f", "2", "-d", "float17"], r"-d/--datatype: expected"),
        (["all_reduce_perf", "-f", "2", "-g", "9"], r"-g/--ngpus: expected at most 8 GPUs"),
        (["all_reduce_perf", "-f", "0"], r"-f/--stepfactor: expected a factor >= 1 \(1: sizes"),
        (["all_reduce_perf", "-i", "0"], r"-i/--stepbytes: expected a size >= 1"),
        # a stepbytes sweep of 8 GiB in steps of one byte: the bound a scenario's tenant has
        (
            ["all_reduce_perf", "-b", "8", "-e", "8G", "-i", "1"],
            r"-i/--stepbytes: expected at most 1e\+07 workload iterations in a run "
            r"\(8589934585 sizes x 21 iterations x 2 placements\)",
        ),
        (["all_reduce_perf", "-f", "2", "--algo", "nvls"], r"argument --algo: invalid choice"),
    ],
)
def test_nccl_tests_bad_flags_are_one_line(argv: list[str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as e:
        run_bench("nccl-tests", argv, platform="dgx-a100")
    assert "\n" not in str(e.value)


def test_nccl_tests_steps_by_bytes_as_common_cu_does() -> None:
    """nccl-tests' default is ``-f 1``: sizes from -b to -e in steps of ``-i`` bytes (1M), and
    the header says ``step: <bytes>(bytes)``; with no flags, the one size 32M runs."""
    alone = run_bench("nccl-tests", ["all_reduce_perf", "-g", "8"], platform="dgx-a100")
    assert "step: 1048576(bytes) warmup iters:" in alone.text
    assert [r[0] for r in alone.rows] == [32 << 20]
    stepped = run_bench(
        "nccl-tests", ["all_reduce_perf", "-b", "1M", "-e", "4M", "-i", "1M", "-g", "8"],
        platform="dgx-a100",
    )  # fmt: skip
    assert [r[0] for r in stepped.rows] == [1 << 20, 2 << 20, 3 << 20, 4 << 20]
    factor = run_bench("nccl-tests", ["all_reduce_perf", "-b", "1M", "-e", "4M", "-f", "2"],
                       platform="dgx-a100")  # fmt: skip
    assert "step: 2(factor) warmup iters:" in factor.text
    assert [r[0] for r in factor.rows] == [1 << 20, 2 << 20, 4 << 20]


def test_nccl_tests_number_formats() -> None:
    assert parse_size("32M") == 32 << 20 and parse_size("2G") == 2 << 30
    assert parse_size("8") == 8 and parse_size("1k") == 1024 and parse_size("x") == -1
    assert float_str(44.5123, 7) == "  44.51"
    assert float_str(13552.3, 7) == "13552.3"
    assert float_str(127997.4, 7) == " 127997"
    assert float_str(234.894, 6) == "234.89"
    assert float_str(1234.5, 6) == "1234.5"


def test_gdrcopy_copylat_prints_its_tables() -> None:
    box = dict(gpus=1, gpu="v100-sxm2-32gb", cpu="xeon-e5-2698v4")
    t = run_bench(
        "gdrcopy",
        ["copylat", "-s", "65536", "-w", "200", "-r", "10"],
        platform="gpu-box",
        platform_params=box,
    )
    lines = t.text.splitlines()
    assert lines[0].startswith("GPU id:0; name: Tesla V100-SXM2-32GB; Bus id: 0000:")
    assert "info.wc_mapping: 1" in lines
    assert lines.count("Test \t\t\t Size(B) \t Median Time(us) \t Min. Time(us)") == 2
    assert "gdr_copy_to_mapping num iters for each size: 200" in lines
    assert re.search(r"^gdr_copy_from_mapping \t +1 \t +\d+\.\d{4} \t +\d+\.\d{4}$", t.text, re.M)
    assert lines[-1] == "closing gdrdrv"
    sizes = [r[1] for r in t.rows if r[0] == "gdr_copy_to_mapping"]
    assert sizes == [1 << k for k in range(17)]
    assert t.columns == ("Test", "Size(B)", "Median Time(us)", "Min. Time(us)", "Avg.Time(us)")
    legacy = run_bench(
        "gdrcopy",
        ["copylat", "-s", "4096", "-w", "20", "-r", "2", "--legacy", "-c"],
        platform="gpu-box",
        platform_params=box,
    )
    assert "Test \t\t Size(B) \t Avg.Time(us)" in legacy.text  # cuMemcpy tables first
    assert legacy.columns == ("Test", "Size(B)", "Avg.Time(us)")
    assert legacy.text.index("cuMemcpy_H2D") < legacy.text.index("gdr_copy_to_mapping")
    with pytest.raises(ConfigError, match=r"copylat: -s: expected a positive buffer size"):
        run_bench("gdrcopy", ["copylat", "-s", "0"], platform="gpu-box", platform_params=box)
    with pytest.raises(ConfigError, match=r"gdrcopy: test: expected copylat"):
        run_bench("gdrcopy", ["copybw"], platform="gpu-box", platform_params=box)


def test_tables_are_byte_identical_per_seed_and_differ_between_seeds() -> None:
    argv = ["all_reduce_perf", "-b", "8K", "-e", "8K", "-f", "2", "-n", "3"]
    a = run_bench("nccl-tests", argv, platform="dgx-a100", seed=5)
    b = run_bench("nccl-tests", argv, platform="dgx-a100", seed=5)
    c = run_bench("nccl-tests", argv, platform="dgx-a100", seed=6)
    assert a.text == b.text and a.rows == b.rows
    assert a.rows != c.rows
    p = run_bench("p2p", ["--numElems=1000000"], platform="gpu-box", seed=1)
    q = run_bench("p2p", ["--numElems=1000000"], platform="gpu-box", seed=2)
    assert p.text != q.text


def test_bench_cost_overrides_change_the_mechanism() -> None:
    argv = ["-t", "device_to_device_memcpy_write_ce", *NVB_SMALL]
    base = run_bench("nvbandwidth", argv, platform="p4d")
    slow = run_bench("nvbandwidth", argv, platform="p4d", sets=["nvlink.gen3.link_efficiency=0.5"])
    ratio = slow.cell("gpu0", "gpu1") / base.cell("gpu0", "gpu1")
    assert ratio == pytest.approx(0.5 / 0.972, rel=0.01)
    with pytest.raises(ConfigError, match=r"nvlink\.gen3\.link_efficency"):
        run_bench("nvbandwidth", argv, platform="p4d", sets=["nvlink.gen3.link_efficency=0.5"])


@pytest.mark.parametrize(
    ("tool", "argv", "prog"),
    [
        ("gdrcopy", ["copylat"], "copylat"),
        ("registration", ["reg_mr"], "reg_mr"),
        ("p2p", [], "p2pBandwidthLatencyTest"),
        ("nvbandwidth", ["-t", "0", *NVB_SMALL], "nvbandwidth"),
        ("nccl-tests", ["all_reduce_perf", "-f", "2"], "all_reduce_perf"),
    ],
)
def test_a_gpu_tool_on_a_platform_without_gpus_says_so(
    tool: str, argv: list[str], prog: str
) -> None:
    """cx-pair, bench's default, has no GPU without ``--param gpu=``: the GPU tools say that
    (not ``expected a GPU id below 0`` or, for p2p, empty matrices and success)."""
    with pytest.raises(ConfigError) as bad:
        run_bench(tool, argv)
    assert str(bad.value) == (
        f"{prog}: --platform: expected a platform with a GPU, found cx-pair (node cx-cx6-ib), "
        "which has none (e.g. --platform workstation, or --param gpu=h100 on cx-pair)"
    )
    assert run_bench(tool, argv, platform="dgx-a100").text


@pytest.mark.parametrize(("tool", "test"), [("gdrcopy", "copylat"), ("registration", "reg_mr")])
def test_a_missing_test_name_is_named_as_missing(tool: str, test: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{tool}: test: expected {test}\b.*, found no test$"):
        run_bench(tool, [])
    with pytest.raises(ConfigError, match=rf"^{tool}: test: expected {test}\b.*, found 'bogus'$"):
        run_bench(tool, ["bogus"])
