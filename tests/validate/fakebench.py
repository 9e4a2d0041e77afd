"""A test double for :func:`pinlab.bench.run_bench`: it prints nothing real, but lays its
tables out exactly as ``pinlab.bench`` documents for each tool (perftest, nccl-tests,
gdrcopy, registration, nvbandwidth, p2pBandwidthLatencyTest), so a validation file that
names a column, matrix or row the tool does not print fails here as it would against the
real bench. Every cell's value comes from a function of (argv, column or matrix title, row
key), by default 1.0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pinlab.bench import BenchTable
from pinlab.errors import ConfigError
from pinlab.validate.runner import MATRIX_COLUMN

Key = tuple[Any, ...]
Value = Callable[[tuple[str, ...], str, Key], float | str]

PERFTEST_BW = ("#bytes", "#iterations", "BW peak[{u}]", "BW average[{u}]", "MsgRate[Mpps]")
PERFTEST_LAT = (
    "#bytes",
    "#iterations",
    "t_min[usec]",
    "t_max[usec]",
    "t_typical[usec]",
    "t_avg[usec]",
    "t_stdev[usec]",
    "99% percentile[usec]",
    "99.9% percentile[usec]",
)
NCCL = (
    "size",
    "count",
    "type",
    "redop",
    "root",
    *(
        f"{g} {c}"
        for g in ("out-of-place", "in-place")
        for c in ("time", "algbw", "busbw", "#wrong")
    ),
)
NVBW_TITLES = {
    "host_to_device_memcpy_ce": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
    "device_to_host_memcpy_ce": "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
    "host_to_device_bidirectional_memcpy_ce": "memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)",
    "device_to_device_memcpy_read_ce": "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
    "device_to_device_memcpy_write_ce": "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)",
    "host_to_device_memcpy_sm": "memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)",
    "device_to_host_memcpy_sm": "memcpy SM CPU(row) <- GPU(column) bandwidth (GB/s)",
}
P2P_BANDWIDTH = (
    "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
    "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
    "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
    "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)",
)
P2P_LATENCY = ("P2P=Disabled Latency Matrix (us)", "P2P=Enabled Latency (P2P Writes) Matrix (us)")
PRESET_GPUS = {"dgx-a100": 8, "dgx-h100": 8, "p4d": 8, "p5": 8, "dl1": 8}


def _size(text: str) -> int:
    """nccl-tests' size argument: a number with an optional K/M/G (powers of 1024)."""
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    if text[-1].lower() in scale:
        return int(float(text[:-1]) * scale[text[-1].lower()])
    return int(text)


def _flag(argv: Sequence[str], name: str, default: str | None = None) -> str | None:
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


