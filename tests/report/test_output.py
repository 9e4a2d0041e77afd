"""Run directories are written atomically (design.md, "Outputs"): config.toml, summary.json,
series.csv; a failure at any step leaves the previous run intact and no temporary files."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinlab.report import output
from pinlab.report.output import run_dir_name, write_run, write_run_dir
from pinlab.scenarios.result import Metric, RunResult
from pinlab.sim.metrics import Recorder


def make_result(
    *, variant: str = "pin-in-place", profile: str = "6.16", throughput: float = 1.5e10
) -> RunResult:
    rec = Recorder()
    rec.sample("device.node/gpu0.vram.pinned", 0.0, 0.0)
    rec.sample("device.node/gpu0.vram.pinned", 0.5, 4096.0)
    rec.sample("node.node.stale_dma_incidents", 0.0, 0.0)
    return RunResult(
        scenario="toy",
        variant=variant,
        profile=profile,
        seed=7,
        duration=1.0,
        config={
            "scenario": {"name": "toy", "seed": 7, "unset": None},
            "platform": {"preset": "dl1", "nodes": [1, None, 2]},
        },
        metrics={
            "tenant.trainer.throughput": Metric(throughput, "B/s", "bytes moved per second"),
            "global.stale_dma_incidents": Metric(0, "count"),
        },
        recorder=rec,
    )


def test_writes_the_four_files(tmp_path: Path) -> None:
    result = make_result()
    path = write_run(result, tmp_path / "out")
    assert path == tmp_path / "out" / "toy" / "pin-in-place"
    names = sorted(p.name for p in path.iterdir())
    assert names == ["config.toml", "series.csv", "summary.json", "trace.json"]
    assert json.loads((path / "trace.json").read_text())["traceEvents"]
    untraced = write_run(result, tmp_path / "bare", trace=False)
    assert not (untraced / "trace.json").exists()
    # summary.json is the runner's bytes, verbatim: no timestamps or paths added
    assert (path / "summary.json").read_bytes() == result.summary_json().encode()
    summary = json.loads((path / "summary.json").read_text())
    assert summary["metrics"]["tenant.trainer.throughput"]["unit"] == "B/s"
    assert (path / "series.csv").read_text().splitlines()[0] == "series,time_s,value,unit"
    config = tomllib.loads((path / "config.toml").read_text())
    assert config["scenario"] == {"name": "toy", "seed": 7}  # None has no TOML form: omitted
    assert config["platform"]["nodes"] == [1, 2]
    # only the run directory: no temporary siblings
    assert [p.name for p in (tmp_path / "out" / "toy").iterdir()] == ["pin-in-place"]


def test_same_result_gives_identical_bytes(tmp_path: Path) -> None:
    a = write_run(make_result(), tmp_path / "a")
    b = write_run(make_result(), tmp_path / "b")
    for name in ("config.toml", "summary.json", "series.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_compare_profile_run_gets_its_own_directory(tmp_path: Path) -> None:
    assert run_dir_name("odp") == "odp"
    assert run_dir_name("odp", "5.16") == "odp@5.16"
    path = write_run(make_result(profile="5.16"), tmp_path, compare_profile=True)
    assert path.name == "pin-in-place@5.16"


def test_rerun_replaces_the_previous_directory(tmp_path: Path) -> None:
    first = write_run(make_result(throughput=1.0), tmp_path)
    (first / "stale-extra-file").write_text("from an older pinlab")
    second = write_run(make_result(throughput=2.0), tmp_path)
    assert first == second
    assert not (second / "stale-extra-file").exists()
    summary = json.loads((second / "summary.json").read_text())
    assert summary["metrics"]["tenant.trainer.throughput"]["value"] == 2.0
    assert [p.name for p in (tmp_path / "toy").iterdir()] == ["pin-in-place"]


def _only_run_dir(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir())


def test_failure_while_writing_leaves_previous_run_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An injected failure on the second file: the old run survives untouched, and the
    half-written temporary directory is gone."""
    old = write_run(make_result(throughput=1.0), tmp_path)
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    real = output._write_file
    calls = []

    def failing(path: Path, text: str) -> None:
        calls.append(path.name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(path, text)

    monkeypatch.setattr(output, "_write_file", failing)
    with pytest.raises(OSError, match="No space"):
        write_run(make_result(throughput=2.0), tmp_path)
    assert calls[0] == "config.toml"
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before
    assert _only_run_dir(tmp_path / "toy") == ["pin-in-place"]


def test_failure_with_no_previous_run_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = output._write_file

    def failing(path: Path, text: str) -> None:
        if path.name == "series.csv":
            raise OSError(5, "Input/output error")
        real(path, text)

    monkeypatch.setattr(output, "_write_file", failing)
    with pytest.raises(OSError):
        write_run(make_result(), tmp_path)
    assert _only_run_dir(tmp_path / "toy") == []


def test_failed_final_rename_puts_the_old_run_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap renames the old directory aside, the new one in; if that second rename
    fails, the old directory returns to its place and both temporaries are removed."""
    old = write_run(make_result(throughput=1.0), tmp_path)
    before = (old / "summary.json").read_bytes()
    real_replace = os.replace

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if ".tmp-" in os.fspath(src):
            raise PermissionError(13, "Permission denied")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(PermissionError):
        write_run(make_result(throughput=2.0), tmp_path)
    assert (old / "summary.json").read_bytes() == before
    assert _only_run_dir(tmp_path / "toy") == ["pin-in-place"]


def test_failure_computing_a_file_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every text is computed before the first byte is written."""
    result = make_result()

    def broken() -> str:
        raise RuntimeError("recorder exploded")

    monkeypatch.setattr(result.recorder, "series_csv", broken)
    with pytest.raises(RuntimeError):
        write_run(result, tmp_path)
    assert not (tmp_path / "toy").exists() or _only_run_dir(tmp_path / "toy") == []


def test_write_run_dir_honours_umask(tmp_path: Path) -> None:
    """The run directory is created with mkdir (umask applies), not mkdtemp's 0700."""
    old_mask = os.umask(0o022)
    try:
        path = write_run_dir(tmp_path / "d", {"a.txt": "x\n"})
    finally:
        os.umask(old_mask)
    assert path.stat().st_mode & 0o777 == 0o755
    assert (path / "a.txt").read_bytes() == b"x\n"


_NUMBERS = st.one_of(
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 0.0, -0.0, 4096, 4096.0, 2**53, float(2**53), 0.1, 1e-300]),
)


