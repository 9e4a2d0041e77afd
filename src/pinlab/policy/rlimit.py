"""RLIMIT_MEMLOCK accounting of locked and pinned host memory (``policy-semantics.md`` §1).

Three counters, each compared with the same ``RLIMIT_MEMLOCK`` on its own (§1.1, P-7):

* ``mm->locked_vm`` -- :func:`do_mlock` / :func:`do_munlock` (mm/mlock.c) and the callers of
  :func:`account_locked_vm` / :func:`__account_locked_vm` (mm/util.c; VFIO, iommufd MM mode);
* ``mm->pinned_vm`` -- :func:`ib_umem_get` (drivers/infiniband/core/umem.c), io_uring (added,
  never limited there) and iommufd (added in every mode);
* ``user->locked_vm`` -- io_uring registered buffers (io_uring/rsrc.c) and iommufd USER mode
  (drivers/iommu/iommufd/pages.c, :mod:`pinlab.policy.iommufd`): one budget per **uid**,
  shared by all its processes (P-8).

Rules (§1.2): ``can_do_mlock()`` -- RLIMIT_MEMLOCK non-zero or ``CAP_IPC_LOCK`` -- gates mlock
and ``ib_umem_get`` with **EPERM** (P-4); over the limit is **ENOMEM**; comparisons are strict,
so reaching exactly L pages is allowed (P-2); ``CAP_IPC_LOCK`` skips the comparison but the
pages are still counted (P-3), except io_uring, whose capable creator charges no
``user->locked_vm`` at all (P-9). What is *not* charged upstream (§1.9): ODP registrations
(:func:`ib_umem_odp_get`, P-11), ``dma_buf_pin`` and both ``ib_umem_dmabuf_get`` flavours
(P-12) -- those live in :mod:`pinlab.kernel` and simply never reach this module.

Conventions: functions take the task that the kernel would call ``current`` explicitly; an
error raises :class:`~pinlab.kernel.errno.KernelError` and nothing changes; a WARN goes to
``kernel.warnings`` when a kernel is passed (else to Python's :mod:`warnings`). Pages are
4 KiB (``PAGE_SHIFT`` 12) whatever backs the memory (P-5), except io_uring's huge-page rule
(P-14). The model has no VMAs: every user address below ``TASK_SIZE`` counts as mapped
anonymous memory, so mlock's ``-ENOMEM`` for an unmapped hole is only produced past
``TASK_SIZE``.
"""

from __future__ import annotations

import bisect
import warnings as _pywarnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pinlab.kernel.errno import Errno, err
from pinlab.kernel.kernel import (
    CAP_IPC_LOCK,
    RLIMIT_MEMLOCK,
    Kernel,
    MmStruct,
    Task,
    UserStruct,
)
from pinlab.kernel.limits import ULONG_MAX
from pinlab.kernel.umem import IB_ACCESS_ON_DEMAND, ib_access_writable

__all__ = [
    "IB_ACCESS_ON_DEMAND",
    "IORING_MAX_BUF_LEN",
    "PAGE_SHIFT",
    "PAGE_SIZE",
    "TASK_SIZE",
    "IbUmem",
    "IbUmemOdp",
    "IoMappedUbuf",
    "IoRingCtx",
    "VmLocked",
    "__account_locked_vm",
    "account_locked_vm",
    "account_locked_vm_bypass",
    "can_do_mlock",
    "charge_pinned_vm",
    "do_mlock",
    "do_munlock",
    "ib_umem_get",
    "ib_umem_odp_get",
    "ib_umem_odp_release",
    "ib_umem_release",
    "io_account_mem",
    "io_ring_ctx_free",
    "io_sqe_buffers_register",
    "io_sqe_buffers_unregister",
    "io_unaccount_mem",
    "io_uring_setup",
    "kernel_warn",
    "lock_limit_pages",
    "munlock_all",
    "npages",
    "page_align",
    "page_align_down",
    "uncharge_pinned_vm",
]

PAGE_SHIFT = 12
PAGE_SIZE = 1 << PAGE_SHIFT
TASK_SIZE = 1 << 47
"""x86-64 user address space (4-level paging): the model's only "unmapped" region."""
UINT_MAX = (1 << 32) - 1
IORING_MAX_BUF_LEN = 1 << 30
"""``io_validate_user_buf_range``: one registered buffer is at most 1 GiB (``SZ_1G``)."""


