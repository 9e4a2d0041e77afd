"""``pinlab explore`` output: a text report, JSON, and a directory with an HTML page and one
reproducer script per finding.

The JSON and the files under ``--out`` hold no wall-clock times except in the JSON's
``timing`` object, so that a run bounded by ``--max-sequences`` writes the same bytes every
time; the text report shows the seconds at which each finding was first met.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pinlab.explore.search import Report
from pinlab.fsutil import write_atomic


def summary_line(report: Report) -> str:
    s = report.stats
    depth = f"depth {s.depth_done} of {report.depth} complete"
    if s.exhausted:
        depth = f"every state explored (depth {s.depth_done})"
    blocking = sum(f.blocking for f in report.findings)
    return (
        f"{len(report.targets)} target(s), {s.sequences} sequences ({s.states} distinct states; "
        f"{s.revisits} revisits and {s.por_skipped} commuting orders pruned; {s.shrink_runs} "
        f"shrink runs), {depth}, seed {report.seed}: {len(report.findings)} finding(s), "
        f"{blocking} blocking"
    )


def as_dict(report: Report, *, timing: bool = True) -> dict[str, Any]:
    s = report.stats
    findings = []
    for f in report.findings:
        d = f.as_dict()
        d.pop("found_at_seconds")
        findings.append(d)
    data: dict[str, Any] = {
        "targets": [str(t) for t in report.targets],
        "skipped": [{"target": str(t), "why": why} for t, why in report.skipped],
        "depth": report.depth,
        "seed": report.seed,
        "stats": {
            "sequences": s.sequences,
            "states": s.states,
            "revisits": s.revisits,
            "por_skipped": s.por_skipped,
            "shrink_runs": s.shrink_runs,
            "depth_done": s.depth_done,
            "exhausted": s.exhausted,
        },
        "reached_at_last_level": report.reached,
        "findings": findings,
    }
    if timing:
        data["timing"] = {
            "budget_seconds": report.budget,
            "seconds": round(s.seconds, 3),
            "found_at_seconds": {
                f.signature: round(f.found_at_seconds, 3) for f in report.findings
            },
        }
    return data


def to_json(report: Report) -> str:
    return json.dumps(as_dict(report), indent=2, ensure_ascii=False) + "\n"


def print_text(report: Report, console: Console) -> None:
    console.print(summary_line(report), markup=False, highlight=False)
    if report.skipped:
        console.print(f"{len(report.skipped)} combination(s) skipped:", highlight=False)
        for target, why in report.skipped:
            console.print(f"  {target}: {why}", markup=False, highlight=False)
    if not report.findings:
        console.print("no findings", highlight=False)
        return
    table = Table(title="findings", show_lines=False)
    for col in ("id", "class", "finding", "first on", "seq #", "s"):
        table.add_column(col)
    for f in report.findings:
        table.add_row(
            f.id,
            f.classification,
            f.title,
            str(f.target),
            str(f.found_at_sequence),
            f"{f.found_at_seconds:.1f}",
        )
    console.print(table)
    for f in report.findings:
        console.print(f"\n[bold]{f.id}[/bold] {f.classification}: {f.signature}", highlight=False)
        status = f.known.status if f.known is not None else "new: review the call path"
        console.print(f"  status: {status}", markup=False, highlight=False)
        for n, step in enumerate(f.steps(), 1):
            console.print(f"  {n}. {step}", markup=False, highlight=False)
        for v in f.violations:
            console.print(f"  ! {v}", markup=False, highlight=False)
        if f.sources:
            console.print("  upstream: " + "; ".join(f.sources[:6]), markup=False, highlight=False)
        if f.items:
            console.print("  items: " + ", ".join(f.items), markup=False, highlight=False)


def page_context(report: Report) -> dict[str, Any]:
    """What ``templates/findings.html.j2`` shows: the summary line and each finding as data,
    its reproducer included. The CLI renders the page with the other pages' frame (this layer
    sits beside ``report`` and does not import it)."""
    findings = []
    for f in report.findings:
        d = f.as_dict()
        d["reproducer"] = f.reproducer()
        findings.append(d)
    return {"summary": summary_line(report), "findings": findings}


def write_out(report: Report, out: Path) -> list[Path]:
    """Write ``findings.json`` and ``finding-N.py`` under ``out`` (the page, ``index.html``,
    is the CLI's: :func:`page_context`)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for n, f in enumerate(report.findings, 1):
        script = out / f"finding-{n}.py"
        write_atomic(script, f.reproducer())
        written.append(script)
    data = out / "findings.json"
    write_atomic(data, json.dumps(as_dict(report, timing=False), indent=2) + "\n")
    return [data, *written]
