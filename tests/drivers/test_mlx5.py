"""mlx5-like ODP importer (``kernel-semantics.md`` §6, §10.2): K-39, K-41, K-42, K-43, K-44,
K-77 and K-92 through the NIC model; fault counting, ``advise_mr`` prefetch, ``-EOPNOTSUPP``
for ON_DEMAND on a NIC without ODP, and the pinned path without ON_DEMAND."""

from __future__ import annotations

from typing import Any

import pytest

from pinlab.drivers import IMPORTERS
from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuDevice
from pinlab.drivers.mlx5 import Mlx5Device
from pinlab.drivers.rdma import MemoryRegion
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaDataDirection,
    SgTable,
    dma_buf_is_dynamic,
)
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import DeferredWaiter
from pinlab.kernel.pci import PciDev, find_parent_pci_dev
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_validate
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_MW_BIND,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_READ,
    ib_umem_dmabuf_map_pages,
    ib_umem_dmabuf_revoke,
    ib_umem_num_pages,
)
from tests.drivers.machine import GiB, Machine, MiB, make_machine, profile_mn

ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ
ODP = ACCESS | IB_ACCESS_ON_DEMAND
SIZE = 8 * MiB
MN_ON = [("5.16", True), ("6.12", True), ("6.14", True), ("6.16", True), ("7.1", True)]
MN_OFF = [("5.16", False), ("6.12", False), ("6.14", False), ("6.16", False)]


class ZeroWaiter:
    """A fence waiter whose waits time out (``dma_resv_wait_timeout`` returns 0)."""

    def wait(self, fences: Any, *, intr: bool, timeout: int | None) -> int:
        return 0


def nic_fn(dev: Any) -> PciDev:
    pdev = find_parent_pci_dev(dev)
    assert pdev is not None
    return pdev


def setup(
    profile: str = "6.16", mn: bool = True, **nic_kw: Any
) -> tuple[Machine, AmdgpuDevice, Mlx5Device]:
    m = make_machine(profile_mn(profile, mn))
    gpu = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB, gtt_size=512 * MiB, system_size=GiB)
    return m, gpu, Mlx5Device(m.kernel, nic_fn(m.nic), **nic_kw)


def exported(m: Machine, gpu: AmdgpuDevice, settle: bool = True) -> tuple[AmdgpuBo, DmaBuf, int]:
    bo = gpu.create_buffer(SIZE, "vram")
    dmabuf = gpu.export(bo)
    fd = m.fd(dmabuf)
    if settle:
        gpu.bdev.run_copies()
        m.kernel.take_waits()
    return bo, dmabuf, fd


def reg(nic: Mlx5Device, m: Machine, fd: int, access: int = ODP) -> MemoryRegion:
    return nic.reg_dmabuf_mr(fd, 0, SIZE, access, files=m.files, pid=7)


def evict(bo: AmdgpuBo, where: TtmMemType = TtmMemType.TT) -> None:
    """The exporter moves the buffer (what eviction under VRAM pressure does)."""
    with bo.tbo.resv:
        ttm_bo_validate(bo.tbo, (TtmPlace(where),))


def test_registered_as_mlx5() -> None:
    assert IMPORTERS["mlx5"] is Mlx5Device


# -- registration: K-43, K-42, K-77 ----------------------------------------------------------


@pytest.mark.parametrize(("profile", "mn"), MN_ON)
def test_k43_k42_10_2_odp_registration_imports_dynamically_and_faults_in(
    profile: str, mn: bool
) -> None:
    """§6, §10.2, K-43, K-42: an ON_DEMAND registration imports with ``ib_umem_dmabuf_get`` (a
    dynamic attachment with allow_peer2peer, nothing pinned) and the first fault-in maps the
    whole MR; that initial fault-in is not counted as a fault. With MN on the unpinned P2P map
    leaves the buffer in VRAM (K-77, K-51)."""
    m, gpu, nic = setup(profile, mn)
    bo, dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd)
    attach = mr.umem.attach
    assert mr.odp and mr.mtt_valid and not mr.umem.pinned and mr.umem.private is mr
    assert attach is not None and attach.importer_ops is nic.attach_ops and attach.peer2peer
    assert dma_buf_is_dynamic(dmabuf) and attach.importer_pins == 0 and attach.core_pins == 0
    assert (mr.faults, nic.faults) == (0, 0)
    assert not bo.pinned and bo.location == "vram"
    sgt = mr.umem.sgt
    assert sgt is not None and sgt.p2p and sgt.memory == "vram"
    assert nic.dma(mr).incident is None
    nic.dereg_mr(mr)
    assert not dmabuf.attachments and dmabuf.refcount == 1 and not m.kernel.leaks


