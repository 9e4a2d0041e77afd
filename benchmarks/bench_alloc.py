"""Benchmark: allocation rate and memory per live buffer at 1e3, 1e5 and 1e6 live buffers.

Targets (issue 12, items 5 and 6): at most 1.5 KiB per live exported buffer at 1e6 buffers,
and the rate at 1e6 live at least half the rate at 1e3 (ratio >= 0.5).

Two measurements, each population built in a child process of its own (so one population's
freed memory cannot hide the next one's):

1. **Exported buffers** -- the path a scenario takes: a process on the ``matrix`` platform
   (``pinlab.platform.presets.matrix``, device memory sized for the population) calls
   ``gem_create`` and ``prime_handle_to_fd`` through ``pinlab.uapi`` until N buffers are
   live (handle and fd kept, copy fences signalled as time would), on an amdgpu-like device
   (4 KiB buffers in VRAM) and on habanalabs (2 MiB HBM pages). Then, at N live, rounds of
   create + export + close + GEM-close pairs (the freed buffer chosen at random, drawn
   before timing) give the rate. Bytes per live buffer: tracemalloc at 1e3 (where the
   resident set moves in whole arenas), the growth of the resident set (``/proc/self/statm``)
   at 1e5 and 1e6 -- which counts everything, the allocator's own overhead included.
2. **The device-memory allocator** (``RangeAllocator``, drm_mm best fit / drm_buddy) alone:
   1.5 N random-size allocations (1-64 pages, one in ten non-contiguous), a random third
   freed, so N stay live over shattered free space; then alloc + free pairs at a steady
   population.

The populations of one measurement are built one after the other, then their timed rounds
**interleave** (1e3, 1e5, 1e6, 1e3, ...; one warm-up round each first), so a change in the
load of a shared machine hits every size alike and the ratio stays comparable. A round is
timed in the child's CPU time (``time.process_time``): time the scheduler gives to other
processes is not counted. Rates are the median of ``--rounds`` rounds (random choices drawn
before timing).

Usage: ``python benchmarks/bench_alloc.py [--quick] [--rounds N] [--vs SRC]``; ``--quick`` uses
1e3, 1e4 and 1e5 (CI-time; not the target sizes). ``--vs SRC`` also measures the pinlab whose
``src`` directory is ``SRC`` (another checkout, say the branch point), its rounds interleaved
with this checkout's, so before and after come from one run; PASS/FAIL judge this checkout.
The full run takes a few minutes (1e6 exported buffers take ~1-2 min to create; twice that
with ``--vs``). Always exits 0; PASS/FAIL lines say whether the targets were met.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAGE = 4096
MAX_PAGES = 64
RATIO_TARGET = 0.5
BYTES_TARGET = 1536  # 1.5 KiB
TRACED_BELOW = 10_000  # populations measured with tracemalloc rather than the resident set
BUFFER = {"amdgpu": 4096, "habanalabs": 2 << 20}
PYTHONPATH = os.environ.get("PYTHONPATH", "")
HERE = str(Path(__file__).resolve().parents[1] / "src")
"""This checkout's pinlab: what a child imports unless ``--vs`` names another."""

Round = Callable[[], float]
"""One timed round at the built population: its CPU seconds."""


def _resident() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * PAGE


# -- exported buffers (child process) ---------------------------------------------------------


