"""Judging a scenario's claim: the expectations of its ``[claim]`` table, read from the runs.

:func:`bind_claim` checks a :class:`~pinlab.scenarios.claimspec.ClaimSpec` against the scenario
before anything runs -- every variant it names exists, every metric is one the variant can
report (its :class:`~pinlab.scenarios.catalog.Catalog`), every function is registered
(:data:`~pinlab.scenarios.claimfns.CLAIM_FUNCTIONS`) with metrics of the units it takes, and
every value parses in the unit of what it is compared with -- and gives a :class:`BoundClaim`,
or a :class:`~pinlab.errors.ConfigError` naming the field, what is known and what was found.

:func:`judge` evaluates a bound claim on the variants' results and gives the
:class:`~pinlab.scenarios.result.Verdict`: HELD when every expectation holds, FAILED when one
does not (an expectation on a metric a run did not report does not hold, and says why), NOT
JUDGED when the scenario states no expectation or the variants an expectation compares were
not all run (and none that ran failed). ``context = true`` expectations add their numbers to
the explanation and decide nothing. The verdict table has one row per variant and one column
per number the expectations read (and ``show``), each in its unit; a tenant that had not
reached its data phase at the end of the run is shown as ``setup``, ``not started`` or
``failed`` instead of a 0.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pinlab.errors import ConfigError
from pinlab.scenarios.catalog import Catalog, tenant_of
from pinlab.scenarios.claimfns import CLAIM_FUNCTIONS, ClaimFunction
from pinlab.scenarios.claimspec import ClaimSpec, Comparison, Group, Operand
from pinlab.scenarios.result import Outcome, RunResult, Verdict
from pinlab.units import (
    UnitError,
    fmt_rate,
    fmt_size,
    fmt_time,
    parse_factor,
    parse_rate,
    parse_size,
    parse_time,
)

__all__ = ["BoundClaim", "Check", "GroupCheck", "Term", "bind_claim", "judge", "show_value"]

_GLOB = frozenset("*?[")

_STATE_TEXT = {
    "setup": "still in setup at the end of the run",
    "not started": "had not started by the end of the run",
    "failed": "failed",
    "killed": "was gone at the end of the run",
}


@dataclass(frozen=True, slots=True)
class _UnitText:
    """How a claim shows a number of one unit, and how it reads one written in it."""

    show: Callable[[float], str]
    parse: Callable[[object], float]


def _percent(value: float) -> str:
    return f"{value * 100:.3g}%"


_UNIT_TEXT: dict[str, _UnitText] = {
    "B": _UnitText(fmt_size, parse_size),
    "B/s": _UnitText(fmt_rate, parse_rate),
    "s": _UnitText(fmt_time, parse_time),
    "ratio": _UnitText(_percent, parse_factor),
}
"""The units with a written form; any other unit is a plain number (a count)."""


def show_value(value: float, unit: str) -> str:
    """A claim's number for people: sizes, rates and times scaled (``0`` for nothing),
    ratios in percent, counts as integers."""
    if value == 0:
        return "0"
    if unit in _UNIT_TEXT:
        return _UNIT_TEXT[unit].show(value)
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4g}"


def _parse_value(raw: object, unit: str) -> float:
    """``raw`` (a TOML number or a string with a unit) in ``unit``; 0 in any unit."""
    if raw == 0 or raw == "0":
        return 0.0
    if unit in _UNIT_TEXT:
        return float(_UNIT_TEXT[unit].parse(raw))
    try:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            value = float(raw)
        else:
            value = float(str(raw))
    except (ValueError, OverflowError):
        raise UnitError("a number (a count)", raw) from None
    if not math.isfinite(value):  # == inf holds within any tolerance; nan compares false
        raise UnitError("a number (a count)", raw, "not a finite number")
    return value


# -- terms: numbers read from a run -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reading:
    """A term's value in one run (None: not known, ``why`` says why) and the tenants it read."""

    value: float | None
    why: str = ""
    tenants: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Term:
    """A metric, or a claim function of metric patterns, with the unit of its value."""

    patterns: tuple[str, ...]
    unit: str
    fn: ClaimFunction | None = None
    label: str | None = None

    @property
    def text(self) -> str:
        if self.fn is None:
            return self.patterns[0]
        return f"{self.fn.name}({', '.join(self.patterns)})"

    @property
    def title(self) -> str:
        return self.label or self.text

    def read(self, run: RunResult, catalog: Catalog | None) -> Reading:
        """This term's value in ``run``: a reported metric; an unreported one at the value
        its declaration gives (0 for a count of something that did not happen), else not
        known."""
        args: list[list[float]] = []
        tenants: list[str] = []
        for pattern in self.patterns:
            if _GLOB & set(pattern):
                names = sorted(n for n in run.metrics if fnmatch.fnmatchcase(n, pattern))
                args.append([float(run.metrics[n].value) for n in names])
                tenants += [t for n in names if (t := tenant_of(n)) is not None]
                continue
            tenant = tenant_of(pattern)
            if tenant is not None:
                tenants.append(tenant)
            metric = run.metrics.get(pattern)
            if metric is not None:
                args.append([float(metric.value)])
                continue
            entry = catalog.lookup(pattern) if catalog is not None else None
            if entry is None or entry.absent is None:
                reported = f"; reported {entry.reported}" if entry is not None else ""
                return Reading(None, f"{pattern} was not reported{reported}", tuple(tenants))
            args.append([float(entry.absent)])
        unique = tuple(dict.fromkeys(tenants))
        if self.fn is None:
            return Reading(args[0][0], "", unique)
        value = self.fn.apply(args)
        if value is None:
            return Reading(None, f"{self.text} is undefined (no value, or a ratio to 0)", unique)
        return Reading(value, "", unique)


