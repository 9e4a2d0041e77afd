"""The kernel's side of the cgroup v2 ``dmem`` controller: the interface TTM calls.

TTM charges every allocation in a memory region that registered with dmem
(``dmem_cgroup_register_region``) to the allocating task's cgroup, and asks the controller
whether a victim may be evicted (``policy-semantics.md`` §2.5-§2.8). The controller itself --
the cgroup tree, ``page_counter`` and min/low protection -- is administrator policy and lives
in ``pinlab.policy``; it plugs in here through :class:`DmemController`, so the kernel layer
never imports policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pinlab.kernel.errno import Errno, KernelError

if TYPE_CHECKING:
    from pinlab.kernel.kernel import Kernel


class DmemRegion:
    """``struct dmem_cgroup_region``: one device memory region, e.g.
    ``drm/0000:03:00.0/vram0``, with its capacity in bytes (``dmem.capacity``)."""

    __slots__ = ("name", "size", "unregistered")

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.unregistered = False

    def __repr__(self) -> str:
        return f"<dmem region {self.name}>"


def dmem_cgroup_register_region(kernel: Kernel, size: int, name: str) -> DmemRegion | None:
    """``dmem_cgroup_register_region``: a driver registers one memory region.

    Returns None -- no accounting -- when the kernel has no dmem controller (before 6.14) or
    the size is 0 (P-30). Registered regions are listed on ``kernel.dmem_regions``, in order,
    for the controller to show (``dmem.capacity``).
    """
    if not kernel.profile.dmem or size <= 0:
        return None
    region = DmemRegion(name, size)
    kernel.dmem_regions.append(region)
    if kernel.dmem is not None and hasattr(kernel.dmem, "register_region"):
        kernel.dmem.register_region(region)
    return region


class DmemChargeError(KernelError):
    """``dmem_cgroup_try_charge`` failed: ``-EAGAIN`` with the pool whose limit refused."""

    __slots__ = ("limit_pool",)

    def __init__(self, limit_pool: object, reason: str = "") -> None:
        super().__init__(Errno.EAGAIN, "dmem_cgroup_try_charge", reason)
        self.limit_pool = limit_pool


class DmemController(Protocol):
    """What TTM needs from the dmem controller (implemented in ``pinlab.policy``)."""

    def try_charge(self, region: DmemRegion, size: int, task: object) -> object:
        """Charge ``size`` bytes to ``task``'s cgroup and its ancestors; return the pool
        (None means "not accounted", and TTM then uncharges nothing).

        Raises :class:`DmemChargeError` (``-EAGAIN`` + limit pool) when a limit refuses, or a
        ``KernelError`` (``-ENODEV``) for an unregistered region.
        """
        ...

    def uncharge(self, pool: object, size: int) -> None:
        """``dmem_cgroup_uncharge``: return ``size`` bytes to ``pool`` and its ancestors."""
        ...

    def evict_valuable(
        self, limit_pool: object | None, victim_pool: object | None, ignore_low: bool
    ) -> tuple[bool, bool]:
        """``dmem_cgroup_state_evict_valuable``: (may evict, hit_low)."""
        ...

    # The three queries below are called only with ``dmem_protected_alloc`` (K-126, queued
    # for 7.3: "[PATCH v6 0/6] cgroup/dmem,drm/ttm: Improve protection in contended cases").

    def below_min(self, root: object | None, test: object | None) -> bool:
        """``dmem_cgroup_below_min``: ``test``'s usage is within its effective min, computed
        from ``root`` (None: the region's top-most pool). False for ``test`` None, for the
        root cgroup's pool and for ``root`` is ``test``."""
        ...

    def below_low(self, root: object | None, test: object | None) -> bool:
        """``dmem_cgroup_below_low``: as :meth:`below_min` for the effective low."""
        ...

    def common_ancestor(self, a: object | None, b: object | None) -> object | None:
        """``dmem_cgroup_get_common_ancestor``: the pool, in ``a``'s region, of the nearest
        cgroup that is ``a``'s or an ancestor of it and ``b``'s or an ancestor of it (either
        pool's own cgroup included); None when either is None."""
        ...
