"""EFA-like pinned importer (``kernel-semantics.md`` §5.3-§5.5, §10.1, §10.3): K-40, K-45, K-46,
K-47, K-93, K-75 through a real NIC model, the §10.1 and §10.3 flows, ``-EOPNOTSUPP`` for
``IB_ACCESS_ON_DEMAND``, and DMA read/write through the MR's current mapping."""

from __future__ import annotations

from typing import Any

import pytest

from pinlab.drivers import IMPORTERS
from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuDevice
from pinlab.drivers.efa import EfaDevice
from pinlab.drivers.habanalabs import HabanalabsDevice
from pinlab.drivers.rdma import MemoryRegion
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    dma_buf_move_notify,
    dma_buf_notify_move,
    dma_buf_pin,
)
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.pci import PciDev, find_parent_pci_dev
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_validate
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
    ib_umem_dmabuf_revoke,
)
from tests.drivers.machine import (
    ALL_PRESETS,
    CACHING,
    PIN_AT_MAP,
    GiB,
    Machine,
    MiB,
    make_machine,
    profile_mn,
)

RW = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE
SIZE = 8 * MiB
PROFILES_MN = [
    ("5.16", False),
    ("6.12", False),
    ("6.12", True),
    ("6.14", False),
    ("6.16", False),
    ("6.16", True),
    ("7.1", True),
]
VRAM_PIN = [("6.16", True), ("7.1", True)]  # K-49: a dma-buf pin may stay in VRAM


def nic_fn(dev: Any) -> PciDev:
    pdev = find_parent_pci_dev(dev)
    assert pdev is not None
    return pdev


def amd_setup(profile: str = "6.16", mn: bool = False) -> tuple[Machine, AmdgpuDevice, EfaDevice]:
    m = make_machine(profile_mn(profile, mn))
    gpu = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB, gtt_size=512 * MiB, system_size=GiB)
    return m, gpu, EfaDevice(m.kernel, nic_fn(m.nic))


def exported(m: Machine, gpu: AmdgpuDevice) -> tuple[AmdgpuBo, DmaBuf, int]:
    bo = gpu.create_buffer(SIZE, "vram")
    dmabuf = gpu.export(bo)
    fd = m.fd(dmabuf)
    gpu.bdev.run_copies()  # the VRAM clear
    m.kernel.take_waits()
    return bo, dmabuf, fd


def reg(efa: EfaDevice, m: Machine, fd: int, access: int = RW) -> MemoryRegion:
    return efa.reg_dmabuf_mr(fd, 0, SIZE, access, files=m.files, pid=4242)


class ZeroWaiter:
    """A fence waiter whose waits time out (``dma_resv_wait_timeout`` returns 0)."""

    def wait(self, fences: Any, *, intr: bool, timeout: int | None) -> int:
        return 0


def test_registered_as_efa() -> None:
    assert IMPORTERS["efa"] is EfaDevice


# -- §10.1 with K-45 -----------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "mn"), PROFILES_MN)
def test_k45_10_1_pinned_import_of_an_amdgpu_vram_buffer(profile: str, mn: bool) -> None:
    """§10.1, K-45: registration attaches with allow_peer2peer, pins and maps in one go. The pin
    lands where K-49 says (GTT ≤6.15 and 6.16 with MN=n; VRAM 6.16 with MN=y and 7.1); in the
    GTT case map_pages waited for the migration's KERNEL fence, and a NIC access before that
    fence signals is caught as unfenced. While pinned TTM refuses to move the BO (K-37); the
    dereg drops the pin (K-47)."""
    m, gpu, efa = amd_setup(profile, mn)
    bo, dmabuf, fd = exported(m, gpu)
    mr = reg(efa, m, fd)
    umem = mr.umem
    assert umem.pinned and not mr.odp and mr.mtt_valid and mr.pid == 4242
    assert umem.attach is not None and umem.attach.peer2peer and umem.attach.importer_pins == 1
    assert bo.pinned and dmabuf.refcount == 2  # the fd and the umem
    waited = m.kernel.take_waits()
    if (profile, mn) in VRAM_PIN:
        assert bo.location == "vram" and not waited
        result = efa.dma(mr)
        assert (result.memory, result.p2p, result.incident) == ("vram", True, None)
    else:
        assert bo.location == "gtt" and len(waited) == 1  # the VRAM -> GTT copy
        early = efa.dma(mr)
        assert early.incident is not None and early.incident.kind == "unfenced"
        assert early.incident.pid == 4242 and early.incident.device == efa.name
        gpu.bdev.run_copies()
        result = efa.dma(mr)
        assert (result.memory, result.p2p, result.incident) == ("gtt", False, None)
    with dmabuf.resv, pytest.raises(KernelError) as e:
        ttm_bo_validate(bo.tbo, (TtmPlace(TtmMemType.SYSTEM),))
    assert e.value.errno is Errno.EINVAL
    efa.dereg_mr(mr)
    assert not bo.pinned and dmabuf.refcount == 1 and not dmabuf.attachments
    assert mr.deregistered and not efa.mrs and not m.kernel.leaks and not len(m.kernel.warnings)


