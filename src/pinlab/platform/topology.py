"""The built machine: the link graph, its paths and the P2P answers.

A :class:`Machine` (made by :func:`~pinlab.platform.builder.build` from a
:class:`~pinlab.platform.spec.PlatformSpec`) holds:

* ``machine.pci``: the :class:`~pinlab.kernel.pci_topology.PciTopology` (so P2PDMA answers
  come from the same description; ``p2pdma_enabled`` = ``kernel.profile.pci_p2pdma``). Each
  host bridge gets its 00.0 function with the spec's IDs; each child of a host bridge gets its
  own root port;
  each child of a switch its own downstream port (``acs_redirect`` sets the ACS redirect bits on
  that switch's downstream ports); ``rciep`` devices sit on the root bus.
* ``machine.system``: a :class:`~pinlab.uapi.system.System` holding the drivers by name:
  exporters, NICs, displays, and a GPU importer named ``"<device>:import"`` for every device
  whose driver imports dma-bufs (the amdgpu family).
* ``machine.links``: the link graph, :class:`PlatformLink` by name, each with a capacity per
  direction:

  - ``pcie:<x>`` (``up`` = toward the host, ``down``): the PCIe link between ``x`` (a switch,
    device or NIC) and its parent port: the posted-write payload rate of
    :func:`~pinlab.platform.pcie_model.write_rate` with gen/width the lower of the child's and
    (for a switch parent) the switch's and the MPS the lower of both ends' (§2.1, §2.3),
    unless the spec's ``link`` overrides it;
  - ``dram:<s>`` (``rw``): socket ``s``'s DRAM, theoretical bandwidth × ``dram.efficiency``
    (§5); reads and writes share it;
  - ``mem:<d>`` (``rw``): device ``d``'s memory, ``memory_bandwidth`` ×
    ``hbm.copy_efficiency`` (§8), when the spec gives a bandwidth;
  - ``upi:<a>-<b>`` (``a->b``, ``b->a``): the inter-socket link between sockets ``a`` < ``b``;
  - ``net:<n>`` (``tx``, ``rx``): NIC ``n``'s network port: its payload rate for large
    messages, line rate × the link layer's header efficiency at the NIC's MTU
    (:func:`~pinlab.platform.rdma_model.wire_rate`);
  - ``nvlink:<d>`` (``tx``, ``rx``): GPU ``d``'s NVLinks to the NVSwitches of its domain, and
    ``nvlink:<a>-<b>`` (``a->b``, ``b->a``) for two GPUs bridged directly: the copy-engine data
    rate of the links (``docs/cost-model/gpu.md`` §G1). :meth:`Machine.nvlink_path` routes
    over them; :meth:`Machine.path` never does (dma-buf P2P goes over PCIe).

  :meth:`Machine.directed_capacities` flattens them to ``{"<link>/<direction>": bytes/s}``.

How :meth:`Machine.path` forms a path from ``src`` to ``dst`` (device, NIC, display, GPU
importer or ``"host:<socket>"`` names; a list of :class:`LinkUse`, in the order a byte crosses
them):

1. the source's memory: ``dram:<s>`` for ``host:<s>`` and for a device whose memory is a
   carve-out of host DRAM (an APU), ``mem:<d>`` for a device with a memory bandwidth; NICs,
   displays and GPU importers contribute none (the bytes start or end in the engine);
2. up the PCIe tree (``pcie:<x>`` ``up`` for every hop) to the lowest common switch, then down
   (``down``) to the destination -- when the common ancestor is a switch and none of the
   switches passed has ``acs_redirect``;
3. otherwise up to the root complex, across ``upi:<a>-<b>`` when the sockets differ, and down;
   the root complex itself is not a link (what it does to P2P is the PCIe mechanism's,
   :meth:`pcie_path`);
4. the destination's memory, as in 1.

A device and itself (or its display / GPU importer) share no PCIe link: ``path(d, d)`` is just
its memory; ``path("host:0", "host:0")`` is ``dram:0`` twice (a memcpy reads and writes).

So a device-to-host copy on a DL1 Gaudi is ``mem:gaudi0 → pcie:gaudi0 up → pcie:sw0 up →
dram:0``, and a staged transfer, ``path(dev, host) + path(host, nic)``, crosses ``dram:<s>``
twice (``cost-model.md`` §1 item 5). An APU's VRAM → GTT migration, ``path("apu0", "host:0")``,
is ``dram:0`` twice (§9.4: at most DRAM / 2). :meth:`Machine.bottleneck` divides a link's
capacity by the number of times a path uses it.

:meth:`Machine.p2p_path_class` asks the kernel's ``pci_p2pdma_distance`` (and map type) rather
than the tree, so it honours the CPU, the whitelist and ``CONFIG_PCI_P2PDMA``; ``None`` means
P2PDMA refuses the pair.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from pinlab.drivers.base import ExporterDriver
from pinlab.drivers.rdma import RdmaDevice
from pinlab.kernel.device import Device
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.p2pdma import PciP2pdmaMapType, pci_p2pdma_distance, pci_p2pdma_map_type
from pinlab.kernel.pci import PciDev
from pinlab.kernel.pci_topology import PciTopology
from pinlab.kernel.ttm import TtmDevice
from pinlab.platform import pcie_model, rdma_model
from pinlab.platform.cost import CostModel, NicModel, P2pPathClass
from pinlab.platform.pcie_model import HostBridgeCrossing, PcieLink, PciePath
from pinlab.platform.rdma_model import EndRate, NicPort
from pinlab.platform.spec import NicSpec, NvlinkSpec, PlatformSpec
from pinlab.uapi.system import System

__all__ = ["LinkUse", "Machine", "PciDistance", "PlatformLink", "TreeNode", "nic_port"]

PciDistance = Literal["X", "PIX", "PXB", "PHB", "NODE", "SYS"]
"""The PCIe distance classes of ``nvidia-smi topo -m`` and NCCL's ``PATH_*`` (nearest first)."""


