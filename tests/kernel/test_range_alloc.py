"""Tests for the device-memory range allocator behind TTM's resource managers.

The allocator's ``-ENOSPC`` is what a TTM place reports when it has no room (K-62); design.md
("Performance rules") asks for real fragmentation, which the checkerboard and state-machine
tests exercise. Speed is shown in ``benchmarks/bench_alloc.py``, not asserted here.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.range_alloc import PAGE_SIZE, Allocation, RangeAllocator

P = PAGE_SIZE
Segment = tuple[int, int]


def snapshot(a: RangeAllocator) -> tuple[object, ...]:
    """Everything observable about an allocator's state."""
    return (
        a.free_ranges(),
        a.used,
        a.free_bytes,
        a.live,
        a.free_blocks,
        a.largest_free,
        a.fragmentation,
    )


def carve(pages: int, free_pages: list[int]) -> tuple[RangeAllocator, list[Allocation]]:
    """An allocator of ``pages`` pages where exactly the listed pages are free."""
    a = RangeAllocator(pages * P)
    singles = [a.alloc(P) for _ in range(pages)]
    assert [s.start for s in singles] == [i * P for i in range(pages)]
    for i in free_pages:
        a.free(singles[i])
    return a, [s for i, s in enumerate(singles) if i not in set(free_pages)]


# --------------------------------------------------------------------------- construction


