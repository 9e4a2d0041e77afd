"""Sampling on change (``pinlab.sim.sampling``): the same series as reading every source on
every tick, at the cost of what changed; and the collective ring that stays O(1) per rank."""

from __future__ import annotations

import math
import pickle
import random
from collections.abc import Generator
from functools import partial
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.drivers.base import ExporterDriver
from pinlab.kernel import get_profile
from pinlab.kernel.errno import KernelError
from pinlab.platform.presets import PRESETS
from pinlab.sim import sampling
from pinlab.sim.collective import Collective
from pinlab.sim.engine import Ctx, Simulation
from pinlab.sim.flows import FlowNetwork
from pinlab.sim.metrics import Recorder
from pinlab.sim.sampling import round6
from tests.sim.test_engine import hog, sender

MiB = 1 << 20


class PollEverything:
    """The reference: every device region, node, tenant and link read on every tick, as a
    sampler without change hooks would."""

    def __init__(self) -> None:
        self.rec = Recorder()
        self.before: dict[str, float] = {}
        self.last = 0.0

    def __call__(self, sim: Simulation) -> None:
        now = sim.env.now
        rec = self.rec
        for node in sim.nodes.values():
            for dev, driver in node.machine.exporters.items():
                for region in driver.regions():
                    base = f"device.{node.name}/{dev}.{region.name}"
                    rec.sample(f"{base}.used", now, region.used)
                    rec.sample(f"{base}.pinned", now, region.pinned)
                    rec.sample(f"{base}.free", now, region.free)
                    rec.sample(f"{base}.fragmentation", now, round(region.fragmentation, 6))
            incidents = len(node.machine.system.detector.incidents)
            rec.sample(f"node.{node.name}.stale_dma_incidents", now, incidents)
        for name, tenant in sim.tenants.items():
            rec.sample(f"tenant.{name}.bytes", now, tenant.stats.bytes)
            rec.sample(f"tenant.{name}.denials", now, tenant.proc.stats.total)
        dt = now - self.last
        if dt <= sim.sample_interval * sampling.SAME_TICK:
            return
        sim.net.advance()
        for key, link in sim.net.links.items():
            carried = link.bytes_carried
            before = self.before.get(key, 0.0)
            if carried != before or key in self.before:
                value = round((carried - before) / (link.capacity * dt), 6)
                rec.sample(f"link.{key}.utilisation", now, value)
            self.before[key] = carried
        self.last = now


def greedy(ctx: Ctx) -> Generator[simpy.Event, Any, None]:
    """Allocates, with a refused call now and then (denials), frees half, then idles."""
    yield ctx.sleep(0.05)
    handles = []
    for i in range(24):
        try:
            size = 0 if i % 5 == 4 else 256 * MiB  # a zero size is refused (-EINVAL)
            handles.append((yield from ctx.call(ctx.proc.gem_create, "gpu0", size)))
        except KernelError:
            yield ctx.sleep(0.01)
    for h in handles[::2]:
        yield from ctx.call(ctx.proc.gem_close, h)
    yield ctx.sleep(10.0)


def with_reference(monkeypatch: pytest.MonkeyPatch) -> PollEverything:
    """Every simulation's ticks, from now on, also read by a :class:`PollEverything`."""
    reference = PollEverything()
    real = Simulation.sample

    def both(sim: Simulation) -> None:
        real(sim)
        reference(sim)

    monkeypatch.setattr(Simulation, "sample", both)
    return reference


def run_both(monkeypatch: pytest.MonkeyPatch, until: float) -> tuple[Simulation, PollEverything]:
    reference = with_reference(monkeypatch)
    sim = Simulation(
        PRESETS["workstation"](), get_profile("6.16", move_notify=True), sample_interval=0.005
    )
    sim.spawn("odp", partial(sender, odp=True))
    sim.spawn("hog", partial(hog, count=32))
    sim.spawn("greedy", greedy, start=0.03)
    sim.run(until)
    return sim, reference


