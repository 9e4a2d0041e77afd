"""Plots of a run and of a scenario's variants (issue "Seeing and scaling", item 2).

Every function takes :class:`~pinlab.scenarios.result.RunResult` objects and returns a
:class:`matplotlib.figure.Figure`:

* :func:`throughput_over_time` -- each tenant's transfer rate over time, the derivative of the
  cumulative ``tenant.<name>.bytes`` series (mean rate per time bin). Without that series the
  figure says so and draws each tenant's mean rate from its
  :class:`~pinlab.sim.metrics.TenantStats` instead;
* :func:`memory_over_time` -- pinned, used and free bytes of every device memory region
  (``device.<node>/<dev>.<region>.{pinned,used,free}``), one panel per region; with many
  devices (a 128-accelerator cluster) regions of the same name are summed over the devices;
* :func:`denials_over_time` -- cumulative denials per tenant, from ``tenant.<name>.denials``
  or, where that series is absent, from the recorder's ``denial`` events;
* :func:`variant_bars` -- one metric (or a ``*`` pattern of metrics, e.g.
  ``tenant.*.throughput``) compared across the variants of a scenario.

Injected faults (the recorder's ``fault`` events) are drawn as dotted vertical lines on the
time plots. Axes carry units: sizes in binary units (GiB), rates in decimal units (GB/s),
times in s/ms/µs, chosen from the data's magnitude.

Rendering is built for a report of many runs:

* matplotlib is imported by the first figure, never by importing this module, so a run that
  writes no report (``pinlab run --no-report``) never loads it;
* the layout is fixed, computed from constant margins in inches (:data:`LAYOUT`): no layout
  engine measures text on every figure, and each figure is drawn once, into its SVG; the
  legend is keys and labels placed in a fixed column (:func:`legend_labels` reads it back);
* the report renderers (:func:`run_figure_svgs`, :func:`variant_bars_svg`) draw on kept
  figures, emptied to the state of new ones, and return only SVG; the figure functions
  (:func:`throughput_over_time` ...) return new figures;
* a series is thinned to the pixels the plot can show (:func:`thin_steps`: the first, lowest,
  highest and last point of every pixel column), so a long run costs what a short one does;
* matplotlib's figure classes are used directly, never pyplot: no display, no global figure
  registry, nothing to close.

SVG is the one output (the HTML report inlines it); :func:`figure_png` renders PNG on request.
Output is deterministic -- a fixed SVG hash salt and no dates or version strings in the
metadata -- so the same run gives byte-identical SVG (and PNG) bytes. :func:`save_figure`
writes the files atomically (temporary file + :func:`os.replace`).
"""

from __future__ import annotations

import fnmatch
import io
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from pinlab import fsutil
from pinlab.scenarios.result import Metric, RunResult
from pinlab.sim.metrics import iter_series
from pinlab.units import GB, KB, MB, TB, GiB, KiB, MiB, TiB, fmt_rate

if TYPE_CHECKING:  # matplotlib itself is imported by the first figure (module docstring)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "FIGURES",
    "denials_over_time",
    "figure_png",
    "figure_svg",
    "legend_labels",
    "memory_over_time",
    "run_figure_svgs",
    "run_figures",
    "save_figure",
    "style",
    "thin_steps",
    "throughput_over_time",
    "variant_bars",
    "variant_bars_svg",
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

PINNED_COLOUR = "#d62728"
USED_COLOUR = "#1f77b4"
FREE_COLOUR = "#2ca02c"
FAULT_COLOUR = "#555555"

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

MAX_LINES = 8
"""At most this many tenant lines per plot; beyond it the smaller ones are summed."""
MAX_PANELS = 6
"""At most this many memory panels; beyond it regions are summed over devices."""
MAX_BARS = 8
"""At most this many bars per variant; beyond it min/mean/max of the matched metrics."""


_STYLED = [0]
"""How deep inside :func:`style` the caller is: only the outermost one sets rcParams (each
rc_context copies and restores all of them, ~1 ms)."""


@contextmanager
def style() -> Iterator[None]:
    if _STYLED[0]:
        yield
        return
    import matplotlib  # the first figure loads it (module docstring)

    with matplotlib.rc_context(cast(Any, _RC)):
        _STYLED[0] += 1
        try:
            yield
        finally:
            _STYLED[0] -= 1


