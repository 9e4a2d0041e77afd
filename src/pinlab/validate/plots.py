"""Figures of the validation report: measured against simulated per table, and a parity plot
over all tables.

A size sweep (numeric x spanning at least :data:`LOG_SPAN`) gets a logarithmic x axis, and
a y axis spanning as much a logarithmic one; a matrix table plots its cells in file order
with their ``row->column`` labels. Simulated values that are not positive numbers cannot be
drawn on these axes; the figure says how many were left out. Drawing and saving use
:func:`pinlab.report.plots.style` (deterministic SVG).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from pinlab.report.plots import PALETTE, WIDTH_IN, style
from pinlab.validate.output import fmt_pct
from pinlab.validate.runner import PointResult, TableResult

__all__ = ["LOG_SPAN", "parity_figure", "table_figure"]

LOG_SPAN = 16.0
"""Numeric x (or y) values whose max/min reaches this are drawn on a log axis."""

MAX_TICKS = 32
"""At most this many cell labels on a matrix table's x axis."""

MEASURED = PALETTE[0]
SIMULATED = PALETTE[1]  # a single series' crosses; with several, each series' own colour


def _figure(height: float, bottom: float = 0.14) -> tuple[Figure, Axes]:
    """A figure with fixed margins: a layout engine would cost a second full draw per figure,
    and a validation report has one figure per table."""
    fig = Figure(figsize=(WIDTH_IN, height))
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=0.1, right=0.985, top=0.9, bottom=bottom)
    return fig, fig.subplots()


_BINARY = ((1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))


def _size_label(v: float, _pos: object = None) -> str:
    """A byte count as nccl-tests and perftest users write it: 64K, 2M, 16G."""
    for scale, suffix in _BINARY:
        if v >= scale:
            return f"{v / scale:g}{suffix}"
    return f"{v:g}"


def _plain(v: float, _pos: object = None) -> str:
    return f"{v:g}"


def _log(ax: Axes, which: str, *, sizes: bool = False) -> None:
    """A log axis with plain tick labels (the report style turns mathtext off, so matplotlib's
    default ``10^{n}`` labels would print as source text)."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    if which == "x":
        ax.set_xscale("log", base=2 if sizes else 10)
    else:
        ax.set_yscale("log")
    axis.set_major_formatter(FuncFormatter(_size_label if sizes else _plain))
    axis.set_minor_formatter(NullFormatter())


def _legend(ax: Axes, fig: Figure, groups: int) -> None:
    """The legend right of the axes, where it hides no point."""
    fig.subplots_adjust(right=0.75 if groups > 1 else 0.82)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _usable(v: float) -> bool:
    return math.isfinite(v) and v > 0


def _spans(values: Sequence[float]) -> bool:
    vals = [v for v in values if _usable(v)]
    return bool(vals) and min(vals) > 0 and max(vals) / min(vals) >= LOG_SPAN


def _groups(result: TableResult) -> dict[str | None, list[PointResult]]:
    groups: dict[str | None, list[PointResult]] = {}
    for p in result.points:
        groups.setdefault(p.series, []).append(p)
    return groups


def _note_dropped(ax: Axes, points: Sequence[PointResult]) -> None:
    _dropped(ax, sum(1 for p in points if not _usable(p.simulated)))


def _dropped(ax: Axes, dropped: int) -> None:
    """Say on the axes how many simulated values could not be drawn."""
    if dropped:
        ax.text(
            0.99,
            0.02,
            f"{dropped} simulated value{'s' if dropped != 1 else ''} not positive: not drawn",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=8,
            color="#b42318",
        )


def table_figure(result: TableResult) -> Figure:
    """Measured (circles) and simulated (crosses) values of one table, one colour per series."""
    t = result.table
    cmp = t.spec.compare
    groups = _groups(result)
    columns = {t.series_y(name) for name in groups}
    ylabel = columns.pop() if len(columns) == 1 else ""
    if ylabel and cmp.placement:
        ylabel = f"{cmp.placement} {ylabel}"
    with style():
        fig, ax = _figure(3.8 if t.is_matrix else 3.4, 0.3 if t.is_matrix else 0.14)
        ax.set_title(
            f"{t.id}: error {fmt_pct(result.error)} (tolerance {fmt_pct(result.tolerance)})"
        )
        if t.is_matrix:
            _matrix_axes(ax, result, groups)
        else:
            _sweep_axes(ax, result, groups)
        ys = [p.measured for p in result.points] + [p.simulated for p in result.points]
        if _spans(ys):
            _log(ax, "y")
        ax.set_ylabel(f"{ylabel} [{cmp.unit}]" if ylabel else f"[{cmp.unit}]")
        _note_dropped(ax, result.points)
        # one entry per series (measured marker), then what the crosses mean
        ax.plot([], [], "x", color="#555555", label="simulated (crosses)")
        _legend(ax, fig, len(groups))
    return fig


def _style_of(result: TableResult, name: str | None, i: int, groups: int) -> tuple[str, str]:
    """(colour, legend label) of a series' measured points."""
    if groups == 1:
        return MEASURED, "measured"
    return PALETTE[i % len(PALETTE)], result.table.series_label(name)


