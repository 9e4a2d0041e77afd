"""TTM: pin counting, validation, two-pass allocation, eviction, fences, dmem charging.

kernel-semantics.md §9 and checklist items K-37, K-59 … K-64, K-86 … K-88; policy-semantics.md
§2.6 … §2.8 for the dmem controller TTM consults. Managers are a few pages large so every
pressure situation is built by hand and is deterministic.
"""

from __future__ import annotations

import pytest

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBufAttachment,
    DmaBufAttachOps,
    DmaDataDirection,
    dma_buf_attach,
    dma_buf_dynamic_attach,
    dma_buf_map_attachment,
    dma_buf_pin,
)
from pinlab.kernel.dmem import DmemChargeError, DmemRegion
from pinlab.kernel.errno import Errno, KernelBug, KernelError, LockingError, err
from pinlab.kernel.kernel import Kernel, Task
from pinlab.kernel.profile import PRESETS, get_profile
from pinlab.kernel.resv import DmaResvUsage
from pinlab.kernel.ttm import (
    CopyJob,
    TtmBoType,
    TtmBufferObject,
    TtmDevice,
    TtmMemType,
    TtmPlace,
    TtmPlFlag,
    TtmResource,
    TtmResourceManager,
    _lru_walk,
    placement,
    ttm_bo_clear,
    ttm_bo_init_validate,
    ttm_bo_move_to_lru_tail,
    ttm_bo_pin,
    ttm_bo_release,
    ttm_bo_unpin,
    ttm_bo_validate,
)
from tests.kernel.fakes import ExportingFuncs, Importer, TtmExporter

PAGE = 4096
VRAM, TT, SYSTEM = TtmMemType.VRAM, TtmMemType.TT, TtmMemType.SYSTEM
ALL_PRESETS = list(PRESETS)
FLAG_PRESETS = [p for p in PRESETS if PRESETS[p].ttm_desired_fallback]
DMEM_PRESETS = [p for p in PRESETS if PRESETS[p].dmem]
NO_DMEM_PRESETS = [p for p in PRESETS if not PRESETS[p].dmem]
# without K-126 the device-level walk computes protection from the root (P-33)
ROOT_REFERENCE_PRESETS = [p for p in DMEM_PRESETS if not PRESETS[p].dmem_protected_alloc]


# -- helpers ---------------------------------------------------------------------------------


def make_dev(
    profile: str = "6.16",
    *,
    vram: int = 16,
    gtt: int = 16,
    system: int = 64,
    propagate_enospc: bool = False,
) -> TtmDevice:
    """A device with VRAM/GTT/SYSTEM managers of the given sizes in pages (kernel:
    ``bdev.kernel``)."""
    kernel = Kernel(profile)
    bdev = TtmDevice(kernel, "gpu0", ExportingFuncs(), propagate_enospc=propagate_enospc)
    bdev.add_manager(VRAM, vram * PAGE, name="gpu0:vram")
    bdev.add_manager(TT, gtt * PAGE, name="gpu0:gtt")
    bdev.add_manager(SYSTEM, system * PAGE, name="gpu0:system")
    return bdev


def new_bo(
    bdev: TtmDevice,
    pages: int,
    *places: TtmPlace | TtmMemType,
    bo_type: TtmBoType = TtmBoType.DEVICE,
    name: str = "",
) -> TtmBufferObject:
    return ttm_bo_init_validate(bdev, pages * PAGE, placement(*places), bo_type, name=name)


def pin(bo: TtmBufferObject) -> None:
    with bo.resv:
        ttm_bo_pin(bo)


def unpin(bo: TtmBufferObject) -> None:
    with bo.resv:
        ttm_bo_unpin(bo)


def validate(bo: TtmBufferObject, *places: TtmPlace | TtmMemType) -> None:
    with bo.resv:
        ttm_bo_validate(bo, placement(*places))


def man(bdev: TtmDevice, mem_type: TtmMemType) -> TtmResourceManager:
    m = bdev.manager(mem_type)
    assert m is not None
    return m


def where(bo: TtmBufferObject) -> tuple[TtmMemType | None, TtmResource | None]:
    """Memory type and resource (compared by identity): changes whenever the BO moves."""
    return bo.mem_type, bo.resource


def kernel_usages(bo: TtmBufferObject) -> dict[object, DmaResvUsage]:
    return {f: u for f, u in bo.resv.iter_fences(DmaResvUsage.BOOKKEEP)}


def assert_errno(exc: pytest.ExceptionInfo[KernelError], errno: Errno) -> None:
    assert exc.value.errno is errno, str(exc.value)


# -- K-59: unpin at zero ---------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k59_unpin_with_zero_pin_count_warns_once_and_changes_nothing(profile: str) -> None:
    """K-59: ``ttm_bo_unpin`` at pin_count 0 is a WARN_ON_ONCE and leaves the BO alone."""
    bdev = make_dev(profile)
    kernel = bdev.kernel
    bo = new_bo(bdev, 1, VRAM)
    before = where(bo)
    with bo.resv:
        ttm_bo_unpin(bo)
        ttm_bo_unpin(bo)
    assert bo.pin_count == 0
    assert where(bo) == before
    assert bo.serial in man(bdev, VRAM).lru and bo.serial not in man(bdev, VRAM).pinned
    recs = [r for r in kernel.warnings.records() if r.function == "ttm_bo_unpin"]
    assert len(recs) == 1 and recs[0].once
    assert recs[0].count == 2 and recs[0].reported == 1


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k59_pin_counts_and_lru_membership(profile: str) -> None:
    """§9.1: pins stack; 0 → 1 leaves the LRU for the unevictable list, 1 → 0 goes back to the
    LRU *tail*; pinning never moves the BO."""
    bdev = make_dev(profile)
    kernel = bdev.kernel
    a = new_bo(bdev, 1, VRAM, name="a")
    b = new_bo(bdev, 1, VRAM, name="b")
    vram = man(bdev, VRAM)
    before = where(a)
    pin(a)
    pin(a)
    assert a.pin_count == 2 and where(a) == before
    assert a.serial not in vram.lru and vram.pinned[a.serial] is a
    assert vram.pinned_bytes == PAGE
    unpin(a)
    assert a.pin_count == 1 and a.serial not in vram.lru
    unpin(a)
    assert a.pin_count == 0 and a.serial not in vram.pinned
    assert vram.lru_bos() == [b, a]  # back at the tail
    assert len(kernel.warnings) == 0


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_pin_change_observer_hears_only_the_0_1_transitions(profile: str) -> None:
    """§9.1: only pin 0 → 1 and unpin 1 → 0 change the LRU membership, so the manager's
    pin-change observer hears of those, not of stacked pins; pinning a BO without backing
    (gutted, K-86) touches no manager."""
    bdev = make_dev(profile)
    a = new_bo(bdev, 1, VRAM)
    calls: list[int] = []
    man(bdev, VRAM).on_pin_change = lambda: calls.append(a.pin_count)
    pin(a)
    pin(a)
    unpin(a)
    unpin(a)
    assert calls == [1, 0]
    g = new_bo(bdev, 1, VRAM)
    validate(g)
    assert g.resource is None
    pin(g)
    assert g.pin_count == 1 and calls == [1, 0]
    assert g.serial not in man(bdev, VRAM).pinned
    unpin(g)
    assert g.pin_count == 0 and calls == [1, 0]


