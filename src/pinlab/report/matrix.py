"""``pinlab matrix``: every exporter × importer pair, imported, pinned and mapped for real.

For each pair the matrix builds a fresh small machine, lets one process create a buffer in the
exporter's device memory, export it as a dma-buf fd and hand it to the importer through the
userspace calls (:mod:`pinlab.uapi`), then reports what the kernel model did:

* **outcome** -- where the memory ended up: ``device memory in place``, ``device BAR in
  place`` (vfio-pci), ``migrated to GTT``, ``migrated to system memory``, or ``refused -EXXX at
  <stage>`` (``registration``, ``attach``, ``pin`` or ``map``: the outermost dma-buf core step
  the error came out of; iommufd's private interconnect counts as its map);
* **P2P** -- whether the importer's mapping is a peer-to-peer (BAR) mapping;
* **pinned** -- whether the buffer may not move afterwards;
* **decided by** -- the checklist items (``kernel-semantics.md`` §12) and sections that decide
  the outcome for this exporter, importer and profile family (:func:`decided_by`). This column
  is a rule table written from the specification, not a trace; the outcome columns are measured.

The machine (:func:`build_machine`) is the platform preset
:func:`~pinlab.platform.presets.matrix`, built by :func:`~pinlab.platform.build` exactly as a
scenario's platform is: an AMD Zen host (host-bridge P2P allowed, K-83), one root port with a
PCIe switch below it; on the switch the exporting GPU (``gpu0``), an EFA-like NIC (``efa0``),
an mlx5-like NIC with ODP (``mlx5_0``), one without ODP (``mlx5_1``) and a second, amdgpu-like
GPU (``gpu1``) that imports buffers (``gpu1:import``) and owns the display engine
(``display0``). An exporter whose memory is a carve-out of host DRAM (the APU) is an
integrated GPU on the root bus (an RCiEP) instead; on a Zen host its P2P path through the host
bridge is allowed all the same.

Rows are the exporters of :data:`pinlab.drivers.EXPORTERS` (one that does not exist in the
profile shows ``n/a``), columns the importers of :data:`pinlab.drivers.IMPORTERS` as the
machine has them, in registration order; an RDMA driver
with ODP support has one column per device (``mlx5-odp``, ``mlx5-no-odp``), each registering
``IB_ACCESS_ON_DEMAND``. Whether an exporter is dynamic is read off its ``dma_buf_ops`` table,
the checklist items off the drivers' declarations.

Buffers are 16 MiB in device memory, created in the domain the exporter declares for a
buffer meant to be shared: xe and i915 buffers get the placements ``vram|system``, as userspace
must create a buffer it wants to share: a VRAM-only xe BO cannot be pinned in TT (``-EINVAL``,
K-53) and an LMEM-only i915 object cannot be attached at all (``-EOPNOTSUPP``, K-54).

``proposals`` (``pinlab matrix --proposal ID``) switch opt-in pin policies on with their
default settings, the matrix process in a cgroup of its own (:func:`install_proposals`); a
cell a policy refused names it (``proposal <id>``) after the checklist items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from rich.console import Console
from rich.table import Table

from pinlab.drivers import EXPORTERS, IMPORTERS
from pinlab.drivers.amdgpu import AmdgpuDevice
from pinlab.drivers.base import (
    BufferSource,
    DeviceBuffer,
    ExporterDriver,
    ImportEntry,
    ImportPath,
    placed_by_pin,
)
from pinlab.drivers.importer import Importer
from pinlab.drivers.rdma import RdmaDevice
from pinlab.errors import ConfigError
from pinlab.kernel.errno import KernelError
from pinlab.kernel.profile import (
    DEFAULT_PROFILE,
    CoreFamily,
    KernelProfile,
    get_profile,
)
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
)
from pinlab.platform import Machine, build, presets
from pinlab.policy.cgroup import Cgroup, CgroupTree
from pinlab.policy.config import apply_policy, parse_policy
from pinlab.policy.dmem import install as install_dmem
from pinlab.policy.proposals import PROPOSALS
from pinlab.uapi.process import Process
from pinlab.units import MiB

# device names on the matrix machine (pinlab.platform.presets.matrix)
GPU = "gpu0"
EFA = "efa0"
MLX5 = "mlx5_0"
MLX5_NO_ODP = "mlx5_1"
DISPLAY = "display0"
GPU_IMPORT = "gpu1:import"

BUFFER_SIZE = 16 * MiB
DEVICE_MEMORY = 256 * MiB

ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE

_OUTCOME = {
    "vram": "device memory in place",
    "bar": "device BAR in place",
    "gtt": "migrated to GTT",
    "system": "migrated to system memory",
}


# -- the machine -----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class MatrixMachine(Machine):
    """A matrix machine: the built platform, with the roles the matrix gives its devices."""

    @classmethod
    def of(cls, machine: Machine) -> MatrixMachine:
        """``machine`` (just built from the matrix preset) with the matrix's roles."""
        return cls(**{f.name: getattr(machine, f.name) for f in fields(Machine)})

    @property
    def exporter(self) -> ExporterDriver:
        """The exporter under test (``gpu0``)."""
        return self.exporters[GPU]

    @property
    def importer_gpu(self) -> AmdgpuDevice:
        """The GPU behind the GPU importer (``gpu1``)."""
        return self.system.gpu_importer(GPU_IMPORT).adev

    def settle(self, *procs: Process) -> int:
        """Let time pass: every queued copy finishes (its fence signals) and the processes'
        collected waits are dropped. Returns the number of copies run."""
        n = sum(bdev.run_copies() for bdev in self.ttm_devices())
        for proc in procs:
            proc.take_waits()
        self.kernel.take_waits()
        return n


