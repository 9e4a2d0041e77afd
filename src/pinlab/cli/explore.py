"""``pinlab explore``: search sequences of userspace calls and device events for broken
invariants (:mod:`pinlab.explore`)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from rich.console import Console

from pinlab.cli.common import (
    ArgType,
    UserError,
    add_command,
    add_json_flag,
    add_out_flag,
    add_seed_flag,
    out_dir,
    wide,
)


def _names(value: str | None, known: list[str], flag: str) -> list[str]:
    """A comma-separated ``--flag`` list, each name checked against ``known`` (all of them
    when the flag is absent)."""
    if value is None:
        return list(known)
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise UserError(f"explore: {flag}: expected a comma-separated list, found {value!r}")
    for name in names:
        if name not in known:
            raise UserError(f"explore: {flag}: expected one of {', '.join(known)}, found {name!r}")
    return names


def _cmd_explore(args: argparse.Namespace, console: Console) -> int:
    """search sequences of calls and device events for leaks, WARNs, stale DMA

    A bounded breadth-first search over sequences of userspace calls (pinlab.uapi) and device events
    (eviction under allocation pressure, revoke, process kill, NIC reset, hot-unplug) on every
    exporter x importer x kernel profile x policy selected, with partial-order reduction and state
    hashing. Each sequence is checked after every step and after every process exited: no leak,
    balanced pins, no WARN, no stale or unfenced DMA, no quota exceeded, no count below zero.
    Findings are shrunk, deduplicated, traced and classified (docs/findings.md). Exit status: 1 when
    a finding is a model defect or not yet reviewed, 0 otherwise, 2 for bad input."""
    from pinlab.explore import POLICIES, explore, exporter_kinds, importer_kinds, targets
    from pinlab.explore.render import page_context, print_text, to_json, write_out
    from pinlab.kernel.profile import PRESETS

    exporters = _names(args.exporters, list(exporter_kinds()), "--exporters")
    importers = _names(args.importers, list(importer_kinds()), "--importers")
    profiles = _names(args.profiles, list(PRESETS), "--profiles")
    policies = _names(args.policies, list(POLICIES), "--policies")
    ok, skipped = targets(exporters, importers, profiles, policies)
    if not ok:
        raise UserError("explore: no combination of the selection exists (see --help)")
    out = out_dir(args.out) if args.out is not None else None
    report = explore(
        ok,
        depth=args.depth,
        budget=args.budget,
        seed=args.seed,
        max_sequences=args.max_sequences,
        skipped=skipped,
    )
    if args.json:
        console.file.write(to_json(report))
    else:
        console = wide(console)
        print_text(report, console)
    if out is not None:
        from pinlab.fsutil import write_atomic
        from pinlab.report.html import render_page

        context = page_context(report)
        page = render_page(
            "findings.html.j2",
            packages=("pinlab.explore",),
            title=f"pinlab explore: {len(context['findings'])} finding(s)",
            expected_images=0,
            **context,
        )
        try:
            paths = [write_atomic(out / "index.html", page), *write_out(report, out)]
        except OSError as e:
            raise UserError(f"--out {out}: cannot write the findings: {e.strerror or e}") from None
        if not args.json:
            console.print(f"wrote {paths[0]} and {len(paths) - 1} more file(s)", highlight=False)
    return 1 if any(f.blocking for f in report.findings) else 0


_positive_int = ArgType(int, "a positive integer", lambda n: n >= 1)
_seconds = ArgType(float, "seconds", lambda s: 0 < s < math.inf, "a positive number of seconds")


def add_parsers(sub: Any) -> None:
    p = add_command(sub, "explore", _cmd_explore)
    p.add_argument(
        "--exporters",
        metavar="LIST",
        help="exporters: every exporter driver, and <rdma driver>-dm for an RDMA driver's "
        "device memory (UVERBS_OBJECT_DMABUF) (default: all)",
    )
    p.add_argument(
        "--importers",
        metavar="LIST",
        help="importers: efa, efa-revocable, mlx5-odp, mlx5-pinned, mlx5-broken, gpu-import, "
        "display, iommufd (default: all)",
    )
    p.add_argument("--profiles", metavar="LIST", help="kernel profiles (default: all)")
    p.add_argument(
        "--policies",
        metavar="LIST",
        help="none, dmem-max, memlock-dmabuf-pins, device-pin-cap, revocable-pins, "
        "dmem-pin-max (default: all)",
    )
    p.add_argument(
        "--depth", type=_positive_int, default=6, metavar="N", help="steps per sequence (6)"
    )
    p.add_argument(
        "--budget",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="stop after this long (60); the order explored does not depend on it",
    )
    p.add_argument(
        "--max-sequences",
        type=_positive_int,
        metavar="N",
        help="also stop after N sequences (a budget that does not depend on the machine)",
    )
    add_seed_flag(p, "0: canonical order; else shuffled", default=0)
    add_json_flag(p)
    add_out_flag(p, "write index.html, findings.json, reproducers")