@given(
    st.lists(
        st.tuples(st.sampled_from(["a.x.bytes", "b,q.y.utilisation", 'c"z.w.pinned']),
                  st.sampled_from([0.0, 4e-10, 0.1, 0.30000000000000004, 4.049999999999994, 7.0]),
                  _NUMBERS),
        max_size=40,
    ),
    st.integers(0, 3),
)  # fmt: skip
def test_series_csv_writes_each_point_as_it_reads(
    points: list[tuple[str, float, float]], cap: int
) -> None:
    """series.csv formats each distinct time and value once (Recorder.series_csv); every row
    is still what formatting that point alone gives, whatever the cache holds (cap 0-3),
    equal numbers of other types (0, 0.0, -0.0; 4096 and 4096.0) included, and names
    with commas and quotes are quoted."""
    import csv
    import io

    from pinlab.sim import metrics

    rec = Recorder()
    for name, t, v in points:
        rec.series.setdefault(name, metrics.Series()).points.append((t, v))
    expected = io.StringIO()
    writer = csv.writer(expected, lineterminator="\n")
    writer.writerow(["series", "time_s", "value", "unit"])
    for name in sorted(rec.series):
        for t, v in rec.series[name].points:
            row = [name, metrics._csv_number(round(t, 9)), metrics._csv_number(v)]
            writer.writerow([*row, metrics.series_unit(name)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metrics, "_CSV_VALUES", cap)
        assert rec.series_csv() == expected.getvalue()
    assert rec.series_csv() == expected.getvalue()
