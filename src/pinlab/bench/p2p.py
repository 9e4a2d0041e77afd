"""``pinlab bench p2p``: cuda-samples' ``p2pBandwidthLatencyTest`` on a modelled machine.

Flags as the sample's: ``--p2p_read`` (adds the P2P-read matrices), ``--sm_copy`` (copy kernels
instead of ``cudaMemcpyPeerAsync``), ``--numElems=N`` (ints per copy, 40 000 000), ``--help``.
Output as the sample prints it: the device lines, the ``CAN``/``CANNOT Access Peer`` lines
and the note, the connectivity matrix, then every matrix with ``%6d`` column headers and
``%6.02f`` values, each followed by a space. The table stacks the matrices: each row is the
matrix's title (column ``matrix``; the latency sub-matrices ``"<title> GPU"`` and ``"<title>
CPU"``), the row's label ``gpuI`` (column ``row``) and one value per column ``gpuJ`` (GB/s or
µs). A leading ``p2pBandwidthLatencyTest`` is the binary's name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pinlab import __version__
from pinlab.bench import BenchSetup, BenchTable, Cell, register_tool
from pinlab.bench._gpu import ToolParser, bus_id, gpu_spec, run_one, simulation, single_node
from pinlab.sim.workloads.p2p import P2pParams, P2pResult

__all__ = ["TOOL"]

_TITLE = "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]"
_FALLBACK = (
    "\n***NOTE: In case a device doesn't have P2P access to other one, it falls back to normal "
    "memcopy procedure.\nSo you can see lesser Bandwidth (GB/s) and unstable Latency (us) in "
    "those cases.\n"
)
_END = (
    "\nNOTE: The CUDA Samples are not meant for performance measurements. Results may vary "
    "when GPU Boost is enabled."
)

_BANDWIDTH = (
    ("uni_disabled", "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)"),
    ("uni_writes", "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)"),
    ("uni_reads", "Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)"),
    ("bidir_disabled", "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)"),
    ("bidir_enabled", "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)"),
)
_LATENCY = (
    ("lat_disabled", "P2P=Disabled Latency Matrix (us)"),
    ("lat_writes", "P2P=Enabled Latency (P2P Writes) Matrix (us)"),
    ("lat_reads", "P2P=Enabled Latency (P2P Reads) Matrix (us)"),
)


def _parser() -> ToolParser:
    p = ToolParser("p2pBandwidthLatencyTest")
    p.add_argument("--p2p_read", action="store_true")
    p.add_argument("--sm_copy", action="store_true")
    p.add_argument("--numElems", type=int, default=40_000_000)
    p.add_argument("--help", action="store_true")
    return p


def _matrix(corner: str, n: int, cells: Mapping[tuple[int, int], float], scale: float) -> list[str]:
    lines = [corner + "".join(f"{j:6d} " for j in range(n))]
    for i in range(n):
        lines.append(f"{i:6d} " + "".join(f"{cells[(i, j)] * scale:6.02f} " for j in range(n)))
    return lines


def _run(argv: Sequence[str], setup: BenchSetup) -> BenchTable:
    parser = _parser()
    argv = list(argv)
    if argv[:1] == ["p2pBandwidthLatencyTest"]:
        argv = argv[1:]  # the binary's name, as a command line starts
    args = parser.parse_args(_split(argv))
    if args.numElems <= 0:
        parser.fail("--numElems", "a positive number of ints", args.numElems)
    single_node(parser, setup, "the sample runs on one node")
    sim = simulation(setup)
    spec = gpu_spec(parser.tool, sim, str(setup.platform))
    params = P2pParams(elements=args.numElems, p2p_read=args.p2p_read, sm_copy=args.sm_copy)
    result = run_one(sim, params, P2pResult)
    machine = sim.node().machine
    n = len(result.device_names)
    lines = [_TITLE]
    for i, d in enumerate(spec.devices):
        domain, bus, slot = bus_id(machine, d.name)
        lines.append(
            f"Device: {i}, {result.device_names[i]}, pciBusID: {bus:x}, "
            f"pciDeviceID: {slot:x}, pciDomainID:{domain:x}"
        )
    for i in range(n):
        for j in range(n):
            if i != j:
                can = "CAN" if result.access[(i, j)] else "CANNOT"
                lines.append(f"Device={i} {can} Access Peer Device={j}")
    lines.append(_FALLBACK)
    lines.append("P2P Connectivity Matrix")
    lines.append("     D\\D" + "".join(f"{j:6d}" for j in range(n)))
    for i in range(n):
        row = "".join(f"{(1 if i == j or result.access[(i, j)] else 0):6d}" for j in range(n))
        lines.append(f"{i:6d}\t" + row)
    rows: list[tuple[Cell, ...]] = []
    mats = result.matrices
    for key, title in _BANDWIDTH:
        if key not in mats:
            continue
        lines.append(title)
        lines += _matrix("   D\\D", n, mats[key], 1e-9)
        rows += _rows(title, n, mats[key], 1e-9)
    for key, title in _LATENCY:
        if f"{key}_gpu" not in mats:
            continue
        lines.append(title)
        lines += _matrix("   GPU", n, mats[f"{key}_gpu"], 1e6)
        lines.append("")
        lines += _matrix("   CPU", n, mats[f"{key}_cpu"], 1e6)
        rows += _rows(f"{title} GPU", n, mats[f"{key}_gpu"], 1e6)
        rows += _rows(f"{title} CPU", n, mats[f"{key}_cpu"], 1e6)
    lines.append(_END)
    columns = ("matrix", "row", *(f"gpu{j}" for j in range(n)))
    meta = {
        "platform": spec.name,
        "seed": setup.seed,
        "pinlab": __version__,
        "units": {"bandwidth": "GB/s", "latency": "us"},
    }
    return BenchTable(
        TOOL.name,
        "p2pBandwidthLatencyTest",
        columns,
        tuple(rows),
        "\n".join(lines) + "\n",
        meta,
    )


def _split(argv: Sequence[str]) -> list[str]:
    """The sample's ``--flag=value`` spelling as argparse's."""
    out: list[str] = []
    for a in argv:
        if a.startswith("--") and "=" in a:
            flag, _, value = a.partition("=")
            out += [flag, value]
        else:
            out.append(a)
    return out


def _rows(
    title: str, n: int, cells: Mapping[tuple[int, int], float], scale: float
) -> list[tuple[Cell, ...]]:
    """One matrix stacked into the table: ``(title, gpuI, value per column)``."""
    return [
        (title, f"gpu{i}", *(round(cells[(i, j)] * scale, 2) for j in range(n))) for i in range(n)
    ]


TOOL = register_tool(
    "p2p",
    "cuda-samples p2pBandwidthLatencyTest: GPU-to-GPU bandwidth and latency matrices",
    _run,
)