def build_machine(
    exporter: str,
    profile: KernelProfile | str = DEFAULT_PROFILE,
    *,
    broken_mlx5: bool = False,
    clock: Callable[[], float] | None = None,
) -> MatrixMachine:
    """The matrix machine for ``exporter`` under ``profile`` (see the module docstring).

    ``broken_mlx5`` builds ``mlx5_0`` as the deliberately broken importer that ignores
    ``move_notify`` (the stale-DMA detector's negative control); ``clock`` stamps stale-DMA
    incidents. Raises ``ValueError`` for an unknown exporter or one the profile does not have
    (xe before 6.8).
    """
    if exporter not in EXPORTERS:
        raise ValueError(f"unknown exporter {exporter!r} (expected one of {', '.join(EXPORTERS)})")
    prof = get_profile(profile) if isinstance(profile, str) else profile
    spec = presets.matrix(exporter=exporter, broken_mlx5=broken_mlx5, memory=DEVICE_MEMORY)
    return MatrixMachine.of(build(spec, prof, clock=clock))


def matrix_profile(name: str = DEFAULT_PROFILE, move_notify: bool = False) -> KernelProfile:
    """Preset ``name``, with ``CONFIG_DMABUF_MOVE_NOTIFY=y`` when ``move_notify`` (7.1 has it
    always on). ``ValueError`` for an unknown preset."""
    prof = get_profile(name)
    if move_notify and prof.move_notify_is_option:
        prof = prof.with_(move_notify=True)
    return prof


# -- the columns: the importers of the machine -----------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    """One importer of the matrix machine: its column ``label``, its name in the
    :class:`~pinlab.uapi.system.System` and the driver instance; for an importer whose
    declared entry is an MR registration (``ImportEntry.REG_MR``), the same device as the
    system's RDMA device (``nic``) and the access flags it registers with (``access``:
    ``IB_ACCESS_ON_DEMAND`` where its driver supports ODP, so the ODP path -- or its refusal
    -- is what the column shows)."""

    label: str
    device: str
    importer: Importer
    nic: RdmaDevice | None = None
    access: int = 0

    @property
    def path(self) -> ImportPath | None:
        """How the import reaches the dma-buf core; None when refused before it."""
        if self.nic is not None:
            return self.nic.mr_path(self.access)
        return self.importer.import_path

    def items(self, exporter_dynamic: bool) -> tuple[str, ...]:
        """The importer's checklist items for its path into the core."""
        if self.nic is not None:
            return self.nic.mr_checklist_items(self.access, exporter_dynamic)
        return self.importer.checklist_items(exporter_dynamic)


