"""amdgpu-like dynamic exporter and GEM importer (``kernel-semantics.md`` §7.1, §10.1, §10.4):
K-38, K-48, K-49 (every preset with MOVE_NOTIFY n and y; 7.1), K-50, K-51, K-76 … K-80."""

from __future__ import annotations

from typing import Any

import pytest

from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuCreate, AmdgpuDevice, AmdgpuDomain
from pinlab.drivers.base import EXPORTERS
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaDataDirection,
    dma_buf_attach,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_map_attachment,
    dma_buf_put,
    dma_buf_unmap_attachment,
)
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.pci import find_parent_pci_dev
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_validate
from pinlab.kernel.umem import (
    ib_umem_dmabuf_get,
    ib_umem_dmabuf_map_pages,
    ib_umem_dmabuf_release,
)
from tests.drivers.machine import (
    ACCESS,
    ALL_PRESETS,
    GiB,
    Machine,
    MiB,
    Recorder,
    make_machine,
    profile_mn,
)

# (preset, CONFIG_DMABUF_MOVE_NOTIFY); 7.1 has it always on
PROFILES_MN = [
    ("5.16", False),
    ("5.16", True),
    ("6.12", False),
    ("6.12", True),
    ("6.14", False),
    ("6.14", True),
    ("6.16", False),
    ("6.16", True),
    ("7.1", True),
]
MN_ON = [(p, mn) for p, mn in PROFILES_MN if mn]
MN_OFF = [(p, mn) for p, mn in PROFILES_MN if not mn]
VRAM_PIN = [("6.16", True), ("7.1", True)]  # where K-49 lets a dma-buf pin stay in VRAM


def setup(profile: str = "6.16", mn: bool = False, **kw: Any) -> tuple[Machine, AmdgpuDevice]:
    m = make_machine(profile_mn(profile, mn), cpu=str(kw.pop("cpu", "amd")))
    gpu = AmdgpuDevice(
        m.kernel, m.gpu, vram_size=256 * MiB, gtt_size=512 * MiB, system_size=1 * GiB, **kw
    )
    return m, gpu


def exported(
    gpu: AmdgpuDevice, domain: str = "vram", size: int = 8 * MiB
) -> tuple[AmdgpuBo, DmaBuf]:
    bo = gpu.create_buffer(size, domain)
    return bo, gpu.export(bo)


def test_registered_as_amdgpu() -> None:
    assert EXPORTERS["amdgpu"] is AmdgpuDevice


# -- K-38 ----------------------------------------------------------------------------------


def test_k38_notification_only_for_exported_bos_leaving_a_non_system_placement() -> None:
    """K-38: VRAM → GTT, GTT → SYSTEM and GTT → VRAM notify; SYSTEM → GTT does not; a BO that is not
    exported (or no longer exported) notifies nobody."""
    m, gpu = setup("6.16", mn=True)
    bo, dmabuf = exported(gpu)
    rec = Recorder()
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, rec.ops)
    steps = [(TtmMemType.TT, 1), (TtmMemType.SYSTEM, 2), (TtmMemType.TT, 2), (TtmMemType.VRAM, 3)]
    with dmabuf.resv:
        for where, expected in steps:
            ttm_bo_validate(bo.tbo, (TtmPlace(where),))
            assert bo.tbo.mem_type is where
            assert len(rec.notified) == expected == gpu.move_notifies
    other = gpu.create_buffer(4 * MiB)
    with other.tbo.resv:
        ttm_bo_validate(other.tbo, (TtmPlace(TtmMemType.TT),))
    assert gpu.move_notifies == 3
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)  # released: tbo.dma_buf is gone
    with bo.tbo.resv:
        ttm_bo_validate(bo.tbo, (TtmPlace(TtmMemType.TT),))
    assert gpu.move_notifies == 3


# -- K-48 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k48_attach_clears_peer2peer_for_unreachable_importers_and_succeeds(profile: str) -> None:
    """K-48: a negative P2PDMA distance (unlisted Intel host bridge, or no PCI parent) clears
    peer2peer; attach still returns 0."""
    m, gpu = setup(profile, cpu="intel")
    _bo, dmabuf = exported(gpu)
    near = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    far = dma_buf_dynamic_attach(dmabuf, m.far_nic, Recorder().ops)
    virt = dma_buf_dynamic_attach(dmabuf, m.virt, Recorder().ops)
    assert (near.peer2peer, far.peer2peer, virt.peer2peer) == (True, False, False)
    assert dmabuf.attachments == [virt, far, near]
    for a in (near, far, virt):
        dma_buf_detach(dmabuf, a)
    dma_buf_put(dmabuf)