def _sweep_axes(ax: Axes, result: TableResult, groups: dict[str | None, list[PointResult]]) -> None:
    xs_all = [float(p.x) for p in result.points]
    for i, (name, pts) in enumerate(groups.items()):
        pts = sorted(pts, key=lambda p: float(p.x))
        xs = [float(p.x) for p in pts]
        colour, label = _style_of(result, name, i, len(groups))
        ax.plot(xs, [p.measured for p in pts], "o-", color=colour, label=label, ms=4, lw=1.2)
        sim = [(x, p.simulated) for x, p in zip(xs, pts, strict=True) if _usable(p.simulated)]
        sim_colour = SIMULATED if len(groups) == 1 else colour
        ax.plot([x for x, _ in sim], [v for _, v in sim], "x--", color=sim_colour, ms=5, lw=1)
    if _spans(xs_all) and min(xs_all) > 0:
        _log(ax, "x", sizes=True)
    ax.set_xlabel(result.table.spec.compare.x)


def _matrix_axes(
    ax: Axes, result: TableResult, groups: dict[str | None, list[PointResult]]
) -> None:
    labels: list[str] = []
    for i, (name, pts) in enumerate(groups.items()):
        idx = list(range(len(labels), len(labels) + len(pts)))
        labels += [str(p.x) for p in pts]
        colour, label = _style_of(result, name, i, len(groups))
        ax.plot(idx, [p.measured for p in pts], "o", color=colour, label=label, ms=4)
        sim = [(j, p.simulated) for j, p in zip(idx, pts, strict=True) if _usable(p.simulated)]
        sim_colour = SIMULATED if len(groups) == 1 else colour
        ax.plot([j for j, _ in sim], [v for _, v in sim], "x", color=sim_colour, ms=5)
    step = max(1, math.ceil(len(labels) / MAX_TICKS))
    ticks = list(range(0, len(labels), step))
    ax.set_xticks(ticks, [labels[j] for j in ticks], rotation=90, fontsize=7)
    ax.set_xlabel(f"cell ({result.table.spec.compare.x}), in file order")


def parity_figure(results: Sequence[TableResult]) -> Figure:
    """Simulated against measured for every point of every table (log-log), coloured by
    tool, with the line of perfect agreement and a ±10 % band."""
    with style():
        fig, ax = _figure(5.0, 0.1)
        ax.set_title("simulated vs measured, every point of every table")
        kinds = list(dict.fromkeys(r.table.kind for r in results))
        lo, hi = math.inf, 0.0
        dropped = 0
        for k, kind in enumerate(kinds):
            pairs = [
                (p.measured, p.simulated) for r in results if r.table.kind == kind for p in r.points
            ]
            drawn = [(m, v) for m, v in pairs if _usable(v)]
            dropped += len(pairs) - len(drawn)
            if not drawn:
                continue
            ax.plot(
                [m for m, _ in drawn],
                [v for _, v in drawn],
                "o",
                ms=3.5,
                alpha=0.75,
                color=PALETTE[k % len(PALETTE)],
                label=f"{kind} ({len(pairs)} points)",
            )
            values = [v for pair in drawn for v in pair]
            lo, hi = min(lo, *values), max(hi, *values)
        if hi > 0:
            span = [lo / 1.5, hi * 1.5]
            ax.plot(span, span, "-", color="#555555", lw=1, label="simulated = measured")
            band = ([v / 1.1 for v in span], [v * 1.1 for v in span])
            ax.fill_between(span, *band, color="#999999", alpha=0.15, label="±10 %")
            _log(ax, "x")
            _log(ax, "y")
        ax.set_xlabel("measured (each table in its own unit)")
        ax.set_ylabel("simulated")
        _dropped(ax, dropped)
        if ax.get_legend_handles_labels()[0]:
            _legend(ax, fig, 2)
    return fig
