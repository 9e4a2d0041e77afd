"""Bar charts comparing one metric (or a ``*`` pattern of metrics) across the variants of a
scenario (the suite report's charts): a :class:`~pinlab.report.chart.Chart` written as SVG
for the page (:func:`variant_bars_svg`) or drawn with matplotlib (:func:`variant_bars`)."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pinlab.report.chart import Bars, Chart, Panel, chart_svg
from pinlab.report.figure import PALETTE, chart_figure, fit_label, value_scale
from pinlab.scenarios.result import Metric, RunResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MAX_BARS", "variant_bars", "variant_bars_chart", "variant_bars_svg"]

MAX_BARS = 8
"""At most this many bars per variant; beyond it min/mean/max of the matched metrics."""


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
    return chart_figure(variant_bars_chart(results, metric, title=title))


def variant_bars_svg(results: Sequence[RunResult], metric: str, *, title: str | None = None) -> str:
    """:func:`variant_bars` as SVG text, written without matplotlib
    (:func:`~pinlab.report.chart.chart_svg`)."""
    return chart_svg(variant_bars_chart(results, metric, title=title))


def variant_bars_chart(
    results: Sequence[RunResult], metric: str, *, title: str | None = None
) -> Chart:
    """What :func:`variant_bars` draws, as a :class:`~pinlab.report.chart.Chart`."""
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
    ylabel = f"{description} ({vunit})" if description and vunit else (vunit or description)
    panel = Panel(
        title=title or f"{metric} by variant",
        ylabel=ylabel if len(ylabel) <= 40 else (vunit or ""),
        xlim=(-0.6, len(groups) - 0.4),
        integer=unit == "count",  # no "2.5 denials"
        categories=tuple((float(j), g) for j, g in enumerate(groups)),
    )
    legend = len(series) > 1
    if not values:
        panel.note = f"no metric matches {metric!r} in these runs"
        return Chart(2.7, [panel], legend=legend)
    top = max(values) / vscale
    panel.ylim = (min(0.0, min(values) / vscale * 1.15), top * 1.18 if top > 0 else 1.0)
    n = max(1, len(series))
    width = 0.8 / n
    for i, (label, vs) in enumerate(series):
        xs = tuple(j + (i - (n - 1) / 2) * width for j, v in enumerate(vs) if v is not None)
        hs = tuple(v / vscale for v in vs if v is not None)
        texts = tuple(_bar_text(h * vscale, vscale, vunit) for h in hs)
        present = [g for g, v in zip(groups, vs, strict=True) if v is not None]
        named = [g + (f" · {label}" if legend else "") for g in present]
        unit_text = "" if vunit in ("count", "") else f" {vunit}"
        panel.marks.append(
            Bars(
                xs,
                hs,
                width * 0.92,
                PALETTE[i % len(PALETTE)],
                texts,
                label=fit_label(label) if legend else None,
                tips=tuple(f"{name}: {t}{unit_text}" for name, t in zip(named, texts, strict=True)),
            )
        )
    return Chart(2.7, [panel], legend=legend)


def _bar_text(value: float, scale: float, unit: str) -> str:
    shown = value / scale
    if unit in ("count", "") and float(shown).is_integer():
        return str(int(shown))
    return f"{shown:.3g}"
