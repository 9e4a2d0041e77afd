"""dma-buf map/unmap and move notification (kernel-semantics.md §2.8, §2.9, §1.4).

Checklist items K-24..K-36, K-39, K-69, K-89, K-91, K-97. Helpers come from
``test_dma_buf_core.py``.
"""

from __future__ import annotations

import pytest

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBufAttachment,
    DmaBufAttachOps,
    DmaDataDirection,
    SgTable,
    dma_buf_attach_revocable,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_invalidate_mappings,
    dma_buf_map_attachment,
    dma_buf_map_attachment_unlocked,
    dma_buf_move_notify,
    dma_buf_notify_move,
    dma_buf_pin,
    dma_buf_unmap_attachment,
    dma_buf_unmap_attachment_unlocked,
)
from pinlab.kernel.errno import Errno, KernelError, LockingError, NotInProfile
from pinlab.kernel.kernel import Task
from pinlab.kernel.profile import get_profile
from pinlab.kernel.resv import DmaResvUsage
from pinlab.kernel.ttm import TtmMemType, placement, ttm_bo_validate
from tests.kernel.fakes import Importer
from tests.kernel.test_dma_buf_core import (
    ALL,
    BEFORE_7_1,
    BIDI,
    CACHING,
    PIN_AT_MAP,
    REVOKE,
    Call,
    RecordingWaiter,
    Rig,
    StaticRig,
    add_fence,
    map_locked,
    pin_locked,
    unmap_locked,
)

TO_DEV = DmaDataDirection.TO_DEVICE
FROM_DEV = DmaDataDirection.FROM_DEVICE


def _interrupting(rig: Rig | StaticRig) -> None:
    """Make ``current`` a task with a signal pending."""
    task = Task(42, "app")
    task.sigpending = True
    rig.kernel.current = task


# -- K-24: the lock --------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL)
def test_k24_map_dynamic_attachment_without_resv_is_locking_error(profile: str) -> None:
    """K-24: map and unmap of a dynamic attachment need the resv in every preset."""
    rig = Rig(profile)
    attach = rig.dynamic_attach()
    rig.spy.clear()
    with pytest.raises(LockingError, match="dma_buf_map_attachment"):
        dma_buf_map_attachment(attach, BIDI)
    assert rig.spy.log == []
    sgt = map_locked(attach)
    rig.spy.clear()
    with pytest.raises(LockingError, match="dma_buf_unmap_attachment"):
        dma_buf_unmap_attachment(attach, sgt, BIDI)
    assert rig.spy.log == []


@pytest.mark.parametrize("profile", ("6.12", "6.14", "6.16", "7.1"))
def test_k24_map_static_attachment_without_resv_is_locking_error_since_6_2(profile: str) -> None:
    """K-24 (v6.2 locking convention): static attachments need the resv too."""
    rig = StaticRig(profile)
    attach = rig.static_attach()
    with pytest.raises(LockingError, match="dma_buf_map_attachment"):
        dma_buf_map_attachment(attach, BIDI)
    sgt = map_locked(attach)
    with pytest.raises(LockingError, match="dma_buf_unmap_attachment"):
        dma_buf_unmap_attachment(attach, sgt, BIDI)
    assert rig.spy.names() == ["map_dma_buf"]


def test_k24_preset_5_16_static_attachment_maps_without_resv() -> None:
    """K-24 (5.16): before v6.2 a static attachment mapped and unmapped without the lock;
    the exporter's callbacks then run unlocked."""
    rig = StaticRig("5.16")
    attach = rig.static_attach()
    sgt = dma_buf_map_attachment(attach, BIDI)
    dma_buf_unmap_attachment(attach, sgt, BIDI)
    assert rig.spy.log == [Call("map_dma_buf", False, BIDI), Call("unmap_dma_buf", False, BIDI)]
    # the same for a static importer of a dynamic exporter (cached at attach)
    trig = Rig("5.16")
    static = trig.static_attach()
    assert dma_buf_map_attachment(static, BIDI) is static.sgt


@pytest.mark.parametrize("profile", ("6.12", "6.14", "6.16", "7.1"))
def test_k24_unlocked_variants_take_the_resv(profile: str) -> None:
    """K-24: the v6.2 _unlocked variants lock around the locked functions."""
    rig = StaticRig(profile)
    attach = rig.static_attach()
    sgt = dma_buf_map_attachment_unlocked(attach, BIDI)
    assert not rig.resv.is_locked()
    dma_buf_unmap_attachment_unlocked(attach, sgt, BIDI)
    assert not rig.resv.is_locked()
    assert rig.spy.log == [Call("map_dma_buf", True, BIDI), Call("unmap_dma_buf", True, BIDI)]


