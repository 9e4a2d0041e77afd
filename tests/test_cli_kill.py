"""``pinlab run`` killed with SIGKILL at any moment leaves every run directory complete or
absent (issue "Hardening", item 2): a directory that exists holds every file of a run --
config, summary, series, trace, plots and report.html -- each whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RUN_FILES = {"config.toml", "summary.json", "series.csv", "trace.json", "report.html"}


def _check_complete(out: Path) -> int:
    complete = 0
    for scenario in (p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for run in (p for p in scenario.iterdir() if not p.name.startswith(".")):
            names = {f.name for f in run.iterdir()}
            assert names >= RUN_FILES, (run, sorted(names))
            assert any(n.startswith("plot-") for n in names), run
            json.loads((run / "summary.json").read_text(encoding="utf-8"))
            json.loads((run / "trace.json").read_text(encoding="utf-8"))
            assert (run / "report.html").read_text(encoding="utf-8").rstrip().endswith("</html>")
            complete += 1
    return complete


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.8, 2.0, 3.5])
def test_sigkill_leaves_every_run_directory_complete_or_absent(
    tmp_path: Path, delay: float
) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pinlab.cli", "run", "desktop-pin-hog", "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    if out.exists():
        _check_complete(out)
    # a rerun into the same --out completes and cleans what the killed writer left
    subprocess.run(
        [sys.executable, "-m", "pinlab.cli", "run", "desktop-pin-hog", "--out", str(out)],
        check=False,
        capture_output=True,
        cwd=tmp_path,
    )
    assert _check_complete(out) == 4
    leftovers = [p for p in (out / "desktop-pin-hog").iterdir() if p.name.startswith(".")]
    assert leftovers == []
