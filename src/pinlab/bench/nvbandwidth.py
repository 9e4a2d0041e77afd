"""``pinlab bench nvbandwidth``: NVIDIA nvbandwidth v0.8 on a modelled machine.

Flags as the real tool's (``nvbandwidth.cpp``): ``-t/--testcase NAME|INDEX`` (several allowed;
a bare first argument is taken as a test case too; none: every test case, in ``-l`` order),
``-b/--bufferSize MiB`` (512), ``-i/--testSamples N`` (3), ``-m/--useMean``, ``--loopCount N``
(16), ``-l/--list``,
``-v/--verbose`` (per-sample lines are not modelled; MIN/MAX/AVG are printed),
``-s/--skipVerification`` and ``-d/--disableAffinity`` (accepted, no effect),
``--perfFormatter`` (``&&&& PERF`` lines). Output as ``output.cpp`` prints it: the version
lines, the devices, then per test case ``Running <name>.``, each matrix under its title
(values ``%10.2f``, ``N/A`` where no peer access) and its ``SUM`` line. The table's rows are
the matrices' rows (first column ``"<title key> <row>"``... see :func:`run`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pinlab import __version__
from pinlab.bench import BenchSetup, BenchTable, Cell, register_tool
from pinlab.bench._gpu import (
    ToolParser,
    bus_id,
    gpu_spec,
    node_spec,
    run_one,
    simulation,
    single_node,
)
from pinlab.sim.workloads.nvbandwidth import (
    TESTCASES,
    Matrix,
    NvbandwidthParams,
    NvbandwidthResult,
    testcase,
)
from pinlab.units import MiB

__all__ = ["TOOL", "format_matrix"]

_NOTE = (
    "NOTE: The reported results may not reflect the full capabilities of the platform.\n"
    "Performance can vary with software drivers, hardware clocks, and system topology."
)


def _parser() -> ToolParser:
    p = ToolParser("nvbandwidth")
    p.add_argument("positional", nargs="*")
    p.add_argument("-t", "--testcase", nargs="+", action="extend", default=[])
    p.add_argument("-b", "--bufferSize", type=int, default=512)
    p.add_argument("-i", "--testSamples", type=int, default=3)
    p.add_argument("-m", "--useMean", action="store_true")
    p.add_argument("--loopCount", type=int, default=16)
    p.add_argument("-l", "--list", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("-s", "--skipVerification", action="store_true")
    p.add_argument("-d", "--disableAffinity", action="store_true")
    p.add_argument("-j", "--json", action="store_true")
    p.add_argument("--perfFormatter", action="store_true")
    return p


def format_matrix(m: Matrix, *, perf: bool = False, verbose: bool = False) -> str:
    """One matrix as nvbandwidth prints it (``inline_common.h`` operator<<), then its SUM."""
    lines = [m.title, "  " + "".join(f"{c:>10d}" for c in range(m.cols))]
    for r in range(m.rows):
        cells = [
            f"{m.cells[(r, c)] / 1e9:>10.2f}" if (r, c) in m.cells else f"{'N/A':>10}"
            for c in range(m.cols)
        ]
        lines.append(f"{r:>2d}" + "".join(cells))
    total = sum(m.cells.values()) / 1e9
    lines.append("")
    lines.append(f"&&&& PERF {m.key} {total:.2f}GB/s" if perf else f"SUM {m.key} {total:.2f}")
    if verbose and m.cells:
        values = [v / 1e9 for v in m.cells.values()]
        lines.append(f"MIN {m.key} {min(values):.2f}")
        lines.append(f"MAX {m.key} {max(values):.2f}")
        lines.append(f"AVG {m.key} {statistics.fmean(values):.2f}")
    lines.append("")
    return "\n".join(lines)


def _run(argv: Sequence[str], setup: BenchSetup) -> BenchTable:
    """Run the test cases of ``argv`` (a leading ``nvbandwidth`` is the binary's name).

    Rows are the matrices' rows in GB/s (``N/A`` where nothing was measured), columns
    ``gpu0`` … ``gpuN-1``; the first column is the row's label, ``cpu0`` for the host row
    of the CPU↔GPU matrices and ``gpuN`` otherwise, so ``cell("cpu0", "gpu3")`` reads one
    cell. When several matrices are printed (bidirectional device-to-device cases, several
    ``-t``), each row starts with the matrix's title (column ``matrix``) before its label."""
    parser = _parser()
    argv = list(argv)
    if argv[:1] == ["nvbandwidth"]:
        argv = argv[1:]  # the binary's name, as a command line starts
    args = parser.parse_args(argv)
    names = [*args.positional, *args.testcase]
    if args.list:
        text = "Index, Name:\n\tDescription\n=======================\n" + "".join(
            f"{tc.index}, {tc.name}:\n{tc.titles[0]}\n\n" for tc in TESTCASES
        )
        return BenchTable(
            TOOL.name,
            "list",
            ("index", "name"),
            tuple((tc.index, tc.name) for tc in TESTCASES),
            text,
        )
    cases = [] if names else list(TESTCASES)  # no -t: every test case, as the tool runs
    for n in names:
        try:
            cases.append(testcase(n))
        except KeyError:
            parser.fail("-t/--testcase", "a test case name or index of nvbandwidth -l", n)
    if args.bufferSize <= 0:
        parser.fail("-b/--bufferSize", "a positive size in MiB", args.bufferSize)
    if args.testSamples <= 0:
        parser.fail("-i/--testSamples", "a positive number of samples", args.testSamples)
    if args.loopCount <= 0:
        parser.fail("--loopCount", "a positive number of copies", args.loopCount)
    single_node(parser, setup, "nvbandwidth runs on one node; multinode_* is not modelled")
    header = ["nvbandwidth Version: v0.8", f"Built from Git version: pinlab {__version__}", ""]
    out_rows: list[tuple[Cell, ...]] = []
    body: list[str] = []
    matrices_shape = 0
    first_sim = None
    for tc in cases:
        sim = simulation(setup)
        if first_sim is None:
            gpu_spec(parser.tool, sim, str(setup.platform))
            first_sim = sim
        params = NvbandwidthParams(
            testcase=tc.name,  # type: ignore[arg-type]
            buffer=args.bufferSize * MiB,
            samples=args.testSamples,
            loop_count=args.loopCount,
            use_mean=args.useMean,
        )
        result = run_one(sim, params, NvbandwidthResult)
        body.append(f"Running {tc.name}.")
        host = not tc.kind.startswith(("d2d", "all_to_one", "one_to_all", "local"))
        for m in result.matrices:
            body.append(format_matrix(m, perf=args.perfFormatter, verbose=args.verbose))
            matrices_shape = max(matrices_shape, m.cols)
            for r in range(m.rows):
                row: list[Cell] = [m.title, f"cpu{r}" if host else f"gpu{r}"]
                row += [
                    round(m.cells[(r, c)] / 1e9, 2) if (r, c) in m.cells else "N/A"
                    for c in range(m.cols)
                ]
                out_rows.append(tuple(row))
    assert first_sim is not None
    spec = node_spec(first_sim)
    machine = first_sim.node().machine
    devices = [
        f"Device {i}: {d.model or d.name} "
        f"({bus_id(machine, d.name)[0]:08x}:{bus_id(machine, d.name)[1]:02x}:"
        f"{bus_id(machine, d.name)[2]:02x})"
        for i, d in enumerate(spec.devices)
    ]
    text = "\n".join([*header, spec.name, *devices, "", *body, _NOTE, ""])
    columns: tuple[str, ...] = ("matrix", "row", *(f"gpu{c}" for c in range(matrices_shape)))
    if len({row[0] for row in out_rows}) == 1:  # one matrix: the row label comes first
        columns, out_rows = columns[1:], [row[1:] for row in out_rows]
    test = cases[0].name if len(cases) == 1 else ",".join(tc.name for tc in cases)
    meta = {"platform": spec.name, "seed": setup.seed, "pinlab": __version__, "unit": "GB/s"}
    return BenchTable(TOOL.name, test, columns, tuple(out_rows), text, meta)


TOOL = register_tool(
    "nvbandwidth",
    "NVIDIA nvbandwidth: host/device and device/device copy bandwidth matrices",
    _run,
)