@pytest.mark.parametrize("profile", ("6.12", "6.14", "6.16", "7.1"))
def test_k24_unlocked_unmap_null_arguments_warn_and_return(profile: str) -> None:
    """K-24 (dma_buf_unmap_attachment_unlocked): a NULL sgt WARNs in the unlocked function
    and returns before taking the resv or reaching E.unmap; a NULL attachment returns."""
    rig = Rig(profile)
    attach = rig.dynamic_attach()
    sgt = map_locked(attach)
    rig.spy.clear()
    dma_buf_unmap_attachment_unlocked(attach, None, BIDI)
    assert rig.kernel.warnings.count("dma_buf_unmap_attachment_unlocked") == 1
    assert len(rig.kernel.warnings) == 1
    dma_buf_unmap_attachment_unlocked(None, sgt, BIDI)
    assert rig.spy.log == []
    assert attach.mappings == 1


def test_k24_unlocked_variants_not_in_5_16() -> None:
    """K-24: the _unlocked map variants do not exist in 5.16."""
    rig = StaticRig("5.16")
    attach = rig.static_attach()
    with pytest.raises(NotInProfile):
        dma_buf_map_attachment_unlocked(attach, BIDI)
    sgt = dma_buf_map_attachment(attach, BIDI)
    with pytest.raises(NotInProfile):
        dma_buf_unmap_attachment_unlocked(attach, sgt, BIDI)


@pytest.mark.parametrize("profile", ALL)
def test_k24_map_unmap_null_arguments(profile: str) -> None:
    """K-24 (§2.8 step 1): a NULL attachment is -EINVAL; unmap of a NULL sgt WARNs."""
    rig = Rig(profile)
    attach = rig.dynamic_attach()
    with pytest.raises(KernelError) as exc:
        dma_buf_map_attachment(None, BIDI)
    assert exc.value.errno is Errno.EINVAL
    with rig.resv:
        dma_buf_unmap_attachment(attach, None, BIDI)
    assert rig.kernel.warnings.count("dma_buf_unmap_attachment") == 1
    dma_buf_unmap_attachment(None, None, BIDI)


# -- ≥6.16: pin at map -----------------------------------------------------------------------


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k25_static_attachment_map_pins_then_maps(profile: str) -> None:
    """K-25 (≥6.16): E.pin then E.map, both under the resv."""
    rig = Rig(profile)
    attach = rig.static_attach()
    map_locked(attach, TO_DEV)
    assert rig.spy.log == [
        Call("attach", False),
        Call("pin", True),
        Call("map_dma_buf", True, TO_DEV),
    ]
    assert rig.bo.pin_count == 1
    assert len(rig.kernel.warnings) == 0


@pytest.mark.parametrize("profile", PIN_AT_MAP)
@pytest.mark.parametrize("errno", [Errno.ENOMEM, Errno.EINVAL])
def test_k25_pin_error_is_returned_without_map(profile: str, errno: Errno) -> None:
    """K-25 (≥6.16): a pin error is returned; nothing is mapped; no WARN."""
    rig = Rig(profile, fail_pin=errno)
    attach = rig.static_attach()
    with pytest.raises(KernelError) as exc:
        map_locked(attach)
    assert exc.value.errno is errno
    assert rig.spy.names() == ["attach", "pin"]
    assert attach.mappings == 0 and attach.core_pins == 0
    assert len(rig.kernel.warnings) == 0


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k25_ebusy_pin_error_warns_once(profile: str) -> None:
    """K-25 (≥6.16): -EBUSY from pin also hits a WARN_ON_ONCE (counted, reported once)."""
    rig = Rig(profile, fail_pin=Errno.EBUSY)
    attach = rig.static_attach()
    for _ in range(2):
        with pytest.raises(KernelError) as exc:
            map_locked(attach)
        assert exc.value.errno is Errno.EBUSY
    [record] = rig.kernel.warnings.records()
    assert record.function == "dma_buf_map_attachment"
    assert record.once and record.count == 2 and record.reported == 1
    assert rig.spy.count("map_dma_buf") == 0


@pytest.mark.parametrize(
    ("profile", "switches", "pins"),
    [
        ("6.16", {}, True),
        ("6.16", {"move_notify": False}, True),
        ("6.16", {"move_notify": True}, False),
        ("7.1", {}, False),
    ],
)
def test_k26_dynamic_attachment_pin_on_map_follows_mn(
    profile: str, switches: dict[str, bool], pins: bool
) -> None:
    """K-26: (6.16) a dynamic importer of a dynamic exporter is pinned per map with MN=n,
    not with MN=y; (7.1) never. The unmap undoes exactly what the map did."""
    rig = Rig(get_profile(profile, **switches))
    attach = rig.dynamic_attach()
    sgt = map_locked(attach)
    assert rig.bo.pin_count == (1 if pins else 0)
    assert rig.spy.count("pin") == (1 if pins else 0)
    unmap_locked(attach, sgt)
    assert rig.bo.pin_count == 0
    assert rig.spy.count("unpin") == (1 if pins else 0)


