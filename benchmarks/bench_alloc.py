"""Benchmark: RangeAllocator alloc+free throughput with 1e3 vs 1e5 live buffers.

Acceptance criterion (design.md, "Performance rules"): the device-memory allocator is O(log n)
per operation, so the alloc+free rate with 1e5 live buffers must be at least half the rate
with 1e3 live buffers (ratio >= 0.5).

For each population size N the script

1. builds an allocator sized for the population (1.5 N buffers of random sizes, 1-64 pages,
   plus 10 % slack), allocates 1.5 N buffers and frees a random third of them, so N buffers
   stay live and the free space is shattered into tens of thousands of holes (for N = 1e5);
2. times a loop of alloc+free pairs: allocate a new buffer of random size (one in ten
   non-contiguous, like drm_buddy VRAM BOs), then free a randomly chosen live buffer, so the
   population and the fragmentation stay steady;
3. runs short timed rounds of the two populations back to back (paired rounds) and reports
   the median rate of each and the median of the per-round ratios. Pairing cancels slow drifts
   of the machine's speed; the median ignores bursts (a best-of figure would instead reward
   whichever population happened to catch a momentary speed-up).

Random choices come from a seeded ``random.Random`` and are drawn before timing starts.

Usage: ``python benchmarks/bench_alloc.py [--quick]``. Always exits 0; prints PASS/FAIL.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from pinlab.kernel.errno import KernelError
from pinlab.kernel.range_alloc import Allocation, RangeAllocator

PAGE = 4096
MAX_PAGES = 64
THRESHOLD = 0.5


def populate(live: int, rng: random.Random) -> tuple[RangeAllocator, list[Allocation]]:
    """An allocator holding ``live`` random-size buffers with fragmented free space."""
    total = live + live // 2
    sizes = [rng.randint(1, MAX_PAGES) * PAGE for _ in range(total)]
    capacity = (sum(sizes) * 11 // 10 // PAGE + MAX_PAGES) * PAGE
    allocator = RangeAllocator(capacity, name=f"bench{live}")
    buffers = [allocator.alloc(size) for size in sizes]
    rng.shuffle(buffers)
    for buffer in buffers[live:]:
        allocator.free(buffer)
    del buffers[live:]
    return allocator, buffers


def time_pairs(
    allocator: RangeAllocator, buffers: list[Allocation], pairs: int, rng: random.Random
) -> float:
    """Seconds taken by ``pairs`` alloc+free pairs at a steady population."""
    sizes = [rng.randint(1, MAX_PAGES) * PAGE for _ in range(pairs)]
    contiguous = [rng.random() >= 0.1 for _ in range(pairs)]
    victims = [rng.random() for _ in range(pairs)]
    alloc = allocator.alloc
    free = allocator.free
    start = time.perf_counter()
    for size, contig, victim in zip(sizes, contiguous, victims, strict=True):
        try:
            buffers.append(alloc(size, contiguous=contig))
        except KernelError:
            buffers.append(alloc(size, contiguous=False))
        i = int(victim * len(buffers))
        buffers[i], buffers[-1] = buffers[-1], buffers[i]
        free(buffers.pop())
    return time.perf_counter() - start


def measure(
    populations: list[int], pairs: int, rounds: int, seed: int
) -> tuple[list[float], list[float], list[RangeAllocator]]:
    """Time ``rounds`` paired rounds of ``pairs`` alloc+free pairs for every population.

    Returns, per population: the median rate (pairs per second), the median over rounds of
    (this population's rate / the first population's rate) and the allocator.
    """
    states = []
    for live in populations:
        rng = random.Random(seed)
        allocator, buffers = populate(live, rng)
        time_pairs(allocator, buffers, min(pairs, 2000), rng)  # warm-up
        states.append((allocator, buffers, rng))
    seconds: list[list[float]] = [[] for _ in populations]
    for _ in range(rounds):
        for i, (allocator, buffers, rng) in enumerate(states):
            seconds[i].append(time_pairs(allocator, buffers, pairs, rng))
    for allocator, _, _ in states:
        allocator.check_invariants()
    return (
        [pairs / statistics.median(times) for times in seconds],
        [
            statistics.median(base / other for base, other in zip(seconds[0], times, strict=True))
            for times in seconds
        ],
        [allocator for allocator, _, _ in states],
    )


def describe(allocator: RangeAllocator) -> str:
    return (
        f"{allocator.live} live, {allocator.free_blocks} free blocks, "
        f"{allocator.used / allocator.size:.0%} used, "
        f"fragmentation {allocator.fragmentation:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter run (less precise)")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)
    pairs, rounds = (2_000, 25) if args.quick else (2_000, 60)

    started = time.perf_counter()
    rates, ratios, allocators = measure([1_000, 100_000], pairs, rounds, args.seed)
    small_rate, large_rate = rates
    ratio = ratios[1]
    small, large = allocators

    print(f"RangeAllocator alloc+free benchmark ({rounds} paired rounds of {pairs} pairs)")
    print("  one op = one alloc + one free of a random live buffer")
    print(f"  population @ 1e3: {describe(small)}")
    print(f"  population @ 1e5: {describe(large)}")
    print(f"alloc+free ops/s @ 1e3 live: {small_rate:,.0f}  (median round)")
    print(f"alloc+free ops/s @ 1e5 live: {large_rate:,.0f}  (median round)")
    verdict = "PASS" if ratio >= THRESHOLD else "FAIL"
    print(f"ratio (1e5 / 1e3): {ratio:.2f}  (median of per-round ratios)")
    print(f"{verdict}: ratio {ratio:.2f} {'>=' if ratio >= THRESHOLD else '<'} {THRESHOLD}")
    print(f"total runtime: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
