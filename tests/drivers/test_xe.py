"""xe-like dynamic exporter (``kernel-semantics.md`` §7.3): K-53, K-81, the profile-dependent
pin domain (§1.3 ``xe_vram_pin``) and ``xe_bo_move_notify``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pinlab.drivers.base import EXPORTERS
from pinlab.drivers.xe import XeBo, XeDevice
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
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_pin, ttm_bo_unpin, ttm_bo_validate
from pinlab.kernel.umem import ib_umem_dmabuf_release
from tests.drivers.machine import (
    GiB,
    Machine,
    MiB,
    Recorder,
    make_machine,
    profile_mn,
)

XE_PRESETS = ["6.12", "6.14", "6.16", "7.1"]
TT_ONLY = ["6.12", "6.14", "6.16"]


def setup(profile: Any = "6.16", **kw: Any) -> tuple[Machine, XeDevice]:
    m = make_machine(profile, **kw)
    return m, XeDevice(m.kernel, m.gpu, vram_size=1 * GiB, gtt_size=1 * GiB, system_size=2 * GiB)


def exported(xe: XeDevice, domain: str = "vram|system", size: int = 8 * MiB) -> tuple[XeBo, DmaBuf]:
    bo = xe.create_buffer(size, domain)
    return bo, xe.export(bo)


def test_registered_as_xe_and_dynamic() -> None:
    assert EXPORTERS["xe"] is XeDevice
    _m, xe = setup()
    bo, dmabuf = exported(xe)
    assert dma_buf_is_dynamic(dmabuf) and dmabuf.exp_name == "xe"
    assert (bo.location, bo.pinned, bo.placements[0].mem_type) == ("vram", False, TtmMemType.VRAM)
    assert [r.name for r in xe.regions()] == ["vram", "gtt", "system"]
    assert xe.regions()[0].used == 8 * MiB
    dma_buf_put(dmabuf)


def test_xe_does_not_exist_in_preset_5_16() -> None:
    """§1.3: xe entered mainline after 5.16; constructing one there is a configuration error."""
    m = make_machine("5.16")
    with pytest.raises(ValueError, match=r"xe driver does not exist in kernel 5\.16"):
        XeDevice(m.kernel, m.gpu)


def test_domains_are_the_placement_mask_and_vm_private_bos_cannot_be_exported() -> None:
    _m, xe = setup()
    assert xe.create_buffer(MiB, "system").location == "gtt"  # XE_BO_FLAG_SYSTEM → TT
    assert xe.create_buffer(MiB, "tt|vram").placements == (
        TtmPlace(TtmMemType.VRAM),
        TtmPlace(TtmMemType.TT),
    )
    with pytest.raises(KernelError, match="-EINVAL from xe_gem_create_ioctl: unknown domain"):
        xe.create_buffer(MiB, "lmem")
    private = xe.create_buffer(MiB, vm_private=True)
    with pytest.raises(KernelError) as e:
        xe.export(private)
    assert e.value.errno is Errno.EPERM


@pytest.mark.parametrize("profile", XE_PRESETS)
def test_k53_attach_refuses_non_p2p_importer_of_a_vram_only_bo(profile: str) -> None:
    """K-53: peer2peer cleared for an unreachable importer; then not P2P and the BO cannot
    migrate to TT → -EOPNOTSUPP, and the attachment is not listed (K-10). A static importer
    (never P2P) is refused the same way; a P2P importer is accepted."""
    m, xe = setup(profile)
    _bo, dmabuf = exported(xe, "vram")
    attempts: list[Callable[[], DmaBufAttachment]] = [
        lambda: dma_buf_dynamic_attach(dmabuf, m.virt, Recorder().ops),
        lambda: dma_buf_dynamic_attach(dmabuf, m.nic, Recorder(allow_peer2peer=False).ops),
        lambda: dma_buf_attach(dmabuf, m.nic),
    ]
    for attach_to in attempts:
        with pytest.raises(KernelError) as e:
            attach_to()
        assert e.value.errno is Errno.EOPNOTSUPP
    assert not dmabuf.attachments and xe.runtime_pm_refs == 0
    p2p = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    assert p2p.peer2peer and xe.runtime_pm_refs == 1
    dma_buf_detach(dmabuf, p2p)
    assert xe.runtime_pm_refs == 0
    dma_buf_put(dmabuf)


@pytest.mark.parametrize("profile", XE_PRESETS)
def test_k53_attach_of_migratable_bo_clears_peer2peer_and_succeeds(profile: str) -> None:
    m, xe = setup(profile, cpu="intel")
    bo, dmabuf = exported(xe)
    far = dma_buf_dynamic_attach(dmabuf, m.far_nic, Recorder().ops)
    assert not far.peer2peer and far in dmabuf.attachments
    if profile == "6.16" or profile == "7.1":
        assert bo.location == "vram"  # nothing pinned or mapped at attach (K-12)
    dma_buf_detach(dmabuf, far)
    dma_buf_put(dmabuf)


@pytest.mark.parametrize("profile", TT_ONLY)
def test_k53_pin_migrates_to_tt_even_for_a_p2p_pinner(profile: str) -> None:
    """K-53 (6.12-6.16, XE snapshot): pin = migrate to TT, then pin; the P2P importer gets a
    page-backed TT mapping."""
    m, xe = setup(profile)
    bo, dmabuf = exported(xe)
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert umem.attach is not None and umem.attach.peer2peer
    # dma_buf_pin, plus the core's pin-on-map of a dynamic attachment while MN is off (K-34)
    assert (bo.location, bo.tbo.pin_count) == ("gtt", 2)
    assert umem.sgt is not None and not umem.sgt.page_less and umem.sgt.memory == "gtt"
    ib_umem_dmabuf_release(umem)
    assert not bo.pinned and not m.kernel.leaks


@pytest.mark.parametrize("mn", [False, True])
def test_k131_6_19_keeps_a_p2p_pin_in_vram_only_with_move_notify(mn: bool) -> None:
    """K-131 (df636bf28366, 6.19): xe may pin a P2P-only buffer in VRAM when MN is on; with MN
    off it still migrates to TT (7.1 drops the MN condition, below)."""
    m, xe = setup("6.19", move_notify=mn)
    bo, dmabuf = exported(xe)
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert bo.location == ("vram" if mn else "gtt")
    assert xe.pin_allows_vram(dmabuf) is mn
    ib_umem_dmabuf_release(umem)
    assert not bo.pinned and not m.kernel.leaks


def test_k53_pin_in_7_1_keeps_vram_when_every_attachment_is_p2p() -> None:
    """K-131, 7.1: xe_vram_pin = IF_P2P: a P2P-only buffer is pinned in place; with a non-P2P
    attachment present the pin migrates to TT."""
    m, xe = setup("7.1")
    bo, dmabuf = exported(xe)
    fd = m.fd(dmabuf)
    umem = m.pinned_umem(m.nic, fd, bo.size)
    assert (bo.location, bo.tbo.pin_count) == ("vram", 1)
    assert umem.sgt is not None and umem.sgt.page_less and umem.sgt.p2p
    ib_umem_dmabuf_release(umem)

    other, dmabuf2 = exported(xe)
    lurker = dma_buf_dynamic_attach(dmabuf2, m.virt, Recorder().ops)  # not P2P
    umem2 = m.pinned_umem(m.nic, m.fd(dmabuf2), other.size)
    assert other.location == "gtt"
    ib_umem_dmabuf_release(umem2)
    dma_buf_detach(dmabuf2, lurker)


def test_k53_k76_like_7_1_static_importer_of_a_vram_pinned_bo_is_einval() -> None:
    """K-53: already pinned and not in TT (VRAM no longer allowed once a non-P2P attachment
    exists) → -EINVAL with xe's log line; the existing pin is untouched."""
    m, xe = setup("7.1")
    bo, dmabuf = exported(xe)
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    static = dma_buf_attach(dmabuf, m.nic)
    with dmabuf.resv, pytest.raises(KernelError) as e:
        dma_buf_map_attachment(static)
    assert e.value.errno is Errno.EINVAL
    assert any("Can't migrate pinned bo for dma-buf pin." in ln for ln in m.kernel.dmesg)
    assert (bo.location, bo.tbo.pin_count) == ("vram", 1)
    dma_buf_detach(dmabuf, static)
    ib_umem_dmabuf_release(umem)


