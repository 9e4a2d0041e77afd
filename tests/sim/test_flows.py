"""Flow-level max-min fair bandwidth sharing (cost-model.md §1 item 1)."""

from __future__ import annotations

import random

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.sim.flows import FlowNetwork

GB = 1e9


def run(
    env: simpy.Environment,
    net: FlowNetwork,
    jobs: list[tuple[float, float, list[str], float | None]],
) -> dict[int, float]:
    """Start (at, nbytes, links, cap) jobs; return completion time per job index."""
    done: dict[int, float] = {}

    def job(i: int, at: float, nbytes: float, links: list[str], cap: float | None):  # type: ignore[no-untyped-def]
        yield env.timeout(at)
        yield net.transfer(nbytes, links, cap=cap, label=f"j{i}")
        done[i] = env.now

    for i, (at, nbytes, links, cap) in enumerate(jobs):
        env.process(job(i, at, nbytes, links, cap))
    env.run()
    return done


def test_single_transfer_takes_bytes_over_capacity() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("pcie", 12 * GB)
    done = run(env, net, [(0, 12 * GB, ["pcie"], None)])
    assert done[0] == pytest.approx(1.0)
    assert net.links["pcie"].utilisation(1.0) == pytest.approx(1.0)


def test_two_transfers_share_fairly_then_the_survivor_speeds_up() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("l", 10 * GB)
    # A: 10 GB, B: 5 GB; both at 5 GB/s until B ends at t=1, then A alone at 10 GB/s
    done = run(env, net, [(0, 10 * GB, ["l"], None), (0, 5 * GB, ["l"], None)])
    assert done[1] == pytest.approx(1.0)
    assert done[0] == pytest.approx(1.5)
    assert net.recomputes == 3  # exactly once per start (2) and per end that leaves work (1)


def test_cap_leaves_bandwidth_to_others() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("l", 10 * GB)
    # A capped at 2 GB/s, B takes the remaining 8 GB/s
    done = run(env, net, [(0, 2 * GB, ["l"], 2 * GB), (0, 8 * GB, ["l"], None)])
    assert done[0] == pytest.approx(1.0)
    assert done[1] == pytest.approx(1.0)


def test_max_min_with_two_bottlenecks() -> None:
    """Classic example: f0 crosses a and b, f1 only a, f2 only b; a=10, b=4.
    f0 and f2 share b at 2 each; f1 gets the rest of a: 8."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("a", 10.0)
    net.add_link("b", 4.0)
    ev0 = net.transfer(100, ["a", "b"])
    ev1 = net.transfer(100, ["a"])
    ev2 = net.transfer(100, ["b"])
    assert net.rate_of(ev0) == pytest.approx(2.0)
    assert net.rate_of(ev1) == pytest.approx(8.0)
    assert net.rate_of(ev2) == pytest.approx(2.0)


def test_late_arrival_reshares() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("l", 1.0)
    # A starts alone (1 B/s) for 1 s, then B joins: both 0.5 B/s
    done = run(env, net, [(0, 2.0, ["l"], None), (1.0, 0.5, ["l"], None)])
    assert done[1] == pytest.approx(2.0)
    assert done[0] == pytest.approx(2.5)


def test_zero_bytes_and_bad_input() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("l", 1.0)
    assert net.transfer(0, ["l"]).triggered
    with pytest.raises(ValueError, match="no link and no rate cap"):
        net.transfer(1, [])
    with pytest.raises(ValueError, match="rate cap must be positive"):
        net.transfer(1, ["l"], cap=0)  # a zero cap could never finish
    with pytest.raises(ValueError, match="capacity must be positive"):
        net.add_link("z", 0)
    with pytest.raises(ValueError, match="already exists"):
        net.add_link("l", 2.0)


def test_a_finished_transfer_has_no_rate_and_nothing_left() -> None:
    """A transfer's ``remaining`` bytes fall at its rate and are 0, with rate 0, once it has
    completed -- at its completion and at any time after."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("l", 2.0)
    done = net.transfer(4.0, ["l"])
    (t,) = net.active
    env.run(until=1.0)
    assert t.remaining == pytest.approx(2.0)
    env.run(until=done)
    assert env.now == pytest.approx(2.0)
    assert (t.rate, t.remaining) == (0.0, 0.0)
    env.run(until=5.0)
    assert (t.rate, t.remaining) == (0.0, 0.0)


