"""Readers of the real host: what the kernel shows a process about pinning and the PCI tree.

Each reader takes ``root`` (default ``/``) so that tests can point it at a fake sysfs/procfs tree,
reads only files below it, and returns a small frozen record whose ``status`` is one of

* ``"ok"`` -- the source was read (it may still say "nothing here", e.g. no regions);
* ``"missing"`` -- the file or directory does not exist (``detail`` says what that means);
* ``"unreadable: <reason>"`` -- it exists but could not be read or parsed (permission denied,
  a directory where a file was expected, malformed text);
* ``"not applicable"`` -- a source that depends on another one that is absent (dmem without a
  cgroup v2 mount).

No reader raises for a missing, unreadable or malformed source (``pinlab inspect`` never
crashes on the host it is given). The kernel interfaces read, with the ``policy-semantics.md``
/ ``kernel-semantics.md`` sections they feed:

* :func:`read_memlock` -- ``getrlimit(RLIMIT_MEMLOCK)`` (``/proc/self/limits`` below a fake
  root), ``VmLck`` / ``VmPin`` of ``/proc/self/status`` (``mm->locked_vm``, ``mm->pinned_vm``;
  policy §1.1);
* :func:`read_capabilities` -- ``CapEff`` of ``/proc/self/status``: ``CAP_IPC_LOCK`` (bit 14,
  ``can_do_mlock``, policy §1.2) and ``CAP_SYS_RESOURCE`` (bit 24, raising a hard rlimit);
* :func:`read_cgroup` -- the ``cgroup2`` mount in ``/proc/self/mountinfo`` (``/proc/mounts`` as
  a fallback), the caller's ``0::/path`` line of ``/proc/self/cgroup``, ``cgroup.controllers``;
* :func:`read_dmem` -- ``dmem.capacity`` at the cgroup v2 root, ``dmem.current`` / ``min`` /
  ``low`` / ``max`` in the caller's cgroup and its ancestors (policy §2.2-§2.4), parsed with
  :func:`pinlab.policy.dmem.dmemcg_parse_limit` -- the syntax the model's files use;
* :func:`read_bufinfo` -- debugfs ``/sys/kernel/debug/dma_buf/bufinfo`` through
  :func:`pinlab.kernel.bufinfo.parse_bufinfo` (``kernel-semantics.md`` §4.1);
* :func:`read_pci` -- ``/sys/bus/pci/devices/*``: ``class``, ``vendor``, ``device``,
  ``numa_node``, the bound ``driver``, ``resource`` (BAR sizes), ``max_link_speed`` /
  ``max_link_width``, ``physfn`` (an SR-IOV VF), ``config`` (PCIe port type from the PCI
  Express capability, ACS control from the ACS extended capability, when readable), amdgpu's
  ``mem_info_vram_total``, ``infiniband/*/ports/*/rate``, ``net/*/speed``, DRM connectors; the
  parent bridge from the resolved ``/sys/devices/pci<domain>:<bus>/...`` path (§8);
* :func:`read_cpu` -- ``/proc/cpuinfo`` (``vendor_id``, ``cpu family``: what
  ``cpu_supports_p2pdma`` tests, §8.3), sockets from ``physical id``, NUMA node → socket from
  ``/sys/devices/system/node/node*/cpulist`` and ``topology/physical_package_id``;
* :func:`read_meminfo` -- ``MemTotal`` of ``/proc/meminfo``;
* :func:`read_system` -- ``/proc/sys/kernel/osrelease`` and ``hostname``.
"""

from __future__ import annotations

import os
import re
import resource
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from pinlab.kernel.bufinfo import BufinfoDump, BufinfoParseError, parse_bufinfo
from pinlab.policy.dmem import dmemcg_parse_limit
from pinlab.policy.page_counter import PAGE_COUNTER_MAX

__all__ = [
    "CAP_IPC_LOCK",
    "CAP_SYS_RESOURCE",
    "MISSING",
    "NOT_APPLICABLE",
    "OK",
    "BufinfoInfo",
    "CapabilityInfo",
    "CgroupInfo",
    "CpuInfo",
    "DmemFile",
    "DmemInfo",
    "HostReport",
    "MemInfo",
    "MemlockInfo",
    "PciFunction",
    "PciInfo",
    "SystemInfo",
    "inspect_host",
    "parse_config_space",
    "read_bufinfo",
    "read_capabilities",
    "read_cgroup",
    "read_cpu",
    "read_dmem",
    "read_meminfo",
    "read_memlock",
    "read_pci",
    "read_system",
    "unreadable",
]

OK = "ok"
MISSING = "missing"
NOT_APPLICABLE = "not applicable"

