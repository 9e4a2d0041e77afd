"""``pinlab bench registration reg_mr``: the time of one memory registration against the device
memory the process registered before (``validate/tables/`` F1, Mooncake's serial EFA registrations).

    reg_mr [--mem cuda|host] [--size SIZE] [--registered LIST] [--device N] [--nic NAME]

``--size`` is the timed buffer (default 2 MiB); ``--registered`` a comma-separated list of
device-memory amounts already registered on the NIC's domain by the same process (default
``0``); one row per value, each in a fresh process (:mod:`pinlab.sim.workloads.reg_mr`).
Sizes take ``B``, ``KB``/``MB``/``GB`` (powers of 1000) or ``KiB``/``MiB``/``GiB`` (powers of
1024) and may be decimal (``9.17GiB``; rounded up to a whole byte). Columns: ``#bytes``,
``registered[GiB]``, ``t_reg[ms]``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pinlab import __version__
from pinlab.bench import BenchSetup, BenchTable, Cell, register_tool
from pinlab.bench._gpu import ToolParser, gpu_spec, run_one, simulation, single_node
from pinlab.errors import ConfigError
from pinlab.sim.workloads.reg_mr import RegMrParams, RegMrResult
from pinlab.units import GiB

__all__ = ["TOOL", "parse_amount"]

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
}
_AMOUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_amount(text: str) -> int | None:
    """Bytes in ``text`` (``2.79MB``, ``9.17GiB``, ``4096``), rounded up; None if malformed."""
    m = _AMOUNT.match(text)
    if m is None or m.group(2).upper() not in _UNITS:
        return None
    return math.ceil(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _parser() -> ToolParser:
    p = ToolParser("reg_mr")
    p.add_argument("--mem", default="cuda", choices=("cuda", "host"))
    p.add_argument("--size", default="2MiB")
    p.add_argument("--registered", default="0")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--nic", default=None)
    return p


def _run(argv: Sequence[str], setup: BenchSetup) -> BenchTable:
    argv = list(argv)
    if not argv or argv[0] != "reg_mr":
        found = repr(argv[0]) if argv else "no test"
        raise ConfigError(
            "registration",
            "test",
            f"expected reg_mr (pinlab bench registration reg_mr [--size ...]), found {found}",
        )
    parser = _parser()
    args = parser.parse_args(argv[1:])
    size = parse_amount(args.size)
    if size is None or size <= 0:
        parser.fail("--size", "a positive size such as 2MiB or 2.79MB", args.size)
    before: list[int] = []
    for item in args.registered.split(","):
        amount = parse_amount(item)
        if amount is None:
            parser.fail("--registered", "sizes such as 0GiB,9.17GiB", args.registered)
        before.append(amount)
    single_node(parser, setup, "a registration runs on one node")
    rows: list[tuple[Cell, ...]] = []
    out = [f" {'#bytes':<12} {'registered[GiB]':<16} {'t_reg[ms]':<10}"]
    spec_name = ""
    for amount in before:
        sim = simulation(setup)
        spec = gpu_spec(parser.tool, sim, str(setup.platform))
        spec_name = spec.name
        if not 0 <= args.device < len(spec.devices):
            parser.fail("--device", f"a GPU id below {len(spec.devices)}", args.device)
        params = RegMrParams(
            device=spec.devices[args.device].name,
            nic=args.nic,
            mem=args.mem,
            size=size,
            registered=amount,
        )
        r = run_one(sim, params, RegMrResult)
        assert r.t_reg is not None
        gib = round(amount / GiB, 2)
        ms = round(r.t_reg * 1e3, 3)
        rows.append((size, gib, ms))
        out.append(f" {size:<12d} {gib:<16.2f} {ms:<10.3f}")
    out.append("")
    meta = {"platform": spec_name, "seed": setup.seed, "pinlab": __version__}
    columns = ("#bytes", "registered[GiB]", "t_reg[ms]")
    return BenchTable(TOOL.name, "reg_mr", columns, tuple(rows), "\n".join(out), meta)


TOOL = register_tool(
    "registration",
    "reg_mr: one memory registration's time after device memory registered before",
    _run,
)
