"""A sweep's ``results.html``: the summary by factor with plots (metric vs factor, one line
per variant, mean ± spread), self-contained like the run reports.

Takes the summary records of :func:`pinlab.sweep.analysis.summarise` as plain data (the
sweep package sits beside this one), so it can render any such table. A metric is plotted
against a factor when its mean differs between the factor's values for some variant; at
most :data:`MAX_PLOTS` plots, in factor then metric order (the page says when more were
left out; ``summary.csv`` holds all).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pinlab.report import plots
from pinlab.report.html import Plot, render_page, write_report
from pinlab.report.verdict import fmt_value

__all__ = [
    "MAX_PLOTS",
    "RESULTS_HTML",
    "render_sweep_html",
    "sweep_figure_svg",
    "write_sweep_report",
]

RESULTS_HTML = "results.html"
MAX_PLOTS = 24
"""The most metric-vs-factor plots one page holds."""


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def sweep_figure_svg(
    records: Sequence[Mapping[str, Any]], factor: str, metric: str, factor_unit: str = ""
) -> str:
    """``metric`` (mean, with a bar of ± spread) against ``factor``, one line per variant,
    as SVG. A numeric factor is an x axis in its unit; any other is one tick per value."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    mine = [r for r in records if r["factor"] == factor and r["metric"] == metric]
    values = list(dict.fromkeys(r["value"] for r in mine))
    labels = {
        r["value"] if not isinstance(r["value"], list) else str(r["value"]): r["label"]
        for r in mine
    }
    numeric = _numeric(values)
    unit = mine[0]["unit"] if mine else ""
    peak = max((abs(float(r["mean"])) for r in mine), default=0.0)
    yscale, yunit = plots.value_scale(unit, peak)
    with plots.style():
        fig = Figure(figsize=(plots.WIDTH_IN, 3.4))
        ax = fig.add_axes((0.12, 0.18, 0.62, 0.7))
        if numeric:
            xpeak = max((abs(float(v)) for v in values), default=0.0)
            xscale, xunit = plots.value_scale(factor_unit, xpeak) if factor_unit else (1.0, "")
        for i, variant in enumerate(dict.fromkeys(r["variant"] for r in mine)):
            rows = [r for r in mine if r["variant"] == variant]
            if numeric:
                rows.sort(key=lambda r: float(r["value"]))
                xs = [float(r["value"]) / xscale for r in rows]
            else:
                xs = [values.index(r["value"]) for r in rows]
            ys = [float(r["mean"]) / yscale for r in rows]
            err = [float(r["spread"]) / yscale for r in rows]
            colour = plots.PALETTE[i % len(plots.PALETTE)]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=colour, label=variant)
        if numeric:
            ax.set_xlabel(f"{factor} ({xunit})" if xunit else factor)
        else:
            ax.set_xticks(range(len(values)))
            ax.set_xticklabels([str(labels.get(v, v)) for v in values], rotation=15, ha="right")
            ax.set_xlabel(factor)
        ax.set_ylabel(f"mean ({yunit})" if yunit else "mean")
        if unit == "count":  # a mean of counts may be fractional; its ticks are whole
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        if numeric and factor_unit == "count":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(metric, loc="left", fontsize=10)
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
        return plots.figure_svg(fig)


def _varies(records: Sequence[Mapping[str, Any]], factor: str, metric: str) -> bool:
    by_variant: dict[str, set[float]] = {}
    for r in records:
        if r["factor"] == factor and r["metric"] == metric:
            by_variant.setdefault(str(r["variant"]), set()).add(float(r["mean"]))
    return any(len(means) > 1 for means in by_variant.values())


def _summary_tables(
    records: Sequence[Mapping[str, Any]], factors: Sequence[str], units: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The summary by factor as one table per factor, its name said once above it: a
    factor's path (``variants.<v>.policy.cgroups."<cgroup>"."dmem.pin.max"``) repeated on
    every row took most of the page's width and pushed the numbers out of sight. Each number
    is shown in its metric's unit as the run reports show it (``1 GiB``, not
    ``1.07374e+09``); ``summary.csv`` keeps the exact values."""
    tables = []
    for factor in factors:
        rows = []
        for r in records:
            if r["factor"] != factor:
                continue
            unit = str(r["unit"])
            row = {k: r[k] for k in ("label", "variant", "metric", "n")}
            row.update({k: fmt_value(float(r[k]), unit) for k in ("mean", "spread", "min", "max")})
            rows.append({**row, "unit": unit})
        if rows:
            tables.append({"factor": factor, "unit": units.get(factor, ""), "rows": rows})
    return tables


def render_sweep_html(
    name: str,
    source: str,
    records: Sequence[Mapping[str, Any]],
    *,
    factors: Sequence[str],
    units: Mapping[str, str],
    rows: int,
    points: int,
    warnings: Sequence[str] = (),
    note: str = "",
) -> str:
    """The page: counts, notes and warnings, the plots, and the summary table."""
    metrics = list(dict.fromkeys(str(r["metric"]) for r in records))
    pairs = [(f, m) for f in factors for m in metrics if _varies(records, f, m)]
    figures = []
    for i, (factor, metric) in enumerate(pairs[:MAX_PLOTS]):
        svg = sweep_figure_svg(records, factor, metric, units.get(factor, ""))
        caption = f"{metric} vs {factor}: mean ± spread over replications, per variant"
        figures.append(Plot.inline(f"plot{i}", caption, svg, f"p{i}-"))
    return render_page(
        "sweep.html.j2",
        title=f"pinlab sweep: {name}",
        name=name,
        source=source,
        rows=rows,
        points=points,
        factors=list(factors),
        units=dict(units),
        figures=figures,
        left_out=max(0, len(pairs) - MAX_PLOTS),
        flat=len(metrics) * len(factors) - len(pairs),
        summaries=_summary_tables(records, factors, units),
        warnings=list(warnings),
        note=note,
        expected_images=len(figures),
    )


def write_sweep_report(out: Path | str, name: str, source: str, **kwargs: Any) -> Path:
    """Render :func:`render_sweep_html` into ``<out>/results.html`` (atomically)."""
    path = Path(out) / RESULTS_HTML
    return write_report(path, render_sweep_html(name, source, **kwargs))
