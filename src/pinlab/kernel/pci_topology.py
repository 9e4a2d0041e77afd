"""A machine's PCI hierarchy as one registry, with the platform facts P2PDMA consults.

:class:`PciTopology` builds the tree of :mod:`pinlab.kernel.pci` (host bridges, their root
buses, bridges and functions, numbered as the module docstring there says), finds functions
by address or label (``pci_get_domain_bus_and_slot``), holds the platform facts
``drivers/pci/p2pdma.c`` reads (``boot_cpu_data``, ``pci_p2pdma_whitelist[]``,
``CONFIG_PCI_P2PDMA`` and the lookup rules of the running release) and the kernel log lines
P2PDMA printed. A change of any fact bumps :attr:`PciTopology.generation` (K-84).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Generic, Self, TypeVar, cast, overload

from pinlab.kernel.device import Device
from pinlab.kernel.pci import PciBus, PciDev, PciHostBridge
from pinlab.kernel.pci_ids import (
    PCI_P2PDMA_WHITELIST_V5_18,
    PCI_VENDOR_ID_INTEL,
    X86_VENDOR_INTEL,
    P2pdmaWhitelistEntry,
)
from pinlab.kernel.pci_regs import PciAcs, PciExpType, pci_devfn

__all__ = ["PciTopology"]

T = TypeVar("T")

_MAX_BUS = 0xFF
_MAX_FUNCTIONS = 8


class _PlatformFact(Generic[T]):
    """A platform fact of :class:`PciTopology` that P2PDMA consults: setting it bumps the
    topology's :attr:`~PciTopology.generation` (the cached map types depend on it, K-84).
    The value lives in the topology's slot named after the fact with a leading underscore."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc
        self._slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = "_" + name

    @overload
    def __get__(self, topo: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, topo: PciTopology, owner: type | None = None) -> T: ...
    def __get__(self, topo: PciTopology | None, owner: type | None = None) -> Self | T:
        if topo is None:
            return self
        return cast(T, getattr(topo, self._slot))

    def __set__(self, topo: PciTopology, value: T) -> None:
        setattr(topo, self._slot, value)
        topo.bump_generation()


