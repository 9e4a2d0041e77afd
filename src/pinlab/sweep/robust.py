"""Robust verdicts (``pinlab run --robust``): does a claim survive the model's uncertainty?

Every cost-model parameter carries a ``confidence`` (:data:`pinlab.platform.cost.Confidence`)
and a sweep range (or discrete choices). A claim judged on the nominal model is re-judged:

1. **one at a time** -- each *low-confidence* parameter that the scenario's runs actually read
   (recorded while the nominal runs ran: :func:`pinlab.platform.reads.recording_reads`) at each
   end of its range (the first and last of its choices), every other parameter nominal;
2. **together** -- a seeded Latin-hypercube sample (:class:`scipy.stats.qmc.LatinHypercube`)
   of ``samples`` points over all of those parameters at once.

A parameter the scenario, a variant, ``--set`` or the platform sets itself is a stated
assumption of the scenario and is not varied (it is listed as fixed). Only the variants the
claim's deciding expectations compare are rerun, and of those only the ones that read a
varied parameter: the others' nominal results stand. The reruns are points of one sweep
(:func:`pinlab.sweep.execute.run_sweep`: local warm pool or Dask), written under
``<out>/robust/`` (afresh on every run). A rerun the model cannot complete (the simulation
raises) is reported as such, not hidden. Nothing is tuned: the nominal verdict is reported
as it is, and robustness says which range end or sample point would flip it (for a claim
that FAILED: which would make it hold).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pinlab.errors import toml_inline
from pinlab.platform.cost import CostModel, ParamInfo, parameters
from pinlab.platform.reads import recording_reads
from pinlab.scenarios.claims import judge
from pinlab.scenarios.config import BUILTIN, ScenarioConfig
from pinlab.scenarios.paths import flatten_cost, parse_set
from pinlab.scenarios.result import Metric, RunResult, Verdict
from pinlab.scenarios.runner import run_variant
from pinlab.sweep.execute import PointError, Progress, run_point, run_sweep
from pinlab.sweep.spec import Point, Sweep

__all__ = [
    "DEFAULT_SAMPLES",
    "Case",
    "Plan",
    "Robustness",
    "assess",
    "plan",
    "run_nominal",
    "run_plans",
    "write_robustness",
]

DEFAULT_SAMPLES = 4
"""Latin-hypercube points per scenario unless ``--robust-samples`` says otherwise: with the
range ends this keeps ``pinlab run --robust`` over the built-in scenarios to minutes on two
cores."""

ROBUST_DIR = "robust"
"""The sweep directory of the reruns, below ``pinlab run --out``."""

ROBUSTNESS_FILE = "robustness.json"
"""Each claim's robustness, in :data:`ROBUST_DIR` beside the reruns it was judged from."""


def cost_path(key: str) -> str:
    """The ``--set`` path of cost parameter ``key``: ``cost."odp.fault"``."""
    return f'cost."{key}"'


def run_nominal(
    cfg: ScenarioConfig,
    variants: Sequence[str],
    *,
    profile: str | None = None,
    seed: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[RunResult], Verdict, dict[str, frozenset[str]]]:
    """Run ``variants`` as :func:`pinlab.scenarios.runner.run_scenario` does, recording for
    each the cost parameters it read; ``(results, verdict, reads by variant)``."""
    results: list[RunResult] = []
    reads: dict[str, frozenset[str]] = {}
    for name in variants:
        if progress is not None:
            progress(name)
        with recording_reads() as keys:
            results.append(run_variant(cfg, name, profile=profile, seed=seed))
        reads[name] = frozenset(keys)
    return results, judge(cfg, results), reads


# -- values ------------------------------------------------------------------------------------


def _base(key: str, value: Any) -> Any:
    """``value`` (as a file writes it: ``"0.3us"``, ``128``) in base units, validated."""
    node: Any = CostModel().with_overrides({key: value}, source=f"robust: {key}")
    for part in key.split("."):
        node = getattr(node, part)
    return node


def _ends(p: ParamInfo) -> tuple[Any, ...]:
    if p.sweep is not None:
        return (p.sweep[0], p.sweep[-1])
    assert p.choices is not None
    return tuple(dict.fromkeys((p.choices[0], p.choices[-1])))