def _column(m: MatrixMachine, device: str, importer: Importer) -> Column:
    if importer.import_entry is not ImportEntry.REG_MR:
        return Column(importer.driver_name, device, importer)
    nic = m.system.nic(device)
    if not nic.supports_odp:
        return Column(nic.driver_name, device, importer, nic, ACCESS)
    label = f"{nic.driver_name}-{'odp' if nic.odp else 'no-odp'}"
    return Column(label, device, importer, nic, ACCESS | IB_ACCESS_ON_DEMAND)


def columns(m: MatrixMachine) -> list[Column]:
    """The machine's importers in registry order; an RDMA driver with ODP support gives one
    column per device, ``<driver>-odp`` / ``<driver>-no-odp``."""
    engines: list[tuple[str, Importer]] = list(m.system.importers().items())
    return [
        _column(m, device, importer)
        for cls in IMPORTERS.values()
        for device, importer in engines
        if type(importer) is cls
    ]


def column(m: MatrixMachine, label: str) -> Column:
    """The column ``label`` of the machine (``ValueError`` for an unknown one)."""
    found = {c.label: c for c in columns(m)}
    if label not in found:
        raise ValueError(f"unknown importer {label!r} (expected one of {', '.join(found)})")
    return found[label]


# -- one cell --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cell:
    """What one exporter × importer pair did.

    ``outcome`` is the headline; ``memory`` where the buffer is afterwards (``vram``, ``gtt``,
    ``system``); ``p2p`` and ``pinned`` are None when the import was refused or the pair does
    not exist; ``error`` is the full kernel error; ``items`` the deciding checklist items.
    """

    exporter: str
    importer: str
    outcome: str
    memory: str | None
    p2p: bool | None
    pinned: bool | None
    items: tuple[str, ...]
    stage: str | None = None
    errno: str | None = None
    error: str | None = None
    incidents: int = 0

    @property
    def refused(self) -> bool:
        return self.errno is not None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["items"] = list(self.items)
        return data


_STAGES = {
    "dma_buf_dynamic_attach": "attach",
    "dma_buf_pin": "pin",
    "dma_buf_map_attachment": "map",
    "vfio_pci_dma_buf_iommufd_map": "map",
}


def error_stage(exc: BaseException) -> str:
    """The outermost dma-buf core step an error came out of (``attach``, ``pin``, ``map``),
    or ``registration`` when the importer refused before reaching the core."""
    tb = exc.__traceback__
    while tb is not None:
        stage = _STAGES.get(tb.tb_frame.f_code.co_name)
        if stage is not None:
            return stage
        tb = tb.tb_next
    return "registration"


def _import(m: MatrixMachine, col: Column, proc: Process, fd: int) -> tuple[str, bool]:
    """Import ``fd`` through the uapi call the importer declares (``import_entry``), let the
    copies finish, and touch the buffer once from the importing device. Returns (memory, p2p)
    of the importer's mapping."""
    match col.importer.import_entry:
        case ImportEntry.REG_MR:
            mr = proc.ibv_reg_dmabuf_mr(col.device, fd, 0, BUFFER_SIZE, col.access)
            m.settle(proc)
            result = proc.nic_dma(mr)
            return result.memory, result.p2p
        case ImportEntry.SCANOUT:
            scanout = proc.set_scanout(col.device, fd)
            m.settle(proc)
            scanout.display.scan_frame(scanout)
            return scanout.sgt.memory, scanout.sgt.p2p
        case ImportEntry.PRIME_IMPORT:
            handle = proc.prime_fd_to_handle(col.device, fd)
            m.settle(proc)
            job = proc.gpu_access(handle)
            return job.memory, job.p2p
        case ImportEntry.IOAS_MAP:
            iova = proc.iommufd_map(fd, length=BUFFER_SIZE)
            m.settle(proc)
            dma = proc.iommufd_dma(iova)
            return dma.memory, dma.p2p


