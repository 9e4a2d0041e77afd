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

Local execution (``jobs`` processes) is this process and ``jobs - 1`` spawned workers taking
tasks from one queue, for the whole sweep (:class:`_Local`): a worker imports pinlab once,
when it starts, and serves every task it takes, batch after batch -- the first seeds of the
replication groups, then the other replications. This process runs the sweep's first point
(timing it), then takes tasks like a worker while recording every result, so nobody waits for
a worker and the last tasks go to whoever is free. The workers start while that first point
runs, once it has run long enough to show that the work left in the sweep is worth starting
them (more than twice :data:`WORKER_START_SECONDS`), so they import pinlab while this process
works and are ready when the next batch begins; a sweep whose work left after its first point
is less than that runs in this process alone. A task is a
*chunk* of consecutive points (which mostly share one configuration, loaded and validated
once per process for the whole sweep: :func:`run_point`'s ``configs``), sized by
:func:`chunk_sizes` to about :data:`TASK_SECONDS` of work and never more than a share of what
is left, so short points do not pay a round trip each and the last tasks still balance. A
point is recorded when its chunk comes back; a failing point ends its chunk, and the points
before it are recorded before the failure is raised.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from pinlab import fsutil
from pinlab.errors import ConfigError
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
RunPoint = Callable[[dict[str, Any]], dict[str, Any]]
Progress = Callable[[int, int], None]
Configs = dict[tuple[str, tuple[str, ...]], Any]
"""Loaded scenario configurations by (scenario, ``--set`` expressions)."""

TASK_SECONDS = 1.0
"""About how much work one pool task carries (see the module docstring)."""
WORKER_START_SECONDS = 1.5
"""About what a spawned worker takes to start and import pinlab (a 2-core machine): workers
start only for more than twice this much work left after the first point."""


class PointError(RuntimeError):
    """A point that failed; picklable (a process pool or Dask sends it back).

    ``user`` is true for a configuration problem (a :class:`ConfigError`); ``point`` is the
    failed point's index and ``config`` that error's ``(source, where, message)``, so that the
    sweep can name its own file's key (:func:`run_sweep`)."""

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


def _run_one(run: RunPoint, spec: dict[str, Any], configs: Configs) -> dict[str, Any]:
    return run_point(spec, configs=configs) if run is run_point else run(spec)


def _serial(points: list[Point], run: RunPoint) -> Iterator[tuple[Point, dict[str, Any]]]:
    configs: Configs = {}
    for point in points:
        yield point, _run_one(run, point.spec(), configs)


_WORKER_CONFIGS: Configs = {}
"""A worker's loaded configurations (a worker serves one sweep)."""

Chunk = tuple[int, RunPoint, list[dict[str, Any]]]
"""A task on the queue: its key, the point runner and the points' specs."""
Outcome = tuple[list[dict[str, Any]], PointError | None]
"""What a chunk gives back: the results of its points, and the failure that ended it."""


def _run_chunk(run: RunPoint, specs: list[dict[str, Any]], configs: Configs) -> Outcome:
    """Run ``specs`` in order: the results, and the first failure (the points before it
    still come back)."""
    done: list[dict[str, Any]] = []
    for spec in specs:
        try:
            done.append(_run_one(run, spec, configs))
        except PointError as e:
            return done, e
    return done, None


def _worker(parent: int, tasks: Any, results: Any) -> None:
    """A worker process: import what every point needs, once, then take chunks from
    ``tasks`` and put each one's outcome on ``results``, batch after batch, until the sweep
    stops it; a batch's end mark (an int, for the sweep process) is passed over. It ends
    itself when the sweep process (``parent``) is gone -- killed with SIGKILL, that one
    could not stop it -- and leaves Ctrl-C to the sweep process."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_parent(parent)
    import pinlab.scenarios.runner  # noqa: F401

    while True:
        item = tasks.get()
        if not isinstance(item, tuple):
            continue
        key, run, specs = item
        try:
            outcome = _run_chunk(run, specs, _WORKER_CONFIGS)
        except Exception as e:  # a runner other than run_point: still one line back
            outcome = ([], PointError(f"sweep worker: {type(e).__name__}: {e}"))
        results.put((key, outcome))


def _watch_parent(pid: int, interval: float = 0.5) -> None:
    """A daemon thread that ends this worker once process ``pid`` (the sweep) has gone."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(interval)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # pragma: no cover - a reused pid of another user
                os._exit(1)

    threading.Thread(target=watch, name="pinlab-sweep-watchdog", daemon=True).start()


def chunk_sizes(total: int, point_seconds: float, processes: int) -> list[int]:
    """How :func:`_local` cuts ``total`` points into tasks, in order: each about
    :data:`TASK_SECONDS` of work (``point_seconds`` per point) and at most a
    ``2 * processes``-th of the points still left, so the sizes shrink towards the end and
    the last tasks balance."""
    per_task = int(TASK_SECONDS / point_seconds) if point_seconds > 0 else total
    sizes = []
    left = total
    while left:
        n = max(1, min(per_task, math.ceil(left / (2 * processes)), left))
        sizes.append(n)
        left -= n
    return sizes


class _Local:
    """Local execution of one sweep on ``jobs`` processes -- this one and ``jobs - 1`` spawned
    workers (module docstring) -- kept across its batches (the first seeds of the replication
    groups, then the other replications), so that the workers start once, while the sweep's
    first point runs, and every later batch starts on all processes at once. ``work``: how
    many points the sweep may still run (its batches' sizes are known only batch by batch)."""

    def __init__(self, run: RunPoint, jobs: int, work: int) -> None:
        self.run = run
        self.jobs = jobs
        self.work = work
        self.pool = _Pool(jobs - 1)
        self.configs: Configs = {}
        self.seconds: float | None = None  # the sweep's first point's running time
        self.batches = 0

    def points(self, todo: list[Point]) -> Iterator[tuple[Point, dict[str, Any]]]:
        """Run ``todo``, one batch; results in the order their chunks finish."""
        if self.seconds is None:
            first, todo = todo[0], todo[1:]
            # the workers start while the first point runs, as soon as its running time shows
            # that the work left is worth starting them: they import pinlab while this works
            early = threading.Timer(
                2 * WORKER_START_SECONDS / max(1, self.work - 1), self.pool.start
            )
            early.daemon = True
            try:
                early.start()
                start = time.perf_counter()
                result = _run_one(self.run, first.spec(), self.configs)
                self.seconds = time.perf_counter() - start  # the chunk sizes need it
            finally:
                early.cancel()
                early.join()  # a start under way finishes first
            self.work -= 1
            yield first, result
        self.work -= len(todo)
        if not todo:
            return
        if not self.pool.started and self.seconds * len(todo) <= 2 * WORKER_START_SECONDS:
            for point in todo:  # less work left than starting a worker costs
                yield point, _run_one(self.run, point.spec(), self.configs)
            return
        self.batches += 1
        yield from _pooled(
            self.pool, todo, self.run, self.seconds, self.jobs, self.configs, self.batches
        )

    def close(self) -> None:
        self.pool.stop()


class _Pool:
    """The spawned workers of :func:`_local` and their two queues, made when started."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.workers: list[Any] = []
        self.tasks: Any = None
        self.results: Any = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return bool(self.workers)

    def start(self) -> None:
        import multiprocessing

        with self._lock:
            if self.workers:
                return
            # spawn: safe beside the progress bar's thread
            ctx = multiprocessing.get_context("spawn")
            self.tasks, self.results = ctx.Queue(), ctx.Queue()
            workers = [
                ctx.Process(target=_worker, args=(os.getpid(), self.tasks, self.results))
                for _ in range(self.size)
            ]
            for worker in workers:
                worker.daemon = True
                worker.start()
            self.workers = workers

    def stop(self) -> None:
        with self._lock:
            for worker in self.workers:
                if worker.is_alive():
                    worker.terminate()
            for worker in self.workers:
                worker.join(timeout=5)
            for q in (self.tasks, self.results):
                if q is not None:
                    q.cancel_join_thread()
                    q.close()


def _pooled(
    pool: _Pool,
    rest: list[Point],
    run: RunPoint,
    seconds: float,
    jobs: int,
    configs: Configs,
    batch: int,
) -> Iterator[tuple[Point, dict[str, Any]]]:
    """Batch ``batch`` of the sweep on ``pool`` and this process (:class:`_Local`). Behind
    its chunks go end marks (``batch``): the one this process meets tells it every chunk is
    taken; a worker passes them over, and a mark of an earlier batch is stale."""
    import queue

    chunks: list[list[Point]] = []
    taken = 0
    for n in chunk_sizes(len(rest), seconds, jobs):
        chunks.append(rest[taken : taken + n])
        taken += n
    pool.start()
    tasks, results, workers = pool.tasks, pool.results, pool.workers
    for key, chunk in enumerate(chunks):
        tasks.put((key, run, [p.spec() for p in chunk]))
    for _ in range(jobs):
        tasks.put(batch)  # end marks behind every chunk, so that this process meets one
    left = len(chunks)
    pulling = True  # this process takes chunks too, until it meets this batch's end mark

    def answered(key: int, outcome: Outcome) -> Iterator[tuple[Point, dict[str, Any]]]:
        done, error = outcome
        yield from zip(chunks[key], done, strict=False)
        if error is not None:
            raise error

    while left:
        try:  # what the workers finished so far
            while True:
                key, outcome = results.get_nowait()
                left -= 1
                yield from answered(key, outcome)
        except queue.Empty:
            pass
        if not left:
            break
        if pulling:
            try:
                item: Chunk | int = tasks.get(timeout=0.05)
            except queue.Empty:
                continue
            if not isinstance(item, tuple):
                pulling = item != batch  # this batch's mark: every chunk is taken
                continue
            key, _, specs = item
            for point, spec in zip(chunks[key], specs, strict=True):
                yield point, _run_one(run, spec, configs)
            left -= 1
            continue
        try:
            key, outcome = results.get(timeout=0.5)
        except queue.Empty:
            dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if dead or not any(w.is_alive() for w in workers):
                raise PointError(
                    f"a sweep worker exited (exit code {dead[0] if dead else 0}) with "
                    f"{left} task(s) unfinished"
                ) from None
            continue
        left -= 1
        yield from answered(key, outcome)


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


def _deterministic(rec: dict[str, Any] | None) -> bool:
    return rec is not None and rec["row"].get("deterministic") is True


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
    repeat it -- and ``notes.json`` says so. On any failure the finished points stay
    recorded and the table is rebuilt before the error propagates."""
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
    local = _Local(run, n_jobs, work) if connection is None and n_jobs > 1 else None

    def execute(todo: list[Point]) -> None:
        nonlocal ran, budget
        if budget is not None:
            todo = todo[:budget]
            budget -= len(todo)
        if not todo:
            return
        if connection is not None:
            executor: Iterator[tuple[Point, dict[str, Any]]] = _dask(todo, run, *connection)
        else:
            executor = _serial(todo, run) if local is None else local.points(todo)
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
        execute([p for p in sweep.points if p.id not in done and p.id not in replicas])
        later = []
        for p in sweep.points:
            first = replicas.get(p.id)
            if first is None:
                continue
            if _deterministic(done.get(first.id)):
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