@pytest.mark.parametrize("profile", PIN_AT_MAP)
@pytest.mark.parametrize("failure", ["error", "null"])
def test_k27_map_error_after_pin_unpins_exactly_once(profile: str, failure: str) -> None:
    """K-27 (≥6.16): an E.map error after a pin-on-map unpins once and is returned; NULL
    becomes -ENOMEM."""
    if failure == "error":
        rig = Rig(profile, fail_map=Errno.EFAULT)
        expected = Errno.EFAULT
    else:
        rig = Rig(profile, ops={"map_dma_buf": lambda a, d: None})
        expected = Errno.ENOMEM
    attach = rig.static_attach()
    with pytest.raises(KernelError) as exc:
        map_locked(attach)
    assert exc.value.errno is expected
    assert rig.spy.names() == ["attach", "pin", "map_dma_buf", "unpin"]
    assert rig.bo.pin_count == 0
    assert attach.mappings == 0 and attach.core_pins == 0


@pytest.mark.parametrize(("profile", "pins"), [("6.16", True), ("7.1", False)])
def test_k27_dynamic_attachment_map_error(profile: str, pins: bool) -> None:
    """K-27: for a dynamic attachment the map error unpins only when the map pinned (6.16
    with MN=n) -- never in 7.1."""
    rig = Rig(profile, fail_map=Errno.EIO)
    attach = rig.dynamic_attach()
    with pytest.raises(KernelError) as exc:
        map_locked(attach)
    assert exc.value.errno is Errno.EIO
    expected = ["attach", "pin", "map_dma_buf", "unpin"] if pins else ["attach", "map_dma_buf"]
    assert rig.spy.names() == expected
    assert rig.bo.pin_count == 0


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k28_static_map_interrupted_waiting_unmaps_and_unpins(profile: str) -> None:
    """K-28 (≥6.16): after E.map the core waits interruptibly for KERNEL fences; a pending
    signal gives -ERESTARTSYS, after which E.unmap and then E.unpin have run."""
    rig = Rig(profile)
    add_fence(rig.resv, DmaResvUsage.KERNEL, "clear")
    attach = rig.static_attach()
    _interrupting(rig)
    with pytest.raises(KernelError) as exc:
        map_locked(attach)
    assert exc.value.errno is Errno.ERESTARTSYS
    assert exc.value.value == -512
    assert rig.spy.names() == ["attach", "pin", "map_dma_buf", "unmap_dma_buf", "unpin"]
    assert rig.bo.pin_count == 0
    assert attach.mappings == 0 and attach.core_pins == 0
    assert rig.kernel.take_waits() == []
    # without the signal the same map succeeds and the fence is handed to the time driver
    assert rig.kernel.current is not None
    rig.kernel.current.sigpending = False
    map_locked(attach)
    assert len(rig.kernel.take_waits()) == 1


@pytest.mark.parametrize("profile", ALL)
def test_k28_k66_static_map_fails_only_on_a_negative_wait_result(profile: str) -> None:
    """K-28, K-66 (__map_dma_buf): only a negative result of the KERNEL-fence wait undoes
    the map; a zero (timeout) result leaves a good mapping."""
    rig = StaticRig(profile)
    add_fence(rig.resv, DmaResvUsage.KERNEL, "clear")
    waiter = RecordingWaiter(result=0)
    rig.kernel.waiter = waiter
    attach = rig.static_attach()
    map_locked(attach)
    assert len(waiter.calls) == 1
    assert rig.spy.names() == ["map_dma_buf"]
    assert attach.mappings == 1


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k28_static_map_wait_parameters_and_eintr(profile: str) -> None:
    """K-28 (≥6.16): the wait covers KERNEL fences only, is interruptible and has no
    timeout; an -EINTR result is returned the same way (unmap, unpin)."""
    rig = Rig(profile)
    kernel_fence = add_fence(rig.resv, DmaResvUsage.KERNEL, "move")
    add_fence(rig.resv, DmaResvUsage.WRITE, "gfx")
    add_fence(rig.resv, DmaResvUsage.BOOKKEEP, "pt")
    waiter = RecordingWaiter(result=-int(Errno.EINTR))
    rig.kernel.waiter = waiter
    attach = rig.static_attach()
    with pytest.raises(KernelError) as exc:
        map_locked(attach)
    assert exc.value.errno is Errno.EINTR
    assert waiter.calls == [([kernel_fence], True, None)]
    assert rig.spy.names()[-2:] == ["unmap_dma_buf", "unpin"]
    assert rig.bo.pin_count == 0