@pytest.mark.parametrize(("double", "warns"), [(False, 0), (True, 1)])
def test_k45_map_failure_releases_with_exactly_one_unpin(double: bool, warns: int) -> None:
    """K-45: a map failure inside registration (amdgpu's TT DMA-mapping failure, ``-EBUSY``,
    K-78) releases everything with exactly one unpin; the pre-February-2026 error path
    (``umem_pinned_double_unpin``) unpins twice and TTM WARNs about the underflow (K-59)."""
    m = make_machine("6.12", umem_pinned_double_unpin=double)
    gpu = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB, gtt_size=512 * MiB, system_size=GiB)
    efa = EfaDevice(m.kernel, nic_fn(m.nic))
    bo, dmabuf, fd = exported(m, gpu)
    gpu.dma_map_fault = lambda dev: True
    with pytest.raises(KernelError) as e:
        reg(efa, m, fd)
    assert e.value.errno is Errno.EBUSY
    assert not bo.pinned and gpu.gart_pin_size == 0
    assert dmabuf.refcount == 1 and not dmabuf.attachments and not efa.mrs
    assert m.kernel.warnings.count("ttm_bo_unpin") == warns


@pytest.mark.parametrize(("profile", "mn"), [("6.12", False), ("6.16", True)])
def test_k45_map_pages_timeout_is_etimedout_and_releases(profile: str, mn: bool) -> None:
    """K-45 with §5.2: map_pages always waits for KERNEL fences; a wait that returns 0 is
    ``-ETIMEDOUT``, and registration releases everything (one unpin)."""
    m, gpu, efa = amd_setup(profile, mn)
    bo = gpu.create_buffer(SIZE, "vram")  # its clear fence is still pending
    dmabuf = gpu.export(bo)
    fd = m.fd(dmabuf)
    m.kernel.waiter = ZeroWaiter()
    with pytest.raises(KernelError) as e:
        reg(efa, m, fd)
    assert e.value.errno is Errno.ETIMEDOUT
    assert not bo.pinned and dmabuf.refcount == 1 and not dmabuf.attachments
    assert not m.kernel.warnings.count("ttm_bo_unpin")


# -- K-40 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "mn"), [p for p in PROFILES_MN if p[0] != "7.1"])
def test_k40_pinned_umem_callback_only_logs(profile: str, mn: bool) -> None:
    """K-40, P-54: a notification reaching a pinned umem (an exporter bug: pinned BOs never
    move) only logs "Invalidate callback should not be called when memory is pinned"; the mapping,
    the pin and the MR stay as they were, and the NIC's next access is not stale."""
    m, gpu, efa = amd_setup(profile, mn)
    bo, dmabuf, fd = exported(m, gpu)
    mr = reg(efa, m, fd)
    gpu.bdev.run_copies()
    sgt, pins = mr.umem.sgt, bo.tbo.pin_count
    with dmabuf.resv:
        dma_buf_move_notify(dmabuf)
    assert any("Invalidate callback should not be called" in line for line in m.kernel.dmesg)
    assert mr.umem.sgt is sgt and bo.tbo.pin_count == pins and mr.mtt_valid
    assert efa.dma(mr).incident is None
    efa.dereg_mr(mr)


