"""desktop-pin-hog -- the stability camp's denial of service and its containment by policy
(seed-brief, camp 1; policy-semantics.md §5.2)."""

from __future__ import annotations

import pytest

from tests.scenarios.conftest import ScenarioRun, no_stale_dma

POLICIES = ["memlock-dmabuf-pins", "dmem.max", "dmem-pin-max"]


def test_without_limits_the_hog_leaves_the_compositor_with_enomem(scenario: ScenarioRun) -> None:
    results, verdict = scenario("desktop-pin-hog")
    none = results["none"]
    assert none.metric("tenant.compositor.denied.ENOMEM") > 0
    assert none.metric("tenant.compositor.missed_frames") > 0
    vram = none.metric("device.node/gpu0.vram.size")
    assert none.metric("device.node/gpu0.vram.pinned_peak") == vram
    assert verdict.held, verdict.explanation
    no_stale_dma(results)


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_denies_the_hog_and_spares_the_compositor(
    scenario: ScenarioRun, policy: str
) -> None:
    results, _ = scenario("desktop-pin-hog")
    r = results[policy]
    assert r.metric(f"tenant.hog.denied_by.{policy}") > 0
    assert "tenant.compositor.denied.ENOMEM" not in r.metrics
    assert r.metric("tenant.compositor.missed_frames") == 0
    assert r.metric("tenant.hog.pinned_bytes") <= 4 << 30  # the 4 GiB limits, or nothing