def _states(run: RunResult, reading: Reading) -> list[tuple[str, str]]:
    """The tenants of a zero or unknown reading with the state they were left in, when none
    of them reached its data phase (``[("trainer", "setup")]``; empty otherwise)."""
    if reading.value not in (None, 0) or not reading.tenants:
        return []
    states = [(t, run.tenant_state(t)) for t in reading.tenants]
    if any(s is None for _, s in states):
        return []
    return [(t, s) for t, s in states if s is not None]


def _cell(term: Term, run: RunResult, catalog: Catalog | None) -> str:
    reading = term.read(run, catalog)
    states = _states(run, reading)
    if states:
        return "/".join(dict.fromkeys(s for _, s in states))
    if reading.value is None:
        return "–"
    return show_value(reading.value, term.unit)


# -- the bound claim ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Check:
    """One comparison, bound: ``lhs op value`` or ``lhs op times × rhs`` (of ``rhs_variant``,
    default the same) in each of ``variants`` (None: every variant run)."""

    where: str
    variants: tuple[str, ...] | None
    lhs: Term
    op: str
    value: float | None
    rhs: Term | None
    rhs_variant: str | None
    times: float
    tolerance: float
    because: str
    context: bool

    def named_variants(self) -> list[str]:
        return [*(self.variants or ()), *((self.rhs_variant,) if self.rhs_variant else ())]

    def terms(self) -> list[Term]:
        return [self.lhs, *((self.rhs,) if self.rhs is not None else ())]


@dataclass(frozen=True, slots=True)
class GroupCheck:
    """``all`` or ``any`` of its members."""

    where: str
    mode: str
    members: tuple[Check | GroupCheck, ...]
    because: str
    context: bool

    def named_variants(self) -> list[str]:
        return [v for m in self.members for v in m.named_variants()]

    def terms(self) -> list[Term]:
        return [t for m in self.members for t in m.terms()]


Node = Check | GroupCheck


