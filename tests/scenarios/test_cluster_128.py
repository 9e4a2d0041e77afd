"""cluster-128 -- the AI camp: 128 accelerators, one job locking all HBM; limits at
"unlimited" cost nothing (seed-brief, camp 4)."""

from __future__ import annotations

from pinlab.scenarios.result import RunResult
from tests.scenarios.conftest import ScenarioRun, no_stale_dma


def _total(r: RunResult) -> float:
    return sum(float(m.value) for k, m in r.metrics.items() if k.endswith(".throughput"))


def test_limits_at_unlimited_cost_nothing(scenario: ScenarioRun) -> None:
    results, verdict = scenario("cluster-128")
    a, b = results["no-limits"], results["unlimited"]
    assert _total(a) > 0
    assert _total(a) == _total(b)
    assert a.metric("global.denials") == b.metric("global.denials") == 0
    assert a.metrics == b.metrics  # not one number differs
    assert verdict.held, verdict.explanation
    no_stale_dma(results)


def test_every_accelerator_locks_all_its_hbm(scenario: ScenarioRun) -> None:
    results, _ = scenario("cluster-128")
    r = results["unlimited"]
    nodes = [k for k in r.metrics if k.startswith("tenant.") and k.endswith(".ranks")]
    assert len(nodes) == 16 and sum(r.metric(k) for k in nodes) == 128
    pinned = [k for k in r.metrics if k.endswith(".vram.pinned_peak")]
    assert len(pinned) == 128
    assert all(r.metric(k) == r.metric(k.replace("pinned_peak", "size")) for k in pinned)
    assert all(r.metric(k.replace("ranks", "iterations")) == 3 for k in nodes)


def test_a_finite_default_limit_gets_in_the_way(scenario: ScenarioRun) -> None:
    """The contrast: charging pins against the default 8 MiB RLIMIT_MEMLOCK refuses them."""
    results, _ = scenario("cluster-128")
    r = results["default-memlock"]
    assert r.metric("global.denials") == 16
    assert (
        sum(v.value for k, v in r.metrics.items() if k.endswith("denied_by.memlock-dmabuf-pins"))
        == 16
    )
    assert _total(r) == 0