def _figure(
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
        _tick_locators(ax)
        ax.yaxis.set_label_coords(-lay.ylabel / width, 0.5)
    out[-1].xaxis.set_label_coords(0.5, -lay.xlabel / panel)
    return fig, out


X_TICKS = 6
"""At most about this many ticks on a time or value axis (fewer ticks, less to draw)."""
Y_TICKS = 5


def _tick_locators(ax: Axes, *, integer: bool = False) -> None:
    """The tick locators every figure starts with (``integer``: whole numbers on y)."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    ax.xaxis.set_major_locator(MaxNLocator(X_TICKS, steps=[1, 2, 2.5, 5, 10]))
    ax.yaxis.set_major_locator(MaxNLocator(Y_TICKS, steps=[1, 2, 2.5, 5, 10], integer=integer))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_major_formatter(ScalarFormatter())


class _Canvas(Protocol):
    """Where a figure function draws: :func:`_figure` (a new figure) or a kept one
    (:func:`_kept`)."""

    def __call__(
        self, height: float, nrows: int = 1, *, legend: bool = True, title: float = LAYOUT.top
    ) -> tuple[Figure, list[Axes]]: ...


_KEPT: dict[tuple[str, float, int, bool, float], tuple[Figure, list[Axes]]] = {}
"""Figures kept for reuse by the report renderers, by figure kind and layout."""


def _kept(kind: str) -> _Canvas:
    """A canvas that hands out one kept figure per ``kind`` and layout, emptied to the state
    of a new one (:func:`_empty`): building a figure -- axes, spines, ticks -- costs about as
    much as drawing it. Only the SVG of a kept figure leaves this module; the tests hold it
    byte-identical to a new figure's."""

    def canvas(
        height: float, nrows: int = 1, *, legend: bool = True, title: float = LAYOUT.top
    ) -> tuple[Figure, list[Axes]]:
        key = (kind, height, nrows, legend, title)
        kept = _KEPT.get(key)
        if kept is None:
            kept = _KEPT[key] = _figure(height, nrows, legend=legend, title=title)
        else:
            _empty(*kept)
        return kept

    return canvas


def _empty(fig: Figure, axes: list[Axes]) -> None:
    """Take everything a figure function drew off ``fig`` and reset what it set -- titles,
    labels, tick locators and formatters, data and view limits, autoscaling -- keeping the
    axes and their ticks."""
    from matplotlib.transforms import Bbox

    for artist in [*fig.artists, *fig.texts]:
        if artist.get_label() == LEGEND_ENTRY:
            artist.remove()
    for ax in axes:
        for artist in [*ax.lines, *ax.patches, *ax.collections, *ax.texts]:
            artist.remove()
        ax.containers.clear()
        ax.set_title("", loc="left")
        ax.set_xlabel("")
        ax.set_ylabel("")
        _tick_locators(ax)
        ax.dataLim.set(Bbox.null())
        ax.ignore_existing_data_limits = True
        ax.viewLim.set(Bbox.unit())
        ax.set_autoscale_on(True)


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


def _time_axis(ax: Axes, duration: float) -> float:
    """Label the x axis in s, ms or µs for a run of ``duration`` seconds; returns the
    divisor to apply to times in seconds."""
    scale, name = _pick(duration if duration > 0 else 1.0, _TIME_UNITS)
    ax.set_xlabel(f"simulated time ({name})")
    ax.set_xlim(0.0, (duration if duration > 0 else 1.0) / scale)
    return scale


def _note(ax: Axes, text: str) -> None:
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


# -- series helpers ------------------------------------------------------------------------------


def _series_by_suffix(result: RunResult, scope: str, quantity: str) -> dict[str, np.ndarray]:
    """``{middle: points array (n, 2)}`` for every series ``<scope>.<middle>.<quantity>``
    (``docs/metrics.md``) with at least one point: the middle is the entity and, for a
    device, its region (``node/gpu0.vram``)."""
    out: dict[str, np.ndarray] = {}
    for key, _entity, _q in iter_series(list(result.recorder.series), scope, quantity):
        points = result.recorder.series[key].points
        if points:
            middle = key[len(scope) + 1 : len(key) - len(quantity) - 1]
            out[middle] = np.asarray(points, dtype=float)
    return out


def _step_at(points: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The step function ``points`` (t, v), value held until the next point, at ``grid``;
    0 before the first point."""
    idx = np.searchsorted(points[:, 0], grid, side="right") - 1
    values = points[:, 1][np.clip(idx, 0, None)]
    return np.where(idx >= 0, values, 0.0)


def _step_xy(points: np.ndarray, until: float) -> tuple[np.ndarray, np.ndarray]:
    """A step function's points extended to ``until`` (for ``drawstyle="steps-post"``) and
    thinned to the plot's pixel columns (:func:`thin_steps`)."""
    t = points[:, 0]
    v = points[:, 1]
    if until > t[-1]:
        t = np.append(t, until)
        v = np.append(v, v[-1])
    return thin_steps(t, v, until)


def thin_steps(
    t: np.ndarray, v: np.ndarray, end: float, columns: int = COLUMNS
) -> tuple[np.ndarray, np.ndarray]:
    """A step series (each value held until the next point, times ascending, in ``[0,
    end]``) thinned to what ``columns`` pixel columns can show: of the points falling in one
    column, the first, the lowest, the highest and the last are kept, in time order. Every
    extreme survives and the value at every column edge is exact, so the drawn line covers
    the same pixels; a series of up to four points per column is returned as it is."""
    if len(t) <= 4 * columns:
        return t, v
    span = end if end > 0 else 1.0
    column = np.clip((t * (columns / span)).astype(np.int64), 0, columns - 1)
    starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
    lasts = np.r_[starts[1:], len(t)] - 1
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(t)]))
    keep = [starts, lasts]
    for extreme in (np.minimum.reduceat(v, starts), np.maximum.reduceat(v, starts)):
        hits = np.flatnonzero(v == extreme[group])
        _, first = np.unique(group[hits], return_index=True)
        keep.append(hits[first])
    index = np.unique(np.concatenate(keep))
    return t[index], v[index]