def test_k40_7_1_pinned_umem_has_no_callback_at_all() -> None:
    """K-40 / K-90 in 7.1: the warn-only callback is gone; ``dma_buf_invalidate_mappings``
    skips the pinned import without a log line."""
    m, gpu, efa = amd_setup("7.1")
    _bo, dmabuf, fd = exported(m, gpu)
    mr = reg(efa, m, fd)
    assert mr.umem.attach is not None and mr.umem.attach.importer_ops is not None
    assert mr.umem.attach.importer_ops.move_notify is None
    with dmabuf.resv:
        dma_buf_notify_move(dmabuf)
    assert not m.kernel.dmesg and mr.umem.sgt is not None
    efa.dereg_mr(mr)


# -- K-46, K-47 ----------------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "mn"), [("6.12", False), ("6.16", True), ("7.1", True)])
def test_k46_revoke_is_idempotent(profile: str, mn: bool) -> None:
    """K-46: revoke unmaps, unpins once and marks the umem revoked; a second revoke (and the
    one inside release) changes nothing: no pin underflow WARN."""
    m, gpu, efa = amd_setup(profile, mn)
    bo, _dmabuf, fd = exported(m, gpu)
    mr = reg(efa, m, fd)
    assert bo.tbo.pin_count == (1 if mn else 2)  # dma_buf_pin, plus the map's pin with MN=n
    ib_umem_dmabuf_revoke(mr.umem)
    assert mr.umem.revoked and not mr.umem.pinned and mr.umem.sgt is None
    assert bo.tbo.pin_count == 0
    ib_umem_dmabuf_revoke(mr.umem)
    efa.dereg_mr(mr)
    assert not len(m.kernel.warnings) and not m.kernel.leaks


def test_k47_dereg_is_revoke_detach_put_and_only_once() -> None:
    """K-47: ``efa_dereg_mr`` → ``ib_umem_dmabuf_release``: revoke, detach, put. The MR is gone
    from the NIC; a second dereg or a DMA through it is ``-EINVAL``."""
    m, gpu, efa = amd_setup("6.16", True)
    _bo, dmabuf, fd = exported(m, gpu)
    mr = reg(efa, m, fd)
    attach = mr.umem.attach
    assert dmabuf.attachments == [attach] and dmabuf.refcount == 2
    efa.dereg_mr(mr)
    assert mr.umem.revoked and mr.umem.attach is None and not dmabuf.attachments
    assert dmabuf.refcount == 1 and not efa.mrs
    for call in (lambda: efa.dereg_mr(mr), lambda: efa.dma(mr)):
        with pytest.raises(KernelError) as e:
            call()
        assert e.value.errno is Errno.EINVAL


# -- §10.3 with K-93 and K-75 --------------------------------------------------------------


