"""``struct dma_resv``: the per-buffer ww_mutex plus its fences (drivers/dma-buf/dma-resv.c).

Usages are ordered KERNEL < WRITE < READ < BOOKKEEP; a query or wait with usage U covers every
fence whose usage is <= U (K-65). The lock is modelled as an owner token, so lockdep's
``dma_resv_assert_held`` becomes a :class:`~pinlab.kernel.errno.LockingError` and contention on
a ww_mutex with an acquire context becomes ``-EDEADLK`` (K-95).

Waiting never sleeps here: :meth:`DmaResv.wait_timeout` hands the unsignalled fences to the
kernel's :class:`~pinlab.kernel.kernel.FenceWaiter`, i.e. to whoever drives time.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pinlab.kernel.errno import Errno, LockingError, err
from pinlab.kernel.fence import DmaFence

if TYPE_CHECKING:
    from pinlab.kernel.kernel import Kernel

MAX_SCHEDULE_TIMEOUT: int | None = None
"""Wait without a timeout (the kernel's ``MAX_SCHEDULE_TIMEOUT``)."""


class DmaResvUsage(enum.IntEnum):
    """``enum dma_resv_usage`` (v5.19+)."""

    KERNEL = 0
    WRITE = 1
    READ = 2
    BOOKKEEP = 3


_USAGES = tuple(DmaResvUsage)
"""Usage by value (the bytes of ``DmaResv._usages``)."""
_USAGE_BYTES = tuple(bytes((u,)) for u in DmaResvUsage)
"""Each usage as a one-byte string."""


def dma_resv_usage_rw(write: bool) -> DmaResvUsage:
    """``dma_resv_usage_rw``: a writer waits for readers and writers (READ), a reader for
    writers only (WRITE). K-65."""
    return DmaResvUsage.READ if write else DmaResvUsage.WRITE


class WwAcquireCtx:
    """``struct ww_acquire_ctx``: a token for locking several reservations (wound-wait)."""

    __slots__ = ("held", "name", "owner")

    def __init__(self, name: str = "ctx", owner: object = None) -> None:
        self.name = name
        self.owner = owner  # the task that runs the acquire sequence (None: kernel context)
        self.held: list[DmaResv] = []

    def __repr__(self) -> str:
        return f"<WwAcquireCtx {self.name}>"


_UNLOCKED = object()


class DmaResv:
    """A reservation object: lock owner plus ``(fence, usage)`` entries."""

    __slots__ = ("_fences", "_holder", "_usages", "kernel", "name", "seq")

    def __init__(self, kernel: Kernel, name: str = "") -> None:
        self.kernel = kernel
        self.name = name
        self._holder: object = _UNLOCKED
        # the entries: fences in insertion order and, byte for byte, their usages -- the fences
        # as a tuple, a lone fence as itself, and a byte string, replaced on change: a resv
        # holds a few fences, most none or one (a BO's clear fence, kept once signalled until
        # the next add recycles it, K-65). A list of (fence, usage) pairs would cost a list,
        # its array and a tuple per fence, a one-fence tuple 48 bytes a buffer; the empty
        # tuple and the one-byte strings are shared by CPython.
        self._fences: tuple[DmaFence, ...] | DmaFence = ()
        self._usages = b""
        # model-only, like the write seqcount ``seq`` older kernels kept here: bumped on every
        # change of the entries, so a reader that found every KERNEL fence signalled at one
        # ``seq`` knows they still are while it stands (a fence never unsignals)
        self.seq = 0

    # -- locking ---------------------------------------------------------------------------
    def _owner(self, ctx: WwAcquireCtx | None) -> object:
        return ctx if ctx is not None else self.kernel.current_owner()

    def lock(self, ctx: WwAcquireCtx | None = None) -> None:
        """``dma_resv_lock``.

        With an acquire context and the lock held by someone else: ``-EDEADLK`` (the caller
        must back off, K-95). Without a context the real kernel would block; in pinlab's
        synchronous model that can only be a caller bug, so it raises ``LockingError``, as does
        taking a lock the caller already holds (a self-deadlock lockdep reports).
        """
        owner = self._owner(ctx)
        if self._holder is not _UNLOCKED:
            if self._holder is owner:
                raise LockingError(f"dma_resv_lock: recursive locking of {self!r}")
            if ctx is not None:
                raise err(Errno.EDEADLK, "dma_resv_lock", "held by another acquire context")
            raise LockingError(f"dma_resv_lock: {self!r} held by {self._holder!r}, would block")
        self._holder = owner
        if ctx is not None:
            ctx.held.append(self)

    def lock_interruptible(self, ctx: WwAcquireCtx | None = None) -> None:
        """``dma_resv_lock_interruptible``: like :meth:`lock`, but a task with a signal pending
        that would have to *wait* for the lock gets ``-EINTR`` (K-95). An uncontended lock is
        taken on the fast path even with a signal pending, as the ww_mutex code does."""
        contended = self._holder is not _UNLOCKED and self._holder is not self._owner(ctx)
        if contended and self.kernel.signal_pending():
            raise err(Errno.EINTR, "dma_resv_lock_interruptible", "signal pending while waiting")
        self.lock(ctx)

    def trylock(self) -> bool:
        """``dma_resv_trylock``: take the lock if free."""
        if self._holder is not _UNLOCKED:
            return False
        self._holder = self.kernel.current_owner()
        return True

    def unlock(self, ctx: WwAcquireCtx | None = None) -> None:
        """``dma_resv_unlock``; unlocking a lock the caller does not hold is a lockdep splat."""
        owner = self._owner(ctx)
        if self._holder is not owner:
            raise LockingError(f"dma_resv_unlock: {self!r} not held by the caller")
        self._holder = _UNLOCKED
        if ctx is not None and self in ctx.held:
            ctx.held.remove(self)

    def is_locked(self) -> bool:
        """``dma_resv_is_locked``: held by anyone."""
        return self._holder is not _UNLOCKED

    def held_by_caller(self, ctx: WwAcquireCtx | None = None) -> bool:
        """Whether the current owner (or ``ctx``) holds the lock (lockdep_is_held)."""
        holder = self._holder
        if holder is _UNLOCKED:
            return False
        if holder is self._owner(ctx):
            return True
        # a lock taken through an acquire context is held by the task running that context
        return (
            ctx is None
            and isinstance(holder, WwAcquireCtx)
            and (holder.owner if holder.owner is not None else None) is self.kernel.current
        )

    def assert_held(self, function: str) -> None:
        """``dma_resv_assert_held``: raise ``LockingError`` naming ``function`` if not held."""
        if not self.held_by_caller():
            raise LockingError(f"{function}: dma_resv_assert_held failed on {self!r}")

    def assert_not_held(self, function: str) -> None:
        """The caller must *not* hold the lock (the function takes it itself)."""
        if self.held_by_caller():
            raise LockingError(f"{function}: called with {self!r} held (would deadlock)")

    def __enter__(self) -> DmaResv:
        self.lock()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unlock()

    # -- fences ----------------------------------------------------------------------------
    def _entries(self) -> tuple[DmaFence, ...]:
        """The fences in insertion order, as a tuple."""
        fences = self._fences
        return (fences,) if isinstance(fences, DmaFence) else fences

    def _store(self, fences: tuple[DmaFence, ...], usages: bytes) -> None:
        self._fences = fences[0] if len(fences) == 1 else fences
        self._usages = usages
        self.seq += 1

    def add_fence(self, fence: DmaFence, usage: DmaResvUsage) -> None:
        """``dma_resv_add_fence``; the resv must be held.

        A later (or the same) fence of a context already present with a usage >= ``usage``
        replaces it, so re-adding a fence with a stronger usage promotes it and never demotes
        it; a signalled entry is recycled. Otherwise the fence is appended.
        """
        self.assert_held("dma_resv_add_fence")
        usage = DmaResvUsage(usage)
        fences, usages = self._entries(), self._usages
        for i, old in enumerate(fences):
            if (
                old.context == fence.context and usages[i] >= usage and fence.is_later_or_same(old)
            ) or old.signaled:
                self._store(
                    (*fences[:i], fence, *fences[i + 1 :]),
                    usages[:i] + _USAGE_BYTES[usage] + usages[i + 1 :],
                )
                return
        self._store((*fences, fence), usages + _USAGE_BYTES[usage])

    def iter_fences(self, usage: DmaResvUsage) -> Iterator[tuple[DmaFence, DmaResvUsage]]:
        """``dma_resv_for_each_fence``: entries with usage <= ``usage``, in insertion order."""
        for fence, fence_usage in zip(self._entries(), self._usages, strict=True):
            if fence_usage <= usage:
                yield fence, _USAGES[fence_usage]

    def fences(self, usage: DmaResvUsage, *, unsignaled_only: bool = False) -> list[DmaFence]:
        """The fences a query with ``usage`` returns (K-65)."""
        return [f for f, _ in self.iter_fences(usage) if not (unsignaled_only and f.signaled)]

    def test_signaled(self, usage: DmaResvUsage) -> bool:
        """``dma_resv_test_signaled``: every fence with usage <= ``usage`` has signalled."""
        return all(f.signaled for f, _ in self.iter_fences(usage))

    def wait_timeout(
        self, usage: DmaResvUsage, intr: bool, timeout: int | None = MAX_SCHEDULE_TIMEOUT
    ) -> int:
        """``dma_resv_wait_timeout``: > 0 once the fences signal, 0 on timeout, < 0 (a negative
        errno) when interrupted (K-66).

        The kernel layer does not sleep: the unsignalled fences go to the kernel's
        :class:`~pinlab.kernel.kernel.FenceWaiter`, which decides the outcome and makes the
        caller's timeline wait for them.
        """
        pending = self.fences(usage, unsignaled_only=True)
        if not pending:
            return 1 if timeout is None else max(timeout, 1)
        return self.kernel.waiter.wait(pending, intr=intr, timeout=timeout)

    def prune(self) -> None:
        """Drop signalled fences (what ``dma_resv_reserve_fences`` recycling achieves)."""
        entries = zip(self._entries(), self._usages, strict=True)
        kept = [(f, u) for f, u in entries if not f.signaled]
        self._store(tuple(f for f, _ in kept), bytes(u for _, u in kept))

    def __len__(self) -> int:
        return len(self._usages)

    def __repr__(self) -> str:
        return f"<dma_resv {self.name}>" if self.name else f"<dma_resv {id(self):#x}>"
