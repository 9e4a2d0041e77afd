"""The error measures of ``pinlab validate`` (``validate/tables/README.md``, "Errors").

* per point, the relative error ``simulated / measured - 1`` (signed: +10 % means pinlab
  says 10 % more than was measured);
* per table, the geometric-mean error ``exp(mean(|ln(simulated / measured)|)) - 1``: the
  typical factor by which pinlab misses, over- and under-estimates counted alike, so a
  table's error does not depend on which way its column points (a time or a bandwidth);
* overall, the same geometric-mean error over every point of every table, and the
  arithmetic mean of the per-table errors (which weighs a 4-point table like a 64-point one).

A simulated value that is not a positive finite number (zero bandwidth, ``N/A``) has an
infinite error: its table fails, and so does the overall error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import fmean

__all__ = ["abs_log_ratio", "geomean_error", "mean_error", "point_error"]


def _usable(simulated: float) -> bool:
    return math.isfinite(simulated) and simulated > 0


def point_error(simulated: float, measured: float) -> float:
    """``simulated / measured - 1``; ``inf`` when ``simulated`` is not a positive number.
    ``measured`` must be positive (the loader refuses anything else)."""
    if measured <= 0 or not math.isfinite(measured):
        raise ValueError(f"expected a positive measured value, found {measured!r}")
    return simulated / measured - 1 if _usable(simulated) else math.inf


def abs_log_ratio(simulated: float, measured: float) -> float:
    """``|ln(simulated / measured)|``; ``inf`` when ``simulated`` is not a positive number."""
    if measured <= 0 or not math.isfinite(measured):
        raise ValueError(f"expected a positive measured value, found {measured!r}")
    return abs(math.log(simulated / measured)) if _usable(simulated) else math.inf


def geomean_error(pairs: Iterable[tuple[float, float]]) -> float:
    """``exp(mean(|ln(sim/meas)|)) - 1`` over (simulated, measured) pairs. Raises
    ``ValueError`` for no pairs."""
    logs = [abs_log_ratio(s, m) for s, m in pairs]
    if not logs:
        raise ValueError("expected at least one (simulated, measured) pair, found none")
    mean = fmean(logs)
    return math.inf if math.isinf(mean) else math.expm1(mean)


def mean_error(errors: Iterable[float]) -> float:
    """The arithmetic mean of per-table errors. Raises ``ValueError`` for none."""
    values = list(errors)
    if not values:
        raise ValueError("expected at least one table error, found none")
    return math.inf if any(math.isinf(v) for v in values) else fmean(values)
