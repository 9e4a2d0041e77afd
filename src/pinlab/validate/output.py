"""What ``pinlab validate`` prints: per table every point (x, measured, simulated, error),
the table's error against its tolerance, and the overall errors -- as rich tables or as JSON.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

from rich.console import Console
from rich.table import Table

from pinlab.validate.runner import Summary, TableResult, ValidationResult

__all__ = [
    "fmt_error",
    "fmt_number",
    "fmt_pct",
    "fmt_x",
    "print_result",
    "result_json",
    "summary_line",
]


def fmt_error(error: float) -> str:
    """A relative error as a signed percentage: ``+4.3%``; ``inf`` for none usable."""
    return "inf" if not math.isfinite(error) else f"{error * 100:+.1f}%"


def fmt_pct(value: float) -> str:
    """An unsigned error or tolerance: ``4.3%``."""
    return "inf" if not math.isfinite(value) else f"{value * 100:.1f}%"


def fmt_number(value: float) -> str:
    """A measured or simulated value with six significant digits."""
    return "nan" if math.isnan(value) else f"{value:.6g}"


def fmt_x(x: int | float | str) -> str:
    """A point's x as the file gives it (sizes as whole numbers)."""
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def _points_table(result: TableResult) -> Table:
    """The points, without title or caption: rich wraps those to the table's width, a few
    columns, which cut a source's commit hash in two (:func:`_source_line` is printed below it
    at the console's width instead)."""
    t = result.table
    cmp = t.spec.compare
    multi = bool(t.spec.series)
    table = Table()
    if multi:
        table.add_column("series")
    table.add_column(cmp.x, justify="right")
    table.add_column("measured", justify="right")
    table.add_column("simulated", justify="right")
    table.add_column("error", justify="right")
    for p in result.points:
        cells = [fmt_x(p.x), fmt_number(p.measured), fmt_number(p.simulated), fmt_error(p.error)]
        if multi:
            cells.insert(0, t.series_label(p.series))
        table.add_row(*cells)
    return table


def _source_line(result: TableResult) -> str:
    """``source: <citation>; <compared column> [<unit>]``."""
    t = result.table
    cmp = t.spec.compare
    y = f"{cmp.placement} {cmp.y}" if cmp.placement else cmp.y
    return f"source: {t.spec.table.source.citation()}; {y} [{cmp.unit}]"


def summary_line(summary: Summary, what: str) -> str:
    """``overall (12 tables, 412 points): geometric-mean error 6.1%, ...``."""
    return (
        f"{what} ({summary.tables} table{'s' if summary.tables != 1 else ''}, "
        f"{summary.points} points): geometric-mean error {fmt_pct(summary.error)}, "
        f"mean of table errors {fmt_pct(summary.mean_table_error)}; "
        f"{summary.passed}/{summary.tables} tables within tolerance"
    )


def _table_line(result: TableResult) -> str:
    holdout = " (holdout)" if result.table.holdout else ""
    return (
        f"{result.table.id}{holdout}: error {fmt_pct(result.error)} "
        f"(tolerance {fmt_pct(result.tolerance)}): {_verdict(result.passed)}"
    )


def print_result(result: ValidationResult, console: Console, report: str | None = None) -> None:
    """Every table's points and verdict, then the overall lines."""
    line = partial(console.print, markup=False, highlight=False, soft_wrap=True)
    for r in result.results:
        line(f"{r.table.id}: {r.table.spec.table.title}", style="bold")
        console.print(_points_table(r))
        line(_source_line(r))
        line(_table_line(r))
        console.print("")
    for what, group in (("overall", result.validation), ("holdout", result.holdout)):
        summary = Summary.of(group)
        if summary is not None:
            console.print(summary_line(summary, what), markup=False, highlight=False)
    if report is not None:
        console.print(f"report: {report}", markup=False, highlight=False)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _summary_json(summary: Summary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "tables": summary.tables,
        "points": summary.points,
        "passed_tables": summary.passed,
        "error": _finite(summary.error),
        "mean_table_error": _finite(summary.mean_table_error),
    }


def _table_json(r: TableResult) -> dict[str, Any]:
    t = r.table
    spec = t.spec
    return {
        "id": t.id,
        "title": spec.table.title,
        "kind": t.kind,
        "file": t.path,
        "holdout": t.holdout,
        "source": spec.table.source.citation(),
        "url": spec.table.source.url,
        "platform": spec.run.platform,
        "x": spec.compare.x,
        "y": spec.compare.y,
        "placement": spec.compare.placement,
        "unit": spec.compare.unit,
        "tolerance": r.tolerance,
        "error": _finite(r.error),
        "passed": r.passed,
        "points": [
            {
                "x": p.x,
                "series": p.series,
                "measured": p.measured,
                "simulated": _finite(p.simulated),
                "error": _finite(p.error),
            }
            for p in r.points
        ],
    }


def result_json(result: ValidationResult, report: str | None = None) -> dict[str, Any]:
    """The whole result as JSON-able data (non-finite numbers as null)."""
    tables: Sequence[TableResult] = result.results
    return {
        "passed": result.passed,
        "tables": [_table_json(r) for r in tables],
        "overall": _summary_json(Summary.of(result.validation)),
        "holdout": _summary_json(Summary.of(result.holdout)),
        "report": report,
    }
