"""``nvbandwidth``: NVIDIA's nvbandwidth test cases as a workload -- host↔device and
device↔device copies by copy engines (CE) or copy kernels (SM), one direction or both, alone or
with every other GPU copying at once (``docs/cost-model/gpu.md`` §G2; the tool:
``tools-and-mechanisms.md`` A2).

Each cell of a test case's matrix is measured as nvbandwidth measures it: ``samples`` samples
of ``loop_count`` back-to-back copies of ``buffer`` bytes on one stream, bandwidth = bytes ×
loop count / elapsed, the median of the samples (``use_mean``: the mean). Interfering copies
(bidirectional and all-GPU cases) are twice the size so they outlast the measured one, as in
nvbandwidth's ``testcases_ce.cpp``; the ``all_to_one`` / ``one_to_all`` cases report the total
bandwidth of all their copies. How each copy travels is :func:`~.gpu_copy.copy_flow`; the flow
network shares the links among the concurrent copies.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Literal

from pinlab.platform.gpu_model import CopyEngine
from pinlab.platform.topology import Machine
from pinlab.sim.engine import Ctx
from pinlab.sim.metrics import TenantResult, metric
from pinlab.sim.workloads.base import Gen, WorkloadParams, idle, param
from pinlab.sim.workloads.gpu_copy import (
    copy_flow,
    jittered,
    peer_access,
    run_copy,
    shared_caps,
)
from pinlab.units import Size

__all__ = [
    "TESTCASES",
    "Matrix",
    "NvbandwidthParams",
    "NvbandwidthResult",
    "Testcase",
    "nvbandwidth",
    "testcase",
]

Kind = Literal[
    "h2d",
    "d2h",
    "h2d_bidir",
    "d2h_bidir",
    "d2d_read",
    "d2d_write",
    "d2d_bidir_read",
    "d2d_bidir_write",
    "all_to_host",
    "all_to_host_bidir",
    "host_to_all",
    "host_to_all_bidir",
    "all_to_one_write",
    "all_to_one_read",
    "one_to_all_write",
    "one_to_all_read",
    "local",
]


@dataclass(frozen=True, slots=True)
class Testcase:
    """One nvbandwidth test case: its name (``-t`` accepts it or its index), what it copies and
    which engine, and the titles of the matrices it prints (verbatim from nvbandwidth v0.8)."""

    index: int
    name: str
    kind: Kind
    engine: CopyEngine
    titles: tuple[str, ...]


_ARROWS: dict[Kind, tuple[str, ...]] = {
    "h2d": ("CPU(row) -> GPU(column)",),
    "d2h": ("CPU(row) <- GPU(column)",),
    "h2d_bidir": ("CPU(row) <-> GPU(column)",),
    "d2h_bidir": ("CPU(row) <-> GPU(column)",),
    "d2d_read": ("GPU(row) -> GPU(column)",),
    "d2d_write": ("GPU(row) <- GPU(column)",),
    "d2d_bidir_read": tuple(f"GPU(row) <-> GPU(column) {x}" for x in ("Read1", "Read2", "Total")),
    "d2d_bidir_write": tuple(
        f"GPU(row) <-> GPU(column) {x}" for x in ("Write1", "Write2", "Total")
    ),
    "all_to_host": ("CPU(row) <- GPU(column)",),
    "all_to_host_bidir": ("CPU(row) <-> GPU(column)",),
    "host_to_all": ("CPU(row) -> GPU(column)",),
    "host_to_all_bidir": ("CPU(row) <-> GPU(column)",),
    "all_to_one_write": ("GPU(row) <- GPU(column)",),
    "all_to_one_read": ("GPU(row) -> GPU(column)",),
    "one_to_all_write": ("GPU(row) -> GPU(column)",),
    "one_to_all_read": ("GPU(row) <- GPU(column)",),
}

_NAMES: tuple[tuple[str, Kind], ...] = (
    ("host_to_device_memcpy", "h2d"),
    ("device_to_host_memcpy", "d2h"),
    ("host_to_device_bidirectional_memcpy", "h2d_bidir"),
    ("device_to_host_bidirectional_memcpy", "d2h_bidir"),
    ("device_to_device_memcpy_read", "d2d_read"),
    ("device_to_device_memcpy_write", "d2d_write"),
    ("device_to_device_bidirectional_memcpy_read", "d2d_bidir_read"),
    ("device_to_device_bidirectional_memcpy_write", "d2d_bidir_write"),
    ("all_to_host_memcpy", "all_to_host"),
    ("all_to_host_bidirectional_memcpy", "all_to_host_bidir"),
    ("host_to_all_memcpy", "host_to_all"),
    ("host_to_all_bidirectional_memcpy", "host_to_all_bidir"),
    ("all_to_one_write", "all_to_one_write"),
    ("all_to_one_read", "all_to_one_read"),
    ("one_to_all_write", "one_to_all_write"),
    ("one_to_all_read", "one_to_all_read"),
)


def _testcases() -> tuple[Testcase, ...]:
    out: list[Testcase] = []
    for engine in ("ce", "sm"):
        for name, kind in _NAMES:
            unit = engine.upper()
            titles = tuple(f"memcpy {unit} {a} bandwidth (GB/s)" for a in _ARROWS[kind])
            out.append(Testcase(len(out), f"{name}_{engine}", kind, engine, titles))
    out.append(
        Testcase(
            34, "device_local_copy", "local", "ce", ("memcpy local GPU(column) bandwidth (GB/s)",)
        )
    )
    return tuple(out)


TESTCASES: tuple[Testcase, ...] = _testcases()
"""nvbandwidth v0.8's test cases in ``createTestcases`` order: 0–15 CE, 16–31 their SM twins,
34 ``device_local_copy``. The latency test cases 32 and 33 (pointer chases) are not modelled."""


def testcase(name_or_index: str | int) -> Testcase:
    """A test case by name or index (``KeyError`` naming the known ones)."""
    for tc in TESTCASES:
        if tc.name == name_or_index or str(tc.index) == str(name_or_index):
            return tc
    names = ", ".join(tc.name for tc in TESTCASES)
    raise KeyError(f"no nvbandwidth test case {name_or_index!r} (expected one of {names})")


TestcaseName = Literal[
    "host_to_device_memcpy_ce",
    "device_to_host_memcpy_ce",
    "host_to_device_bidirectional_memcpy_ce",
    "device_to_host_bidirectional_memcpy_ce",
    "device_to_device_memcpy_read_ce",
    "device_to_device_memcpy_write_ce",
    "device_to_device_bidirectional_memcpy_read_ce",
    "device_to_device_bidirectional_memcpy_write_ce",
    "all_to_host_memcpy_ce",
    "all_to_host_bidirectional_memcpy_ce",
    "host_to_all_memcpy_ce",
    "host_to_all_bidirectional_memcpy_ce",
    "all_to_one_write_ce",
    "all_to_one_read_ce",
    "one_to_all_write_ce",
    "one_to_all_read_ce",
    "host_to_device_memcpy_sm",
    "device_to_host_memcpy_sm",
    "host_to_device_bidirectional_memcpy_sm",
    "device_to_host_bidirectional_memcpy_sm",
    "device_to_device_memcpy_read_sm",
    "device_to_device_memcpy_write_sm",
    "device_to_device_bidirectional_memcpy_read_sm",
    "device_to_device_bidirectional_memcpy_write_sm",
    "all_to_host_memcpy_sm",
    "all_to_host_bidirectional_memcpy_sm",
    "host_to_all_memcpy_sm",
    "host_to_all_bidirectional_memcpy_sm",
    "all_to_one_write_sm",
    "all_to_one_read_sm",
    "one_to_all_write_sm",
    "one_to_all_read_sm",
    "device_local_copy",
]


class NvbandwidthParams(WorkloadParams):
    """``nvbandwidth``: one test case over the node's GPUs."""

    workload: Literal["nvbandwidth"] = "nvbandwidth"

    testcase: TestcaseName = param("host_to_device_memcpy_ce", "the nvbandwidth test case")
    devices: list[str] | Literal["all"] = param("all", "the GPUs, in CUDA device order")
    buffer: Size = param("512MiB", "bytes per copy (nvbandwidth -b)", unit="B")
    samples: int = param(3, "samples per cell (-i)", ge=1, le=1000)
    loop_count: int = param(16, "copies per sample (--loopCount)", ge=1, le=10000)
    use_mean: bool = param(False, "report the mean of the samples instead of the median (-m)")


