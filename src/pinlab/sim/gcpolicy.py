"""The cyclic garbage collector's settings while a simulation is built and run.

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

What :func:`tuned_collector` does, for the ``with`` block only:

1. It *freezes* what exists at entry (``gc.freeze``: O(1), the objects move to the permanent
   generation), so no collection inside the block traverses the platform built before it --
   unless something had frozen objects already (a program that froze its own heap before
   forking keeps that; nothing is frozen or unfrozen then).
2. It raises the young generation's threshold to :data:`YOUNG_THRESHOLD` (never lowers it):
   most of a run's allocations die by reference count within one event, so fewer, larger
   young collections promote far fewer objects, and full collections, which the promotions
   trigger, become rare. Freezing alone does not do it: the small unfrozen remainder makes the
   quarter rule fire more often, while the run's own long-lived allocations keep each full
   collection expensive.

Collection still runs: cyclic garbage made inside the block is reclaimed at the next young
collection, at most :data:`YOUNG_THRESHOLD` container allocations later (a bound independent of
the platform's size, some MiB at worst). On exit -- an exception included -- the thresholds are
restored and what the block froze is unfrozen, so the setting never leaks out of the run. The
block is re-entrant: an inner use (``Simulation.run`` inside a runner's variant) changes
nothing. With automatic collection disabled (``gc.disable()``) it changes nothing either.

Results cannot depend on it: no model object has a finaliser or a weak reference whose timing
could show through (``tests/sim/test_gcpolicy.py`` runs a scenario under the tuned collector
and under collections at every few allocations and compares every metric).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "tuned_collector"]

YOUNG_THRESHOLD = 100_000
"""Net container allocations between young collections inside :func:`tuned_collector`
(CPython's default is 700). At 8 192 accelerators 20 000 already removed every full collection
of the run; 100 000 also halves the young collections' own cost, and stays a small bound on
uncollected cyclic garbage."""

_depth = 0  # how many tuned_collector blocks are open (the settings are the process's)


@contextmanager
def tuned_collector() -> Iterator[None]:
    """Freeze the heap and raise the young collection threshold for the block (module
    docstring); restore both on exit, exceptions included."""
    global _depth
    if _depth or not gc.isenabled():
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    thresholds = gc.get_threshold()
    froze = gc.get_freeze_count() == 0
    if froze:
        gc.freeze()
    young = thresholds[0]
    if young:  # 0 disables automatic collection: leave it so
        gc.set_threshold(max(young, YOUNG_THRESHOLD), *thresholds[1:])
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        gc.set_threshold(*thresholds)
        if froze:
            gc.unfreeze()
