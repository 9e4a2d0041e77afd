"""Display engine, the static importer (``kernel-semantics.md`` §10.4): a scanout buffer stays
pinned while it is mapped -- from attach to detach in ≤6.15 (K-13, K-16), per live mapping
in ≥6.16 (K-25, K-28, K-31) -- K-76 (refused after a VRAM pin), K-52/K-97 (habanalabs) and
K-54 (i915)."""

from __future__ import annotations

import pytest

from pinlab.drivers import IMPORTERS
from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuDevice
from pinlab.drivers.display import DisplayEngine
from pinlab.drivers.efa import EfaDevice
from pinlab.drivers.habanalabs import HabanalabsDevice
from pinlab.drivers.i915 import I915Device
from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import DmaBuf, dma_buf_map_attachment, dma_buf_unmap_attachment
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.pci import PciDev, find_parent_pci_dev
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_validate
from pinlab.kernel.umem import IB_ACCESS_LOCAL_WRITE
from tests.drivers.machine import (
    ALL_PRESETS,
    CACHING,
    GiB,
    Machine,
    MiB,
    make_machine,
    profile_mn,
)

SIZE = 8 * MiB


def setup(profile: str = "6.16", mn: bool = False) -> tuple[Machine, AmdgpuDevice, DisplayEngine]:
    m = make_machine(profile_mn(profile, mn))
    gpu = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB, gtt_size=512 * MiB, system_size=GiB)
    # the display engine of a second device, hanging below the NIC's switch port function
    return m, gpu, DisplayEngine(m.kernel, Device("display0", m.nic.parent))


def exported(m: Machine, gpu: AmdgpuDevice) -> tuple[AmdgpuBo, DmaBuf, int]:
    bo = gpu.create_buffer(SIZE, "vram")
    dmabuf = gpu.export(bo)
    fd = m.fd(dmabuf)
    gpu.bdev.run_copies()
    m.kernel.take_waits()
    return bo, dmabuf, fd


def test_registered_as_display() -> None:
    assert IMPORTERS["display"] is DisplayEngine


@pytest.mark.parametrize("profile", CACHING)
def test_k13_k16_10_4_caching_family_pins_at_attach_until_detach(profile: str) -> None:
    """§10.4 (≤6.15), K-13: the static attach pins (GTT: a static attachment has no
    peer2peer, K-9, K-49) and maps once, caching the table; further maps return it (K-32)
    without another pin. K-16: detach unmaps and unpins."""
    m, gpu, display = setup(profile)
    bo, dmabuf, fd = exported(m, gpu)
    scanout = display.set_scanout(fd, files=m.files, pid=11)
    attach = scanout.attach
    assert bo.location == "gtt" and bo.tbo.pin_count == 1 and attach.core_pins == 1
    assert attach.sgt is scanout.sgt and not attach.peer2peer and not scanout.sgt.p2p
    with dmabuf.resv:
        assert dma_buf_map_attachment(attach) is scanout.sgt
    assert bo.tbo.pin_count == 1
    display.clear_scanout(scanout)
    assert not bo.pinned and not dmabuf.attachments and dmabuf.refcount == 1
    assert not display.scanouts and not m.kernel.leaks


@pytest.mark.parametrize(("profile", "mn"), [("6.16", False), ("6.16", True), ("7.1", True)])
def test_k25_k31_10_4_pin_at_map_family_pins_per_live_mapping(profile: str, mn: bool) -> None:
    """§10.4 (≥6.16), K-25: each map of the static attachment pins (GTT), K-30 each returns a
    new table, K-31 each unmap unpins; nothing is cached on the attachment."""
    m, gpu, display = setup(profile, mn)
    bo, dmabuf, fd = exported(m, gpu)
    scanout = display.set_scanout(fd, files=m.files)
    attach = scanout.attach
    assert bo.location == "gtt" and bo.tbo.pin_count == 1 and attach.sgt is None
    with dmabuf.resv:
        second = dma_buf_map_attachment(attach)
        assert second is not scanout.sgt and bo.tbo.pin_count == 2
        dma_buf_unmap_attachment(attach, second)
    assert bo.tbo.pin_count == 1
    display.clear_scanout(scanout)
    assert not bo.pinned and not dmabuf.attachments and not m.kernel.leaks


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k28_scanout_waits_for_the_migration_and_stays_pinned(profile: str) -> None:
    """K-28 (and the attach-time map of ≤6.15): the core waited for the KERNEL fence of the
    migration to GTT; a frame scanned before that fence signals is an unfenced access, after
    it none. While on screen the buffer cannot move (K-37): an explicit move is ``-EINVAL``."""
    m, gpu, display = setup(profile)
    bo, dmabuf, fd = exported(m, gpu)
    scanout = display.set_scanout(fd, files=m.files, pid=11)
    waited = m.kernel.take_waits()
    assert len(waited) == 1 and not waited[0].signaled
    early = display.scan_frame(scanout)
    assert early is not None and early.kind == "unfenced" and early.pid == 11
    gpu.bdev.run_copies()
    assert display.scan_frame(scanout) is None and scanout.frames == 2
    with dmabuf.resv, pytest.raises(KernelError) as e:
        ttm_bo_validate(bo.tbo, (TtmPlace(TtmMemType.SYSTEM),))
    assert e.value.errno is Errno.EINVAL
    assert display.scan_frame(scanout) is None
    display.clear_scanout(scanout)
    display.clear_scanout(scanout)  # idempotent


