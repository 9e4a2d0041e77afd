"""What one exploration runs on: an exporter, an importer, a kernel profile and a policy.

A :class:`Target` boots a fresh machine for every sequence it runs (:meth:`Target.boot`): the
``pinlab matrix`` platform (:func:`pinlab.platform.presets.matrix`: an AMD Zen host, one PCIe
switch with the exporting device ``gpu0``, a second GPU ``gpu1`` that imports and owns
``display0``, booted only for the importers that use them) with the target's NIC, if its
importer is an RDMA one, below the switch; the
policy installed; and three processes: ``p0`` (creates and exports buffers), ``p1`` (receives
fds) and ``pressure`` (the other tenant whose allocations evict).

The exporters come from the drivers' registries (:func:`exporter_kinds`): every registered
exporter driver as ``gpu0`` -- a GEM driver's buffers are created and PRIME-exported, a
vfio-pci device's are ranges of its memory BAR (``VFIO_DEVICE_FEATURE_DMA_BUF``, 6.19) -- and
every registered RDMA driver that exports device memory (``UVERBS_OBJECT_DMABUF``: mlx5 MEMIC,
7.1) as a NIC ``<driver>_dm`` of its own on the switch, next to ``gpu0``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any, Literal

from pinlab.drivers import EXPORTERS, IMPORTERS, ExporterDriver, Importer
from pinlab.drivers.base import BufferSource, ImportEntry
from pinlab.drivers.rdma import RdmaDevice
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.profile import PRESETS as PROFILES
from pinlab.kernel.profile import KernelProfile, get_profile
from pinlab.platform import Machine, build, presets
from pinlab.platform.cost import CostModel
from pinlab.platform.spec import NicSpec, PlatformSpec
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.dmem import DmemCgroupController
from pinlab.policy.dmem import install as install_dmem
from pinlab.policy.proposals import device_pin_cap, memlock_dmabuf_pins, revocable_pins
from pinlab.uapi.process import Process
from pinlab.uapi.system import System
from pinlab.units import MiB

GPU = "gpu0"
"""The exporting device of a driver in :data:`~pinlab.drivers.EXPORTERS`."""
DISPLAY = "display0"
GPU_IMPORT = "gpu1:import"
DEVICE_MEMORY = 256 * MiB
BUFFER_SIZE = 16 * MiB
PRESSURE_SIZE = DEVICE_MEMORY - 4 * MiB
"""The other tenant's allocation: all device memory but a sliver, so that everything not
pinned is evicted to make room."""
DM_SIZE = 64 * 1024
"""The size of an RDMA device-memory buffer: MEMIC is small (256 KiB on the modelled mlx5)."""
LIMIT = 24 * MiB
"""The quota of the quota policies (``dmem.max`` of ``p0``/``p1``'s cgroup, the per-device pin
cap, ``dmem.pin.max``): one buffer fits, two do not."""


@dataclass(frozen=True, slots=True)
class ExporterKind:
    """One exporter the exploration can aim at: how userspace gets a dma-buf of it
    (``source``: ``gem`` = GEM create + PRIME export, ``vfio`` = a range of vfio-pci's memory
    BAR, ``rdma-dm`` = ``ibv_alloc_dm`` + ``UVERBS_METHOD_DMABUF_ALLOC``), the registered
    driver, the device that exports (``gpu0`` or the NIC ``<driver>_dm``), the constant the
    operations name one buffer's size by and the exporting NIC's platform entry."""

    name: str
    source: Literal["gem", "vfio", "rdma-dm"]
    driver: str
    device: str
    size_name: Literal["BUFFER_SIZE", "DM_SIZE"]
    nic: NicSpec | None = None

    def unavailable(self, profile: KernelProfile) -> str | None:
        """Why this exporter cannot exist under ``profile`` (None: it can)."""
        if self.source == "rdma-dm":
            if profile.rdma_dmabuf_export:
                return None
            return f"{self.name}: profile {profile.name} has no UVERBS_OBJECT_DMABUF (7.1 on)"
        if not EXPORTERS[self.driver].exists_in(profile):
            return f"{self.driver} does not exist in profile {profile.name}"
        return None


def exporter_kinds() -> dict[str, ExporterKind]:
    """The exporters by name, in registry order: every exporter driver, then every RDMA
    importer driver that declares ``exports_device_memory`` (module docstring)."""
    return dict(_exporter_kinds(tuple(EXPORTERS.items()), tuple(IMPORTERS.items())))


@cache
def _exporter_kinds(
    exporters: tuple[tuple[str, type[ExporterDriver]], ...],
    importers: tuple[tuple[str, type[Importer]], ...],
) -> dict[str, ExporterKind]:
    """:func:`exporter_kinds` of the registries' drivers (built once per registry state)."""
    kinds: dict[str, ExporterKind] = {}
    for name, cls in exporters:
        source: Literal["gem", "vfio"] = (
            "vfio" if cls.buffer_source is BufferSource.VFIO_BAR else "gem"
        )
        kinds[name] = ExporterKind(name, source, name, GPU, "BUFFER_SIZE")
    for name, rdma in importers:
        if issubclass(rdma, RdmaDevice) and rdma.exports_device_memory:
            device = f"{name}_dm"
            nic = NicSpec(name=device, driver=name, parent="sw0")
            kinds[f"{name}-dm"] = ExporterKind(
                f"{name}-dm", "rdma-dm", name, device, "DM_SIZE", nic
            )
    return kinds