# -- lock rules --------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_validate_pin_unpin_clear_need_the_resv(profile: str) -> None:
    """§9.1/§9.3: ttm_bo_validate, ttm_bo_pin, ttm_bo_unpin (and the clear) assert the resv."""
    bdev = make_dev(profile)
    kernel = bdev.kernel
    bo = new_bo(bdev, 1, VRAM)
    with pytest.raises(LockingError):
        ttm_bo_validate(bo, placement(TT))
    with pytest.raises(LockingError):
        ttm_bo_pin(bo)
    pin(bo)
    with pytest.raises(LockingError):
        ttm_bo_unpin(bo)
    with pytest.raises(LockingError):
        ttm_bo_clear(bo)
    assert bo.pin_count == 1 and bo.mem_type is VRAM and not bdev.copy_queue
    # Held by another task is not held by the caller either.
    kernel.current = Task(1, "holder")
    bo.resv.lock()
    kernel.current = Task(2, "other")
    with pytest.raises(LockingError):
        ttm_bo_unpin(bo)
    with pytest.raises(LockingError):
        ttm_bo_validate(bo, placement(VRAM))
    assert bo.pin_count == 1


# -- K-37 / K-60 / K-61: pinned BOs never move -----------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k60_eviction_skips_pinned_bos(profile: str) -> None:
    """K-60: the LRU walk never picks a pinned BO, even the least recently used one."""
    bdev = make_dev(profile, vram=4)
    p = new_bo(bdev, 2, VRAM, name="pinned")  # oldest
    u = new_bo(bdev, 2, VRAM, name="unpinned")
    pin(p)
    p_before = where(p)
    n = new_bo(bdev, 2, VRAM, name="new")
    assert n.mem_type is VRAM
    assert u.mem_type is TT  # the unpinned one went
    assert where(p) == p_before
    # Now everything in VRAM is pinned: nothing can be evicted.
    pin(n)
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, VRAM)
    assert_errno(exc, Errno.ENOMEM)
    assert where(p) == p_before and n.mem_type is VRAM
    assert man(bdev, VRAM).evictions == 1


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k61_validate_pinned_bo(profile: str) -> None:
    """K-61: a pinned BO validates to 0 when its placement already satisfies the request (any
    place in the list), and to -EINVAL when a move would be needed; nothing moves."""
    bdev = make_dev(profile)
    bo = new_bo(bdev, 2, VRAM)
    pin(bo)
    before, epoch = where(bo), bo.epoch
    validate(bo, VRAM)
    validate(bo, TT, VRAM)
    with pytest.raises(KernelError) as exc:
        validate(bo, TT)
    assert_errno(exc, Errno.EINVAL)
    with pytest.raises(KernelError) as exc:
        validate(bo, TtmPlace(TT), TtmPlace(SYSTEM))
    assert_errno(exc, Errno.EINVAL)
    assert where(bo) == before and bo.epoch == epoch
    assert not bdev.copy_queue and bdev.moves == 0
    unpin(bo)
    validate(bo, TT)
    assert bo.mem_type is TT and bdev.moves == 1


@pytest.mark.parametrize("profile", FLAG_PRESETS)
def test_k61_pinned_bo_in_fallback_place_is_einval(profile: str) -> None:
    """K-61 with K-88 (kernel-faithful detail): ttm_bo_validate checks compatibility *before*
    the pin check in its first round, and that round ignores FALLBACK places; so a BO pinned in
    a place that the request lists only as FALLBACK gets -EINVAL although it could stay."""
    bdev = make_dev(profile)
    bo = new_bo(bdev, 1, TT)
    pin(bo)
    with pytest.raises(KernelError) as exc:
        validate(bo, TtmPlace(VRAM), TtmPlace(TT, TtmPlFlag.FALLBACK))
    assert_errno(exc, Errno.EINVAL)
    assert bo.mem_type is TT
    # Pre-6.9 (5.16): no flags, GTT simply satisfies the request.
    bdev516 = make_dev("5.16")
    bo516 = new_bo(bdev516, 1, TT)
    pin(bo516)
    validate(bo516, TtmPlace(VRAM), TtmPlace(TT, TtmPlFlag.FALLBACK))
    assert bo516.mem_type is TT


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k37_exporter_never_moves_a_pinned_buffer(profile: str) -> None:
    """K-37: while a dma-buf pin holds the BO, validation refuses to move it and eviction
    skips it, so no importer is notified; once unpinned it moves and notifies."""
    bdev = make_dev(profile, vram=8, gtt=4)
    exporter = TtmExporter(bdev)  # pins into GTT
    bo = exporter.create_bo(4 * PAGE, VRAM)
    dmabuf = exporter.export(bo)
    imp = Importer("nic0")
    attach = dma_buf_dynamic_attach(dmabuf, imp.dev, imp.ops, imp)
    with dmabuf.resv:
        dma_buf_pin(attach)
    assert bo.pin_count == 1 and bo.mem_type is TT
    imp.notified.clear()
    pinned_at = where(bo)
    # pressure on GTT: the only BO there is pinned
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, TT)
    assert_errno(exc, Errno.ENOMEM)
    with pytest.raises(KernelError) as exc:
        validate(bo, VRAM)
    assert_errno(exc, Errno.EINVAL)
    assert where(bo) == pinned_at and imp.notified == []
    with dmabuf.resv:
        ttm_bo_unpin(bo)
    validate(bo, VRAM)
    assert bo.mem_type is VRAM and imp.notified == [attach]


# -- K-62 / K-88: allocation passes ------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k62_places_are_tried_in_order(profile: str) -> None:
    """K-62: with room everywhere the first listed place wins."""
    bdev = make_dev(profile)
    assert new_bo(bdev, 1, TT, VRAM).mem_type is TT
    assert new_bo(bdev, 1, VRAM, TT).mem_type is VRAM
    assert new_bo(bdev, 1, SYSTEM, VRAM).mem_type is SYSTEM
    assert bdev.moves == 0 and not bdev.copy_queue  # a new BO needs no copy


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k62_first_pass_never_evicts(profile: str) -> None:
    """K-62/K-88: a later place with room in pass 1 beats evicting from an earlier place."""
    bdev = make_dev(profile, vram=2)
    u = new_bo(bdev, 2, VRAM)
    n = new_bo(bdev, 2, VRAM, TT)
    assert n.mem_type is TT and u.mem_type is VRAM
    assert man(bdev, VRAM).evictions == 0
    # VRAM-only has to evict, in pass 2
    m = new_bo(bdev, 2, VRAM)
    assert m.mem_type is VRAM and u.mem_type is TT
    assert man(bdev, VRAM).evictions == 1


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k62_system_is_never_evicted_from(profile: str) -> None:
    """K-62: SYSTEM is full of evictable BOs; a SYSTEM-only allocation fails (-ENOMEM) without
    evicting anything."""
    bdev = make_dev(profile, system=4)
    s1 = new_bo(bdev, 2, SYSTEM)
    s2 = new_bo(bdev, 2, SYSTEM)
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 1, SYSTEM)
    assert_errno(exc, Errno.ENOMEM)
    assert s1.mem_type is SYSTEM and s2.mem_type is SYSTEM
    assert man(bdev, SYSTEM).evictions == 0 and man(bdev, SYSTEM).used == 4 * PAGE


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k62_vram_full_of_pinned_falls_back_or_enomem(profile: str) -> None:
    """K-62, §9.3 last paragraph: VRAM full of pinned BOs, nothing evictable → -EBUSY inside,
    the next place is tried; with VRAM the only place, -ENOMEM; nothing is left allocated."""
    bdev = make_dev(profile, vram=4)
    pinned = [new_bo(bdev, 2, VRAM) for _ in range(2)]
    for bo in pinned:
        pin(bo)
    positions = [where(bo) for bo in pinned]
    fallback = new_bo(bdev, 2, VRAM, TT, SYSTEM)
    assert fallback.mem_type is TT
    used = {t: man(bdev, t).used for t in (VRAM, TT, SYSTEM)}
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, VRAM)
    assert_errno(exc, Errno.ENOMEM)
    assert {t: man(bdev, t).used for t in (VRAM, TT, SYSTEM)} == used
    assert [where(bo) for bo in pinned] == positions


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k62_final_enospc_is_reported_as_enomem(profile: str) -> None:
    """K-62: every place failing is -ENOSPC inside TTM, -ENOMEM from ttm_bo_validate."""
    bdev = make_dev(profile, vram=2, gtt=2)
    bo = new_bo(bdev, 1, SYSTEM)
    for t in (VRAM, TT):
        pin(new_bo(bdev, 2, t))
    with pytest.raises(KernelError) as exc:
        validate(bo, VRAM, TT)
    assert_errno(exc, Errno.ENOMEM)
    assert bo.mem_type is SYSTEM