@pytest.mark.parametrize(("profile", "mn"), MN_OFF)
def test_k77_10_2_mn_off_the_first_map_pins_the_buffer_in_gtt(profile: str, mn: bool) -> None:
    """§10.2 step 3, K-77 (K-34, K-26): with MOVE_NOTIFY off the core pins on every map of a
    dynamic attachment, and amdgpu's pin excludes VRAM then: the ODP registration migrates the
    buffer to GTT and it cannot move while mapped. The dereg's unmap drops that pin."""
    m, gpu, nic = setup(profile, mn)
    bo, dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd)
    assert bo.location == "gtt" and bo.pinned and mr.umem.attach is not None
    assert mr.umem.attach.core_pins == 1 and not mr.umem.pinned
    with dmabuf.resv, pytest.raises(KernelError):
        ttm_bo_validate(bo.tbo, (TtmPlace(TtmMemType.SYSTEM),))
    assert nic.invalidations == 0
    nic.dereg_mr(mr)
    assert not bo.pinned and not m.kernel.leaks


# -- move_notify: K-41, K-39 ---------------------------------------------------------------


@pytest.mark.parametrize(("profile", "mn"), MN_ON)
def test_k41_k39_move_notify_zaps_and_the_next_access_faults_and_waits(
    profile: str, mn: bool
) -> None:
    """K-41: the exporter's move calls mlx5's callback with an sg_table present: MTTs zapped
    and the umem unmapped (the MR stays registered). K-39, K-42: the next NIC access faults,
    re-maps the whole MR at the new location and must wait for the move's KERNEL fence (it is
    in the access's ``wait``); nothing is stale. P-53: the notification unmapped the entire MR
    and the fault re-maps every page of it (``pages_faulted == mr.pages``)."""
    m, gpu, nic = setup(profile, mn)
    bo, _dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd)
    attach = mr.umem.attach
    assert attach is not None and attach.mappings == 1
    evict(bo)
    assert gpu.move_notifies == 1 and nic.invalidations == mr.invalidations == 1
    assert not mr.mtt_valid and mr.umem.sgt is None and attach.mappings == 0
    assert mr.lkey in nic.mrs
    result = nic.dma(mr)
    assert result.faulted and result.pages_faulted == mr.pages == ib_umem_num_pages(0, SIZE)
    assert (result.memory, result.p2p) == ("gtt", False)
    assert len(result.wait) == 1 and not result.wait[0].signaled  # the VRAM -> GTT copy
    assert result.incident is None and mr.faults == nic.faults == 1
    gpu.bdev.run_copies()
    again = nic.dma(mr)
    assert not again.faulted and again.incident is None
    nic.dereg_mr(mr)


def test_k41_notification_without_a_mapping_does_nothing() -> None:
    """K-41: a second notification while the MR is zapped (no sg_table) is a no-op."""
    m, gpu, nic = setup()
    bo, _dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd)
    evict(bo, TtmMemType.TT)
    evict(bo, TtmMemType.SYSTEM)  # GTT -> SYSTEM notifies again (K-38)
    assert gpu.move_notifies == 2 and nic.invalidations == mr.invalidations == 1
    nic.dereg_mr(mr)


@pytest.mark.parametrize(("profile", "mn"), [("6.16", True), ("7.1", True)])
def test_fault_counters_count_each_refault(profile: str, mn: bool) -> None:
    """Every invalidation costs one whole-MR fault at the next access; per-MR and per-NIC
    counters agree, and ``on_fault`` sees each fault with its page count."""
    m, gpu, nic = setup(profile, mn)
    bo, _dmabuf, fd = exported(m, gpu)
    seen: list[tuple[int, int]] = []
    nic.on_fault = lambda mr, pages: seen.append((mr.lkey, pages))
    a = reg(nic, m, fd)
    b = nic.reg_dmabuf_mr(fd, 4096, 8192, ODP, files=m.files)
    for where in (TtmMemType.TT, TtmMemType.VRAM, TtmMemType.TT):
        evict(bo, where)
        gpu.bdev.run_copies()
        assert nic.dma(a).faulted and nic.dma(b).faulted
        assert not nic.dma(a).faulted
    assert (a.faults, b.faults, nic.faults) == (3, 3, 6) and a.invalidations == 3
    assert seen == [(a.lkey, a.pages), (b.lkey, 2)] * 3
    nic.dereg_mr(a)
    nic.dereg_mr(b)
    assert not nic.detector.incidents


# -- K-42: the fault path's failures ---------------------------------------------------------


