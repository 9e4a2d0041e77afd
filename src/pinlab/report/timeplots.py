"""The time plots of one run: each tenant's throughput, device memory (pinned, used, free)
and denials over simulated time, each computed as a :class:`~pinlab.report.chart.Chart`
(``*_chart``) that the report writes as SVG (:func:`run_figure_svgs`) and the figure
functions draw with matplotlib; :data:`FIGURES` lists them for the run report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pinlab.report.chart import Chart, Fill, HLines, Mark, Panel, Stairs, Step, VLine, chart_svg
from pinlab.report.figure import (
    COLUMNS,
    LAYOUT,
    PALETTE,
    chart_figure,
    fit_label,
    fmt_duration,
    run_title,
    time_axis,
    value_scale,
)
from pinlab.scenarios.result import RunResult
from pinlab.sim.metrics import iter_series
from pinlab.units import fmt_rate

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "CHARTS",
    "FIGURES",
    "MAX_LINES",
    "MAX_PANELS",
    "denials_chart",
    "denials_over_time",
    "memory_chart",
    "memory_over_time",
    "run_figure_svgs",
    "run_figures",
    "thin_steps",
    "throughput_chart",
    "throughput_over_time",
]

PINNED_COLOUR = "#d62728"
USED_COLOUR = "#1f77b4"
FREE_COLOUR = "#2ca02c"
FAULT_COLOUR = "#555555"

PINNED_WIDTH = 2.6
"""The pinned line is drawn thick, above the fills, the axes and the other lines but one: where
used equals pinned (everything allocated is pinned) the thin used line runs inside it."""
LINE_WIDTH = 1.1
FILL_Z = 1.0
PINNED_Z = 2.6  # above the spines (2.5) and the grid
LINE_Z = 2.7

_MEMORY_LINES: dict[str, dict[str, Any]] = {
    # clip=False: at 0 the whole pinned line shows, over the x axis
    "pinned": {"colour": PINNED_COLOUR, "width": PINNED_WIDTH, "z": PINNED_Z, "clip": False},
    "used": {"colour": USED_COLOUR, "width": LINE_WIDTH, "z": LINE_Z},
    "free": {"colour": FREE_COLOUR, "width": LINE_WIDTH, "z": LINE_Z, "dash": "--"},
}

NOTE_HEIGHT = 1.3
"""Inches of a figure that is only its title and a note (:func:`~pinlab.report.figure.note`)."""

MAX_LINES = 8
"""At most this many tenant lines per plot; beyond it the smaller ones are summed."""
MAX_PANELS = 6
"""At most this many memory panels; beyond it regions are summed over devices."""

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


def _faults(
    result: RunResult, scale: float, window: tuple[float, float] | None = None
) -> list[Mark]:
    """Dotted vertical lines at the run's injected faults (one legend entry); with
    ``window`` (seconds), only the faults inside it."""
    times = sorted({t for t, kind, _ in result.recorder.events if kind == "fault"})
    if window is not None:
        times = [t for t in times if window[0] <= t <= window[1]]
    return [
        VLine(t / scale, FAULT_COLOUR, label="fault injected" if i == 0 else None)
        for i, t in enumerate(times)
    ]


def _top_limit(peak: float) -> tuple[float, float]:
    """y limits from 0 to ``peak`` plus a 5 % margin (1 when nothing rose above 0)."""
    return (0.0, peak * 1.05) if peak > 0 else (0.0, 1.0)


# -- the figures ---------------------------------------------------------------------------------

MAX_BINS = 60
"""At most this many time bins in a tenant's throughput line."""
TRANSFERS_PER_BIN = 4
"""About this many completed transfers per bin, so a bin's mean is not one transfer's noise."""


def _data_phase(result: RunResult, name: str, points: np.ndarray) -> tuple[float, float]:
    """The data phase ``tenant.<name>.throughput`` is measured over, in seconds: as long as
    the table says -- ``tenant.<name>.bytes`` over that throughput -- and ending at the
    tenant's last byte (starting no earlier than 0), so the line drawn over it averages to the
    table's rate. Without those metrics: from the last point before the first byte to the
    last byte."""
    t, v = points[:, 0], points[:, 1]
    last = float(t[int(np.argmax(v >= v[-1]))])
    rate = result.metrics.get(f"tenant.{name}.throughput")
    moved = result.metrics.get(f"tenant.{name}.bytes")
    total = float(moved.value) if moved is not None else float(v[-1])
    if rate is not None and float(rate.value) > 0 and total > 0:
        start = max(0.0, last - total / float(rate.value))
        return start, max(start + total / float(rate.value), last)
    first = int(np.argmax(v > v[0]))
    return (float(t[first - 1]) if first > 0 else 0.0), last