@pytest.mark.parametrize("profile", ALL)
def test_k29_dynamic_attachment_map_does_not_wait(profile: str) -> None:
    """K-29: the core never waits for a dynamic attachment -- even with an unsignalled
    KERNEL fence and a pending signal the map succeeds and nothing is waited for."""
    rig = Rig(get_profile(profile, move_notify=True))
    fence = add_fence(rig.resv, DmaResvUsage.KERNEL)
    waiter = RecordingWaiter(result=-int(Errno.ERESTARTSYS))
    rig.kernel.waiter = waiter
    attach = rig.dynamic_attach()
    _interrupting(rig)
    sgt = map_locked(attach)
    assert waiter.calls == []
    assert sgt.memory == "gtt"
    # the importer must wait itself
    assert rig.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True) == [fence]


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k30_every_map_is_new_with_one_pin_per_live_mapping(profile: str) -> None:
    """K-30 (≥6.16): each map makes a new sg_table and (static A of dynamic E) one more
    exporter pin; each unmap drops one."""
    rig = Rig(profile)
    attach = rig.static_attach()
    sgts = [map_locked(attach) for _ in range(3)]
    assert len({id(s) for s in sgts}) == 3
    assert len({s.serial for s in sgts}) == 3
    assert rig.spy.count("map_dma_buf") == 3
    assert rig.bo.pin_count == 3
    assert attach.mappings == 3 and attach.core_pins == 3
    for live, sgt in zip((2, 1, 0), sgts, strict=True):
        unmap_locked(attach, sgt)
        assert rig.bo.pin_count == live
        assert attach.mappings == live
    assert attach.sgt is None


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k30_dynamic_attachment_maps_are_new_without_pins(profile: str) -> None:
    """K-30 (≥6.16): with MN=y (always in 7.1) a dynamic attachment's maps add mappings but
    no pins."""
    rig = Rig(get_profile(profile, move_notify=True))
    attach = rig.dynamic_attach()
    first, second = map_locked(attach), map_locked(attach)
    assert first is not second
    assert attach.mappings == 2
    assert rig.bo.pin_count == 0


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k31_unmap_calls_exporter_unmap_then_one_unpin(profile: str) -> None:
    """K-31 (≥6.16): E.unmap (with the mapping's direction), then exactly one E.unpin."""
    rig = Rig(profile)
    attach = rig.static_attach()
    sgt = map_locked(attach, FROM_DEV)
    rig.spy.clear()
    unmap_locked(attach, sgt, FROM_DEV)
    assert rig.spy.log == [Call("unmap_dma_buf", True, FROM_DEV), Call("unpin", True)]
    assert rig.bo.pin_count == 0


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k31_unmap_without_pin_on_map_does_not_unpin(profile: str) -> None:
    """K-31 (≥6.16): no pin-on-map (dynamic A with MN=y, static exporter) → no unpin."""
    rig = Rig(get_profile(profile, move_notify=True))
    attach = rig.dynamic_attach()
    sgt = map_locked(attach)
    rig.spy.clear()
    unmap_locked(attach, sgt)
    assert rig.spy.names() == ["unmap_dma_buf"]


# -- ≤6.15: cached mappings ------------------------------------------------------------------


@pytest.mark.parametrize("profile", CACHING)
@pytest.mark.parametrize("direction", list(DmaDataDirection)[:3])
def test_k32_cached_sgt_returned_without_pin_or_wait(
    profile: str, direction: DmaDataDirection
) -> None:
    """K-32 (≤6.15): a static A of a dynamic E maps at attach (BIDIRECTIONAL); every later
    map, in any direction, returns that same table without pin, map or fence wait."""
    rig = Rig(profile)
    attach = rig.static_attach()
    cached = attach.sgt
    assert cached is not None
    add_fence(rig.resv, DmaResvUsage.KERNEL)
    _interrupting(rig)  # a wait would fail; there is none
    rig.spy.clear()
    assert map_locked(attach, direction) is cached
    assert map_locked(attach, direction) is cached
    assert rig.spy.log == []
    assert rig.bo.pin_count == 1
    unmap_locked(attach, cached, direction)
    assert rig.spy.log == []  # unmapping the cached table is a no-op (K-33)


@pytest.mark.parametrize("profile", CACHING)
def test_k32_cached_direction_conflict_is_ebusy(profile: str) -> None:
    """K-32 (≤6.15): a cached non-BIDIRECTIONAL table refuses another direction (-EBUSY)."""
    rig = StaticRig(profile, cache_sgt_mapping=True)
    attach = rig.static_attach()
    sgt = map_locked(attach, TO_DEV)
    assert attach.sgt is sgt and attach.dir is TO_DEV
    for other in (FROM_DEV, BIDI):
        with pytest.raises(KernelError) as exc:
            map_locked(attach, other)
        assert exc.value.errno is Errno.EBUSY
    assert map_locked(attach, TO_DEV) is sgt
    assert rig.spy.count("map_dma_buf") == 1


