"""A sweep on ``jobs`` local processes, its first seeds' replications speculated.

Local execution is this process and ``jobs - 1`` spawned workers taking
tasks from one queue, for the whole sweep (:class:`LocalPool`): a worker imports pinlab once,
when it starts, and serves every task it takes, batch after batch -- the first seeds of the
replication groups, then the other replications. This process runs the sweep's first point
(timing it), then takes tasks like a worker while recording every result, so nobody waits for
a worker and the last tasks go to whoever is free. The workers start while that first point
runs, once it has run long enough to show that the work left in the sweep is worth starting
them (more than twice :data:`WORKER_START_SECONDS`), so they import pinlab while this process
works and are ready when the next batch begins; a sweep whose work left after its first point
is less than that runs in this process alone. The replications of the groups whose first
seeds a batch runs are *speculated* (:class:`LocalPool`): they queue behind the first
seeds, and each worker started early takes one point at once, so a replicated sweep does not
run its first point alone while the workers wait for its verdict. A task is a *chunk* of
consecutive points (which mostly share one configuration, loaded and validated once per
process for the whole sweep: :func:`~pinlab.sweep.point.run_point`'s ``configs``), sized by
:func:`chunk_sizes` to about :data:`TASK_SECONDS` of work and never more than a share of what
is left, so short points do not pay a round trip each and the last tasks still balance. A
point is recorded when its chunk comes back; a failing point ends its chunk, and the points
before it are recorded before the failure is raised.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pinlab.sweep.point import Configs, PointError, RunPoint, deterministic, run_one
from pinlab.sweep.spec import Point

__all__ = ["TASK_SECONDS", "WORKER_START_SECONDS", "LocalPool", "chunk_sizes"]

TASK_SECONDS = 1.0
"""About how much work one pool task carries (see the module docstring)."""
WORKER_START_SECONDS = 1.5
"""About what a spawned worker takes to start and import pinlab (a 2-core machine): workers
start only for more than twice this much work left after the first point."""

_WORKER_CONFIGS: Configs = {}
"""A worker's loaded configurations (a worker serves one sweep)."""

NO_GATE = -1
"""A point that runs whatever the other points give (not a speculative replication)."""
UNKNOWN, STOCHASTIC, DETERMINISTIC = 0, 1, 2
"""A replication group's verdict, from its first seed's run (:class:`LocalPool`'s gates)."""

Gated = tuple[dict[str, Any], int]
"""A point's spec and its gate: the replication group whose verdict decides whether it still
runs (:data:`NO_GATE`: it runs)."""
Chunk = tuple[int, RunPoint, list[Gated]]
"""A task on the queue: its key, the point runner and the points' gated specs."""
Outcome = tuple[list[dict[str, Any]], PointError | None]
"""What a chunk gives back: the results of its points, and the failure that ended it."""


def _run_chunk(
    run: RunPoint, specs: list[Gated], configs: Configs, gates: Sequence[int] = ()
) -> Outcome:
    """Run ``specs`` in order: the results, and the first failure (the points before it
    still come back). A point whose group's verdict in ``gates`` is deterministic ends the
    chunk unrun: a replication of a deterministic run would repeat it."""
    done: list[dict[str, Any]] = []
    for spec, gate in specs:
        if gate != NO_GATE and gates[gate] == DETERMINISTIC:
            break
        try:
            done.append(run_one(run, spec, configs))
        except PointError as e:
            return done, e
    return done, None


def _worker(parent: int, tasks: Any, results: Any, gates: Any) -> None:
    """A worker process: import what every point needs, once, then take chunks from
    ``tasks`` and put each one's outcome on ``results``, batch after batch, until the sweep
    stops it; a batch's end mark (an int, for the sweep process) is passed over. ``gates``:
    the replication groups' verdicts, shared with the sweep process (:class:`LocalPool`). It
    ends itself when the sweep process (``parent``) is gone -- killed with SIGKILL, that one
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
            outcome = _run_chunk(run, specs, _WORKER_CONFIGS, gates)
        except Exception as e:  # a runner other than run_point: still one line back
            outcome = ([], PointError(f"sweep worker: {type(e).__name__}: {e}"))
        results.put((key, outcome))


def _watch_parent(pid: int, interval: float = 0.5) -> None:
    """A daemon thread that ends this worker once process ``pid`` (the sweep) has gone."""

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
    """How :class:`LocalPool` cuts ``total`` points into tasks, in order: each about
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


Settled = PointError | dict[str, Any]
"""A point's result, or the failure that ended it."""