@dataclass(frozen=True, slots=True)
class ImporterKind:
    """One importer the exploration can aim at: how it is reached from userspace (``via``: the
    entry its driver declares, :class:`~pinlab.drivers.base.ImportEntry` -- an MR on NIC
    ``device``, a PRIME import on the GPU importer, a scanout on the display, an IOAS map),
    the access flags of an MR, and the NIC's platform entry."""

    name: str
    via: ImportEntry
    device: str
    odp: bool = False
    nic: NicSpec | None = None
    needs: Callable[[KernelProfile], str | None] = field(default=lambda profile: None)
    """Why this importer cannot exist under a kernel profile (None: it can)."""


def _revocable(profile: KernelProfile) -> str | None:
    if profile.umem_revocable_pinned_ops:
        return None
    return "revocable pinned imports exist from profile 7.1"


def _iommufd(profile: KernelProfile) -> str | None:
    if profile.iommufd_dmabuf:
        return None
    return "iommufd imports dma-bufs from profile 6.19"


@dataclass(frozen=True, slots=True)
class _Variant:
    """An importer kind beyond a driver's plain ones: the driver built with ``options``."""

    name: str
    driver: str
    odp: bool
    options: dict[str, bool | int | str]
    needs: Callable[[KernelProfile], str | None] = field(default=lambda profile: None)


_VARIANTS = (
    _Variant("efa-revocable", "efa", False, {"revocable": True}, _revocable),
    _Variant("mlx5-broken", "mlx5", True, {"ignore_move_notify": True}),
)
"""Configurations of particular RDMA drivers: EFA's revocable pinned MRs (7.1, K-115) and the
deliberately broken mlx5 that ignores ``move_notify`` (the stale-DMA detector's negative
control, K-39)."""


def importer_kinds() -> dict[str, ImporterKind]:
    """The importers by name, in registry order (:data:`~pinlab.drivers.IMPORTERS`): for an
    RDMA driver its pinned MRs (``<driver>``) or, for a driver with ODP, ``<driver>-odp`` and
    ``<driver>-pinned``, then its :data:`_VARIANTS`, each on a NIC of its own
    (``<driver>0``, ``<driver>1``, … -- ``mlx5_0`` for a name ending in a digit); the display
    engine, the GPU import and iommufd as the matrix machine has them (``display0``,
    ``gpu1:import``, ``/dev/iommu`` from 6.19: K-107, only vfio-pci's buffers)."""
    return dict(_importer_kinds(tuple(IMPORTERS.items())))


_DEVICES: dict[ImportEntry, tuple[str, Callable[[KernelProfile], str | None]]] = {
    ImportEntry.SCANOUT: (DISPLAY, lambda profile: None),
    ImportEntry.PRIME_IMPORT: (GPU_IMPORT, lambda profile: None),
    ImportEntry.IOAS_MAP: ("iommufd", _iommufd),
}
"""The device of the matrix machine an importer of each declared entry is, beyond the NICs
(one per RDMA configuration), and why it may not exist under a kernel profile."""