def test_link_counters_are_exact_across_starts_after_an_idle_start() -> None:
    """cost-model §1 item 1, accounting: a link carries exactly the bytes that crossed it and is
    busy exactly while a transfer is active -- not while idle before the first one -- however
    many re-solves its counters were brought up to date in."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    link = net.add_link("l", 1.0)
    done: list[simpy.Event] = []

    def start(at: float):  # type: ignore[no-untyped-def]
        yield env.timeout(at)
        done.append(net.transfer(1.0, ["l"]))

    for at in (1.0, 1.5, 2.0):  # idle for 1 s, then busy from 1 to 4 (3 bytes at 1 B/s)
        env.process(start(at))
    env.run()
    assert len(done) == 3 and all(ev.processed for ev in done)
    assert link.bytes_carried == pytest.approx(3.0)
    assert link.busy_time == pytest.approx(3.0)
    assert env.now == pytest.approx(4.0)
    assert net.completed == 3


def test_take_touched_reports_network_links_only_not_rate_caps() -> None:
    """A rate cap is solved as a private link (flows.py), but it is not one of the network's
    links: the sampler's ``take_touched`` lists only these, in the order they became busy."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    a = net.add_link("a", 10.0)
    b = net.add_link("b", 10.0)
    net.transfer(5.0, ["b"], cap=2.0)
    net.transfer(5.0, ["a"], cap=4.0)
    index, _ = net.take_touched()
    assert index == [b.index, a.index] == [1, 0]


def test_deterministic() -> None:
    def once() -> list[float]:
        rng = random.Random(7)
        env = simpy.Environment()
        net = FlowNetwork(env)
        for i in range(5):
            net.add_link(f"l{i}", rng.uniform(1, 10))
        jobs = [
            (rng.uniform(0, 3), rng.uniform(1, 50), [f"l{rng.randrange(5)}"], None)
            for _ in range(30)
        ]
        done = run(env, net, jobs)
        return [done[i] for i in range(30)]

    assert once() == once()


