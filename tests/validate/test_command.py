"""pinlab validate as a command: exit status 0 when every table is within tolerance and 1
when one is not, the printed points and errors, --json, report.html in --out, holdout
tables summed apart, and bad input as one line with exit status 2 (through pinlab.cli)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from pinlab.cli import main
from pinlab.errors import ConfigError
from pinlab.validate import validate_command
from tests.validate.fakebench import FakeBench
from tests.validate.tables import NCCL, PERFTEST, write_table

MEASURED = {2: 0.06, 65536: 98.3, 8388608: 98.4}


def near(factor: float) -> FakeBench:
    """A bench double that prints the test table's measured bandwidths times ``factor``."""

    def value(argv: tuple[str, ...], column: str, key: tuple[object, ...]) -> float:
        size = key[0]
        return MEASURED.get(size, 1.0) * factor if column == "BW average[Gb/sec]" else 0.0  # type: ignore[call-overload]

    return FakeBench(value)


@pytest.fixture(autouse=True)
def cwd(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test runs in a working directory of its own, apart from its tables: the default
    report goes there (``pinlab-validation``), never into the tables' directory."""
    work = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(work)
    return work


def _console() -> Console:
    return Console(width=160, record=True, force_terminal=False)


def test_within_tolerance_exits_0_and_prints_every_point(tmp_path: Path, cwd: Path) -> None:
    write_table(tmp_path, "pt")
    console = _console()
    status = validate_command([], console, directory=tmp_path, bench=near(1.05))
    text = console.export_text()
    assert status == 0
    for measured in ("0.06", "98.3", "98.4"):
        assert measured in text
    assert text.count("+5.0%") == 3
    assert "pt: error 5.0% (tolerance 10.0%): PASS" in text
    assert "overall (1 table, 3 points): geometric-mean error 5.0%" in text
    assert (cwd / "pinlab-validation" / "report.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pt.toml"]


def test_the_title_and_source_are_whole_lines_not_wrapped_to_the_table(tmp_path: Path) -> None:
    """The table's title and its source were the rich table's title and caption, wrapped to
    the points' few columns: a source's commit hash came out cut in two. They are lines of
    their own now, as wide as the console (soft-wrapped by the terminal, not by pinlab)."""
    from pinlab.validate import load_table

    path = write_table(tmp_path, "pt")
    table = load_table(path)
    console = Console(width=60, record=True, force_terminal=False)
    validate_command([], console, directory=tmp_path, bench=near(1.05))
    lines = console.export_text().splitlines()
    assert f"{table.id}: {table.spec.table.title}" in lines
    assert any(
        line.startswith("source: ") and table.spec.table.source.citation() in line for line in lines
    )


def test_outside_tolerance_exits_1(tmp_path: Path) -> None:
    write_table(tmp_path, "pt")
    console = _console()
    assert validate_command([], console, directory=tmp_path, bench=near(0.8)) == 1
    assert "FAIL" in console.export_text()


def test_json_and_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tables = tmp_path / "tables"
    tables.mkdir()
    write_table(tables, "pt")
    out = tmp_path / "out"
    status = validate_command(
        ["pt"], _console(), directory=tables, out=out, as_json=True, bench=near(1.2)
    )
    data = json.loads(capsys.readouterr().out)
    assert status == 1 and data["passed"] is False
    assert data["report"] == str(out / "report.html") and (out / "report.html").is_file()
    assert not (tables / "report.html").exists()
    (t,) = data["tables"]
    assert t["id"] == "pt" and t["unit"] == "Gb/s" and t["tolerance"] == 0.1
    assert t["error"] == pytest.approx(0.2) and t["passed"] is False
    assert [p["x"] for p in t["points"]] == [2, 65536, 8388608]
    assert all(p["error"] == pytest.approx(0.2) for p in t["points"])
    assert data["overall"]["points"] == 3 and data["holdout"] is None


def test_holdout_tables_are_summed_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_table(tmp_path, "pt")
    holdout = tmp_path / "reserved"
    holdout.mkdir()
    write_table(
        holdout,
        "ho",
        NCCL,
        [("issue = 7", "issue = 1264"), ("example/measurements", "NVIDIA/nccl")],
    )

    def value(argv: tuple[str, ...], column: str, key: tuple[object, ...]) -> float:
        if argv[0] == "ib_write_bw":
            return MEASURED.get(key[0], 1.0) if column == "BW average[Gb/sec]" else 0.0  # type: ignore[call-overload]
        return {8: 40.5, 134217728: 1300.0}.get(key[0], 1.0) * 2  # type: ignore[call-overload]

    status = validate_command(
        [], _console(), directory=tmp_path, holdout=holdout, as_json=True, bench=FakeBench(value)
    )
    data = json.loads(capsys.readouterr().out)
    assert status == 1  # the holdout table misses by 2x
    assert data["overall"]["error"] == 0.0 and data["overall"]["tables"] == 1
    assert data["holdout"]["error"] == pytest.approx(1.0) and data["holdout"]["tables"] == 1
    assert [t["holdout"] for t in data["tables"]] == [False, True]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_bad_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_table(tmp_path, "pt", PERFTEST, [('unit = "Gb/s"', 'unit = "furlongs"')])
    status, out, err = _cli(["validate", "--dir", str(tmp_path)], capsys)
    assert status == 2 and out == ""
    assert err.strip() == (
        f"pinlab: error: {path}: compare.unit: expected one of "
        "Gb/s, MiB/s, GB/s, Mpps, us, ms, found 'furlongs'"
    )


def test_cli_missing_dir_and_unknown_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = _cli(["validate", "--dir", str(tmp_path / "nope")], capsys)
    assert status == 2 and "expected a directory of validation tables, found none" in err
    write_table(tmp_path, "pt")
    status, _, err = _cli(["validate", "zzz", "--dir", str(tmp_path)], capsys)
    assert status == 2
    assert err.strip() == "pinlab: error: TABLE: expected a table id (pt), found 'zzz'"


def test_cli_refuses_a_holdout_table_outside_holdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_table(
        tmp_path,
        "ho",
        PERFTEST,
        [
            ("example/measurements", "linux-rdma/perftest"),
            ('file = "results/perftest.md"', "pr = 98"),
        ],
    )
    status, _, err = _cli(["validate", "--dir", str(tmp_path)], capsys)
    assert status == 2
    assert "table.source: expected a table that is not reserved as a holdout, found " in err
    assert "linux-rdma/perftest PR #98" in err and err.count("\n") == 1


def test_the_default_out_dir_is_checked_before_any_table_runs(
    tmp_path: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --out the report goes into ``pinlab-validation`` in the working directory: one
    this process cannot write is refused, naming --out, before any table runs, and nothing is
    written (``os.access`` stands in for a read-only directory: the tests run as root)."""
    write_table(tmp_path, "pt")
    (cwd / "pinlab-validation").mkdir()
    real = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode: Path(p).resolve() != (cwd / "pinlab-validation") and real(p, mode),
    )
    refused = (
        "--out pinlab-validation: expected a writable directory, found one this process "
        "cannot write"
    )
    bench = near(1.0)
    with pytest.raises(ConfigError) as info:
        validate_command([], _console(), directory=tmp_path, bench=bench)
    assert str(info.value) == refused and bench.calls == []
    status, out, err = _cli(["validate", "--dir", str(tmp_path)], capsys)
    assert (status, out, err) == (2, "", f"pinlab: error: {refused}\n")
    assert list((cwd / "pinlab-validation").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pt.toml"]


def test_the_shipped_tables_run_from_any_directory(
    cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --dir, ``pinlab validate`` reads the published tables shipped with pinlab
    (package data), wherever it runs: an installed pinlab has no ``validation/`` beside it."""
    from pinlab.validate import DEFAULT_DIR

    shipped = sorted(p.stem for p in DEFAULT_DIR.glob("*.toml"))
    assert len(shipped) >= 20
    status, out, err = _cli(["validate", "--list", "--json"], capsys)
    assert (status, err) == (0, "")
    assert sorted(t["id"] for t in json.loads(out)) == shipped
    assert list(cwd.iterdir()) == []