CAP_IPC_LOCK = 14
"""``include/uapi/linux/capability.h``: lock memory (``mlock``, bypass RLIMIT_MEMLOCK)."""
CAP_SYS_RESOURCE = 24
"""``include/uapi/linux/capability.h``: override resource limits (raise a hard rlimit)."""

ROOT = Path("/")


def unreadable(reason: str) -> str:
    """The status ``"unreadable: <reason>"``."""
    return f"unreadable: {reason}"


# -- file access (one function, so tests can make any path fail) -------------------------------


def _read_bytes(path: Path) -> bytes:
    """Read a whole file. Tests monkeypatch this to raise ``PermissionError`` for a path."""
    with open(path, "rb") as f:
        return f.read()


def _read_text(path: Path) -> str:
    return _read_bytes(path).decode("utf-8", errors="backslashreplace")


def _why(exc: OSError) -> str:
    """A short reason for an ``OSError``: ``permission denied``, ``is a directory`` ..."""
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


def _under(root: Path, path: str) -> Path:
    """``path`` (absolute, as the kernel prints it) inside ``root``."""
    return root / path.lstrip("/")


T = TypeVar("T")


def _try_read(path: Path, parse: Callable[[str], T]) -> tuple[str, T | None]:
    """(status, value): ``ok`` and ``parse(text)``, ``missing``, or ``unreadable: why``."""
    try:
        text = _read_text(path)
    except FileNotFoundError:
        return MISSING, None
    except OSError as e:
        return unreadable(_why(e)), None
    try:
        return OK, parse(text)
    except (ValueError, IndexError) as e:
        return unreadable(f"malformed {path.name}: {e}"), None


def _opt_text(path: Path) -> str | None:
    """The stripped text of an optional attribute, None if it is absent or unreadable."""
    try:
        return _read_text(path).strip()
    except OSError:
        return None


def _opt_int(path: Path, base: int = 0) -> int | None:
    text = _opt_text(path)
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def _status_fields(text: str) -> dict[str, str]:
    """``/proc/<pid>/status`` as ``{key: value}``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _kb(value: str | None) -> int | None:
    """``"1234 kB"`` → bytes (procfs ``kB`` are KiB)."""
    if value is None:
        return None
    parts = value.split()
    if not parts or not parts[0].isdigit():
        return None
    return int(parts[0]) * 1024


# -- records --------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "to_json"):
        return value.to_json()
    return value


class _Record:
    """Mixin: ``to_json`` over the dataclass fields."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON types."""
        names = getattr(self, "__dataclass_fields__", {})
        return {name: _jsonable(getattr(self, name)) for name in names}


@dataclass(frozen=True, slots=True)
class MemlockInfo(_Record):
    """The caller's RLIMIT_MEMLOCK and its ``mm`` counters (``policy-semantics.md`` §1.1-§1.2).

    ``soft``/``hard`` are bytes, None for ``RLIM_INFINITY`` ("unlimited"). ``locked_vm`` /
    ``pinned_vm`` are ``VmLck`` / ``VmPin`` of ``/proc/self/status`` in bytes (None if not
    shown) -- ``mm->locked_vm`` (mlock, ``account_locked_vm``) and ``mm->pinned_vm``
    (``ib_umem_get``), each compared with the limit on its own.
    """

    status: str
    source: str
    soft: int | None = None
    hard: int | None = None
    locked_vm: int | None = None
    pinned_vm: int | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class CapabilityInfo(_Record):
    """The caller's effective capabilities (``CapEff``); None where unknown."""

    status: str
    source: str
    effective: int | None = None
    detail: str = ""

    def has(self, cap: int) -> bool | None:
        """Whether capability bit ``cap`` is in the effective set (None: unknown)."""
        return None if self.effective is None else bool(self.effective >> cap & 1)

    @property
    def cap_ipc_lock(self) -> bool | None:
        """``CAP_IPC_LOCK``: ``can_do_mlock`` and ``ib_umem_get`` skip the limit comparison."""
        return self.has(CAP_IPC_LOCK)

    @property
    def cap_sys_resource(self) -> bool | None:
        """``CAP_SYS_RESOURCE``: may raise the hard RLIMIT_MEMLOCK."""
        return self.has(CAP_SYS_RESOURCE)

    def to_json(self) -> dict[str, Any]:
        out = _Record.to_json(self)
        out["cap_ipc_lock"] = self.cap_ipc_lock
        out["cap_sys_resource"] = self.cap_sys_resource
        return out