@pytest.mark.parametrize("profile", CACHING)
def test_k33_cache_sgt_mapping_caches_first_successful_map(profile: str) -> None:
    """K-33 (≤6.15): with E.cache_sgt_mapping the first *successful* map is cached with its
    direction; unmapping it is a no-op and detach tears it down."""
    rig = StaticRig(profile, cache_sgt_mapping=True)
    rig.exp.require_p2p = True
    attach = rig.static_attach()
    with pytest.raises(KernelError) as exc:
        map_locked(attach, FROM_DEV)
    assert exc.value.errno is Errno.EPERM
    assert attach.sgt is None
    rig.exp.require_p2p = False
    sgt = map_locked(attach, FROM_DEV)
    assert attach.sgt is sgt and attach.dir is FROM_DEV
    unmap_locked(attach, sgt, FROM_DEV)
    assert rig.spy.count("unmap_dma_buf") == 0
    assert attach.sgt is sgt
    rig.spy.clear()
    dma_buf_detach(rig.dmabuf, attach)
    assert rig.spy.log == [Call("unmap_dma_buf", True, FROM_DEV)]
    assert rig.kernel.leaks == []


@pytest.mark.parametrize("profile", CACHING)
def test_k34_caching_ebusy_pin_error_is_returned_without_a_warning(profile: str) -> None:
    """K-34, §2.8 (≤6.15) step 3 (dma_buf_map_attachment): with MN=n the map of a dynamic A
    pins and returns a pin error as it is; the WARN_ON_ONCE for -EBUSY (K-25) came with
    pin-at-map and is not in this family."""
    rig = Rig(get_profile(profile, move_notify=False), fail_pin=Errno.EBUSY)
    attach = rig.dynamic_attach()
    with pytest.raises(KernelError) as exc:
        map_locked(attach)
    assert exc.value.errno is Errno.EBUSY
    assert len(rig.kernel.warnings) == 0
    assert rig.spy.count("map_dma_buf") == 0


@pytest.mark.parametrize("profile", CACHING)
@pytest.mark.parametrize("mn", [False, True])
def test_k34_caching_dynamic_on_dynamic_pins_per_map_only_without_mn(
    profile: str, mn: bool
) -> None:
    """K-34 (≤6.15): dynamic A of dynamic E: MN=n pins per map and unpins per unmap (fresh
    tables, nothing cached); MN=y does neither."""
    rig = Rig(get_profile(profile, move_notify=mn))
    attach = rig.dynamic_attach()
    assert rig.spy.names() == ["attach"]
    a, b = map_locked(attach), map_locked(attach)
    assert a is not b and attach.sgt is None
    assert rig.bo.pin_count == (0 if mn else 2)
    assert rig.spy.count("pin") == (0 if mn else 2)
    unmap_locked(attach, a)
    unmap_locked(attach, b)
    assert rig.bo.pin_count == 0
    assert rig.spy.count("unpin") == (0 if mn else 2)
    assert rig.spy.count("unmap_dma_buf") == 2


@pytest.mark.parametrize("profile", ALL)
def test_k97_static_on_static_maps_fresh_without_pin_and_waits(profile: str) -> None:
    """K-97: static A of a static E without cache_sgt_mapping: a fresh exporter map per call,
    no pin, and a wait for the KERNEL fences (only) after each map."""
    rig = StaticRig(profile)
    kernel_fence = add_fence(rig.resv, DmaResvUsage.KERNEL)
    add_fence(rig.resv, DmaResvUsage.READ, "reader")
    waiter = RecordingWaiter()
    rig.kernel.waiter = waiter
    attach = rig.static_attach()
    first = map_locked(attach)
    second = map_locked(attach)
    assert first is not second
    assert rig.spy.names() == ["map_dma_buf", "map_dma_buf"]
    assert waiter.calls == [([kernel_fence], True, None)] * 2
    assert attach.core_pins == 0 and attach.sgt is None


# -- move notification -----------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL)
def test_k35_notification_without_resv_is_locking_error(profile: str) -> None:
    """K-35: dma_buf_move_notify (7.1: dma_buf_invalidate_mappings) asserts the resv."""
    rig = Rig(profile)
    imp = Importer()
    rig.dynamic_attach(imp)
    fn = dma_buf_invalidate_mappings if profile in REVOKE else dma_buf_move_notify
    with pytest.raises(LockingError, match=rig.kernel.profile.move_notify_name):
        fn(rig.dmabuf)
    with pytest.raises(LockingError):
        dma_buf_notify_move(rig.dmabuf)
    assert imp.notified == []
    assert rig.dmabuf.move_notify_count == 0


