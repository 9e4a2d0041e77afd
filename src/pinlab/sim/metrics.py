"""The metrics recorder: counters, time series and per-tenant statistics of one run.

Everything a verdict needs is recorded here (issue "The simulator", item 3): per tenant
throughput, transfer latencies and denials by errno and by policy; per device pinned, used and
free bytes and fragmentation over time, evictions, bytes migrated, move_notify calls, ODP
faults and stall time; per link utilisation; stale-DMA incidents. Values carry units in their
key names' registry (:data:`UNITS`) so ``summary.json`` can state them.

Series store a point only when the value changes, so an idle device costs nothing. Output is
deterministic: keys are sorted and floats printed with ``repr``.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections import Counter
from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class TenantStats:
    """What one tenant (a workload process) achieved and suffered."""

    name: str
    bytes: float = 0.0
    transfers: int = 0
    latencies: list[float] = field(default_factory=list)
    denials: Counter[str] = field(default_factory=Counter)  # "-ENOMEM" -> n
    denials_by_policy: Counter[str] = field(default_factory=Counter)  # "dmem-pin-max" -> n
    stall_time: float = 0.0  # waiting for fences and ODP faults
    odp_faults: int = 0
    started: float | None = None
    finished: float | None = None

    def record_transfer(self, nbytes: float, latency: float) -> None:
        self.bytes += nbytes
        self.transfers += 1
        self.latencies.append(latency)

    def throughput(self, elapsed: float) -> float:
        """Bytes per second over ``elapsed``."""
        return self.bytes / elapsed if elapsed > 0 else 0.0

    def percentile(self, q: float) -> float:
        """Latency percentile ``q`` (0-100) in seconds; 0 when nothing was transferred."""
        if not self.latencies:
            return 0.0
        return float(np.percentile(np.asarray(self.latencies), q))


class Series:
    """A step function of time: (t, value) points, stored only on change."""

    __slots__ = ("points",)

    def __init__(self) -> None:
        self.points: list[tuple[float, float]] = []

    def set(self, t: float, value: float) -> None:
        points = self.points
        if points and points[-1][1] == value:
            return
        if points and points[-1][0] == t:
            points[-1] = (t, value)
        else:
            points.append((t, value))

    @property
    def last(self) -> float:
        return self.points[-1][1] if self.points else 0.0

    def peak(self) -> float:
        return max((v for _, v in self.points), default=0.0)

    def time_average(self, until: float) -> float:
        """The mean value over [first point, until]."""
        pts = self.points
        if not pts or until <= pts[0][0]:
            return pts[-1][1] if pts else 0.0
        total = 0.0
        for (t0, v), (t1, _) in zip(pts, [*pts[1:], (until, 0.0)], strict=True):
            total += v * (min(t1, until) - t0)
        return total / (until - pts[0][0])


SINGLE_NODE = "node"  # the node name of a single-node platform (pinlab.sim.engine)

TraceArgs = dict[str, float | int | str]


def track_name(node: str, name: str) -> str:
    """The trace process name of ``name`` (a device, NIC or link) on ``node``: the bare name on
    a single-node platform, ``"<node>/<name>"`` in a cluster."""
    return name if node == SINGLE_NODE else f"{node}/{name}"


@dataclass(slots=True)
class TraceSlice:
    """One timed operation for ``trace.json``: a copy job, a transfer, an ODP fault.

    ``process``/``thread`` name its track (a device, NIC or link, and an engine, queue pair or
    DMA lane on it); ``start`` and ``dur`` are in seconds; ``flow`` joins the stages of one
    staged message (:meth:`Recorder.new_flow`)."""

    process: str
    thread: str
    name: str
    cat: str
    start: float
    dur: float
    args: TraceArgs | None = None
    flow: int | None = None


@dataclass(slots=True)
class TraceInstant:
    """One instant for ``trace.json``: a move_notify, an eviction, a denial. ``thread`` None
    means process scope."""

    t: float
    process: str
    thread: str | None
    name: str
    detail: str = ""


class Recorder:
    """All metrics of one simulation run.

    Besides metrics, the recorder keeps the trace log ``trace.json`` is made of
    (:mod:`pinlab.report.trace`): :attr:`slices`, :attr:`instants` and :attr:`processes` (the
    kind of every trace process: ``"device"``, ``"nic"``, ``"link"``, ``"tenants"``). The log
    never feeds a metric, so recording it cannot change ``summary.json``; set the class
    attribute :attr:`tracing` to ``False`` to switch it off.
    """

    tracing: bool = True

    def __init__(self) -> None:
        self.series: dict[str, Series] = {}
        self.counters: Counter[str] = Counter()
        self.tenants: dict[str, TenantStats] = {}
        self.events: list[tuple[float, str, str]] = []  # (t, kind, detail) instants
        self.slices: list[TraceSlice] = []
        self.instants: list[TraceInstant] = []
        self.processes: dict[str, str] = {}  # trace process name -> kind
        self._flows = itertools.count(1)

    # -- trace log -------------------------------------------------------------------------
    def add_process(self, name: str, kind: str) -> None:
        """Declare trace process ``name`` of ``kind`` (so it gets a track even if idle)."""
        self.processes.setdefault(name, kind)

    def slice(
        self,
        process: str,
        thread: str,
        name: str,
        cat: str,
        start: float,
        end: float,
        args: TraceArgs | None = None,
        flow: int | None = None,
    ) -> None:
        """Log one operation from ``start`` to ``end`` seconds (no-op when not tracing)."""
        if self.tracing:
            self.slices.append(
                TraceSlice(process, thread, name, cat, float(start), float(end - start), args, flow)
            )

    def instant(
        self, t: float, process: str, thread: str | None, name: str, detail: str = ""
    ) -> None:
        """Log one instant (no-op when not tracing)."""
        if self.tracing:
            self.instants.append(TraceInstant(float(t), process, thread, name, detail))

    def new_flow(self) -> int:
        """A fresh flow id joining the stages of one staged message (1, 2, ... per run)."""
        return next(self._flows)

    def tenant(self, name: str) -> TenantStats:
        stats = self.tenants.get(name)
        if stats is None:
            stats = self.tenants[name] = TenantStats(name)
        return stats

    def sample(self, key: str, t: float, value: float) -> None:
        series = self.series.get(key)
        if series is None:
            series = self.series[key] = Series()
        series.set(t, value)

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] += n

    def event(self, t: float, kind: str, detail: str) -> None:
        self.events.append((t, kind, detail))

    def series_csv(self) -> str:
        """Every series as CSV rows ``series,time_s,value``, sorted by series then time."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["series", "time_s", "value"])
        for key in sorted(self.series):
            for t, v in self.series[key].points:
                writer.writerow([key, repr(float(t)), repr(float(v))])
        return buf.getvalue()
