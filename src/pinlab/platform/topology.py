"""Declarative platform descriptions and the machines built from them.

A :class:`PlatformSpec` (pydantic, frozen) describes one node: the CPU, host DRAM per socket,
root complexes (host bridges, whose vendor/device IDs the P2PDMA whitelist matches), PCIe
switches, devices (each an exporter from :data:`pinlab.drivers.EXPORTERS`), RDMA NICs, displays,
the inter-socket link, and optional cost-model overrides that belong to the platform (the
desktop's 0.45 root-complex P2P factor, ``cost-model.md`` §9.3). :func:`build` turns it, with a
:class:`~pinlab.kernel.kernel.Kernel` and a :class:`~pinlab.platform.cost.CostModel`, into a
:class:`Machine`:

* ``machine.pci``: the :class:`~pinlab.kernel.pci.PciTopology` (so P2PDMA answers come from the
  same description; ``p2pdma_enabled`` = ``kernel.profile.pci_p2pdma``). Each host bridge gets
  its 00.0 function with the spec's IDs; each child of a host bridge gets its own root port;
  each child of a switch its own downstream port (``acs_redirect`` sets the ACS redirect bits on
  that switch's downstream ports); ``rciep`` devices sit on the root bus.
* ``machine.system``: a :class:`~pinlab.uapi.system.System` holding the drivers by name:
  exporters, NICs (EFA-like or mlx5-like), displays, and a GPU importer named
  ``"<device>:import"`` for every amdgpu-family device.
* ``machine.links``: the link graph, :class:`Link` by name, each with a capacity per direction:

  - ``pcie:<x>`` (``up`` = toward the host, ``down``): the PCIe link between ``x`` (a switch,
    device or NIC) and its parent port; ``cost.pcie_rate(gen, width, direction)`` with
    gen/width the lower of the child's and (for a switch parent) the switch's (§2.1), unless
    the spec's ``link`` overrides it;
  - ``dram:<s>`` (``rw``): socket ``s``'s DRAM, theoretical bandwidth × ``dram.efficiency``
    (§5); reads and writes share it;
  - ``mem:<d>`` (``rw``): device ``d``'s memory, ``memory_bandwidth`` ×
    ``hbm.copy_efficiency`` (§8), when the spec gives a bandwidth;
  - ``upi:<a>-<b>`` (``a->b``, ``b->a``): the inter-socket link between sockets ``a`` < ``b``;
  - ``net:<n>`` (``tx``, ``rx``): NIC ``n``'s network port, line rate × ``nic.efficiency``
    (§4).

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
   the root complex itself is not a link (its cost is the P2P factor, §3.1);
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

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from pinlab.drivers import EXPORTERS
from pinlab.drivers.amdgpu import AmdgpuDevice
from pinlab.drivers.base import ExporterDriver
from pinlab.drivers.display import DisplayEngine
from pinlab.drivers.efa import EfaDevice
from pinlab.drivers.gpu_import import GpuImporter
from pinlab.drivers.mlx5 import Mlx5Device
from pinlab.drivers.rdma import RdmaDevice
from pinlab.errors import ConfigError
from pinlab.kernel.device import Device
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.p2pdma import PciP2pdmaMapType, pci_p2pdma_distance, pci_p2pdma_map_type
from pinlab.kernel.pci import (
    PCI_ANY_ID,
    PCI_P2PDMA_WHITELIST_V6_0,
    X86_VENDOR_AMD,
    X86_VENDOR_INTEL,
    P2pdmaWhitelistEntry,
    P2pdmaWhitelistFlag,
    PciAcs,
    PciDev,
    PciHostBridge,
    PciTopology,
)
from pinlab.kernel.profile import KernelProfile
from pinlab.platform.cost import CostModel, P2pPathClass
from pinlab.uapi.system import System
from pinlab.units import Duration, LineRate, PciId, Rate, Size

__all__ = [
    "CpuSpec",
    "DeviceSpec",
    "DisplaySpec",
    "DramSpec",
    "HostBridgeSpec",
    "InterSocketSpec",
    "Link",
    "LinkSpec",
    "LinkUse",
    "Machine",
    "NicSpec",
    "PlatformSpec",
    "SwitchSpec",
    "WhitelistEntrySpec",
    "build",
    "make_kernel",
]

# -- field types ---------------------------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]*$")


def _check_name(value: object) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise PydanticCustomError(
            "pinlab_name",
            "expected a name of letters, digits, '_', '.', '+' or '-' starting with a letter, "
            "found {found}",
            {"found": repr(value)},
        )
    return value


Name = Annotated[str, BeforeValidator(_check_name)]
"""A device/switch/bridge name: used in link names (``pcie:<name>``) and on the command line."""


def _cpu_family(value: object) -> int:
    try:
        n = int(value, 0) if isinstance(value, str) else value
    except ValueError:
        n = None
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 0xFF:
        raise PydanticCustomError(
            "pinlab_family",
            'expected a CPU family number like 6 or "0x19", found {found}',
            {"found": repr(value)},
        )
    return n


CpuFamily = Annotated[
    int, BeforeValidator(_cpu_family), PlainSerializer(lambda n: f"0x{n:x}", return_type=str)
]

PcieGen = Literal[3, 4, 5]
PcieWidth = Literal[1, 2, 4, 8, 16]


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- the description ------------------------------------------------------------------------------


class CpuSpec(_Spec):
    """The host CPU: what ``cpu_supports_p2pdma()`` reads (``kernel-semantics.md`` §8.3).

    ``vendor`` ``"amd"`` with ``family`` ≥ 0x17 (Zen) routes P2P through the host bridge
    whatever the whitelist says; ``"intel"`` (family 6) depends on the whitelist.
    """

    vendor: Literal["intel", "amd", "other"] = Field(
        default="intel", description="CPU vendor (CPUID GenuineIntel / AuthenticAMD)"
    )
    family: CpuFamily = Field(
        default=6, description="CPU family (boot_cpu_data.x86): 6 Intel, 0x19 Zen 3/4"
    )
    model: str = Field(default="", description="free text, for reports")
    sockets: int = Field(default=1, ge=1, le=8, description="number of sockets (NUMA nodes)")

    @property
    def x86_vendor(self) -> str:
        """The CPUID vendor string the PCI model takes."""
        return {"intel": X86_VENDOR_INTEL, "amd": X86_VENDOR_AMD}.get(self.vendor, "Other")


class DramSpec(_Spec):
    """Host DRAM of each socket (``cost-model.md`` §5 table; §9 presets)."""

    size: Size = Field(description="memory per socket")
    bandwidth: Rate = Field(
        description="theoretical bandwidth per socket (8 B × MT/s × channels); "
        "usable = × dram.efficiency"
    )


class HostBridgeSpec(_Spec):
    """A root complex (``struct pci_host_bridge``) on a socket.

    ``vendor``/``device`` are the IDs of its 00.0 function, which the P2PDMA whitelist matches
    (Skylake-E 0x2030–0x2033 are listed; ``kernel-semantics.md`` §8.3).
    """

    name: Name
    socket: int = Field(default=0, ge=0, description="socket (NUMA node) of this root complex")
    vendor: PciId = Field(default=0x8086, description="host bridge function vendor ID")
    device: PciId = Field(default=0, description="host bridge function device ID")


class LinkSpec(_Spec):
    """Overrides for one PCIe link; unset fields are derived from gen × width (§2.1)."""

    up: Rate | None = Field(default=None, description="device → host capacity")
    down: Rate | None = Field(default=None, description="host → device capacity")
    latency: Duration | None = Field(default=None, description="one-way latency (default 0)")


class SwitchSpec(_Spec):
    """A PCIe switch below a host bridge (on its own root port) or below another switch.

    ``gen``/``width`` are its upstream link's; downstream ports are created per child.
    ``acs_redirect`` sets ACS P2P redirect on the downstream ports, forcing peer traffic between
    its children up to the root complex (``kernel-semantics.md`` §8.2 item 4).
    """

    name: Name
    parent: Name = Field(description="host bridge or switch this switch hangs below")
    gen: PcieGen = 4
    width: PcieWidth = 16
    acs_redirect: bool = False
    vendor: PciId = Field(default=0x10B5, description="switch vendor ID (default Broadcom/PLX)")
    device: PciId = 0
    link: LinkSpec | None = None


class DeviceSpec(_Spec):
    """An accelerator or GPU driven by an exporter from :data:`pinlab.drivers.EXPORTERS`.

    ``memory`` is the device memory the driver manages (HBM, VRAM, LMEM, an APU's carve-out);
    ``gtt``/``system`` size the TTM GTT and SYSTEM domains where the driver has them (driver
    defaults when unset). ``bar`` is the CPU/peer-visible BAR window: ``pin.bar1_bytes``
    (``cost-model.md`` §6.3) -- a datacenter part's BAR equals its memory (unset), a consumer
    part's is typically ``pin.bar1_consumer`` (256 MiB); the nvidia-compute model enforces it,
    amdgpu's model does not yet (``drivers/amdgpu.py``). ``driver_options`` are passed to the
    driver constructor as keyword arguments (``strict_p2p``, ``dram_page_size`` ...).
    """

    name: Name
    driver: str = Field(description="exporter name in pinlab.drivers.EXPORTERS")
    parent: Name = Field(description="host bridge or switch the device hangs below")
    memory: Size = Field(description="device memory (HBM/VRAM/LMEM/carve-out)")
    memory_bandwidth: Rate | None = Field(default=None, description="spec device-memory bandwidth")
    gtt: Size | None = None
    system: Size | None = None
    bar: Size | None = Field(default=None, description="BAR window (default: = memory)")
    gen: PcieGen = 4
    width: PcieWidth = 16
    rciep: bool = Field(
        default=False, description="root-complex integrated endpoint (an APU's iGPU)"
    )
    carve_out: bool | None = Field(
        default=None, description="device memory is carved out of host DRAM (default: driver 'apu')"
    )
    gpu_import: bool | None = Field(
        default=None, description="register a GPU importer too (default: amdgpu-family drivers)"
    )
    vendor: PciId = 0
    device: PciId = 0
    link: LinkSpec | None = None
    driver_options: dict[str, bool | int | str] = Field(default_factory=dict)

    @field_validator("driver")
    @classmethod
    def _known_driver(cls, value: str) -> str:
        if value not in EXPORTERS:
            raise PydanticCustomError(
                "pinlab_driver",
                "expected an exporter driver ({expected}), found {found}",
                {"expected": ", ".join(sorted(EXPORTERS)), "found": repr(value)},
            )
        return value

    @property
    def is_carve_out(self) -> bool:
        """Whether device memory is host DRAM (``carve_out``, default for the APU driver)."""
        return self.driver == "apu" if self.carve_out is None else self.carve_out

    @property
    def bar_size(self) -> int:
        """The BAR window in bytes (``bar``, or the whole memory)."""
        return self.memory if self.bar is None else self.bar


class NicSpec(_Spec):
    """An RDMA NIC: ``efa`` (pinned dma-buf MRs only) or ``mlx5`` (ODP-capable).

    ``line_rate`` defaults to ``nic.line_rate`` (``cost-model.md`` §4). ``driver_options`` go
    to the driver constructor (EFA: ``rdma_write``, ``revocable`` (7.1 only); mlx5:
    ``ignore_move_notify``).
    """

    name: Name
    driver: Literal["efa", "mlx5"]
    parent: Name = Field(description="host bridge or switch the NIC hangs below")
    line_rate: LineRate | None = None
    odp: bool = Field(default=False, description="on-demand paging (mlx5 only)")
    gen: PcieGen = 4
    width: PcieWidth = 16
    vendor: PciId = 0
    device: PciId = 0
    link: LinkSpec | None = None
    driver_options: dict[str, bool | int | str] = Field(default_factory=dict)


class DisplaySpec(_Spec):
    """A display engine (static importer) on a device's PCI function."""

    name: Name
    device: Name = Field(description="the device whose display block this is")


class InterSocketSpec(_Spec):
    """The link between sockets (UPI / Infinity Fabric), per direction.

    Default: two UPI links at 10.4 GT/s × 2 B = 41.6 GB/s per direction [assumption: not in
    ``cost-model.md``; remote-socket effects are the numa.* and p2p.factor.cross_socket
    multipliers, §2.2, §3.1].
    """

    bandwidth: Rate = Field(default=41.6e9, description="capacity per direction")
    latency: Duration = Field(default=0.0, description="one-way latency")


class WhitelistEntrySpec(_Spec):
    """A ``pci_p2pdma_whitelist[]`` entry (``kernel-semantics.md`` §8.3)."""

    vendor: PciId
    device: PciId | Literal["any"]
    same_host_bridge: bool = False

    def entry(self) -> P2pdmaWhitelistEntry:
        """The kernel-model entry."""
        device = PCI_ANY_ID if self.device == "any" else self.device
        flags = (
            P2pdmaWhitelistFlag.REQ_SAME_HOST_BRIDGE
            if self.same_host_bridge
            else P2pdmaWhitelistFlag.NONE
        )
        return P2pdmaWhitelistEntry(self.vendor, device, flags)


_DEFAULT_COST: list[CostModel] = []


def _default_cost() -> CostModel:
    """A shared ``CostModel()`` for validating platforms' cost overrides."""
    if not _DEFAULT_COST:
        _DEFAULT_COST.append(CostModel())
    return _DEFAULT_COST[0]


def _ref_error(loc: tuple[str | int, ...], expected: str, found: object) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError(
            "pinlab_ref",
            "expected {expected}, found {found}",
            {"expected": expected, "found": repr(found)},
        ),
        loc=loc,
        input=found,
    )


