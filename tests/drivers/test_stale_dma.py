"""The stale-DMA detector (``design.md`` principle 6; K-39, K-41, K-64): every device access --
NIC DMA, scanout, GPU job -- goes through the importer's current mapping and is checked.

* Every upstream-correct exporter × importer combination, under every profile (5.16, 6.12,
  6.14, 6.16, 6.16 with MOVE_NOTIFY, 7.1), driven through imports, accesses, VRAM pressure that
  evicts whatever may move, and re-accesses -- with the copy fences signalled and the waits
  drained before each access, as a correct simulator does -- gives zero incidents.
* The deliberately broken importer (an mlx5 that ignores ``move_notify``) gives ``stale``
  incidents stamped with time, pid, device and buffer, wherever the buffer can move under it.
* An access that does not wait for the move's KERNEL fence is an ``unfenced`` incident.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from pinlab.drivers import EXPORTERS as ALL_EXPORTERS
from pinlab.drivers.base import BufferSource
from pinlab.drivers.mlx5 import Mlx5Device
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.profile import KernelProfile, get_profile
from pinlab.kernel.umem import IB_ACCESS_LOCAL_WRITE, IB_ACCESS_ON_DEMAND, IB_ACCESS_REMOTE_READ
from pinlab.report.matrix import (
    BUFFER_SIZE,
    DEVICE_MEMORY,
    DISPLAY,
    EFA,
    GPU,
    GPU_IMPORT,
    MLX5,
    MatrixMachine,
    build_machine,
)
from pinlab.uapi.process import Process

# vfio-pci exports BAR ranges, not GEM buffers: its lifecycle is tested in
# tests/drivers/test_vfio_pci.py
EXPORTERS = [e for e, cls in ALL_EXPORTERS.items() if cls.buffer_source is BufferSource.GEM]
ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ
PROFILES: dict[str, KernelProfile] = {
    "5.16": get_profile("5.16"),
    "6.12": get_profile("6.12"),
    "6.14": get_profile("6.14"),
    "6.16": get_profile("6.16"),
    "6.16+MN": get_profile("6.16", move_notify=True),
    "7.1": get_profile("7.1"),
}
IMPORTERS = ("efa", "mlx5-odp", "mlx5-pinned", "display", "gpu-import")
PRESSURE = DEVICE_MEMORY - BUFFER_SIZE // 2  # fits only once the shared buffer has left


def start(m: MatrixMachine, importer: str, proc: Process, fd: int) -> Callable[[], object]:
    """Import ``fd`` with ``importer``; return the access the device makes each step."""
    if importer in ("efa", "mlx5-odp", "mlx5-pinned"):
        nic = EFA if importer == "efa" else MLX5
        access = ACCESS | (IB_ACCESS_ON_DEMAND if importer == "mlx5-odp" else 0)
        mr = proc.ibv_reg_dmabuf_mr(nic, fd, 0, BUFFER_SIZE, access)
        return lambda: proc.nic_dma(mr, write=True)
    if importer == "display":
        scanout = proc.set_scanout(DISPLAY, fd)
        return lambda: m.system.display(DISPLAY).scan_frame(scanout)
    handle = proc.prime_fd_to_handle(GPU_IMPORT, fd)
    return lambda: proc.gpu_access(handle)


def drive(m: MatrixMachine, importer: str, rounds: int = 2) -> tuple[Process, bool, bool]:
    """Create, export and import a buffer, then rounds of access / VRAM pressure / access /
    release the pressure / access, letting the copies finish before every access. Returns
    the process (exited), whether the import was refused (upstream refusals are correct
    behaviour, not incidents) and whether the imported buffer was left movable in device
    memory (unpinned in VRAM), so that the pressure had to move it."""
    proc = m.system.spawn("app")
    handle = proc.gem_create(GPU, BUFFER_SIZE, m.exporter.shareable_domain)
    fd = proc.prime_handle_to_fd(handle)
    m.settle(proc)
    try:
        access = start(m, importer, proc, fd)
    except KernelError:
        proc.exit()
        return proc, True, False
    buf = proc.buffer(handle)
    movable = False
    hog = m.system.spawn("hog")
    for n in range(rounds):
        m.settle(proc, hog)
        access()
        if n == 0:  # a GPU import maps at its first access
            movable = buf.location == "vram" and not buf.pinned
        try:
            pressure: int | None = hog.gem_create(GPU, PRESSURE, "vram")
        except KernelError as e:
            assert e.errno is Errno.ENOMEM  # everything left in device memory is pinned
            pressure = None
        m.settle(proc, hog)
        access()
        if pressure is not None:
            hog.gem_close(pressure)
        m.settle(proc, hog)
        access()
    hog.exit()
    proc.exit()
    return proc, False, movable


CASES = [
    pytest.param(e, i, p, id=f"{e}-{i}-{p}")
    for e, i, p in itertools.product(EXPORTERS, IMPORTERS, PROFILES)
    if not (e == "xe" and p == "5.16")  # xe entered mainline in ≈6.8
]


@pytest.mark.parametrize(("exporter", "importer", "profile"), CASES)
def test_upstream_correct_combinations_have_zero_incidents(
    exporter: str, importer: str, profile: str
) -> None:
    """Zero stale or unfenced accesses for every correct exporter × importer × profile; where
    the shared buffer was left unpinned in device memory the pressure really moved it (so the
    zero is earned), and everything is released at the end."""
    m = build_machine(exporter, PROFILES[profile])
    _proc, refused, movable = drive(m, importer)
    detector = m.system.detector
    assert detector.incidents == []
    if refused:
        assert (exporter, importer) == ("habanalabs", "display")  # K-52: -EPERM at map
        return
    assert detector.accesses >= 6
    if movable:
        assert getattr(m.exporter, "move_notifies", 0) >= 1
    assert not list(m.kernel.dma_bufs()) and not m.kernel.leaks
    for region in m.exporter.regions():
        assert region.used == region.pinned == 0, region


@pytest.mark.parametrize("exporter", ["amdgpu", "apu", "nvidia-compute", "xe"])
@pytest.mark.parametrize("profile", ["6.16+MN", "7.1"])
def test_odp_imports_really_move_under_pressure(exporter: str, profile: str) -> None:
    """With MOVE_NOTIFY on an unpinned ODP mapping stays in device memory (K-77), so the
    pressure evicts it: move_notify zaps the MR (K-41) and the next access faults (K-42),
    re-mapping where the buffer now is (amdgpu keeps a compatible GTT placement afterwards;
    nvidia-compute moves it back to device memory, to be evicted again)."""
    m = build_machine(exporter, PROFILES[profile])
    _proc, _refused, movable = drive(m, "mlx5-odp")
    nic = m.system.nic(MLX5)
    assert isinstance(nic, Mlx5Device)
    assert movable and nic.invalidations == nic.faults >= 1
    assert m.system.detector.incidents == []


# -- the broken importer -------------------------------------------------------------------


@pytest.mark.parametrize("exporter", ["amdgpu", "apu", "nvidia-compute", "xe"])
@pytest.mark.parametrize("profile", ["6.16+MN", "7.1"])
def test_importer_ignoring_move_notify_is_caught_as_stale(exporter: str, profile: str) -> None:
    """The negative control: an mlx5 that ignores ``move_notify`` keeps DMAing through its
    old mapping after the eviction; each such access is a ``stale`` incident carrying the
    time, the process, the device and the buffer."""
    ticks = itertools.count(1)
    m = build_machine(exporter, PROFILES[profile], broken_mlx5=True, clock=lambda: next(ticks))
    proc, _refused, _movable = drive(m, "mlx5-odp")
    incidents = m.system.detector.incidents
    assert incidents and {i.kind for i in incidents} == {"stale"}
    first = incidents[0]
    assert first.pid == proc.pid and first.device == "mlx5_0"
    assert first.buffer.startswith("app-") and "epoch" in first.detail
    assert first.time > 0 and [i.time for i in incidents] == sorted(i.time for i in incidents)


@pytest.mark.parametrize("profile", ["5.16", "6.12", "6.14", "6.16"])
def test_broken_importer_is_harmless_while_the_core_pins(profile: str) -> None:
    """With MOVE_NOTIFY off the core pins every dynamic mapping (K-34, K-26): the buffer
    cannot move, so even the broken importer never DMAs stale -- the stability camp's point."""
    m = build_machine("amdgpu", PROFILES[profile], broken_mlx5=True)
    drive(m, "mlx5-odp")
    assert m.system.detector.incidents == []


# -- unfenced accesses ---------------------------------------------------------------------


@pytest.mark.parametrize("importer", ["efa", "display"])
def test_access_before_the_move_fence_signals_is_unfenced(importer: str) -> None:
    """K-64: the pin migrated the buffer (VRAM → GTT, 6.12) with a copy whose KERNEL fence the
    kernel waited for on the importer's behalf; a device access before it signals is an
    ``unfenced`` incident, the same access after it is clean."""
    m = build_machine("amdgpu", "6.12")
    proc = m.system.spawn("app")
    fd = proc.prime_handle_to_fd(proc.gem_create(GPU, BUFFER_SIZE, "vram"))
    m.settle(proc)
    access = start(m, importer, proc, fd)
    assert len(proc.take_waits()) == 1  # the migration the import waited for
    access()
    (incident,) = m.system.detector.incidents
    assert incident.kind == "unfenced" and "KERNEL fence" in incident.detail
    assert incident.pid == proc.pid and incident.device == (
        "efa0" if importer == "efa" else "display0"
    )
    m.settle(proc)
    access()
    assert len(m.system.detector.incidents) == 1
    proc.exit()
