"""The simulator's time series, sampled on change: a tick costs what changed since the last one.

Every ``sample_interval`` the simulation records (names: :mod:`pinlab.sim.metrics`) every
device region's used/pinned/free bytes and fragmentation, every tenant's cumulative bytes and
denials, every node's stale-DMA incident count, and every link's mean utilisation since the
last tick. A series stores a point only when its value changes, so a tick that re-read
everything would record nothing new for all that stayed idle -- and cost as much as one
where everything changed.

Here the sources say when they change, and a tick reads only those:

* a device's allocators and pins (:meth:`ExporterDriver.watch_regions
  <pinlab.drivers.base.ExporterDriver.watch_regions>`; a driver that cannot say is read on
  every tick), a node's stale-DMA detector (``StaleDmaDetector.on_incident``), a tenant's
  transfers (``TenantStats.on_change``) and denials (``ProcessStats.on_deny``) put their
  :class:`_Probe` on the dirty list once; the tick reads the dirty probes, in construction
  order, into series bound once;
* the flow network names the links that carried anything since the last tick, with their
  byte counters, in one pass over them (:meth:`FlowNetwork.take_touched
  <pinlab.sim.flows.FlowNetwork.take_touched>`: at a million links, reading a link object is
  a cache miss, so each is read once per tick); the sampler keeps, in arrays by link index,
  the byte count each link had at the last tick and whether its last point is not 0 (an
  idle one records its drop to 0 once). The touched
  links' utilisations are computed in one vector operation (rounded exactly as Python
  rounds, :func:`round6`), and only the links whose value changed get a point; an idle
  link's drop to 0 needs no computation at all. The links' points are held as arrays, one
  pair per tick, and become :class:`Series` only when the recorder's series are read
  (:class:`LinkPoints`): a large cluster's run that writes no ``series.csv`` or trace never
  pays for a million series.

The points are exactly those of reading every source on every tick: a source that did not
change would have stored nothing. Two details of that reading are kept: the first tick (at
time 0) reads every source; a link gets its first point at the first tick after time 0 that it
carried something, and every link at the second such tick (the utilisation since the first),
once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pinlab.drivers.base import ExporterDriver
from pinlab.sim.flows import Link
from pinlab.sim.metrics import Recorder, Series, TraceInstant, track_name

if TYPE_CHECKING:
    from pinlab.sim.engine import NodeState, Simulation, Tenant


class _Probe:
    """One source of series; on the dirty list at most once."""

    __slots__ = ("dirty", "order", "queue")

    def __init__(self, order: int, queue: list[_Probe]) -> None:
        self.order = order
        self.queue = queue
        self.dirty = False

    def mark(self) -> None:
        """The source changed: read it at the next tick."""
        if not self.dirty:
            self.dirty = True
            self.queue.append(self)

    def read(self, rec: Recorder, now: float) -> None:
        raise NotImplementedError


class _DeviceProbe(_Probe):
    """A device's regions (and, when tracing, its ``move_notify`` calls since the last read)."""

    __slots__ = ("device", "driver", "move_notifies", "node", "regions")

    def __init__(
        self, order: int, queue: list[_Probe], node: NodeState, device: str, driver: ExporterDriver
    ) -> None:
        super().__init__(order, queue)
        self.node = node
        self.device = device
        self.driver = driver
        self.move_notifies = 0
        self.regions: dict[str, tuple[Series, Series, Series, Series]] = {}

    def read(self, rec: Recorder, now: float) -> None:
        driver = self.driver
        if self.node.machine.exporters.get(self.device) is not driver:
            return  # unplugged: its last samples were taken by the unplug
        regions = self.regions
        for region in driver.regions():
            bound = regions.get(region.name)
            if bound is None:
                base = f"device.{self.node.name}/{self.device}.{region.name}"
                bound = regions[region.name] = (
                    rec.bind(f"{base}.used"),
                    rec.bind(f"{base}.pinned"),
                    rec.bind(f"{base}.free"),
                    rec.bind(f"{base}.fragmentation"),
                )
            used, pinned, free, fragmentation = bound
            used.set(now, region.used)
            pinned.set(now, region.pinned)
            free.set(now, region.free)
            fragmentation.set(now, round(region.fragmentation, 6))
        if rec.tracing:
            count = driver.move_notifies
            if count > self.move_notifies:
                detail = f"{count - self.move_notifies} calls"
                process = track_name(self.node.name, self.device)
                rec.log(TraceInstant(now, process, None, "move_notify", detail))
            self.move_notifies = count


