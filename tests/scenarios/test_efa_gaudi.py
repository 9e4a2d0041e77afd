"""efa-gaudi -- the performance camp: EFA reading Gaudi HBM in place (P2P) against a
migrate-on-pin exporter and against host staging (seed-brief, camp 2; cost-model.md §1 items
3-5, §9.1)."""

from __future__ import annotations

from tests.scenarios.conftest import ScenarioRun, no_stale_dma

T = "tenant.trainer.throughput"


def test_p2p_moves_at_least_one_and_a_half_times_migrate_and_staged(scenario: ScenarioRun) -> None:
    results, verdict = scenario("efa-gaudi")
    p2p = results["pin-in-place"].metric(T)
    assert p2p >= 1.5 * results["migrate-on-pin"].metric(T)
    assert p2p >= 1.5 * results["staged"].metric(T)
    assert verdict.held, verdict.explanation
    no_stale_dma(results)


def test_each_variant_takes_the_path_its_exporter_and_kernel_allow(scenario: ScenarioRun) -> None:
    """habanalabs pins in place (K-52, P2P); amdgpu under 5.16 pins into GTT (K-49: host
    memory, a migration at pin time); without CONFIG_PCI_P2PDMA habanalabs refuses the map
    (-EPERM) and the job stages."""
    results, _ = scenario("efa-gaudi")
    t = "tenant.trainer"
    p2p, mig, staged = results["pin-in-place"], results["migrate-on-pin"], results["staged"]
    assert p2p.metric(f"{t}.host_ranks") == 0 and p2p.metric(f"{t}.staged_ranks") == 0
    assert mig.metric(f"{t}.host_ranks") == 8
    assert mig.metric("device.node/gaudi0.bytes_migrated") >= 1 << 30  # the pin's migration
    assert staged.metric(f"{t}.staged_ranks") == 8
    assert staged.metric(f"{t}.denied.EPERM") == 8
    for r in results.values():
        assert r.metric(f"{t}.iterations") == 5


def test_on_root_port_efas_staging_costs_little(scenario: ScenarioRun) -> None:
    """The honest caveat: with the EFAs on root ports (§9.1 default) and all eight Gaudis
    sending, the EFAs are the bottleneck and staging loses only a few percent."""
    results, verdict = scenario("efa-gaudi")
    ratio = results["pin-in-place-root-port"].metric(T) / results["staged-root-port"].metric(T)
    assert 1.0 <= ratio < 1.2
    assert "root ports" in verdict.explanation
