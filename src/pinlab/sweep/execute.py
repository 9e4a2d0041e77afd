"""Running a sweep: points on a process pool or a Dask cluster, resumable, exactly once.

Layout of a sweep's directory (``--out``, default ``pinlab-sweeps/<name>``)::

    points/<id>.json   one finished point: its spec, its row and the metrics' units;
                       written atomically (temp + os.replace) the moment the point finishes
    results.parquet    the table: one row per point, sorted by point index, typed columns
    results.csv        the same table as CSV (floats as repr, so it round-trips)
    units.json         metric and factor column -> unit (also in the Parquet metadata)
    summary.parquet    per factor value and variant, each metric's mean, spread, min, max, n
    summary.csv        the same as CSV
    notes.json         points not replicated (deterministic runs) and warnings
    results.html       the summary with plots (written by ``pinlab sweep``)

The tables are :mod:`pinlab.sweep.table`'s.

On start the point files already there are read and their points skipped, so a sweep killed
at any moment and run again finishes the rest; since a point's file is named by its id and
the table is rebuilt from the files, every point is in the table exactly once. A point file
of an id the sweep no longer has (the sweep file was edited) is left alone and left out.

Local execution on a process pool is :mod:`pinlab.sweep.pool`'s; one point is
:mod:`pinlab.sweep.point`'s.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinlab import fsutil
from pinlab.errors import ConfigError
from pinlab.sweep.point import Configs, PointError, RunPoint, deterministic, run_one, run_point
from pinlab.sweep.pool import LocalPool
from pinlab.sweep.spec import Point, Sweep, point_error
from pinlab.sweep.table import META_COLUMNS, Analysis, build_table, write_table

__all__ = [
    "META_COLUMNS",
    "Analysis",
    "PointError",
    "SweepOutcome",
    "build_table",
    "run_point",
    "run_sweep",
    "write_table",
]

POINTS_DIR = "points"
Progress = Callable[[int, int], None]

# -- the results directory --------------------------------------------------------------------


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (:func:`pinlab.fsutil.write_atomic`)."""
    fsutil.write_atomic(path, data, make_parents=False)


def _point_file(out: Path, point_id: str) -> Path:
    return out / POINTS_DIR / f"{point_id}.json"


def save_point(out: Path, point: Point, result: dict[str, Any]) -> None:
    """Record a finished point: ``points/<id>.json``, atomically."""
    doc = {"spec": point.spec(), "row": result["row"], "units": result["units"]}
    text = json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n"
    _write_atomic(_point_file(out, point.id), text.encode())


def load_points(out: Path, sweep: Sweep) -> dict[str, dict[str, Any]]:
    """The finished points of ``sweep`` already in ``out``: id -> ``{"row", "units"}``.
    An unreadable file (never left by pinlab, which writes atomically) counts as unfinished."""
    done: dict[str, dict[str, Any]] = {}
    for point in sweep.points:
        path = _point_file(out, point.id)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("row"), dict):
            done[point.id] = {"row": doc["row"], "units": dict(doc.get("units") or {})}
    return done


# -- executors ---------------------------------------------------------------------------------


def _serial(points: list[Point], run: RunPoint) -> Iterator[tuple[Point, dict[str, Any]]]:
    configs: Configs = {}
    for point in points:
        yield point, run_one(run, point.spec(), configs)


