"""Benchmark: how fast the simulator runs, against SimPy itself, and how it scales.

Two measurements, in one process:

1. **Event rate.** The built-in scenario ``cluster-128`` (16 DL1-like nodes, 128 accelerators)
   runs through the scenario runner (``run_scenario``, every variant), then a bare SimPy loop
   of timeouts (``PROCS`` processes, each ``yield env.timeout(1)`` in a loop) runs in the same
   interpreter. Each prints SimPy events processed per second; the ratio model/bare is the
   share of SimPy's raw speed the model keeps (the rest is pinlab's own work per event:
   flows, kernel calls, metrics).

2. **Scaling.** A lean configuration of the same scenario -- one variant (``no-limits``: no
   policy, one job per node) -- on 2, 16 and 128 nodes (``--set platform.params.nodes=N``:
   16, 128 and 1024 accelerators): end-to-end wall time (build + simulate + metrics) per
   accelerator. A flat figure means the model scales linearly with the cluster; the last line
   is the 1024-accelerator figure over the 16-accelerator one. The simulated duration stays
   the scenario's: registering each node's HBM alone takes ~125 simulated seconds, so a
   shorter run would time the setup and none of the all-reduce (simulated seconds are cheap;
   events and samples are what cost).

Each figure is the median of ``--rounds`` runs (model and bare loop alternate, so a slow
stretch of the machine hits both); a warm-up run comes first.

How events are counted (no per-event overhead). SimPy numbers every scheduled event from one
counter, ``Environment._eid`` (an ``itertools.count``, advanced by ``schedule()``); events
still in the queue, ``Environment._queue``, were scheduled but never processed. During a
measurement ``simpy.Environment.__init__`` is wrapped to remember each environment created,
so after the run ``processed = next(env._eid) - len(env._queue)``, summed over them (the
runner makes one environment per variant). ``Environment.run`` is wrapped too, to add up the
wall time spent inside it: the event rate is events / time in ``env.run`` (building the
platform, the kernels and the report is excluded; it is shown separately as end-to-end
time). The bare loop is counted the same way. Both wrappers cost one call per ``run`` or
environment, not per event.

Usage: ``python benchmarks/bench_sim.py [--quick] [--rounds N]``. The full run (three rounds)
takes well under three minutes on a 2-core machine (about 30 s); ``--quick`` (one round, a
shorter bare loop) about 10 s. Always exits 0: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import simpy

from pinlab.scenarios.runner import load_scenario, run_scenario

SCENARIO = "cluster-128"
SCALING_NODES = (2, 16, 128)
ACCELERATORS_PER_NODE = 8
PROCS = 64


@dataclass
class Measured:
    """SimPy events processed, wall seconds inside ``env.run`` and end to end."""

    events: int = 0
    run_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.events / self.run_seconds if self.run_seconds > 0 else 0.0


@contextmanager
def counting() -> Iterator[Measured]:
    """Count SimPy events processed and the time spent in ``Environment.run`` (module
    docstring) for everything simulated inside the ``with`` block."""
    measured = Measured()
    envs: list[simpy.Environment] = []
    real_init = simpy.Environment.__init__
    real_run = simpy.Environment.run

    def init(self: simpy.Environment, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        envs.append(self)

    def run(self: simpy.Environment, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_run(self, *args, **kwargs)
        finally:
            measured.run_seconds += time.perf_counter() - t0

    simpy.Environment.__init__ = init  # type: ignore[method-assign]
    simpy.Environment.run = run  # type: ignore[method-assign]
    t0 = time.perf_counter()
    try:
        yield measured
    finally:
        measured.wall_seconds = time.perf_counter() - t0
        simpy.Environment.__init__ = real_init  # type: ignore[method-assign]
        simpy.Environment.run = real_run  # type: ignore[method-assign]
        measured.events = sum(next(env._eid) - len(env._queue) for env in envs)


def bare_loop(events: int) -> Measured:
    """``PROCS`` SimPy processes yielding timeouts until ``events`` timeouts have fired."""

    def proc(env: simpy.Environment, n: int) -> Generator[simpy.Event, Any, None]:
        for _ in range(n):
            yield env.timeout(1.0)

    with counting() as measured:
        env = simpy.Environment()
        for _ in range(PROCS):
            env.process(proc(env, events // PROCS))
        env.run()
    return measured


def model_run(sets: tuple[str, ...] = (), variants: list[str] | None = None) -> Measured:
    """The scenario through the runner (``run_scenario``), with ``--set`` overrides."""
    cfg = load_scenario(SCENARIO, sets=sets)
    with counting() as measured:
        run_scenario(cfg, variants=variants)
    return measured


def median_of(runs: list[Measured]) -> Measured:
    """The run with the median event rate (its events and times, consistent together)."""
    return sorted(runs, key=lambda m: m.rate)[len(runs) // 2]


def lean_sets(nodes: int) -> tuple[str, ...]:
    """``--set`` overrides for a cluster of ``nodes`` nodes."""
    return (f"platform.params.nodes={nodes}",)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, a shorter bare loop")
    parser.add_argument("--rounds", type=int, default=None, help="runs per figure (default 3)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    bare_events = 200_000 if args.quick else 1_000_000
    started = time.perf_counter()
    model_run(lean_sets(2), ["no-limits"])  # warm-up: imports, caches

    # 1. events per second: cluster-128 through the runner against a bare SimPy loop
    model_runs, bare_runs, ratios = [], [], []
    for _ in range(rounds):
        model = model_run()
        bare = bare_loop(bare_events)
        model_runs.append(model)
        bare_runs.append(bare)
        ratios.append(model.rate / bare.rate)
    model, bare = median_of(model_runs), median_of(bare_runs)
    ratio = statistics.median(ratios)
    what = "every variant"
    print(f"simulator benchmark (median of {rounds} round{'s' if rounds != 1 else ''})")
    print(
        f"  {SCENARIO} ({what}): {model.events:,} events in {model.run_seconds:.2f} s "
        f"of env.run ({model.wall_seconds:.2f} s end to end)"
    )
    print(f"  model events/s:     {model.rate:12,.0f}")
    print(f"  bare SimPy events/s:{bare.rate:12,.0f}  ({PROCS} processes of timeouts)")
    print(f"  ratio model/bare:   {ratio:12.4f}  ({ratio:.2%} of raw SimPy speed)")

    # 2. scaling: wall time per accelerator at 16, 128 and 1024 accelerators
    print()
    print(f"scaling: {SCENARIO}, variant no-limits (wall time: build + simulate + metrics)")
    header = (
        f"  {'nodes':>5} {'accelerators':>12} {'events':>9} {'wall':>9} {'per accelerator':>16}"
    )
    print(header)
    per_acc: dict[int, float] = {}
    for nodes in SCALING_NODES:
        runs = [model_run(lean_sets(nodes), ["no-limits"]) for _ in range(rounds)]
        wall = statistics.median(m.wall_seconds for m in runs)
        accelerators = nodes * ACCELERATORS_PER_NODE
        per_acc[nodes] = wall / accelerators
        print(
            f"  {nodes:>5} {accelerators:>12} {runs[0].events:>9,} {wall:>8.2f}s "
            f"{per_acc[nodes] * 1e3:>13.3f} ms"
        )
    first, last = SCALING_NODES[0], SCALING_NODES[-1]
    growth = per_acc[last] / per_acc[first]
    print(
        f"  per-accelerator wall time, {last * ACCELERATORS_PER_NODE} vs "
        f"{first * ACCELERATORS_PER_NODE} accelerators: {growth:.2f}x "
        f"(1.00x = linear in the cluster size)"
    )
    print(f"total runtime: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