class LocalPool:
    """Local execution of one sweep on ``jobs`` processes -- this one and ``jobs - 1`` spawned
    workers (module docstring) -- kept across its batches (the first seeds of the replication
    groups, then the other replications), so that the workers start once, while the sweep's
    first point runs, and every later batch starts on all processes at once. ``work``: how
    many points the sweep may still run (its batches' sizes are known only batch by batch);
    ``first_of``: each replication -> the first seed of its group (``_replicas``).

    Speculation: a batch may carry the replications of its own first seeds
    (``points(todo, speculative)``). They queue behind every first seed, so they run only on
    a process that would otherwise wait -- above all while the sweep's first point runs
    alone. A group's verdict is set when its first seed's result comes back: deterministic,
    and its replications not yet begun are skipped (the workers read the verdicts from
    shared memory), those already run are dropped and those under way are not waited for;
    stochastic, and they are recorded as if the next batch had run them. Until then a
    replication's result (or failure) is held."""

    def __init__(self, run: RunPoint, jobs: int, work: int, first_of: dict[str, Point]) -> None:
        self.run = run
        self.jobs = jobs
        self.work = work
        self.group = {
            pid: i for i, pid in enumerate(dict.fromkeys(p.id for p in first_of.values()))
        }
        self.first_of = first_of
        self.verdicts = [UNKNOWN] * len(self.group)
        self.pool = _Pool(jobs - 1, self.verdicts)
        self.configs: Configs = {}
        self.seconds: float | None = None  # the sweep's first point's running time
        self.batches = 0
        self.gate: dict[str, int] = {}  # a speculative replication's id -> its group
        self.held: dict[int, list[tuple[Point, Settled]]] = {}
        self.starters: list[tuple[Point, int]] = []  # queued while the first point ran
        self.chunks: dict[int, list[tuple[Point, int]]] = {}  # queued, not yet answered
        self.next_key = 0  # a chunk's key: unique in the sweep, so a late answer is known
        self.moot = False  # a deterministic verdict was set: some chunks may be moot

    def points(
        self, todo: list[Point], speculative: Sequence[Point] = ()
    ) -> Iterator[tuple[Point, dict[str, Any]]]:
        """Run ``todo``, one batch, and of ``speculative`` (replications of groups whose
        first seeds are in ``todo``) what the verdicts leave; results in the order their
        chunks finish, a replication's once its group's verdict is stochastic."""
        plan = [(p, NO_GATE) for p in todo]
        for p in speculative:
            self.gate[p.id] = self.group[self.first_of[p.id].id]
            plan.append((p, self.gate[p.id]))
        if self.seconds is None:
            (first, _), plan = plan[0], plan[1:]
            # the workers start while the first point runs, as soon as its running time shows
            # that the work left is worth starting them: they import pinlab while this works,
            # and each takes one point of what follows (a first seed, or a speculation)
            early = threading.Timer(
                2 * WORKER_START_SECONDS / max(1, self.work - 1), self._start_early, (plan,)
            )
            early.daemon = True
            try:
                early.start()
                start = time.perf_counter()
                result = run_one(self.run, first.spec(), self.configs)
                self.seconds = time.perf_counter() - start  # the chunk sizes need it
            finally:
                early.cancel()
                early.join()  # a start under way finishes first
            self.work -= 1
            yield from self._settle(first, result)
        self.work -= len(plan)
        queued = list(self.chunks)  # the starters
        plan = plan[len(self.starters) :]
        self.starters = []
        plan = [(p, g) for p, g in plan if g == NO_GATE or self.verdicts[g] != DETERMINISTIC]
        if not queued and not plan:
            return
        if not self.pool.started and self.seconds * len(plan) <= 2 * WORKER_START_SECONDS:
            for point, gate in plan:  # less work left than starting a worker costs
                if gate == NO_GATE or self.verdicts[gate] != DETERMINISTIC:
                    yield from self._settle(point, self._run_here(point, gate))
            return
        self.batches += 1
        yield from self._pooled(queued, plan)

    def _start_early(self, plan: list[tuple[Point, int]]) -> None:
        self.pool.start()
        self.starters = plan[: self.pool.size]
        for item in self.starters:
            self._put([item])

    def _put(self, chunk: list[tuple[Point, int]]) -> int:
        """Queue ``chunk`` under a new key; the key."""
        key, self.next_key = self.next_key, self.next_key + 1
        self.chunks[key] = chunk
        self.pool.tasks.put((key, self.run, [(p.spec(), g) for p, g in chunk]))
        return key

    def _drop_moot(self, pending: set[int]) -> None:
        """Stop waiting for the chunks whose every point is a replication of a deterministic
        group: what they give would be dropped (a worker still running one finishes it and
        its answer, which may come in a later batch, is passed over by its key)."""
        if not self.moot:
            return
        self.moot = False
        for key in [k for k in pending if all(self._is_moot(g) for _, g in self.chunks[k])]:
            pending.discard(key)
            del self.chunks[key]

    def _is_moot(self, gate: int) -> bool:
        return gate != NO_GATE and self.verdicts[gate] == DETERMINISTIC

    def _run_here(self, point: Point, gate: int) -> Settled:
        """Run ``point`` in this process; a speculative one's failure is a result to settle."""
        try:
            return run_one(self.run, point.spec(), self.configs)
        except PointError as e:
            if gate == NO_GATE:
                raise
            return e

    def _settle(self, point: Point, result: Settled) -> Iterator[tuple[Point, dict[str, Any]]]:
        """Pass on what ``point`` gave, once it counts: a first seed's result sets its
        group's verdict and releases (stochastic) or drops (deterministic) the replications
        held for it; a speculative replication is held, passed on or dropped by its group's
        verdict; a failure that counts is raised."""
        group = self.group.get(point.id)
        if group is not None and not isinstance(result, PointError):
            verdict = DETERMINISTIC if deterministic(result) else STOCHASTIC
            self.verdicts[group] = verdict
            self.moot = self.moot or verdict == DETERMINISTIC
            if self.pool.gates is not None:
                self.pool.gates[group] = verdict
            yield point, result
            for held_point, held in self.held.pop(group, []):
                if verdict == STOCHASTIC:
                    yield from self._settle(held_point, held)
            return
        gate = self.gate.get(point.id, NO_GATE)
        verdict = STOCHASTIC if gate == NO_GATE else self.verdicts[gate]
        if verdict == UNKNOWN:
            self.held.setdefault(gate, []).append((point, result))
        elif verdict == STOCHASTIC:
            if isinstance(result, PointError):
                raise result
            yield point, result

    def _pooled(
        self, queued: list[int], rest: list[tuple[Point, int]]
    ) -> Iterator[tuple[Point, dict[str, Any]]]:
        """This batch on the pool and this process. ``queued``: the keys of the chunks already
        on the queue (the starters); ``rest`` is cut by :func:`chunk_sizes`. Behind the
        chunks go end marks (the batch's number): the one this process meets tells it every
        chunk is taken; a worker passes them over, and a mark of an earlier batch is stale.
        A chunk made moot by a deterministic verdict is not waited for (:meth:`_drop_moot`)."""
        import queue

        pool, batch = self.pool, self.batches
        pool.start()
        pending = set(queued)
        taken = 0
        for n in chunk_sizes(len(rest), self.seconds or 0.0, self.jobs):
            pending.add(self._put(rest[taken : taken + n]))
            taken += n
        tasks, results, workers = pool.tasks, pool.results, pool.workers
        for _ in range(self.jobs):
            tasks.put(batch)  # end marks behind every chunk, so that this process meets one
        pulling = True  # this process takes chunks too, until it meets this batch's end mark

        def answered(key: int, outcome: Outcome) -> Iterator[tuple[Point, dict[str, Any]]]:
            if key not in pending:
                return  # a moot chunk's late answer
            pending.discard(key)
            chunk = self.chunks.pop(key)
            done, error = outcome
            for (point, _), result in zip(chunk, done, strict=False):
                yield from self._settle(point, result)
            if error is not None:  # it ended the chunk at its first point not done
                yield from self._settle(chunk[min(len(done), len(chunk) - 1)][0], error)

        self._drop_moot(pending)
        while pending:
            try:  # what the workers finished so far
                while True:
                    key, outcome = results.get_nowait()
                    yield from answered(key, outcome)
                    self._drop_moot(pending)
            except queue.Empty:
                pass
            if not pending:
                break
            if pulling:
                try:
                    item: Chunk | int = tasks.get(timeout=0.05)
                except queue.Empty:
                    continue
                if not isinstance(item, tuple):
                    pulling = item != batch  # this batch's mark: every chunk is taken
                    continue
                key = item[0]
                if key not in pending:
                    continue  # moot
                pending.discard(key)
                for point, gate in self.chunks.pop(key):
                    if self._is_moot(gate):
                        break
                    settled = self._run_here(point, gate)
                    yield from self._settle(point, settled)
                    if isinstance(settled, PointError):
                        break  # a failure ends its chunk, as on a worker
                self._drop_moot(pending)
                continue
            try:
                key, outcome = results.get(timeout=0.5)
            except queue.Empty:
                dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
                if dead or not any(w.is_alive() for w in workers):
                    raise PointError(
                        f"a sweep worker exited (exit code {dead[0] if dead else 0}) with "
                        f"{len(pending)} task(s) unfinished"
                    ) from None
                continue
            yield from answered(key, outcome)
            self._drop_moot(pending)

    def close(self) -> None:
        self.pool.stop()


class _Pool:
    """The spawned workers of :class:`LocalPool`, their two queues and the replication groups'
    verdicts in shared memory (``gates``, from ``verdicts`` as they are at the start), made
    when started."""

    def __init__(self, size: int, verdicts: list[int]) -> None:
        self.size = size
        self.verdicts = verdicts
        self.workers: list[Any] = []
        self.tasks: Any = None
        self.results: Any = None
        self.gates: Any = None
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
            self.gates = ctx.RawArray("b", self.verdicts or [UNKNOWN])
            workers = [
                ctx.Process(
                    target=_worker, args=(os.getpid(), self.tasks, self.results, self.gates)
                )
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
