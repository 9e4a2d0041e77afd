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
    with pytest.raises(ValueError, match="capacity must be positive"):
        net.add_link("z", 0)
    with pytest.raises(ValueError, match="already exists"):
        net.add_link("l", 2.0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 2),
            st.floats(1, 1000),
            st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
            st.one_of(st.none(), st.floats(0.5, 50)),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_property_rates_feasible_and_bytes_conserved(
    jobs: list[tuple[float, float, list[str], float | None]],
) -> None:
    """Every link carries no more than capacity x time; every byte of every transfer is
    carried by each of its links; all transfers finish."""
    env = simpy.Environment()
    net = FlowNetwork(env)
    caps = {"a": 10.0, "b": 3.0, "c": 7.0}
    for name, cap in caps.items():
        net.add_link(name, cap)
    original_compute = net._compute_rates

    def checked() -> None:
        original_compute()
        for name, link in net.links.items():
            load = sum(t.rate for t in net.active if link in t.links)
            assert load <= caps[name] * (1 + 1e-9)
        for t in net.active:
            assert t.rate <= t.cap * (1 + 1e-9)
            assert t.rate > 0

    net._compute_rates = checked  # type: ignore[method-assign]
    done = run(env, net, jobs)
    assert len(done) == len(jobs)
    for name, link in net.links.items():
        expected = sum(nb for _, nb, links, _ in jobs if name in links)
        assert link.bytes_carried == pytest.approx(expected, rel=1e-6)


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
