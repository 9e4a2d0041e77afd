"""Each built-in scenario runs once per test session (all its variants); the claim tests read
the results. The whole set of six takes seconds."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pinlab.scenarios.config import load_scenario
from pinlab.scenarios.result import RunResult, Verdict
from pinlab.scenarios.runner import run_scenario

Run = tuple[dict[str, RunResult], Verdict]
ScenarioRun = Callable[[str], Run]
"""The ``scenario`` fixture: ``scenario(name)`` -> ({variant: RunResult}, Verdict)."""

_CACHE: dict[str, Run] = {}


def _run(name: str) -> Run:
    if name not in _CACHE:
        results, verdict = run_scenario(load_scenario(name))
        _CACHE[name] = ({r.variant: r for r in results}, verdict)
    return _CACHE[name]


@pytest.fixture(scope="session")
def scenario() -> ScenarioRun:
    """``scenario(name)`` -> ({variant: RunResult}, Verdict), computed once per session."""
    return _run


def no_stale_dma(results: dict[str, RunResult]) -> None:
    """Design principle 6: zero stale-DMA incidents in every (upstream-correct) variant; and
    nothing a real kernel would leak once every process exited."""
    for name, r in results.items():
        assert r.metric("global.stale_dma_incidents") == 0, name
        assert r.stale_incidents == 0, name
        assert r.metric("global.leaks") == 0, name
        assert r.metric("global.leaked_bytes") == 0, name
