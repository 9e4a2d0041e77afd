"""Running one sequence of operations on a freshly booted target, and shrinking a failing one.

A sequence always runs from boot (stateless exploration: the model has no snapshot/restore,
and booting the matrix machine costs about two milliseconds). :func:`run_sequence` executes
the compiled source of each step in one namespace -- the same text a reproducer prints -- and
returns the violations, the errno of each step and the state's fingerprint before teardown.

:func:`shrink` is delta debugging (Zeller and Hildebrandt's *ddmin*): remove ever smaller
chunks of a failing sequence as long as the same violation signature still appears; steps
whose objects no longer exist are skipped, so every candidate is a valid sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pinlab.explore.invariants import Checker, Violation
from pinlab.explore.ops import PRELUDE, Alphabet, Op, boot_source
from pinlab.explore.target import Target

_PRELUDE = compile(PRELUDE, "<prelude>", "exec")


@dataclass(slots=True)
class Outcome:
    """What one sequence did: the steps that ran, each one's ``-errno`` (None = success),
    the violations, the fingerprint before teardown and the operations enabled there."""

    ops: tuple[Op, ...]
    errors: list[str | None]
    violations: list[Violation]
    fingerprint: tuple[Any, ...]
    enabled: tuple[Op, ...]
    dead: bool

    @property
    def signature(self) -> str | None:
        return self.violations[0].signature if self.violations else None


class Runner:
    """Runs sequences of one target (its alphabet and compiled boot lines cached)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.alphabet = Alphabet(target)
        self._boot = compile(boot_source(target), "<boot>", "exec")
        self.runs = 0

    def namespace(self) -> dict[str, Any]:
        ns: dict[str, Any] = {}
        exec(_PRELUDE, ns)
        exec(self._boot, ns)
        return ns

    def run(
        self,
        ops: Sequence[Op],
        *,
        teardown: bool = True,
        skip_disabled: bool = False,
        known_states: set[tuple[Any, ...]] | None = None,
        trace_step: Callable[[int], Any] | None = None,
    ) -> Outcome:
        """Boot, run ``ops`` (skipping those not enabled with ``skip_disabled``), check
        teardown. ``trace_step(i)`` returns a context manager wrapped around step ``i``
        (1-based; 0 = teardown), for the call-path tracer. A sequence ending in one of
        ``known_states`` skips teardown: the same state was torn down and checked before."""
        self.runs += 1
        ns = self.namespace()
        check: Checker = ns["check"]
        created: set[int] = set()
        done: list[Op] = []
        for op in ops:
            if skip_disabled and not self.alphabet.is_enabled(op, ns, frozenset(created)):
                continue
            code = self.alphabet.code(op)
            if trace_step is not None:
                with trace_step(len(done) + 1):
                    exec(code, ns)
            else:
                exec(code, ns)
            done.append(op)
            if op.kind == "create":
                created.add(op.args[0])
            if check.dead:
                break
        fingerprint = check.fingerprint(ns)
        enabled = () if check.dead else tuple(self.alphabet.enabled(ns, frozenset(created)))
        if known_states is not None and fingerprint in known_states:
            teardown = False
        if teardown:
            if trace_step is not None:
                with trace_step(0):
                    check.teardown()
            else:
                check.teardown()
        return Outcome(
            tuple(done), check.errors, check.violations, fingerprint, enabled, check.dead
        )


def shrink(runner: Runner, ops: Sequence[Op], signature: str) -> tuple[Op, ...]:
    """The smallest sequence ddmin finds that still shows ``signature`` as its first
    violation (1-minimal: removing any one step loses it)."""

    def fails(candidate: Sequence[Op]) -> tuple[Op, ...] | None:
        out = runner.run(candidate, skip_disabled=True)
        return out.ops if out.signature == signature else None

    current = tuple(ops)
    n = 2
    while len(current) >= 2:
        chunk = max(1, len(current) // n)
        parts = [current[i : i + chunk] for i in range(0, len(current), chunk)]
        reduced = False
        for k in range(len(parts)):
            complement = tuple(op for j, p in enumerate(parts) if j != k for op in p)
            ran = fails(complement)
            if ran is not None:
                current = ran
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(n * 2, len(current))
    return current