class _NodeProbe(_Probe):
    """A node's stale-DMA incident count."""

    __slots__ = ("node", "series")

    def __init__(self, order: int, queue: list[_Probe], node: NodeState, series: Series) -> None:
        super().__init__(order, queue)
        self.node = node
        self.series = series

    def read(self, rec: Recorder, now: float) -> None:
        self.series.set(now, len(self.node.machine.system.detector.incidents))


class _TenantProbe(_Probe):
    """A tenant's cumulative bytes and denials."""

    __slots__ = ("bytes", "denials", "tenant")

    def __init__(self, order: int, queue: list[_Probe], tenant: Tenant, rec: Recorder) -> None:
        super().__init__(order, queue)
        self.tenant = tenant
        self.bytes = rec.bind(f"tenant.{tenant.name}.bytes")
        self.denials = rec.bind(f"tenant.{tenant.name}.denials")

    def read(self, rec: Recorder, now: float) -> None:
        tenant = self.tenant
        self.bytes.set(now, tenant.stats.bytes)
        self.denials.set(now, tenant.proc.stats.total)


_Indices = Sequence[int] | np.ndarray
_Values = Sequence[float] | np.ndarray


SAME_TICK = 1e-6
"""Two ticks closer than this fraction of the sample interval are one for the links: the
periodic ticks add up the interval, so the last can fall a rounding error short of the run's
end, where ``Simulation.run`` samples once more -- a link's utilisation over those ~1e-15 s
would be noise (``1.04`` seen), beside a point that ``series.csv`` prints at the same time."""


