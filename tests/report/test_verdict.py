"""Verdict tables (title = scenario + claim, the verdict's columns, HELD/FAILED line) and the
``--compare-profile`` difference table."""

from __future__ import annotations

import io

from rich.console import Console

from pinlab.report.verdict import (
    MetricDiff,
    compare_metrics,
    compare_table,
    fmt_value,
    render_comparison,
    render_verdict,
    verdict_table,
)
from pinlab.scenarios.result import Metric, RunResult, Verdict
from pinlab.sim.metrics import Recorder


def render(obj: object, *, width: int = 160) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(obj)
    return console.export_text()


def verdict(held: bool = True) -> Verdict:
    return Verdict(
        scenario="cluster-128",
        claim="pinning device memory costs nothing at cluster scale",
        held=held,
        columns=["variant", "throughput", "stale DMA"],
        rows=[
            {"variant": "pin-in-place", "throughput": "24.1 GB/s", "stale DMA": "0"},
            {"variant": "odp", "throughput": "19.9 GB/s"},  # a missing cell stays empty
        ],
        explanation="pin-in-place moves 21% more bytes than odp",
    )


def test_verdict_table_has_title_columns_and_rows() -> None:
    text = render(verdict_table(verdict()))
    assert "cluster-128: pinning device memory costs nothing at cluster scale" in text
    header = next(line for line in text.splitlines() if "variant" in line)
    assert header.index("variant") < header.index("throughput") < header.index("stale DMA")
    assert "24.1 GB/s" in text and "19.9 GB/s" in text
    assert "pin-in-place" in text and "odp" in text


def test_render_verdict_ends_with_the_claim_line() -> None:
    console = Console(width=160, record=True, file=io.StringIO())
    render_verdict(verdict(held=True), console)
    render_verdict(verdict(held=False), console)
    lines = [line for line in console.export_text().splitlines() if line.startswith("claim ")]
    assert lines == [
        "claim HELD: pin-in-place moves 21% more bytes than odp",
        "claim FAILED: pin-in-place moves 21% more bytes than odp",
    ]


def test_fmt_value_by_unit() -> None:
    assert fmt_value(32 * 2**30, "B") == "32 GiB"
    assert fmt_value(25e9, "B/s") == "25 GB/s"
    assert fmt_value(1.75e-6, "s") == "1.75 µs"
    assert fmt_value(-0.002, "s") == "-2 ms"
    assert fmt_value(12.0, "count") == "12"
    assert fmt_value(0.123456, "ratio") == "0.1235"
    assert fmt_value(0, "ratio") == "0"


def test_metric_diff_change_text() -> None:
    assert MetricDiff("m", "count", 3, 3).change() == "="
    assert MetricDiff("m", "count", 4, 6).change() == "+2 (+50%)"
    assert MetricDiff("m", "B", 2 * 2**30, 2**30).change() == "-1 GiB (-50%)"
    assert MetricDiff("m", "count", 0, 2).change() == "+2 (from 0)"
    assert MetricDiff("m", "count", None, 2).change() == "only in B"
    assert MetricDiff("m", "count", 2, None).change() == "only in A"
    assert MetricDiff("m", "count", 4, 6).delta == 2.0


def run(profile: str, **values: float) -> RunResult:
    units = {"throughput": "B/s", "stale": "count", "pinned": "B", "odp_only": "count"}
    return RunResult(
        scenario="toy",
        variant="odp",
        profile=profile,
        seed=0,
        duration=1.0,
        config={},
        metrics={k: Metric(v, units[k]) for k, v in values.items()},
        recorder=Recorder(),
    )


def test_compare_metrics_unions_both_runs() -> None:
    a = run("6.16", throughput=2e10, stale=0, pinned=2**30)
    b = run("5.16", throughput=1e10, stale=0, odp_only=3)
    diffs = {d.name: d for d in compare_metrics(a, b)}
    assert list(diffs) == ["odp_only", "pinned", "stale", "throughput"]
    assert diffs["throughput"].unit == "B/s" and diffs["throughput"].delta == -1e10
    assert not diffs["stale"].changed
    assert diffs["pinned"].b is None and diffs["odp_only"].a is None


def test_compare_table_lists_changes_and_counts_the_rest() -> None:
    a = run("6.16", throughput=2e10, stale=0, pinned=2**30)
    b = run("5.16", throughput=1e10, stale=0, pinned=2**30)
    text = render(compare_table(a, b))
    assert "toy/odp: profile 6.16 -> 5.16" in text
    header = next(line for line in text.splitlines() if "metric" in line)
    for col in ("metric", "unit", "profile 6.16", "profile 5.16", "change"):
        assert col in header
    assert "throughput" in text and "20 GB/s" in text and "-10 GB/s (-50%)" in text
    assert "stale" not in text.replace("stale DMA", "")  # unchanged: only counted
    assert "2 of 3 metrics unchanged" in text
    full = render(compare_table(a, b, changed_only=False))
    assert "stale" in full and "=" in full


def test_compare_table_identical_runs_say_so() -> None:
    a = run("6.16", stale=0)
    b = run("6.16", stale=0)
    console = Console(width=160, record=True, file=io.StringIO())
    render_comparison(a, b, console)
    text = console.export_text()
    assert text.strip() == "toy/odp: profile 6.16 -> 6.16: all 1 metrics identical"
    full = render(compare_table(a, b, changed_only=False))
    assert "profile 6.16 (A)" in full and "profile 6.16 (B)" in full
