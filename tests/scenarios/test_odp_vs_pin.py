"""odp-vs-pin -- the mechanism camp: ODP against pinning under memory pressure
(seed-brief, camp 3; cost-model.md §7; K-41, K-42)."""

from __future__ import annotations

from tests.scenarios.conftest import ScenarioRun, no_stale_dma

R = "tenant.rdma"


def test_pinned_keeps_throughput_odp_pays_fault_storms(scenario: ScenarioRun) -> None:
    results, verdict = scenario("odp-vs-pin")
    pinned, odp = results["pinned"], results["odp"]
    assert pinned.metric(f"{R}.odp_faults") == 0
    assert pinned.metric("tenant.pressure.denied.ENOMEM") > 0  # the allocator is starved
    assert odp.metric(f"{R}.odp_faults") > 0
    assert odp.metric(f"{R}.stall_time") > 0
    assert odp.metric(f"{R}.throughput") < pinned.metric(f"{R}.throughput")
    assert odp.metric(f"{R}.latency_p99") > pinned.metric(f"{R}.latency_p99")
    assert "tenant.pressure.denied.ENOMEM" not in odp.metrics  # the pressure is served
    assert odp.metric("nic.node/mlx5_0.odp_invalidations") > 0
    assert verdict.held, verdict.explanation
    no_stale_dma(results)


def test_a_nic_without_odp_must_take_the_pinned_path(scenario: ScenarioRun) -> None:
    results, _ = scenario("odp-vs-pin")
    r = results["no-odp-nic"]
    assert r.metric(f"{R}.denied.EOPNOTSUPP") == 1
    assert r.metric(f"{R}.fallback_pinned") == 1
    assert r.metric(f"{R}.odp_faults") == 0
    assert r.metric(f"{R}.throughput") == results["pinned"].metric(f"{R}.throughput")


def test_odp_registers_without_the_pinned_registration_cost(scenario: ScenarioRun) -> None:
    """§6.2 per NIC driver: on mlx5 a pinned 2 GiB dma-buf MR and an ODP one are both a UMR
    post with an mkey-cache hit (reg.mlx5), milliseconds -- not EFA's seconds-long admin
    command that grows with what is registered (reg.efa)."""
    results, _ = scenario("odp-vs-pin")
    assert results["odp"].metric(f"{R}.setup_time") < 0.05
    assert results["pinned"].metric(f"{R}.setup_time") < 0.05
