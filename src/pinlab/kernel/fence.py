"""``struct dma_fence``: a one-shot completion signal (drivers/dma-buf/dma-fence.c).

The kernel layer never sleeps and never reads a clock (design principle 4): a fence is created
unsignalled by whoever starts asynchronous work (a TTM move or clear, a GPU job) and signalled
by whoever drives time -- the simulator's copy engine, or a test. ``timestamp`` is whatever that
driver passes to :meth:`DmaFence.signal`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pinlab.kernel.limits import U64_MAX
from pinlab.kernel.profile import FenceFormat

FenceCallback = Callable[["DmaFence"], None]


class DmaFence:
    """A fence on timeline ``context`` with sequence number ``seqno``.

    Models ``dma_fence_init``/``dma_fence_signal``/``dma_fence_add_callback``; the driver and
    timeline names on its ``timeline`` are what ``dma_fence_describe`` prints in bufinfo (§4.2).
    """

    __slots__ = ("_callbacks", "context", "error", "seqno", "signaled", "timeline", "timestamp")

    def __init__(self, context: int, seqno: int, driver_name: str, timeline_name: str) -> None:
        self._begin(FenceTimeline(context, driver_name, timeline_name), seqno)

    def _begin(self, timeline: FenceTimeline, seqno: int) -> None:
        # the names live on the timeline, shared by all of its fences as the kernel shares
        # them through fence->ops (FenceTimeline.next_fence); a fence made on its own gets a
        # timeline of its own. The context is the fence's own field, as fence->context is:
        # dma_resv_add_fence compares it on every add.
        self.timeline = timeline
        self.context = timeline.context
        self.seqno = seqno
        self.signaled = False
        self.error = 0
        self.timestamp: float | None = None
        # created on the first add_callback: most fences never get one, and a signalled
        # fence that is kept (in its resv, K-65) should not keep an empty list either
        self._callbacks: list[FenceCallback] | None = None

    def signal(self, timestamp: float | None = None, error: int = 0) -> bool:
        """``dma_fence_signal``: signal once and run the callbacks in registration order.

        Returns False (and does nothing) when the fence was already signalled, as the kernel's
        ``-EINVAL`` return for a double signal.
        """
        if self.signaled:
            return False
        self.signaled = True
        self.error = error
        self.timestamp = timestamp
        callbacks, self._callbacks = self._callbacks, None
        for cb in callbacks or ():
            cb(self)
        return True

    def add_callback(self, cb: FenceCallback) -> bool:
        """``dma_fence_add_callback``: False (kernel ``-ENOENT``) if already signalled."""
        if self.signaled:
            return False
        if self._callbacks is None:
            self._callbacks = [cb]
        else:
            self._callbacks.append(cb)
        return True

    def is_later_or_same(self, other: DmaFence) -> bool:
        """``dma_fence_is_later_or_same`` for fences on one context."""
        return self.context == other.context and self.seqno >= other.seqno

    def describe(self, fmt: FenceFormat = FenceFormat.CLASSIC) -> str:
        """The description ``dma_fence_describe`` prints, without the trailing newline (K-94).

        ``CLASSIC`` (5.19 .. 6.18): ``<driver> <timeline> seq <seqno> <un>signalled``.
        ``CONTEXT_FIRST`` (6.19+, commit ac364014fd81 as merged):
        ``<context>:<seqno> <timeline> <driver> <un>signalled``, with timeline and driver empty
        once signalled. ``EXCLUSIVE_SHARED`` (5.16, printed after the Exclusive/Shared label by
        ``dma_buf_debug_show`` itself): ``<driver> <timeline> <un>signalled``.
        """
        state = "signalled" if self.signaled else "unsignalled"
        names = self.timeline
        if fmt is FenceFormat.CONTEXT_FIRST:
            timeline = "" if self.signaled else names.timeline_name
            driver = "" if self.signaled else names.driver_name
            return f"{self.context & U64_MAX}:{self.seqno & U64_MAX} {timeline} {driver} {state}"
        if fmt is FenceFormat.EXCLUSIVE_SHARED:
            return f"{names.driver_name} {names.timeline_name} {state}"
        return f"{names.driver_name} {names.timeline_name} seq {self.seqno & U64_MAX} {state}"

    def __repr__(self) -> str:
        state = "signalled" if self.signaled else "unsignalled"
        names = self.timeline
        where = f"{names.driver_name}:{names.timeline_name} {self.context}#{self.seqno}"
        return f"<DmaFence {where} {state}>"


@dataclass(eq=False, slots=True)
class FenceTimeline:
    """One fence context (``dma_fence_context_alloc``) with its running sequence number."""

    context: int
    driver_name: str
    timeline_name: str
    seqno: int = field(default=0, init=False)

    def next_fence(self) -> DmaFence:
        """Create the next unsignalled fence on this timeline."""
        self.seqno += 1
        fence = DmaFence.__new__(DmaFence)
        fence._begin(self, self.seqno)
        return fence
