"""Sweep analysis (issue 13 item 5): typed factor and fixed columns with labels, a summary
grouped by factor, results.html with plots, deterministic points not replicated, and a
warning for identical replications."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pinlab.cli import main
from pinlab.sweep.analysis import LABEL_SUFFIX, replication_warnings, summarise, typed_column
from tests.sweep.test_sweep import CAP, SWEEP


def test_typed_column_keeps_types_and_labels() -> None:
    assert typed_column(["500ms", "1s"]) == ([0.5, 1.0], "s", ["500ms", "1s"])
    assert typed_column(["1GiB", "2KiB"]) == ([2**30, 2048], "B", ["1GiB", "2KiB"])
    assert typed_column(["12GB/s"])[0:2] == ([12e9], "B/s")
    # a constant text before the quantity: typed by the quantity (a policy line)
    typed, unit, labels = typed_column(["drm/{gpu0}/vram 1GiB", "drm/{gpu0}/vram 2GiB"])
    assert (typed, unit) == ([2**30, 2**31], "B") and labels == [
        "drm/{gpu0}/vram 1GiB",
        "drm/{gpu0}/vram 2GiB",
    ]
    assert typed_column([1, 2.5]) == ([1, 2.5], "", None)  # numbers stay numbers
    assert typed_column(["odp", "pinned"]) == (["odp", "pinned"], "", None)


def test_summary_groups_by_factor_with_mean_spread_n() -> None:
    rows = [
        {"variant": "v", "f": 1, "m": 2.0},
        {"variant": "v", "f": 1, "m": 4.0},
        {"variant": "v", "f": 2, "m": 5.0},
    ]
    (a, b) = summarise(rows, ["f"], ["m"], {"m": "s"})
    assert (a["value"], a["mean"], a["n"], a["min"], a["max"]) == (1, 3.0, 2, 2.0, 4.0)
    assert a["spread"] == pytest.approx(2**0.5) and a["unit"] == "s"
    assert (b["value"], b["mean"], b["spread"], b["n"]) == (2, 5.0, 0.0, 1)


def test_the_summary_names_each_factor_once_and_shows_numbers_in_their_units() -> None:
    """A factor's path repeated on every row of one long table took most of the page and
    pushed the numbers out of sight, and sizes read ``1.07374e+09``. Each factor now heads
    its own table, and numbers are shown as the run reports show them."""
    from pinlab.report.sweep import render_sweep_html

    rows = [{"variant": "v", CAP: c, "pinned": c, "denials": 3.0} for c in (2**30, 2**31, 2**31)]
    records = summarise(rows, [CAP], ["pinned", "denials"], {"pinned": "B", "denials": "count"})
    page = render_sweep_html(
        "tiny", "tiny.toml", records, factors=[CAP], units={CAP: "B"}, rows=3, points=3
    )
    summary = page[page.index('<section id="summary">') :]
    assert summary.count(CAP.replace('"', "&#34;")) == 1
    cells = re.findall(r'<td class="num">([^<]*)</td>', summary)
    assert "1 GiB" in cells and "2 GiB" in cells and "3" in cells
    assert not any("e+" in c for c in cells)


def test_identical_replications_of_a_stochastic_run_warn() -> None:
    same = [{"variant": "v", "f": 1, "seed": s, "deterministic": False, "m": 1.0} for s in (1, 2)]
    (line,) = replication_warnings(same, ["f"], ["m"])
    assert "replications identical" in line and "seeds 1, 2" in line
    differ = [dict(same[0]), {**same[1], "m": 2.0}]
    assert replication_warnings(differ, ["f"], ["m"]) == []


def _sweep(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_sweep_writes_typed_columns_summary_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert (
        main(["sweep", str(_sweep(tmp_path, SWEEP)), "--out", str(out), "--jobs", "1", "--quiet"])
        == 0
    )
    table = pq.read_table(out / "results.parquet")
    assert table.num_rows == 8  # stochastic (Poisson app arrivals): both seeds ran
    schema = table.schema
    assert schema.field(CAP).type == pa.int64()
    assert schema.field(CAP + LABEL_SUFFIX).type == pa.string()
    assert schema.field("scenario.sample_interval").type == pa.float64()
    assert schema.field("scenario.duration").type == pa.float64()  # a fixed value: a column
    assert set(table.column("scenario.duration").to_pylist()) == {6.0}
    assert schema.field("deterministic").type == pa.bool_()
    units = json.loads((out / "units.json").read_text())
    assert units[CAP] == "B" and units["scenario.sample_interval"] == "s"
    with (out / "summary.csv").open() as f:
        summary = list(csv.DictReader(f))
    caps = [r for r in summary if r["factor"] == CAP and r["metric"] == "global.denials"]
    assert [int(r["n"]) for r in caps] == [4, 4]
    assert {r["label"] for r in caps} == {"drm/{gpu0}/vram 1GiB", "drm/{gpu0}/vram 2GiB"}
    page = (out / "results.html").read_text()
    assert "Summary by factor" in page and "<svg" in page


def test_deterministic_points_are_not_replicated(tmp_path: Path) -> None:
    text = SWEEP.replace('"tenants.app1.params.arrivals" = "poisson"\n', "")
    out = tmp_path / "out"
    assert (
        main(["sweep", str(_sweep(tmp_path, text)), "--out", str(out), "--jobs", "1", "--quiet"])
        == 0
    )
    table = pq.read_table(out / "results.parquet")
    assert table.num_rows == 4  # one replication per factor combination
    assert set(table.column("deterministic").to_pylist()) == {True}
    notes = json.loads((out / "notes.json").read_text())
    assert notes["unreplicated"] == 4 and "deterministically" in notes["note"]
    assert not (out / "INCOMPLETE").exists()  # complete: the unreplicated are not missing
