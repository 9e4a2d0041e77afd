"""``pinlab policy show`` / ``check``: administrator policy files."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from pinlab.cli.common import add_command, add_json_flag, as_user_error, print_json, wide


def _cmd_policy_show(args: argparse.Namespace, console: Console) -> int:
    """the cgroup tree with its dmem limits, the users and the proposals on

    Render a policy file: its cgroup tree (systemd-cgls style) with each cgroup's
    dmem.min/low/max/pin.max, the users with their limits and capabilities, and the proposals on."""
    from pinlab.policy.config import load_policy, preview_policy
    from pinlab.policy.render import render_policy

    with as_user_error():
        config = load_policy(args.file)
        applied = preview_policy(config, args.file)
    if args.json:
        document = config.model_dump(mode="json", by_alias=True)
        return print_json(
            {"file": str(args.file), **document, "enabled": list(config.proposals.enabled())}
        )
    console = wide(console, 140)
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
    """validate a policy file

    Validate a policy file as `pinlab run --policy` would apply it and print one line: ok with its
    counts, or the first problem (exit 2)."""
    from pinlab.policy.config import load_policy, preview_policy

    with as_user_error():
        config = load_policy(args.file)
        preview_policy(config, args.file)
    on = ", ".join(config.proposals.enabled()) or "none"
    print(
        f"{args.file}: ok -- {len(config.cgroup_paths())} cgroups, {len(config.users)} users, "
        f"proposals: {on}"
    )
    return 0


def add_parsers(sub: Any) -> None:
    def _policy_help(args: argparse.Namespace, console: Console) -> int:
        """administrator policy files (cgroups, rlimits)

        An administrator's policy file: the cgroup tree with its dmem limits, the users'
        RLIMIT_MEMLOCK and capabilities, and the pin proposals switched on (examples/policy/).
        `policy show FILE` renders it, `policy check FILE` validates it."""
        policy.print_help()
        return 0

    policy = add_command(sub, "policy", _policy_help)
    policy_sub = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    show = add_command(policy_sub, "show", _cmd_policy_show)
    show.add_argument("file", help="a policy file (TOML), e.g. examples/policy/desktop.toml")
    add_json_flag(show, "machine-readable output (the file's document)")
    check = add_command(policy_sub, "check", _cmd_policy_check)
    check.add_argument("file", help="a policy file (TOML)")
