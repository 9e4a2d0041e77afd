"""``pinlab demo``, ``profiles``, ``bufinfo`` and ``matrix``: the kernel model, shown."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from pinlab.kernel.profile import DEFAULT_PROFILE, PRESETS

if TYPE_CHECKING:
    pass


from pinlab.cli.common import UserError


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


def _cmd_matrix(args: argparse.Namespace, console: Console) -> int:
    import json

    from pinlab.report.matrix import (
        build_matrix,
        build_matrix_pair,
        matrix_profile,
        render_matrix,
    )

    try:
        profile = matrix_profile(args.profile, bool(args.move_notify))
    except ValueError as e:
        raise UserError(str(e)) from None
    alt = None
    if args.move_notify is None:  # neither flag: both settings where the option exists
        matrix, alt = build_matrix_pair(args.profile)
    else:
        matrix = build_matrix(profile)
    if args.json:
        data = matrix.to_json()
        if alt is not None:
            data["with_move_notify"] = alt.to_json()
        print(json.dumps(data, indent=2))
        return 0
    if not console.is_terminal:  # piped or captured: full rows instead of 80-column wrapping
        console = Console(width=max(console.width, 160))
    render_matrix(matrix, console, alt)
    return 0


def add_parsers(sub: Any) -> None:
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

    matrix = sub.add_parser(
        "matrix", help="every exporter x importer: where the memory ends up, P2P, K- items"
    )
    matrix.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help=f"kernel profile: {', '.join(PRESETS)} (default {DEFAULT_PROFILE})",
    )
    mn = matrix.add_mutually_exclusive_group()
    mn.add_argument(
        "--move-notify",
        dest="move_notify",
        action="store_const",
        const=True,
        default=None,
        help="only CONFIG_DMABUF_MOVE_NOTIFY=y (always on in 7.1)",
    )
    mn.add_argument(
        "--no-move-notify",
        dest="move_notify",
        action="store_const",
        const=False,
        help="only the Kconfig default, CONFIG_DMABUF_MOVE_NOTIFY=n",
    )
    matrix.add_argument("--json", action="store_true", help="machine-readable output")
    matrix.set_defaults(func=_cmd_matrix)
