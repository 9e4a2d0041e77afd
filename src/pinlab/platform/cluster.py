"""N-node clusters: identical nodes joined by a network fabric (the debate's 128-chip case).

Decision: **one kernel per node**. Each node is its own :class:`~pinlab.platform.topology.Machine`
with its own :class:`~pinlab.kernel.kernel.Kernel` -- every node boots its own Linux, so pins,
RLIMIT_MEMLOCK accounting, cgroups and stale-DMA incidents are per node -- while all nodes run
the same :class:`~pinlab.kernel.profile.KernelProfile` (one release across the cluster) and the
same effective :class:`~pinlab.platform.cost.CostModel`.

The fabric joins the nodes' NIC ports. Each NIC port is the node's ``net:<nic>`` link
(``tx``/``rx``, its payload rate, ``platform/rdma_model.py``); cluster-wide a link is
named ``"<node>/<link>"`` (``node03/net:efa0``). By default the fabric is non-blocking (full
bisection, [assumption]: AWS places DL1/p4d nodes in a cluster placement group), so a
node-to-node transfer crosses only the sender's ``tx`` and the receiver's ``rx``;
``fabric.core_bandwidth`` adds one shared ``fabric:core`` link (direction ``xfer``) every
inter-node transfer crosses.

Machines are built lazily, on first access (:meth:`Cluster.machine`), so that describing a
cluster of 16 nodes (128 accelerators) costs nothing until a node is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pinlab.kernel.kernel import Kernel
from pinlab.kernel.profile import KernelProfile, get_profile
from pinlab.platform.builder import build
from pinlab.platform.cost import CostModel
from pinlab.platform.spec import Name, PlatformSpec
from pinlab.platform.topology import LinkUse, Machine, PlatformLink
from pinlab.units import Duration, Rate

__all__ = ["Cluster", "ClusterSpec", "FabricSpec", "build_cluster"]


class FabricSpec(BaseModel):
    """The network between nodes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    core_bandwidth: Rate | None = Field(
        default=None, description="shared core capacity; None = non-blocking (full bisection)"
    )
    latency: Duration = Field(
        default=0.0, description="one-way latency of cables and switches between two NICs"
    )


