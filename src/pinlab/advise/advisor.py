"""``advise``: from a scenario and the protections to a recommended, verified policy file.

:func:`prepare` checks everything the user gave -- the scenario and ``--set``, the variant,
every ``--protect`` and ``--maximise`` -- before anything is written (one
:class:`~pinlab.errors.ConfigError` line), and builds the space from the variant's policy and
the machine's dmem regions. :func:`advise` runs the search, writes the recommended policy
file, re-runs it *from that file* as ``pinlab run SCENARIO --variant V --policy FILE`` would,
judges every protection on that run, and writes the evidence (:mod:`pinlab.advise.output`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinlab import fsutil
from pinlab.advise.evaluate import Evaluator, Protections, bind_protections
from pinlab.advise.output import closest_text, policy_toml, write_outputs
from pinlab.advise.search import Advice, search
from pinlab.advise.space import Space, build_space
from pinlab.errors import ConfigError, toml_inline
from pinlab.scenarios.config import ScenarioConfig, load_scenario
from pinlab.scenarios.paths import parse_set
from pinlab.scenarios.result import RunResult, Verdict
from pinlab.scenarios.runner import build_simulation, run_variant

__all__ = ["Outcome", "Plan", "advise", "prepare"]

POLICY_FILE = "policy.toml"
CLOSEST_FILE = "closest-policy.toml"
EVALUATIONS_DIR = "evaluations"


@dataclass(frozen=True, slots=True)
class Plan:
    """What to search, validated: the scenario, the variant, the protections, the space."""

    scenario: str
    cfg: ScenarioConfig
    variant: str
    protections: Protections
    space: Space
    seeds: list[dict[str, int]]
    fixed: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What :func:`advise` found and wrote."""

    advice: Advice
    policy_file: Path
    verification: tuple[RunResult, Verdict] | None

    @property
    def met(self) -> bool:
        """A policy met every protection in the search and again when re-run from its file."""
        return self.verification is not None and self.verification[1].held

    def summary(self) -> str:
        if self.advice.recommended is None:
            return (
                "no evaluated policy meets every --protect; closest: point "
                f"{self.advice.closest.index} ({closest_text(self.advice.closest)}); "
                f"its policy: {self.policy_file}"
            )
        word = "meets every --protect" if self.met else "MISSES a --protect"
        return f"recommended policy {self.policy_file}: re-run, it {word}"


def _machine(cfg: ScenarioConfig, variant: str) -> tuple[dict[str, int], bool]:
    """The variant's machine: its dmem regions by the ``{device}`` names scenarios write
    (``drm/{gpu0}/vram``) with their capacity, and whether its kernel has revocable pins."""
    from pinlab.policy.proposals.revocable_pins import RevocablePins

    resolved = cfg.resolve(variant)
    base = Path(cfg.base_dir) if cfg.base_dir else None
    sim, _ = build_simulation(resolved, cfg.platform_spec(variant), cfg.source, base)
    node = next(iter(sim.nodes.values()))
    names = {p.name: name for name, p in node.machine.pdevs.items()}
    regions: dict[str, int] = {}
    for region in node.kernel.dmem_regions if node.kernel.profile.dmem else ():
        parts = [f"{{{names[p]}}}" if p in names else p for p in region.name.split("/")]
        regions["/".join(parts)] = region.size
    try:
        RevocablePins.check_profile(node.kernel)
        revocable = True
    except ValueError:
        revocable = False
    return regions, revocable


