"""The benchmarks of ``benchmarks/`` still run (issue 12, item 6): each one's ``--quick`` mode,
in a fresh interpreter from an empty working directory, exits 0, prints the figures the issue
asks for and writes nothing where it ran. No time or ratio is asserted (the tests never assert
wall-clock times); this only keeps the tools that measure them from rotting as the code they
call changes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = pytest.mark.slow


def _run(cwd: Path, *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / argv[0]), *argv[1:]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert list(cwd.iterdir()) == [], "the benchmark wrote into its working directory"
    return done.stdout


@pytest.mark.parametrize(
    ("argv", "printed"),
    [
        (("bench_alloc.py", "--quick"), ["rate ratio", "B/buffer"]),
        (("bench_flows.py", "--quick"), ["compl/s", "re-solved"]),
        (
            ("bench_sim.py", "--quick"),
            [
                "per doubling",
                "per iteration per accelerator",
                "what one event carries",
                "where env.run's time goes",
            ],
        ),
        (("bench_sweep.py", "--quick"), ["ratio (1 worker / 2 workers)", "results.csv identical"]),
        (("bench_report.py", "--quick"), ["reports are", "of pinlab run's wall time"]),
    ],
    ids=lambda v: v[0] if isinstance(v, tuple) else "",
)
def test_each_benchmark_runs_quick(
    tmp_path: Path, argv: tuple[str, ...], printed: list[str]
) -> None:
    out = _run(tmp_path, *argv)
    for text in printed:
        assert text in out, out
    if argv[0] == "bench_sim.py":  # the profiled run saw the model's work in each layer
        carried = re.search(r"(\d+) calls, ([\d.]+) syscalls, ([\d.]+) stale-DMA checks", out)
        assert carried and all(float(v) > 0 for v in carried.groups()), out
        for layer in ("kernel", "uapi", "SimPy"):
            assert re.search(rf"time goes \(profiled\): .*\b{layer} \d+%", out), out


SYSTEM_PYTHON = "/usr/bin/python3"  # where Debian's python3-simgrid is, as bench_flows.py says


def _simgrid() -> bool:
    if not Path(SYSTEM_PYTHON).is_file():
        return False
    probe = [SYSTEM_PYTHON, "-c", "import simgrid"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _simgrid(), reason="SimGrid (Debian python3-simgrid) is not installed")
def test_the_flow_benchmark_runs_beside_simgrid(tmp_path: Path) -> None:
    """With SimGrid there, the same cases run in it and the rates agree (the one figure this
    may assert: it is not a time)."""
    out = _run(tmp_path, "bench_flows.py", "--quick", "--vs-simgrid")
    assert "PASS: max relative difference" in out, out