@cache
def _importer_kinds(drivers: tuple[tuple[str, type[Importer]], ...]) -> dict[str, ImporterKind]:
    """:func:`importer_kinds` of the registry's ``drivers`` (built once per registry state: a
    search asks for a target's kind thousands of times)."""
    kinds: dict[str, ImporterKind] = {}
    for name, cls in drivers:
        if issubclass(cls, RdmaDevice):
            plain = [(f"{name}-odp", True), (f"{name}-pinned", False)] if cls.supports_odp else []
            configs = [_Variant(n, name, odp, {}) for n, odp in plain or [(name, False)]]
            configs += [v for v in _VARIANTS if v.driver == name]
            sep = "_" if name[-1:].isdigit() else ""
            for i, v in enumerate(configs):
                device = f"{name}{sep}{i}"
                nic = NicSpec(
                    name=device, driver=name, parent="sw0", odp=v.odp, driver_options=v.options
                )
                kinds[v.name] = ImporterKind(v.name, cls.import_entry, device, v.odp, nic, v.needs)
        elif cls.import_entry in _DEVICES:
            device, needs = _DEVICES[cls.import_entry]
            kinds[name] = ImporterKind(name, cls.import_entry, device, needs=needs)
    return kinds


def _importer_kind(name: str) -> ImporterKind:
    kind = _importer_kinds(tuple(IMPORTERS.items())).get(name)
    if kind is None:
        raise ValueError(
            f"unknown importer {name!r} (expected one of {', '.join(importer_kinds())})"
        )
    return kind


# -- policies ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Booted:
    """A machine just booted for one sequence: the machine, its cgroup tree and dmem
    controller (when the profile has dmem), and the three processes."""

    machine: Machine
    tree: CgroupTree
    dmem: DmemCgroupController | None
    procs: tuple[Process, Process]
    pressure: Process
    limited: list[str] = field(default_factory=list)
    """dmem regions whose ``dmem.max`` of ``/limited`` (``p0``, ``p1``) is :data:`LIMIT`."""

    @property
    def system(self) -> System:
        return self.machine.system

    @property
    def kernel(self) -> Kernel:
        return self.machine.kernel


def _dmem_max(b: Booted) -> None:
    for driver in b.system.exporters.values():
        region = driver.vram_region
        if region is not None:
            b.tree.write("/limited", "dmem.max", f"{region.name} {LIMIT}")
            b.limited.append(region.name)


def _memlock(b: Booted) -> None:
    memlock_dmabuf_pins.install(b.kernel)


def _pin_cap(b: Booted) -> None:
    device_pin_cap.install(b.kernel, LIMIT, {})


def _revoke(b: Booted) -> None:
    revocable_pins.install(b.kernel, list(b.machine.ttm_devices()))


def _dmem_pin_max(b: Booted) -> None:
    from pinlab.policy.proposals import PROPOSALS

    PROPOSALS["dmem-pin-max"].install(b.kernel, b.tree, dmem=b.dmem)
    for driver in b.system.exporters.values():
        region = driver.vram_region
        if region is not None:
            b.tree.write("/limited", "dmem.pin.max", f"{region.name} {LIMIT}")


def _needs_dmem(profile: KernelProfile) -> str | None:
    return None if profile.dmem else "the dmem controller exists from profile 6.14"


def _needs_revoke(profile: KernelProfile) -> str | None:
    return None if profile.invalidate_mappings else "revocable-pins needs profile 7.1"


@dataclass(frozen=True, slots=True)
class PolicyKind:
    """An opt-in policy the exploration runs under: its install step and why it may not
    exist under a kernel profile."""

    name: str
    install: Callable[[Booted], None]
    needs: Callable[[KernelProfile], str | None] = field(default=lambda profile: None)


POLICIES: dict[str, PolicyKind] = {
    p.name: p
    for p in (
        PolicyKind("none", lambda b: None),
        PolicyKind("dmem-max", _dmem_max, _needs_dmem),
        PolicyKind("memlock-dmabuf-pins", _memlock),
        PolicyKind("device-pin-cap", _pin_cap),
        PolicyKind("revocable-pins", _revoke, _needs_revoke),
        PolicyKind("dmem-pin-max", _dmem_pin_max, _needs_dmem),
    )
}
"""The policies by name: upstream (``none``), the administrator's ``dmem.max``, and the
never-merged proposals of :mod:`pinlab.policy.proposals` with :data:`LIMIT` as their quota."""