@dataclass(frozen=True, slots=True)
class BoundClaim:
    """A scenario's claim, checked against its variants: ready to :func:`judge`."""

    statement: str
    camp: str | None
    expectations: tuple[Node, ...]
    shown: tuple[Term, ...]
    catalogs: Mapping[str, Catalog] = field(repr=False)

    @property
    def variants(self) -> list[str]:
        return list(self.catalogs)

    def needed(self) -> list[str]:
        """The variants the deciding expectations name, in order of first mention."""
        names = [v for e in self.expectations if not e.context for v in e.named_variants()]
        return list(dict.fromkeys(names))

    def columns(self) -> list[Term]:
        """The verdict table's numbers: each term the expectations read, then ``show``."""
        seen: dict[str, Term] = {}
        for term in [t for e in self.expectations for t in e.terms()] + list(self.shown):
            key = term.text
            if key not in seen or (seen[key].label is None and term.label is not None):
                seen[key] = term
        return list(seen.values())


class _Binder:
    def __init__(self, catalogs: Mapping[str, Catalog], source: str, scenario: str) -> None:
        self.catalogs = catalogs
        self.source = source
        self.scenario = scenario

    def error(self, where: str, message: str) -> ConfigError:
        return ConfigError(self.source, where, message)

    def variant(self, name: object, where: str) -> str:
        if not isinstance(name, str) or name not in self.catalogs:
            known = ", ".join(self.catalogs)
            raise self.error(
                where, f"expected a variant of {self.scenario} ({known}) or '*', found {name!r}"
            )
        return name

    def variants(self, value: str | list[str], where: str) -> tuple[str, ...] | None:
        if value == "*":
            return None
        names = [value] if isinstance(value, str) else list(value)
        if not names:
            raise self.error(where, "expected a variant, a list of variants or '*', found []")
        return tuple(self.variant(v, where) for v in names)

    def term(self, op: Operand, variants: Sequence[str], where: str) -> Term:
        patterns = (op.metric,) if isinstance(op.metric, str) else tuple(op.metric)
        if not patterns:
            raise self.error(f"{where}.metric", "expected a metric name, found []")
        fn = None
        if op.fn is None:
            if len(patterns) != 1 or _GLOB & set(patterns[0]):
                raise self.error(
                    f"{where}.metric",
                    "expected one metric name (patterns and lists need a claim function, "
                    f"fn = one of {', '.join(CLAIM_FUNCTIONS)}), found {op.metric!r}",
                )
        else:
            fn = CLAIM_FUNCTIONS.get(op.fn)
            if fn is None:
                raise self.error(
                    f"{where}.fn",
                    f"expected a claim function ({', '.join(CLAIM_FUNCTIONS)}), found {op.fn!r}",
                )
            if fn.arity is not None and len(patterns) != fn.arity:
                raise self.error(
                    f"{where}.metric",
                    f"expected {fn.arity} metrics for {fn.name}, found {len(patterns)}",
                )
        units = [self.unit(p, variants, f"{where}.metric") for p in patterns]
        if fn is None:
            unit = units[0]
        else:
            try:
                unit = fn.unit(units)
            except ValueError as e:
                raise self.error(f"{where}.metric", f"{fn.name}: {e}") from None
        return Term(patterns, unit, fn, op.label)

    def unit(self, pattern: str, variants: Sequence[str], where: str) -> str:
        units: set[str] = set()
        for v in variants:
            catalog = self.catalogs[v]
            if _GLOB & set(pattern):
                matches = catalog.matching(pattern)
                if not matches:
                    raise self.error(where, catalog.unknown(pattern, f"pattern of variant {v}"))
                units |= {e.unit for _, e in matches}
            else:
                entry = catalog.lookup(pattern)
                if entry is None:
                    raise self.error(where, catalog.unknown(pattern, f"of variant {v}"))
                units.add(entry.unit)
        if len(units) != 1:
            raise self.error(
                where,
                f"expected metrics of one unit, found {pattern!r} matching "
                f"{', '.join(sorted(units))}",
            )
        return units.pop()

    def node(self, exp: Comparison | Group, where: str) -> Node:
        if isinstance(exp, Group):
            members = tuple(
                self.node(m, f"{where}.{exp.mode}[{i}]") for i, m in enumerate(exp.members)
            )
            return GroupCheck(where, exp.mode, members, exp.because, exp.context)
        variants = self.variants(exp.variant, f"{where}.variant")
        over = list(variants) if variants is not None else list(self.catalogs)
        lhs = self.term(exp.operand, over, where)
        value: float | None = None
        rhs: Term | None = None
        rhs_variant: str | None = None
        times = 1.0
        if exp.than is not None:
            than = exp.than
            rhs_variant = (
                self.variant(than.variant, f"{where}.than.variant")
                if than.variant is not None
                else None
            )
            operand = (
                Operand(metric=than.metric, fn=than.fn)
                if than.metric is not None
                else Operand(metric=exp.metric, fn=than.fn or exp.fn, label=exp.label)
            )
            rhs = self.term(operand, [rhs_variant] if rhs_variant else over, f"{where}.than")
            if rhs.unit != lhs.unit:
                raise self.error(
                    f"{where}.than",
                    f"expected a number in {lhs.unit} like {lhs.text}, found {rhs.text} in "
                    f"{rhs.unit}",
                )
            times = float(than.times)
        else:
            try:
                value = _parse_value(exp.value, lhs.unit)
            except UnitError as e:
                raise self.error(f"{where}.value", f"{lhs.text} is in {lhs.unit}: {e}") from None
        return Check(
            where,
            variants,
            lhs,
            exp.op,
            value,
            rhs,
            rhs_variant,
            times,
            float(exp.tolerance),
            exp.because,
            exp.context,
        )


