"""Every table shipped in src/pinlab/validate/tables/ is well-formed and runnable (issue 11,
item 4): it loads; ids are unique and match the file names; units are known and agree with the
column; points exist; the source is cited; no holdout source is cited or quoted anywhere in it;
the README lists every table; and each table's columns, matrices and rows are ones the tool
prints -- checked by running it against the layout double of tests.validate.fakebench, whose
values are the file's own points times a known factor, so the table error must come out as
exactly that factor."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from pinlab.validate import DEFAULT_DIR, load_tables, run_table
from pinlab.validate.schema import (
    KINDS,
    PLATFORMS,
    UNITS,
    ValidationTable,
    column_unit,
    holdout_reference,
    parse_cell,
)
from tests.validate.fakebench import FakeBench

VALIDATION = DEFAULT_DIR
TABLES = load_tables(VALIDATION)
BY_ID = {t.id: t for t in TABLES}

# the reserved tables, however a file might spell a reference to them
HOLDOUT_PATTERNS = [
    re.compile(r"perftest\W{0,3}(pull|pr)\W{0,3}#?\s*98\b", re.I),
    re.compile(r"perftest/pull/98\b", re.I),
    re.compile(r"nccl\W{0,3}(issues?|pull|pr)?\W{0,3}#\s*(1264|778)\b", re.I),
    re.compile(r"nccl/(issues|pull)/(1264|778)\b", re.I),
]


def test_at_least_twelve_tables_over_the_tools_and_presets() -> None:
    assert len(TABLES) >= 12
    assert {t.kind for t in TABLES} == set(KINDS)
    platforms = {t.spec.run.platform for t in TABLES}
    assert {"cx-pair", "dgx-a100", "dgx-h100", "p4d", "p5", "gpu-box"} <= platforms
    assert platforms <= set(PLATFORMS)
    size_sweeps = [t for t in TABLES if not t.is_matrix and len(t.spec.points) >= 16]
    assert len(size_sweeps) >= 8


def test_ids_are_unique_and_the_file_names() -> None:
    assert len(BY_ID) == len(TABLES)
    for t in TABLES:
        assert Path(t.path).name == f"{t.id}.toml"


@pytest.mark.parametrize("t", TABLES, ids=lambda t: t.id)
def test_table_is_well_formed(t: ValidationTable) -> None:
    spec = t.spec
    assert spec.points
    assert all(p.y > 0 and math.isfinite(p.y) for p in spec.points)
    assert spec.compare.unit in UNITS
    for name in [None, *spec.series]:
        printed = column_unit(t.kind, t.series_y(name))
        assert printed in (None, spec.compare.unit)
    assert 0 < spec.compare.tolerance <= 0.3
    src = spec.table.source
    assert src.url.startswith(f"https://github.com/{src.repo}/")
    assert src.commit or src.author
    assert sum(x is not None for x in (src.issue, src.pr, src.file)) == 1
    assert len(spec.table.setup) > 80 and len(spec.table.notes) > 40
    assert holdout_reference(src) is None
    assert not t.holdout


@pytest.mark.parametrize("t", TABLES, ids=lambda t: t.id)
def test_every_tolerance_is_justified_in_a_comment(t: ValidationTable) -> None:
    text = Path(t.path).read_text(encoding="utf-8")
    block = text[: text.index("\ntolerance = ")].rsplit("[compare]", 1)[1]
    comment = " ".join(line for line in block.splitlines() if line.startswith("# "))
    assert "Tolerance:" in comment and len(comment) > 80


def test_no_holdout_source_appears_in_any_table_file() -> None:
    files = sorted(VALIDATION.rglob("*.toml"))
    assert len(files) == len(TABLES)  # nothing below validation/ but the tables
    for path in files:
        text = path.read_text(encoding="utf-8")
        for pattern in HOLDOUT_PATTERNS:
            assert not pattern.search(text), f"{path.name}: {pattern.pattern}"


def test_the_holdout_patterns_catch_the_three_references() -> None:
    """Negative control: the scan above would see each reserved source."""
    for text in (
        "linux-rdma/perftest PR #98",
        "https://github.com/linux-rdma/perftest/pull/98",
        "NVIDIA/nccl #1264",
        "https://github.com/NVIDIA/nccl/issues/778",
        "nccl issue #778",
    ):
        assert any(p.search(text) for p in HOLDOUT_PATTERNS), text
    assert not any(
        p.search("NVIDIA/nccl #814; perftest #394; 98.38 Gb/s") for p in HOLDOUT_PATTERNS
    )


def test_the_holdout_directory_holds_no_data() -> None:
    holdout = VALIDATION / "holdout"
    assert sorted(p.name for p in holdout.iterdir()) == ["README.md"]
    assert load_tables(holdout, holdout=True) == []


def test_the_readme_lists_every_table_and_no_other() -> None:
    readme = (VALIDATION / "README.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| `([a-z0-9-]+)` \| ([a-z0-9-]+) \| ([a-z0-9-]+) \| (\d+) \|", readme, re.M
    )
    assert sorted(r[0] for r in rows) == sorted(BY_ID)
    for tid, kind, platform, points in rows:
        t = BY_ID[tid]
        assert (kind, platform, int(points)) == (t.kind, t.spec.run.platform, len(t.spec.points))


def _row_key(t: ValidationTable, x: object, series: str | None) -> tuple[object, ...]:
    """How tests.validate.fakebench keys the cell that holds a point (its documented layout)."""
    if t.is_matrix:
        return parse_cell(str(x))
    where = t.series_where(series)
    key = tuple(where[k] for k in sorted(where))
    return (*key, float(x))  # type: ignore[arg-type]


@pytest.mark.parametrize("t", TABLES, ids=lambda t: t.id)
def test_table_runs_against_the_tools_printed_layout(t: ValidationTable) -> None:
    factor = 1.07
    placement = t.spec.compare.placement
    truth: dict[tuple[object, ...], float] = {}
    for p in t.spec.points:
        column = t.series_y(p.series)
        column = f"{placement} {column}" if placement else column
        truth[(t.series_argv(p.series), column, _row_key(t, p.x, p.series))] = p.y * factor

    def value(argv: tuple[str, ...], column: str, key: tuple[object, ...]) -> float:
        norm = tuple(float(k) if isinstance(k, (int, float)) else k for k in key)
        return truth.get((tuple(argv), column, norm), 1.0)

    bench = FakeBench(value)
    result = run_table(t, bench)
    assert len(result.points) == len(t.spec.points)
    assert all(p.error == pytest.approx(factor - 1) for p in result.points)
    assert result.error == pytest.approx(factor - 1)
    distinct = {t.series_argv(p.series) for p in t.spec.points}
    assert len(bench.calls) == len(distinct)
    assert all(c["platform"] == t.spec.run.platform for c in bench.calls)