# -- page arithmetic --------------------------------------------------------------------------


def page_align_down(addr: int) -> int:
    """``ALIGN_DOWN(addr, PAGE_SIZE)`` (``addr & PAGE_MASK``)."""
    return addr & ~(PAGE_SIZE - 1)


def page_align(addr: int) -> int:
    """``PAGE_ALIGN(addr)``: round up to the next page boundary (no 64-bit wrap modelled)."""
    return (addr + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)


def npages(addr: int, length: int) -> int:
    """Pages the byte range ``[addr, addr + length)`` touches, counted from ``addr``'s page
    boundary: ``(ALIGN_UP(addr + len) - ALIGN_DOWN(addr)) / PAGE_SIZE`` (§0.1, P-5).

    ``npages(0x1001, 4096) == 2``; ``npages(a, 0) == 0`` for any ``a``. Always 4 KiB pages,
    even when huge pages back the memory (``ib_umem_num_pages``).
    """
    if length <= 0:
        return 0
    return (page_align(addr + length) - page_align_down(addr)) >> PAGE_SHIFT


def lock_limit_pages(task: Task) -> int:
    """L: ``rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT``, the limit in pages rounded down (§0.1)."""
    return task.rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT


def can_do_mlock(task: Task) -> bool:
    """``can_do_mlock`` (mm/mlock.c): a non-zero RLIMIT_MEMLOCK, or ``CAP_IPC_LOCK`` (§1.2)."""
    return task.rlimit(RLIMIT_MEMLOCK) != 0 or task.capable(CAP_IPC_LOCK)


def kernel_warn(kernel: Kernel | None, function: str, message: str, *, once: bool = True) -> None:
    """``WARN()``: into ``kernel.warnings`` when a kernel is given, else a Python warning."""
    if kernel is not None:
        kernel.warn(function, message, once=once)
    else:
        _pywarnings.warn(f"WARN in {function}: {message}", RuntimeWarning, stacklevel=3)


# -- mm/util.c ---------------------------------------------------------------------------------


def __account_locked_vm(
    mm: MmStruct,
    pages: int,
    inc: bool,
    task: Task,
    bypass_rlim: bool,
    *,
    kernel: Kernel | None = None,
) -> int:
    """``__account_locked_vm`` (mm/util.c; caller holds the mmap write lock) (§1.3, P-10).

    Increment: unless ``bypass_rlim``, ``-ENOMEM`` when ``locked_vm + pages`` exceeds
    ``task``'s L (strict: exactly L is allowed), leaving ``locked_vm`` unchanged; otherwise --
    every bypassed call included -- add the pages. Decrement: never fails; taking more than
    ``locked_vm`` WARNs once (the kernel's unsigned counter would wrap; pinlab clamps to 0).
    Returns 0.
    """
    locked_vm = mm.locked_vm
    if inc:
        if not bypass_rlim and locked_vm + pages > lock_limit_pages(task):
            raise err(
                Errno.ENOMEM,
                "__account_locked_vm",
                f"locked_vm {locked_vm} + {pages} pages > limit {lock_limit_pages(task)}",
            )
        mm.locked_vm = locked_vm + pages
    else:
        if pages > locked_vm:
            kernel_warn(kernel, "__account_locked_vm", f"locked_vm {locked_vm} < {pages} pages")
        mm.locked_vm = max(locked_vm - pages, 0)
    return 0


account_locked_vm_bypass = __account_locked_vm
"""Alias of :func:`__account_locked_vm` that is callable from inside a class body (where
Python would mangle the double-underscore name)."""


def account_locked_vm(
    mm: MmStruct | None,
    pages: int,
    inc: bool,
    task: Task | None = None,
    *,
    kernel: Kernel | None = None,
) -> int:
    """``account_locked_vm(mm, pages, inc)`` (mm/util.c) (§1.3, P-10).

    ``pages == 0`` or no ``mm``: return 0 and do nothing. Otherwise, under the mmap write
    lock, :func:`__account_locked_vm` for ``current`` (``task``) with
    ``bypass = capable(CAP_IPC_LOCK)``: with the capability the increment is never refused
    but is still added.
    """
    if pages == 0 or mm is None:
        return 0
    if task is None:
        raise ValueError("account_locked_vm needs the calling task (current)")
    return __account_locked_vm(mm, pages, inc, task, task.capable(CAP_IPC_LOCK), kernel=kernel)


