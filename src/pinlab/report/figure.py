"""The canvas every pinlab figure is drawn on: style, fixed layout, charts as figures, axis units,
the legend column and deterministic output (the rendering rules of :mod:`pinlab.report.plots`).

* matplotlib is imported by the first figure, never by importing this module;
* the layout is fixed, computed from constant margins in inches (:data:`LAYOUT`): no layout
  engine measures text on every figure; the legend is keys and labels placed in a fixed column
  (:func:`legend_labels` reads it back);
* :func:`chart_figure` draws a :class:`~pinlab.report.chart.Chart` (what a figure shows, as
  data) as a matplotlib Figure -- the reports write the same chart's SVG without matplotlib
  (:func:`pinlab.report.chart.chart_svg`);
* SVG is the one output (:func:`figure_svg`: a fixed hash salt, no date or version metadata, so
  the same figure gives byte-identical bytes); :func:`figure_png` renders PNG on request and
  :func:`save_figure` writes files atomically.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pinlab import fsutil
from pinlab.scenarios.result import RunResult
from pinlab.units import GB, KB, MB, TB, GiB, KiB, MiB, TiB

if TYPE_CHECKING:  # matplotlib itself is imported by the first figure (module docstring)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from pinlab.report.chart import Chart

__all__ = [
    "COLUMNS",
    "LAYOUT",
    "PALETTE",
    "WIDTH_IN",
    "chart_figure",
    "draw_legend",
    "figure_png",
    "figure_svg",
    "fit_label",
    "fmt_duration",
    "legend_labels",
    "new_figure",
    "note",
    "run_title",
    "save_figure",
    "style",
    "tick_locators",
    "time_axis",
    "value_scale",
    "write_atomic",
]

# -- style and determinism ---------------------------------------------------------------------

_RC: dict[str, Any] = {
    "svg.hashsalt": "pinlab",  # stable clip-path / marker ids
    "svg.fonttype": "none",  # text stays text: small, searchable, no glyph <defs>
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",  # horizontal lines only: half the grid to draw
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "legend.fontsize": 8.0,
    "legend.frameon": False,
    "figure.dpi": 100.0,
    "savefig.dpi": 100.0,
    "path.simplify": True,
    "text.parse_math": False,  # a "$" in a tenant name is text, not mathtext
    "axes.titley": 1.0,  # a fixed title position: matplotlib does not measure for one
}
_SVG_METADATA: dict[str, str | None] = {"Date": None, "Creator": None, "Format": None}
_PNG_METADATA: dict[str, str | None] = {"Software": None}

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
"""Line and bar colours, in order (matplotlib's tab10)."""

WIDTH_IN = 8.0
"""Figure width in inches (800 px at 100 dpi)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """The fixed layout of every figure, in inches: margins around the plot area, room for
    the legend to its right, and where the axis labels sit. Computed once, never measured."""

    left: float = 0.8  # y tick labels and the y label
    right: float = 0.3  # without a legend
    legend: float = 1.75  # with one: the legend's column (labels are cut to fit it)
    top: float = 0.42  # the title
    suptitle: float = 0.24  # a figure title above the panels' own
    bottom: float = 0.5  # x tick labels and the x label
    gap: float = 0.42  # between stacked panels: the lower panel's title
    ylabel: float = 0.5  # the y label, left of the plot area
    xlabel: float = 0.32  # the x label, below it
    legend_chars: int = 24  # longest legend label that fits the legend column
    legend_row: float = 0.17  # one legend entry
    legend_key: float = 0.28  # the entry's line or patch
    legend_pad: float = 0.1  # before the key, and between key and label
    legend_size: float = 8.0  # points

    def plot_width(self, legend: bool) -> float:
        return WIDTH_IN - self.left - (self.legend if legend else self.right)


LAYOUT = Layout()
DPI = 100.0
COLUMNS = int(LAYOUT.plot_width(legend=True) * DPI)
"""Pixel columns of a time plot's area: what :func:`thin_steps` thins a series to."""


_STYLED = [0]
"""How deep inside :func:`style` the caller is: only the outermost one sets rcParams (each
rc_context copies and restores all of them, ~1 ms)."""


@contextmanager
def style() -> Iterator[None]:
    """pinlab's rcParams and, while drawing, text measurements kept across figures
    (:func:`_measured_once`)."""
    if _STYLED[0]:
        yield
        return
    import matplotlib  # the first figure loads it (module docstring)

    with matplotlib.rc_context(cast(Any, _RC)), _measured_once():
        _STYLED[0] += 1
        try:
            yield
        finally:
            _STYLED[0] -= 1


_MEASURED: dict[tuple[str, Any, Any], tuple[float, float, float]] = {}
"""Text extents by (text, font properties, math mode), kept across figures."""
_MEASURED_MAX = 8192


@contextmanager
def _measured_once() -> Iterator[None]:
    """Measure each distinct text once for all figures, not once per figure.

    matplotlib keeps the extents of a text per renderer, and each SVG file gets a new
    renderer, so every figure measured its tick labels, titles and legend labels anew with
    FreeType -- a sixth of a figure's cost, for the same few hundred strings. The SVG
    renderer's measurement (``TextToPath.get_text_width_height_descent``: unhinted, at a fixed
    scale) depends only on the text, its font properties and math mode, so while pinlab
    draws it is answered from :data:`_MEASURED`; the SVG bytes are the same (a test holds
    them to the unkept measurement) and the method is restored on leaving."""
    from matplotlib.backends.backend_svg import RendererSVG
    from matplotlib.textpath import TextToPath

    measure = TextToPath.get_text_width_height_descent

    def kept(self: TextToPath, s: str, prop: Any, ismath: Any) -> tuple[float, float, float]:
        key = (s, prop.copy(), ismath)  # a copy: FontProperties hash by their mutable state
        extents = _MEASURED.get(key)
        if extents is None:
            if len(_MEASURED) >= _MEASURED_MAX:
                _MEASURED.clear()
            extents = _MEASURED[key] = measure(self, s, prop, ismath)
        return extents

    TextToPath.get_text_width_height_descent = kept  # type: ignore[method-assign]
    RendererSVG._get_font_height_metrics = _font_height_metrics  # type: ignore[attr-defined]
    try:
        yield
    finally:
        TextToPath.get_text_width_height_descent = measure  # type: ignore[method-assign]
        del RendererSVG._get_font_height_metrics  # type: ignore[attr-defined]


_SVG_DPI = 72.0
"""The figure's dpi while matplotlib draws it as SVG (``print_svg`` sets it)."""
_HEIGHTS: dict[Any, tuple[float, float, float] | tuple[None, None, None]] = {}
"""A font's (ascent, descent, line gap) at :data:`_SVG_DPI`, by font properties."""


def _font_height_metrics(
    renderer: Any, prop: Any
) -> tuple[float, float, float] | tuple[None, None, None]:
    """The SVG renderer's answer to ``Text._get_layout``'s question for the font's vertical
    extent, kept per font: without it every text's layout looks the font up and reads its
    OS/2 (else hhea) and head tables anew -- a tenth of a figure's cost. The values are the
    ones ``_get_layout`` computes from those tables itself; (None, None, None) when the font
    has neither table lets it measure instead, as it would."""
    key = prop.copy()  # a copy: FontProperties hash by their mutable state
    kept = _HEIGHTS.get(key)
    if kept is None:
        from matplotlib.font_manager import fontManager, get_font

        kept = (None, None, None)
        font: Any = get_font(fontManager._find_fonts_by_props(prop))  # tables by name
        for name, gap, ascent, descent in (
            ("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
            ("hhea", "lineGap", "ascent", "descent"),
        ):
            table = font.get_sfnt_table(name)
            if table is not None:
                per_em = font.get_sfnt_table("head")["unitsPerEm"]
                scale = 1 / per_em * prop.get_size_in_points() * _SVG_DPI / 72
                kept = (table[ascent] * scale, -table[descent] * scale, table[gap] * scale)
                break
        _HEIGHTS[key] = kept
    return kept


def new_figure(
    height: float, nrows: int = 1, *, legend: bool = True, title: float = LAYOUT.top
) -> tuple[Figure, list[Axes]]:
    """A new figure with ``nrows`` stacked axes sharing the x axis, placed by :data:`LAYOUT`
    (``title``: inches above the first panel); the x label of the bottom axes and every y
    label sit at fixed offsets, so nothing is measured when the figure is drawn."""
    from matplotlib.figure import Figure

    lay = LAYOUT
    fig = Figure(figsize=(WIDTH_IN, height))
    panel = (height - title - lay.bottom - lay.gap * (nrows - 1)) / nrows
    axes = fig.subplots(
        nrows,
        1,
        sharex=True,
        squeeze=False,
        gridspec_kw={
            "left": lay.left / WIDTH_IN,
            "right": 1.0 - (lay.legend if legend else lay.right) / WIDTH_IN,
            "top": 1.0 - title / height,
            "bottom": lay.bottom / height,
            "hspace": lay.gap / panel,
        },
    )
    out = [row[0] for row in axes]
    width = lay.plot_width(legend)
    for ax in out:
        tick_locators(ax)
        ax.yaxis.set_label_coords(-lay.ylabel / width, 0.5)
    out[-1].xaxis.set_label_coords(0.5, -lay.xlabel / panel)
    return fig, out


X_TICKS = 6
"""At most about this many ticks on a time or value axis (fewer ticks, less to draw)."""
Y_TICKS = 5


def tick_locators(ax: Axes, *, integer: bool = False) -> None:
    """The tick locators every figure starts with (``integer``: whole numbers on y)."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    ax.xaxis.set_major_locator(MaxNLocator(X_TICKS, steps=[1, 2, 2.5, 5, 10]))
    ax.yaxis.set_major_locator(MaxNLocator(Y_TICKS, steps=[1, 2, 2.5, 5, 10], integer=integer))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_major_formatter(ScalarFormatter())


# -- units ---------------------------------------------------------------------------------------

_SIZE_UNITS = ((TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB"), (1, "B"))
_RATE_UNITS = ((TB, "TB/s"), (GB, "GB/s"), (MB, "MB/s"), (KB, "kB/s"), (1, "B/s"))
_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def _pick(peak: float, units: Sequence[tuple[float, str]]) -> tuple[float, str]:
    """The largest unit in which ``peak`` is at least 1 (the smallest unit for 0)."""
    peak = abs(peak)
    for scale, name in units:
        if peak >= scale:
            return float(scale), name
    return float(units[-1][0]), units[-1][1]


def value_scale(unit: str, peak: float) -> tuple[float, str]:
    """(divisor, axis label unit) for values in ``unit`` (``B``, ``B/s``, ``s``, ``count``,
    ``ratio`` ...) whose largest magnitude is ``peak``."""
    if unit == "B":
        return _pick(peak, _SIZE_UNITS)
    if unit == "B/s":
        return _pick(peak, _RATE_UNITS)
    if unit == "s":
        return _pick(peak, _TIME_UNITS)
    return 1.0, unit


def time_axis(end: float, start: float = 0.0) -> tuple[float, str, tuple[float, float]]:
    """The time axis for simulated times from ``start`` to ``end`` seconds, in s, ms or µs:
    (divisor to apply to times in seconds, axis label, axis limits in that unit)."""
    if end <= start:
        end = start + 1.0
    scale, name = _pick(end, _TIME_UNITS)
    return scale, f"simulated time ({name})", (start / scale, end / scale)


def note(ax: Axes, text: str) -> None:
    """Say ``text`` in the middle of ``ax`` instead of drawing data, and turn the axes off:
    there is nothing to read on them, and ticks and their labels are most of what a figure
    costs to draw."""
    ax.set_axis_off()
    ax.text(
        0.5,
        0.5,
        text,
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=9,
        color="#555555",
        wrap=True,
    )


def fit_label(text: str, limit: int = LAYOUT.legend_chars) -> str:
    """``text`` cut to ``limit`` characters to fit the legend column: its start and its end
    with an ellipsis between, since the end is what tells apart the tenants of one name on
    every node (``trainer@node07``) or numbered alike (``pressure-12``). A tenant's node
    (``@node07``) is kept whole when it fits beside one character of the name
    (``t…@node07``): cut in the middle, ``trai…de07`` reads as neither. The limit counts
    characters of an average width, and ``@`` is about two of them wide, so a label that
    keeps one gives up one more character of the name (the column is measured, not the
    text)."""
    if len(text) <= limit:
        return text
    if limit < 2:
        return text[:limit]
    node = text[text.rfind("@") :] if "@" in text[1:] else ""
    if node and len(node) + 1 <= limit - 2:
        return text[: limit - 2 - len(node)] + "…" + node
    tail = (limit - 1) // 2
    return text[: limit - 1 - tail] + "…" + text[len(text) - tail :]


LEGEND_ENTRY = "_legend entry"
"""The label of the figure artists :func:`draw_legend` draws (a leading ``_``: no legend lists
them); the texts among them are the legend's labels."""


def legend_labels(fig: Figure) -> list[str]:
    """The labels of ``fig``'s legend, top to bottom."""
    return [t.get_text() for t in fig.texts if t.get_label() == LEGEND_ENTRY]


def draw_legend(fig: Figure, ax: Axes) -> None:
    """``ax``'s legend in the legend column right of the plot area (never over the data),
    from the top of ``ax`` down, one entry per row: a key in the entry's colour and style,
    then its label. Placed by :data:`LAYOUT`, as figure lines and texts: matplotlib's own
    legend measures and packs every label anew on each draw (a third of a figure's cost)."""
    from matplotlib.container import BarContainer
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle, StepPatch

    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    lay = LAYOUT
    width, height = fig.get_size_inches()
    box = ax.get_position()
    x0 = box.x1 + lay.legend_pad / width
    x1 = x0 + lay.legend_key / width
    row = lay.legend_row / height
    for i, (handle, label) in enumerate(zip(handles, labels, strict=True)):
        y = box.y1 - (i + 0.5) * row
        if isinstance(handle, Line2D | StepPatch):
            colour = handle.get_color() if isinstance(handle, Line2D) else handle.get_edgecolor()
            fig.add_artist(
                Line2D(
                    [x0, x1],
                    [y, y],
                    color=colour,
                    linestyle=handle.get_linestyle(),
                    linewidth=handle.get_linewidth(),
                    transform=fig.transFigure,
                    label=LEGEND_ENTRY,
                )
            )
        else:  # a bar container: a filled key
            patch = handle.patches[0] if isinstance(handle, BarContainer) else handle
            assert isinstance(patch, Patch), f"no legend key for {handle!r}"
            fig.add_artist(
                Rectangle(
                    (x0, y - 0.3 * row),
                    x1 - x0,
                    0.6 * row,
                    facecolor=patch.get_facecolor(),
                    linewidth=0,
                    transform=fig.transFigure,
                    label=LEGEND_ENTRY,
                )
            )
        fig.text(
            x1 + lay.legend_pad / width,
            y,
            label,
            va="center",
            ha="left",
            fontsize=lay.legend_size,
            color="#333333",
            label=LEGEND_ENTRY,
        )


def run_title(result: RunResult, what: str) -> str:
    return f"{what} — {result.scenario} / {result.variant}"


def fmt_duration(width: float) -> str:
    scale, name = _pick(width, _TIME_UNITS)
    return f"{width / scale:.3g} {name}"


# -- a chart as a matplotlib figure ---------------------------------------------------------------


def chart_figure(chart: Chart) -> Figure:
    """``chart`` drawn as a new matplotlib Figure (the Python API's figures, PNG on request):
    the same panels, limits, marks and legend column :func:`pinlab.report.chart.chart_svg`
    writes."""
    from pinlab.report import chart as c

    with style():
        fig, axes = new_figure(
            chart.height, max(1, len(chart.panels)), legend=chart.legend, title=chart.top
        )
        if chart.suptitle:
            fig.suptitle(
                chart.suptitle,
                x=0.01,
                y=1.0 - 0.08 / chart.height,
                ha="left",
                va="top",
                fontsize=10,
                fontweight="bold",
            )
        for ax, panel in zip(axes, chart.panels, strict=False):
            if panel.title:
                ax.set_title(panel.title, fontsize=panel.title_size)
            ax.set_xlabel(panel.xlabel)
            ax.set_ylabel(panel.ylabel)
            ax.set_xlim(*panel.xlim)
            ax.set_ylim(*panel.ylim)
            tick_locators(ax, integer=panel.integer)
            if panel.note is not None:
                note(ax, panel.note)
                continue
            for mark in panel.marks:
                _draw_mark(ax, mark, c)
            if panel.categories is not None:
                ax.set_xticks([x for x, _ in panel.categories], [t for _, t in panel.categories])
                ax.set_xlim(*panel.xlim)
        if chart.legend:
            draw_legend(fig, axes[0])
    return fig


def _draw_mark(ax: Axes, mark: Any, c: Any) -> None:
    """One mark of :mod:`pinlab.report.chart` drawn on ``ax`` (``c``: that module)."""
    if isinstance(mark, c.Step):
        line = {"color": mark.colour, "linewidth": mark.width, "linestyle": mark.dash}
        ax.step(
            mark.x, mark.y, where="post", zorder=mark.z, label=mark.label, clip_on=mark.clip, **line
        )
    elif isinstance(mark, c.Stairs):
        from matplotlib.patches import StepPatch

        ax.add_artist(  # an Axes' patches are the Patch artists among its children
            StepPatch(
                mark.values,
                mark.edges,
                baseline=None,  # type: ignore[arg-type]  # a line, no baseline (Axes.stairs)
                fill=False,
                edgecolor=mark.colour,
                linewidth=mark.width,
                label=mark.label,
            )
        )
    elif isinstance(mark, c.Fill):
        fill = {"color": mark.colour, "alpha": mark.alpha, "zorder": mark.z}
        ax.fill_between(mark.x, mark.y, step="post", linewidth=0, **fill)
    elif isinstance(mark, c.HLines):
        ax.hlines(
            list(mark.y),
            list(mark.start),
            list(mark.end),
            colors=list(mark.colours),
            linestyles=mark.dash,
            linewidth=mark.width,
        )
    elif isinstance(mark, c.VLine):
        ax.axvline(
            mark.x, color=mark.colour, linestyle=mark.dash, linewidth=mark.width, label=mark.label
        )
    else:
        bars = ax.bar(
            list(mark.x), list(mark.heights), mark.width, label=mark.label, color=mark.colour
        )
        ax.bar_label(bars, labels=list(mark.texts), fontsize=mark.text_size, padding=2)


# -- output ---------------------------------------------------------------------------------------


def figure_svg(fig: Figure) -> str:
    """``fig`` as SVG text, deterministic (fixed id salt, no date or version metadata)."""
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    buf = io.StringIO()  # text: matplotlib writes it as is (bytes go through a codec writer)
    canvas: Any = FigureCanvasSVG(fig)  # its stub leaves print_svg untyped
    dpi = fig.dpi
    with style():
        # the SVG canvas itself, not savefig: print_figure inspects the print method's
        # signature on every call (a twentieth of a figure's cost) to filter options the SVG
        # writer does not take, and pinlab passes none of them
        canvas._is_saving = True
        try:
            canvas.print_svg(buf, metadata=_SVG_METADATA)
        finally:
            canvas._is_saving = False
            fig.dpi = dpi  # print_svg draws at 72 dpi and leaves it so
    return buf.getvalue()


def figure_png(fig: Figure) -> bytes:
    """``fig`` as PNG bytes (100 dpi, no software metadata): only on request, the reports
    need none."""
    buf = io.BytesIO()
    with style():
        fig.savefig(buf, format="png", metadata=_PNG_METADATA)
    return buf.getvalue()


def write_atomic(path: Path | str, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically (``fsutil.write_atomic``)."""
    return fsutil.write_atomic(path, data)


def save_figure(fig: Figure, path_without_ext: Path | str, *, png: bool = False) -> list[Path]:
    """Write ``fig`` as ``<path>.svg`` and, with ``png``, ``<path>.png``, each atomically;
    returns the paths (SVG first). Every file is rendered before any is written."""
    base = Path(path_without_ext)
    files: list[tuple[str, str | bytes]] = [(".svg", figure_svg(fig))]
    if png:
        files.append((".png", figure_png(fig)))
    return [write_atomic(base.with_name(base.name + ext), data) for ext, data in files]