class PlatformSpec(_Spec):
    """One node: CPU, DRAM, PCIe tree, devices, NICs, displays (module docstring).

    Cross-references are checked: names are unique; parents name a host bridge or switch;
    ``rciep`` devices hang below a host bridge; displays name a device; EFA has no ODP; host
    bridges sit on existing sockets; ``cost_overrides`` are valid cost-model keys and values.
    """

    kind: Literal["node"] = "node"
    name: Name
    description: str = ""
    kernel: str | None = Field(
        default=None, description="suggested kernel profile (§9 'kernel preset')"
    )
    cpu: CpuSpec = Field(default_factory=CpuSpec)
    dram: DramSpec
    host_bridges: tuple[HostBridgeSpec, ...]
    switches: tuple[SwitchSpec, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    nics: tuple[NicSpec, ...] = ()
    displays: tuple[DisplaySpec, ...] = ()
    inter_socket: InterSocketSpec = Field(default_factory=InterSocketSpec)
    p2pdma_whitelist: tuple[WhitelistEntrySpec, ...] | None = Field(
        default=None, description="host-bridge whitelist (default: the ≈6.0 kernel's)"
    )
    cost_overrides: dict[str, bool | int | float | str] = Field(
        default_factory=dict, description="cost-model keys this platform changes (§9)"
    )

    @model_validator(mode="after")
    def _check_references(self) -> PlatformSpec:
        errors: list[InitErrorDetails] = []
        seen: dict[str, str] = {}
        groups: tuple[tuple[str, tuple[Any, ...]], ...] = (
            ("host_bridges", self.host_bridges),
            ("switches", self.switches),
            ("devices", self.devices),
            ("nics", self.nics),
            ("displays", self.displays),
        )
        for group, items in groups:
            for i, item in enumerate(items):
                where = f"{group}[{i}]"
                if item.name in seen:
                    errors.append(
                        _ref_error(
                            (group, i, "name"), f"a unique name (also {seen[item.name]})", item.name
                        )
                    )
                seen.setdefault(item.name, where)
        if not self.host_bridges:
            errors.append(_ref_error(("host_bridges",), "at least one host bridge", []))
        bridges = {hb.name for hb in self.host_bridges}
        switches = {sw.name: sw for sw in self.switches}
        for i, hb in enumerate(self.host_bridges):
            if hb.socket >= self.cpu.sockets:
                errors.append(
                    _ref_error(
                        ("host_bridges", i, "socket"),
                        f"a socket below cpu.sockets = {self.cpu.sockets}",
                        hb.socket,
                    )
                )
        parent_expected = "the name of a host bridge or switch"
        for i, sw in enumerate(self.switches):
            if sw.parent not in bridges and sw.parent not in switches:
                errors.append(_ref_error(("switches", i, "parent"), parent_expected, sw.parent))
            # no cycles
            seen_chain = {sw.name}
            node = switches.get(sw.parent)
            while node is not None:
                if node.name in seen_chain:
                    errors.append(
                        _ref_error(
                            ("switches", i, "parent"), "a parent chain without a loop", sw.parent
                        )
                    )
                    break
                seen_chain.add(node.name)
                node = switches.get(node.parent)
        for i, dev in enumerate(self.devices):
            if dev.rciep and dev.parent not in bridges:
                errors.append(
                    _ref_error(
                        ("devices", i, "parent"),
                        "the name of a host bridge (an rciep sits on the root bus)",
                        dev.parent,
                    )
                )
            elif dev.parent not in bridges and dev.parent not in switches:
                errors.append(_ref_error(("devices", i, "parent"), parent_expected, dev.parent))
        for i, nic in enumerate(self.nics):
            if nic.parent not in bridges and nic.parent not in switches:
                errors.append(_ref_error(("nics", i, "parent"), parent_expected, nic.parent))
            if nic.odp and nic.driver == "efa":
                errors.append(
                    _ref_error(("nics", i, "odp"), "false for driver 'efa' (EFA has no ODP)", True)
                )
        devices = {d.name for d in self.devices}
        for i, disp in enumerate(self.displays):
            if disp.device not in devices:
                errors.append(
                    _ref_error(("displays", i, "device"), "the name of a device", disp.device)
                )
        if self.cost_overrides:
            try:
                _default_cost().with_overrides(self.cost_overrides)
            except ConfigError as e:
                errors.append(
                    InitErrorDetails(
                        type=PydanticCustomError("pinlab_cost", "{msg}", {"msg": e.message}),
                        loc=("cost_overrides", e.where),
                        input=self.cost_overrides.get(e.where),
                    )
                )
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    # -- queries on the description ----------------------------------------------------------

    def device(self, name: str) -> DeviceSpec:
        """The device named ``name`` (``KeyError`` otherwise)."""
        for d in self.devices:
            if d.name == name:
                return d
        raise KeyError(name)

    def nic(self, name: str) -> NicSpec:
        """The NIC named ``name`` (``KeyError`` otherwise)."""
        for n in self.nics:
            if n.name == name:
                return n
        raise KeyError(name)

    def socket_of(self, name: str) -> int:
        """The socket a host bridge, switch, device, NIC or display hangs below."""
        parents: dict[str, str] = {}
        for group in (self.switches, self.devices, self.nics):
            for item in group:
                parents[item.name] = item.parent
        for disp in self.displays:
            parents[disp.name] = disp.device
        sockets = {hb.name: hb.socket for hb in self.host_bridges}
        node = name
        for _ in range(len(parents) + 1):
            if node in sockets:
                return sockets[node]
            if node not in parents:
                break
            node = parents[node]
        raise KeyError(name)

    @property
    def host_memory(self) -> int:
        """Total host DRAM, bytes."""
        return self.dram.size * self.cpu.sockets

    def whitelist(self) -> tuple[P2pdmaWhitelistEntry, ...]:
        """The whitelist entries the PCI model gets."""
        if self.p2pdma_whitelist is None:
            return PCI_P2PDMA_WHITELIST_V6_0
        return tuple(e.entry() for e in self.p2pdma_whitelist)


# -- the built machine -----------------------------------------------------------------------------


class LinkUse(NamedTuple):
    """One crossing of a link in one direction."""

    link: str
    direction: str

    @property
    def key(self) -> str:
        """``"<link>/<direction>"``: the name of the directed resource (``pcie:sw0/up``)."""
        return f"{self.link}/{self.direction}"


@dataclass(frozen=True, slots=True, eq=False)
class Link:
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

    def use(self, direction: str) -> LinkUse:
        """A :class:`LinkUse` of this link (``KeyError`` for a direction it does not have)."""
        if direction not in self.capacity:
            raise KeyError(f"link {self.name} has no direction {direction!r}")
        return LinkUse(self.name, direction)


@dataclass(slots=True, eq=False)
class _Node:
    name: str
    kind: str  # host_bridge, switch, device, nic
    parent: _Node | None
    socket: int
    uplink: str | None
    acs_redirect: bool = False
    depth: int = 0


@dataclass(slots=True, eq=False)
class _Endpoint:
    node: _Node | None
    socket: int
    memory: LinkUse | None


@dataclass(slots=True, eq=False)
class Machine:
    """A built platform: kernel, PCI tree, drivers, and the link graph (module docstring).

    Attributes:
        spec: the :class:`PlatformSpec` it was built from.
        kernel: the node's :class:`~pinlab.kernel.kernel.Kernel`.
        cost: the effective :class:`CostModel` (platform overrides applied).
        pci: the :class:`~pinlab.kernel.pci.PciTopology`.
        system: the :class:`~pinlab.uapi.system.System` (drivers by name, processes).
        links: every :class:`Link` by name.
        pdevs: the PCI function of every host bridge (its 00.0 function), switch (upstream
            port), device and NIC, by spec name.
    """

    spec: PlatformSpec
    kernel: Kernel
    cost: CostModel
    pci: PciTopology
    system: System
    links: dict[str, Link]
    pdevs: dict[str, PciDev]
    _nodes: dict[str, _Node] = field(default_factory=dict)
    _paths: dict[tuple[str, str], tuple[LinkUse, ...]] = field(default_factory=dict)

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

    def _endpoint(self, name: str) -> _Endpoint:
        if name.startswith("host:"):
            try:
                s = int(name[5:])
            except ValueError:
                s = -1
            if not 0 <= s < self.spec.cpu.sockets:
                raise KeyError(
                    f"{name!r}: expected host:<socket> with socket < {self.spec.cpu.sockets}"
                )
            return _Endpoint(None, s, LinkUse(f"dram:{s}", "rw"))
        node = self._nodes.get(name)
        if node is not None:
            memory: LinkUse | None = None
            if node.kind == "device":
                spec = self.spec.device(name)
                if spec.is_carve_out:
                    memory = LinkUse(f"dram:{node.socket}", "rw")
                elif f"mem:{name}" in self.links:
                    memory = LinkUse(f"mem:{name}", "rw")
            return _Endpoint(node, node.socket, memory)
        owner = self._engine_owner(name)
        if owner is not None:
            node = self._nodes[owner]
            return _Endpoint(node, node.socket, None)
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
    def _chain(node: _Node | None) -> list[_Node]:
        out: list[_Node] = []
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def _socket_hop(self, a: int, b: int) -> list[LinkUse]:
        if a == b:
            return []
        lo, hi = min(a, b), max(a, b)
        return [LinkUse(f"upi:{lo}-{hi}", f"{a}->{b}")]

    def _route(self, a: _Endpoint, b: _Endpoint) -> list[LinkUse]:
        chain_a = self._chain(a.node)
        chain_b = self._chain(b.node)
        common: _Node | None = None
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

    def p2p_factor(self, exporter: str, importer: str) -> float | None:
        """``p2p.factor.<path class>`` for the pair (``cost-model.md`` §3.1); None if refused."""
        path_class = self.p2p_path_class(exporter, importer)
        return None if path_class is None else self.cost.p2p_factor(path_class)

    def p2p_capacity(
        self, exporter: str, importer: str, *, nic_reads: bool = False
    ) -> float | None:
        """Uncontended pin-in-place rate, bytes/s (``cost-model.md`` §1 item 3), None if refused.

        PCIe bottleneck of the path × the P2P factor; for a NIC importer, the minimum with the
        NIC's streaming rate; × ``p2p.nic_read_factor`` when the NIC reads device memory
        (``nic_reads``; a send), not when it writes it (a receive).
        """
        factor = self.p2p_factor(exporter, importer)
        if factor is None:
            return None
        if nic_reads:
            rate = self.bottleneck(self.path(exporter, importer)) * factor
        else:
            rate = self.bottleneck(self.path(importer, exporter)) * factor
        if importer in self.system.nics:
            line = self.links[f"net:{importer}"].capacity["tx" if nic_reads else "rx"]
            rate = min(rate, line)
            if nic_reads:
                rate *= self.cost.p2p.nic_read_factor
        return rate

    def __repr__(self) -> str:
        return (
            f"<Machine {self.name}: {len(self.system.exporters)} devices, "
            f"{len(self.system.nics)} NICs, {len(self.links)} links, "
            f"kernel {self.kernel.profile.name}>"
        )


# -- building -------------------------------------------------------------------------------------


def make_kernel(
    kernel: Kernel | KernelProfile | str | None, spec: PlatformSpec | None = None
) -> Kernel:
    """A :class:`Kernel` from an instance, a profile, a preset name, or None (the spec's
    suggested ``kernel``, else the default preset)."""
    if isinstance(kernel, Kernel):
        return kernel
    if kernel is None and spec is not None and spec.kernel is not None:
        return Kernel(spec.kernel)
    return Kernel(kernel)


def _driver_kwargs(spec: DeviceSpec) -> dict[str, Any]:
    """Constructor keyword arguments for ``spec.driver`` (sizes under each driver's names)."""
    kw: dict[str, Any] = {}
    drv = spec.driver
    if drv == "habanalabs":
        kw["hbm_size"] = spec.memory
    elif drv == "i915":
        kw["lmem_size"] = spec.memory
    else:
        kw["vram_size"] = spec.memory
    if drv in ("amdgpu", "apu", "xe", "nvidia-compute") and spec.gtt is not None:
        kw["gtt_size"] = spec.gtt
    if drv in ("amdgpu", "apu", "xe", "nvidia-compute", "i915") and spec.system is not None:
        kw["system_size"] = spec.system
    if drv == "nvidia-compute" and spec.bar is not None:
        kw["bar1_size"] = spec.bar
    kw.update(spec.driver_options)
    return kw


def _fail(spec: PlatformSpec, where: str, message: str) -> ConfigError:
    return ConfigError(f"platform {spec.name}", where, message)


def build(
    spec: PlatformSpec,
    kernel: Kernel | KernelProfile | str | None = None,
    cost: CostModel | None = None,
    *,
    overrides: Mapping[str, object] | None = None,
    clock: Callable[[], float] | None = None,
) -> Machine:
    """Build the machine ``spec`` describes (module docstring).

    ``kernel``: a :class:`Kernel` (used as is), a profile or preset name (a new kernel), or None
    (``spec.kernel``, else the default preset). The effective cost model is ``cost`` (default
    :class:`CostModel()`) with ``spec.cost_overrides`` applied, then ``overrides`` -- pass the
    user's ``--set`` cost keys there so they win over the platform's. ``clock`` stamps stale-DMA
    incidents (the simulator passes ``env.now``).

    Raises :class:`ConfigError` naming the platform and field when a driver refuses the kernel
    (``xe`` before 6.8) or its options.
    """
    k = make_kernel(kernel, spec)
    base = CostModel() if cost is None else cost
    merged = {**spec.cost_overrides, **(overrides or {})}
    eff = base.with_overrides(merged, source=f"platform {spec.name}") if merged else base

    pci = PciTopology(
        cpu_vendor=spec.cpu.x86_vendor,
        cpu_family=spec.cpu.family,
        whitelist=spec.whitelist(),
        p2pdma_enabled=k.profile.pci_p2pdma,
    )
    system = System(k, clock=clock)
    links: dict[str, Link] = {}
    pdevs: dict[str, PciDev] = {}
    nodes: dict[str, _Node] = {}
    bridges: dict[str, PciHostBridge] = {}
    switch_specs = {sw.name: sw for sw in spec.switches}

    for hb in spec.host_bridges:
        bridge = pci.add_host_bridge(hb.vendor, hb.device, label=hb.name)
        bridges[hb.name] = bridge
        root = bridge.pci_host_bridge_dev()
        if root is not None:
            pdevs[hb.name] = root
        nodes[hb.name] = _Node(hb.name, "host_bridge", None, hb.socket, None)

    def port_for(parent: str, child: str) -> PciDev:
        try:
            if parent in bridges:
                return bridges[parent].add_root_port(label=f"{child}.port")
            sw = switch_specs[parent]
            acs = PciAcs.REDIR if sw.acs_redirect else PciAcs.NONE
            return pdevs[parent].add_downstream_port(acs=acs, label=f"{child}.port")
        except ValueError as e:  # out of PCI bus or device numbers
            raise _fail(
                spec, child, f"expected room for a port below {parent!r}, found: {e}"
            ) from None

    def add_link(name: str, parent: str, gen: int, width: int, override: LinkSpec | None) -> str:
        if parent in switch_specs:
            psw = switch_specs[parent]
            gen, width = min(gen, psw.gen), min(width, psw.width)
        up = eff.pcie_rate(gen, width, "up")
        down = eff.pcie_rate(gen, width, "down")
        latency = 0.0
        if override is not None:
            up = override.up if override.up is not None else up
            down = override.down if override.down is not None else down
            latency = override.latency if override.latency is not None else 0.0
        link = Link(
            f"pcie:{name}",
            "pcie",
            MappingProxyType({"up": up, "down": down}),
            latency,
            (name, parent),
            gen,
            width,
        )
        links[link.name] = link
        return link.name

    def attach(name: str, kind: str, parent: str, uplink: str | None, acs: bool = False) -> _Node:
        pnode = nodes[parent]
        node = _Node(name, kind, pnode, pnode.socket, uplink, acs, pnode.depth + 1)
        nodes[name] = node
        return node

    def make_switch(sw: SwitchSpec) -> None:
        if sw.name in nodes:
            return
        if sw.parent in switch_specs:
            make_switch(switch_specs[sw.parent])
        port = port_for(sw.parent, sw.name)
        usp = port.add_switch(0, vendor=sw.vendor, device=sw.device, label=sw.name)
        pdevs[sw.name] = usp
        uplink = add_link(sw.name, sw.parent, sw.gen, sw.width, sw.link)
        attach(sw.name, "switch", sw.parent, uplink, sw.acs_redirect)

    for sw in spec.switches:
        make_switch(sw)

    for i, dev in enumerate(spec.devices):
        if dev.rciep:
            pdev = bridges[dev.parent].add_endpoint(
                vendor=dev.vendor, device=dev.device, label=dev.name
            )
            uplink = None
        else:
            pdev = port_for(dev.parent, dev.name).add_endpoint(
                vendor=dev.vendor, device=dev.device, label=dev.name
            )
            uplink = add_link(dev.name, dev.parent, dev.gen, dev.width, dev.link)
        pdevs[dev.name] = pdev
        attach(dev.name, "device", dev.parent, uplink)
        try:
            driver = EXPORTERS[dev.driver](k, pdev, name=dev.name, **_driver_kwargs(dev))
        except (ValueError, TypeError) as e:
            raise _fail(spec, f"devices[{i}] ({dev.name})", str(e)) from None
        system.add_exporter(dev.name, driver)
        wants_import = (
            isinstance(driver, AmdgpuDevice) if dev.gpu_import is None else dev.gpu_import
        )
        if wants_import:
            if not isinstance(driver, AmdgpuDevice):
                raise _fail(
                    spec,
                    f"devices[{i}].gpu_import",
                    f"expected false for driver {dev.driver!r} (GPU import models amdgpu), "
                    "found true",
                )
            system.add_gpu_importer(f"{dev.name}:import", GpuImporter(driver))
        if dev.memory_bandwidth is not None and not dev.is_carve_out:
            links[f"mem:{dev.name}"] = Link(
                f"mem:{dev.name}",
                "mem",
                MappingProxyType({"rw": dev.memory_bandwidth * eff.hbm.copy_efficiency}),
                0.0,
                (dev.name,),
            )

    for i, nic in enumerate(spec.nics):
        pdev = port_for(nic.parent, nic.name).add_endpoint(
            vendor=nic.vendor, device=nic.device, label=nic.name
        )
        pdevs[nic.name] = pdev
        uplink = add_link(nic.name, nic.parent, nic.gen, nic.width, nic.link)
        attach(nic.name, "nic", nic.parent, uplink)
        rdma: RdmaDevice
        options: dict[str, Any] = dict(nic.driver_options)
        try:
            if nic.driver == "efa":
                rdma = EfaDevice(k, pdev, name=nic.name, **options)
            else:
                rdma = Mlx5Device(k, pdev, name=nic.name, odp=nic.odp, **options)
        except (ValueError, TypeError) as e:
            raise _fail(spec, f"nics[{i}] ({nic.name})", str(e)) from None
        system.add_nic(nic.name, rdma)
        rate = eff.nic_rate(nic.line_rate)
        links[f"net:{nic.name}"] = Link(
            f"net:{nic.name}", "net", MappingProxyType({"tx": rate, "rx": rate}), 0.0, (nic.name,)
        )

    for disp in spec.displays:
        system.add_display(disp.name, DisplayEngine(k, pdevs[disp.device], name=disp.name))

    dram = eff.dram_rate(spec.dram.bandwidth)
    for s in range(spec.cpu.sockets):
        links[f"dram:{s}"] = Link(
            f"dram:{s}", "dram", MappingProxyType({"rw": dram}), 0.0, (f"socket{s}",)
        )
    for a in range(spec.cpu.sockets):
        for b in range(a + 1, spec.cpu.sockets):
            bw = spec.inter_socket.bandwidth
            links[f"upi:{a}-{b}"] = Link(
                f"upi:{a}-{b}",
                "socket",
                MappingProxyType({f"{a}->{b}": bw, f"{b}->{a}": bw}),
                spec.inter_socket.latency,
                (f"socket{a}", f"socket{b}"),
            )

    return Machine(spec, k, eff, pci, system, links, pdevs, nodes)
