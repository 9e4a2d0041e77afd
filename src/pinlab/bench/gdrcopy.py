"""``pinlab bench gdrcopy copylat``: gdrcopy's ``copylat`` on a modelled machine.

Flags as ``tests/copylat.cpp`` parses them: ``-s <size>`` (bytes, 16 MiB; rounded up to the
64 KiB GPU page), ``-d <gpu>``, ``-w <iters>`` (10000), ``-r <iters>`` (100), ``-c`` (also
``cuMemcpy``), ``-a cuMemAlloc|cuMemCreate``, ``-M default|wc`` (other mapping types are not
modelled), ``-h``. pinlab's own: ``--legacy`` (the pre-2.6 output: one ``Avg.Time(us)``
column) and ``--readback`` (the January 2020 copylat, whose write loop read 4 bytes back).

Output as copylat prints it: the GPU list, the buffer and mapping lines, then per test a
``Test / Size(B) / Median Time(us) / Min. Time(us)`` table (``%8zu \\t %11.4f \\t %11.4f``).
The table's columns: ``Test``, ``Size(B)``, ``Median Time(us)``, ``Min. Time(us)`` and
``Avg.Time(us)`` -- the mean over all iterations, which copylat printed before 2.6 (with
``--legacy``, only that one).
"""

from __future__ import annotations

from collections.abc import Sequence

from pinlab import __version__
from pinlab.bench import BenchSetup, BenchTable, Cell, register_tool
from pinlab.bench._gpu import (
    ToolParser,
    bus_id,
    gpu_spec,
    run_one,
    simulation,
    single_node,
)
from pinlab.errors import ConfigError
from pinlab.sim.workloads.gdrcopy import GdrcopyParams, GdrcopyResult

__all__ = ["TOOL"]

_GPU_PAGE = 1 << 16
_WARNING = (
    "WARNING: Measuring the API invocation overhead as observed by the CPU. Data might not be "
    "ordered all the way to the GPU internal visibility."
)


def _parser() -> ToolParser:
    p = ToolParser("copylat")
    p.add_argument("-s", type=lambda v: int(v, 0), default=1 << 24, dest="size")
    p.add_argument("-d", type=int, default=0, dest="gpu")
    p.add_argument("-w", type=int, default=10000, dest="write_iters")
    p.add_argument("-r", type=int, default=100, dest="read_iters")
    p.add_argument("-c", action="store_true", dest="cumemcpy")
    p.add_argument("-a", default="cuMemAlloc", dest="alloc", choices=("cuMemAlloc", "cuMemCreate"))
    p.add_argument("-M", default="default", dest="mapping", choices=("default", "wc"))
    p.add_argument("-C", action="store_true", dest="cold")
    p.add_argument("-h", action="store_true", dest="help")
    p.add_argument("--legacy", action="store_true")
    p.add_argument("--readback", action="store_true")
    return p


def _run(argv: Sequence[str], setup: BenchSetup) -> BenchTable:
    argv = list(argv)
    if not argv or argv[0] not in ("copylat", "gdrcopy_copylat"):
        found = repr(argv[0]) if argv else "no test"
        raise ConfigError(
            "gdrcopy",
            "test",
            f"expected copylat, the one modelled (pinlab bench gdrcopy copylat [-s ...]), "
            f"found {found}",
        )
    parser = _parser()
    args = parser.parse_args(argv[1:])
    if args.size <= 0:
        parser.fail("-s", "a positive buffer size in bytes", args.size)
    for flag, value in (("-w", args.write_iters), ("-r", args.read_iters)):
        if value <= 0:
            parser.fail(flag, "a positive number of iterations", value)
    if args.cold:
        parser.fail("-C", "no cold cache (it needs a caching mapping, not modelled)", True)
    single_node(parser, setup, "copylat runs on one GPU")
    sim = simulation(setup)
    spec = gpu_spec(parser.tool, sim, str(setup.platform))
    if not 0 <= args.gpu < len(spec.devices):
        parser.fail("-d", f"a GPU id below {len(spec.devices)}", args.gpu)
    size = -(-args.size // _GPU_PAGE) * _GPU_PAGE
    params = GdrcopyParams(
        device=spec.devices[args.gpu].name,
        size=size,
        write_iters=args.write_iters,
        read_iters=args.read_iters,
        legacy=args.legacy,
        readback=args.readback,
        cumemcpy=args.cumemcpy,
    )
    r = run_one(sim, params, GdrcopyResult)
    machine = sim.node().machine
    out = []
    for i, d in enumerate(spec.devices):
        domain, bus, slot = bus_id(machine, d.name)
        out.append(
            f"GPU id:{i}; name: {d.model or d.name}; Bus id: {domain:04x}:{bus:02x}:{slot:02x}"
        )
    base = 0x7F0000000000 + args.gpu * (1 << 36)
    out += [
        f"selecting device {args.gpu}",
        f"device ptr: 0x{base:x}",
        f"allocated size: {size}",
        f"gpu alloc fn: {args.alloc}",
    ]
    rows: list[tuple[Cell, ...]] = []
    tests = list(dict.fromkeys(row.test for row in r.rows))
    mapping_lines = [
        f"map_d_ptr: 0x{base + (1 << 32):x}",
        f"info.va: {base:x}",
        f"info.mapped_size: {size}",
        f"info.page_size: {_GPU_PAGE}",
        "info.mapped: 1",
        "info.wc_mapping: 1",
        "page offset: 0",
        f"user-space pointer: 0x{base + (1 << 32):x}",
        "use cold cache: no",
    ]
    for test in tests:
        if test == "gdr_copy_to_mapping":
            out += [*([""] if args.cumemcpy else []), "", *mapping_lines]
        iters = (
            args.write_iters
            if test in ("gdr_copy_to_mapping", "cuMemcpy_H2D")
            else (args.read_iters)
        )
        out += ["", f"{test} num iters for each size: {iters}"]
        if test == "gdr_copy_to_mapping":
            out.append(_WARNING)
        tabs = "\t\t\t" if test.startswith("gdr") else "\t\t"
        if args.legacy:
            out.append(f"Test {tabs} Size(B) \t Avg.Time(us)")
        else:
            out.append(f"Test {tabs} Size(B) \t Median Time(us) \t Min. Time(us)")
        for row in r.rows:
            if row.test != test:
                continue
            med, low = row.median * 1e6, row.minimum * 1e6
            if args.legacy:
                out.append(f"{test} \t {row.size:8d} \t {med:11.4f}")
            else:
                out.append(f"{test} \t {row.size:8d} \t {med:11.4f} \t {low:11.4f}")
            if args.legacy:
                rows.append((test, row.size, round(med, 4)))
            else:
                mean = round(row.mean * 1e6, 4)
                rows.append((test, row.size, round(med, 4), round(low, 4), mean))
    out += ["unmapping buffer", "unpinning buffer", "closing gdrdrv", ""]
    columns: tuple[str, ...] = ("Test", "Size(B)", "Avg.Time(us)")
    if not args.legacy:
        # copylat 2.6 prints the median and minimum of its buckets; the table also keeps
        # the mean over all iterations, the value copylat printed before 2.6
        columns = ("Test", "Size(B)", "Median Time(us)", "Min. Time(us)", "Avg.Time(us)")
    meta = {
        "platform": spec.name,
        "device": r.device,
        "seed": setup.seed,
        "pinlab": __version__,
    }
    return BenchTable(TOOL.name, "copylat", columns, tuple(rows), "\n".join(out), meta)


TOOL = register_tool(
    "gdrcopy",
    "gdrcopy copylat: CPU store/load latency through a GPU BAR mapping, by size",
    _run,
)