def shared_buffer(m: MatrixMachine, proc: Process, name: str) -> tuple[int, DeviceBuffer]:
    """A :data:`BUFFER_SIZE` buffer of the exporter's device memory as a dma-buf fd of
    ``proc``, made the way the exporter declares (``buffer_source``): GEM create + PRIME export
    in the domain meant for sharing, or a range of vfio-pci's memory BAR. The buffer's clear
    job has finished when it returns."""
    driver = m.exporter
    if driver.buffer_source is BufferSource.VFIO_BAR:
        vfio = driver.vfio_device()
        if vfio is None:
            raise ValueError(
                f"{driver.driver_name} exports BAR ranges but registered no vfio_device"
            )
        fd = proc.vfio_dma_buf(GPU, vfio.memory_bar, 0, BUFFER_SIZE)
        return fd, vfio.buffer_of(proc.dmabuf(fd))
    handle = proc.gem_create(GPU, BUFFER_SIZE, driver.shareable_domain, name=name)
    fd = proc.prime_handle_to_fd(handle)
    m.settle(proc)
    return fd, proc.buffer(handle)


MATRIX_CGROUP = "/matrix"
"""The cgroup the matrix process runs in when proposals are on (a pin policy that charges a
cgroup must see one below the root)."""


def install_proposals(m: MatrixMachine, proposals: Sequence[str]) -> Cgroup | None:
    """Switch ``proposals`` (ids of :data:`~pinlab.policy.proposals.PROPOSALS`) on with their
    default settings, on a cgroup tree with the dmem controller (6.14 on); returns the cgroup
    the matrix process runs in (None without proposals). ``ValueError`` for an unknown id or a
    proposal the profile cannot have (``revocable-pins`` before 7.1, the dmem ones before 6.14)."""
    if not proposals:
        return None
    unknown = [p for p in proposals if p not in PROPOSALS]
    if unknown:
        raise ValueError(
            f"unknown proposal {unknown[0]!r} (expected one of {', '.join(PROPOSALS)})"
        )
    kernel = m.kernel
    tree = CgroupTree()
    dmem = install_dmem(kernel, tree) if kernel.profile.dmem else None
    if dmem is not None:
        for bdev in m.ttm_devices():
            dmem.register_device(bdev)
    source = "pinlab matrix --proposal"
    config = parse_policy("".join(f"[proposals.{p}]\n" for p in dict.fromkeys(proposals)), source)
    try:
        apply_policy(config, kernel, tree, dmem, ttm_devices=m.ttm_devices(), source=source)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    return tree.mkdir(MATRIX_CGROUP)


def run_cell(
    exporter: str, importer: str, profile: KernelProfile, proposals: Sequence[str] = ()
) -> Cell:
    """Build the machine, create + export + import + pin + map through the uapi, report.
    ``proposals`` are switched on first (:func:`install_proposals`); a cell they refuse names
    the refusing proposal among its items."""
    if exporter in EXPORTERS and not EXPORTERS[exporter].exists_in(profile):
        return Cell(exporter, importer, f"n/a in {profile.name}", None, None, None, ())
    m = build_machine(exporter, profile)
    col = column(m, importer)
    driver = m.exporter
    cgroup = install_proposals(m, proposals)
    proc = m.system.spawn("matrix")
    if cgroup is not None:
        cgroup.tree.attach(proc, cgroup)
    fd, buf = shared_buffer(m, proc, f"{exporter}-buf")
    try:
        memory, p2p = _import(m, col, proc, fd)
    except KernelError as e:
        stage = error_stage(e)
        cell = Cell(
            exporter,
            importer,
            f"refused {e.errno} at {stage}",
            buf.location,
            None,
            buf.pinned,
            decided_by(driver, col, profile, refused=True)
            + ((f"proposal {e.policy}",) if e.policy else ()),
            stage,
            str(e.errno),
            str(e),
        )
    else:
        location = buf.location
        cell = Cell(
            exporter,
            importer,
            _OUTCOME.get(str(location), f"in {location}"),
            location,
            p2p,
            buf.pinned,
            decided_by(driver, col, profile),
            incidents=len(m.system.detector),
        )
        assert memory == location, f"{exporter}/{importer}: mapped {memory}, buffer in {location}"
    proc.exit()
    return cell


