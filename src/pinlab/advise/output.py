"""What ``pinlab advise`` writes under ``--out``::

    policy.toml          the recommended policy (``pinlab run SCENARIO --policy DIR/policy.toml``);
                         closest-policy.toml instead when no point met every protection
    points.csv           the evidence: one row per evaluated point (stage, protections held,
                         margin, the maximised metric, each protection's value, each knob)
    pareto.svg           protection margin vs the maximised metric, the Pareto front drawn
    advise.html          all of it on one page, with the verification run's checks
    advise.json          the same as data
    verification/summary.json   the recommended policy re-run from policy.toml
    evaluations/         the sweep directory of every point run (points/<id>.json, results.*)

Every file is written atomically; the bytes depend only on the scenario, the options and the
seed (no clock, no host).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from pinlab import fsutil
from pinlab.advise.evaluate import Evaluation, Protections
from pinlab.advise.search import Advice
from pinlab.scenarios.claims import show_value
from pinlab.scenarios.result import RunResult, Verdict

__all__ = ["maximised_text", "pareto_front", "policy_toml", "write_outputs"]


def policy_toml(doc: dict[str, Any], header: Sequence[str]) -> str:
    """A policy document as a commented TOML file."""
    lines = "".join(f"# {h}\n" for h in header)
    return lines + tomli_w.dumps(doc)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (more is better on each),
    by increasing first coordinate."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1], i))
    front: list[int] = []
    best = -float("inf")
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return sorted(front, key=lambda i: (points[i][0], i))


def _xy(e: Evaluation) -> tuple[float, float]:
    x = float(e.objective) if e.objective is not None else float(e.index)
    return x, e.margin


def _svg(advice: Advice, protections: Protections) -> str:
    from matplotlib.figure import Figure

    from pinlab.report.plots import figure_svg, style, value_scale

    evaluations = [e for e in advice.evaluations if e.values is not None]
    xy = [_xy(e) for e in evaluations]
    term = protections.objective
    unit = term.unit if term is not None else ""
    scale, label = value_scale(unit, max((abs(x) for x, _ in xy), default=1.0) or 1.0)
    with style():
        fig = Figure(figsize=(7.0, 4.2))
        ax = fig.subplots()
        for held, colour, text in (
            (True, "tab:green", "meets every --protect"),
            (False, "tab:red", "misses one"),
        ):
            pts = [
                (x / scale, y) for (x, y), e in zip(xy, evaluations, strict=True) if e.held is held
            ]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=18, c=colour, label=text)
        front = pareto_front(xy)
        if front:
            ax.plot(
                [xy[i][0] / scale for i in front],
                [xy[i][1] for i in front],
                drawstyle="steps-post",
                color="tab:blue",
                lw=1,
                marker="o",
                markersize=9,
                markerfacecolor="none",
                label="Pareto front",
            )
        chosen = advice.recommended or advice.closest
        cx, cy = _xy(chosen)
        ax.scatter(
            [cx / scale],
            [cy],
            marker="*",
            s=160,
            c="gold",
            edgecolors="black",
            label="recommended" if advice.recommended else "closest",
            zorder=3,
        )
        ax.axhline(0.0, color="grey", lw=0.6, ls="--")
        xlabel = (
            f"{term.title} ({label})"
            if term is not None and label
            else (term.title if term is not None else "evaluation")
        )
        ax.set_xlabel(xlabel)
        ax.set_ylabel("protection margin (worst --protect; < 0 missed)")
        ax.legend(loc="best", fontsize="small")
        fig.subplots_adjust(left=0.12, right=0.97, top=0.95, bottom=0.14)
        return figure_svg(fig)


def _rows(advice: Advice, protections: Protections) -> tuple[list[str], list[list[str]]]:
    knobs = advice.space.knobs
    head = [
        "point",
        "stage",
        "meets",
        "margin",
        protections.objective.title if protections.objective is not None else "objective",
        *protections.texts,
        *(k.name for k in knobs),
    ]
    rows: list[list[str]] = []
    for e in advice.evaluations:
        assert e.values is not None
        cells = [
            str(e.index),
            e.stage,
            "yes" if e.held else "no",
            f"{e.margin:.4g}",
            _objective_text(protections, e.objective),
        ]
        for check, outcome in zip(protections.checks, e.verdict.outcomes, strict=True):
            value = outcome.rows[0]["value"] if outcome.rows else None
            cells.append("–" if value is None else show_value(float(value), check.lhs.unit))
        cells += list(advice.space.shown(e.values).values())
        rows.append(cells)
    return head, rows


def _objective_text(protections: Protections, value: float | None) -> str:
    term = protections.objective
    if term is None or value is None:
        return "–"
    return show_value(float(value), term.unit)


def _csv(head: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(head)
    writer.writerows(rows)
    return buf.getvalue()


def _checks(verdict: Verdict, protections: Protections) -> list[dict[str, Any]]:
    out = []
    for text, check, outcome in zip(
        protections.texts, protections.checks, verdict.outcomes, strict=True
    ):
        row = outcome.rows[0] if outcome.rows else {}
        value, expected = row.get("value"), row.get("expected")
        out.append(
            {
                "protect": text,
                "held": bool(outcome.held),
                "value": value,
                "expected": expected,
                "shown": "–" if value is None else show_value(float(value), check.lhs.unit),
                "text": outcome.text,
            }
        )
    return out


def write_outputs(
    out: Path,
    *,
    scenario: str,
    advice: Advice,
    protections: Protections,
    budget: int,
    seed: int,
    policy_file: Path,
    policy_text: str,
    verification: tuple[RunResult, Verdict] | None,
    command: str,
) -> None:
    """Write the evidence, the HTML page and the data; ``policy_file`` is already written.
    The page is a pinlab page like the run reports (``report.html.render_page``); its footer
    names ``command``, the advice's own command line (the policy file's first line), not the
    one typed: ``--jobs`` and ``--out`` do not change a byte of the advice."""
    from pinlab.report.html import Plot, render_page

    head, rows = _rows(advice, protections)
    svg = _svg(advice, protections)
    checks = _checks(verification[1], protections) if verification is not None else []
    if verification is not None:
        result = verification[0]
        fsutil.write_atomic(out / "verification" / "summary.json", result.summary_json())
    if advice.recommended is not None:
        met = all(c["held"] for c in checks)
        headline = f"Recommended: {policy_file.name}; re-run, it " + (
            "meets every --protect." if met else "MISSES a --protect (see below)."
        )
    else:
        headline = (
            "No evaluated policy meets every --protect; the closest is point "
            f"{advice.closest.index} ({closest_text(advice.closest)})."
        )
    term = protections.objective
    chosen = advice.recommended or advice.closest
    xlabel = term.title if term is not None else "evaluation"
    page = render_page(
        "advise.html.j2",
        packages=("pinlab.advise",),
        title=f"pinlab advise: {scenario}",
        command=command,
        scenario=scenario,
        variant=protections.variant,
        met=advice.recommended is not None and all(c["held"] for c in checks),
        headline=headline,
        protect=protections.texts,
        maximise=term.text if term is not None else None,
        maximised=maximised_text(protections, chosen),
        evaluated=len(advice.evaluations),
        budget=budget,
        seed=seed,
        policy_title="Recommended policy" if advice.recommended else "Closest policy",
        policy=policy_text,
        boundaries=[b.text() for b in advice.boundaries],
        checks=checks,
        xlabel=xlabel,
        pareto=Plot.inline("plot-pareto", f"protection margin vs {xlabel}", svg, "pa-"),
        head=head,
        rows=rows,
        expected_images=1,
    )
    fsutil.write_atomic(out / "points.csv", _csv(head, rows))
    fsutil.write_atomic(out / "pareto.svg", svg)
    fsutil.write_atomic(out / "advise.html", page)
    doc = {
        "scenario": scenario,
        "variant": protections.variant,
        "protect": list(protections.texts),
        "maximise": term.text if term is not None else None,
        "budget": budget,
        "seed": seed,
        "met": advice.recommended is not None,
        "point": chosen.index,
        "policy_file": policy_file.name,
        "knobs": advice.space.shown(chosen.values or {}),
        "objective": chosen.objective,
        "boundaries": [b.text() for b in advice.boundaries],
        "verification": checks,
        "evaluated": len(advice.evaluations),
    }
    text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
    fsutil.write_atomic(out / "advise.json", text)


def maximised_text(protections: Protections, chosen: Evaluation) -> str:
    """What the maximised term reached at ``chosen`` (``8.05 GB/s at point 1``), "" without
    a ``--maximise`` or a value."""
    if protections.objective is None or chosen.objective is None:
        return ""
    return f"{_objective_text(protections, chosen.objective)} at point {chosen.index}"


def closest_text(e: Evaluation) -> str:
    """Which protections the point misses, with its numbers."""
    missed = [o.text for o in e.verdict.outcomes if o.held is not True]
    return "; ".join(missed) or "every protection held"
