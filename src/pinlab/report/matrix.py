"""``pinlab matrix``: every exporter × importer pair, imported, pinned and mapped for real.

For each pair the matrix builds a fresh small machine, lets one process create a buffer in the
exporter's device memory, export it as a dma-buf fd and hand it to the importer through the
userspace calls (:mod:`pinlab.uapi`), then reports what the kernel model did:

* **outcome** -- where the memory ended up: ``device memory in place``, ``migrated to GTT``,
  ``migrated to system memory``, or ``refused -EXXX at <stage>`` (``registration``, ``attach``,
  ``pin`` or ``map``: the outermost dma-buf core step the error came out of);
* **P2P** -- whether the importer's mapping is a peer-to-peer (BAR) mapping;
* **pinned** -- whether the buffer may not move afterwards;
* **decided by** -- the checklist items (``kernel-semantics.md`` §12) and sections that decide
  the outcome for this exporter, importer and profile family (:func:`decided_by`). This column
  is a rule table written from the specification, not a trace; the outcome columns are measured.

The machine (:func:`build_machine`): an AMD Zen host (host-bridge P2P allowed, K-83), one root
port with a PCIe switch below it; on the switch the exporting GPU (``gpu0``), an EFA-like NIC
(``efa0``), an mlx5-like NIC with ODP (``mlx5_0``), one without ODP (``mlx5_1``) and a second,
amdgpu-like GPU (``gpu1``) that imports buffers (``gpu-import``) and owns the display engine
(``display0``, a device below gpu1's PCI function). The display is on the *second* GPU because
that is where dma-buf scanout happens in practice (PRIME: one GPU renders, another scans out);
a display block of the exporting GPU itself would use the buffer directly, without dma-buf.
The ``apu`` exporter is an integrated GPU, so it sits on the root bus (an RCiEP) instead of the
switch; on a Zen host its P2P path through the host bridge is allowed all the same.

Buffers are 16 MiB in device memory. xe and i915 buffers are created with the placements
``vram|system``, as userspace must create a buffer it wants to share: a VRAM-only xe BO cannot
be pinned in TT (``-EINVAL``, K-53) and an LMEM-only i915 object cannot be attached at all
(``-EOPNOTSUPP``, K-54).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from pinlab.drivers.amdgpu import AmdgpuDevice
from pinlab.drivers.apu import AmdgpuApuDevice
from pinlab.drivers.base import ExporterDriver
from pinlab.drivers.display import DisplayEngine
from pinlab.drivers.efa import EfaDevice
from pinlab.drivers.gpu_import import GpuImporter
from pinlab.drivers.habanalabs import HabanalabsDevice
from pinlab.drivers.i915 import I915Device
from pinlab.drivers.mlx5 import Mlx5Device
from pinlab.drivers.nvidia_compute import NvidiaComputeDevice
from pinlab.drivers.xe import XeDevice
from pinlab.kernel.device import Device
from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci import PCI_VENDOR_ID_AMD, X86_VENDOR_AMD, PciDev, PciTopology
from pinlab.kernel.profile import (
    DEFAULT_PROFILE,
    CoreFamily,
    KernelProfile,
    VramPinRule,
    get_profile,
)
from pinlab.kernel.ttm import TtmDevice
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
)
from pinlab.uapi.process import Process
from pinlab.uapi.system import System

MiB = 1 << 20
GiB = 1 << 30

EXPORTERS = ("amdgpu", "apu", "habanalabs", "nvidia-compute", "xe", "i915")
"""Matrix rows, in display order."""
IMPORTERS = ("efa", "mlx5-odp", "mlx5-no-odp", "display", "gpu-import")
"""Matrix columns: EFA (pinned), mlx5 with ODP (ON_DEMAND), an mlx5 without ODP asked for
ON_DEMAND, a display engine (static importer), a second GPU (dynamic importer)."""

DYNAMIC_EXPORTERS = frozenset({"amdgpu", "apu", "nvidia-compute", "xe"})

# device names on the matrix machine
GPU = "gpu0"
EFA = "efa0"
MLX5 = "mlx5_0"
MLX5_NO_ODP = "mlx5_1"
DISPLAY = "display0"
GPU_IMPORT = "gpu1"

BUFFER_SIZE = 16 * MiB
DEVICE_MEMORY = 256 * MiB
BUFFER_DOMAIN = types.MappingProxyType({"xe": "vram|system", "i915": "vram|system"})
"""``create_buffer`` domain per exporter (default ``"vram"``), see the module docstring."""

ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE

_OUTCOME = {
    "vram": "device memory in place",
    "gtt": "migrated to GTT",
    "system": "migrated to system memory",
}


# -- the machine -----------------------------------------------------------------------------


@dataclass
class MatrixMachine:
    """One matrix machine: the userspace view (:attr:`system`) and the drivers in it."""

    system: System
    exporter: ExporterDriver
    importer_gpu: AmdgpuDevice

    @property
    def kernel(self) -> Kernel:
        return self.system.kernel

    def ttm_devices(self) -> list[TtmDevice]:
        """Every TTM device on the machine (their copy queues hold the pending moves)."""
        out = [self.importer_gpu.bdev]
        bdev = getattr(self.exporter, "bdev", None)
        if isinstance(bdev, TtmDevice):
            out.insert(0, bdev)
        return out

    def settle(self, *procs: Process) -> int:
        """Let time pass: every queued copy finishes (its fence signals) and the processes'
        collected waits are dropped. Returns the number of copies run."""
        n = sum(bdev.run_copies() for bdev in self.ttm_devices())
        for proc in procs:
            proc.take_waits()
        self.kernel.take_waits()
        return n


def _exporter(name: str, kernel: Kernel, pdev: PciDev) -> ExporterDriver:
    vram, gtt, system = DEVICE_MEMORY, 1 * GiB, 2 * GiB
    factories: dict[str, Callable[[], ExporterDriver]] = {
        "amdgpu": lambda: AmdgpuDevice(
            kernel, pdev, vram_size=vram, gtt_size=gtt, system_size=system
        ),
        "apu": lambda: AmdgpuApuDevice(
            kernel, pdev, vram_size=vram, gtt_size=gtt, system_size=system
        ),
        "habanalabs": lambda: HabanalabsDevice(kernel, pdev, hbm_size=vram),
        "nvidia-compute": lambda: NvidiaComputeDevice(
            kernel, pdev, vram_size=vram, gtt_size=gtt, system_size=system
        ),
        "xe": lambda: XeDevice(kernel, pdev, vram_size=vram, gtt_size=gtt, system_size=system),
        "i915": lambda: I915Device(kernel, pdev, lmem_size=vram, system_size=system),
    }
    try:
        factory = factories[name]
    except KeyError:
        raise ValueError(
            f"unknown exporter {name!r} (expected one of {', '.join(EXPORTERS)})"
        ) from None
    return factory()


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
    incidents. Raises ``ValueError`` for an exporter the profile does not have (xe before 6.8).
    """
    prof = get_profile(profile) if isinstance(profile, str) else profile
    # the profile's CONFIG_PCI_P2PDMA switch is a property of the PCI topology in pinlab.kernel
    topo = PciTopology(cpu_vendor=X86_VENDOR_AMD, cpu_family=0x19, p2pdma_enabled=prof.pci_p2pdma)
    hb = topo.add_host_bridge(PCI_VENDOR_ID_AMD, 0x1480)
    switch = hb.add_root_port().add_switch(5)
    ports = switch.downstream_ports
    if exporter == "apu":
        gpu_fn = hb.add_endpoint(label="gpu0")  # the integrated GPU: an RCiEP
    else:
        gpu_fn = ports[0].add_endpoint(label="gpu0")
    efa_fn = ports[1].add_endpoint(label="nic0")
    mlx5_fn = ports[2].add_endpoint(label="nic1")
    mlx5_no_odp_fn = ports[3].add_endpoint(label="nic2")
    gpu1_fn = ports[4].add_endpoint(label="gpu1")

    kernel = Kernel(prof)
    system = System(kernel, clock=clock)
    driver = _exporter(exporter, kernel, gpu_fn)
    system.add_exporter(GPU, driver)
    system.add_nic(EFA, EfaDevice(kernel, efa_fn, name="efa_0"))
    system.add_nic(MLX5, Mlx5Device(kernel, mlx5_fn, name="mlx5_0", ignore_move_notify=broken_mlx5))
    system.add_nic(MLX5_NO_ODP, Mlx5Device(kernel, mlx5_no_odp_fn, name="mlx5_1", odp=False))
    gpu1 = AmdgpuDevice(
        kernel, gpu1_fn, vram_size=DEVICE_MEMORY, gtt_size=1 * GiB, system_size=2 * GiB
    )
    system.add_gpu_importer(GPU_IMPORT, GpuImporter(gpu1))
    system.add_display(DISPLAY, DisplayEngine(kernel, Device("display0", gpu1_fn)))
    return MatrixMachine(system, driver, gpu1)


