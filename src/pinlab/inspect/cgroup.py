"""Readers of the cgroup v2 hierarchy and the dmem controller's files.

* :func:`read_mounts` -- ``/proc/self/mountinfo`` (``/proc/mounts`` as a fallback);
* :func:`read_cgroup` -- the ``cgroup2`` mount, the caller's ``0::/path`` line of
  ``/proc/self/cgroup``, ``cgroup.controllers``;
* :func:`read_dmem` -- ``dmem.capacity`` at the cgroup v2 root, ``dmem.current`` / ``min`` /
  ``low`` / ``max`` in the caller's cgroup and its ancestors (``policy-semantics.md``
  §2.2-§2.4), parsed with :func:`pinlab.policy.dmem_limits.dmemcg_parse_limit` -- the syntax the
  model's files use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from pinlab.inspect.source import (
    MISSING,
    NOT_APPLICABLE,
    OK,
    ROOT,
    Record,
    SourceRecord,
    opt_text,
    try_read,
    under,
)
from pinlab.policy.dmem_limits import dmemcg_parse_limit
from pinlab.policy.page_counter import PAGE_COUNTER_MAX

__all__ = [
    "CgroupInfo",
    "DmemFile",
    "DmemInfo",
    "Mount",
    "read_cgroup",
    "read_dmem",
    "read_mounts",
]


@dataclass(frozen=True, slots=True)
class CgroupInfo(SourceRecord):
    """The cgroup v2 hierarchy as the caller sees it.

    ``mount`` is the ``cgroup2`` mount point (``/sys/fs/cgroup``; ``/sys/fs/cgroup/unified`` in
    systemd's hybrid layout); ``mount_root`` the mount's root within the hierarchy (not ``/``
    inside a container without a cgroup namespace); ``mode`` ``"unified"`` (v2 only) or
    ``"hybrid"`` (v1 hierarchies mounted too, listed in ``v1_controllers``). ``path`` is the
    caller's cgroup from ``/proc/self/cgroup`` (``0::/path``); ``directory`` its directory below
    ``root`` (None if the caller's cgroup lies outside the mount). ``controllers`` are the
    caller's ``cgroup.controllers`` (what its parent enabled), ``root_controllers`` the root's.
    """

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
class DmemFile(Record):
    """One dmem interface file: ``<region> <bytes|max>`` per line; ``max`` is None here."""

    cgroup: str
    name: str
    status: str
    values: Mapping[str, int | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DmemInfo(SourceRecord):
    """The dmem controller (Linux 6.14+, ``policy-semantics.md`` §2.2-§2.4).

    ``capacity`` is the root's ``dmem.capacity``: region name → bytes (regions are named
    ``drm/<PCI address>/<region>``, e.g. ``drm/0000:03:00.0/vram0`` for xe, ``.../vram`` for
    amdgpu). ``files`` are the caller's cgroup's and each ancestor's ``dmem.current`` /
    ``dmem.min`` / ``dmem.low`` / ``dmem.max`` (the root has only ``dmem.current``), nearest
    first; a file that is not there is listed with status ``missing`` (dmem not enabled in the
    parent's ``cgroup.subtree_control``).
    """

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


# -- cgroup v2 ------------------------------------------------------------------------------------

_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field_text: str) -> str:
    """Undo the octal escapes of ``/proc/*/mountinfo`` (``\\040`` for a space)."""
    return _ESCAPE.sub(lambda m: chr(int(m[1], 8)), field_text)


@dataclass(frozen=True, slots=True)
class Mount:
    """One mount: its root within the filesystem, mount point, type and super options."""

    root: str
    point: str
    fstype: str
    super_options: str


def _parse_mountinfo(text: str) -> list[Mount]:
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
            Mount(_unescape(lf[3]), _unescape(lf[4]), rf[0], rf[2] if len(rf) > 2 else "")
        )
    return mounts


def _parse_proc_mounts(text: str) -> list[Mount]:
    """``/proc/mounts``: ``src point type opts 0 0`` (no mount root: taken as ``/``)."""
    mounts = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4:
            mounts.append(Mount("/", _unescape(f[1]), f[2], f[3]))
    return mounts


def read_mounts(root: Path = ROOT) -> tuple[str, list[Mount] | None, str]:
    """(status, mounts, source): ``/proc/self/mountinfo``, else ``/proc/mounts``."""
    info = under(root, "/proc/self/mountinfo")
    status, mounts = try_read(info, _parse_mountinfo)
    if mounts is not None:
        return status, mounts, str(info)
    fallback = under(root, "/proc/mounts")
    status2, mounts2 = try_read(fallback, _parse_proc_mounts)
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
    text = opt_text(directory / "cgroup.controllers")
    return tuple(text.split()) if text else ()


def read_cgroup(root: Path = ROOT) -> CgroupInfo:
    """The ``cgroup2`` mount, the caller's cgroup and its controllers."""
    mstatus, mounts, msource = read_mounts(root)
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
    root_dir = under(root, mount.point)
    cg_path = under(root, "/proc/self/cgroup")
    cstatus, parsed = try_read(cg_path, _parse_proc_cgroup)
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
        return replace(base, status=cstatus, detail="the caller's cgroup is unknown")
    path, _ = parsed
    if path is None:
        return replace(
            base, detail="/proc/self/cgroup has no '0::' line: the caller is not in cgroup v2"
        )
    rel = _relative_to_mount(path, mount.root)
    if rel is None:
        return replace(
            base,
            path=path,
            detail=f"the caller's cgroup {path} lies outside the mount (root {mount.root})",
        )
    directory = root_dir / rel if rel else root_dir
    return replace(base, path=path, directory=directory, controllers=_controllers(directory))


def _relative_to_mount(path: str, mount_root: str) -> str | None:
    """``path`` relative to the mount's root (``""`` for the root), None if outside it."""
    mr = mount_root.rstrip("/")
    if path == mr or (not mr and path == "/"):
        return ""
    if not path.startswith(mr + "/"):
        return None
    return path[len(mr) + 1 :].strip("/")


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
    status, capacity = try_read(cap_path, _parse_dmem_file)
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
                fstatus, values = try_read(directory / name, _parse_dmem_file)
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