@pytest.mark.parametrize(
    ("size", "granule", "message"),
    [
        (0, P, "size must be a positive int"),
        (-P, P, "size must be a positive int"),
        (P + 1, P, "not a multiple of the granule"),
        (3 * P, 3000, "granule must be a power of two"),
        (P, 0, "granule must be a positive int"),
        (P, -4096, "granule must be a positive int"),
        (True, 1, "size must be a positive int"),
    ],
)
def test_constructor_validates_arguments(size: int, granule: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RangeAllocator(size, granule=granule)


def test_fresh_allocator_statistics() -> None:
    a = RangeAllocator(64 * P, name="vram0")
    assert (a.size, a.used, a.free_bytes, a.largest_free) == (64 * P, 0, 64 * P, 64 * P)
    assert (a.free_blocks, a.live, a.fragmentation, a.granule) == (1, 0, 0.0, P)
    assert a.name == "vram0"
    assert a.free_ranges() == [(0, 64 * P)]
    assert "vram0" in repr(a)
    a.check_invariants()


# --------------------------------------------------------------------------- placement


def test_first_allocations_are_packed_from_address_zero_and_rounded_to_the_granule() -> None:
    a = RangeAllocator(16 * P)
    x = a.alloc(1)
    y = a.alloc(3 * P)
    z = a.alloc(P + 1)
    assert (x.segments, y.segments, z.segments) == (((0, P),), ((P, 3 * P),), ((4 * P, 2 * P),))
    assert (x.size, y.size, z.size) == (P, 3 * P, 2 * P)
    assert a.used == 6 * P
    assert a.free_ranges() == [(6 * P, 10 * P)]
    a.check_invariants()


def test_best_fit_takes_the_smallest_block_that_fits_lowest_address_first() -> None:
    # Free blocks (pages): [1,3) len 2, 4 len 1, [6,9) len 3, 10 len 1, [12,16) len 4.
    a, _ = carve(16, [1, 2, 4, 6, 7, 8, 10, 12, 13, 14, 15])
    assert a.free_ranges() == [(P, 2 * P), (4 * P, P), (6 * P, 3 * P), (10 * P, P), (12 * P, 4 * P)]
    assert a.alloc(P).start == 4 * P  # two 1-page blocks: the lower one
    assert a.alloc(P).start == 10 * P  # then the other 1-page block
    assert a.alloc(P).start == P  # then the bottom of the 2-page block
    assert a.alloc(3 * P).start == 6 * P  # exact fit beats the 4-page block
    assert a.alloc(2 * P).start == 12 * P  # only the 4-page block is left that fits 2
    assert a.free_ranges() == [(2 * P, P), (14 * P, 2 * P)]
    a.check_invariants()


def test_allocation_properties() -> None:
    a = RangeAllocator(8 * P)
    x = a.alloc(2 * P)
    assert (x.start, x.end, x.size, x.contiguous, x.live) == (0, 2 * P, 2 * P, True, True)
    assert x.allocator is a
    assert "0x2000 bytes" in repr(x)
    a.free(x)
    assert not x.live
    assert x.segments == ((0, 2 * P),)  # the record survives the free
    assert "freed" in repr(x)


# --------------------------------------------------------------------------- ENOSPC


def test_enospc_contiguous_leaves_the_allocator_unchanged() -> None:
    """K-62: a place with no room reports -ENOSPC; the failed attempt changes nothing."""
    a, _ = carve(8, [1, 3, 4, 6])  # free: 1 page, 2 pages, 1 page
    before = snapshot(a)
    assert not a.can_alloc(3 * P)
    with pytest.raises(KernelError) as info:
        a.alloc(3 * P)
    assert info.value.errno is Errno.ENOSPC
    assert info.value.value == -28
    assert info.value.function == "drm_mm_insert_node_in_range"
    assert str(info.value).startswith("-ENOSPC from drm_mm_insert_node_in_range: ")
    assert snapshot(a) == before
    a.check_invariants()


def test_enospc_non_contiguous_when_total_free_space_is_short() -> None:
    """K-62: drm_buddy fails with -ENOSPC only when the free bytes do not add up."""
    a, _ = carve(8, [1, 3, 4, 6])  # 4 free pages in three blocks
    before = snapshot(a)
    assert not a.can_alloc(5 * P, contiguous=False)
    with pytest.raises(KernelError) as info:
        a.alloc(5 * P, contiguous=False)
    assert info.value.errno is Errno.ENOSPC
    assert info.value.function == "drm_buddy_alloc_blocks"
    assert snapshot(a) == before
    assert a.can_alloc(4 * P, contiguous=False)


def test_enospc_larger_than_the_whole_allocator_and_when_full() -> None:
    a = RangeAllocator(4 * P, name="gtt")
    with pytest.raises(KernelError, match="gtt: no room"):
        a.alloc(5 * P)
    whole = a.alloc(4 * P)
    assert (a.free_bytes, a.largest_free, a.free_blocks, a.fragmentation) == (0, 0, 0, 0.0)
    with pytest.raises(KernelError):
        a.alloc(1)
    with pytest.raises(KernelError):
        a.alloc(1, contiguous=False)
    a.free(whole)
    assert a.free_ranges() == [(0, 4 * P)]


# --------------------------------------------------------------------------- coalescing


def test_free_coalesces_with_both_neighbours() -> None:
    a = RangeAllocator(4 * P)
    x, y, z, w = (a.alloc(P) for _ in range(4))
    a.free(x)
    a.free(z)
    assert a.free_ranges() == [(0, P), (2 * P, P)]
    a.free(y)  # joins the block before and the block after
    assert a.free_ranges() == [(0, 3 * P)]
    assert a.free_blocks == 1
    a.free(w)  # joins the block before only
    assert a.free_ranges() == [(0, 4 * P)]
    a.check_invariants()


def test_free_coalesces_with_the_following_block_only() -> None:
    a = RangeAllocator(4 * P)
    x, y = a.alloc(P), a.alloc(P)
    a.free(y)  # merges with the tail [2P, 4P)
    assert a.free_ranges() == [(P, 3 * P)]
    a.free(x)
    assert a.free_ranges() == [(0, 4 * P)]
    assert (a.used, a.live) == (0, 0)


# --------------------------------------------------------------------------- alignment


def test_alignment_leaves_the_leading_remainder_free() -> None:
    a = RangeAllocator(16 * P)
    a.alloc(P)
    x = a.alloc(2 * P, align=4 * P)
    assert x.segments == ((4 * P, 2 * P),)
    assert a.free_ranges() == [(P, 3 * P), (6 * P, 10 * P)]
    assert a.used == 3 * P  # alignment waste is free, not used
    y = a.alloc(3 * P)  # the leading remainder is a normal free block: exact fit
    assert y.start == P
    a.check_invariants()


def test_aligned_best_fit_skips_blocks_whose_start_is_misaligned() -> None:
    # Free: page 1 (len 1, misaligned for 4-page alignment), page 8 (len 1, aligned), [10, 16).
    a, _ = carve(16, [1, 8, 10, 11, 12, 13, 14, 15])
    x = a.alloc(P, align=4 * P)
    assert x.start == 8 * P  # the smallest block that fits *after* alignment
    y = a.alloc(P, align=4 * P)
    assert y.start == 12 * P  # inside [10, 16): leading [10, 12) stays free
    assert a.free_ranges() == [(P, P), (10 * P, 2 * P), (13 * P, 3 * P)]
    a.check_invariants()


def _scan_limit_layout(with_large_block: bool) -> RangeAllocator:
    """33 misaligned 1-page holes, an aligned 1-page hole after them, optionally a big block."""
    odd = list(range(1, 67, 2))  # 33 one-page blocks at odd pages: useless for 4-page alignment
    free = [*odd, 68]
    if with_large_block:
        free += list(range(72, 80))
    a, _ = carve(80, free)
    assert len(odd) > RangeAllocator.ALIGN_SCAN_LIMIT
    return a


def test_aligned_scan_limit_falls_back_to_a_block_that_surely_fits() -> None:
    a = _scan_limit_layout(with_large_block=True)
    x = a.alloc(P, align=4 * P)
    # Exact best fit would be page 68, but it lies beyond ALIGN_SCAN_LIMIT misaligned
    # candidates, so the model takes the smallest block that fits whatever its start.
    assert x.start == 72 * P
    a.check_invariants()


def test_aligned_scan_limit_is_exact_when_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    a = _scan_limit_layout(with_large_block=True)
    monkeypatch.setattr(RangeAllocator, "ALIGN_SCAN_LIMIT", 1000)
    assert a.alloc(P, align=4 * P).start == 68 * P


def test_aligned_search_never_reports_a_spurious_enospc() -> None:
    a = _scan_limit_layout(with_large_block=False)
    assert a.can_alloc(P, align=4 * P)
    assert a.alloc(P, align=4 * P).start == 68 * P
    assert not a.can_alloc(P, align=4 * P)
    before = snapshot(a)
    with pytest.raises(KernelError, match=r"aligned to 0x4000"):
        a.alloc(P, align=4 * P)
    assert snapshot(a) == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"align": 3 * P}, "power of two"),
        ({"align": 0}, "power of two"),
        ({"align": 512}, "not a multiple of the granule"),
        ({"align": 2 * P, "contiguous": False}, "contiguous allocations only"),
    ],
)
def test_bad_alignment_is_a_model_bug(kwargs: dict[str, object], message: str) -> None:
    a = RangeAllocator(16 * P)
    with pytest.raises(ValueError, match=message):
        a.alloc(P, **kwargs)  # type: ignore[arg-type]
    a.alloc(P, align=P, contiguous=False)  # granule alignment is always fine


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_bad_size_is_a_model_bug(size: object) -> None:
    a = RangeAllocator(16 * P)
    with pytest.raises(ValueError, match="allocation size"):
        a.alloc(size)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="allocation size"):
        a.can_alloc(size)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- multi-block