def test_k48_xgmi_peers_keep_peer2peer_even_without_a_pcie_path() -> None:
    far_fn = None
    m = make_machine("6.16", cpu="intel")
    far_fn = find_parent_pci_dev(m.far_nic)
    assert far_fn is not None
    gpu = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB, xgmi_peers=(far_fn,))
    _bo, dmabuf = exported(gpu)
    far = dma_buf_dynamic_attach(dmabuf, m.far_nic, Recorder().ops)
    assert far.peer2peer
    dma_buf_detach(dmabuf, far)
    dma_buf_put(dmabuf)


@pytest.mark.parametrize(("gfx", "cleared"), [((12, 0), True), ((11, 0), False)])
def test_k48_gfx12_dcc_bos_never_keep_peer2peer(gfx: tuple[int, int], cleared: bool) -> None:
    m, gpu = setup("6.16", gfx_version=gfx)
    bo = gpu.amdgpu_bo_create(
        4 * MiB, AmdgpuDomain.VRAM, AmdgpuCreate.VRAM_CLEARED | AmdgpuCreate.GFX12_DCC
    )
    dmabuf = gpu.export(bo)
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    assert attach.peer2peer is not cleared
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


def test_k48_7_1_runtime_suspended_exporter_clears_peer2peer_and_holds_pm_refs() -> None:
    m, gpu = setup("7.1")
    _bo, dmabuf = exported(gpu)
    gpu.runtime_pm_active = False
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    assert not attach.peer2peer and gpu.runtime_pm_refs == 1
    dma_buf_detach(dmabuf, attach)
    assert gpu.runtime_pm_refs == 0
    dma_buf_put(dmabuf)


# -- K-49 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "mn"), PROFILES_MN)
def test_k49_pin_domain_for_an_all_p2p_buffer(profile: str, mn: bool) -> None:
    """K-49: a pinned P2P import (§10.1) pins in GTT (≤6.15; 6.16 with MN=n) or in VRAM
    (6.16 with MN=y; 7.1). The GTT case migrates the buffer out of VRAM."""
    m, gpu = setup(profile, mn)
    bo, dmabuf = exported(gpu)
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert umem.attach is not None and umem.attach.peer2peer
    if (profile, mn) in VRAM_PIN:
        assert bo.location == "vram" and gpu.vram_pin_size == bo.size
        assert umem.sgt is not None and umem.sgt.page_less and umem.sgt.p2p
    else:
        assert bo.location == "gtt" and gpu.gart_pin_size == bo.size
        assert umem.sgt is not None and not umem.sgt.page_less
    assert bo.pinned and umem.attach.importer_pins == 1
    ib_umem_dmabuf_release(umem)
    assert not bo.pinned and gpu.vram_pin_size == gpu.gart_pin_size == 0
    assert not m.kernel.leaks


@pytest.mark.parametrize(("profile", "mn"), PROFILES_MN)
def test_k49_one_non_p2p_attachment_forces_gtt(profile: str, mn: bool) -> None:
    """K-49: VRAM survives only when **every** attachment present at pin time has peer2peer."""
    m, gpu = setup(profile, mn)
    bo, dmabuf = exported(gpu)
    lurker = dma_buf_dynamic_attach(dmabuf, m.virt, Recorder().ops)
    assert not lurker.peer2peer
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert bo.location == "gtt"
    ib_umem_dmabuf_release(umem)
    dma_buf_detach(dmabuf, lurker)


@pytest.mark.parametrize(("profile", "mn"), [("6.16", False), ("6.16", True), ("7.1", True)])
def test_k49_empty_domain_set_warns_and_is_einval(profile: str, mn: bool) -> None:
    """K-49: a BO that may only live in VRAM (allowed_domains = VRAM, as for DISCARDABLE BOs)
    and VRAM ruled out → WARN and -EINVAL, no pin taken (K-23)."""
    m, gpu = setup(profile, mn)
    bo, dmabuf = exported(gpu)
    bo.allowed_domains = AmdgpuDomain.VRAM
    lurker = dma_buf_dynamic_attach(dmabuf, m.virt, Recorder().ops)
    with pytest.raises(KernelError) as e:
        m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert e.value.errno is Errno.EINVAL and not bo.pinned and bo.location == "vram"
    assert m.kernel.warnings.count("amdgpu_dma_buf_pin", "!domains") == 1
    dma_buf_detach(dmabuf, lurker)