@dataclass(frozen=True, slots=True)
class CgroupInfo(_Record):
    """The cgroup v2 hierarchy as the caller sees it.

    ``mount`` is the ``cgroup2`` mount point (``/sys/fs/cgroup``; ``/sys/fs/cgroup/unified`` in
    systemd's hybrid layout); ``mount_root`` the mount's root within the hierarchy (not ``/``
    inside a container without a cgroup namespace); ``mode`` ``"unified"`` (v2 only) or
    ``"hybrid"`` (v1 hierarchies mounted too, listed in ``v1_controllers``). ``path`` is the
    caller's cgroup from ``/proc/self/cgroup`` (``0::/path``); ``directory`` its directory below
    ``root`` (None if the caller's cgroup lies outside the mount). ``controllers`` are the
    caller's ``cgroup.controllers`` (what its parent enabled), ``root_controllers`` the root's.
    """

    status: str
    source: str
    mount: str | None = None
    mount_root: str = "/"
    mode: str | None = None
    path: str | None = None
    directory: Path | None = None
    root_directory: Path | None = None
    controllers: tuple[str, ...] = ()
    root_controllers: tuple[str, ...] = ()
    v1_controllers: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True, slots=True)
class DmemFile(_Record):
    """One dmem interface file: ``<region> <bytes|max>`` per line; ``max`` is None here."""

    cgroup: str
    name: str
    status: str
    values: Mapping[str, int | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DmemInfo(_Record):
    """The dmem controller (Linux 6.14+, ``policy-semantics.md`` §2.2-§2.4).

    ``capacity`` is the root's ``dmem.capacity``: region name → bytes (regions are named
    ``drm/<PCI address>/<region>``, e.g. ``drm/0000:03:00.0/vram0`` for xe, ``.../vram`` for
    amdgpu). ``files`` are the caller's cgroup's and each ancestor's ``dmem.current`` /
    ``dmem.min`` / ``dmem.low`` / ``dmem.max`` (the root has only ``dmem.current``), nearest
    first; a file that is not there is listed with status ``missing`` (dmem not enabled in the
    parent's ``cgroup.subtree_control``).
    """

    status: str
    source: str
    capacity: Mapping[str, int] = field(default_factory=dict)
    files: tuple[DmemFile, ...] = ()
    detail: str = ""

    def vram_by_pci_address(self) -> dict[str, int]:
        """Bytes of the ``vram*`` regions of each PCI address (``drm/<addr>/vram*``)."""
        out: dict[str, int] = {}
        for name, size in self.capacity.items():
            parts = name.split("/")
            if len(parts) == 3 and parts[0] == "drm" and parts[2].startswith("vram"):
                out[parts[1]] = out.get(parts[1], 0) + size
        return out


@dataclass(frozen=True, slots=True)
class BufinfoInfo(_Record):
    """debugfs ``dma_buf/bufinfo``, parsed (``kernel-semantics.md`` §4.1)."""

    status: str
    source: str
    dump: BufinfoDump | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "source": self.source, "detail": self.detail}
        if self.dump is not None:
            exporters: dict[str, int] = {}
            for rec in self.dump.objects:
                exporters[rec.exp_name] = exporters.get(rec.exp_name, 0) + 1
            out["objects"] = len(self.dump.objects)
            out["bytes"] = sum(rec.size for rec in self.dump.objects)
            out["attachments"] = sum(len(rec.attached_devices) for rec in self.dump.objects)
            out["exporters"] = exporters
            out["problems"] = self.dump.problems()
        return out


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


@dataclass(frozen=True, slots=True)
class PciFunction(_Record):
    """One PCI function of ``/sys/bus/pci/devices``.

    ``address`` is ``DDDD:BB:SS.F``; ``root_bus`` the ``DDDD:BB`` of its host bridge (from the
    ``pciDDDD:BB`` component of the resolved sysfs path); ``parent`` the address of the bridge
    it sits below (None: on the root bus). ``class_code`` is the 24-bit class (``0x030000``).
    ``port_type`` is the PCIe Device/Port Type from config space when readable, else inferred
    from the tree (``port_type_source`` says which). ``acs_ctrl`` is the ACS Control register
    (None if not readable or no ACS capability). ``bars`` are the sizes of the memory BARs 0-5.
    ``link_speed`` is ``max_link_speed`` in GT/s, ``link_width`` ``max_link_width``.
    """

    address: str
    root_bus: str
    parent: str | None
    vendor: int
    device: int
    class_code: int
    numa_node: int = -1
    driver: str | None = None
    bars: tuple[int, ...] = ()
    link_speed: float | None = None
    link_width: int | None = None
    virtfn: bool = False
    port_type: str | None = None
    port_type_source: str = ""
    acs_ctrl: int | None = None
    vram_total: int | None = None
    ib_devices: tuple[str, ...] = ()
    ib_rate_gbps: float | None = None
    net_devices: tuple[str, ...] = ()
    net_speed_mbps: int | None = None
    drm_connectors: tuple[str, ...] = ()

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
    def is_infiniband(self) -> bool:
        """An InfiniBand controller (0x0207)."""
        return self.class_subclass == 0x0207

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
        out = _Record.to_json(self)
        out["vendor"] = f"0x{self.vendor:04x}"
        out["device"] = f"0x{self.device:04x}"
        out["class_code"] = f"0x{self.class_code:06x}"
        out["kind"] = self.kind
        return out


