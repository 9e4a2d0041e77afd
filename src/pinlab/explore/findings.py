"""Findings: a shrunk, traced, classified violation with a runnable reproducer.

Every new violation signature becomes a :class:`Finding`: the sequence is shrunk to a minimal
one (:func:`~pinlab.explore.run.shrink`), re-run with the call-path tracer on the step that
broke the invariant (:mod:`pinlab.explore.trace`), and written as a Python script on
:mod:`pinlab.uapi` (:meth:`Finding.reproducer`: the exact lines the exploration ran; it exits 1
while the finding reproduces).

Classification. The reviewed findings are listed in ``known_findings.toml`` (package data) by
violation signature (or ``signatures``: one cause met through several steps), importer and
exporters, each with its class and status:

* ``kernel behaviour`` -- the model is faithful to upstream here: a candidate upstream report,
  with the upstream source lines (file, function) that produce it;
* ``model defect`` -- a K- rule is violated by pinlab itself: pinlab must be fixed;
* ``negative control`` -- a deliberately broken driver doing what it was built to do (the
  ``ignore_move_notify`` mlx5 importer).

A signature not in the list is ``model defect`` when the model raised something other than a
``KernelError`` (``escape``, ``BUG``: no kernel path ends that way), else ``unreviewed`` --
treated as a model defect until someone reads the call path against the upstream source and
lists it. ``pinlab explore`` exits 1 and CI fails on any ``model defect`` or ``unreviewed``
finding (:attr:`Finding.blocking`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from pinlab.explore.invariants import Violation
from pinlab.explore.ops import boot_source, prelude_for
from pinlab.explore.run import Outcome, Runner, shrink
from pinlab.explore.target import Target
from pinlab.explore.trace import Call, items_of, sources_of, tracing
from pinlab.tomlfile import parse_toml

if TYPE_CHECKING:
    from pinlab.explore.ops import Op

KERNEL = "kernel behaviour"
MODEL = "model defect"
CONTROL = "negative control"
UNREVIEWED = "unreviewed"
CLASSES = (KERNEL, MODEL, CONTROL, UNREVIEWED)
KNOWN_FILE = "known_findings.toml"


@dataclass(frozen=True, slots=True)
class Known:
    """One reviewed finding of ``known_findings.toml``."""

    id: str
    signatures: tuple[str, ...]
    importer: str
    exporters: tuple[str, ...]
    title: str
    classification: str
    status: str
    sources: tuple[str, ...] = ()
    items: tuple[str, ...] = ()
    notes: str = ""


class KnownFindings:
    """The reviewed findings by signature."""

    def __init__(self, entries: list[Known]) -> None:
        self.entries = entries
        self._index = {
            (sig, k.importer, exporter): k
            for k in entries
            for sig in k.signatures
            for exporter in k.exporters
        }

    @classmethod
    def load(cls, text: str | None = None, source: str = KNOWN_FILE) -> KnownFindings:
        """The package's list (or ``text``). A malformed entry is a ``ValueError`` naming
        the field: the file ships with pinlab, so this is a packaging error."""
        if text is None:
            text = resources.files("pinlab.explore").joinpath(KNOWN_FILE).read_text("utf-8")
        data = parse_toml(text, source=source)
        entries = []
        for i, raw in enumerate(data.get("finding", [])):
            try:
                sigs = raw["signatures"] if "signatures" in raw else [raw["signature"]]
                entry = Known(
                    id=raw["id"],
                    signatures=tuple(sigs),
                    importer=raw["importer"],
                    exporters=tuple(raw["exporters"]),
                    title=raw["title"],
                    classification=raw["classification"],
                    status=raw["status"],
                    sources=tuple(raw.get("sources", ())),
                    items=tuple(raw.get("items", ())),
                    notes=raw.get("notes", ""),
                )
            except KeyError as e:
                raise ValueError(f"{source}: finding[{i}]: missing field {e}") from None
            if entry.classification not in CLASSES[:3]:
                raise ValueError(
                    f"{source}: finding[{i}].classification: expected one of "
                    f"{', '.join(CLASSES[:3])}, found {entry.classification!r}"
                )
            entries.append(entry)
        return cls(entries)

    def get(self, signature: str, target: Target) -> Known | None:
        """The review of violation ``signature`` on ``target``'s exporter and importer."""
        return self._index.get((signature, target.importer, target.exporter))


