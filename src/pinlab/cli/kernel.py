"""``pinlab demo``, ``profiles``, ``bufinfo`` and ``matrix``: the kernel model, shown."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rich.console import Console

from pinlab.cli.common import (
    UserError,
    add_command,
    add_json_flag,
    add_listing,
    as_user_error,
    check_profile,
    print_json,
    print_table,
    wide,
)
from pinlab.errors import ConfigError
from pinlab.kernel.profile import DEFAULT_PROFILE, NEXT_SOURCES, PRESETS, KernelProfile


def _cmd_demo(args: argparse.Namespace, console: Console) -> int:
    """walk through export, attach, pin, eviction and bufinfo

    A narrated walkthrough on one modelled machine: an amdgpu buffer exported, imported dynamically
    and pinned by an RDMA NIC, evicted with move_notify, the refused move of a pinned buffer,
    debugfs bufinfo, and a clean teardown."""
    from pinlab.demo import walkthrough

    return walkthrough(args.profile, not args.no_move_notify, Console(soft_wrap=True))


def _switches(profile: KernelProfile) -> dict[str, Any]:
    """A profile's switches by field name, enums as their values."""
    return {
        f.name: getattr(getattr(profile, f.name), "value", getattr(profile, f.name))
        for f in dataclasses.fields(profile)
        if f.name != "name"
    }


def profiles_json() -> dict[str, Any]:
    """``pinlab profiles --json``: the default, and per profile its switches and, for one that
    is not a release, where each switch that differs comes from."""
    return {
        "default": DEFAULT_PROFILE,
        "profiles": [
            {
                "name": name,
                "released": profile.released,
                "switches": _switches(profile),
                "sources": {} if profile.released else dict(NEXT_SOURCES),
            }
            for name, profile in PRESETS.items()
        ],
    }


def _cmd_profiles(args: argparse.Namespace, console: Console) -> int:
    """list kernel profiles and their switches

    The kernel profiles (--profile of run, demo, matrix) and every switch where their behaviour
    differs; for a profile that is not a release, where each switch comes from."""
    if args.json:
        return print_json(profiles_json())
    console = wide(console)
    switches = [_switches(profile) for profile in PRESETS.values()]
    print_table(
        console,
        "kernel profiles (default " + DEFAULT_PROFILE + ")",
        (
            "switch",
            *(
                name if preset.released else f"{name} (not a release)"
                for name, preset in PRESETS.items()
            ),
        ),
        ((field, *(str(s[field]) for s in switches)) for field in switches[0]),
        no_wrap=0,
    )
    for profile in PRESETS.values():
        if profile.released:
            continue
        console.print(
            f"  {profile.name}: NOT A RELEASE -- 7.1 plus work queued after it and an open "
            "RFC; what differs from 7.1:",
            markup=False,
            highlight=False,
        )
        for field, source in NEXT_SOURCES.items():
            console.print(f"    {field}: {source}", markup=False, highlight=False)
    return 0


def _cmd_bufinfo(args: argparse.Namespace, console: Console) -> int:
    """parse a debugfs dma_buf/bufinfo dump

    Parse a /sys/kernel/debug/dma_buf/bufinfo dump (a real one, or one pinlab wrote) and list its
    dma-buf objects: inode, exporter, name, size, count, fences and attached devices."""
    from pinlab.kernel.bufinfo import BufinfoParseError, parse_bufinfo_file

    try:
        dump = parse_bufinfo_file(args.file)
    except (BufinfoParseError, ConfigError) as e:
        raise UserError(str(e)) from None
    if args.json:
        return print_json(
            {
                "file": str(args.file),
                "total_objects": dump.total_objects,
                "total_bytes": dump.total_bytes,
                "objects": [
                    {
                        "ino": rec.ino,
                        "exporter": rec.exp_name,
                        "name": rec.name,
                        "size": rec.size,
                        "flags": rec.flags,
                        "mode": rec.mode,
                        "count": rec.count,
                        "fences": [
                            {
                                "usage": f.usage,
                                "driver": f.driver,
                                "timeline": f.timeline,
                                "seqno": f.seqno,
                                "signalled": f.signalled,
                            }
                            for f in rec.fences
                        ],
                        "attached_devices": list(rec.attached_devices),
                    }
                    for rec in dump.objects
                ],
            }
        )
    print_table(
        console,
        f"{args.file}: {len(dump.objects)} dma-buf objects",
        ("ino", "exporter", "name", "size", "count", "fences", "attached devices"),
        (
            (
                str(rec.ino),
                rec.exp_name,
                rec.name or "<none>",
                str(rec.size),
                str(rec.count),
                str(len(rec.fences)),
                ", ".join(rec.attached_devices) or "-",
            )
            for rec in dump.objects
        ),
        no_wrap=0,
    )
    return 0


def _cmd_matrix(args: argparse.Namespace, console: Console) -> int:
    """every exporter x importer: where the memory ends up, P2P, K- items

    Every exporter x importer pair imported, pinned and mapped through the uapi under a kernel
    profile: where the memory ends up (in place, migrated, refused with which errno at which step),
    whether the path is P2P, and the K- items that decide it. Without
    --move-notify/--no-move-notify: both settings where they differ."""
    from pinlab.policy.proposals import PROPOSALS
    from pinlab.report.matrix import (
        build_matrix,
        build_matrix_pair,
        matrix_profile,
        render_matrix,
    )

    check_profile("--profile", args.profile)
    proposals = tuple(args.proposal or ())
    for name in proposals:
        if name not in PROPOSALS:
            raise UserError(f"--proposal: expected one of {', '.join(PROPOSALS)}, found {name!r}")
    with as_user_error(ValueError):
        profile = matrix_profile(args.profile, bool(args.move_notify))
    alt = None
    with as_user_error(ValueError):
        if args.move_notify is None:  # neither flag: both settings where the option exists
            matrix, alt = build_matrix_pair(args.profile, proposals)
        else:
            matrix = build_matrix(profile, proposals)
    if args.json:
        data = matrix.to_json()
        if alt is not None:
            data["with_move_notify"] = alt.to_json()
        return print_json(data)
    console = wide(console)
    render_matrix(matrix, console, alt)
    return 0


def add_parsers(sub: Any) -> None:
    demo = add_command(sub, "demo", _cmd_demo)
    demo.add_argument("--profile", default=DEFAULT_PROFILE, choices=list(PRESETS))
    demo.add_argument(
        "--no-move-notify",
        action="store_true",
        help="leave CONFIG_DMABUF_MOVE_NOTIFY at its default (n)",
    )

    add_listing(sub, "profiles", _cmd_profiles)

    bufinfo = add_listing(sub, "bufinfo", _cmd_bufinfo)
    bufinfo.add_argument("file", help="path to a bufinfo dump")

    matrix = add_command(sub, "matrix", _cmd_matrix)
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
    matrix.add_argument(
        "--proposal",
        action="append",
        metavar="ID",
        help="switch an opt-in pin policy on with its defaults (repeatable): "
        "memlock-dmabuf-pins, device-pin-cap, revocable-pins, dmem-pin-max, "
        "pin-vram-percent, dmem-pinning, dmem-peak",
    )
    add_json_flag(matrix)
