"""What a run records and how its results are named: metrics with units, time series,
per-tenant statistics, the fault log and the trace log.

**One naming scheme** serves ``summary.json``, ``series.csv``, ``trace.json`` and the report
(every name is listed in ``docs/metrics.md``): ``<scope>.<entity>.<quantity>``, where the scope
is ``tenant``, ``device``, ``nic``, ``link``, ``node`` or ``global`` (which has no entity), the
entity is node-qualified with ``/`` (``node/gpu0``, ``node03/pcie:gaudi0/up``; a single-node
platform's node is ``node``) and the quantity may carry a region (``vram.pinned_peak``) or a
key (``denied.ENOMEM``). A time series and the summary metrics made from it share the stem:
the series ``device.node/gpu0.vram.pinned`` gives ``device.node/gpu0.vram.pinned_peak`` and
``..._final``; ``tenant.kv.bytes`` is a series and, its last value, a metric.

**Components report their own results** (desmod's ``get_result_hook``): a metric is declared
with its unit and description where it is recorded -- a field declared with :func:`metric` on
a result dataclass (a workload's :class:`TenantResult`, the copy engine's statistics, the
teardown's leak count), reported by :func:`report_fields` -- or built by the component's
``report()``. Nothing guesses a unit from a name.

Series store a point only when the value changes, so an idle device costs nothing. Output is
deterministic: keys are sorted and floats printed with ``repr``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

UNITS = ("B/s", "B", "s", "count", "ratio")
"""The units a metric may have."""

SCOPES = ("tenant", "device", "nic", "link", "node", "global")
"""The first part of every metric and series name."""


@dataclass(frozen=True, slots=True)
class Metric:
    """One headline number: its value, its unit (one of :data:`UNITS`) and what it
    measures."""

    value: float | int
    unit: str
    description: str = ""

    def __post_init__(self) -> None:
        # counts and bytes are whole numbers: ``5``, never ``5.0``, in summary.json and claims
        if (
            self.unit in ("count", "B")
            and isinstance(self.value, float)
            and self.value.is_integer()
        ):
            object.__setattr__(self, "value", int(self.value))

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "description": self.description}


def num(x: float) -> float:
    """Floats rounded to 12 significant digits: stable text, no float noise in summaries."""
    return float(f"{x:.12g}")


def metric(unit: str, description: str, *, default: Any = None, integral: bool = False) -> Any:
    """A dataclass field that is a reported metric, with its unit and description.

    :func:`report_fields` reports it unless its value is None (not known yet, e.g. a setup
    time before setup ended): a float rounded by :func:`num`, or with ``integral`` an int."""
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r} is not one of {', '.join(UNITS)}")
    meta = {"unit": unit, "description": description, "integral": integral}
    return field(default=default, metadata=meta)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A declared metric: its name below the component (``setup_time``), unit, meaning.

    A name may hold one placeholder in angle brackets for a family of metrics, one per key
    (``denied.<ERRNO>``); :meth:`fill` makes the member. ``absent`` is the value a metric has
    when it is not reported -- 0 for a count of something that is reported only once it
    happened -- or None when an unreported metric is simply not known (a setup time before
    setup ended); claims (:mod:`pinlab.scenarios.claims`) read it."""

    name: str
    unit: str
    description: str
    absent: float | None = None

    def fill(self, key: str) -> MetricSpec:
        """The member of a family: ``<...>`` in the name and description replaced by ``key``."""
        start, end = self.name.find("<"), self.name.find(">")
        if start < 0 or end < start:
            raise ValueError(f"metric {self.name!r} is not a family (no <placeholder>)")
        hole = self.name[start : end + 1]
        return MetricSpec(
            self.name.replace(hole, key), self.unit, self.description.replace(hole, key)
        )

    def __call__(self, value: float | int) -> Metric:
        """The metric with ``value``, this unit and this description."""
        return Metric(value, self.unit, self.description)


def declared(cls: type) -> list[MetricSpec]:
    """The metrics a result dataclass declares, in field order (for listings and docs)."""
    return [
        MetricSpec(f.name, f.metadata["unit"], f.metadata["description"])
        for f in dataclasses.fields(cls)
        if "unit" in f.metadata
    ]


def _specs(*specs: MetricSpec) -> dict[str, MetricSpec]:
    return {s.name: s for s in specs}


