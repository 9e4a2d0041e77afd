"""``pinlab bench nccl-tests all_reduce_perf``: NVIDIA nccl-tests 2.19 on a modelled machine.

Flags as ``src/common.cu`` parses them: ``-b/--minbytes`` and ``-e/--maxbytes`` (sizes with
K/M/G suffixes, powers of 1024; default 32M), ``-f/--stepfactor`` (default: ``-i/--stepbytes``
1M increments), ``-g/--ngpus`` GPUs per thread, ``-t/--nthreads``, ``-n/--iters`` (20),
``-w/--warmup_iters`` (1), ``-c/--check`` (1: print ``#wrong``), ``-o/--op`` (sum),
``-d/--datatype`` (float), ``-m/--agg_iters``, ``-a/--average``, ``-G/--cudagraph``,
``-z/--blocking`` (accepted; 1 only where they change nothing). pinlab's own: ``--nodes N``
(also the tool call's ``nodes``), ``--algo``/``--proto`` (``NCCL_ALGO``/``NCCL_PROTO``),
``--p2p-level``/``--net-gdr-level`` (``NCCL_P2P_LEVEL``/``NCCL_NET_GDR_LEVEL``),
``--net-gdr-read 0|1``, ``--model steps|aggregate``. Every node runs one rank per GPU (as
``mpirun`` with one process per ``-g`` GPUs would).

Output as ``util.cu`` prints it: the version and parameter lines, ``# Using devices`` with
one line per rank, the three-line column header, one line per size (``%12li  %12li  %8s  %6s
%6s`` then per placement time, algbw, busbw in ``getFloatStr`` widths 7/6/6 and ``#wrong``),
the footer with the average bus bandwidth over every printed cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pinlab import __version__
from pinlab.bench import BenchSetup, BenchTable, Cell, register_tool
from pinlab.bench._gpu import ToolParser, bus_id, gpu_spec, run_tenants, simulation
from pinlab.sim.workloads.base import MAX_EVENTS
from pinlab.sim.workloads.nccl import DTYPE_SIZE, PATH_LEVELS, NcclParams, NcclResult, size_count

__all__ = ["TOOL", "float_str", "parse_size"]

_VERSION = "2.19.6"
_NCCL_VERSION = 22703
"""The NCCL version code the model's tuner constants were read from (`NVIDIA/nccl` master)."""


def parse_size(text: str) -> int:
    """nccl-tests' ``parsesize``: a number with an optional K/M/G suffix (× 1024ⁿ); -1 on a
    bad value."""
    t = text.strip()
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    scale = 1
    if t and t[-1].lower() in units:
        scale = units[t[-1].lower()]
        t = t[:-1]
    try:
        value = float(t)
    except ValueError:
        return -1
    return int(value * scale) if value >= 0 else -1


