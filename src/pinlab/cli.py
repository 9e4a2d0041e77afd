"""The ``pinlab`` command line.

Subcommands:

* ``pinlab demo [--profile P]`` -- the dma-buf pin/move walkthrough;
* ``pinlab profiles`` -- the kernel profiles and the switches where they differ;
* ``pinlab bufinfo FILE`` -- parse a real (or pinlab-written) debugfs ``dma_buf/bufinfo``;
* ``pinlab matrix [--profile P] [--move-notify] [--json]`` -- every exporter × importer pair:
  where import + pin + map puts the memory, whether the path is P2P, which K- items decide;
* ``pinlab policy show FILE`` / ``pinlab policy check FILE`` -- an administrator policy file
  (cgroup tree with dmem limits, users' RLIMIT_MEMLOCK, proposals on): rendered / validated.

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


def _cmd_policy_show(args: argparse.Namespace, console: Console) -> int:
    from pinlab.policy.config import PolicyError, load_policy, preview_policy
    from pinlab.policy.render import render_policy

    try:
        config = load_policy(args.file)
        applied = preview_policy(config, args.file)
    except PolicyError as e:
        raise UserError(str(e)) from None
    if not console.is_terminal:  # piped or captured: full rows instead of 80 columns
        console = Console(width=max(console.width, 140))
    if config.description:
        console.print(f"[bold]{args.file}[/bold]: {config.description}", highlight=False)
    notes = {
        "/" + "/".join(p for p in key.split("/") if p): spec.description
        for key, spec in config.cgroups.items()
        if spec.description
    }
    console.print(
        render_policy(
            applied.tree,
            applied.dmem,
            config.proposals.enabled(),
            usage=False,
            users=config.users,
            title=f"cgroup tree of {args.file}",
            notes=notes,
        )
    )
    return 0


def _cmd_policy_check(args: argparse.Namespace, console: Console) -> int:
    from pinlab.policy.config import PolicyError, load_policy, preview_policy

    try:
        config = load_policy(args.file)
        preview_policy(config, args.file)
    except PolicyError as e:
        raise UserError(str(e)) from None
    on = ", ".join(config.proposals.enabled()) or "none"
    print(
        f"{args.file}: ok -- {len(config.cgroup_paths())} cgroups, {len(config.users)} users, "
        f"proposals: {on}"
    )
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

    policy = sub.add_parser("policy", help="administrator policy files (cgroups, rlimits)")
    policy_sub = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    show = policy_sub.add_parser(
        "show", help="the cgroup tree with its dmem limits, the users and the proposals on"
    )
    show.add_argument("file", help="a policy file (TOML), e.g. examples/policy/desktop.toml")
    show.set_defaults(func=_cmd_policy_show)
    check = policy_sub.add_parser("check", help="validate a policy file")
    check.add_argument("file", help="a policy file (TOML)")
    check.set_defaults(func=_cmd_policy_check)

    def _policy_help(args: argparse.Namespace, console: Console) -> int:
        policy.print_help()
        return 0

    policy.set_defaults(func=_policy_help)
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
        # soft_wrap: the one-line error stays one line on narrow or non-terminal stderr
        Console(stderr=True, soft_wrap=True).print(
            f"pinlab: error: {e}", markup=False, highlight=False
        )
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
