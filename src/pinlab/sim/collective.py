"""Collectives: the ranks of one group across tenants and nodes, stepping together.

A :class:`Collective` is the synchronisation a collective communication library gives its
ranks (NCCL, libfabric-based ones): membership, a barrier, and ring steps started for the
whole group at once. The simulation holds one registry of them (:class:`Collectives`,
``Simulation.collectives``); the ``allreduce`` workload (:mod:`pinlab.sim.workloads.allreduce`)
uses it.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Sequence
from typing import Any, Generic, Protocol, TypeVar

import simpy

from pinlab.sim.flows import FlowNetwork, Link

FlowSpec = tuple[float, Sequence[Link | str], float | None, str]
"""``(nbytes, links, cap, label)``: one transfer of a step (``FlowNetwork.transfer_all``)."""


class Rank(Protocol):
    """A rank of a collective: it belongs to one member (tenant)."""

    owner: str


R = TypeVar("R", bound=Rank)


class Collective(Generic[R]):
    """The ranks of one all-reduce group across tenants (and nodes): the ring, a barrier, and
    the ring steps.

    Ranks are kept in member order (tenants in the order they joined -- spawn order -- and
    each tenant's devices in order), which is the ring. A tenant that dies or finishes leaves
    the group: its ranks drop out of the ring and nobody waits for it.

    The group *forms* when its first barrier opens: with ``world`` > 0 once that many tenants
    joined and reached it; without, at the end of the instant in which every tenant that had
    joined reached it (so that tenants starting in one instant, whose workloads join and wait
    at once, form one group whatever order their processes run in). A tenant that joins a
    formed group is not a member yet: its ranks stay out of the ring and the steps do not wait
    for it; at its first barrier it waits to be *admitted*, at the end of an iteration (the
    step submitted with ``last``) or when the group has no member left.

    A ring step is started by the group, not by each tenant: every member submits its ranks'
    flows (:meth:`submit`), and when the last one has, all flows start together after the
    largest latency -- one rate computation for the whole cluster, where one per tenant would
    make a 1024-accelerator step quadratic -- and every member resumes when the step's last
    byte has arrived, which is also the step's barrier. Barriers and steps are counted apart:
    a member waiting at a barrier never completes another's step, nor the reverse.
    """

    __slots__ = (
        "_admitting",
        "_by_owner",
        "_last",
        "_opening",
        "_position",
        "_ring",
        "_stepping",
        "arrived",
        "env",
        "formed",
        "joining",
        "members",
        "name",
        "net",
        "submitted",
        "waiting",
        "world",
    )

    def __init__(self, env: simpy.Environment, net: FlowNetwork, name: str, world: int = 0) -> None:
        self.env = env
        self.net = net
        self.name = name
        self.world = world
        self.members: dict[str, None] = {}  # an ordered set: join order
        self.joining: dict[str, None] = {}  # joined the formed group, not admitted yet
        self.formed = False  # the first barrier has opened
        self._by_owner: dict[str, list[R]] = {}  # each member's ranks, in the order added
        self._ring: list[R] | None = None  # the ring, made when first needed after a change
        self._position: dict[int, int] = {}  # id(rank) -> its place in the ring
        self.arrived: set[str] = set()  # at the barrier
        self.waiting: list[simpy.Event] = []  # their barrier events
        self._admitting: dict[str, simpy.Event] = {}  # joiners at their first barrier
        self._opening = False  # the first barrier opens at the end of this instant
        self.submitted: dict[str, tuple[list[FlowSpec], float]] = {}  # this step's flows
        self._stepping: list[simpy.Event] = []  # their step events
        self._last = False  # this step ends an iteration

    @property
    def ranks(self) -> list[R]:
        """The ring: every member's ranks, members in join order (owners that neither are
        members nor wait to be admitted last)."""
        ring = self._ring
        if ring is None:
            ring = [r for m in self.members for r in self._by_owner.get(m, ())]
            for owner, ranks in self._by_owner.items():
                if owner not in self.members and owner not in self.joining:
                    ring.extend(ranks)
            self._ring = ring
            self._position = {id(r): i for i, r in enumerate(ring)}
        return ring

    def join(self, tenant: str) -> None:
        """Become a member (at the workload's start, so the first barrier waits for it), or,
        once the group formed, wait to be admitted (class docstring)."""
        if tenant in self.members or tenant in self.joining:
            return
        if self.formed:
            self.joining[tenant] = None
        else:
            self.members[tenant] = None
            self._ring = None

    def add_ranks(self, tenant: str, ranks: Sequence[R]) -> None:
        """Put a member's ranks into the ring, in member order (not arrival order)."""
        for rank in ranks:
            self._by_owner.setdefault(rank.owner, []).append(rank)
        self._ring = None

    def leave(self, tenant: str) -> None:
        """A member or joiner is done, killed or refused: the ring goes on without it (and
        with no member left, the joiners at their first barrier are admitted)."""
        self.members.pop(tenant, None)
        self.joining.pop(tenant, None)
        self._admitting.pop(tenant, None)
        self._by_owner.pop(tenant, None)
        self._ring = None
        self.arrived.discard(tenant)
        self.submitted.pop(tenant, None)
        if not self.members:
            self._admit()
        self._release()
        self._launch()

    def barrier(self, tenant: str) -> simpy.Event:
        """An event that fires when every member reached the barrier (a joiner's: when it is
        admitted)."""
        event = self.env.event()
        if tenant in self.joining:
            self._admitting[tenant] = event
            if not self.members:
                self._admit()
            return event
        self.arrived.add(tenant)
        self.waiting.append(event)
        if self.formed or self.world:
            self._release()
        elif not self._opening:
            self._opening = True
            self.env.timeout(0).callbacks.append(self._open)
        return event

    def _open(self, _event: simpy.Event) -> None:
        self._opening = False
        self._release()

    def _ready(self, done: Collection[str]) -> bool:
        members = self.members
        if len(done) < len(members) or (not self.formed and len(members) < self.world):
            return False  # the common case while members arrive, without a walk over them
        return all(m in done for m in members)

    def _release(self) -> None:
        if self.waiting and self._ready(self.arrived):
            waiting, self.waiting = self.waiting, []
            self.arrived = set()
            self.formed = True
            for ev in waiting:
                ev.succeed()

    def _admit(self) -> None:
        """The joiners waiting at their first barrier become members and resume."""
        if not self._admitting:
            return
        admitting, self._admitting = self._admitting, {}
        for tenant in admitting:
            del self.joining[tenant]
            self.members[tenant] = None
        self._ring = None
        for ev in admitting.values():
            ev.succeed()

    def submit(
        self, tenant: str, flows: list[FlowSpec], latency: float, *, last: bool = False
    ) -> simpy.Event:
        """This member's flows of the current step; fires when the whole step is done.
        ``last``: the step ends an iteration, after which joiners are admitted."""
        event = self.env.event()
        self.submitted[tenant] = (flows, latency)
        self._stepping.append(event)
        self._last = self._last or last
        self._launch()
        return event

    def _launch(self) -> None:
        if not self.submitted or not self._ready(self.submitted):
            return
        specs = [f for m in self.members for f in self.submitted[m][0]]
        latency = max(lat for _, lat in self.submitted.values())
        waiting, self._stepping = self._stepping, []
        last, self._last = self._last, False
        self.submitted = {}
        self.env.process(self._step(specs, latency, waiting, last))

    def _step(
        self, specs: list[FlowSpec], latency: float, waiting: list[simpy.Event], last: bool
    ) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(latency)
        yield self.net.transfer_all(specs)
        if last:
            self._admit()
        for ev in waiting:
            ev.succeed()

    def successor(self, rank: R) -> R:
        ring = self.ranks
        return ring[(self._position[id(rank)] + 1) % len(ring)]


class Collectives:
    """The simulation's collectives by group name (created on first use)."""

    __slots__ = ("env", "groups", "net")

    def __init__(self, env: simpy.Environment, net: FlowNetwork) -> None:
        self.env = env
        self.net = net
        self.groups: dict[str, Collective[Any]] = {}

    def group(self, name: str, world: int = 0) -> Collective[Any]:
        """Group ``name`` (``world`` applies when this call creates it)."""
        coll = self.groups.get(name)
        if coll is None:
            coll = self.groups[name] = Collective(self.env, self.net, name, world)
        return coll