def prepare(
    scenario: str,
    protect: Sequence[str],
    *,
    maximise: str | None = None,
    variant: str | None = None,
    sets: Sequence[str] = (),
) -> Plan:
    """Validate the request and build the space; :class:`ConfigError` on the first problem."""
    if not protect:
        raise ConfigError("--protect", "", "expected at least one expression, found none")
    fixed: dict[str, Any] = {}
    for expr in sets:
        _, value = parse_set(expr)  # the key as written: Point.sets() gives it back
        fixed[expr.partition("=")[0].strip()] = value
    cfg = load_scenario(scenario, sets=[f"{k}={toml_inline(v)}" for k, v in fixed.items()])
    name = variant if variant is not None else cfg.variants[0]
    if name not in cfg.variants:
        raise ConfigError(
            "--variant",
            "",
            f"expected a variant of {cfg.name} ({', '.join(cfg.variants)}), found {name!r}",
        )
    protections = bind_protections(cfg, name, protect, maximise)
    regions, revocable = _machine(cfg, name)
    policies = [dict(cfg.resolve(v).policy or {}) for v in cfg.variants]
    base = dict(cfg.resolve(name).policy or {})
    space = build_space(base, regions, revocable=revocable, variants=policies)
    seeds: list[dict[str, int]] = []
    for doc in [base, *policies]:
        values = space.knobs_of(doc)
        if values is not None and values not in seeds:
            seeds.append(values)
    return Plan(scenario, cfg, name, protections, space, seeds, fixed)


def _header(plan: Plan, budget: int, seed: int, met: bool, policy_file: Path) -> list[str]:
    """The policy file's comment: the advise command that made it and the run command that
    uses it, naming ``policy_file`` as advise was given it (``advice/policy.toml`` for
    ``--out advice``), so the command works from the directory advise ran in."""
    argv = " ".join(f"--protect {toml_inline(p)}" for p in plan.protections.texts)
    term = plan.protections.objective
    if term is not None:
        argv += f" --maximise {toml_inline(term.text)}"
    sets = "".join(f" --set {k}={toml_inline(v)}" for k, v in plan.fixed.items())
    what = "recommended" if met else "closest (it does NOT meet every --protect)"
    return [
        f"pinlab advise {plan.scenario} --variant {plan.variant} {argv} --budget {budget} "
        f"--seed {seed}{sets}",
        f"the {what} policy for the variant's users and cgroups; run it with:",
        f"  pinlab run {plan.scenario} --variant {plan.variant}{sets} "
        f"--policy {shlex.quote(str(policy_file))}",
    ]


def advise(
    plan: Plan,
    out: str | Path,
    *,
    budget: int,
    seed: int,
    jobs: int | None = None,
    dask: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> Outcome:
    """Search, write the policy file, verify it from the file, write the evidence."""
    out = Path(out)
    evaluator = Evaluator(
        plan.cfg,
        plan.scenario,
        plan.protections,
        plan.fixed,
        out / EVALUATIONS_DIR,
        jobs=jobs,
        dask=dask,
        progress=progress,
    )
    evaluator.run_references()
    advice = search(plan.space, evaluator, budget=budget, seed=seed, seeds=plan.seeds)
    chosen = advice.recommended or advice.closest
    assert chosen.policy is not None
    met = advice.recommended is not None
    policy_file = out / (POLICY_FILE if met else CLOSEST_FILE)
    header = _header(plan, budget, seed, met, policy_file)
    text = policy_toml(chosen.policy, header)
    fsutil.write_atomic(policy_file, text)
    verification = _verify(plan, policy_file, evaluator) if met else None
    write_outputs(
        out,
        scenario=plan.scenario,
        advice=advice,
        protections=plan.protections,
        budget=budget,
        seed=seed,
        policy_file=policy_file,
        policy_text=text,
        verification=verification,
        command=header[0],
    )
    return Outcome(advice, policy_file, verification)


def _verify(plan: Plan, policy_file: Path, evaluator: Evaluator) -> tuple[RunResult, Verdict]:
    """The variant run under the policy read back from its file, and the protections' verdict."""
    sets = [f"{k}={toml_inline(v)}" for k, v in plan.fixed.items()]
    cfg = load_scenario(plan.scenario, sets=sets, policy=policy_file)
    result = run_variant(cfg, plan.variant)
    return result, evaluator.verdict(result)


def shown_knobs(space: Space, values: Mapping[str, int]) -> dict[str, str]:
    """The knobs of a point as text, only those in its policy."""
    return {k: v for k, v in space.shown(values).items() if v != "-"}