class Sampler:
    """The series of one :class:`~pinlab.sim.engine.Simulation` (module docstring)."""

    __slots__ = (
        "_any_nonzero",
        "_before",
        "_capacity",
        "_dirty",
        "_last",
        "_last_value",
        "_link_ticks",
        "_links",
        "_nonzero",
        "_order",
        "_points",
        "_polled",
        "sim",
    )

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self._dirty: list[_Probe] = []
        self._polled: list[_Probe] = []  # devices whose driver cannot say when it changed
        self._order = 0
        rec = sim.recorder
        for node in sim.nodes.values():
            for dev, driver in node.machine.exporters.items():
                probe = _DeviceProbe(self._next(), self._dirty, node, dev, driver)
                if driver.watch_regions(probe.mark):
                    probe.mark()
                else:
                    self._polled.append(probe)
            series = rec.bind(f"node.{node.name}.stale_dma_incidents")
            stale = _NodeProbe(self._next(), self._dirty, node, series)
            node.machine.system.detector.on_incident = stale.mark
            stale.mark()
        # by link index: the network's links, their capacities, the bytes each had carried
        # at the last tick and its series' last value (NaN: no point yet)
        self._links: list[Link] = []
        self._capacity = np.empty(0)
        self._before = np.empty(0)
        self._last_value = np.empty(0)
        self._points = LinkPoints()  # the links' points, until read
        rec.series.hold(self._points)
        self._nonzero = np.empty(0, dtype=bool)  # whether the link's last point is not 0
        self._any_nonzero = False  # whether any is
        self._link_ticks = 0  # ticks after time 0 so far
        self._last = 0.0

    def _next(self) -> int:
        self._order += 1
        return self._order

    def add_tenant(self, tenant: Tenant) -> None:
        """Sample ``tenant`` from the next tick on, and whenever it moved bytes or was denied."""
        probe = _TenantProbe(self._next(), self._dirty, tenant, self.sim.recorder)
        tenant.stats.on_change = probe.mark
        tenant.proc.stats.on_deny = probe.mark
        probe.mark()

    def sample(self) -> None:
        """One tick at ``env.now``: the sources that changed since the last, and the links
        (unless the last tick was less than :data:`SAME_TICK` of an interval ago)."""
        sim = self.sim
        now = sim.env.now
        rec = sim.recorder
        dirty = self._dirty
        if dirty or self._polled:
            batch = sorted([*dirty, *self._polled], key=_order_of)
            dirty.clear()
            for probe in batch:
                probe.dirty = False
                probe.read(rec, now)
        dt = now - self._last
        if dt <= self.sim.sample_interval * SAME_TICK:
            return
        self._sample_links(now, dt)
        self._last = now

    def _sample_links(self, now: float, dt: float) -> None:
        net = self.sim.net
        net.advance()  # bring every busy link's byte count up to now, once
        links = self._links
        if len(links) < len(net.links):  # links added since the last tick
            added = list(itertools.islice(net.links.values(), len(links), None))
            links.extend(added)
            self._points.names.extend([link.name for link in added])
            self._capacity = np.append(self._capacity, [link.capacity for link in added])
            self._before = np.append(self._before, np.zeros(len(added)))
            self._last_value = np.append(self._last_value, np.full(len(added), np.nan))
            self._nonzero = np.append(self._nonzero, np.zeros(len(added), dtype=bool))
        self._link_ticks += 1
        first = self._link_ticks == 1
        index, carried = net.take_touched()
        if self._link_ticks == 2:
            self._record(
                now, dt, np.arange(len(links)), [link.bytes_carried for link in links], False
            )
            self._any_nonzero = bool(self._nonzero.any())
            return
        idle = None
        if self._any_nonzero:
            # The links whose last point is not 0 and that were idle all along since the
            # last tick: each was recorded then (``before`` holds its count), carried
            # nothing since, so its utilisation is 0 exactly -- a new point, as its last one
            # is not.
            idle = self._nonzero.copy()
            idle[index] = False
            idle = np.flatnonzero(idle)
        self._record(now, dt, index, carried, first)
        if idle is not None and len(idle):
            self._nonzero[idle] = False
            self._last_value[idle] = 0.0
            self._points.append(now, idle, np.zeros(len(idle)))
        self._any_nonzero = bool(self._nonzero.any())

    def _record(
        self, now: float, dt: float, index: _Indices, carried: Sequence[float], first: bool
    ) -> None:
        """The utilisation since the last tick of each link ``index`` (its byte counter now:
        ``carried``), a point where it differs from the link's last; at the first tick, only
        the links that carried something."""
        if len(index) < VECTOR_MIN:
            self._record_each(now, dt, index, carried, first)
            return
        at = np.asarray(index, dtype=np.intp)
        now_carried = np.asarray(carried, dtype=float)
        previous = self._before[at]
        if first:  # only the links that carried something
            moved = now_carried != previous
            at, now_carried, previous = at[moved], now_carried[moved], previous[moved]
        values = round6((now_carried - previous) / (self._capacity[at] * dt))
        self._before[at] = now_carried
        # a point where the value differs from the series' last (or it has none: NaN)
        changed = values != self._last_value[at]
        self._last_value[at] = values
        self._nonzero[at] = values != 0
        if changed.any():
            self._points.append(now, at[changed], values[changed])

    def _record_each(
        self, now: float, dt: float, index: _Indices, carried: Sequence[float], first: bool
    ) -> None:
        """:meth:`_record` for a few links, one by one (numpy's per-call cost would exceed
        the work): the same points, ``round`` in place of :func:`round6`."""
        before = self._before
        last_value = self._last_value
        nonzero = self._nonzero
        links = self._links
        changed: list[int] = []
        values: list[float] = []
        for i, now_carried in zip(index, carried, strict=True):
            previous = float(before[i])
            if first and now_carried == previous:
                continue
            value = round((now_carried - previous) / (links[i].capacity * dt), 6)
            before[i] = now_carried
            if value != last_value[i]:  # NaN (no point yet) differs from every value
                changed.append(i)
                values.append(value)
                last_value[i] = value
            nonzero[i] = value != 0
        if changed:
            self._points.append(now, changed, values)