# -- K-50 ----------------------------------------------------------------------------------


def test_k50_pin_of_a_pinned_bo_outside_the_requested_domain_is_einval() -> None:
    """K-50: amdgpu_bo_pin on a pinned BO: its current domain not requested → -EINVAL;
    requested → pin_count + 1 without a move. The request is first narrowed to the BO's
    preferred domains, so a VRAM-preferring BO pinned in GTT also refuses VRAM|GTT."""
    _m, gpu = setup("6.16")
    bo = gpu.create_buffer(8 * MiB, "vram|gtt")
    with bo.tbo.resv:
        gpu.amdgpu_bo_pin(bo, AmdgpuDomain.GTT)
        epoch = bo.epoch
        with pytest.raises(KernelError) as e:
            gpu.amdgpu_bo_pin(bo, AmdgpuDomain.VRAM)
        assert e.value.errno is Errno.EINVAL and bo.tbo.pin_count == 1
        gpu.amdgpu_bo_pin(bo, AmdgpuDomain.VRAM | AmdgpuDomain.GTT)
        assert (bo.tbo.pin_count, bo.epoch, bo.location) == (2, epoch, "gtt")
        assert gpu.gart_pin_size == bo.size  # counted once, on the first pin
        gpu.amdgpu_bo_unpin(bo)
        gpu.amdgpu_bo_unpin(bo)
    assert not bo.pinned and gpu.gart_pin_size == 0
    vram_bo = gpu.create_buffer(8 * MiB, "vram")
    with vram_bo.tbo.resv:
        gpu.amdgpu_bo_pin(vram_bo, AmdgpuDomain.GTT)
        with pytest.raises(KernelError) as e:
            gpu.amdgpu_bo_pin(vram_bo, AmdgpuDomain.VRAM | AmdgpuDomain.GTT)
        assert e.value.errno is Errno.EINVAL
        gpu.amdgpu_bo_unpin(vram_bo)


# -- K-51, K-77 ----------------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "mn"), MN_ON)
def test_k51_unpinned_map_keeps_vram_for_p2p_and_migrates_for_non_p2p(
    profile: str, mn: bool
) -> None:
    """K-51: with MN on nothing pins a dynamic importer's map; a P2P attachment of a
    VRAM-preferring BO is served from VRAM (page-less), a non-P2P one migrates it to GTT."""
    m, gpu = setup(profile, mn)
    bo, dmabuf = exported(gpu)
    p2p = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    plain_rec = Recorder(allow_peer2peer=False)
    plain = dma_buf_dynamic_attach(dmabuf, m.nic, plain_rec.ops)
    with dmabuf.resv:
        sgt = dma_buf_map_attachment(p2p)
        assert (sgt.memory, sgt.page_less, bo.location, bo.pinned) == ("vram", True, "vram", False)
        dma_buf_unmap_attachment(p2p, sgt, DmaDataDirection.BIDIRECTIONAL)
        sgt = dma_buf_map_attachment(plain)
        assert (sgt.memory, sgt.page_less, bo.location) == ("gtt", False, "gtt")
        assert plain_rec.notified == [plain]  # the VRAM → GTT move was announced first
        dma_buf_unmap_attachment(plain, sgt, DmaDataDirection.BIDIRECTIONAL)
        sgt = dma_buf_map_attachment(p2p)  # GTT|VRAM keeps the compatible GTT placement
        assert sgt.memory == "gtt"
        dma_buf_unmap_attachment(p2p, sgt, DmaDataDirection.BIDIRECTIONAL)
    dma_buf_detach(dmabuf, p2p)
    dma_buf_detach(dmabuf, plain)
    dma_buf_put(dmabuf)


def test_k51_gtt_preferring_bo_is_mapped_from_gtt_even_for_p2p() -> None:
    m, gpu = setup("7.1")
    _bo, dmabuf = exported(gpu, "gtt")
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    with dmabuf.resv:
        sgt = dma_buf_map_attachment(attach)
        assert sgt.memory == "gtt" and not sgt.p2p
        dma_buf_unmap_attachment(attach, sgt, DmaDataDirection.BIDIRECTIONAL)
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


