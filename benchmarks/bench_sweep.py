"""Benchmark: a parameter sweep on one worker process against two (issue 12, item 4).

Target (on a 2-core machine): two workers at least 1.8x faster than one, on a sweep whose
points take at least a second each. The sweep is ``benchmarks/sweep-bench.toml``: 24 equal
points of a built-in scenario over a long simulated duration.

The script runs the whole sweep twice through :func:`pinlab.sweep.run_sweep`, each time into
a fresh results directory -- ``jobs=1`` (every point in this process) and ``jobs=2`` (this
process and one worker, started and stopped inside the timing) -- and
prints both wall times, the seconds per point of the one-worker run and the ratio. The two
``results.csv`` files must be byte-identical (the table does not depend on how the sweep ran).
A machine shared with other work cannot give two processes two cores' worth: the script
first measures what it does give -- the same pure-Python loop in one process, then in two at
once -- and prints that ratio beside the sweep's (a sweep cannot beat it).

Usage: ``python benchmarks/bench_sweep.py [--quick]``; ``--quick`` runs four of the points
(a CI-time run: too short to judge). About a minute in full, two on a busy machine. Always
exits 0 (it reports; the PASS/FAIL line says whether the target was met).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pinlab.sweep import load_sweep, run_sweep

SWEEP = Path(__file__).resolve().with_name("sweep-bench.toml")
TARGET = 1.8
MIN_POINT_SECONDS = 1.0


SPIN = "x = 0\nfor i in range(20_000_000):\n    x += i\n"


def machine_ratio() -> float:
    """How much faster two processes finish two equal CPU-bound loops than one process runs
    them in turn (2.0 on two idle cores)."""

    def spin(n: int) -> float:
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]
        for proc in procs:
            proc.wait()
        return time.perf_counter() - start

    return 2 * spin(1) / spin(2)


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(jobs: int, out: Path, max_points: int | None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, points run) of the bench sweep with ``jobs`` processes."""
    sweep = load_sweep(SWEEP)
    cpu = _cpu()
    start = time.perf_counter()
    outcome = run_sweep(sweep, out, jobs=jobs, max_points=max_points)
    return time.perf_counter() - start, _cpu() - cpu, outcome.ran


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="four points (too short to judge)")
    args = parser.parse_args(argv)
    max_points = 4 if args.quick else None
    print(f"sweep {SWEEP.name}: {len(load_sweep(SWEEP).points)} points, {os.cpu_count()} CPUs")
    machine = machine_ratio()
    print(f"this machine now: 2 processes finish 2 loops {machine:.2f}x faster than 1 process")
    with tempfile.TemporaryDirectory(prefix="pinlab-bench-sweep-") as tmp:
        one, two = Path(tmp) / "one", Path(tmp) / "two"
        wall1, cpu1, n = timed(1, one, max_points)
        wall2, cpu2, n2 = timed(2, two, max_points)
        same = (one / "results.csv").read_bytes() == (two / "results.csv").read_bytes()
    per_point = wall1 / max(1, n)
    ratio = wall1 / wall2 if wall2 > 0 else float("inf")
    print(f"1 worker : {wall1:6.2f} s wall ({cpu1:6.2f} s CPU), {n} points, {per_point:.2f} s each")
    print(f"2 workers: {wall2:6.2f} s wall ({cpu2:6.2f} s CPU), {n2} points")
    print(f"results.csv identical: {'yes' if same else 'NO'}")
    print(f"ratio (1 worker / 2 workers): {ratio:.2f}  (the machine's own: {machine:.2f})")
    if per_point < MIN_POINT_SECONDS:
        print(f"note: points took {per_point:.2f} s (< {MIN_POINT_SECONDS} s): not the target case")
    if args.quick:
        print("quick run: not judged")
    else:
        verdict = "PASS" if ratio >= TARGET and same else "FAIL"
        print(f"{verdict}: ratio {ratio:.2f} {'>=' if ratio >= TARGET else '<'} {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
