"""Evaluating policies: each a sweep point, run by the sweep machinery, judged by the claims.

A candidate is a sweep :class:`~pinlab.sweep.spec.Point` of the advised variant whose one
factor is ``policy`` (the whole policy document): :func:`run_candidate` loads the scenario
with that policy in place of the scenario's (``load_scenario(policy=...)``, what ``pinlab
run --policy`` does) and hands it to :func:`~pinlab.sweep.point.run_point`. A reference
point (a variant a ``--protect`` compares with, run under the scenario's own policy) has no
factor. :meth:`Evaluator.run` runs a batch with :func:`~pinlab.sweep.execute.run_sweep`
(``--jobs`` processes or ``--dask``) into one directory, so a point already evaluated --
in this search, or by an earlier advise into the same ``--out`` -- is read back, not run.

The protections are a :class:`~pinlab.scenarios.claims.BoundClaim` made of the ``--protect``
strings (:func:`~pinlab.scenarios.claimspec.parse_expectation`), judged with
:func:`~pinlab.scenarios.claims.judge` on each point's metrics: one concept, one place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinlab.errors import ConfigError, toml_inline
from pinlab.scenarios.claims import BoundClaim, Check, Term, bind_claim, judge, show_value
from pinlab.scenarios.claimspec import OPS, ClaimSpec, parse_expectation
from pinlab.scenarios.config import BUILTIN, ScenarioConfig, load_scenario
from pinlab.scenarios.result import Metric, RunResult, Verdict
from pinlab.sim.metrics import Recorder
from pinlab.sweep.execute import run_point, run_sweep
from pinlab.sweep.spec import Point, Sweep

__all__ = ["Evaluation", "Evaluator", "Protections", "bind_protections", "run_candidate"]


def run_candidate(spec: dict[str, Any]) -> dict[str, Any]:
    """A sweep point runner (picklable: the pool and Dask send it by name): the scenario
    under the point's ``policy`` factor (or its own policy without one), then
    :func:`run_point` on that configuration."""
    from pinlab.sweep.execute import PointError

    fixed = [f"{k}={toml_inline(v)}" for k, v in spec["fixed"].items()]
    try:
        cfg = load_scenario(spec["scenario_ref"], sets=fixed, policy=spec["factors"].get("policy"))
    except ConfigError as e:
        raise PointError(f"point {spec['index']}: {e}", user=True) from None
    return run_point(spec, configs={(spec["scenario_ref"], tuple(spec["sets"])): cfg})


@dataclass(frozen=True, slots=True)
class Protections:
    """The ``--protect`` expressions, bound to the scenario: the advised variant and the
    variants they compare with (``references``)."""

    texts: tuple[str, ...]
    claim: BoundClaim
    variant: str
    objective: Term | None

    @property
    def references(self) -> list[str]:
        return [v for v in self.claim.needed() if v != self.variant]

    @property
    def checks(self) -> list[Check]:
        return [c for c in self.claim.expectations if isinstance(c, Check)]


_OPERATOR_RUN = re.compile(r"[<>=!]+")
"""A run of comparison characters in a ``--protect``: one of :data:`OPS`, or a mistyped one."""

_MEANT = {"=": "==", "===": "==", "=>": ">=", "=<": "<=", "<>": "!=", "=!": "!="}
"""What a mistyped operator most likely meant."""


def _check_operators(text: str) -> None:
    """``ValueError`` for a mistyped comparison operator in ``text`` (``===``, ``=>``, ``=``):
    the string form would otherwise read its surplus characters as a side (``found '= 0'``
    as a variant's name) instead of naming the operator. A lone ``!`` (a glob's ``[!x]``)
    is no operator."""
    for run in _OPERATOR_RUN.finditer(text):
        op = run.group()
        if op in OPS or set(op) == {"!"}:
            continue
        meant = f" (did you mean {_MEANT[op]}?)" if op in _MEANT else ""
        raise ValueError(f"expected a comparison operator ({' '.join(OPS)}), found {op!r}{meant}")


def _no_comparison(text: str) -> None:
    """``ValueError`` for an operator in a ``--maximise`` term: it is a metric (or a function
    of metrics) to make as large as it goes, not a comparison to hold (that is ``--protect``);
    read as one, its error would name the ``>= 0`` the term is bound with."""
    for run in _OPERATOR_RUN.finditer(text):
        if set(run.group()) != {"!"}:
            raise ValueError(
                "expected a metric (or fn(metric, ...)) to maximise, found a comparison "
                f"({run.group()!r}): a bound to hold is a --protect"
            )


def bind_protections(
    cfg: ScenarioConfig, variant: str, protect: Sequence[str], maximise: str | None
) -> Protections:
    """``--protect`` strings and ``--maximise`` bound to the scenario's variant ``variant``:
    :class:`ConfigError` naming the option and, for a metric it does not know, the known
    ones. A protection's left side is read in the advised variant (the one the policy
    changes); its right side may name another variant, run under the scenario's policy."""
    catalogs = {v: cfg.catalog(v) for v in cfg.variants}
    nodes = []
    for text in protect:
        source = f"--protect {text!r}"
        try:
            _check_operators(text)
            comparison = parse_expectation(text, variant=variant)
        except ValueError as e:
            raise ConfigError(source, "", str(e)) from None
        if comparison.variant != variant:
            raise ConfigError(
                source,
                "",
                f"expected the left side in the advised variant {variant} (the one the policy "
                f"changes), found {comparison.variant}",
            )
        nodes.append(_bind(ClaimSpec(expect=[comparison]), catalogs, source, cfg).expectations[0])
    objective = None
    if maximise is not None:
        source = f"--maximise {maximise!r}"
        try:
            _no_comparison(maximise)
            operand = parse_expectation(f"{maximise} >= 0", variant=variant).operand
        except ValueError as e:
            raise ConfigError(source, "", str(e)) from None
        objective = _bind(ClaimSpec(show=[operand]), catalogs, source, cfg).shown[0]
    claim = BoundClaim("--protect", None, tuple(nodes), (), catalogs)
    return Protections(tuple(protect), claim, variant, objective)