@pytest.mark.parametrize(
    ("profile", "switches"),
    [(p, {}) for p in BEFORE_7_1]
    + [("6.16", {"move_notify": True}), ("6.12", {"move_notify": True})],
)
def test_k36_move_notify_calls_every_dynamic_attachment_once(
    profile: str, switches: dict[str, bool]
) -> None:
    """K-36: every dynamic attachment, pinned or not, once; never a static one; returns
    nothing. dma_buf_invalidate_mappings does not exist before 7.1."""
    rig = Rig(get_profile(profile, **switches))
    pinned_imp, plain_imp = Importer("rdma0"), Importer("mlx5_0")
    pinned = rig.dynamic_attach(pinned_imp)
    plain = rig.dynamic_attach(plain_imp)
    static = rig.static_attach()
    pin_locked(pinned)
    with rig.resv:
        assert dma_buf_move_notify(rig.dmabuf) is None  # type: ignore[func-returns-value]
    assert pinned_imp.notified == [pinned]
    assert plain_imp.notified == [plain]
    assert static not in pinned_imp.notified + plain_imp.notified
    assert rig.dmabuf.move_notify_count == 1
    with rig.resv, pytest.raises(NotInProfile):
        dma_buf_invalidate_mappings(rig.dmabuf)
    assert rig.kernel.profile.move_notify_name == "dma_buf_move_notify"


def test_k36_7_1_invalidate_mappings_calls_only_attachments_with_the_callback() -> None:
    """K-36 (7.1): the function is dma_buf_invalidate_mappings; only attachments that
    provide invalidate_mappings are called; dma_buf_move_notify is gone."""
    rig = Rig("7.1")
    with_cb = Importer("mlx5_0")
    a = rig.dynamic_attach(with_cb)
    pinned_imp = Importer("rdma0")
    pinned = rig.dynamic_attach(pinned_imp)
    pin_locked(pinned)
    no_cb = dma_buf_dynamic_attach(rig.dmabuf, Device("vfio"), DmaBufAttachOps(True), None)
    rig.static_attach()
    assert rig.dmabuf.attachments[1] is no_cb
    with rig.resv:
        dma_buf_invalidate_mappings(rig.dmabuf)
        dma_buf_notify_move(rig.dmabuf)
    assert with_cb.notified == [a, a]
    assert pinned_imp.notified == [pinned, pinned]
    assert rig.dmabuf.move_notify_count == 2
    assert rig.kernel.profile.move_notify_name == "dma_buf_invalidate_mappings"
    with rig.resv, pytest.raises(NotInProfile):
        dma_buf_move_notify(rig.dmabuf)
    assert rig.dmabuf.move_notify_count == 2


@pytest.mark.parametrize(("profile", "switches"), [("6.16", {"move_notify": True}), ("7.1", {})])
def test_k39_after_notification_next_map_is_the_new_location(
    profile: str, switches: dict[str, bool]
) -> None:
    """K-39: a move notifies the dynamic importer under the resv; its old table is stale
    (older epoch); the next map returns the new location with a newer epoch; the core did
    not wait, so the importer finds the move's KERNEL fence in the resv and must wait."""
    rig = Rig(get_profile(profile, **switches), where=TtmMemType.VRAM)
    imp = Importer("mlx5_0", allow_peer2peer=True)
    attach = rig.dynamic_attach(imp)
    old = map_locked(attach)
    assert old.memory == "vram" and old.page_less and old.epoch == rig.bo.epoch
    assert rig.resv.fences(DmaResvUsage.BOOKKEEP) == []

    with rig.resv:  # the exporter evicts the BO to GTT
        ttm_bo_validate(rig.bo, placement(TtmMemType.TT))
    assert imp.notified == [attach]
    assert rig.bo.mem_type is TtmMemType.TT
    assert old.epoch < rig.bo.epoch  # stale
    [move_fence] = rig.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True)

    with rig.resv:  # the importer's invalidate/remap cycle
        dma_buf_unmap_attachment(attach, old, BIDI)
        new = dma_buf_map_attachment(attach, BIDI)
    assert new is not old
    assert new.memory == "gtt" and not new.page_less
    assert new.epoch == rig.bo.epoch > old.epoch
    assert rig.kernel.take_waits() == []  # the core did not wait for a dynamic attachment
    with rig.resv:
        assert rig.resv.wait_timeout(DmaResvUsage.KERNEL, True) > 0
    assert rig.kernel.take_waits() == [move_fence]
    assert rig.bdev.run_copies() == 1
    assert rig.resv.test_signaled(DmaResvUsage.KERNEL)


def test_k39_static_importer_is_waited_for_by_the_core() -> None:
    """K-39/K-64 contrast: a static importer's map makes the core wait for the KERNEL fence
    of the pin's move (VRAM → GTT), handed to the time driver."""
    rig = Rig("6.16", where=TtmMemType.VRAM)
    attach = rig.static_attach()
    sgt = map_locked(attach)
    assert rig.bo.mem_type is TtmMemType.TT and sgt.memory == "gtt"
    [fence] = rig.kernel.take_waits()
    assert fence in rig.resv.fences(DmaResvUsage.KERNEL)


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k39_pinned_buffer_cannot_move_so_no_notification(profile: str) -> None:
    """K-37/K-39: while a static importer's mapping holds a pin, the exporter cannot move the
    buffer (-EINVAL from TTM) and sends no notification."""
    rig = Rig(profile)
    imp = Importer()
    rig.dynamic_attach(imp)
    static = rig.static_attach()
    map_locked(static)
    with rig.resv, pytest.raises(KernelError) as exc:
        ttm_bo_validate(rig.bo, placement(TtmMemType.VRAM))
    assert exc.value.errno is Errno.EINVAL
    assert imp.notified == []


