"""The whole host: every source read below a root, as one :class:`HostReport`.

Each source has its reader module, all built on :mod:`pinlab.inspect.source` (statuses, file
access below ``root``, the record base), and none raises for a missing, unreadable or
malformed source:

* :mod:`~pinlab.inspect.proc` -- RLIMIT_MEMLOCK and the ``mm`` counters, capabilities,
  ``MemTotal``, the kernel release (``/proc``);
* :mod:`~pinlab.inspect.cgroup` -- the cgroup v2 mount and the caller's cgroup, the dmem
  controller's files;
* :mod:`~pinlab.inspect.debugfs` -- ``dma_buf/bufinfo``;
* :mod:`~pinlab.inspect.pci` -- the sysfs PCI tree (port types, ACS, BARs, links);
* :mod:`~pinlab.inspect.cpu` -- CPU vendor and family, sockets, NUMA nodes.

A new source is a new module with a reader ``read_x(root) -> XInfo`` and one row of
:data:`_SOURCES` (plus its field of :class:`HostReport`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pinlab.inspect.cgroup import CgroupInfo, DmemInfo, read_cgroup, read_dmem
from pinlab.inspect.cpu import CpuInfo, read_cpu
from pinlab.inspect.debugfs import BufinfoInfo, read_bufinfo
from pinlab.inspect.pci import PciInfo, read_pci
from pinlab.inspect.proc import (
    CapabilityInfo,
    MemInfo,
    MemlockInfo,
    SystemInfo,
    read_capabilities,
    read_meminfo,
    read_memlock,
    read_system,
)
from pinlab.inspect.source import ROOT, Record, SourceRecord, unreadable

__all__ = ["HostReport", "inspect_host"]


@dataclass(frozen=True, slots=True)
class HostReport(Record):
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
        """The records by source name, in summary order (the order of the fields)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "root"}


_Reader = Callable[[Path, dict[str, Any]], Any]

_SOURCES: tuple[tuple[str, type[SourceRecord], _Reader], ...] = (
    ("memlock", MemlockInfo, lambda root, _: read_memlock(root)),
    ("capabilities", CapabilityInfo, lambda root, _: read_capabilities(root)),
    ("cgroup", CgroupInfo, lambda root, _: read_cgroup(root)),
    ("dmem", DmemInfo, lambda root, done: read_dmem(root, done["cgroup"])),
    ("bufinfo", BufinfoInfo, lambda root, _: read_bufinfo(root)),
    ("pci", PciInfo, lambda root, _: read_pci(root)),
    ("cpu", CpuInfo, lambda root, _: read_cpu(root)),
    ("memory", MemInfo, lambda root, _: read_meminfo(root)),
    ("system", SystemInfo, lambda root, _: read_system(root)),
)
"""Each source: its name (a :class:`HostReport` field), its record type, and how to read it
given the root and the sources read before it (dmem looks in the cgroup found)."""


def inspect_host(root: Path = ROOT) -> HostReport:
    """Read every source below ``root``. An unexpected exception in a reader (a pinlab bug)
    becomes that source's ``unreadable`` status: ``pinlab inspect`` never crashes on a host."""
    done: dict[str, Any] = {}
    for name, record, read in _SOURCES:
        try:
            done[name] = read(root, done)
        except Exception as e:
            status = unreadable(f"unexpected {type(e).__name__} reading {name}: {e}")
            done[name] = record(status, "")
    return HostReport(root=root, **done)
