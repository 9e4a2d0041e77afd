"""Device-memory range allocator: the model behind TTM's VRAM and GTT resource managers.

TTM does not allocate device memory itself; each memory type has a *resource manager*
(``ttm_resource_manager``) that hands out address ranges of the aperture
(``kernel-semantics.md`` §9.3). Two kernel allocators sit behind those managers:

* **drm_mm** (``drivers/gpu/drm/drm_mm.c``) -- a hole allocator used by the GTT manager and by
  older VRAM managers. With ``DRM_MM_INSERT_BEST`` it walks the holes in size order and takes
  the *smallest hole that fits*, placing the node at the bottom of the hole (after alignment).
  Every node is one contiguous range.
* **drm_buddy** (``drivers/gpu/drm/drm_buddy.c``) -- used by the amdgpu, i915 and xe VRAM
  managers. Unless the BO asks for contiguous memory (``DRM_BUDDY_CONTIGUOUS_ALLOCATION``,
  amdgpu's ``AMDGPU_GEM_CREATE_VRAM_CONTIGUOUS``) a request may be satisfied by *several*
  blocks, so a fragmented VRAM can still hold a large BO.

:class:`RangeAllocator` models both behaviours over one address space ``[0, size)``:

* ``alloc(n)`` (contiguous) is drm_mm best fit: the smallest free block of at least ``n`` bytes,
  the lowest address among equally sized blocks (so placement is deterministic), allocated from
  the bottom of the block.
* ``alloc(n, contiguous=False)`` first tries the same best fit and, only if no single block is
  large enough, gathers several blocks the drm_buddy way: the largest free blocks first, whole,
  and the final piece best fit, so large blocks are not split needlessly.

What is deliberately *not* modelled: buddy power-of-two rounding and its internal
fragmentation, drm_mm's top-down and range-restricted modes (CPU-visible VRAM windows) and
colour adjustment. The model keeps what the pinning question needs: **real external
fragmentation**. Every free block is a real address range; pinned BOs that cannot move split the
free space, and a contiguous request can fail with ``-ENOSPC`` even when the total free space
would be enough. :attr:`RangeAllocator.fragmentation` measures exactly that.

Data structures and complexity (``n`` = number of free blocks): the free space is indexed two
ways.

* A ``sortedcontainers.SortedList`` ordered by ``(length, start)`` answers best fit with one
  bisection. Each entry is packed into one int, ``length << shift | start``, because int
  comparisons are several times cheaper than tuple comparisons and the order is the same. No
  positional access (``bisect_left`` + ``[i]``) is used, since that would make the list maintain
  a positional index on every update; the best-fit lookup bisects the list's sorted sublists
  directly (see :func:`_ceiling_fast`, with a public-API fallback).
* Two dicts, ``start -> length`` and ``end -> start``, are *boundary tags*: on free, the
  neighbour that ends where the freed range starts and the one that starts where it ends are
  found in O(1), so coalescing needs no ordered search at all.

``alloc`` and ``free`` are O(log n) per segment, i.e. O(log n) for a contiguous allocation and
O(k log n) for one of ``k`` segments; every statistic is O(1). (``benchmarks/bench_alloc.py``
shows the rate with 1e5 live allocations staying within a factor of two of the rate with 1e3.)

Errors: running out of space is a kernel error, ``KernelError(-ENOSPC)``, and leaves the
allocator unchanged. Misuse of the model -- freeing twice, freeing another allocator's
allocation, a non-positive size, a bad alignment -- is a bug in the caller and raises
``ValueError``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from sortedcontainers import SortedList  # type: ignore[import-untyped, unused-ignore]

from pinlab.kernel.errno import Errno, err

__all__ = ["PAGE_SIZE", "Allocation", "RangeAllocator"]

PAGE_SIZE = 4096
"""The default allocation granule (``PAGE_SIZE`` on x86-64)."""

Segment = tuple[int, int]
"""One address range: ``(start, length)`` in bytes."""


def _is_pow2(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _ceiling_public(index: SortedList, key: int) -> int | None:
    """The smallest element ``>= key`` of ``index``, or None, through the public API."""
    for found in index.irange(key):
        result: int = found
        return result
    return None


def _ceiling_fast(index: SortedList, key: int) -> int | None:
    """Same as :func:`_ceiling_public`, two C bisections deep, without positional indexing.

    ``SortedList`` keeps its elements in sorted sublists ``_lists`` whose maxima are ``_maxes``
    (its documented implementation, unchanged since sortedcontainers 2.0). The public
    alternatives each cost a Python-level walk: ``irange`` slices the whole ``_lists`` (O(n /
    load)), ``bisect_left`` + ``[i]`` makes the list maintain a positional index on every
    update. This lookup is the hot path of every allocation, so it reads the two lists
    directly; :data:`_ceiling` falls back to the public version if they are ever missing.
    """
    maxes: list[int] = index._maxes
    pos = bisect_left(maxes, key)
    if pos == len(maxes):
        return None
    sublist: list[int] = index._lists[pos]
    return sublist[bisect_left(sublist, key)]


def _probe_fast_ceiling() -> bool:
    """Whether :func:`_ceiling_fast` agrees with the public API on this sortedcontainers."""
    try:
        probe = SortedList(range(0, 10_000, 3))  # several sublists at the default load
        probe.remove(300)
        return all(
            _ceiling_fast(probe, key) == _ceiling_public(probe, key) for key in range(-2, 10_004, 7)
        )
    except (AttributeError, TypeError, IndexError):
        return False


_ceiling = _ceiling_fast if _probe_fast_ceiling() else _ceiling_public


class Allocation:
    """An allocation: one or more disjoint address ranges of one allocator.

    Created only by :meth:`RangeAllocator.alloc`. Immutable apart from the :attr:`live` bit:
    the ranges never change, and freeing returns them to the allocator but leaves this object as
    a record of where the memory was. Equality is identity -- two allocations that cover the
    same range at different times are different allocations.

    The allocation itself carries its live bit (rather than the allocator keeping a set of live
    allocations): with 1e5 live buffers a large hash set is one more cache miss per operation,
    and the owner reference plus the bit are all that double-free detection needs.
    """

    __slots__ = ("_live", "_owner", "_segments", "_size", "_start")

    def __init__(
        self,
        owner: RangeAllocator,
        start: int,
        size: int,
        segments: tuple[Segment, ...] | None = None,
    ) -> None:
        self._owner = owner
        self._start = start
        self._size = size
        if segments is not None and len(segments) == 1:
            segments = None
        self._segments = segments  # None: the single range (start, size)
        self._live = True

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The ``(start, length)`` ranges, sorted by address, pairwise disjoint."""
        if self._segments is None:
            return ((self._start, self._size),)
        return self._segments

    @property
    def size(self) -> int:
        """Total bytes (the request rounded up to the granule); alignment waste not included."""
        return self._size

    @property
    def start(self) -> int:
        """Start address of the first (lowest) segment: the BO's offset when contiguous."""
        return self._start

    @property
    def end(self) -> int:
        """One past the last byte of the last (highest) segment."""
        if self._segments is None:
            return self._start + self._size
        start, length = self._segments[-1]
        return start + length

    @property
    def contiguous(self) -> bool:
        """True when the allocation is a single address range."""
        return self._segments is None

    @property
    def live(self) -> bool:
        """True until the allocation is freed."""
        return self._live

    @property
    def allocator(self) -> RangeAllocator:
        """The allocator this allocation came from."""
        return self._owner

    def __repr__(self) -> str:
        segs = ", ".join(f"{start:#x}+{length:#x}" for start, length in self.segments)
        state = "" if self._live else " freed"
        return f"<Allocation {self._size:#x} bytes [{segs}]{state}>"


