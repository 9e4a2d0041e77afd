"""``pinlab validate``: the cost model against the published tables (``validate/tables/``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from pinlab.cli.common import (
    add_command,
    add_json_flag,
    add_out_flag,
    as_user_error,
    out_dir,
    print_json,
    wide,
)


def _tables_dir(args: argparse.Namespace) -> str | Path:
    """``--dir``, else the tables shipped with pinlab."""
    from pinlab.validate import DEFAULT_DIR

    return DEFAULT_DIR if args.dir is None else args.dir


def _list_tables(args: argparse.Namespace, console: Console) -> int:
    """``pinlab validate --list``: the tables that would run, without running them."""
    from rich.table import Table

    from pinlab.validate import select_tables

    tables = select_tables(args.tables, _tables_dir(args), args.holdout)
    if args.json:
        return print_json(
            [
                {
                    "id": t.id,
                    "title": t.spec.table.title,
                    "kind": t.kind,
                    "file": t.path,
                    "holdout": t.holdout,
                    "tool": t.spec.run.tool,
                    "points": len(t.spec.points),
                    "tolerance": t.spec.compare.tolerance,
                    "url": t.spec.table.source.url,
                }
                for t in tables
            ]
        )
    table = Table(title=f"validation tables ({len(tables)})", title_justify="left")
    for column in ("id", "tool", "points", "tolerance", "title"):
        table.add_column(column, no_wrap=column == "id")
    for t in tables:
        mark = " (holdout)" if t.holdout else ""
        table.add_row(
            t.id + mark,
            t.spec.run.tool,
            str(len(t.spec.points)),
            f"{t.spec.compare.tolerance:.0%}",
            t.spec.table.title,
        )
    console.print(table)
    return 0


def _cmd_validate(args: argparse.Namespace, console: Console) -> int:
    """compare pinlab bench with published measurement tables

    Run every validation table shipped with pinlab (or those of --dir, or the TABLEs named) with
    pinlab bench, print each point's measured and simulated value and error, each table's
    geometric-mean error against its tolerance and the overall error, and write report.html into
    --out (default pinlab-validation). Exit status: 0 when every table is within its tolerance, 1
    when one is not, 2 for bad input."""
    from pinlab.validate import validate_command

    console = wide(console, 120)
    with as_user_error():
        if args.list:
            return _list_tables(args, console)
        return validate_command(
            args.tables,
            console,
            directory=_tables_dir(args),
            holdout=args.holdout,
            out=None if args.out is None else out_dir(args.out),
            as_json=args.json,
        )


def add_parsers(sub: Any) -> None:
    validate = add_command(sub, "validate", _cmd_validate)
    validate.add_argument(
        "tables", nargs="*", metavar="TABLE", help="a table id or a table file (default: all)"
    )
    validate.add_argument("--dir", metavar="DIR", help="the tables (default: pinlab's own)")
    validate.add_argument(
        "--holdout", metavar="DIR", help="also run the holdout tables in DIR, summed apart"
    )
    add_out_flag(validate, "where report.html goes (default pinlab-validation)")
    validate.add_argument(
        "--list", action="store_true", help="list the tables (id, tool, points) without running"
    )
    add_json_flag(validate)