class ClusterSpec(BaseModel):
    """``nodes`` copies of ``node`` joined by ``fabric`` (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["cluster"] = "cluster"
    name: Name
    description: str = ""
    nodes: int = Field(ge=1, le=16384, description="number of nodes (16 384: 131 072 accelerators)")
    node: PlatformSpec
    fabric: FabricSpec = Field(default_factory=FabricSpec)

    def node_names(self) -> tuple[str, ...]:
        """``node00`` … ``node15`` (zero-padded to the width of the largest index)."""
        width = len(str(self.nodes - 1))
        return tuple(f"node{i:0{width}d}" for i in range(self.nodes))

    @property
    def accelerators(self) -> int:
        """Exporting devices in the whole cluster."""
        return self.nodes * len(self.node.devices)

    @property
    def device_memory(self) -> int:
        """Device memory in the whole cluster, bytes."""
        return self.nodes * sum(d.memory for d in self.node.devices)


@dataclass(slots=True, eq=False)
class Cluster:
    """A built cluster: one lazily built :class:`Machine` per node, and the fabric links.

    ``cost`` is the effective cost model (every node's ``machine.cost`` equals it);
    ``base_cost`` and ``overrides`` are what each node is built from. The nodes, built alike,
    share one link graph, PCIe tree and cache of routes and NIC-end rates
    (:meth:`Machine.share_with`).

    ``fabric`` holds cluster-level links (``fabric:core`` when the spec has a core
    bandwidth); node links are reached through :meth:`link` with qualified names.
    """

    spec: ClusterSpec
    profile: KernelProfile
    cost: CostModel
    base_cost: CostModel
    overrides: Mapping[str, object]
    clock: Callable[[], float] | None
    fabric: dict[str, PlatformLink]
    names: tuple[str, ...]
    _machines: dict[str, Machine] = field(default_factory=dict)
    # a set beside the ordered tuple: a lookup per first use must not scan every node name
    _known: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self._known = frozenset(self.names)

    def machine(self, node: str | int) -> Machine:
        """The machine of ``node`` (a name like ``"node03"`` or an index), built on first use."""
        name = self.names[node] if isinstance(node, int) else node
        m = self._machines.get(name)
        if m is None:
            if name not in self._known:
                raise KeyError(f"no node named {name!r} in cluster {self.spec.name}")
            m = build(
                self.spec.node,
                Kernel(self.profile),
                self.base_cost,
                overrides=self.overrides,
                clock=self.clock,
            )
            first = next(iter(self._machines.values()), None)
            if first is not None:
                m.share_with(first)  # every node is built alike: one set of links and routes
            self._machines[name] = m
        return m

    def machines(self) -> Iterator[tuple[str, Machine]]:
        """Every ``(node name, machine)``, building those not built yet."""
        for name in self.names:
            yield name, self.machine(name)

    @property
    def built(self) -> int:
        """How many node machines exist so far."""
        return len(self._machines)

    @property
    def accelerators(self) -> int:
        """Exporting devices in the cluster (from the description; builds nothing)."""
        return self.spec.accelerators

    @staticmethod
    def qualify(node: str, use: LinkUse) -> LinkUse:
        """``use`` of a node's link as a cluster-wide use (``node03/pcie:gaudi0``)."""
        return LinkUse(f"{node}/{use.link}", use.direction)

    def link(self, name: str) -> PlatformLink:
        """A fabric link, or a node link by qualified name ``"<node>/<link>"``."""
        if name in self.fabric:
            return self.fabric[name]
        node, sep, local = name.partition("/")
        if not sep:
            raise KeyError(f"{name!r}: expected a fabric link or <node>/<link>")
        return self.machine(node).links[local]

    def path(self, src_node: str, src: str, dst_node: str, dst: str) -> list[LinkUse]:
        """Qualified links from ``src`` on ``src_node`` to ``dst`` on ``dst_node``.

        Within one node this is :meth:`Machine.path`. Between nodes, ``src`` and ``dst`` must
        be NICs: the sender's ``net:<src>`` ``tx``, ``fabric:core`` if any, the receiver's
        ``net:<dst>`` ``rx``. (A device-to-remote-device transfer is the sender's
        ``path(dev, nic)`` + this + the receiver's ``path(nic, dev)``.)
        """
        if src_node == dst_node:
            return [self.qualify(src_node, u) for u in self.machine(src_node).path(src, dst)]
        a = self.machine(src_node).nic_port(src)
        b = self.machine(dst_node).nic_port(dst)
        uses = [LinkUse(f"{src_node}/{a}", "tx")]
        if "fabric:core" in self.fabric:
            uses.append(LinkUse("fabric:core", "xfer"))
        uses.append(LinkUse(f"{dst_node}/{b}", "rx"))
        return uses

    def directed_capacities(self) -> dict[str, float]:
        """``{"<node>/<link>/<direction>": bytes/s}`` for every node (builds all) and the fabric."""
        out = {
            f"{link.name}/{d}": c for link in self.fabric.values() for d, c in link.capacity.items()
        }
        for name, m in self.machines():
            for key, cap in m.directed_capacities().items():
                out[f"{name}/{key}"] = cap
        return out

    def __repr__(self) -> str:
        return (
            f"<Cluster {self.spec.name}: {self.spec.nodes} × {self.spec.node.name}, "
            f"{self.accelerators} accelerators, {self.built} built, kernel {self.profile.name}>"
        )


def build_cluster(
    spec: ClusterSpec,
    kernel: KernelProfile | str | None = None,
    cost: CostModel | None = None,
    *,
    overrides: Mapping[str, object] | None = None,
    clock: Callable[[], float] | None = None,
    lazy: bool = True,
) -> Cluster:
    """Build ``spec``: one kernel per node, all on the profile ``kernel`` (a profile or preset
    name; default the node spec's suggested ``kernel``, else the default preset).

    The effective cost model is ``cost`` with the node's ``cost_overrides`` and then
    ``overrides`` applied (as in :func:`~pinlab.platform.builder.build`); with ``lazy=False``
    every node is built now.
    """
    if isinstance(kernel, Kernel):
        raise TypeError("a cluster needs one kernel per node: pass a KernelProfile or preset name")
    if isinstance(kernel, KernelProfile):
        profile = kernel
    else:
        profile = get_profile(kernel or spec.node.kernel or "6.16")
    base = CostModel() if cost is None else cost
    merged = {**spec.node.cost_overrides, **(overrides or {})}
    eff = base.with_overrides(merged, source=f"cluster {spec.name}") if merged else base
    fabric: dict[str, PlatformLink] = {}
    if spec.fabric.core_bandwidth is not None:
        fabric["fabric:core"] = PlatformLink(
            "fabric:core",
            "fabric",
            MappingProxyType({"xfer": spec.fabric.core_bandwidth}),
            spec.fabric.latency,
            ("fabric",),
        )
    user = dict(overrides or {})
    cluster = Cluster(spec, profile, eff, base, user, clock, fabric, spec.node_names())
    if not lazy:
        for _ in cluster.machines():
            pass
    return cluster