def test_k42_k44_fault_timeout_is_etimedout_and_the_retry_waits_again() -> None:
    """K-42: a fault whose KERNEL-fence wait returns 0 fails with ``-ETIMEDOUT`` and the MR
    stays zapped. K-44: the mapping made before the wait stays, so the retry skips the map
    (no new mapping) but still waits for the fences."""
    m, gpu, nic = setup()
    bo, _dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd)
    attach = mr.umem.attach
    assert attach is not None
    evict(bo)
    m.kernel.waiter = ZeroWaiter()
    with pytest.raises(KernelError) as e:
        nic.dma(mr)
    assert e.value.errno is Errno.ETIMEDOUT and e.value.function == "ib_umem_dmabuf_map_pages"
    assert not mr.mtt_valid and mr.umem.sgt is not None and attach.mappings == 1
    sgt = mr.umem.sgt
    m.kernel.waiter = DeferredWaiter(m.kernel)
    result = nic.dma(mr)
    assert result.faulted and mr.umem.sgt is sgt and attach.mappings == 1
    assert len(result.wait) == 1 and result.incident is None
    nic.dereg_mr(mr)


def test_k42_registration_timeout_releases_everything() -> None:
    """K-42 at the initial fault-in: ``-ETIMEDOUT`` fails the registration and releases the
    umem (unmap, detach, put)."""
    m, gpu, nic = setup()
    bo, dmabuf, fd = exported(m, gpu, settle=False)  # the clear is still running
    m.kernel.waiter = ZeroWaiter()
    with pytest.raises(KernelError) as e:
        reg(nic, m, fd)
    assert e.value.errno is Errno.ETIMEDOUT
    assert not dmabuf.attachments and dmabuf.refcount == 1 and not nic.mrs and not bo.pinned
    assert not m.kernel.leaks


def test_k42_page_size_mismatch_unmaps_and_is_einval(monkeypatch: pytest.MonkeyPatch) -> None:
    """K-42: a new sg list that does not fit the mkey's fixed PAGE_SIZE is unmapped and the
    fault returns ``-EINVAL`` (here at the initial fault-in, so the registration fails)."""
    m, gpu, nic = setup()
    _bo, dmabuf, fd = exported(m, gpu)
    unmapped: list[SgTable] = []
    real_unmap = gpu.ops.unmap_dma_buf
    assert real_unmap is not None

    def odd_map(attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable:
        return SgTable(((0x10000, 512), (0x20000, SIZE - 512)), True, "vram", 0, True)

    def spy_unmap(attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection) -> None:
        unmapped.append(sgt)
        real_unmap(attach, sgt, direction)

    monkeypatch.setattr(gpu.ops, "map_dma_buf", odd_map)
    monkeypatch.setattr(gpu.ops, "unmap_dma_buf", spy_unmap)
    with pytest.raises(KernelError) as e:
        reg(nic, m, fd)
    assert e.value.errno is Errno.EINVAL and e.value.function == "pagefault_dmabuf_mr"
    assert len(unmapped) == 1 and not dmabuf.attachments and dmabuf.refcount == 1


def test_k44_map_pages_on_a_revoked_umem_is_einval() -> None:
    """K-44: once revoked (K-46), ``map_pages`` refuses with ``-EINVAL``."""
    m, gpu, nic = setup()
    _bo, dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd)
    ib_umem_dmabuf_revoke(mr.umem)
    with dmabuf.resv, pytest.raises(KernelError) as e:
        ib_umem_dmabuf_map_pages(mr.umem)
    assert e.value.errno is Errno.EINVAL
    mr.mtt_valid = False
    with pytest.raises(KernelError):
        nic.dma(mr)  # the fault path hits the same -EINVAL
    nic.dereg_mr(mr)
    assert not dmabuf.attachments


# -- K-92 --------------------------------------------------------------------------------------


def test_k92_revoked_mr_ignores_a_late_invalidation() -> None:
    """K-92: deregistration first clears the umem's private pointer under the resv
    (``mlx5_revoke_mr``); an invalidation arriving in the window before the release finds no
    MR and is ignored: nothing zapped, nothing counted. The release then unmaps and detaches."""
    m, gpu, nic = setup()
    bo, dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd)
    nic.mlx5_revoke_mr(mr)
    assert mr.umem.private is None and not mr.mtt_valid
    sgt = mr.umem.sgt
    evict(bo)
    assert gpu.move_notifies == 1 and nic.invalidations == mr.invalidations == 0
    assert mr.umem.sgt is sgt
    nic.dereg_mr(mr)
    assert mr.umem.sgt is None and not dmabuf.attachments and not m.kernel.leaks


# -- advise_mr ---------------------------------------------------------------------------------


