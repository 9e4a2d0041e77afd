"""Readers of what the running kernel was built with and has loaded, and the memory cgroup limit.

* :func:`read_kernel` -- the kernel configuration (the first of :data:`CONFIG_PATHS` that
  exists, else ``/proc/config.gz``, gunzipped), ``/proc/modules``, the dma-buf / P2PDMA / umem
  symbols of ``/proc/kallsyms`` (:data:`SYMBOLS`) and the peer-memory clients of
  ``/sys/kernel/mm/memory_peers``;
* :func:`read_memcg` -- ``memory.max`` of the caller's cgroup and each ancestor.

The configuration paths and the kallsyms fallback are the ones perftest's ROCm dma-buf check
tries (``linux-rdma/perftest#392``, ``src/rocm_memory.c``): a distribution without
``/boot/config-*`` (Fedora CoreOS, ``openucx/ucx#11541``) still has kallsyms. ``/proc/config.gz``
is gzip and is decompressed (RCCL read it raw and concluded there was no dma-buf support,
``ROCm/rocm-systems#3258``). kallsyms names are read even when ``kptr_restrict`` zeroes the
addresses. A symbol proves what a config line says only for ``pci_p2pdma_*`` (built with
``CONFIG_PCI_P2PDMA``): ``dma_buf_move_notify`` is exported whatever
``CONFIG_DMABUF_MOVE_NOTIFY`` says, so the option itself is taken only from a config file.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pinlab.errors import show_value
from pinlab.inspect.cgroup import CgroupInfo
from pinlab.inspect.source import (
    MISSING,
    NOT_APPLICABLE,
    OK,
    ROOT,
    SourceRecord,
    listdir,
    read_bytes,
    try_read,
    under,
    unreadable,
    why,
)

__all__ = [
    "CONFIG_OPTIONS",
    "CONFIG_PATHS",
    "KALLSYMS_ANCHORS",
    "SYMBOLS",
    "KernelInfo",
    "MemcgInfo",
    "kallsyms_is_whole",
    "parse_kallsyms",
    "parse_kernel_config",
    "parse_modules",
    "read_kernel",
    "read_memcg",
]

CONFIG_PATHS = (
    "/boot/config-{release}",
    "/usr/lib/modules/{release}/config",
    "/lib/modules/{release}/build/.config",
    "/usr/src/linux-headers-{release}/.config",
    "/usr/lib/ostree-boot/config-{release}",
    "/usr/lib/kernel/config-{release}",
    "/usr/src/linux-{release}/.config",
)
"""Where distributions keep the running kernel's configuration (perftest#392's list)."""

CONFIG_OPTIONS = (
    "CONFIG_DMA_SHARED_BUFFER",
    "CONFIG_DMABUF_MOVE_NOTIFY",
    "CONFIG_DMABUF_DEBUG",
    "CONFIG_DMA_API_DEBUG",
    "CONFIG_PCI_P2PDMA",
    "CONFIG_CGROUP_DMEM",
    "CONFIG_HSA_AMD",
    "CONFIG_HSA_AMD_P2P",
    "CONFIG_INFINIBAND",
    "CONFIG_INFINIBAND_USER_MEM",
    "CONFIG_INFINIBAND_ON_DEMAND_PAGING",
    "CONFIG_IKCONFIG_PROC",
)
"""The options a diagnosis reads (``kernel-semantics.md`` §1.5); the snapshot keeps these."""

SYMBOLS = (
    "dma_buf_dynamic_attach",
    "dma_buf_pin",
    "dma_buf_move_notify",
    "dma_buf_invalidate_mappings",
    "pci_p2pdma_distance_many",
    "pci_p2pdma_add_resource",
    "ib_umem_dmabuf_get",
    "ib_umem_dmabuf_get_pinned",
    "ib_umem_dmabuf_get_pinned_with_dma_device",
    "ib_umem_dmabuf_get_pinned_revocable_and_lock",
    "dmem_cgroup_register_region",
    "ib_register_peer_memory_client",
)
"""kallsyms names that tell which dma-buf paths exist: the dynamic core (5.7), P2PDMA, the
umem dma-buf import (5.12; pinned 5.16; 6.12; 2026), dmem (6.14), the out-of-tree peer-memory
API that ``nvidia_peermem`` needs."""


def parse_kernel_config(text: str) -> dict[str, str]:
    """``CONFIG_X=y|m|<value>`` lines, and ``# CONFIG_X is not set`` as ``"n"``. Raises
    ``ValueError`` for text with no option at all (not a kernel config)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("# CONFIG_") and line.endswith(" is not set"):
            out[line[2:-11].strip()] = "n"
        elif line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip().strip('"')
    if not out:
        raise ValueError("no CONFIG_ line")
    return out


def parse_kallsyms(text: str) -> tuple[str, ...]:
    """The :data:`SYMBOLS` present in ``/proc/kallsyms`` text (``addr type name [module]``),
    matched on the whole name."""
    wanted = set(SYMBOLS)
    found: set[str] = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] in wanted:
            found.add(parts[2])
    return tuple(s for s in SYMBOLS if s in found)


KALLSYMS_ANCHORS = ("_stext", "start_kernel")
"""Symbols every kernel's ``/proc/kallsyms`` lists (the start of its text, its C entry point):
a paste without any of them is an excerpt (``grep dma_buf /proc/kallsyms``)."""