@pytest.mark.parametrize(("profile", "mn"), [("6.16", True), ("7.1", True)])
def test_k76_display_of_a_vram_pinned_buffer_is_einval(profile: str, mn: bool) -> None:
    """K-76 (§10.4 ≥6.16): once P2P importers pinned the buffer in VRAM, the display's map
    pins for GTT and amdgpu rejects the mismatch with ``-EINVAL``; the existing pin and the
    buffer are untouched and the display leaves nothing attached."""
    m, gpu, display = setup(profile, mn)
    bo, dmabuf, fd = exported(m, gpu)
    nic_pdev = find_parent_pci_dev(m.nic)
    assert isinstance(nic_pdev, PciDev)
    efa = EfaDevice(m.kernel, nic_pdev)
    mr = efa.reg_dmabuf_mr(fd, 0, SIZE, IB_ACCESS_LOCAL_WRITE, files=m.files)
    assert bo.location == "vram" and bo.tbo.pin_count == 1
    with pytest.raises(KernelError) as e:
        display.set_scanout(fd, files=m.files)
    assert e.value.errno is Errno.EINVAL and e.value.function == "amdgpu_bo_pin"
    assert bo.location == "vram" and bo.tbo.pin_count == 1 and gpu.vram_pin_size == SIZE
    assert dmabuf.attachments == [mr.umem.attach] and dmabuf.refcount == 2
    assert not display.scanouts
    efa.dereg_mr(mr)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k52_k97_habanalabs_scanout_is_refused_at_map(profile: str) -> None:
    """K-52, K-97: a static importer of the static habanalabs exporter has no peer2peer, so
    every map is ``-EPERM``. Both sides are static, so no attach-time map happens in any
    preset (K-13/K-14 need differing dynamicness): the attach succeeds and the map refuses."""
    m = make_machine(profile)
    hl = HabanalabsDevice(m.kernel, m.gpu, hbm_size=GiB)
    display = DisplayEngine(m.kernel, Device("display0", m.nic.parent))
    mem = hl.create_buffer(SIZE)
    dmabuf = hl.export(mem)
    fd = m.fd(dmabuf)
    with pytest.raises(KernelError) as e:
        display.set_scanout(fd, files=m.files)
    assert e.value.errno is Errno.EPERM and e.value.function == "hl_map_dmabuf"
    assert m.kernel.dmesg[-1].endswith("Failed to map dmabuf because p2p is disabled")
    assert not dmabuf.attachments and dmabuf.refcount == 1


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k54_i915_scanout_is_system_memory_pinned_by_the_attachment(profile: str) -> None:
    """K-54: i915 migrates the object to system memory at attach and pins its pages until
    detach; the display scans it out of system memory, no P2P."""
    m = make_machine(profile)
    i915 = I915Device(m.kernel, m.gpu, lmem_size=256 * MiB, system_size=GiB)
    display = DisplayEngine(m.kernel, Device("display0", m.nic.parent))
    obj = i915.create_buffer(SIZE, "vram|system")
    dmabuf = i915.export(obj)
    fd = m.fd(dmabuf)
    scanout = display.set_scanout(fd, files=m.files)
    assert obj.location == "system" and obj.pinned and obj.attach_pins == 1
    assert scanout.sgt.memory == "system" and not scanout.sgt.p2p
    i915.bdev.run_copies()
    assert display.scan_frame(scanout) is None
    display.clear_scanout(scanout)
    assert not obj.pinned and not dmabuf.attachments
