"""The portable host snapshot: what ``pinlab doctor`` needs to diagnose a host, in one TOML file.

A snapshot is the facts, not a verdict: the kernel release and the dma-buf configuration options,
the loaded modules and kallsyms symbols, RLIMIT_MEMLOCK, capabilities, the cgroup's ``memory.max``
and dmem files, the CPU and every PCI function (with its ACS control, port type and IOMMU group).
The platform is planned from these facts when the snapshot is used
(:meth:`Snapshot.plan`, :func:`~pinlab.inspect.platform.plan_platform`), so one snapshot
serves both ``pinlab doctor`` and ``pinlab run --platform``.

It comes from a host (:func:`snapshot_from_report`, ``pinlab inspect --snapshot``) or from text
users paste into bug reports (:mod:`pinlab.inspect.paste`). :func:`dump_snapshot` writes it;
:func:`load_snapshot` reads one back and validates it (pydantic, ``extra="forbid"``): every
problem is one line naming the file, the field, what was expected and what was found. The
format is versioned by ``pinlab_snapshot`` (:data:`SNAPSHOT_VERSION`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

import tomli_w
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from pinlab import fsutil
from pinlab.errors import ConfigError, config_error
from pinlab.inspect.cgroup import DmemFile, DmemInfo
from pinlab.inspect.cpu import CpuInfo
from pinlab.inspect.host import HostReport
from pinlab.inspect.pci import PciFunction, PciInfo
from pinlab.inspect.platform import PlatformPlan, plan_platform
from pinlab.inspect.proc import CAP_IPC_LOCK, CAP_SYS_RESOURCE, MemInfo, SystemInfo
from pinlab.inspect.source import MISSING, OK, Size
from pinlab.tomlfile import parse_toml, read_toml
from pinlab.units import compact_size, parse_limit

__all__ = [
    "SNAPSHOT_VERSION",
    "CpuFacts",
    "DmemFacts",
    "KernelFacts",
    "LimitFacts",
    "Snapshot",
    "dump_snapshot",
    "kernel_facts",
    "load_snapshot",
    "parse_snapshot",
    "snapshot_from_report",
    "write_snapshot",
]

SNAPSHOT_VERSION: Literal[1] = 1
"""The snapshot format this pinlab writes and reads."""

_CapName = Literal["CAP_IPC_LOCK", "CAP_SYS_RESOURCE"]
_CAPS: dict[_CapName, int] = {"CAP_IPC_LOCK": CAP_IPC_LOCK, "CAP_SYS_RESOURCE": CAP_SYS_RESOURCE}


def _limit(word: str) -> Any:
    def parse(value: object) -> int | None:
        if value is None or (isinstance(value, str) and value.strip().lower() == word):
            return None
        return parse_limit(value, unlimited=word)

    return parse


Rlim = Annotated[
    int | None,
    BeforeValidator(_limit("unlimited")),
    PlainSerializer(lambda v: compact_size(v, unlimited="unlimited")),
]
CgLimit = Annotated[
    int | None,
    BeforeValidator(_limit("max")),
    PlainSerializer(lambda v: compact_size(v, unlimited="max")),
]


class _Facts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KernelFacts(_Facts):
    """The kernel: release, configuration options (``y``/``m``/``n``/value), modules, symbols.

    ``symbols_excerpt``: the symbols came from an excerpt of kallsyms (a pasted ``grep``), so a
    symbol they do not list is unknown rather than absent.
    """

    release: str = ""
    config_source: str | None = None
    config: dict[str, str] = Field(default_factory=dict)
    modules: list[str] | None = None
    symbols: list[str] | None = None
    symbols_excerpt: bool = False
    memory_peers: list[str] | None = None

    def option(self, name: str) -> bool | None:
        """Whether ``CONFIG_<name>`` is on (``y`` or ``m``); None when the config does not name
        it (no config, or an excerpt: users paste ``grep`` output)."""
        value = self.config.get(f"CONFIG_{name}")
        return None if value is None else value in ("y", "m")

    def has_symbol(self, name: str) -> bool | None:
        """Whether kallsyms has ``name`` (None: kallsyms was not read, or an excerpt of it that
        does not show ``name``)."""
        if self.symbols is None:
            return None
        if name in self.symbols:
            return True
        return None if self.symbols_excerpt else False

    def config_switches(self) -> dict[str, bool]:
        """The kernel profile's configuration switches these facts settle (``kernel-semantics.md``
        §1.5), by switch name: ``move_notify`` from ``CONFIG_DMABUF_MOVE_NOTIFY`` (only a config
        file tells: kallsyms exports ``dma_buf_move_notify`` either way), ``pci_p2pdma`` from
        ``CONFIG_PCI_P2PDMA``, else from kallsyms' ``pci_p2pdma_distance_many``, ``dmem`` from
        ``CONFIG_CGROUP_DMEM``. A switch they
        do not settle is absent. The one derivation: ``pinlab doctor``'s profile
        (:func:`~pinlab.inspect.doctor_run.closest_profile`) and the platform file's
        ``[kernel_config]`` both take it from here."""
        out: dict[str, bool] = {}
        move_notify = self.option("DMABUF_MOVE_NOTIFY")
        if move_notify is not None:
            out["move_notify"] = move_notify
        p2p = self.option("PCI_P2PDMA")
        if p2p is None:
            p2p = self.has_symbol("pci_p2pdma_distance_many")
        if p2p is not None:
            out["pci_p2pdma"] = p2p
        dmem = self.option("CGROUP_DMEM")
        if dmem is not None:
            out["dmem"] = dmem
        return out

    def has_module(self, name: str) -> bool | None:
        """Whether module ``name`` is loaded (None: the module list was not read)."""
        return None if self.modules is None else name in self.modules

    @property
    def version(self) -> tuple[int, int, int] | None:
        """The leading ``MAJOR.MINOR[.PATCH]`` of the release (``uname -r``)."""
        return _version(self.release)


def _version(release: str) -> tuple[int, int, int] | None:
    import re

    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", release.strip())
    if m is None:
        return None
    return int(m[1]), int(m[2]), int(m[3] or 0)


class DmemFacts(_Facts):
    """One dmem file of one cgroup: ``values`` region → bytes (``max``: no limit)."""

    cgroup: str
    file: Literal["dmem.current", "dmem.min", "dmem.low", "dmem.max"]
    values: dict[str, CgLimit] = Field(default_factory=dict)


class LimitFacts(_Facts):
    """The caller's limits. ``memlock_soft``/``memlock_hard`` absent: unknown; ``"unlimited"``:
    RLIM_INFINITY. ``capabilities`` absent: unknown."""

    uid: int | None = None
    memlock_soft: Rlim = None
    memlock_hard: Rlim = None
    memlock_known: bool = False
    capabilities: list[Literal["CAP_IPC_LOCK", "CAP_SYS_RESOURCE"]] | None = None
    cgroup: str | None = None
    memory_max: CgLimit = None
    dmem_capacity: dict[str, Size] = Field(default_factory=dict)
    dmem: list[DmemFacts] = Field(default_factory=list)

    @model_validator(mode="after")
    def _soft_within_hard(self) -> LimitFacts:
        """``do_prlimit`` (``kernel/sys.c``) refuses a soft limit above the hard one
        (``-EINVAL``): no host has it, so a snapshot that says so was edited wrong; named at
        ``memlock_soft``, before the doctor builds a policy from it."""
        if not self.memlock_known:
            return self
        inf = float("inf")
        soft = inf if self.memlock_soft is None else self.memlock_soft
        hard = inf if self.memlock_hard is None else self.memlock_hard
        if soft > hard:
            show = partial(compact_size, unlimited="unlimited")
            error = InitErrorDetails(
                type=PydanticCustomError(
                    "pinlab_rlimit",
                    "expected at most the hard limit (memlock_hard = {hard}), found {soft}",
                    {"hard": show(self.memlock_hard), "soft": show(self.memlock_soft)},
                ),
                loc=("memlock_soft",),
                input=self.memlock_soft,
            )
            raise ValidationError.from_exception_data(type(self).__name__, [error])
        return self

    def has_cap(self, name: str) -> bool | None:
        return None if self.capabilities is None else name in self.capabilities

    def dmem_limit(self, region: str) -> tuple[int | None, str | None]:
        """(the tightest ``dmem.max`` of ``region`` up the cgroup chain, its cgroup)."""
        best: tuple[int | None, str | None] = (None, None)
        for f in self.dmem:
            if f.file == "dmem.max" and f.values.get(region) is not None:
                value = f.values[region]
                if best[0] is None or (value is not None and value < best[0]):
                    best = (value, f.cgroup)
        return best

    def dmem_current(self, region: str, cgroup: str | None = None) -> int | None:
        for f in self.dmem:
            if f.file == "dmem.current" and cgroup in (None, f.cgroup) and region in f.values:
                return f.values[region]
        return None


class CpuFacts(_Facts):
    """The CPU as ``/proc/cpuinfo`` names it."""

    vendor_id: str = ""
    family: int = 0
    model: str = ""
    sockets: int = Field(default=1, ge=1)
    node_socket: dict[str, int] = Field(default_factory=dict)


class Snapshot(_Facts):
    """A host's facts (module docstring)."""

    pinlab_snapshot: Literal[1]
    source: str = ""
    hostname: str = ""
    memory_total: Size | None = None
    kernel: KernelFacts = Field(default_factory=KernelFacts)
    limits: LimitFacts = Field(default_factory=LimitFacts)
    cpu: CpuFacts | None = None
    pci: list[PciFunction] = Field(default_factory=list)
    nic_odp: dict[str, bool] = Field(
        default_factory=dict, description="RDMA device → ODP capable (ibv_devinfo odp_caps)"
    )
    notes: list[str] = Field(default_factory=list)

    # -- as the inspect records, for planning --------------------------------------------------

    def pci_info(self) -> PciInfo:
        if not self.pci:
            return PciInfo(MISSING, self.source, detail="no PCI function in the snapshot")
        return PciInfo(OK, self.source, tuple(self.pci))

    def cpu_info(self) -> CpuInfo:
        if self.cpu is None:
            return CpuInfo(MISSING, self.source)
        c = self.cpu
        vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(c.vendor_id, "other")
        nodes = {int(k): v for k, v in c.node_socket.items()}
        return CpuInfo(OK, self.source, vendor, c.vendor_id, c.family, c.model, c.sockets, nodes)

    def mem_info(self) -> MemInfo:
        if self.memory_total is None:
            return MemInfo(MISSING, self.source)
        return MemInfo(OK, self.source, self.memory_total)

    def system_info(self) -> SystemInfo:
        status = OK if self.kernel.release else MISSING
        return SystemInfo(status, self.source, self.kernel.release, self.hostname)

    def dmem_info(self) -> DmemInfo:
        if not self.limits.dmem_capacity:
            return DmemInfo(MISSING, self.source)
        files = tuple(DmemFile(f.cgroup, f.file, OK, dict(f.values)) for f in self.limits.dmem)
        return DmemInfo(OK, self.source, dict(self.limits.dmem_capacity), files)

    def plan(self, name: str | None = None) -> PlatformPlan:
        """The platform these facts describe (:func:`plan_platform`)."""
        return plan_platform(
            self.pci_info(),
            self.cpu_info(),
            self.mem_info(),
            dmem=self.dmem_info(),
            system=self.system_info(),
            name=name,
            kernel_config=self.kernel.config_switches(),
        )

    def aliases(self) -> dict[str, str]:
        """Host names of each planned device and NIC → its pinlab name
        (:attr:`~pinlab.inspect.platform.PlatformPlan.aliases`)."""
        return self.plan().aliases


