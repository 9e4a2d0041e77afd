"""The cgroup v2 ``dmem`` controller (kernel/cgroup/dmem.c as merged for Linux 6.14).

It limits and protects **device memory allocation** per cgroup (``policy-semantics.md`` §2);
it knows nothing of pins -- a pinned VRAM BO stays charged to whichever pool paid for its
allocation, and TTM simply never evicts it (P-27). :class:`DmemCgroupController` implements
the kernel-side interface :class:`pinlab.kernel.dmem.DmemController` that TTM calls:

* regions: :meth:`~DmemCgroupController.register_region` (``dmem_cgroup_register_region``;
  a region of size 0 is no region, P-30) and :meth:`~DmemCgroupController.unregister_region`
  (later charges fail with ``-ENODEV``). A :class:`~pinlab.kernel.dmem.DmemRegion` reaching
  :meth:`~DmemCgroupController.try_charge` that was never registered here is registered on
  the spot: in the kernel the region object exists only because registration returned it,
  and pinlab's drivers build it themselves (``drm/<pci>/vram``, ``drm/<pci>/vram0``, P-31);
* pools (``dmem_cgroup_pool_state``): one per (cgroup, region), created lazily -- with the
  same region's pools of all ancestors -- at the first charge or limit write; each holds a
  :class:`~pinlab.policy.page_counter.PageCounter` in **bytes** whose parent is the same
  region's pool of the parent cgroup (:class:`RegionPool` in a :class:`PoolTable`, which the
  dmem-pin-max proposal's pin pools share);
* :meth:`~DmemCgroupController.try_charge` (``dmem_cgroup_try_charge``): charge the
  **allocating task's** cgroup and every ancestor (P-16); a limit refusal is ``-EAGAIN``
  carrying the pool that refused (P-17, P-18); :meth:`~DmemCgroupController.uncharge`
  (``dmem_cgroup_uncharge``, P-23);
* :meth:`~DmemCgroupController.evict_valuable` (``dmem_cgroup_state_evict_valuable``, §2.7):
  whether TTM may evict a victim's BO for an allocation that hit ``limit_pool`` (P-24..P-26,
  P-33, P-34), with effective protection recomputed top-down over the reference pool's
  subtree on every call (``dmem_cgroup_calculate_protection``, always recursive);
* the queries of the queued protection-aware allocation (``next``, kernel.md K-126):
  :meth:`~DmemCgroupController.below_min` / :meth:`~DmemCgroupController.below_low` and
  :meth:`~DmemCgroupController.common_ancestor`;
* interface files (``dmemcg_limit_show`` / ``dmemcg_limit_write``, §2.2-§2.3, P-19..P-22,
  P-35, P-36): ``dmem.capacity`` (root only), ``dmem.current`` (everywhere), ``dmem.min``,
  ``dmem.low``, ``dmem.max`` (not on the root); one ``<region> <value>`` line per registered
  region, ``max`` for unlimited;
* ``css_offline`` resets a removed cgroup's min/low/max to 0/0/max (P-32).

Unlike memcg (P-46) dmem protection is recursive regardless of mount options and does not
ignore the protection of a cgroup without processes. Like memcg's ``memory.max`` it would be
natural to reclaim when ``dmem.max`` is lowered -- 6.14 does not (P-35): a value below the
current usage is silently not applied (P-20).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Self, TypeVar

from pinlab.kernel.dmem import DmemChargeError, DmemRegion
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.ttm import TtmDevice
from pinlab.policy.cgroup import CfType, Cgroup, CgroupFile, CgroupSubsys, CgroupTree
from pinlab.policy.dmem_limits import dmemcg_limit_show, dmemcg_limit_write, format_limit
from pinlab.policy.dmem_peak import add_peak_file
from pinlab.policy.page_counter import (
    PAGE_COUNTER_MAX,
    PageCounter,
    page_counter_calculate_protection,
)

# -- pools ---------------------------------------------------------------------------------------


class RegionPool:
    """One region's byte counter in one cgroup, whose parent counter is the same region's pool
    of the parent cgroup -- the shape of ``struct dmem_cgroup_pool_state``, shared with the
    dmem-pin-max proposal's pin pools. ``label`` names the counter in page_counter warnings
    and ``kind`` the pool in ``repr``."""

    __slots__ = ("cgroup", "cnt", "parent", "region")
    label = "dmem"
    kind = "dmem pool"
    protection = True

    def __init__(
        self, cgroup: Cgroup, region: DmemRegion, parent: Self | None, warnings: list[str]
    ) -> None:
        self.cgroup = cgroup
        self.region = region
        self.parent = parent
        self.cnt: PageCounter = PageCounter(
            parent.cnt if parent is not None else None,
            protection_support=self.protection,
            name=f"{self.label} {cgroup.path} {region.name}",
            owner=self,
            warnings=warnings,
        )

    def __repr__(self) -> str:
        return (
            f"<{self.kind} {self.cgroup.path} {self.region.name} "
            f"current={self.cnt.usage} max={format_limit(self.cnt.max)}>"
        )


P = TypeVar("P", bound=RegionPool)


class PoolTable(Generic[P]):
    """The pools of every cgroup by region (``dmem_cgroup_state->pools``), each created on
    demand together with the same region's pools of all ancestors (``get_cg_pool_unlocked``).
    ``make(cgroup, region, parent)`` builds one pool."""

    __slots__ = ("_by_cgroup", "_make", "tree")

    def __init__(self, tree: CgroupTree, make: Callable[[Cgroup, DmemRegion, P | None], P]) -> None:
        self.tree = tree
        self._make = make
        self._by_cgroup: dict[Cgroup, dict[DmemRegion, P]] = {}

    def find(self, cgrp: Cgroup | str, region: DmemRegion) -> P | None:
        """The pool of ``region`` in ``cgrp`` (a path or a cgroup), if it was created."""
        if isinstance(cgrp, str):
            cgrp = self.tree.lookup(cgrp)
        pools = self._by_cgroup.get(cgrp)
        return pools.get(region) if pools is not None else None

    def get(self, cgrp: Cgroup, region: DmemRegion) -> P:
        """Find or create the pool, creating the ancestors' pools first."""
        pool = self.find(cgrp, region)
        if pool is not None:
            return pool
        parent = self.get(cgrp.parent, region) if cgrp.parent is not None else None
        pool = self._make(cgrp, region, parent)
        self._by_cgroup.setdefault(cgrp, {})[region] = pool
        return pool

    def of(self, cgrp: Cgroup | str | None = None) -> list[P]:
        """The pools of one cgroup, or of every cgroup (pre-order, dying ones included)."""
        if cgrp is not None:
            if isinstance(cgrp, str):
                cgrp = self.tree.lookup(cgrp)
            return list(self._by_cgroup.get(cgrp, {}).values())
        out: list[P] = []
        for c in self.tree.walk_css(self.tree.root):
            out.extend(self._by_cgroup.get(c, {}).values())
        return out

    def release(self, cgrp: Cgroup) -> None:
        """A freed cgroup's pools go away, their counters detached from the parents'."""
        for pool in self._by_cgroup.pop(cgrp, {}).values():
            pool.cnt.detach()

    def forget_region(self, region: DmemRegion) -> None:
        """``region``'s pools leave their cgroups (the charges they hold can still be uncharged)."""
        for pools in self._by_cgroup.values():
            pools.pop(region, None)

    def show(
        self, regions: Callable[[], Iterable[DmemRegion]], get: Callable[[P | None], int]
    ) -> Callable[[Cgroup], str]:
        """A ``dmemcg_limit_show`` file of ``get(pool)`` per region (the pool or None)."""

        def show(cgrp: Cgroup) -> str:
            return dmemcg_limit_show(regions(), lambda r: get(self.find(cgrp, r)))

        return show