# -- the rules: which checklist items decide a cell -------------------------------------------


def decided_by(
    exporter: ExporterDriver, importer: Column, profile: KernelProfile, *, refused: bool = False
) -> tuple[str, ...]:
    """The checklist items (and sections) that decide ``exporter`` × ``importer`` under
    ``profile``: the importer's path into the core (declared by the importer), what the core
    does for that kind of attachment in this profile family, and the exporter's rule that
    places the buffer (declared by the exporter).

    Written from ``kernel-semantics.md``; ``model`` marks a pinlab position model with no
    upstream item (the nvidia-compute exporter, the APU's always-GTT pin).
    """
    dynamic_e = exporter.dynamic
    path = importer.path
    items = list(importer.items(dynamic_e))
    if path is None:
        return tuple(items)  # refused before anything is imported
    caching = profile.cache_sgt_at_attach

    # what the core adds for dynamic attachments; a static one never has peer2peer (K-9)
    if path is ImportPath.STATIC:
        items.append("K-9")
    elif path is ImportPath.PHYS:
        pass  # never mapped: only the attach, (7.1) the pin and the interconnect (K-109)
    elif not dynamic_e and caching:
        items.append("K-14")  # dynamic A on a static E: mapped (and cached) at attach
    elif dynamic_e:
        items.append("K-34" if caching else "K-26")  # whether a dynamic map pins (MN)
        if profile.family is CoreFamily.REVOKE:
            items.append("K-69")

    # the exporter's rule: where pin (or an unpinned map) puts the buffer
    if path is ImportPath.PHYS and exporter.buffer_source is not BufferSource.VFIO_BAR:
        # iommufd takes VFIO buffers only (K-107); (7.1) it pins before it checks (K-111)
        items.append("K-107")
        if profile.iommufd_dmabuf_pin:
            items += exporter.checklist_items(ImportPath.PINNED, by_pin=True, refused=False)
            items.append("K-111")
        return tuple(dict.fromkeys(items))
    by_pin = placed_by_pin(path, dynamic_e, profile)
    items += exporter.checklist_items(path, by_pin=by_pin, refused=refused)
    return tuple(dict.fromkeys(items))


# -- the matrix ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Matrix:
    """Every cell for one profile."""

    profile: KernelProfile
    cells: tuple[Cell, ...]
    proposals: tuple[str, ...] = ()

    @property
    def exporters(self) -> list[str]:
        """The rows, in order."""
        return list(dict.fromkeys(c.exporter for c in self.cells))

    @property
    def importers(self) -> list[str]:
        """The columns, in order."""
        return list(dict.fromkeys(c.importer for c in self.cells))

    def cell(self, exporter: str, importer: str) -> Cell:
        for c in self.cells:
            if c.exporter == exporter and c.importer == importer:
                return c
        raise KeyError(f"no cell {exporter} × {importer}")

    def notes(self) -> list[str]:
        prof = self.profile
        notes = [
            "machine: AMD Zen host; a PCIe switch with gpu0 (the exporter; the apu is an "
            "integrated function on the root bus, vfio-pci a function bound to vfio-pci "
            "exporting a range of its memory BAR), efa0, mlx5_0 (ODP), mlx5_1 (no ODP) and "
            "gpu1 (gpu-import; display0 is gpu1's display engine); iommufd from 6.19",
            f"buffer: {BUFFER_SIZE // MiB} MiB created in device memory "
            "(xe, i915: placements vram|system, as a shared buffer must be); "
            "'model' = pinlab position model, no upstream checklist item",
        ]
        if self.proposals:
            notes.append(
                f"proposals on (default settings, the process in cgroup {MATRIX_CGROUP}): "
                + ", ".join(self.proposals)
            )
        if prof.move_notify_is_option and not prof.move_notify and prof.pin_at_map:
            notes.append(
                "CONFIG_DMABUF_MOVE_NOTIFY=n: amdgpu pins exported buffers in VRAM from 6.16 "
                "only with it on (K-49); rerun with --move-notify"
            )
        return notes

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile.name,
            "move_notify": self.profile.move_notify,
            "proposals": list(self.proposals),
            "exporters": self.exporters,
            "importers": self.importers,
            "notes": self.notes(),
            "cells": [c.to_json() for c in self.cells],
        }


