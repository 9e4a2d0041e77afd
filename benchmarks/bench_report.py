"""Benchmark: the reports' share of ``pinlab run``'s wall time (issue 12, item 4).

Target: reports (plots, run pages, the suite page) at most 25 % of the wall time of
``pinlab run`` over the built-in scenarios.

Two measurements, each a ratio taken in one run of this script:

* **command line** -- ``pinlab run --out DIR --quiet`` and the same with ``--no-report``, each
  in a fresh process into a fresh directory, alternated ``--repeat`` times so that a change in
  the machine's load hits both; the share is ``1 - median(no report) / median(report)``, of
  the wall time (the target) and of the CPU time (what a loaded machine barely changes);
* **in process** -- every built-in scenario simulated once, then the seconds spent writing its
  data files and the seconds spent rendering its reports (:func:`run_report_files` per run and
  the suite page), timed apart: the same share without process start-up or the noise of two
  separate runs.

Usage: ``python benchmarks/bench_report.py [--repeat N] [--quick]``; ``--quick`` uses one
scenario (``efa-gaudi``) and one repetition (a smoke run: too short to judge). A few minutes in
full. Wall times on a shared machine are noisy: read the ratios, not the seconds. Always exits 0
(it reports; the PASS/FAIL line says whether the target was met).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pinlab.report.html import render_suite_html, run_report_files
from pinlab.report.output import write_run
from pinlab.scenarios import config, runner

TARGET = 0.25
CLI = "import sys; from pinlab.cli import main; sys.exit(main(sys.argv[1:]))"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_seconds(scenarios: list[str], report: bool) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``pinlab run`` (a fresh process, a fresh output
    directory). CPU seconds barely change with the machine's load; wall seconds do."""
    with tempfile.TemporaryDirectory(prefix="pinlab-bench-report-") as out:
        argv = [sys.executable, "-c", CLI, "run", *scenarios, "--out", out, "--quiet"]
        if not report:
            argv.append("--no-report")
        cpu, start = _children_cpu(), time.perf_counter()
        subprocess.run(argv, check=False, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start, _children_cpu() - cpu


def in_process(scenarios: list[str]) -> tuple[float, float, float]:
    """(simulation, data files, reports) seconds for ``scenarios``, each timed apart."""
    simulate = files = reports = 0.0
    suite = []
    with tempfile.TemporaryDirectory(prefix="pinlab-bench-report-") as out:
        for name in scenarios:
            start = time.perf_counter()
            results, verdict = runner.run_scenario(config.load_scenario(name))
            simulate += time.perf_counter() - start
            suite.append((results, verdict))
            for result in results:
                start = time.perf_counter()
                write_run(result, Path(out))
                files += time.perf_counter() - start
                start = time.perf_counter()
                run_report_files(result, verdict)
                reports += time.perf_counter() - start
        if len(suite) > 1:
            start = time.perf_counter()
            render_suite_html(suite)
            reports += time.perf_counter() - start
    return simulate, files, reports


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="command-line runs of each kind")
    parser.add_argument("--quick", action="store_true", help="one scenario, one repetition")
    args = parser.parse_args()
    scenarios = ["efa-gaudi"] if args.quick else list(config.BUILTIN)
    named = scenarios if args.quick else []  # no name: pinlab run's whole suite
    repeat = 1 if args.quick else max(1, args.repeat)

    with_report: list[tuple[float, float]] = []
    without: list[tuple[float, float]] = []
    for _ in range(repeat):
        with_report.append(cli_seconds(named, report=True))
        without.append(cli_seconds(named, report=False))
    print(f"scenarios: {', '.join(scenarios)}; {repeat} run(s) of each kind, alternated")
    shares = []
    for kind, index in (("wall", 0), ("CPU", 1)):
        full = statistics.median(t[index] for t in with_report)
        bare = statistics.median(t[index] for t in without)
        shares.append(max(0.0, 1.0 - bare / full))
        for label, median, times in (
            ("pinlab run --quiet            ", full, with_report),
            ("pinlab run --quiet --no-report", bare, without),
        ):
            each = ", ".join(f"{t[index]:.2f}" for t in times)
            print(f"{label} {kind:4s} median {median:7.2f} s ({each})")
        print(f"command line, {kind}: reports are {shares[-1]:.1%} of pinlab run's {kind} time")
    cli_share = shares[0]

    simulate, files, reports = in_process(scenarios)
    share = reports / (simulate + files + reports)
    print(
        f"in process: simulation {simulate:.2f} s, data files {files:.2f} s, "
        f"reports {reports:.2f} s: reports are {share:.1%}"
    )
    verdict = "PASS" if max(cli_share, share) <= TARGET else "FAIL"
    print(f"{verdict}: target reports <= {TARGET:.0%} of the wall time (both measurements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
