"""The headline metrics of one finished run (``summary.json``), each with its unit.

:func:`collect_metrics` asks every component for what it reports -- each tenant
(:meth:`Tenant.report <pinlab.sim.engine.Tenant.report>`: its statistics, denials and its
workload's result fields), the device, NIC and link collectors
(:mod:`pinlab.sim.collectors`) -- and adds the run-wide ``global.*`` counts. It changes
nothing: the end of the run (every process exits, leaks counted,
:meth:`Simulation.teardown <pinlab.sim.engine.Simulation.teardown>`) is the runner's next
step, :func:`teardown_metrics`. Every name, unit and meaning is listed in
``docs/metrics.md``.
"""

from __future__ import annotations

from pinlab.sim.collectors import device_metrics, link_metrics, nic_metrics
from pinlab.sim.engine import Leaks, Simulation
from pinlab.sim.metrics import Metric, MetricSpec, declared, report_fields

__all__ = ["GLOBAL_METRICS", "collect_metrics", "teardown_metrics"]

GLOBAL_METRICS: dict[str, MetricSpec] = {
    s.name: s
    for s in (
        MetricSpec(
            "stale_dma_incidents", "count", "DMA through a stale or unfenced mapping (must be 0)"
        ),
        MetricSpec("kernel_warnings", "count", "kernel WARN hits"),
        MetricSpec("denials", "count", "calls refused, all tenants"),
        MetricSpec("faults", "count", "faults injected"),
        *declared(Leaks),
    )
}
"""The run-wide metrics (``global.<metric>``): the counts :func:`collect_metrics` adds and the
teardown's (:func:`teardown_metrics`)."""


def collect_metrics(sim: Simulation, duration: float) -> dict[str, Metric]:
    """Every headline metric of a run that ran for ``duration`` seconds, before teardown."""
    m: dict[str, Metric] = {}
    for tenant in sim.tenants.values():
        m.update(tenant.report(duration))
    m.update(device_metrics(sim))
    m.update(nic_metrics(sim))
    m.update(link_metrics(sim, duration))
    warnings = sum(n.kernel.warnings.count() for n in sim.nodes.values())
    spec = GLOBAL_METRICS
    m["global.stale_dma_incidents"] = spec["stale_dma_incidents"](sim.stale_incidents())
    m["global.kernel_warnings"] = spec["kernel_warnings"](warnings)
    m["global.denials"] = spec["denials"](sum(t.proc.stats.total for t in sim.tenants.values()))
    m["global.faults"] = spec["faults"](len(sim.recorder.faults))
    return m


def teardown_metrics(leaks: Leaks) -> dict[str, Metric]:
    """``global.leaks`` and ``global.leaked_bytes`` of :meth:`Simulation.teardown`."""
    return report_fields(leaks, "global")