def test_k62_propagate_enospc_in_7_1() -> None:
    """K-62 (7.1): with TTM_ALLOCATION_PROPAGATE_ENOSPC the final failure is -ENOSPC."""
    bdev = make_dev("7.1", vram=2, propagate_enospc=True)
    pin(new_bo(bdev, 2, VRAM))
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 1, VRAM)
    assert_errno(exc, Errno.ENOSPC)
    # without the flag the same preset reports -ENOMEM
    bdev = make_dev("7.1", vram=2)
    pin(new_bo(bdev, 2, VRAM))
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 1, VRAM)
    assert_errno(exc, Errno.ENOMEM)


@pytest.mark.parametrize(
    "profile", [p for p in PRESETS if not PRESETS[p].ttm_propagate_enospc_available]
)
def test_k62_propagate_enospc_does_not_exist_before_7_1(profile: str) -> None:
    """§1.5: the device flag is only available in 7.1; asking for it earlier is rejected."""
    with pytest.raises(ValueError, match="PROPAGATE_ENOSPC"):
        make_dev(profile, propagate_enospc=True)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k62_victim_that_cannot_be_evicted_is_skipped(profile: str) -> None:
    """K-62 / §9.3: a victim whose own eviction finds no space is skipped (the kernel's
    ttm_bo_evict_cb turns its -ENOSPC into -EBUSY, "skip"), and the walk goes on to the
    next victim."""
    bdev = make_dev(profile, vram=4, gtt=2, system=2)
    kernel = bdev.kernel
    stuck = new_bo(bdev, 2, VRAM, name="stuck")  # LRU-oldest; GTT and SYSTEM will be full
    sg = new_bo(bdev, 2, VRAM, bo_type=TtmBoType.SG, name="sg")  # evictable by gutting
    pin(new_bo(bdev, 2, TT))
    pin(new_bo(bdev, 2, SYSTEM))
    stuck_at = where(stuck)
    n = new_bo(bdev, 2, VRAM)
    assert n.mem_type is VRAM
    assert where(stuck) == stuck_at
    assert sg.resource is None and bdev.gutted == 1
    assert any("Failed to find memory space" in line for line in kernel.dmesg)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k60_bo_locked_by_the_caller_is_not_evicted(profile: str) -> None:
    """§2.8 of policy-semantics / ttm_lru_walk_trylock: eviction trylocks each victim, and a
    trylock of a resv the caller already holds fails, so such a BO is skipped."""
    bdev = make_dev(profile, vram=2)
    held = new_bo(bdev, 2, VRAM)
    before = where(held)
    with held.resv, pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, VRAM)
    assert_errno(exc, Errno.ENOMEM)
    assert where(held) == before
    # unlocked, it is evicted normally
    assert new_bo(bdev, 2, VRAM).mem_type is VRAM and held.mem_type is TT


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k63_bo_being_validated_is_not_evicted_by_a_nested_walk(profile: str) -> None:
    """K-63 with §2.8: validating X (in GTT) into full VRAM evicts V towards GTT, which is full
    of X itself. X's resv is held by the caller, so the nested GTT walk skips it and V takes its
    SYSTEM fallback; X moves exactly once and its importer is notified exactly once."""
    bdev = make_dev(profile, vram=2, gtt=2)
    exporter = TtmExporter(bdev)
    v = new_bo(bdev, 2, VRAM, name="v")
    x = exporter.create_bo(2 * PAGE, TT, name="x")
    imp = Importer()
    attach = dma_buf_dynamic_attach(exporter.export(x), imp.dev, imp.ops, imp)
    validate(x, VRAM)
    assert x.mem_type is VRAM and v.mem_type is SYSTEM
    assert imp.notified == [attach]
    assert bdev.moves == 2  # v: VRAM → SYSTEM, x: GTT → VRAM


@pytest.mark.parametrize("profile", FLAG_PRESETS)
def test_k88_fallback_place_skipped_in_pass_1(profile: str) -> None:
    """K-88: pass 1 skips FALLBACK places and never evicts, so with VRAM full a new BO with
    (VRAM, GTT|FALLBACK) evicts from VRAM in pass 2 instead of going to GTT."""
    bdev = make_dev(profile, vram=2)
    u = new_bo(bdev, 2, VRAM)
    n = new_bo(bdev, 2, TtmPlace(VRAM), TtmPlace(TT, TtmPlFlag.FALLBACK))
    assert n.mem_type is VRAM and u.mem_type is TT
    # If VRAM cannot be freed, the FALLBACK place is used in pass 2.
    pin(n)
    f = new_bo(bdev, 2, TtmPlace(VRAM), TtmPlace(TT, TtmPlFlag.FALLBACK))
    assert f.mem_type is TT


@pytest.mark.parametrize("profile", FLAG_PRESETS)
def test_k88_desired_place_skipped_in_pass_2(profile: str) -> None:
    """K-88: pass 2 skips DESIRED places, so with VRAM and GTT both full of evictable BOs a
    (VRAM|DESIRED, GTT) allocation evicts from GTT and never from VRAM."""
    bdev = make_dev(profile, vram=2, gtt=2)
    v = new_bo(bdev, 2, VRAM)
    g = new_bo(bdev, 2, TT)
    n = new_bo(bdev, 2, TtmPlace(VRAM, TtmPlFlag.DESIRED), TtmPlace(TT))
    assert n.mem_type is TT and v.mem_type is VRAM and g.mem_type is SYSTEM
    assert man(bdev, VRAM).evictions == 0


@pytest.mark.parametrize("profile", FLAG_PRESETS)
def test_k88_resident_bo_stays_in_fallback_place(profile: str) -> None:
    """K-88 via ttm_resource_compatible: a BO already in a FALLBACK place is not moved into a
    full preferred place by eviction; the forcing round finds its current place compatible."""
    bdev = make_dev(profile, vram=2)
    v = new_bo(bdev, 2, VRAM)
    bo = new_bo(bdev, 2, TT)
    validate(bo, TtmPlace(VRAM), TtmPlace(TT, TtmPlFlag.FALLBACK))
    assert bo.mem_type is TT and v.mem_type is VRAM
    # With room in VRAM the first round moves it there.
    with v.resv:
        ttm_bo_validate(v, placement(SYSTEM))
    validate(bo, TtmPlace(VRAM), TtmPlace(TT, TtmPlFlag.FALLBACK))
    assert bo.mem_type is VRAM


def test_k88_flags_ignored_in_5_16() -> None:
    """K-88 (5.16, pre-6.9 busy placements): DESIRED/FALLBACK mean nothing; the places are
    tried in order in both passes."""
    bdev = make_dev("5.16", vram=2, gtt=2)
    u = new_bo(bdev, 2, VRAM)
    n = new_bo(bdev, 2, TtmPlace(VRAM), TtmPlace(TT, TtmPlFlag.FALLBACK))
    assert n.mem_type is TT and u.mem_type is VRAM  # GTT taken in pass 1
    d = new_bo(bdev, 2, TtmPlace(VRAM, TtmPlFlag.DESIRED), TtmPlace(TT))
    assert d.mem_type is VRAM and u.mem_type is SYSTEM  # VRAM evicted in pass 2