@dataclass(frozen=True, slots=True)
class PciInfo(_Record):
    """The PCI functions of ``/sys/bus/pci/devices`` in address order; ``problems`` lists
    functions that could not be read (skipped)."""

    status: str
    source: str
    functions: tuple[PciFunction, ...] = ()
    problems: tuple[str, ...] = ()
    detail: str = ""

    def by_address(self) -> dict[str, PciFunction]:
        """The functions by address."""
        return {f.address: f for f in self.functions}


@dataclass(frozen=True, slots=True)
class CpuInfo(_Record):
    """What ``cpu_supports_p2pdma`` reads (``boot_cpu_data.x86_vendor``, ``.x86``).

    ``vendor`` is ``"intel"``, ``"amd"`` or ``"other"`` (Hygon, ARM ... for which the kernel
    has no host-bridge P2P rule); ``family`` the x86 family (0 when not x86); ``sockets`` the
    number of distinct ``physical id`` values; ``node_socket`` maps NUMA nodes to socket
    indices (0-based, in package-id order).
    """

    status: str
    source: str
    vendor: str = "other"
    vendor_id: str = ""
    family: int = 0
    model: str = ""
    sockets: int = 1
    node_socket: Mapping[int, int] = field(default_factory=dict)
    detail: str = ""

    @property
    def supports_p2pdma(self) -> bool:
        """``cpu_supports_p2pdma()``: AMD family 0x17 (Zen) or later (``kernel-semantics`` §8.3)."""
        return self.vendor == "amd" and self.family >= 0x17


@dataclass(frozen=True, slots=True)
class MemInfo(_Record):
    """``MemTotal`` of ``/proc/meminfo`` in bytes."""

    status: str
    source: str
    total: int | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SystemInfo(_Record):
    """The running kernel's release and the host name."""

    status: str
    source: str
    release: str = ""
    hostname: str = ""
    detail: str = ""

    @property
    def version(self) -> tuple[int, int] | None:
        """``(major, minor)`` of the release, None if it does not start with ``N.M``."""
        m = re.match(r"(\d+)\.(\d+)", self.release)
        return (int(m[1]), int(m[2])) if m else None


# -- RLIMIT_MEMLOCK -------------------------------------------------------------------------------


def _limit_value(text: str) -> int | None:
    if text == "unlimited":
        return None
    return int(text)


def _parse_limits(text: str) -> tuple[int | None, int | None]:
    """``Max locked memory`` of ``/proc/<pid>/limits``: (soft, hard), None = unlimited."""
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            fields = line[len("Max locked memory") :].split()
            return _limit_value(fields[0]), _limit_value(fields[1])
    raise ValueError("no 'Max locked memory' line")


def read_memlock(root: Path = ROOT) -> MemlockInfo:
    """The caller's RLIMIT_MEMLOCK (``getrlimit(2)``; ``/proc/self/limits`` below a fake
    ``root``) and ``VmLck`` / ``VmPin`` (``mm->locked_vm`` / ``mm->pinned_vm``)."""
    status_path = _under(root, "/proc/self/status")
    _, fields = _try_read(status_path, _status_fields)
    locked = _kb(fields.get("VmLck")) if fields else None
    pinned = _kb(fields.get("VmPin")) if fields else None
    if root == ROOT:
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        except (OSError, ValueError) as e:  # pragma: no cover - getrlimit does not fail
            return MemlockInfo(unreadable(str(e)), "getrlimit(RLIMIT_MEMLOCK)")
        inf = resource.RLIM_INFINITY
        return MemlockInfo(
            OK,
            "getrlimit(RLIMIT_MEMLOCK), /proc/self/status",
            None if soft == inf else soft,
            None if hard == inf else hard,
            locked,
            pinned,
        )
    path = _under(root, "/proc/self/limits")
    status, limits = _try_read(path, _parse_limits)
    source = f"{path}, {status_path}"
    if limits is None:
        return MemlockInfo(status, source, locked_vm=locked, pinned_vm=pinned)
    return MemlockInfo(OK, source, limits[0], limits[1], locked, pinned)