def test_a_path_crossing_a_link_twice_consumes_twice_its_rate() -> None:
    """cost-model §1 item 5: a staged byte crosses host DRAM twice, so a 10 GB/s DRAM link
    carries a staged transfer at most at 5 GB/s."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("dram", 10 * GB)
    net.add_link("nic", 12 * GB)
    ev = net.transfer(5 * GB, ["dram", "nic", "dram"])
    assert net.rate_of(ev) == pytest.approx(5 * GB)
    env.run()
    assert env.now == pytest.approx(1.0)
    assert net.links["dram"].bytes_carried == pytest.approx(10 * GB)


# -- the solver against a reference ---------------------------------------------------------


def reference_max_min(
    capacities: dict[str, float], flows: list[tuple[list[str], float]]
) -> list[float]:
    """Straightforward progressive filling (the definition, not the solver): raise every unfrozen
    rate by the largest step no link or cap forbids, freeze what that step saturates, repeat.
    ``flows`` are ``(path, cap)``; a path lists a link once per crossing."""
    rate = [0.0] * len(flows)
    frozen = [False] * len(flows)
    while not all(frozen):
        users = dict.fromkeys(capacities, 0)
        residual = dict(capacities)
        for j, (path, _) in enumerate(flows):
            for name in path:
                residual[name] -= rate[j]
                if not frozen[j]:
                    users[name] += 1
        shares = {name: residual[name] / users[name] for name in capacities if users[name]}
        step = min(
            [
                *shares.values(),
                *(cap - rate[j] for j, (_, cap) in enumerate(flows) if not frozen[j]),
            ]
        )
        tight = {name for name, share in shares.items() if share <= step * (1 + 1e-12)}
        for j, (path, cap) in enumerate(flows):
            if frozen[j]:
                continue
            rate[j] += step
            if rate[j] >= cap * (1 - 1e-12) or tight.intersection(path):
                frozen[j] = True
    return rate


class Checker:
    """Compares the network with :func:`reference_max_min` at every start and end, checks the
    max-min properties, and integrates the reference loads over time for byte accounting."""

    def __init__(self, env: simpy.Environment, net: FlowNetwork) -> None:
        self.env, self.net = env, net
        self.capacities = {name: link.capacity for name, link in net.links.items()}
        self.scale = max(self.capacities.values())
        self.integral = dict.fromkeys(self.capacities, 0.0)
        self.loads = dict.fromkeys(self.capacities, 0.0)
        self.at = 0.0
        self.checks = 0

    def close(self, a: float, b: float) -> bool:
        # 1e-12 relative to the rate, or to the largest capacity: a rate that is a small
        # difference of capacities carries that difference's rounding, in any order of sums
        return abs(a - b) <= 1e-12 * max(abs(b), self.scale)

    def __call__(self) -> None:
        now = self.env.now
        for name, load in self.loads.items():
            self.integral[name] += load * (now - self.at)
        self.at = now
        active = list(self.net.active)
        expected = reference_max_min(
            self.capacities, [([link.name for link in t.links], t.cap) for t in active]
        )
        for t, want in zip(active, expected, strict=True):
            assert self.close(t.rate, want), (t, want)
        self.loads = dict.fromkeys(self.capacities, 0.0)
        on: dict[str, list[float]] = {name: [] for name in self.capacities}
        for t in active:
            for link in t.links:
                self.loads[link.name] += t.rate
                on[link.name].append(t.rate)
        for name, load in self.loads.items():
            assert load <= self.capacities[name] * (1 + 1e-12)
        for t in active:  # max-min: each transfer is at its cap or at a saturated link's top
            assert t.rate > 0
            assert t.rate <= t.cap * (1 + 1e-12)
            at_cap = t.rate >= t.cap * (1 - 1e-9)
            bottleneck = any(
                self.loads[link.name] >= self.capacities[link.name] * (1 - 1e-9)
                and t.rate >= max(on[link.name]) * (1 - 1e-9)
                for link in t.links
            )
            assert at_cap or bottleneck, t
        self.checks += 1

    def carried(self) -> dict[str, float]:
        """Bytes each link carried up to now by the reference rates."""
        dt = self.env.now - self.at
        return {name: self.integral[name] + self.loads[name] * dt for name in self.capacities}


Job = tuple[float, float, list[int], float | None]


@st.composite
def flow_cases(draw: st.DrawFn) -> tuple[list[float], list[list[Job]]]:
    """Random link capacities and batches of jobs ``(at, nbytes, path, cap)``: a batch starts
    together (``transfer_many``), a path may repeat a link, a cap is optional."""
    capacities = draw(st.lists(st.floats(1, 100), min_size=1, max_size=5))
    n = len(capacities)
    job = st.tuples(
        st.floats(0, 3),
        st.floats(1, 500),
        st.lists(st.integers(0, n - 1), max_size=4),
        st.one_of(st.none(), st.floats(0.5, 60)),
    ).filter(lambda j: bool(j[2]) or j[3] is not None)
    batches = draw(st.lists(st.lists(job, min_size=1, max_size=4), min_size=1, max_size=6))
    return capacities, batches


def run_checked(
    capacities: list[float], batches: list[list[Job]], samples: list[float]
) -> tuple[FlowNetwork, Checker, dict[int, float]]:
    env = simpy.Environment()
    net = FlowNetwork(env)
    for i, capacity in enumerate(capacities):
        net.add_link(f"l{i}", capacity)
    check = Checker(env, net)
    done: dict[int, float] = {}

    def wait(k: int, ev: simpy.Event):  # type: ignore[no-untyped-def]
        yield ev
        done[k] = env.now
        check()

    def batch(b: int, jobs: list[Job]):  # type: ignore[no-untyped-def]
        yield env.timeout(jobs[0][0])
        specs = [
            (nb, [f"l{i}" for i in path], cap, f"b{b}j{k}")
            for k, (_, nb, path, cap) in enumerate(jobs)
        ]
        events = (
            net.transfer_many(specs)
            if len(specs) > 1
            else [net.transfer(specs[0][0], specs[0][1], cap=specs[0][2], label=specs[0][3])]
        )
        check()
        for k, ev in enumerate(events):
            env.process(wait(b * 10 + k, ev))

    def sampler():  # type: ignore[no-untyped-def]
        for at in sorted(samples):
            yield env.timeout(max(at - env.now, 0.0))  # at - now can round below 0
            net.advance()
            want = check.carried()
            for name, link in net.links.items():
                assert link.bytes_carried == pytest.approx(want[name], rel=1e-9, abs=1e-6)

    for b, jobs in enumerate(batches):
        env.process(batch(b, jobs))
    env.process(sampler())
    env.run()
    return net, check, done


@settings(max_examples=150, deadline=None)
@given(flow_cases(), st.lists(st.floats(0, 20), max_size=5))
def test_property_rates_are_the_progressive_filling_result(
    case: tuple[list[float], list[list[Job]]], samples: list[float]
) -> None:
    """cost-model §1 items 1 and 5: at every start and end, every active transfer's rate is the
    reference progressive-filling rate (1e-12), the allocation is max-min (each transfer at its
    cap or at the top of a saturated link, no link over capacity), and each link's
    ``bytes_carried`` is the integral of its load -- at sample times and in total, where every
    transfer has crossed each link of its path once per crossing."""
    capacities, batches = case
    net, check, done = run_checked(capacities, batches, samples)
    jobs = [job for jobs in batches for job in jobs]
    assert len(done) == len(jobs) == net.completed
    assert check.checks == len(batches) + len(jobs)
    for name, link in net.links.items():
        i = int(name[1:])
        expected = sum(nb * path.count(i) for _, nb, path, _ in jobs)
        assert link.bytes_carried == pytest.approx(expected, rel=1e-9)
        assert link.bytes_carried == pytest.approx(check.carried()[name], rel=1e-9, abs=1e-6)


def test_a_start_leaves_other_components_alone() -> None:
    """Only the component of a started transfer is solved again (``resolved`` counts it); the
    other keeps its rates and its projected completions. (Rates are compared by value: the
    compiled solver holds them unboxed, so a kept rate need not be the same float object.)"""
    env = simpy.Environment()
    net = FlowNetwork(env)
    for name, capacity in (("a1", 10.0), ("a2", 4.0), ("b1", 6.0)):
        net.add_link(name, capacity)
    ea = net.transfer_many([(100, ["a1", "a2"], None, "x"), (100, ["a1"], None, "y")])
    rates = [net.rate_of(ev) for ev in ea]
    before = net.resolved
    eb = net.transfer(50, ["b1"])
    assert net.resolved == before + 1  # the new transfer alone
    assert [net.rate_of(ev) for ev in ea] == rates
    assert net.rate_of(eb) == 6.0
    before = net.resolved
    net.transfer(50, ["b1"], cap=1.0)  # b's component: the new transfer and the other one
    assert net.resolved == before + 2
    assert [net.rate_of(ev) for ev in ea] == rates
    assert net.rate_of(eb) == 5.0


def test_only_rates_at_or_above_the_change_are_solved_again() -> None:
    """flows.py, fact 2: ending a transfer of rate r leaves every rate below r as it is, and
    starting one leaves every rate below its bound min(cap, capacity / uses) as it is."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("l", 10.0)
    small = net.transfer(1, ["l"], cap=1.0)  # 1 B/s, ends at t=1
    assert net.resolved == 1
    mid = net.transfer(45, ["l"])  # bound 10/2 = 5: small (1) stays
    assert net.resolved == 1 + 1
    big = net.transfer(100, ["l"])  # bound 10/3: small stays, mid is solved again
    assert net.resolved == 1 + 1 + 2
    assert [net.rate_of(e) for e in (small, mid, big)] == [1.0, 4.5, 4.5]
    env.run(until=small)
    assert net.resolved == 4 + 2  # small (1 B/s) ended: mid and big, both above it
    assert net.rate_of(mid) == 5.0  # 4.5 B/s until t=1, then 5 B/s: ends at t=9.1
    env.run(until=mid)
    assert net.resolved == 6 + 1  # big alone
    assert env.now == pytest.approx(9.1)
    assert net.rate_of(big) == 10.0