def test_non_contiguous_uses_one_block_when_one_fits() -> None:
    a, _ = carve(8, [1, 2, 4, 5, 6])
    x = a.alloc(2 * P, contiguous=False)
    assert x.contiguous
    assert x.segments == ((P, 2 * P),)  # best fit, as for a contiguous request


def test_non_contiguous_gathers_largest_blocks_first_and_best_fits_the_tail() -> None:
    # Free blocks: [0,1) 1, [2,5) 3, [6,8) 2, [9,12) 3, 13 1, [15,16) 1.
    a, _ = carve(16, [0, 2, 3, 4, 6, 7, 9, 10, 11, 13, 15])
    assert a.largest_free == 3 * P
    x = a.alloc(7 * P, contiguous=False)
    # Both 3-page blocks whole (lower address first), then 1 page best fit: the 1-page block
    # at the lowest address, rather than splitting the 2-page block.
    assert x.segments == ((0, P), (2 * P, 3 * P), (9 * P, 3 * P))
    assert (x.size, x.start, x.end, x.contiguous) == (7 * P, 0, 12 * P, False)
    assert a.free_ranges() == [(6 * P, 2 * P), (13 * P, P), (15 * P, P)]
    y = a.alloc(3 * P, contiguous=False)
    assert y.segments == ((6 * P, 2 * P), (13 * P, P))
    a.check_invariants()
    a.free(x)
    a.free(y)
    a.check_invariants()
    assert a.used == 5 * P


def test_non_contiguous_tail_splits_the_bottom_of_its_block() -> None:
    a, _ = carve(12, [0, 1, 2, 3, 5, 6, 7])  # blocks of 4 and 3 pages
    x = a.alloc(6 * P, contiguous=False)
    assert x.segments == ((0, 4 * P), (5 * P, 2 * P))  # 4 whole, then 2 off the 3-page block
    assert a.free_ranges() == [(7 * P, P)]
    a.check_invariants()


# --------------------------------------------------------------------------- fragmentation


def test_checkerboard_fragmentation() -> None:
    """Every other page pinned: half the memory is free, yet no 2-page BO fits contiguously."""
    a, pinned = carve(16, list(range(0, 16, 2)))
    assert (a.free_bytes, a.free_blocks, a.largest_free) == (8 * P, 8, P)
    assert a.fragmentation == pytest.approx(1 - 1 / 8)
    assert not a.can_alloc(2 * P)
    assert a.can_alloc(2 * P, contiguous=False)
    with pytest.raises(KernelError):
        a.alloc(2 * P)
    x = a.alloc(8 * P, contiguous=False)
    assert len(x.segments) == 8
    assert a.fragmentation == 0.0  # nothing free
    a.free(x)
    for p in pinned:
        a.free(p)
    assert (a.fragmentation, a.free_blocks, a.largest_free) == (0.0, 1, 16 * P)


