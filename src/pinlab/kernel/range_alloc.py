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
ways, both B-trees of the ``BTrees`` package (C, 64-bit integer keys stored side by side in
each bucket), in units of the granule:

* a tree *set* ordered by ``(length, start)`` answers best fit with one ``minKey`` (the
  smallest key at or above the request). Each key is packed into one integer, ``length << shift
  | start``, whose order is the tuples' order;
* a tree *map* ``start -> length`` by address holds the boundary tags: on free, the block
  before the freed range is the largest start below it (``maxKey``) and the block after it is
  the one starting where it ends -- both in the bucket the freed address falls in, so
  coalescing reads one bucket.

Why B-trees rather than a sorted list of Python ints and hash maps: with 1e6 live buffers the
free space holds ~3e5 blocks, and every step of a bisection over boxed ints, every dict probe,
is a cache miss; a bucket keeps up to 120 keys in one C array, so one operation
touches a few cache lines. Allocators of 2**32 granules or more (keys wider than 64 bits) use
the package's object-key trees, with the same operations and results.

``alloc`` and ``free`` are O(log n) per segment, i.e. O(log n) for a contiguous allocation and
O(k log n) for one of ``k`` segments; every statistic is O(1). (``benchmarks/bench_alloc.py``
measures the rate with 1e6 live allocations against the rate with 1e3.)

Errors: running out of space is a kernel error, ``KernelError(-ENOSPC)``, and leaves the
allocator unchanged. Misuse of the model -- freeing twice, freeing another allocator's
allocation, a non-positive size, a bad alignment -- is a bug in the caller and raises
``ValueError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from pinlab.kernel.errno import Errno, err

__all__ = ["PAGE_SIZE", "Allocation", "RangeAllocator"]

PAGE_SIZE = 4096
"""The default allocation granule (``PAGE_SIZE`` on x86-64)."""

Segment = tuple[int, int]
"""One address range: ``(start, length)`` in bytes."""