@pytest.mark.parametrize("profile", TT_ONLY)
def test_k53_pin_of_bo_pinned_outside_tt_is_einval(profile: str) -> None:
    """K-53: a BO pinned in VRAM by the driver itself (a scanout, say) cannot be dma-buf
    pinned: -EINVAL, nothing moves."""
    m, xe = setup(profile)
    bo, dmabuf = exported(xe)
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    with dmabuf.resv:
        ttm_bo_pin(bo.tbo)
        epoch = bo.epoch
        with pytest.raises(KernelError) as e:
            dma_buf_pin(attach)
        assert e.value.errno is Errno.EINVAL and bo.epoch == epoch and bo.tbo.pin_count == 1
        ttm_bo_unpin(bo.tbo)
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


def test_k53_pin_of_vram_only_bo_cannot_migrate_to_tt() -> None:
    """xe_bo_migrate refuses a placement the BO does not allow (-EINVAL, logged)."""
    m, xe = setup("6.16")
    bo, dmabuf = exported(xe, "vram")
    with pytest.raises(KernelError) as e:
        m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert e.value.errno is Errno.EINVAL and bo.location == "vram" and not bo.pinned
    assert any("Failed migrating dma-buf to TT memory: -EINVAL" in ln for ln in m.kernel.dmesg)