def nic_port(cost: CostModel, spec: NicSpec) -> NicPort:
    """A NIC entry as the RDMA mechanism sees it: its model (``nic.<model>``) and the line
    rate, link layer and MTU of the entry, else of the model."""
    model: NicModel = cost.nic.model(spec.model_name)
    return NicPort(
        name=spec.name,
        model_name=spec.model_name,
        model=model,
        line_rate=model.line_rate if spec.line_rate is None else spec.line_rate,
        link_layer=model.link_layer if spec.link_layer is None else spec.link_layer,
        mtu=model.mtu if spec.mtu is None else spec.mtu,
    )


class LinkUse(NamedTuple):
    """One crossing of a link in one direction."""

    link: str
    direction: str

    @property
    def key(self) -> str:
        """``"<link>/<direction>"``: the name of the directed resource (``pcie:sw0/up``)."""
        return f"{self.link}/{self.direction}"


@dataclass(frozen=True, slots=True, eq=False)
class PlatformLink:
    """A link of the machine: capacity in bytes/s per direction, and a one-way latency.

    ``kind`` is ``pcie``, ``dram``, ``mem``, ``socket`` or ``net``; ``ends`` names what it
    connects (``("gaudi0", "sw0")``, ``("socket0",)``); ``gen``/``width`` for PCIe links.
    """

    name: str
    kind: str
    capacity: Mapping[str, float]
    latency: float = 0.0
    ends: tuple[str, ...] = ()
    gen: int | None = None
    width: int | None = None


@dataclass(slots=True, eq=False)
class TreeNode:
    """A host bridge, switch, device or NIC in the PCIe tree, with the link to its parent.

    ``mps`` is the Max_Payload_Size its uplink runs at (the smaller of its own and its
    parent port's); ``mrrs`` the Max_Read_Request_Size of a device's or NIC's DMA."""

    name: str
    kind: str  # host_bridge, switch, device, nic
    parent: TreeNode | None
    socket: int
    uplink: str | None
    acs_redirect: bool = False
    depth: int = 0
    mps: int = 256
    mrrs: int = 512


@dataclass(slots=True, eq=False)
class _PathEnd:
    """One end of a path: its place in the tree (None for host memory), its socket and the
    memory it reads or writes (None for an engine: a NIC, display or GPU importer)."""

    node: TreeNode | None
    socket: int
    memory: LinkUse | None