class LinkPoints:
    """The links' utilisation points (series ``link.<name>.utilisation``), held as one pair
    of sequences per tick -- the links' indices and their new values -- until the recorder's
    series are read (:class:`~pinlab.sim.metrics.SeriesMap`, :class:`HeldSeries
    <pinlab.sim.metrics.HeldSeries>`).

    A tick of a large cluster gives up to every link a point (at 131 072 accelerators, 1.8 M
    at the second tick), and making a :class:`Series` and a tuple for each costs more than
    computing the values; a run that writes neither ``series.csv`` nor a trace never reads
    them. Held, a point costs two array entries; a flush creates the series a recorder
    storing each point at once would have (points on change only, in time order)."""

    __slots__ = ("_ticks", "names")

    def __init__(self) -> None:
        self.names: list[str] = []  # by link index
        self._ticks: list[tuple[float, _Indices, _Values]] = []

    @property
    def pending(self) -> bool:
        return bool(self._ticks)

    def owns(self, key: str) -> bool:
        return key.startswith("link.") and key.endswith(".utilisation")

    def append(self, now: float, index: _Indices, values: _Values) -> None:
        """The points at ``now`` of the links ``index`` (distinct, one point per link and
        tick, ticks in time order): ``values``, each differing from the link's last."""
        self._ticks.append((now, index, values))

    def flush(self, into: dict[str, Series]) -> None:
        ticks = self._ticks
        if not ticks:
            return
        index = np.concatenate([np.asarray(i, dtype=np.intp) for _, i, _ in ticks])
        values = np.concatenate([np.asarray(v, dtype=float) for _, _, v in ticks])
        times = np.repeat([t for t, _, _ in ticks], [len(i) for _, i, _ in ticks])
        ticks.clear()
        order = np.argsort(index, kind="stable")  # by link, each link's points in time order
        index, times_list, values_list = index[order], times[order].tolist(), values[order].tolist()
        bounds = [0, *(np.flatnonzero(np.diff(index)) + 1).tolist(), len(index)]
        names = self.names
        firsts = index[bounds[:-1]].tolist()
        for a, b, i in zip(bounds[:-1], bounds[1:], firsts, strict=True):
            key = f"link.{names[i]}.utilisation"
            series = into.get(key)
            if series is None:
                series = into[key] = Series()
            series.points.extend(zip(times_list[a:b], values_list[a:b], strict=True))


VECTOR_MIN = 64
"""Candidates from which a tick's link utilisations are computed as arrays."""


def round6(x: np.ndarray) -> np.ndarray:
    """``round(v, 6)`` of each element, bit for bit as Python rounds a float.

    Python rounds correctly: the double nearest to ``N / 10**6``, ``N`` the exact value of
    ``v * 10**6`` rounded half to even. ``rint(v * 1e6) / 1e6`` is that double whenever the
    product, rounded to a double, is not within a few ulps of a half-integer (then ``rint``
    finds the same ``N``, and dividing an integer below 2**53 by the exact ``1e6`` is one
    correctly rounded operation); the elements for which that cannot be vouched (near a
    half, or ``N`` too large to be exact) are rounded by Python itself."""
    with np.errstate(over="ignore", invalid="ignore"):  # huge elements: Python's, below
        scaled = x * 1e6
        out = np.rint(scaled) / 1e6
        size = np.abs(scaled)
        near_half = np.abs(scaled - np.floor(scaled) - 0.5) <= 4 * np.spacing(size)
        doubtful = ~(size < 2.0**52) | near_half
    for k in np.flatnonzero(doubtful).tolist():
        out[k] = round(float(x[k]), 6)
    return out


def _order_of(probe: _Probe) -> int:
    return probe.order