def _bind(spec: ClaimSpec, catalogs: Mapping[str, Any], source: str, cfg: ScenarioConfig) -> Any:
    """:func:`bind_claim`, its error naming the option rather than a claim table's field."""
    try:
        return bind_claim(spec, catalogs, source, cfg.name)
    except ConfigError as e:
        raise ConfigError(source, "", e.message) from None


@dataclass(slots=True)
class Evaluation:
    """One evaluated point: its knob values (None for a reference run), how the search got
    it (``stage``), its metrics, the protections' verdict and the objective."""

    index: int
    stage: str
    values: dict[str, int] | None
    policy: dict[str, Any] | None
    point_id: str
    result: RunResult
    verdict: Verdict
    objective: float | None
    slack: list[float | None] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return self.verdict.held

    exact: list[bool] = field(default_factory=list)

    @property
    def margin(self) -> float:
        """The worst protection's slack: >= 0 when every one holds, more is safer; each a
        fraction of the larger side, -1 for one not known. An ``==``/``!=`` that holds has no
        degree and counts as 0 only when nothing else is graded."""
        if any(s is None for s in self.slack):
            return -1.0
        graded = [
            s
            for s, exact, o in zip(self.slack, self.exact, self.verdict.outcomes, strict=True)
            if s is not None and not (exact and o.held)
        ]
        return min(graded) + 0.0 if graded else 0.0

    @property
    def violation(self) -> float:
        """How far from meeting every protection (0: met), for the optimiser's constraint."""
        total = 0.0
        for outcome, slack in zip(self.verdict.outcomes, self.slack, strict=True):
            if outcome.held is not True:
                total += 1.0 if slack is None else max(1e-9, -slack)
        return total


def _slack(check: Check, row: Mapping[str, Any]) -> float | None:
    """How far a comparison is from flipping, as a fraction of its larger side (signed: >= 0
    on the side the comparison wants)."""
    value, expected = row.get("value"), row.get("expected")
    if value is None or expected is None:
        return None
    a, b = float(value), float(expected)
    scale = max(abs(a), abs(b)) or 1.0
    if check.op in (">", ">="):
        return (a - b) / scale
    if check.op in ("<", "<="):
        return (b - a) / scale
    if check.op == "==":
        return 0.0 - abs(a - b) / scale
    return abs(a - b) / scale


def _result(cfg: ScenarioConfig, row: Mapping[str, Any], units: Mapping[str, str]) -> RunResult:
    """A point's metrics as the :class:`RunResult` the claims read (no series)."""
    metrics = {n: Metric(row[n], unit) for n, unit in units.items() if n in row}
    return RunResult(
        scenario=str(row.get("scenario", cfg.name)),
        variant=str(row["variant"]),
        profile=str(row.get("profile", "")),
        seed=int(row.get("seed", 0)),
        duration=float(cfg.scenario.duration),
        config=cfg.resolve(str(row["variant"])).document(),
        metrics=metrics,
        recorder=Recorder(),
    )