@dataclass(slots=True, eq=False)
class Machine:
    """A built platform: kernel, PCI tree, drivers, and the link graph (module docstring).

    Attributes:
        spec: the :class:`PlatformSpec` it was built from.
        kernel: the node's :class:`~pinlab.kernel.kernel.Kernel`.
        cost: the effective :class:`CostModel` (platform overrides applied).
        pci: the :class:`~pinlab.kernel.pci_topology.PciTopology`.
        system: the :class:`~pinlab.uapi.system.System` (drivers by name, processes).
        links: every :class:`PlatformLink` by name.
        pdevs: the PCI function of every host bridge (its 00.0 function), switch (upstream
            port), device and NIC, by spec name.
    """

    spec: PlatformSpec
    kernel: Kernel
    cost: CostModel
    pci: PciTopology
    system: System
    links: dict[str, PlatformLink]
    pdevs: dict[str, PciDev]
    _nodes: dict[str, TreeNode] = field(default_factory=dict)
    # derived from the spec, the cost model and the tree only; shared by identical machines
    _paths: dict[tuple[str, str], tuple[LinkUse, ...]] = field(default_factory=dict)
    _pcie_paths: dict[tuple[str, str], PciePath] = field(default_factory=dict)
    _ends: dict[tuple[str, str, str, int, int], EndRate] = field(default_factory=dict)

    def share_with(self, twin: Machine) -> None:
        """Use ``twin``'s link graph (:attr:`links`), PCIe tree and caches of :meth:`path`,
        :meth:`pcie_path` and :meth:`nic_end` from now on. For machines built alike -- the
        same spec, cost model and kernel profile, as a cluster's nodes are -- whose links and
        trees are equal and whose answers are the same: each is computed from the spec, the
        cost model and the PCIe tree, which nothing changes after the build (links are frozen;
        an unplug takes drivers away, not tree nodes: a route already cached stays cached, as
        on one machine, so a GPU importer an unplug removed is still routed where any twin
        asked for its route before). Saves computing every route and rate once per node, and
        keeping a copy of the same links and tree per node (``cluster-128``'s all-reduce at
        2 048 and 4 096 nodes peaked 10 % lower). The kernel, PCI functions, drivers and
        system stay the machine's own."""
        self._paths = twin._paths
        self._pcie_paths = twin._pcie_paths
        self._ends = twin._ends
        self.links = twin.links
        self._nodes = twin._nodes

    # -- lookup ---------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def exporters(self) -> dict[str, ExporterDriver]:
        """Exporter drivers by device name."""
        return self.system.exporters

    @property
    def nics(self) -> dict[str, RdmaDevice]:
        """RDMA devices by NIC name."""
        return self.system.nics

    def ttm_devices(self) -> list[TtmDevice]:
        """The TTM device of every exporter TTM manages, in device order (their copy queues
        hold the pending moves; static exporters have none)."""
        return [d.bdev for d in self.system.exporters.values() if d.bdev is not None]

    def socket_of(self, name: str) -> int:
        """The socket of a device, NIC, display, GPU importer, switch or ``host:<s>``."""
        return self._endpoint(name).socket

    def host_of(self, name: str) -> str:
        """``"host:<socket>"`` local to ``name``."""
        return f"host:{self.socket_of(name)}"

    def nic_port(self, nic: str) -> str:
        """The name of NIC ``nic``'s network-port link (``net:<nic>``)."""
        if nic not in self.system.nics:
            raise KeyError(f"no NIC named {nic!r} on {self.name}")
        return f"net:{nic}"

    def directed_capacities(self) -> dict[str, float]:
        """Every direction of every link as ``{"<link>/<direction>": bytes/s}``.

        One entry per independent resource, as the simulator's flow network adds them.
        """
        return {
            f"{link.name}/{d}": cap
            for link in self.links.values()
            for d, cap in link.capacity.items()
        }

    # -- paths ----------------------------------------------------------------------------------

    def _endpoint(self, name: str) -> _PathEnd:
        if name.startswith("host:"):
            try:
                s = int(name[5:])
            except ValueError:
                s = -1
            if not 0 <= s < self.spec.cpu.sockets:
                raise KeyError(
                    f"{name!r}: expected host:<socket> with socket < {self.spec.cpu.sockets}"
                )
            return _PathEnd(None, s, LinkUse(f"dram:{s}", "rw"))
        node = self._nodes.get(name)
        if node is not None:
            memory: LinkUse | None = None
            if node.kind == "device":
                spec = self.spec.device(name)
                if spec.is_carve_out:
                    memory = LinkUse(f"dram:{node.socket}", "rw")
                elif f"mem:{name}" in self.links:
                    memory = LinkUse(f"mem:{name}", "rw")
            return _PathEnd(node, node.socket, memory)
        owner = self._engine_owner(name)
        if owner is not None:
            node = self._nodes[owner]
            return _PathEnd(node, node.socket, None)
        raise KeyError(f"no device, NIC, display or host named {name!r} on {self.name}")

    def _engine_owner(self, name: str) -> str | None:
        for disp in self.spec.displays:
            if disp.name == name:
                return disp.device
        if name.endswith(":import") and name in self.system.gpu_importers:
            return name[: -len(":import")]
        return None

    def path(self, src: str, dst: str) -> list[LinkUse]:
        """The links a byte crosses from ``src`` to ``dst``, in order (module docstring).

        ``src``/``dst``: a device, NIC, display, GPU importer (``"<dev>:import"``) or
        ``"host:<socket>"``. A link may appear twice (DRAM in a staged or APU copy). The result
        describes the physical route; whether P2PDMA allows it is :meth:`p2p_path_class`.
        """
        key = (src, dst)
        cached = self._paths.get(key)
        if cached is None:
            cached = self._paths[key] = tuple(self._compute_path(src, dst))
        return list(cached)

    def _compute_path(self, src: str, dst: str) -> list[LinkUse]:
        a = self._endpoint(src)
        b = self._endpoint(dst)
        uses: list[LinkUse] = []
        if a.memory is not None:
            uses.append(a.memory)
        if a.node is not None and a.node is b.node:
            pass  # same device: only its memory
        else:
            uses.extend(self._route(a, b))
        if b.memory is not None and not (
            a.node is not None and a.node is b.node and a.memory == b.memory
        ):
            uses.append(b.memory)
        return uses

    @staticmethod
    def _chain(node: TreeNode | None) -> list[TreeNode]:
        out: list[TreeNode] = []
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def _socket_hop(self, a: int, b: int) -> list[LinkUse]:
        if a == b:
            return []
        lo, hi = min(a, b), max(a, b)
        return [LinkUse(f"upi:{lo}-{hi}", f"{a}->{b}")]

    def _route(self, a: _PathEnd, b: _PathEnd) -> list[LinkUse]:
        chain_a = self._chain(a.node)
        chain_b = self._chain(b.node)
        common: TreeNode | None = None
        if a.node is not None and b.node is not None:
            in_b = {id(n): i for i, n in enumerate(chain_b)}
            for n in chain_a:
                if id(n) in in_b:
                    common = n
                    break
        if common is not None and common.kind == "switch":
            below_a = chain_a[: chain_a.index(common)]
            below_b = chain_b[: [id(n) for n in chain_b].index(id(common))]
            redirect = any(
                n.parent is not None and n.parent.acs_redirect for n in (*below_a, *below_b)
            )
            if not redirect:
                ups = [LinkUse(n.uplink, "up") for n in below_a if n.uplink]
                downs = [LinkUse(n.uplink, "down") for n in reversed(below_b) if n.uplink]
                return ups + downs
        ups = [LinkUse(n.uplink, "up") for n in chain_a if n.uplink]
        downs = [LinkUse(n.uplink, "down") for n in reversed(chain_b) if n.uplink]
        return ups + self._socket_hop(a.socket, b.socket) + downs

    def bottleneck(self, uses: list[LinkUse] | tuple[LinkUse, ...]) -> float:
        """The uncontended capacity of a path, bytes/s: the minimum over its links of
        capacity / (times the path crosses that link in that direction) -- so a staged
        transfer gets at most DRAM / 2 (``cost-model.md`` §1 item 5). ``inf`` for no links."""
        best = float("inf")
        for use, count in Counter(uses).items():
            best = min(best, self.links[use.link].capacity[use.direction] / count)
        return best

    def latency(self, uses: list[LinkUse] | tuple[LinkUse, ...]) -> float:
        """Sum of the latencies of the links crossed, seconds."""
        return sum(self.links[u.link].latency for u in uses)

    # -- NVLink and the PCIe distance between two endpoints --------------------------------------

    def nvlink_domain(self, device: str) -> NvlinkSpec | None:
        """The NVLink domain ``device`` belongs to, or None."""
        for nv in self.spec.nvlink:
            if device in nv.devices:
                return nv
        return None

    def nvlink_path(self, src: str, dst: str) -> list[LinkUse] | None:
        """The links a GPU-to-GPU copy over NVLink crosses -- ``src``'s memory, its NVLink port
        (or the bridge), ``dst``'s port, ``dst``'s memory -- or None when the two share no NVLink
        domain (``docs/cost-model/gpu.md`` §G1)."""
        nv = self.nvlink_domain(src)
        if nv is None or src == dst or dst not in nv.devices:
            return None
        uses: list[LinkUse] = []
        src_mem = self._endpoint(src).memory
        if src_mem is not None:
            uses.append(src_mem)
        if nv.switches:
            uses += [LinkUse(f"nvlink:{src}", "tx"), LinkUse(f"nvlink:{dst}", "rx")]
        else:
            a, b = nv.devices
            uses.append(LinkUse(f"nvlink:{a}-{b}", f"{src}->{dst}"))
        dst_mem = self._endpoint(dst).memory
        if dst_mem is not None:
            uses.append(dst_mem)
        return uses

    def pci_distance(self, a: str, b: str) -> PciDistance:
        """How two PCIe endpoints (devices, NICs) reach each other, as ``nvidia-smi topo -m``
        and NCCL name it: ``PIX`` (one switch), ``PXB`` (several switches, no host bridge),
        ``PHB`` (through one host bridge), ``NODE`` (host bridges of one socket), ``SYS``
        (across sockets); ``X`` for an endpoint and itself. NCCL enables GPUDirect RDMA and
        PCIe P2P up to ``PXB`` by default (``NCCL_NET_GDR_LEVEL``, ``NCCL_P2P_LEVEL``)."""
        na, nb = self._endpoint(a).node, self._endpoint(b).node
        if na is None or nb is None:
            raise KeyError(f"{a!r} and {b!r} must be devices or NICs")
        if na is nb:
            return "X"
        chain_b = {id(n) for n in self._chain(nb)}
        common = next((n for n in self._chain(na) if id(n) in chain_b), None)
        if common is not None and common.kind == "switch":
            return "PIX" if na.parent is common and nb.parent is common else "PXB"
        if common is not None:
            return "PHB"
        return "NODE" if na.socket == nb.socket else "SYS"

    # -- P2P ------------------------------------------------------------------------------------

    def _pci_client(self, name: str) -> Device:
        if name in self.system.nics:
            return self.system.nics[name].dev
        if name in self.system.displays:
            return self.system.displays[name].dev
        owner = self._engine_owner(name)
        if owner is not None:
            return self.pdevs[owner]
        if name in self.pdevs and name in self.system.exporters:
            return self.pdevs[name]
        raise KeyError(f"no importing device named {name!r} on {self.name}")

    def _provider(self, name: str) -> PciDev:
        if name not in self.system.exporters:
            raise KeyError(f"no exporting device named {name!r} on {self.name}")
        return self.pdevs[name]

    def p2p_path_class(self, exporter: str, importer: str) -> P2pPathClass | None:
        """How ``importer`` reaches ``exporter``'s memory peer-to-peer, or None if P2PDMA
        refuses (``pci_p2pdma_distance`` < 0: no whitelisted host bridge, pre-Zen/unlisted CPU,
        ``CONFIG_PCI_P2PDMA`` off).

        ``"switch"``: bus-address P2P below a common switch (map type BUS_ADDR);
        ``"root_complex"``: through the host bridge of one socket (THRU_HOST_BRIDGE);
        ``"cross_socket"``: through host bridges on different sockets; ``"local"``: the
        importer is a function of the exporting device itself (distance 0), e.g. its display
        (``cost-model.md`` §3.1, §3.2; ``kernel-semantics.md`` §8).
        """
        provider = self._provider(exporter)
        client = self._pci_client(importer)
        distance = pci_p2pdma_distance(provider, client)
        if distance < 0:
            return None
        if distance == 0:
            return "local"
        map_type = pci_p2pdma_map_type(provider, client)
        if map_type is PciP2pdmaMapType.BUS_ADDR:
            return "switch"
        if self.socket_of(exporter) == self.socket_of(importer):
            return "root_complex"
        return "cross_socket"

    def p2p_capacity(
        self, exporter: str, importer: str, *, nic_reads: bool = False
    ) -> float | None:
        """Uncontended pin-in-place rate, bytes/s (``cost-model.md`` §1 item 3), None if
        P2PDMA refuses the pair.

        From the PCIe mechanism (:mod:`pinlab.platform.pcie_model`) over
        :meth:`pcie_path` ``(importer, exporter)``: the importer *reading* device memory
        (``nic_reads``, a send) is bounded by one stream's outstanding reads over the read
        latency (a NIC's QP: ``nic.<model>.p2p_read_tags``; another device: a copy engine's
        ``gpucopy.ce_read_inflight``) and by the host bridge's P2P read forwarding; writing it
        (a receive) by the posted-write rate. For a NIC importer, the minimum with its port's
        payload rate (:func:`~pinlab.platform.rdma_model.wire_rate`)."""
        if self.p2p_path_class(exporter, importer) is None:
            return None
        path = self.pcie_path(importer, exporter)
        cost = self.cost
        if importer in self.system.nics:
            port = self.nic_port_model(importer)
            tags = rdma_model.read_tags(port, path)
            wire = rdma_model.wire_rate(cost, port)
        else:
            # another device reads with a copy engine's window (gpucopy.ce_read_inflight)
            tags = max(1, cost.gpucopy.ce_read_inflight // path.mrrs)
            wire = float("inf")
        if nic_reads:
            rate = pcie_model.read_rate(cost, path, tags)
        else:
            rate = pcie_model.path_write_rate(cost, path)
        return min(rate, wire)

    # -- what the mechanisms need ---------------------------------------------------------------

    def nic_port_model(self, nic: str) -> NicPort:
        """NIC ``nic`` as the RDMA mechanism sees it: its model (``nic.<model>``), line rate,
        link layer and MTU (the platform entry's, else the model's)."""
        spec = next((n for n in self.spec.nics if n.name == nic), None)
        if spec is None:
            raise KeyError(f"no NIC named {nic!r} on {self.name}")
        return nic_port(self.cost, spec)

    def nic_end(self, nic: str, memory: str, nbytes: int, *, write: bool, qps: int = 1) -> EndRate:
        """One end of a flow-level NIC transfer of ``nbytes`` messages on ``qps`` QPs
        (:func:`~pinlab.platform.rdma_model.send_end`, or with ``write``
        :func:`~pinlab.platform.rdma_model.recv_end`): NIC ``nic`` reading (or writing)
        ``memory`` -- a device (peer to peer) or ``"host:<socket>"``. Computed once per
        (NIC, memory, direction, size, QPs)."""
        key = (nic, memory, "w" if write else "r", int(nbytes), int(qps))
        end = self._ends.get(key)
        if end is None:
            port = self.nic_port_model(nic)
            path = self.pcie_path(nic, memory)
            if write:
                end = rdma_model.recv_end(self.cost, port, path, int(nbytes))
            else:
                host = self.pcie_path(nic, self.host_of(nic))
                end = rdma_model.send_end(self.cost, port, path, host, int(nbytes), qps=qps)
            self._ends[key] = end
        return end

    def pcie_path(self, initiator: str, target: str) -> PciePath:
        """The PCIe route from ``initiator`` (a device or NIC that issues the requests) to
        ``target`` (``"host:<socket>"`` or a device whose BAR it accesses), typed for
        :mod:`pinlab.platform.pcie_model`: the links in order with their generation, width,
        MPS and direction, the switches gone through, the host bridges crossed (with their CPU
        class, and whether they turn a P2P request around), socket crossings and the
        inter-socket capacity, the smallest MPS and the initiator's MRRS. Follows the same
        routing rule as :meth:`path` (module docstring)."""
        key = (initiator, target)
        cached = self._pcie_paths.get(key)
        if cached is None:
            cached = self._pcie_paths[key] = self._compute_pcie_path(initiator, target)
        return cached

    def _compute_pcie_path(self, initiator: str, target: str) -> PciePath:
        a = self._endpoint(initiator)
        b = self._endpoint(target)
        if a.node is None or a.node.kind not in ("device", "nic"):
            raise KeyError(f"{initiator!r}: expected a device or NIC as the initiator")
        to_host = b.node is None
        chain_a = self._chain(a.node)
        chain_b = [] if to_host else self._chain(b.node)
        common: TreeNode | None = None
        if not to_host:
            ids_b = {id(n) for n in chain_b}
            common = next((n for n in chain_a if id(n) in ids_b), None)
        below_a: list[TreeNode]
        below_b: list[TreeNode]
        bridges: list[HostBridgeCrossing] = []
        sockets = 0
        turn = (
            common is not None
            and common.kind == "switch"
            and not any(
                n.parent is not None and n.parent.acs_redirect
                for n in (
                    *chain_a[: chain_a.index(common)],
                    *chain_b[: [id(n) for n in chain_b].index(id(common))],
                )
            )
        )
        if turn and common is not None:
            below_a = chain_a[: chain_a.index(common)]
            below_b = chain_b[: [id(n) for n in chain_b].index(id(common))]
            switches = 1 + sum(1 for n in below_a[1:] if n.kind == "switch")
            switches += sum(1 for n in below_b[1:] if n.kind == "switch")
        else:
            below_a = [n for n in chain_a if n.kind != "host_bridge"]
            below_b = [n for n in chain_b if n.kind != "host_bridge"]
            switches = sum(1 for n in (*below_a[1:], *below_b[1:]) if n.kind == "switch")
            rc = self.spec.cpu.rc_class
            hb_a = chain_a[-1]
            bridges.append(HostBridgeCrossing(hb_a.name, hb_a.socket, rc, p2p=not to_host))
            if a.socket != b.socket:
                sockets = 1
                if not to_host:
                    hb_b = chain_b[-1]
                    bridges.append(HostBridgeCrossing(hb_b.name, hb_b.socket, rc, p2p=True))
        links: list[PcieLink] = []
        for n in below_a:
            if n.uplink is not None:
                links.append(self._pcie_link(n, "up"))
        for n in reversed(below_b):
            if n.uplink is not None:
                links.append(self._pcie_link(n, "down"))
        mps = min((link.mps for link in links), default=a.node.mps)
        completer = None
        if not to_host and b.node is not None and b.node.kind == "device":
            row = self.spec.device(b.node.name).bar_read
            try:
                completer = self.cost.pcie.bar_read.of(row)
            except KeyError as e:
                raise KeyError(f"{target}: {e.args[0]}") from None
        return PciePath(
            initiator=initiator,
            target=target,
            links=tuple(links),
            switches=switches,
            host_bridges=tuple(bridges),
            sockets=sockets,
            socket_link=self.spec.inter_socket.bandwidth if sockets else None,
            target_kind="host" if to_host else "device",
            completer_latency=completer,
            mps=mps,
            mrrs=a.node.mrrs,
        )

    def _pcie_link(self, node: TreeNode, direction: str) -> PcieLink:
        assert node.uplink is not None
        link = self.links[node.uplink]
        assert link.gen is not None and link.width is not None
        return PcieLink(
            node.uplink, link.gen, link.width, node.mps, "up" if direction == "up" else "down"
        )

    def __repr__(self) -> str:
        return (
            f"<Machine {self.name}: {len(self.system.exporters)} devices, "
            f"{len(self.system.nics)} NICs, {len(self.links)} links, "
            f"kernel {self.kernel.profile.name}>"
        )
