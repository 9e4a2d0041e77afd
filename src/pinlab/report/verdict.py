"""Verdict tables and profile-difference tables for ``pinlab run``.

:func:`verdict_table` renders one scenario's :class:`~pinlab.scenarios.result.Verdict` as a
rich table -- titled with the scenario and its claim, one row per variant with the verdict's
own columns -- and :func:`render_verdict` prints it followed by the line ``claim HELD`` or
``claim FAILED`` with the explanation.

:func:`compare_metrics` and :func:`compare_table` serve ``--compare-profile``: the same variant
run under two kernel profiles, metric by metric (metric, unit, profile A, profile B, change).
Values are shown for people (``fmt_size``/``fmt_rate``/``fmt_time`` by unit); the change is
the signed difference in the same unit and, where profile A's value is not zero, in percent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pinlab.scenarios.result import Metric, RunResult, Verdict
from pinlab.units import fmt_rate, fmt_size, fmt_time

__all__ = [
    "MetricDiff",
    "claim_line",
    "compare_metrics",
    "compare_table",
    "fmt_value",
    "render_comparison",
    "render_verdict",
    "verdict_table",
]


def verdict_table(verdict: Verdict) -> Table:
    """One scenario's verdict: title ``<scenario>: <claim>``, the verdict's columns, a row
    per variant (a cell missing from a row is left empty). The table is at least 100
    columns wide (or as wide as its title when that is shorter), so a narrow table does not
    squeeze its claim into a tall column."""
    title = f"{verdict.scenario}: {verdict.claim}"
    table = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        min_width=min(len(title), 100),  # a short table widens rather than wrap its claim
    )
    for i, column in enumerate(verdict.columns):
        table.add_column(column, no_wrap=i == 0, justify="left" if i == 0 else "right")
    for row in verdict.rows:
        table.add_row(*(row.get(column, "") for column in verdict.columns))
    return table


def claim_line(verdict: Verdict, *, prefix: str = "") -> Text:
    """``claim HELD: <explanation>`` (green), ``claim FAILED: …`` (red) or, when the variants
    the claim compares were not all run, ``claim NOT JUDGED: …`` (yellow)."""
    if not verdict.judged:
        word, style = "NOT JUDGED", "bold yellow"
    else:
        word, style = ("HELD", "bold green") if verdict.held else ("FAILED", "bold red")
    line = Text(prefix)
    line.append(f"claim {word}", style=style)
    if verdict.explanation:
        line.append(f": {verdict.explanation}")
    return line


def randomness_line(results: Sequence[RunResult]) -> str:
    """``randomness: deterministic ...`` when no stochastic source drew in any of the runs,
    else the seeded sources that did (``<tenant>/<source>``), by variant where they differ."""
    by_variant = {r.variant: tuple(r.random_sources) for r in results}
    if not any(by_variant.values()):
        return "randomness: deterministic (no stochastic source; every seed gives these runs)"
    sources = set(by_variant.values())
    if len(sources) == 1:
        return f"randomness: seeded sources {', '.join(next(iter(sources)))}"
    parts = [f"{v}: {', '.join(src) or 'none'}" for v, src in by_variant.items()]
    return f"randomness: seeded sources by variant ({'; '.join(parts)})"


def render_verdict(verdict: Verdict, console: Console) -> None:
    """Print the verdict table and the final ``claim HELD``/``claim FAILED`` line."""
    console.print(verdict_table(verdict))
    console.print(claim_line(verdict))
    console.print()


# -- profile comparison ------------------------------------------------------------------------


def _sig(x: float, digits: int = 4) -> str:
    """``x`` with up to ``digits`` significant digits, no exponent for everyday magnitudes."""
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1e15 or abs(x) < 1e-4:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def fmt_value(value: float, unit: str) -> str:
    """``value`` for people, by its unit: sizes (``B``) in KiB/MiB/GiB, rates (``B/s``) in
    MB/s/GB/s, times (``s``) in ns/µs/ms/s, counts as integers, anything else with four
    significant digits."""
    if isinstance(value, bool):
        return str(value).lower()
    if unit == "B":
        return fmt_size(value)
    if unit == "B/s":
        return fmt_rate(value)
    if unit == "s":
        return fmt_time(abs(value)) if value >= 0 else "-" + fmt_time(-value)
    if unit == "count" and float(value).is_integer():
        return str(int(value))
    return _sig(float(value))


@dataclass(frozen=True, slots=True)
class MetricDiff:
    """One metric under two profiles. ``a``/``b`` are ``None`` where the metric is absent."""

    name: str
    unit: str
    a: float | None
    b: float | None

    @property
    def changed(self) -> bool:
        return self.a != self.b

    @property
    def delta(self) -> float | None:
        if self.a is None or self.b is None:
            return None
        return float(self.b) - float(self.a)

    def change(self) -> str:
        """``"="``, ``"+1.5 GiB (+25%)"``, ``"-3 (-100%)"``, ``"+2 (from 0)"``, or
        ``"only in A"``/``"only in B"`` for a metric one run lacks."""
        if not self.changed:
            return "="
        if self.a is None:
            return "only in B"
        if self.b is None:
            return "only in A"
        delta = float(self.b) - float(self.a)
        sign = "+" if delta > 0 else "-"
        text = sign + fmt_value(abs(delta), self.unit)
        if self.a != 0:
            text += f" ({sign}{_sig(abs(delta) / abs(float(self.a)) * 100, 3)}%)"
        else:
            text += " (from 0)"
        return text


def compare_metrics(a: RunResult, b: RunResult) -> list[MetricDiff]:
    """Every metric of ``a`` and ``b`` (sorted by name), with both values and the unit."""
    names = sorted(set(a.metrics) | set(b.metrics))
    diffs = []
    for name in names:
        ma: Metric | None = a.metrics.get(name)
        mb: Metric | None = b.metrics.get(name)
        known = ma if ma is not None else mb
        unit = known.unit if known is not None else ""
        diffs.append(
            MetricDiff(
                name,
                unit,
                None if ma is None else ma.value,
                None if mb is None else mb.value,
            )
        )
    return diffs


def compare_table(a: RunResult, b: RunResult, *, changed_only: bool = True) -> Table | Text:
    """The difference between one variant under two profiles: metric, unit, profile A,
    profile B, change. With ``changed_only`` (the default) unchanged metrics are counted in
    the caption instead of listed, and when nothing changed the result is the one line
    ``<scenario>/<variant>: profile A -> B: all N metrics identical``."""
    diffs = compare_metrics(a, b)
    changed = [d for d in diffs if d.changed]
    shown = changed if changed_only else diffs
    title = f"{a.scenario}/{a.variant}: profile {a.profile} -> {b.profile}"
    if changed_only and not changed:
        line = Text(title, style="bold")
        line.append(f": all {len(diffs)} metrics identical", style="none")
        return line
    label_a, label_b = f"profile {a.profile}", f"profile {b.profile}"
    if label_a == label_b:
        label_a, label_b = f"{label_a} (A)", f"{label_b} (B)"
    table = Table(title=title, title_justify="left", title_style="bold")
    table.add_column("metric", no_wrap=True)
    table.add_column("unit")
    table.add_column(label_a, justify="right")
    table.add_column(label_b, justify="right")
    table.add_column("change", justify="right")
    for d in shown:
        table.add_row(
            d.name,
            d.unit,
            "-" if d.a is None else fmt_value(d.a, d.unit),
            "-" if d.b is None else fmt_value(d.b, d.unit),
            d.change(),
        )
    if changed_only:
        table.caption = f"{len(diffs) - len(changed)} of {len(diffs)} metrics unchanged"
        table.caption_justify = "left"
    return table


def render_comparison(a: RunResult, b: RunResult, console: Console) -> None:
    """Print :func:`compare_table` for one variant under two profiles."""
    console.print(compare_table(a, b))
    console.print()