def _at(p: ParamInfo, u: float) -> Any:
    """The value a fraction ``u`` in [0, 1) of the way through ``p``'s range, written as the
    range's ends are (a unit string in the low end's unit, a number, a choice)."""
    if p.sweep is None:
        assert p.choices is not None
        return p.choices[min(int(u * len(p.choices)), len(p.choices) - 1)]
    low, high = p.sweep[0], p.sweep[-1]
    if isinstance(low, bool) or not isinstance(low, (int, float, str)):
        return low if u < 0.5 else high
    lo, hi = float(_base(p.key, low)), float(_base(p.key, high))
    x = lo + u * (hi - lo)
    integral = isinstance(_base(p.key, low), int)
    if isinstance(low, str):
        unit = low.lstrip("0123456789.eE+-").strip()
        if integral:
            return f"{round(x)}B" if unit.endswith("B") else f"{round(x)}{unit}"
        scale = float(_base(p.key, f"1{unit}"))
        return f"{x / scale:.6g}{unit}"
    return round(x) if integral else float(f"{x:.6g}")


def _shown(value: Any) -> str:
    return toml_inline(value).strip('"')


# -- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """One re-judgement: the parameter values changed from nominal and what it is
    (``"low end"``, ``"high end"``, ``"sample 3"``)."""

    label: str
    changes: tuple[tuple[str, Any], ...]
    variants: tuple[str, ...]  # the variants that must rerun (the rest keep nominal results)

    def text(self) -> str:
        return ", ".join(f"{k} = {_shown(v)}" for k, v in self.changes)


@dataclass(slots=True)
class Plan:
    """What :func:`plan` decided for one scenario, and (after :func:`run_plans`) the points."""

    cfg: ScenarioConfig
    results: list[RunResult]
    verdict: Verdict
    varied: list[ParamInfo]
    fixed: list[str]
    unranged: list[str]
    cases: list[Case]
    samples: int
    seed: int
    profile: str | None
    run_seed: int | None
    sets: dict[str, Any]
    ref: str
    points: dict[tuple[int, str], Point] = field(default_factory=dict)


def _fixed_keys(cfg: ScenarioConfig, variant: str) -> set[str]:
    """The cost keys the scenario, the variant, ``--set`` or the platform set themselves."""
    keys = set(flatten_cost(cfg.resolve(variant).cost))
    spec: Any = cfg.platform_spec(variant)
    for holder in (spec, getattr(spec, "node", None)):
        keys.update(getattr(holder, "cost_overrides", None) or {})
    return keys


def plan(
    cfg: ScenarioConfig,
    results: list[RunResult],
    verdict: Verdict,
    reads: Mapping[str, frozenset[str]],
    *,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    profile: str | None = None,
    run_seed: int | None = None,
    sets: Sequence[str] = (),
    ref: str | None = None,
) -> Plan:
    """The cases that re-judge ``cfg``'s claim: each varied parameter at each range end it
    does not already sit at, then ``samples`` Latin-hypercube points over all of them
    (seeded by ``seed``). ``sets`` are the run's ``--set`` expressions; ``ref`` is what
    :func:`~pinlab.scenarios.config.load_scenario` loads ``cfg`` from (default: its built-in
    name, else its file)."""
    from scipy.stats import qmc

    needed = [v for v in cfg.bound_claim.needed() if v in reads] or list(reads)
    fixed: set[str] = set()
    for v in needed:
        fixed |= _fixed_keys(cfg, v)
    used = set().union(*(reads[v] for v in needed)) if needed else set()
    low = [p for p in parameters() if p.confidence == "low" and p.key in used]
    varied = [p for p in low if p.key not in fixed and (p.sweep or p.choices)]
    unranged = [p.key for p in low if p.key not in fixed and not (p.sweep or p.choices)]
    cases: list[Case] = []
    for p in varied:
        rerun = tuple(v for v in needed if p.key in reads[v])
        labels = ("low end", "high end") if p.sweep is not None else ("choice", "choice")
        for end_label, end in zip(labels, _ends(p), strict=False):
            if _base(p.key, end) == p.value:
                continue
            cases.append(Case(end_label, ((p.key, end),), rerun))
    if varied and samples > 0:
        sampler = qmc.LatinHypercube(d=len(varied), rng=seed)
        rerun = tuple(v for v in needed if any(p.key in reads[v] for p in varied))
        for i, row in enumerate(sampler.random(samples)):
            changes = tuple((p.key, _at(p, float(u))) for p, u in zip(varied, row, strict=True))
            cases.append(Case(f"sample {i + 1}", changes, rerun))
    return Plan(
        cfg,
        results,
        verdict,
        varied,
        sorted(k for k in fixed if k in {p.key for p in low}),
        unranged,
        cases,
        samples,
        seed,
        profile,
        run_seed,
        {e.split("=", 1)[0].strip(): parse_set(e)[1] for e in sets},
        ref or _ref(cfg),
    )


def _ref(cfg: ScenarioConfig) -> str:
    if cfg.name in BUILTIN and cfg.source == f"{cfg.name}.toml":
        return cfg.name
    return str(Path(cfg.source).resolve())


def _points(plans: Sequence[Plan]) -> list[Point]:
    points: list[Point] = []
    for plan_ in plans:
        ref = plan_.ref
        for c, case in enumerate(plan_.cases):
            factors = {cost_path(k): v for k, v in case.changes}
            for variant in case.variants:
                point = Point(
                    index=len(points),
                    variant=variant,
                    seed=plan_.run_seed,
                    factors=factors,
                    scenario=ref,
                    scenario_ref=ref,
                    profile=plan_.profile,
                    fixed=dict(plan_.sets),
                )
                plan_.points[(c, variant)] = point
                points.append(point)
    return points


def run_case_point(spec: dict[str, Any]) -> dict[str, Any]:
    """:func:`~pinlab.sweep.point.run_point`, but a point the model cannot run (an
    exception inside the simulation, not a configuration error) comes back as a row with
    ``error`` set: at that parameter value the claim cannot be judged, which is a result."""
    try:
        return run_point(spec)
    except PointError as e:
        if e.user:
            raise
        return {
            "row": {"point": spec["index"], "point_id": spec["id"], "error": str(e)},
            "units": {},
        }


def run_plans(
    plans: Sequence[Plan],
    out: str | Path,
    *,
    jobs: int | None = None,
    dask: str | None = None,
    progress: Progress | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every case's points as one sweep in ``<out>/robust``; finished point id ->
    ``{"row", "units"}``. The directory is emptied first: its points were run by whatever
    model was installed then, so they are never reused."""
    import shutil

    from pinlab.sweep.execute import load_points

    points = _points(plans)
    names = sorted({n for p in points for n in p.factors})
    sweep = Sweep("robust", "pinlab run --robust", tuple(names), tuple(points), None)
    directory = Path(out) / ROBUST_DIR
    shutil.rmtree(directory, ignore_errors=True)
    if points:
        run_sweep(sweep, directory, jobs=jobs, dask=dask, progress=progress, run=run_case_point)
    return load_points(directory, sweep) if points else {}