TENANT_METRICS: dict[str, MetricSpec] = _specs(
    MetricSpec("throughput", "B/s", "bytes moved per second of the data phase (after setup)"),
    MetricSpec("bytes", "B", "bytes moved"),
    MetricSpec("transfers", "count", "transfers completed"),
    MetricSpec("latency_p50", "s", "median latency"),
    MetricSpec("latency_p99", "s", "99th percentile"),
    MetricSpec("stall_time", "s", "waiting for fences and ODP faults"),
    MetricSpec("odp_faults", "count", "NIC page faults taken"),
    MetricSpec("denials", "count", "calls the kernel refused"),
    MetricSpec("denied.<ERRNO>", "count", "calls refused with -<ERRNO>", absent=0),
    MetricSpec("denied_by.<policy>", "count", "refusals by the <policy> policy", absent=0),
    MetricSpec("killed", "count", "1 if the process was gone at the end"),
    MetricSpec("failed", "count", "1 if an unhandled error ended it"),
)
"""What every tenant reports (``tenant.<name>.<metric>``, :meth:`Tenant.report
<pinlab.sim.engine.Tenant.report>`), beyond its workload's result fields."""


def report_fields(obj: Any, prefix: str) -> dict[str, Metric]:
    """``{"<prefix>.<field>": Metric}`` for every field of ``obj`` declared with
    :func:`metric` whose value is not None."""
    out: dict[str, Metric] = {}
    for f in dataclasses.fields(obj):
        meta = f.metadata
        value = getattr(obj, f.name)
        if "unit" not in meta or value is None:
            continue
        shown = int(value) if meta["integral"] else num(float(value))
        out[f"{prefix}.{f.name}"] = Metric(shown, meta["unit"], meta["description"])
    return out


def bump(count: int | None, n: int = 1) -> int:
    """``count + n`` for a counter that stays None (unreported) until it first counts."""
    return (count or 0) + n


@dataclass(slots=True)
class TenantResult:
    """What a workload reports beyond :class:`TenantStats`; each workload subclasses it with
    its own fields declared with :func:`metric` (``pinlab.sim.workloads``), and they become
    ``tenant.<name>.<field>`` once the workload has started.

    ``data_start``/``data_end`` (seconds, not metrics) bound the data phase the tenant's
    throughput is measured over: after its setup -- allocation, registration, migration -- to
    the end of its work (default: the tenant's start and end, or the end of the run)."""

    data_start: float | None = None
    data_end: float | None = None


@dataclass(frozen=True, slots=True)
class FaultRecord:
    """One injected fault as it fired: when, what, on which node, and what it did."""

    at: float
    kind: str  # "kill" | "hot-unplug" | "nic-reset"
    target: str
    node: str
    killed: int = 0  # processes a hot-unplug killed
    mrs_dropped: int = 0  # MRs a NIC reset dropped


@dataclass(slots=True)
class TenantStats:
    """What one tenant (a workload process) moved, how long it waited and how its transfers
    took; its denials are its process's (``Process.stats``), counted once at the syscall
    boundary."""

    name: str
    bytes: float = 0.0
    transfers: int = 0
    latencies: list[float] = field(default_factory=list)
    stall_time: float = 0.0  # waiting for fences and ODP faults
    odp_faults: int = 0
    started: float | None = None
    finished: float | None = None
    on_change: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    """Called after every recorded transfer (the simulator's sampler, instead of polling)."""

    def record_transfer(self, nbytes: float, latency: float) -> None:
        self.bytes += nbytes
        self.transfers += 1
        self.latencies.append(latency)
        if self.on_change is not None:
            self.on_change()

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


class HeldSeries(Protocol):
    """Series points a source keeps in its own form until someone reads them (the links' of
    :mod:`pinlab.sim.sampling`, one array pair per tick): :class:`SeriesMap` asks it to
    :meth:`flush` them into :class:`Series` before any read that could see them."""

    @property
    def pending(self) -> bool:
        """Whether it holds points not flushed yet."""
        ...

    def owns(self, key: str) -> bool:
        """Whether series ``key`` could receive its points (a test on the name alone)."""
        ...

    def flush(self, into: dict[str, Series]) -> None:
        """Append the points held, in time order, to their series in ``into`` (created
        where missing), and hold none."""
        ...


class SeriesMap(MutableMapping[str, Series]):
    """The recorder's series by name: a dict, and the sources that hold some of its points
    until they are read (:class:`HeldSeries`).

    A read that could see a held point flushes its source first, so every read sees exactly
    the series of a recorder that stored each point as it came: looking up a name the source
    :meth:`~HeldSeries.owns` flushes it, and so does anything that lists the names
    (iterating, ``len``, ``keys``/``items``/``values``); looking up any other name does not.
    What is never read is never turned into :class:`Series` objects: at 131 072 accelerators
    the 1.8 M link series (``cluster-128``'s links), which a run that writes no
    ``series.csv`` or trace never reads. Pickling flushes."""

    __slots__ = ("_data", "_sources")

    def __init__(self) -> None:
        self._data: dict[str, Series] = {}
        self._sources: list[HeldSeries] = []

    def hold(self, source: HeldSeries) -> None:
        """Let ``source`` keep its points until they are read."""
        self._sources.append(source)

    def _flush(self, key: str | None = None) -> None:
        """Flush the sources holding points (only those owning ``key``, if given)."""
        for source in self._sources:
            if source.pending and (key is None or source.owns(key)):
                source.flush(self._data)

    def __getitem__(self, key: str) -> Series:
        if self._sources:
            self._flush(key)
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        if self._sources:
            self._flush(key)
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if self._sources:
            self._flush(key)
        return key in self._data

    def __setitem__(self, key: str, value: Series) -> None:
        self._flush(key)
        self._data[key] = value

    def __delitem__(self, key: str) -> None:
        self._flush(key)
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        self._flush()
        return iter(self._data)

    def __len__(self) -> int:
        self._flush()
        return len(self._data)

    def __getstate__(self) -> dict[str, Series]:
        self._flush()
        return self._data

    def __setstate__(self, state: dict[str, Series]) -> None:
        self._data = state
        self._sources = []


