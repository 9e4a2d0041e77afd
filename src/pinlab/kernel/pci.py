"""The PCI tree P2PDMA walks: host bridges, root ports, switches and endpoint functions.

Models the parts of ``struct pci_host_bridge``, ``struct pci_bus`` and ``struct pci_dev``
(include/linux/pci.h) that ``drivers/pci/p2pdma.c`` reads (``kernel-semantics.md`` §8), plus the
platform facts it consults: the CPU vendor and family (``cpu_supports_p2pdma``), the host-bridge
whitelist (``pci_p2pdma_whitelist[]``) and ``CONFIG_PCI_P2PDMA``. The distance calculation itself
lives in :mod:`pinlab.kernel.p2pdma` (K-55 … K-58, K-83 … K-85).

Shape of the tree, as the kernel sees it::

    PciHostBridge "pci0000:00"            struct pci_host_bridge (a device, not a pci_dev)
      root bus 0000:00                     struct pci_bus, bus->self == NULL
        0000:00:00.0  host bridge function pci_host_bridge_dev(): vendor/device for the whitelist
        0000:00:01.0  root port            PCI_EXP_TYPE_ROOT_PORT, subordinate bus 0000:01
          0000:01:00.0  switch upstream    PCI_EXP_TYPE_UPSTREAM, subordinate (internal) bus
            0000:02:00.0  downstream port  PCI_EXP_TYPE_DOWNSTREAM, subordinate bus 0000:03
              0000:03:00.0  endpoint fn 0  PCI_EXP_TYPE_ENDPOINT
              0000:03:00.1  endpoint fn 1  (multi-function device: same bus and slot)
        0000:00:02.0  RCiEP                PCI_EXP_TYPE_RC_END, directly on the root bus

Every PCI function is a :class:`~pinlab.kernel.device.Device` (``struct device`` embedded in
``struct pci_dev``) whose parent is its upstream bridge, or the host bridge for functions on a root
bus, so ``find_parent_pci_dev`` works on any device hanging below a function.

Bus numbers and device (slot) numbers are assigned in creation order, deterministically: each new
bus takes the next free bus number of its PCI domain, each new device the next free slot on its
bus (slot 0 of a root bus belongs to the host bridge function). The kernel numbers buses
depth-first at enumeration time; pinlab's numbering differs for trees built out of order, which
matters to nothing but names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinlab.kernel.device import Device
from pinlab.kernel.pci_regs import PciAcs, PciExpType, pci_devfn

if TYPE_CHECKING:
    from pinlab.kernel.p2pdma import PciP2pdma
    from pinlab.kernel.pci_topology import PciTopology

__all__ = [
    "PciBus",
    "PciDev",
    "PciHostBridge",
    "find_parent_pci_dev",
    "pci_find_host_bridge",
    "pci_upstream_bridge",
]

_MAX_SLOT = 0x1F


class PciBus:
    """``struct pci_bus``: one bus number in one PCI domain and the functions on it.

    ``self`` is the bridge function whose secondary bus this is (``bus->self``), ``None`` for a root
    bus; ``host_bridge`` is what ``pci_find_host_bridge(bus)`` returns (the kernel walks up to the
    root bus to find it; pinlab stores it at creation). ``devices`` (``bus->devices``) is in
    devfn order, the order a bus scan adds the functions in.
    """

    __slots__ = ("_used_slots", "devices", "domain", "host_bridge", "number", "parent", "self")

    def __init__(
        self,
        host_bridge: PciHostBridge,
        number: int,
        parent: PciBus | None,
        bridge: PciDev | None,
    ) -> None:
        self.host_bridge = host_bridge
        self.domain = host_bridge.domain
        self.number = number
        self.parent = parent
        self.self = bridge
        self.devices: list[PciDev] = []
        self._used_slots = 0  # bit n: device number n is taken (a bus of a cluster: no set)

    @property
    def is_root(self) -> bool:
        """``pci_is_root_bus(bus)``: the bus has no parent bus."""
        return self.parent is None

    @property
    def name(self) -> str:
        """The bus name as sysfs shows it: ``dddd:bb``."""
        return f"{self.domain:04x}:{self.number:02x}"

    def alloc_slot(self, slot: int | None = None) -> int:
        """Take ``slot``, or the lowest free device number when ``slot`` is None."""
        used = self._used_slots
        if slot is None:
            slot = (~used & (used + 1)).bit_length() - 1  # the lowest clear bit
            if slot > _MAX_SLOT:
                raise ValueError(f"PCI bus {self.name} has no free device number left")
        elif not 0 <= slot <= _MAX_SLOT:
            raise ValueError(f"a PCI device number is 0 to {_MAX_SLOT}, not {slot}")
        elif used >> slot & 1:
            raise ValueError(f"PCI bus {self.name} already has a device {slot:02x}")
        self._used_slots = used | 1 << slot
        return slot

    def __repr__(self) -> str:
        return f"<PciBus {self.name}>"


class _EndpointParent:
    """What an endpoint device plugs into: a root or downstream port (:class:`PciDev`), whose
    link takes a ``PCI_EXP_TYPE_ENDPOINT``, or a host bridge (:class:`PciHostBridge`), whose
    root bus takes a ``PCI_EXP_TYPE_RC_END``. Each says which bus and type by
    :meth:`_endpoint_bus`."""

    __slots__ = ()

    def _endpoint_bus(self) -> tuple[PciBus, PciExpType]:
        raise NotImplementedError

    def add_endpoint(
        self,
        *,
        functions: int = 1,
        vendor: int = 0,
        device: int = 0,
        acs: PciAcs = PciAcs.NONE,
        label: str | None = None,
    ) -> PciDev:
        """Plug an endpoint device with ``functions`` functions in (a port's link, a host
        bridge's root bus).

        Returns function 0; the others are ``fn0.function(n)`` / ``fn0.functions``. With a
        ``label`` and several functions, function ``n`` is labelled ``f"{label}.{n}"``.
        """
        bus, pcie_type = self._endpoint_bus()
        return bus.host_bridge.topology.add_functions(
            bus, pcie_type, functions, vendor, device, acs, label
        )


class PciDev(Device, _EndpointParent):
    """``struct pci_dev``: one PCI function, with the fields P2PDMA reads.

    ``name`` is ``pci_name()`` (``dddd:bb:ss.f``); ``label`` is an optional human name (``"gpu0"``)
    that pinlab prints next to it. ``acs`` is the ACS Control register (``pci_bridge_has_acs_redir``
    reads it from config space on each walk, K-57); assigning it invalidates cached P2PDMA answers.
    ``subordinate`` is the secondary bus of a bridge (root port, switch upstream or downstream
    port). ``p2pdma`` is ``pdev->p2pdma`` (``struct pci_p2pdma``), created by
    :func:`pinlab.kernel.p2pdma.pci_p2pdma_setup` on the first query against this provider.

    Build the tree with the ``add_*`` methods rather than calling the constructor.
    """

    __slots__ = (
        "_acs",
        "bus",
        "devfn",
        "device",
        "label",
        "p2pdma",
        "pcie_type",
        "subordinate",
        "vendor",
    )

    def __init__(
        self,
        bus: PciBus,
        devfn: int,
        pcie_type: PciExpType | None,
        *,
        vendor: int = 0,
        device: int = 0,
        acs: PciAcs = PciAcs.NONE,
        label: str | None = None,
    ) -> None:
        bridge = bus.self
        parent: Device = bridge if bridge is not None else bus.host_bridge
        super().__init__(f"{bus.domain:04x}:{bus.number:02x}:{devfn >> 3:02x}.{devfn & 7}", parent)
        self.bus = bus
        self.devfn = devfn
        self.pcie_type = pcie_type
        self.vendor = vendor
        self.device = device
        self._acs = acs
        self.label = label
        self.subordinate: PciBus | None = None
        self.p2pdma: PciP2pdma | None = None

    # -- identity ---------------------------------------------------------------------------

    @property
    def domain(self) -> int:
        """``pci_domain_nr(pdev->bus)``."""
        return self.bus.domain

    @property
    def slot(self) -> int:
        """``PCI_SLOT(pdev->devfn)``."""
        return self.devfn >> 3

    @property
    def func(self) -> int:
        """``PCI_FUNC(pdev->devfn)``."""
        return self.devfn & 0x07

    @property
    def bdf(self) -> tuple[int, int, int, int]:
        """``(domain, bus, slot, function)``."""
        return (self.bus.domain, self.bus.number, self.slot, self.func)

    @property
    def topology(self) -> PciTopology:
        """The :class:`PciTopology` this function belongs to."""
        return self.bus.host_bridge.topology

    @property
    def host_bridge(self) -> PciHostBridge:
        """``pci_find_host_bridge(pdev->bus)``."""
        return self.bus.host_bridge

    @property
    def acs(self) -> PciAcs:
        """The ACS Control register (``PCI_ACS_CTRL``)."""
        return self._acs

    @acs.setter
    def acs(self, value: PciAcs) -> None:
        self._acs = value
        self.topology.bump_generation()

    @property
    def is_bridge(self) -> bool:
        """True for a PCI-to-PCI bridge (root port, switch port): it has a subordinate bus."""
        return self.subordinate is not None

    @property
    def functions(self) -> tuple[PciDev, ...]:
        """All functions of this function's device (same bus and slot), in function order."""
        return tuple(d for d in self.bus.devices if d.slot == self.slot)

    def function(self, func: int) -> PciDev:
        """Function ``func`` of this function's device; ``LookupError`` if it does not exist."""
        for d in self.bus.devices:
            if d.slot == self.slot and d.func == func:
                return d
        raise LookupError(f"{self.name}: device has no function {func}")

    @property
    def downstream_ports(self) -> tuple[PciDev, ...]:
        """The downstream ports of a switch upstream port (empty for anything else)."""
        if self.pcie_type is not PciExpType.UPSTREAM or self.subordinate is None:
            return ()
        return tuple(self.subordinate.devices)

    # -- builders -----------------------------------------------------------------------------

    def _link_bus(self, what: str) -> PciBus:
        """The secondary bus of this root port / downstream port, checking the link is free."""
        if self.pcie_type not in (PciExpType.ROOT_PORT, PciExpType.DOWNSTREAM):
            raise ValueError(
                f"{self.name}: {what} can only be added below a root or downstream port"
            )
        bus = self.subordinate
        assert bus is not None
        if bus.devices:
            raise ValueError(
                f"{self.name}: the PCIe link below this port already has a device "
                f"({bus.devices[0].name}); add a switch to fan out"
            )
        return bus

    def _endpoint_bus(self) -> tuple[PciBus, PciExpType]:
        """An endpoint plugs into this root or downstream port's link."""
        return self._link_bus("an endpoint"), PciExpType.ENDPOINT

    def add_switch(
        self,
        downstream_ports: int = 2,
        *,
        acs: PciAcs = PciAcs.NONE,
        downstream_acs: PciAcs = PciAcs.NONE,
        vendor: int = 0,
        device: int = 0,
        label: str | None = None,
    ) -> PciDev:
        """Plug a PCIe switch into this port's link; returns its upstream port.

        ``acs`` goes on the upstream port, ``downstream_acs`` on each of the ``downstream_ports``
        downstream ports (reach them via ``usp.downstream_ports``).
        """
        bus = self._link_bus("a switch")
        topo = self.topology
        usp = topo.pci_add_new_bus(
            topo.add_functions(bus, PciExpType.UPSTREAM, 1, vendor, device, acs, label)
        )
        for i in range(downstream_ports):
            usp.add_downstream_port(
                acs=downstream_acs,
                vendor=vendor,
                device=device,
                label=None if label is None else f"{label}.dsp{i}",
            )
        return usp

    def add_downstream_port(
        self,
        *,
        acs: PciAcs = PciAcs.NONE,
        vendor: int = 0,
        device: int = 0,
        label: str | None = None,
    ) -> PciDev:
        """Add one downstream port to the internal bus of this switch upstream port."""
        if self.pcie_type is not PciExpType.UPSTREAM or self.subordinate is None:
            raise ValueError(f"{self.name}: downstream ports belong to a switch upstream port")
        topo = self.topology
        return topo.pci_add_new_bus(
            topo.add_functions(
                self.subordinate, PciExpType.DOWNSTREAM, 1, vendor, device, acs, label
            )
        )

    def __repr__(self) -> str:
        kind = "host-bridge-fn" if self.pcie_type is None else self.pcie_type.name.lower()
        label = f" {self.label}" if self.label else ""
        return f"<PciDev {self.name}{label} {kind}>"


class PciHostBridge(Device, _EndpointParent):
    """``struct pci_host_bridge``: a root complex and its root bus.

    A host bridge is a ``struct device`` but not a ``pci_dev``. The whitelist identifies it by the
    vendor/device ID of ``pci_host_bridge_dev()``: the first function of its root bus, provided
    it sits at devfn 00.0 or (v5.19 on) is a Root Port (K-83, K-132). With a ``vendor``, the
    constructor puts a host bridge function (no PCIe capability) at 00.0. With ``vendor=None``
    there is none, and slot 0 goes to the first root port or RCiEP added without a ``slot``,
    whose IDs the whitelist then sees, as in the kernel; a root port added at a later ``slot``
    with slot 0 left empty is the Skylake-E layout that only v5.19 on identifies.
    """

    __slots__ = ("bus", "domain", "label", "topology")

    def __init__(
        self,
        topology: PciTopology,
        domain: int,
        bus_number: int,
        vendor: int | None,
        device: int,
        label: str | None,
    ) -> None:
        super().__init__(f"pci{domain:04x}:{bus_number:02x}")
        self.topology = topology
        self.domain = domain
        self.label = label
        self.bus = PciBus(self, bus_number, None, None)
        if vendor is not None:
            topology.add_functions(self.bus, None, 1, vendor, device, PciAcs.NONE, None)

    @property
    def vendor(self) -> int | None:
        """Vendor ID of ``pci_host_bridge_dev()``, ``None`` if it finds no function."""
        root = self.pci_host_bridge_dev()
        return None if root is None else root.vendor

    @property
    def device(self) -> int | None:
        """Device ID of ``pci_host_bridge_dev()``, ``None`` if it finds no function."""
        root = self.pci_host_bridge_dev()
        return None if root is None else root.device

    def pci_host_bridge_dev(self) -> PciDev | None:
        """``pci_host_bridge_dev(host)``: the function the P2PDMA whitelist identifies this host
        bridge by (K-83, K-132).

        The first function of the root bus (``bus->devices`` is in devfn order), if it sits at
        devfn 00.0 or -- with :attr:`PciTopology.whitelist_root_port` (v5.19 on) -- is a PCIe
        Root Port at any devfn; otherwise None. Before v5.19 a root bus whose first function is
        a Root Port at, say, 00:01.0 has no whitelist identity.
        """
        devices = self.bus.devices
        if not devices:
            return None
        root = devices[0]
        if root.devfn == pci_devfn(0, 0):
            return root
        if self.topology.whitelist_root_port and root.pcie_type is PciExpType.ROOT_PORT:
            return root
        return None

    def add_root_port(
        self,
        *,
        acs: PciAcs = PciAcs.NONE,
        vendor: int = 0,
        device: int = 0,
        label: str | None = None,
        slot: int | None = None,
    ) -> PciDev:
        """Add a root port (with its own secondary bus) to this host bridge's root bus, at
        device number ``slot`` (None: the lowest free one)."""
        topo = self.topology
        return topo.pci_add_new_bus(
            topo.add_functions(self.bus, PciExpType.ROOT_PORT, 1, vendor, device, acs, label, slot)
        )

    def _endpoint_bus(self) -> tuple[PciBus, PciExpType]:
        """An endpoint on the root bus is a Root Complex Integrated Endpoint (an APU's iGPU,
        say)."""
        return self.bus, PciExpType.RC_END

    def __repr__(self) -> str:
        root = self.pci_host_bridge_dev()
        ids = "no whitelist fn" if root is None else f"{root.vendor:04x}:{root.device:04x}"
        label = f" {self.label}" if self.label else ""
        return f"<PciHostBridge {self.name}{label} {ids}>"


def pci_upstream_bridge(pdev: PciDev) -> PciDev | None:
    """``pci_upstream_bridge(dev)``: the bridge above ``pdev``, ``None`` on a root bus.

    Root ports and RCiEPs (and the host bridge function) sit on a root bus and so have no
    upstream bridge. (SR-IOV's ``pci_physfn`` indirection is not modelled: no VFs.)
    """
    bus = pdev.bus
    if bus.is_root:
        return None
    return bus.self


def pci_find_host_bridge(bus: PciBus) -> PciHostBridge:
    """``pci_find_host_bridge(bus)``: the host bridge owning ``bus``'s hierarchy."""
    return bus.host_bridge


def find_parent_pci_dev(dev: Device) -> PciDev | None:
    """``find_parent_pci_dev()`` in drivers/pci/p2pdma.c: the nearest PCI function at or above.

    Walks ``dev->parent`` until a device for which ``dev_is_pci()`` holds; ``None`` if there is
    none (a virtual device, or a device below a host bridge but not below a function). K-55.
    """
    node: Device | None = dev
    while node is not None:
        if isinstance(node, PciDev):
            return node
        node = node.parent
    return None


PCI_BAR_SPAN = 1 << 41
"""The bus-address span pinlab gives each BAR (2 TiB): BARs are laid out per function."""


def pci_resource_start(pdev: PciDev, bar: int) -> int:
    """``pci_resource_start(pdev, bar)``: the bus address of BAR ``bar`` (0..5).

    pinlab assigns no resources, so the address is synthetic but deterministic and unique per
    function: 16 TiB per bus/devfn, :data:`PCI_BAR_SPAN` per BAR. Exporters of MMIO
    (vfio-pci, the RDMA dma-buf exporter) only need ranges that do not collide.
    """
    if not 0 <= bar < 6:
        raise ValueError(f"BAR index {bar} is not 0..5")
    return ((0x100 + (pdev.bus.number << 8 | pdev.devfn)) << 44) + bar * PCI_BAR_SPAN
