"""Reader of the PCI tree in sysfs: functions, bridges, BARs, links and ACS.

:func:`read_pci` reads ``/sys/bus/pci/devices/*``: ``class``, ``vendor``, ``device``,
``numa_node``, the bound ``driver``, ``resource`` (BAR sizes), ``max_link_speed`` /
``max_link_width``, ``physfn`` (an SR-IOV VF), ``config`` (PCIe port type from the PCI Express
capability, ACS control from the ACS extended capability, when readable:
:func:`parse_config_space`), amdgpu's ``mem_info_vram_total``, ``infiniband/*/ports/*/rate``,
``net/*/speed``, DRM connectors; the parent bridge from the resolved
``/sys/devices/pci<domain>:<bus>/...`` path (``kernel-semantics.md`` §8).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from pinlab.errors import show_value
from pinlab.inspect.source import (
    MISSING,
    OK,
    ROOT,
    HexId,
    Record,
    Size,
    SourceRecord,
    listdir,
    opt_int,
    opt_text,
    read_bytes,
    read_text,
    under,
    unreadable,
    why,
)

__all__ = ["PciFunction", "PciInfo", "parse_config_space", "read_pci"]

# PCI Express capability: Device/Port Type (PCI_EXP_FLAGS_TYPE, include/uapi/linux/pci_regs.h)
_PCIE_TYPES = {
    0x0: "endpoint",
    0x1: "legacy_endpoint",
    0x4: "root_port",
    0x5: "upstream",
    0x6: "downstream",
    0x7: "pcie_to_pci",
    0x8: "pci_to_pcie",
    0x9: "rciep",
    0xA: "rc_event_collector",
}
"""Besides these, ``"conventional"``: a PCI (not PCIe) function."""
_PCI_CAP_ID_EXP = 0x10
_PCI_EXT_CAP_ID_ACS = 0x000D
_PCI_ACS_REDIR = 0x0004 | 0x0008 | 0x0020  # RR | CR | EC (pci_bridge_has_acs_redir)


PORT_TYPES = (*_PCIE_TYPES.values(), "conventional")
"""The ``port_type`` values a function may have."""
PORT_TYPE_SOURCES = ("", "config", "tree")
"""Where a ``port_type`` came from (``""``: not known)."""

_ADDR = re.compile(r"^([0-9a-f]{4,}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_BUS = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}$")


def _checked(ok: Callable[[str], object], expected: str) -> AfterValidator:
    """A field validator: the value if ``ok(value)``, else ``expected ..., found ...``."""

    def check(value: str) -> str:
        if not ok(value):
            raise PydanticCustomError(
                "pinlab_pci",
                "expected {expected}, found {found}",
                {"expected": expected, "found": show_value(value)},
            )
        return value

    return AfterValidator(check)


def _one_of(allowed: tuple[str, ...]) -> AfterValidator:
    return _checked(allowed.__contains__, f"one of {', '.join(map(show_value, allowed))}")


PciAddress = Annotated[str, _checked(_ADDR.match, 'a PCI address like "0000:03:00.0"')]
"""``DDDD:BB:SS.F``, lower-case hex, as sysfs names a function."""
PciBus = Annotated[str, _checked(_BUS.match, 'a PCI bus like "0000:00"')]
"""``DDDD:BB``, a host bridge's root bus."""