def _binned_rate(
    curves: Sequence[np.ndarray], start: float, end: float
) -> tuple[np.ndarray, np.ndarray]:
    """(bin edges, bytes per second in each bin) of the summed cumulative byte ``curves``
    over ``[start, end]``: equal bins, about :data:`TRANSFERS_PER_BIN` times at which the sum
    grew each (1 to :data:`MAX_BINS`), so the bins' mean is the bytes moved in the window over
    its length. Times, not transfers: the tenants of a synchronous job grow together (every
    rank's step ends at once, and a sampled series moves at the same ticks), and counting each
    curve's steps made bins finer than the sum's, most holding none of its steps -- the sum
    drawn as bursts and silences that no tenant had."""
    grew = [
        c[1:, 0][(np.diff(c[:, 1]) != 0) & (c[1:, 0] > start) & (c[1:, 0] <= end)] for c in curves
    ]
    times = np.unique(np.concatenate(grew)).size
    nbins = int(np.clip(times // TRANSFERS_PER_BIN, 1, MAX_BINS))
    edges = np.linspace(start, end, nbins + 1)
    moved = np.sum([np.diff(_step_at(c, edges)) for c in curves], axis=0)
    return edges, moved / (float(edges[1] - edges[0]))


def throughput_over_time(result: RunResult) -> Figure:
    """Each tenant's transfer rate over its data phase (:func:`_data_phase`: after setup,
    the period the table's ``tenant.<name>.throughput`` is measured over), as the mean rate
    per time bin of the cumulative ``tenant.<name>.bytes`` series; a dotted line and the
    legend give the mean over the phase, the table's rate. The time axis spans the tenants'
    data phases. With more than :data:`MAX_LINES` tenants the smaller ones are summed into one
    line. Without byte series, a note and each tenant's mean rate over its data phase."""
    return chart_figure(throughput_chart(result))


def throughput_chart(result: RunResult) -> Chart:
    """What :func:`throughput_over_time` draws, as a :class:`~pinlab.report.chart.Chart`."""
    recorded = _series_by_suffix(result, "tenant", "bytes")
    curves = {n: p for n, p in recorded.items() if p[-1, 1] > 0}
    title = run_title(result, "Throughput per tenant")
    if not curves:
        text = "no tenant moved any bytes in this run" if recorded else _mean_rates(result)
        return Chart(NOTE_HEIGHT, [Panel(title=title, note=text)])
    shown, folded = _top(curves, lambda p: float(p[-1, 1]), MAX_LINES)
    phases = {n: _data_phase(result, n, curves[n]) for n in curves}
    lines = []
    for n in shown:
        edges, rate = _binned_rate([curves[n]], *phases[n])
        # equal bins: their mean is the mean over the phase, the table's rate
        label = _suffixed(n, f" {fmt_rate(float(np.mean(rate)))}", RATE_CHARS)
        lines.append((label, edges, rate))
    if folded:
        span = (min(phases[n][0] for n in folded), max(phases[n][1] for n in folded))
        edges, rate = _binned_rate([curves[n] for n in folded], *span)
        lines.append((f"{len(folded)} other tenants", edges, rate))
    window = (min(e[0] for _, e, _ in lines), max(e[-1] for _, e, _ in lines))
    tscale, tlabel, xlim = time_axis(window[1], window[0])
    peak = max(float(np.max(r)) for _, _, r in lines)
    vscale, vunit = value_scale("B/s", peak)
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(lines))]
    marks: list[Mark] = [
        Stairs(rate / vscale, edges / tscale, colour, 1.4, label)
        for colour, (label, edges, rate) in zip(colours, lines, strict=True)
    ]
    marks.append(  # every tenant's mean: one collection, not one per tenant
        HLines(
            tuple(float(np.mean(rate)) / vscale for _, _, rate in lines),
            tuple(float(edges[0]) / tscale for _, edges, _ in lines),
            tuple(float(edges[-1]) / tscale for _, edges, _ in lines),
            tuple(colours),
        )
    )
    marks += _faults(result, tscale, window)
    if len(lines) == 1:
        edges = lines[0][1]
        bins = f"{len(edges) - 1} × {fmt_duration(float(edges[1] - edges[0]))} bins"
        phase = f"the data phase in {bins}"
    else:
        phase = "each tenant's data phase, binned"
    panel = Panel(
        title=title,
        xlabel=f"{tlabel}: {phase}; dotted: its mean",
        ylabel=f"throughput ({vunit})",
        xlim=xlim,
        ylim=_top_limit(peak / vscale),
        marks=marks,
    )
    return Chart(3.2, [panel])


def _mean_rates(result: RunResult) -> str:
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
    return text


def _region_label(key: str) -> str:
    device, _, region = key.partition(".")
    return f"{device} {region}"


def memory_over_time(result: RunResult) -> Figure:
    """Pinned (filled), used and free bytes of each device memory region over time, one
    panel per region that held anything. With more than :data:`MAX_PANELS` regions, regions
    of the same name (``hbm``, ``vram`` ...) are summed over all devices and nodes."""
    return chart_figure(memory_chart(result))


