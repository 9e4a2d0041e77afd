"""``pinlab validate``: the cost model against published measurement tables (``validation/``)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from pinlab.cli.common import UserError


def _cmd_validate(args: argparse.Namespace, console: Console) -> int:
    """:func:`pinlab.validate.validate_command`, its bad input as the one-line user error."""
    from pinlab.errors import ConfigError
    from pinlab.validate import validate_command

    if not console.is_terminal:  # piped or captured: full rows instead of 80 columns
        console = Console(width=max(console.width, 120))
    try:
        return validate_command(
            args.tables,
            console,
            directory=args.dir,
            holdout=args.holdout,
            out=args.out,
            as_json=args.json,
        )
    except ConfigError as e:
        raise UserError(str(e)) from None


def add_parsers(sub: Any) -> None:
    validate = sub.add_parser(
        "validate",
        help="compare pinlab bench with published measurement tables (validation/)",
        description=(
            "Run every validation table (or the TABLEs named) with pinlab bench, print each "
            "point's measured and simulated value and error, each table's geometric-mean "
            "error against its tolerance and the overall error, and write DIR/report.html. "
            "Exit status: 0 when every table is within its tolerance, 1 when one is not, "
            "2 for bad input."
        ),
    )
    validate.add_argument(
        "tables", nargs="*", metavar="TABLE", help="a table id or a table file (default: all)"
    )
    validate.add_argument(
        "--dir", default="validation", metavar="DIR", help="the tables (default validation)"
    )
    validate.add_argument(
        "--holdout", metavar="DIR", help="also run the holdout tables in DIR, summed apart"
    )
    validate.add_argument(
        "--out", metavar="DIR", help="where report.html goes (default: the --dir directory)"
    )
    validate.add_argument("--json", action="store_true", help="machine-readable output")
    validate.set_defaults(func=_cmd_validate)
