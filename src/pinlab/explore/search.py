"""The bounded systematic search: iterative deepening over sequences, dovetailed over targets.

Order: iterative deepening over the targets, dovetailed. The targets come in the order
:func:`~pinlab.explore.target.targets` gives (upstream before the policies, the newest
released kernel first, then exporter and importer in registry order) and are cut into tiers
that grow by :data:`TIER_GROWTH`: the first tier is the first exporter against every importer,
the second four times as many targets, and so on; tier *k* trails the first by *k* levels
(:func:`_lags`). Round *r* explores depth *r* - *k* of every target of tier *k*, up to
``depth``; within a round, tier by tier, and within a target, sequences in the order of their
parents and of :meth:`Alphabet.enabled`. Every target gets every short sequence before it
gets a longer one, and every target is begun by round *k* of its tier (a handful of rounds:
five tiers hold the 1 571 targets of the default selection). What the tiers buy is depth
where it can pay: level-synchronous deepening over the default selection would need some
17 000 sequences to finish depth 2 everywhere (11 per target), while one target needs about
350 to finish depth 4.

Why four: one more level of one target costs about four times the level before it (measured
over depths 3 to 5 on GEM, vfio-pci and policy targets: 63, 272 and about 950 sequences for
levels 3, 4 and 5), so a tier four times larger one level shallower costs about the same, and
every tier gets about the same share of each round. Nothing in the order names a driver or a
finding.

``seed`` 0 keeps the canonical order (targets as above, operations in alphabet order);
another seed shuffles both with :class:`random.Random` (``seed``), so the same seed always
gives the same order. The budget (seconds, or ``max_sequences``) only cuts this one order
short: a larger budget explores a longer prefix of the same enumeration -- it adds findings
and "seen in" entries, it never changes the ones already found. What the budget changes is
therefore how deep the search gets and which targets of the last round it reaches
(``Report.reached``).

Reductions, so that equivalent interleavings are not re-run:

* **partial-order reduction** -- two adjacent operations with disjoint footprints commute
  (:meth:`~pinlab.explore.ops.Step.independent`); of the two orders only the one in canonical
  order (``Op`` ordering) is run (a trace normal form). Footprints are conservative: anything
  that may move memory shares ``mem``, so only operations on different buffers' fds and
  handles commute;
* **state hashing** -- a sequence whose state (:meth:`Checker.fingerprint`) was reached before
  at the same or a smaller depth is not extended (breadth-first: the first visit is the
  shallowest); one that leaves the state as it found it (a refused call, an event with nothing
  to act on) is not extended either.

Both are sound only as far as footprints and fingerprints are exact; combining the adjacent
order rule with state hashing can in principle lose an interleaving (the known caveat of sleep
sets with state caching). A sequence is always checked before it is pruned: only its
extensions are skipped.

Findings: the first violation of a sequence is its signature (with the exporter and importer);
a new signature is shrunk (:func:`~pinlab.explore.run.shrink`), traced and classified
(:mod:`pinlab.explore.findings`); a known one only adds the target to its "seen in" list.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pinlab.explore.findings import Finding, KnownFindings, make_finding
from pinlab.explore.ops import Op
from pinlab.explore.run import Outcome, Runner
from pinlab.explore.target import Target
from pinlab.scenarios.config import check_seed


@dataclass(slots=True)
class _Node:
    ops: tuple[Op, ...]
    enabled: tuple[Op, ...]


@dataclass(slots=True)
class Stats:
    """What the search did: sequences run (exploring, shrinking), distinct states, how many
    extensions each reduction skipped, the deepest level completed for every target and the
    seconds spent."""

    sequences: int = 0
    shrink_runs: int = 0
    states: int = 0
    por_skipped: int = 0
    revisits: int = 0
    depth_done: int = 0
    seconds: float = 0.0
    exhausted: bool = False


@dataclass(slots=True)
class Report:
    """The result of :func:`explore`."""

    targets: list[Target]
    skipped: list[tuple[Target, str]]
    depth: int
    budget: float | None
    seed: int
    findings: list[Finding] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    reached: list[str] = field(default_factory=list)
    """Targets explored at the deepest level begun, when the budget stopped inside it."""


def explore(
    targets: list[Target],
    *,
    depth: int = 6,
    budget: float | None = 60.0,
    seed: int = 0,
    max_sequences: int | None = None,
    skipped: list[tuple[Target, str]] | None = None,
    known: KnownFindings | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Report:
    """Explore ``targets`` up to ``depth`` operations per sequence within ``budget`` seconds
    (None: no time limit) and ``max_sequences`` sequences (None: no limit); module docstring.
    ``seed`` is a seed as everywhere (0 … 2^63-1, :func:`~pinlab.scenarios.config.check_seed`;
    :class:`~pinlab.errors.ConfigError` otherwise)."""
    seed = check_seed(seed)
    rng = random.Random(seed)
    order = list(targets)
    if seed:
        rng.shuffle(order)
    report = Report(order, list(skipped or []), depth, budget, seed)
    stats = report.stats
    known = known if known is not None else KnownFindings.load()
    start = clock()
    deadline = None if budget is None else start + budget
    runners = {t: Runner(t) for t in order}
    by_signature: dict[str, Finding] = {}
    visited: dict[Target, set[tuple[object, ...]]] = {t: set() for t in order}
    frontier: dict[Target, list[_Node]] = {}

    def out_of_budget() -> bool:
        if max_sequences is not None and stats.sequences >= max_sequences:
            return True
        return deadline is not None and clock() >= deadline

    def record(target: Target, outcome: Outcome) -> None:
        sig = outcome.signature
        if sig is None:
            return
        key = f"{sig} | {target.exporter} → {target.importer}"
        found = by_signature.get(key)
        if found is not None:
            found.seen_in(target)
            return
        runner = runners[target]
        before = runner.runs
        finding = make_finding(
            key, target, runner, outcome, known, stats.sequences, stats.states, clock() - start
        )
        stats.shrink_runs += runner.runs - before
        by_signature[key] = finding
        report.findings.append(finding)

    lags = _lags(order)
    done: dict[Target, int] = {t: -1 for t in order}
    stopped = False
    for round_ in range(depth + 1 + max(lags.values(), default=0)):
        reached: list[str] = []
        for t in order:
            if stopped:
                break
            level = round_ - lags[t]
            if level < 0 or level > depth or (level > 0 and not frontier.get(t)):
                continue
            runner = runners[t]
            if level == 0:  # the booted machine itself
                if out_of_budget():
                    stopped = True
                    break
                out = runner.run(())
                stats.sequences += 1
                record(t, out)
                visited[t].add(out.fingerprint)
                frontier[t] = [_Node((), _shuffled(out.enabled, rng, seed))]
                done[t] = 0
                reached.append(str(t))
                continue
            nxt: list[_Node] = []
            for node in frontier[t]:
                if stopped:
                    break
                last = node.ops[-1] if node.ops else None
                for op in node.enabled:
                    if last is not None and op < last:
                        a, b = runner.alphabet.step(op), runner.alphabet.step(last)
                        if a.independent(b):
                            stats.por_skipped += 1
                            continue
                    if out_of_budget():
                        stopped = True
                        break
                    out = runner.run((*node.ops, op), known_states=visited[t])
                    stats.sequences += 1
                    record(t, out)
                    if out.dead or out.violations:
                        continue  # a broken state is reported, not extended
                    if out.fingerprint in visited[t]:
                        stats.revisits += 1
                        continue
                    visited[t].add(out.fingerprint)
                    stats.states += 1
                    nxt.append(_Node(out.ops, _shuffled(out.enabled, rng, seed)))
            reached.append(str(t))
            if stopped:
                break
            frontier[t] = nxt
            done[t] = level
        if stopped:
            report.reached = reached
            break
        if all(t in frontier for t in order) and not any(frontier.values()):
            stats.exhausted = True
            break
    # a target whose frontier ran dry is complete to any depth
    stats.depth_done = max(
        0, min((done[t] if frontier.get(t, True) else depth for t in order), default=0)
    )
    stats.seconds = clock() - start
    return report


TIER_GROWTH = 4
"""How much larger each tier of targets is than the one before (module docstring)."""


def _lags(order: list[Target]) -> dict[Target, int]:
    """How many levels each target trails the first ones (module docstring): the targets in
    ``order`` are cut into tiers that grow by :data:`TIER_GROWTH` -- the first tier as large
    as the number of importers, so that it holds the first exporter against every importer --
    and tier *k* trails by *k* levels."""
    size = max(1, len({t.importer for t in order}))
    lags: dict[Target, int] = {}
    tier, left = 0, size
    for t in order:
        if not left:
            tier, size = tier + 1, size * TIER_GROWTH
            left = size
        lags[t] = tier
        left -= 1
    return lags


def _shuffled(ops: tuple[Op, ...], rng: random.Random, seed: int) -> tuple[Op, ...]:
    if not seed:
        return ops
    out = list(ops)
    rng.shuffle(out)
    return tuple(out)