# -- capabilities ---------------------------------------------------------------------------------


def read_capabilities(root: Path = ROOT) -> CapabilityInfo:
    """``CapEff`` of ``/proc/self/status`` (a 64-bit hex mask)."""
    path = _under(root, "/proc/self/status")

    def parse(text: str) -> int:
        value = _status_fields(text).get("CapEff")
        if value is None:
            raise ValueError("no CapEff line")
        return int(value, 16)

    status, eff = _try_read(path, parse)
    return CapabilityInfo(status, str(path), eff)


# -- cgroup v2 ------------------------------------------------------------------------------------

_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field_text: str) -> str:
    """Undo the octal escapes of ``/proc/*/mountinfo`` (``\\040`` for a space)."""
    return _ESCAPE.sub(lambda m: chr(int(m[1], 8)), field_text)


@dataclass(frozen=True, slots=True)
class _Mount:
    root: str
    point: str
    fstype: str
    super_options: str


def _parse_mountinfo(text: str) -> list[_Mount]:
    """``/proc/self/mountinfo``: ``id parent maj:min root point opts [optional...] - type src
    superopts``."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or not rf:
            continue
        mounts.append(
            _Mount(_unescape(lf[3]), _unescape(lf[4]), rf[0], rf[2] if len(rf) > 2 else "")
        )
    return mounts


def _parse_proc_mounts(text: str) -> list[_Mount]:
    """``/proc/mounts``: ``src point type opts 0 0`` (no mount root: taken as ``/``)."""
    mounts = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4:
            mounts.append(_Mount("/", _unescape(f[1]), f[2], f[3]))
    return mounts


def _read_mounts(root: Path) -> tuple[str, list[_Mount] | None, str]:
    """(status, mounts, source): mountinfo, else ``/proc/mounts``."""
    info = _under(root, "/proc/self/mountinfo")
    status, mounts = _try_read(info, _parse_mountinfo)
    if mounts is not None:
        return status, mounts, str(info)
    fallback = _under(root, "/proc/mounts")
    status2, mounts2 = _try_read(fallback, _parse_proc_mounts)
    if mounts2 is not None:
        return status2, mounts2, str(fallback)
    return status, None, f"{info}, {fallback}"


def _parse_proc_cgroup(text: str) -> tuple[str | None, list[str]]:
    """``/proc/self/cgroup``: the v2 path (``0::/path``) and the v1 controllers."""
    v2: str | None = None
    v1: list[str] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2].removesuffix(" (deleted)")
        else:
            v1.extend(c for c in parts[1].split(",") if c and not c.startswith("name="))
    return v2, v1


def _controllers(directory: Path) -> tuple[str, ...]:
    text = _opt_text(directory / "cgroup.controllers")
    return tuple(text.split()) if text else ()


def read_cgroup(root: Path = ROOT) -> CgroupInfo:
    """The ``cgroup2`` mount, the caller's cgroup and its controllers."""
    mstatus, mounts, msource = _read_mounts(root)
    if mounts is None:
        return CgroupInfo(mstatus, msource, detail="cannot tell where cgroup v2 is mounted")
    v2 = [m for m in mounts if m.fstype == "cgroup2"]
    v1_mounted = sorted(
        {
            opt
            for m in mounts
            if m.fstype == "cgroup"
            for opt in m.super_options.split(",")
            if opt not in ("rw", "ro") and not opt.startswith("name=") and "=" not in opt
        }
    )
    if not v2:
        return CgroupInfo(
            MISSING,
            msource,
            v1_controllers=tuple(v1_mounted),
            detail="no cgroup2 mount (cgroup v1 only, or cgroups not mounted): "
            "no dmem controller can be seen",
        )
    mount = min(v2, key=lambda m: len(m.point))  # the outermost, if several
    mode = "hybrid" if v1_mounted else "unified"
    root_dir = _under(root, mount.point)
    cg_path = _under(root, "/proc/self/cgroup")
    cstatus, parsed = _try_read(cg_path, _parse_proc_cgroup)
    source = f"{msource}, {cg_path}"
    base = CgroupInfo(
        OK,
        source,
        mount=mount.point,
        mount_root=mount.root,
        mode=mode,
        root_directory=root_dir,
        root_controllers=_controllers(root_dir),
        v1_controllers=tuple(v1_mounted),
    )
    if parsed is None:
        return _replace(base, status=cstatus, detail="the caller's cgroup is unknown")
    path, _ = parsed
    if path is None:
        return _replace(
            base, detail="/proc/self/cgroup has no '0::' line: the caller is not in cgroup v2"
        )
    rel = _relative_to_mount(path, mount.root)
    if rel is None:
        return _replace(
            base,
            path=path,
            detail=f"the caller's cgroup {path} lies outside the mount (root {mount.root})",
        )
    directory = root_dir / rel if rel else root_dir
    return _replace(base, path=path, directory=directory, controllers=_controllers(directory))


