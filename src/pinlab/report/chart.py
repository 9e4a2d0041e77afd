"""What a pinlab figure shows, as data (:class:`Chart`), and its SVG written directly
(:func:`chart_svg`), without matplotlib.

A figure function of :mod:`pinlab.report.timeplots` or :mod:`pinlab.report.bars` computes a
:class:`Chart`: panels, each with its title, axis labels, limits and the marks drawn in data
coordinates (step lines, binned rates, fills, dotted means, fault lines, bars and their value
labels) or a note instead. Two renderers draw the same chart:

* :func:`chart_svg` -- the reports' SVG, written here: every position follows from the fixed
  layout (:data:`pinlab.report.figure.LAYOUT`), text is SVG text placed by its anchor (start,
  middle, end) so nothing is measured, and a report never imports matplotlib (its import and
  its per-figure axis, tick and text layout were most of a report's cost);
* :func:`pinlab.report.figure.chart_figure` -- a matplotlib Figure of the chart, for the
  Python API and for PNG on request.

The SVG is deterministic (a pure function of the chart: fixed number formatting, ids numbered
in drawing order) and every text in it is XML-escaped.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from markupsafe import escape

from pinlab.report.figure import LAYOUT, WIDTH_IN

__all__ = [
    "PT",
    "Bars",
    "Chart",
    "Fill",
    "HLines",
    "Mark",
    "Panel",
    "Stairs",
    "Step",
    "VLine",
    "chart_svg",
    "legend_entries",
    "nice_ticks",
    "tick_texts",
]

# -- the chart as data ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """A step line: ``y[i]`` held from ``x[i]`` to ``x[i + 1]`` (matplotlib's steps-post)."""

    x: np.ndarray
    y: np.ndarray
    colour: str
    width: float
    dash: str = "-"  # "-", "--" or ":"
    z: float = 2.0
    label: str | None = None
    clip: bool = True  # False: drawn whole over the axes' edges (the pinned line at 0)


@dataclass(frozen=True, slots=True)
class Stairs:
    """A binned rate: ``values[i]`` over ``[edges[i], edges[i + 1]]``, no baseline."""

    values: np.ndarray
    edges: np.ndarray
    colour: str
    width: float
    label: str | None = None


@dataclass(frozen=True, slots=True)
class Fill:
    """The area between a step line (steps-post) and 0."""

    x: np.ndarray
    y: np.ndarray
    colour: str
    alpha: float
    z: float = 1.0


@dataclass(frozen=True, slots=True)
class HLines:
    """Horizontal segments: ``y[i]`` from ``start[i]`` to ``end[i]`` in ``colours[i]``."""

    y: tuple[float, ...]
    start: tuple[float, ...]
    end: tuple[float, ...]
    colours: tuple[str, ...]
    dash: str = ":"
    width: float = 1.0


@dataclass(frozen=True, slots=True)
class VLine:
    """A vertical line over the whole height of the axes at ``x``."""

    x: float
    colour: str
    dash: str = ":"
    width: float = 1.0
    label: str | None = None


@dataclass(frozen=True, slots=True)
class Bars:
    """Bars of ``width`` centred at ``x``, from 0 to ``heights``, each with its value text and
    a tooltip (``tips``: what the bar is, with its value and unit; the SVG's ``<title>``)."""

    x: tuple[float, ...]
    heights: tuple[float, ...]
    width: float
    colour: str
    texts: tuple[str, ...]
    label: str | None = None
    text_size: float = 7.5
    tips: tuple[str, ...] = ()


Mark = Step | Stairs | Fill | HLines | VLine | Bars


@dataclass(slots=True)
class Panel:
    """One axes: title, labels, limits and marks; with ``note`` the axes are off and the note
    is said in their middle instead."""

    title: str = ""
    title_size: float = 10.0
    xlabel: str = ""
    ylabel: str = ""
    xlim: tuple[float, float] = (0.0, 1.0)
    ylim: tuple[float, float] = (0.0, 1.0)
    integer: bool = False  # whole-number ticks on y (counts)
    categories: tuple[tuple[float, str], ...] | None = None  # x ticks of a bar chart
    marks: list[Mark] = field(default_factory=list)
    note: str | None = None


@dataclass(slots=True)
class Chart:
    """A figure: ``height`` inches of stacked ``panels`` sharing the x axis; the legend column
    (``legend``) lists the first panel's labelled marks; ``suptitle`` above the panels."""

    height: float
    panels: list[Panel]
    legend: bool = True
    top: float = LAYOUT.top
    suptitle: str | None = None


def legend_entries(panel: Panel) -> list[tuple[str, Mark]]:
    """(label, mark) of the labelled marks of ``panel``, in drawing order: the legend."""
    return [
        (m.label, m)
        for m in panel.marks
        if not isinstance(m, Fill | HLines) and m.label is not None
    ]


# -- ticks -------------------------------------------------------------------------------------

_STEPS = (0.5, 1.0, 2.0, 2.5, 5.0, 10.0, 20.0)
"""Tick steps, times a power of ten: 1, 2, 2.5 and 5, and one either side."""


def nice_ticks(
    lo: float, hi: float, bins: int, *, integer: bool = False, least: int = 2
) -> list[float]:
    """Ticks inside ``[lo, hi]`` at the multiples of a nice step (1, 2, 2.5 or 5 times a power
    of ten), as matplotlib's ``MaxNLocator(bins, steps=[1, 2, 2.5, 5, 10])`` places them: the
    smallest step giving at most ``bins`` intervals, or a smaller one when that leaves fewer
    than ``least`` ticks inside the range; with ``integer`` only whole steps above 1 (and
    none below 1 when the range holds ``least`` whole numbers)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / bins
    scale = 10.0 ** math.floor(math.log10(raw))
    steps = [s * scale for s in _STEPS]
    if integer:
        steps = [s for s in steps if s < 1 or abs(s - round(s)) < 0.001]
    wide = next((i for i, s in enumerate(steps) if s >= raw * (1 - 1e-9)), len(steps) - 1)
    whole = integer and math.floor(hi) - math.ceil(lo) >= least - 1
    slack = (hi - lo) * 1e-12  # a tick at an end, in floating point
    ticks: list[float] = []
    for step in reversed(steps[: wide + 1]):
        if whole:
            step = max(1.0, step)
        first = math.ceil((lo - slack) / step)
        last = math.floor((hi + slack) / step)
        ticks = [k * step for k in range(first, last + 1)]
        if len(ticks) >= least:
            break
    return ticks


def tick_texts(ticks: Sequence[float]) -> list[str]:
    """Tick labels with as many decimals as the step between them needs (all alike), a
    minus sign for negatives."""
    if not ticks:
        return []
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(ticks[0]) or 1.0
    decimals = 0
    while decimals < 12 and abs(round(step, decimals) - step) > 1e-9 * max(step, 1e-300):
        decimals += 1
    out = []
    for t in ticks:
        text = f"{t:.{decimals}f}"
        if text.lstrip("-").strip("0.") == "":
            text = text.lstrip("-")  # no "-0.0"
        out.append(text.replace("-", "\u2212"))
    return out


# -- SVG -----------------------------------------------------------------------------------------

PT = 72.0
"""SVG user units per inch: the figure is drawn in points, as matplotlib's SVG is."""
FONT = "DejaVu Sans, Bitstream Vera Sans, Arial, Helvetica, sans-serif"
TICK = 3.5  # tick length and label pad, points
GRID = '<path d="{d}" stroke="#b0b0b0" stroke-opacity="0.3" stroke-width="0.6" fill="none"/>'
_DASHES = {"-": "", "--": "3.7,1.6", ":": "1,1.65"}
_NOTE_CHARS = 110
"""A note's lines are wrapped at this many characters (the plot area's width at 9 pt)."""


def _esc(text: str) -> str:
    """``text`` escaped for XML (``&``, ``<``, ``>``, quotes), as markupsafe escapes HTML."""
    return str(escape(text))


def _num(v: float) -> str:
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _dash(dash: str, width: float) -> str:
    pattern = _DASHES[dash]
    if not pattern:
        return ""
    scaled = ",".join(_num(float(p) * width) for p in pattern.split(","))
    return f' stroke-dasharray="{scaled}"'


def _text(
    x: float,
    y: float,
    text: str,
    *,
    size: float,
    anchor: str = "start",
    colour: str = "#000000",
    bold: bool = False,
    rotate: bool = False,
) -> str:
    weight = ' font-weight="bold"' if bold else ""
    fill = "" if colour == "#000000" else f' fill="{colour}"'
    where = (
        f'transform="translate({_num(x)} {_num(y)}) rotate(-90)"'
        if rotate
        else f'x="{_num(x)}" y="{_num(y)}"'
    )
    return (
        f'<text {where} font-size="{_num(size)}" text-anchor="{anchor}"{weight}{fill}>'
        f"{_esc(text)}</text>"
    )


@dataclass(frozen=True, slots=True)
class _Frame:
    """A panel's plot area in points and the mapping of data coordinates onto it."""

    left: float
    top: float
    width: float
    height: float
    panel: Panel

    def xs(self, x: np.ndarray) -> np.ndarray:
        lo, hi = self.panel.xlim
        return self.left + (np.asarray(x, dtype=float) - lo) * (self.width / (hi - lo or 1.0))

    def ys(self, y: np.ndarray) -> np.ndarray:
        lo, hi = self.panel.ylim
        bottom = self.top + self.height
        return bottom - (np.asarray(y, dtype=float) - lo) * (self.height / (hi - lo or 1.0))


def _frames(chart: Chart) -> list[_Frame]:
    lay = LAYOUT
    n = max(1, len(chart.panels))
    panel = (chart.height - chart.top - lay.bottom - lay.gap * (n - 1)) / n
    width = lay.plot_width(chart.legend)
    return [
        _Frame(
            lay.left * PT,
            (chart.top + i * (panel + lay.gap)) * PT,
            width * PT,
            panel * PT,
            p,
        )
        for i, p in enumerate(chart.panels)
    ]


def _step_path(xs: np.ndarray, ys: np.ndarray) -> str:
    """The SVG path of a steps-post line through the points (already in points)."""
    if len(xs) == 0:
        return ""
    parts = [f"M{_num(xs[0])} {_num(ys[0])}"]
    for k in range(1, len(xs)):
        parts.append(f"H{_num(xs[k])}")
        if ys[k] != ys[k - 1]:
            parts.append(f"V{_num(ys[k])}")
    return "".join(parts)


def _round(values: np.ndarray) -> np.ndarray:
    return np.round(values, 2)


def _mark_svg(mark: Mark, f: _Frame, clip: str) -> str:
    """One mark in points; ``clip`` is the clip-path attribute of the panel's plot area."""
    if isinstance(mark, Step):
        d = _step_path(_round(f.xs(mark.x)), _round(f.ys(mark.y)))
        return (
            f'<path d="{d}" fill="none" stroke="{mark.colour}" '
            f'stroke-width="{_num(mark.width)}"{_dash(mark.dash, mark.width)}'
            f"{clip if mark.clip else ''}/>"
        )
    if isinstance(mark, Stairs):
        edges = _round(f.xs(mark.edges))
        ys = _round(f.ys(mark.values))
        parts = [f"M{_num(edges[0])} {_num(ys[0])}"] if len(ys) else []
        for k in range(len(ys)):
            if k:
                parts.append(f"V{_num(ys[k])}")
            parts.append(f"H{_num(edges[k + 1])}")
        return (
            f'<path d="{"".join(parts)}" fill="none" stroke="{mark.colour}" '
            f'stroke-width="{_num(mark.width)}"{clip}/>'
        )
    if isinstance(mark, Fill):
        xs, ys = _round(f.xs(mark.x)), _round(f.ys(mark.y))
        base = _num(float(f.ys(np.asarray([0.0]))[0]))
        d = _step_path(xs, ys)
        if not d:
            return ""
        return (
            f'<path d="{d}V{base}H{_num(xs[0])}Z" fill="{mark.colour}" '
            f'fill-opacity="{_num(mark.alpha)}" stroke="none"{clip}/>'
        )
    if isinstance(mark, HLines):
        ys = _round(f.ys(np.asarray(mark.y)))
        x0s, x1s = _round(f.xs(np.asarray(mark.start))), _round(f.xs(np.asarray(mark.end)))
        return "".join(
            f'<path d="M{_num(a)} {_num(y)}H{_num(b)}" stroke="{c}" '
            f'stroke-width="{_num(mark.width)}"{_dash(mark.dash, mark.width)}{clip}/>'
            for y, a, b, c in zip(ys, x0s, x1s, mark.colours, strict=True)
        )
    if isinstance(mark, VLine):
        x = _num(float(_round(f.xs(np.asarray([mark.x])))[0]))
        return (
            f'<path d="M{x} {_num(f.top)}V{_num(f.top + f.height)}" stroke="{mark.colour}" '
            f'stroke-width="{_num(mark.width)}"{_dash(mark.dash, mark.width)}{clip}/>'
        )
    return _bars_svg(mark, f, clip)


def _bars_svg(mark: Bars, f: _Frame, clip: str) -> str:
    zero = float(f.ys(np.asarray([0.0]))[0])
    half = mark.width / 2
    out = []
    tips = mark.tips or ("",) * len(mark.x)
    for x, h, text, tip in zip(mark.x, mark.heights, mark.texts, tips, strict=True):
        x0, x1 = (float(v) for v in f.xs(np.asarray([x - half, x + half])))
        top = float(f.ys(np.asarray([h]))[0])
        y, height = min(top, zero), abs(zero - top)
        title = f"><title>{_esc(tip)}</title></rect>" if tip else "/>"
        out.append(
            f'<rect x="{_num(x0)}" y="{_num(y)}" width="{_num(x1 - x0)}" '
            f'height="{_num(height)}" fill="{mark.colour}"{clip}{title}'
        )
        # the value 2 pt beyond the bar's end: above a positive bar, below a negative one
        ty = top - 2.0 if h >= 0 else top + 2.0 + mark.text_size * 0.8
        out.append(_text((x0 + x1) / 2, ty, text, size=mark.text_size, anchor="middle"))
    return "".join(out)


AXIS_Z = 1.5
"""matplotlib's zorder of an axis -- its grid, ticks and tick labels -- under the lines
(``axes.axisbelow: line``), and of the spines, above them."""
SPINES_Z = 2.5


def _axes_svg(panel: Panel, f: _Frame, last: bool) -> tuple[list[str], str]:
    """(grid, ticks and tick labels; the spines) of a panel (x tick labels on the last only)."""
    out = []
    right, bottom = f.left + f.width, f.top + f.height
    yticks = nice_ticks(*panel.ylim, 5, integer=panel.integer)
    ypos = _round(f.ys(np.asarray(yticks)))
    if yticks:
        grid = "".join(f"M{_num(f.left)} {_num(y)}H{_num(right)}" for y in ypos)
        out.append(GRID.format(d=grid))
    if panel.categories is not None:
        xticks = [x for x, _ in panel.categories]
        xtexts = [t for _, t in panel.categories]
    else:
        xticks = nice_ticks(*panel.xlim, 6)
        xtexts = tick_texts(xticks)
    xpos = _round(f.xs(np.asarray(xticks)))
    marks = "".join(f"M{_num(x)} {_num(bottom)}v{_num(TICK)}" for x in xpos)
    marks += "".join(f"M{_num(f.left)} {_num(y)}h{_num(-TICK)}" for y in ypos)
    out.append(f'<path d="{marks}" stroke="#000000" stroke-width="0.8"/>')
    spines = f"M{_num(f.left)} {_num(f.top)}V{_num(bottom)}H{_num(right)}"
    for y, text in zip(ypos, tick_texts(yticks), strict=True):
        out.append(_text(f.left - 2 * TICK, y + 3.2, text, size=9.0, anchor="end"))
    if last:
        for x, text in zip(xpos, xtexts, strict=True):
            out.append(_text(x, bottom + 2 * TICK + 7.0, text, size=9.0, anchor="middle"))
    return out, f'<path d="{spines}" fill="none" stroke="#000000" stroke-width="0.8"/>'


def _legend_svg(chart: Chart, f: _Frame) -> list[str]:
    lay = LAYOUT
    x0 = f.left + f.width + lay.legend_pad * PT
    x1 = x0 + lay.legend_key * PT
    row = lay.legend_row * PT
    out = []
    for i, (label, mark) in enumerate(legend_entries(chart.panels[0])):
        y = f.top + (i + 0.5) * row
        if isinstance(mark, Bars):
            out.append(
                f'<rect x="{_num(x0)}" y="{_num(y - 0.3 * row)}" width="{_num(x1 - x0)}" '
                f'height="{_num(0.6 * row)}" fill="{mark.colour}"/>'
            )
        else:
            assert not isinstance(mark, Fill | HLines)
            dash = mark.dash if isinstance(mark, Step | VLine) else "-"
            out.append(
                f'<path d="M{_num(x0)} {_num(y)}H{_num(x1)}" stroke="{mark.colour}" '
                f'stroke-width="{_num(mark.width)}"{_dash(dash, mark.width)}/>'
            )
        out.append(
            _text(
                x1 + lay.legend_pad * PT,
                y + lay.legend_size * 0.35,
                label,
                size=lay.legend_size,
                colour="#333333",
            )
        )
    return out


def _note_svg(text: str, f: _Frame) -> list[str]:
    lines = [w for part in text.split("\n") for w in textwrap.wrap(part, _NOTE_CHARS) or [""]]
    size, lead = 9.0, 9.0 * 1.2
    first = f.top + f.height / 2 - (len(lines) - 1) * lead / 2 + size * 0.35
    return [
        _text(
            f.left + f.width / 2,
            first + k * lead,
            line,
            size=size,
            anchor="middle",
            colour="#555555",
        )
        for k, line in enumerate(lines)
    ]


def chart_svg(chart: Chart) -> str:
    """``chart`` as a standalone SVG document (points: 8 in = 576 units wide)."""
    width, height = WIDTH_IN * PT, chart.height * PT
    frames = _frames(chart)
    out = [
        '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(width)}pt" '
        f'height="{_num(height)}pt" viewBox="0 0 {_num(width)} {_num(height)}" '
        f'font-family="{FONT}">\n',
        f'<rect width="{_num(width)}" height="{_num(height)}" fill="#ffffff"/>\n',
    ]
    defs = []
    for i, (panel, f) in enumerate(zip(chart.panels, frames, strict=True)):
        last = i == len(chart.panels) - 1
        body: list[str] = []
        if panel.note is None:
            defs.append(
                f'<clipPath id="area{i}"><rect x="{_num(f.left)}" y="{_num(f.top)}" '
                f'width="{_num(f.width)}" height="{_num(f.height)}"/></clipPath>'
            )
            clip = f' clip-path="url(#area{i})"'
            axis, spines = _axes_svg(panel, f, last)
            marks = sorted(panel.marks, key=_z)  # stable: drawing order within a zorder
            body += [_mark_svg(m, f, clip) for m in marks if _z(m) < AXIS_Z]
            body += axis
            body += [_mark_svg(m, f, clip) for m in marks if AXIS_Z <= _z(m) < SPINES_Z]
            body.append(spines)
            body += [_mark_svg(m, f, clip) for m in marks if _z(m) >= SPINES_Z]
            if panel.ylabel:
                x = f.left - LAYOUT.ylabel * PT
                body.append(
                    _text(
                        x,
                        f.top + f.height / 2,
                        panel.ylabel,
                        size=9.0,
                        anchor="middle",
                        rotate=True,
                    )
                )
            if last and panel.xlabel:
                y = f.top + f.height + LAYOUT.xlabel * PT + 7.0
                body.append(_text(f.left + f.width / 2, y, panel.xlabel, size=9.0, anchor="middle"))
        else:
            body += _note_svg(panel.note, f)
        if panel.title:
            body.append(_text(f.left, f.top - 6.0, panel.title, size=panel.title_size, bold=True))
        out.append(f'<g id="panel{i}">' + "".join(body) + "</g>\n")
    if chart.suptitle:
        out.append(_text(0.01 * width, 0.08 * PT + 8.0, chart.suptitle, size=10.0, bold=True))
        out.append("\n")
    if chart.legend and chart.panels:
        out.append('<g id="legend">' + "".join(_legend_svg(chart, frames[0])) + "</g>\n")
    if defs:
        out.insert(3, "<defs>" + "".join(defs) + "</defs>\n")
    out.append("</svg>\n")
    return "".join(out)


def _z(mark: Mark) -> float:
    """Drawing order of a mark, matplotlib's default zorders: fills and bars 1, lines 2,
    and the ones that set their own."""
    if isinstance(mark, Step | Fill):
        return mark.z
    if isinstance(mark, Bars | Stairs):
        return 1.0
    return 2.0
