"""i915-like static exporter (``kernel-semantics.md`` §7.4): K-54, attach-time migration to
system memory with a fence wait, page pins held until detach, no P2P, no notification."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pinlab.drivers.base import EXPORTERS
from pinlab.drivers.i915 import I915Device, I915Object
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaDataDirection,
    dma_buf_attach,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_is_dynamic,
    dma_buf_map_attachment,
    dma_buf_pin,
    dma_buf_put,
    dma_buf_unmap_attachment,
    dma_buf_unpin,
)
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.resv import DmaResvUsage
from pinlab.kernel.umem import ib_umem_dmabuf_release
from tests.drivers.machine import ALL_PRESETS, Machine, MiB, Recorder, make_machine


def setup(profile: str = "6.16", lmem: int = 64 * MiB) -> tuple[Machine, I915Device]:
    m = make_machine(profile)
    return m, I915Device(m.kernel, m.gpu, lmem_size=lmem, system_size=256 * MiB)


def exported(
    i915: I915Device, domain: str = "vram|system", size: int = 8 * MiB
) -> tuple[I915Object, DmaBuf]:
    obj = i915.create_buffer(size, domain)
    return obj, i915.export(obj)


def test_registered_as_i915_and_static() -> None:
    assert EXPORTERS["i915"] is I915Device
    _m, i915 = setup()
    obj, dmabuf = exported(i915)
    assert not dma_buf_is_dynamic(dmabuf) and dmabuf.exp_name == "i915"
    assert (obj.location, obj.pinned) == ("vram", False)
    assert [r.name for r in i915.regions()] == ["vram", "system"]
    dma_buf_put(dmabuf)


def test_integrated_gpu_has_no_lmem() -> None:
    _m, i915 = setup(lmem=0)
    assert [r.name for r in i915.regions()] == ["system"]
    with pytest.raises(KernelError, match=r"-EINVAL .*has no vram memory"):
        i915.create_buffer(MiB, "lmem")
    assert i915.create_buffer(MiB, "smem").location == "system"


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k54_lmem_only_object_cannot_be_attached(profile: str) -> None:
    """K-54: an object that cannot migrate to SMEM → -EOPNOTSUPP from attach, for static and
    dynamic importers alike; nothing is listed, pinned or moved."""
    m, i915 = setup(profile)
    obj, dmabuf = exported(i915, "lmem")
    attempts: list[Callable[[], DmaBufAttachment]] = [
        lambda: dma_buf_attach(dmabuf, m.nic),
        lambda: dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops),
    ]
    for attach_to in attempts:
        with pytest.raises(KernelError) as e:
            attach_to()
        assert e.value.errno is Errno.EOPNOTSUPP
    assert not dmabuf.attachments and obj.location == "vram" and not obj.pinned
    dma_buf_put(dmabuf)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k54_attach_migrates_to_smem_waits_and_pins_until_detach(profile: str) -> None:
    """K-54: attach migrates LMEM → SMEM, waits for the migration fence (handed to the
    kernel's fence waiter) and pins the pages; detach unpins. The core never pins (static
    exporter) and the buffer stays pinned however many maps come and go."""
    m, i915 = setup(profile)
    obj, dmabuf = exported(i915)
    m.kernel.take_waits()  # forget the creation clear
    attach = dma_buf_attach(dmabuf, m.nic)
    assert (obj.location, obj.tbo.pin_count, obj.attach_pins) == ("system", 1, 1)
    move_fences = dmabuf.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True)
    assert move_fences and set(move_fences) <= set(m.kernel.take_waits())
    with dmabuf.resv:
        for _ in range(2):
            sgt = dma_buf_map_attachment(attach)
            assert sgt.memory == "system" and not sgt.page_less and not sgt.p2p
            dma_buf_unmap_attachment(attach, sgt, DmaDataDirection.BIDIRECTIONAL)
    assert obj.tbo.pin_count == 1 and attach.core_pins == 0
    second = dma_buf_attach(dmabuf, m.far_nic)
    assert obj.tbo.pin_count == 2
    dma_buf_detach(dmabuf, second)
    dma_buf_detach(dmabuf, attach)
    assert not obj.pinned and obj.attach_pins == 0 and not m.kernel.leaks
    dma_buf_put(dmabuf)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_no_p2p_ever_even_for_a_p2p_capable_dynamic_importer(profile: str) -> None:
    """§7.4: device memory is never exported for peer access: a pinned RDMA import (P2P
    capable, same switch) gets system pages. dma_buf_pin is a no-op (static exporter, K-20);
    in ≤6.15 the core maps and caches at attach (K-14)."""
    m, i915 = setup(profile)
    obj, dmabuf = exported(i915)
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), obj.size)
    assert umem.attach is not None and umem.attach.peer2peer  # the importer could do P2P ...
    assert umem.sgt is not None and umem.sgt.memory == "system" and not umem.sgt.p2p  # ... no
    assert obj.tbo.pin_count == 1 and umem.attach.importer_pins == 0
    if profile in ("5.16", "6.12", "6.14"):
        assert umem.attach.sgt is umem.sgt
    ib_umem_dmabuf_release(umem)
    assert not obj.pinned and not m.kernel.leaks and not m.kernel.warnings.records()


def test_never_notifies_and_evicts_lmem_to_smem() -> None:
    """A static exporter cannot tell anyone: moving an exported object sends no move_notify.
    LMEM eviction goes to SMEM; an attached (page-pinned) object is never evicted."""
    m, i915 = setup("6.16", lmem=16 * MiB)
    obj, dmabuf = exported(i915, size=12 * MiB)
    rec = Recorder()
    dyn = dma_buf_dynamic_attach(dmabuf, m.nic, rec.ops)  # migrates to SMEM, pins
    with dmabuf.resv:
        dma_buf_pin(dyn)
        dma_buf_unpin(dyn)
    victim = i915.create_buffer(12 * MiB, "vram|system")
    squatter = i915.create_buffer(12 * MiB, "vram")
    assert victim.location == "system" and squatter.location == "vram"
    assert obj.location == "system" and obj.pinned
    assert rec.notified == [] and dmabuf.move_notify_count == 0 and i915.move_notifies == 0
    dma_buf_detach(dmabuf, dyn)
    dma_buf_put(dmabuf)


def test_smem_object_attach_does_not_move_and_free_waits_for_release() -> None:
    m, i915 = setup()
    obj, dmabuf = exported(i915, "system")
    epoch = obj.epoch
    attach = dma_buf_attach(dmabuf, m.nic)
    assert obj.epoch == epoch and obj.pinned
    i915.free_buffer(obj)  # the dma-buf still holds the object
    assert not obj.tbo.deleted
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)
    assert obj.tbo.deleted and i915.regions()[-1].used == 0
