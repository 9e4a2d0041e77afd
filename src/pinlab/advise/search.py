"""The search: an optimiser over the whole space, then bisection along each limit.

1. **Optimiser.** optuna's TPE sampler (seeded: the same ``--seed`` asks for the same points)
   over every knob, maximising ``--maximise`` (without it, the protections' margin) under the
   constraint that every protection holds (``Trial.set_constraint``: how far a point is from
   meeting them). The scenario's own variants' policies are its first trials. Points are
   asked :data:`BATCH` at a time whatever ``--jobs`` is, so the jobs change only how fast.
   It gets half the budget (at least the seeded trials).
2. **Bisection.** From the best point that meets every protection (the *incumbent*), each
   limit in the policy moves to its tight end (least privilege: the smallest memlock, the
   smallest dmem.max, no dmem.min/low) when the point stays *acceptable* -- every protection
   held and the maximised metric within :data:`OBJECTIVE_SLACK` of the incumbent's; those
   moves are tried together, then (if together they fail) one by one. A limit whose tight
   end is not acceptable is bisected on its grid (:data:`BATCH` - 1 points a round) to the
   smallest acceptable value, assuming acceptability is monotone along it: the *boundary*
   (e.g. the smallest RLIMIT_MEMLOCK with which the RDMA job keeps its rate) is reported.

Every step is an evaluated point; the search stops when the budget (points run) is spent,
and the incumbent is always an evaluated acceptable point, so a short budget recommends a
less tight policy, never an unchecked one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pinlab.advise.evaluate import Evaluation, Evaluator
from pinlab.advise.space import Knob, Space

__all__ = ["BATCH", "OBJECTIVE_SLACK", "Advice", "Boundary", "search"]

BATCH = 4
"""Points asked of the optimiser at once (fixed, so results do not depend on ``--jobs``)."""
OBJECTIVE_SLACK = 0.01
"""How much of the maximised metric the bisection may give up for a tighter limit."""


@dataclass(frozen=True, slots=True)
class Boundary:
    """Where a limit stops being acceptable: ``lowest`` is the smallest acceptable value found
    (grid index), ``failing`` the largest one below it found not acceptable; ``exact`` when
    they are neighbours on the grid (else the budget ended the bisection between them)."""

    knob: Knob
    lowest: int
    failing: int
    exact: bool

    def text(self) -> str:
        low, fail = self.knob.show(self.lowest), self.knob.show(self.failing)
        if not self.exact:
            return f"{self.knob.name}: {low} is enough, {fail} is not (the budget ended here)"
        return f"{self.knob.name}: at least {low} ({fail} is not enough)"


@dataclass(slots=True)
class Advice:
    """The search's outcome: every evaluation, the recommendation (None: no point met every
    protection) or the closest point, the boundaries found."""

    space: Space
    evaluations: list[Evaluation]
    recommended: Evaluation | None
    closest: Evaluation
    boundaries: list[Boundary] = field(default_factory=list)
    relaxed: list[str] = field(default_factory=list)


def _objective(e: Evaluation) -> float:
    if e.objective is not None:
        return float(e.objective)
    return e.margin


def _better(a: Evaluation, b: Evaluation | None) -> bool:
    return b is None or _objective(a) > _objective(b)


def closest(evaluations: list[Evaluation]) -> Evaluation:
    """The point nearest to meeting every protection (then the best objective, then the
    first)."""
    return min(evaluations, key=lambda e: (e.violation, -_objective(e), e.index))


class _Search:
    def __init__(self, space: Space, evaluator: Evaluator, budget: int, seed: int) -> None:
        self.space = space
        self.ev = evaluator
        self.budget = budget
        self.seed = seed
        self.incumbent: Evaluation | None = None
        self.floor: float | None = None

    def left(self) -> int:
        return self.budget - self.ev.count()

    def run_batch(self, batch: list[dict[str, int]], stage: str) -> list[Evaluation]:
        batch = batch[: max(0, self.left())]
        return self.ev.evaluate([(v, self.space.policy(v)) for v in batch], stage)

    # -- stage 1 -------------------------------------------------------------------------

    def optimise(self, seeds: list[dict[str, int]], trials: int) -> None:
        import optuna
        from optuna.distributions import CategoricalDistribution, IntDistribution

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(
            seed=self.seed,
            n_startup_trials=max(1, min(10, trials // 2)),
        )
        study = optuna.create_study(direction="maximize", sampler=sampler)
        dists: dict[str, Any] = {
            k.name: IntDistribution(0, len(k.values) - 1)
            if k.limit
            else CategoricalDistribution(list(k.values))
            for k in self.space.knobs
        }
        for values in seeds:
            study.enqueue_trial(self._params(values))
        asked = 0
        while self.ev.count() < trials and self.left() > 0 and asked < 4 * trials + len(seeds):
            n = min(BATCH, trials - self.ev.count(), self.left())
            pending = [study.ask(dists) for _ in range(n)]
            asked += n
            batch = [self._values(t.params) for t in pending]
            for trial, e in zip(pending, self.run_batch(batch, "optimiser"), strict=True):
                trial.set_constraint("protect", e.violation)
                study.tell(trial, _objective(e))
                if e.held and _better(e, self.incumbent):
                    self.incumbent = e

    def _params(self, values: dict[str, int]) -> dict[str, Any]:
        return {
            k.name: values[k.name] if k.limit else k.values[values[k.name]]
            for k in self.space.knobs
        }

    def _values(self, params: dict[str, Any]) -> dict[str, int]:
        return {
            k.name: int(params[k.name]) if k.limit else k.index_of(params[k.name])
            for k in self.space.knobs
        }

    # -- stage 2 -------------------------------------------------------------------------

    def acceptable(self, e: Evaluation) -> bool:
        if not e.held:
            return False
        return self.floor is None or (e.objective is not None and e.objective >= self.floor)

    def bisect(self, advice: Advice) -> None:
        assert self.incumbent is not None and self.incumbent.values is not None
        if self.incumbent.objective is not None:
            best = float(self.incumbent.objective)
            self.floor = best - OBJECTIVE_SLACK * abs(best)
        values = dict(self.incumbent.values)
        limits = [
            k
            for k in self.space.knobs
            if k.limit and self.space.active(values, k) and values[k.name]
        ]
        probes = [{**values, k.name: 0} for k in limits]
        results = [e for chunk in _chunks(probes) for e in self.run_batch(chunk, "tight end")]
        passed = [k for k, e in zip(limits, results, strict=False) if self.acceptable(e)]
        failed = [k for k, e in zip(limits, results, strict=False) if not self.acceptable(e)]
        if passed:
            together = {**values, **{k.name: 0 for k in passed}}
            done = self.run_batch([together], "tight ends together")
            if done and self.acceptable(done[0]):
                self._move(done[0], [k.name for k in passed], advice)
            else:
                for k in passed:
                    step = self.run_batch([{**self._current(), k.name: 0}], "tight end, alone")
                    if step and self.acceptable(step[0]):
                        self._move(step[0], [k.name], advice)
        for k in failed:
            if self.left() <= 0:
                break
            self._bisect_one(k, advice)

    def _current(self) -> dict[str, int]:
        assert self.incumbent is not None and self.incumbent.values is not None
        return dict(self.incumbent.values)

    def _move(self, e: Evaluation, names: list[str], advice: Advice) -> None:
        self.incumbent = e
        advice.relaxed.extend(names)

    def _bisect_one(self, knob: Knob, advice: Advice) -> None:
        lo, hi = 0, self._current()[knob.name]
        while hi - lo > 1 and self.left() > 0:
            mids = sorted({lo + (hi - lo) * j // BATCH for j in range(1, BATCH)} - {lo, hi})
            base = self._current()
            done = self.run_batch([{**base, knob.name: m} for m in mids], f"bisect {knob.name}")
            if len(done) < len(mids):
                mids = mids[: len(done)]
            ok = [(m, e) for m, e in zip(mids, done, strict=True) if self.acceptable(e)]
            if ok:
                hi, best = ok[0]
                self.incumbent = best
                lo = max([lo, *(m for m, e in zip(mids, done, strict=True) if m < hi)])
            else:
                lo = max(mids)
        advice.boundaries.append(Boundary(knob, hi, lo, hi - lo == 1))


def _chunks(items: list[dict[str, int]]) -> Iterator[list[dict[str, int]]]:
    for i in range(0, len(items), BATCH):
        yield items[i : i + BATCH]


def search(
    space: Space,
    evaluator: Evaluator,
    *,
    budget: int,
    seed: int,
    seeds: list[dict[str, int]],
) -> Advice:
    """Search ``space`` with at most ``budget`` points run; ``seeds``: the first trials (the
    scenario's variants' policies, as points)."""
    s = _Search(space, evaluator, budget, seed)
    trials = min(budget, max(len(seeds), math.ceil(budget / 2)))
    s.optimise(seeds, trials)
    evaluations = evaluator.evaluations
    advice = Advice(space, evaluations, None, closest(evaluations))
    if s.incumbent is not None:
        s.bisect(advice)
        advice.recommended = s.incumbent
    advice.closest = closest(evaluations)
    return advice