def test_k69_7_1_revoke_semantics() -> None:
    """K-69 (7.1): MN always on, pin-on-map = "E has pin and A is static",
    dma_buf_attach_revocable(A) = A dynamic with invalidate_mappings, and a pinned importer
    receives the invalidation (which it may treat as a permanent revocation)."""
    profile = get_profile("7.1")
    assert profile.move_notify and not profile.move_notify_is_option
    assert profile.invalidate_mappings and profile.attach_revocable
    rig = Rig(profile)
    static = rig.static_attach()
    revocable_imp = Importer("mlx5_0")
    revocable = rig.dynamic_attach(revocable_imp)
    plain = dma_buf_dynamic_attach(rig.dmabuf, Device("efa0"), DmaBufAttachOps(True), None)
    assert not dma_buf_attach_revocable(static)
    assert dma_buf_attach_revocable(revocable)
    assert not dma_buf_attach_revocable(plain)

    map_locked(static)
    assert rig.bo.pin_count == 1  # static: pinned at map
    map_locked(revocable)
    map_locked(plain)
    assert rig.bo.pin_count == 1  # dynamic: never pinned by the core

    revoked: list[DmaBufAttachment] = []

    def revoke(attach: DmaBufAttachment) -> None:  # a "pinned but revocable" importer
        revoked.append(attach)
        with pytest.raises(LockingError):
            attach.dmabuf.resv.lock()  # the callback runs under the resv

    pinned = dma_buf_dynamic_attach(
        rig.dmabuf, Device("rdma0"), DmaBufAttachOps(True, move_notify=revoke), None
    )
    assert pinned.importer_ops is not None
    assert pinned.importer_ops.invalidate_mappings is revoke
    with rig.resv:
        dma_buf_pin(pinned)
        dma_buf_invalidate_mappings(rig.dmabuf)
    assert revoked == [pinned]
    assert revocable_imp.notified == [revocable]


@pytest.mark.parametrize("profile", BEFORE_7_1)
def test_k69_attach_revocable_not_in_profile_before_7_1(profile: str) -> None:
    """K-69: dma_buf_attach_revocable exists only in 7.1."""
    rig = Rig(profile)
    attach = rig.dynamic_attach()
    with pytest.raises(NotInProfile):
        dma_buf_attach_revocable(attach)


def test_k89_7_1_importer_without_callback_is_never_pinned_by_the_core() -> None:
    """K-89 (7.1): an attachment without invalidate_mappings maps repeatedly without any
    core pin, and is skipped by invalidations; a static attachment is pinned per map."""
    rig = Rig("7.1")
    plain = dma_buf_dynamic_attach(rig.dmabuf, Device("iommufd"), DmaBufAttachOps(False), None)
    sgts = [map_locked(plain) for _ in range(3)]
    assert rig.spy.count("pin") == 0 and rig.bo.pin_count == 0
    with rig.resv:
        dma_buf_invalidate_mappings(rig.dmabuf)
    for sgt in sgts:
        unmap_locked(plain, sgt)
    assert rig.spy.count("unpin") == 0
    assert plain.mappings == 0


def test_k91_7_1_after_invalidation_fences_up_to_bookkeep_remain_to_wait_on() -> None:
    """K-91 (7.1): dma_buf_invalidate_mappings neither waits nor unmaps. What the core offers
    the exporter afterwards: the importer's mapping is still live until it unmaps, and every
    resv fence up to BOOKKEEP is still there to wait on (a READ query, as bufinfo uses, would
    miss the BOOKKEEP one). Only once both are done may the memory be reused."""
    rig = Rig("7.1")
    imp = Importer("mlx5_0")
    attach = rig.dynamic_attach(imp)
    sgt = map_locked(attach)
    fences = [add_fence(rig.resv, u, u.name) for u in DmaResvUsage]
    waiter = RecordingWaiter()
    rig.kernel.waiter = waiter
    rig.spy.clear()

    with rig.resv:
        dma_buf_invalidate_mappings(rig.dmabuf)
    assert imp.notified == [attach]
    assert rig.spy.log == []  # no unmap, no unpin by the core
    assert waiter.calls == []  # and no wait
    assert attach.mappings == 1
    assert rig.resv.fences(DmaResvUsage.BOOKKEEP, unsignaled_only=True) == fences
    assert fences[-1] not in rig.resv.fences(DmaResvUsage.READ)
    assert not rig.resv.test_signaled(DmaResvUsage.BOOKKEEP)

    # the exporter waits for everything up to BOOKKEEP ...
    with rig.resv:
        assert rig.resv.wait_timeout(DmaResvUsage.BOOKKEEP, False) > 0
    assert waiter.calls == [(fences, False, None)]
    for fence in fences[:-1]:
        fence.signal()
    assert not rig.resv.test_signaled(DmaResvUsage.BOOKKEEP)  # the BOOKKEEP fence holds it
    fences[-1].signal()
    assert rig.resv.test_signaled(DmaResvUsage.BOOKKEEP)
    # ... and for the importer's unmap
    unmap_locked(attach, sgt)
    assert attach.mappings == 0