def exported(exporter: str, live: int, pairs: int, seed: int) -> tuple[dict[str, Any], Round]:
    """Build ``live`` exported buffers; their cost, and a round of ``pairs`` alloc+free pairs
    at that population."""
    from pinlab.kernel.profile import get_profile
    from pinlab.platform import presets
    from pinlab.platform.builder import build

    size = BUFFER[exporter]
    memory = (live + pairs + 64) * size * 5 // 4
    machine = build(presets.matrix(exporter=exporter, memory=memory), get_profile("6.16"))
    proc = machine.system.spawn("bench", memlock=1 << 60)
    devices = machine.ttm_devices()

    def settle() -> None:  # time passes: the copy engine signals every clear and move
        for bdev in devices:
            bdev.run_copies()
        proc.take_waits()
        machine.kernel.take_waits()

    handles = array("q", bytes(8 * live))  # allocated before measuring: 16 bytes per buffer
    fds = array("q", bytes(8 * live))
    create, export = proc.gem_create, proc.prime_handle_to_fd
    traced = live < TRACED_BELOW
    gc.collect()
    if traced:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if traced else _resident()
    start = time.perf_counter()
    for i in range(live):
        handle = create("gpu0", size)
        handles[i], fds[i] = handle, export(handle)
        if i % 1024 == 1023:
            settle()
    settle()
    build_seconds = time.perf_counter() - start
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] if traced else _resident()
    if traced:
        tracemalloc.stop()
    rng = random.Random(seed)

    def one_round() -> float:
        victims = [rng.randrange(live) for _ in range(pairs)]
        start = time.process_time()
        for k, i in enumerate(victims):
            handle = create("gpu0", size)
            fd = export(handle)
            proc.close(fds[i])
            proc.gem_close(handles[i])
            handles[i], fds[i] = handle, fd
            if k % 256 == 255:
                settle()
        settle()
        seconds = time.process_time() - start
        live_bufs = sum(1 for _ in machine.kernel.dma_bufs())
        assert live_bufs == live, f"{live_bufs} dma-bufs live, expected {live}"
        return seconds

    built = {
        "bytes": (after - before) / live,
        "method": "tracemalloc" if traced else "resident set",
        "build_rate": live / build_seconds,
    }
    return built, one_round


# -- the range allocator (child process) -------------------------------------------------------