@pytest.mark.parametrize("vector_min", [sampling.VECTOR_MIN, 0], ids=["small-case", "arrays"])
def test_series_on_change_equal_reading_everything_every_tick(
    monkeypatch: pytest.MonkeyPatch, vector_min: int
) -> None:
    """Evictions, migrations, ODP faults, denials, links busy and idle, a tenant that starts
    late: every series point is what reading every source on every tick gives -- with the
    links of a tick recorded one by one (few of them) and as arrays (many)."""
    monkeypatch.setattr(sampling, "VECTOR_MIN", vector_min)
    sim, reference = run_both(monkeypatch, 0.4)
    assert sim.recorder.series_csv() == reference.rec.series_csv()
    assert sim.tenants["greedy"].proc.stats.total > 0  # the denials were sampled
    used = sim.recorder.series["device.node/gpu0.vram.used"].points
    assert len(used) > 3  # and the memory moved


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("starts", [(0.0, 0.001, 0.0099, 0.0101), (0.0101, 0.015, 0.0199)])
@pytest.mark.parametrize("vector_min", [sampling.VECTOR_MIN, 0], ids=["small-case", "arrays"])
def test_links_busy_in_bursts_equal_reading_everything_every_tick(
    monkeypatch: pytest.MonkeyPatch, vector_min: int, starts: tuple[float, ...], seed: int
) -> None:
    """Links busy in short bursts -- within one tick's interval, across several, idle for a
    tick or many -- from the first interval on, or only from the second (the first and second
    ticks are special), and the same points as reading every link on every tick."""
    monkeypatch.setattr(sampling, "VECTOR_MIN", vector_min)
    reference = with_reference(monkeypatch)
    sim = workstation()  # a tick every 0.01 s
    links = list(sim.net.links.values())[:6]
    rng = random.Random(seed)

    def bursts(link_no: int) -> Generator[simpy.Event, Any, None]:
        link = links[link_no]
        yield sim.env.timeout(rng.choice(starts))
        for _ in range(12):
            seconds = rng.choice([0.0005, 0.004, 0.012, 0.031])
            yield sim.net.transfer(seconds * link.capacity / 2, [link])  # two at a time, some
            yield sim.env.timeout(rng.choice([0.0, 0.003, 0.01, 0.02, 0.05]))

    for k in range(len(links)):
        sim.env.process(bursts(k))
        sim.env.process(bursts(k % 3))
    sim.run(1.5)
    assert sim.recorder.series_csv() == reference.rec.series_csv()
    drops = [
        p
        for key, s in sim.recorder.series.items()
        if key.startswith("link.")
        for p in s.points[1:]
        if p[1] == 0
    ]
    assert len(drops) > 10  # links went idle again and again


def test_a_run_ending_a_rounding_error_after_the_last_tick_adds_no_link_point() -> None:
    """Fifty ticks of 0.1 s end at 4.999999999999998 s; the run's own last sample at 5 s is
    then the same tick for the links (SAME_TICK): no point at 5 s of a link busy at a steady
    37 % (the 2e-15 s between them is a few bytes, gave 0.33, and 1.04 in a cluster)."""
    sim = Simulation(PRESETS["workstation"](), "6.16", sample_interval=0.1)
    link = next(iter(sim.net.links.values()))
    sim.net.transfer(10 * link.capacity, [link], cap=0.37 * link.capacity)  # past the end
    sim.run(5.0)
    points = sim.recorder.series[f"link.{link.name}.utilisation"].points
    assert points == [(0.1, 0.37)]  # (0.330527 at 5 s, before)


def busy_workstation() -> Simulation:
    """``run_both``'s workload without the reference: links busy and idle, moves, denials."""
    sim = Simulation(
        PRESETS["workstation"](), get_profile("6.16", move_notify=True), sample_interval=0.005
    )
    sim.spawn("odp", partial(sender, odp=True))
    sim.spawn("hog", partial(hog, count=32))
    sim.spawn("greedy", greedy, start=0.03)
    return sim


@pytest.mark.parametrize("vector_min", [sampling.VECTOR_MIN, 0], ids=["small-case", "arrays"])
def test_reading_the_series_mid_run_changes_no_point(
    monkeypatch: pytest.MonkeyPatch, vector_min: int
) -> None:
    """The link points are held until read (``LinkPoints``, ``SeriesMap``): reading every
    series at several times during the run -- which turns the held points into series, and
    later ticks append to those -- gives the very points of a run read only at its end."""
    monkeypatch.setattr(sampling, "VECTOR_MIN", vector_min)
    untouched, read = busy_workstation(), busy_workstation()
    seen = []
    for until in (0.0123, 0.1, 0.25):
        untouched.env.run(until=until)
        read.env.run(until=until)
        seen.append(read.recorder.series_csv())
    untouched.run(0.4)
    read.run(0.4)
    final = untouched.recorder.series_csv()
    assert read.recorder.series_csv() == final
    assert "link." in seen[1]  # the links had points to flush mid-run
    assert seen[0] != seen[1] != seen[2] != final


