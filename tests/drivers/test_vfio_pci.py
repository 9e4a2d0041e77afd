"""vfio-pci's dma-buf exporter of BAR ranges (``pinlab.drivers.vfio_pci``), per profile.

Checks K-98 (creation and its refusals), K-99 (starts revoked without memory decoding), K-100
(attach), K-101 (6.19 pin refused, 7.1 static), K-102 (6.19 MN=n: a dynamic importer's map
fails through pin-on-map), K-103 (map: revoked, P2P, no pin), K-104 (the revoke points),
K-105 (7.1 revoke waits for fences and unmaps), K-106 (un-revoke), K-112 / K-119 (7.1: only
revocable importers attach) and K-120 (an importer that ignores the revoke hangs it), all
through the userspace calls of :mod:`pinlab.uapi`.
"""

from __future__ import annotations

import pytest

from pinlab.drivers.vfio_pci import (
    VFIO_DEVICE_FEATURE_GET,
    VFIO_DEVICE_FEATURE_PROBE,
    VFIO_DEVICE_FEATURE_SET,
    VfioPciDevice,
    VfioRegionDmaRange,
)
from pinlab.kernel.errno import Errno, KernelError, KernelHang
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.profile import get_profile
from pinlab.kernel.umem import IB_ACCESS_ON_DEMAND
from pinlab.report.matrix import (
    ACCESS,
    BUFFER_SIZE,
    DISPLAY,
    EFA,
    GPU,
    GPU_IMPORT,
    MLX5,
    MatrixMachine,
    build_machine,
)
from pinlab.uapi.process import Process

ODP = ACCESS | IB_ACCESS_ON_DEMAND
MiB = 1 << 20


def machine(profile: str = "7.1", **switches: object) -> tuple[MatrixMachine, Process]:
    m = build_machine("vfio-pci", get_profile(profile, **switches))
    return m, m.system.spawn("vmm")


def vdev(m: MatrixMachine) -> VfioPciDevice:
    driver = m.exporter
    assert isinstance(driver, VfioPciDevice)
    return driver


def test_k98_the_feature_exports_bar_ranges_as_one_dmabuf() -> None:
    m, proc = machine("6.19")
    fd = proc.vfio_dma_buf(GPU, 0, 0, 0, ranges=[(0, 4 * MiB), (8 * MiB, 4 * MiB)])
    dmabuf = proc.dmabuf(fd)
    assert dmabuf.size == 8 * MiB
    assert dmabuf.exp_name == "vfio_pci_core"
    priv = vdev(m).buffer_of(dmabuf)
    assert [v.paddr - vdev(m).bar_start(0) for v in priv.phys_vec] == [0, 8 * MiB]
    assert not priv.revoked


@pytest.mark.parametrize(
    ("kwargs", "errno"),
    [
        ({"ranges": []}, Errno.EINVAL),  # nr_ranges == 0
        ({"flags": 1}, Errno.EINVAL),
        ({"feature": VFIO_DEVICE_FEATURE_SET}, Errno.EINVAL),  # not a GET
        ({"region_index": 6}, Errno.ENODEV),  # the ROM
        ({"ranges": [VfioRegionDmaRange(0, 0)]}, Errno.EINVAL),  # length 0
        ({"ranges": [VfioRegionDmaRange(100, 4096)]}, Errno.EINVAL),  # unaligned
        ({"ranges": [VfioRegionDmaRange(1 << 63, 1 << 63)]}, Errno.EINVAL),  # SWIOTLB bit
        ({"ranges": [VfioRegionDmaRange(255 * MiB, 2 * MiB)]}, Errno.EINVAL),  # past the BAR
    ],
)
def test_k98_refusals(kwargs: dict[str, object], errno: Errno) -> None:
    m, _ = machine("6.19")
    args: dict[str, object] = {
        "region_index": 0,
        "ranges": [VfioRegionDmaRange(0, MiB)],
        **kwargs,
    }
    with pytest.raises(KernelError) as e:
        vdev(m).vfio_pci_core_feature_dma_buf(**args)  # type: ignore[arg-type]
    assert e.value.errno is errno