# -- the assessment ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    case: Case
    word: str
    explanation: str


@dataclass(slots=True)
class Robustness:
    """One claim's robustness: the nominal verdict and every case that flips it."""

    scenario: str
    nominal: str
    explanation: str
    varied: list[str]
    fixed: list[str]
    unranged: list[str]
    cases: int
    samples: int
    seed: int
    flips: list[CaseOutcome]
    errors: list[CaseOutcome] = field(default_factory=list)
    """Cases the model could not run (the simulation raised): not judged, reported."""

    @property
    def held(self) -> bool:
        return self.nominal == "HELD" and not self.flips and not self.errors

    def summary(self) -> str:
        """One line: ``held across ranges``, or how many re-judgements flip the verdict
        (:meth:`details` names them)."""
        text = self._verdicts()
        if self.errors:
            text += f"; the model cannot run {len(self.errors)} of them"
        return text

    def _verdicts(self) -> str:
        if self.nominal == "NOT JUDGED":
            return "not judged: nothing to re-judge"
        if not self.varied:
            return f"{self.nominal}; no low-confidence parameter with a range is read"
        n = f"{len(self.flips)} of {self.cases} re-judgements"
        if self.nominal == "HELD":
            return "held across ranges" if not self.flips else f"flips to FAILED at {n}"
        if not self.flips:
            return "FAILED on the nominal model, and at every range end and sample"
        return f"FAILED on the nominal model; would hold at {n}"

    def details(self) -> list[str]:
        """One line per flipping case (the parameter and value, or the sample point) and per
        case the model could not run."""
        lines = [f"{o.word} at {_flip(o)}" for o in self.flips]
        lines += [f"cannot run at {_flip(o)}: {o.explanation}" for o in self.errors]
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "nominal": self.nominal,
            "explanation": self.explanation,
            "robust": self.held,
            "summary": self.summary(),
            "varied": list(self.varied),
            "fixed_by_scenario": list(self.fixed),
            "without_range": list(self.unranged),
            "cases": self.cases,
            "samples": self.samples,
            "seed": self.seed,
            "flips": [_case_json(o) for o in self.flips],
            "errors": [_case_json(o) for o in self.errors],
        }


