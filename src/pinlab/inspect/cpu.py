"""Reader of the CPU: vendor and family (what ``cpu_supports_p2pdma`` tests), sockets, NUMA.

:func:`read_cpu` reads ``/proc/cpuinfo`` (``vendor_id``, ``cpu family``: what
``cpu_supports_p2pdma`` tests, ``kernel-semantics.md`` §8.3), sockets from ``physical id``,
NUMA node → socket from ``/sys/devices/system/node/node*/cpulist`` and
``topology/physical_package_id``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pinlab.errors import show_value
from pinlab.inspect.source import (
    OK,
    ROOT,
    SourceRecord,
    listdir,
    opt_int,
    opt_text,
    try_read,
    under,
)

__all__ = ["CpuInfo", "parse_lscpu", "read_cpu"]


@dataclass(frozen=True, slots=True)
class CpuInfo(SourceRecord):
    """What ``cpu_supports_p2pdma`` reads (``boot_cpu_data.x86_vendor``, ``.x86``).

    ``vendor`` is ``"intel"``, ``"amd"`` or ``"other"`` (Hygon, ARM ... for which the kernel
    has no host-bridge P2P rule); ``family`` the x86 family (0 when not x86); ``sockets`` the
    number of distinct ``physical id`` values; ``node_socket`` maps NUMA nodes to socket
    indices (0-based, in package-id order).
    """

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


# -- reading ------------------------------------------------------------------------------------


_FAMILY_MAX = 0xFF
"""The largest x86 family (``boot_cpu_data.x86`` is a byte)."""


def _family(value: str, lineno: int) -> int:
    """The ``cpu family`` of ``/proc/cpuinfo``: decimal, as the kernel prints it, 0 … 255."""
    if re.fullmatch(r"[0-9]{1,3}", value) and int(value) <= _FAMILY_MAX:
        return int(value)
    raise ValueError(
        f"line {lineno}: cpu family: expected a decimal CPU family number 0 to {_FAMILY_MAX} "
        f"(like 6 or 25), found {show_value(value)}"
    )


_CPUINFO_KEYS = {
    "vendor_id": "vendor",
    "cpu family": "family",
    "model name": "model",
    "physical id": "package",
}
_LSCPU_KEYS = {
    "Vendor ID": "vendor",
    "CPU family": "family",
    "Model name": "model",
    "Socket(s)": "sockets",
}


@dataclass(slots=True)
class _CpuFields:
    """The first value of each field in a CPU listing, and every package id seen."""

    vendor: str = ""
    family: int | None = None
    model: str = ""
    sockets: str = ""
    packages: set[str] = field(default_factory=set)


def _cpu_fields(text: str, keys: Mapping[str, str]) -> _CpuFields:
    """The fields of ``text`` whose keys ``keys`` names (the ``family`` checked by
    :func:`_family`)."""
    out = _CpuFields()
    for lineno, line in enumerate(text.splitlines(), 1):
        key, sep, value = line.partition(":")
        name = keys.get(key.strip()) if sep else None
        value = value.strip()
        if name == "package":
            out.packages.add(value)
        elif name == "family" and out.family is None:
            out.family = _family(value, lineno)
        elif name in ("vendor", "model", "sockets") and not getattr(out, name):
            setattr(out, name, value)
    return out


def _parse_cpuinfo(text: str) -> tuple[str, int, str, set[str]]:
    """(vendor_id, family, model name, physical ids) of ``/proc/cpuinfo``; ``ValueError``
    naming the line for a ``cpu family`` that is not one."""
    f = _cpu_fields(text, _CPUINFO_KEYS)
    return f.vendor, f.family or 0, f.model, f.packages


def parse_lscpu(text: str) -> tuple[str, int, str, int]:
    """(vendor_id, family, model name, sockets) from ``lscpu`` output (``Vendor ID:``,
    ``CPU family:``, ``Model name:``, ``Socket(s):``), which reporters paste as often as
    ``/proc/cpuinfo``; ``ValueError`` naming the line for a ``CPU family`` that is not one."""
    f = _cpu_fields(text, _LSCPU_KEYS)
    sockets = int(f.sockets) if f.sockets.isdigit() else 1
    return f.vendor, f.family or 0, f.model, max(sockets, 1)


def _first_cpu(cpulist: str) -> int | None:
    m = re.match(r"\s*(\d+)", cpulist)
    return int(m[1]) if m else None


def _node_sockets(root: Path) -> dict[int, int]:
    """NUMA node → socket index (packages numbered in ``physical_package_id`` order)."""
    nodes_dir = under(root, "/sys/devices/system/node")
    node_pkg: dict[int, int] = {}
    for name in listdir(nodes_dir):
        m = re.fullmatch(r"node(\d+)", name)
        if not m:
            continue
        cpu = _first_cpu(opt_text(nodes_dir / name / "cpulist") or "")
        if cpu is None:
            continue  # a memory-only node
        pkg = opt_int(
            under(root, f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"), 10
        )
        if pkg is not None:
            node_pkg[int(m[1])] = pkg
    order = {pkg: i for i, pkg in enumerate(sorted(set(node_pkg.values())))}
    return {node: order[pkg] for node, pkg in sorted(node_pkg.items())}


def read_cpu(root: Path = ROOT) -> CpuInfo:
    """CPU vendor, family, model and sockets from ``/proc/cpuinfo``; NUMA node → socket."""
    path = under(root, "/proc/cpuinfo")
    status, parsed = try_read(path, _parse_cpuinfo)
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