@dataclass
class FakeBench:
    """Call it like ``run_bench``; ``calls`` records every call's arguments."""

    value: Value = field(default=lambda argv, column, key: 1.0)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __call__(
        self,
        tool: str,
        argv: Sequence[str],
        *,
        platform: str = "cx-pair",
        platform_params: Mapping[str, Any] | None = None,
        nodes: int | None = None,
        sets: Sequence[str] = (),
        seed: int = 0,
    ) -> BenchTable:
        params = dict(platform_params or {})
        self.calls.append(
            {
                "tool": tool,
                "argv": tuple(argv),
                "platform": platform,
                "params": params,
                "nodes": nodes,
                "sets": tuple(sets),
                "seed": seed,
            }
        )
        build = getattr(self, "_" + tool.replace("-", "_"), None)
        if build is None:
            raise ConfigError("bench", "tool", f"expected a tool the double knows, found {tool!r}")
        gpus = int(params.get("gpus", PRESET_GPUS.get(platform, 1)))
        columns, rows = build(tuple(argv), gpus)
        return BenchTable(
            tool=tool,
            test=argv[0],
            columns=columns,
            rows=tuple(rows),
            text="\n".join(" ".join(str(c) for c in row) for row in rows),
            meta={"platform": platform, "seed": seed, "double": True},
        )

    def _v(self, argv: tuple[str, ...], column: str, key: Key) -> float | str:
        return self.value(argv, column, key)

    def _perftest(self, argv: tuple[str, ...], gpus: int) -> tuple[tuple[str, ...], list[Any]]:
        bw = argv[0].endswith("_bw")
        if bw:
            unit = "Gb/sec" if "--report_gbits" in argv else "MiB/sec"
            columns = tuple(c.format(u=unit) for c in PERFTEST_BW)
        else:
            columns = PERFTEST_LAT
        if "-a" in argv:
            sizes = [1 << i for i in range(1, 24)]
        else:
            sizes = [int(_flag(argv, "-s", "65536" if bw else "2") or 0)]
        rows = [(s, 5000, *(self._v(argv, c, (s,)) for c in columns[2:])) for s in sizes]
        return columns, rows

    def _nccl_tests(self, argv: tuple[str, ...], gpus: int) -> tuple[tuple[str, ...], list[Any]]:
        lo = _size(_flag(argv, "-b", "32M") or "32M")
        hi = _size(_flag(argv, "-e", "32M") or "32M")
        factor = int(_flag(argv, "-f", "2") or 2)
        rows, size = [], lo
        while size <= hi:
            rows.append(
                (
                    size,
                    size // 4,
                    "float",
                    "sum",
                    -1,
                    *(self._v(argv, c, (size,)) for c in NCCL[5:]),
                )
            )
            size *= factor
        return NCCL, rows

    def _gdrcopy(self, argv: tuple[str, ...], gpus: int) -> tuple[tuple[str, ...], list[Any]]:
        columns = ("Test", "Size(B)", "Avg.Time(us)")
        rows = [
            (test, 1 << i, self._v(argv, columns[2], (test, 1 << i)))
            for test in ("gdr_copy_to_mapping", "gdr_copy_from_mapping")
            for i in range(25)
        ]
        return columns, rows

    def _registration(self, argv: tuple[str, ...], gpus: int) -> tuple[tuple[str, ...], list[Any]]:
        columns = ("#bytes", "registered[GiB]", "t_reg[ms]")
        registered = [
            float(v.removesuffix("GiB"))
            for v in (_flag(argv, "--registered", "0") or "0").split(",")
        ]
        return columns, [(1, r, self._v(argv, columns[2], (r,))) for r in registered]

    def _matrix(
        self, argv: tuple[str, ...], title: str, rows: list[str], cols: list[str], diagonal_na: bool
    ) -> list[Any]:
        return [
            (
                title,
                r,
                *("N/A" if diagonal_na and r == c else self._v(argv, title, (r, c)) for c in cols),
            )
            for r in rows
        ]

    def _nvbandwidth(self, argv: tuple[str, ...], gpus: int) -> tuple[tuple[str, ...], list[Any]]:
        testcase = _flag(argv, "-t") or ""
        if testcase not in NVBW_TITLES:
            raise ConfigError(
                "bench", "-t", f"expected a testcase the double knows, found {testcase!r}"
            )
        title = NVBW_TITLES[testcase]
        cols = [f"gpu{i}" for i in range(gpus)]
        host = "CPU(row)" in title
        rows = ["cpu0"] if host else cols
        table = self._matrix(argv, title, rows, cols, diagonal_na=not host)
        return ("row", *cols), [row[1:] for row in table]  # one matrix: first column the row

    def _p2p(self, argv: tuple[str, ...], gpus: int) -> tuple[tuple[str, ...], list[Any]]:
        cols = [f"gpu{i}" for i in range(gpus)]
        rows: list[Any] = []
        for title in P2P_BANDWIDTH:
            rows += self._matrix(argv, title, cols, cols, diagonal_na=False)
        for title in P2P_LATENCY:
            for sub in ("GPU", "CPU"):
                rows += self._matrix(argv, f"{title} {sub}", cols, cols, diagonal_na=False)
        return (MATRIX_COLUMN, "row", *cols), rows