def _end_time(result: RunResult, series: Sequence[np.ndarray] = ()) -> float:
    last = max((float(p[-1, 0]) for p in series if len(p)), default=0.0)
    return max(float(result.duration), last)


def _top(
    curves: dict[str, np.ndarray], weight: Callable[[np.ndarray], float], limit: int
) -> tuple[list[str], list[str]]:
    """(shown names, folded names): the ``limit - 1`` heaviest curves shown by name when
    there are more than ``limit``, all of them otherwise."""
    names = list(curves)
    if len(names) <= limit:
        return names, []
    ranked = sorted(names, key=lambda n: (-weight(curves[n]), n))
    shown = sorted(ranked[: limit - 1])
    return shown, sorted(ranked[limit - 1 :])


def _faults(ax: Axes, result: RunResult, scale: float) -> None:
    """Dotted vertical lines at the run's injected faults (one legend entry)."""
    times = sorted({t for t, kind, _ in result.recorder.events if kind == "fault"})
    for i, t in enumerate(times):
        ax.axvline(
            t / scale,
            color=FAULT_COLOUR,
            linestyle=":",
            linewidth=1.0,
            label="fault injected" if i == 0 else None,
        )


def _label(text: str, limit: int = LAYOUT.legend_chars) -> str:
    """``text`` cut to ``limit`` characters (with an ellipsis) to fit the legend column."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


LEGEND_ENTRY = "_legend entry"
"""The label of the figure artists :func:`_legend` draws (a leading ``_``: no legend lists
them); the texts among them are the legend's labels."""


def legend_labels(fig: Figure) -> list[str]:
    """The labels of ``fig``'s legend, top to bottom."""
    return [t.get_text() for t in fig.texts if t.get_label() == LEGEND_ENTRY]


def _legend(fig: Figure, ax: Axes) -> None:
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


def _title(result: RunResult, what: str) -> str:
    return f"{what} — {result.scenario} / {result.variant}"


# -- the figures ---------------------------------------------------------------------------------