def test_start_order_and_batches_give_the_same_rates() -> None:
    """``transfer_many`` solves once and gives the rates that starting one by one gives."""

    def rates(many: bool) -> list[float]:
        env = simpy.Environment()
        net = FlowNetwork(env)
        rng = random.Random(3)
        for i in range(6):
            net.add_link(f"l{i}", rng.uniform(1, 10))
        specs: list[tuple[float, list[str], float | None, str]] = [
            (
                rng.uniform(1, 9),
                [f"l{rng.randrange(6)}" for _ in range(rng.randint(1, 3))],
                rng.choice([None, rng.uniform(0.5, 3)]),
                f"t{k}",
            )
            for k in range(20)
        ]
        if many:
            events = net.transfer_many(specs)
            assert net.recomputes == 1
        else:
            events = [net.transfer(nb, p, cap=c, label=lb) for nb, p, c, lb in specs]
        return [net.rate_of(ev) for ev in events]

    assert rates(True) == pytest.approx(rates(False), rel=1e-12)


def test_finished_transfers_leave_the_network() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("l", 2.0)
    first = net.transfer(2, ["l"], label="first")
    second = net.transfer(4, ["l"], label="second")
    assert [t.label for t in net.active] == ["first", "second"]
    env.run(until=first)
    assert first.value == pytest.approx(2.0)
    assert net.rate_of(first) == 0.0
    assert [t.label for t in net.active] == ["second"]
    assert net.rate_of(second) == 2.0
    assert next(iter(net.active)).remaining == pytest.approx(2.0)
    env.run()
    assert not net.active
    assert net.completed == 2
    assert net.links["l"].busy_time == pytest.approx(3.0)
    assert net.links["l"].bytes_carried == pytest.approx(6.0)