def bind_claim(
    spec: ClaimSpec, catalogs: Mapping[str, Catalog], source: str, scenario: str
) -> BoundClaim:
    """``spec`` checked against the scenario's variants (``catalogs``: each variant's metric
    catalog, in file order); :class:`ConfigError` on the first problem."""
    binder = _Binder(catalogs, source, scenario)
    nodes = tuple(binder.node(e, f"claim.expect[{i}]") for i, e in enumerate(spec.expect))
    shown = tuple(
        binder.term(op, list(catalogs), f"claim.show[{i}]") for i, op in enumerate(spec.shown())
    )
    return BoundClaim(spec.statement, spec.camp, nodes, shown, dict(catalogs))


# -- evaluation -----------------------------------------------------------------------------


def _compare(a: float, op: str, b: float, tolerance: float) -> bool:
    equal = abs(a - b) <= tolerance * max(abs(a), abs(b))
    return {
        "<": a < b,
        "<=": a <= b,
        "==": equal,
        ">=": a >= b,
        ">": a > b,
        "!=": not equal,
    }[op]


@dataclass(slots=True)
class _Run:
    results: Mapping[str, RunResult]
    catalogs: Mapping[str, Catalog]

    def reading(self, term: Term, variant: str) -> Reading:
        return term.read(self.results[variant], self.catalogs.get(variant))


def _because(because: str, numbers: str) -> str:
    return f"{because} ({numbers})" if because else numbers