class RangeAllocator:
    """Best-fit range allocator over ``[0, size)`` with drm_buddy-style multi-block fallback.

    ``size`` and ``granule`` are bytes; ``granule`` is the minimum allocation unit (a power of
    two, ``PAGE_SIZE`` by default) and every request is rounded up to it. ``name`` is only used
    in messages (for example ``"vram0"``). See the module docstring for the kernel model.
    """

    ALIGN_SCAN_LIMIT = 32
    """How many may-not-fit candidates an aligned best fit examines (see :meth:`alloc`)."""

    __slots__ = (
        "_by_size",
        "_end_at",
        "_granule",
        "_len_at",
        "_live",
        "_mask",
        "_name",
        "_shift",
        "_size",
        "_used",
        "on_change",
    )

    def __init__(self, size: int, *, granule: int = PAGE_SIZE, name: str = "") -> None:
        if isinstance(granule, bool) or not isinstance(granule, int) or granule <= 0:
            raise ValueError(f"granule must be a positive int, got {granule!r}")
        if not _is_pow2(granule):
            raise ValueError(f"granule must be a power of two, got {granule}")
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive int, got {size!r}")
        if size % granule:
            raise ValueError(f"size {size} is not a multiple of the granule {granule}")
        self._size = size
        self._granule = granule
        self._name = name
        self._used = 0
        # Best-fit index: key = length << shift | start, so keys sort by (length, start).
        self._shift = size.bit_length()
        self._mask = (1 << self._shift) - 1
        self._by_size = SortedList()
        # Boundary tags: start -> length and end -> start of every free block.
        self._len_at: dict[int, int] = {}
        self._end_at: dict[int, int] = {}
        self._live = 0
        self._add_block(size, 0)
        # called after every allocation and free (not a kernel hook: an observer -- the
        # simulator's sampler -- learns of a change instead of polling the statistics)
        self.on_change: Callable[[], None] | None = None

    # ------------------------------------------------------------------ statistics (O(1))

    @property
    def name(self) -> str:
        """The allocator's name (for messages)."""
        return self._name

    @property
    def granule(self) -> int:
        """The minimum allocation unit in bytes."""
        return self._granule

    @property
    def size(self) -> int:
        """Total managed bytes."""
        return self._size

    @property
    def used(self) -> int:
        """Bytes held by live allocations."""
        return self._used

    @property
    def free_bytes(self) -> int:
        """Free bytes (``size - used``), whether or not they are contiguous.

        (Named ``free_bytes`` because :meth:`free` is the operation that releases an
        allocation.)
        """
        return self._size - self._used

    @property
    def largest_free(self) -> int:
        """Length of the largest free block: the largest contiguous request that can succeed."""
        if not self._len_at:
            return 0
        key: int = self._by_size[-1]
        return key >> self._shift

    @property
    def free_blocks(self) -> int:
        """Number of (maximal, coalesced) free blocks."""
        return len(self._len_at)

    @property
    def live(self) -> int:
        """Number of live allocations."""
        return self._live

    @property
    def fragmentation(self) -> float:
        """``1 - largest_free / free_bytes``; 0.0 when the free space is one block or empty.

        Approaches 1.0 when the free space is shattered into many small blocks, which is when
        contiguous requests fail although ``free_bytes`` looks ample.
        """
        free = self._size - self._used
        if free == 0:
            return 0.0
        return 1.0 - self.largest_free / free

    def free_ranges(self) -> list[Segment]:
        """The free blocks as ``(start, length)`` sorted by address. O(n log n); for reports."""
        return sorted(self._len_at.items())

    def __repr__(self) -> str:
        label = f" {self._name}" if self._name else ""
        return (
            f"<RangeAllocator{label} size={self._size:#x} used={self._used:#x} "
            f"free_blocks={self.free_blocks} live={self.live}>"
        )

    # ------------------------------------------------------------------ argument checking

    def _round(self, size: int) -> int:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"allocation size must be a positive int, got {size!r}")
        mask = self._granule - 1
        return (size + mask) & ~mask

    def _check_align(self, align: int | None, contiguous: bool) -> int:
        if align is None:
            return self._granule
        if isinstance(align, bool) or not isinstance(align, int) or not _is_pow2(align):
            raise ValueError(f"align must be a power of two, got {align!r}")
        if align % self._granule:
            raise ValueError(f"align {align} is not a multiple of the granule {self._granule}")
        if not contiguous and align > self._granule:
            raise ValueError(
                "align applies to contiguous allocations only "
                "(non-contiguous segments are granule-aligned, like drm_buddy blocks)"
            )
        return align

    # ------------------------------------------------------------------ free-space index

    def _add_block(self, length: int, start: int) -> None:
        self._by_size.add(length << self._shift | start)
        self._len_at[start] = length
        self._end_at[start + length] = start

    def _remove_block(self, length: int, start: int) -> None:
        self._by_size.remove(length << self._shift | start)
        del self._len_at[start]
        del self._end_at[start + length]

    def _best_fit(self, n: int, align: int) -> tuple[int, int, int] | None:
        """Find the block for a contiguous ``n``-byte request: ``(length, start, place)``.

        No side effects. ``place`` is where the allocation starts inside the block (``start``
        rounded up to ``align``). Without alignment this is one bisection: O(log n).

        With ``align > granule`` a block of length ``>= n + align - granule`` always fits (its
        start is granule-aligned, so the alignment waste is at most ``align - granule``); blocks
        in ``[n, n + align - granule)`` fit only if their start happens to be aligned well
        enough. drm_mm walks such candidates one by one (O(n) in the worst case). To stay
        O(log n) the model examines at most :attr:`ALIGN_SCAN_LIMIT` of them in best-fit order
        and otherwise takes the smallest block that surely fits. Only if no block surely fits
        does it scan the remaining candidates, so ``-ENOSPC`` is never reported while some
        block could hold the request.
        """
        shift = self._shift
        low = self._mask
        if align <= self._granule:
            key = _ceiling(self._by_size, n << shift)
            if key is None:
                return None
            start = key & low
            return key >> shift, start, start

        mask = align - 1
        sure = n + align - self._granule
        candidates = iter(self._by_size.irange(n << shift, sure << shift, inclusive=(True, False)))
        for scanned, key in enumerate(candidates, 1):
            length, start = key >> shift, key & low
            place = (start + mask) & ~mask
            if place + n <= start + length:
                return length, start, place
            if scanned >= self.ALIGN_SCAN_LIMIT:
                break
        key = _ceiling(self._by_size, sure << shift)
        if key is not None:
            length, start = key >> shift, key & low
            return length, start, (start + mask) & ~mask
        for key in candidates:  # the rest of the window: only when nothing surely fits
            length, start = key >> shift, key & low
            place = (start + mask) & ~mask
            if place + n <= start + length:
                return length, start, place
        return None

    # ------------------------------------------------------------------ operations

    def can_alloc(self, size: int, contiguous: bool = True, *, align: int | None = None) -> bool:
        """Whether ``alloc(size, contiguous=contiguous, align=align)`` would succeed.

        No side effects. O(log n); O(1) for non-contiguous requests, which only need enough
        free bytes in total.
        """
        n = self._round(size)
        align_ = self._check_align(align, contiguous)
        if n > self._size - self._used:
            return False
        if not contiguous:
            return True
        return self._best_fit(n, align_) is not None

    def alloc(self, size: int, *, contiguous: bool = True, align: int | None = None) -> Allocation:
        """Allocate ``size`` bytes (rounded up to the granule).

        ``contiguous=True`` (drm_mm best fit): the smallest free block that fits, lowest address
        among equal lengths, allocated from the bottom of the block after rounding its start up
        to ``align``; the leading remainder stays free as a block of its own, as does the tail.
        O(log n). With ``align`` above the granule the best fit is exact unless more than
        :attr:`ALIGN_SCAN_LIMIT` blocks that are large enough but badly placed come first; the
        smallest block that surely fits is taken then (details in :meth:`_best_fit`).

        ``contiguous=False`` (drm_buddy): the best-fit block if one is large enough; otherwise
        the largest free blocks taken whole, largest first (lowest address among equals), and
        the final piece best fit for what remains. O(k log n) for ``k`` segments; segments are
        returned sorted by address. ``align`` must then be ``None`` (or the granule): buddy
        blocks are granule-aligned.

        Raises ``KernelError(-ENOSPC)`` -- leaving the allocator completely unchanged -- when
        the request cannot be satisfied; ``ValueError`` for a non-positive size or bad ``align``.
        """
        n = self._round(size)
        align_ = self._check_align(align, contiguous)
        free = self._size - self._used

        if n <= free:
            found = self._best_fit(n, align_)
            if found is not None:
                length, start, place = found
                self._remove_block(length, start)
                if place > start:
                    self._add_block(place - start, start)
                tail = start + length - (place + n)
                if tail:
                    self._add_block(tail, place + n)
                self._used += n
                self._live += 1
                if self.on_change is not None:
                    self.on_change()
                return Allocation(self, place, n)
            if not contiguous:
                segments = self._gather(n)  # always two or more segments
                self._used += n
                self._live += 1
                if self.on_change is not None:
                    self.on_change()
                return Allocation(self, segments[0][0], n, segments)

        function = "drm_mm_insert_node_in_range" if contiguous else "drm_buddy_alloc_blocks"
        what = "contiguous " if contiguous else ""
        aligned = f" aligned to {align_:#x}" if align_ > self._granule else ""
        raise err(
            Errno.ENOSPC,
            function,
            f"{self._name or 'range allocator'}: no room for {what}{n:#x} bytes{aligned} "
            f"(free {free:#x} in {self.free_blocks} blocks, largest {self.largest_free:#x})",
        )

    def _gather(self, n: int) -> tuple[Segment, ...]:
        """Take ``n`` bytes from several blocks. The caller checked ``n <= free_bytes``."""
        shift = self._shift
        low = self._mask
        segments: list[Segment] = []
        remaining = n
        while remaining:
            largest: int = self._by_size[-1] >> shift
            if largest >= remaining:
                # The final piece: best fit for what is left, from the bottom of the block.
                key = _ceiling(self._by_size, remaining << shift)
                assert key is not None
                length, start = key >> shift, key & low
                self._remove_block(length, start)
                if length > remaining:
                    self._add_block(length - remaining, start + remaining)
                segments.append((start, remaining))
                break
            # The largest block, lowest address among equals, taken whole.
            key = _ceiling(self._by_size, largest << shift)
            assert key is not None
            start = key & low
            self._remove_block(largest, start)
            segments.append((start, largest))
            remaining -= largest
        segments.sort()
        return tuple(segments)

    def free(self, allocation: Allocation) -> None:
        """Return every segment of ``allocation``, coalescing with free neighbours on both sides.

        O(log n) per segment (the neighbours are found in O(1) through the boundary tags).
        Raises ``ValueError`` if the allocation belongs to another allocator or was already
        freed -- a bug in the model's caller, not a kernel errno.
        """
        if not isinstance(allocation, Allocation):
            raise ValueError(f"not an Allocation: {allocation!r}")
        if allocation._owner is not self:
            raise ValueError(f"{allocation!r} belongs to another allocator, not {self!r}")
        if not allocation._live:
            raise ValueError(f"double free of {allocation!r} in {self!r}")
        allocation._live = False
        self._live -= 1
        self._used -= allocation._size
        if allocation._segments is None:
            self._release(allocation._start, allocation._size)
        else:
            for start, length in allocation._segments:
                self._release(start, length)
        if self.on_change is not None:
            self.on_change()

    def _release(self, start: int, length: int) -> None:
        """Put ``[start, start + length)`` back into the free space, coalescing. O(log n)."""
        before = self._end_at.get(start)  # a free block ending where this range starts
        if before is not None:
            self._remove_block(start - before, before)
            length += start - before
            start = before
        after = self._len_at.get(start + length)  # a free block starting where this one ends
        if after is not None:
            self._remove_block(after, start + length)
            length += after
        self._add_block(length, start)

    # ------------------------------------------------------------------ checking

    def check_invariants(self) -> None:
        """Verify the allocator's internal consistency; raise ``AssertionError`` if broken.

        Checks that the three free-space indexes describe the same blocks; that free blocks are
        granule-aligned, non-empty, inside ``[0, size)``, disjoint and coalesced (no two
        adjacent); that their total is ``free_bytes`` (so ``free_bytes + used == size``); and
        that the live count and ``used`` are consistent. O(n log n).

        The allocator does not enumerate its live allocations (see :class:`Allocation`), so
        checking that they are disjoint and add up to ``used`` is the caller's job -- the tests'
        state machine does it with the allocations it holds.
        """

        def fail(message: str) -> None:
            raise AssertionError(f"{self!r}: {message}")

        g = self._granule
        blocks = self.free_ranges()
        indexed = sorted((key & self._mask, key >> self._shift) for key in self._by_size)
        if indexed != blocks:
            fail(f"size index {indexed} disagrees with start index {blocks}")
        if self._end_at != {start + length: start for start, length in blocks}:
            fail(f"end index {self._end_at} disagrees with start index {blocks}")
        total_free = 0
        prev_end = -1
        for start, length in blocks:
            if length <= 0 or start % g or length % g:
                fail(f"bad free block {start:#x}+{length:#x}")
            if start < 0 or start + length > self._size:
                fail(f"free block {start:#x}+{length:#x} outside [0, {self._size:#x})")
            if start < prev_end:
                fail(f"free block {start:#x}+{length:#x} overlaps its predecessor")
            if start == prev_end:
                fail(f"free block {start:#x}+{length:#x} not coalesced with its predecessor")
            prev_end = start + length
            total_free += length
        if total_free != self._size - self._used:
            fail(f"free blocks total {total_free:#x}, expected {self._size - self._used:#x}")
        if not 0 <= self._used <= self._size or self._used % g:
            fail(f"used {self._used:#x} outside [0, {self._size:#x}] or not granule-aligned")
        if self._live < 0 or (self._live == 0) != (self._used == 0):
            fail(f"{self._live} live allocations holding {self._used:#x} bytes")
