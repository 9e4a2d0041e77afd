"""``pinlab sweep``: parameter sweeps, local or on Dask, resumable."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from pinlab.cli.common import (
    UserError,
    add_command,
    add_json_flag,
    add_out_flag,
    add_quiet_flag,
    add_workers,
    as_user_error,
    out_dir,
    print_json,
    wide,
)
from pinlab.cli.run import run_points

if TYPE_CHECKING:
    from pinlab.sweep import Sweep

RICH_TABLE_MAX = 1000
"""Above this many points ``--dry-run`` prints tab-separated lines: rich lays a table out
at ~1 ms a row, which is 100 s for a sweep of the largest size."""


def _list_points(sweep: Sweep, console: Console) -> None:
    """Print the points of ``sweep`` (``--dry-run``): a table, or for a large sweep a header
    line and one tab-separated line per point with the same columns."""
    title = f"{sweep.name}: {len(sweep.points)} points ({sweep.source})"
    columns = ("point", "id", "variant", "seed", *sweep.factor_names)
    rows = (
        (
            str(p.index),
            p.id[:12],
            p.variant,
            "scenario" if p.seed is None else str(p.seed),
            *(str(p.factors[n]) for n in sweep.factor_names),
        )
        for p in sweep.points
    )
    if len(sweep.points) > RICH_TABLE_MAX:
        write = sys.stdout.write
        write(f"{title}\n")
        write("\t".join(columns) + "\n")
        for row in rows:
            write("\t".join(row) + "\n")
        return
    console = wide(console)
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def points_json(sweep: Sweep) -> dict[str, Any]:
    """``pinlab sweep --dry-run --json``: the sweep and its points, factor values as written."""
    return {
        "sweep": sweep.name,
        "source": str(sweep.source),
        "factors": list(sweep.factor_names),
        "points": [
            {
                "index": p.index,
                "id": p.id,
                "variant": p.variant,
                "seed": p.seed,
                "factors": {n: p.factors[n] for n in sweep.factor_names},
            }
            for p in sweep.points
        ],
    }


def _cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    """run a parameter sweep (factors x variants x seeds) into one table

    Run every point of a sweep file on a local process pool (or a Dask cluster) and write
    DIR/results.parquet and DIR/results.csv, one row per point with the configuration as typed
    columns, DIR/summary.csv (mean, spread, n by factor) and DIR/results.html (plots of each metric
    vs each factor). A point whose run is deterministic is not replicated over seeds. Finished
    points are kept in DIR/points/: run again after an interruption and only the missing points run.
    """
    from pinlab.sweep import PointError, load_sweep, run_sweep

    with as_user_error():
        sweep = load_sweep(args.file, validate_points=not args.dry_run)
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs: expected a number of processes >= 1, found {args.jobs}")
    if args.max_points is not None and args.max_points < 1:
        # 0 would run nothing and leave no table to report
        raise UserError(f"--max-points: expected at least 1, found {args.max_points}")
    if args.json and not args.dry_run:
        raise UserError("--json: expected with --dry-run (the points as JSON)")
    if args.dry_run:
        if args.json:
            return print_json(points_json(sweep))
        _list_points(sweep, console)
        return 0
    out = out_dir(args.out if args.out is not None else str(Path("pinlab-sweeps") / sweep.name))
    stderr = Console(stderr=True)
    points = partial(run_sweep, sweep, out, max_points=args.max_points)
    label = f"sweep {sweep.name}"
    try:
        outcome = run_points(args, stderr, label, len(sweep.points), out, points, "the sweep")
    except PointError as e:
        stderr.print(f"pinlab: sweep point failed: {e}", markup=False, highlight=False)
        return 1
    analysis = outcome.analysis
    if analysis is not None and outcome.rows:
        from pinlab.report.sweep import write_sweep_report

        try:
            write_sweep_report(
                out,
                sweep.name,
                sweep.source,
                records=analysis.summary,
                factors=sweep.factor_names,
                units=analysis.units,
                rows=outcome.rows,
                points=outcome.total,
                warnings=analysis.warnings,
                note=analysis.note,
            )
        except OSError as e:
            raise UserError(f"--out {out}: cannot write the report: {e.strerror or e}") from None
        for line in analysis.warnings:
            stderr.print(f"pinlab: warning: {line}", markup=False, highlight=False, soft_wrap=True)
    if not args.quiet:
        if analysis is not None and analysis.note:
            console.print(f"note: {analysis.note}", markup=False, highlight=False, soft_wrap=True)
        state = (
            "complete"
            if outcome.complete
            else f"incomplete (see {out}/INCOMPLETE); run again to finish"
        )
        console.print(
            f"{sweep.name}: {outcome.rows}/{outcome.total} points ({outcome.ran} run now, "
            f"{outcome.skipped} already done; {state}) -> {out}/results.parquet, "
            f"{out}/results.csv, {out}/summary.csv, {out}/results.html",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return 0 if outcome.complete else 1


def add_parsers(sub: Any) -> None:
    sweep = add_command(sub, "sweep", _cmd_sweep)
    sweep.add_argument(
        "file", metavar="SWEEP.toml", help="a sweep file, e.g. examples/sweeps/pin-cap.toml"
    )
    add_out_flag(sweep, "results directory (default pinlab-sweeps/<name>)")
    add_workers(
        sweep,
        dask="run on Dask distributed: 'local' starts a LocalCluster, else a scheduler address",
    )
    sweep.add_argument(
        "--max-points",
        type=int,
        metavar="N",
        help="run at most N (>= 1) unfinished points, then stop",
    )
    sweep.add_argument(
        "--dry-run",
        action="store_true",
        help="list the points and exit (only the first point is validated)",
    )
    add_json_flag(sweep, "with --dry-run: the points as JSON")
    add_quiet_flag(sweep)