@pytest.mark.parametrize(("profile", "mn"), PROFILES_MN)
def test_k77_dynamic_p2p_importer_first_map(profile: str, mn: bool) -> None:
    """K-77 (§10.2): MN=n -- the core pins on the dynamic importer's map and amdgpu pins in
    GTT, so the VRAM buffer migrates to system memory; MN=y (and 7.1) -- nothing pins, the
    P2P mapping stays in VRAM."""
    m, gpu = setup(profile, mn)
    bo, dmabuf = exported(gpu)
    rec = Recorder()
    umem = ib_umem_dmabuf_get(
        m.kernel, m.nic, 0, bo.size, m.fd(dmabuf), ACCESS, rec.ops, files=m.files
    )
    with dmabuf.resv:
        ib_umem_dmabuf_map_pages(umem)
    assert umem.sgt is not None
    if mn:
        assert (bo.location, bo.pinned, umem.sgt.memory) == ("vram", False, "vram")
    else:
        assert (bo.location, bo.pinned, umem.sgt.memory) == ("gtt", True, "gtt")
        assert umem.attach is not None and umem.attach.core_pins == 1
    ib_umem_dmabuf_release(umem)
    assert not bo.pinned and not m.kernel.leaks


# -- K-76 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "mn"), VRAM_PIN)
def test_k76_static_importer_of_a_vram_pinned_buffer_fails_with_einval(
    profile: str, mn: bool
) -> None:
    """K-76 (§10.4): once pinned in VRAM (every attachment P2P at pin time), a newly attached
    static importer's map asks for a GTT pin, which amdgpu_bo_pin rejects; the existing pin
    is untouched."""
    m, gpu = setup(profile, mn)
    bo, dmabuf = exported(gpu)
    umem = m.pinned_umem(m.nic, m.fd(dmabuf), bo.size)
    assert bo.location == "vram"
    display = dma_buf_attach(dmabuf, m.nic)  # attach itself does nothing (≥6.16)
    with dmabuf.resv, pytest.raises(KernelError) as e:
        dma_buf_map_attachment(display)
    assert e.value.errno is Errno.EINVAL
    assert (bo.location, bo.tbo.pin_count, display.core_pins) == ("vram", 1, 0)
    dma_buf_detach(dmabuf, display)
    ib_umem_dmabuf_release(umem)
    assert not m.kernel.leaks


# -- K-78 ----------------------------------------------------------------------------------


def test_k78_vram_table_for_an_xgmi_importer_warns_and_is_einval() -> None:
    m = make_machine("7.1")
    far_fn = find_parent_pci_dev(m.far_nic)
    assert far_fn is not None
    gpu = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB, xgmi_peers=(far_fn,))
    _bo, dmabuf = exported(gpu)
    attach = dma_buf_dynamic_attach(dmabuf, m.far_nic, Recorder().ops)
    with dmabuf.resv, pytest.raises(KernelError) as e:
        dma_buf_map_attachment(attach)
    assert e.value.errno is Errno.EINVAL
    assert m.kernel.warnings.count("amdgpu_dma_buf_map", "XGMI") == 1
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


def test_k78_map_of_a_bo_pinned_in_system_memory_is_einval() -> None:
    """K-78: any memory type other than TT or VRAM → -EINVAL (a pinned BO is not validated)."""
    m, gpu = setup("6.16", mn=True)
    bo, dmabuf = exported(gpu, "system")
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    with dmabuf.resv:
        gpu.amdgpu_bo_pin(bo, AmdgpuDomain.CPU)
        assert bo.location == "system"
        with pytest.raises(KernelError) as e:
            dma_buf_map_attachment(attach)
        assert e.value.errno is Errno.EINVAL
        gpu.amdgpu_bo_unpin(bo)
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


def test_k78_tt_dma_mapping_failure_is_ebusy() -> None:
    m, gpu = setup("6.16")
    _bo, dmabuf = exported(gpu, "gtt")
    gpu.dma_map_fault = lambda dev: True
    static = dma_buf_attach(dmabuf, m.nic)
    try:
        with dmabuf.resv, pytest.raises(KernelError) as e:
            dma_buf_map_attachment(static)
        assert e.value.errno is Errno.EBUSY
    finally:
        dma_buf_detach(dmabuf, static)


