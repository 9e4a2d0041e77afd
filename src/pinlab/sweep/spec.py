"""Sweep files: factors over scenario fields, seeds and replications, expanded into points.

A sweep file is TOML::

    [sweep]
    name = "pin-cap"                  # default: the file's stem
    scenario = "desktop-pin-hog"      # a built-in name or a path relative to this file
    variants = ["none", "dmem-pin-max"]   # default: every variant of the scenario
    profile = "6.16"                  # optional kernel profile for every point
    seeds = [1, 2]                    # or: replications = 2 and seed = 1 (seeds 1, 2)
    mode = "cartesian"                # or "zip": the factors' i-th values go together
    metrics = ["tenant.hog.*", "global.denials"]   # names or fnmatch patterns; default all

    [fixed]                           # overrides shared by every point (``--set`` paths)
    "scenario.duration" = "20s"

    [factors]                         # ``--set`` path -> the values it takes
    "scenario.sample_interval" = ["100ms", "1s"]

A **point** is one combination of factor values, one variant and one seed; its ``id`` is the
sha256 of the canonical JSON of that combination (with the scenario as written), so it does
not depend on where the file lives or on the order the points run in; its ``index`` is its
place in the expansion (factor combinations in file order, then variants, then seeds).

Every problem is one :class:`~pinlab.errors.ConfigError` line naming the sweep file
and the field, found before any point runs: seeds are integers in 0 … :data:`SEED_MAX`, and a
sweep has at most :data:`MAX_POINTS` points (counted before they are expanded).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pinlab.errors import ConfigError, config_error, show_value, toml_inline, toml_path
from pinlab.scenarios.config import BUILTIN, ScenarioConfig, load_scenario
from pinlab.scenarios.fields import SEED_MAX, Name, Seed, check_name
from pinlab.scenarios.paths import parse_path
from pinlab.tomlfile import read_toml

__all__ = ["MAX_POINTS", "SEED_MAX", "Point", "Sweep", "SweepFile", "load_sweep", "point_error"]

MAX_POINTS = 100_000
"""The most points a sweep may expand to; a larger one is refused before it is expanded."""


class SweepSection(BaseModel):
    """The ``[sweep]`` table."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: Name | None = None
    scenario: str
    variants: list[str] | None = None
    profile: str | None = None
    seeds: list[Seed] | None = None
    replications: Annotated[StrictInt, Field(ge=1, le=MAX_POINTS)] | None = None
    seed: Seed | None = None
    mode: Literal["cartesian", "zip"] = "cartesian"
    metrics: list[str] | None = None

    @field_validator("seeds", "variants")
    @classmethod
    def _distinct(cls, values: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
        if values is not None and (not values or len(set(values)) != len(values)):
            what = info.field_name or ""
            raise ValueError(f"expected one or more distinct {what}, found {show_value(values)}")
        return values

    @model_validator(mode="after")
    def _seeds(self) -> SweepSection:
        if self.seeds is not None and (self.replications is not None or self.seed is not None):
            raise ValueError("expected either seeds or replications (with seed), found both")
        if self.seed is not None and self.replications is None:
            raise ValueError("expected replications = N beside seed, found seed alone")
        if self.seed is not None and self.replications is not None:
            last = self.seed + self.replications - 1
            if last > SEED_MAX:
                raise ValueError(
                    f"expected seeds up to {SEED_MAX} (seed + replications - 1), found {last}"
                )
        return self


class SweepFile(BaseModel):
    """A whole sweep file: ``[sweep]``, ``[fixed]`` and ``[factors]``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    sweep: SweepSection
    fixed: dict[str, Any] = Field(default_factory=dict)
    factors: dict[str, list[Any]] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Point:
    """One run of a sweep: factor values (path -> value), a variant and a seed (``None``:
    the scenario's own). ``spec()`` is what :func:`pinlab.sweep.point.run_point` takes.
    ``id`` is derived from what the point runs (:func:`point_id`)."""

    index: int
    id: str = field(init=False)
    variant: str
    seed: int | None
    factors: dict[str, Any]
    scenario: str  # as written in the sweep file (part of the id)
    scenario_ref: str  # what load_scenario is given: a built-in name or an absolute path
    profile: str | None
    fixed: dict[str, Any] = field(default_factory=dict)
    metrics: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        pid = point_id(
            self.scenario, self.variant, self.seed, self.profile, self.factors, self.fixed
        )
        object.__setattr__(self, "id", pid)

    def sets(self) -> list[str]:
        """The ``--set`` expressions of this point: the fixed overrides, then the factors."""
        return [f"{k}={toml_inline(v)}" for k, v in (*self.fixed.items(), *self.factors.items())]

    def spec(self) -> dict[str, Any]:
        """A picklable, JSON-able description of the point: its fields and its ``sets``."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["factors"], out["fixed"] = dict(self.factors), dict(self.fixed)
        out["metrics"] = list(self.metrics) if self.metrics is not None else None
        out["sets"] = self.sets()
        return out


@dataclass(frozen=True, slots=True)
class Sweep:
    """A validated sweep: its name, source file, factor columns and expanded points."""

    name: str
    source: str
    factor_names: tuple[str, ...]
    points: tuple[Point, ...]
    metrics: tuple[str, ...] | None


def point_id(
    scenario: str,
    variant: str,
    seed: int | None,
    profile: str | None,
    factors: dict[str, Any],
    fixed: dict[str, Any],
) -> str:
    """sha256 of the canonical JSON of a point."""
    doc = {
        "scenario": scenario,
        "variant": variant,
        "seed": seed,
        "profile": profile,
        "factors": factors,
        "fixed": fixed,
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _read(path: str | Path) -> dict[str, Any]:
    return read_toml(path, what="a sweep file")


def point_error(
    source: str, e: ConfigError, fixed: dict[str, Any], combo: dict[str, Any]
) -> ConfigError:
    """A point's scenario error, blamed on the sweep file: on the ``[fixed]`` or
    ``[factors]`` key whose value the scenario refused (each reaches the scenario as a
    ``--set``), with the point's factor values unless it is a fixed key's."""
    at = ", ".join(f"{k} = {toml_inline(v)}" for k, v in combo.items())
    point = f" (at the point {at})" if combo else ""
    for table, values in (("factors", combo), ("fixed", fixed)):
        for key, value in values.items():
            if e.source == f"--set {key}={toml_inline(value)}":
                inner = f"{e.where}: {e.message}" if e.where else e.message
                suffix = point if table == "factors" else ""
                return ConfigError(source, toml_path((table, key)), inner + suffix)
    return ConfigError(source, "", str(e) + point)


def _check_paths(source: str, table: str, paths: list[str]) -> None:
    for key in paths:
        try:
            parse_path(key)
        except ValueError as e:
            raise ConfigError(source, toml_path((table, key)), str(e)) from None


def _leaves(path: tuple[str, ...], value: Any) -> Iterator[tuple[str, ...]]:
    """The paths of the values a fixed ``value`` sets (a table merges, key by key)."""
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            yield from _leaves((*path, str(key)), sub)
    else:
        yield path


def _check_disjoint(source: str, fixed: dict[str, Any], factors: list[str]) -> None:
    """A key is fixed or varied, not both: a point's factor value would always replace the
    fixed one, which then means nothing."""
    varied = {tuple(parse_path(key)): key for key in factors}
    for key, value in fixed.items():
        for leaf in _leaves(tuple(parse_path(key)), value):
            other = varied.get(leaf)
            if other is not None:
                raise ConfigError(
                    source,
                    toml_path(("fixed", *leaf)),
                    f"expected a key that is not also a factor, found it in [factors] as {other!r}",
                )


def _check_size(
    source: str, mode: str, factors: dict[str, list[Any]], variants: int, seeds: int
) -> None:
    """Refuse a sweep of more than :data:`MAX_POINTS` points before expanding it."""
    lengths = [len(v) for v in factors.values()]
    combos = (max(lengths, default=1) if mode == "zip" else math.prod(lengths)) if lengths else 1
    n = combos * variants * seeds
    if n > MAX_POINTS:
        raise ConfigError(
            source,
            "factors",
            f"expected at most {MAX_POINTS} points, found {n} ({combos} factor combinations x "
            f"{variants} variants x {seeds} seeds)",
        )


def _combinations(source: str, mode: str, factors: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = list(factors)
    for name, values in factors.items():
        if not values:
            raise ConfigError(
                source, toml_path(("factors", name)), "expected at least one value, found []"
            )
    if mode == "zip":
        lengths = {len(v) for v in factors.values()}
        if len(lengths) > 1:
            found = ", ".join(f"{n}: {len(v)}" for n, v in factors.items())
            raise ConfigError(
                source, "factors", f"expected lists of one length in zip mode, found {found}"
            )
        rows: Iterable[tuple[Any, ...]] = zip(*factors.values(), strict=True)
    else:
        rows = itertools.product(*factors.values())
    return [dict(zip(names, row, strict=True)) for row in rows]


def _check_metrics(
    source: str, patterns: list[str], cfg: ScenarioConfig, variants: list[str]
) -> None:
    """Every ``sweep.metrics`` entry must name (or, as an fnmatch pattern, match) a metric
    some swept variant can report; else one line naming the known ones."""
    for i, pattern in enumerate(patterns):
        catalogs = [cfg.catalog(v) for v in variants]
        if any(
            c.matching(pattern) if set("*?[") & set(pattern) else c.lookup(pattern)
            for c in catalogs
        ):
            continue
        raise ConfigError(
            source,
            f"sweep.metrics[{i}]",
            catalogs[0].unknown(pattern, f"of {cfg.name} variant {variants[0]}"),
        )


def load_sweep(path: str | Path, *, validate_points: bool = True) -> Sweep:
    """Read, validate and expand a sweep file. Every scenario configuration the sweep will run
    is loaded (and so validated) now, and so are the metric names; the first problem is one
    :class:`ConfigError` line.

    With ``validate_points=False`` (``pinlab sweep --dry-run``) only the first combination is
    loaded -- enough to know the variants and the metrics -- so that listing a sweep of
    :data:`MAX_POINTS` points takes moments; the run validates them all before its first
    point."""
    data = _read(path)  # before Path(): Path("") is the current directory
    path = Path(path)
    source = str(path)
    try:
        doc = SweepFile.model_validate(data)
    except ValidationError as e:
        raise config_error(e, source, model=SweepFile) from None
    sec = doc.sweep
    _check_paths(source, "fixed", list(doc.fixed))
    _check_paths(source, "factors", list(doc.factors))
    _check_disjoint(source, dict(doc.fixed), list(doc.factors))
    if sec.scenario in BUILTIN:
        ref = sec.scenario
    else:
        ref = str((path.parent / sec.scenario).resolve())
        if not Path(ref).is_file():
            raise ConfigError(
                source,
                "sweep.scenario",
                f"expected a built-in scenario ({', '.join(BUILTIN)}) or a file relative to "
                f"the sweep file, found {show_value(sec.scenario)}",
            )
    if sec.profile is not None:
        from pinlab.kernel.profile import PRESETS

        if sec.profile not in PRESETS:
            raise ConfigError(
                source,
                "sweep.profile",
                f"expected a kernel profile ({', '.join(PRESETS)}), "
                f"found {show_value(sec.profile)}",
            )
    seeds: list[int | None]
    if sec.seeds is not None:
        seeds = list(sec.seeds)
    elif sec.replications is not None:
        base = sec.seed if sec.seed is not None else 1
        seeds = list(range(base, base + sec.replications))
    else:
        seeds = [None]
    _check_size(source, sec.mode, doc.factors, 1, len(seeds))
    combos = _combinations(source, sec.mode, doc.factors)
    fixed = dict(doc.fixed)
    variants: list[str] | None = None
    for combo in combos if validate_points else combos[:1]:
        sets = [f"{k}={toml_inline(v)}" for k, v in (*fixed.items(), *combo.items())]
        try:
            cfg: ScenarioConfig = load_scenario(ref, sets=sets)
        except ConfigError as e:
            raise point_error(source, e, fixed, combo) from None
        if variants is None:
            variants = list(sec.variants) if sec.variants is not None else cfg.variants
            for v in variants:
                if v not in cfg.variants:
                    raise ConfigError(
                        source,
                        "sweep.variants",
                        f"expected variants of {sec.scenario} ({', '.join(cfg.variants)}), "
                        f"found {show_value(v)}",
                    )
            _check_size(source, sec.mode, doc.factors, len(variants), len(seeds))
            _check_metrics(source, sec.metrics or [], cfg, variants)
    assert variants is not None
    metrics = tuple(sec.metrics) if sec.metrics is not None else None
    points: list[Point] = []
    for combo in combos:
        for variant in variants:
            for seed in seeds:
                points.append(
                    Point(
                        index=len(points),
                        variant=variant,
                        seed=seed,
                        factors=dict(combo),
                        scenario=sec.scenario,
                        scenario_ref=ref,
                        profile=sec.profile,
                        fixed=fixed,
                        metrics=metrics,
                    )
                )
    seen: dict[str, int] = {}
    for p in points:
        if p.id in seen:
            raise ConfigError(
                source,
                "factors",
                f"expected distinct points, found point {p.index} equal to point {seen[p.id]} "
                f"({show_value(p.factors)}, {p.variant}, seed {p.seed})",
            )
        seen[p.id] = p.index
    name = sec.name or path.stem
    if sec.name is None:
        check_name(name, source, "sweep.name (default: the file's stem)")
    return Sweep(
        name=name,
        source=source,
        factor_names=tuple(doc.factors),
        points=tuple(points),
        metrics=metrics,
    )