def test_k53_pins_stack_and_unpins_balance() -> None:
    """Each pinned import adds one exporter pin (MN on: no map-time pins)."""
    m, xe = setup(profile_mn("6.16", True))
    bo, dmabuf = exported(xe)
    fd = m.fd(dmabuf)
    a = m.pinned_umem(m.nic, fd, bo.size)
    b = m.pinned_umem(m.nic, fd, bo.size)
    assert bo.tbo.pin_count == 2 and xe.regions()[1].pinned == bo.size
    ib_umem_dmabuf_release(a)
    assert bo.tbo.pin_count == 1
    ib_umem_dmabuf_release(b)
    assert not bo.pinned


@pytest.mark.parametrize("profile", ["6.12", "6.16"])
def test_static_importer_pins_into_tt(profile: str) -> None:
    """§2.7: a static importer of a dynamic exporter is pinned by the core (at attach ≤6.15,
    per mapping ≥6.16); xe puts that pin in TT."""
    m, xe = setup(profile)
    bo, dmabuf = exported(xe)
    static = dma_buf_attach(dmabuf, m.nic)
    with dmabuf.resv:
        sgt = dma_buf_map_attachment(static)
        assert bo.location == "gtt" and bo.pinned and sgt.memory == "gtt"
        dma_buf_unmap_attachment(static, sgt, DmaDataDirection.BIDIRECTIONAL)
    dma_buf_detach(dmabuf, static)
    assert not bo.pinned and not m.kernel.leaks
    dma_buf_put(dmabuf)


@pytest.mark.parametrize("profile", ["6.16", "7.1"])
def test_k81_unpinned_map_migrates_for_non_p2p_and_stays_for_p2p(profile: str) -> None:
    """K-81: an unpinned BO is validated in place for a P2P attachment (VRAM → page-less sgt)
    and migrated to TT for a non-P2P one (page sgt). MN on, so the core does not pin."""
    m, xe = setup(profile_mn(profile, True))
    bo, dmabuf = exported(xe)
    p2p_rec, plain_rec = Recorder(), Recorder(allow_peer2peer=False)
    p2p = dma_buf_dynamic_attach(dmabuf, m.nic, p2p_rec.ops)
    plain = dma_buf_dynamic_attach(dmabuf, m.nic, plain_rec.ops)
    with dmabuf.resv:
        sgt = dma_buf_map_attachment(p2p)
        assert sgt.page_less and sgt.p2p and sgt.memory == "vram" and not bo.pinned
        sgt2 = dma_buf_map_attachment(plain)
        assert not sgt2.page_less and sgt2.memory == "gtt" and bo.location == "gtt"
        assert not xe.mapping_current(dmabuf, sgt)  # the VRAM mapping went stale
        assert p2p_rec.notified == [p2p] and plain_rec.notified == [plain]
        dma_buf_unmap_attachment(p2p, sgt, DmaDataDirection.BIDIRECTIONAL)
        dma_buf_unmap_attachment(plain, sgt2, DmaDataDirection.BIDIRECTIONAL)
    dma_buf_detach(dmabuf, p2p)
    dma_buf_detach(dmabuf, plain)
    dma_buf_put(dmabuf)