def matrix_profile(name: str = DEFAULT_PROFILE, move_notify: bool = False) -> KernelProfile:
    """Preset ``name``, with ``CONFIG_DMABUF_MOVE_NOTIFY=y`` when ``move_notify`` (7.1 has it
    always on). ``ValueError`` for an unknown preset."""
    prof = get_profile(name)
    if move_notify and prof.move_notify_is_option:
        prof = prof.with_(move_notify=True)
    return prof


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


def _import(m: MatrixMachine, importer: str, proc: Process, fd: int) -> tuple[str, bool]:
    """Import ``fd`` through the uapi, let the copies finish, and touch the buffer once from
    the importing device. Returns (memory, p2p) of the importer's mapping."""
    if importer in ("efa", "mlx5-odp", "mlx5-no-odp"):
        nic, access = {
            "efa": (EFA, ACCESS),
            "mlx5-odp": (MLX5, ACCESS | IB_ACCESS_ON_DEMAND),
            "mlx5-no-odp": (MLX5_NO_ODP, ACCESS | IB_ACCESS_ON_DEMAND),
        }[importer]
        mr = proc.ibv_reg_dmabuf_mr(nic, fd, 0, BUFFER_SIZE, access)
        m.settle(proc)
        result = proc.nic_dma(mr)
        return result.memory, result.p2p
    if importer == "display":
        scanout = proc.set_scanout(DISPLAY, fd)
        m.settle(proc)
        m.system.display(DISPLAY).scan_frame(scanout)
        return scanout.sgt.memory, scanout.sgt.p2p
    if importer == "gpu-import":
        handle = proc.prime_fd_to_handle(GPU_IMPORT, fd)
        m.settle(proc)
        access_ = proc.gpu_access(handle)
        return access_.memory, access_.p2p
    raise ValueError(f"unknown importer {importer!r} (expected one of {', '.join(IMPORTERS)})")