# -- K-79, K-80: amdgpu as an importer -------------------------------------------------------


def two_gpus(profile: str = "6.16", mn: bool = True) -> tuple[Machine, AmdgpuDevice, AmdgpuDevice]:
    m = make_machine(profile_mn(profile, mn))
    a = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB, name="gpuA")
    b_fn = find_parent_pci_dev(m.far_nic)
    assert b_fn is not None
    b = AmdgpuDevice(m.kernel, b_fn, vram_size=256 * MiB, name="gpuB")
    return m, a, b


def test_k79_userptr_bos_cannot_be_pinned_or_exported() -> None:
    _m, gpu = setup("6.16")
    bo = gpu.create_buffer(4 * MiB, "gtt")
    bo.userptr = True
    with bo.tbo.resv, pytest.raises(KernelError) as e:
        gpu.amdgpu_bo_pin(bo, AmdgpuDomain.GTT)
    assert e.value.errno is Errno.EPERM
    with pytest.raises(KernelError) as e:
        gpu.export(bo)
    assert e.value.errno is Errno.EPERM


def test_k79_imported_bo_pins_only_in_gtt_and_forwards_the_first_pin_and_last_unpin() -> None:
    m, a, b = two_gpus()
    src, dmabuf = exported(a)
    imp = b.prime_import(dmabuf)
    assert imp.is_import and imp is not src
    attach = imp.tbo.import_attach
    assert isinstance(attach, DmaBufAttachment) and attach.peer2peer  # Zen: P2P
    with dmabuf.resv:
        with pytest.raises(KernelError) as e:
            b.amdgpu_bo_pin(imp, AmdgpuDomain.VRAM)
        assert e.value.errno is Errno.EINVAL and not src.pinned
        b.amdgpu_bo_pin(imp, AmdgpuDomain.GTT | AmdgpuDomain.VRAM)
        assert src.tbo.pin_count == 1 and imp.tbo.pin_count == 1 and imp.location == "gtt"
        assert src.location == "vram"  # 6.16, MN on, the only attachment is P2P (K-49)
        b.amdgpu_bo_pin(imp, AmdgpuDomain.GTT)
        assert src.tbo.pin_count == 1 and imp.tbo.pin_count == 2  # not forwarded again
        b.amdgpu_bo_unpin(imp)
        assert src.tbo.pin_count == 1
        b.amdgpu_bo_unpin(imp)
        assert src.tbo.pin_count == 0 and not imp.pinned  # the last unpin is forwarded
    b.release_import(imp)
    dma_buf_put(dmabuf)
    assert not m.kernel.leaks


def test_k79_own_export_comes_back_as_the_same_bo_with_a_gem_reference() -> None:
    """amdgpu_gem_prime_import of our own export: drm_gem_object_get, not get_dma_buf, so
    closing the handle (gem_object_put) and the fd frees everything."""
    _m, a, _b = two_gpus()
    src, dmabuf = exported(a)
    refs = src.refs
    assert a.prime_import(dmabuf) is src
    assert dmabuf.refcount == 1 and src.refs == refs + 1
    a.gem_object_put(src)
    assert src.refs == refs
    dma_buf_put(dmabuf)


def test_k80_notified_import_is_gutted_and_remapped_at_next_use() -> None:
    """K-80: the exporter moves its BO; the amdgpu importer's move_notify validates the import
    BO with an empty placement (gutting: backing and mapping dropped); the next use maps the
    new location."""
    m, a, b = two_gpus()
    src, dmabuf = exported(a)
    imp = b.prime_import(dmabuf)
    with dmabuf.resv:
        sgt = b.import_bind(imp)
        assert sgt.memory == "vram" and imp.location == "gtt" and a.mapping_current(dmabuf, sgt)
        gutted = b.bdev.gutted
        ttm_bo_validate(src.tbo, (TtmPlace(TtmMemType.TT),))  # the exporter moves it
        assert b.bdev.gutted == gutted + 1
        assert imp.tbo.resource is None and imp.import_sgt is None
        assert not a.mapping_current(dmabuf, sgt)
        new = b.import_bind(imp)
        assert new is not sgt and new.memory == "gtt" and a.mapping_current(dmabuf, new)
        assert a.move_notifies == 1 and b.move_notifies == 0  # imports never notify (K-38)
    b.release_import(imp)
    dma_buf_put(dmabuf)
    assert not m.kernel.leaks