SINGLE_NODE = "node"  # the node name of a single-node platform (pinlab.sim.engine)


def split_name(name: str) -> tuple[str, str, str]:
    """``(scope, entity, quantity)`` of a metric or series name (module docstring):
    ``device.node/gpu0.vram.used`` → ``("device", "node/gpu0", "vram.used")``,
    ``global.denials`` → ``("global", "", "denials")``."""
    scope, _, rest = name.partition(".")
    if scope == "global":
        return scope, "", rest
    entity, _, quantity = rest.partition(".")
    return scope, entity, quantity


SERIES_UNITS: dict[tuple[str, str], str] = {
    ("device", "used"): "B",
    ("device", "pinned"): "B",
    ("device", "free"): "B",
    ("device", "fragmentation"): "ratio",
    ("tenant", "bytes"): "B",
    ("tenant", "denials"): "count",
    ("link", "utilisation"): "ratio",
    ("node", "stale_dma_incidents"): "count",
}
"""The unit of each time series by (scope, last part of its quantity) -- the series
``Recorder.sample`` is called with (``docs/metrics.md``, ``series.csv``)."""


_CSV_VALUES = 1 << 16
"""How many distinct times, and values, :meth:`Recorder.series_csv` keeps the text of while it
writes (a run's ticks and repeated values fit; a table as large as the points would not pay)."""


def _csv_number(x: float) -> str:
    """``x`` as ``series.csv`` writes it: ``3`` for a whole number, else :func:`num`'s digits."""
    if x == int(x) and abs(x) < 2**53:
        return str(int(x))
    return repr(num(x))


def series_unit(name: str) -> str:
    """The unit of series ``name`` (``device.node/gpu0.vram.pinned`` → ``B``); ``""`` for a
    series this table does not know."""
    scope, _entity, quantity = split_name(name)
    return SERIES_UNITS.get((scope, quantity.rpartition(".")[2]), "")


def iter_series(names: Iterable[str], scope: str, quantity: str) -> Iterator[tuple[str, str, str]]:
    """``(name, entity, quantity)`` of every name in ``names`` of ``scope`` whose quantity is
    ``quantity`` or ends with it (``"pinned"`` matches ``vram.pinned``), in sorted order."""
    for name in sorted(names):
        s, entity, q = split_name(name)
        if s == scope and entity and (q == quantity or q.endswith("." + quantity)):
            yield name, entity, q


TraceArgs = Mapping[str, float | int | str]
"""A trace entry's ``args``: read-only once logged (:meth:`Recorder.log` may share one mapping
between entries with equal arguments)."""

SHARED_ARGS = 4096
"""How many distinct ``args`` mappings :meth:`Recorder.log` shares at most (beyond, an entry
keeps its own): entries repeat a handful of argument sets, and a run whose arguments never
repeat should not pay a table for them."""


LINK_TRACK = "link "
"""The prefix of a link's trace process name: ``"link pcie:gpu0"``."""


def track_name(node: str, name: str) -> str:
    """The trace process name of ``name`` (a device, a NIC, or a link as ``"link <link>"``) on
    ``node``: the bare name on a single-node platform; in a cluster ``"<node>/<name>"``, and
    ``"link <node>/<link>"`` for a link, so that a link's slices and its utilisation counters
    share one process whichever of them names it."""
    if node == SINGLE_NODE:
        return name
    if name.startswith(LINK_TRACK):
        return f"{LINK_TRACK}{node}/{name[len(LINK_TRACK) :]}"
    return f"{node}/{name}"