def _relative_to_mount(path: str, mount_root: str) -> str | None:
    """``path`` relative to the mount's root (``""`` for the root), None if outside it."""
    mr = mount_root.rstrip("/")
    if path == mr or (not mr and path == "/"):
        return ""
    if not path.startswith(mr + "/"):
        return None
    return path[len(mr) + 1 :].strip("/")


_R = TypeVar("_R")


def _replace(record: _R, **changes: Any) -> _R:
    return replace(record, **changes)  # type: ignore[type-var]


# -- dmem -----------------------------------------------------------------------------------------


def _parse_dmem_file(text: str) -> dict[str, int | None]:
    """``<region> <bytes|max>`` lines (``dmemcg_limit_show``); ``max`` → None."""
    out: dict[str, int | None] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        parts = line.split()
        value = dmemcg_parse_limit(parts[1]) if len(parts) == 2 else None
        if value is None:
            raise ValueError(f"line {lineno}: expected '<region> <bytes|max>', found {line!r}")
        out[parts[0]] = None if value >= PAGE_COUNTER_MAX else value
    return out


def read_dmem(root: Path = ROOT, cgroup: CgroupInfo | None = None) -> DmemInfo:
    """dmem's files: ``dmem.capacity`` at the v2 root; current/min/low/max up the caller's
    cgroup chain. ``cgroup`` is :func:`read_cgroup`'s result (read here when None)."""
    cg = read_cgroup(root) if cgroup is None else cgroup
    if cg.root_directory is None:
        return DmemInfo(NOT_APPLICABLE, cg.source, detail="no cgroup v2 hierarchy to look in")
    cap_path = cg.root_directory / "dmem.capacity"
    status, capacity = _try_read(cap_path, _parse_dmem_file)
    if capacity is None:
        if status == MISSING:
            detail = (
                "no dmem.capacity at the cgroup v2 root: this kernel has no dmem controller "
                "(it arrived in Linux 6.14; CONFIG_CGROUP_DMEM)"
            )
        else:
            detail = ""
        return DmemInfo(status, str(cap_path), detail=detail)
    cap = {k: v for k, v in capacity.items() if v is not None}
    files: list[DmemFile] = []
    if cg.directory is not None and cg.path is not None:
        chain = _cgroup_chain(cg.directory, cg.root_directory, cg.path)
        for cgroup_path, directory, is_root in chain:
            names = (
                ("dmem.current",)
                if is_root
                else ("dmem.current", "dmem.min", "dmem.low", "dmem.max")
            )
            for name in names:
                fstatus, values = _try_read(directory / name, _parse_dmem_file)
                files.append(DmemFile(cgroup_path, name, fstatus, values or {}))
    detail = "" if cap else "no region registered (in 6.14 only xe registers; amdgpu later)"
    return DmemInfo(OK, str(cap_path), cap, tuple(files), detail)


def _cgroup_chain(directory: Path, root_dir: Path, path: str) -> list[tuple[str, Path, bool]]:
    """(cgroup path, directory, is the root) from the caller's cgroup up to the v2 root."""
    out: list[tuple[str, Path, bool]] = []
    parts = [p for p in path.split("/") if p]
    d = directory
    while True:
        is_root = d == root_dir or not parts
        out.append(("/" + "/".join(parts), d, is_root))
        if is_root:
            break
        parts.pop()
        d = d.parent
    return out


# -- bufinfo --------------------------------------------------------------------------------------

DEBUGFS = "/sys/kernel/debug"
BUFINFO = f"{DEBUGFS}/dma_buf/bufinfo"


def read_bufinfo(root: Path = ROOT) -> BufinfoInfo:
    """debugfs ``dma_buf/bufinfo``, parsed; permission errors and a missing debugfs reported."""
    path = _under(root, BUFINFO)
    try:
        text = _read_text(path)
    except FileNotFoundError:
        return BufinfoInfo(MISSING, str(path), detail=_bufinfo_missing(root))
    except PermissionError as e:
        return BufinfoInfo(
            unreadable(_why(e)),
            str(path),
            detail="debugfs is readable by root only (and not at all under kernel lockdown)",
        )
    except OSError as e:
        return BufinfoInfo(unreadable(_why(e)), str(path))
    try:
        dump = parse_bufinfo(text)
    except BufinfoParseError as e:
        return BufinfoInfo(unreadable(f"malformed bufinfo: {e}"), str(path))
    detail = "; ".join(dump.problems())
    return BufinfoInfo(OK, str(path), dump, detail)


