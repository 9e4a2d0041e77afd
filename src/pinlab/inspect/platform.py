"""Map the real host's PCI tree, CPU and memory to a pinlab platform file.

:func:`plan_platform` turns what :mod:`pinlab.inspect.host` read into a
:class:`~pinlab.platform.spec.PlatformSpec` plus the mapping it used (pinlab name ↔ PCI
address) and the assumptions it had to make (``.spec`` is the spec alone);
:func:`platform_text` writes it with :func:`~pinlab.platform.presets.dump_platform` behind a
comment header, so :func:`~pinlab.platform.presets.load_platform` (``pinlab run --platform``)
reads it back equal; :func:`write_platform` writes atomically (temp + rename).

The mapping (``kernel-semantics.md`` §8 for why each part matters to P2PDMA):

* **Host bridges**: one per root bus (``pci<domain>:<bus>`` in sysfs), named ``rc0``, ``rc1``
  ... in address order. vendor/device are those of the root bus's 00.0 function --
  ``pci_host_bridge_dev()``, what ``host_bridge_whitelist`` matches --; with no 00.0 function,
  those of the first function when it is a Root Port (``root_port_slot``: from v5.19 the
  kernel identifies the bridge by it, before it finds none, K-132), else 0/0 (the kernel finds
  no bridge device and the whitelist fails; a 0/0 entry fails it the same way). The socket is
  that function's NUMA node's package.
* **Switches**: every PCIe switch upstream port (port type from config space, else inferred
  from the tree), ``sw0``, ``sw1`` ...; parent = the nearest switch above it, else its host
  bridge. Root ports and downstream ports are implicit in pinlab (one per child).
  ``acs_redirect`` is set when one of its downstream ports has ACS request/completion
  redirect or egress control on (read from config space; false when not readable).
* **Devices** (exporters): display/3D controllers (0x03xx) and processing accelerators
  (0x1200) of a vendor pinlab models, named ``gpu<N>`` / ``accel<N>``. Driver: the bound
  driver when it is one pinlab models, else from the vendor -- AMD 0x1002 → ``amdgpu``, or
  ``apu`` when integrated (on the root bus, or a PCIe RCiEP); Intel 0x8086 display → ``xe``
  when bound to xe, else ``i915``; NVIDIA 0x10de → ``nvidia-compute``; Habana 0x1da3 →
  ``habanalabs``. An AMD iGPU behind an internal root port cannot be told from a dGPU in
  sysfs and is mapped to ``amdgpu`` (edit ``driver = "apu"``). Memory: the ``vram*``
  regions of ``dmem.capacity`` for its PCI address, else amdgpu's ``mem_info_vram_total``,
  else the largest memory BAR, else :data:`DEFAULT_DEVICE_MEMORY`; ``bar`` = the largest BAR
  when smaller than that. A driver with a GTT domain gets GTT = half of host memory (TTM's
  default page limit) and one with a SYSTEM domain SYSTEM = host memory, as the presets do
  (what the driver declares, ``ExporterDriver.host_memory_domains``: GTT and SYSTEM for the
  TTM exporters, SYSTEM alone for i915). A device with DRM connectors gets a display engine
  (``display<N>``) when its driver declares it drives a display (``has_display``: amdgpu,
  apu, i915, xe).
* **NICs** (RDMA importers): Mellanox 0x15b3 network/InfiniBand functions → ``mlx5`` (ODP
  on where the driver declares ODP support, ``RdmaDevice.supports_odp``: every mlx5-driven
  part has it; ConnectX-3 / ``mlx4_core`` is skipped), Amazon
  0x1d0f EFA (0xefa0-0xefaf, or bound to ``efa``) → ``efa``; named after their
  ``infiniband/`` device when there is one; line rate from the IB port rate or the netdev
  speed. SR-IOV virtual functions are skipped (their physical function is mapped).
* **Links**: gen/width = the lower of the function's and its parent port's ``max_link_*``
  (gen clamped to pinlab's 3-5, width to 1-16).
* **CPU**: vendor (intel / amd / other), family, model, sockets, segment (an Intel model
  name without "Xeon" is a client part); **DRAM**: ``MemTotal``
  split evenly over the sockets; bandwidth :data:`DEFAULT_DRAM_BANDWIDTH` -- sysfs does not
  show it.
* **Kernel**: ``kernel`` = the newest pinlab kernel profile not newer than the running
  release (6.18 → ``6.16``); none for a release older than every profile. A note names each
  exporter that does not exist in that profile (``ExporterDriver.exists_in``: xe before 6.12).
  Where the release's P2PDMA whitelist (:func:`~pinlab.kernel.pci_ids.p2pdma_whitelist_release`)
  judges one of the host's bridges otherwise than the profile's table -- Linux 6.8 lists the
  Xeon root 0x09a2, profile 5.16 does not (K-133) -- the file carries the host's table as
  ``p2pdma_whitelist`` and a note says why; likewise the release's host-bridge lookup rule
  (``p2pdma_root_port_lookup``, K-132) where a bridge is known by its first Root Port and the
  profile's rule differs. The kernel configuration switches the host's config file (or, for
  P2PDMA, kallsyms) settles -- ``CONFIG_DMABUF_MOVE_NOTIFY``, ``CONFIG_PCI_P2PDMA``
  (:meth:`~pinlab.inspect.snapshot.KernelFacts.config_switches`, the doctor's source too) --
  are the file's ``[kernel_config]``, which a run on it starts from; a note names each that
  differs from the profile's default.

Fallbacks, never placeholders for hardware: a host without GPUs, accelerators or RDMA NICs
(a CI VM) gets a platform with its host bridges, CPU and DRAM and **zero devices** --
:class:`PlatformSpec` allows that. A valid spec needs at least one host bridge; if no PCI
tree could be read, the file has one ``rc0`` with IDs 0/0 and the summary and the file's
header say so (every x86 or PCIe host has a root complex; its IDs are what is unknown).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pinlab import fsutil
from pinlab.drivers import EXPORTERS
from pinlab.inspect.cgroup import DmemInfo
from pinlab.inspect.cpu import CpuInfo
from pinlab.inspect.pci import PciFunction, PciInfo
from pinlab.inspect.proc import MemInfo, SystemInfo
from pinlab.inspect.release import (
    absent_drivers,
    host_root_port_lookup,
    host_whitelist,
    suggest_kernel,
)
from pinlab.inspect.source import OK
from pinlab.kernel.profile import DEFAULT_PROFILE
from pinlab.kernel.profile import PRESETS as KERNEL_PRESETS
from pinlab.platform.presets import dump_platform
from pinlab.platform.spec import (
    CpuSpec,
    DeviceSpec,
    DisplaySpec,
    DramSpec,
    HostBridgeSpec,
    KernelConfigSpec,
    NicSpec,
    PlatformSpec,
    SwitchSpec,
    nic_driver,
)
from pinlab.units import GiB, exact_rate, fmt_size, parse_line_rate, parse_rate

__all__ = [
    "ALIASES_PREFIX",
    "DEFAULT_DEVICE_MEMORY",
    "DEFAULT_DRAM_BANDWIDTH",
    "DEFAULT_HOST_MEMORY",
    "MappedItem",
    "PlatformPlan",
    "plan_platform",
    "platform_text",
    "use_it",
    "write_platform",
]

ALIASES_PREFIX = "aliases (host name=pinlab name, for pinlab run --map): "
"""How the header line that lists :attr:`PlatformPlan.aliases` starts."""

DEFAULT_DRAM_BANDWIDTH = parse_rate("89.6GB/s")
"""[assumption] Per-socket DRAM bandwidth written to the file: dual-channel DDR5-5600, the
workstation preset's (``cost-model.md`` §9.3). Not visible in sysfs; edit ``dram.bandwidth``
(``cost-model.md`` §5 lists server configurations)."""

DEFAULT_DEVICE_MEMORY = 16 * GiB
"""[assumption] Device memory when neither dmem, amdgpu's ``mem_info_vram_total`` nor a memory
BAR gives a size (the xe/i915 driver models' default)."""

DEFAULT_HOST_MEMORY = 16 * GiB
"""[assumption] Host DRAM when ``/proc/meminfo`` could not be read."""

VENDOR_AMD_GPU = 0x1002
VENDOR_INTEL = 0x8086
VENDOR_NVIDIA = 0x10DE
VENDOR_HABANA = 0x1DA3
VENDOR_MELLANOX = 0x15B3
VENDOR_AMAZON = 0x1D0F
_MLX4_DEVICES = frozenset({0x1003, 0x1004, 0x1007})
"""ConnectX-3 / -3 Pro (PF and VF): driven by mlx4, which pinlab does not model."""

_BOUND_EXPORTERS = {
    "amdgpu": "amdgpu",
    "i915": "i915",
    "xe": "xe",
    "habanalabs": "habanalabs",
    "nvidia": "nvidia-compute",
}
NAMED_MODULES = frozenset(
    {
        "amdgpu",
        "habanalabs",
        "efa",
        "mlx5_ib",
        "nvidia",
        "nvidia_peermem",
        "xe",
        "i915",
        "ib_uverbs",
    }
)
"""The modules ``pinlab inspect`` names: exporters, importers and the peer-memory client."""
_CPU_VENDORS: dict[str, Literal["intel", "amd", "other"]] = {"intel": "intel", "amd": "amd"}
_GT_S_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


@dataclass(frozen=True, slots=True)
class MappedItem:
    """One element of the platform and where it came from."""

    name: str
    kind: str
    address: str
    what: str

    def to_json(self) -> dict[str, str]:
        """As plain JSON."""
        return {"name": self.name, "kind": self.kind, "address": self.address, "what": self.what}


@dataclass(frozen=True)
class PlatformPlan:
    """The spec :func:`plan_platform` made, what each part maps to, what was left out and the
    assumptions made (each a sentence for the summary and the file header)."""

    spec: PlatformSpec
    mapped: tuple[MappedItem, ...] = ()
    skipped: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    aliases: dict[str, str] = field(default_factory=dict)
    """The host's names of each device and NIC → its pinlab name: the PCI address, the DRM
    cards (``card1``), the RDMA and network devices (``mlx5_0``, ``enp5s0f0np0``)."""


def _segment(cpu: CpuInfo) -> Literal["server", "client"]:
    """``client`` for an Intel part whose model name is not a Xeon (Core, Core Ultra): its root
    ports forward P2P writes only (``pcie.rc.intel_client``); ``server`` otherwise."""
    if cpu.vendor == "intel" and cpu.model and "xeon" not in cpu.model.lower():
        return "client"
    return "server"


def _gen(speed: float | None) -> int | None:
    if speed is None:
        return None
    return _GT_S_TO_GEN.get(round(speed, 1))


def _link(fn: PciFunction, parent: PciFunction | None, notes: list[str]) -> dict[str, Any]:
    """gen/width for a DeviceSpec/NicSpec/SwitchSpec: the lower of both ends' maxima."""
    gens = [g for g in (_gen(fn.link_speed), _gen(parent.link_speed if parent else None)) if g]
    widths = [w for w in (fn.link_width, parent.link_width if parent else None) if w]
    out: dict[str, Any] = {}
    if gens:
        gen = min(gens)
        clamped = min(max(gen, 3), 5)
        if clamped != gen:
            notes.append(f"{fn.address}: a Gen{gen} link is modelled as Gen{clamped}")
        out["gen"] = clamped
    if widths:
        width = min(widths)
        allowed = max(w for w in (1, 2, 4, 8, 16) if w <= max(width, 1))
        if allowed != width:
            notes.append(f"{fn.address}: a x{width} link is modelled as x{allowed}")
        out["width"] = allowed
    if not gens or not widths:
        notes.append(f"{fn.address}: link speed/width not in sysfs; pinlab defaults used")
    return out


def _safe_name(text: str, fallback: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", text)
    return name if re.match(r"^[A-Za-z]", name) else fallback


def _exporter(fn: PciFunction) -> tuple[str | None, str]:
    """(pinlab exporter driver or None, reason). Only display/3D controllers and processing
    accelerators qualify (an NVSwitch bound to ``nvidia`` is a bridge-class function)."""
    if not (fn.is_display or fn.is_accelerator):
        return None, ""
    integrated = fn.parent is None or fn.port_type == "rciep"
    if fn.driver in _BOUND_EXPORTERS:
        drv = _BOUND_EXPORTERS[fn.driver]
        if drv == "amdgpu" and integrated:
            return "apu", "bound to amdgpu, integrated (on the root bus)"
        return drv, f"bound to {fn.driver}"
    if fn.vendor == VENDOR_AMD_GPU:
        if integrated:
            return "apu", "AMD GPU on the root bus (integrated)"
        return "amdgpu", "AMD GPU"
    if fn.vendor == VENDOR_INTEL and fn.is_display:
        return "i915", "Intel GPU (not bound to xe)"
    if fn.vendor == VENDOR_NVIDIA:
        return "nvidia-compute", "NVIDIA GPU"
    if fn.vendor == VENDOR_HABANA:
        return "habanalabs", "Habana accelerator"
    return None, f"no pinlab exporter models this vendor's {fn.kind}s"


def _rdma(fn: PciFunction) -> tuple[str | None, str]:
    """(pinlab NIC driver or None, reason)."""
    if fn.driver == "efa" or (
        fn.vendor == VENDOR_AMAZON and fn.is_network and fn.device & 0xFFF0 == 0xEFA0
    ):
        return "efa", "Amazon EFA"
    if fn.vendor == VENDOR_MELLANOX and fn.is_network:
        if fn.driver == "mlx4_core" or fn.device in _MLX4_DEVICES:
            return None, "ConnectX-3 (mlx4): pinlab models mlx5 only"
        return "mlx5", "Mellanox/NVIDIA ConnectX (mlx5)"
    if fn.is_network:
        return None, "not an RDMA NIC pinlab models (mlx5, efa)"
    return None, ""


def _device_memory(
    fn: PciFunction, dmem_vram: dict[str, int], notes: list[str]
) -> tuple[int, int | None, str]:
    """(memory, bar, where the size came from)."""
    bar = fn.largest_bar
    if fn.address in dmem_vram:
        memory, source = dmem_vram[fn.address], "dmem.capacity"
    elif fn.vram_total:
        memory, source = fn.vram_total, "mem_info_vram_total"
    elif bar:
        memory, source = bar, "largest BAR"
    else:
        memory, source = DEFAULT_DEVICE_MEMORY, "default"
        notes.append(
            f"{fn.address}: memory size unknown (no dmem region, no BAR): "
            f"{fmt_size(DEFAULT_DEVICE_MEMORY)} assumed"
        )
    return memory, (bar if bar and bar < memory else None), source


def _first_root_port(bus: str, on_bus: list[PciFunction]) -> PciFunction | None:
    """The first function of root bus ``bus`` in devfn order when it is a PCIe Root Port: what
    ``pci_host_bridge_dev`` identifies a host bridge by, from v5.19, when the bus has no 00.0
    function (K-132)."""
    here = (f for f in on_bus if f.parent is None and f.address.startswith(bus + ":"))
    fn = min(here, key=lambda f: f.address, default=None)
    return fn if fn is not None and fn.port_type == "root_port" else None


def plan_platform(
    pci: PciInfo,
    cpu: CpuInfo,
    memory: MemInfo,
    *,
    dmem: DmemInfo | None = None,
    system: SystemInfo | None = None,
    name: str | None = None,
    kernel_config: Mapping[str, bool] | None = None,
) -> PlatformPlan:
    """The platform the host's PCI tree, CPU and memory describe (module docstring);
    ``kernel_config`` the switches the host's kernel facts settle."""
    planner = _Planner(pci, cpu, memory)
    planner.host_bridges()
    planner.switches()
    dmem_vram = dmem.vram_by_pci_address() if dmem is not None and dmem.status == OK else {}
    planner.endpoints(dmem_vram)
    return planner.plan(system, name, kernel_config or {})


class _Planner:
    """One :func:`plan_platform`: its steps run in order (CPU and DRAM on creation, host
    bridges, switches, endpoints, the plan), each adding its specs, what it mapped, what it
    left out and the assumptions it made; later steps place functions below what the earlier
    ones named (``bridge_of``, ``switch_of``)."""

    def __init__(self, pci: PciInfo, cpu: CpuInfo, memory: MemInfo) -> None:
        self.cpu = cpu
        self.fns = {f.address: f for f in pci.functions} if pci.status == OK else {}
        self.notes: list[str] = []
        self.mapped: list[MappedItem] = []
        self.skipped: list[str] = []
        self.bridge_of: dict[str, str] = {}  # root bus -> host bridge name
        self.switch_of: dict[str, str] = {}  # upstream port address -> switch name
        self.bridges: list[HostBridgeSpec] = []
        self.switch_specs: list[SwitchSpec] = []
        self.devices: list[DeviceSpec] = []
        self.nics: list[NicSpec] = []
        self.displays: list[DisplaySpec] = []
        self.used: set[str] = set()
        self.counters = {"gpu": 0, "accel": 0}
        self._cpu_and_dram(memory)

    def _cpu_and_dram(self, memory: MemInfo) -> None:
        cpu, notes = self.cpu, self.notes
        if cpu.status == OK:
            self.sockets = min(max(cpu.sockets, 1), 8)
            if self.sockets != cpu.sockets:
                notes.append(f"{cpu.sockets} sockets modelled as {self.sockets} (pinlab's maximum)")
            self.cpu_spec = CpuSpec(
                vendor=_CPU_VENDORS.get(cpu.vendor, "other"),
                family=cpu.family,
                model=cpu.model,
                sockets=self.sockets,
                segment=_segment(cpu),
            )
        else:
            self.sockets = 1
            self.cpu_spec = CpuSpec(vendor="other", family=0, model="unknown", sockets=1)
            notes.append(
                "CPU unknown (/proc/cpuinfo not read): vendor 'other', so cpu_supports_p2pdma() "
                "is false in the model"
            )
        if memory.status == OK and memory.total:
            self.host_total = memory.total
        else:
            self.host_total = DEFAULT_HOST_MEMORY
            notes.append(
                f"host memory unknown (/proc/meminfo not read): {fmt_size(self.host_total)} assumed"
            )
        notes.append(
            f"dram.bandwidth {exact_rate(DEFAULT_DRAM_BANDWIDTH)} per socket is an assumption "
            "(sysfs does not show DRAM bandwidth): edit it for this host"
        )
        self.dram = DramSpec(size=self.host_total // self.sockets, bandwidth=DEFAULT_DRAM_BANDWIDTH)

    def _socket_of(self, node: int) -> int:
        return min(self.cpu.node_socket.get(node, 0), self.sockets - 1) if node >= 0 else 0

    def host_bridges(self) -> None:
        """One host bridge per root bus, known by its 00.0 function or a first Root Port."""
        fns = self.fns
        for i, bus in enumerate(sorted({f.root_bus for f in fns.values()}, key=_bus_key)):
            hb_name = f"rc{i}"
            self.bridge_of[bus] = hb_name
            on_bus = [f for f in fns.values() if f.root_bus == bus]
            first = fns.get(f"{bus}:00.0")
            port = None if first else _first_root_port(bus, on_bus)
            node = next((f.numa_node for f in [first, port, *on_bus] if f and f.numa_node >= 0), -1)
            ids = first or port
            self.bridges.append(
                HostBridgeSpec(
                    name=hb_name,
                    socket=self._socket_of(node),
                    vendor=ids.vendor if ids else 0,
                    device=ids.device if ids else 0,
                    root_port_slot=int(port.address[-4:-2], 16) if port else None,
                )
            )
            if first:
                what = (
                    f"host bridge function {first.address} ({first.vendor:04x}:{first.device:04x})"
                )
            elif port:
                what = (
                    f"no 00.0 function; first function: root port {port.address} "
                    f"({port.vendor:04x}:{port.device:04x}), whose IDs the P2PDMA whitelist "
                    "matches from Linux 5.19 (before, it finds no function: not whitelisted)"
                )
            else:
                what = "no 00.0 function or first root port on the root bus: IDs 0000:0000 "
                what += "(not whitelisted)"
            self.mapped.append(MappedItem(hb_name, "host bridge", f"pci{bus}", what))
        if not self.bridges:
            self.bridges.append(HostBridgeSpec(name="rc0", socket=0, vendor=0, device=0))
            self.mapped.append(
                MappedItem("rc0", "host bridge", "-", "assumed: no PCI tree was read")
            )
            self.notes.append(
                "no PCI tree was read: a platform needs a host bridge, so the file has one 'rc0' "
                "with unknown IDs 0000:0000 (P2PDMA's whitelist will not match it)"
            )
        self.used.update(self.bridge_of.values())

    def _parent(self, fn: PciFunction) -> str:
        """The pinlab name of what ``fn`` hangs below: the nearest switch, else its bridge."""
        addr = fn.parent
        while addr is not None and addr in self.fns:
            if addr in self.switch_of:
                return self.switch_of[addr]
            addr = self.fns[addr].parent
        return self.bridge_of[fn.root_bus]

    def _placement(self, fn: PciFunction, *, link: bool = True) -> dict[str, Any]:
        """What a switch, device or NIC spec says of the PCI function ``fn``: its place in
        the platform (``parent``), its PCI IDs and, with ``link``, its link (:func:`_link`)."""
        parent_fn = self.fns.get(fn.parent) if fn.parent else None
        return {
            "parent": self._parent(fn),
            "vendor": fn.vendor,
            "device": fn.device,
            **(_link(fn, parent_fn, self.notes) if link else {}),
        }

    def switches(self) -> None:
        """A switch per PCIe switch upstream port, ACS redirect read off its downstream ports."""
        fns = self.fns
        ups = [f for f in fns.values() if f.is_bridge and f.port_type == "upstream"]
        for i, fn in enumerate(ups):
            self.switch_of[fn.address] = f"sw{i}"
        for fn in ups:
            downstream = [f for f in fns.values() if f.parent == fn.address and f.is_bridge]
            acs = [f.acs_redirect for f in downstream]
            redirect = any(a for a in acs if a)
            if downstream and any(a is None for a in acs):
                self.notes.append(
                    f"{fn.address}: ACS of the switch's downstream ports not readable "
                    "(config space needs root): acs_redirect = false assumed"
                )
            sw_name = self.switch_of[fn.address]
            self.switch_specs.append(
                SwitchSpec(name=sw_name, acs_redirect=redirect, **self._placement(fn))
            )
            self.mapped.append(
                MappedItem(
                    sw_name,
                    "switch",
                    fn.address,
                    f"upstream port {fn.vendor:04x}:{fn.device:04x}, {len(downstream)} "
                    f"downstream ports{', ACS redirect' if redirect else ''} "
                    f"(port type from {fn.port_type_source})",
                )
            )
        self.used.update(self.switch_of.values())

    def endpoints(self, dmem_vram: dict[str, int]) -> None:
        """Devices (with their displays) and NICs; other functions are listed as skipped."""
        for fn in self.fns.values():
            if fn.is_bridge:
                continue
            drv, why = _exporter(fn)
            nic, nic_why = _rdma(fn) if drv is None else (None, "")
            if (drv or nic) and fn.virtfn:
                self.skipped.append(
                    f"{fn.address} {fn.kind}: an SR-IOV virtual function (its PF is mapped)"
                )
            elif drv is not None:
                self._device(fn, drv, why, dmem_vram)
            elif nic is not None:
                self._nic(fn, nic, nic_why)
            elif why or nic_why:
                self.skipped.append(
                    f"{fn.address} {fn.kind} {fn.vendor:04x}:{fn.device:04x}: {why or nic_why}"
                )

    def _device(self, fn: PciFunction, drv: str, why: str, dmem_vram: dict[str, int]) -> None:
        prefix = "accel" if fn.is_accelerator else "gpu"
        dev_name = f"{prefix}{self.counters[prefix]}"
        self.counters[prefix] += 1
        self.used.add(dev_name)
        mem, bar, source = _device_memory(fn, dmem_vram, self.notes)
        rciep = fn.parent is None
        model = EXPORTERS[drv]
        host_domains = model.host_memory_domains()
        self.devices.append(
            DeviceSpec(
                name=dev_name,
                driver=drv,
                memory=mem,
                bar=bar,
                gtt=self.host_total // 2 if "gtt" in host_domains else None,
                system=self.host_total if "system" in host_domains else None,
                rciep=rciep,
                **self._placement(fn, link=not rciep),
            )
        )
        self.mapped.append(
            MappedItem(
                dev_name,
                f"device ({drv})",
                fn.address,
                f"{fn.kind} {fn.vendor:04x}:{fn.device:04x}, {why}; "
                f"memory {fmt_size(mem)} from {source}",
            )
        )
        if model.has_display and fn.drm_connectors:
            disp = f"display{len(self.displays)}"
            self.used.add(disp)
            self.displays.append(DisplaySpec(name=disp, device=dev_name))
            self.mapped.append(
                MappedItem(
                    disp,
                    "display",
                    fn.address,
                    f"display engine of {dev_name} ({len(fn.drm_connectors)} connectors)",
                )
            )

    def _nic(self, fn: PciFunction, nic: str, why: str) -> None:
        n = len(self.nics)
        base = fn.ib_devices[0] if len(fn.ib_devices) == 1 else f"{nic}_{n}"
        nic_name = _safe_name(base, f"{nic}_{n}")
        if nic_name in self.used:
            nic_name = f"{nic}_{n}_{fn.address.replace(':', '_')}"
        self.used.add(nic_name)
        rate = None
        if fn.ib_rate_gbps:
            rate = parse_line_rate(f"{fn.ib_rate_gbps:g}Gbps")
        elif fn.net_speed_mbps:
            rate = parse_line_rate(f"{fn.net_speed_mbps}Mbps")
        self.nics.append(
            NicSpec(
                name=nic_name,
                driver=nic,
                line_rate=rate,
                odp=nic_driver(nic).supports_odp,
                **self._placement(fn),
            )
        )
        rate_text = "line rate unknown (default)" if rate is None else "line rate from sysfs"
        self.mapped.append(
            MappedItem(
                nic_name,
                f"NIC ({nic})",
                fn.address,
                f"{fn.kind} {fn.vendor:04x}:{fn.device:04x}, {why}; {rate_text}",
            )
        )

    def plan(
        self, system: SystemInfo | None, name: str | None, switches: Mapping[str, bool]
    ) -> PlatformPlan:
        """The spec of what the steps found, the release's facts and kernel configuration it
        must carry, the aliases."""
        notes = self.notes
        if not self.devices and not self.nics:
            notes.append(
                "no GPU, accelerator or RDMA NIC that pinlab models: the platform has host "
                "bridges, CPU and DRAM only (zero devices is a valid platform; scenarios that "
                "need a device must name a preset instead)"
            )
        kernel = suggest_kernel(system)
        if system is not None and system.status == OK and kernel is None:
            notes.append(
                f"kernel {system.release} is older than every pinlab profile: none suggested"
            )
        if kernel is not None:
            notes.extend(absent_drivers(self.devices, kernel))
        whitelist = host_whitelist(system, kernel, self.bridges, notes)
        root_port_lookup = host_root_port_lookup(system, kernel, self.bridges, notes)
        kernel_config = KernelConfigSpec(**switches) if switches else None
        if kernel_config is not None:
            notes.extend(_config_notes(kernel_config, kernel or DEFAULT_PROFILE))
        host = system.hostname if system is not None and system.hostname else ""
        spec_name = name or _safe_name(f"host-{host}" if host else "host", "host")
        release = system.release if system is not None and system.release else "unknown"
        description = (
            f"read from host {host or '?'} (Linux {release}) by pinlab inspect: "
            f"host bridges {len(self.bridges)}, switches {len(self.switch_specs)}, "
            f"devices {len(self.devices)}, RDMA NICs {len(self.nics)}; dram.bandwidth assumed"
        )
        aliases: dict[str, str] = {}
        for item in self.mapped:
            found = self.fns.get(item.address)
            if found is not None and item.kind.startswith(("device", "NIC")):
                names = (found.address, *found.drm_cards, *found.ib_devices, *found.net_devices)
                for alias in names:
                    aliases.setdefault(alias, item.name)
        spec = PlatformSpec(
            name=spec_name,
            description=description,
            kernel=kernel,
            kernel_config=kernel_config,
            cpu=self.cpu_spec,
            dram=self.dram,
            host_bridges=tuple(self.bridges),
            switches=tuple(self.switch_specs),
            devices=tuple(self.devices),
            nics=tuple(self.nics),
            displays=tuple(self.displays),
            p2pdma_whitelist=whitelist,
            p2pdma_root_port_lookup=root_port_lookup,
        )
        return PlatformPlan(spec, tuple(self.mapped), tuple(self.skipped), tuple(notes), aliases)


def _config_notes(config: KernelConfigSpec, profile: str) -> list[str]:
    """A note for each switch of the host's kernel that the profile's default does not match."""
    base = KERNEL_PRESETS[profile]
    notes = []
    for key, value in config.for_profile(base).items():
        if getattr(base, key) is not value:
            notes.append(
                f"this kernel has {config.OPTIONS[key]}={'y' if value else 'n'}, unlike profile "
                f"{profile}'s default: the file carries it (kernel_config.{key} = "
                f"{'true' if value else 'false'}), and a run on it starts from it"
            )
    return notes


def _bus_key(bus: str) -> tuple[int, ...]:
    return tuple(int(x, 16) for x in bus.split(":"))


def _comment(lines: Sequence[str]) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


def use_it(path: str | os.PathLike[str]) -> str:
    """The command that runs a scenario on the platform file at ``path``: ``pinlab run`` with
    no scenario runs the built-in suite on its own platforms, not on this one."""
    return (
        f"pinlab run SCENARIO --platform {path} (SCENARIO: a scenario file, or a built-in that "
        "`pinlab scenarios` lists; --map NAME=HOST puts its device names onto this host's)"
    )


def platform_text(plan: PlatformPlan, *, source: str = "") -> str:
    """The platform file: a comment header (mapping, skipped functions, assumptions) and
    :func:`dump_platform`'s TOML, which :func:`load_platform` reads back equal."""
    header = [
        "pinlab platform file written by `pinlab inspect`"
        + (f" from {source}" if source else "")
        + ".",
        f"Use it with: {use_it('<this file>')}",
        "",
        "Mapping (pinlab name = PCI address: what):",
        *(f"  {m.name} = {m.address}: {m.kind}, {m.what}" for m in plan.mapped),
    ]
    if plan.aliases:
        header += ["", ALIASES_PREFIX + " ".join(f"{k}={v}" for k, v in plan.aliases.items())]
    if plan.skipped:
        header += ["", "Not mapped:", *(f"  {s}" for s in plan.skipped)]
    if plan.notes:
        header += ["", "Assumptions and fallbacks:", *(f"  - {n}" for n in plan.notes)]
    return _comment(header) + "\n" + dump_platform(plan.spec)


def write_platform(text: str, path: str | os.PathLike[str]) -> Path:
    """Write ``text`` to ``path`` atomically: a temporary file in the same directory, flushed
    and renamed over the target. Raises ``OSError`` (the directory is missing or not
    writable); the temporary file is removed on failure."""
    return fsutil.write_atomic(Path(path), text, make_parents=False)