def float_str(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: 2 decimals if the number fits ``width``, else 1, else 0,
    else an exponent."""
    for fmt in (f"{{:{width}.2f}}", f"{{:{width}.1f}}", f"{{:{width}.0f}}"):
        s = fmt.format(value)
        if len(s) <= width:
            return s
    return (f"{{:{width}.1e}}" if width >= 7 else f"{{:{width}.0e}}").format(value)[:width]


_BINARIES = {
    "all_reduce_perf": "all_reduce",
    "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter",
}
"""The nccl-tests binaries modelled and their collectives."""


def _parser(binary: str) -> ToolParser:
    p = ToolParser(binary)
    p.add_argument("-b", "--minbytes", default="32M")
    p.add_argument("-e", "--maxbytes", default="32M")
    p.add_argument("-i", "--stepbytes", default="1M")
    p.add_argument("-f", "--stepfactor", type=int, default=1)
    p.add_argument("-g", "--ngpus", type=int, default=1)
    p.add_argument("-t", "--nthreads", type=int, default=1)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=1)
    p.add_argument("-m", "--agg_iters", type=int, default=1)
    p.add_argument("-c", "--check", type=int, default=1)
    p.add_argument("-o", "--op", default="sum")
    p.add_argument("-d", "--datatype", default="float")
    p.add_argument("-a", "--average", type=int, default=1)
    p.add_argument("-G", "--cudagraph", type=int, default=0)
    p.add_argument("-z", "--blocking", type=int, default=0)
    p.add_argument("--nodes", type=int, default=None)
    p.add_argument("--algo", default="auto", choices=("auto", "ring", "tree"))
    p.add_argument("--proto", default="auto", choices=("auto", "LL", "LL128", "Simple"))
    p.add_argument("--p2p-level", default="PXB", choices=PATH_LEVELS)
    p.add_argument("--net-gdr-level", default="PXB", choices=PATH_LEVELS)
    p.add_argument("--net-gdr-read", default=None, choices=("0", "1"))
    p.add_argument("--model", default="steps", choices=("steps", "aggregate"))
    return p


_OPS = ("sum", "prod", "min", "max", "avg", "all")
_PLACED = ("time", "algbw", "busbw", "#wrong")
"""The columns nccl-tests prints once per placement; the table names them ``out-of-place time``,
``in-place busbw`` ... after the group header above them."""


def _run(argv: Sequence[str], setup: BenchSetup) -> BenchTable:
    argv = list(argv)
    if not argv or argv[0].startswith("-"):
        ToolParser("nccl-tests").fail("test", "a test binary (all_reduce_perf)", argv[:1])
    binary, rest = argv[0], argv[1:]
    if binary not in _BINARIES:
        ToolParser("nccl-tests").fail("test", ", ".join(_BINARIES), binary)
    parser = _parser(binary)
    args = parser.parse_args(rest)
    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    if lo < 0:
        parser.fail("-b/--minbytes", "a size such as 8, 32K, 1M or 2G", args.minbytes)
    if hi < lo:
        parser.fail("-e/--maxbytes", f"a size >= minbytes ({lo})", args.maxbytes)
    if args.stepfactor < 1:
        parser.fail("-f/--stepfactor", "a factor >= 1 (1: sizes step by -i)", args.stepfactor)
    step = parse_size(args.stepbytes)
    if args.stepfactor == 1 and step < 1:
        parser.fail("-i/--stepbytes", "a size >= 1 (the step between sizes)", args.stepbytes)
    if args.datatype not in DTYPE_SIZE:
        parser.fail("-d/--datatype", ", ".join(DTYPE_SIZE), args.datatype)
    if args.op not in _OPS:
        parser.fail("-o/--op", ", ".join(_OPS), args.op)
    for flag, value in (
        ("-n/--iters", args.iters),
        ("-g/--ngpus", args.ngpus),
        ("-t/--nthreads", args.nthreads),
    ):
        if value < 1:
            parser.fail(flag, "a positive number", value)
    if args.warmup_iters < 0:
        parser.fail("-w/--warmup_iters", "a number >= 0", args.warmup_iters)
    n_nodes = setup.nodes if setup.nodes is not None else (args.nodes or 1)
    if n_nodes < 1:
        parser.fail("--nodes", "a positive number of nodes", n_nodes)
    sim = simulation(setup, nodes=n_nodes)
    node_gpus = len(gpu_spec(parser.tool, sim, str(setup.platform)).devices)
    if args.ngpus * args.nthreads > node_gpus:
        parser.fail("-g/--ngpus", f"at most {node_gpus} GPUs per node (× -t)", args.ngpus)
    gdr_read = {"0": "off", "1": "on", None: "auto"}[args.net_gdr_read]
    params = NcclParams(
        collective=_BINARIES[binary],  # type: ignore[arg-type]
        minbytes=lo,
        maxbytes=hi,
        stepfactor=args.stepfactor,
        stepbytes=max(step, 1),
        iters=args.iters * args.agg_iters,
        warmup=args.warmup_iters,
        gpus_per_thread=args.ngpus,
        datatype=args.datatype,
        algo=args.algo,
        proto=args.proto,
        p2p_level=args.p2p_level,
        net_gdr_level=args.net_gdr_level,
        net_gdr_read=gdr_read,  # type: ignore[arg-type]
        model=args.model,
        check=args.check != 0,
        world=n_nodes,
    )
    planned = params.events(0.0)
    if planned > MAX_EVENTS:  # the bound a scenario's tenant has
        flag = "-i/--stepbytes" if args.stepfactor == 1 else "-n/--iters"
        parser.fail(
            flag,
            f"at most {MAX_EVENTS:.0e} workload iterations in a run "
            f"({size_count(params)} sizes x {params.iters + params.warmup} iterations x 2 "
            "placements)",
            int(planned),
        )
    tenants = run_tenants(sim, params, per_node=True)
    result = tenants[0].result
    assert isinstance(result, NcclResult)
    return _table(sim, binary, args, lo, hi, result, n_nodes, setup.seed)


def _table(
    sim: Any,
    binary: str,
    args: Any,
    lo: int,
    hi: int,
    r: NcclResult,
    n_nodes: int,
    seed: int,
) -> BenchTable:
    step_text = (
        f"{args.stepfactor}(factor)"
        if args.stepfactor > 1
        else f"{parse_size(args.stepbytes)}(bytes)"
    )
    out = [
        f"# nccl-tests version {_VERSION} nccl-headers={_NCCL_VERSION} "
        f"nccl-library={_NCCL_VERSION}",
        f"# Collective test starting: {binary}",
        f"# nThread {args.nthreads} nGpus {args.ngpus} minBytes {lo} maxBytes {hi} "
        f"step: {step_text} warmup iters: {args.warmup_iters} iters: "
        f"{args.iters} agg iters: {args.agg_iters} validation: {args.check} graph: "
        f"{args.cudagraph} unalign: 0",
        "#",
        "# Using devices",
    ]
    rank = 0
    for node, state in sim.nodes.items():
        machine = state.machine
        for i, d in enumerate(machine.spec.devices):
            domain, bus, slot = bus_id(machine, d.name)
            out.append(
                f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:6d} on {node:>10s} device "
                f"{i:2d} [{domain:04x}:{bus:02x}:{slot:02x}] {d.model or d.name}"
            )
            rank += 1
    out += [
        "#",
        "# "
        + " " * 10
        + "  "
        + " " * 12
        + "  "
        + " " * 8
        + "  "
        + " " * 6
        + "  "
        + " " * 6
        + "           out-of-place                       in-place          ",
        "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s}  {:>6s}  {:>7s}  "
        "{:>6s}  {:>6s}  {:>6s} ".format(
            "size",
            "count",
            "type",
            "redop",
            "root",
            "time",
            "algbw",
            "busbw",
            "#wrong",
            "time",
            "algbw",
            "busbw",
            "#wrong",
        ),
        "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s}  {:>6s}  {:>7s}  "
        "{:>6s}  {:>6s}  {:>6s} ".format(
            "(B)",
            "(elements)",
            "",
            "",
            "",
            "(us)",
            "(GB/s)",
            "(GB/s)",
            "",
            "(us)",
            "(GB/s)",
            "(GB/s)",
            "",
        ),
    ]
    rows: list[tuple[Cell, ...]] = []
    redop = "none" if binary == "all_gather_perf" else args.op
    wrong = "     0" if args.check else "   N/A"
    cells: list[float] = []
    for row in r.rows:
        t, t_ip = row.time * 1e6, row.time_ip * 1e6
        a, b, a_ip, b_ip = (x / 1e9 for x in (row.algbw, row.busbw, row.algbw_ip, row.busbw_ip))
        line = (
            f"{row.size:12d}  {row.count:12d}  {args.datatype:>8s}  {redop:>6s}  {-1:6d}"
            f"  {float_str(t, 7)}  {float_str(a, 6)}  {float_str(b, 6)}  {wrong}"
            f"  {float_str(t_ip, 7)}  {float_str(a_ip, 6)}  {float_str(b_ip, 6)}  {wrong}"
        )
        out.append(line)
        cells += [b, b_ip]
        rows.append(
            (
                row.size,
                row.count,
                args.datatype,
                redop,
                -1,
                round(t, 2),
                round(a, 2),
                round(b, 2),
                0,
                round(t_ip, 2),
                round(a_ip, 2),
                round(b_ip, 2),
                0,
            )
        )
    avg = sum(cells) / len(cells) if cells else 0.0
    out += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {avg:g} ",
        "#",
        f"# Collective test concluded: {binary}",
        "",
    ]
    placed = [f"{where} {c}" for where in ("out-of-place", "in-place") for c in _PLACED]
    columns = ("size", "count", "type", "redop", "root", *placed)
    meta = {
        "platform": sim.node().machine.spec.name,
        "nodes": n_nodes,
        "seed": seed,
        "pinlab": __version__,
        "units": {"time": "us", "algbw": "GB/s", "busbw": "GB/s"},
        "algorithms": sorted({f"{row.algo}/{row.proto}" for row in r.rows}),
        "transports": r.transports,
    }
    return BenchTable(TOOL.name, binary, columns, tuple(rows), "\n".join(out), meta)


TOOL = register_tool(
    "nccl-tests",
    "NVIDIA nccl-tests all_reduce_perf: NCCL all-reduce time, algbw and busbw by size",
    _run,
)