def test_k98_probe_returns_zero_and_an_absent_bar_is_enodev_only_in_7_1() -> None:
    m, _ = machine("7.1")
    probe = VFIO_DEVICE_FEATURE_PROBE | VFIO_DEVICE_FEATURE_GET
    assert vdev(m).vfio_pci_core_feature_dma_buf(0, [], feature=probe) == 0
    with pytest.raises(KernelError) as e:
        vdev(m).vfio_pci_core_feature_dma_buf(2, [VfioRegionDmaRange(0, MiB)])
    assert e.value.errno is Errno.ENODEV
    m, _ = machine("6.19")  # no BAR claim check: the empty BAR has no P2P provider
    with pytest.raises(KernelError) as e:
        vdev(m).vfio_pci_core_feature_dma_buf(2, [VfioRegionDmaRange(0, MiB)])
    assert e.value.errno is Errno.EINVAL


def test_k98_a_device_going_away_refuses_new_exports() -> None:
    m, proc = machine("7.1")
    proc.vfio_open(GPU)
    vdev(m).remove()  # the PCI remove callback at hot-unplug (System.hot_unplug)
    with pytest.raises(KernelError) as e:
        proc.vfio_dma_buf(GPU, 0, 0, MiB)
    assert e.value.errno is Errno.ENODEV


def test_k98_vfio_needs_6_19_and_has_no_gem() -> None:
    with pytest.raises(ValueError, match=r"6\.19"):
        build_machine("vfio-pci", "6.16")
    _m, proc = machine("6.19")
    with pytest.raises(KernelError) as e:
        proc.gem_create(GPU, MiB, "bar0")
    assert e.value.errno is Errno.ENOTTY


def test_k99_a_buffer_made_with_memory_decoding_off_starts_revoked() -> None:
    m, proc = machine("7.1")
    proc.vfio_open(GPU)
    proc.vfio_set_memory(GPU, False)
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    assert vdev(m).buffer_of(proc.dmabuf(fd)).revoked
    with pytest.raises(KernelError) as e:  # K-100: attach to a revoked buffer
        proc.prime_fd_to_handle(GPU_IMPORT, fd)
    assert e.value.errno is Errno.ENODEV


@pytest.mark.parametrize("profile", ["6.19", "7.1"])
def test_k100_a_static_importer_never_attaches(profile: str) -> None:
    _m, proc = machine(profile)
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    with pytest.raises(KernelError) as e:
        proc.set_scanout(DISPLAY, fd)
    assert e.value.errno is Errno.EOPNOTSUPP
    assert e.value.function == "vfio_pci_dma_buf_attach"


def test_k101_6_19_has_a_pin_op_that_refuses_every_pin() -> None:
    m, proc = machine("6.19")
    assert vdev(m).dynamic  # read off the ops table: pin is there
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    with pytest.raises(KernelError) as e:
        proc.ibv_reg_dmabuf_mr(EFA, fd, 0, BUFFER_SIZE, ACCESS)
    assert e.value.errno is Errno.EOPNOTSUPP
    assert e.value.function == "vfio_pci_dma_buf_pin"
    assert proc.dmabuf(fd).attachments == []  # the failed registration detached


def test_k101_k119_7_1_is_static_and_refuses_non_revocable_importers_at_attach() -> None:
    m, proc = machine("7.1")
    assert not vdev(m).dynamic  # no pin op: dma_buf_pin is a no-op (K-20)
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    with pytest.raises(KernelError) as e:  # the default pinned umem has no callback (K-114)
        proc.ibv_reg_dmabuf_mr(EFA, fd, 0, BUFFER_SIZE, ACCESS)
    assert e.value.errno is Errno.EOPNOTSUPP
    assert e.value.function == "vfio_pci_dma_buf_attach"


def test_k119_k112_a_revocable_pinned_mr_attaches_in_7_1_and_dies_for_good_on_revoke() -> None:
    m, proc = machine("7.1")
    efa = m.system.nic(EFA)
    efa.pinned_revoke = lambda mr: None  # irdma-like: the driver's revoke callback (K-115)
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    mr = proc.ibv_reg_dmabuf_mr(EFA, fd, 0, BUFFER_SIZE, ACCESS)
    dma = proc.nic_dma(mr)
    assert dma.p2p and dma.memory == "bar" and dma.incident is None
    proc.vfio_reset(GPU)  # revoke, reset, un-revoke
    assert mr.umem.revoked  # K-106: the revocable pinned umem treats revoke as permanent
    assert proc.dmabuf(fd).attachments[0].importer_priv is mr.umem
    proc.exit()
    assert not m.kernel.warnings


