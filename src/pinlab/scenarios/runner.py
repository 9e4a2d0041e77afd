"""Run a scenario's variants and judge its claim (loading is :mod:`pinlab.scenarios.config`).

* :func:`build_simulation` -- the simulation of one resolved variant, ready to run;
* :func:`run_variant` -- one variant → :class:`~pinlab.scenarios.result.RunResult`;
* :func:`run_scenario` -- all (or some) variants and the :class:`~pinlab.scenarios.result.Verdict`
  of :func:`pinlab.scenarios.claims.judge`.

What a run does: build the platform (preset, patches) and one kernel per node with the
variant's profile and switches; the simulator (:class:`~pinlab.sim.engine.Simulation`) with
the cost overrides and the seed; on every node a cgroup tree with the dmem controller and the
administrator's policy when the scenario has one (``apply_policy``); the tenants, each a
process of its policy user (uid, RLIMIT_MEMLOCK, capabilities, cgroup) running its workload
with the parameters the schema validated; the faults; then the clock runs for ``duration``,
every component reports its metrics (:func:`~pinlab.scenarios.metrics.collect_metrics`), and
last the teardown: every process exits, and what a real kernel would leak is reported
(``global.leaks``, ``global.leaked_bytes``). All of it runs under the simulator's tuned garbage
collector (:func:`~pinlab.gcpolicy.tuned_collector`): the heap of a run is long-lived.

Nothing here reads a clock: a run is a function of the configuration and the seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pinlab.errors import ConfigError
from pinlab.gcpolicy import tuned_collector
from pinlab.kernel.profile import DEFAULT_PROFILE, get_profile
from pinlab.platform.presets import AnySpec
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.config import AppliedPolicy, PolicyConfig, PolicyError, apply_policy
from pinlab.policy.dmem import DmemCgroupController
from pinlab.scenarios.claims import judge
from pinlab.scenarios.config import ScenarioConfig
from pinlab.scenarios.metrics import collect_metrics, teardown_metrics
from pinlab.scenarios.paths import flatten_cost
from pinlab.scenarios.platform import machine_error
from pinlab.scenarios.policy import PolicyDocumentError
from pinlab.scenarios.result import RunResult, Verdict
from pinlab.scenarios.schema import (
    ResolvedScenario,
    policy_document,
    validate_policy,
)
from pinlab.sim.engine import Simulation
from pinlab.sim.faults import inject
from pinlab.sim.workloads import spawn

__all__ = ["build_simulation", "run_scenario", "run_variant"]


def _sample_interval(cfg: ResolvedScenario) -> float:
    if cfg.scenario.sample_interval is not None:
        return float(cfg.scenario.sample_interval)
    return min(1.0, max(0.001, cfg.scenario.duration / 200))


def _apply_policy(
    sim: Simulation, cfg: ResolvedScenario, source: str, base_dir: Path | None
) -> dict[str, AppliedPolicy]:
    """The policy on every node: a cgroup tree, the dmem controller (6.14+), the rules."""
    assert cfg.policy is not None
    applied: dict[str, AppliedPolicy] = {}
    # The document depends on the node only through its PCI names and dmem regions: nodes
    # built alike (a cluster's) share one validated config, read and checked once.
    configs: dict[tuple[object, ...], PolicyConfig] = {}
    for name, node in sim.nodes.items():
        kernel = node.kernel
        tree = CgroupTree()
        dmem = DmemCgroupController(tree).install(kernel) if kernel.profile.dmem else None
        regions = {r.name: r.size for r in kernel.dmem_regions} if dmem is not None else {}
        pci = {n: p.name for n, p in node.machine.pdevs.items()}
        key = (tuple(pci.items()), tuple(regions.items()), dmem is None)
        config = configs.get(key)
        if config is None:
            doc = policy_document(cfg.policy, pci, regions, base_dir)
            if dmem is None:
                doc.pop("regions", None)
            config = configs[key] = validate_policy(doc, source)
        ttm = [bdev for d in node.machine.exporters.values() if (bdev := d.bdev) is not None]
        try:
            applied[name] = apply_policy(
                config, kernel, tree, dmem, ttm_devices=ttm, source=f"{source}: policy"
            )
        except PolicyError as e:
            raise PolicyDocumentError(e) from None
    return applied


def build_simulation(
    cfg: ResolvedScenario, spec: AnySpec, source: str = "", base_dir: Path | None = None
) -> tuple[Simulation, dict[str, AppliedPolicy]]:
    """The simulation of a resolved variant with its policy, tenants and faults in place."""
    profile = get_profile(cfg.kernel.profile or DEFAULT_PROFILE, **cfg.kernel.switches())
    sim = Simulation(
        spec,
        profile,
        cost_overrides=flatten_cost(cfg.cost) or None,
        seed=cfg.scenario.seed,
        sample_interval=_sample_interval(cfg),
    )
    policies = _apply_policy(sim, cfg, source, base_dir) if cfg.policy is not None else {}
    for t in cfg.active_tenants():
        nodes = list(sim.nodes) if t.node == "*" else [t.node] if t.node else [None]
        for node in nodes:
            name = t.name if t.node != "*" else f"{t.name}@{node}"
            node_name = node or next(iter(sim.nodes))
            args: dict[str, Any] = {}
            applied = policies.get(node_name)
            if t.user is not None and applied is not None:
                args = applied.spawn_args(t.user)
            tenant = spawn(sim, name, t.params, node=node, start=t.start, process_args=args)
            if applied is not None and "cgroup" in args:
                applied.tree.attach(tenant.proc, args["cgroup"])
    for f in cfg.active_faults():
        inject(sim, f.at, f.kind, f.target, f.node)
    return sim, policies


def run_variant(
    cfg: ScenarioConfig,
    variant: str,
    *,
    profile: str | None = None,
    seed: int | None = None,
) -> RunResult:
    """Run one variant of ``cfg`` (optionally under another kernel ``profile`` or ``seed``)."""
    if profile is not None:
        cfg = cfg.with_profile(profile)
    if seed is not None:
        cfg = cfg.with_seed(seed)
    resolved = cfg.resolve(variant)
    spec = cfg.platform_spec(variant)
    base_dir = Path(cfg.base_dir) if cfg.base_dir else None
    duration = float(resolved.scenario.duration)
    with tuned_collector():  # build, run, metrics, teardown: one long-lived heap (gcpolicy)
        try:
            sim, _policies = build_simulation(resolved, spec, cfg.source, base_dir)
        except PolicyDocumentError as e:  # the policy against the machine's dmem regions
            raise cfg.blame_policy(e) from None
        except ConfigError as e:
            error = machine_error(e, resolved.platform, spec, cfg.source, base_dir)
            raise cfg.blame(error, variant) from None
        sim.run(duration)
        metrics = collect_metrics(sim, duration)
        metrics.update(teardown_metrics(sim.teardown()))
    profile_name = resolved.kernel.profile or DEFAULT_PROFILE
    return RunResult(
        scenario=resolved.scenario.name,
        variant=resolved.variant,
        profile=profile_name,
        seed=resolved.scenario.seed,
        duration=duration,
        config=resolved.document(),
        metrics=metrics,
        recorder=sim.recorder,
        stale_incidents=sim.stale_incidents(),
        random_sources=sim.random_sources,
    )


def run_scenario(
    cfg: ScenarioConfig,
    *,
    variants: Sequence[str] | None = None,
    profile: str | None = None,
    seed: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[RunResult], Verdict]:
    """Run ``variants`` (default: all, in file order) and judge the scenario's claim."""
    if profile is not None:
        cfg = cfg.with_profile(profile)
    if seed is not None:
        cfg = cfg.with_seed(seed)
    names = list(variants) if variants is not None else cfg.variants
    for name in names:
        cfg.check_variant(name)
    results = []
    for name in names:
        if progress is not None:
            progress(name)
        results.append(run_variant(cfg, name))
    return results, judge(cfg, results)