def test_deterministic_whatever_the_object_addresses() -> None:
    """Same case, same floats: nothing depends on ``id``/``hash`` order (the second run
    allocates junk first, so its objects land elsewhere)."""

    def once(junk: int) -> tuple[list[float], list[float], float]:
        _ = [object() for _ in range(junk)]
        rng = random.Random(11)
        batches: list[list[Job]] = [
            [
                (
                    rng.uniform(0, 2),
                    rng.uniform(1, 100),
                    [rng.randrange(6) for _ in range(rng.randint(1, 4))],
                    rng.choice([None, rng.uniform(1, 20)]),
                )
            ]
            for _ in range(40)
        ]
        capacities = [rng.uniform(1, 30) for _ in range(6)]
        net, _, done = run_checked(capacities, batches, [])
        return (
            [done[k] for k in sorted(done)],
            [link.bytes_carried for link in net.links.values()],
            net.links["l0"].busy_time,
        )

    assert once(0) == once(5000)


def test_a_transfer_due_within_eps_completes_with_its_last_bytes_counted() -> None:
    """Completions less than 1e-9 s apart happen together; the early one's last bytes still
    count on its links, so every link carries exactly what crossed it."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("a", 1.0)
    net.add_link("b", 2.0)
    first = net.transfer(1.0, ["a"])  # due at t=1
    second = net.transfer(1.0 + 5e-10, ["b", "b"])  # 1 B/s (b crossed twice): due 5e-10 later
    env.run()
    assert first.value == second.value == 1.0
    assert net.recomputes == 2  # the two starts; the end leaves nothing to solve
    assert net.links["b"].bytes_carried == pytest.approx(2 * (1.0 + 5e-10), rel=1e-14)


@st.composite
def wide_cases(draw: st.DrawFn) -> tuple[list[float], list[list[Job]]]:
    """Larger random topologies than :func:`flow_cases`: up to 12 links of capacities spread
    over two decades, up to 8 batches of up to 6 transfers on paths of 1-4 links, a third of
    them capped -- enough for saturated and unsaturated links to meet on one path."""
    capacities = draw(st.lists(st.floats(1, 100), min_size=3, max_size=12))
    n = len(capacities)
    job = st.tuples(
        st.floats(0, 3),
        st.floats(1, 500),
        st.lists(st.integers(0, n - 1), min_size=1, max_size=4),
        st.one_of(st.none(), st.none(), st.floats(0.5, 60)),
    )
    batches = draw(st.lists(st.lists(job, min_size=1, max_size=6), min_size=2, max_size=8))
    return capacities, batches


@settings(max_examples=120, deadline=None)
@given(wide_cases())
def test_property_wide_topologies_match_the_reference(
    case: tuple[list[float], list[list[Job]]],
) -> None:
    """cost-model §1 items 1 and 5, flows.py facts 1-3: on random multi-link topologies with caps,
    every rate at every start and end is the reference progressive-filling rate, and every link
    carries exactly what crossed it."""
    capacities, batches = case
    net, check, done = run_checked(capacities, batches, [])
    jobs = [job for jobs in batches for job in jobs]
    assert len(done) == len(jobs) == net.completed
    assert check.checks == len(batches) + len(jobs)
    for name, link in net.links.items():
        i = int(name[1:])
        expected = sum(nb * path.count(i) for _, nb, path, _ in jobs)
        assert link.bytes_carried == pytest.approx(expected, rel=1e-9)


def random_case(rng: random.Random, links: int, flows: int) -> tuple[list[float], list[list[Job]]]:
    capacities = [rng.uniform(1, 100) for _ in range(links)]
    batches: list[list[Job]] = [
        [
            (
                rng.uniform(0, 3),
                rng.uniform(1, 500),
                [rng.randrange(links) for _ in range(rng.randint(1, 4))],
                rng.choice([None, None, rng.uniform(0.5, 60)]),
            )
        ]
        for _ in range(flows)
    ]
    return capacities, batches


def test_the_widening_of_fact_3_is_exercised_and_exact() -> None:
    """flows.py fact 3: a re-solve that leaves out a faster transfer on a link where a solved
    one froze takes that link's transfers in and solves again; on seeded random cases this
    happens, and every rate still equals the reference (the checker asserts it at every start
    and end)."""
    widened = 0
    for seed in range(25):
        capacities, batches = random_case(random.Random(seed), 8, 30)
        net, _, done = run_checked(capacities, batches, [])
        assert len(done) == net.completed == 30
        widened += net.widened
    assert widened > 0


def test_a_failed_fact_3_check_takes_in_that_links_transfers_and_no_more() -> None:
    """flows.py facts 2 and 3: where a started transfer froze below a transfer left out, the
    second attempt takes in that link's transfers at ``lam`` or above and, through saturated
    links, their top-rate ones -- not every transfer at ``lam`` or above that it meets, and none
    below ``lam``. Links L=10, M=8, U=100, rates by hand (progressive filling):

    - s on L, capped at 1: 1.  h on L, M, U: 8 (M).  k on U, capped at 20: 20 (U unsaturated).
    - g on L: lam = 10/3. Alone, g would get 10 - 1 - 8 = 1 < 8 (h on L): widened. L's transfers
      at lam or above, g and h, share what s leaves of L: 4.5 each; s (below lam) and k (on
      unsaturated U) are not solved again.
    - p on M: lam = 8/2. Alone, p would get 8 - 4.5 = 3.5 < 4.5 (h on M): widened. p and h, and
      through saturated L its top-rate g: M saturates first, p = h = 4, then g = 10 - 1 - 4 = 5.
    """
    env = simpy.Environment()
    net = FlowNetwork(env)
    for name, capacity in (("L", 10.0), ("M", 8.0), ("U", 100.0)):
        net.add_link(name, capacity)
    steps = (("s", ["L"], 1.0), ("h", ["L", "M", "U"], None), ("k", ["U"], 20.0))
    steps += (("g", ["L"], None), ("p", ["M"], None))
    events: dict[str, simpy.Event] = {}
    counters: list[tuple[int, int]] = []
    for label, path, cap in steps:
        events[label] = net.transfer(1000.0, path, cap=cap, label=label)
        counters.append((net.resolved, net.widened))
    assert counters == [(1, 0), (2, 0), (3, 0), (3 + 2, 1), (5 + 3, 2)]
    rates = {label: net.rate_of(event) for label, event in events.items()}
    assert rates == {"s": 1.0, "h": 4.0, "k": 20.0, "g": 5.0, "p": 4.0}


@pytest.mark.parametrize("started", [1, 2])
def test_a_transfer_left_out_a_hair_faster_still_fails_fact_3s_check(started: int) -> None:
    """flows.py fact 3 and its relative 1e-9 rounding margin, in the closed form for one started
    transfer and in the heap fill for two: the margin makes the check stricter, never lets a
    faster transfer stay out, and the widening's floor counts a transfer a hair above ``lam`` as
    at ``lam``. Links L=n+1 (n started), M=1+1e-10, U=100, rates by hand: h on L, M, U gets
    1+1e-10 (M); k on U capped at 20: 20. The n transfers on L: lam = (n+1)/(n+1) = 1; alone they
    would get (n - 1e-10)/n each, below h on L by less than 1e-9: widened. h is taken in through L
    only (k, on unsaturated U, is not solved again), and L saturates first: all at 1."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    for name, capacity in (("L", started + 1.0), ("M", 1.0 + 1e-10), ("U", 100.0)):
        net.add_link(name, capacity)
    h = net.transfer(1000.0, ["L", "M", "U"], label="h")
    k = net.transfer(1000.0, ["U"], cap=20.0, label="k")
    gs = net.transfer_many([(1000.0, ["L"], None, f"g{i}") for i in range(started)])
    assert [net.rate_of(ev) for ev in (h, k, *gs)] == [1.0, 20.0] + [1.0] * started
    assert (net.resolved, net.widened) == (1 + 1 + started + 1, 1)