@pytest.mark.parametrize("mn", [False, True])
def test_k102_6_19_a_dynamic_importer_maps_only_with_move_notify(mn: bool) -> None:
    _m, proc = machine("6.19", move_notify=mn)
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    if not mn:  # pin-on-map (K-26) calls the refusing pin
        with pytest.raises(KernelError) as e:
            proc.ibv_reg_dmabuf_mr(MLX5, fd, 0, BUFFER_SIZE, ODP)
            proc.ibv_advise_mr(next(iter(proc.mrs.values())))
        assert e.value.errno is Errno.EOPNOTSUPP
        return
    mr = proc.ibv_reg_dmabuf_mr(MLX5, fd, 0, BUFFER_SIZE, ODP)
    dma = proc.nic_dma(mr)
    assert dma.p2p and dma.memory == "bar"


def test_k103_map_refuses_a_revoked_buffer_and_never_pins_or_moves() -> None:
    m, proc = machine("7.1")
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    handle = proc.prime_fd_to_handle(GPU_IMPORT, fd)
    access = proc.gpu_access(handle)
    assert access.memory == "bar" and access.p2p
    priv = vdev(m).buffer_of(proc.dmabuf(fd))
    assert priv.mappings == 1  # 7.1: one mapping reference per live map (K-105)
    proc.vfio_set_memory(GPU, False)
    assert priv.revoked and priv.mappings == 0  # the importer unmapped in its callback
    with pytest.raises(KernelError) as e:
        proc.gpu_access(handle)
    assert e.value.errno is Errno.ENODEV
    assert e.value.function == "vfio_pci_dma_buf_map"
    proc.vfio_set_memory(GPU, True)  # K-106: un-revoke lets a dynamic importer map again
    assert proc.gpu_access(handle).memory == "bar"


@pytest.mark.parametrize("event", ["reset", "memory-off", "low-power"])
@pytest.mark.parametrize("profile", ["6.19", "7.1"])
def test_k104_revoke_points_invalidate_and_later_maps_see_the_new_epoch(
    event: str, profile: str
) -> None:
    m, proc = machine(profile, **({"move_notify": True} if profile == "6.19" else {}))
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    mr = proc.ibv_reg_dmabuf_mr(MLX5, fd, 0, BUFFER_SIZE, ODP)
    proc.nic_dma(mr)
    priv = vdev(m).buffer_of(proc.dmabuf(fd))
    m.system.vfio_event(GPU, event)
    assert priv.revocations == 1
    if event == "reset":  # revoke, reset, un-revoke (memory decoding stayed on)
        assert not priv.revoked and vdev(m).resets == 1
    else:
        assert priv.revoked
        with pytest.raises(KernelError) as e:  # the fault re-maps: the BAR is gone
            proc.nic_dma(mr)
        assert e.value.errno is Errno.ENODEV
        m.system.vfio_event(GPU, "memory-on" if event == "memory-off" else "resume")
        assert not priv.revoked
    dma = proc.nic_dma(mr)
    assert dma.incident is None and dma.memory == "bar"


@pytest.mark.parametrize("profile", ["6.19", "7.1"])
def test_k104_close_revokes_for_good_and_orphans_the_buffer(profile: str) -> None:
    m, proc = machine(profile)
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    proc.vfio_close(GPU)
    priv = vdev(m).buffer_of(proc.dmabuf(fd))
    assert priv.vdev is None and priv.revoked and priv.revoked_for_good
    assert vdev(m).owner is None and vdev(m).dmabufs == []
    with pytest.raises(KernelError) as e:
        proc.iommufd_map(fd)
    assert e.value.errno is Errno.ENODEV
    proc.close(fd)
    proc.exit()
    assert not m.kernel.warnings


def test_k104_the_device_fd_is_exclusive() -> None:
    m, proc = machine("6.19")
    proc.vfio_open(GPU)
    other = m.system.spawn("other")
    with pytest.raises(KernelError) as e:
        other.vfio_open(GPU)
    assert e.value.errno is Errno.EBUSY
    proc.exit()  # the exit closes the device fd
    other.vfio_open(GPU)


