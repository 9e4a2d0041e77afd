"""``pinlab inspect``: read this host (or pasted command output) into a summary, a platform
file, a snapshot and a policy file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from pinlab.cli.common import (
    UserError,
    add_command,
    add_json_flag,
    add_out_flag,
    add_root_flag,
    as_user_error,
    host_root,
    out_file,
    wide,
)
from pinlab.errors import ConfigError


def _write(what: str, path: str, write: Any) -> None:
    try:
        write()
    except OSError as e:
        raise UserError(f"{what} {path}: cannot write the file: {e.strerror or e}") from None


def _outputs(args: argparse.Namespace) -> Path:
    """The platform file ``--out``; with ``--snapshot`` and ``--policy`` each checked before
    anything is read or written, and no two of them the same file (one would overwrite the
    other)."""
    given = [("--out", args.out), ("--snapshot", args.snapshot), ("--policy", args.policy)]
    seen: dict[Path, str] = {}
    for flag, text in given:
        if text is None:
            continue
        path = out_file(text, flag).resolve()
        if path in seen:
            raise UserError(
                f"{flag} {text}: expected a file other than {seen[path]}'s, found the same"
            )
        seen[path] = flag
    return Path(args.out)


def _pastes(items: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(the text of each kind, the file it was read from)."""
    from pinlab.inspect.paste import PASTE_KINDS
    from pinlab.tomlfile import read_user_file

    out: dict[str, str] = {}
    files: dict[str, str] = {}
    for item in items:
        kind, sep, path = item.partition("=")
        if not sep or kind not in PASTE_KINDS:
            raise UserError(
                f"--paste {item}: expected KIND=FILE with KIND one of {', '.join(PASTE_KINDS)}"
            )
        if kind in files:  # the second would replace the first unseen
            raise UserError(
                f"--paste {item}: expected each kind once, found {kind} also as "
                f"--paste {kind}={files[kind]}"
            )
        what = f"the output of {PASTE_KINDS[kind]}"
        try:
            raw = read_user_file(path, what=what, source=f"--paste {kind}={path}")
        except ConfigError as e:
            raise UserError(str(e)) from None
        out[kind] = raw.decode("utf-8", errors="replace")
        files[kind] = path
    return out, files


def _cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    """read this host (RLIMIT_MEMLOCK, CAP_IPC_LOCK, cgroups, dmem, bufinfo, PCI, kernel config,
    modules) and write a platform file, a snapshot and a policy file

    Read this host (or the tree below --root, or pasted command output) -- RLIMIT_MEMLOCK,
    CAP_IPC_LOCK, the cgroup v2 mount and dmem files, debugfs bufinfo, the PCI tree, kernel config
    and modules -- print what was found and write a platform file for pinlab run --platform; a
    missing or unreadable source is reported, never fatal."""
    import json

    from pinlab.inspect import (
        check_platform,
        inspect_host,
        plan_host,
        platform_text,
        render_summary,
        summary_json,
        use_it,
        write_platform,
    )
    from pinlab.inspect.hostpolicy import host_policy_text
    from pinlab.inspect.paste import snapshot_from_pastes
    from pinlab.inspect.snapshot import snapshot_from_report, write_snapshot

    out = _outputs(args)
    if args.paste and args.root is not None:
        raise UserError(
            f"--root {args.root}: expected --root or --paste (pasted output stands instead of "
            "reading a host), found both"
        )
    if args.root is None:
        args.root = "/"
    if args.paste:
        with as_user_error():
            texts, files = _pastes(args.paste)
            snap = snapshot_from_pastes(texts, files=files)
        plan = snap.plan()
        report = None
        source = snap.source
    else:
        root = host_root(args)
        report = inspect_host(root)
        plan = plan_host(report)
        snap = snapshot_from_report(report)
        source = f"{report.system.hostname or 'this host'} (root {root})"
    _write("--out", args.out, lambda: write_platform(platform_text(plan, source=source), out))
    if args.snapshot is not None:
        _write("--snapshot", args.snapshot, lambda: write_snapshot(snap, args.snapshot))
    if args.policy is not None:
        text = host_policy_text(snap)
        _write("--policy", args.policy, lambda: write_platform(text, args.policy))
    check = check_platform(out, plan.spec)
    if report is None:
        spec = plan.spec
        print(
            f"{source}: platform {out} ({len(spec.devices)} devices, {len(spec.nics)} RDMA NICs, "
            f"{len(spec.switches)} switches): {check.message}"
        )
        for note in [*snap.notes, *plan.notes]:
            print(f"  note: {note}")
        print(f"  use it: {use_it(out)}")
        return 0
    if args.json:
        print(json.dumps(summary_json(report, plan, out, check), indent=2))
        return 0
    console = wide(console, 120)
    render_summary(report, plan, out, check, console)
    return 0


def add_parsers(sub: Any) -> None:
    inspect = add_command(sub, "inspect", _cmd_inspect)
    add_root_flag(inspect)
    inspect.set_defaults(root=None)  # given or not: --paste refuses it
    add_out_flag(
        inspect,
        "platform file to write (default pinlab-host.toml), for pinlab run --platform",
        default="pinlab-host.toml",
        metavar="FILE",
    )
    inspect.add_argument(
        "--snapshot", metavar="FILE", help="also write the host snapshot, for pinlab doctor"
    )
    inspect.add_argument(
        "--policy",
        metavar="FILE",
        help="also write the host's limits as a policy file, for pinlab run --policy",
    )
    inspect.add_argument(
        "--paste",
        action="append",
        default=[],
        metavar="KIND=FILE",
        help="build from pasted output instead of reading a host (lspci-tv, lspci-vvv, "
        "nvidia-smi-topo, ulimit-l, uname-r, lsmod, config, kallsyms, cpuinfo); repeatable",
    )
    add_json_flag(inspect, "machine-readable summary")
