"""``pinlab inspect``: read this host into a summary and a platform file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    pass


from pinlab.cli.common import UserError


def _cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    import json

    from pinlab.inspect import (
        check_platform,
        inspect_host,
        plan_host,
        platform_text,
        render_summary,
        summary_json,
        write_platform,
    )

    root = Path(args.root)
    if not root.is_dir():
        raise UserError(f"--root {args.root}: expected a directory (a host's /), found none")
    report = inspect_host(root)
    plan = plan_host(report)
    out = Path(args.out)
    host = report.system.hostname or "this host"
    try:
        write_platform(platform_text(plan, source=f"{host} (root {root})"), out)
    except OSError as e:
        raise UserError(
            f"--out {args.out}: expected a writable file in an existing directory, "
            f"found: {e.strerror or e}"
        ) from None
    check = check_platform(out, plan.spec)
    if args.json:
        print(json.dumps(summary_json(report, plan, out, check), indent=2))
        return 0
    if not console.is_terminal:  # piped or captured: full lines instead of 80 columns
        console = Console(width=max(console.width, 120))
    render_summary(report, plan, out, check, console)
    return 0


# -- pinlab run / pinlab scenarios ---------------------------------------------------------------


def add_parsers(sub: Any) -> None:
    inspect = sub.add_parser(
        "inspect",
        help="read this host (RLIMIT_MEMLOCK, CAP_IPC_LOCK, cgroups, dmem, bufinfo, PCI) "
        "and write a platform file",
    )
    inspect.add_argument(
        "--root", default="/", metavar="DIR", help="read the host below DIR (default /)"
    )
    inspect.add_argument(
        "--out",
        default="pinlab-host.toml",
        metavar="FILE",
        help="platform file to write (default pinlab-host.toml), for pinlab run --platform",
    )
    inspect.add_argument("--json", action="store_true", help="machine-readable summary")
    inspect.set_defaults(func=_cmd_inspect)