def test_k81_map_of_non_p2p_attachment_of_vram_only_bo_is_eopnotsupp() -> None:
    """K-81: xe_dma_buf_map repeats the attach check (reached here by an attachment that lost
    peer2peer after attach)."""
    m, xe = setup(profile_mn("6.16", True))
    _bo, dmabuf = exported(xe, "vram")
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    attach.peer2peer = False
    with dmabuf.resv, pytest.raises(KernelError) as e:
        dma_buf_map_attachment(attach)
    assert e.value.errno is Errno.EOPNOTSUPP
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


def test_k81_tt_dma_mapping_failure_is_ebusy_and_the_map_time_pin_is_dropped() -> None:
    """K-81 with K-27: the DMA mapping of the TT pages fails → -EBUSY; the core undoes the
    pin it took for the static attachment."""
    m, xe = setup("6.16")
    bo, dmabuf = exported(xe)
    xe.dma_map_fault = lambda dev: dev is m.nic
    static = dma_buf_attach(dmabuf, m.nic)
    with dmabuf.resv, pytest.raises(KernelError) as e:
        dma_buf_map_attachment(static)
    assert e.value.errno is Errno.EBUSY and not bo.pinned and static.core_pins == 0
    dma_buf_detach(dmabuf, static)
    dma_buf_put(dmabuf)


def test_k81_map_of_a_bo_pinned_in_system_is_einval() -> None:
    """K-81: any placement other than TT or VRAM → -EINVAL."""
    m, xe = setup(profile_mn("6.16", True))
    bo, dmabuf = exported(xe, "system")
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    with dmabuf.resv:
        ttm_bo_validate(bo.tbo, (TtmPlace(TtmMemType.SYSTEM),))
        ttm_bo_pin(bo.tbo)
        with pytest.raises(KernelError) as e:
            dma_buf_map_attachment(attach)
        assert e.value.errno is Errno.EINVAL
        ttm_bo_unpin(bo.tbo)
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


def test_move_notify_for_exported_bos_including_moves_out_of_system() -> None:
    """xe_bo_move_notify: every move of an exported, non-imported BO notifies -- unlike
    amdgpu also one out of SYSTEM. A BO that was never exported notifies nobody."""
    m, xe = setup(profile_mn("6.16", True))
    bo, dmabuf = exported(xe, "vram|system")
    rec = Recorder()
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, rec.ops)
    with dmabuf.resv:
        for where in (TtmMemType.TT, TtmMemType.SYSTEM, TtmMemType.TT):
            ttm_bo_validate(bo.tbo, (TtmPlace(where),))
    assert len(rec.notified) == 3 and xe.move_notifies == 3
    plain = xe.create_buffer(MiB, "vram|system")
    with plain.tbo.resv:
        ttm_bo_validate(plain.tbo, (TtmPlace(TtmMemType.TT),))
    assert xe.move_notifies == 3
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


def test_free_while_exported_keeps_the_bo_until_release() -> None:
    _m, xe = setup()
    bo, dmabuf = exported(xe)
    assert xe.export(bo) is dmabuf and dmabuf.refcount == 2  # one dma-buf per BO
    xe.free_buffer(bo)
    assert bo.location == "vram"
    dma_buf_put(dmabuf)
    dma_buf_put(dmabuf)
    assert bo.tbo.deleted and xe.regions()[0].used == 0


def test_dma_buf_unpin_of_unpinned_bo_warns_once() -> None:
    """K-59 through xe_dma_buf_unpin: an unbalanced unpin WARNs and changes nothing."""
    m, xe = setup()
    bo, dmabuf = exported(xe)
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    with dmabuf.resv:
        dma_buf_unpin(attach)
    assert m.kernel.warnings.count("ttm_bo_unpin") == 1 and not bo.pinned
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)
