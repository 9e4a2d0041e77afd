"""dma_resv and dma_fence (kernel-semantics.md §3, §2.3; K-65, K-66, K-94, K-95)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pinlab.kernel.errno import Errno, KernelError, LockingError
from pinlab.kernel.fence import DmaFence, FenceTimeline
from pinlab.kernel.kernel import DeferredWaiter, Kernel, Task
from pinlab.kernel.profile import FenceFormat
from pinlab.kernel.resv import (
    MAX_SCHEDULE_TIMEOUT,
    DmaResv,
    DmaResvUsage,
    WwAcquireCtx,
    dma_resv_usage_rw,
)

KERNEL, WRITE, READ, BOOKKEEP = (
    DmaResvUsage.KERNEL,
    DmaResvUsage.WRITE,
    DmaResvUsage.READ,
    DmaResvUsage.BOOKKEEP,
)


def _resv_with_one_fence_per_usage() -> tuple[Kernel, DmaResv, dict[DmaResvUsage, DmaFence]]:
    kernel = Kernel()
    resv = DmaResv(kernel, "bo")
    fences = {u: kernel.timeline("drv", u.name.lower()).next_fence() for u in DmaResvUsage}
    with resv:
        for usage in (BOOKKEEP, READ, KERNEL, WRITE):  # insertion order is not usage order
            resv.add_fence(fences[usage], usage)
    return kernel, resv, fences


class ScriptedWaiter:
    """A custom kernel.waiter returning a fixed result and recording its calls."""

    def __init__(self, result: int) -> None:
        self.result = result
        self.calls: list[tuple[list[DmaFence], bool, int | None]] = []

    def wait(self, fences: Sequence[DmaFence], *, intr: bool, timeout: int | None) -> int:
        self.calls.append((list(fences), intr, timeout))
        return self.result


# -- K-65: usages ----------------------------------------------------------------------------


def test_k65_usage_order() -> None:
    """K-65: KERNEL < WRITE < READ < BOOKKEEP."""
    assert KERNEL < WRITE < READ < BOOKKEEP
    assert sorted(DmaResvUsage) == [KERNEL, WRITE, READ, BOOKKEEP]


@pytest.mark.parametrize("usage", list(DmaResvUsage))
def test_k65_query_returns_fences_of_usage_at_most_u(usage: DmaResvUsage) -> None:
    """K-65: a query with usage U returns exactly the fences with usage ≤ U."""
    _, resv, fences = _resv_with_one_fence_per_usage()
    got = resv.fences(usage)
    assert set(got) == {fences[u] for u in DmaResvUsage if u <= usage}
    assert [u for _, u in resv.iter_fences(usage)] == [
        u for u in (BOOKKEEP, READ, KERNEL, WRITE) if u <= usage
    ]
    assert not resv.test_signaled(usage)
    for u in DmaResvUsage:
        if u <= usage:
            fences[u].signal()
    assert resv.test_signaled(usage)
    assert resv.fences(usage, unsignaled_only=True) == []
    if usage is not BOOKKEEP:
        assert not resv.test_signaled(BOOKKEEP)


def test_k65_signalled_fences_stay_listed_until_recycled() -> None:
    """K-65 (dma_resv_iter_first/next, dma_resv_describe): a query under the lock lists
    signalled fences too -- bufinfo prints them as signalled -- until an add recycles their
    slot or they are pruned; only an explicit unsignalled-only query leaves them out."""
    _, resv, fences = _resv_with_one_fence_per_usage()
    fences[KERNEL].signal()
    assert resv.fences(KERNEL) == [fences[KERNEL]]
    assert resv.fences(KERNEL, unsignaled_only=True) == []


def test_k65_usage_rw() -> None:
    """K-65: a writer waits for READ (readers and writers), a reader for WRITE."""
    assert dma_resv_usage_rw(True) is READ
    assert dma_resv_usage_rw(False) is WRITE


def test_k65_re_adding_a_fence_promotes_it_and_never_demotes() -> None:
    """K-65/§3: adding a fence again with a stronger usage (towards KERNEL) promotes it;
    adding it with a weaker one leaves it visible at its old usage."""
    kernel = Kernel()
    resv = DmaResv(kernel)
    fence = kernel.timeline("drv", "t").next_fence()
    with resv:
        resv.add_fence(fence, BOOKKEEP)
        assert resv.fences(READ) == []
        resv.add_fence(fence, KERNEL)
        assert resv.fences(KERNEL) == [fence]
        assert len(resv) == 1
        resv.add_fence(fence, BOOKKEEP)
        assert fence in resv.fences(KERNEL)


def test_k65_later_fence_of_a_context_replaces_earlier() -> None:
    """K-65/§3: a later fence on the same context with the same (or stronger) usage replaces
    the earlier entry; a signalled entry is recycled."""
    kernel = Kernel()
    resv = DmaResv(kernel)
    timeline = kernel.timeline("drv", "gfx")
    first, second = timeline.next_fence(), timeline.next_fence()
    other = kernel.timeline("drv", "sdma").next_fence()
    with resv:
        resv.add_fence(first, READ)
        resv.add_fence(second, WRITE)
        assert resv.fences(BOOKKEEP) == [second]
        resv.add_fence(other, READ)
        assert resv.fences(BOOKKEEP) == [second, other]
        second.signal()
        third = kernel.timeline("drv", "copy").next_fence()
        resv.add_fence(third, KERNEL)
        assert resv.fences(BOOKKEEP) == [third, other]
    resv.prune()
    assert len(resv) == 2


def test_k65_add_fence_needs_the_lock() -> None:
    """§3: dma_resv_add_fence asserts the resv is held."""
    kernel = Kernel()
    resv = DmaResv(kernel)
    with pytest.raises(LockingError, match="dma_resv_add_fence"):
        resv.add_fence(kernel.timeline("d", "t").next_fence(), KERNEL)
    assert len(resv) == 0


# -- K-66: waits -----------------------------------------------------------------------------


def test_k66_wait_without_pending_fences_is_positive_without_asking_the_waiter() -> None:
    """K-66: nothing unsignalled → > 0 at once (the remaining timeout, or 1)."""
    kernel, resv, fences = _resv_with_one_fence_per_usage()
    waiter = ScriptedWaiter(-1)
    kernel.waiter = waiter
    fences[KERNEL].signal()
    assert resv.wait_timeout(KERNEL, True) == 1
    assert resv.wait_timeout(KERNEL, True, 250) == 250
    assert waiter.calls == []


def test_k66_wait_without_pending_fences_returns_the_timeout_or_1() -> None:
    """K-66 (dma_resv_wait_timeout starts from ``timeout ?: 1``): with nothing left to wait
    for, the result is the timeout itself, and 1 for a zero timeout."""
    _, resv, fences = _resv_with_one_fence_per_usage()
    for fence in fences.values():
        fence.signal()
    assert resv.wait_timeout(BOOKKEEP, True, 0) == 1
    assert resv.wait_timeout(BOOKKEEP, True, 1) == 1
    assert resv.wait_timeout(BOOKKEEP, False, 7) == 7


@pytest.mark.parametrize(
    ("result", "meaning"),
    [(1, "signalled"), (77, "signalled"), (0, "timeout"), (-512, "interrupted"), (-4, "eintr")],
)
def test_k66_custom_waiter_decides_the_outcome(result: int, meaning: str) -> None:
    """K-66: wait_timeout returns what the kernel's waiter answers: > 0 signalled, 0 timeout,
    < 0 interrupted; the waiter sees exactly the unsignalled fences of usage ≤ U."""
    kernel, resv, fences = _resv_with_one_fence_per_usage()
    waiter = ScriptedWaiter(result)
    kernel.waiter = waiter
    fences[KERNEL].signal()
    ret = resv.wait_timeout(READ, True, 100)
    assert ret == result
    assert (ret > 0, ret == 0, ret < 0) == (
        meaning == "signalled",
        meaning == "timeout",
        meaning in ("interrupted", "eintr"),
    )
    assert waiter.calls == [([fences[READ], fences[WRITE]], True, 100)]
    assert kernel.take_waits() == []  # only the default waiter collects


def test_k66_deferred_waiter_collects_pending_fences() -> None:
    """K-66: the default DeferredWaiter reports success and keeps the unsignalled fences for
    whoever drives time; take() hands them over once and drops ones signalled since."""
    kernel, resv, fences = _resv_with_one_fence_per_usage()
    assert isinstance(kernel.waiter, DeferredWaiter)
    assert resv.wait_timeout(WRITE, False) == 1
    assert resv.wait_timeout(BOOKKEEP, True, 10) == 10
    assert kernel.waiter.pending == [fences[KERNEL], fences[WRITE]] + [
        fences[u] for u in (BOOKKEEP, READ, KERNEL, WRITE)
    ]
    fences[BOOKKEEP].signal()
    taken = kernel.take_waits()
    assert fences[BOOKKEEP] not in taken
    assert set(taken) == {fences[KERNEL], fences[WRITE], fences[READ]}
    assert kernel.take_waits() == []


def test_k66_deferred_waiter_interrupted_only_when_interruptible() -> None:
    """K-66/K-28: a pending signal interrupts an interruptible wait (-ERESTARTSYS) and
    collects nothing; an uninterruptible wait proceeds."""
    kernel, resv, fences = _resv_with_one_fence_per_usage()
    task = Task(9, "app")
    task.sigpending = True
    kernel.current = task
    assert resv.wait_timeout(KERNEL, True) == -int(Errno.ERESTARTSYS)
    assert kernel.take_waits() == []
    assert resv.wait_timeout(KERNEL, False, MAX_SCHEDULE_TIMEOUT) == 1
    assert kernel.take_waits() == [fences[KERNEL]]


# -- K-95: the ww_mutex ----------------------------------------------------------------------


def test_k95_acquire_context_contention_is_edeadlk_then_retry() -> None:
    """K-95: dma_resv_lock with an acquire context fails with -EDEADLK while another context
    holds the lock; after backing off the retry succeeds."""
    kernel = Kernel()
    a, b = DmaResv(kernel, "a"), DmaResv(kernel, "b")
    ctx1, ctx2 = WwAcquireCtx("ctx1"), WwAcquireCtx("ctx2")
    a.lock(ctx1)
    b.lock(ctx2)
    with pytest.raises(KernelError) as exc:
        a.lock(ctx2)
    assert exc.value.errno is Errno.EDEADLK
    assert exc.value.value == -35
    assert ctx2.held == [b]
    b.unlock(ctx2)  # back off
    a.unlock(ctx1)
    a.lock(ctx2)
    b.lock(ctx2)
    assert ctx2.held == [a, b] and ctx1.held == []
    a.unlock(ctx2)
    b.unlock(ctx2)
    assert not a.is_locked() and not b.is_locked()


def test_k95_interruptible_lock_with_signal_pending_is_eintr() -> None:
    """K-95: dma_resv_lock_interruptible fails with -EINTR when a task with a signal pending
    has to wait for the lock; the uncontended fast path still takes it."""
    kernel = Kernel()
    resv = DmaResv(kernel)
    holder = Task(2, "holder")
    task = Task(3, "app")
    kernel.current = holder
    resv.lock()
    kernel.current = task
    task.sigpending = True
    with pytest.raises(KernelError) as exc:
        resv.lock_interruptible()
    assert exc.value.errno is Errno.EINTR
    kernel.current = holder
    resv.unlock()
    kernel.current = task
    resv.lock_interruptible()  # uncontended: the fast path ignores the pending signal
    assert resv.is_locked()
    resv.unlock()
    task.sigpending = False
    resv.lock_interruptible(WwAcquireCtx())
    assert resv.is_locked()


def test_k95_lock_taken_through_an_acquire_context_is_held_by_its_task() -> None:
    """K-95, §2.3 (ww_mutex owner, dma_resv_assert_held): a resv locked with an acquire
    context is held by the task running that context, so a function asserting the resv
    held accepts it without the context; another task does not hold it."""
    kernel = Kernel()
    resv = DmaResv(kernel, "bo")
    task = Task(4, "app")
    kernel.current = task
    ctx = WwAcquireCtx("ctx", owner=task)
    resv.lock(ctx)
    assert resv.held_by_caller()
    resv.assert_held("dma_buf_map_attachment")
    kernel.current = Task(5, "other")
    assert not resv.held_by_caller()
    with pytest.raises(LockingError, match="dma_buf_map_attachment"):
        resv.assert_held("dma_buf_map_attachment")
    kernel.current = task
    resv.unlock(ctx)
    assert not resv.is_locked()


def test_k95_lock_misuse_is_a_locking_error() -> None:
    """§2.3/K-95: recursion, blocking on a lock held by someone else in the synchronous model,
    and unlocking a lock one does not hold are lockdep splats, not errnos."""
    kernel = Kernel()
    resv = DmaResv(kernel, "bo")
    resv.lock()
    with pytest.raises(LockingError, match="recursive"):
        resv.lock()
    assert not resv.trylock()
    kernel.current = Task(5, "other")
    assert not resv.held_by_caller()
    with pytest.raises(LockingError, match="would block"):
        resv.lock()
    with pytest.raises(LockingError, match="not held"):
        resv.unlock()
    with pytest.raises(LockingError, match="my_fn"):
        resv.assert_held("my_fn")
    resv.assert_not_held("my_fn")
    kernel.current = None
    resv.assert_held("my_fn")
    with pytest.raises(LockingError, match="my_fn"):
        resv.assert_not_held("my_fn")
    resv.unlock()
    assert resv.trylock()
    resv.unlock()


# -- fences ----------------------------------------------------------------------------------


def test_fence_signals_once_and_runs_callbacks_in_order() -> None:
    """§0.2: a fence is a one-shot signal."""
    fence = FenceTimeline(1, "drv", "t").next_fence()
    seen: list[str] = []
    assert fence.add_callback(lambda f: seen.append("a"))
    assert fence.add_callback(lambda f: seen.append("b"))
    assert fence.signal(timestamp=1.5)
    assert not fence.signal(timestamp=2.0)
    assert seen == ["a", "b"]
    assert fence.timestamp == 1.5
    assert not fence.add_callback(lambda f: seen.append("c"))
    assert seen == ["a", "b"]


def test_fence_callback_is_called_with_the_fence() -> None:
    """dma_fence_signal calls each callback with the fence that signalled."""
    fence = FenceTimeline(1, "drv", "t").next_fence()
    seen: list[DmaFence] = []
    assert fence.add_callback(seen.append)
    assert fence.signal()
    assert seen == [fence]


def test_fence_timeline_and_later_or_same() -> None:
    """Sequence numbers grow per context; fences of other contexts are never 'later'."""
    kernel = Kernel()
    t1, t2 = kernel.timeline("drv", "a"), kernel.timeline("drv", "b")
    assert t1.context != t2.context
    f1, f2 = t1.next_fence(), t1.next_fence()
    g = t2.next_fence()
    assert (f1.seqno, f2.seqno, g.seqno) == (1, 2, 1)
    assert f2.is_later_or_same(f1) and f1.is_later_or_same(f1)
    assert not f1.is_later_or_same(f2)
    assert not g.is_later_or_same(f1)


def test_k94_fence_descriptions() -> None:
    """K-94: classic "%s %s seq %llu %ssignalled"; the late-2025 format as merged
    (ac364014fd81, "%llu:%llu %s %s %ssignalled") puts context:seqno first and blanks timeline
    and driver once signalled; 5.16 printed driver, timeline and state after its label."""
    fence = DmaFence(7, 42, "amdgpu", "sdma0")
    assert fence.describe() == "amdgpu sdma0 seq 42 unsignalled"
    assert fence.describe(FenceFormat.CONTEXT_FIRST) == "7:42 sdma0 amdgpu unsignalled"
    assert fence.describe(FenceFormat.EXCLUSIVE_SHARED) == "amdgpu sdma0 unsignalled"
    fence.signal()
    assert fence.describe(FenceFormat.CLASSIC) == "amdgpu sdma0 seq 42 signalled"
    assert fence.describe(FenceFormat.CONTEXT_FIRST) == "7:42   signalled"
