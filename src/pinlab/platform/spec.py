"""Declarative platform descriptions: what one node is made of.

A :class:`PlatformSpec` (pydantic, frozen) describes one node: the CPU, host DRAM per socket,
root complexes (host bridges, whose vendor/device IDs the P2PDMA whitelist matches), PCIe
switches, devices (each an exporter from :data:`pinlab.drivers.EXPORTERS`), RDMA NICs (each an
RDMA driver from :data:`pinlab.drivers.IMPORTERS`, and a NIC model of the cost model),
displays, the inter-socket link, and optional cost-model overrides that belong to the
platform. Driver names are checked against the registries, and what
depends on the driver (whether device memory is a carve-out of host DRAM, whether a NIC can
do ODP) is read off what the driver class declares.

:func:`~pinlab.platform.builder.build` turns a spec into a
:class:`~pinlab.platform.topology.Machine`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from pinlab.drivers import EXPORTERS
from pinlab.errors import ConfigError
from pinlab.kernel.pci_ids import (
    PCI_ANY_ID,
    X86_VENDOR_AMD,
    X86_VENDOR_INTEL,
    P2pdmaWhitelistEntry,
    P2pdmaWhitelistFlag,
)
from pinlab.kernel.profile import KernelProfile
from pinlab.platform.cost import CostModel, LinkLayer, NicModelName, RcClass
from pinlab.platform.spec_fields import (
    BarReadRow,
    CpuFamily,
    ExporterName,
    KernelName,
    Mtu,
    Name,
    PciDeviceNumber,
    PcieGen,
    PcieMps,
    PcieWidth,
    RdmaDriverName,
    nic_driver,
    option_errors,
    ref_error,
)
from pinlab.units import Duration, LineRate, PciId, Rate, Size

__all__ = [
    "CpuSpec",
    "DeviceSpec",
    "DisplaySpec",
    "DramSpec",
    "HostBridgeSpec",
    "InterSocketSpec",
    "KernelConfigSpec",
    "LinkSpec",
    "Name",
    "NicSpec",
    "NvlinkSpec",
    "PlatformSpec",
    "SwitchSpec",
    "WhitelistEntrySpec",
    "nic_driver",
]


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
    segment: Literal["server", "client"] = Field(
        default="server",
        description="server (Xeon, EPYC) or client (Core, Ryzen) part: Intel client root "
        "ports forward P2P writes only (pcie.rc.intel_client)",
    )

    @property
    def x86_vendor(self) -> str:
        """The CPUID vendor string the PCI model takes."""
        return {"intel": X86_VENDOR_INTEL, "amd": X86_VENDOR_AMD}.get(self.vendor, "Other")

    @property
    def rc_class(self) -> RcClass | None:
        """Which ``pcie.rc.<class>`` forwarding rules its host bridges follow: AMD Zen (family
        ≥ 0x17) ``amd_zen``, Intel ``intel_server`` or ``intel_client`` by segment; None for
        anything else (no P2P forwarding is known)."""
        if self.vendor == "amd" and self.family >= 0x17:
            return "amd_zen"
        if self.vendor == "intel":
            return "intel_server" if self.segment == "server" else "intel_client"
        return None


class DramSpec(_Spec):
    """Host DRAM of each socket (``cost-model.md`` §5 table; §9 presets)."""

    size: Size = Field(description="memory per socket")
    bandwidth: Rate = Field(
        description="theoretical bandwidth per socket (8 B × MT/s × channels); "
        "usable = × dram.efficiency"
    )


class HostBridgeSpec(_Spec):
    """A root complex (``struct pci_host_bridge``) on a socket.

    ``vendor``/``device`` are the IDs of its root bus's first function, which the P2PDMA
    whitelist matches (Skylake-E 0x2030–0x2033 are listed; ``kernel-semantics.md`` §8.3): a
    host bridge function at 00.0, or -- ``root_port_slot`` set -- a Root Port at that device
    number with no function at 00.0 (a Skylake-E root bus whose first function is Root Port B
    at 01.0), which the whitelist identifies the bridge by only from v5.19 (K-132).
    """

    name: Name
    socket: int = Field(default=0, ge=0, description="socket (NUMA node) of this root complex")
    vendor: PciId = Field(default=0x8086, description="root bus first function's vendor ID")
    device: PciId = Field(default=0, description="root bus first function's device ID")
    root_port_slot: PciDeviceNumber | None = Field(
        default=None,
        description="vendor/device are a Root Port's at this device number, the root bus's "
        "first function (none at 00.0); unset: a host bridge function's at 00.0",
    )
    mps: PcieMps | None = Field(
        default=None, description="Max_Payload_Size of its root ports (default pcie.mps)"
    )


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
    acs_redirect: StrictBool = False
    vendor: PciId = Field(default=0x10B5, description="switch vendor ID (default Broadcom/PLX)")
    device: PciId = 0
    mps: PcieMps | None = Field(default=None, description="Max_Payload_Size (default pcie.mps)")
    link: LinkSpec | None = None


class DeviceSpec(_Spec):
    """An accelerator or GPU driven by an exporter from :data:`pinlab.drivers.EXPORTERS`.

    ``memory`` is the device memory the driver manages (HBM, VRAM, LMEM, an APU's carve-out);
    ``gtt``/``system`` size the TTM GTT and SYSTEM domains where the driver has them (driver
    defaults when unset). ``bar`` is the CPU/peer-visible BAR window: ``pin.bar1_bytes``
    (``cost-model.md`` §6.3) -- a datacenter part's BAR equals its memory (unset), a consumer
    part's is typically ``pin.bar1_consumer`` (256 MiB); the nvidia-compute model enforces it,
    amdgpu's model does not yet (``drivers/amdgpu.py``). Each driver maps these sizes to its
    own constructor arguments (``ExporterDriver.from_spec``); sizes a driver has no domain for
    are not used. ``driver_options`` are passed to the driver constructor as keyword arguments
    (``strict_p2p``, ``dram_page_size`` ...), each checked against the constructor's own
    (name and type: ``_driver_options``).
    """

    name: Name
    driver: ExporterName = Field(description="exporter name in pinlab.drivers.EXPORTERS")
    parent: Name = Field(description="host bridge or switch the device hangs below")
    memory: Size = Field(description="device memory (HBM/VRAM/LMEM/carve-out)")
    memory_bandwidth: Rate | None = Field(default=None, description="spec device-memory bandwidth")
    gtt: Size | None = None
    system: Size | None = None
    bar: Size | None = Field(default=None, description="BAR window (default: = memory)")
    gen: PcieGen = 4
    width: PcieWidth = 16
    rciep: StrictBool = Field(
        default=False, description="root-complex integrated endpoint (an APU's iGPU)"
    )
    carve_out: StrictBool | None = Field(
        default=None,
        description="device memory is carved out of host DRAM (default: what the driver "
        "declares, true for 'apu')",
    )
    gpu_import: StrictBool | None = Field(
        default=None,
        description="register a GPU importer too (default: drivers that import dma-bufs, "
        "the amdgpu family)",
    )
    vendor: PciId = 0
    device: PciId = 0
    mps: PcieMps | None = Field(default=None, description="Max_Payload_Size (default pcie.mps)")
    mrrs: PcieMps | None = Field(
        default=None, description="Max_Read_Request_Size of its DMA engines (default pcie.mrrs)"
    )
    bar_read: BarReadRow | None = Field(
        default=None,
        description="the pcie.bar_read row of its BAR's completer latency when a peer reads it "
        "(a100, h200; default: pcie.bar_read.default)",
    )
    link: LinkSpec | None = None
    driver_options: dict[str, bool | int | str] = Field(default_factory=dict)
    model: str = Field(
        default="",
        description="the device's name as tools print it ('NVIDIA A100-SXM4-40GB'; for reports)",
    )
    compute_capability: int | None = Field(
        default=None,
        ge=10,
        le=200,
        description="CUDA compute capability × 10 (80: Ampere, 90: Hopper); NCCL's GDR-read "
        "rule reads it (docs/cost-model/gpu.md §G5). None: not a CUDA device",
    )

    @property
    def is_carve_out(self) -> bool:
        """Whether device memory is host DRAM (``carve_out``, else what the driver declares)."""
        return EXPORTERS[self.driver].carve_out if self.carve_out is None else self.carve_out

    @property
    def wants_gpu_import(self) -> bool:
        """Whether a GPU importer is registered on the device (``gpu_import``, else whether
        the driver imports dma-bufs)."""
        if self.gpu_import is None:
            return EXPORTERS[self.driver].imports_dmabufs
        return self.gpu_import

    @property
    def bar_size(self) -> int:
        """The BAR window in bytes (``bar``, or the whole memory)."""
        return self.memory if self.bar is None else self.bar


class NicSpec(_Spec):
    """An RDMA NIC driven by an RDMA driver from :data:`pinlab.drivers.IMPORTERS`: ``efa``
    (pinned dma-buf MRs only) or ``mlx5`` (ODP-capable).

    ``model`` names the NIC model of the cost model (``nic.<model>``: ``cx5``, ``cx6``,
    ``cx7``, ``efa``; default: the one its driver declares, ``RdmaDevice.nic_model``);
    ``line_rate``, ``link_layer`` and ``mtu`` default to the model's (``cost-model.md`` §4).
    ``odp`` needs a driver that declares ODP support. ``driver_options`` go to the driver
    constructor (EFA: ``rdma_write``, ``revocable`` (7.1 only); mlx5: ``ignore_move_notify``).
    """

    name: Name
    driver: RdmaDriverName = Field(description="RDMA driver name in pinlab.drivers.IMPORTERS")
    parent: Name = Field(description="host bridge or switch the NIC hangs below")
    model: NicModelName | None = Field(
        default=None, description="NIC model (nic.<model>; default: the driver's)"
    )
    line_rate: LineRate | None = Field(default=None, description="default: the model's")
    link_layer: LinkLayer | None = Field(default=None, description="default: the model's")
    mtu: Mtu | None = Field(default=None, description="active MTU (default: the model's)")
    odp: StrictBool = Field(default=False, description="on-demand paging (drivers with ODP: mlx5)")
    gen: PcieGen = 4
    width: PcieWidth = 16
    vendor: PciId = 0
    device: PciId = 0
    mps: PcieMps | None = Field(default=None, description="Max_Payload_Size (default pcie.mps)")
    mrrs: PcieMps | None = Field(
        default=None, description="Max_Read_Request_Size (default pcie.mrrs)"
    )
    link: LinkSpec | None = None
    driver_options: dict[str, bool | int | str] = Field(default_factory=dict)

    @property
    def model_name(self) -> NicModelName:
        """The NIC model: ``model``, else the one the driver declares."""
        if self.model is not None:
            return self.model
        return cast(NicModelName, nic_driver(self.driver).nic_model)


class DisplaySpec(_Spec):
    """A display engine (static importer) on a device's PCI function."""

    name: Name
    device: Name = Field(description="the device whose display block this is")


class InterSocketSpec(_Spec):
    """The link between sockets (UPI / Infinity Fabric), per direction.

    Default: two UPI links at 10.4 GT/s × 2 B = 41.6 GB/s per direction [assumption: not in
    ``cost-model.md``]; a read across it pays ``pcie.lat.remote_socket`` (§2.3).
    """

    bandwidth: Rate = Field(default=41.6e9, description="capacity per direction")
    latency: Duration = Field(default=0.0, description="one-way latency")


class NvlinkSpec(_Spec):
    """GPUs joined by NVLink (``docs/cost-model/gpu.md`` §G1): through NVSwitches
    (``switches`` > 0: every GPU's ``links`` go to the switches, which connect every pair at the
    full rate of both ends) or directly (``switches`` = 0: exactly two GPUs, ``links`` between
    them, an NVLink bridge). ``links`` defaults to the generation's ``nvlink.genN.links``.

    NVLink carries CUDA peer copies and NCCL; the kernel's dma-buf P2P (a NIC or a GPU importing
    a dma-buf) goes over PCIe regardless.
    """

    name: Name
    gen: Literal[3, 4] = Field(description="NVLink generation (3: A100, 4: H100)")
    devices: tuple[Name, ...] = Field(description="the GPUs in this NVLink domain")
    links: int | None = Field(default=None, ge=1, le=64, description="NVLinks per GPU")
    switches: int = Field(default=0, ge=0, le=16, description="NVSwitch chips (0: direct)")


class WhitelistEntrySpec(_Spec):
    """A ``pci_p2pdma_whitelist[]`` entry (``kernel-semantics.md`` §8.3); ``device = "any"``
    is ``PCI_ANY_ID``, every device of the vendor on kernels from v7.1 and none before, whose
    lookup compares the IDs as they are (K-134)."""

    vendor: PciId
    device: PciId | Literal["any"]
    same_host_bridge: StrictBool = False

    @classmethod
    def of(cls, entry: P2pdmaWhitelistEntry) -> WhitelistEntrySpec:
        """The platform-file form of a kernel table's entry (``"any"`` for ``PCI_ANY_ID``)."""
        return cls(
            vendor=entry.vendor,
            device="any" if entry.device == PCI_ANY_ID else entry.device,
            same_host_bridge=bool(entry.flags & P2pdmaWhitelistFlag.REQ_SAME_HOST_BRIDGE),
        )

    def entry(self) -> P2pdmaWhitelistEntry:
        """The kernel-model entry."""
        device = PCI_ANY_ID if self.device == "any" else self.device
        flags = (
            P2pdmaWhitelistFlag.REQ_SAME_HOST_BRIDGE
            if self.same_host_bridge
            else P2pdmaWhitelistFlag.NONE
        )
        return P2pdmaWhitelistEntry(self.vendor, device, flags)


class KernelConfigSpec(_Spec):
    """``[kernel_config]``: the host kernel's configuration switches (``kernel-semantics.md``
    §1.5), as ``pinlab inspect`` read them from its config file (and, for ``pci_p2pdma``,
    kallsyms); a switch it could not read is absent. A scenario run on the platform starts from
    these (:meth:`for_profile`): ``move_notify`` is ``CONFIG_DMABUF_MOVE_NOTIFY``,
    ``pci_p2pdma`` is ``CONFIG_PCI_P2PDMA``, ``dmem`` is ``CONFIG_CGROUP_DMEM`` (the cgroup v2
    dmem controller, ``kernel/cgroup/dmem.c``)."""

    move_notify: StrictBool | None = None
    pci_p2pdma: StrictBool | None = None
    dmem: StrictBool | None = None

    OPTIONS: ClassVar[dict[str, str]] = {
        "move_notify": "CONFIG_DMABUF_MOVE_NOTIFY",
        "pci_p2pdma": "CONFIG_PCI_P2PDMA",
        "dmem": "CONFIG_CGROUP_DMEM",
    }
    """Each switch's kernel configuration option."""

    def switches(self) -> dict[str, bool]:
        """The switches the file sets, by the kernel profile's switch names."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def for_profile(self, profile: KernelProfile) -> dict[str, bool]:
        """The switches ``profile`` can take: ``move_notify`` only where the release still has
        the option (removed in 7.1, always on there), ``dmem`` only where the release has the
        controller (6.14 on: before, there is no option to have)."""
        out = self.switches()
        if not profile.move_notify_is_option:
            out.pop("move_notify", None)
        if not profile.dmem:
            out.pop("dmem", None)
        return out


_DEFAULT_COST: list[CostModel] = []


def _default_cost() -> CostModel:
    """A shared ``CostModel()`` for validating platforms' cost overrides."""
    if not _DEFAULT_COST:
        _DEFAULT_COST.append(CostModel())
    return _DEFAULT_COST[0]


class PlatformSpec(_Spec):
    """One node: CPU, DRAM, PCIe tree, devices, NICs, displays (module docstring).

    Cross-references are checked: names are unique; parents name a host bridge or switch;
    ``rciep`` devices hang below a host bridge; displays name a device; ``odp`` only on a NIC
    whose driver declares ODP support (not EFA); host
    bridges sit on existing sockets; ``cost_overrides`` are valid cost-model keys and values.
    """

    kind: Literal["node"] = "node"
    name: Name
    description: str = ""
    kernel: KernelName = Field(
        default=None, description="suggested kernel profile (§9 'kernel preset')"
    )
    kernel_config: KernelConfigSpec | None = Field(
        default=None,
        description="the host kernel's configuration switches (pinlab inspect); a scenario's "
        "run starts from them",
    )
    cpu: CpuSpec = Field(default_factory=CpuSpec)
    dram: DramSpec
    host_bridges: tuple[HostBridgeSpec, ...]
    switches: tuple[SwitchSpec, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    nics: tuple[NicSpec, ...] = ()
    displays: tuple[DisplaySpec, ...] = ()
    nvlink: tuple[NvlinkSpec, ...] = Field(
        default=(), description="NVLink domains (docs/cost-model/gpu.md §G1)"
    )
    inter_socket: InterSocketSpec = Field(default_factory=InterSocketSpec)
    p2pdma_whitelist: tuple[WhitelistEntrySpec, ...] | None = Field(
        default=None,
        description="host-bridge whitelist (default: the kernel profile's release table)",
    )
    p2pdma_root_port_lookup: StrictBool | None = Field(
        default=None,
        description="whether the whitelist also identifies a host bridge by a first Root Port "
        "at any devfn, as Linux does from 5.19 (K-132; default: the kernel profile's rule)",
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
            ("nvlink", self.nvlink),
        )
        for group, items in groups:
            for i, item in enumerate(items):
                where = f"{group}[{i}]"
                if item.name in seen:
                    errors.append(
                        ref_error(
                            (group, i, "name"), f"a unique name (also {seen[item.name]})", item.name
                        )
                    )
                seen.setdefault(item.name, where)
        if not self.host_bridges:
            errors.append(ref_error(("host_bridges",), "at least one host bridge", []))
        bridges = {hb.name for hb in self.host_bridges}
        switches = {sw.name: sw for sw in self.switches}
        for i, hb in enumerate(self.host_bridges):
            if hb.socket >= self.cpu.sockets:
                errors.append(
                    ref_error(
                        ("host_bridges", i, "socket"),
                        f"a socket below cpu.sockets = {self.cpu.sockets}",
                        hb.socket,
                    )
                )
        parent_expected = "the name of a host bridge or switch"
        for i, sw in enumerate(self.switches):
            if sw.parent not in bridges and sw.parent not in switches:
                errors.append(ref_error(("switches", i, "parent"), parent_expected, sw.parent))
            # no cycles
            seen_chain = {sw.name}
            node = switches.get(sw.parent)
            while node is not None:
                if node.name in seen_chain:
                    errors.append(
                        ref_error(
                            ("switches", i, "parent"), "a parent chain without a loop", sw.parent
                        )
                    )
                    break
                seen_chain.add(node.name)
                node = switches.get(node.parent)
        for i, dev in enumerate(self.devices):
            if dev.rciep and dev.parent not in bridges:
                errors.append(
                    ref_error(
                        ("devices", i, "parent"),
                        "the name of a host bridge (an rciep sits on the root bus)",
                        dev.parent,
                    )
                )
            elif dev.parent not in bridges and dev.parent not in switches:
                errors.append(ref_error(("devices", i, "parent"), parent_expected, dev.parent))
            cls = EXPORTERS[dev.driver]
            errors.extend(option_errors(("devices", i), dev.driver, cls, dev.driver_options))
        for i, nic in enumerate(self.nics):
            if nic.parent not in bridges and nic.parent not in switches:
                errors.append(ref_error(("nics", i, "parent"), parent_expected, nic.parent))
            options = nic.driver_options
            errors.extend(option_errors(("nics", i), nic.driver, nic_driver(nic.driver), options))
            if nic.odp and not nic_driver(nic.driver).supports_odp:
                errors.append(
                    ref_error(
                        ("nics", i, "odp"),
                        f"false for driver {nic.driver!r} (it has no ODP support)",
                        True,
                    )
                )
        devices = {d.name for d in self.devices}
        for i, disp in enumerate(self.displays):
            if disp.device not in devices:
                errors.append(
                    ref_error(("displays", i, "device"), "the name of a device", disp.device)
                )
        errors.extend(self._nvlink_errors(devices))
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

    def _nvlink_errors(self, devices: set[str]) -> list[InitErrorDetails]:
        """NVLink domains name existing devices, at least two, each device in one domain; a
        direct (switchless) domain joins exactly two."""
        errors: list[InitErrorDetails] = []
        member: dict[str, str] = {}
        for i, nv in enumerate(self.nvlink):
            if len(nv.devices) < 2 or (nv.switches == 0 and len(nv.devices) != 2):
                expected = (
                    "two devices (no switches: a bridge)"
                    if nv.switches == 0
                    else ("at least two devices")
                )
                errors.append(ref_error(("nvlink", i, "devices"), expected, list(nv.devices)))
            for j, dev in enumerate(nv.devices):
                if dev not in devices:
                    errors.append(ref_error(("nvlink", i, "devices", j), "a device", dev))
                elif dev in member:
                    errors.append(
                        ref_error(
                            ("nvlink", i, "devices", j),
                            f"a device in no other NVLink domain (also {member[dev]})",
                            dev,
                        )
                    )
                member.setdefault(dev, nv.name)
        return errors

    # -- queries on the description ----------------------------------------------------------

    def device(self, name: str) -> DeviceSpec:
        """The device named ``name`` (``KeyError`` otherwise)."""
        for d in self.devices:
            if d.name == name:
                return d
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

    def root_port_lookup(self, release: bool) -> bool:
        """Whether ``pci_host_bridge_dev`` also takes a first Root Port (K-132): this
        platform's setting if it has one, else ``release``, the kernel profile's rule."""
        return release if self.p2pdma_root_port_lookup is None else self.p2pdma_root_port_lookup

    def whitelist(
        self, release: tuple[P2pdmaWhitelistEntry, ...]
    ) -> tuple[P2pdmaWhitelistEntry, ...]:
        """The whitelist entries the PCI model gets: this platform's own list if it has one,
        else ``release``, the kernel profile's table (K-133 … K-135)."""
        if self.p2pdma_whitelist is None:
            return release
        return tuple(e.entry() for e in self.p2pdma_whitelist)