def _dask_connect(address: str) -> tuple[Any, Any]:
    """A Dask client (and the LocalCluster behind ``"local"``); ``ConfigError`` when Dask is
    missing or the scheduler cannot be reached -- before the sweep writes anything."""
    import importlib
    import logging

    try:
        # as Any: distributed's functions carry no annotations (mypy's no-untyped-call)
        dist: Any = importlib.import_module("distributed")
    except ImportError:
        raise ConfigError(
            "--dask",
            "",
            "expected Dask distributed installed (pip install 'pinlab[dask]'), found it missing",
        ) from None
    cluster = None
    if address == "local":
        cluster = dist.LocalCluster(
            n_workers=max(1, min(2, os.cpu_count() or 1)),
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = dist.Client(cluster)
    else:
        try:
            client = dist.Client(address, timeout="20s")
        except (OSError, TimeoutError, ValueError) as e:
            raise ConfigError(
                "--dask", "", f"expected a reachable Dask scheduler, found {address!r}: {e}"
            ) from None
    return client, cluster


def _dask(
    points: list[Point], run: RunPoint, client: Any, cluster: Any
) -> Iterator[tuple[Point, dict[str, Any]]]:
    import importlib

    dist: Any = importlib.import_module("distributed")
    futures = client.map(
        run, [p.spec() for p in points], key=[f"pinlab-point-{p.id}" for p in points]
    )
    by_key = {f.key: p for f, p in zip(futures, points, strict=True)}
    try:
        for fut in dist.as_completed(futures):
            yield by_key[fut.key], fut.result()
    finally:
        client.cancel(futures)


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """What :func:`run_sweep` did: points in the sweep, already done before, run now, rows."""

    total: int
    skipped: int
    ran: int
    rows: int
    out: Path
    unreplicated: int = 0
    """Points not run because their replication would repeat a deterministic run."""
    analysis: Analysis | None = None

    @property
    def complete(self) -> bool:
        return self.rows == self.total


def _replicas(sweep: Sweep) -> dict[str, Point]:
    """Each point that replicates another (same scenario, variant, profile, factors and
    fixed values; another seed) -> the first point of its group."""
    first: dict[str, Point] = {}
    out: dict[str, Point] = {}
    for p in sweep.points:
        key = json.dumps([p.scenario_ref, p.variant, p.profile, p.factors, p.fixed], sort_keys=True)
        if key in first:
            out[p.id] = first[key]
        else:
            first[key] = p
    return out


def run_sweep(
    sweep: Sweep,
    out: str | Path,
    *,
    jobs: int | None = None,
    dask: str | None = None,
    max_points: int | None = None,
    progress: Progress | None = None,
    run: RunPoint = run_point,
) -> SweepOutcome:
    """Run every point of ``sweep`` not already finished in ``out``; record each as it
    finishes; rebuild the table.

    ``jobs`` -- process-pool size (default ``os.cpu_count()``; 1 runs in this process);
    ``dask`` -- ``"local"`` or a scheduler address instead of the pool; ``max_points`` -- run
    at most this many (the rest on the next run); ``progress(done, total)`` after each point.
    The first seed of every group of replications runs first; a group whose first run was
    deterministic (no stochastic source drew) is not replicated -- its other seeds would
    repeat it -- and ``notes.json`` says so; on a pool the other seeds run speculatively
    meanwhile, and are recorded only once the verdict is stochastic. On any failure the
    finished points stay recorded and the table is rebuilt before the error propagates."""
    out = Path(out)
    connection = _dask_connect(dask) if dask is not None else None
    created = not out.exists()
    try:
        (out / POINTS_DIR).mkdir(parents=True, exist_ok=True)
    except BaseException:
        if connection is not None:
            _close(*connection)
        raise
    done = load_points(out, sweep)
    skipped = len(done)
    replicas = _replicas(sweep)
    budget = None if max_points is None else max(0, max_points)
    total = len(sweep.points)
    ran = 0
    unreplicated: list[str] = []

    work = sum(p.id not in done for p in sweep.points)
    if budget is not None:
        work = min(work, budget)
    n_jobs = max(1, min(jobs if jobs is not None else (os.cpu_count() or 1), work))
    local = LocalPool(run, n_jobs, work, replicas) if connection is None and n_jobs > 1 else None

    def execute(todo: list[Point], speculative: Sequence[Point] = ()) -> None:
        nonlocal ran, budget
        if budget is not None:
            todo = todo[:budget]
            budget -= len(todo)
        if not todo:
            return
        if connection is not None:
            executor: Iterator[tuple[Point, dict[str, Any]]] = _dask(todo, run, *connection)
        else:
            executor = _serial(todo, run) if local is None else local.points(todo, speculative)
        try:
            for point, result in executor:
                save_point(out, point, result)
                done[point.id] = result
                ran += 1
                if progress is not None:
                    progress(skipped + ran + len(unreplicated), total)
        except PointError as e:
            raise _blamed(sweep, e) from None
        finally:
            close = getattr(executor, "close", None)
            if close is not None:
                close()

    analysis = Analysis(0)
    try:
        if progress is not None:
            progress(skipped, total)
        first_seeds = [p for p in sweep.points if p.id not in done and p.id not in replicas]
        # on a pool, the replications of these groups fill what would otherwise wait
        # (``LocalPool``); not under a budget, which the first seeds' verdicts should spend
        seeded = {p.id for p in first_seeds}
        speculative = [
            p
            for p in sweep.points
            if p.id in replicas and p.id not in done and replicas[p.id].id in seeded
        ]
        execute(first_seeds, speculative if local is not None and budget is None else ())
        later = []
        for p in sweep.points:
            first = replicas.get(p.id)
            if first is None:
                continue
            if deterministic(done.get(first.id)):
                unreplicated.append(p.id)
                done.pop(p.id, None)  # a replication of an older run of the sweep
            elif p.id not in done and first.id in done:
                later.append(p)
        if progress is not None and unreplicated:
            progress(skipped + ran + len(unreplicated), total)
        execute(later)
    finally:
        if local is not None:
            local.close()
        if connection is not None:
            _close(*connection)
        if created and not done:
            shutil.rmtree(out, ignore_errors=True)  # nothing finished: leave nothing behind
        else:
            analysis = write_table(out, sweep, done, unreplicated)
    return SweepOutcome(
        total=total - len(unreplicated),
        skipped=skipped,
        ran=ran,
        rows=analysis.rows,
        out=out,
        unreplicated=len(unreplicated),
        analysis=analysis,
    )


def _blamed(sweep: Sweep, e: PointError) -> PointError:
    """A point's configuration error that only running it found (its machine refused to
    build, say) blamed as loading blames one: on the sweep file's ``[factors]`` or ``[fixed]``
    key whose ``--set`` the scenario refused (:func:`~pinlab.sweep.spec.point_error`)."""
    if e.config is None or e.point is None:
        return e
    point = next((p for p in sweep.points if p.index == e.point), None)
    if point is None:
        return e
    blamed = point_error(sweep.source, ConfigError(*e.config), point.fixed, point.factors)
    if not blamed.where:  # no key of the file wrote it: the scenario's own error, as it was
        return e
    return PointError(f"point {e.point}: {blamed}", True, e.point, e.config)


def _close(client: Any, cluster: Any) -> None:
    client.close()
    if cluster is not None:
        cluster.close()
