"""One point of a sweep: run it (:func:`run_point`), and what a failure carries back
(:class:`PointError`) -- the unit every executor (this process, the pool, Dask) runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fnmatch import fnmatchcase
from typing import Any

from pinlab.errors import ConfigError

__all__ = ["Configs", "PointError", "RunPoint", "deterministic", "run_one", "run_point"]

RunPoint = Callable[[dict[str, Any]], dict[str, Any]]
Configs = dict[tuple[str, tuple[str, ...]], Any]
"""Loaded scenario configurations by (scenario, ``--set`` expressions)."""


class PointError(RuntimeError):
    """A point that failed; picklable (a process pool or Dask sends it back).

    ``user`` is true for a configuration problem (a :class:`ConfigError`); ``point`` is the
    failed point's index and ``config`` that error's ``(source, where, message)``, so that the
    sweep can name its own file's key (:func:`~pinlab.sweep.execute.run_sweep`)."""

    def __init__(
        self,
        message: str,
        user: bool = False,
        point: int | None = None,
        config: tuple[str, str, str] | None = None,
    ) -> None:
        super().__init__(message, user, point, config)
        self.message = message
        self.user = user
        self.point = point
        self.config = config

    def __str__(self) -> str:
        return self.message


def _select(names: Iterable[str], patterns: Sequence[str] | None) -> list[str]:
    if patterns is None:
        return sorted(names)
    return sorted(n for n in names if any(fnmatchcase(n, p) for p in patterns))


def run_point(spec: dict[str, Any], *, configs: Configs | None = None) -> dict[str, Any]:
    """Run one point (a :meth:`~pinlab.sweep.spec.Point.spec`): load the scenario with the
    point's ``--set`` overrides, run its variant under its profile and seed.

    Returns ``{"row": {...}, "units": {metric: unit}}``: the row has the meta columns, the
    factor values and the selected metrics' values. Pure and picklable; a failure is raised as
    :class:`PointError`. ``configs`` keeps loaded configurations for the points that follow
    (the points of one sweep that share factor values share one): loading validates every
    variant of the scenario, running a point resolves only its own."""
    from pinlab.scenarios.config import load_scenario
    from pinlab.scenarios.runner import run_variant

    try:
        key = (spec["scenario_ref"], tuple(spec["sets"]))
        cfg = configs.get(key) if configs is not None else None
        if cfg is None:
            cfg = load_scenario(spec["scenario_ref"], sets=spec["sets"])
            if configs is not None:
                configs[key] = cfg
        result = run_variant(cfg, spec["variant"], profile=spec["profile"], seed=spec["seed"])
    except ConfigError as e:
        config = (e.source, e.where, e.message)
        raise PointError(f"point {spec['index']}: {e}", True, spec["index"], config) from None
    except Exception as e:  # a model bug: still one picklable line, the point named
        raise PointError(f"point {spec['index']}: {type(e).__name__}: {e}") from None
    names = _select(result.metrics, spec["metrics"])
    row: dict[str, Any] = {
        "point": spec["index"],
        "point_id": spec["id"],
        "scenario": result.scenario,
        "variant": result.variant,
        "profile": result.profile,
        "seed": result.seed,
        "deterministic": result.deterministic,
    }
    row.update(spec["factors"])
    row.update({n: result.metrics[n].value for n in names})
    return {"row": row, "units": {n: result.metrics[n].unit for n in names}}


def run_one(run: RunPoint, spec: dict[str, Any], configs: Configs) -> dict[str, Any]:
    """``run`` on ``spec``; :func:`run_point` keeps its configurations in ``configs``."""
    return run_point(spec, configs=configs) if run is run_point else run(spec)


def deterministic(rec: dict[str, Any] | None) -> bool:
    """A finished point (``{"row", ...}``) whose run drew no random number."""
    return rec is not None and rec["row"].get("deterministic") is True
