"""Benchmark: how fast the simulator runs, against SimPy itself, and how it scales.

Two measurements, in one process:

1. **Event rate.** The built-in scenario ``cluster-128`` (16 DL1-like nodes, 128 accelerators)
   runs through the scenario runner (``run_scenario``, every variant), then a bare SimPy loop
   of timeouts (``PROCS`` processes, each ``yield env.timeout(1)`` in a loop) runs in the same
   interpreter. Each prints SimPy events processed per second; the ratio model/bare is the
   share of SimPy's raw speed the model keeps (the rest is pinlab's own work per event:
   flows, kernel calls, metrics).

2. **Scaling.** The 3-iteration all-reduce job of the same scenario -- one variant (``no-limits``:
   no policy, one job per node of 8 accelerators) -- from 16 accelerators (2 nodes) up to
   ``--max-accelerators`` (default 131 072: 16 384 nodes), doubling (``--set
   platform.params.nodes=N``). Each size runs in a fresh child process, so its peak memory is its
   own (``ru_maxrss`` less the interpreter's before building). Printed per size: end-to-end wall
   time (build + simulate + metrics; beside it the CPU time, as the machine is shared, split
   into user time -- the process's own work -- and system time -- the kernel's on its behalf,
   page faults and mappings, whose cost per fault is the machine's), wall time and
   peak memory per accelerator, and wall time per simulated all-reduce iteration per accelerator:
   the child runs the simulation in steps of ``STEP`` simulated seconds and notes the wall clock at
   each step's end; after the run, the tenants' simulated times say which steps held the first
   tenant's data-phase start and the last tenant's third iteration's end, and the wall time between
   those two steps' ends is the iterations' (steps only place the stop events SimPy runs between;
   the model is the same, and looking at the tenants between steps would be a walk over all of them
   per step, inside the timing). Then the ratios: per-accelerator wall time at the largest size over
   the smallest, its geometric mean growth per doubling and the largest growth of one doubling
   (that doubling and the last one also split into phases: build, simulate, metrics with the
   teardown, and the cyclic collector's share of them, timed by ``gc.callbacks``), and
   the largest size's wall time and memory against the issue-12 targets (<= 120 s and <= 8 GiB at
   131 072 accelerators; <= 1.1x per doubling), and the growth of user time alone, with the
   largest sizes' system time and minor page faults (and the time per fault). On a virtual
   machine that reports free pages to its hypervisor (virtio-balloon free page reporting, seen
   here: ``page_reporting.page_reporting_order`` on the kernel command line), a page the host
   took back costs a host fault on its next first touch: a bare ``[(i, float(i), str(i)) for
   i in range(n)]`` here took 1.96, 4.95 and 6.62 us per fault at 1, 2 and 4 GiB, and 1.9 us
   at 4 GiB run again at once. So a fault's cost depends on what ran before, and the
   benchmark says when the machine is such a guest. The simulated duration stays the scenario's:
   registering each node's HBM alone takes ~125 simulated seconds, so a shorter run would time the
   setup and none of the all-reduce (simulated seconds are cheap; events and samples are what cost).
   The child runs it all under the simulator's garbage-collector setting
   (:func:`pinlab.gcpolicy.tuned_collector`), as ``run_variant`` does, and its steps as
   ``Simulation.run`` does (one nested block).

Then why the ratio is what it is: the time per event of both (the inverse rates), what the
target would leave the model per event, and one more run of the scenario under ``cProfile``
(switched on inside ``env.run`` only, after the timed rounds, so it slows none of them) that
says what one event carries -- function calls, syscalls into ``pinlab.uapi``, stale-DMA checks,
trace records -- and where the time in ``env.run`` goes, by part of the program (the pinlab
layers, the simulator by module, SimPy itself, the compiled flow solver, the built-ins). The
profiler slows calls down unevenly, so these shares say where the work is, not its speed.

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

Usage: ``python benchmarks/bench_sim.py [--quick] [--rounds N] [--max-accelerators N]
[--passes N]``. ``--passes N`` runs the scaling N times, alternately up and down the sizes, and
takes each size's median: the sizes run minutes apart, and a machine whose speed drifts (a
shared virtual machine's does, by 20-40 % over minutes, seen here) tilts one ascending pass.
The growth is then printed twice: from the medians, and from each size's fastest pass --
interference from the rest of the machine only ever adds time (five runs of 512 nodes in a
row here took 1.56-2.49 s, in CPU time too), so the fastest run is the best estimate of the
work itself, as ``timeit`` reasons. Each doubling's growth is listed after the summary.
``--quick``: one round, a shorter bare loop, scaling up to 1 024 accelerators (about 15 s on a
2-core machine). The full scaling run takes minutes at 131 072 accelerators and several GiB;
``--max-accelerators`` stops it earlier. Always exits 0: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import itertools
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import simpy

from pinlab.gcpolicy import freeze_for_exit, tuned_collector
from pinlab.scenarios.config import load_scenario
from pinlab.scenarios.runner import run_scenario

SCENARIO = "cluster-128"
VARIANT = "no-limits"
ACCELERATORS_PER_NODE = 8
MIN_ACCELERATORS = 16
MAX_ACCELERATORS = 131_072
QUICK_MAX_ACCELERATORS = 1_024
ITERATIONS = 3  # the scenario's job: a 3-iteration all-reduce
STEP = 0.1  # simulated seconds between the child's looks at the wall clock
TARGET_WALL = 120.0  # seconds at MAX_ACCELERATORS
TARGET_MEMORY = 8 * 2**30  # bytes at MAX_ACCELERATORS
TARGET_GROWTH = 1.1  # per-accelerator wall time, per doubling
TARGET_RATIO = 0.25  # model / bare SimPy events per second on cluster-128
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


PROFILED_CALLS = {
    "syscalls": ("pinlab/uapi/process.py", "_syscall"),
    "stale-DMA checks": ("pinlab/drivers/dma_check.py", "check"),
    "trace records": ("pinlab/sim/engine.py", "trace"),
}
"""Operations counted per event in the profiled run: (file suffix, function name)."""
BELOW_SIMULATOR = ("kernel", "drivers", "policy", "uapi", "platform")
"""The layers below ``pinlab.sim``: the kernel, its drivers, policy and userspace, the machine."""


def _layer(filename: str, function: str) -> str:
    """The part of the program a profiled function belongs to (``where_time_goes``)."""
    if "/pinlab/" in filename:
        parts = filename.split("/pinlab/")[-1].split("/")
        if parts[0] == "sim":  # the simulator by module: engine, sampling, workloads ...
            return "sim/" + parts[1].removesuffix(".py")
        return parts[0].removesuffix(".py")
    if "/simpy/" in filename:
        return "SimPy"
    if "FlowNetwork" in function:  # the compiled flow solver's methods show as built-ins
        return "sim (compiled flow solver)"
    return "built-ins and the standard library"


def where_time_goes() -> tuple[dict[str, float], dict[str, int], int, int]:
    """One more run of the scenario with ``cProfile`` on inside ``Environment.run`` only: the
    share of that time in each part of the program (``_layer``), the counts of
    :data:`PROFILED_CALLS`, and the calls and events in all. The profiler slows calls down
    unevenly, so the shares say where the work is, not how fast it runs."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    real_run = simpy.Environment.run

    def run(self: simpy.Environment, *args: Any, **kwargs: Any) -> Any:
        profile.enable()
        try:
            return real_run(self, *args, **kwargs)
        finally:
            profile.disable()

    simpy.Environment.run = run  # type: ignore[method-assign]
    try:
        measured = model_run()
    finally:
        simpy.Environment.run = real_run  # type: ignore[method-assign]
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    shares: dict[str, float] = {}
    counts = dict.fromkeys(PROFILED_CALLS, 0)
    calls = 0
    for (filename, _line, function), (_cc, ncalls, tottime, _ct, _callers) in stats.items():
        if function in ("run", "enable", "disable") and filename.endswith("bench_sim.py"):
            continue
        layer = _layer(filename, function)
        shares[layer] = shares.get(layer, 0.0) + tottime
        calls += ncalls
        for what, (suffix, name) in PROFILED_CALLS.items():
            if function == name and filename.endswith(suffix):
                counts[what] += ncalls
    total = sum(shares.values()) or 1.0
    return {k: v / total for k, v in shares.items()}, counts, calls, measured.events