@pytest.mark.parametrize("profile", FLAG_PRESETS)
def test_k88_compatible_looks_past_a_skipped_place_of_its_type(profile: str) -> None:
    """K-88 via ttm_resource_compatible: a place of the BO's memory type that is skipped (here
    FALLBACK in the idle pass) does not end the search; a later place of the same type still
    makes the current resource compatible, so the BO does not move."""
    bdev = make_dev(profile)
    bo = new_bo(bdev, 2, TT)
    before = where(bo)
    validate(bo, TtmPlace(TT, TtmPlFlag.FALLBACK), TtmPlace(TT))
    assert where(bo) == before and not bdev.copy_queue


# -- fragmentation -----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_contiguous_request_fails_on_fragmented_vram(profile: str) -> None:
    """Real fragmentation: 8 free pages in two 4-page holes between pinned BOs. A contiguous
    8-page request fails (-ENOMEM) although the total free space suffices; a non-contiguous
    one succeeds in two segments."""
    bdev = make_dev(profile, vram=16)
    bos = [new_bo(bdev, 4, VRAM) for _ in range(4)]
    pin(bos[0])
    pin(bos[2])
    for bo in (bos[1], bos[3]):
        with bo.resv:
            ttm_bo_validate(bo, placement(SYSTEM))
    vram = man(bdev, VRAM)
    assert vram.allocator.free_bytes == 8 * PAGE and vram.allocator.largest_free == 4 * PAGE
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 8, TtmPlace(VRAM, TtmPlFlag.CONTIGUOUS))
    assert_errno(exc, Errno.ENOMEM)
    assert vram.used == 8 * PAGE
    bo = new_bo(bdev, 8, VRAM)
    assert bo.resource is not None and not bo.resource.contiguous
    assert len(bo.resource.allocation.segments) == 2
    vram.allocator.check_invariants()


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_contiguous_place_rejects_a_split_resource(profile: str) -> None:
    """ttm_resource_compatible: a CONTIGUOUS place needs a contiguous resource. A BO split over
    two holes between pinned BOs is compatible with plain VRAM (no move) but not with
    VRAM|CONTIGUOUS, which needs a move; here no 4-page hole exists, so -ENOMEM."""
    bdev = make_dev(profile, vram=8)
    a, b, c, d = (new_bo(bdev, 2, VRAM) for _ in range(4))
    validate(a, SYSTEM)
    validate(c, SYSTEM)
    pin(b)
    pin(d)
    split = new_bo(bdev, 4, VRAM)
    assert split.resource is not None and not split.resource.contiguous
    before = where(split)
    validate(split, VRAM)
    assert where(split) == before
    # a CONTIGUOUS place the split resource fails does not end the search: a later plain
    # VRAM place is compatible, so nothing moves
    validate(split, TtmPlace(VRAM, TtmPlFlag.CONTIGUOUS), TtmPlace(VRAM))
    assert where(split) == before
    with pytest.raises(KernelError) as exc:
        validate(split, TtmPlace(VRAM, TtmPlFlag.CONTIGUOUS))
    assert_errno(exc, Errno.ENOMEM)
    assert where(split) == before
    # with room elsewhere a contiguous place in another domain is taken
    validate(split, TtmPlace(VRAM, TtmPlFlag.CONTIGUOUS), TtmPlace(TT, TtmPlFlag.CONTIGUOUS))
    assert split.mem_type is TT and split.resource is not None and split.resource.contiguous


# -- LRU -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_lru_least_recently_used_is_evicted_first(profile: str) -> None:
    """§9.2/§9.4: the walk evicts least recently used first; ttm_bo_move_to_lru_tail marks a BO
    as just used."""
    bdev = make_dev(profile, vram=3)
    a, b, c = (new_bo(bdev, 1, VRAM, name=n) for n in "abc")
    vram = man(bdev, VRAM)
    assert vram.lru_bos() == [a, b, c]
    ttm_bo_move_to_lru_tail(a)
    assert vram.lru_bos() == [b, c, a]
    new_bo(bdev, 1, VRAM)
    assert (a.mem_type, b.mem_type, c.mem_type) == (VRAM, TT, VRAM)
    new_bo(bdev, 1, VRAM)
    assert (a.mem_type, c.mem_type) == (VRAM, TT)
    new_bo(bdev, 1, VRAM)
    assert a.mem_type is TT


def test_lru_walk_follows_the_live_lru_and_visits_each_bo_once() -> None:
    """The eviction walk walks the LRU as it is now, not a copy taken when it started: a BO
    that left the LRU meanwhile is not visited, one that joined it is, at its place, and a BO
    moved to the tail after its visit is not visited again."""
    bdev = make_dev(vram=8)
    a, b, c, d = (new_bo(bdev, 1, VRAM, name=n) for n in "abcd")
    vram = man(bdev, VRAM)
    walk = _lru_walk(vram)
    assert next(walk) is a
    ttm_bo_move_to_lru_tail(a)  # visited, now last: not visited again
    assert next(walk) is b
    pin(c)  # leaves the LRU before the walk reaches it
    e = new_bo(bdev, 1, VRAM, name="e")  # joins at the tail
    assert list(walk) == [d, e]
    assert vram.lru_bos() == [b, d, a, e]


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_lru_move_to_tail_ignores_pinned(profile: str) -> None:
    """A pinned BO is not on the LRU; ttm_bo_move_to_lru_tail leaves it there."""
    bdev = make_dev(profile)
    a = new_bo(bdev, 1, VRAM)
    pin(a)
    ttm_bo_move_to_lru_tail(a)
    assert a.serial not in man(bdev, VRAM).lru


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k62_places_without_a_usable_manager_are_skipped(profile: str) -> None:
    """K-62 (ttm_bo_alloc_resource): a place whose memory type has no manager, or whose manager
    is not in use, is passed over and the next place is tried."""
    kernel = Kernel(profile)
    bdev = TtmDevice(kernel, "gpu0", ExportingFuncs())
    bdev.add_manager(VRAM, 4 * PAGE)
    bdev.add_manager(SYSTEM, 4 * PAGE)
    bo = new_bo(bdev, 1, TT, SYSTEM)  # no GTT manager
    assert bo.mem_type is SYSTEM
    man(bdev, VRAM).use_type = False
    bo2 = new_bo(bdev, 1, VRAM, SYSTEM)
    assert bo2.mem_type is SYSTEM and man(bdev, VRAM).used == 0


class _KeepFuncs(ExportingFuncs):
    """A driver whose ``eviction_valuable`` refuses BOs named ``keep*``."""

    def eviction_valuable(self, bo: TtmBufferObject, place: TtmPlace) -> bool:
        return not bo.name.startswith("keep")


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k60_walk_passes_over_a_victim_the_driver_does_not_value(profile: str) -> None:
    """K-60 (ttm_bo_evict_cb): a victim the driver's ``eviction_valuable`` refuses is skipped
    and the walk goes on to the next one; it is not evicted although it is the LRU-oldest."""
    bdev = make_dev(profile, vram=2)
    bdev.funcs = _KeepFuncs()
    keep = new_bo(bdev, 1, VRAM, name="keep")
    other = new_bo(bdev, 1, VRAM, name="other")
    new_bo(bdev, 1, VRAM)
    assert keep.mem_type is VRAM and other.mem_type is TT