def _is_pow2(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _free_space_trees(native: bool) -> tuple[Any, Any]:
    """A new, empty ``(by_size set, by_start map)`` pair: 64-bit keys when ``native``, else
    object keys (any Python int).

    Imported on first use: importing ``BTrees`` builds all of its key families (~0.1 s), which
    only a process that makes an allocator needs to pay.
    """
    if native:
        from BTrees.QQBTree import QQBTree, QQTreeSet  # type: ignore[import-untyped]

        return QQTreeSet(), QQBTree()
    from BTrees.OOBTree import OOBTree, OOTreeSet  # type: ignore[import-untyped]

    return OOTreeSet(), OOBTree()


class Allocation:
    """An allocation: one or more disjoint address ranges of one allocator.

    Created only by :meth:`RangeAllocator.alloc`. Immutable apart from the :attr:`live` bit:
    ``start`` (the address of the first, lowest segment: the BO's offset when contiguous),
    ``size`` (total bytes: the request rounded up to the granule; alignment waste not included)
    and ``allocator`` (where it came from) are ``Final`` attributes, read-only to the type
    checker; the ranges never change, and freeing returns them to the allocator but leaves this
    object as a record of where the memory was. Equality is identity -- two allocations that
    cover the same range at different times are different allocations.

    The allocation itself carries its live bit (rather than the allocator keeping a set of live
    allocations): with 1e5 live buffers a large hash set is one more cache miss per operation,
    and the owner reference plus the bit are all that double-free detection needs.
    """

    __slots__ = ("_live", "_segments", "allocator", "size", "start")

    def __init__(
        self,
        owner: RangeAllocator,
        start: int,
        size: int,
        segments: tuple[Segment, ...] | None = None,
    ) -> None:
        self.allocator: Final[RangeAllocator] = owner
        self.start: Final[int] = start
        self.size: Final[int] = size
        if segments is not None and len(segments) == 1:
            segments = None
        self._segments = segments  # None: the single range (start, size)
        self._live = True

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The ``(start, length)`` ranges, sorted by address, pairwise disjoint."""
        if self._segments is None:
            return ((self.start, self.size),)
        return self._segments

    @property
    def end(self) -> int:
        """One past the last byte of the last (highest) segment."""
        if self._segments is None:
            return self.start + self.size
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

    def __repr__(self) -> str:
        segs = ", ".join(f"{start:#x}+{length:#x}" for start, length in self.segments)
        state = "" if self._live else " freed"
        return f"<Allocation {self.size:#x} bytes [{segs}]{state}>"


class RangeAllocator:
    """Best-fit range allocator over ``[0, size)`` with drm_buddy-style multi-block fallback.

    ``size`` and ``granule`` are bytes; ``granule`` is the minimum allocation unit (a power of
    two, ``PAGE_SIZE`` by default) and every request is rounded up to it. ``name`` is only used
    in messages (for example ``"vram0"``); the three are ``Final`` attributes, read-only to the
    type checker, and the statistics are read-only properties. See the module docstring for the
    kernel model.
    """

    ALIGN_SCAN_LIMIT = 32
    """How many may-not-fit candidates an aligned best fit examines (see :meth:`alloc`)."""

    NATIVE_KEY_BITS = 64
    """Free-space keys (``length << shift | start`` in granules) up to this many bits use the
    64-bit-key trees; wider ones (an allocator of 2**32 granules or more) object-key trees."""

    __slots__ = (
        "_blocks",
        "_by_size",
        "_by_start",
        "_gshift",
        "_live",
        "_mask",
        "_shift",
        "_used",
        "granule",
        "name",
        "on_change",
        "size",
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
        self.size: Final[int] = size  # total managed bytes
        self.granule: Final[int] = granule  # the minimum allocation unit in bytes
        self.name: Final[str] = name
        self._used = 0
        self._live = 0
        # The indexes count in granules: bytes = units << gshift.
        self._gshift = granule.bit_length() - 1
        units = size >> self._gshift
        # Best-fit key = length << shift | start, so keys sort by (length, start).
        self._shift = units.bit_length()
        self._mask = (1 << self._shift) - 1
        self._by_size, self._by_start = _free_space_trees(2 * self._shift <= self.NATIVE_KEY_BITS)
        self._blocks = 0  # a B-tree's len() walks every bucket: the count is kept here
        self._add_block(units, 0)
        # called after every allocation and free (not a kernel hook: an observer -- the
        # simulator's sampler -- learns of a change instead of polling the statistics)
        self.on_change: Callable[[], None] | None = None

    # ------------------------------------------------------------------ statistics (O(1))

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
        return self.size - self._used

    @property
    def largest_free(self) -> int:
        """Length of the largest free block: the largest contiguous request that can succeed."""
        if not self._blocks:
            return 0
        key: int = self._by_size.maxKey()
        return key >> self._shift << self._gshift

    @property
    def free_blocks(self) -> int:
        """Number of (maximal, coalesced) free blocks."""
        return self._blocks

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
        free = self.size - self._used
        if free == 0:
            return 0.0
        return 1.0 - self.largest_free / free

    def free_ranges(self) -> list[Segment]:
        """The free blocks as ``(start, length)`` sorted by address. O(n); for reports."""
        g = self._gshift
        return [(start << g, length << g) for start, length in self._by_start.items()]

    def __repr__(self) -> str:
        label = f" {self.name}" if self.name else ""
        return (
            f"<RangeAllocator{label} size={self.size:#x} used={self._used:#x} "
            f"free_blocks={self.free_blocks} live={self.live}>"
        )

    # ------------------------------------------------------------------ argument checking

    def _round(self, size: int) -> int:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"allocation size must be a positive int, got {size!r}")
        mask = self.granule - 1
        if not size & mask:
            return size  # the caller's int: a million equal sizes stay one object
        return (size + mask) & ~mask

    def _check_align(self, align: int | None, contiguous: bool) -> int:
        if align is None:
            return self.granule
        if isinstance(align, bool) or not isinstance(align, int) or not _is_pow2(align):
            raise ValueError(f"align must be a power of two, got {align!r}")
        if align % self.granule:
            raise ValueError(f"align {align} is not a multiple of the granule {self.granule}")
        if not contiguous and align > self.granule:
            raise ValueError(
                "align applies to contiguous allocations only "
                "(non-contiguous segments are granule-aligned, like drm_buddy blocks)"
            )
        return align

    # ------------------------------------------------------------------ free-space index
    # Everything below counts in granules, not bytes.

    def _add_block(self, length: int, start: int) -> None:
        self._by_size.add(length << self._shift | start)
        self._by_start[start] = length
        self._blocks += 1

    def _remove_block(self, length: int, start: int) -> None:
        self._by_size.remove(length << self._shift | start)
        del self._by_start[start]
        self._blocks -= 1

    def _ceiling(self, key: int) -> int | None:
        """The smallest best-fit key ``>= key``, or None."""
        try:
            found: int = self._by_size.minKey(key)
        except ValueError:  # no key satisfies the condition (or the tree is empty)
            return None
        return found

    def _best_fit(self, n: int, align: int) -> tuple[int, int, int] | None:
        """Find the block for a contiguous ``n``-granule request: ``(length, start, place)``.

        No side effects; ``align`` is in granules too. ``place`` is where the allocation starts
        inside the block (``start`` rounded up to ``align``). Without alignment this is one
        B-tree search: O(log n).

        With ``align > 1`` a block of length ``>= n + align - 1`` always fits (its start is
        granule-aligned, so the alignment waste is at most ``align - 1``); blocks in ``[n, n +
        align - 1)`` fit only if their start happens to be aligned well enough. drm_mm walks
        such candidates one by one (O(n) in the worst case). To stay O(log n) the model
        examines at most :attr:`ALIGN_SCAN_LIMIT` of them in best-fit order and otherwise takes
        the smallest block that surely fits. Only if no block surely fits does it scan the
        remaining candidates, so ``-ENOSPC`` is never reported while some block could hold the
        request.
        """
        shift = self._shift
        low = self._mask
        if align == 1:
            key = self._ceiling(n << shift)
            if key is None:
                return None
            start = key & low
            return key >> shift, start, start

        mask = align - 1
        sure = n + align - 1
        candidates = iter(self._by_size.keys(n << shift, sure << shift, excludemax=True))
        for scanned, key in enumerate(candidates, 1):
            length, start = key >> shift, key & low
            place = (start + mask) & ~mask
            if place + n <= start + length:
                return length, start, place
            if scanned >= self.ALIGN_SCAN_LIMIT:
                break
        key = self._ceiling(sure << shift)
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
        if n > self.size - self._used:
            return False
        if not contiguous:
            return True
        g = self._gshift
        return self._best_fit(n >> g, align_ >> g) is not None

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
        free = self.size - self._used

        if n <= free:
            g = self._gshift
            units = n >> g
            found = self._best_fit(units, align_ >> g)
            if found is not None:
                length, start, place = found
                by_start = self._by_start
                self._by_size.remove(length << self._shift | start)
                if place > start:  # the leading remainder keeps the block's start
                    by_start[start] = place - start
                    self._by_size.add((place - start) << self._shift | start)
                else:
                    del by_start[start]
                    self._blocks -= 1
                tail = start + length - (place + units)
                if tail:
                    self._add_block(tail, place + units)
                self._used += n
                self._live += 1
                if self.on_change is not None:
                    self.on_change()
                return Allocation(self, place << g, n)
            if not contiguous:
                segments = self._gather(units)  # always two or more segments
                self._used += n
                self._live += 1
                if self.on_change is not None:
                    self.on_change()
                return Allocation(self, segments[0][0], n, segments)

        function = "drm_mm_insert_node_in_range" if contiguous else "drm_buddy_alloc_blocks"
        what = "contiguous " if contiguous else ""
        aligned = f" aligned to {align_:#x}" if align_ > self.granule else ""
        raise err(
            Errno.ENOSPC,
            function,
            f"{self.name or 'range allocator'}: no room for {what}{n:#x} bytes{aligned} "
            f"(free {free:#x} in {self.free_blocks} blocks, largest {self.largest_free:#x})",
        )

    def _gather(self, n: int) -> tuple[Segment, ...]:
        """Take ``n`` granules from several blocks; the segments in bytes. The caller checked
        that ``n`` granules are free."""
        shift = self._shift
        low = self._mask
        g = self._gshift
        segments: list[Segment] = []
        remaining = n
        while remaining:
            largest: int = self._by_size.maxKey() >> shift
            if largest >= remaining:
                # The final piece: best fit for what is left, from the bottom of the block.
                key = self._ceiling(remaining << shift)
                assert key is not None
                length, start = key >> shift, key & low
                self._remove_block(length, start)
                if length > remaining:
                    self._add_block(length - remaining, start + remaining)
                segments.append((start << g, remaining << g))
                break
            # The largest block, lowest address among equals, taken whole.
            key = self._ceiling(largest << shift)
            assert key is not None
            start = key & low
            self._remove_block(largest, start)
            segments.append((start << g, largest << g))
            remaining -= largest
        segments.sort()
        return tuple(segments)

    def free(self, allocation: Allocation) -> None:
        """Return every segment of ``allocation``, coalescing with free neighbours on both sides.

        O(log n) per segment; both neighbours are found in the bucket of the address map the
        freed range falls in. Raises ``ValueError`` if the allocation belongs to another
        allocator or was already freed -- a bug in the model's caller, not a kernel errno.
        """
        if not isinstance(allocation, Allocation):
            raise ValueError(f"not an Allocation: {allocation!r}")
        if allocation.allocator is not self:
            raise ValueError(f"{allocation!r} belongs to another allocator, not {self!r}")
        if not allocation._live:
            raise ValueError(f"double free of {allocation!r} in {self!r}")
        allocation._live = False
        self._live -= 1
        self._used -= allocation.size
        g = self._gshift
        if allocation._segments is None:
            self._release(allocation.start >> g, allocation.size >> g)
        else:
            for start, length in allocation._segments:
                self._release(start >> g, length >> g)
        if self.on_change is not None:
            self.on_change()

    def _release(self, start: int, length: int) -> None:
        """Put granules ``[start, start + length)`` back into the free space, coalescing.

        O(log n). The block before is the free block with the largest start below ``start``
        if it ends exactly there; the block after is the one starting at the range's end.
        """
        by_start = self._by_start
        by_size = self._by_size
        shift = self._shift
        end = start + length
        try:
            before: int = by_start.maxKey(start)
        except ValueError:  # no free block below
            before = -1
        if before >= 0:
            before_length: int = by_start[before]
            if before + before_length == start:
                by_size.remove(before_length << shift | before)
                start = before  # by_start[before] is overwritten below
                self._blocks -= 1
        after_length: int | None = by_start.get(end)
        if after_length is not None:
            by_size.remove(after_length << shift | end)
            del by_start[end]
            self._blocks -= 1
            end += after_length
        self._add_block(end - start, start)

    # ------------------------------------------------------------------ checking

    def check_invariants(self) -> None:
        """Verify the allocator's internal consistency; raise ``AssertionError`` if broken.

        Checks that the two free-space indexes describe the same blocks and the block count;
        that free blocks are granule-aligned, non-empty, inside ``[0, size)``, disjoint and
        coalesced (no two adjacent); that their total is ``free_bytes`` (so ``free_bytes + used
        == size``); and that the live count and ``used`` are consistent. O(n log n).

        The allocator does not enumerate its live allocations (see :class:`Allocation`), so
        checking that they are disjoint and add up to ``used`` is the caller's job -- the tests'
        state machine does it with the allocations it holds.
        """

        def fail(message: str) -> None:
            raise AssertionError(f"{self!r}: {message}")

        g = self.granule
        blocks = self.free_ranges()
        units = sorted((key & self._mask, key >> self._shift) for key in self._by_size)
        indexed = [(start << self._gshift, length << self._gshift) for start, length in units]
        if indexed != blocks:
            fail(f"size index {indexed} disagrees with start index {blocks}")
        if self._blocks != len(blocks):
            fail(f"{self._blocks} free blocks counted, {len(blocks)} indexed")
        total_free = 0
        prev_end = -1
        for start, length in blocks:
            if length <= 0 or start % g or length % g:
                fail(f"bad free block {start:#x}+{length:#x}")
            if start < 0 or start + length > self.size:
                fail(f"free block {start:#x}+{length:#x} outside [0, {self.size:#x})")
            if start < prev_end:
                fail(f"free block {start:#x}+{length:#x} overlaps its predecessor")
            if start == prev_end:
                fail(f"free block {start:#x}+{length:#x} not coalesced with its predecessor")
            prev_end = start + length
            total_free += length
        if total_free != self.size - self._used:
            fail(f"free blocks total {total_free:#x}, expected {self.size - self._used:#x}")
        if not 0 <= self._used <= self.size or self._used % g:
            fail(f"used {self._used:#x} outside [0, {self.size:#x}] or not granule-aligned")
        if self._live < 0 or (self._live == 0) != (self._used == 0):
            fail(f"{self._live} live allocations holding {self._used:#x} bytes")
