"""apu-display -- driver autonomy: an APU's pin-means-migrate keeps the display's carve-out
free (seed-brief, settlement pillar 1; cost-model.md §9.4; kernel-semantics.md §7.1)."""

from __future__ import annotations

from tests.scenarios.conftest import ScenarioRun, no_stale_dma

D = "device.node/apu0"


def test_pin_means_migrate_keeps_scanout_stable(scenario: ScenarioRun) -> None:
    results, verdict = scenario("apu-display")
    r = results["pin-migrates"]
    assert r.metric(f"{D}.vram.pinned_peak") == 0
    assert r.metric(f"{D}.gtt.pinned_peak") >= 2 << 30  # the compute buffer, migrated
    assert r.metric("tenant.compositor.denials") == 0
    assert r.metric("tenant.compositor.missed_frames") == 0
    assert r.metric("tenant.compositor.frames") > 800
    assert r.metric("tenant.compute.throughput") > 0
    assert verdict.held, verdict.explanation
    no_stale_dma(results)


def test_pinning_in_place_squeezes_the_display(scenario: ScenarioRun) -> None:
    results, _ = scenario("apu-display")
    r = results["pin-in-carve-out"]
    assert r.metric(f"{D}.vram.pinned_peak") == r.metric(f"{D}.vram.size")
    assert r.metric("tenant.compositor.denied.ENOMEM") > 0
    assert r.metric("tenant.compositor.missed_frames") > 0
