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
    the group: its ranks drop out of the ring and nobody waits for it. ``world`` > 0 holds the
    first barrier until that many tenants joined.

    A ring step is started by the group, not by each tenant: every member submits its ranks'
    flows (:meth:`submit`), and when the last one has, all flows start together after the
    largest latency -- one rate computation for the whole cluster, where one per tenant would
    make a 1024-accelerator step quadratic -- and every member resumes when the step's last
    byte has arrived, which is also the step's barrier.
    """

    __slots__ = (
        "_by_owner",
        "_position",
        "_ring",
        "arrived",
        "env",
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
        self._by_owner: dict[str, list[R]] = {}  # each member's ranks, in the order added
        self._ring: list[R] | None = None  # the ring, made when first needed after a change
        self._position: dict[int, int] = {}  # id(rank) -> its place in the ring
        self.arrived: set[str] = set()
        self.waiting: list[simpy.Event] = []
        self.submitted: dict[str, tuple[list[FlowSpec], float]] = {}

    @property
    def ranks(self) -> list[R]:
        """The ring: every member's ranks, members in join order (owners that are not
        members last)."""
        ring = self._ring
        if ring is None:
            ring = [r for m in self.members for r in self._by_owner.get(m, ())]
            for owner, ranks in self._by_owner.items():
                if owner not in self.members:
                    ring.extend(ranks)
            self._ring = ring
            self._position = {id(r): i for i, r in enumerate(ring)}
        return ring

    def join(self, tenant: str) -> None:
        """Become a member (at the workload's start, so the first barrier waits for it)."""
        if tenant not in self.members:
            self.members[tenant] = None
            self._ring = None

    def add_ranks(self, tenant: str, ranks: Sequence[R]) -> None:
        """Put a member's ranks into the ring, in member order (not arrival order)."""
        for rank in ranks:
            self._by_owner.setdefault(rank.owner, []).append(rank)
        self._ring = None

    def leave(self, tenant: str) -> None:
        if tenant in self.members:
            del self.members[tenant]
            self._by_owner.pop(tenant, None)
            self._ring = None
        self.arrived.discard(tenant)
        self.submitted.pop(tenant, None)
        self._release()
        self._launch()

    def barrier(self, tenant: str) -> simpy.Event:
        """An event that fires when every member reached the barrier."""
        event = self.env.event()
        self.arrived.add(tenant)
        self.waiting.append(event)
        self._release()
        return event

    def _ready(self, done: Collection[str]) -> bool:
        members = self.members
        if len(members) < self.world or len(done) < len(members):
            return False  # the common case while members arrive, without a walk over them
        return all(m in done for m in members)

    def _release(self) -> None:
        if self.waiting and self._ready(self.arrived):
            waiting, self.waiting = self.waiting, []
            self.arrived = set()
            for ev in waiting:
                ev.succeed()

    def submit(self, tenant: str, flows: list[FlowSpec], latency: float) -> simpy.Event:
        """This member's flows of the current step; fires when the whole step is done."""
        event = self.env.event()
        self.submitted[tenant] = (flows, latency)
        self.waiting.append(event)
        self.arrived.add(tenant)
        self._launch()
        return event

    def _launch(self) -> None:
        if not self.submitted or not self._ready(self.submitted):
            return
        specs = [f for m in self.members for f in self.submitted[m][0]]
        latency = max(lat for _, lat in self.submitted.values())
        waiting, self.waiting = self.waiting, []
        self.submitted = {}
        self.arrived = set()
        self.env.process(self._step(specs, latency, waiting))

    def _step(
        self, specs: list[FlowSpec], latency: float, waiting: list[simpy.Event]
    ) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(latency)
        yield self.net.transfer_all(specs)
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