def _bufinfo_missing(root: Path) -> str:
    if _under(root, f"{DEBUGFS}/dma_buf").is_dir():
        return "dma_buf/ exists in debugfs but has no bufinfo"
    _, mounts, _ = _read_mounts(root)
    mounted = mounts is not None and any(
        m.fstype == "debugfs" and m.point == DEBUGFS for m in mounts
    )
    if mounted:
        return "debugfs is mounted but has no dma_buf/ (kernel without CONFIG_DMA_SHARED_BUFFER?)"
    return f"debugfs is not mounted at {DEBUGFS} (mount -t debugfs none {DEBUGFS})"


# -- PCI ------------------------------------------------------------------------------------------

_ADDR = re.compile(r"^([0-9a-f]{4,}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
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
            m = re.match(r"([\d.]+)\s*Gb/sec", _opt_text(port / "rate") or "")
            if m and float(m[1]) > 0:
                best = max(best or 0.0, float(m[1]))
    return best


def _listdir(path: Path) -> tuple[str, ...]:
    try:
        return tuple(sorted(p.name for p in path.iterdir()))
    except OSError:
        return ()


def _drm_connectors(pdir: Path) -> tuple[str, ...]:
    out: list[str] = []
    for card in _listdir(pdir / "drm"):
        if re.fullmatch(r"card\d+", card):
            out.extend(c for c in _listdir(pdir / "drm" / card) if c.startswith(card + "-"))
    return tuple(out)


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
    devices = _under(root, "/sys/bus/pci/devices")
    try:
        entries = sorted(devices.iterdir(), key=lambda p: p.name)
    except FileNotFoundError:
        return PciInfo(
            MISSING, str(devices), detail="no /sys/bus/pci/devices: no PCI bus, or no sysfs"
        )
    except OSError as e:
        return PciInfo(unreadable(_why(e)), str(devices))
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
            fn = _replace(fn, port_type=types[addr], port_type_source="tree")
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
        class_code = int(_read_text(entry / "class").strip(), 16)
        vendor = int(_read_text(entry / "vendor").strip(), 16)
        device = int(_read_text(entry / "device").strip(), 16)
    except OSError as e:
        return None, f"{addr}: class/vendor/device {_why(e)} (skipped)"
    except ValueError as e:
        return None, f"{addr}: class/vendor/device malformed: {e} (skipped)"
    host = _HOST.match(chain[0])
    assert host is not None
    root_bus = f"{host[1]}:{host[2]}"
    pci_parts = [p for p in chain[1:] if _ADDR.match(p)]
    parent = pci_parts[-2] if len(pci_parts) >= 2 else None
    try:
        config = _read_bytes(entry / "config")
    except OSError:
        config = b""
    port_type, acs = parse_config_space(config)
    try:
        driver: str | None = os.path.basename(os.readlink(entry / "driver"))
    except OSError:
        driver = None
    ib = _listdir(entry / "infiniband")
    net = _listdir(entry / "net")
    speeds = [s for n in net if (s := _opt_int(entry / "net" / n / "speed", 10)) and s > 0]
    numa = _opt_int(entry / "numa_node", 10)
    width = _opt_int(entry / "max_link_width", 10)
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
            bars=_bars(_opt_text(entry / "resource")),
            link_speed=_link_speed(_opt_text(entry / "max_link_speed")),
            link_width=width if width else None,
            virtfn=os.path.lexists(entry / "physfn"),
            port_type=port_type,
            port_type_source="config" if port_type is not None else "",
            acs_ctrl=acs,
            vram_total=_opt_int(entry / "mem_info_vram_total", 10),
            ib_devices=ib,
            ib_rate_gbps=_ib_rate(entry, ib),
            net_devices=net,
            net_speed_mbps=max(speeds) if speeds else None,
            drm_connectors=_drm_connectors(entry),
        ),
        "",
    )


# -- CPU, memory, kernel ---------------------------------------------------------------------------


def _parse_cpuinfo(text: str) -> tuple[str, int, str, set[str]]:
    vendor_id, family, model = "", 0, ""
    packages: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "vendor_id" and not vendor_id:
            vendor_id = value
        elif key == "cpu family" and not family:
            family = int(value)
        elif key == "model name" and not model:
            model = value
        elif key == "physical id":
            packages.add(value)
    return vendor_id, family, model, packages


def _first_cpu(cpulist: str) -> int | None:
    m = re.match(r"\s*(\d+)", cpulist)
    return int(m[1]) if m else None


