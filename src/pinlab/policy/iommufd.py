"""iommufd's accounting of pinned pages (drivers/iommu/iommufd/pages.c, ``policy-semantics.md``
§1.6, P-15), on the counters of :mod:`pinlab.policy.rlimit`.

An ``iopt_pages`` charges, by its account mode, ``user->locked_vm`` (USER, the default, like
io_uring), ``mm->locked_vm`` (MM, VFIO-compatible, through ``__account_locked_vm`` with no
capability bypass) or no limit counter (NONE: a caller with ``CAP_IPC_LOCK``); in every mode
``source_mm->pinned_vm`` grows, unlimited.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pinlab.kernel.errno import Errno, err
from pinlab.kernel.kernel import CAP_IPC_LOCK, Kernel, MmStruct, Task, UserStruct
from pinlab.kernel.limits import ULONG_MAX
from pinlab.policy.rlimit import (
    __account_locked_vm,
    kernel_warn,
    lock_limit_pages,
    npages,
    uncharge_pinned_vm,
)

__all__ = [
    "IoptPages",
    "IoptPagesAccount",
    "iopt_alloc_pages",
    "iopt_pages_pin",
    "iopt_pages_unpin",
]


class IoptPagesAccount(enum.Enum):
    """``enum iopt_pages_account_mode`` (§1.6)."""

    NONE = "none"
    USER = "user"  # IOPT_PAGES_ACCOUNT_USER: user->locked_vm, like io_uring (the default)
    MM = "mm"  # IOPT_PAGES_ACCOUNT_MM: mm->locked_vm, VFIO-compatible


@dataclass(eq=False, slots=True)
class IoptPages:
    """``struct iopt_pages``: the source task, mm and user that pay, the page count and the
    account mode chosen at allocation."""

    source_task: Task
    source_mm: MmStruct
    source_user: UserStruct
    npages: int
    account_mode: IoptPagesAccount
    npinned: int = 0


def iopt_alloc_pages(
    task: Task,
    uptr: int,
    length: int,
    ctx_mode: IoptPagesAccount = IoptPagesAccount.USER,
) -> IoptPages:
    """``iopt_alloc_pages`` + the mode adjustment of ``iopt_map_common`` (§1.6, P-15).

    ``-EINVAL`` for a zero length. A caller with ``CAP_IPC_LOCK`` gets mode NONE; otherwise
    USER, turned into MM when the iommufd context is in MM mode (``IOMMU_OPTION_RLIMIT_MODE``).
    ``ctx_mode`` NONE models a caller-selected NONE (pinlab convenience; upstream only the
    capability or a dma-buf source selects it).
    """
    if length == 0 or length < 0:
        raise err(Errno.EINVAL, "iopt_alloc_pages", "zero length")
    if uptr < 0 or uptr + length > ULONG_MAX:
        raise err(Errno.EOVERFLOW, "iopt_alloc_pages", "uptr + length overflows")
    if task.capable(CAP_IPC_LOCK) or ctx_mode is IoptPagesAccount.NONE:
        mode = IoptPagesAccount.NONE
    elif ctx_mode is IoptPagesAccount.MM:
        mode = IoptPagesAccount.MM
    else:
        mode = IoptPagesAccount.USER
    return IoptPages(task, task.mm, task.user, npages(uptr, length), mode)


def _do_update_pinned(
    pages: IoptPages, nr: int, inc: bool, *, kernel: Kernel | None = None
) -> None:
    """``do_update_pinned``: the mode's counter, then ``source_mm->pinned_vm`` in every mode."""
    mode = pages.account_mode
    if mode is IoptPagesAccount.USER:
        user = pages.source_user
        if inc:
            limit = lock_limit_pages(pages.source_task)
            if user.locked_vm + nr > limit:  # incr_user_locked_vm
                raise err(
                    Errno.ENOMEM,
                    "incr_user_locked_vm",
                    f"uid {user.uid}: locked_vm {user.locked_vm} + {nr} pages > limit {limit}",
                )
            user.locked_vm += nr
        else:  # decr_user_locked_vm
            if user.locked_vm < nr:
                kernel_warn(kernel, "decr_user_locked_vm", f"locked_vm {user.locked_vm} < {nr}")
                return
            user.locked_vm -= nr
    elif mode is IoptPagesAccount.MM:  # update_mm_locked_vm
        __account_locked_vm(pages.source_mm, nr, inc, pages.source_task, False, kernel=kernel)
    if inc:
        pages.source_mm.pinned_vm += nr
    else:
        uncharge_pinned_vm(pages.source_mm, nr, "do_update_pinned", kernel=kernel)


def iopt_pages_pin(pages: IoptPages, *, kernel: Kernel | None = None) -> None:
    """Pin every page (``iopt_pages_fill`` → ``do_update_pinned(inc)``): USER mode charges
    ``user->locked_vm`` against the source task's L, MM mode ``mm->locked_vm`` through
    :func:`__account_locked_vm` with **no** capability bypass (ENOMEM over L), NONE no limit
    counter (P-15). Then, in every mode, ``source_mm->pinned_vm`` grows (unlimited)."""
    nr = pages.npages - pages.npinned
    if nr <= 0:
        return
    _do_update_pinned(pages, nr, True, kernel=kernel)
    pages.npinned = pages.npages


def iopt_pages_unpin(pages: IoptPages, *, kernel: Kernel | None = None) -> None:
    """Unpin everything (``update_unpinned``): the exact reverse of :func:`iopt_pages_pin`."""
    nr = pages.npinned
    if nr <= 0:
        return
    _do_update_pinned(pages, nr, False, kernel=kernel)
    pages.npinned = 0
