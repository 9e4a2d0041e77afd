"""``pinlab doctor``: diagnose a host snapshot (or this host) for dma-buf MRs."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from pinlab.cli.common import (
    UserError,
    add_command,
    add_json_flag,
    add_root_flag,
    as_user_error,
    host_root,
    print_json,
    wide,
)


def _cmd_doctor(args: argparse.Namespace, console: Console) -> int:
    """diagnose dma-buf MRs on a host snapshot (or this host): errno, path, limits, fixes

    Diagnose registering a dma-buf MR (ibv_reg_dmabuf_mr) from each accelerator through each RDMA
    NIC of a host snapshot (pinlab inspect --snapshot) or of this host: the errno it would get and
    at which step, the P2P path, the limits that apply and what would fix it. Exit status: 0 when
    healthy, 1 with findings, 2 for bad input."""
    from pinlab.inspect import inspect_host
    from pinlab.inspect.doctor import DEFAULT_SIZE, diagnose
    from pinlab.inspect.doctor_report import diagnosis_json, render_diagnosis
    from pinlab.inspect.snapshot import load_snapshot, snapshot_from_report
    from pinlab.units import UnitError, parse_size

    try:
        size = DEFAULT_SIZE if args.size is None else parse_size(args.size)
    except UnitError as e:
        raise UserError(f"--size {args.size}: {e}") from None
    if size <= 0:
        raise UserError(f"--size {args.size}: expected a size above 0, found 0")
    if args.snapshot is not None:
        with as_user_error():
            snap = load_snapshot(args.snapshot)
    else:
        snap = snapshot_from_report(inspect_host(host_root(args)))
    with as_user_error(ValueError):
        diagnosis = diagnose(snap, device=args.device, nic=args.nic, size=size, odp=args.odp)
    if args.json:
        print_json(diagnosis_json(diagnosis))
    else:
        console = wide(console, 120)
        render_diagnosis(diagnosis, console)
    return diagnosis.exit_code


def add_parsers(sub: Any) -> None:
    doctor = add_command(sub, "doctor", _cmd_doctor)
    doctor.add_argument(
        "snapshot",
        nargs="?",
        metavar="SNAPSHOT",
        help="a snapshot from pinlab inspect --snapshot (default: read this host)",
    )
    add_root_flag(doctor, "without SNAPSHOT: read the host below DIR")
    doctor.add_argument("--device", metavar="DEV", help="only this accelerator (gpu0, card1, PCI)")
    doctor.add_argument("--nic", metavar="NIC", help="only this RDMA NIC (mlx5_0, PCI address)")
    doctor.add_argument("--size", metavar="SIZE", help="registration size (default 1GiB)")
    doctor.add_argument(
        "--odp", action="store_true", help="the application registers with IBV_ACCESS_ON_DEMAND"
    )
    add_json_flag(doctor, "machine-readable diagnosis")