class _RevokeHook:
    """A device's ``revoke_pinned`` hook (the opt-in revoke pass, ``revocable-pins``): records
    the BOs it is offered and runs ``side_effect`` on the first; revokes nothing unless
    ``claim`` (then it answers True without dropping the pins: a lying policy)."""

    def __init__(self, side_effect: object = None, *, claim: bool = False) -> None:
        self.offered: list[str] = []
        self.side_effect = side_effect
        self.claim = claim

    def __call__(self, bo: TtmBufferObject) -> bool:
        self.offered.append(bo.name)
        if len(self.offered) == 1 and callable(self.side_effect):
            self.side_effect()
        return self.claim


def _two_pinned(profile: str) -> tuple[TtmDevice, TtmBufferObject, TtmBufferObject]:
    """VRAM (4 pages) full of two pinned BOs, ``a`` pinned first."""
    bdev = make_dev(profile, vram=4)
    a = new_bo(bdev, 2, VRAM, name="a")
    b = new_bo(bdev, 2, VRAM, name="b")
    pin(a)
    pin(b)
    return bdev, a, b


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k60_revoke_pass_skips_a_pinned_bo_freed_under_it(profile: str) -> None:
    """K-60 (``__ttm_bo_lru_cursor_next``: a BO whose resource is gone by the time it is
    locked is skipped): the revoke pass offers the pinned BOs it listed at its start; one
    released meanwhile (here by the policy's own work on the first) has no backing any more
    and is passed over, not offered."""
    bdev, a, b = _two_pinned(profile)

    def release_b() -> None:
        unpin(b)
        ttm_bo_release(b)

    a_before = where(a)
    hook = _RevokeHook(release_b)
    bdev.revoke_pinned = hook
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, VRAM)
    assert_errno(exc, Errno.ENOMEM)  # the pass found nothing to revoke; VRAM is given up
    assert hook.offered == ["a"]
    assert b.deleted and b.resource is None and where(a) == a_before


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k60_revoke_pass_skips_a_pinned_bo_that_moved_to_another_manager(profile: str) -> None:
    """K-60 (``__ttm_bo_lru_cursor_next``: a BO whose resource switched memory type by the time
    it is locked is skipped): a listed pinned BO that was unpinned and moved to GTT meanwhile
    is no longer VRAM's to revoke and is not offered."""
    bdev, a, b = _two_pinned(profile)

    def move_b() -> None:
        with b.resv:
            ttm_bo_unpin(b)
            ttm_bo_validate(b, placement(TT))

    a_before = where(a)
    hook = _RevokeHook(move_b)
    bdev.revoke_pinned = hook
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, VRAM)
    assert_errno(exc, Errno.ENOMEM)
    assert hook.offered == ["a"]
    assert b.mem_type is TT and where(a) == a_before


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k60_revoke_pass_never_evicts_a_bo_still_pinned(profile: str) -> None:
    """K-60 (``ttm_bo_evict_cb``: ``bo->pin_count`` means no eviction): a policy answering
    "revoked" while pins remain does not get the BO evicted; the pass goes on and, finding
    nothing else, the allocation fails."""
    bdev, a, b = _two_pinned(profile)
    before = where(a), where(b)
    hook = _RevokeHook(claim=True)
    bdev.revoke_pinned = hook
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, VRAM)
    assert_errno(exc, Errno.ENOMEM)
    assert hook.offered == ["a", "b"]
    assert (where(a), where(b)) == before and a.pin_count == b.pin_count == 1
    assert man(bdev, VRAM).evictions == 0


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k62_walk_passes_over_the_evictor_on_the_lru(profile: str) -> None:
    """K-62 (ttm_bo_evict_alloc): the BO being validated may sit at the LRU head of the manager
    it needs space in (moving to a CONTIGUOUS place of the same type); the walk passes over
    it and evicts the next victims until the new resource fits."""
    bdev = make_dev(profile, vram=10)
    a, b, c, d = (new_bo(bdev, 2, VRAM, name=n) for n in "abcd")
    validate(a, SYSTEM)
    validate(c, SYSTEM)
    x = new_bo(bdev, 4, VRAM, name="x")  # split over pages 0-1 and 4-5; 8-9 free
    assert x.resource is not None and not x.resource.contiguous
    ttm_bo_move_to_lru_tail(b)
    ttm_bo_move_to_lru_tail(d)
    assert man(bdev, VRAM).lru_bos() == [x, b, d]
    validate(x, TtmPlace(VRAM, TtmPlFlag.CONTIGUOUS))
    assert x.mem_type is VRAM and x.resource is not None and x.resource.contiguous
    assert (b.mem_type, d.mem_type) == (TT, TT)


# -- K-63: eviction targets and notification ---------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k63_exported_vram_bo_notifies_then_moves_to_gtt(profile: str) -> None:
    """K-63/K-64: VRAM → GTT; the exported BO's importers are notified *before* the move (the
    BO is still in VRAM inside the callback); the move fence is KERNEL in the resv."""
    bdev = make_dev(profile, vram=2)
    exporter = TtmExporter(bdev)
    bo = exporter.create_bo(2 * PAGE, VRAM)
    dmabuf = exporter.export(bo)
    imp = Importer()
    attach = dma_buf_dynamic_attach(dmabuf, imp.dev, imp.ops, imp)
    seen: list[tuple[TtmMemType | None, bool]] = []

    def spy(a: DmaBufAttachment) -> None:
        seen.append((bo.mem_type, bo.resv.held_by_caller()))

    dma_buf_dynamic_attach(dmabuf, Device("spy"), DmaBufAttachOps(True, spy), None)
    new_bo(bdev, 2, VRAM)
    assert bo.mem_type is TT
    assert imp.notified == [attach]
    assert seen == [(VRAM, True)]
    assert bdev.funcs.notified == [bo]  # type: ignore[attr-defined]
    jobs = list(bdev.copy_queue)
    assert len(jobs) == 1
    job = jobs[0]
    assert (job.kind, job.bo, job.src, job.dst, job.evict) == ("move", bo, VRAM, TT, True)
    assert kernel_usages(bo) == {job.fence: DmaResvUsage.KERNEL}


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k63_vram_to_system_when_gtt_cannot_take_it(profile: str) -> None:
    """K-63: VRAM eviction falls back to SYSTEM (CPU) when GTT is full of pinned BOs."""
    bdev = make_dev(profile, vram=2, gtt=2)
    pin(new_bo(bdev, 2, TT))
    v = new_bo(bdev, 2, VRAM)
    new_bo(bdev, 2, VRAM)
    assert v.mem_type is SYSTEM


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k63_gtt_evicts_to_system_without_notification(profile: str) -> None:
    """K-63: GTT → SYSTEM. (An exported BO leaving GTT notifies, leaving SYSTEM does not.)"""
    bdev = make_dev(profile, gtt=2)
    exporter = TtmExporter(bdev)
    g = exporter.create_bo(2 * PAGE, TT)
    imp = Importer()
    attach = dma_buf_dynamic_attach(exporter.export(g), imp.dev, imp.ops, imp)
    new_bo(bdev, 2, TT)
    assert g.mem_type is SYSTEM and imp.notified == [attach]
    assert bdev.copy_queue[-1].src is TT and bdev.copy_queue[-1].dst is SYSTEM
    validate(g, VRAM)  # leaving SYSTEM: no notification
    assert imp.notified == [attach]


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k63_k86_imported_sg_bo_is_gutted(profile: str) -> None:
    """K-63/K-86: an imported sg BO gets no eviction placement: its backing is dropped, no copy
    job, the epoch advances (old mappings are stale)."""
    bdev = make_dev(profile, vram=2)
    sg = new_bo(bdev, 2, VRAM, bo_type=TtmBoType.SG)
    epoch = sg.epoch
    n = new_bo(bdev, 2, VRAM)
    assert n.mem_type is VRAM and sg.resource is None and sg.epoch > epoch
    assert bdev.gutted == 1 and not bdev.copy_queue
    assert man(bdev, VRAM).evictions == 1 and man(bdev, VRAM).evicted_bytes == 2 * PAGE
    # it can be brought back later
    validate(sg, TT)
    assert sg.mem_type is TT


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k86_empty_placement_drops_the_backing(profile: str) -> None:
    """K-86: ttm_bo_validate with an empty placement guts the BO (the driver is told first:
    an exported BO's importers are notified)."""
    bdev = make_dev(profile)
    exporter = TtmExporter(bdev)
    bo = exporter.create_bo(3 * PAGE, VRAM)
    imp = Importer()
    attach = dma_buf_dynamic_attach(exporter.export(bo), imp.dev, imp.ops, imp)
    epoch = bo.epoch
    with bo.resv:
        ttm_bo_validate(bo, ())
    assert bo.resource is None and bo.epoch == epoch + 1 and bdev.gutted == 1
    assert man(bdev, VRAM).used == 0 and bo.serial not in man(bdev, VRAM).lru
    assert imp.notified == [attach]
    assert not bdev.copy_queue
    with bo.resv:
        ttm_bo_validate(bo, ())  # nothing left to drop
    assert bdev.gutted == 1


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k63_eviction_counts_the_evicted_bytes(profile: str) -> None:
    """K-63: an eviction by move counts one eviction and the BO's bytes on the manager it
    left (the gutting path is counted in test_k63_k86_imported_sg_bo_is_gutted)."""
    bdev = make_dev(profile, vram=3)
    a = new_bo(bdev, 2, VRAM)
    new_bo(bdev, 2, VRAM)
    assert a.mem_type is TT
    vram = man(bdev, VRAM)
    assert vram.evictions == 1 and vram.evicted_bytes == 2 * PAGE