def median_of(runs: list[Measured]) -> Measured:
    """The run with the median event rate (its events and times, consistent together)."""
    return sorted(runs, key=lambda m: m.rate)[len(runs) // 2]


def scale_child(nodes: int) -> dict[str, Any]:
    """One scaling point, in this process (the child): build, simulate in steps, collect."""
    from pinlab.scenarios.metrics import collect_metrics
    from pinlab.scenarios.runner import build_simulation

    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    cfg = load_scenario(SCENARIO, sets=(f"platform.params.nodes={nodes}",))
    collecting = [0.0, 0.0]  # the running collection's start, the collections' total

    def on_collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[0] = time.perf_counter()
        else:
            collecting[1] += time.perf_counter() - collecting[0]

    gc.callbacks.append(on_collection)
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    # the collector as run_variant sets it for build, run, metrics and teardown
    with tuned_collector():
        resolved = cfg.resolve(VARIANT)
        sim, _ = build_simulation(resolved, cfg.platform_spec(VARIANT), cfg.source, None)
        built = time.perf_counter()
        duration = float(resolved.scenario.duration)
        results = [t.result for t in sim.tenants.values()]
        steps = math.ceil(duration / STEP)
        bounds = [k * STEP for k in range(1, steps)]
        walls: list[float] = []  # the wall clock at each step's end
        with tuned_collector():  # what Simulation.run sets, once for all the steps
            for until in bounds:
                sim.env.run(until=until)
                walls.append(time.perf_counter())
        sim.run(duration)
        walls.append(time.perf_counter())  # the last step's end, ``duration``
        collect_metrics(sim, duration)
        sim.teardown()
    ended = time.perf_counter()
    gc.callbacks.remove(on_collection)
    wall, cpu = ended - wall0, time.process_time() - cpu0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak = usage.ru_maxrss * 1024
    per_iteration = None
    starts: list[float] = [t for r in results if (t := getattr(r, "data_start", None)) is not None]
    ends: list[float] = [t for r in results if (t := getattr(r, "data_end", None)) is not None]
    if starts and all(getattr(r, "iterations", 0) == ITERATIONS for r in results):
        # the step in which the first data phase began and the one in which the last
        # tenant's third iteration ended: a step runs the events before its bound
        first = bisect.bisect_right(bounds, min(starts))
        last = bisect.bisect_right(bounds, max(ends))
        per_iteration = (walls[last] - walls[first]) / ITERATIONS
    return {
        "wall": wall,
        "cpu": cpu,
        "user": usage.ru_utime - usage0.ru_utime,
        "sys": usage.ru_stime - usage0.ru_stime,
        "faults": usage.ru_minflt - usage0.ru_minflt,
        "memory": peak - base_rss,
        # less the stop events of the steps
        "events": next(sim.env._eid) - len(sim.env._queue) - (steps - 1),
        "iteration": per_iteration,
        "phases": {
            "build": built - wall0,
            "simulate": walls[-1] - built,
            "metrics": ended - walls[-1],
            "collector": collecting[1],
        },
    }


def _page_reporting() -> tuple[int, int] | None:
    """``(page_reporting_order, KiB reported so far)`` where the kernel reports free guest pages
    to its hypervisor (``mm/page_reporting.c``, through a bound ``virtio_balloon`` device;
    ``reported_kib`` is this machine's own counter, 0 where it has none), else None."""
    params = Path("/sys/module/page_reporting/parameters")
    balloon = Path("/sys/bus/virtio/drivers/virtio_balloon")
    if not any(p.name.startswith("virtio") for p in balloon.glob("virtio*")):
        return None
    try:
        order = int((params / "page_reporting_order").read_text())
    except (OSError, ValueError):
        return None
    try:
        reported = int((params / "reported_kib").read_text())
    except (OSError, ValueError):
        reported = 0
    return order, reported


def scale_point(nodes: int) -> dict[str, Any]:
    """One scaling point in a fresh child process (its own peak memory)."""
    cmd = [sys.executable, __file__, "--child", str(nodes)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.splitlines()[-1]))


