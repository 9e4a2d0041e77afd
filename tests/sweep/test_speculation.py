"""A sweep on a pool runs replications speculatively while their group's first seed runs.

Issue 12, item 4 (a sweep on 2 workers >= 1.8x faster than on 1): a replicated sweep runs a
group's first seed first, to learn whether the point is deterministic (then its other seeds
would repeat it). On a pool the replications no longer wait for that verdict: they queue
behind every first seed and run on a process that would otherwise wait -- above all while
the sweep's first point runs alone -- and the verdict then keeps or drops them.

The point runners here are module-level (the spawned workers import this module) and meet
through marker files in a directory named by an environment variable, so that a first seed
can wait until a replication has started, finished or failed: each test fails on a pool that
does not speculate (the first seed would wait in vain, and the runner then says so).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from pinlab.sweep import PointError, load_sweep, pool, run_point, run_sweep

SWEEP = """
[sweep]
name = "speculate"
scenario = "desktop-pin-hog"
variants = ["none"]
replications = 3
seed = 5

[fixed]
"scenario.duration" = "2s"
"tenants.compositor.params.arrivals" = "poisson"
"""
MARKS = "PINLAB_TEST_SPECULATION"
DETERMINISTIC = "PINLAB_TEST_SPECULATION_DETERMINISTIC"


def _mark(name: str) -> None:
    (Path(os.environ[MARKS]) / name).touch()


def _wait_for(name: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not (Path(os.environ[MARKS]) / name).exists():
        if time.monotonic() > deadline:
            raise PointError(f"point 0: no {name} while the first seed ran: no speculation")
        time.sleep(0.01)


def _verdict(result: dict[str, Any]) -> dict[str, Any]:
    if os.environ.get(DETERMINISTIC):
        result["row"]["deterministic"] = True
    return result


def first_waits_for_a_replication(spec: dict[str, Any]) -> dict[str, Any]:
    """Point 0 (the first seed) returns only once point 1 has run to its end elsewhere."""
    if spec["index"] == 0:
        _wait_for("done-1")
    result = _verdict(run_point(spec))
    _mark(f"done-{spec['index']}")
    return result


def replications_fail(spec: dict[str, Any]) -> dict[str, Any]:
    """Every replication fails; the first seed returns once point 1 has failed elsewhere."""
    if spec["index"] != 0:
        _mark(f"failed-{spec['index']}")
        raise PointError(f"point {spec['index']}: made to fail")
    _wait_for("failed-1")
    return _verdict(run_point(spec))


def replications_outlive_the_sweep(spec: dict[str, Any]) -> dict[str, Any]:
    """A replication blocks until the test releases it (a minute at most); the first seed
    returns once point 1 has begun."""
    if spec["index"] == 0:
        _wait_for("started-1")
        return _verdict(run_point(spec))
    _mark(f"started-{spec['index']}")
    deadline = time.monotonic() + 60.0
    while not (Path(os.environ[MARKS]) / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    result = run_point(spec)
    _mark(f"done-{spec['index']}")
    return result


def deterministic_rows(spec: dict[str, Any]) -> dict[str, Any]:
    result = run_point(spec)
    result["row"]["deterministic"] = True
    return result


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    path = tmp_path / "speculate.toml"
    path.write_text(SWEEP, encoding="utf-8")
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv(MARKS, str(marks))
    monkeypatch.setattr(pool, "WORKER_START_SECONDS", 0.0)  # a pool even for short points
    return load_sweep(path)


def _recorded(out: Path) -> int:
    return len(list((out / "points").glob("*.json")))


def test_a_replication_runs_while_its_first_seed_runs(sweep: Any, tmp_path: Path) -> None:
    outcome = run_sweep(sweep, tmp_path / "two", jobs=2, run=first_waits_for_a_replication)
    assert outcome.ran == 3 and outcome.complete and outcome.unreplicated == 0
    serial = run_sweep(sweep, tmp_path / "one", jobs=1)
    assert serial.ran == 3
    assert (tmp_path / "two" / "results.csv").read_bytes() == (
        tmp_path / "one" / "results.csv"
    ).read_bytes()


def test_a_deterministic_verdict_drops_what_was_speculated(
    sweep: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DETERMINISTIC, "1")
    outcome = run_sweep(sweep, tmp_path / "two", jobs=2, run=first_waits_for_a_replication)
    assert outcome.ran == 1 and outcome.unreplicated == 2 and outcome.complete
    assert _recorded(tmp_path / "two") == 1  # point 1 ran, and was not recorded
    serial = run_sweep(sweep, tmp_path / "one", jobs=1, run=deterministic_rows)
    assert (serial.ran, serial.unreplicated) == (1, 2)
    for name in ("results.csv", "notes.json"):
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()


def test_a_deterministic_verdict_does_not_wait_for_a_replication_under_way(
    sweep: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep ends with its first seed's deterministic verdict: it does not wait for the
    replication a worker is still running (its result would be dropped)."""
    monkeypatch.setenv(DETERMINISTIC, "1")
    outcome = run_sweep(sweep, tmp_path / "two", jobs=2, run=replications_outlive_the_sweep)
    marks = Path(os.environ[MARKS])
    assert (marks / "started-1").exists() and not (marks / "done-1").exists()
    (marks / "release").touch()
    assert outcome.ran == 1 and outcome.unreplicated == 2 and outcome.complete
    assert _recorded(tmp_path / "two") == 1


def test_a_speculated_failure_counts_only_for_a_stochastic_group(
    sweep: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PointError, match=r"^point 1: made to fail$"):
        run_sweep(sweep, tmp_path / "stochastic", jobs=2, run=replications_fail)
    assert _recorded(tmp_path / "stochastic") == 1  # the first seed stays recorded
    monkeypatch.setenv(DETERMINISTIC, "1")
    (Path(os.environ[MARKS]) / "failed-1").unlink()
    outcome = run_sweep(sweep, tmp_path / "deterministic", jobs=2, run=replications_fail)
    assert outcome.ran == 1 and outcome.unreplicated == 2 and outcome.complete


def test_a_budget_is_spent_as_on_one_process(sweep: Any, tmp_path: Path) -> None:
    """``max_points``: the first seeds' verdicts decide what the budget buys, so nothing is
    speculated; two processes record the same points as one."""
    two = run_sweep(sweep, tmp_path / "two", jobs=2, max_points=2)
    one = run_sweep(sweep, tmp_path / "one", jobs=1, max_points=2)
    assert two.ran == one.ran == 2
    assert sorted(p.name for p in (tmp_path / "two" / "points").iterdir()) == sorted(
        p.name for p in (tmp_path / "one" / "points").iterdir()
    )