def test_an_end_re_solves_only_the_top_rate_transfers_of_a_saturated_link() -> None:
    """flows.py facts 2 and 3: the link of an ended transfer, saturated, is entered for its
    top-rate transfers -- those within the 1e-9 margin of its top rate included -- and a slower
    one, bottlenecked elsewhere, keeps its rate unsolved. Rates by hand:

    - S=10, B=3: e on S capped at 1, 1 byte; b on S and B: 3; a on S: 10 - 1 - 3 = 6. At t=1 e
      ends: only a is solved again (S's top), 10 - 3 = 7; b keeps 3.
    - S=10: y on S capped at 5 - 1e-11, x on S: 5 + 1e-11 (y's cap freezes first). g on S:
      lam = 10/3; y, 4e-12 below S's top x, is top-rate too: x, y and g are taken in at once (no
      failed check, no second attempt) and share S: 10/3 each.
    """
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("S", 10.0)
    net.add_link("B", 3.0)
    e = net.transfer(1.0, ["S"], cap=1.0, label="e")
    b = net.transfer(1000.0, ["S", "B"], label="b")
    a = net.transfer(1000.0, ["S"], label="a")
    assert [net.rate_of(ev) for ev in (e, b, a)] == [1.0, 3.0, 6.0]
    assert net.resolved == 3
    env.run(until=e)
    assert env.now == pytest.approx(1.0)
    assert [net.rate_of(ev) for ev in (b, a)] == [3.0, 7.0]
    assert (net.resolved, net.widened) == (3 + 1, 0)

    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("S", 10.0)
    x = net.transfer(1000.0, ["S"], label="x")
    y = net.transfer(1000.0, ["S"], cap=5.0 - 1e-11, label="y")
    assert [net.rate_of(ev) for ev in (x, y)] == [10.0 - (5.0 - 1e-11), 5.0 - 1e-11]
    g = net.transfer(1000.0, ["S"], label="g")
    assert [net.rate_of(ev) for ev in (x, y, g)] == [10.0 / 3.0] * 3
    assert (net.resolved, net.widened) == (1 + 2 + 3, 0)


