"""Benchmark: the max-min flow solver (``pinlab.sim.flows``) at 10 to 10 000 concurrent flows,
optionally side by side with SimGrid's on the identical case.

The case for ``N`` flows is a random cluster, drawn from a seeded ``random.Random``:

* ``max(4, N // 4)`` hosts, in racks of 16; each host has a NIC transmit and receive link
  (10-25 GB/s each) and a host-memory link (40-80 GB/s); each rack an uplink and a downlink
  (80-200 GB/s); ``ceil(racks / 2)`` spine links (150-400 GB/s). Every capacity is drawn
  uniformly, so no two links are alike;
* a route per ordered host pair: the source's transmit link, then -- between racks -- the
  source rack's uplink, a spine drawn per pair and the destination rack's downlink, then the
  destination's receive link. One pair in seven is *staged*: its route also crosses the
  source's host memory twice (and consumes twice the rate there);
* ``N`` flows between random distinct host pairs, of distinct sizes (10 MB to 10 GB, whole
  bytes); one flow in ten has its own rate cap (2-12 GB/s).

All flows start at time 0 (one ``transfer_many``) and run to completion, so the solver runs once
for the start and once per completion. Printed per N: the wall time of the run (``transfer_many``
and ``env.run``; building the links is excluded), completions per second, and how many flows
the solver re-solved per recompute on average (the rest kept their rates, module docstring of
``pinlab.sim.flows``).

``--vs-simgrid`` writes the identical case -- links with their capacities, every route as its
list of links, every flow's size -- to a JSON file and runs it in SimGrid 3.32
(``benchmarks/simgrid_flows.py`` under the system ``/usr/bin/python3``, Debian package
``python3-simgrid``; CM02, TCP-gamma 0, no cross-traffic, bandwidth and latency factors 1,
latency 0). SimGrid has no per-flow cap for host-to-host communications in its Python API,
so a capped flow gets its own source host whose route starts with a private link of the cap's
bandwidth -- which is what a cap means in max-min sharing. Each tool is timed in its own
process around the solve only (pinlab here, SimGrid around ``Engine.run``); up to 1 000 flows
each tool runs three times, alternating, and the median counts. Printed per N:
SimGrid's wall time, the ratio pinlab / SimGrid, and the largest per-flow relative difference
of completion times. Then the issue-12 targets: max relative difference <= 1e-9; wall time
<= 1x SimGrid's at 1 000 and 5 000 flows; 10 000 flows finish.

The first line says which implementation of the solver ran: compiled (mypyc, the install's
default) or pure Python (``pinlab.sim.native``). ``--both`` also runs the pure-Python one,
alternating with the compiled one, and prints its wall time (and ratio to SimGrid's) and whether
both gave the same completion times to the bit.

Usage: ``python benchmarks/bench_flows.py [--quick] [--vs-simgrid] [--both] [--flows N ...]``.
``--quick`` runs N = 10, 100, 1 000 only. Always exits 0: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import simpy

from pinlab.sim import flows, native

GB = 1e9
RACK = 16
STAGED = 7  # one host pair in STAGED crosses host memory twice
CAPPED = 10  # one flow in CAPPED has a rate cap
FULL = (10, 100, 1_000, 5_000, 10_000)
QUICK = (10, 100, 1_000)
TARGETS = (1_000, 5_000)  # wall time <= 1x SimGrid's at these N
REPEAT_UP_TO = 1_000  # cases this small run three times (median wall time each)
MAX_REL_DIFF = 1e-9
SYSTEM_PYTHON = "/usr/bin/python3"
SIMGRID_SCRIPT = Path(__file__).with_name("simgrid_flows.py")


@dataclass(frozen=True, slots=True)
class Flow:
    src: int
    dst: int
    route: tuple[int, ...]  # link indices; a staged route lists host memory twice
    size: int  # bytes
    cap: float | None  # bytes/s


@dataclass(frozen=True, slots=True)
class Case:
    links: list[tuple[str, float]]  # (name, bytes/s)
    flows: list[Flow]


def make_case(n: int, seed: int) -> Case:
    """The random cluster and flows of the module docstring, for ``n`` flows."""
    rng = random.Random(f"{seed}/{n}")
    hosts = max(4, n // 4)
    racks = math.ceil(hosts / RACK)
    links: list[tuple[str, float]] = []

    def link(name: str, low: float, high: float) -> int:
        links.append((name, rng.uniform(low, high) * GB))
        return len(links) - 1

    tx = [link(f"h{h}.tx", 10, 25) for h in range(hosts)]
    rx = [link(f"h{h}.rx", 10, 25) for h in range(hosts)]
    mem = [link(f"h{h}.mem", 40, 80) for h in range(hosts)]
    up = [link(f"r{r}.up", 80, 200) for r in range(racks)]
    down = [link(f"r{r}.down", 80, 200) for r in range(racks)]
    spine = [link(f"s{s}", 150, 400) for s in range(math.ceil(racks / 2))]
    routes: dict[tuple[int, int], tuple[int, ...]] = {}

    def route(src: int, dst: int) -> tuple[int, ...]:
        if (src, dst) not in routes:
            path = [tx[src]]
            if src // RACK != dst // RACK:
                path += [up[src // RACK], rng.choice(spine), down[dst // RACK]]
            path.append(rx[dst])
            if rng.randrange(STAGED) == 0:
                path = [mem[src], *path, mem[src]]
            routes[src, dst] = tuple(path)
        return routes[src, dst]

    sizes = rng.sample(range(10**7, 10**10), n)
    flows: list[Flow] = []
    for size in sizes:
        src, dst = rng.sample(range(hosts), 2)
        cap = rng.uniform(2, 12) * GB if rng.randrange(CAPPED) == 0 else None
        flows.append(Flow(src, dst, route(src, dst), size, cap))
    return Case(links, flows)


@dataclass(frozen=True, slots=True)
class PinlabRun:
    wall: float
    finish: list[float]
    recomputes: int
    resolved: int


def run_pinlab(case: Case, solver: ModuleType = flows) -> PinlabRun:
    env = simpy.Environment()
    net = solver.FlowNetwork(env)
    objs = [net.add_link(name, capacity) for name, capacity in case.links]
    specs = [(f.size, [objs[i] for i in f.route], f.cap, f"f{k}") for k, f in enumerate(case.flows)]
    start = time.perf_counter()
    events = net.transfer_many(specs)
    env.run()
    wall = time.perf_counter() - start
    assert net.completed == len(case.flows)
    return PinlabRun(wall, [float(ev.value) for ev in events], net.recomputes, net.resolved)


def simgrid_case(case: Case) -> dict[str, object]:
    """The case in ``simgrid_flows.py``'s input format (a cap becomes a private link)."""
    links = list(case.links)
    routes: list[tuple[str, str, list[int]]] = []
    index: dict[tuple[int, int], int] = {}
    flows: list[tuple[int, int]] = []
    for k, f in enumerate(case.flows):
        if f.cap is None:
            if (f.src, f.dst) not in index:
                index[f.src, f.dst] = len(routes)
                routes.append((f"h{f.src}", f"h{f.dst}", list(f.route)))
            flows.append((index[f.src, f.dst], f.size))
        else:
            links.append((f"f{k}.cap", f.cap))
            routes.append((f"f{k}.src", f"h{f.dst}", [len(links) - 1, *f.route]))
            flows.append((len(routes) - 1, f.size))
    return {"links": links, "routes": routes, "flows": flows}