# -- CONFIG_DMA_API_DEBUG (§1.5) -----------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL)
def test_dma_api_debug_logs_each_unaligned_entry_and_maps_anyway(profile: str) -> None:
    """§1.5 (dma_buf_map_attachment, drivers/dma-buf/dma-buf.c): under CONFIG_DMA_API_DEBUG
    an sg entry off page boundaries is a pr_debug line per entry, not a WARN and not an error;
    the model recorded one WARN for the first and said nothing of the others."""
    odd = SgTable(((0x1000, 0x800), (0x2000, 0x1000), (0x3100, 0x1000)))
    rig = StaticRig(
        get_profile(profile, dma_api_debug=True),
        ops={"map_dma_buf": lambda attach, direction: odd},
    )
    sgt = map_locked(rig.static_attach())
    assert sgt is odd
    assert rig.kernel.warnings.count("dma_buf_map_attachment") == 0
    lines = [line for line in rig.kernel.dmesg if "is not page aligned!" in line]
    assert lines == [
        "dma_buf_map_attachment: addr 1000 or len 800 is not page aligned!",
        "dma_buf_map_attachment: addr 3100 or len 1000 is not page aligned!",
    ]


# -- CONFIG_DMABUF_DEBUG (§1.5, §2.8) ----------------------------------------------------------


def _record_exporter_tables(rig: Rig) -> tuple[list[SgTable], list[SgTable]]:
    """Wrap E.map/E.unmap: the tables the exporter made, and those handed back to it."""
    made: list[SgTable] = []
    returned: list[SgTable] = []
    inner_map, inner_unmap = rig.dmabuf.ops.map_dma_buf, rig.dmabuf.ops.unmap_dma_buf
    assert inner_map is not None and inner_unmap is not None

    def map_cb(attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        sgt = inner_map(attach, direction)
        assert sgt is not None
        made.append(sgt)
        return sgt

    def unmap_cb(attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection) -> None:
        returned.append(sgt)
        inner_unmap(attach, sgt, direction)

    rig.dmabuf.ops.map_dma_buf = map_cb
    rig.dmabuf.ops.unmap_dma_buf = unmap_cb
    return made, returned


def _check_importer_table(sgt: SgTable, own: SgTable, debug: bool) -> None:
    assert own.page_less is False  # TT memory: the exporter's table has pages
    if debug:
        assert sgt is not own and sgt.page_less is True and sgt.segments == own.segments
    else:
        assert sgt is own


@pytest.mark.parametrize("profile", PIN_AT_MAP)
@pytest.mark.parametrize("debug", [False, True])
def test_dmabuf_debug_map_hides_pages_and_unmap_returns_the_exporters_table(
    profile: str, debug: bool
) -> None:
    """§1.5, §2.8 (≥6.16) step 5 and unmap (dma_buf_map_attachment,
    dma_buf_unmap_attachment): with CONFIG_DMABUF_DEBUG the importer gets a page-less copy
    with the exporter's DMA addresses, and unmap hands E.unmap the table E made; without
    it the importer gets E's table itself, and unmap hands back that same table."""
    rig = Rig(get_profile(profile, dmabuf_debug=debug))
    made, returned = _record_exporter_tables(rig)
    attach = rig.static_attach()
    sgt = map_locked(attach)
    [own] = made
    _check_importer_table(sgt, own, debug)
    unmap_locked(attach, sgt)
    assert len(returned) == 1 and returned[0] is own


@pytest.mark.parametrize("profile", CACHING)
@pytest.mark.parametrize("debug", [False, True])
def test_dmabuf_debug_table_cached_at_attach_hides_pages_too(profile: str, debug: bool) -> None:
    """§1.5, §2.4 (≤6.15) (dma_buf_dynamic_attach, __map_dma_buf, dma_buf_detach): the
    table mapped and cached at attach for a static A of a dynamic E is what every map
    returns -- page-less under CONFIG_DMABUF_DEBUG, which these kernels apply inside
    __map_dma_buf -- and detach hands E.unmap the table E made."""
    rig = Rig(get_profile(profile, dmabuf_debug=debug))
    made, returned = _record_exporter_tables(rig)
    attach = rig.static_attach()
    sgt = map_locked(attach)
    assert map_locked(attach) is sgt
    [own] = made
    _check_importer_table(sgt, own, debug)
    dma_buf_detach(rig.dmabuf, attach)
    assert len(returned) == 1 and returned[0] is own