@dataclass(slots=True)
class Finding:
    """A deduplicated violation: its signature, the first target it was found on, the
    shrunk sequence with each step's errno, the violations that sequence shows, the call path
    of the step that broke the invariant, the classification and where the search met it."""

    signature: str
    target: Target
    ops: tuple[Op, ...]
    errors: list[str | None]
    violations: list[Violation]
    calls: list[Call]
    classification: str
    known: Known | None
    found_at_sequence: int
    found_at_states: int
    """How many distinct states the search had explored when it met the finding (a measure of
    search effort that, unlike seconds, does not depend on the machine)."""
    found_at_seconds: float
    original_length: int
    seen: list[str] = field(default_factory=list)
    hits: int = 1

    def seen_in(self, target: Target) -> None:
        self.hits += 1
        name = str(target)
        if name not in self.seen:
            self.seen.append(name)

    @property
    def id(self) -> str:
        return self.known.id if self.known is not None else "new"

    @property
    def title(self) -> str:
        if self.known is not None:
            return self.known.title
        return str(self.violations[0]) if self.violations else self.signature

    @property
    def blocking(self) -> bool:
        """Whether CI must fail: a model defect, or a finding nobody has reviewed yet."""
        return self.classification in (MODEL, UNREVIEWED)

    @property
    def items(self) -> list[str]:
        """The K-/P- items on the call path (and those the review names)."""
        reviewed = list(self.known.items) if self.known is not None else []
        return list(dict.fromkeys([*reviewed, *items_of(self.calls)]))

    @property
    def sources(self) -> list[str]:
        """The upstream source lines: the review's, else (file function) off the call path."""
        if self.known is not None and self.known.sources:
            return list(self.known.sources)
        return [f"{file} {func}" for file, func in sources_of(self.calls)]

    def steps(self) -> list[str]:
        return [
            f"{op}" + (f"  → {err}" if err else "")
            for op, err in zip(self.ops, self.errors, strict=False)
        ]

    def reproducer(self) -> str:
        """A runnable script: boots the target, runs the shrunk sequence through the same
        checker, prints the violations and exits 1 while the finding reproduces."""
        runner = Runner(self.target)
        steps: list[str] = []
        for n, (op, err) in enumerate(zip(self.ops, self.errors, strict=False), 1):
            steps.append(f"# {n}. {op}" + (f" -- fails with {err}" if err else ""))
            steps.append(runner.alphabet.step(op).source())
        body = "\n".join(steps)
        head = [
            *textwrap.wrap(f"pinlab explore finding {self.id}: {self.title}.", 96),
            "",
            *textwrap.wrap(f"Target: {self.target}. Classification: {self.classification}.", 96),
            *textwrap.wrap(f"Signature: {self.signature}", 96),
            "Exit status 1 while it reproduces (the violations are printed).",
        ]
        doc = '"""' + "\n".join(head) + '\n"""'
        tail = "check.teardown()\nraise SystemExit(check.exit_status())\n"
        return "\n".join([doc, "", prelude_for(body), boot_source(self.target), body, tail])

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "signature": self.signature,
            "title": self.title,
            "classification": self.classification,
            "blocking": self.blocking,
            "status": self.known.status if self.known is not None else "new: review it",
            "target": str(self.target),
            "steps": self.steps(),
            "violations": [str(v) for v in self.violations],
            "call_path": [str(c) for c in self.calls],
            "items": self.items,
            "sources": self.sources,
            "found_at_sequence": self.found_at_sequence,
            "found_at_states": self.found_at_states,
            "found_at_seconds": round(self.found_at_seconds, 3),
            "shrunk_from": self.original_length,
            "seen_in": self.seen,
            "hits": self.hits,
        }


def classify(entry: Known | None, violation: Violation | None) -> str:
    if entry is not None:
        return entry.classification
    if violation is not None and violation.kind in ("escape", "BUG"):
        return MODEL
    return UNREVIEWED


def make_finding(
    key: str,
    target: Target,
    runner: Runner,
    outcome: Outcome,
    known: KnownFindings,
    sequence: int,
    states: int,
    seconds: float,
) -> Finding:
    """Shrink ``outcome``'s sequence, trace the breaking step, classify (module docstring)."""
    sig = outcome.signature
    assert sig is not None
    ops = shrink(runner, outcome.ops, sig)
    final = runner.run(ops)
    first = final.violations[0] if final.violations else None
    entry = known.get(sig, target)
    calls: list[Call] = []
    if first is not None:
        wanted = first.step

        @contextmanager
        def trace(step: int) -> Iterator[None]:
            if step == wanted:
                with tracing(calls):
                    yield
            else:
                yield

        runner.run(ops, trace_step=trace)
    return Finding(
        signature=key,
        target=target,
        ops=final.ops,
        errors=final.errors,
        violations=final.violations,
        calls=calls,
        classification=classify(entry, first),
        known=entry,
        found_at_sequence=sequence,
        found_at_states=states,
        found_at_seconds=seconds,
        original_length=len(outcome.ops),
        seen=[str(target)],
    )