class _Judged:
    """What :func:`judge` takes: a name and a bound claim."""

    def __init__(self, name: str, claim: BoundClaim) -> None:
        self.name = name
        self.bound_claim = claim


class Evaluator:
    """Runs and judges points; remembers every one, in the order the search asked."""

    def __init__(
        self,
        cfg: ScenarioConfig,
        scenario: str,
        protections: Protections,
        fixed: Mapping[str, Any],
        out: Path,
        *,
        jobs: int | None,
        dask: str | None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.scenario = scenario
        self.ref = scenario if scenario in BUILTIN else str(Path(scenario).resolve())
        self.protections = protections
        self.fixed = dict(fixed)
        self.out = out
        self.jobs = jobs
        self.dask = dask
        self.progress = progress
        self.evaluations: list[Evaluation] = []
        self.references: dict[str, RunResult] = {}
        self._by_id: dict[str, Evaluation] = {}
        self._points: dict[str, Point] = {}
        self._judged = _Judged(cfg.name, protections.claim)

    def _point(self, variant: str, factors: dict[str, Any]) -> Point:
        return Point(
            index=len(self._points),
            variant=variant,
            seed=None,
            factors=factors,
            scenario=self.scenario,
            scenario_ref=self.ref,
            profile=None,
            fixed=self.fixed,
        )

    def _run(self, points: list[Point]) -> dict[str, dict[str, Any]]:
        """Run ``points`` through the sweep machinery; every point's ``{"row", "units"}``."""
        new = [p for p in points if p.id not in self._points]
        for p in new:
            self._points[p.id] = p
        sweep = Sweep("advise", "pinlab advise", ("policy",), tuple(self._points.values()), None)
        run_sweep(sweep, self.out, jobs=self.jobs, dask=self.dask, run=run_candidate)
        from pinlab.sweep.execute import load_points

        return load_points(self.out, sweep)

    def run_references(self) -> None:
        """The variants the protections compare with, under the scenario's own policy."""
        points = [self._point(v, {}) for v in self.protections.references]
        if not points:
            return
        done = self._run(points)
        for p in points:
            self.references[p.variant] = _result(self.cfg, done[p.id]["row"], done[p.id]["units"])

    def evaluate(
        self, batch: Sequence[tuple[dict[str, int], dict[str, Any]]], stage: str
    ) -> list[Evaluation]:
        """Evaluate ``(knob values, policy)`` pairs (a point evaluated before comes back as
        it was, listed once)."""
        points = [self._point(self.protections.variant, {"policy": doc}) for _, doc in batch]
        todo = [p for p in points if p.id not in self._by_id]
        done = self._run(todo) if todo else {}
        out = []
        for (values, doc), p in zip(batch, points, strict=True):
            known = self._by_id.get(p.id)
            if known is None:
                known = self._judge(values, doc, p.id, stage, done[p.id])
                self._by_id[p.id] = known
                self.evaluations.append(known)
                if self.progress is not None:
                    self.progress(len(self.evaluations))
            out.append(known)
        return out

    def _judge(
        self,
        values: dict[str, int] | None,
        doc: dict[str, Any] | None,
        pid: str,
        stage: str,
        record: Mapping[str, Any],
    ) -> Evaluation:
        result = _result(self.cfg, record["row"], record["units"])
        verdict = self.verdict(result)
        slack = [
            _slack(check, outcome.rows[0]) if outcome.rows else None
            for check, outcome in zip(self.protections.checks, verdict.outcomes, strict=True)
        ]
        objective = None
        term = self.protections.objective
        if term is not None:
            objective = term.read(result, self.protections.claim.catalogs.get(result.variant)).value
        exact = [c.op in ("==", "!=") for c in self.protections.checks]
        return Evaluation(
            len(self.evaluations), stage, values, doc, pid, result, verdict, objective, slack, exact
        )

    def verdict(self, result: RunResult) -> Verdict:
        """The protections judged on ``result`` (with the reference runs)."""
        return judge(self._judged, [result, *self.references.values()])

    def count(self) -> int:
        return len(self.evaluations)


def show_objective(protections: Protections, value: float | None) -> str:
    term = protections.objective
    if term is None or value is None:
        return "–"
    return show_value(value, term.unit)