def run_cell(exporter: str, importer: str, profile: KernelProfile) -> Cell:
    """Build the machine, create + export + import + pin + map through the uapi, report."""
    try:
        m = build_machine(exporter, profile)
    except ValueError:
        if exporter == "xe" and not profile.xe_available:
            return Cell(exporter, importer, f"n/a in {profile.name}", None, None, None, ())
        raise
    proc = m.system.spawn("matrix")
    handle = proc.gem_create(
        GPU, BUFFER_SIZE, BUFFER_DOMAIN.get(exporter, "vram"), name=f"{exporter}-buf"
    )
    fd = proc.prime_handle_to_fd(handle)
    m.settle(proc)  # the buffer's clear job
    buf = proc.buffer(handle)
    try:
        memory, p2p = _import(m, importer, proc, fd)
    except KernelError as e:
        stage = error_stage(e)
        cell = Cell(
            exporter,
            importer,
            f"refused {e.errno} at {stage}",
            buf.location,
            None,
            buf.pinned,
            decided_by(exporter, importer, profile, refused=True),
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
            decided_by(exporter, importer, profile),
            incidents=len(m.system.detector),
        )
        assert memory == location, f"{exporter}/{importer}: mapped {memory}, buffer in {location}"
    proc.exit()
    return cell


# -- the rules: which checklist items decide a cell -------------------------------------------