def memory_chart(result: RunResult) -> Chart:
    """What :func:`memory_over_time` draws, as a :class:`~pinlab.report.chart.Chart`."""
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
    title = run_title(result, "Device memory: pinned vs free")
    top = LAYOUT.top + LAYOUT.suptitle
    tscale, tlabel, xlim = time_axis(end)
    if not panels:
        # regions recorded but all empty (cluster-128's default-memlock: no job started) are
        # not regions missing from the run
        note = (
            f"no device memory was used or pinned: all {len(keys)} memory regions stayed empty"
            if keys
            else "no device memory series (device.<node>/<dev>.<region>.*) recorded"
        )
        return Chart(2.7, [Panel(note=note)], top=top, suptitle=title)
    peak = max(float(np.max(p[:, 1])) for _, d in panels for p in d.values())
    vscale, vunit = value_scale("B", peak)
    faults = _faults(result, tscale)
    out = []
    for label, d in panels:
        marks: list[Mark] = []
        for kind in ("pinned", "used", "free"):
            if kind not in d and kind != "pinned":
                continue
            # a region that never pinned still shows (and lists) its pinned line, at 0
            t, v = _step_xy(d[kind] if kind in d else np.zeros((1, 2)), end)
            if kind == "pinned":
                marks.append(Fill(t / tscale, v / vscale, PINNED_COLOUR, 0.25, FILL_Z))
            marks.append(Step(t / tscale, v / vscale, label=kind, **_MEMORY_LINES[kind]))
        marks += faults
        highest = max(float(np.max(p[:, 1])) for p in d.values()) / vscale
        out.append(
            Panel(
                title=label,
                title_size=9.0,
                ylabel=vunit,
                xlim=xlim,
                ylim=_top_limit(highest),
                marks=marks,
            )
        )
    out[-1].xlabel = tlabel
    return Chart(1.0 + 1.7 * len(out), out, top=top, suptitle=title)


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
    return chart_figure(denials_chart(result))


def denials_chart(result: RunResult) -> Chart:
    """What :func:`denials_over_time` draws, as a :class:`~pinlab.report.chart.Chart`."""
    curves = _denial_curves(result)
    curves = {n: p for n, p in curves.items() if float(np.max(p[:, 1])) > 0}
    title = run_title(result, "Denials per tenant (cumulative)")
    if not curves:
        note = "no denials: every call the tenants made succeeded"
        return Chart(NOTE_HEIGHT, [Panel(title=title, note=note)])
    end = _end_time(result, list(curves.values()))
    tscale, tlabel, xlim = time_axis(end)
    shown, folded = _top(curves, lambda p: float(p[-1, 1]), MAX_LINES)
    lines = [(n, curves[n]) for n in shown]
    if folded:
        grid = np.unique(np.concatenate([curves[n][:, 0] for n in folded]))
        total = np.sum([_step_at(curves[n], grid) for n in folded], axis=0)
        lines.append((f"{len(folded)} other tenants", np.column_stack([grid, total])))
    marks: list[Mark] = []
    for i, (name, pts) in enumerate(lines):
        t, v = _step_xy(np.vstack([[0.0, 0.0], pts]) if pts[0, 0] > 0 else pts, end)
        marks.append(
            Step(
                t / tscale,
                v,
                PALETTE[i % len(PALETTE)],
                1.4,
                label=_suffixed(name, f" ({int(pts[-1, 1])})"),
            )
        )
    marks += _faults(result, tscale)
    peak = max(float(np.max(p[:, 1])) for _, p in lines)
    panel = Panel(
        title=title,
        xlabel=tlabel,
        ylabel="denials",
        xlim=xlim,
        ylim=_top_limit(peak),
        integer=True,
        marks=marks,
    )
    return Chart(3.0, [panel])


RATE_CHARS = LAYOUT.legend_chars - 4
"""A legend label with a rate fits fewer characters: units are wide letters (``MB/s``)."""


def _suffixed(name: str, suffix: str, limit: int = LAYOUT.legend_chars) -> str:
    """``<name><suffix>`` (a count, a rate), the name cut to fit ``limit`` characters."""
    return fit_label(name, limit - len(suffix)) + suffix


# -- all figures of one run ----------------------------------------------------------------------

FIGURES: dict[str, tuple[str, Callable[[RunResult], Figure]]] = {
    "throughput": ("Throughput per tenant over time", throughput_over_time),
    "memory": ("Pinned versus free device memory over time", memory_over_time),
    "denials": ("Denials per tenant over time", denials_over_time),
}
"""The figures of one run's report: file stem -> (caption, function)."""


CHARTS: dict[str, Callable[[RunResult], Chart]] = {
    "throughput": throughput_chart,
    "memory": memory_chart,
    "denials": denials_chart,
}
"""The charts behind :data:`FIGURES`, by file stem."""


def run_figures(result: RunResult) -> dict[str, Figure]:
    """Every figure of :data:`FIGURES` for ``result``, by file stem (new figures)."""
    return {stem: fn(result) for stem, (_, fn) in FIGURES.items()}


def run_figure_svgs(result: RunResult) -> dict[str, str]:
    """Every figure of :data:`FIGURES` for ``result`` as SVG text, by file stem: what a
    report needs, written from the charts without matplotlib (:func:`chart_svg`)."""
    return {stem: chart_svg(CHARTS[stem](result)) for stem in FIGURES}