def _evaluate_check(check: Check, run: _Run) -> Outcome:
    every = check.variants is None
    variants = list(check.variants) if check.variants is not None else list(run.results)
    named = [*variants, *((check.rhs_variant,) if check.rhs_variant else ())]
    missing = [v for v in dict.fromkeys(named) if v not in run.results]
    if missing:
        return Outcome(check.where, None, "", check.context, missing)
    rows: list[dict[str, object]] = []
    fragments: list[tuple[bool, str]] = []
    values: list[float | None] = []
    for v in variants:
        lhs = run.reading(check.lhs, v)
        expected: float | None = check.value
        base: Reading | None = None
        if check.rhs is not None:
            base = run.reading(check.rhs, check.rhs_variant or v)
            expected = None if base.value is None else base.value * check.times
        # a side read only from tenants that never reached their data phase (still in setup,
        # not started, failed) is no observation: 0 >= 1.2 × 0 does not hold
        unobserved = bool(_states(run.results[v], lhs)) or (
            base is not None and bool(_states(run.results[check.rhs_variant or v], base))
        )
        held = (
            not unobserved
            and lhs.value is not None
            and expected is not None
            and _compare(lhs.value, check.op, expected, check.tolerance)
        )
        rows.append(
            {"variant": v, "value": lhs.value, "expected": expected, "held": held, "why": lhs.why}
        )
        values.append(lhs.value if base is None else None)
        fragments.append((held, _fragment(check, v, lhs, base, run, alone=len(variants) == 1)))
    held_all = all(h for h, _ in fragments)
    if len(variants) == 1:
        numbers = fragments[0][1]
    else:
        head = f"{check.lhs.title} {check.op} {_rhs_text(check)}"
        if held_all and len(set(values)) == 1 and values[0] is not None:
            where = f"all {len(variants)} variants" if every else ", ".join(variants)
            numbers = f"{head}: {show_value(values[0], check.lhs.unit)} in {where}"
        else:
            # a failure names only the variants where it failed; a success every variant's
            shown = [text for h, text in fragments if held_all or not h]
            numbers = f"{head}: {', '.join(shown)}"
    return Outcome(check.where, held_all, _because(check.because, numbers), check.context, [], rows)


def _rhs_text(check: Check, base: Reading | None = None) -> str:
    """The right side: a value, or ``1.5 × migrate-on-pin's [metric] [value]``."""
    if check.rhs is None:
        return show_value(check.value or 0.0, check.lhs.unit)
    times = "" if check.times == 1 else f"{check.times:g} × "
    what = f" {check.rhs.title}" if check.rhs.text != check.lhs.text else ""
    where = f"{check.rhs_variant}'s" if check.rhs_variant else "its"
    number = f" {show_value(base.value, check.lhs.unit)}" if base and base.value is not None else ""
    return f"{times}{where}{what}{number}"


def _fragment(
    check: Check, variant: str, lhs: Reading, base: Reading | None, run: _Run, *, alone: bool
) -> str:
    """One variant's numbers: ``pin-in-place: throughput 48.4 GB/s >= 1.5 × staged's 25.5
    GB/s (1.90x)`` alone, ``staged 3`` (or ``staged 25.5 GB/s vs 14.1 GB/s``) in a list."""
    unit = check.lhs.unit
    if lhs.value is None or (base is not None and base.value is None):
        why = lhs.why if lhs.value is None else base.why if base is not None else ""
        text = f"{variant}: {why}"
    elif alone:
        text = (
            f"{variant}: {check.lhs.title} {show_value(lhs.value, unit)} {check.op} "
            f"{_rhs_text(check, base)}"
        )
    else:
        text = f"{variant} {show_value(lhs.value, unit)}"
        if base is not None and base.value is not None:
            text += f" vs {show_value(base.value, unit)}"
    if base is not None and base.value and lhs.value is not None:
        text += f" ({lhs.value / base.value:.2f}x)"
    states = _states(run.results[variant], lhs)
    if base is not None:
        other = run.results[check.rhs_variant or variant]
        states += [s for s in _states(other, base) if s not in states]
    if states:
        text += " (" + ", ".join(f"{t} {_STATE_TEXT.get(s, s)}" for t, s in states) + ")"
    return text


