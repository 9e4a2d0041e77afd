"""TTM: buffer objects, placements, resource managers, pinning, validation and eviction.

Models drivers/gpu/drm/ttm/ttm_bo.c and ttm_resource.c (``kernel-semantics.md`` §9,
``policy-semantics.md`` §2.6-§2.8):

* a :class:`TtmBufferObject` has at most one :class:`TtmResource` in one memory type
  (SYSTEM, TT, VRAM) at a time, a ``pin_count`` and a reservation object;
* each memory type has a :class:`TtmResourceManager` with a real range allocator
  (:class:`~pinlab.kernel.range_alloc.RangeAllocator`, O(log n)) and an LRU of evictable BOs;
  pinned BOs are not on the LRU (K-60);
* :func:`ttm_bo_validate` keeps a compatible placement (also when pinned), refuses to move a
  pinned BO (``-EINVAL``, K-61), and allocates in two passes -- no eviction in the first, and
  in the second eviction from non-SYSTEM places only (K-62, K-88); a final ``-ENOSPC`` is
  reported as ``-ENOMEM`` unless the device propagates ENOSPC (7.1);
* eviction asks the driver (:class:`TtmDeviceFuncs`) where to go (VRAM → GTT → SYSTEM, or no
  placement: gutting, K-63, K-86) and lets the driver notify dma-buf importers before the move;
* with ``dmem_protected_alloc`` (preset ``next``, K-126) an allocation within its cgroup's
  dmem min/low evicts instead of falling back to the next place, keeping its charge while the
  walk runs, and device-level eviction judges protection from the common ancestor of
  evictor and victim (:func:`ttm_bo_alloc_at_place`, :func:`ttm_bo_evict_alloc`);
* every move and clear is a copy job with a fence added to the resv as KERNEL (K-64). The
  kernel layer does not run copies: jobs queue on the device (or go to a submit hook) and
  whoever drives time signals their fences.
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pinlab.kernel.dmem import DmemChargeError, DmemController, DmemRegion
from pinlab.kernel.errno import Errno, KernelBug, KernelError, err
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.range_alloc import PAGE_SIZE, Allocation, RangeAllocator
from pinlab.kernel.resv import DmaResv, DmaResvUsage


class TtmMemType(enum.IntEnum):
    """``TTM_PL_SYSTEM``, ``TTM_PL_TT``, ``TTM_PL_VRAM``."""

    SYSTEM = 0
    TT = 1
    VRAM = 2

    def __str__(self) -> str:
        return {0: "SYSTEM", 1: "GTT", 2: "VRAM"}[int(self)]


class TtmPlFlag(enum.IntFlag):
    """``TTM_PL_FLAG_*``."""

    NONE = 0
    CONTIGUOUS = 1 << 0
    DESIRED = 1 << 3
    FALLBACK = 1 << 4


@dataclass(frozen=True, slots=True)
class TtmPlace:
    """``struct ttm_place``: one acceptable memory type with flags."""

    mem_type: TtmMemType
    flags: TtmPlFlag = TtmPlFlag.NONE

    def __str__(self) -> str:
        extra = [f.name.lower() for f in TtmPlFlag if f and f in self.flags and f.name]
        return str(self.mem_type) + (f"({','.join(extra)})" if extra else "")


TtmPlacement = tuple[TtmPlace, ...]
"""``struct ttm_placement``: places in order of preference; empty means "drop the backing"."""


def placement(*places: TtmPlace | TtmMemType) -> TtmPlacement:
    """Build a placement from places or bare memory types."""
    return tuple(p if isinstance(p, TtmPlace) else TtmPlace(p) for p in places)


class TtmBoType(enum.Enum):
    """``enum ttm_bo_type``: device BOs have their own backing; sg BOs are imports."""

    DEVICE = "device"
    KERNEL = "kernel"
    SG = "sg"


class TtmOperationCtx:
    """``struct ttm_operation_ctx``."""

    __slots__ = ("interruptible", "no_wait_gpu")

    def __init__(self, interruptible: bool = True, no_wait_gpu: bool = False) -> None:
        self.interruptible = interruptible
        self.no_wait_gpu = no_wait_gpu


_serials = itertools.count(1)


class TtmResource:
    """``struct ttm_resource``: where a BO's bytes are, charged to a dmem pool if any.

    ``start``, ``size``, ``mem_type`` and ``contiguous`` are fixed when the resource is made, as
    ``ttm_resource_init`` fills ``res->start``, ``res->size``, ``res->mem_type`` and the
    ``TTM_PL_FLAG_CONTIGUOUS`` bit of ``res->placement``: an allocation never changes its ranges.
    A move makes a new resource, so whether a BO moved is whether its resource is the same
    object; like ``struct ttm_resource``, a resource carries no serial number of its own.
    """

    __slots__ = (
        "allocation",
        "bo",
        "contiguous",
        "manager",
        "mem_type",
        "pool",
        "size",
        "start",
    )

    def __init__(
        self,
        manager: TtmResourceManager,
        bo: TtmBufferObject,
        allocation: Allocation,
        pool: object | None,
    ) -> None:
        self.manager = manager
        self.bo = bo
        self.allocation = allocation
        self.pool = pool
        self.start = allocation.start
        self.size = allocation.size
        self.mem_type = manager.mem_type
        self.contiguous = allocation.contiguous

    def __repr__(self) -> str:
        return f"<ttm_resource {self.manager.name}@{self.start:#x}+{self.size:#x}>"


class TtmResourceManager:
    """``struct ttm_resource_manager`` for one memory type of one device.

    Holds the range allocator, the LRU of evictable BOs (oldest first), the pipelined
    eviction fences new allocations must wait for, an optional dmem region, and counters.
    """

    __slots__ = (
        "allocator",
        "bdev",
        "evicted_bytes",
        "eviction_fences",
        "evictions",
        "lru",
        "lru_changes",
        "mem_type",
        "name",
        "on_pin_change",
        "pinned",
        "region",
        "size",
        "use_type",
    )

    def __init__(
        self,
        bdev: TtmDevice,
        mem_type: TtmMemType,
        size: int,
        *,
        name: str = "",
        region: DmemRegion | None = None,
        granule: int = 4096,
    ) -> None:
        self.bdev = bdev
        self.mem_type = mem_type
        self.name = name or f"{bdev.name}:{mem_type}"
        self.allocator = RangeAllocator(size, granule=granule, name=self.name)
        self.size = size  # man->size
        # insertion order is LRU order (move to the tail = pop and re-insert): a plain dict
        # costs less per BO than an OrderedDict's linked list
        self.lru: dict[int, TtmBufferObject] = {}
        # bumped on every change of the LRU (add, removal, move to the tail): an eviction
        # walk that sees it change resumes from the head (_lru_walk)
        self.lru_changes = 0
        self.pinned: dict[int, TtmBufferObject] = {}
        self.eviction_fences: list[DmaFence] = []
        self.region = region
        self.use_type = True
        self.evictions = 0
        self.evicted_bytes = 0
        # an observer of pin changes that move no memory (not a kernel hook: the simulator's
        # sampler learns of them instead of polling; allocations notify through the allocator)
        self.on_pin_change: Callable[[], None] | None = None

    @property
    def used(self) -> int:
        return self.allocator.used

    @property
    def pinned_bytes(self) -> int:
        return sum(bo.resource.size for bo in self.pinned.values() if bo.resource is not None)

    def lru_bos(self) -> list[TtmBufferObject]:
        """Evictable BOs, least recently used first."""
        return list(self.lru.values())

    def lru_add(self, bo: TtmBufferObject) -> None:
        """Put ``bo`` at the LRU tail (``ttm_resource_add_bulk_move``/``list_add_tail``)."""
        self.lru.pop(bo.serial, None)
        self.lru[bo.serial] = bo
        self.lru_changes += 1

    def lru_del(self, bo: TtmBufferObject) -> None:
        """Take ``bo`` off the LRU if it is there (``list_del_init``)."""
        if self.lru.pop(bo.serial, None) is not None:
            self.lru_changes += 1

    def __repr__(self) -> str:
        return f"<ttm manager {self.name} used={self.used}/{self.size}>"


@dataclass(slots=True)
class CopyJob:
    """One move or clear the copy engine must carry out; ``fence`` signals its end."""

    kind: str  # "move" | "clear"
    bo: TtmBufferObject
    src: TtmMemType | None
    dst: TtmMemType
    nbytes: int
    fence: DmaFence
    evict: bool = False


class TtmDeviceFuncs:
    """``struct ttm_device_funcs``: the driver's choices. Subclass to change them.

    The defaults are amdgpu's eviction targets (``amdgpu_evict_flags``, K-63): imported sg
    BOs get no placement (gutted), VRAM goes to GTT with SYSTEM as fallback, GTT goes to
    SYSTEM. :meth:`move` calls :meth:`move_notify` before copying, which is where an exporter
    sends ``dma_buf_move_notify`` (amdgpu's ``amdgpu_bo_move_notify``).
    """

    def evict_flags(self, bo: TtmBufferObject) -> TtmPlacement:
        if bo.type is TtmBoType.SG:
            return ()
        if bo.resource is not None and bo.resource.mem_type is TtmMemType.VRAM:
            return (
                TtmPlace(TtmMemType.TT),
                TtmPlace(TtmMemType.SYSTEM, TtmPlFlag.FALLBACK),
            )
        return (TtmPlace(TtmMemType.SYSTEM),)

    def eviction_valuable(self, bo: TtmBufferObject, place: TtmPlace) -> bool:
        """``ttm_bo_eviction_valuable``: by default any unpinned BO is worth evicting."""
        return True

    def move_notify(self, bo: TtmBufferObject, evict: bool, new_res: TtmResource | None) -> None:
        """Called under the resv before the BO's backing changes; drivers override."""

    def move(self, bo: TtmBufferObject, evict: bool, new_res: TtmResource) -> None:
        """``ttm_device_funcs.move``: notify, then an accelerated copy (``ttm_bo_move_accel``)."""
        self.move_notify(bo, evict, new_res)
        ttm_bo_move_accel(bo, new_res, evict)

    def release_notify(self, bo: TtmBufferObject) -> None:
        """``release_notify``: the BO is about to be destroyed."""


class TtmDevice:
    """``struct ttm_device``: the memory managers of one device plus its copy engine queue."""

    __slots__ = (
        "copy_queue",
        "copy_submit",
        "copy_timeline",
        "funcs",
        "gutted",
        "kernel",
        "managers",
        "moved_bytes",
        "moves",
        "name",
        "propagate_enospc",
        "revoke_pinned",
    )

    def __init__(
        self,
        kernel: Kernel,
        name: str,
        funcs: TtmDeviceFuncs | None = None,
        *,
        propagate_enospc: bool = False,
    ) -> None:
        self.kernel = kernel
        self.name = name
        self.funcs = funcs if funcs is not None else TtmDeviceFuncs()
        self.managers: dict[TtmMemType, TtmResourceManager] = {}
        self.copy_timeline = kernel.timeline(name, "ttm-copy")
        self.copy_queue: deque[CopyJob] = deque()
        self.copy_submit: Callable[[CopyJob], None] | None = None
        if propagate_enospc and not kernel.profile.ttm_propagate_enospc_available:
            raise ValueError(
                f"TTM_ALLOCATION_PROPAGATE_ENOSPC does not exist in kernel {kernel.profile.name}"
            )
        self.propagate_enospc = propagate_enospc
        # opt-in policy (pinlab.policy "revocable-pins"): may revoke a pinned victim's pins;
        # True when it did. None upstream: pinned BOs are never evicted (K-60).
        self.revoke_pinned: Callable[[TtmBufferObject], bool] | None = None
        self.moves = 0
        self.moved_bytes = 0
        self.gutted = 0

    def add_manager(
        self,
        mem_type: TtmMemType,
        size: int,
        *,
        name: str = "",
        region: DmemRegion | None = None,
        granule: int = 4096,
    ) -> TtmResourceManager:
        """``ttm_resource_manager_init`` + ``ttm_set_driver_manager``."""
        man = TtmResourceManager(self, mem_type, size, name=name, region=region, granule=granule)
        self.managers[mem_type] = man
        return man

    def manager(self, mem_type: TtmMemType) -> TtmResourceManager | None:
        """``ttm_manager_type``."""
        return self.managers.get(mem_type)

    @property
    def dmem(self) -> DmemController | None:
        kernel = self.kernel
        return kernel.dmem if kernel.profile.dmem else None

    def submit_copy(self, job: CopyJob) -> None:
        """Hand a copy job to whoever drives time (the hook, else the queue)."""
        if self.copy_submit is not None:
            self.copy_submit(job)
        else:
            self.copy_queue.append(job)

    def run_copies(self, timestamp: float | None = None) -> int:
        """Signal every queued job's fence at once: a test helper standing in for time."""
        n = 0
        while self.copy_queue:
            self.copy_queue.popleft().fence.signal(timestamp)
            n += 1
        return n

    def __repr__(self) -> str:
        return f"<ttm_device {self.name}>"


class TtmBufferObject:
    """``struct ttm_buffer_object``.

    ``epoch`` counts backing changes (moves, gutting): an sg_table made at an older epoch
    points at memory the BO no longer owns. ``dma_buf`` is the buffer this BO was exported as
    (``bo->base.dma_buf``); ``import_attach`` the attachment of an imported (sg) BO.
    """

    __slots__ = (
        "bdev",
        "deleted",
        "dma_buf",
        "driver_priv",
        "epoch",
        "import_attach",
        "name",
        "pin_count",
        "resource",
        "resv",
        "serial",
        "size",
        "type",
    )

    def __init__(
        self,
        bdev: TtmDevice,
        size: int,
        bo_type: TtmBoType = TtmBoType.DEVICE,
        *,
        resv: DmaResv | None = None,
        name: str = "",
    ) -> None:
        if size % PAGE_SIZE:
            # drm_gem_private_object_init: BUG_ON((size & (PAGE_SIZE - 1)) != 0). GEM sizes are
            # page-aligned, so the dmem charge of the whole BO size (P-29) is what the
            # page-granular managers allocate.
            raise KernelBug(f"drm_gem_private_object_init: size {size:#x} is not page-aligned")
        self.bdev = bdev
        self.size = size
        self.type = bo_type
        self.serial = next(_serials)
        self.name = name or f"bo{self.serial}"
        self.resv = resv if resv is not None else DmaResv(bdev.kernel, self.name)
        self.resource: TtmResource | None = None
        self.pin_count = 0
        self.epoch = 0
        self.deleted = False
        self.dma_buf: object | None = None
        self.import_attach: object | None = None
        self.driver_priv: object | None = None

    @property
    def mem_type(self) -> TtmMemType | None:
        return self.resource.mem_type if self.resource is not None else None

    def __repr__(self) -> str:
        where = str(self.mem_type) if self.resource is not None else "none"
        return f"<ttm_bo {self.name} {self.size:#x} in {where} pin={self.pin_count}>"


# -- resources -----------------------------------------------------------------------------


def ttm_resource_alloc(
    bo: TtmBufferObject, place: TtmPlace, *, want_limit_pool: bool = False
) -> TtmResource:
    """``ttm_resource_alloc``: charge dmem (if the region is registered), then allocate.

    Raises ``-EAGAIN`` (:class:`DmemChargeError`, carrying the limit pool when
    ``want_limit_pool``) or ``-ENOSPC``; on failure nothing stays charged.
    """
    pool = ttm_resource_try_charge(bo, place, want_limit_pool=want_limit_pool)
    return _ttm_resource_alloc_charged(bo, place, pool, keep_charge=False)


def ttm_resource_try_charge(
    bo: TtmBufferObject, place: TtmPlace, *, want_limit_pool: bool = False
) -> object | None:
    """``ttm_resource_try_charge``: charge the whole BO to the allocating task's dmem pool
    when the place's manager has a registered region; the pool, or None (not accounted).
    Raises ``-EAGAIN`` (:class:`DmemChargeError`, with the limit pool if ``want_limit_pool``)."""
    bdev = bo.bdev
    man = bdev.managers[place.mem_type]
    dmem = bdev.dmem
    if dmem is None or man.region is None:
        return None
    try:
        return dmem.try_charge(man.region, bo.size, bdev.kernel.current)
    except DmemChargeError as e:
        if not want_limit_pool:
            e.limit_pool = None
        raise


def _ttm_resource_alloc_charged(
    bo: TtmBufferObject, place: TtmPlace, pool: object | None, *, keep_charge: bool
) -> TtmResource:
    """The manager's allocation for an already taken charge (``man->func->alloc``); the
    resource owns ``pool`` on success. ``-ENOSPC`` when the range allocator has no room, the
    charge then returned unless ``keep_charge`` (K-126 keeps it for the eviction walk)."""
    man = bo.bdev.managers[place.mem_type]
    contiguous = TtmPlFlag.CONTIGUOUS in place.flags  # a test, not a new flag: hot
    try:
        allocation = man.allocator.alloc(bo.size, contiguous=contiguous)
    except KernelError:
        if not keep_charge:
            _uncharge(bo, pool)
        raise err(Errno.ENOSPC, "ttm_resource_alloc", f"{man.name} has no room") from None
    return TtmResource(man, bo, allocation, pool)


def _uncharge(bo: TtmBufferObject, pool: object | None) -> None:
    if pool is None:
        return
    dmem = bo.bdev.dmem
    if dmem is not None:
        dmem.uncharge(pool, bo.size)


def ttm_resource_free(bo: TtmBufferObject, res: TtmResource | None) -> None:
    """``ttm_resource_free``: return the range and uncharge the dmem pool."""
    if res is None:
        return
    man = res.manager
    man.lru_del(bo)
    man.pinned.pop(bo.serial, None)
    man.allocator.free(res.allocation)
    _uncharge(bo, res.pool)


def ttm_resource_compatible(res: TtmResource, plc: TtmPlacement, evicting: bool) -> bool:
    """``ttm_resource_compatible``: ``res`` satisfies some place of ``plc``.

    Places flagged DESIRED are ignored when ``evicting`` (the forcing pass), FALLBACK places
    otherwise (K-88); a CONTIGUOUS place needs a contiguous resource.
    """
    skip = TtmPlFlag.DESIRED if evicting else TtmPlFlag.FALLBACK
    use_flags = res.manager.bdev.kernel.profile.ttm_desired_fallback
    for place in plc:
        if place.mem_type != res.mem_type:
            continue
        if use_flags and place.flags & skip:
            continue
        if place.flags & TtmPlFlag.CONTIGUOUS and not res.contiguous:
            continue
        return True
    return False


def _set_resource(bo: TtmBufferObject, res: TtmResource | None) -> None:
    """Install ``res`` as the BO's backing and put it on the right list."""
    bo.resource = res
    bo.epoch += 1
    if res is None:
        return
    if bo.pin_count:
        res.manager.pinned[bo.serial] = bo
    else:
        res.manager.lru_add(bo)


def ttm_bo_move_to_lru_tail(bo: TtmBufferObject) -> None:
    """``ttm_bo_move_to_lru_tail``: the BO was used; evict it last."""
    res = bo.resource
    if res is not None and not bo.pin_count and bo.serial in res.manager.lru:
        res.manager.lru_add(bo)


# -- pinning -------------------------------------------------------------------------------


def ttm_bo_pin(bo: TtmBufferObject) -> None:
    """``ttm_bo_pin``: resv held; ``pin_count`` + 1; on 0 → 1 the BO leaves the LRU for the
    unevictable list. Pinning never moves the BO (§9.1)."""
    bo.resv.assert_held("ttm_bo_pin")
    bo.pin_count += 1
    if bo.pin_count == 1 and bo.resource is not None:
        man = bo.resource.manager
        man.lru_del(bo)
        man.pinned[bo.serial] = bo
        if man.on_pin_change is not None:
            man.on_pin_change()


def ttm_bo_unpin(bo: TtmBufferObject) -> None:
    """``ttm_bo_unpin``: resv held; with ``pin_count`` 0 WARN_ON_ONCE and change nothing
    (K-59); on 1 → 0 the BO goes back to the LRU tail."""
    bo.resv.assert_held("ttm_bo_unpin")
    if bo.pin_count == 0:
        bo.bdev.kernel.warn("ttm_bo_unpin", "!bo->pin_count", once=True)
        return
    bo.pin_count -= 1
    if bo.pin_count == 0 and bo.resource is not None:
        man = bo.resource.manager
        man.pinned.pop(bo.serial, None)
        man.lru_add(bo)
        if man.on_pin_change is not None:
            man.on_pin_change()


# -- allocation, validation, eviction -------------------------------------------------------


def _skip_flag(bdev: TtmDevice, force_space: bool) -> TtmPlFlag:
    if not bdev.kernel.profile.ttm_desired_fallback:
        return TtmPlFlag.NONE  # pre-6.9: busy placements, modelled as flag-less places
    return TtmPlFlag.DESIRED if force_space else TtmPlFlag.FALLBACK


class TtmBoAllocState:
    """``struct ttm_bo_alloc_state``: what one place's allocation attempt hands to the
    eviction walk.

    ``limit_pool``: the pool whose ``dmem.max`` refused the charge (forcing pass only). With
    ``dmem_protected_alloc`` (K-126) the charge is taken once per place and kept while the
    walk evicts -- ``charge_pool``, None once a resource owns it or when not accounted --;
    ``in_evict`` marks the walk's own retries; ``may_try_low`` False forbids the walk's low
    pass and victims of the evictor's own pool. It starts False, as ``ttm_bo_alloc_resource``
    zeroes the state per place (``alloc_state = {}``), and only a charged attempt outside the
    walk sets it, so an allocation whose charge ``dmem.max`` refused never runs the low pass
    (read with K-126 only: before it the low pass needs no permission).
    """

    __slots__ = ("charge_pool", "in_evict", "limit_pool", "may_try_low")

    def __init__(self) -> None:
        self.charge_pool: object | None = None
        self.limit_pool: object | None = None
        self.in_evict = False
        self.may_try_low = False


def ttm_bo_alloc_at_place(
    bo: TtmBufferObject, place: TtmPlace, force_space: bool, state: TtmBoAllocState
) -> TtmResource | Errno:
    """``ttm_bo_alloc_at_place``: one attempt in ``place``: the resource, or the verdict
    ``EBUSY`` ("evict and retry", :func:`ttm_bo_evict_alloc`) or ``ENOSPC`` ("try the next
    place"); other errors are raised.

    Without ``dmem_protected_alloc`` only a forcing pass outside SYSTEM evicts, after a charge
    refusal (``-EAGAIN``, its limit pool kept in ``state``) or a full manager (K-62). With it
    (K-126) the charge comes first and stays in ``state.charge_pool`` until a resource owns
    it; outside the eviction walk, a charged pool then within its effective ``dmem.min`` or
    ``dmem.low`` -- global protection, from the region's root pool -- makes the attempt evict
    even in the idle pass and although its charge fitted, and ``may_try_low`` is whether it
    may evict without the low-protection limit (forcing pass or ``dmem.min``). A refused charge
    leaves ``may_try_low`` alone (patches 4 and 5 of the v6 series set it only after a charge),
    so its walk keeps to the low-respecting pass.
    """
    may_evict = not state.in_evict and force_space and place.mem_type is not TtmMemType.SYSTEM
    if not bo.bdev.kernel.profile.dmem_protected_alloc:
        try:
            return ttm_resource_alloc(bo, place, want_limit_pool=force_space)
        except KernelError as e:
            if e.errno is not Errno.ENOSPC and e.errno is not Errno.EAGAIN:
                raise
            if force_space:
                state.limit_pool = e.limit_pool if isinstance(e, DmemChargeError) else None
            return Errno.EBUSY if may_evict else Errno.ENOSPC
    if state.charge_pool is None:
        try:
            state.charge_pool = ttm_resource_try_charge(bo, place, want_limit_pool=force_space)
        except DmemChargeError as e:
            if force_space:
                state.limit_pool = e.limit_pool
            return Errno.EBUSY if may_evict else Errno.ENOSPC
    dmem = bo.bdev.dmem
    if not state.in_evict and dmem is not None:
        may_evict |= dmem.below_min(None, state.charge_pool)
        state.may_try_low = may_evict
        may_evict |= dmem.below_low(None, state.charge_pool)
    try:
        res = _ttm_resource_alloc_charged(bo, place, state.charge_pool, keep_charge=True)
    except KernelError:
        return Errno.EBUSY if may_evict else Errno.ENOSPC
    state.charge_pool = None
    return res


def ttm_bo_alloc_resource(
    bo: TtmBufferObject, plc: TtmPlacement, ctx: TtmOperationCtx, force_space: bool
) -> TtmResource:
    """``ttm_bo_alloc_resource``: try each place in order (K-62, K-88, K-126).

    Pass 1 (``force_space`` False) skips FALLBACK places, pass 2 DESIRED places;
    :func:`ttm_bo_alloc_at_place` decides whether a full place is evicted from (pass 2 outside
    SYSTEM; with K-126 also a protected allocation in either pass). A place whose eviction walk
    frees nothing (``-EBUSY``) is skipped, its kept charge returned. New resources wait
    (KERNEL) for the manager's pipelined eviction fences. All places failing gives ``-ENOSPC``.
    """
    bdev = bo.bdev
    skip = _skip_flag(bdev, force_space)
    for place in plc:
        man = bdev.managers.get(place.mem_type)
        if man is None or not man.use_type:
            continue
        if skip and skip in place.flags:  # one flag (_skip_flag)
            continue
        state = TtmBoAllocState()
        try:
            res = ttm_bo_alloc_at_place(bo, place, force_space, state)
            if res is Errno.EBUSY:
                res = ttm_bo_evict_alloc(man, place, bo, ctx, state)
        except KernelError as e:
            _uncharge(bo, state.charge_pool)
            if e.errno is Errno.EBUSY:
                continue
            raise
        if isinstance(res, Errno):  # ENOSPC: the next place
            _uncharge(bo, state.charge_pool)
            continue
        for fence in man.eviction_fences:
            if not fence.signaled:
                bo.resv.add_fence(fence, DmaResvUsage.KERNEL)
        man.eviction_fences = [f for f in man.eviction_fences if not f.signaled]
        return res
    raise err(Errno.ENOSPC, "ttm_bo_alloc_resource", "no place has room")


def ttm_bo_mem_space(bo: TtmBufferObject, plc: TtmPlacement, ctx: TtmOperationCtx) -> TtmResource:
    """``ttm_bo_mem_space``: an idle pass, then a forcing pass on ``-ENOSPC``."""
    try:
        return ttm_bo_alloc_resource(bo, plc, ctx, False)
    except KernelError as e:
        if e.errno is not Errno.ENOSPC:
            raise
    return ttm_bo_alloc_resource(bo, plc, ctx, True)


def ttm_bo_evict_alloc(
    man: TtmResourceManager,
    place: TtmPlace,
    evictor: TtmBufferObject,
    ctx: TtmOperationCtx,
    state: TtmBoAllocState,
) -> TtmResource:
    """``ttm_bo_evict_alloc``: walk the LRU evicting until ``evictor`` fits (K-60).

    One walk with low protection respected; if that frees nothing and a victim was shielded
    only by ``dmem.low``, a second walk ignoring low (``policy-semantics.md`` §2.8) -- with
    K-126 only if ``state.may_try_low``. Victims the dmem controller protects, pinned BOs, BOs
    whose resv is held (by anyone, the caller included: the walk trylocks) and BOs whose own
    eviction finds no space are skipped. ``-EBUSY`` when nothing could be freed.
    """
    dmem = man.bdev.dmem
    protected = man.bdev.kernel.profile.dmem_protected_alloc
    state.in_evict = True
    try:
        try_low = False
        while True:
            hit_low = False
            for victim in _lru_walk(man):
                if victim is evictor or victim.resource is None:
                    continue
                if dmem is not None:
                    pool = victim.resource.pool
                    valuable, low = _dmem_may_evict(dmem, state, pool, try_low, protected)
                    hit_low = hit_low or low
                    if not valuable:
                        continue
                if victim.pin_count or not man.bdev.funcs.eviction_valuable(victim, place):
                    continue
                res = _evict_victim_and_alloc(victim, evictor, place, ctx, state)
                if res is not None:
                    return res
            if hit_low and not try_low and (state.may_try_low or not protected):
                try_low = True
                continue
            res = _revoke_and_evict(man, place, evictor, ctx, state)
            if res is not None:
                return res
            raise err(Errno.EBUSY, "ttm_bo_evict_alloc", f"nothing evictable in {man.name}")
    finally:
        state.in_evict = False


def _lru_walk(man: TtmResourceManager) -> Iterator[TtmBufferObject]:
    """The BOs on ``man``'s LRU, least recently used first, each at most once, as the
    kernel's cursor walk (``ttm_resource_manager_first``/``_next``) finds them.

    The walk's own evictions change the LRU under it (a victim leaves it; a driver's notifier
    may do more), so no copy of the whole LRU is taken -- that would cost O(n) for every
    evicting allocation at a million BOs. The dict is iterated directly, and when the LRU has
    changed since the last step (``lru_changes``) the walk starts over at the head, passing
    the BOs it has already visited: a step is O(1) plus, after an eviction, the BOs skipped
    at the head so far. BOs that left the LRU are not visited (the kernel's cursor walks the
    live list); one that joined it during the walk is, at its place.
    """
    lru = man.lru
    seen: set[int] = set()
    restart = True
    while restart:
        restart = False
        changes = man.lru_changes
        for serial, bo in lru.items():
            if serial in seen:
                continue
            seen.add(serial)
            yield bo
            if man.lru_changes != changes:
                restart = True
                break


def _dmem_may_evict(
    dmem: DmemController,
    state: TtmBoAllocState,
    victim_pool: object | None,
    try_low: bool,
    protected: bool,
) -> tuple[bool, bool]:
    """``ttm_bo_evict_cb``'s dmem verdict (may evict, hit_low) on one victim.

    Before K-126 the limit pool is the reference (None at device-level pressure). With
    ``dmem_protected_alloc``: an allocation protected by low only never takes victims of its
    own pool (which ``evict_valuable`` would always allow), and without a limit pool the
    reference is the common ancestor of the victim's and the evictor's pools, so siblings'
    own protection is compared directly (patch 6/6).
    """
    limit = state.limit_pool
    if protected:
        if not state.may_try_low and victim_pool is state.charge_pool:
            return False, False
        if limit is None:
            limit = dmem.common_ancestor(victim_pool, state.charge_pool)
    return dmem.evict_valuable(limit, victim_pool, try_low)


def _revoke_and_evict(
    man: TtmResourceManager,
    place: TtmPlace,
    evictor: TtmBufferObject,
    ctx: TtmOperationCtx,
    state: TtmBoAllocState,
) -> TtmResource | None:
    """The opt-in revoke pass (no upstream equivalent): ask the device's ``revoke_pinned``
    policy to revoke pinned victims, least recently pinned first; a victim whose pin count
    drops to 0 is evicted like any other.

    The pinned BOs are listed once, and the policy's work on one may release or move another,
    so an entry is skipped when it has no backing any more or its backing is no longer in
    ``man``, as the kernel's LRU cursor skips a BO that "may have switched resource, and also
    memory type" by the time it is locked (ttm_bo_util.c ``__ttm_bo_lru_cursor_next``, K-60).
    The evictor is skipped too (its resv is held, so the trylock would refuse it anyway)."""
    revoke = man.bdev.revoke_pinned
    if revoke is None:
        return None
    for victim in list(man.pinned.values()):
        if victim is evictor or victim.resource is None or victim.resource.manager is not man:
            continue
        res = _evict_victim_and_alloc(victim, evictor, place, ctx, state, revoke)
        if res is not None:
            return res
    return None


def _evict_victim_and_alloc(
    victim: TtmBufferObject,
    evictor: TtmBufferObject,
    place: TtmPlace,
    ctx: TtmOperationCtx,
    state: TtmBoAllocState,
    revoke: Callable[[TtmBufferObject], bool] | None = None,
) -> TtmResource | None:
    """``ttm_bo_evict_cb`` for one victim: trylock it, (revoke pass only) revoke its pins,
    evict it, and retry ``evictor``'s allocation. None means "go on with the next victim".

    ``ttm_lru_walk_trylock``: ``dma_resv_trylock`` also fails on a resv the caller already
    holds (the BO being validated, or one it reserved), so such a victim is skipped like one
    held by someone else (the model has no ``ctx->allow_res_evict``). A victim whose own
    eviction finds no space (-ENOSPC) becomes -EBUSY, which the walk treats as "skip", instead
    of failing the whole allocation (K-62). The retry is :func:`ttm_bo_alloc_at_place` in the
    idle mode, reusing a charge kept in ``state`` (K-126).
    """
    if not victim.resv.trylock():
        return None
    try:
        if revoke is not None and (not revoke(victim) or victim.pin_count):
            return None
        ttm_bo_evict(victim, ctx)
    except KernelError as e:
        if e.errno in (Errno.ENOSPC, Errno.EBUSY):
            return None
        raise
    finally:
        victim.resv.unlock()
    res = ttm_bo_alloc_at_place(evictor, place, False, state)
    return None if isinstance(res, Errno) else res


def ttm_bo_evict(bo: TtmBufferObject, ctx: TtmOperationCtx) -> None:
    """``ttm_bo_evict``: move ``bo`` where the driver's ``evict_flags`` say (K-63).

    No placement: drop the backing (gutting, K-86). Otherwise ``ttm_bo_mem_space`` for the
    destination ("Failed to find memory space for buffer eviction" on failure) and the
    driver's move, which notifies importers first.
    """
    bdev = bo.bdev
    plc = bdev.funcs.evict_flags(bo)
    old = bo.resource
    if old is None:
        return
    if not plc:
        ttm_bo_pipeline_gutting(bo)
        old.manager.evictions += 1
        old.manager.evicted_bytes += bo.size
        return
    try:
        new_res = ttm_bo_mem_space(bo, plc, ctx)
    except KernelError:
        bdev.kernel.log(f"[TTM] Failed to find memory space for buffer {bo.name} eviction")
        raise
    old.manager.evictions += 1
    old.manager.evicted_bytes += bo.size
    ttm_bo_handle_move_mem(bo, new_res, evict=True)


def ttm_bo_handle_move_mem(bo: TtmBufferObject, new_res: TtmResource, evict: bool) -> None:
    """``ttm_bo_handle_move_mem``: let the driver move the BO into ``new_res``."""
    bo.bdev.funcs.move(bo, evict, new_res)


def ttm_bo_move_accel(bo: TtmBufferObject, new_res: TtmResource, evict: bool = False) -> None:
    """``ttm_bo_move_accel_cleanup``: a copy job from the old to the new resource.

    The copy's fence goes into the resv with usage KERNEL (K-64). With a pipelined eviction
    the old range is freed at once and the source manager remembers the fence, so the next
    allocation there waits for it (``ttm_bo_add_pipelined_eviction_fences``). A BO without
    backing (new or gutted) needs no copy.
    """
    bdev = bo.bdev
    old = bo.resource
    if old is not None:
        fence = bdev.copy_timeline.next_fence()
        bo.resv.add_fence(fence, DmaResvUsage.KERNEL)
        bdev.moves += 1
        bdev.moved_bytes += bo.size
        job = CopyJob("move", bo, old.mem_type, new_res.mem_type, bo.size, fence, evict)
        if evict:
            old.manager.eviction_fences.append(fence)
        ttm_resource_free(bo, old)
        bdev.submit_copy(job)
    _set_resource(bo, new_res)


def ttm_bo_clear(bo: TtmBufferObject) -> DmaFence:
    """Clear a freshly allocated resource (amdgpu's VRAM_CLEARED): a KERNEL fence (K-64)."""
    bo.resv.assert_held("ttm_bo_clear")
    if bo.resource is None:
        raise KernelBug(f"ttm_bo_clear: {bo!r} has no backing")
    bdev = bo.bdev
    fence = bdev.copy_timeline.next_fence()
    bo.resv.add_fence(fence, DmaResvUsage.KERNEL)
    bdev.submit_copy(CopyJob("clear", bo, None, bo.resource.mem_type, bo.size, fence))
    return fence


def ttm_bo_pipeline_gutting(bo: TtmBufferObject) -> None:
    """``ttm_bo_pipeline_gutting`` (ttm_bo_util.c): drop the backing store (K-86).

    The order of the kernel's idle path since v6.4: the driver first drops what it built on
    the backing -- ``ttm_tt_unpopulate``, where amdgpu's backend unbind unmaps an import's
    attachment; modelled by ``move_notify(bo, True, None)``, although TTM calls no move
    callback here -- then ``ttm_resource_free``, which leaves the BO without a resource.

    Not modelled, and why: before v6.4 ("drm/ttm: stop allocating a dummy resource for
    pipelined gutting", Christian König, in drm-misc-next for v6.4-rc1; preset 5.16) the
    kernel also allocated a SYSTEM resource and gave it to the BO. That resource
    has no pages -- the tt is unpopulated, and amdgpu_bo_move leaves SYSTEM for GTT without a
    copy -- which pinlab's SYSTEM manager, counting pages, cannot hold, so every preset leaves
    the BO without a resource. A BO that is not idle hands its resource and tt to a ghost BO
    the kernel frees when its fences signal (``ttm_buffer_object_transfer``); the eviction
    path waits for idle first, so only a busy BO validated against an empty placement keeps
    its range a while in the kernel. pinlab frees it at once.
    """
    if bo.resource is None:
        return
    bo.bdev.funcs.move_notify(bo, True, None)
    ttm_resource_free(bo, bo.resource)
    _set_resource(bo, None)
    bo.bdev.gutted += 1


def ttm_bo_validate(
    bo: TtmBufferObject, plc: TtmPlacement, ctx: TtmOperationCtx | None = None
) -> None:
    """``ttm_bo_validate``: make the BO's placement satisfy ``plc`` (K-61, K-62, K-86, K-88).

    Caller holds the resv. Empty placement: gutting. A compatible current resource: return 0,
    also when pinned. Pinned and a move needed: ``-EINVAL``. Otherwise an idle allocation
    pass and then a forcing (evicting) pass; every place failing is ``-ENOSPC``, returned as
    ``-ENOMEM`` unless the device propagates ENOSPC.
    """
    bo.resv.assert_held("ttm_bo_validate")
    ctx = ctx if ctx is not None else TtmOperationCtx()
    if not plc:
        ttm_bo_pipeline_gutting(bo)
        return
    force_space = False
    while True:
        if bo.resource is not None and ttm_resource_compatible(bo.resource, plc, force_space):
            return
        if bo.pin_count:
            raise err(Errno.EINVAL, "ttm_bo_validate", f"{bo.name} is pinned and must move")
        try:
            res = ttm_bo_alloc_resource(bo, plc, ctx, force_space)
        except KernelError as e:
            if e.errno is Errno.ENOSPC and not force_space:
                force_space = True
                continue
            if e.errno is Errno.ENOSPC and not bo.bdev.propagate_enospc:
                raise err(Errno.ENOMEM, "ttm_bo_validate", e.reason) from None
            raise
        ttm_bo_handle_move_mem(bo, res, evict=False)
        return


def ttm_bo_init_reserved(
    bdev: TtmDevice,
    size: int,
    plc: TtmPlacement,
    bo_type: TtmBoType = TtmBoType.DEVICE,
    *,
    resv: DmaResv | None = None,
    name: str = "",
    ctx: TtmOperationCtx | None = None,
) -> TtmBufferObject:
    """``ttm_bo_init_reserved``: create a BO and validate it into ``plc``.

    Returns with the BO's own resv locked (or the passed ``resv``, which the caller must
    already hold). On failure nothing is left allocated or locked.
    """
    if size <= 0:
        raise err(Errno.EINVAL, "ttm_bo_init_reserved", f"size {size} must be positive")
    bo = TtmBufferObject(bdev, size, bo_type, resv=resv, name=name)
    if resv is None:
        if not bo.resv.trylock():
            bdev.kernel.warn("ttm_bo_init_reserved", "!dma_resv_trylock(bo->base.resv)")
    else:
        resv.assert_held("ttm_bo_init_reserved")
    try:
        ttm_bo_validate(bo, plc, ctx)
    except KernelError:
        if resv is None:
            bo.resv.unlock()
        raise
    return bo


def ttm_bo_init_validate(
    bdev: TtmDevice,
    size: int,
    plc: TtmPlacement,
    bo_type: TtmBoType = TtmBoType.DEVICE,
    *,
    resv: DmaResv | None = None,
    name: str = "",
) -> TtmBufferObject:
    """``ttm_bo_init_validate``: :func:`ttm_bo_init_reserved`, then unreserve."""
    bo = ttm_bo_init_reserved(bdev, size, plc, bo_type, resv=resv, name=name)
    if resv is None:
        bo.resv.unlock()
    return bo


def ttm_bo_release(bo: TtmBufferObject) -> None:
    """``ttm_bo_release``: the last reference is gone (K-87).

    A non-zero ``pin_count`` WARNs; on the delayed-destroy path the count is forced to 0 and
    the backing freed. Releasing twice is a model bug (``KernelBug``).
    """
    if bo.deleted:
        raise KernelBug(f"ttm_bo_release: {bo!r} released twice")
    bdev = bo.bdev
    if bo.pin_count:
        bdev.kernel.warn("ttm_bo_release", "bo->pin_count")
        bo.pin_count = 0
    bdev.funcs.release_notify(bo)
    ttm_resource_free(bo, bo.resource)
    bo.resource = None
    bo.epoch += 1
    bo.deleted = True


def iter_bos(bdev: TtmDevice) -> Iterator[TtmBufferObject]:
    """Every BO with backing on ``bdev`` (evictable first, then pinned), for reports."""
    for man in bdev.managers.values():
        yield from man.lru.values()
        yield from man.pinned.values()


def fences_of(jobs: Sequence[CopyJob]) -> list[DmaFence]:
    return [job.fence for job in jobs]
