"""NVIDIA-compute-like exporter (a model of the performance camp's pin-in-place): P2P pins stay
in device memory in every profile, bounded by the BAR1 window (``cost-model.md`` §6.3); other
pins migrate to system memory or, with ``strict_p2p``, are refused."""

from __future__ import annotations

from typing import Any

import pytest

from pinlab.drivers import nvidia_compute
from pinlab.drivers.base import EXPORTERS
from pinlab.drivers.nvidia_compute import NvBo, NvidiaComputeDevice
from pinlab.kernel.dma_buf import (
    DmaBuf,
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
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_validate
from pinlab.kernel.umem import (
    ib_umem_dmabuf_get,
    ib_umem_dmabuf_map_pages,
    ib_umem_dmabuf_release,
)
from tests.drivers.machine import (
    ACCESS,
    ALL_PRESETS,
    CACHING,
    GiB,
    Machine,
    MiB,
    Recorder,
    make_machine,
    profile_mn,
)


def setup(profile: Any = "6.16", **kw: Any) -> tuple[Machine, NvidiaComputeDevice]:
    m = make_machine(profile)
    nv = NvidiaComputeDevice(
        m.kernel, m.gpu, vram_size=1 * GiB, gtt_size=1 * GiB, system_size=2 * GiB, **kw
    )
    return m, nv


def exported(nv: NvidiaComputeDevice, size: int = 64 * MiB) -> tuple[NvBo, DmaBuf]:
    bo = nv.create_buffer(size, "vram|gtt")
    return bo, nv.export(bo)


def test_registered_as_nvidia_compute_with_bar1_defaulting_to_device_memory() -> None:
    assert EXPORTERS["nvidia-compute"] is NvidiaComputeDevice
    _m, nv = setup()
    _bo, dmabuf = exported(nv)
    assert dma_buf_is_dynamic(dmabuf) and dmabuf.exp_name == "nvidia"
    assert nv.bar1_size == 1 * GiB and nv.bar1_free == 1 * GiB
    assert "pin in place" in nv.pin_policy
    assert "not of an upstream driver" in (nvidia_compute.__doc__ or "")
    assert [r.name for r in nv.regions()] == ["vram", "gtt", "system"]
    dma_buf_put(dmabuf)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_p2p_pin_stays_in_device_memory_in_every_profile(profile: str) -> None:
    """Pin in place: unlike amdgpu (GTT until 6.15) the P2P pinner keeps the buffer in device
    memory under every preset and gets a page-less BAR mapping; the BAR1 window is charged
    once per BO and returned when its last pin goes."""
    m, nv = setup(profile)
    bo, dmabuf = exported(nv)
    epoch = bo.epoch
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert (bo.location, bo.epoch) == ("vram", epoch)  # never moved
    assert umem.sgt is not None and umem.sgt.page_less and umem.sgt.p2p
    assert nv.bar1_used == bo.size and bo.bar1
    assert nv.regions()[0].pinned == bo.size
    ib_umem_dmabuf_release(umem)
    assert not bo.pinned and nv.bar1_used == 0 and not bo.bar1 and not m.kernel.leaks


def test_bar1_exhaustion_is_enomem_and_frees_up_on_unpin() -> None:
    """A consumer-class BAR1 (256 MiB) bounds the bytes pinned for P2P: the third 100 MiB pin
    fails with -ENOMEM (what ibv_reg_mr reports on such GPUs), although device memory has
    room; the failed buffer is not moved or pinned. Releasing one pin makes room."""
    m, nv = setup(profile_mn("6.16", True), bar1_size=256 * MiB)
    bufs = [exported(nv, 100 * MiB) for _ in range(3)]
    umems = [m.pinned_umem(m.nic, m.fd(d), b.size) for b, d in bufs[:2]]
    assert nv.bar1_used == 200 * MiB
    third, third_buf = bufs[2]
    fd = m.fd(third_buf)
    with pytest.raises(KernelError) as e:
        m.pinned_umem(m.nic, fd, third.size)
    assert e.value.errno is Errno.ENOMEM and "BAR1" in str(e.value)
    assert third.location == "vram" and not third.pinned
    assert nv.regions()[0].free > third.size
    ib_umem_dmabuf_release(umems[0])
    umems.append(m.pinned_umem(m.nic, fd, third.size))
    assert third.pinned and nv.bar1_used == 200 * MiB
    for umem in umems[1:]:
        ib_umem_dmabuf_release(umem)
    assert nv.bar1_used == 0


@pytest.mark.parametrize("profile", ["6.12", "6.16", "7.1"])
def test_non_p2p_pinner_migrates_to_system_memory(profile: str) -> None:
    """A pinner that cannot reach device memory (no PCI path) gets the buffer migrated to TT
    and pinned there; no BAR1 space is used."""
    m, nv = setup(profile)
    bo, dmabuf = exported(nv)
    umem = m.pinned_umem(m.virt, m.fd(dmabuf), bo.size)
    assert bo.location == "gtt" and bo.pinned and nv.bar1_used == 0
    assert umem.sgt is not None and not umem.sgt.page_less
    ib_umem_dmabuf_release(umem)


def test_strict_p2p_refuses_non_p2p_pinners() -> None:
    m, nv = setup("6.16", strict_p2p=True)
    bo, dmabuf = exported(nv)
    fd = m.fd(dmabuf)
    with pytest.raises(KernelError) as e:
        m.pinned_umem(m.virt, fd, bo.size)
    assert e.value.errno is Errno.EINVAL and bo.location == "vram" and not bo.pinned
    umem = m.pinned_umem(m.nic, fd, bo.size)  # P2P pinners are welcome
    assert bo.location == "vram" and bo.pinned
    ib_umem_dmabuf_release(umem)


def test_p2p_pin_of_a_system_memory_buffer_pins_it_in_tt_without_bar1() -> None:
    """Pin where it is: a buffer created for system memory stays there for a P2P pinner."""
    m, nv = setup(profile_mn("6.16", True))
    bo = nv.create_buffer(32 * MiB, "gtt")
    umem = m.pinned_umem(m.nic, m.fd(nv.export(bo)), bo.size)
    assert (bo.location, bo.pinned, nv.bar1_used) == ("gtt", True, 0)
    assert umem.sgt is not None and not umem.sgt.page_less
    ib_umem_dmabuf_release(umem)


@pytest.mark.parametrize("profile", ["6.16", "7.1"])
def test_static_importer_of_a_vram_pinned_bo_is_refused(profile: str) -> None:
    """The decision looks only at the pinning attachment: a later static importer's map-time
    pin asks for system memory, which a pinned BO cannot move to → -EINVAL; the P2P pin and
    the BAR1 charge are untouched (cf. amdgpu K-76)."""
    m, nv = setup(profile_mn(profile, True))
    bo, dmabuf = exported(nv)
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    static = dma_buf_attach(dmabuf, m.nic)
    with dmabuf.resv, pytest.raises(KernelError) as e:
        dma_buf_map_attachment(static)
    assert e.value.errno is Errno.EINVAL
    assert (bo.location, bo.tbo.pin_count, nv.bar1_used) == ("vram", 1, bo.size)
    dma_buf_detach(dmabuf, static)
    ib_umem_dmabuf_release(umem)


@pytest.mark.parametrize("profile", CACHING)
def test_caching_family_static_attach_pins_in_tt(profile: str) -> None:
    m, nv = setup(profile)
    bo, dmabuf = exported(nv)
    static = dma_buf_attach(dmabuf, m.nic)
    assert bo.location == "gtt" and bo.pinned and static.sgt is not None
    # a P2P pinner is content with the pinned TT placement: one more pin, no BAR1
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert bo.location == "gtt" and nv.bar1_used == 0
    ib_umem_dmabuf_release(umem)
    dma_buf_detach(dmabuf, static)
    assert not bo.pinned


def test_p2p_pin_brings_an_evicted_buffer_back_to_device_memory() -> None:
    m, nv = setup(profile_mn("6.16", True))
    bo, dmabuf = exported(nv)
    with dmabuf.resv:
        ttm_bo_validate(bo.tbo, (TtmPlace(TtmMemType.TT),))
    assert bo.location == "gtt"
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert bo.location == "vram" and nv.bar1_used == bo.size
    ib_umem_dmabuf_release(umem)


def test_unpinned_maps_and_move_notify() -> None:
    """MN on: an ODP-like P2P import maps device memory without pinning (no BAR1 charge); a
    non-P2P dynamic map migrates the buffer to TT, notifying importers first; moves out of
    SYSTEM are not announced (amdgpu-like)."""
    m, nv = setup(profile_mn("6.16", True))
    bo, dmabuf = exported(nv)
    fd = m.fd(dmabuf)
    rec = Recorder()
    odp = ib_umem_dmabuf_get(m.kernel, m.nic, 0, bo.size, fd, ACCESS, rec.ops, files=m.files)
    with dmabuf.resv:
        ib_umem_dmabuf_map_pages(odp)
        assert odp.sgt is not None and odp.sgt.page_less and not bo.pinned
        assert nv.bar1_used == 0
    plain_attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder(allow_peer2peer=False).ops)
    with dmabuf.resv:
        sgt = dma_buf_map_attachment(plain_attach)
        assert sgt.memory == "gtt" and bo.location == "gtt"
        assert len(rec.notified) == 1 and nv.move_notifies == 1
        assert odp.sgt is not None and not nv.mapping_current(dmabuf, odp.sgt)
        dma_buf_unmap_attachment(plain_attach, sgt, DmaDataDirection.BIDIRECTIONAL)
        ttm_bo_validate(bo.tbo, (TtmPlace(TtmMemType.SYSTEM),))
        ttm_bo_validate(bo.tbo, (TtmPlace(TtmMemType.TT),))  # out of SYSTEM: no notify
        assert nv.move_notifies == 2
    dma_buf_detach(dmabuf, plain_attach)
    ib_umem_dmabuf_release(odp)


def test_map_errors() -> None:
    """A non-P2P attachment of a buffer pinned in device memory → -EINVAL (it cannot use BAR
    addresses); a failing TT DMA mapping → -EBUSY."""
    m, nv = setup(profile_mn("6.16", True))
    bo, dmabuf = exported(nv)
    p2p = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    plain = dma_buf_dynamic_attach(dmabuf, m.virt, Recorder().ops)
    with dmabuf.resv:
        dma_buf_pin(p2p)
        with pytest.raises(KernelError) as e:
            dma_buf_map_attachment(plain)
        assert e.value.errno is Errno.EINVAL
        dma_buf_unpin(p2p)
        nv.dma_map_fault = lambda dev: True
        with pytest.raises(KernelError) as e:
            dma_buf_map_attachment(plain)
        assert e.value.errno is Errno.EBUSY and bo.location == "gtt"
    dma_buf_detach(dmabuf, p2p)
    dma_buf_detach(dmabuf, plain)
    dma_buf_put(dmabuf)
