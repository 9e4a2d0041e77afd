"""Readers of ``/proc``: the caller's RLIMIT_MEMLOCK, capabilities, memory and kernel release.

* :func:`read_memlock` -- ``getrlimit(RLIMIT_MEMLOCK)`` (``/proc/self/limits`` below a fake
  root), ``VmLck`` / ``VmPin`` of ``/proc/self/status`` (``mm->locked_vm``, ``mm->pinned_vm``;
  ``policy-semantics.md`` §1.1);
* :func:`read_capabilities` -- ``CapEff`` of ``/proc/self/status``: ``CAP_IPC_LOCK`` (bit 14,
  ``can_do_mlock``, policy §1.2) and ``CAP_SYS_RESOURCE`` (bit 24, raising a hard rlimit);
* :func:`read_meminfo` -- ``MemTotal`` of ``/proc/meminfo``;
* :func:`read_system` -- ``/proc/sys/kernel/osrelease`` and ``hostname``.
"""

from __future__ import annotations

import re
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinlab.inspect.source import (
    OK,
    ROOT,
    SourceRecord,
    opt_text,
    try_read,
    under,
    unreadable,
)

__all__ = [
    "CAP_IPC_LOCK",
    "CAP_SYS_RESOURCE",
    "CapabilityInfo",
    "MemInfo",
    "MemlockInfo",
    "SystemInfo",
    "read_capabilities",
    "read_meminfo",
    "read_memlock",
    "read_system",
]

CAP_IPC_LOCK = 14
"""``include/uapi/linux/capability.h``: lock memory (``mlock``, bypass RLIMIT_MEMLOCK)."""
CAP_SYS_RESOURCE = 24
"""``include/uapi/linux/capability.h``: override resource limits (raise a hard rlimit)."""


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


@dataclass(frozen=True, slots=True)
class MemlockInfo(SourceRecord):
    """The caller's RLIMIT_MEMLOCK and its ``mm`` counters (``policy-semantics.md`` §1.1-§1.2).

    ``soft``/``hard`` are bytes, None for ``RLIM_INFINITY`` ("unlimited"). ``locked_vm`` /
    ``pinned_vm`` are ``VmLck`` / ``VmPin`` of ``/proc/self/status`` in bytes (None if not
    shown) -- ``mm->locked_vm`` (mlock, ``account_locked_vm``) and ``mm->pinned_vm``
    (``ib_umem_get``), each compared with the limit on its own.
    """

    soft: int | None = None
    hard: int | None = None
    locked_vm: int | None = None
    pinned_vm: int | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class CapabilityInfo(SourceRecord):
    """The caller's effective capabilities (``CapEff``) and real ``uid``; None where unknown."""

    effective: int | None = None
    detail: str = ""
    uid: int | None = None

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
        out = SourceRecord.to_json(self)
        out["cap_ipc_lock"] = self.cap_ipc_lock
        out["cap_sys_resource"] = self.cap_sys_resource
        return out


@dataclass(frozen=True, slots=True)
class MemInfo(SourceRecord):
    """``MemTotal`` of ``/proc/meminfo`` in bytes."""

    total: int | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SystemInfo(SourceRecord):
    """The running kernel's release and the host name."""

    release: str = ""
    hostname: str = ""
    detail: str = ""

    @property
    def version(self) -> tuple[int, int] | None:
        """``(major, minor)`` of the release, None if it does not start with ``N.M``."""
        full = self.stable_version
        return None if full is None else full[:2]

    @property
    def stable_version(self) -> tuple[int, int, int] | None:
        """``(major, minor, patch)`` of the release (``6.8.0-45-generic`` → 6, 8, 0; a
        release without a patch level has 0), None if it does not start with ``N.M``."""
        m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", self.release)
        return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


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
    status_path = under(root, "/proc/self/status")
    _, fields = try_read(status_path, _status_fields)
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
    path = under(root, "/proc/self/limits")
    status, limits = try_read(path, _parse_limits)
    source = f"{path}, {status_path}"
    if limits is None:
        return MemlockInfo(status, source, locked_vm=locked, pinned_vm=pinned)
    return MemlockInfo(OK, source, limits[0], limits[1], locked, pinned)


# -- capabilities ---------------------------------------------------------------------------------


def read_capabilities(root: Path = ROOT) -> CapabilityInfo:
    """``CapEff`` of ``/proc/self/status`` (a 64-bit hex mask) and the real ``Uid``."""
    path = under(root, "/proc/self/status")

    def parse(text: str) -> int:
        value = _status_fields(text).get("CapEff")
        if value is None:
            raise ValueError("no CapEff line")
        return int(value, 16)

    status, eff = try_read(path, parse)
    uid = None
    if eff is not None:
        _, uids = try_read(path, lambda text: _status_fields(text).get("Uid", "").split())
        uid = int(uids[0]) if uids and uids[0].isdigit() else None
    return CapabilityInfo(status, str(path), eff, uid=uid)


def read_meminfo(root: Path = ROOT) -> MemInfo:
    """``MemTotal`` (bytes) of ``/proc/meminfo``."""
    path = under(root, "/proc/meminfo")

    def parse(text: str) -> int:
        total = _kb(_status_fields(text).get("MemTotal"))
        if total is None:
            raise ValueError("no MemTotal line")
        return total

    status, total = try_read(path, parse)
    return MemInfo(status, str(path), total)


def read_system(root: Path = ROOT) -> SystemInfo:
    """``/proc/sys/kernel/osrelease`` and ``/proc/sys/kernel/hostname``."""
    path = under(root, "/proc/sys/kernel/osrelease")
    status, release = try_read(path, str.strip)
    hostname = opt_text(under(root, "/proc/sys/kernel/hostname")) or ""
    return SystemInfo(status, str(path), release or "", hostname)