class PciTopology:
    """A machine's PCI hierarchy plus the platform facts P2PDMA consults.

    * ``cpu_vendor`` / ``cpu_family``: ``boot_cpu_data.x86_vendor`` / ``.x86``, read by
      ``cpu_supports_p2pdma`` (AMD family ≥ 0x17 allows host-bridge P2P, K-83).
    * ``whitelist``: ``pci_p2pdma_whitelist[]``; the default, :data:`PCI_P2PDMA_WHITELIST_V5_18`,
      is that of v5.18 to v7.0 (K-133), the releases the ``whitelist_root_port`` default models;
      a machine built from a kernel profile gets its release's table.
    * ``p2pdma_enabled``: ``CONFIG_PCI_P2PDMA``; without it the distance stubs return -1 (K-55).
    * ``whitelist_root_port``: the kernel is v5.19 or later, whose ``pci_host_bridge_dev`` also
      accepts a first root-bus function that is a Root Port at any devfn (K-132); the profile's
      ``p2pdma_whitelist_root_port``.
    * ``whitelist_any_device``: the kernel is v7.1 or later, whose lookup reads an entry's
      ``PCI_ANY_ID`` device as every device of its vendor (K-134); before, IDs are compared as
      they are. Default False, with the v5.18 table.
    * ``log``: the kernel log lines P2PDMA printed (``pci_warn`` / ``dev_warn``), oldest first.

    Changing any of these, or a function's ``acs``, bumps :attr:`generation`, which drops every
    provider's cached map types (:mod:`pinlab.kernel.p2pdma`, K-84) on its next query.
    """

    __slots__ = (
        "_cpu_family",
        "_cpu_vendor",
        "_generation",
        "_next_bus",
        "_p2pdma_enabled",
        "_whitelist",
        "_whitelist_any_device",
        "_whitelist_root_port",
        "by_name",
        "host_bridges",
        "log",
    )

    def __init__(
        self,
        *,
        cpu_vendor: str = X86_VENDOR_INTEL,
        cpu_family: int = 6,
        whitelist: Sequence[P2pdmaWhitelistEntry] = PCI_P2PDMA_WHITELIST_V5_18,
        p2pdma_enabled: bool = True,
        whitelist_root_port: bool = True,
        whitelist_any_device: bool = False,
    ) -> None:
        self._cpu_vendor = cpu_vendor
        self._cpu_family = cpu_family
        self._whitelist = tuple(whitelist)
        self._p2pdma_enabled = p2pdma_enabled
        self._whitelist_root_port = whitelist_root_port
        self._whitelist_any_device = whitelist_any_device
        self._generation = 0
        self._next_bus: dict[int, int] = {}
        self.host_bridges: list[PciHostBridge] = []
        self.by_name: dict[str, PciDev] = {}
        self.log: list[str] = []

    # -- platform facts -----------------------------------------------------------------------

    cpu_vendor: _PlatformFact[str] = _PlatformFact(
        """CPUID vendor string of the boot CPU (``"AuthenticAMD"``, ``"GenuineIntel"``, …)."""
    )
    cpu_family: _PlatformFact[int] = _PlatformFact(
        """CPU family (``c->x86``), e.g. 0x15 for pre-Zen AMD, 0x17/0x19 for Zen."""
    )

    @property
    def whitelist(self) -> tuple[P2pdmaWhitelistEntry, ...]:
        """The host-bridge whitelist, searched in order (first vendor/device match decides)."""
        return self._whitelist

    @whitelist.setter
    def whitelist(self, value: Sequence[P2pdmaWhitelistEntry]) -> None:
        self._whitelist = tuple(value)
        self.bump_generation()

    p2pdma_enabled: _PlatformFact[bool] = _PlatformFact("""``IS_ENABLED(CONFIG_PCI_P2PDMA)``.""")
    whitelist_root_port: _PlatformFact[bool] = _PlatformFact(
        """v5.19 on: ``pci_host_bridge_dev`` also accepts a Root Port at any devfn (K-132)."""
    )
    whitelist_any_device: _PlatformFact[bool] = _PlatformFact(
        """v7.1 on: an entry's ``PCI_ANY_ID`` device matches every device (K-134)."""
    )

    @property
    def generation(self) -> int:
        """Bumped on every change that can alter a P2PDMA answer."""
        return self._generation

    def bump_generation(self) -> None:
        """A fact or a function's ``acs`` changed: every cached P2PDMA answer is stale."""
        self._generation += 1

    # -- building -----------------------------------------------------------------------------

    def add_host_bridge(
        self,
        vendor: int | None = PCI_VENDOR_ID_INTEL,
        device: int = 0,
        *,
        domain: int = 0,
        label: str | None = None,
    ) -> PciHostBridge:
        """Add a host bridge with a new root bus in ``domain``.

        ``vendor``/``device`` are the IDs of its devfn 00.0 host bridge function, which the
        whitelist matches (``vendor=None``: no such function, see :class:`PciHostBridge`). The
        root bus takes the next free bus number of ``domain``.
        """
        hb = PciHostBridge(self, domain, self._alloc_bus(domain), vendor, device, label)
        self.host_bridges.append(hb)
        return hb

    def _alloc_bus(self, domain: int) -> int:
        number = self._next_bus.get(domain, 0)
        if number > _MAX_BUS:
            raise ValueError(f"PCI domain {domain:04x} has no free bus number left")
        self._next_bus[domain] = number + 1
        return number

    def _register(self, pdev: PciDev) -> PciDev:
        devices = pdev.bus.devices
        at = next((i for i, d in enumerate(devices) if d.devfn > pdev.devfn), len(devices))
        devices.insert(at, pdev)
        self.by_name[pdev.name] = pdev
        return pdev

    def add_functions(
        self,
        bus: PciBus,
        pcie_type: PciExpType | None,
        functions: int,
        vendor: int,
        device: int,
        acs: PciAcs,
        label: str | None,
        slot: int | None = None,
    ) -> PciDev:
        """Put a device of ``functions`` functions (``pcie_type``, the IDs, ``acs``) on
        ``bus`` at device number ``slot`` (None: the lowest free one); returns function 0.
        The tree's own ``add_*`` methods call it, each with the type its place takes."""
        if not 1 <= functions <= _MAX_FUNCTIONS:
            raise ValueError(f"a PCI device has 1 to {_MAX_FUNCTIONS} functions, not {functions}")
        slot = bus.alloc_slot(slot)
        first: PciDev | None = None
        for fn in range(functions):
            fn_label = label if label is None or functions == 1 else f"{label}.{fn}"
            pdev = self._register(
                PciDev(
                    bus,
                    pci_devfn(slot, fn),
                    pcie_type,
                    vendor=vendor,
                    device=device,
                    acs=acs,
                    label=fn_label,
                )
            )
            if first is None:
                first = pdev
        assert first is not None
        return first

    def pci_add_new_bus(self, bridge: PciDev) -> PciDev:
        """``pci_add_new_bus()``: give ``bridge`` (a root, upstream or downstream port) its
        secondary bus, numbered next in its domain; returns the bridge."""
        bus = bridge.bus
        bridge.subordinate = PciBus(bus.host_bridge, self._alloc_bus(bus.domain), bus, bridge)
        return bridge

    # -- lookup -------------------------------------------------------------------------------

    def pci_get_domain_bus_and_slot(self, domain: int, bus: int, devfn: int) -> PciDev | None:
        """``pci_get_domain_bus_and_slot()``: the function at that address, or ``None``."""
        return self.by_name.get(f"{domain:04x}:{bus:02x}:{devfn >> 3:02x}.{devfn & 7}")

    def __getitem__(self, name: str) -> PciDev:
        """The function named ``dddd:bb:ss.f`` or labelled ``name``; ``KeyError`` otherwise."""
        pdev = self.by_name.get(name)
        if pdev is not None:
            return pdev
        for pdev in self.by_name.values():
            if pdev.label == name:
                return pdev
        raise KeyError(name)

    def __iter__(self) -> Iterator[PciDev]:
        """All PCI functions in creation order (``for_each_pci_dev``)."""
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)

    # -- kernel log -----------------------------------------------------------------------------

    def dev_warn(self, dev: Device, message: str) -> None:
        """Record ``dev_warn(dev, …)`` / ``pci_warn(pdev, …)`` in :attr:`log`.

        The prefix follows ``dev_printk``: ``"pci 0000:03:00.0: "`` for a PCI function with no
        driver bound, ``"<name>: "`` for any other device.
        """
        prefix = f"pci {dev.name}" if isinstance(dev, PciDev) else dev.name
        self.log.append(f"{prefix}: {message}")

    def __repr__(self) -> str:
        return (
            f"<PciTopology {len(self.host_bridges)} host bridge(s), {len(self)} function(s), "
            f"cpu {self._cpu_vendor} family {self._cpu_family:#x}>"
        )