class _SeeBackingFuncs(ExportingFuncs):
    """Records, at each ``move_notify`` that drops the backing (no new resource), the bytes
    the BO's manager still has allocated (None: the BO had no backing any more)."""

    def __init__(self) -> None:
        super().__init__()
        self.used_at_notify: list[int | None] = []

    def move_notify(self, bo: TtmBufferObject, evict: bool, new_res: TtmResource | None) -> None:
        if new_res is None:
            res = bo.resource
            self.used_at_notify.append(res.manager.used if res is not None else None)
        super().move_notify(bo, evict, new_res)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k86_gutting_notifies_before_the_backing_goes(profile: str) -> None:
    """K-86: gutting tells the driver (move_notify, no new resource) while the BO still has
    its backing, so an exporter can invalidate importers' mappings before the memory is
    freed; the backing is dropped afterwards."""
    bdev = make_dev(profile)
    funcs = _SeeBackingFuncs()
    bdev.funcs = funcs
    bo = new_bo(bdev, 2, VRAM)
    validate(bo)
    assert funcs.used_at_notify == [2 * PAGE]
    assert bo.resource is None and man(bdev, VRAM).used == 0


# -- K-64: fences --------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k64_moves_and_clears_add_kernel_fences(profile: str) -> None:
    """K-64: each move and clear is a CopyJob on bdev.copy_queue with a KERNEL fence in the
    resv; run_copies signals them all."""
    bdev = make_dev(profile)
    bo = new_bo(bdev, 2, VRAM)
    assert not bdev.copy_queue and len(bo.resv) == 0
    with bo.resv:
        clear = ttm_bo_clear(bo)
        assert kernel_usages(bo) == {clear: DmaResvUsage.KERNEL}
        ttm_bo_validate(bo, placement(TT))
    jobs: list[CopyJob] = list(bdev.copy_queue)
    assert [(j.kind, j.src, j.dst, j.nbytes, j.evict) for j in jobs] == [
        ("clear", None, VRAM, 2 * PAGE, False),
        ("move", VRAM, TT, 2 * PAGE, False),
    ]
    assert jobs[0].fence is clear
    # Both fences are on the device's copy timeline: the later move fence replaces the clear
    # fence in the resv (dma_resv keeps the latest fence per context).
    assert jobs[1].fence.is_later_or_same(clear)
    assert kernel_usages(bo) == {jobs[1].fence: DmaResvUsage.KERNEL}
    assert not any(j.fence.signaled for j in jobs)
    assert not bo.resv.test_signaled(DmaResvUsage.KERNEL)
    assert bdev.run_copies(1.5) == 2
    assert not bdev.copy_queue
    assert all(j.fence.signaled and j.fence.timestamp == 1.5 for j in jobs)
    assert bo.resv.test_signaled(DmaResvUsage.KERNEL)
    assert bdev.moves == 1 and bdev.moved_bytes == 2 * PAGE


def test_k64_copy_submit_hook_receives_jobs() -> None:
    """K-64: with a submit hook the jobs go to whoever drives time, not to the queue."""
    bdev = make_dev()
    taken: list[CopyJob] = []
    bdev.copy_submit = taken.append
    bo = new_bo(bdev, 1, VRAM)
    validate(bo, TT)
    assert len(taken) == 1 and not bdev.copy_queue
    assert bdev.run_copies() == 0 and not taken[0].fence.signaled


def test_k64_ttm_bo_clear_without_backing_is_a_bug() -> None:
    bdev = make_dev()
    bo = new_bo(bdev, 1, VRAM)
    with bo.resv:
        ttm_bo_validate(bo, ())
        with pytest.raises(KernelBug):
            ttm_bo_clear(bo)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k64_static_importer_waits_for_the_move_fence(profile: str) -> None:
    """K-64: the pin for a static importer moves the BO (VRAM → GTT) and the core waits for
    that move's KERNEL fence before handing out the mapping (at attach in ≤6.15, at map in
    ≥6.16)."""
    bdev = make_dev(profile)
    kernel = bdev.kernel
    exporter = TtmExporter(bdev)
    bo = exporter.create_bo(2 * PAGE, VRAM)
    dmabuf = exporter.export(bo)
    kernel.take_waits()
    attach = dma_buf_attach(dmabuf, Device("display"))
    if not kernel.profile.cache_sgt_at_attach:
        with dmabuf.resv:
            dma_buf_map_attachment(attach, DmaDataDirection.BIDIRECTIONAL)
    assert bo.mem_type is TT and bo.pin_count == 1
    (job,) = bdev.copy_queue
    assert kernel_usages(bo)[job.fence] is DmaResvUsage.KERNEL
    assert kernel.take_waits() == [job.fence]


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k64_pipelined_eviction_fence_goes_to_the_new_bo(profile: str) -> None:
    """K-64 (ttm_bo_add_pipelined_eviction_fences): a BO allocated where something was just
    evicted gets that eviction's fence as KERNEL in its resv; once signalled it is dropped."""
    bdev = make_dev(profile, vram=2)
    victim = new_bo(bdev, 2, VRAM)
    b = new_bo(bdev, 2, VRAM)
    (job,) = bdev.copy_queue
    assert job.bo is victim and job.evict
    vram = man(bdev, VRAM)
    assert vram.eviction_fences == [job.fence]
    assert kernel_usages(b) == {job.fence: DmaResvUsage.KERNEL}
    assert kernel_usages(victim) == {job.fence: DmaResvUsage.KERNEL}
    # A plain (non-evicting) move does not create a pipelined fence.
    other = new_bo(bdev, 1, TT)
    validate(other, SYSTEM)
    assert man(bdev, TT).eviction_fences == []
    bdev.run_copies()
    ttm_bo_release(b)
    c = new_bo(bdev, 2, VRAM)
    assert len(c.resv) == 0 and vram.eviction_fences == []