# -- mm/mlock.c ----------------------------------------------------------------------------------


class VmLocked:
    """Which pages of one address space carry ``VM_LOCKED``: the part of the VMA tree that
    mlock/munlock change, as sorted disjoint ``[start, end)`` page-number ranges.

    The kernel keeps this in ``vma->vm_flags`` and counts it in ``mm->locked_vm`` through
    ``mlock_fixup``; the model keeps the ranges beside the mm (a
    :class:`~pinlab.kernel.kernel.MmStruct` has no VMA tree) so :func:`do_mlock` can tell
    newly locked pages from already locked ones.
    """

    __slots__ = ("_ends", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    @property
    def pages(self) -> int:
        """Locked pages in total."""
        return sum(e - s for s, e in zip(self._starts, self._ends, strict=True))

    def ranges(self) -> list[tuple[int, int]]:
        """The locked page ranges, ``[(start_pfn, end_pfn), ...]`` in address order."""
        return list(zip(self._starts, self._ends, strict=True))

    def count(self, start: int, end: int) -> int:
        """``count_mm_mlocked_page_nr``: locked pages inside page range ``[start, end)``."""
        n = 0
        i = max(bisect.bisect_right(self._starts, start) - 1, 0)
        while i < len(self._starts) and self._starts[i] < end:
            lo, hi = max(self._starts[i], start), min(self._ends[i], end)
            if hi > lo:
                n += hi - lo
            i += 1
        return n

    def lock(self, start: int, end: int) -> int:
        """Set VM_LOCKED on ``[start, end)``; return the pages that were not locked before."""
        if end <= start:
            return 0
        added = (end - start) - self.count(start, end)
        lo = bisect.bisect_left(self._ends, start)  # first range that ends at/after start
        hi = bisect.bisect_right(self._starts, end)  # ranges starting at/before end
        if lo < hi:
            start = min(start, self._starts[lo])
            end = max(end, self._ends[hi - 1])
        self._starts[lo:hi] = [start]
        self._ends[lo:hi] = [end]
        return added

    def unlock(self, start: int, end: int) -> int:
        """Clear VM_LOCKED on ``[start, end)``; return the pages that were locked."""
        if end <= start:
            return 0
        removed = self.count(start, end)
        if not removed:
            return 0
        lo = bisect.bisect_right(self._ends, start)  # first range ending after start
        hi = bisect.bisect_left(self._starts, end)  # ranges starting before end
        keep_s: list[int] = []
        keep_e: list[int] = []
        if self._starts[lo] < start:
            keep_s.append(self._starts[lo])
            keep_e.append(start)
        if self._ends[hi - 1] > end:
            keep_s.append(end)
            keep_e.append(self._ends[hi - 1])
        self._starts[lo:hi] = keep_s
        self._ends[lo:hi] = keep_e
        return removed

    def clear(self) -> int:
        """Unlock everything (``munlockall``, ``exit_mmap``); return the pages unlocked."""
        n = self.pages
        self._starts.clear()
        self._ends.clear()
        return n

    def __repr__(self) -> str:
        return f"<VmLocked {self.pages} pages in {len(self._starts)} ranges>"


def _mlock_range(start: int, length: int, function: str) -> tuple[int, int]:
    """The syscall's rounding: ``len = PAGE_ALIGN(len + offset_in_page(start))``, ``start &=
    PAGE_MASK``. Returns the page-number range (``start`` and ``len`` are unsigned longs)."""
    if not 0 <= start <= ULONG_MAX or not 0 <= length <= ULONG_MAX:
        raise err(Errno.EINVAL, function, "address or length out of range")
    length = page_align(length + (start & (PAGE_SIZE - 1)))
    start = page_align_down(start)
    return start >> PAGE_SHIFT, (start + length) >> PAGE_SHIFT


def _apply_vma_lock_flags_check(first: int, last: int, function: str) -> None:
    """``apply_vma_lock_flags``: ``end < start`` (a wrapped range) → ``-EINVAL``; a range the
    model cannot map (past ``TASK_SIZE``) → ``-ENOMEM``."""
    if last << PAGE_SHIFT > ULONG_MAX:
        raise err(Errno.EINVAL, function, "start + len overflows")
    if last > TASK_SIZE >> PAGE_SHIFT:
        raise err(Errno.ENOMEM, function, "range is not mapped")


def do_mlock(
    task: Task, vm: VmLocked, start: int, length: int, *, kernel: Kernel | None = None
) -> None:
    """``mlock(start, len)`` (mm/mlock.c ``do_mlock``, §1.7, P-7).

    1. ``can_do_mlock()`` false → **EPERM** (checked first, even for ``len == 0``);
    2. round: pages are counted from ``start``'s page boundary (``mlock(0x1001, 4096)`` locks
       two pages);
    3. ``locked = len_pages + mm->locked_vm``; without ``CAP_IPC_LOCK``, if that exceeds L
       subtract the pages of the range that are already locked (``count_mm_mlocked_page_nr``);
       still above L → **ENOMEM**, nothing changes;
    4. lock the range: ``mm->locked_vm`` grows by the pages that were not locked yet
       (``mlock_fixup``); re-locking a locked range costs nothing.

    A range reaching past ``TASK_SIZE`` is ``-ENOMEM`` (not mapped); the model has no other holes.
    """
    fn = "mlock"
    if not can_do_mlock(task):
        raise err(Errno.EPERM, fn, "RLIMIT_MEMLOCK is 0 and no CAP_IPC_LOCK")
    first, last = _mlock_range(start, length, fn)
    limit = lock_limit_pages(task)
    mm = task.mm
    locked = (last - first) + mm.locked_vm
    cap = task.capable(CAP_IPC_LOCK)
    if locked > limit and not cap:
        locked -= vm.count(first, last)
    if locked > limit and not cap:
        raise err(Errno.ENOMEM, fn, f"locked_vm would be {locked} pages > limit {limit}")
    if first == last:
        return
    _apply_vma_lock_flags_check(first, last, fn)
    mm.locked_vm += vm.lock(first, last)


def do_munlock(
    task: Task, vm: VmLocked, start: int, length: int, *, kernel: Kernel | None = None
) -> None:
    """``munlock(start, len)`` (mm/mlock.c): same rounding as mlock, no permission or limit
    check; ``mm->locked_vm`` drops by the pages of the range that were locked."""
    fn = "munlock"
    first, last = _mlock_range(start, length, fn)
    if first == last:
        return
    _apply_vma_lock_flags_check(first, last, fn)
    removed = vm.unlock(first, last)
    if removed > task.mm.locked_vm:
        kernel_warn(kernel, "mlock_fixup", f"locked_vm {task.mm.locked_vm} < {removed} pages")
    task.mm.locked_vm = max(task.mm.locked_vm - removed, 0)


def munlock_all(task: Task, vm: VmLocked, *, kernel: Kernel | None = None) -> None:
    """``munlockall()`` (and the unlock ``exit_mmap`` implies): every locked page leaves
    ``mm->locked_vm``."""
    removed = vm.clear()
    if removed > task.mm.locked_vm:
        kernel_warn(kernel, "mlock_fixup", f"locked_vm {task.mm.locked_vm} < {removed} pages")
    task.mm.locked_vm = max(task.mm.locked_vm - removed, 0)


# -- drivers/infiniband/core/umem.c ------------------------------------------------------------


def charge_pinned_vm(task: Task, pages: int, function: str) -> None:
    """The ``ib_umem_get`` charge (§1.4 steps 1 and 4), shared by proposals that account other
    pins "like ib_umem_get": ``can_do_mlock()`` false → **EPERM**; then the optimistic add to
    ``mm->pinned_vm`` and, if the new value exceeds L without ``CAP_IPC_LOCK``, the subtract
    and **ENOMEM**. With the capability the pages are added regardless (P-3)."""
    if not can_do_mlock(task):
        raise err(Errno.EPERM, function, "RLIMIT_MEMLOCK is 0 and no CAP_IPC_LOCK")
    mm = task.mm
    limit = lock_limit_pages(task)
    mm.pinned_vm += pages  # atomic64_add_return
    if mm.pinned_vm > limit and not task.capable(CAP_IPC_LOCK):
        mm.pinned_vm -= pages
        raise err(
            Errno.ENOMEM,
            function,
            f"pinned_vm {mm.pinned_vm} + {pages} pages > limit {limit}",
        )


def uncharge_pinned_vm(
    mm: MmStruct, pages: int, function: str, *, kernel: Kernel | None = None
) -> None:
    """``atomic64_sub(pages, &mm->pinned_vm)``; an underflow (a model bug) WARNs and clamps."""
    if pages > mm.pinned_vm:
        kernel_warn(kernel, function, f"pinned_vm {mm.pinned_vm} < {pages} pages")
    mm.pinned_vm = max(mm.pinned_vm - pages, 0)


@dataclass(eq=False, slots=True)
class IbUmem:
    """``struct ib_umem`` of pinned host memory: the range, the pages charged and the mm that
    paid (``umem->owning_mm``), so :func:`ib_umem_release` returns exactly that (P-6)."""

    owning_mm: MmStruct
    address: int
    length: int
    access: int
    npages: int
    released: bool = False

    @property
    def writable(self) -> bool:
        """``umem->writable``: :func:`~pinlab.kernel.umem.ib_access_writable` of the access."""
        return ib_access_writable(self.access)


def ib_umem_get(
    task: Task,
    addr: int,
    size: int,
    access: int,
    *,
    pin_fail_after: int | None = None,
    pin_errno: Errno = Errno.EFAULT,
) -> IbUmem:
    """``ib_umem_get(device, addr, size, access)``: pin host memory for RDMA (§1.4).

    In order: an overflowing range → **EINVAL**; ``can_do_mlock()`` false → **EPERM** (P-4);
    ``IB_ACCESS_ON_DEMAND`` → **EOPNOTSUPP** (ODP goes through :func:`ib_umem_odp_get`,
    P-13); ``npages(addr, size)`` of 0 (a zero length, P-13) or above ``UINT_MAX`` →
    **EINVAL**; the optimistic charge of :func:`charge_pinned_vm` (ENOMEM over L without cap,
    P-1, P-2; with cap it still grows, P-3). The charge is all-or-nothing and comes before any
    page is pinned. ``pin_fail_after`` injects a ``pin_user_pages_fast`` failure after that
    many pages: what was pinned is released and the **full** npages is subtracted (P-6).
    """
    fn = "ib_umem_get"
    if addr < 0 or size < 0 or addr + size > ULONG_MAX or page_align(addr + size) > ULONG_MAX:
        raise err(Errno.EINVAL, fn, "addr + size overflows")
    if not can_do_mlock(task):
        raise err(Errno.EPERM, fn, "RLIMIT_MEMLOCK is 0 and no CAP_IPC_LOCK")
    if access & IB_ACCESS_ON_DEMAND:
        raise err(Errno.EOPNOTSUPP, fn, "IB_ACCESS_ON_DEMAND needs ib_umem_odp_get")
    pages = npages(addr, size)
    if pages == 0 or pages > UINT_MAX:
        raise err(Errno.EINVAL, fn, f"range covers {pages} pages")
    charge_pinned_vm(task, pages, fn)
    if pin_fail_after is not None and pin_fail_after < pages:
        # umem_release: unpin what was pinned; vma: subtract the full npages
        task.mm.pinned_vm -= pages
        raise err(pin_errno, "pin_user_pages_fast", f"failed after {pin_fail_after} pages")
    return IbUmem(task.mm, addr, size, access, pages)


def ib_umem_release(umem: IbUmem | None, *, kernel: Kernel | None = None) -> None:
    """``ib_umem_release``: subtract exactly the npages charged at registration from the mm
    that registered (``umem->owning_mm``), whoever calls it (P-6). NULL is a no-op; a second
    release of the same umem (a use-after-free in the kernel) WARNs and does nothing."""
    if umem is None:
        return
    if umem.released:
        kernel_warn(kernel, "ib_umem_release", "umem released twice")
        return
    umem.released = True
    uncharge_pinned_vm(umem.owning_mm, umem.npages, "ib_umem_release", kernel=kernel)


@dataclass(eq=False, slots=True)
class IbUmemOdp:
    """``struct ib_umem_odp``: an on-demand-paging registration -- the range and the owning
    mm (for the interval notifier), and nothing pinned or charged (§4.1, P-11)."""

    owning_mm: MmStruct
    address: int
    length: int
    access: int
    released: bool = False


def ib_umem_odp_get(task: Task, addr: int, size: int, access: int) -> IbUmemOdp:
    """``ib_umem_odp_get`` (drivers/infiniband/core/umem_odp.c): without
    ``IB_ACCESS_ON_DEMAND`` → WARN_ON_ONCE and **EINVAL**; an overflowing range → **EINVAL**.
    Registers the interval notifier; faults in, pins and charges **nothing** -- no
    ``pinned_vm``, ``locked_vm`` or ``user->locked_vm``, whatever the size or the limit (P-11).
    """
    fn = "ib_umem_odp_get"
    if not access & IB_ACCESS_ON_DEMAND:
        raise err(Errno.EINVAL, fn, "access lacks IB_ACCESS_ON_DEMAND")
    if addr < 0 or size < 0 or addr + size > ULONG_MAX:
        raise err(Errno.EINVAL, fn, "addr + size overflows")
    return IbUmemOdp(task.mm, addr, size, access)


def ib_umem_odp_release(umem: IbUmemOdp) -> None:
    """``ib_umem_odp_release``: remove the notifier; no counter to return."""
    umem.released = True


# -- io_uring/rsrc.c -----------------------------------------------------------------------------


def _io_account_user(user: UserStruct, nr_pages: int, task: Task) -> None:
    """``__io_account_mem``: the compare-and-swap loop against ``current``'s L (§1.5)."""
    if not nr_pages:
        return
    limit = lock_limit_pages(task)
    if user.locked_vm + nr_pages > limit:
        raise err(
            Errno.ENOMEM,
            "__io_account_mem",
            f"uid {user.uid}: locked_vm {user.locked_vm} + {nr_pages} pages > limit {limit}",
        )
    user.locked_vm += nr_pages


def io_account_mem(
    user: UserStruct | None, mm_account: MmStruct | None, nr_pages: int, task: Task
) -> None:
    """``io_account_mem``: charge ``user->locked_vm`` (if the ring has a user; ENOMEM over L),
    then add to ``mm_account->pinned_vm`` **without** any limit check (§1.5)."""
    if user is not None:
        _io_account_user(user, nr_pages, task)
    if mm_account is not None:
        mm_account.pinned_vm += nr_pages


def io_unaccount_mem(
    user: UserStruct | None,
    mm_account: MmStruct | None,
    nr_pages: int,
    *,
    kernel: Kernel | None = None,
) -> None:
    """``io_unaccount_mem``: subtract from both counters that were charged."""
    if user is not None:
        if nr_pages > user.locked_vm:
            kernel_warn(
                kernel, "__io_unaccount_mem", f"user locked_vm {user.locked_vm} < {nr_pages}"
            )
        user.locked_vm = max(user.locked_vm - nr_pages, 0)
    if mm_account is not None:
        uncharge_pinned_vm(mm_account, nr_pages, "io_unaccount_mem", kernel=kernel)


@dataclass(eq=False, slots=True)
class IoMappedUbuf:
    """``struct io_mapped_ubuf``: one registered buffer, the pages it charged
    (``acct_pages``) and the huge pages (head addresses) it covers."""

    ubuf: int
    length: int
    acct_pages: int
    hpage_size: int = 0
    heads: frozenset[int] = frozenset()


@dataclass(eq=False, slots=True)
class IoRingCtx:
    """``struct io_ring_ctx`` as accounting sees it.

    ``user`` is the creator's ``user_struct`` -- set only when the creator lacks
    ``CAP_IPC_LOCK`` in the initial user namespace (``ns_capable_noaudit``); ``mm_account``
    the creator's mm, always set. ``buffers`` is the registered-buffer table.
    """

    user: UserStruct | None
    mm_account: MmStruct
    buffers: list[IoMappedUbuf] = field(default_factory=list)
    registered: bool = False
    freed: bool = False


def io_uring_setup(task: Task, user: UserStruct | None = None) -> IoRingCtx:
    """``io_uring_create``: record who pays. ``user`` defaults to ``task.user``."""
    if task.capable(CAP_IPC_LOCK):
        return IoRingCtx(None, task.mm)
    return IoRingCtx(user if user is not None else task.user, task.mm)


def _head_pages_accounted(ctx: IoRingCtx, head: int, pending: Iterable[IoMappedUbuf]) -> bool:
    """``headpage_already_acct``: is the compound page at ``head`` covered by a buffer of this
    call or one already registered in the ring?"""
    return any(head in b.heads for b in ctx.buffers) or any(head in b.heads for b in pending)


def _io_buffer_register(
    ctx: IoRingCtx,
    task: Task,
    uaddr: int,
    ulen: int,
    hpage_size: int,
    pending: Sequence[IoMappedUbuf],
) -> IoMappedUbuf:
    """``io_sqe_buffer_register`` + ``io_buffer_account_pin`` for one iovec."""
    if ulen == 0 or ulen > IORING_MAX_BUF_LEN:
        raise err(Errno.EFAULT, "io_validate_user_buf_range", f"length {ulen} not in (0, 1 GiB]")
    if uaddr < 0 or uaddr + page_align(ulen) > ULONG_MAX:
        raise err(Errno.EOVERFLOW, "io_validate_user_buf_range", "uaddr + len overflows")
    if hpage_size and hpage_size > PAGE_SIZE:
        if hpage_size & (hpage_size - 1):
            raise ValueError(f"huge page size {hpage_size} is not a power of two")
        first = uaddr & ~(hpage_size - 1)
        heads = frozenset(range(first, uaddr + ulen, hpage_size))
        acct = 0
        for head in sorted(heads):
            if not _head_pages_accounted(ctx, head, pending):
                acct += hpage_size >> PAGE_SHIFT  # page_size(hpage) >> PAGE_SHIFT
        imu = IoMappedUbuf(uaddr, ulen, acct, hpage_size, heads)
    else:
        imu = IoMappedUbuf(uaddr, ulen, npages(uaddr, ulen))
    if imu.acct_pages:
        io_account_mem(ctx.user, ctx.mm_account, imu.acct_pages, task)
    return imu


def io_sqe_buffers_register(
    ctx: IoRingCtx,
    task: Task,
    iovecs: Sequence[tuple[int, int]],
    *,
    hpage_size: int = 0,
    kernel: Kernel | None = None,
) -> list[IoMappedUbuf]:
    """``IORING_REGISTER_BUFFERS``: register ``(addr, len)`` buffers, all or nothing (§1.5).

    ``-EBUSY`` if the ring already has a table, ``-EINVAL`` for none; each buffer is 1 byte ..
    1 GiB (**EFAULT**) and must not overflow (**EOVERFLOW**). Normal pages are charged per 4 KiB
    page; with ``hpage_size`` (huge-page backing) each compound page is charged once, at its full
    size, even if several buffers of the ring touch it (P-14). The charge goes to the ring's
    ``user->locked_vm`` against the caller's L (ENOMEM, shared by every process of the uid,
    P-8) and, unlimited, to ``mm->pinned_vm`` (P-9). A failure unregisters what this call did.
    """
    if ctx.registered:
        raise err(Errno.EBUSY, "io_sqe_buffers_register", "buffers already registered")
    if not iovecs:
        raise err(Errno.EINVAL, "io_sqe_buffers_register", "no buffers")
    done: list[IoMappedUbuf] = []
    try:
        for uaddr, ulen in iovecs:
            done.append(_io_buffer_register(ctx, task, uaddr, ulen, hpage_size, done))
    except Exception:
        for imu in done:
            io_unaccount_mem(ctx.user, ctx.mm_account, imu.acct_pages, kernel=kernel)
        raise
    ctx.buffers = done
    ctx.registered = True
    return list(done)


def io_sqe_buffers_unregister(ctx: IoRingCtx, *, kernel: Kernel | None = None) -> None:
    """``IORING_UNREGISTER_BUFFERS``: ``-ENXIO`` without a table; each buffer returns exactly
    its ``acct_pages`` (``io_buffer_unmap``)."""
    if not ctx.registered:
        raise err(Errno.ENXIO, "io_sqe_buffers_unregister", "no buffers registered")
    for imu in ctx.buffers:
        io_unaccount_mem(ctx.user, ctx.mm_account, imu.acct_pages, kernel=kernel)
    ctx.buffers = []
    ctx.registered = False


def io_ring_ctx_free(ctx: IoRingCtx, *, kernel: Kernel | None = None) -> None:
    """Closing the ring (``io_ring_ctx_free``): unregister its buffers."""
    if ctx.freed:
        return
    if ctx.registered:
        io_sqe_buffers_unregister(ctx, kernel=kernel)
    ctx.freed = True