def _node_sockets(root: Path) -> dict[int, int]:
    """NUMA node → socket index (packages numbered in ``physical_package_id`` order)."""
    nodes_dir = _under(root, "/sys/devices/system/node")
    node_pkg: dict[int, int] = {}
    for name in _listdir(nodes_dir):
        m = re.fullmatch(r"node(\d+)", name)
        if not m:
            continue
        cpu = _first_cpu(_opt_text(nodes_dir / name / "cpulist") or "")
        if cpu is None:
            continue  # a memory-only node
        pkg = _opt_int(
            _under(root, f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"), 10
        )
        if pkg is not None:
            node_pkg[int(m[1])] = pkg
    order = {pkg: i for i, pkg in enumerate(sorted(set(node_pkg.values())))}
    return {node: order[pkg] for node, pkg in sorted(node_pkg.items())}


def read_cpu(root: Path = ROOT) -> CpuInfo:
    """CPU vendor, family, model and sockets from ``/proc/cpuinfo``; NUMA node → socket."""
    path = _under(root, "/proc/cpuinfo")
    status, parsed = _try_read(path, _parse_cpuinfo)
    if parsed is None:
        return CpuInfo(status, str(path))
    vendor_id, family, model, packages = parsed
    vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(vendor_id, "other")
    node_socket = _node_sockets(root)
    sockets = max(len(packages), len(set(node_socket.values())), 1)
    return CpuInfo(
        OK,
        str(path),
        vendor,
        vendor_id,
        family,
        model,
        sockets,
        node_socket,
    )


def read_meminfo(root: Path = ROOT) -> MemInfo:
    """``MemTotal`` (bytes) of ``/proc/meminfo``."""
    path = _under(root, "/proc/meminfo")

    def parse(text: str) -> int:
        total = _kb(_status_fields(text).get("MemTotal"))
        if total is None:
            raise ValueError("no MemTotal line")
        return total

    status, total = _try_read(path, parse)
    return MemInfo(status, str(path), total)


def read_system(root: Path = ROOT) -> SystemInfo:
    """``/proc/sys/kernel/osrelease`` and ``/proc/sys/kernel/hostname``."""
    path = _under(root, "/proc/sys/kernel/osrelease")
    status, release = _try_read(path, str.strip)
    hostname = _opt_text(_under(root, "/proc/sys/kernel/hostname")) or ""
    return SystemInfo(status, str(path), release or "", hostname)


# -- everything -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostReport(_Record):
    """All sources, each with its status (:func:`inspect_host`)."""

    root: Path
    memlock: MemlockInfo
    capabilities: CapabilityInfo
    cgroup: CgroupInfo
    dmem: DmemInfo
    bufinfo: BufinfoInfo
    pci: PciInfo
    cpu: CpuInfo
    memory: MemInfo
    system: SystemInfo

    def sources(self) -> dict[str, Any]:
        """The records by source name, in summary order."""
        return {
            "memlock": self.memlock,
            "capabilities": self.capabilities,
            "cgroup": self.cgroup,
            "dmem": self.dmem,
            "bufinfo": self.bufinfo,
            "pci": self.pci,
            "cpu": self.cpu,
            "memory": self.memory,
            "system": self.system,
        }


def _guard(name: str, reader: Callable[[], _R], fallback: Callable[[str], _R]) -> _R:
    """Run a reader; an unexpected exception (a pinlab bug) becomes that source's status."""
    try:
        return reader()
    except Exception as e:  # never crash on a host: report it
        return fallback(unreadable(f"unexpected {type(e).__name__} reading {name}: {e}"))


def inspect_host(root: Path = ROOT) -> HostReport:
    """Read every source below ``root``."""
    cgroup = _guard("cgroup", lambda: read_cgroup(root), lambda s: CgroupInfo(s, "cgroup"))
    return HostReport(
        root=root,
        memlock=_guard("memlock", lambda: read_memlock(root), lambda s: MemlockInfo(s, "")),
        capabilities=_guard(
            "capabilities", lambda: read_capabilities(root), lambda s: CapabilityInfo(s, "")
        ),
        cgroup=cgroup,
        dmem=_guard("dmem", lambda: read_dmem(root, cgroup), lambda s: DmemInfo(s, "")),
        bufinfo=_guard("bufinfo", lambda: read_bufinfo(root), lambda s: BufinfoInfo(s, "")),
        pci=_guard("pci", lambda: read_pci(root), lambda s: PciInfo(s, "")),
        cpu=_guard("cpu", lambda: read_cpu(root), lambda s: CpuInfo(s, "")),
        memory=_guard("memory", lambda: read_meminfo(root), lambda s: MemInfo(s, "")),
        system=_guard("system", lambda: read_system(root), lambda s: SystemInfo(s, "")),
    )