# -- from a host ----------------------------------------------------------------------------------


def kernel_facts(report: HostReport) -> KernelFacts:
    """The kernel facts of what :func:`~pinlab.inspect.host.inspect_host` read."""
    k = report.kernel
    return KernelFacts(
        release=report.system.release,
        config_source=k.config_source,
        config=dict(k.config),
        modules=None if k.modules is None else list(k.modules),
        symbols=None if k.symbols is None else list(k.symbols),
        memory_peers=None if k.memory_peers is None else list(k.memory_peers),
    )


def snapshot_from_report(report: HostReport) -> Snapshot:
    """The snapshot of what :func:`~pinlab.inspect.host.inspect_host` read."""
    kernel = kernel_facts(report)
    m, caps = report.memlock, report.capabilities
    known = m.status == OK
    cap_list: list[_CapName] | None = None
    if caps.effective is not None:
        cap_list = [name for name, bit in _CAPS.items() if caps.has(bit)]
    dmem: list[DmemFacts] = []
    if report.dmem.status == OK:
        for f in report.dmem.files:
            if f.status == OK:
                dmem.append(
                    DmemFacts.model_validate(
                        {"cgroup": f.cgroup, "file": f.name, "values": dict(f.values)}
                    )
                )
    limits = LimitFacts(
        uid=caps.uid,
        memlock_soft=m.soft if known else None,
        memlock_hard=m.hard if known else None,
        memlock_known=known,
        capabilities=cap_list,
        cgroup=report.cgroup.path,
        memory_max=report.memcg.limit if report.memcg.status == OK else None,
        dmem_capacity=dict(report.dmem.capacity) if report.dmem.status == OK else {},
        dmem=dmem,
    )
    cpu = None
    if report.cpu.status == OK:
        c = report.cpu
        cpu = CpuFacts(
            vendor_id=c.vendor_id,
            family=c.family,
            model=c.model,
            sockets=c.sockets,
            node_socket={str(k): v for k, v in c.node_socket.items()},
        )
    pci = list(report.pci.functions) if report.pci.status == OK else []
    notes = [f"{name}: {rec.status}" for name, rec in report.sources().items() if rec.status != OK]
    host = report.system.hostname
    return Snapshot(
        pinlab_snapshot=SNAPSHOT_VERSION,
        source=f"pinlab inspect of {host or 'a host'} (root {report.root})",
        hostname=host,
        memory_total=report.memory.total if report.memory.status == OK else None,
        kernel=kernel,
        limits=limits,
        cpu=cpu,
        pci=pci,
        notes=notes,
    )


