"""Claim functions: what an expectation computes from several metrics (``fn = "sum"``).

A claim function takes its metrics as fnmatch patterns (``metric = "tenant.*.throughput"``, or
a list, one pattern per argument) and gets, per argument, the values of the metrics the run
reported that match it (a plain name gives its one value; an unreported counter counts as 0).
It returns a number, or None where the result is undefined (a maximum of nothing, a ratio to
zero); an expectation with an undefined side does not hold.

:data:`CLAIM_FUNCTIONS` is the one registry; :func:`register_claim_function` adds one (for
plugins, under a new name). Built in:

* ``sum`` -- the sum of every matching metric (all of one unit): ``sum(tenant.*.throughput)``
  is the aggregate rate of every tenant;
* ``max``, ``min``, ``mean`` -- the largest, smallest, mean matching value (undefined for none);
* ``count`` -- how many matching metrics have a value (a count);
* ``ratio`` -- two metrics of one unit, the first over the second (a ratio; undefined when the
  second is 0): ``ratio(tenant.trainer.throughput, tenant.trainer.path_rate)`` is the share
  of its path's rate a tenant got.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["CLAIM_FUNCTIONS", "ClaimFunction", "register_claim_function"]

Values = Sequence[Sequence[float]]
"""Per argument, the values of the metrics it matched."""


@dataclass(frozen=True, slots=True)
class ClaimFunction:
    """A named computation over metrics.

    ``arity`` is the number of metric arguments (None: one or more, every value pooled);
    ``unit`` gives the result's unit from the arguments' units (one unit each) or raises
    ``ValueError`` saying what it expected; ``apply`` computes the result (None: undefined).
    """

    name: str
    summary: str
    arity: int | None
    unit: Callable[[Sequence[str]], str]
    apply: Callable[[Values], float | None]


CLAIM_FUNCTIONS: dict[str, ClaimFunction] = {}
"""Claim functions by name (``fn = "<name>"`` in a scenario's ``[claim]``)."""


def register_claim_function(fn: ClaimFunction) -> ClaimFunction:
    """Make ``fn`` callable from scenario files as ``fn = "<fn.name>"``."""
    if fn.name in CLAIM_FUNCTIONS:
        raise ValueError(f"claim function {fn.name!r} is already registered")
    CLAIM_FUNCTIONS[fn.name] = fn
    return fn


def _same_unit(units: Sequence[str]) -> str:
    kinds = sorted(set(units))
    if len(kinds) != 1:
        raise ValueError(f"expected metrics of one unit, found {', '.join(kinds)}")
    return kinds[0]


def _ratio_unit(units: Sequence[str]) -> str:
    _same_unit(units)
    return "ratio"


def _pooled(values: Values) -> list[float]:
    return [v for arg in values for v in arg]


def _sum(values: Values) -> float | None:
    return float(sum(_pooled(values)))


def _max(values: Values) -> float | None:
    pooled = _pooled(values)
    return max(pooled) if pooled else None


def _min(values: Values) -> float | None:
    pooled = _pooled(values)
    return min(pooled) if pooled else None


def _mean(values: Values) -> float | None:
    pooled = _pooled(values)
    return sum(pooled) / len(pooled) if pooled else None


def _count_unit(units: Sequence[str]) -> str:
    return "count"


def _count(values: Values) -> float | None:
    return float(len(_pooled(values)))


def _ratio(values: Values) -> float | None:
    a, b = (sum(arg) for arg in values)
    return a / b if b != 0 else None


for _fn in (
    ClaimFunction("sum", "the sum of every matching metric", None, _same_unit, _sum),
    ClaimFunction("max", "the largest matching value", None, _same_unit, _max),
    ClaimFunction("min", "the smallest matching value", None, _same_unit, _min),
    ClaimFunction("mean", "the mean of the matching values", None, _same_unit, _mean),
    ClaimFunction("count", "how many matching metrics have a value", None, _count_unit, _count),
    ClaimFunction("ratio", "the first metric over the second (one unit)", 2, _ratio_unit, _ratio),
):
    register_claim_function(_fn)