class DmemPool(RegionPool):
    """``struct dmem_cgroup_pool_state``: one region's accounting in one cgroup.

    ``cnt`` is the byte counter (parent: the same region's pool of the parent cgroup).
    ``evict_allowed`` / ``evict_denied`` / ``evict_low_skipped`` count the verdicts of
    :meth:`DmemCgroupController.evict_valuable` with this pool as the victim's pool (a
    "may evict" still lets TTM skip a pinned or busy BO).
    """

    __slots__ = ("evict_allowed", "evict_denied", "evict_low_skipped")

    def __init__(
        self, cgroup: Cgroup, region: DmemRegion, parent: DmemPool | None, warnings: list[str]
    ) -> None:
        super().__init__(cgroup, region, parent, warnings)
        self.evict_allowed = 0
        self.evict_denied = 0
        self.evict_low_skipped = 0

    def top_most(self) -> DmemPool:
        """The region's pool of the root cgroup, reached through the parents."""
        pool = self
        while pool.parent is not None:
            pool = pool.parent
        return pool

    def is_descendant_of(self, other: DmemPool) -> bool:
        """``other`` is this pool or one of its ancestor pools (same region)."""
        pool: DmemPool | None = self
        while pool is not None:
            if pool is other:
                return True
            pool = pool.parent
        return False


