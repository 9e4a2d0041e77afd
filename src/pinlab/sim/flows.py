"""Flow-level bandwidth sharing: concurrent transfers share links max-min fairly.

A *transfer* moves ``nbytes`` over a path of links (``cost-model.md`` §1 item 1). While several
transfers are active, each gets the max-min fair rate: the largest rate vector in which no transfer
can go faster without slowing a transfer whose rate is smaller or equal. It is the result of
*progressive filling*: raise every rate together; when a link saturates, freeze the transfers
crossing it and go on with the others. A path may cross a link more than once (a staged transfer
crosses host DRAM twice, ``cost-model.md`` §1 item 5) and then consumes that many times its rate
there. A transfer's own rate cap (a NIC's message rate, a copy engine's speed) acts as, and is
solved as, a private link of capacity ``cap`` that only this transfer crosses. Rates change only
when a transfer starts or ends, so the network solves them exactly then -- never per byte, never
per tick.

**Solver.** The link-transfer incidence is sparse: a link keeps its active transfers with their use
counts, a transfer its distinct links with counts. The rates are found *bottleneck first*: a heap
holds each link's fair share ``residual / unfrozen uses``; the least is taken, the unfrozen
transfers on it are frozen at that share and their consumption is taken off their other links.
That is progressive filling without the flat stretches -- the link taken is the next one to
saturate -- in ``O(incidences x log links)`` for the transfers solved, in plain Python (no matrix:
a sub-problem is a few hundred transfers at most in practice, where numpy's per-call cost would
dominate). Freezing only raises the other links' shares, so a heap entry is a lower bound and is
re-keyed lazily when it reaches the top (:func:`_fill`). A re-solve touches only the transfers
whose rate can change, and their links:

1. *Components.* A link saturates at a level that depends only on the transfers crossing it, and a
   transfer freezes at its own links' or cap's level, so filling runs independently on each
   connected component of the transfer-link graph (transfers joined by sharing a link,
   transitively). A start or an end changes the data of the changed transfer's links only; every
   other component keeps its transfers, paths and capacities, so -- the max-min allocation being
   unique -- its rates.
2. *Levels.* Ending a transfer ``f`` of rate ``r`` leaves every rate below ``r`` as it is: below
   level ``r`` no link of ``f`` saturates (``f`` would have frozen there), so each link saturating
   below ``r`` carries the same load at each level without ``f``, and saturates at the same level,
   while loads elsewhere only fall, so nothing saturates sooner; the transfers that do change end at
   ``r`` or above. Starting a transfer ``g`` is that step backwards: the rates below ``g``'s new
   rate stay, and that rate is at least ``min(cap, capacity / uses)`` over ``g``'s links (``uses``
   counting every transfer on the link, ``g`` included), because at level ``t`` a link carries at
   most ``t * uses``.

3. *Bottlenecks.* The max-min allocation is the one feasible allocation in which every transfer
   is at its cap or crosses a saturated link where no transfer runs faster (its bottleneck). So a
   re-solve need not take in every transfer it meets: a transfer left out keeps its rate, and the
   result is still the allocation if (a) each transfer left out still has its bottleneck -- true
   when that link is outside the sub-problem, untouched -- and (b) wherever a solved transfer
   froze, no transfer left out runs faster. A link can only be a bottleneck to the transfers at
   its top rate, and only when saturated, so the search enters a saturated link for its top-rate
   transfers and an unsaturated one for none, which gives (a); (b) is checked after the filling,
   and a link where it fails is entered for all its transfers on the next attempt.

On a change the network takes ``lam``, the least of the ended transfers' rates and the started
transfers' bounds (ends are applied before starts, so each step's threshold is at least ``lam``),
keeps every transfer below ``lam`` (less a relative 1e-9 for rounding), and re-solves the transfers
at or above it that are connected to a changed link through links and transfers at or above it --
through a link only to its top-rate transfers, as fact 3 allows, and to all of them where fact 3's
check failed. Above ``lam`` the filling is the same as on the original links with what the kept
transfers consume taken off, and fact 1 applies to that filling. A sub-problem of one transfer is
solved in closed form, without the heap.

**Time.** A transfer records its remaining bytes when its rate is set, and its projected finish time
in one numpy array indexed by the transfer's slot (free slots hold infinity): only a transfer whose
rate changed writes its entry, and the next completion is the array's minimum. That costs one C
pass over the slots (at most twice the most transfers ever active at once) per change instead of
a heap push, and a stale entry to drop later, per changed rate: in a large shared network a tenth
of the transfers change on each completion. After every change one SimPy timeout is armed for
the next completion; a timeout superseded by a later change is recognised by a generation number
and ignored. Transfers due within ``_EPS`` seconds of a change complete in it, in start order.

**Accounting** is exact per link: ``bytes_carried`` integrates the link's load (its transfers'
rates times uses) over time, and a transfer's last bytes are settled on its links when it
completes, so a link carries exactly what crossed it; utilisation is ``bytes_carried / (capacity *
elapsed)``. A link's counters are brought up to date when its load changes;
:meth:`FlowNetwork.advance` brings every busy link's up to ``env.now`` (call it before reading a
busy link's counters).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Sequence, ValuesView
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import simpy

_EPS = 1e-9  # seconds; completions closer than this to "now" are due now
_MARGIN = 1e-9  # relative; a kept rate must lie this far below the threshold (rounding)
_INF = float("inf")
_SATURATED = 1.0 - 1e-9  # a link loaded to this fraction of its capacity counts as saturated
_SLOTS = 64  # initial size of the finish-time array; it doubles when full
_IDLE: dict[Transfer, float] = {}  # the transfers of every idle link (read only)


@dataclass(eq=False, slots=True)
class Link:
    """One direction of a link (or any shared resource) with a capacity in bytes/s.

    ``bytes_carried`` and ``busy_time`` (time with at least one active transfer) are current up to
    the link's last load change or the network's last :meth:`FlowNetwork.advance`.
    """

    name: str
    capacity: float
    bytes_carried: float = 0.0
    busy_time: float = 0.0
    index: int = -1
    # active transfers crossing the link -> how many times each crosses it (start order);
    # an idle link's is the shared empty ``_IDLE`` (a dict emptied keeps its table, and a
    # large cluster's million links are idle most of the time)
    _transfers: dict[Transfer, float] = field(default_factory=lambda: _IDLE, init=False, repr=False)
    _uses: float = field(default=0.0, init=False, repr=False)  # sum of the counts above
    _load: float = field(default=0.0, init=False, repr=False)  # bytes/s, sum of rate x uses
    _since: float = field(default=0.0, init=False, repr=False)  # counters are current up to here
    # solver scratch, valid during one re-solve (``_mark`` == the network's epoch)
    _mark: int = field(default=0, init=False, repr=False)
    _residual: float = field(default=0.0, init=False, repr=False)
    _unfrozen: float = field(default=0.0, init=False, repr=False)
    # its transfers in the sub-problem during a re-solve (a list, or ``_transfers`` itself
    # when all of them are: a ring step's start makes every busy link such, and a list per
    # link per step is an allocation the collector counts and the heap pages in), else the
    # shared empty tuple: a link of a large cluster is idle most of the time
    _members: Collection[Transfer] = field(default=(), init=False, repr=False)
    _top: float = field(default=0.0, init=False, repr=False)  # fastest outsider (open link)
    _hi: float = field(default=0.0, init=False, repr=False)  # its fastest transfer's rate
    _hi_new: float = field(default=0.0, init=False, repr=False)  # the same, once solved
    _full: float = field(default=0.0, init=False, repr=False)  # saturated at this load

    def __post_init__(self) -> None:
        self._full = self.capacity * _SATURATED

    def utilisation(self, elapsed: float) -> float:
        """Mean utilisation over ``elapsed`` seconds."""
        if elapsed <= 0 or self.capacity <= 0:
            return 0.0
        return self.bytes_carried / (self.capacity * elapsed)

    def _fold(self, now: float) -> None:
        """Bring ``bytes_carried`` and ``busy_time`` up to ``now`` at the current load."""
        dt = now - self._since
        if dt > 0:
            if self._load > 0:
                self.bytes_carried += self._load * dt
                self.busy_time += dt
            self._since = now


_ids = itertools.count(1)


class Transfer:
    """One transfer: size, path (a link repeated once per crossing), cap, event, current rate."""

    __slots__ = (
        "_at",
        "_env",
        "_left",
        "_mark",
        "_new_rate",
        "_slot",
        "_uses",
        "batch",
        "cap",
        "done",
        "label",
        "links",
        "nbytes",
        "rate",
        "serial",
        "started",
    )

    def __init__(
        self,
        env: simpy.Environment,
        nbytes: float,
        links: tuple[Link, ...],
        cap: float,
        done: simpy.Event,
        label: str,
        batch: Batch | None = None,
    ) -> None:
        self.nbytes = nbytes
        self.links = links
        self.cap = cap
        self.done = done  # its own event, or its batch's
        self.batch = batch
        self.label = label
        self.rate = 0.0
        self.started: float = env.now
        self.serial = next(_ids)
        # Counts are floats holding whole numbers (exact): ``uses * rate`` is then a float
        # product, which the interpreter runs on its fast path, not int-times-float dispatch.
        counts: dict[Link, float] = {}
        for link in links:
            counts[link] = counts.get(link, 0.0) + 1.0
        if cap < _INF:  # the cap as a private link; a negative index keeps heap ties in order
            counts[Link(f"{label}:cap", cap, index=-self.serial)] = 1.0
        self._uses = tuple(counts.items())  # distinct links in path order (cap last), counts
        self._env = env
        self._left = nbytes  # remaining bytes at time ``_at``
        self._at: float = env.now  # typed: mypyc compiles this module without simpy's types
        self._slot = -1  # its entry in the network's finish-time array while active
        self._mark = 0
        self._new_rate = 0.0

    @property
    def remaining(self) -> float:
        """Bytes still to move, at ``env.now``."""
        return max(self._left_at(self._env.now), 0.0)

    def _left_at(self, now: float) -> float:
        return self._left - self.rate * (now - self._at)

    def __repr__(self) -> str:
        return f"Transfer({self.label!r}, {self.nbytes:g} B, rate {self.rate:g} B/s)"


class Batch:
    """The transfers started by one :meth:`FlowNetwork.transfer_all`: how many are still
    active, and the one event that fires when the last of them ends."""

    __slots__ = ("done", "left", "started")

    def __init__(self, done: simpy.Event, started: float) -> None:
        self.done = done
        self.started = started
        self.left = 0


class FlowNetwork:
    """Links and the transfers sharing them, on one SimPy environment.

    Counters: ``recomputes`` -- starts and ends after which rates were solved (some transfer
    active); ``resolved`` -- transfers whose rate was solved, summed over those (the other
    active transfers kept theirs); ``widened`` -- re-solves that took in more transfers after
    fact 3's check (module docstring) failed; ``completed`` -- transfers finished.
    """

    __slots__ = (
        "_active",
        "_busy",
        "_epoch",
        "_finish",
        "_free",
        "_generation",
        "_next",
        "_owner",
        "_touched",
        "completed",
        "env",
        "links",
        "recomputes",
        "resolved",
        "widened",
    )

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.links: dict[str, Link] = {}
        self.recomputes = 0
        self.resolved = 0
        self.widened = 0
        self.completed = 0
        # in start order, by completion event (a batch's members by themselves: they share one)
        self._active: dict[object, Transfer] = {}
        self._busy: dict[Link, None] = {}  # links with an active transfer, an ordered set
        self._touched: dict[Link, None] = {}  # busy at some time since the last take_touched
        self._finish = np.full(_SLOTS, _INF)  # projected completion time, by transfer slot
        self._owner: list[Transfer | None] = [None] * _SLOTS  # the active transfer of each slot
        self._free = list(range(_SLOTS - 1, -1, -1))  # free slots, lowest last (popped first)
        self._next = _INF  # the array's minimum, as of the last change (it changes only then)
        self._generation = 0
        self._epoch = 0

    # -- topology --------------------------------------------------------------------------
    def add_link(self, name: str, capacity: float) -> Link:
        """Add a link of ``capacity`` bytes/s (must be positive and unique by name)."""
        if name in self.links:
            raise ValueError(f"link {name!r} already exists")
        if not capacity > 0:
            raise ValueError(f"link {name!r}: capacity must be positive, got {capacity!r}")
        link = Link(name, float(capacity), index=len(self.links))
        self.links[name] = link
        return link

    def link(self, name: str) -> Link:
        try:
            return self.links[name]
        except KeyError:
            raise KeyError(f"no link named {name!r}") from None

    @property
    def active(self) -> ValuesView[Transfer]:
        """The active transfers, in start order."""
        return self._active.values()

    # -- transfers -------------------------------------------------------------------------
    def transfer(
        self,
        nbytes: float,
        links: Sequence[Link | str],
        *,
        cap: float | None = None,
        label: str = "",
    ) -> simpy.Event:
        """Start moving ``nbytes`` over ``links``; the returned event fires when done.

        ``cap`` bounds this transfer's rate (bytes/s). A transfer with no links and no cap
        cannot make progress and is refused with ``ValueError``; a zero-byte transfer
        completes at once.
        """
        done, started = self._new(nbytes, links, cap, label)
        if started is not None:
            self._change([started])
        return done

    def transfer_many(
        self, specs: Sequence[tuple[float, Sequence[Link | str], float | None, str]]
    ) -> list[simpy.Event]:
        """Start several transfers at once -- ``(nbytes, links, cap, label)`` each, with
        :meth:`transfer`'s rules -- solving the rates once rather than once per transfer
        (pinlab addition for collectives, where every rank starts a flow at the same instant:
        the same rates as starting them one by one, since rates only matter once time moves).
        """
        events: list[simpy.Event] = []
        started: list[Transfer] = []
        for nbytes, links, cap, label in specs:
            done, t = self._new(nbytes, links, cap, label)
            events.append(done)
            if t is not None:
                started.append(t)
        if started:
            self._change(started)
        return events

    def transfer_all(
        self, specs: Sequence[tuple[float, Sequence[Link | str], float | None, str]]
    ) -> simpy.Event:
        """Start several transfers at once, as :meth:`transfer_many` does, and return one event
        that fires when the last of them has ended (its value: the seconds since the start).

        The rates, completions and link counters are those of :meth:`transfer_many`; what is
        saved is an event per transfer and the condition that waits on all of them (pinlab
        addition for a collective's step, which waits for every rank's flow: at 131 072 ranks,
        131 072 events per step). Every spec is checked before any transfer starts."""
        checked = [(self._checked(n, links, cap, label), label) for n, links, cap, label in specs]
        done = self.env.event()
        batch = Batch(done, self.env.now)
        started = [
            Transfer(self.env, nbytes, path, limit, done, label, batch)
            for (nbytes, path, limit), label in checked
            if nbytes > 0
        ]
        batch.left = len(started)
        if started:
            self._change(started)
        else:
            done.succeed(0.0)
        return done

    def rate_of(self, event: simpy.Event) -> float:
        """The current rate of the transfer behind ``event`` (0 when finished)."""
        t = self._active.get(event)
        return 0.0 if t is None else t.rate

    def take_touched(self) -> tuple[list[int], list[float]]:
        """The network's links (not the caps' private ones) that were busy at some time since
        the last call -- only they can have carried bytes since -- in the order they became
        busy: their indices and their ``bytes_carried`` (call :meth:`advance` first). One pass
        over the links: a sampler of a large cluster's million links reads each once per
        tick, and there each is a cache miss."""
        index: list[int] = []
        carried: list[float] = []
        for link in self._touched:
            if link.index >= 0:
                index.append(link.index)
                carried.append(link.bytes_carried)
        self._touched = dict.fromkeys(self._busy)
        return index, carried

    def advance(self) -> None:
        """Bring every busy link's ``bytes_carried`` and ``busy_time`` up to ``env.now``."""
        now: float = self.env.now
        for link in self._busy:
            link._fold(now)

    # -- internals -------------------------------------------------------------------------
    def _new(
        self, nbytes: float, links: Sequence[Link | str], cap: float | None, label: str
    ) -> tuple[simpy.Event, Transfer | None]:
        """A checked transfer and its event; no transfer (the event fired) for zero bytes."""
        size, path, limit = self._checked(nbytes, links, cap, label)
        done = self.env.event()
        if size == 0:
            done.succeed(0.0)
            return done, None
        return done, Transfer(self.env, size, path, limit, done, label)

    def _checked(
        self, nbytes: float, links: Sequence[Link | str], cap: float | None, label: str
    ) -> tuple[float, tuple[Link, ...], float]:
        """``(nbytes, path, cap)`` of a transfer as the network keeps them (floats, the links
        looked up, no cap as infinity); ``ValueError`` if it cannot run."""
        path = tuple(self.links[x] if isinstance(x, str) else x for x in links)
        limit = _INF if cap is None else float(cap)
        if nbytes < 0:
            raise ValueError(f"transfer {label!r}: negative size {nbytes}")
        if not path and limit == _INF:
            raise ValueError(f"transfer {label!r}: no link and no rate cap")
        if limit <= 0:
            raise ValueError(f"transfer {label!r}: rate cap must be positive, got {cap}")
        return float(nbytes), path, limit

    def _change(self, started: list[Transfer]) -> None:
        """Complete the due transfers, add ``started``, re-solve what can change, re-arm."""
        now: float = self.env.now
        self._generation += 1
        ended = self._take_due(now)
        seeds: list[Link] = []
        lam = _INF
        for t in ended:
            lam = min(lam, t.rate)
            left = t._left_at(now)  # a hair above or below 0: the last bytes, made exact
            for link, uses in t._uses:
                link._fold(now)
                link.bytes_carried += left * uses
                del link._transfers[t]
                link._uses -= uses
                if not link._transfers:
                    link._transfers = _IDLE
                    del self._busy[link]
                seeds.append(link)
            t.rate = 0.0
            t._left = 0.0
            t._at = now
            self._release(t)
            del self._active[t.done if t.batch is None else t]
        for t in started:
            self._claim(t)
            for link, uses in t._uses:
                if not link._transfers:  # ``_IDLE``: never written to
                    link._transfers = {}
                    self._busy[link] = None
                    self._touched[link] = None
                link._transfers[t] = uses
                link._uses += uses
            self._active[t.done if t.batch is None else t] = t
        for t in started:
            bound = _INF
            for link, _ in t._uses:
                bound = min(bound, link.capacity / link._uses)
            lam = min(lam, bound)
        if self._active:
            self.recomputes += 1
        if seeds or started:  # also when nothing is left: the idle links' loads drop to 0
            self._resolve(seeds, started, lam, now)
        for t in ended:
            self.completed += 1
            batch = t.batch
            if batch is None:
                t.done.succeed(now - t.started)
            else:
                batch.left -= 1
                if not batch.left:
                    batch.done.succeed(now - batch.started)
        self._arm(now)

    def _claim(self, t: Transfer) -> None:
        """Give ``t`` a finish-time slot (infinite until its rate is solved)."""
        if not self._free:  # full: double the array
            size = len(self._owner)
            self._finish = np.concatenate([self._finish, np.full(size, _INF)])
            self._owner.extend([None] * size)
            self._free = list(range(2 * size - 1, size - 1, -1))
        t._slot = self._free.pop()
        self._owner[t._slot] = t

    def _release(self, t: Transfer) -> None:
        """Free the slot of ``t``, which has ended."""
        self._finish[t._slot] = _INF
        self._owner[t._slot] = None
        self._free.append(t._slot)
        t._slot = -1

    def _take_due(self, now: float) -> list[Transfer]:
        """The transfers finishing within ``_EPS`` of ``now``, in start order."""
        limit = now + _EPS
        if self._next > limit:  # the usual case on a start: spare the array pass
            return []
        owner = self._owner
        slots = (self._finish <= limit).nonzero()[0].tolist()
        due = cast("list[Transfer]", [owner[i] for i in slots])  # a finite entry's slot is owned
        due.sort(key=lambda t: t.serial)
        return due

    def _arm(self, now: float) -> None:
        """One timeout for the earliest projected completion, if any transfer is active."""
        first = self._next = float(self._finish.min())
        if first == _INF:
            return
        generation = self._generation
        timer = self.env.timeout(max(first - now, 0.0))
        timer.callbacks.append(lambda _ev: self._on_timer(generation))

    def _on_timer(self, generation: int) -> None:
        if generation == self._generation:  # else superseded by a later start or end
            self._change([])

    def _resolve(self, seeds: list[Link], started: list[Transfer], lam: float, now: float) -> None:
        """Re-solve the transfers that can change (module docstring) and set their rates."""
        forced: set[Link] | None = set()
        while True:
            members, links = self._gather(seeds, started, lam, now, forced)
            if len(members) == 1:
                t = members[0]
                rate = _INF
                bottleneck = t._uses[0][0]
                for link, uses in t._uses:
                    share = link._residual / uses
                    if share < rate:
                        rate = share
                        bottleneck = link
                t._new_rate = rate
                for link, uses in t._uses:
                    link._residual -= uses * rate
                    link._hi_new = rate
                wrong = [bottleneck] if bottleneck._top > rate * (1.0 - _MARGIN) else []
            elif members:
                wrong = _fill(members, links)
            else:
                wrong = []
            if forced is None or not wrong:
                break
            floor = lam * (1.0 - _MARGIN)
            for link in wrong:
                if link._top >= floor:
                    forced.add(link)  # fact 3 failed there: take its transfers in
                else:  # cannot happen (fact 2); should it, solve the whole of fact 2's set
                    forced = None
                    break
            self.widened += 1
        self.resolved += len(members)
        finish = self._finish
        for t in members:
            rate = t._new_rate
            if rate != t.rate:
                t._left -= t.rate * (now - t._at)
                t._at = now
                t.rate = rate
                finish[t._slot] = now + t._left / rate
        for link in links:
            link._load = link.capacity - link._residual  # what the kept and solved rates use
            hi = link._hi_new  # the fastest member's rate (0 with none) ...
            top = link._top  # ... or the fastest transfer left out
            link._hi = top if top > hi else hi
            link._members = ()

    def _gather(
        self,
        seeds: list[Link],
        started: list[Transfer],
        lam: float,
        now: float,
        forced: set[Link] | None,
    ) -> tuple[list[Transfer], list[Link]]:
        """The sub-problem of a re-solve (module docstring, facts 2 and 3): its transfers and
        its links, with ``_residual``, ``_unfrozen``, ``_members`` and ``_top`` (the fastest
        transfer left out) set. A link in ``forced`` (every link when ``forced`` is None)
        brings in all its transfers at ``lam`` or above, another saturated link those at its
        top rate, an unsaturated link none."""
        self._epoch += 1
        epoch = self._epoch
        members = list(started)
        links: list[Link] = []
        for t in started:
            t._mark = epoch
            for link, uses in t._uses:
                if link._mark != epoch:
                    link._mark = epoch
                    link._unfrozen = 0.0
                    links.append(link)
                link._unfrozen += uses
        for link in seeds:
            if link._mark != epoch:
                link._mark = epoch
                link._unfrozen = 0.0
                links.append(link)
        floor = lam * (1.0 - _MARGIN)
        keep = 1.0 - _MARGIN
        add_member = members.append
        add_link = links.append
        for link in links:  # breadth-first: ``links`` grows as the loop goes
            dt = now - link._since  # Link._fold, inline: this loop is the solver's hot path
            if dt > 0:
                if link._load > 0:
                    link.bytes_carried += link._load * dt
                    link.busy_time += dt
                link._since = now
            if forced is None or (forced and link in forced):
                threshold = floor
            elif link._load >= link._full:
                threshold = link._hi * keep
                if threshold < floor:
                    threshold = floor
            else:
                continue
            for t in [t for t in link._transfers if t.rate >= threshold and t._mark != epoch]:
                t._mark = epoch  # (a transfer's mark is set here only: the list stays right)
                add_member(t)
                for other, uses in t._uses:
                    if other._mark != epoch:
                        other._mark = epoch
                        other._unfrozen = 0.0
                        add_link(other)
                    other._unfrozen += uses
        for link in links:  # the members are known now
            transfers = link._transfers
            if link._unfrozen == link._uses:  # all members (a host link, a cap): no sum to take
                link._residual = link.capacity
                link._members = transfers  # read, not changed, until the re-solve ends
                link._top = 0.0
                link._hi_new = 0.0
                continue
            fixed = 0.0
            here: list[Transfer] = []
            top = 0.0
            for t, uses in transfers.items():
                if t._mark == epoch:
                    here.append(t)
                else:
                    rate = t.rate
                    fixed += uses * rate
                    if rate > top:
                        top = rate
            link._residual = link.capacity - fixed
            link._members = here
            link._top = top
            link._hi_new = 0.0
        return members, links