class PciFunction(BaseModel, Record):
    """One PCI function of ``/sys/bus/pci/devices``.

    ``address`` is ``DDDD:BB:SS.F``; ``root_bus`` the ``DDDD:BB`` of its host bridge (from the
    ``pciDDDD:BB`` component of the resolved sysfs path); ``parent`` the address of the bridge
    it sits below (None: on the root bus). ``class_code`` is the 24-bit class (``0x030000``).
    ``port_type`` is the PCIe Device/Port Type from config space when readable, else inferred
    from the tree (``port_type_source`` says which). ``acs_ctrl`` is the ACS Control register
    (None if not readable or no ACS capability). ``bars`` are the sizes of the memory BARs 0-5.
    ``link_speed`` is ``max_link_speed`` in GT/s, ``link_width`` ``max_link_width``.
    ``iommu_group`` is the number of the ``iommu_group`` link (None: no IOMMU, or not shown);
    ``drm_cards`` the DRM minors (``card1``) the function's driver registered.

    The same model is a ``[[pci]]`` entry of a host snapshot (:mod:`pinlab.inspect.snapshot`):
    IDs written in hex, sizes with a unit, validated with one-line errors.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: PciAddress
    root_bus: PciBus
    parent: PciAddress | None = None
    vendor: HexId
    device: HexId
    class_code: HexId
    numa_node: int = -1
    driver: str | None = None
    bars: tuple[Size, ...] = ()
    link_speed: float | None = None
    link_width: int | None = None
    virtfn: bool = False
    port_type: Annotated[str, _one_of(PORT_TYPES)] | None = None
    port_type_source: Annotated[str, _one_of(PORT_TYPE_SOURCES)] = ""
    acs_ctrl: HexId | None = None
    iommu_group: int | None = None
    vram_total: Size | None = None
    ib_devices: tuple[str, ...] = ()
    ib_rate_gbps: float | None = None
    net_devices: tuple[str, ...] = ()
    net_speed_mbps: int | None = None
    drm_connectors: tuple[str, ...] = ()
    drm_cards: tuple[str, ...] = ()

    @property
    def base_class(self) -> int:
        """The class byte (``0x03`` display, ``0x02`` network, ``0x06`` bridge, ``0x12``)."""
        return self.class_code >> 16

    @property
    def class_subclass(self) -> int:
        """Class and subclass (``0x0604`` PCI bridge, ``0x0207`` InfiniBand, ``0x1200``)."""
        return self.class_code >> 8

    @property
    def is_bridge(self) -> bool:
        """A PCI-to-PCI bridge (``PCI_CLASS_BRIDGE_PCI`` 0x0604): root/switch port."""
        return self.class_subclass == 0x0604

    @property
    def is_display(self) -> bool:
        """A display / 3D controller (class 0x03xx)."""
        return self.base_class == 0x03

    @property
    def is_network(self) -> bool:
        """A network controller (0x02xx; 0x0207 is InfiniBand)."""
        return self.base_class == 0x02

    @property
    def is_accelerator(self) -> bool:
        """A processing accelerator (0x1200)."""
        return self.class_subclass == 0x1200

    @property
    def acs_redirect(self) -> bool | None:
        """Whether ACS P2P request/completion redirect or egress control is on (None: unknown)."""
        return None if self.acs_ctrl is None else bool(self.acs_ctrl & _PCI_ACS_REDIR)

    @property
    def largest_bar(self) -> int | None:
        """The largest memory BAR, bytes (None if no BAR was read)."""
        return max(self.bars) if self.bars else None

    @property
    def kind(self) -> str:
        """A short name of the class, for summaries."""
        names = {
            0x0600: "host bridge",
            0x0604: "PCI bridge",
            0x0300: "VGA controller",
            0x0302: "3D controller",
            0x0380: "display controller",
            0x0200: "Ethernet controller",
            0x0207: "InfiniBand controller",
            0x1200: "processing accelerator",
            0x0108: "NVMe controller",
            0x0403: "audio device",
            0x0C03: "USB controller",
        }
        return names.get(self.class_subclass, f"class {self.class_code:06x}")

    def to_json(self) -> dict[str, Any]:
        out = Record.to_json(self)
        out["vendor"] = f"0x{self.vendor:04x}"
        out["device"] = f"0x{self.device:04x}"
        out["class_code"] = f"0x{self.class_code:06x}"
        out["kind"] = self.kind
        return out


@dataclass(frozen=True, slots=True)
class PciInfo(SourceRecord):
    """The PCI functions of ``/sys/bus/pci/devices`` in address order; ``problems`` lists
    functions that could not be read (skipped)."""

    functions: tuple[PciFunction, ...] = ()
    problems: tuple[str, ...] = ()
    detail: str = ""

    def by_address(self) -> dict[str, PciFunction]:
        """The functions by address."""
        return {f.address: f for f in self.functions}


# -- reading ------------------------------------------------------------------------------------

_HOST = re.compile(r"^pci([0-9a-f]{4,}):([0-9a-f]{2})$")
_IORESOURCE_MEM = 0x200
_PCI_NUM_BARS = 6


def parse_config_space(config: bytes) -> tuple[str | None, int | None]:
    """(PCIe Device/Port Type, ACS Control) from a function's config space.

    Walks the capability list from ``PCI_CAPABILITY_LIST`` (0x34) to the PCI Express
    capability (ID 0x10; type = bits 7:4 of ``PCI_EXP_FLAGS``) and the extended capabilities
    from 0x100 to ACS (ID 0x000d; control at +6). Unprivileged readers get only the first 64
    bytes of ``config``, so either may be None. A fully read config space without a PCI
    Express capability is ``"conventional"`` (a PCI function, e.g. in a legacy-PCI VM).
    """
    port_type: str | None = None
    acs: int | None = None
    if len(config) >= 0x100:  # the whole header and capability area: no PCIe cap = plain PCI
        port_type = "conventional"
    if len(config) >= 0x40 and config[0x06] & 0x10:  # PCI_STATUS_CAP_LIST
        ptr = config[0x34] & 0xFC
        for _ in range(48):
            if ptr < 0x40 or ptr + 4 > len(config):
                break
            if config[ptr] == _PCI_CAP_ID_EXP:
                flags = int.from_bytes(config[ptr + 2 : ptr + 4], "little")
                port_type = _PCIE_TYPES.get(flags >> 4 & 0xF)
                break
            ptr = config[ptr + 1] & 0xFC
    if len(config) > 0x100:
        off = 0x100
        for _ in range(512):
            if off < 0x100 or off + 8 > len(config):
                break
            header = int.from_bytes(config[off : off + 4], "little")
            if header in (0, 0xFFFFFFFF):
                break
            if header & 0xFFFF == _PCI_EXT_CAP_ID_ACS:
                acs = int.from_bytes(config[off + 6 : off + 8], "little")
                break
            off = header >> 20 & 0xFFC
            if off == 0:
                break
    return port_type, acs


def _bars(text: str | None) -> tuple[int, ...]:
    """Memory BAR sizes from ``resource`` (``start end flags`` per line; BARs 0-5)."""
    if text is None:
        return ()
    sizes = []
    for line in text.splitlines()[:_PCI_NUM_BARS]:
        try:
            start, end, flags = (int(x, 16) for x in line.split()[:3])
        except ValueError:
            continue
        if flags & _IORESOURCE_MEM and end > start:
            sizes.append(end - start + 1)
    return tuple(sizes)


def _link_speed(text: str | None) -> float | None:
    """``max_link_speed`` (``"16.0 GT/s PCIe"``) in GT/s; None for ``Unknown``."""
    if not text:
        return None
    m = re.match(r"([\d.]+)\s*GT/s", text)
    return float(m[1]) if m else None


def _ib_rate(pdir: Path, names: tuple[str, ...]) -> float | None:
    """The best ``infiniband/<dev>/ports/<n>/rate`` (``"100 Gb/sec (4X EDR)"``) in Gb/s."""
    best: float | None = None
    for name in names:
        try:
            ports = sorted((pdir / "infiniband" / name / "ports").iterdir())
        except OSError:
            continue
        for port in ports:
            m = re.match(r"([\d.]+)\s*Gb/sec", opt_text(port / "rate") or "")
            if m and float(m[1]) > 0:
                best = max(best or 0.0, float(m[1]))
    return best


def _drm_connectors(pdir: Path) -> tuple[str, ...]:
    out: list[str] = []
    for card in listdir(pdir / "drm"):
        if re.fullmatch(r"card\d+", card):
            out.extend(c for c in listdir(pdir / "drm" / card) if c.startswith(card + "-"))
    return tuple(out)


def _iommu_group(entry: Path) -> int | None:
    """The group number of the ``iommu_group`` link (``../../kernel/iommu_groups/<n>``)."""
    try:
        name = os.path.basename(os.readlink(entry / "iommu_group"))
    except OSError:
        return None
    return int(name) if name.isdigit() else None


def _sysfs_chain(entry: Path, root: Path) -> list[str] | None:
    """The components of the resolved device path from ``pciDDDD:BB`` on (None: not found).

    ``/sys/bus/pci/devices/<addr>`` links to ``../../../devices/pci0000:00/0000:00:01.0/<addr>``;
    the link is resolved as text (an absolute target is taken below ``root``), so a fake tree
    needs no real ``/sys``.
    """
    try:
        target = os.readlink(entry)
    except OSError:
        return None
    if target.startswith("/"):
        resolved = os.path.normpath(str(root) + "/" + target.lstrip("/"))
    else:
        resolved = os.path.normpath(os.path.join(os.path.dirname(entry), target))
    parts = resolved.split(os.sep)
    hosts = [i for i, p in enumerate(parts) if _HOST.match(p)]
    if not hosts:
        return None
    return parts[hosts[-1] :]


def _structural_types(functions: dict[str, PciFunction]) -> dict[str, str]:
    """Port types inferred from the tree where config space did not say: a bridge on the root
    bus is a root port; below a root or downstream port a bridge is a switch upstream port;
    below an upstream port, a downstream port; a non-bridge on the root bus is an RCiEP."""
    memo: dict[str, str] = {}

    def kind(addr: str) -> str:
        if addr in memo:
            return memo[addr]
        fn = functions[addr]
        if fn.port_type is not None and fn.port_type_source == "config":
            memo[addr] = fn.port_type
            return fn.port_type
        parent_kind = kind(fn.parent) if fn.parent in functions else None
        if not fn.is_bridge:
            result = "rciep" if fn.parent is None else "endpoint"
        elif fn.parent is None:
            result = "root_port"
        elif parent_kind == "upstream":
            result = "downstream"
        else:
            result = "upstream"
        memo[addr] = result
        return result

    return {addr: kind(addr) for addr in functions}


def read_pci(root: Path = ROOT) -> PciInfo:
    """Every function of ``/sys/bus/pci/devices`` (module docstring lists the attributes)."""
    devices = under(root, "/sys/bus/pci/devices")
    try:
        entries = sorted(devices.iterdir(), key=lambda p: p.name)
    except FileNotFoundError:
        return PciInfo(
            MISSING, str(devices), detail="no /sys/bus/pci/devices: no PCI bus, or no sysfs"
        )
    except OSError as e:
        return PciInfo(unreadable(why(e)), str(devices))
    found: dict[str, PciFunction] = {}
    problems: list[str] = []
    for entry in entries:
        fn, problem = _read_function(entry, root)
        if fn is not None:
            found[fn.address] = fn
        if problem:
            problems.append(problem)
    types = _structural_types(found)
    functions = []
    for addr, fn in found.items():
        if fn.port_type_source != "config":
            fn = fn.model_copy(update={"port_type": types[addr], "port_type_source": "tree"})
        functions.append(fn)
    functions.sort(key=lambda f: _addr_key(f.address))
    return PciInfo(OK, str(devices), tuple(functions), tuple(problems))


def _addr_key(addr: str) -> tuple[int, ...]:
    m = _ADDR.match(addr)
    return tuple(int(x, 16) for x in m.groups()) if m else (1 << 32,)


def _read_function(entry: Path, root: Path) -> tuple[PciFunction | None, str]:
    addr = entry.name
    if not _ADDR.match(addr):
        return None, f"{addr}: not a PCI address (skipped)"
    chain = _sysfs_chain(entry, root)
    if chain is None:
        return None, f"{addr}: not a link into /sys/devices/pci<domain>:<bus>/ (skipped)"
    try:
        class_code = int(read_text(entry / "class").strip(), 16)
        vendor = int(read_text(entry / "vendor").strip(), 16)
        device = int(read_text(entry / "device").strip(), 16)
    except OSError as e:
        return None, f"{addr}: class/vendor/device {why(e)} (skipped)"
    except ValueError as e:
        return None, f"{addr}: class/vendor/device malformed: {e} (skipped)"
    host = _HOST.match(chain[0])
    assert host is not None
    root_bus = f"{host[1]}:{host[2]}"
    pci_parts = [p for p in chain[1:] if _ADDR.match(p)]
    parent = pci_parts[-2] if len(pci_parts) >= 2 else None
    try:
        config = read_bytes(entry / "config")
    except OSError:
        config = b""
    port_type, acs = parse_config_space(config)
    try:
        driver: str | None = os.path.basename(os.readlink(entry / "driver"))
    except OSError:
        driver = None
    ib = listdir(entry / "infiniband")
    net = listdir(entry / "net")
    speeds = [s for n in net if (s := opt_int(entry / "net" / n / "speed", 10)) and s > 0]
    numa = opt_int(entry / "numa_node", 10)
    width = opt_int(entry / "max_link_width", 10)
    return (
        PciFunction(
            address=addr,
            root_bus=root_bus,
            parent=parent,
            vendor=vendor,
            device=device,
            class_code=class_code,
            numa_node=-1 if numa is None else numa,
            driver=driver,
            bars=_bars(opt_text(entry / "resource")),
            link_speed=_link_speed(opt_text(entry / "max_link_speed")),
            link_width=width if width else None,
            virtfn=os.path.lexists(entry / "physfn"),
            port_type=port_type,
            port_type_source="config" if port_type is not None else "",
            acs_ctrl=acs,
            vram_total=opt_int(entry / "mem_info_vram_total", 10),
            ib_devices=ib,
            ib_rate_gbps=_ib_rate(entry, ib),
            net_devices=net,
            net_speed_mbps=max(speeds) if speeds else None,
            drm_connectors=_drm_connectors(entry),
            iommu_group=_iommu_group(entry),
            drm_cards=tuple(n for n in listdir(entry / "drm") if re.fullmatch(r"card\d+", n)),
        ),
        "",
    )
