"""settlement -- all three pillars on one machine (seed-brief, "the settlement")."""

from __future__ import annotations

from tests.scenarios.claims_helpers import hog_denials
from tests.scenarios.conftest import ScenarioRun, no_stale_dma


def test_everyone_gets_service(scenario: ScenarioRun) -> None:
    results, verdict = scenario("settlement")
    r = results["settled"]
    assert "tenant.compositor.denied.ENOMEM" not in r.metrics
    assert r.metric("tenant.compositor.missed_frames") == 0
    rate = r.metric("tenant.trainer.path_rate")
    assert r.metric("tenant.trainer.throughput") >= 0.9 * rate  # pillar 1: pinned in place
    assert hog_denials(r) > 0 and r.metric("tenant.hog.pinned_bytes") == 0  # pillar 2
    assert r.metric("tenant.analytics.odp_faults") > 0  # pillar 3: ODP under pressure
    assert r.metric("tenant.analytics.throughput") > 0.5 * r.metric("tenant.analytics.path_rate")
    assert verdict.held, verdict.explanation
    no_stale_dma(results)


def test_without_the_administrators_policy_the_desktop_is_starved(scenario: ScenarioRun) -> None:
    results, _ = scenario("settlement")
    r = results["no-policy"]
    assert r.metric("tenant.compositor.denied.ENOMEM") > 0
    assert r.metric("tenant.hog.pinned_bytes") == r.metric("device.node/gpu0.vram.size")
    assert r.metric("tenant.trainer.throughput") == results["settled"].metric(
        "tenant.trainer.throughput"
    )