def test_link_points_become_series_only_when_a_read_could_see_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Looking up a device's or a tenant's series leaves the links' points held; looking up
    a link's series, or listing the names, flushes them, once; pickled, the series are the
    flushed ones."""
    flushes = {"n": 0}
    real = sampling.LinkPoints.flush

    def counting(self: sampling.LinkPoints, into: dict[str, Any]) -> None:
        flushes["n"] += 1
        real(self, into)

    monkeypatch.setattr(sampling.LinkPoints, "flush", counting)
    sim = busy_workstation()
    sim.run(0.2)
    series = sim.recorder.series
    assert series["device.node/gpu0.vram.used"].points
    assert "tenant.odp.bytes" in series and series.get("tenant.hog.bytes") is not None
    assert flushes["n"] == 0
    links = [k for k in series if k.startswith("link.")]  # listing the names flushes
    assert flushes["n"] == 1 and links
    assert all(series[k].points for k in links) and flushes["n"] == 1  # nothing held since
    expected = sim.recorder.series_csv()
    sim.env.run(until=0.3)  # more points held
    assert series.get(links[0]) is not None and flushes["n"] == 2
    sim.env.run(until=0.4)
    copy = pickle.loads(pickle.dumps(series))
    assert flushes["n"] == 3
    assert {k: v.points for k, v in copy.items()} == {k: v.points for k, v in series.items()}
    assert sim.recorder.series_csv() != expected


def test_an_idle_tick_reads_no_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once nothing changes, ticks read no region (one read per change, not per tick)."""
    reads = {"n": 0}
    drivers = {type(d) for d in workstation().nodes["node"].machine.exporters.values()}
    for cls in drivers:
        original = cls.regions

        def counting(self: ExporterDriver, _original: Any = original) -> Any:
            reads["n"] += 1
            return _original(self)

        monkeypatch.setattr(cls, "regions", counting)
    sim = workstation()

    def once(ctx: Ctx) -> Generator[simpy.Event, Any, None]:
        yield from ctx.call(ctx.proc.gem_create, "gpu0", 64 * MiB)
        yield ctx.sleep(100.0)

    sim.spawn("once", once)
    sim.run(0.5)
    after_change = reads["n"]
    sim.run(5.0)  # 450 more ticks, nothing changes
    assert reads["n"] == after_change


def workstation() -> Simulation:
    return Simulation(PRESETS["workstation"](), get_profile("6.16"), sample_interval=0.01)


class _Rank:
    def __init__(self, owner: str, i: int) -> None:
        self.owner = owner
        self.i = i


def test_collective_ring_in_join_order_whatever_the_order_ranks_arrive() -> None:
    env = simpy.Environment()
    coll: Collective[_Rank] = Collective(env, FlowNetwork(env), "g")
    for m in ("a", "b", "c"):
        coll.join(m)
    c, a, b = [_Rank("c", 0), _Rank("c", 1)], [_Rank("a", 0)], [_Rank("b", 0), _Rank("b", 1)]
    coll.add_ranks("c", c)
    coll.add_ranks("a", a)
    coll.add_ranks("b", b)
    assert coll.ranks == [*a, *b, *c]
    assert coll.successor(a[0]) is b[0]
    assert coll.successor(c[1]) is a[0]  # the ring closes
    coll.leave("b")
    assert coll.ranks == [*a, *c]
    assert coll.successor(a[0]) is c[0]


def test_collective_barrier_releases_only_when_every_member_arrived() -> None:
    env = simpy.Environment()
    coll: Collective[_Rank] = Collective(env, FlowNetwork(env), "g", world=2)
    coll.join("a")
    first = coll.barrier("a")
    env.run()
    assert not first.triggered  # world = 2: one member is not enough
    coll.join("b")
    coll.join("c")
    coll.barrier("b")
    env.run()
    assert not first.triggered  # c has not arrived
    coll.leave("c")  # nobody waits for a member that left
    env.run()
    assert first.triggered


def _python_round6(values: list[float]) -> list[float]:
    return [round(v, 6) for v in values]


def _same_bits(a: list[float], b: list[float]) -> bool:
    pairs = zip(a, b, strict=True)
    return all(x == y and math.copysign(1, x) == math.copysign(1, y) for x, y in pairs)


def test_round6_rounds_bit_for_bit_as_python_near_halves() -> None:
    """The link sampler's vector rounding: values at, a few ulps off and between halfway
    points of the sixth decimal (where ``rint(v * 1e6) / 1e6`` alone goes wrong), signed
    zeros, utilisations and large values round exactly as ``round(v, 6)``."""
    rng = random.Random(12)
    values: list[float] = [0.0, -0.0, 1.0, -1.0, 2.0**60, 1e300, 5e-7, -5e-7, 2.5e-6]
    for _ in range(20_000):
        half = (rng.randrange(-3_000_000, 3_000_000) + 0.5) / 1e6
        values.append(half)
        for _ in range(2):
            half = math.nextafter(half, rng.choice([math.inf, -math.inf]))
            values.append(half)
        values.append(rng.random())
        values.append(rng.uniform(-1e9, 1e9))
    got = round6(np.array(values)).tolist()
    want = _python_round6(values)
    assert _same_bits(got, want)
    # the plain vector formula does differ on some of them: the fallback is what makes it exact
    plain = (np.rint(np.array(values) * 1e6) / 1e6).tolist()
    assert not _same_bits(plain, want)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=50))
def test_property_round6_is_python_round(values: list[float]) -> None:
    assert _same_bits(round6(np.array(values, dtype=float)).tolist(), _python_round6(values))