def column_labels(profile: KernelProfile) -> list[str]:
    """The matrix's columns under ``profile``: the importers of its machine (:func:`columns`)."""
    exporter = next(name for name, cls in EXPORTERS.items() if cls.exists_in(profile))
    return [c.label for c in columns(build_machine(exporter, profile))]


def build_matrix(
    profile: KernelProfile | str = DEFAULT_PROFILE, proposals: Sequence[str] = ()
) -> Matrix:
    """Run every exporter × importer cell under ``profile``, with ``proposals`` on."""
    prof = get_profile(profile) if isinstance(profile, str) else profile
    labels = column_labels(prof)
    cells = tuple(run_cell(e, i, prof, proposals) for e in EXPORTERS for i in labels)
    return Matrix(prof, cells, tuple(dict.fromkeys(proposals)))


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def build_matrix_pair(name: str, proposals: Sequence[str] = ()) -> tuple[Matrix, Matrix | None]:
    """The matrix at the preset's default ``CONFIG_DMABUF_MOVE_NOTIFY`` and, where the option
    exists and is off, the same machine with it on -- the switch that decides amdgpu's VRAM
    pin in 6.16 (K-49) and the dynamic importers' pins (K-26, K-34)."""
    base = build_matrix(matrix_profile(name, False), proposals)
    if not base.profile.move_notify_is_option or base.profile.move_notify:
        return base, None
    return base, build_matrix(matrix_profile(name, True), proposals)


def _key(c: Cell) -> tuple[str, bool | None, bool | None]:
    return c.outcome, c.p2p, c.pinned


def render_matrix(matrix: Matrix, console: Console, alt: Matrix | None = None) -> None:
    """Print the matrix as a rich table followed by its notes.

    With ``alt`` (the same profile with ``CONFIG_DMABUF_MOVE_NOTIFY=y``), a cell whose outcome
    differs shows both: ``<MN=n outcome> | MN=y: <outcome>``.
    """
    prof = matrix.profile
    mn = "y" if prof.move_notify else "n"
    if alt is not None:
        mn = "n; cells that change with =y show both"
    table = Table(
        title=f"dma-buf import + pin + map, kernel {prof.name} (CONFIG_DMABUF_MOVE_NOTIFY={mn})",
        title_justify="left",
    )
    for col in ("exporter", "importer", "outcome", "P2P", "pinned", "decided by"):
        table.add_column(col)
    for i, exporter in enumerate(matrix.exporters):
        if i:
            table.add_section()
        for j, importer in enumerate(matrix.importers):
            c = matrix.cell(exporter, importer)
            style = "red" if c.refused else ("dim" if c.memory is None else None)
            outcome, p2p, pinned = c.outcome, _yes_no(c.p2p), _yes_no(c.pinned)
            if alt is not None:
                a = alt.cell(exporter, importer)
                if _key(a) != _key(c):
                    outcome = f"{c.outcome} | MN=y: {a.outcome}"
                    p2p = f"{_yes_no(c.p2p)} | {_yes_no(a.p2p)}"
                    pinned = f"{_yes_no(c.pinned)} | {_yes_no(a.pinned)}"
                    style = "bold"
            table.add_row(
                exporter if j == 0 else "",
                importer,
                outcome,
                p2p,
                pinned,
                ", ".join(c.items) or "-",
                style=style,
            )
    console.print(table)
    notes = matrix.notes()
    if alt is not None:
        notes = [n for n in notes if not n.startswith("CONFIG_DMABUF_MOVE_NOTIFY=n")]
        notes.append(
            "CONFIG_DMABUF_MOVE_NOTIFY defaults to n; 'MN=y:' shows the outcome with it on "
            "(--move-notify or --no-move-notify prints one setting only)"
        )
    for note in notes:
        console.print(f"  {note}", markup=False, highlight=False)