# -- the target ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Target:
    """One point of drivers × profiles × policies: the exporter driver of ``gpu0``, the
    importer kind the operations use, the kernel profile and the policy."""

    exporter: str
    importer: str
    profile: str
    policy: str = "none"

    def __str__(self) -> str:
        return f"{self.exporter} → {self.importer} @ {self.profile} [{self.policy}]"

    @property
    def kind(self) -> ImporterKind:
        return _importer_kind(self.importer)

    @property
    def source(self) -> ExporterKind:
        return _exporter_kind(self.exporter)

    @property
    def domain(self) -> str:
        """The domain userspace creates a GEM buffer it means to share in (the driver's)."""
        return EXPORTERS[self.source.driver].shareable_domain

    def unavailable(self) -> str | None:
        """Why this combination cannot be booted (None: it can)."""
        prof = get_profile(self.profile)
        return (
            self.source.unavailable(prof)
            or self.kind.needs(prof)
            or POLICIES[self.policy].needs(prof)
        )

    def boot(self) -> Booted:
        """A fresh machine with the policy on and the three processes spawned."""
        profile = get_profile(self.profile)
        machine = build(_platform(self.exporter, self.importer), profile, _cost_model())
        tree = CgroupTree()
        dmem = None
        if machine.kernel.profile.dmem:
            dmem = install_dmem(machine.kernel, tree)
            for bdev in machine.ttm_devices():
                dmem.register_device(bdev)
        tree.mkdir("/limited")
        system = machine.system
        p0 = system.spawn("p0")
        p1 = system.spawn("p1")
        for proc in (p0, p1):
            tree.attach(proc, "/limited")
        booted = Booted(machine, tree, dmem, (p0, p1), system.spawn("pressure"))
        POLICIES[self.policy].install(booted)
        return booted


def _exporter_kind(name: str) -> ExporterKind:
    kind = _exporter_kinds(tuple(EXPORTERS.items()), tuple(IMPORTERS.items())).get(name)
    if kind is None:
        raise ValueError(
            f"unknown exporter {name!r} (expected one of {', '.join(exporter_kinds())})"
        )
    return kind


@cache
def _platform(exporter: str, importer: str) -> PlatformSpec:
    """The matrix platform with the importer's NIC, if it is one, and the exporting NIC of an
    RDMA exporter as the only NICs (validated once: a sequence boots it thousands of times).
    An RDMA exporter's machine keeps the matrix's default ``gpu0``, which exports nothing."""
    source = _exporter_kind(exporter)
    if source.source == "rdma-dm":
        spec = presets.matrix(memory=DEVICE_MEMORY)
    else:
        spec = presets.matrix(exporter=source.driver, memory=DEVICE_MEMORY)
    kind = _importer_kind(importer)
    nics = tuple(n for n in (source.nic, kind.nic) if n is not None)
    update: dict[str, Any] = {"nics": nics}
    if kind.via in (ImportEntry.REG_MR, ImportEntry.IOAS_MAP):
        # the importing GPU and its display are the other importers' devices: nothing this
        # target's operations reach, so not booted (a third of the boot time)
        update["devices"] = tuple(d for d in spec.devices if d.name == GPU)
        update["displays"] = ()
    return spec.model_copy(update=update)


@lru_cache(maxsize=1)
def _cost_model() -> CostModel:
    """The default cost model, built once (the search measures no time)."""
    return CostModel()


def targets(
    exporters: list[str], importers: list[str], profiles: list[str], policies: list[str]
) -> tuple[list[Target], list[tuple[Target, str]]]:
    """Every combination in exploration order, and the combinations left out with the reason.

    The order: upstream (policy ``none``) before the opt-in policies -- a policy only adds
    behaviour on top of upstream; the newest released kernel first, then the older ones, then
    the queued work (``next``) -- a newer profile has every switch an older one has been given,
    so it covers the most behaviour per sequence, and it is the kernel a report would be
    against; then policy, exporter and importer in the order the lists give."""
    ok: list[Target] = []
    skipped: list[tuple[Target, str]] = []
    for profile in profiles:
        for policy in policies:
            for exporter in exporters:
                for importer in importers:
                    t = Target(exporter, importer, profile, policy)
                    why = t.unavailable()
                    (skipped.append((t, why)) if why else ok.append(t))
    rank = {
        "policy": {name: i for i, name in enumerate(policies)},
        "exporter": {name: i for i, name in enumerate(exporters)},
        "importer": {name: i for i, name in enumerate(importers)},
    }

    def key(t: Target) -> tuple[object, ...]:
        prof = get_profile(t.profile)
        return (
            t.policy != "none",
            not prof.released,
            tuple(-v for v in prof.version),
            rank["policy"][t.policy],
            rank["exporter"][t.exporter],
            rank["importer"][t.importer],
        )

    return sorted(ok, key=key), skipped


ALL_PROFILES = tuple(PROFILES)