def allocator(live: int, pairs: int, seed: int) -> tuple[dict[str, Any], Round]:
    """A RangeAllocator holding ``live`` allocations over shattered free space, and a round of
    ``pairs`` steady alloc+free pairs."""
    from pinlab.kernel.errno import KernelError
    from pinlab.kernel.range_alloc import RangeAllocator

    rng = random.Random(seed)
    total = live + live // 2
    sizes = [rng.randint(1, MAX_PAGES) * PAGE for _ in range(total)]
    capacity = (sum(sizes) * 11 // 10 // PAGE + MAX_PAGES) * PAGE
    ra = RangeAllocator(capacity, name=f"bench{live}")
    buffers = [ra.alloc(size) for size in sizes]
    rng.shuffle(buffers)
    for buffer in buffers[live:]:
        ra.free(buffer)
    del buffers[live:]

    def one_round() -> float:
        draws = [
            (rng.randint(1, MAX_PAGES) * PAGE, rng.random() >= 0.1, rng.random())
            for _ in range(pairs)
        ]
        start = time.process_time()
        for size, contiguous, victim in draws:
            try:
                buffers.append(ra.alloc(size, contiguous=contiguous))
            except KernelError:
                buffers.append(ra.alloc(size, contiguous=False))
            i = int(victim * len(buffers))
            buffers[i], buffers[-1] = buffers[-1], buffers[i]
            ra.free(buffers.pop())
        return time.process_time() - start

    def checked_round() -> float:
        seconds = one_round()
        built["free_blocks"], built["fragmentation"] = ra.free_blocks, ra.fragmentation
        return seconds

    built: dict[str, Any] = {"free_blocks": ra.free_blocks, "fragmentation": ra.fragmentation}
    return built, checked_round


def serve(kind: str, live: int, pairs: int, seed: int) -> None:
    """The child: build, print what the build cost as one JSON line, then run a round for
    every ``round`` line on stdin (printing its seconds) until ``end`` (printing the final
    state)."""
    if kind == "allocator":
        built, one_round = allocator(live, pairs, seed)
    else:
        built, one_round = exported(kind, live, pairs, seed)
    print(json.dumps(built), flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        print(json.dumps({"seconds": one_round()}), flush=True)
    print(json.dumps(built), flush=True)


# -- the parent ----------------------------------------------------------------------------------


class Child:
    """One population in a child process of its own."""

    def __init__(self, kind: str, live: int, pairs: int, seed: int, src: str | None) -> None:
        cmd = [sys.executable, __file__, "--child", kind, str(live), str(pairs), str(seed)]
        path = os.pathsep.join(filter(None, [src or HERE, PYTHONPATH]))
        env = os.environ | {"PYTHONPATH": path}  # the pinlab measured comes first
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        self.built = self._read()
        self.seconds: list[float] = []

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"benchmark child {self.proc.args} died (exit {self.proc.wait()})")
        result: dict[str, Any] = json.loads(line)
        return result

    def round(self) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write("round\n")
        self.proc.stdin.flush()
        seconds: float = self._read()["seconds"]
        return seconds

    def end(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("end\n")
        self.proc.stdin.close()
        final = self._read()
        self.proc.wait()
        return final


def interleaved(
    kind: str, sizes: list[int], pairs: int, rounds: int, seed: int, srcs: list[str | None]
) -> list[list[dict[str, Any]]]:
    """Build every population (for each pinlab of ``srcs``, None = this checkout), then time
    their rounds in turn; per pinlab and size the final state plus ``rate`` (pairs per CPU
    second, median of the rounds after one warm-up round)."""
    children = [[Child(kind, n, pairs, seed, src) for n in sizes] for src in srcs]
    for r in range(rounds + 1):
        for child in (child for row in children for child in row):
            seconds = child.round()
            if r:
                child.seconds.append(seconds)
    table = []
    for row_children in children:
        rows = []
        for child in row_children:
            row = child.built | child.end()
            row["rate"] = pairs / statistics.median(child.seconds)
            rows.append(row)
        table.append(rows)
    return table


def _size(n: int) -> str:
    return f"1e{len(str(n)) - 1}"


def _exported_row(row: dict[str, Any]) -> str:
    return (
        f"{row['bytes']:7.0f} B/buffer ({row['method']}), created at {row['build_rate']:8,.0f}/s, "
        f"alloc+free {row['rate']:8,.0f} pairs/s"
    )


def _allocator_row(row: dict[str, Any]) -> str:
    return (
        f"{row['rate']:9,.0f} pairs/s, {row['free_blocks']} free blocks, "
        f"fragmentation {row['fragmentation']:.3f}"
    )


def _print_table(
    labels: list[str],
    sizes: list[int],
    table: list[list[dict[str, Any]]],
    describe: Callable[[dict[str, Any]], str],
) -> None:
    """Per measured pinlab: a line per size and the largest size's rate over the smallest's."""
    for label, rows in zip(labels, table, strict=True):
        print(f"  [{label}]")
        for n, row in zip(sizes, rows, strict=True):
            print(f"  {_size(n)} live: {describe(row)}")
        print(f"  ratio ({_size(sizes[-1])} / 1e3): {rows[-1]['rate'] / rows[0]['rate']:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e3, 1e4, 1e5 (CI time)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per size")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--vs", metavar="SRC", help="also measure the pinlab in SRC (a src dir)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, live, pairs, seed = args.child
        serve(kind, int(live), int(pairs), int(seed))
        return 0

    sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]
    pairs, rounds = (1_000, 3) if args.quick else (2_000, 5)
    rounds = args.rounds if args.rounds is not None else rounds
    started = time.perf_counter()
    print(f"live buffers: {', '.join(_size(n) for n in sizes)}; rate = median of {rounds} rounds")
    print(f"of {pairs} alloc+free pairs at that population, in CPU time, sizes interleaved")
    srcs: list[str | None] = [None] if args.vs is None else [None, args.vs]
    labels = ["this checkout"] if args.vs is None else ["this checkout", f"--vs {args.vs}"]
    verdicts = []
    for exporter in BUFFER:
        print(f"\nexported {exporter} buffers (gem_create + prime_handle_to_fd through the uapi)")
        table = interleaved(exporter, sizes, pairs, rounds, args.seed, srcs)
        _print_table(labels, sizes, table, _exported_row)
        ratio = table[0][-1]["rate"] / table[0][0]["rate"]
        big = table[0][-1]["bytes"]
        verdicts.append((f"{exporter} rate ratio {ratio:.2f}", ratio >= RATIO_TARGET, ">= 0.5"))
        verdicts.append((f"{exporter} {big:.0f} B/buffer", big <= BYTES_TARGET, "<= 1536"))
    print("\nRangeAllocator alone (steady alloc+free over shattered free space)")
    table = interleaved("allocator", sizes, pairs, rounds, args.seed, srcs)
    _print_table(labels, sizes, table, _allocator_row)
    ratio = table[0][-1]["rate"] / table[0][0]["rate"]
    verdicts.append((f"RangeAllocator rate ratio {ratio:.2f}", ratio >= RATIO_TARGET, ">= 0.5"))
    print()
    judged = "" if not args.quick else " (quick run: not the target sizes)"
    for what, ok, target in verdicts:
        print(f"{'PASS' if ok else 'FAIL'}: {what} (target {target}){judged}")
    print(f"total runtime: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