def test_k105_k120_an_importer_that_ignores_the_revoke_blocks_it_for_good() -> None:
    m = build_machine("vfio-pci", "7.1", broken_mlx5=True)
    proc = m.system.spawn("vmm")
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    mr = proc.ibv_reg_dmabuf_mr(MLX5, fd, 0, BUFFER_SIZE, ODP)
    proc.nic_dma(mr)
    with pytest.raises(KernelHang):
        proc.vfio_reset(GPU)
    assert any("vfio_pci_dma_buf_move" in line for line in m.kernel.hung_tasks)


def test_k105_6_19_does_not_wait_for_unmaps() -> None:
    m = build_machine("vfio-pci", get_profile("6.19", move_notify=True), broken_mlx5=True)
    proc = m.system.spawn("vmm")
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    mr = proc.ibv_reg_dmabuf_mr(MLX5, fd, 0, BUFFER_SIZE, ODP)
    proc.nic_dma(mr)
    proc.vfio_set_memory(GPU, False)  # a plain dma_buf_move_notify: returns at once
    assert not m.kernel.hung_tasks
    assert proc.nic_dma(mr).incident is not None  # the broken importer used the old mapping


def test_k104_next_has_the_rfc_revoke_ioctl_and_7_1_has_not() -> None:
    m, proc = machine("7.1")
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    with pytest.raises(KernelError) as e:
        proc.vfio_dmabuf_revoke(GPU, fd)
    assert e.value.errno is Errno.ENOTTY
    m, proc = machine("next")
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    proc.vfio_dmabuf_revoke(GPU, fd)
    priv = vdev(m).buffer_of(proc.dmabuf(fd))
    proc.vfio_reset(GPU)
    assert priv.revoked and priv.revoked_for_good  # the reset's un-revoke leaves it alone


def test_exit_releases_everything() -> None:
    """Nothing leaks when the VMM exits with a buffer mapped by every kind of importer."""
    m, proc = machine("7.1")
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    proc.ibv_reg_dmabuf_mr(MLX5, fd, 0, BUFFER_SIZE, ODP)
    proc.gpu_access(proc.prime_fd_to_handle(GPU_IMPORT, fd))
    proc.iommufd_dma(proc.iommufd_map(fd))
    dmabuf = proc.dmabuf(fd)
    proc.exit()
    m.settle()
    assert dmabuf.released
    assert not m.kernel.warnings and not m.kernel.hung_tasks
    assert isinstance(m.kernel, Kernel)


def test_k113_one_revoke_and_un_revoke_seen_by_every_kind_of_importer() -> None:
    """7.1: the same invalidation ends or pauses each importer according to its contract --
    the ODP MR re-faults and the GPU import re-maps after the un-revoke; the revocable pinned
    MR and iommufd stay revoked for good; the default pinned MR never attached."""
    m, proc = machine("7.1")
    m.system.nic(EFA).pinned_revoke = lambda mr: None
    fd = proc.vfio_dma_buf(GPU, 0, 0, BUFFER_SIZE)
    odp = proc.ibv_reg_dmabuf_mr(MLX5, fd, 0, BUFFER_SIZE, ODP)
    pinned = proc.ibv_reg_dmabuf_mr(EFA, fd, 0, BUFFER_SIZE, ACCESS)
    handle = proc.prime_fd_to_handle(GPU_IMPORT, fd)
    iova = proc.iommufd_map(fd)
    for access in (lambda: proc.nic_dma(odp), lambda: proc.gpu_access(handle)):
        access()
    proc.iommufd_dma(iova)
    proc.vfio_set_memory(GPU, False)
    proc.vfio_set_memory(GPU, True)
    assert proc.nic_dma(odp).memory == "bar"
    assert proc.gpu_access(handle).memory == "bar"
    assert pinned.umem.revoked
    with pytest.raises(KernelError) as e:
        proc.iommufd_dma(iova)
    assert e.value.errno is Errno.EFAULT
    proc.exit()
    assert not m.kernel.warnings and not m.kernel.hung_tasks


def test_only_a_driver_that_registered_a_vfio_device_opens_as_one() -> None:
    """``vfio_device_open`` finds the ``vfio_device`` the bound driver registered
    (``ExporterDriver.vfio_device``): none for amdgpu, so ``-ENODEV``."""
    m = build_machine("amdgpu", get_profile("6.19"))
    assert m.exporter.vfio_device() is None
    with pytest.raises(KernelError) as e:
        m.system.spawn("vmm").vfio_open(GPU)
    assert e.value.errno is Errno.ENODEV
    v, _ = machine("6.19")
    assert v.exporter.vfio_device() is vdev(v)