@dataclass(slots=True)
class Matrix:
    """One printed matrix: its title, key (``SUM <key>``), shape and measured cells (bytes/s;
    a missing cell prints ``N/A``)."""

    title: str
    key: str
    rows: int
    cols: int
    cells: dict[tuple[int, int], float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        """The sum nvbandwidth prints after the matrix (``SUM <key> ...``), bytes/s."""
        return sum(self.cells.values())


@dataclass(slots=True)
class NvbandwidthResult(TenantResult):
    """What ``nvbandwidth`` measured: its matrices (not metrics) and their sum."""

    sum_bandwidth: float | None = metric(
        "B/s", "sum of the test case's first matrix (nvbandwidth's SUM line)"
    )
    cells: int | None = metric("count", "matrix cells measured")
    matrices: list[Matrix] = field(default_factory=list)
    device_names: list[str] = field(default_factory=list)


# One copy of a cell: (source, destination, initiator, size factor); the first one is measured.
_Copy = tuple[str, str, str, int]


def _cell_copies(kind: Kind, devs: list[str], host: dict[str, str], r: int, c: int) -> list[_Copy]:
    """The copies of cell (row ``r``, column ``c``) of a test case, measured one first."""
    d = devs[c]
    h = host[d]
    others = [x for x in devs if x != d]
    if kind == "h2d":
        return [(h, d, d, 1)]
    if kind == "d2h":
        return [(d, h, d, 1)]
    if kind == "h2d_bidir":
        return [(h, d, d, 1), (d, h, d, 2)]
    if kind == "d2h_bidir":
        return [(d, h, d, 1), (h, d, d, 2)]
    if kind == "all_to_host":
        return [(d, h, d, 1)] + [(x, host[x], x, 2) for x in others]
    if kind == "host_to_all":
        return [(h, d, d, 1)] + [(host[x], x, x, 2) for x in others]
    if kind == "all_to_host_bidir":
        rest = [cp for x in others for cp in ((x, host[x], x, 2), (host[x], x, x, 2))]
        return [(d, h, d, 1), (h, d, d, 2), *rest]
    if kind == "host_to_all_bidir":
        rest = [cp for x in others for cp in ((x, host[x], x, 2), (host[x], x, x, 2))]
        return [(h, d, d, 1), (d, h, d, 2), *rest]
    if kind == "local":
        return [(d, d, d, 1)]
    row = devs[r]
    if kind == "d2d_read":  # the row GPU reads the column GPU's memory
        return [(d, row, row, 1)]
    if kind == "d2d_write":  # the row GPU writes into the column GPU
        return [(row, d, row, 1)]
    if kind == "d2d_bidir_read":
        return [(d, row, row, 1), (row, d, d, 1)]
    if kind == "d2d_bidir_write":
        return [(row, d, row, 1), (d, row, d, 1)]
    raise ValueError(kind)


def _fan_copies(kind: Kind, machine: Machine, devs: list[str], c: int) -> list[_Copy]:
    """all_to_one / one_to_all: every peer that can access GPU ``c`` copies at once."""
    d = devs[c]
    peers = [x for x in devs if x != d and peer_access(machine, d, x)]
    if kind == "all_to_one_write":
        return [(x, d, x, 1) for x in peers]
    if kind == "all_to_one_read":
        return [(x, d, d, 1) for x in peers]
    if kind == "one_to_all_write":
        return [(d, x, d, 1) for x in peers]
    return [(x, d, d, 1) for x in peers]  # one_to_all_read: d reads every peer


def nvbandwidth(ctx: Ctx, p: NvbandwidthParams, r: NvbandwidthResult) -> Gen:
    """Run test case ``p.testcase`` on the GPUs ``p.devices`` (module docstring)."""
    machine = ctx.machine
    devs = [d.name for d in machine.spec.devices] if p.devices == "all" else list(p.devices)
    for dev in devs:
        machine.spec.device(dev)  # KeyError for an unknown device
    tc = testcase(p.testcase)
    host = {d: machine.host_of(d) for d in devs}
    n = len(devs)
    d2d = tc.kind.startswith("d2d")
    rows = n if d2d else 1
    suffix = (
        ("_read1", "_read2", "_total")
        if tc.kind == "d2d_bidir_read"
        else (("_write1", "_write2", "_total") if tc.kind == "d2d_bidir_write" else ("",))
    )
    r.matrices = [Matrix(t, tc.name + s, rows, n) for t, s in zip(tc.titles, suffix, strict=True)]
    r.device_names = [machine.spec.device(d).model or d for d in devs]
    r.data_start = ctx.now
    total_bw = tc.kind.startswith(("all_to_one", "one_to_all"))
    for row in range(rows):
        for col in range(n):
            if d2d and (row == col or not peer_access(machine, devs[row], devs[col])):
                continue
            if total_bw:
                copies = _fan_copies(tc.kind, machine, devs, col)
                if not copies:
                    continue
            else:
                copies = _cell_copies(tc.kind, devs, host, row, col)
            values = yield from _measure(ctx, p, tc.engine, copies, total_bw)
            for m, v in zip(r.matrices, values, strict=False):
                m.cells[(row, col)] = v
    r.data_end = ctx.now
    r.sum_bandwidth = r.matrices[0].total
    r.cells = len(r.matrices[0].cells)
    yield from idle(ctx)


def _measure(
    ctx: Ctx, p: NvbandwidthParams, engine: CopyEngine, copies: list[_Copy], total_bw: bool
) -> Gen:
    """One cell: ``samples`` samples of all its copies at once; the measured copy's bandwidth
    (and, for two-copy vector cases, the second's and their total), or the total bandwidth."""
    machine = ctx.machine
    spread = ctx.cost.gpucopy.jitter
    flows = [
        copy_flow(machine, src, dst, initiator=ini, engine=engine) for src, dst, ini, _ in copies
    ]
    flows = [
        dataclasses.replace(fl, cap=cap)
        for fl, cap in zip(flows, shared_caps(machine, flows), strict=True)
    ]
    per_sample: list[list[float]] = []
    for _ in range(p.samples):
        t0 = ctx.now
        sizes = [p.buffer * p.loop_count * f for *_, f in copies]
        events = []
        for flow, nbytes in zip(flows, sizes, strict=True):
            delay = sum(jittered(ctx, spread, flow.latency) for _ in range(p.loop_count))
            events.append(ctx.env.process(run_copy(ctx, flow, nbytes, delay)))
        ends: list[float] = []
        for ev in events:
            end = yield ev
            ends.append(end)
        if total_bw:
            per_sample.append([sum(sizes) / (max(ends) - t0)])
        else:
            bws = [p.buffer * p.loop_count / (end - t0) for end in ends[:2]]
            per_sample.append([*bws, sum(bws)] if len(copies) == 2 and len(bws) == 2 else bws)
    stat = statistics.fmean if p.use_mean else statistics.median
    width = len(per_sample[0])
    return [stat(s[i] for s in per_sample) for i in range(width)]