def test_more_transfers_than_the_first_finish_slots_complete_in_size_order() -> None:
    """cost-model §1 item 1: n transfers of sizes s_1 < ... < s_n on one link of capacity C end
    at t_k = t_(k-1) + (s_k - s_(k-1)) (n - k + 1) / C -- with more of them active than the
    network's finish-time array first holds (it grows), and a second wave in the freed slots."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("l", 10.0)
    for wave in range(2):
        sizes = [float(10 + 3 * k) for k in range(150)]
        start = env.now
        events = net.transfer_many(
            [(nbytes, ["l"], None, f"w{wave}.{k}") for k, nbytes in enumerate(sizes)]
        )
        env.run()
        expected = 0.0
        previous = 0.0
        for k, (nbytes, event) in enumerate(zip(sizes, events, strict=True)):
            expected += (nbytes - previous) * (len(sizes) - k) / 10.0
            previous = nbytes
            assert event.value == pytest.approx(expected, rel=1e-12)
        assert env.now == pytest.approx(start + expected, rel=1e-12)
        assert not net.active
    assert net.completed == 300


FlowSpecT = tuple[float, list[str], float | None, str]


def _batch_network(seed: int) -> tuple[simpy.Environment, FlowNetwork, list[FlowSpecT]]:
    env = simpy.Environment()
    net = FlowNetwork(env)
    rng = random.Random(seed)
    for i in range(6):
        net.add_link(f"l{i}", rng.uniform(1, 10))
    specs: list[FlowSpecT] = [
        (
            rng.choice([0.0, rng.uniform(1, 9), rng.uniform(1, 9)]),
            [f"l{rng.randrange(6)}" for _ in range(rng.randint(1, 3))],
            rng.choice([None, rng.uniform(0.5, 3)]),
            f"t{k}",
        )
        for k in range(25)
    ]
    return env, net, specs


@pytest.mark.parametrize("seed", range(8))
def test_transfer_all_is_transfer_many_with_one_event(seed: int) -> None:
    """cost-model §1 item 1: a batch started with ``transfer_all`` runs exactly as the same
    specs started with ``transfer_many`` -- rates, completions, link counters and solver
    counters to the bit -- and its one event fires when the last transfer ends, with the
    batch's duration as its value (zero-byte specs start nothing, as in ``transfer_many``)."""
    env_a, many, specs = _batch_network(seed)
    events = many.transfer_many(specs)
    env_b, batch, same = _batch_network(seed)
    fired: list[float] = []
    done = batch.transfer_all(same)
    done.callbacks.append(lambda ev: fired.append(env_b.now))
    assert [t.rate for t in batch.active] == [t.rate for t in many.active]
    env_a.run()
    last = max(ev.value for ev in events)
    env_b.run()
    assert fired == [done.value] == [last]
    assert env_b.now == env_a.now
    for name, link in many.links.items():
        other = batch.links[name]
        assert (other.bytes_carried, other.busy_time) == (link.bytes_carried, link.busy_time)
    counters = ("recomputes", "resolved", "widened", "completed")
    assert [getattr(batch, c) for c in counters] == [getattr(many, c) for c in counters]
    assert not batch.active


def test_transfer_all_of_nothing_fires_at_once_and_bad_specs_start_nothing() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env)
    net.add_link("l", 2.0)
    empty = net.transfer_all([(0.0, ["l"], None, "zero")])
    assert empty.triggered and empty.value == 0.0
    with pytest.raises(ValueError, match="negative size"):
        net.transfer_all([(4.0, ["l"], None, "ok"), (-1.0, ["l"], None, "bad")])
    assert not net.active  # the valid spec before the bad one was not started either
    done = net.transfer_all([(4.0, ["l"], None, "a"), (2.0, ["l"], None, "b")])
    env.run(until=done)
    assert env.now == pytest.approx(3.0)  # 6 bytes over 2 B/s, shared then alone
    late = net.transfer_all([(4.0, ["l"], None, "c")])  # started at t=3: its value is 2 s
    env.run(until=late)
    assert (env.now, late.value) == (pytest.approx(5.0), pytest.approx(2.0))