def _bin_edges(end: float, curves: Sequence[np.ndarray]) -> np.ndarray:
    """Time bins for a rate: about eight points (completed transfers) of the busiest curve
    per bin, so a bin's mean is not one transfer's noise; 10 to 60 bins."""
    busiest = max((len(c) for c in curves), default=0)
    nbins = int(min(60, max(10, busiest // 8)))
    return np.linspace(0.0, end, nbins + 1)


def throughput_over_time(result: RunResult) -> Figure:
    """Each tenant's transfer rate over simulated time (GB/s), as the mean rate per time bin
    of the cumulative ``tenant.<name>.bytes`` series. With more than :data:`MAX_LINES`
    tenants the smaller ones are summed into one line. Without byte series, a note and each
    tenant's mean rate over its active time (dashed)."""
    return _throughput(result, _figure)


def _throughput(result: RunResult, canvas: _Canvas) -> Figure:
    curves = _series_by_suffix(result, "tenant", "bytes")
    with style():
        fig, (ax,) = canvas(3.2 if curves else 1.8)
        end = _end_time(result, list(curves.values()))
        tscale = _time_axis(ax, end)
        ax.set_title(_title(result, "Throughput per tenant"))
        if curves:
            edges = _bin_edges(end, list(curves.values()))
            width = float(edges[1] - edges[0])
            rates = {
                name: np.diff(_step_at(pts, edges)) / width if width > 0 else np.zeros(1)
                for name, pts in curves.items()
            }
            shown, folded = _top(curves, lambda p: float(p[-1, 1]), MAX_LINES)
            lines = [(name, rates[name]) for name in shown]
            if folded:
                others = np.sum([rates[n] for n in folded], axis=0)
                lines.append((f"{len(folded)} other tenants", others))
            peak = max(float(np.max(r)) for _, r in lines) if lines else 0.0
            vscale, vunit = value_scale("B/s", peak)
            for i, (name, rate) in enumerate(lines):
                ax.stairs(
                    rate / vscale,
                    edges / tscale,
                    label=_label(name),
                    color=PALETTE[i % len(PALETTE)],
                    linewidth=1.4,
                    baseline=None,
                )
            ax.set_ylabel(f"throughput ({vunit})")
            bin_text = _fmt_bin(width)
            ax.text(
                1.0,
                1.02,
                f"mean per {bin_text} bin",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=7.5,
                color="#555555",
            )
        else:
            _mean_rates(ax, result)
        ax.set_ylim(bottom=0.0)
        _faults(ax, result, tscale)
        _legend(fig, ax)
    return fig


def _fmt_bin(width: float) -> str:
    scale, name = _pick(width, _TIME_UNITS)
    return f"{width / scale:.3g} {name}"


def _mean_rates(ax: Axes, result: RunResult) -> None:
    """Fallback for :func:`throughput_over_time`: a note naming each tenant's mean
    throughput over its data phase (the ``tenant.<t>.throughput`` metrics)."""
    rates = []
    for name in sorted(result.recorder.tenants):
        metric = result.metrics.get(f"tenant.{name}.throughput")
        if metric is not None:
            rates.append(f"{name} {fmt_rate(float(metric.value))}")
    text = "no per-tenant byte series (tenant.<name>.bytes) recorded in this run"
    if rates:
        shown = rates[:4]
        more = f", and {len(rates) - len(shown)} more" if len(rates) > len(shown) else ""
        text += "\nmean throughput over each data phase: " + ", ".join(shown) + more
    _note(ax, text)
    ax.set_yticks([])


def _region_label(key: str) -> str:
    device, _, region = key.partition(".")
    return f"{device} {region}"


def memory_over_time(result: RunResult) -> Figure:
    """Pinned (filled), used and free bytes of each device memory region over time, one
    panel per region that held anything. With more than :data:`MAX_PANELS` regions, regions
    of the same name (``hbm``, ``vram`` ...) are summed over all devices and nodes."""
    return _memory(result, _figure)


def _memory(result: RunResult, canvas: _Canvas) -> Figure:
    pinned = _series_by_suffix(result, "device", "pinned")
    used = _series_by_suffix(result, "device", "used")
    free = _series_by_suffix(result, "device", "free")
    keys = sorted(set(pinned) | set(used) | set(free))
    kinds = {"pinned": pinned, "used": used, "free": free}
    # regions that never held anything (e.g. an unused GTT) are left out
    busy = [
        k
        for k in keys
        if any(float(np.max(kinds[c][k][:, 1])) > 0 for c in ("pinned", "used") if k in kinds[c])
    ]
    panels: list[tuple[str, dict[str, np.ndarray]]] = []
    all_series = [p for d in kinds.values() for p in d.values()]
    end = _end_time(result, all_series)
    if len(busy) <= MAX_PANELS:
        for k in busy:
            panels.append((_region_label(k), {c: kinds[c][k] for c in kinds if k in kinds[c]}))
    else:
        by_region: dict[str, list[str]] = {}
        for k in busy:
            by_region.setdefault(k.rsplit(".", 1)[-1], []).append(k)
        for region, members in sorted(by_region.items())[:MAX_PANELS]:
            summed: dict[str, np.ndarray] = {}
            for c, d in kinds.items():
                present = [d[k] for k in members if k in d]
                if present:
                    grid = np.unique(np.concatenate([p[:, 0] for p in present]))
                    total = np.sum([_step_at(p, grid) for p in present], axis=0)
                    summed[c] = np.column_stack([grid, total])
            panels.append((f"{region}, summed over {len(members)} devices", summed))
    with style():
        n = max(1, len(panels))
        height = 1.0 + 1.7 * n
        fig, axes = canvas(height, n, title=LAYOUT.top + LAYOUT.suptitle)
        fig.suptitle(
            _title(result, "Device memory: pinned vs free"),
            x=0.01,
            y=1.0 - 0.08 / height,
            ha="left",
            va="top",
            fontsize=10,
            fontweight="bold",
        )
        tscale = _time_axis(axes[-1], end)
        if not panels:
            _note(axes[0], "no device memory series (device.<node>/<dev>.<region>.*) recorded")
        peak = max(
            (float(np.max(p[:, 1])) for _, d in panels for p in d.values()),
            default=0.0,
        )
        vscale, vunit = value_scale("B", peak)
        for ax, (label, d) in zip(axes, panels, strict=False):
            ax.set_title(label, fontsize=9)
            if "pinned" in d:
                t, v = _step_xy(d["pinned"], end)
                ax.fill_between(
                    t / tscale,
                    v / vscale,
                    step="post",
                    color=PINNED_COLOUR,
                    alpha=0.35,
                    linewidth=0,
                )
                ax.step(t / tscale, v / vscale, where="post", color=PINNED_COLOUR, label="pinned")
            for kind, colour, dash in (("used", USED_COLOUR, "-"), ("free", FREE_COLOUR, "--")):
                if kind in d:
                    t, v = _step_xy(d[kind], end)
                    ax.step(
                        t / tscale,
                        v / vscale,
                        where="post",
                        color=colour,
                        linestyle=dash,
                        label=kind,
                    )
            ax.set_ylabel(vunit)
            ax.set_ylim(bottom=0.0)
            _faults(ax, result, tscale)
        _legend(fig, axes[0])
    return fig


def _denial_curves(result: RunResult) -> dict[str, np.ndarray]:
    """Cumulative denials per tenant: the ``tenant.<name>.denials`` series, or counted from
    the recorder's ``denial`` events (detail ``"<comm>: <error>"``)."""
    curves = _series_by_suffix(result, "tenant", "denials")
    if curves:
        return curves
    tenants = set(result.recorder.tenants)
    times: dict[str, list[float]] = {}
    for t, kind, detail in result.recorder.events:
        if kind != "denial":
            continue
        who = detail.split(": ", 1)[0] if ": " in detail else "unknown"
        if who not in tenants:
            # comm may be truncated (TASK_COMM_LEN): attribute to the one tenant it prefixes
            matches = [n for n in tenants if n.startswith(who)]
            who = matches[0] if len(matches) == 1 else who
        times.setdefault(who, []).append(t)
    return {
        name: np.column_stack(
            [np.asarray(sorted(ts), dtype=float), np.arange(1, len(ts) + 1, dtype=float)]
        )
        for name, ts in sorted(times.items())
    }


def denials_over_time(result: RunResult) -> Figure:
    """Cumulative denials (calls the kernel refused) per tenant over simulated time."""
    return _denials(result, _figure)


def _denials(result: RunResult, canvas: _Canvas) -> Figure:
    curves = _denial_curves(result)
    curves = {n: p for n, p in curves.items() if float(np.max(p[:, 1])) > 0}
    with style():
        fig, (ax,) = canvas(3.0 if curves else 1.8)
        end = _end_time(result, list(curves.values()))
        tscale = _time_axis(ax, end)
        ax.set_title(_title(result, "Denials per tenant (cumulative)"))
        ax.set_ylabel("denials")
        if not curves:
            _note(ax, "no denials: every call the tenants made succeeded")
            ax.set_ylim(0.0, 1.0)
            ax.set_yticks([])
        else:
            shown, folded = _top(curves, lambda p: float(p[-1, 1]), MAX_LINES)
            lines = [(n, curves[n]) for n in shown]
            if folded:
                grid = np.unique(np.concatenate([curves[n][:, 0] for n in folded]))
                total = np.sum([_step_at(curves[n], grid) for n in folded], axis=0)
                lines.append((f"{len(folded)} other tenants", np.column_stack([grid, total])))
            for i, (name, pts) in enumerate(lines):
                t, v = _step_xy(np.vstack([[0.0, 0.0], pts]) if pts[0, 0] > 0 else pts, end)
                ax.step(
                    t / tscale,
                    v,
                    where="post",
                    color=PALETTE[i % len(PALETTE)],
                    label=_count_label(name, int(pts[-1, 1])),
                    linewidth=1.4,
                )
            ax.set_ylim(bottom=0.0)
            _tick_locators(ax, integer=True)
        _faults(ax, result, tscale)
        _legend(fig, ax)
    return fig


def _count_label(name: str, count: int) -> str:
    """``<name> (<count>)``, the name cut to fit the legend column."""
    suffix = f" ({count})"
    return _label(name, LAYOUT.legend_chars - len(suffix)) + suffix


def _variant_label(result: RunResult, results: Sequence[RunResult]) -> str:
    same = [r for r in results if r.variant == result.variant]
    return f"{result.variant}@{result.profile}" if len(same) > 1 else result.variant


def _matched(results: Sequence[RunResult], metric: str) -> list[str]:
    names = {n for r in results for n in r.metrics if fnmatch.fnmatchcase(n, metric)}
    return sorted(names)


def _short_labels(names: list[str]) -> list[str]:
    """Metric names without their common dotted prefix and suffix (``tenant.a.throughput``,
    ``tenant.b.throughput`` -> ``a``, ``b``)."""
    if len(names) < 2:
        return names
    split = [n.split(".") for n in names]
    pre = 0
    while all(len(s) > pre + 1 for s in split) and len({s[pre] for s in split}) == 1:
        pre += 1
    post = 0
    while all(len(s) > pre + post + 1 for s in split) and len({s[-1 - post] for s in split}) == 1:
        post += 1
    return [".".join(s[pre : len(s) - post]) for s in split]


def variant_bars(results: Sequence[RunResult], metric: str, *, title: str | None = None) -> Figure:
    """``metric`` compared across the variants in ``results``: one group of bars per
    variant, each bar labelled with its value.

    ``metric`` is a metric name or an :mod:`fnmatch` pattern (``tenant.*.throughput``); a
    pattern gives one bar per matched metric (up to :data:`MAX_BARS`; beyond that the
    minimum, mean and maximum over the matched metrics). A variant lacking a metric gets
    no bar. A run under a compared profile is labelled ``<variant>@<profile>``.
    """
    return _bars(results, metric, title, _figure)


def variant_bars_svg(results: Sequence[RunResult], metric: str, *, title: str | None = None) -> str:
    """:func:`variant_bars` as SVG text (drawn on a kept figure, :func:`_kept`)."""
    with style():
        return figure_svg(_bars(results, metric, title, _kept("bars")))


def _bars(results: Sequence[RunResult], metric: str, title: str | None, canvas: _Canvas) -> Figure:
    names = _matched(results, metric)
    found: list[Metric] = [r.metrics[n] for r in results for n in names if n in r.metrics]
    unit = found[0].unit if found else ""
    description = found[0].description if found else ""
    groups = [_variant_label(r, results) for r in results]
    series: list[tuple[str, list[float | None]]]
    if len(names) <= MAX_BARS:
        labels = _short_labels(names)
        series = [
            (
                label,
                [float(r.metrics[n].value) if n in r.metrics else None for r in results],
            )
            for label, n in zip(labels, names, strict=True)
        ]
    else:

        def stat(fn: Callable[[list[float]], float]) -> list[float | None]:
            out: list[float | None] = []
            for r in results:
                vals = [float(r.metrics[n].value) for n in names if n in r.metrics]
                out.append(fn(vals) if vals else None)
            return out

        series = [
            (f"min of {len(names)}", stat(min)),
            (f"mean of {len(names)}", stat(lambda v: sum(v) / len(v))),
            (f"max of {len(names)}", stat(max)),
        ]
    values = [v for _, vs in series for v in vs if v is not None]
    peak = max((abs(v) for v in values), default=0.0)
    vscale, vunit = value_scale(unit, peak)
    with style():
        fig, (ax,) = canvas(2.7, legend=len(series) > 1)
        ax.grid(axis="x", visible=False)
        ax.set_title(title or f"{metric} by variant")
        if not values:
            _note(ax, f"no metric matches {metric!r} in these runs")
        n = max(1, len(series))
        width = 0.8 / n
        x = np.arange(len(groups), dtype=float)
        for i, (label, vs) in enumerate(series):
            xs = [x[j] + (i - (n - 1) / 2) * width for j, v in enumerate(vs) if v is not None]
            hs = [v / vscale for v in vs if v is not None]
            bars = ax.bar(
                xs,
                hs,
                width * 0.92,
                label=_label(label) if len(series) > 1 else None,
                color=PALETTE[i % len(PALETTE)],
            )
            ax.bar_label(
                bars,
                labels=[_bar_text(v * vscale, vscale, vunit) for v in hs],
                fontsize=7.5,
                padding=2,
            )
        ax.set_xticks(x, groups)
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ylabel = f"{description} ({vunit})" if description and vunit else (vunit or description)
        ax.set_ylabel(ylabel if len(ylabel) <= 40 else (vunit or ""))
        if values:
            top = max(values) / vscale
            ax.set_ylim(min(0.0, min(values) / vscale * 1.15), top * 1.18 if top > 0 else 1.0)
        if len(series) > 1:
            _legend(fig, ax)
    return fig


def _bar_text(value: float, scale: float, unit: str) -> str:
    shown = value / scale
    if unit in ("count", "") and float(shown).is_integer():
        return str(int(shown))
    return f"{shown:.3g}"


# -- all figures of one run ----------------------------------------------------------------------

FIGURES: dict[str, tuple[str, Callable[[RunResult], Figure]]] = {
    "throughput": ("Throughput per tenant over time", throughput_over_time),
    "memory": ("Pinned versus free device memory over time", memory_over_time),
    "denials": ("Denials per tenant over time", denials_over_time),
}
"""The figures of one run's report: file stem -> (caption, function)."""


_DRAW: dict[str, Callable[[RunResult, _Canvas], Figure]] = {
    "throughput": _throughput,
    "memory": _memory,
    "denials": _denials,
}


def run_figures(result: RunResult) -> dict[str, Figure]:
    """Every figure of :data:`FIGURES` for ``result``, by file stem (new figures)."""
    return {stem: fn(result) for stem, (_, fn) in FIGURES.items()}


def run_figure_svgs(result: RunResult) -> dict[str, str]:
    """Every figure of :data:`FIGURES` for ``result`` as SVG text, by file stem: what a
    report needs, drawn on kept figures (:func:`_kept`)."""
    with style():
        return {stem: figure_svg(_DRAW[stem](result, _kept(stem))) for stem in FIGURES}


# -- output ---------------------------------------------------------------------------------------


def figure_svg(fig: Figure) -> str:
    """``fig`` as SVG text, deterministic (fixed id salt, no date or version metadata)."""
    buf = io.StringIO()  # text: matplotlib writes it as is (bytes go through a codec writer)
    with style():
        fig.savefig(buf, format="svg", metadata=_SVG_METADATA)
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