def _case_json(o: CaseOutcome) -> dict[str, Any]:
    return {
        "case": o.case.label,
        "changes": dict(o.case.changes),
        "verdict": o.word,
        "explanation": o.explanation,
    }


def _flip(o: CaseOutcome) -> str:
    if o.case.label.startswith("sample"):
        return f"{o.case.label} ({o.case.text()})"
    return f"{o.case.text()} ({o.case.label})"


def _result(nominal: RunResult, rec: Mapping[str, Any]) -> RunResult:
    """A rerun rebuilt from its sweep row: the nominal run with the rerun's metrics."""
    units = rec["units"]
    row = rec["row"]
    metrics = {
        n: Metric(row[n], unit, nominal.metrics[n].description if n in nominal.metrics else "")
        for n, unit in units.items()
        if row.get(n) is not None
    }
    stale = int(row.get("global.stale_dma_incidents", 0) or 0)
    return replace(nominal, metrics=metrics, stale_incidents=stale)


def write_robustness(out: Path | str, items: Sequence[Robustness]) -> Path:
    """Write ``<out>/robust/robustness.json``: ``{"robustness": [...]}``, each claim's
    :meth:`Robustness.to_json`, what ``pinlab run --robust --json`` prints. The terminal's
    lines are gone with the terminal, and a run of one scenario writes no suite report; the
    file keeps the verdicts beside the reruns' table, which :func:`run_plans` replaced for
    this run, so the two always belong together."""
    import json

    from pinlab.fsutil import write_atomic

    doc = {"robustness": [r.to_json() for r in items]}
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    return write_atomic(Path(out) / ROBUST_DIR / ROBUSTNESS_FILE, text)


def assess(plan_: Plan, done: Mapping[str, Mapping[str, Any]]) -> Robustness:
    """Judge every case of ``plan_`` from the finished points ``done`` (of
    :func:`run_plans`); a case with a point missing is left out of the flips."""
    nominal = plan_.verdict
    flips: list[CaseOutcome] = []
    failures: list[CaseOutcome] = []
    by_variant = {r.variant: r for r in plan_.results}
    for c, case in enumerate(plan_.cases):
        results = dict(by_variant)
        records = [done.get(plan_.points[(c, v)].id) for v in case.variants]
        if any(rec is None for rec in records):
            continue
        errors = [str(rec["row"]["error"]) for rec in records if rec and rec["row"].get("error")]
        if errors:
            failures.append(CaseOutcome(case, "ERROR", errors[0]))
            continue
        for variant, rec in zip(case.variants, records, strict=True):
            assert rec is not None
            results[variant] = _result(by_variant[variant], rec)
        verdict = judge(plan_.cfg, [results[r.variant] for r in plan_.results])
        if verdict.judged and verdict.word != nominal.word:
            flips.append(CaseOutcome(case, verdict.word, verdict.explanation))
    return Robustness(
        scenario=plan_.cfg.name,
        nominal=nominal.word,
        explanation=nominal.explanation,
        varied=[p.key for p in plan_.varied],
        fixed=plan_.fixed,
        unranged=plan_.unranged,
        cases=len(plan_.cases),
        samples=plan_.samples if plan_.varied else 0,
        seed=plan_.seed,
        flips=flips,
        errors=failures,
    )


def count_runs(plans: Sequence[Plan]) -> int:
    """How many variant runs the plans' cases take."""
    return sum(len(c.variants) for p in plans for c in p.cases)