def test_fragmentation_with_two_unequal_blocks() -> None:
    a, _ = carve(8, [0, 3, 4, 5])
    assert a.fragmentation == pytest.approx(1 - 3 / 4)


# --------------------------------------------------------------------------- misuse


def test_double_free_is_a_value_error_and_changes_nothing() -> None:
    a = RangeAllocator(8 * P)
    x = a.alloc(P)
    a.alloc(P)
    a.free(x)
    before = snapshot(a)
    with pytest.raises(ValueError, match="double free"):
        a.free(x)
    assert snapshot(a) == before


def test_freeing_another_allocators_allocation_is_a_value_error() -> None:
    a, b = RangeAllocator(8 * P, name="a"), RangeAllocator(8 * P, name="b")
    x = b.alloc(P)
    with pytest.raises(ValueError, match="another allocator"):
        a.free(x)
    with pytest.raises(ValueError, match="not an Allocation"):
        a.free("nope")  # type: ignore[arg-type]
    assert (a.live, b.live) == (0, 1)


def test_check_invariants_detects_corruption() -> None:
    a = RangeAllocator(8 * P)
    a.alloc(P)
    a._used += P  # lose track of a page
    with pytest.raises(AssertionError, match="free blocks total"):
        a.check_invariants()
    b = RangeAllocator(8 * P)
    x = b.alloc(P)
    b._by_start[x.start // P] = 1  # a free block the size index does not know about
    with pytest.raises(AssertionError, match="disagrees"):
        b.check_invariants()


class WideKeys(RangeAllocator):
    """An allocator on the object-key trees, whatever its size."""

    __slots__ = ()
    NATIVE_KEY_BITS = 0


def test_object_key_trees_give_the_same_placements() -> None:
    """Allocators too large for 64-bit keys use object-key trees: same placements."""

    def run(cls: type[RangeAllocator]) -> list[tuple[Segment, ...]]:
        a = cls(16 * P)
        singles = [a.alloc(P) for _ in range(16)]
        for i in (0, 2, 3, 4, 6, 7, 9, 10, 11, 13, 15):
            a.free(singles[i])
        out = [a.alloc(P).segments, a.alloc(2 * P, align=2 * P).segments]
        out.append(a.alloc(5 * P, contiguous=False).segments)
        a.check_invariants()
        return out

    assert run(WideKeys) == run(RangeAllocator)


def test_an_allocator_of_2_to_the_40_granules_works() -> None:
    """1 TiB in bytes: keys of 82 bits, beyond the native trees."""
    a = RangeAllocator(1 << 40, granule=1, name="wide")
    x = a.alloc(3)
    y = a.alloc((1 << 40) - 10)
    assert (x.start, y.start, a.free_blocks, a.largest_free) == (0, 3, 1, 7)
    a.free(x)
    assert (a.free_blocks, a.largest_free) == (2, 7)
    a.check_invariants()
    a.free(y)
    assert a.free_ranges() == [(0, 1 << 40)]
    a.check_invariants()


# --------------------------------------------------------------------------- state machine


def reference_placement(
    free: list[Segment], n: int, contiguous: bool, align: int
) -> tuple[Segment, ...] | None:
    """Brute-force model of the documented placement rules (exact best fit)."""
    fits = []
    for start, length in free:
        place = -(-start // align) * align
        if place + n <= start + length:
            fits.append((length, start, place))
    if fits:
        _, _, place = min(fits)
        return ((place, n),)
    if contiguous or n > sum(length for _, length in free):
        return None
    blocks = sorted((length, start) for start, length in free)
    segments: list[Segment] = []
    remaining = n
    while remaining:
        if blocks[-1][0] >= remaining:
            length, start = min(b for b in blocks if b[0] >= remaining)
            segments.append((start, remaining))
            break
        largest = blocks[-1][0]
        length, start = min(b for b in blocks if b[0] == largest)
        blocks.remove((length, start))
        segments.append((start, length))
        remaining -= length
    return tuple(sorted(segments))


class AllocatorMachine(RuleBasedStateMachine):
    """Random alloc/free sequences; after every step nothing overlaps and no byte is lost."""

    def __init__(self) -> None:
        super().__init__()
        self.a = RangeAllocator(P)
        self.live: list[Allocation] = []
        self.freed: list[Allocation] = []

    @initialize(
        pages=st.integers(1, 64), granule=st.sampled_from([512, P]), wide_keys=st.booleans()
    )
    def make(self, pages: int, granule: int, wide_keys: bool) -> None:
        cls = WideKeys if wide_keys else RangeAllocator
        self.a = cls(pages * granule, granule=granule, name="machine")

    @rule(
        units=st.one_of(st.integers(1, 3), st.integers(1, 24)),  # small ones fragment
        slack=st.integers(0, 511),
        contiguous=st.booleans(),
        align_shift=st.one_of(st.none(), st.integers(0, 4)),
    )
    def alloc(self, units: int, slack: int, contiguous: bool, align_shift: int | None) -> None:
        g = self.a.granule
        size = max(1, units * g - slack)  # exercises rounding up to the granule
        align = None if align_shift is None or not contiguous else g << align_shift
        self.check_alloc(size, contiguous, align)

    @precondition(lambda self: self.a.free_blocks > 1)
    @rule(fraction=st.floats(0, 1), contiguous=st.booleans())
    def alloc_beyond_largest_block(self, fraction: float, contiguous: bool) -> None:
        """Fragmented: ask for more than the largest block, at most all the free bytes."""
        g = self.a.granule
        low, high = self.a.largest_free // g + 1, self.a.free_bytes // g
        self.check_alloc(g * (low + round(fraction * (high - low))), contiguous, None)

    def check_alloc(self, size: int, contiguous: bool, align: int | None) -> None:
        g = self.a.granule
        n = -(-size // g) * g
        free_before = self.a.free_ranges()
        before = snapshot(self.a)
        predicted = self.a.can_alloc(size, contiguous, align=align)
        expected = reference_placement(free_before, n, contiguous, align or g)
        try:
            x = self.a.alloc(size, contiguous=contiguous, align=align)
        except KernelError as e:
            event("alloc: -ENOSPC" + (" (contiguous)" if contiguous else " (multi-block)"))
            assert e.errno is Errno.ENOSPC
            assert not predicted
            assert expected is None
            assert snapshot(self.a) == before
            return
        assert predicted
        assert expected is not None
        event(f"alloc: {len(x.segments) if len(x.segments) < 3 else 'many'} segment(s)")
        if align and align > g:
            event(
                "alloc: aligned"
                + (" with leading waste" if x.start not in dict(free_before) else "")
            )
        assert x.size == n
        assert sum(length for _, length in x.segments) == n
        assert x.segments == tuple(sorted(x.segments))
        for start, length in x.segments:
            assert start % g == 0 and length % g == 0 and length > 0
            assert any(s <= start and start + length <= s + ln for s, ln in free_before)
        if contiguous:
            assert x.contiguous
            assert x.start % (align or g) == 0
        window = [
            ln for _, ln in free_before if n <= ln < n + (align or g) - g
        ]  # candidates that may not fit after alignment
        if len(window) < RangeAllocator.ALIGN_SCAN_LIMIT:
            assert x.segments == expected
        self.live.append(x)

    @precondition(lambda self: self.live)
    @rule(which=st.integers(0, 10_000))
    def free(self, which: int) -> None:
        x = self.live.pop(which % len(self.live))
        self.a.free(x)
        assert not x.live
        self.freed.append(x)

    @precondition(lambda self: self.freed)
    @rule(which=st.integers(0, 10_000))
    def double_free(self, which: int) -> None:
        before = snapshot(self.a)
        with pytest.raises(ValueError, match="double free"):
            self.a.free(self.freed[which % len(self.freed)])
        assert snapshot(self.a) == before

    @invariant()
    def consistent(self) -> None:
        a = self.a
        a.check_invariants()
        # No byte lost: live allocations account for every used byte.
        assert a.used == sum(x.size for x in self.live)
        assert a.live == len(self.live)
        assert a.used + a.free_bytes == a.size
        # No overlap: live segments and free blocks tile [0, size) exactly.
        cursor = 0
        for start, length in sorted(
            [seg for x in self.live for seg in x.segments] + a.free_ranges()
        ):
            assert start == cursor, "overlap or gap"
            cursor = start + length
        assert cursor == a.size
        free = a.free_ranges()
        assert a.free_blocks == len(free)
        assert a.largest_free == max((ln for _, ln in free), default=0)
        expected = 0.0 if not free else 1 - a.largest_free / a.free_bytes
        assert a.fragmentation == pytest.approx(expected)


AllocatorMachine.TestCase.settings = settings(
    max_examples=75,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAllocatorMachine = AllocatorMachine.TestCase