def _fill(members: list[Transfer], links: list[Link]) -> list[Link]:
    """Bottleneck-first max-min fair rates of ``members`` into their ``_new_rate``, over
    ``links`` whose ``_residual``, ``_unfrozen`` and ``_members`` describe the sub-problem;
    returns the links where fact 3's check failed (module docstring): a transfer left out
    runs faster than the level at which the link froze the members.

    Freezing a transfer at a rate no higher than a link's fair share can only raise that share
    (``(R - u s) / (n - u) >= R / n`` when ``s <= R / n``), so a heap entry's share is a lower
    bound of the link's current one: the top is re-keyed when its share has risen, and is the
    next bottleneck when it has not. Entries are ``(share, index, link)``; the index breaks ties
    deterministically.
    """
    heap = [(link._residual / link._unfrozen, link.index, link) for link in links if link._unfrozen]
    heapq.heapify(heap)
    for t in members:
        t._new_rate = -1.0  # not frozen yet
    left = len(members)
    wrong: list[Link] = []
    keep = 1.0 - _MARGIN
    level = 0.0
    while left and heap:
        share, index, bottleneck = heap[0]
        unfrozen = bottleneck._unfrozen
        if not unfrozen:
            heapq.heappop(heap)
            continue
        current = bottleneck._residual / unfrozen
        if current > share:
            heapq.heapreplace(heap, (current, index, bottleneck))
            continue
        heapq.heappop(heap)
        if current > level:  # rounding must not let a later level fall below an earlier one
            level = current
        if bottleneck._top > level * keep:
            wrong.append(bottleneck)
        for t in bottleneck._members:
            if t._new_rate < 0:
                t._new_rate = level
                left -= 1
                for link, uses in t._uses:
                    link._residual -= uses * level
                    link._unfrozen -= uses
                    link._hi_new = level  # levels only rise: the last is the members' highest
    return wrong