def track_node(process: str) -> str | None:
    """The node of trace process ``process`` (:func:`track_name` undone): None on a single-node
    platform and for the run's own tracks (the injected faults' ``tenants``). Platform names
    hold no ``/`` (``platform.spec.Name``), so the first one ends the node's name."""
    node, slash, _ = process.removeprefix(LINK_TRACK).partition("/")
    return node if slash else None


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
    """What one simulation run recorded: time series (named as in the module docstring),
    tenant statistics, the fault log and the event log.

    Besides metrics, the recorder keeps the trace log ``trace.json`` is made of
    (:mod:`pinlab.report.trace`): :attr:`slices`, :attr:`instants` and :attr:`processes` (the
    kind of every trace process: ``"device"``, ``"nic"``, ``"link"``, ``"tenants"``). The log
    never feeds a metric, so recording it cannot change ``summary.json``; set the class
    attribute :attr:`tracing` to ``False`` to switch it off.
    """

    tracing: bool = True

    def __init__(self) -> None:
        self.series: SeriesMap = SeriesMap()
        self.tenants: dict[str, TenantStats] = {}
        self.faults: list[FaultRecord] = []
        self.events: list[tuple[float, str, str]] = []  # (t, kind, detail) instants
        self.slices: list[TraceSlice] = []
        self.instants: list[TraceInstant] = []
        self.processes: dict[str, str] = {}  # trace process name -> kind
        self._flows = itertools.count(1)
        # one object per distinct thread name and argument set of the log (see ``log``)
        self._threads: dict[str, str] = {}
        self._args: dict[tuple[tuple[str, type, int | str], ...], TraceArgs] = {}

    # -- trace log -------------------------------------------------------------------------
    def add_process(self, name: str, kind: str) -> None:
        """Declare trace process ``name`` of ``kind`` (so it gets a track even if idle)."""
        self.processes.setdefault(name, kind)

    def log(self, entry: TraceSlice | TraceInstant) -> None:
        """Append a slice or an instant to the trace log (no-op when not tracing).

        A slice's thread name and ``args`` are stored once per distinct value: a cluster's
        all-reduce logs a dozen slices per accelerator, each made with a fresh thread string
        and a fresh ``{"bytes": ..., "location": ...}`` dict of one of a few values -- at
        131 072 accelerators ~0.45 GiB of copies. Arguments that ``trace.json`` prints
        differently are not shared: of different types (``4096`` and ``4096.0``), or floats
        equal but not the same (``0.0`` and ``-0.0``: floats are keyed by their exact bits)."""
        if not self.tracing:
            return
        if isinstance(entry, TraceSlice):
            entry.start, entry.dur = float(entry.start), float(entry.dur)
            thread = entry.thread
            entry.thread = self._threads.setdefault(thread, thread)
            args = entry.args
            if args is not None:
                key = tuple(
                    (k, v.__class__, v.hex() if isinstance(v, float) else v)
                    for k, v in args.items()
                )
                shared = self._args.get(key)
                if shared is not None:
                    entry.args = shared
                elif len(self._args) < SHARED_ARGS:
                    self._args[key] = args
            self.slices.append(entry)
        else:
            entry.t = float(entry.t)
            self.instants.append(entry)

    def new_flow(self) -> int:
        """A fresh flow id joining the stages of one staged message (1, 2, ... per run)."""
        return next(self._flows)

    def tenant(self, name: str) -> TenantStats:
        stats = self.tenants.get(name)
        if stats is None:
            stats = self.tenants[name] = TenantStats(name)
        return stats

    def bind(self, key: str) -> Series:
        """Series ``key``, created empty on first use (a sampler binds its series once)."""
        series: Series | None = self.series.get(key)
        if series is None:
            series = self.series[key] = Series()
        return series

    def sample(self, key: str, t: float, value: float) -> None:
        self.bind(key).set(t, value)

    def event(self, t: float, kind: str, detail: str) -> None:
        self.events.append((t, kind, detail))

    def series_csv(self) -> str:
        """Every series as CSV rows ``series,time_s,value,unit``, sorted by series then time.

        Times are written at nanosecond resolution (a sample time built by adding intervals
        reads ``4.05``, not ``4.049999999999994``), values as integers when they are whole
        and otherwise to 12 significant digits (:func:`num`), units by :func:`series_unit`."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["series", "time_s", "value", "unit"])
        # Each distinct time and value is formatted once: a tick's time is shared by every
        # series sampled at it, and most values repeat (0, a region's size); equal numbers --
        # 0 and 0.0, 4096 and 4096.0 -- are written alike, so they may share their text.
        times: dict[float, str] = {}
        values: dict[float, str] = {}

        def time_text(t: float) -> str:
            text = times.get(t)
            if text is None:
                text = _csv_number(round(t, 9))
                if len(times) < _CSV_VALUES:
                    times[t] = text
            return text

        def value_text(v: float) -> str:
            text = values.get(v)
            if text is None:
                text = _csv_number(v)
                if len(values) < _CSV_VALUES:
                    values[v] = text
            return text

        for key in sorted(self.series):
            unit = series_unit(key)
            writer.writerows(
                (key, time_text(t), value_text(v), unit) for t, v in self.series[key].points
            )
        return buf.getvalue()