def _evaluate(node: Node, run: _Run) -> Outcome:
    if isinstance(node, Check):
        return _evaluate_check(node, run)
    members = [_evaluate(m, run) for m in node.members]
    decided = [m.held for m in members]
    held: bool | None
    if node.mode == "all":
        held = False if False in decided else None if None in decided else True
    else:
        held = True if True in decided else None if None in decided else False
    missing = list(dict.fromkeys(v for m in members for v in m.missing))
    texts = [m.text for m in members if m.text]
    joined = "; ".join(texts) if node.mode == "all" else "any of: " + " | ".join(texts)
    return Outcome(
        node.where, held, _because(node.because, joined) if texts else "", node.context, missing
    )


class _Claimed(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def bound_claim(self) -> BoundClaim: ...


def _sentence(parts: Sequence[str], names: Sequence[str] = ()) -> str:
    """``parts`` joined into one sentence, capitalised unless its first word is a name -- a
    variant (``big: ...``) or a metric (``tenant.kv.throughput ...``) is written as it is."""
    text = "; ".join(p for p in parts if p)
    if not text:
        return ""
    first = text.split(" ", 1)[0].rstrip(":,")
    if first not in names and "." not in first:
        text = text[:1].upper() + text[1:]
    return text + "."


def judge(cfg: _Claimed, results: Sequence[RunResult]) -> Verdict:
    """The verdict on ``cfg``'s claim from the variants' results (in run order)."""
    claim = cfg.bound_claim
    by_name = {r.variant: r for r in results}
    run = _Run(by_name, claim.catalogs)
    outcomes = [_evaluate(e, run) for e in claim.expectations]
    deciding = [o for o in outcomes if not o.context]
    context = [o.text for o in outcomes if o.context and o.held is not None and o.text]
    failed = [o for o in deciding if o.held is False]
    undecided = [o for o in deciding if o.held is None]
    judged = True
    if not deciding:
        held, judged = False, False
        explanation = "The scenario states no expectations ([[claim.expect]]); not judged."
    elif failed:
        held = False
        passed = [o.text for o in deciding if o.held]
        explanation = "Failed: " + "; ".join(o.text for o in failed) + "."
        if passed:
            explanation += " Held: " + "; ".join(passed) + "."
    elif undecided:
        held, judged = False, False
        missing = [v for v in claim.needed() if v not in by_name]
        explanation = (
            f"variant(s) {', '.join(missing)} not run; the claim compares "
            f"{', '.join(claim.needed())}."
        )
        context = []
    else:
        held = True
        explanation = _sentence([o.text for o in deciding], list(by_name))
    if context:
        explanation += " " + _sentence(context, list(by_name))
    columns = claim.columns() if deciding else _default_columns(results)
    rows = [
        {
            "variant": r.variant,
            **{t.title: _cell(t, r, claim.catalogs.get(r.variant)) for t in columns},
        }
        for r in results
    ]
    return Verdict(
        cfg.name,
        claim.statement,
        held,
        ["variant", *(t.title for t in columns)],
        rows,
        explanation.strip(),
        judged,
        outcomes,
    )


def _default_columns(results: Sequence[RunResult]) -> list[Term]:
    """Without expectations: each tenant's throughput on its own (what a tenant counts as moved
    -- NIC bytes, scanout, touches of device memory -- differs by workload, so rates are never
    added across tenants), the denials and the stale-DMA count."""
    tenants: dict[str, None] = {}
    for r in results:
        for name in r.metrics:
            tenant = tenant_of(name)
            if tenant is not None and name.endswith(".throughput"):
                tenants[tenant] = None
    workload = {
        str(t.get("name")): str(t.get("workload"))
        for r in results
        for t in r.config.get("tenants", [])
        if isinstance(t, dict)
    }
    terms = [
        Term(
            (f"tenant.{t}.throughput",),
            "B/s",
            label=f"{t} ({workload.get(t.partition('@')[0], '?')})",
        )
        for t in tenants
    ]
    return [
        *terms,
        Term(("global.denials",), "count", label="denials"),
        Term(("global.stale_dma_incidents",), "count", label="stale DMA"),
    ]