@dataclass(frozen=True, slots=True)
class DmemPoolStats:
    """One pool's numbers for reports: usage, settings, effective protection, failures and
    eviction verdicts. ``failcnt`` is pinlab's count of refusals at this pool; no dmem file
    shows one, and from 6.15 the kernel keeps none for dmem (P-64)."""

    cgroup: str
    region: str
    current: int
    peak: int
    max: int
    min: int
    low: int
    emin: int
    elow: int
    failcnt: int
    evict_allowed: int
    evict_denied: int
    evict_low_skipped: int
    dying: bool


def _as_pool(obj: object, what: str) -> DmemPool | None:
    if obj is None or isinstance(obj, DmemPool):
        return obj
    raise TypeError(f"{what} must be a DmemPool or None, got {obj!r}")


# -- the controller ------------------------------------------------------------------------------


class DmemCgroupController(CgroupSubsys):
    """``dmem_cgrp_subsys``: the dmem controller, pluggable into ``kernel.dmem``.

    Attributes:
        tree: the cgroup hierarchy it is registered in.
        warnings: page_counter WARNs (underflows); forwarded to the kernel's WARN log once
            :meth:`install`-ed.
        limit_hits: charges refused with ``-EAGAIN``.
        max_writes_ignored: ``dmem.max`` writes below the usage that 6.14 silently dropped.
    """

    name = "dmem"

    def __init__(self, tree: CgroupTree | None = None) -> None:
        self.tree = tree if tree is not None else CgroupTree()
        self._regions: list[DmemRegion] = []
        self.warnings: list[str] = []
        self._pools: PoolTable[DmemPool] = PoolTable(
            self.tree, lambda cgrp, region, parent: DmemPool(cgrp, region, parent, self.warnings)
        )
        self.kernel: Kernel | None = None
        self.limit_hits = 0
        self.max_writes_ignored = 0
        self.tree.register(self)

    # -- wiring ---------------------------------------------------------------------------------
    def install(self, kernel: Kernel) -> DmemCgroupController:
        """Plug into ``kernel.dmem`` (TTM consults it only when the profile has dmem, 6.14+);
        a profile with ``dmem_peak`` (``next``) also gets the ``dmem.peak`` file (K-125)."""
        kernel.dmem = self
        self.kernel = kernel
        for region in kernel.dmem_regions:  # regions drivers registered before we plugged in
            self.register_region(region)
        if kernel.profile.dmem_peak:  # queued for 7.3 (K-125)
            add_peak_file(self.tree, self)
        return self

    # -- regions --------------------------------------------------------------------------------
    @property
    def regions(self) -> tuple[DmemRegion, ...]:
        """Registered regions in registration order (the order every file lists them)."""
        return tuple(self._regions)

    def is_registered(self, region: DmemRegion) -> bool:
        return any(r is region for r in self._regions)

    def register_region(self, region: DmemRegion | None) -> DmemRegion | None:
        """``dmem_cgroup_register_region`` for a driver-built region object.

        A region of size 0 (or None) yields no region -- no accounting (P-30). Registering
        the same object twice is harmless; an unregistered region cannot come back (the
        kernel would allocate a new one).
        """
        if region is None or region.size <= 0:
            return None
        if region.unregistered:
            raise ValueError(f"{region!r} was unregistered; register a new DmemRegion")
        if not self.is_registered(region):
            self._regions.append(region)
        return region

    def dmem_cgroup_register_region(self, size: int, name: str) -> DmemRegion | None:
        """``dmem_cgroup_register_region(size, fmt, ...)``: a new region, None for size 0."""
        if size <= 0:
            return None
        return self.register_region(DmemRegion(name, size))

    def register_device(self, bdev: TtmDevice) -> list[DmemRegion]:
        """Register every region a TTM device's resource managers carry (the driver's
        ``drmm_cgroup_register_region`` calls, P-31)."""
        out = []
        for man in bdev.managers.values():
            region = self.register_region(man.region)
            if region is not None:
                out.append(region)
        return out

    def unregister_region(self, region: DmemRegion | None) -> None:
        """``dmem_cgroup_unregister_region``: the region leaves every file, its pools leave
        their cgroups, and later charges fail with ``-ENODEV``. Outstanding charges can still
        be uncharged through the pools TTM holds."""
        if region is None:
            return
        self._regions = [r for r in self._regions if r is not region]
        self._pools.forget_region(region)
        region.unregistered = True

    def region_by_name(self, name: str) -> DmemRegion | None:
        """``dmemcg_get_region_by_name``."""
        for region in self._regions:
            if region.name == name:
                return region
        return None

    # -- pools ----------------------------------------------------------------------------------
    def find_pool(self, cgrp: Cgroup | str, region: DmemRegion) -> DmemPool | None:
        """``find_cg_pool_locked``: the pool of ``region`` in ``cgrp``, if it was created."""
        return self._pools.find(cgrp, region)

    def get_pool(self, cgrp: Cgroup, region: DmemRegion) -> DmemPool:
        """``get_cg_pool_unlocked``: find or create the pool (and its ancestors' pools);
        ``-ENODEV`` once the region is unregistered."""
        if region.unregistered:
            raise KernelError(
                Errno.ENODEV, "get_cg_pool_unlocked", f"region {region.name} is unregistered"
            )
        return self._pools.get(cgrp, region)

    def pools(self, cgrp: Cgroup | str | None = None) -> list[DmemPool]:
        """The pools of one cgroup, or of every cgroup (pre-order, dying ones included)."""
        return self._pools.of(cgrp)

    # -- the DmemController interface TTM calls ---------------------------------------------------
    def try_charge(self, region: DmemRegion, size: int, task: object) -> DmemPool | None:
        """``dmem_cgroup_try_charge``: charge ``size`` bytes to ``task``'s cgroup (P-16).

        The pool (created on demand) and every ancestor pool of the region are charged with
        ``page_counter_try_charge``. A level whose usage would exceed its max refuses: nothing
        stays charged anywhere, that pool's failcnt grows (pinlab's count; from 6.15 the
        kernel keeps none for dmem, P-64) and :class:`DmemChargeError` (``-EAGAIN``) carries it
        as the limit pool (P-17); reaching max exactly is fine
        (P-18). ``-ENODEV`` for an unregistered region; a size-0 region is not accounted
        (returns None, P-30). On success the pool holds a reference on the cgroup until
        :meth:`uncharge`.
        """
        if region.unregistered:
            raise KernelError(
                Errno.ENODEV, "dmem_cgroup_try_charge", f"region {region.name} is unregistered"
            )
        if not self.is_registered(region) and self.register_region(region) is None:
            return None
        cgrp = self.tree.cgroup_of(task)
        pool = self.get_pool(cgrp, region)
        fail = pool.cnt.try_charge(size)
        if fail is not None:
            limit = fail.owner
            assert isinstance(limit, DmemPool)
            self.limit_hits += 1
            raise DmemChargeError(
                limit,
                f"{limit.cgroup.path} dmem.max {region.name} {format_limit(limit.cnt.max)}: "
                f"usage {limit.cnt.usage} + {size} would exceed it",
            )
        cgrp.css_get()
        return pool

    def uncharge(self, pool: object, size: int) -> None:
        """``dmem_cgroup_uncharge``: return ``size`` bytes to the pool and every ancestor
        (P-23) and drop the charge's cgroup reference. An underflow WARNs and clamps."""
        p = _as_pool(pool, "pool")
        if p is None:
            return
        seen = len(self.warnings)
        p.cnt.uncharge(size)
        if len(self.warnings) > seen and self.kernel is not None:
            for msg in self.warnings[seen:]:
                self.kernel.warn("page_counter_cancel", "page_counter underflow", once=True)
                self.kernel.log(f"WARNING: {msg}")
        p.cgroup.css_put()

    def evict_valuable(
        self, limit_pool: object | None, victim_pool: object | None, ignore_low: bool
    ) -> tuple[bool, bool]:
        """``dmem_cgroup_state_evict_valuable``: (may evict, hit_low) for a victim's pool.

        In order (§2.7, P-24): the limit pool itself is always evictable (also both None);
        a root-cgroup limit pool makes every victim evictable (P-34); with a limit pool a
        victim outside its subtree is not evictable; without one (device-level pressure) the
        reference is the top-most pool of the victim's region (P-33). Then effective
        protection is computed top-down from the reference (recursive, P-26, P-45): usage
        ≤ emin is never evictable; otherwise the first pass (``ignore_low`` False) evicts
        only above elow and reports ``hit_low`` for a victim in (emin, elow]; the low pass
        evicts it.
        """
        if limit_pool is victim_pool:
            victim = _as_pool(victim_pool, "victim_pool")
            if victim is not None:
                victim.evict_allowed += 1
            return True, False
        limit = _as_pool(limit_pool, "limit_pool")
        victim = _as_pool(victim_pool, "victim_pool")
        if limit is not None:
            if limit.cgroup.is_root:
                if victim is not None:
                    victim.evict_allowed += 1
                return True, False
            if victim is None or not victim.is_descendant_of(limit):
                if victim is not None:
                    victim.evict_denied += 1
                return False, False
            reference = limit
        else:
            assert victim is not None  # both None is the identity case above
            reference = victim.top_most()
        self.calculate_protection(reference, victim)
        cnt = victim.cnt
        used = cnt.usage
        if used <= cnt.emin:
            victim.evict_denied += 1
            return False, False
        if not ignore_low:
            if used > cnt.elow:
                victim.evict_allowed += 1
                return True, False
            victim.evict_low_skipped += 1
            return False, True
        victim.evict_allowed += 1
        return True, False

    def below_min(self, root: object | None, test: object | None) -> bool:
        """``dmem_cgroup_below_min`` (K-126): usage ≤ effective min, recomputed from ``root``
        (None: the top-most pool of ``test``'s region, i.e. global protection)."""
        pool = self._protection_test(root, test)
        return pool is not None and pool.cnt.usage <= pool.cnt.emin

    def below_low(self, root: object | None, test: object | None) -> bool:
        """``dmem_cgroup_below_low`` (K-126): usage ≤ effective low, as :meth:`below_min`."""
        pool = self._protection_test(root, test)
        return pool is not None and pool.cnt.usage <= pool.cnt.elow

    def _protection_test(self, root: object | None, test: object | None) -> DmemPool | None:
        """None (answer False) for ``root`` is ``test``, no pool or the root cgroup's pool;
        else ``test`` with its effective protection computed (unlike memcg's reclaim, the
        eviction path has not walked the tree to compute it)."""
        limit = _as_pool(root, "root")
        pool = _as_pool(test, "test")
        if limit is pool or pool is None or pool.parent is None:
            return None
        self.calculate_protection(limit if limit is not None else pool.top_most(), pool)
        return pool

    def common_ancestor(self, a: object | None, b: object | None) -> DmemPool | None:
        """``dmem_cgroup_get_common_ancestor`` (K-126): the pool, in ``a``'s region, of the
        deepest cgroup above or at both pools' cgroups (``cgroup_common_ancestor``) -- one
        of ``a``'s own ancestor pools; None when either is None."""
        pa = _as_pool(a, "a")
        pb = _as_pool(b, "b")
        if pa is None or pb is None:
            return None
        shared = set(pb.cgroup.ancestors())
        pool: DmemPool | None = pa
        while pool is not None and pool.cgroup not in shared:
            pool = pool.parent
        return pool

    def calculate_protection(self, limit_pool: DmemPool, test_pool: DmemPool) -> None:
        """``dmem_cgroup_calculate_protection``: walk ``limit_pool``'s cgroup subtree in
        pre-order (dying cgroups included) and run ``page_counter_calculate_protection``
        (recursive) on every pool of its region, stopping after ``test_pool`` (P-45)."""
        climit = limit_pool.cnt
        region = limit_pool.region
        for cgrp in self.tree.walk_css(limit_pool.cgroup):
            pool = self._pools.find(cgrp, region)
            if pool is None:
                continue
            page_counter_calculate_protection(climit, pool.cnt, True)
            if pool is test_pool:
                break

    # -- cgroup callbacks -----------------------------------------------------------------------
    def css_offline(self, cgrp: Cgroup) -> None:
        """``dmemcs_offline`` → ``reset_all_resource_limits``: min 0, low 0, max max (P-32)."""
        for pool in self._pools.of(cgrp):
            pool.cnt.set_min(0)
            pool.cnt.set_low(0)
            pool.cnt.set_max(PAGE_COUNTER_MAX)

    def css_released(self, cgrp: Cgroup) -> None:
        """``dmemcs_free``: the removed cgroup's pools go away."""
        self._pools.release(cgrp)

    # -- interface files ------------------------------------------------------------------------
    def cftypes(self) -> Sequence[CgroupFile]:
        return (
            CgroupFile("dmem.capacity", self._capacity_show, None, CfType.ONLY_ON_ROOT),
            CgroupFile("dmem.current", self._show(lambda p: p.cnt.usage if p else 0)),
            CgroupFile(
                "dmem.min",
                self._show(lambda p: p.cnt.min if p else 0),
                self._writer("dmem.min", self._set_min),
                CfType.NOT_ON_ROOT,
            ),
            CgroupFile(
                "dmem.low",
                self._show(lambda p: p.cnt.low if p else 0),
                self._writer("dmem.low", self._set_low),
                CfType.NOT_ON_ROOT,
            ),
            CgroupFile(
                "dmem.max",
                self._show(lambda p: p.cnt.max if p else PAGE_COUNTER_MAX),
                self._writer("dmem.max", self._set_max),
                CfType.NOT_ON_ROOT,
            ),
        )

    def _capacity_show(self, cgrp: Cgroup) -> str:
        """``dmem_cgroup_region_capacity_show``: ``<region> <size>`` per region."""
        return "".join(f"{r.name} {r.size}\n" for r in self._regions)

    def _show(self, get: Callable[[DmemPool | None], int]) -> Callable[[Cgroup], str]:
        return self._pools.show(lambda: self._regions, get)

    def _writer(
        self, filename: str, apply: Callable[[DmemPool, int], None]
    ) -> Callable[[Cgroup, str], None]:
        def write(cgrp: Cgroup, text: str) -> None:
            dmemcg_limit_write(
                cgrp,
                filename,
                text,
                self.region_by_name,
                lambda region, value: apply(self.get_pool(cgrp, region), value),
            )

        return write

    @staticmethod
    def _set_min(pool: DmemPool, value: int) -> None:
        """``set_resource_min``."""
        pool.cnt.set_min(value)

    @staticmethod
    def _set_low(pool: DmemPool, value: int) -> None:
        """``set_resource_low``."""
        pool.cnt.set_low(value)

    def _set_max(self, pool: DmemPool, value: int) -> None:
        """``set_resource_max``: ``page_counter_set_max``'s ``-EBUSY`` is ignored, so a max
        below the usage is not applied and the write still succeeds (P-20); nothing is
        evicted either way (P-35)."""
        try:
            pool.cnt.set_max(value)
        except KernelError:
            self.max_writes_ignored += 1

    # -- reporting ------------------------------------------------------------------------------
    def stats(self) -> list[DmemPoolStats]:
        """Every pool's numbers, cgroups in pre-order (dying ones included)."""
        out = []
        for pool in self.pools():
            cnt = pool.cnt
            out.append(
                DmemPoolStats(
                    cgroup=pool.cgroup.path,
                    region=pool.region.name,
                    current=cnt.usage,
                    peak=cnt.watermark,
                    max=cnt.max,
                    min=cnt.min,
                    low=cnt.low,
                    emin=cnt.emin,
                    elow=cnt.elow,
                    failcnt=cnt.failcnt,
                    evict_allowed=pool.evict_allowed,
                    evict_denied=pool.evict_denied,
                    evict_low_skipped=pool.evict_low_skipped,
                    dying=not pool.cgroup.online,
                )
            )
        return out

    def __repr__(self) -> str:
        return f"<dmem controller: {len(self._regions)} region(s)>"


def install(kernel: Kernel, tree: CgroupTree | None = None) -> DmemCgroupController:
    """A dmem controller registered in ``tree`` (a new tree if None) and plugged into
    ``kernel.dmem``."""
    return DmemCgroupController(tree).install(kernel)