def kallsyms_is_whole(text: str) -> bool:
    """Whether ``text`` is the whole of ``/proc/kallsyms`` rather than an excerpt: it lists one
    of :data:`KALLSYMS_ANCHORS`. In an excerpt a symbol it does not show is unknown, not
    absent."""
    anchors = set(KALLSYMS_ANCHORS)
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] in anchors:
            return True
    return False


def parse_modules(text: str) -> tuple[str, ...]:
    """Module names of ``/proc/modules`` or pasted ``lsmod`` output (its header skipped)."""
    names = []
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts or parts[0] == "Module":
            continue
        if len(parts) < 2 or not parts[1].isdigit():
            raise ValueError(
                f"line {lineno}: expected '<module> <size> ...', found {show_value(line.strip())}"
            )
        names.append(parts[0])
    return tuple(sorted(set(names)))


@dataclass(frozen=True, slots=True)
class KernelInfo(SourceRecord):
    """The running kernel's build and loaded state.

    ``config`` holds the :data:`CONFIG_OPTIONS` the file sets (``"n"`` for ``is not set``; an
    option absent from the file is absent here) -- empty with ``config_source`` None when no
    configuration was found; ``modules`` None when ``/proc/modules`` was not read; ``symbols``
    the :data:`SYMBOLS` found (None: kallsyms not read); ``memory_peers`` the peer-memory
    clients (``nv_mem``, ``nvidia-peermem``; None: the directory is absent).
    """

    release: str = ""
    config_source: str | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    modules: tuple[str, ...] | None = None
    symbols: tuple[str, ...] | None = None
    memory_peers: tuple[str, ...] | None = None
    detail: str = ""


def _read_config(root: Path, release: str) -> tuple[str | None, dict[str, str] | None, str]:
    """(source, options, problem) of the first configuration found."""
    problems: list[str] = []
    for template in CONFIG_PATHS if release else ():
        path = under(root, template.format(release=release))
        status, options = try_read(path, parse_kernel_config)
        if options is not None:
            return str(path), options, ""
        if status != MISSING:
            problems.append(f"{path}: {status}")
    gz = under(root, "/proc/config.gz")
    try:
        raw = read_bytes(gz)
    except FileNotFoundError:
        return None, None, "; ".join(problems)
    except OSError as e:
        return None, None, "; ".join([*problems, f"{gz}: {unreadable(why(e))}"])
    try:
        text = gzip.decompress(raw).decode("utf-8", errors="backslashreplace")
        return str(gz), parse_kernel_config(text), ""
    except (OSError, EOFError, zlib.error, ValueError) as e:
        return None, None, "; ".join([*problems, f"{gz}: unreadable: not a gzip config ({e})"])


def read_kernel(root: Path = ROOT, release: str = "") -> KernelInfo:
    """The configuration, modules, symbols and peer-memory clients of kernel ``release``."""
    source, options, problem = _read_config(root, release)
    config = {k: options[k] for k in CONFIG_OPTIONS if options and k in options}
    mstatus, modules = try_read(under(root, "/proc/modules"), parse_modules)
    sstatus, symbols = try_read(under(root, "/proc/kallsyms"), parse_kallsyms)
    peers_dir = under(root, "/sys/kernel/mm/memory_peers")
    peers = listdir(peers_dir) if peers_dir.is_dir() else None
    details = []
    if source is None:
        details.append(
            "no kernel configuration found (/boot/config-<release>, /proc/config.gz ...)"
            + (f": {problem}" if problem else "")
        )
    if mstatus != OK:
        details.append(f"/proc/modules {mstatus}")
    if sstatus != OK:
        details.append(f"/proc/kallsyms {sstatus}")
    status = OK if source is not None or modules is not None or symbols is not None else MISSING
    return KernelInfo(
        status,
        ", ".join(s for s in (source, "/proc/modules", "/proc/kallsyms") if s),
        release=release,
        config_source=source,
        config=config,
        modules=modules,
        symbols=symbols,
        memory_peers=peers,
        detail="; ".join(details),
    )


@dataclass(frozen=True, slots=True)
class MemcgInfo(SourceRecord):
    """``memory.max`` of the caller's cgroup and each ancestor, nearest first
    (``(cgroup path, bytes)``; None for ``max``); ``limit`` the smallest of them."""

    limits: tuple[tuple[str, int | None], ...] = ()
    detail: str = ""

    @property
    def limit(self) -> int | None:
        values = [v for _, v in self.limits if v is not None]
        return min(values) if values else None


def _memory_max(text: str) -> int | None:
    word = text.strip()
    return None if word == "max" else int(word)


def read_memcg(root: Path = ROOT, cgroup: CgroupInfo | None = None) -> MemcgInfo:
    """``memory.max`` up the caller's cgroup chain (the root has none)."""
    if cgroup is None or cgroup.directory is None or cgroup.root_directory is None:
        return MemcgInfo(NOT_APPLICABLE, "", detail="the caller's cgroup v2 directory is unknown")
    limits: list[tuple[str, int | None]] = []
    parts = [p for p in (cgroup.path or "").split("/") if p]
    d = cgroup.directory
    while parts and d != cgroup.root_directory:
        status, value = try_read(d / "memory.max", _memory_max)
        if status == OK:
            limits.append(("/" + "/".join(parts), value))
        parts.pop()
        d = d.parent
    return MemcgInfo(OK, str(cgroup.directory / "memory.max"), tuple(limits))
