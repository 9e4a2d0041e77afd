"""The cyclic garbage collector's settings while a long-lived heap is built, run or written out:
a simulation, then its run directory and its report (the ground floor: any layer may use it).

Why a simulation tunes the collector. CPython's cyclic collector runs a young collection every
700 net container allocations, and a full one whenever the objects promoted since the last full
collection exceed a quarter of those that survived it; a full collection traverses every
tracked object. A simulation's heap is almost all long-lived: the platform, its kernels,
drivers, buffers, registrations and the flow network are built before the run and live to its
end, and the run adds more of the same (registrations, a ring step's transfers). Reference
cycles to reclaim are rare -- none at all were found in the 3-iteration all-reduce of
``cluster-128`` at 8 192 accelerators (``gc.callbacks``: 0 objects collected in ~2 600
collections) -- so the collector's work there is traversing live objects, again and again, and
it grew with the platform: about half the wall time of a run at 4 096 and more accelerators,
most of it full collections during ``env.run`` that each took ~0.5 s at 8 192 accelerators.
Writing a run's files and rendering its report is the same pattern: many short-lived objects
(CSV and JSON rows, matplotlib artists, template output) next to the results, which live on.
Over the six built-in scenarios, full collections re-walking those results took 0.23 of 1.1 s
of writing the run directories and 0.26 of 1.6 s of rendering the reports; with the results
frozen, 0.03 and 0.04 s (``report.output.write_run``, ``report.html.run_report_files`` and
``render_suite_html`` run under :func:`frozen_heap`).

What :func:`tuned_collector` does, for the ``with`` block only:

1. It *freezes* what exists at entry (``gc.freeze``: O(1), the objects move to the permanent
   generation), so no collection inside the block traverses the platform built before it --
   unless something else had frozen objects already (a program that froze its own heap before
   forking keeps that; nothing is frozen or unfrozen then). A block nested in one that froze
   freezes again, taking in what was built since: ``run_variant``'s block is entered before
   the build, ``Simulation.run``'s after it.
2. It raises the young generation's threshold (never lowers it) to about the number of
   frozen objects (:func:`_heap_size`, an O(1) estimate), at least :data:`YOUNG_THRESHOLD`: a
   young collection once the tracked objects grew by about as many as are frozen. Most of a
   run's allocations die by reference count within one event, so fewer, larger young
   collections promote far fewer objects, and full collections, which the promotions
   trigger, become rare. The threshold scales with the heap because a
   young collection costs more on a larger platform (a ring step's transfer lists hold every
   rank, and traversing them touches every rank's objects): with a fixed 100 000 their total
   still grew faster than the platform (6 % of the CPU time at 2 048 accelerators, 22 % at
   16 384; in proportion 7 % there), as their number grows with it. Freezing alone does
   not do it: the small unfrozen remainder makes the quarter rule fire more often, while the
   run's own long-lived allocations keep each full collection expensive. A block that builds
   the heap up itself keeps the threshold in step with :func:`retune` (``Simulation`` builds
   a cluster node by node and retunes each time the node count doubles: at 32 768
   accelerators 17 young collections instead of 35 young and 2 middle-generation ones).

A nested block hands back to the block around it in step with the heap as it is on exit,
not as it was when the outer block began: what the nested block built is frozen too and the
outer young threshold is raised to the heap (:func:`retune`). The results a run produces
(series points, trace slices, ~18 KiB per accelerator of the 3-iteration all-reduce of
``cluster-128``) live on as long as the platform does, and what follows the run in the outer
block -- collecting the metrics, the teardown -- allocates far less than the heap. With the
outer's threshold restored as it was at its entry (taken before the platform existed: 100 000)
the metrics of 65 536 accelerators took 11 young collections and one middle-generation
collection that traversed everything the run's three young collections had promoted: 1.8 of
its 5.7 s of CPU time; at 32 768 accelerators the count stayed below ten young collections and
no such collection ran, at 131 072 two did (4.1 of 12.1 s). In step, none.

Collection still runs: cyclic garbage made inside the block is reclaimed at the next young
collection, once the tracked objects grew by at most as many as are frozen (in proportion to
the heap, as CPython's own rule for full collections is, there by a quarter). On exit -- an
exception included -- the thresholds are restored and what the outermost block froze is
unfrozen, so the setting never leaks out of the run. With automatic collection disabled
(``gc.disable()``) it changes nothing.

Results cannot depend on it: no model object has a finaliser or a weak reference whose timing
could show through (``tests/test_gcpolicy.py`` runs a scenario under the tuned collector
and under collections at every few allocations and compares every metric, series point and
event).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "freeze_for_exit", "frozen_heap", "retune", "tuned_collector"]

YOUNG_THRESHOLD = 100_000
"""The least number of net container allocations between young collections inside
:func:`tuned_collector` (CPython's default is 700); with a larger heap frozen, that many."""

_owned = False  # whether an open block of this module froze the heap (and will unfreeze it)

_TRACKED_PER_BLOCK = 3
"""pymalloc blocks per object the collector tracks, about (0.25-0.44 tracked objects per block
measured over the built-in scenarios and clusters of 64 nodes)."""


def _heap_size() -> int:
    """About how many objects the collector tracks, in O(1): pymalloc's allocated blocks
    (``sys.getallocatedblocks``) over :data:`_TRACKED_PER_BLOCK`. Counting the frozen objects
    exactly (``gc.get_freeze_count``) walks all of them -- ~13 ms per 200 000 -- and a block
    is entered several times per run: over the built-in suite that count was 13 % of
    ``pinlab run``'s time, more once a report had loaded matplotlib's objects."""
    return sys.getallocatedblocks() // _TRACKED_PER_BLOCK


@contextmanager
def tuned_collector() -> Iterator[None]:
    """Freeze the heap and raise the young collection threshold for the block (module
    docstring); restore both on exit, exceptions included."""
    global _owned
    if not gc.isenabled():
        yield
        return
    thresholds = gc.get_threshold()
    owner = not _owned and gc.get_freeze_count() == 0
    if owner or _owned:
        gc.freeze()  # a nested block freezes what the outer one built since (the run's platform)
        _owned = True
    young = thresholds[0]
    if young:  # 0 disables automatic collection: leave it so
        young = max(young, YOUNG_THRESHOLD, _heap_size())
        gc.set_threshold(young, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if owner:
            _owned = False
            gc.unfreeze()
        else:
            retune()  # the outer block's heap grew by what this one built: keep it in step


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze what exists at entry for the block, the thresholds left as they are; unfreeze on
    exit, exceptions included. For writing results out (module docstring): the block allocates
    only what it writes, which dies by reference count, so CPython's own thresholds suit it --
    :func:`tuned_collector`'s raised one measured slower there (young collections of a few
    hundred thousand objects, and one count of the frozen heap per block). Inside a block of
    this module, or when something else froze objects, it changes nothing."""
    global _owned
    if _owned or not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    _owned = True
    try:
        yield
    finally:
        _owned = False
        gc.unfreeze()


def retune() -> None:
    """Inside a :func:`tuned_collector` block that froze the heap: freeze what was built since
    and raise the young threshold to about the frozen count (:func:`_heap_size`). For a block
    that builds a large heap step by step (a cluster, node by node), whose threshold set at
    entry falls behind as the heap grows; called as the heap doubles. The block's exit restores
    the threshold and unfreezes, as for its own setting."""
    if not _owned or not gc.isenabled():
        return
    young, *older = gc.get_threshold()
    if young:
        gc.freeze()
        gc.set_threshold(max(young, _heap_size()), *older)


def freeze_for_exit() -> None:
    """Freeze the whole heap for the interpreter's exit (a process about to end only: the
    collector stays off the heap from here on).

    Finalising, CPython runs one full collection, which traverses every tracked object: the
    run results the command line still holds, whose collection reclaims nothing. After a
    ``pinlab run`` of ``cluster-128`` at 4 096 nodes (32 768 accelerators) the process took
    7.8 s from its last output to its end, 0.1 s with the heap frozen (``gc.freeze``: O(1)).
    Files are closed and flushed by then (the commands write through ``with`` blocks), and
    ``atexit`` handlers and ``weakref.finalize`` callbacks still run."""
    gc.freeze()