# -- K-87: release -------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k87_release_of_pinned_bo_warns_and_frees(profile: str) -> None:
    """K-87: releasing a BO with pin_count ≠ 0 WARNs, forces pin_count to 0 and frees."""
    bdev = make_dev(profile)
    kernel = bdev.kernel
    bo = new_bo(bdev, 2, VRAM)
    pin(bo)
    ttm_bo_release(bo)
    assert kernel.warnings.count("ttm_bo_release", "pin_count") == 1
    assert bo.pin_count == 0 and bo.resource is None and bo.deleted
    vram = man(bdev, VRAM)
    assert vram.used == 0 and not vram.pinned and not vram.lru
    with pytest.raises(KernelBug):
        ttm_bo_release(bo)
    quiet = new_bo(bdev, 1, TT)
    epoch = quiet.epoch
    ttm_bo_release(quiet)
    assert kernel.warnings.count("ttm_bo_release") == 1
    assert man(bdev, TT).used == 0
    assert quiet.epoch == epoch + 1  # an sg_table made before points at freed memory


def test_bo_init_rejects_a_zero_size() -> None:
    """ttm_bo_init_reserved: a BO of size 0 is -EINVAL (no BO, nothing allocated)."""
    bdev = make_dev()
    with pytest.raises(KernelError) as exc:
        ttm_bo_init_validate(bdev, 0, placement(VRAM))
    assert_errno(exc, Errno.EINVAL)
    assert man(bdev, VRAM).used == 0 and not man(bdev, VRAM).lru


# -- dmem ----------------------------------------------------------------------------------------


class FakePool:
    """One (cgroup, region) pool: usage, max, min and low in bytes. Flat hierarchy."""

    def __init__(self, name: str, max: int | None = None, min: int = 0, low: int = 0) -> None:
        self.name = name
        self.usage = 0
        self.max = max
        self.min = min
        self.low = low

    def __repr__(self) -> str:
        return f"<pool {self.name} {self.usage}>"


class FakeDmem:
    """A DmemController with one flat level of pools, chosen by the task's comm.

    evict_valuable follows policy-semantics.md §2.7 for a flat tree: the limit pool may always
    lose memory; a root limit pool makes everything eligible (P-34), another limit pool
    nothing else; at device level (no limit pool) min protects always and low until the
    ignore_low pass. The K-126 queries (``next``): below_min/below_low compare a non-root
    pool's usage with its own min/low (a child of the root gets them uncapped, P-25); the
    common ancestor of two different pools is the root.
    """

    def __init__(self) -> None:
        self.pools: dict[str, FakePool] = {"root": FakePool("root")}
        self.charges: list[tuple[str, int]] = []
        self.evict_calls: list[tuple[str | None, str | None, bool]] = []

    def add(self, name: str, **limits: int) -> FakePool:
        pool = FakePool(name, **limits)
        self.pools[name] = pool
        return pool

    def try_charge(self, region: DmemRegion, size: int, task: object) -> object:
        if region.unregistered:
            raise err(Errno.ENODEV, "dmem_cgroup_try_charge", "region unregistered")
        name = task.comm if isinstance(task, Task) else "root"
        pool = self.pools[name]
        if pool.max is not None and pool.usage + size > pool.max:
            raise DmemChargeError(pool, f"{name} over its max")
        pool.usage += size
        self.charges.append((name, size))
        return pool

    def uncharge(self, pool: object, size: int) -> None:
        assert isinstance(pool, FakePool)
        pool.usage -= size
        assert pool.usage >= 0

    def evict_valuable(
        self, limit_pool: object | None, victim_pool: object | None, ignore_low: bool
    ) -> tuple[bool, bool]:
        assert limit_pool is None or isinstance(limit_pool, FakePool)
        assert victim_pool is None or isinstance(victim_pool, FakePool)
        self.evict_calls.append(
            (
                limit_pool.name if limit_pool else None,
                victim_pool.name if victim_pool else None,
                ignore_low,
            )
        )
        if victim_pool is limit_pool or limit_pool is self.pools["root"]:
            return True, False
        if limit_pool is not None:
            return False, False
        if victim_pool is None:
            return True, False
        used = victim_pool.usage
        if used <= victim_pool.min:
            return False, False
        if ignore_low or used > victim_pool.low:
            return True, False
        return False, True

    def below_min(self, root: object | None, test: object | None) -> bool:
        assert root is None and (test is None or isinstance(test, FakePool))
        return test is not None and test is not self.pools["root"] and test.usage <= test.min

    def below_low(self, root: object | None, test: object | None) -> bool:
        assert root is None and (test is None or isinstance(test, FakePool))
        return test is not None and test is not self.pools["root"] and test.usage <= test.low

    def common_ancestor(self, a: object | None, b: object | None) -> object | None:
        if a is None or b is None:
            return None
        return a if a is b else self.pools["root"]


def dmem_dev(
    profile: str, *, vram: int = 16, gtt: int = 16, propagate_enospc: bool = False
) -> tuple[Kernel, TtmDevice, FakeDmem, DmemRegion]:
    bdev = make_dev(profile, vram=vram, gtt=gtt, propagate_enospc=propagate_enospc)
    kernel = bdev.kernel
    region = DmemRegion("drm/0000:03:00.0/vram0", vram * PAGE)
    man(bdev, VRAM).region = region
    fake = FakeDmem()
    kernel.dmem = fake
    return bdev, fake


def as_task(kernel: Kernel, comm: str, pid: int = 100) -> Task:
    task = Task(pid, comm)
    kernel.current = task
    return task


@pytest.mark.parametrize("profile", DMEM_PRESETS)
def test_dmem_charges_the_allocating_task_and_uncharges_on_free(profile: str) -> None:
    """policy §2.5/§2.6: ttm_resource_alloc charges the whole BO size to the *allocating*
    task's pool, only in managers with a region; ttm_resource_free uncharges."""
    bdev, fake = dmem_dev(profile)
    kernel = bdev.kernel
    a, b = fake.add("a"), fake.add("b")
    as_task(kernel, "a", 1)
    va = new_bo(bdev, 2, VRAM)
    ga = new_bo(bdev, 3, TT)
    assert a.usage == 2 * PAGE and va.resource is not None and va.resource.pool is a
    assert ga.resource is not None and ga.resource.pool is None
    as_task(kernel, "b", 2)
    validate(ga, VRAM)  # b moves a's BO into VRAM: b pays
    assert b.usage == 3 * PAGE and a.usage == 2 * PAGE
    validate(va, TT)
    assert a.usage == 0
    ttm_bo_release(ga)
    assert b.usage == 0
    ttm_bo_release(va)
    assert all(p.usage == 0 for p in fake.pools.values())


@pytest.mark.parametrize("profile", NO_DMEM_PRESETS)
def test_dmem_ignored_without_the_controller(profile: str) -> None:
    """dmem is absent before 6.14: a plugged-in controller is never consulted."""
    bdev, fake = dmem_dev(profile)
    kernel = bdev.kernel
    fake.add("a", max=0)
    as_task(kernel, "a")
    bo = new_bo(bdev, 2, VRAM)
    assert bo.resource is not None and bo.resource.pool is None
    assert fake.charges == [] and fake.evict_calls == []


