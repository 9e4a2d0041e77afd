"""``report.html`` of ``pinlab validate``: one self-contained page, built like the run and
suite reports (:mod:`pinlab.report.html`: their base template, Content-Security-Policy,
check script and inline SVG), with an overview of every table, a parity plot over all of
them and, per table, its source, setup, uncertainty, command, measured-vs-simulated plot and
every point. Source URLs are shown as text without their scheme, not as links: the page
references nothing outside itself. The same result gives the same bytes.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from pinlab.bench import BenchSetup, bench_argv
from pinlab.report.html import Plot, render_page, write_report
from pinlab.report.plots import figure_svg
from pinlab.validate.output import fmt_error, fmt_number, fmt_pct, fmt_x, summary_line
from pinlab.validate.plots import parity_figure, table_figure
from pinlab.validate.runner import Summary, TableResult, ValidationResult

__all__ = ["REPORT_FILE", "command_line", "render_validation_html", "write_validation_report"]

REPORT_FILE = "report.html"


def command_line(result: TableResult) -> str:
    """The ``pinlab bench`` command line of a table (its first command) as one types it:
    pinlab's options before the tool, since everything after the tool is the tool's
    (:func:`~pinlab.bench.bench_argv`); a table's other commands follow as ``also:``, their
    tool arguments only."""
    run = result.table.spec.run
    setup = BenchSetup(run.platform, dict(run.platform_params), run.nodes, tuple(run.sets))
    line = shlex.join(["pinlab", *bench_argv(run.tool, run.argv, setup)])
    others = {
        shlex.join(s.argv) for s in result.table.spec.series.values() if s.argv is not None
    } - {shlex.join(run.argv)}
    return line + (f"; also: {'; '.join(sorted(others))}" if others else "")


def _anchor(text: str) -> str:
    return "table-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x")


def _table_view(r: TableResult, index: int) -> dict[str, Any]:
    t = r.table
    spec = t.spec
    cmp = spec.compare
    caption = f"{t.id}: measured and simulated {cmp.y} [{cmp.unit}]"
    return {
        "id": t.id,
        "anchor": _anchor(t.id),
        "title": spec.table.title,
        "kind": t.kind,
        "holdout": t.holdout,
        "platform": spec.run.platform,
        "reference": spec.table.source.reference(),
        "citation": spec.table.source.citation(),
        "url": spec.table.source.url.removeprefix("https://"),
        "setup": spec.table.setup,
        "notes": spec.table.notes,
        "command": command_line(r),
        "npoints": len(r.points),
        "error": fmt_pct(r.error),
        "tolerance": fmt_pct(r.tolerance),
        "passed": r.passed,
        "x": cmp.x,
        "column": f"{cmp.placement} {cmp.y}" if cmp.placement else cmp.y,
        "unit": cmp.unit,
        "multi": bool(spec.series),
        "plot": Plot.inline(f"plot-{t.id}", caption, figure_svg(table_figure(r)), f"v{index}-"),
        "points": [
            {
                "series": t.series_label(p.series),
                "x": fmt_x(p.x),
                "measured": fmt_number(p.measured),
                "simulated": fmt_number(p.simulated),
                "error": fmt_error(p.error),
            }
            for p in r.points
        ],
    }


def render_validation_html(result: ValidationResult) -> str:
    """The validation report page for ``result``."""
    tables = [_table_view(r, i) for i, r in enumerate(result.results)]
    summary = []
    for what, group in (("overall", result.validation), ("holdout", result.holdout)):
        s = Summary.of(group)
        if s is not None:
            summary.append(summary_line(s, what))
    parity = None
    if result.results:
        caption = "simulated against measured, every point of every table (log-log)"
        parity = Plot.inline(
            "plot-parity", caption, figure_svg(parity_figure(result.results)), "vp-"
        )
    return render_page(
        "validate.html.j2",
        packages=("pinlab.validate",),
        title="Validation against published measurements",
        summary=summary,
        tables=tables,
        parity=parity,
        expected_images=len(tables) + (1 if parity else 0),
    )


def write_validation_report(out_dir: Path | str, result: ValidationResult) -> Path:
    """Render and write ``<out_dir>/report.html`` atomically; returns its path."""
    return write_report(Path(out_dir) / REPORT_FILE, render_validation_html(result))