def test_advise_mr_prefetch_faults_in_ahead_of_the_access() -> None:
    """``ibv_advise_mr`` prefetch on a zapped ODP MR maps it again (pages returned, counted as a
    prefetch, not a fault); the next access does not fault. On a valid MR it does nothing;
    pinned MRs do not support it (``-EOPNOTSUPP``)."""
    m, gpu, nic = setup()
    bo, _dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd)
    assert nic.advise_mr(mr) == 0 and mr.prefetches == 0
    evict(bo)
    assert nic.advise_mr(mr) == mr.pages and mr.prefetches == 1 and mr.mtt_valid
    assert (mr.faults, nic.faults) == (0, 0)
    gpu.bdev.run_copies()
    result = nic.dma(mr)
    assert not result.faulted and result.incident is None
    pinned = reg(nic, m, fd, ACCESS)
    with pytest.raises(KernelError) as e:
        nic.advise_mr(pinned)
    assert e.value.errno is Errno.EOPNOTSUPP
    nic.dereg_mr(mr)
    nic.dereg_mr(pinned)


# -- without ODP -----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["5.16", "6.12", "6.16", "7.1"])
def test_nic_without_odp_refuses_on_demand_with_eopnotsupp(profile: str) -> None:
    """§6: without ODP support (a kernel without CONFIG_INFINIBAND_ON_DEMAND_PAGING) an
    ON_DEMAND registration is ``-EOPNOTSUPP`` before anything is imported."""
    m, gpu, nic = setup(profile, True, odp=False)
    _bo, dmabuf, fd = exported(m, gpu)
    with pytest.raises(KernelError) as e:
        reg(nic, m, fd)
    assert e.value.errno is Errno.EOPNOTSUPP
    assert not dmabuf.attachments and dmabuf.refcount == 1 and not nic.mrs


@pytest.mark.parametrize("odp", [True, False])
@pytest.mark.parametrize(("profile", "mn"), [("6.12", False), ("6.16", True), ("7.1", True)])
def test_registration_without_on_demand_takes_the_pinned_path(
    profile: str, mn: bool, odp: bool
) -> None:
    """Without ``IB_ACCESS_ON_DEMAND`` (on any mlx5, ODP or not) the MR is a pinned umem
    (``ib_umem_dmabuf_get_pinned``, K-45): pinned where amdgpu's pin puts it (K-49), never
    invalidated, never faulting."""
    m, gpu, nic = setup(profile, mn, odp=odp)
    bo, _dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd, ACCESS)
    assert not mr.odp and mr.umem.pinned and bo.pinned
    assert bo.location == ("gtt" if (profile, mn) == ("6.12", False) else "vram")
    gpu.bdev.run_copies()
    assert nic.dma(mr).incident is None and nic.faults == 0
    nic.dereg_mr(mr)
    assert not bo.pinned


def test_k43_a_window_bind_makes_the_pages_writable_but_not_the_mr() -> None:
    """K-43: ``umem->writable`` is ``ib_access_writable()``, which counts
    ``IB_ACCESS_MW_BIND`` (a window bound later can grant writes); a NIC write addressed to
    the MR itself still needs the MR's own write access, so a read-and-bind MR serves reads and
    refuses writes (``-EPERM``), while a local-write MR takes them."""
    m, gpu, nic = setup()
    _bo, _dmabuf, fd = exported(m, gpu)
    bind = reg(nic, m, fd, IB_ACCESS_REMOTE_READ | IB_ACCESS_MW_BIND)
    assert bind.umem.writable
    assert nic.dma(bind).incident is None
    with pytest.raises(KernelError) as e:
        nic.dma(bind, write=True)
    assert e.value.errno is Errno.EPERM and e.value.function == "nic_dma"
    rw = reg(nic, m, fd, ACCESS)
    assert nic.dma(rw, write=True).write
    nic.dereg_mr(bind)
    nic.dereg_mr(rw)


def test_broken_importer_keeps_its_stale_mapping() -> None:
    """The negative control (``ignore_move_notify``): the callback returns without zapping, so
    the NIC keeps DMAing through the old mapping after the move: a stale-DMA incident."""
    m, gpu, nic = setup(ignore_move_notify=True)
    bo, _dmabuf, fd = exported(m, gpu)
    mr = reg(nic, m, fd)
    evict(bo)
    gpu.bdev.run_copies()
    result = nic.dma(mr)
    assert not result.faulted and result.memory == "vram"
    assert result.incident is not None and result.incident.kind == "stale"
    assert result.incident.pid == 7 and result.incident.device == nic.name
    nic.dereg_mr(mr)
