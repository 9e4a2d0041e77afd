"""The metric tables of a run's report page (:mod:`pinlab.report.html`): the verdict table of
a scenario's variants, the whole-run, per-tenant and per-device-region tables, and every
metric as ``summary.json`` holds it.

A table is a :class:`Table` view model whose body is joined here, in Python, rather than cell
by cell in the template: a cluster's tables hold tens of thousands of cells. Cells are escaped
by :func:`escape_text`, exactly as jinja2's autoescaping escapes the rest of the page. Long
tables are folded (:data:`COLLAPSE_ROWS`) and cut (:data:`SHOWN_ROWS`), with a last row that
says where the rest is.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup

from pinlab.report.output import SUMMARY_FILE
from pinlab.report.verdict import fmt_value
from pinlab.scenarios.result import Metric, RunResult, Verdict

__all__ = [
    "COLLAPSE_ROWS",
    "SHOWN_ROWS",
    "Table",
    "all_metrics_table",
    "escape_text",
    "run_tables",
    "verdict_table",
]

COLLAPSE_ROWS = 16
"""Metric tables with more rows than this are shown folded (``<details>``)."""

SHOWN_ROWS = 5000
"""A metric table shows at most this many rows, then one saying how many more
``summary.json`` holds: the 3-iteration all-reduce of ``cluster-128`` at 4 096 nodes has
600 000 metrics, a 110 MB page no browser opens usefully, whose rows took a quarter of
``pinlab run`` to format (the built-in scenarios' largest table has 2 438)."""

_TENANT_COLUMNS = (
    "throughput",
    "bytes",
    "transfers",
    "latency_p50",
    "latency_p99",
    "stall_time",
    "odp_faults",
    "denials",
)
_REGION_COLUMNS = (
    "size",
    "used_peak",
    "pinned_peak",
    "pinned_final",
    "free_final",
    "fragmentation_final",
    "evictions",
    "evicted_bytes",
)


@dataclass(slots=True)
class Table:
    """A rendered table: header cells and rows of (text, css class) cells."""

    title: str
    columns: list[str]
    rows: list[list[tuple[str, str]]]
    row_classes: list[str] = field(default_factory=list)
    column_classes: list[str] = field(default_factory=list)
    omitted: int = 0  # rows of the table left out after ``rows`` (:data:`SHOWN_ROWS`)

    @property
    def count(self) -> int:
        """The table's rows, those left out included."""
        return len(self.rows) + self.omitted

    @property
    def collapsed(self) -> bool:
        """Long tables (a 128-device cluster) start folded away."""
        return self.count > COLLAPSE_ROWS

    @property
    def body(self) -> Markup:
        """The ``<tbody>`` rows, one ``<tr>`` line each, as the template's loop wrote them: a
        cluster's table holds tens of thousands of cells, and escaping them one
        ``{{ }}`` at a time was most of a run page's rendering. Rows left out are counted in
        a last row that says where they are."""
        lines = []
        for i, row in enumerate(self.rows):
            cls = self.row_classes[i] if i < len(self.row_classes) else ""
            cells = "".join(
                f'<td class="{escape_text(c)}">{escape_text(text)}</td>'
                if c
                else f"<td>{escape_text(text)}</td>"
                for text, c in row
            )
            head = f'<tr class="{escape_text(cls)}">' if cls else "<tr>"
            lines.append(f"{head}{cells}</tr>\n")
        if self.omitted:
            lines.append(
                f'<tr class="omitted"><td colspan="{len(self.columns)}">{self.omitted:,} more '
                f"rows, not shown: every value is in {SUMMARY_FILE}</td></tr>\n"
            )
        return Markup("".join(lines))


def escape_text(text: str) -> str:
    """``text`` escaped for HTML exactly as jinja2's autoescape (markupsafe) escapes it --
    ``&``, ``<``, ``>``, ``'`` and ``"`` -- for cells joined in Python (:attr:`Table.body`)."""
    return (
        text.replace("&", "&amp;")
        .replace(">", "&gt;")
        .replace("<", "&lt;")
        .replace("'", "&#39;")
        .replace('"', "&#34;")
    )


def _fmt(metric: Metric) -> str:
    return fmt_value(metric.value, metric.unit)


def _unit_text(unit: str) -> str:
    return "" if unit in ("count",) else unit


def verdict_table(verdict: Verdict, highlight: str | None = None) -> Table:
    columns = list(verdict.columns)
    rows: list[list[tuple[str, str]]] = []
    classes: list[str] = []
    for row in verdict.rows:
        rows.append([(str(row.get(c, "")), "" if i == 0 else "num") for i, c in enumerate(columns)])
        first = str(row.get(columns[0], "")) if columns else ""
        classes.append("current" if highlight is not None and first == highlight else "")
    return Table("", columns, rows, classes, ["", *("num" for _ in columns[1:])])


def _global_table(result: RunResult) -> Table | None:
    names = [n for n in sorted(result.metrics) if n.startswith("global.")]
    if not names:
        return None
    rows = [
        [
            (n.removeprefix("global."), ""),
            (_fmt(result.metrics[n]), "num"),
            (result.metrics[n].description, "desc"),
        ]
        for n in names
    ]
    return Table("Whole run", ["metric", "value", "what it measures"], rows, [], ["", "num", ""])


def _pivot(
    result: RunResult,
    title: str,
    parse: Callable[[str], tuple[str, str] | None],
    preferred: Sequence[str],
    first_column: str,
) -> Table | None:
    """A table with one row per entity (tenant, device region) and one column per metric of
    ``preferred`` that any entity has; ``parse`` splits a metric name into (entity, metric)."""
    cells: dict[str, dict[str, Metric]] = {}
    for name in sorted(result.metrics):
        parsed = parse(name)
        if parsed is not None and parsed[1] in preferred:
            cells.setdefault(parsed[0], {})[parsed[1]] = result.metrics[name]
    if not cells:
        return None
    columns = [c for c in preferred if any(c in row for row in cells.values())]
    headers = [first_column]
    for c in columns:
        unit = next((row[c].unit for row in cells.values() if c in row), "")
        headers.append(c.replace("_", " ") + (f" ({unit})" if unit in ("ratio",) else ""))
    shown = list(itertools.islice(cells.items(), SHOWN_ROWS))
    rows = [
        [(entity, "")] + [(_fmt(row[c]) if c in row else "–", "num") for c in columns]
        for entity, row in shown
    ]
    classes = ["", *("num" for _ in columns)]
    return Table(title, headers, rows, [], classes, omitted=len(cells) - len(shown))


def _tenant_metric(name: str) -> tuple[str, str] | None:
    if not name.startswith("tenant."):
        return None
    rest = name.removeprefix("tenant.")
    tenant, _, metric = rest.rpartition(".")
    return (tenant, metric) if tenant else None


def _region_metric(name: str) -> tuple[str, str] | None:
    if not name.startswith("device."):
        return None
    parts = name.removeprefix("device.").rsplit(".", 2)
    if len(parts) != 3:
        return None
    return f"{parts[0]} {parts[1]}", parts[2]


def all_metrics_table(result: RunResult) -> Table:
    names = sorted(result.metrics)
    shown = [(name, result.metrics[name]) for name in names[:SHOWN_ROWS]]
    rows = [
        [
            (name, "name"),
            (_fmt(m), "num"),
            (_unit_text(m.unit), "unit"),
            (m.description, "desc"),
        ]
        for name, m in shown
    ]
    return Table(
        f"All {len(names)} metrics (as in summary.json)",
        ["metric", "value", "unit", "what it measures"],
        rows,
        [],
        ["", "num", "", ""],
        omitted=len(names) - len(rows),
    )


def run_tables(result: RunResult) -> list[Table]:
    """The headline tables of a run's page, those it has: the whole run (``global.*``), one
    row per tenant, one per device memory region."""
    tables = (
        _global_table(result),
        _pivot(result, "Tenants", _tenant_metric, _TENANT_COLUMNS, "tenant"),
        _pivot(result, "Device memory regions", _region_metric, _REGION_COLUMNS, "region"),
    )
    return [t for t in tables if t is not None]