def _median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One size's figures over several passes: the run at the (lower) median wall time, its
    figures together (of two, the faster), with the median iteration time."""
    row = dict(sorted(runs, key=lambda r: r["wall"])[(len(runs) - 1) // 2])
    iterations = [r["iteration"] for r in runs if r["iteration"]]
    row["iteration"] = statistics.median(iterations) if iterations else None
    return row


def _print_growth(label: str, walls: list[tuple[int, float]], *, target: bool = True) -> None:
    """The growth of wall time per accelerator over ``(accelerators, wall)``, per doubling:
    the geometric mean, the largest step (and where), every step; ``target``: beside the
    issue-12 target (the target is on wall time; other times are shown without it)."""
    per_acc = [wall / acc for acc, wall in walls]
    steps = [b / a for a, b in itertools.pairwise(per_acc)]
    first, last = walls[0][0], walls[-1][0]
    growth = per_acc[-1] / per_acc[0]
    mean = growth ** (1 / (len(walls) - 1))
    worst = max(range(len(steps)), key=steps.__getitem__)
    print(
        f"  {label}, {last:,} vs {first} accelerators: {growth:.2f}x; per doubling "
        f"{mean:.2f}x (geometric mean), {steps[worst]:.3f}x at most ({walls[worst][0]:,} -> "
        f"{walls[worst + 1][0]:,}{f'; target <= {TARGET_GROWTH}x' if target else ''})"
    )
    print(f"    each doubling: {' '.join(f'{x:.2f}' for x in steps)}")


PHASES = ("build", "simulate", "metrics", "collector")
"""A child's wall time in parts: building the platform and the tenants, the simulation (every
step), collecting the metrics with the teardown; and the collector's share of those three
(``gc.callbacks``, timed from each collection's start to its stop)."""


def _print_phases(rows: list[tuple[int, dict[str, Any]]]) -> None:
    """Where the time of the largest doubling of wall time per accelerator went, and of the last
    doubling: each phase's wall time per accelerator on both sides and its growth. A phase that
    grows alone points at its own code; all growing alike points at what they share (the
    machine's caches, the size of the heap)."""
    per_acc = [row["wall"] / acc for acc, row in rows]
    worst = max(range(len(rows) - 1), key=lambda i: per_acc[i + 1] / per_acc[i])
    for i in sorted({worst, len(rows) - 2}):
        (small, before), (large, after) = rows[i], rows[i + 1]
        parts = []
        for phase in PHASES:
            a = before["phases"][phase] / small * 1e6
            b = after["phases"][phase] / large * 1e6
            parts.append(f"{phase} {a:.1f} -> {b:.1f} us ({b / a if a else 0:.2f}x)")
        print(f"  per accelerator, {small:,} -> {large:,}: {', '.join(parts)}")


def _print_row(accelerators: int, row: dict[str, Any]) -> None:
    iteration = row["iteration"]
    per_iter = f"{iteration / accelerators * 1e6:7.2f}us" if iteration else "      -"
    print(
        f"  {accelerators:>7} {accelerators // ACCELERATORS_PER_NODE:>6} "
        f"{row['events']:>9,} {row['wall']:>7.2f}s {row['user']:>7.2f}s {row['sys']:>6.2f}s "
        f"{row['wall'] / accelerators * 1e3:>7.3f}ms {row['memory'] / 2**20:>7.0f}Mi "
        f"{row['memory'] / accelerators / 1024:>6.1f}Ki {per_iter}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, a shorter bare loop")
    parser.add_argument("--rounds", type=int, default=None, help="runs per figure (default 3)")
    parser.add_argument(
        "--max-accelerators",
        type=int,
        default=None,
        help=f"largest scaling point (default {MAX_ACCELERATORS:,}; --quick: "
        f"{QUICK_MAX_ACCELERATORS:,})",
    )
    parser.add_argument(
        "--passes",
        type=int,
        default=1,
        help="scaling passes, alternately up and down the sizes; each size's figures are "
        "the median over the passes (a machine whose speed drifts during the run biases a "
        "single ascending pass's growth; alternating directions cancels a steady drift)",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error(f"--passes: expected a count >= 1, found {args.passes}")
    if args.child:
        print(json.dumps(scale_child(args.child)), flush=True)
        freeze_for_exit()  # as the pinlab executable does: no full collection at exit
        return 0
    rounds = args.rounds or (1 if args.quick else 3)
    bare_events = 200_000 if args.quick else 1_000_000
    largest = args.max_accelerators or (QUICK_MAX_ACCELERATORS if args.quick else MAX_ACCELERATORS)
    started = time.perf_counter()
    model_run((f"platform.params.nodes={MIN_ACCELERATORS // ACCELERATORS_PER_NODE}",), [VARIANT])

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
    print(f"simulator benchmark (median of {rounds} round{'s' if rounds != 1 else ''})")
    print(
        f"  {SCENARIO} (every variant): {model.events:,} events in {model.run_seconds:.2f} s "
        f"of env.run ({model.wall_seconds:.2f} s end to end)"
    )
    print(f"  model events/s:     {model.rate:12,.0f}")
    print(f"  bare SimPy events/s:{bare.rate:12,.0f}  ({PROCS} processes of timeouts)")
    print(
        f"  ratio model/bare:   {ratio:12.4f}  ({ratio:.2%} of raw SimPy speed; "
        f"target >= {TARGET_RATIO})"
    )

    # why the ratio is what it is: pinlab's own work per event, by part of the program
    shares, counts, calls, events = where_time_goes()
    per_model, per_bare = 1e6 / model.rate, 1e6 / bare.rate
    print(
        f"  per event: {per_model:.1f} us in the model, {per_bare:.2f} us in the bare loop; "
        f"the target would leave the model {per_bare / TARGET_RATIO:.1f} us"
    )
    per = ", ".join(f"{n / events:.2f} {what}" for what, n in counts.items())
    print(f"  what one event carries (a profiled run): {calls / events:.0f} calls, {per}")
    below = sum(shares.get(layer, 0.0) for layer in BELOW_SIMULATOR)
    print(
        f"  of those {per_model:.1f} us, the layers below the simulator "
        f"({', '.join(BELOW_SIMULATOR)}) take {below:.0%} (profiled): {below * per_model:.1f} us"
    )
    ranked = sorted(shares.items(), key=lambda kv: -kv[1])
    print(
        "  where env.run's time goes (profiled): "
        + ", ".join(f"{layer} {share:.0%}" for layer, share in ranked if share >= 0.005)
    )

    # 2. scaling: wall time and memory per accelerator, 16 accelerators and up, doubling
    print()
    print(
        f"scaling: {SCENARIO}, variant {VARIANT}, a {ITERATIONS}-iteration all-reduce "
        "(wall: build + simulate + metrics, one child process per size)"
    )
    print(
        f"  {'accel':>7} {'nodes':>6} {'events':>9} {'wall':>8} {'user':>8} {'sys':>7} "
        f"{'wall/acc':>9} {'peak mem':>9} {'mem/acc':>8} {'iter/acc':>9}"
    )
    sizes: list[int] = []
    accelerators = MIN_ACCELERATORS
    while accelerators <= largest:
        sizes.append(accelerators)
        accelerators *= 2
    runs: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
    reported_before = (_page_reporting() or (0, 0))[1]
    for k in range(args.passes):
        for size in sizes if k % 2 == 0 else sizes[::-1]:
            runs[size].append(scale_point(size // ACCELERATORS_PER_NODE))
            if args.passes == 1:
                _print_row(size, runs[size][0])
    rows = [(size, _median_row(runs[size])) for size in sizes]
    if args.passes > 1:
        for size, row in rows:
            _print_row(size, row)
        print(f"  (each row: the median of {args.passes} passes, alternately up and down)")
    if len(rows) >= 2:
        _print_growth("per-accelerator wall time", [(acc, row["wall"]) for acc, row in rows])
        _print_phases(rows)
        if args.passes > 1:  # interference only ever adds time: the fastest pass is the work's
            fastest = [(size, min(r["wall"] for r in runs[size])) for size in sizes]
            _print_growth(f"the same, the fastest of {args.passes} passes", fastest)
        cpu = [row["cpu"] / acc for acc, row in rows]
        print(f"  the same in CPU time: {cpu[-1] / cpu[0]:.2f}x")
        # the CPU time split: the process's own work, and the kernel's on its behalf (page
        # faults, mappings), with the page faults behind the latter
        _print_growth("user CPU time", [(acc, row["user"]) for acc, row in rows], target=False)
        sys_times = ", ".join(
            f"{acc:,}: {row['sys']:.2f} s / {row['faults']:,} faults "
            f"({row['sys'] / max(row['faults'], 1) * 1e6:.2f} us each)"
            for acc, row in rows[-3:]
        )
        print(f"  system CPU time and minor page faults, the largest sizes: {sys_times}")
        reporting = _page_reporting()
        if reporting is not None:
            order, reported = reporting
            print(
                f"  this machine is a guest with free page reporting (page_reporting_order "
                f"{order}; {(reported - reported_before) / 2**20:.1f} GiB handed back to the "
                "hypervisor during the scaling): a page it took back costs a host fault when "
                "touched again, so a fault's cost depends on what ran before"
            )
        its = [(acc, row["iteration"] / acc) for acc, row in rows if row["iteration"]]
        if len(its) >= 2:
            print(
                f"  wall time per iteration per accelerator, {its[-1][0]:,} vs {its[0][0]}: "
                f"{its[-1][1] / its[0][1]:.2f}x"
            )
    if rows and rows[-1][0] == MAX_ACCELERATORS:
        row = rows[-1][1]
        print(
            f"  {MAX_ACCELERATORS:,} accelerators: wall {row['wall'] / TARGET_WALL:.2f}x the "
            f"{TARGET_WALL:.0f} s target, memory {row['memory'] / TARGET_MEMORY:.2f}x the 8 GiB"
        )
    print(f"total runtime: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
