"""Sweep analysis: typed factor columns, a summary grouped by factor, warnings.

A factor is written in the sweep file the way a scenario is (``"500ms"``, ``"1GiB"``,
``"drm/{gpu0}/vram 2GiB"``). In the table it keeps its type (:func:`typed_column`): sizes as
bytes (int), times as seconds, rates as bytes/s, numbers as numbers, with the unit in
``units.json``; where the written text differs from the typed value, a ``<factor>:label``
column keeps the text. Values that share a constant text before a quantity (the policy line
``"drm/{gpu0}/vram 2GiB"``) are typed by that quantity.

:func:`summarise` groups the rows by each factor's value and variant and gives, per metric,
mean, spread (sample standard deviation; 0 for one row), min, max and n.
:func:`replication_warnings` flags stochastic points whose replications came out identical
(the seed did not reach the model).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

from pinlab.units import parse_line_rate, parse_rate, parse_size, parse_time

__all__ = [
    "LABEL_SUFFIX",
    "replication_warnings",
    "summarise",
    "typed_column",
]

LABEL_SUFFIX = ":label"
"""Suffix of the column that keeps a typed factor's values as written."""

_KINDS: tuple[tuple[str, Callable[[object], Any]], ...] = (
    ("B", parse_size),
    ("s", parse_time),
    ("B/s", parse_rate),
    ("B/s", parse_line_rate),
)


def _quantity(text: str) -> tuple[Any, str] | None:
    """``text`` as a size, time or rate with a unit; None when it is none of them (a bare
    number stays the string it was written as)."""
    stripped = text.strip()
    if not stripped or not any(c.isalpha() for c in stripped):
        return None
    for unit, parse in _KINDS:
        try:
            return parse(stripped), unit
        except (ValueError, TypeError):
            continue
    return None


def typed_column(values: Sequence[Any]) -> tuple[list[Any], str, list[str | None] | None]:
    """``(typed values, unit, labels)`` of one factor's column (module docstring); labels
    is None when the values are already typed as written."""
    present = [v for v in values if v is not None]
    if not present or not all(isinstance(v, str) for v in present):
        return list(values), "", None
    texts = [str(v) for v in present]
    prefix = os.path.commonprefix(texts)  # noqa: RUF071 -- text, not paths: the shared words
    prefix = prefix[: prefix.rfind(" ") + 1] if " " in prefix else ""
    parsed = [_quantity(t[len(prefix) :]) for t in texts]
    if any(p is None for p in parsed) or len({p[1] for p in parsed if p}) != 1:
        return list(values), "", None
    unit = next(p[1] for p in parsed if p)
    it = iter(p[0] for p in parsed if p)
    typed = [None if v is None else next(it) for v in values]
    return typed, unit, [v if v is None else str(v) for v in values]


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _stats(xs: list[float]) -> dict[str, float | int]:
    n = len(xs)
    mean = math.fsum(xs) / n
    spread = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "spread": spread, "min": min(xs), "max": max(xs), "n": n}


def summarise(
    rows: Sequence[dict[str, Any]],
    factors: Sequence[str],
    metrics: Sequence[str],
    units: dict[str, str],
) -> list[dict[str, Any]]:
    """One record per (factor, factor value, variant, metric): ``factor``, ``value`` (typed),
    ``label``, ``variant``, ``metric``, ``unit``, ``mean``, ``spread``, ``min``, ``max``,
    ``n`` -- in factor order, then value order of first appearance, then variant, metric."""
    out: list[dict[str, Any]] = []
    for factor in factors:
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault((_key(row.get(factor)), str(row.get("variant"))), []).append(row)
        for (_, variant), members in groups.items():
            value = members[0].get(factor)
            label = members[0].get(factor + LABEL_SUFFIX, value)
            for metric in metrics:
                xs = [
                    float(r[metric])
                    for r in members
                    if isinstance(r.get(metric), (int, float)) and not isinstance(r[metric], bool)
                ]
                if not xs:
                    continue
                out.append(
                    {
                        "factor": factor,
                        "value": value,
                        "label": "" if label is None else str(label),
                        "variant": variant,
                        "metric": metric,
                        "unit": units.get(metric, ""),
                        **_stats(xs),
                    }
                )
    return out


def replication_warnings(
    rows: Sequence[dict[str, Any]], factors: Sequence[str], metrics: Sequence[str]
) -> list[str]:
    """One line per group of replications (same factors and variant, several seeds) of a
    stochastic run whose metrics are all identical: the seeds changed nothing."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        key = _key([row.get("variant"), *(row.get(f) for f in factors)])
        groups.setdefault(key, []).append(row)
    warnings = []
    for members in groups.values():
        if len(members) < 2 or any(r.get("deterministic") is True for r in members):
            continue
        first = [members[0].get(m) for m in metrics]
        if all([r.get(m) for m in metrics] == first for r in members[1:]):
            seeds = ", ".join(str(r.get("seed")) for r in members)
            where = ", ".join(
                f"{f} = {members[0].get(f + LABEL_SUFFIX, members[0].get(f))}" for f in factors
            )
            warnings.append(
                f"replications identical: variant {members[0].get('variant')}"
                + (f" at {where}" if where else "")
                + f", seeds {seeds}, give the same metrics although the run is stochastic"
            )
    return warnings