# -- files ----------------------------------------------------------------------------------------


def dump_snapshot(snap: Snapshot) -> str:
    """The snapshot as TOML (absent values left out); :func:`parse_snapshot` reads it back equal."""
    header = (
        "# pinlab host snapshot (pinlab inspect --snapshot, or built from pasted output).\n"
        "# Diagnose it with: pinlab doctor <this file>\n\n"
    )
    return header + tomli_w.dumps(snap.model_dump(mode="json", exclude_none=True))


def _validate(data: Mapping[str, Any], source: str) -> Snapshot:
    version = data.get("pinlab_snapshot")
    if version != SNAPSHOT_VERSION:
        found = "none" if version is None else repr(version)
        raise ConfigError(
            source,
            "pinlab_snapshot",
            f"expected snapshot format {SNAPSHOT_VERSION} (a file written by pinlab inspect "
            f"--snapshot), found {found}",
        )
    try:
        return Snapshot.model_validate(dict(data))
    except ValidationError as e:
        raise config_error(e, source, model=Snapshot) from None


def parse_snapshot(text: str, source: str = "<snapshot>") -> Snapshot:
    """A snapshot from TOML text (:class:`ConfigError`, one line, on any problem)."""
    return _validate(parse_toml(text, source), source)


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read and validate a snapshot file (:class:`ConfigError`, one line, on any problem)."""
    # the path as given: Path("") would be the current directory, not an empty path
    return _validate(read_toml(os.fspath(path), what="a snapshot file"), str(path))


def write_snapshot(snap: Snapshot, path: str | os.PathLike[str]) -> Path:
    """Write the snapshot atomically (``OSError`` when the directory is not writable)."""
    return fsutil.write_atomic(Path(path), dump_snapshot(snap), make_parents=False)
