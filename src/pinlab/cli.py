"""The ``pinlab`` command line.

Subcommands:

* ``pinlab demo [--profile P]`` -- the dma-buf pin/move walkthrough;
* ``pinlab profiles`` -- the kernel profiles and the switches where they differ;
* ``pinlab bufinfo FILE`` -- parse a real (or pinlab-written) debugfs ``dma_buf/bufinfo``.

User errors (a missing file, a malformed dump, an unknown profile) print one line naming what
was expected and what was found, and exit with status 2 -- never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from pinlab import __version__
from pinlab.kernel.profile import DEFAULT_PROFILE, PRESETS


class UserError(Exception):
    """A mistake in the user's input: reported in one line, exit status 2."""


def _cmd_demo(args: argparse.Namespace, console: Console) -> int:
    from pinlab.demo import walkthrough

    return walkthrough(args.profile, not args.no_move_notify, Console(soft_wrap=True))


def _cmd_profiles(args: argparse.Namespace, console: Console) -> int:
    table = Table(title="kernel profiles (default " + DEFAULT_PROFILE + ")", title_justify="left")
    table.add_column("switch")
    for name in PRESETS:
        table.add_column(name)
    fields = [f.name for f in dataclasses.fields(next(iter(PRESETS.values())))]
    for field in fields:
        if field in ("name",):
            continue
        values = []
        for profile in PRESETS.values():
            value = getattr(profile, field)
            values.append(getattr(value, "value", value))
        table.add_row(field, *(str(v) for v in values))
    console.print(table)
    return 0


def _cmd_bufinfo(args: argparse.Namespace, console: Console) -> int:
    from pinlab.kernel.bufinfo import BufinfoParseError, parse_bufinfo_file

    try:
        dump = parse_bufinfo_file(args.file)
    except FileNotFoundError:
        raise UserError(f"{args.file}: no such file (expected a dma_buf/bufinfo dump)") from None
    except (BufinfoParseError, OSError, UnicodeDecodeError) as e:
        raise UserError(str(e)) from None
    table = Table(title=f"{args.file}: {len(dump.objects)} dma-buf objects", title_justify="left")
    for col in ("ino", "exporter", "name", "size", "count", "fences", "attached devices"):
        table.add_column(col)
    for rec in dump.objects:
        table.add_row(
            str(rec.ino),
            rec.exp_name,
            rec.name or "<none>",
            str(rec.size),
            str(rec.count),
            str(len(rec.fences)),
            ", ".join(rec.attached_devices) or "-",
        )
    console.print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinlab",
        description="Who may pin dma-buf device memory, where, how much, and at what cost.",
    )
    parser.add_argument("--version", action="version", version=f"pinlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="walk through export, attach, pin, eviction and bufinfo")
    demo.add_argument("--profile", default=DEFAULT_PROFILE, choices=list(PRESETS))
    demo.add_argument(
        "--no-move-notify",
        action="store_true",
        help="leave CONFIG_DMABUF_MOVE_NOTIFY at its default (n)",
    )
    demo.set_defaults(func=_cmd_demo)

    profiles = sub.add_parser("profiles", help="list kernel profiles and their switches")
    profiles.set_defaults(func=_cmd_profiles)

    bufinfo = sub.add_parser("bufinfo", help="parse a debugfs dma_buf/bufinfo dump")
    bufinfo.add_argument("file", help="path to a bufinfo dump")
    bufinfo.set_defaults(func=_cmd_bufinfo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    console = Console()
    try:
        result: int = args.func(args, console)
    except UserError as e:
        Console(stderr=True).print(f"pinlab: error: {e}", markup=False, highlight=False)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
