"""The runner end to end with a test double for pinlab bench (tests.validate.fakebench),
injected through the ``bench`` parameter: how points are read from each tool's table, one
bench call per distinct command, what the errors come out as, and mismatches between a file
and the tool's output as one-line ConfigErrors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pinlab.errors import ConfigError
from pinlab.validate import load_table, run_table, run_tables
from pinlab.validate.runner import Summary
from tests.validate.fakebench import FakeBench
from tests.validate.tables import GDRCOPY, NCCL, NVBW, P2P, PERFTEST, table, write_table


def test_perftest_points_are_read_by_size_and_compared(tmp_path: Path) -> None:
    t = table(tmp_path, "pt")
    truth = {2: 0.066, 65536: 98.3, 8388608: 98.4 * 0.9}

    def value(argv: tuple[str, ...], column: str, key: tuple[object, ...]) -> float:
        return truth.get(key[0], 1.0) if column == "BW average[Gb/sec]" else 0.0  # type: ignore[call-overload]

    bench = FakeBench(value)
    result = run_table(t, bench, seed=3)
    assert [p.x for p in result.points] == [2, 65536, 8388608]
    assert [p.simulated for p in result.points] == [0.066, 98.3, pytest.approx(88.56)]
    assert [round(p.error, 6) for p in result.points] == [0.1, 0.0, -0.1]
    expected = math.expm1((math.log(1.1) + 0 + abs(math.log(0.9))) / 3)
    assert result.error == pytest.approx(expected)
    assert result.passed == (expected <= 0.10)
    (call,) = bench.calls
    assert call == {
        "tool": "perftest",
        "argv": ("ib_write_bw", "-a", "--report_gbits"),
        "platform": "cx-pair",
        "params": {"nic": "cx6", "link": "ib"},
        "nodes": 2,
        "sets": (),
        "seed": 3,
    }


def test_nccl_reads_the_placement_asked_for(tmp_path: Path) -> None:
    def value(argv: tuple[str, ...], column: str, key: tuple[object, ...]) -> float:
        return {"out-of-place time": 40.5, "in-place time": 99.0}.get(column, 1.0)

    out = run_table(table(tmp_path, "n", NCCL), FakeBench(value))
    assert [p.simulated for p in out.points] == [40.5, 40.5]
    inplace = load_table(write_table(tmp_path, "n2", NCCL, [('"out-of-place"', '"in-place"')]))
    assert [p.simulated for p in run_table(inplace, FakeBench(value)).points] == [99.0, 99.0]


def test_gdrcopy_where_picks_the_test(tmp_path: Path) -> None:
    def value(argv: tuple[str, ...], column: str, key: tuple[object, ...]) -> float:
        test, size = key
        return (2.0 if test == "gdr_copy_from_mapping" else 0.1) * float(size)  # type: ignore[arg-type]

    out = run_table(table(tmp_path, "g", GDRCOPY), FakeBench(value))
    assert [p.simulated for p in out.points] == [8.0, 131072.0]


def test_stacked_matrices_and_series_share_one_run(tmp_path: Path) -> None:
    def value(argv: tuple[str, ...], title: str, key: tuple[object, ...]) -> float:
        return 26.0 if "Enabled" in title else 22.0

    bench = FakeBench(value)
    out = run_table(table(tmp_path, "m", P2P), bench)
    assert len(bench.calls) == 1  # three points, two matrices, one p2pBandwidthLatencyTest run
    assert [(p.x, p.series, p.simulated) for p in out.points] == [
        ("gpu0->gpu1", None, 26.0),
        ("gpu1->gpu0", None, 26.0),
        ("gpu0->gpu1", "off", 22.0),
    ]


def test_a_series_with_its_own_command_is_a_second_run(tmp_path: Path) -> None:
    def value(argv: tuple[str, ...], title: str, key: tuple[object, ...]) -> float:
        return 52.0 if "device_to_host_memcpy_sm" in argv else 35.0

    bench = FakeBench(value)
    out = run_table(table(tmp_path, "v", NVBW), bench)
    assert [c["argv"][-1] for c in bench.calls] == [
        "host_to_device_memcpy_sm",
        "device_to_host_memcpy_sm",
    ]
    assert [p.simulated for p in out.points] == [35.0, 35.0, 52.0]


def test_a_cell_printed_na_is_a_failed_point(tmp_path: Path) -> None:
    def value(argv: tuple[str, ...], title: str, key: tuple[object, ...]) -> float | str:
        return "N/A" if key == ("gpu1", "gpu0") else 26.32

    out = run_table(table(tmp_path, "na", P2P), FakeBench(value))
    assert math.isnan(out.points[1].simulated)
    assert out.points[1].error == math.inf
    assert out.error == math.inf and not out.passed
    summary = Summary.of([out])
    assert summary is not None and summary.error == math.inf


def test_a_point_the_tool_does_not_print_is_a_config_error(tmp_path: Path) -> None:
    path = write_table(tmp_path, "p", PERFTEST, [("x = 65536", "x = 3")])
    with pytest.raises(ConfigError) as info:
        run_table(load_table(path), FakeBench())
    message = str(info.value)
    assert message.startswith(f"{path}: points[1]: simulated ib_write_bw: expected a row")
    assert "#bytes = 3" in message and "\n" not in message


@pytest.mark.parametrize(
    ("edits", "where", "found"),
    [
        ([('"BW average[Gb/sec]"', '"BW mean[Gb/sec]"')], "compare.y", "BW mean[Gb/sec]"),
        ([('x = "#bytes"', 'x = "bytes"')], "compare.x", "bytes"),
        ([('y = "BW average[Gb/sec]"', 'y = "BW average[Gb/sec]"\nwhere = { qps = 1 }')],
         "compare.where.qps", "qps"),
    ],
)  # fmt: skip
def test_a_column_the_tool_does_not_print_is_the_field_that_names_it(
    tmp_path: Path, edits: list[tuple[str, str]], where: str, found: str
) -> None:
    """Blamed on the field that names the column, not on the first point read through it."""
    path = write_table(tmp_path, "c", PERFTEST, edits)
    with pytest.raises(ConfigError) as info:
        run_table(load_table(path), FakeBench())
    assert str(info.value) == (
        f"{path}: {where}: expected a column of perftest ib_write_bw (#bytes, #iterations, "
        f'BW peak[Gb/sec], BW average[Gb/sec], MsgRate[Mpps]), found "{found}"'
    )


def test_a_matrix_the_tool_does_not_print_is_a_config_error(tmp_path: Path) -> None:
    path = write_table(
        tmp_path, "mm", P2P, [("Unidirectional P2P=Disabled", "Unidirectional P2P=Off")]
    )
    with pytest.raises(ConfigError, match=r"points\[2\]: .*of the matrix 'Unidirectional P2P=Off"):
        run_table(load_table(path), FakeBench())


def test_a_command_the_bench_refuses_names_the_file(tmp_path: Path) -> None:
    path = write_table(tmp_path, "r", NVBW, [('host_to_device_memcpy_sm"]', 'no_such_test"]')])
    with pytest.raises(ConfigError) as info:
        run_table(load_table(path), FakeBench())
    assert str(info.value).startswith(f"{path}: run: bench: -t: expected a testcase")


def test_run_tables_keeps_order_and_sums_holdout_apart(tmp_path: Path) -> None:
    a = table(tmp_path, "a")
    holdout_dir = tmp_path / "h"
    holdout_dir.mkdir()
    b = load_table(write_table(holdout_dir, "b"), holdout=True)
    seen = []
    result = run_tables([a, b], FakeBench(), progress=lambda t: seen.append(t.id))
    assert seen == ["a", "b"]
    assert [r.table.id for r in result.validation] == ["a"]
    assert [r.table.id for r in result.holdout] == ["b"]
    assert not result.passed  # 1.0 everywhere is far from 98 Gb/s
