"""Flow-level bandwidth sharing: concurrent transfers share links max-min fairly.

A *transfer* moves ``nbytes`` over a path of links (``cost-model.md`` §1 item 1). While several
transfers are active, each gets the max-min fair rate: the largest rate vector in which no
transfer can go faster without slowing a transfer that already has a smaller or equal rate
(progressive filling). A transfer may also carry its own rate cap (a NIC's message rate, a copy
engine's speed). Rates change only when a transfer starts or ends, so the network recomputes
them exactly then -- never per byte, never per tick -- and schedules one SimPy timeout for the
next completion. Stale timeouts are recognised by a generation number and ignored.

The water-filling is vectorised with numpy over a links x transfers *use-count* matrix (a path
may cross a link more than once: a staged transfer crosses host DRAM twice, ``cost-model.md`` §1
item 5, and then consumes twice its rate there): each round finds the tightest link (residual
capacity / unfrozen uses) or transfer cap, freezes the transfers it limits, and subtracts what
they consume; at most ``min(links, transfers)`` rounds.

Accounting is exact per link: ``bytes_carried`` integrates rate over time, so utilisation is
``bytes_carried / (capacity * elapsed)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import simpy

_EPS = 1e-9  # seconds; completions closer than this to "now" are due now


@dataclass(slots=True)
class Link:
    """One direction of a link (or any shared resource) with a capacity in bytes/s."""

    name: str
    capacity: float
    bytes_carried: float = 0.0
    busy_time: float = 0.0  # time with at least one active transfer
    index: int = -1

    def utilisation(self, elapsed: float) -> float:
        """Mean utilisation over ``elapsed`` seconds."""
        if elapsed <= 0 or self.capacity <= 0:
            return 0.0
        return self.bytes_carried / (self.capacity * elapsed)


_ids = itertools.count(1)


@dataclass(eq=False, slots=True)
class Transfer:
    """One active transfer: remaining bytes, its links, optional cap, current rate."""

    nbytes: float
    links: tuple[Link, ...]
    cap: float
    done: simpy.Event
    label: str = ""
    remaining: float = 0.0
    rate: float = 0.0
    started: float = 0.0
    serial: int = field(default_factory=lambda: next(_ids))


class FlowNetwork:
    """Links and the transfers sharing them, on one SimPy environment."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.links: dict[str, Link] = {}
        self.active: list[Transfer] = []
        self._last_update = 0.0
        self._generation = 0
        self.recomputes = 0
        self.completed = 0

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
        done = self.env.event()
        path = tuple(self.links[x] if isinstance(x, str) else x for x in links)
        limit = float("inf") if cap is None else float(cap)
        if nbytes < 0:
            raise ValueError(f"transfer {label!r}: negative size {nbytes}")
        if not path and limit == float("inf"):
            raise ValueError(f"transfer {label!r}: no link and no rate cap")
        if limit <= 0:
            raise ValueError(f"transfer {label!r}: rate cap must be positive, got {cap}")
        if nbytes == 0:
            done.succeed(0.0)
            return done
        self.advance()
        t = Transfer(float(nbytes), path, limit, done, label, float(nbytes), 0.0, self.env.now)
        self.active.append(t)
        self._reschedule()
        return done

    def transfer_many(
        self, specs: Sequence[tuple[float, Sequence[Link | str], float | None, str]]
    ) -> list[simpy.Event]:
        """Start several transfers at once -- ``(nbytes, links, cap, label)`` each, with
        :meth:`transfer`'s rules -- recomputing the rates once rather than once per transfer
        (pinlab addition for collectives, where every rank starts a flow at the same instant:
        the same rates as starting them one by one, since rates only matter once time moves).
        """
        events: list[simpy.Event] = []
        started: list[Transfer] = []
        self.advance()
        for nbytes, links, cap, label in specs:
            done = self.env.event()
            path = tuple(self.links[x] if isinstance(x, str) else x for x in links)
            limit = float("inf") if cap is None else float(cap)
            if nbytes < 0:
                raise ValueError(f"transfer {label!r}: negative size {nbytes}")
            if not path and limit == float("inf"):
                raise ValueError(f"transfer {label!r}: no link and no rate cap")
            if limit <= 0:
                raise ValueError(f"transfer {label!r}: rate cap must be positive, got {cap}")
            events.append(done)
            if nbytes == 0:
                done.succeed(0.0)
                continue
            started.append(
                Transfer(float(nbytes), path, limit, done, label, float(nbytes), 0.0, self.env.now)
            )
        if started:
            self.active.extend(started)
            self._reschedule()
        return events

    def rate_of(self, event: simpy.Event) -> float:
        """The current rate of the transfer behind ``event`` (0 when finished)."""
        for t in self.active:
            if t.done is event:
                return t.rate
        return 0.0

    # -- internals -------------------------------------------------------------------------
    def advance(self) -> None:
        """Move every active transfer forward to ``env.now`` at its current rate."""
        now = self.env.now
        dt = now - self._last_update
        if dt > 0:
            used: set[int] = set()
            for t in self.active:
                moved = min(t.rate * dt, t.remaining)
                t.remaining -= moved
                for link in t.links:
                    link.bytes_carried += moved
                    used.add(link.index)
            for link in self.links.values():
                if link.index in used:
                    link.busy_time += dt
        self._last_update = now

    def _compute_rates(self) -> None:
        """Max-min fair rates by progressive filling (vectorised)."""
        flows = self.active
        n = len(flows)
        if n == 0:
            return
        self.recomputes += 1
        used_links = sorted({link.index for t in flows for link in t.links})
        col = {idx: i for i, idx in enumerate(used_links)}
        m = len(used_links)
        a = np.zeros((m, n), dtype=float)  # uses of link i by transfer j
        for j, t in enumerate(flows):
            for link in t.links:
                a[col[link.index], j] += 1.0
        by_index = {link.index: link for link in self.links.values()}
        residual = np.array([by_index[i].capacity for i in used_links], dtype=float)
        caps = np.array([t.cap for t in flows], dtype=float)
        rate = np.zeros(n, dtype=float)
        frozen = np.zeros(n, dtype=bool)
        while not frozen.all():
            users = a[:, ~frozen].sum(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(users > 0, residual / users, np.inf)
            link_min = share.min() if m else np.inf
            cap_left = np.where(frozen, np.inf, caps - rate)
            cap_min = cap_left.min()
            inc = min(link_min, cap_min)
            if not np.isfinite(inc):
                break  # cannot happen: every transfer has a link or a finite cap
            active = ~frozen
            rate[active] += inc
            residual -= a[:, active].sum(axis=1) * inc
            newly = np.zeros(n, dtype=bool)
            if m:
                tight = (users > 0) & (share <= inc * (1 + 1e-12) + 1e-300)
                if tight.any():
                    newly |= (a[tight] > 0).any(axis=0)
            newly |= cap_left <= inc * (1 + 1e-12)
            newly &= active
            if not newly.any():  # numerical safety: freeze the tightest transfer
                newly[np.flatnonzero(active)[0]] = True
            frozen |= newly
        for t, r in zip(flows, rate, strict=True):
            t.rate = float(r)

    def _reschedule(self) -> None:
        """Recompute rates and arm one timeout for the earliest completion."""
        self._generation += 1
        self._finish_due()
        if not self.active:
            return
        self._compute_rates()
        soonest = min(t.remaining / t.rate if t.rate > 0 else float("inf") for t in self.active)
        if soonest == float("inf"):
            return
        generation = self._generation
        timer = self.env.timeout(max(soonest, 0.0))
        timer.callbacks.append(lambda _ev: self._on_timer(generation))

    def _on_timer(self, generation: int) -> None:
        if generation != self._generation:
            return  # superseded by a later start or end
        self.advance()
        self._reschedule()

    def _finish_due(self) -> None:
        """Complete transfers with nothing left (or less than _EPS worth of time)."""
        still: list[Transfer] = []
        finished: list[Transfer] = []
        for t in self.active:
            if t.remaining <= 0 or (t.rate > 0 and t.remaining / t.rate <= _EPS):
                for link in t.links:
                    link.bytes_carried += max(t.remaining, 0.0)
                t.remaining = 0.0
                finished.append(t)
            else:
                still.append(t)
        self.active = still
        for t in finished:
            self.completed += 1
            t.done.succeed(self.env.now - t.started)