def decided_by(
    exporter: str, importer: str, profile: KernelProfile, *, refused: bool = False
) -> tuple[str, ...]:
    """The checklist items (and sections) that decide ``exporter`` × ``importer`` under
    ``profile``: the importer's path into the core, what the core does for that kind of
    attachment in this profile family, and the exporter rule that places the buffer.

    Written from ``kernel-semantics.md``; ``model`` marks a pinlab position model with no
    upstream item (the nvidia-compute exporter, the APU's always-GTT pin).
    """
    if importer == "mlx5-no-odp":
        return ("§6",)  # -EOPNOTSUPP before anything is imported
    caching = profile.cache_sgt_at_attach
    dynamic_e = exporter in DYNAMIC_EXPORTERS
    map_pins = dynamic_e and not profile.move_notify  # K-34 / K-26 for a dynamic importer
    items: list[str] = []

    # how the importer reaches the core
    path = {"efa": "pin", "mlx5-odp": "dynamic", "gpu-import": "dynamic", "display": "static"}[
        importer
    ]
    if importer == "efa":
        items += ["K-45"] if dynamic_e else ["K-45", "K-93", "K-20"]
    elif importer == "mlx5-odp":
        items += ["K-43", "K-42"]
    elif importer == "display":
        if dynamic_e:
            items += ["K-13"] if caching else ["K-25"]
        else:
            items += ["K-97"]

    # what the core adds for dynamic attachments; a static one never has peer2peer (K-9)
    if path == "static":
        items.append("K-9")
    elif not dynamic_e and caching:
        items.append("K-14")  # dynamic A on a static E: mapped (and cached) at attach
    elif dynamic_e:
        items.append("K-34" if caching else "K-26")  # whether a dynamic map pins (MN)
        if profile.family is CoreFamily.REVOKE:
            items.append("K-69")

    # the exporter's rule: where pin (or an unpinned map) puts the buffer
    placed_by = "pin" if path in ("pin", "static") or map_pins else "map"
    if exporter == "amdgpu":
        if path == "dynamic":
            items.append("K-77")
        if path != "static":
            items.append("K-48")
        items.append("K-49" if placed_by == "pin" else "K-51")
    elif exporter == "apu":
        items += ["K-49", "model"] if placed_by == "pin" else ["K-51"]
    elif exporter == "habanalabs":
        items.append("K-52")
        if refused and path != "static":
            items.append("K-75")
    elif exporter == "nvidia-compute":
        items.append("model")
    elif exporter == "xe":
        items.append("K-53" if placed_by == "pin" else "K-81")
        if placed_by == "pin" and profile.xe_vram_pin is not VramPinRule.NEVER:
            items.append("§7.3")  # 7.1: VRAM when every attachment is P2P
    elif exporter == "i915":
        items.append("K-54")
    return tuple(dict.fromkeys(items))


# -- the matrix ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Matrix:
    """Every cell for one profile."""

    profile: KernelProfile
    cells: tuple[Cell, ...]

    def cell(self, exporter: str, importer: str) -> Cell:
        for c in self.cells:
            if c.exporter == exporter and c.importer == importer:
                return c
        raise KeyError(f"no cell {exporter} × {importer}")

    def notes(self) -> list[str]:
        prof = self.profile
        notes = [
            "machine: AMD Zen host; a PCIe switch with gpu0 (the exporter; the apu is an "
            "integrated function on the root bus), efa0, mlx5_0 (ODP), mlx5_1 (no ODP) and "
            "gpu1 (gpu-import; display0 is gpu1's display engine)",
            f"buffer: {BUFFER_SIZE // MiB} MiB created in device memory "
            "(xe, i915: placements vram|system, as a shared buffer must be); "
            "'model' = pinlab position model, no upstream checklist item",
        ]
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
            "exporters": list(EXPORTERS),
            "importers": list(IMPORTERS),
            "notes": self.notes(),
            "cells": [c.to_json() for c in self.cells],
        }


def build_matrix(profile: KernelProfile | str = DEFAULT_PROFILE) -> Matrix:
    """Run every exporter × importer cell under ``profile``."""
    prof = get_profile(profile) if isinstance(profile, str) else profile
    cells = tuple(run_cell(e, i, prof) for e in EXPORTERS for i in IMPORTERS)
    return Matrix(prof, cells)


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def build_matrix_pair(name: str) -> tuple[Matrix, Matrix | None]:
    """The matrix at the preset's default ``CONFIG_DMABUF_MOVE_NOTIFY`` and, where the option
    exists and is off, the same machine with it on -- the switch that decides amdgpu's VRAM
    pin in 6.16 (K-49) and the dynamic importers' pins (K-26, K-34)."""
    base = build_matrix(matrix_profile(name, False))
    if not base.profile.move_notify_is_option or base.profile.move_notify:
        return base, None
    return base, build_matrix(matrix_profile(name, True))


def _key(c: Cell) -> tuple[str, bool | None, bool | None]:
    return c.outcome, c.p2p, c.pinned


def differing(matrix: Matrix, alt: Matrix) -> list[tuple[Cell, Cell]]:
    """Cells whose outcome, P2P or pin state changes between two matrices of one machine."""
    pairs = [(c, alt.cell(c.exporter, c.importer)) for c in matrix.cells]
    return [(c, a) for c, a in pairs if _key(c) != _key(a)]


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
    for i, exporter in enumerate(EXPORTERS):
        if i:
            table.add_section()
        for j, importer in enumerate(IMPORTERS):
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