def run_simgrid(case: Case, workdir: Path, n: int) -> tuple[float, list[float]]:
    path = workdir / f"flows-{n}.json"
    path.write_text(json.dumps(simgrid_case(case)), encoding="utf-8")
    out = subprocess.run(
        [SYSTEM_PYTHON, str(SIMGRID_SCRIPT), str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    result = json.loads(out.stdout)
    return float(result["wall"]), [float(x) for x in result["finish"]]


def simgrid_available() -> bool:
    if not Path(SYSTEM_PYTHON).exists():
        return False
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import simgrid"], capture_output=True)
    return probe.returncode == 0


def max_rel_diff(ours: list[float], theirs: list[float]) -> float:
    return max(abs(a - b) / abs(b) for a, b in zip(ours, theirs, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true", help="N = 10, 100, 1 000 only")
    parser.add_argument("--vs-simgrid", action="store_true", help="run the same cases in SimGrid")
    parser.add_argument("--both", action="store_true", help="also run the pure-Python solver")
    parser.add_argument("--flows", type=int, nargs="+", help="the N to run (overrides --quick)")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)
    sizes = tuple(args.flows) if args.flows else QUICK if args.quick else FULL
    if args.vs_simgrid and not simgrid_available():
        print(f"--vs-simgrid: SimGrid not importable by {SYSTEM_PYTHON}; install python3-simgrid")
        return 0

    implementation = native.implementation()
    pure = None
    if args.both and implementation.startswith("compiled"):
        pure = native.load_pure()
    print("max-min flow solver: N concurrent flows from t=0 to completion (random cluster)")
    print(f"solver: {implementation}" + (" (and pure Python: --both)" if pure else ""))
    if args.both and pure is None:
        print("  --both: the solver is pure Python already; nothing to compare")
    head = f"{'N':>6} {'links':>6} {'pinlab s':>9} {'compl/s':>9} {'re-solved':>9}"
    if args.vs_simgrid:
        head += f" {'SimGrid s':>9} {'ratio':>7} {'max rel diff':>12}"
    if pure:
        head += f" {'pure s':>9}" + (f" {'ratio':>7}" if args.vs_simgrid else "") + " same"
    print(head)
    walls: dict[int, tuple[float, float]] = {}
    diffs: dict[int, float] = {}
    finished: dict[int, bool] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-flows-") as tmp:
        for n in sizes:
            case = make_case(n, args.seed)
            ours_walls: list[float] = []
            sg_walls: list[float] = []
            pure_walls: list[float] = []
            same = True
            for _ in range(3 if n <= REPEAT_UP_TO else 1):  # the tools alternate
                ours = run_pinlab(case)
                ours_walls.append(ours.wall)
                if pure:
                    theirs = run_pinlab(case, pure)
                    pure_walls.append(theirs.wall)
                    same &= [x.hex() for x in theirs.finish] == [x.hex() for x in ours.finish]
                if args.vs_simgrid:
                    sg_wall, sg_finish = run_simgrid(case, Path(tmp), n)
                    sg_walls.append(sg_wall)
            wall = statistics.median(ours_walls)
            finished[n] = len(ours.finish) == n
            row = (
                f"{n:>6} {len(case.links):>6} {wall:>9.3f} {n / wall:>9.0f}"
                f" {ours.resolved / ours.recomputes:>9.1f}"
            )
            if args.vs_simgrid:
                sg_wall = statistics.median(sg_walls)
                walls[n] = (wall, sg_wall)
                diffs[n] = max_rel_diff(ours.finish, sg_finish)
                row += f" {sg_wall:>9.3f} {wall / sg_wall:>7.3f} {diffs[n]:>12.2e}"
            if pure:
                pure_wall = statistics.median(pure_walls)
                row += f" {pure_wall:>9.3f}"
                if args.vs_simgrid:
                    row += f" {pure_wall / statistics.median(sg_walls):>7.3f}"
                row += f" {'yes' if same else 'NO'}"
            print(row, flush=True)
    print("  re-solved: flows whose rate was solved again per recompute (mean)")
    print(f"  wall times: median of 3 alternating runs up to N = {REPEAT_UP_TO}, one run above")
    if pure:
        print("  pure s: the pure-Python solver; same: identical completion times to the bit")
    if args.vs_simgrid:
        worst = max(diffs.values())
        verdict = "PASS" if worst <= MAX_REL_DIFF else "FAIL"
        print(f"{verdict}: max relative difference {worst:.2e} (target <= {MAX_REL_DIFF:g})")
        for n in TARGETS:
            if n in walls:
                ratio = walls[n][0] / walls[n][1]
                verdict = "PASS" if ratio <= 1 else "FAIL"
                print(f"{verdict}: wall time at {n} flows {ratio:.3f}x SimGrid's (target <= 1x)")
    if 10_000 in finished:
        print(f"{'PASS' if finished[10_000] else 'FAIL'}: 10 000 flows finish")
    print(f"total runtime: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