@pytest.mark.parametrize("profile", DMEM_PRESETS)
def test_dmem_eagain_evicts_only_from_the_limit_pool(profile: str) -> None:
    """policy §2.6/§2.7: a charge over the limit is -EAGAIN; the forcing pass walks the LRU with
    that limit pool and evicts only what evict_valuable allows (the limit pool's own BOs), even
    though another pool's BO is older."""
    bdev, fake = dmem_dev(profile)
    kernel = bdev.kernel
    a = fake.add("a", max=4 * PAGE)
    fake.add("b")
    as_task(kernel, "b", 2)
    b1 = new_bo(bdev, 2, VRAM, name="b1")  # LRU-oldest
    as_task(kernel, "a", 1)
    a1 = new_bo(bdev, 4, VRAM, name="a1")
    b1_at = where(b1)
    fake.evict_calls.clear()
    a2 = new_bo(bdev, 2, VRAM, name="a2")
    assert a2.mem_type is VRAM and a1.mem_type is TT and where(b1) == b1_at
    assert a.usage == 2 * PAGE
    assert fake.evict_calls[:2] == [("a", "b", False), ("a", "a", False)]


@pytest.mark.parametrize("profile", DMEM_PRESETS)
def test_dmem_limit_never_evicts_pinned_and_fails_as_enomem(profile: str) -> None:
    """policy §2.6/§2.8: a limit pool whose only BO is pinned frees nothing: the place is
    skipped (fallback to GTT) or, VRAM being the only place, the failure is -ENOMEM — never
    -EAGAIN; nothing stays charged."""
    bdev, fake = dmem_dev(profile)
    kernel = bdev.kernel
    a = fake.add("a", max=4 * PAGE)
    fake.add("b")
    as_task(kernel, "b", 2)
    b1 = new_bo(bdev, 2, VRAM)
    as_task(kernel, "a", 1)
    a1 = new_bo(bdev, 4, VRAM)
    pin(a1)
    pinned_at, b1_at = where(a1), where(b1)
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, VRAM)
    assert_errno(exc, Errno.ENOMEM)
    # b1 was asked about and refused (not in the limit pool); the pinned a1 is not on the LRU
    # at all, so the walk never even considers it.
    assert fake.evict_calls == [("a", "b", False)]
    assert where(a1) == pinned_at and where(b1) == b1_at
    assert a.usage == 4 * PAGE
    fb = new_bo(bdev, 2, VRAM, TT)
    assert fb.mem_type is TT and a.usage == 4 * PAGE


def test_dmem_limit_failure_with_propagate_enospc() -> None:
    """K-62 (7.1) with dmem: the propagate flag turns the final failure into -ENOSPC."""
    bdev, fake = dmem_dev("7.1", propagate_enospc=True)
    kernel = bdev.kernel
    fake.add("a", max=2 * PAGE)
    as_task(kernel, "a")
    pin(new_bo(bdev, 2, VRAM))
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 1, VRAM)
    assert_errno(exc, Errno.ENOSPC)


@pytest.mark.parametrize("profile", ROOT_REFERENCE_PRESETS)
def test_dmem_low_pass_then_ignore_low(profile: str) -> None:
    """policy §2.8: at device level (no limit pool) a victim within its low protection is
    skipped and sets hit_low; the walk is repeated with ignore_low and the victim goes."""
    bdev, fake = dmem_dev(profile, vram=4)
    kernel = bdev.kernel
    fake.add("a")
    b = fake.add("b", low=4 * PAGE)
    as_task(kernel, "b", 2)
    b1 = new_bo(bdev, 4, VRAM)
    as_task(kernel, "a", 1)
    fake.evict_calls.clear()
    a1 = new_bo(bdev, 2, VRAM)
    assert a1.mem_type is VRAM and b1.mem_type is TT and b.usage == 0
    assert fake.evict_calls == [(None, "b", False), (None, "b", True)]


@pytest.mark.parametrize("profile", ROOT_REFERENCE_PRESETS)
def test_dmem_min_protection_holds_in_both_passes(profile: str) -> None:
    """policy §2.7/§2.8: usage ≤ emin is never evicted; no hit_low, so a single walk."""
    bdev, fake = dmem_dev(profile, vram=4)
    kernel = bdev.kernel
    fake.add("a")
    fake.add("b", min=4 * PAGE, low=4 * PAGE)
    as_task(kernel, "b", 2)
    b1 = new_bo(bdev, 4, VRAM)
    as_task(kernel, "a", 1)
    fake.evict_calls.clear()
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, VRAM)
    assert_errno(exc, Errno.ENOMEM)
    assert b1.mem_type is VRAM
    assert fake.evict_calls == [(None, "b", False)]
    assert fake.pools["a"].usage == 0  # the failed charge attempts were undone


def test_k126_device_level_walk_uses_the_common_ancestor() -> None:
    """K-126 (next): at device-level pressure the reference pool is the common ancestor of
    victim and evictor -- in this flat tree the root, which makes even a min-protected victim
    evictable (P-34) -- and the allocator's charge stays taken during the walk."""
    bdev, fake = dmem_dev("next", vram=4)
    kernel = bdev.kernel
    a = fake.add("a")
    fake.add("b", min=4 * PAGE, low=4 * PAGE)
    as_task(kernel, "b", 2)
    b1 = new_bo(bdev, 4, VRAM)
    as_task(kernel, "a", 1)
    fake.evict_calls.clear()
    a1 = new_bo(bdev, 2, VRAM)
    assert a1.mem_type is VRAM and b1.mem_type is TT
    assert fake.evict_calls == [("root", "b", False)]
    assert fake.charges[-1] == ("a", 2 * PAGE) and a.usage == 2 * PAGE  # charged once


def test_k126_protected_allocation_evicts_in_the_idle_pass() -> None:
    """K-126 (next): a charge within the pool's min makes pass 1 evict from VRAM instead of
    falling back to GTT; the same allocation under 7.1 lands in GTT."""
    for profile, lands_in in (("next", VRAM), ("7.1", TT)):
        bdev, fake = dmem_dev(profile, vram=4)
        kernel = bdev.kernel
        fake.add("a", min=2 * PAGE)
        fake.add("b")
        as_task(kernel, "b", 2)
        b1 = new_bo(bdev, 4, VRAM)
        as_task(kernel, "a", 1)
        a1 = new_bo(bdev, 2, VRAM, TT)
        assert (a1.mem_type, b1.mem_type) == (lands_in, TT if lands_in is VRAM else VRAM)


@pytest.mark.parametrize("profile", DMEM_PRESETS)
def test_dmem_low_pass_still_skips_pinned(profile: str) -> None:
    """policy §2.8, §9.2: pinned BOs are not on the LRU, so they are never offered to
    evict_valuable and cannot trigger the ignore_low pass either; the allocation fails."""
    bdev, fake = dmem_dev(profile, vram=4)
    kernel = bdev.kernel
    fake.add("a")
    fake.add("b", low=4 * PAGE)
    as_task(kernel, "b", 2)
    b1 = new_bo(bdev, 4, VRAM)
    pin(b1)
    as_task(kernel, "a", 1)
    fake.evict_calls.clear()
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 2, VRAM)
    assert_errno(exc, Errno.ENOMEM)
    assert b1.mem_type is VRAM
    assert fake.evict_calls == []


@pytest.mark.parametrize("profile", DMEM_PRESETS)
def test_dmem_other_charge_errors_pass_through(profile: str) -> None:
    """policy §2.5: an error other than -EAGAIN from the charge (-ENODEV for an unregistered
    region) is returned as is."""
    bdev, _fake = dmem_dev(profile)
    region = man(bdev, VRAM).region
    assert region is not None
    region.unregistered = True
    with pytest.raises(KernelError) as exc:
        new_bo(bdev, 1, VRAM)
    assert_errno(exc, Errno.ENODEV)
    assert man(bdev, VRAM).used == 0
    assert new_bo(bdev, 1, TT).mem_type is TT  # unaffected: GTT has no region


def test_profiles_used_here_exist() -> None:
    assert get_profile("6.16").dmem and not get_profile("6.12").dmem
    assert get_profile("7.1").ttm_propagate_enospc_available