def hl_setup(profile: str, cpu: str = "amd") -> tuple[Machine, HabanalabsDevice]:
    m = make_machine(profile, cpu=cpu)
    return m, HabanalabsDevice(m.kernel, m.gpu, hbm_size=GiB)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k93_10_3_habanalabs_pin_is_a_noop_and_the_map_is_the_bar(profile: str) -> None:
    """§10.3, K-93: on the static habanalabs exporter ``dma_buf_pin`` returns 0 without effect
    (no exporter pin is counted), ``pinned`` is still set, the map is a page-less P2P table of
    the HBM BAR, and the unpin at dereg is a no-op (no WARN). No notification ever comes."""
    m, hl = hl_setup(profile)
    efa = EfaDevice(m.kernel, nic_fn(m.nic))
    mem = hl.create_buffer(SIZE)
    fd = m.fd(hl.export(mem))
    mr = reg(efa, m, fd)
    attach = mr.umem.attach
    assert attach is not None and attach.peer2peer and attach.importer_pins == 0
    assert mr.umem.pinned
    sgt = mr.umem.sgt
    assert sgt is not None and sgt.page_less and sgt.p2p and sgt.memory == "vram"
    result = efa.dma(mr)
    assert (result.memory, result.p2p, result.incident) == ("vram", True, None)
    efa.dereg_mr(mr)
    assert not len(m.kernel.warnings) and not m.kernel.leaks
    assert m.files.close(fd)
    hl.free_buffer(mem)  # export count back to 0 (K-82)
    assert hl.dram.used == 0


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k75_10_3_unreachable_efa_is_refused_at_attach_or_at_map(
    profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§10.3, K-75: an EFA the PCI topology cannot reach (other root port, unlisted Intel host
    bridge) gets peer2peer cleared and habanalabs refuses to map with ``-EPERM``: ≤6.15 inside
    ``dma_buf_dynamic_attach`` (the attach-time map; no pin is ever attempted), ≥6.16 at the
    first map (after the no-op pin). Either way nothing is left attached."""
    import pinlab.kernel.umem as umem_mod

    pins: list[DmaBufAttachment] = []
    real_pin = dma_buf_pin

    def counting_pin(attach: DmaBufAttachment) -> None:
        pins.append(attach)
        real_pin(attach)

    monkeypatch.setattr(umem_mod, "dma_buf_pin", counting_pin)
    m, hl = hl_setup(profile, cpu="intel")
    far = EfaDevice(m.kernel, nic_fn(m.far_nic))
    mem = hl.create_buffer(SIZE)
    dmabuf = hl.export(mem)
    fd = m.fd(dmabuf)
    with pytest.raises(KernelError) as e:
        reg(far, m, fd)
    assert e.value.errno is Errno.EPERM
    assert any("p2p is disabled" in line for line in m.kernel.dmesg)
    assert len(pins) == (1 if profile in PIN_AT_MAP else 0)
    assert profile in CACHING or profile in PIN_AT_MAP
    assert not dmabuf.attachments and dmabuf.refcount == 1 and not far.mrs


# -- access flags, DMA read/write ------------------------------------------------------------


def test_on_demand_registration_is_eopnotsupp() -> None:
    """EFA has no ODP: ``IB_ACCESS_ON_DEMAND`` is an unsupported access flag → ``-EOPNOTSUPP``
    before anything is imported; so is remote write on a device without RDMA write."""
    m, gpu, efa = amd_setup("6.16", True)
    _bo, dmabuf, fd = exported(m, gpu)
    with pytest.raises(KernelError) as e:
        reg(efa, m, fd, RW | IB_ACCESS_ON_DEMAND)
    assert e.value.errno is Errno.EOPNOTSUPP and e.value.function == "efa_reg_user_mr_dmabuf"
    old = EfaDevice(m.kernel, nic_fn(m.nic), name="efa_old", rdma_write=False)
    with pytest.raises(KernelError) as e:
        reg(old, m, fd, RW)
    assert e.value.errno is Errno.EOPNOTSUPP
    assert not dmabuf.attachments and dmabuf.refcount == 1
    mr = reg(old, m, fd, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ)
    old.dereg_mr(mr)


def test_dma_read_and_write_follow_the_access_flags() -> None:
    """A read-only MR serves NIC reads; a NIC write into it is refused (``-EPERM``, the NIC's
    protection error). A pinned MR has no fault path: a missing translation is ``-EFAULT``."""
    m, gpu, efa = amd_setup("6.16", True)
    _bo, _dmabuf, fd = exported(m, gpu)
    ro = reg(efa, m, fd, IB_ACCESS_REMOTE_READ)
    rw = reg(efa, m, fd, RW)
    assert efa.dma(ro, 4096).nbytes == 4096
    with pytest.raises(KernelError) as e:
        efa.dma(ro, write=True)
    assert e.value.errno is Errno.EPERM
    result = efa.dma(rw, write=True)
    assert result.write and result.incident is None and not result.faulted
    rw.mtt_valid = False
    with pytest.raises(KernelError) as e:
        efa.dma(rw)
    assert e.value.errno is Errno.EFAULT
    efa.dereg_mr(ro)
    efa.dereg_mr(rw)
    assert efa.detector.accesses == 2 and not efa.detector.incidents


def test_registration_fences_are_handed_to_the_waiter() -> None:
    """§5.2 step 3: registration's map_pages waits for KERNEL fences (here the clear of a new
    VRAM buffer); the default waiter hands them to whoever drives time."""
    m, gpu, efa = amd_setup("6.16", True)
    bo = gpu.create_buffer(SIZE, "vram")
    fd = m.fd(gpu.export(bo))
    mr = reg(efa, m, fd)
    waited = m.kernel.take_waits()
    assert len(waited) == 1 and isinstance(waited[0], DmaFence) and not waited[0].signaled
    assert efa.dma(mr).incident is not None  # the clear is still running
    gpu.bdev.run_copies()
    assert efa.dma(mr).incident is None
    efa.dereg_mr(mr)
