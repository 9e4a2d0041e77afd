"""``gdrcopy``: gdrcopy's ``copylat`` as a workload -- the CPU's stores into and loads from a
GPU buffer mapped through its BAR (``gdr_pin_buffer`` + ``gdr_map``, write-combining), by size
(``docs/cost-model/gpu.md`` §G4; the tool: ``tools-and-mechanisms.md`` A5).

For every size from 1 byte to ``size`` (doubling): ``write_iters`` calls of
``gdr_copy_to_mapping`` and ``read_iters`` of ``gdr_copy_from_mapping``, split into
``buckets`` groups whose mean times give the median and the minimum (gdrcopy 2.6), or one mean
over all (``legacy``: copylat before gdrcopy 2.6). A store is posted (the CPU does not wait for
it), so its time is :func:`~pinlab.platform.gpu_model.bar_store_time` at the rate the PCIe path
gives 64-byte writes; a load waits for its line (:func:`~pinlab.platform.gpu_model.
bar_load_time`). ``readback`` reproduces the January 2020 copylat, whose write loop read 4
bytes back after every copy (so each write waited one load). ``cumemcpy`` adds copylat's
``-c``: ``cuMemcpy`` both ways (``stage.copy_launch`` + the bytes at the copy engine's rate).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pinlab.platform.gpu_model import bar_load_time, bar_store_time
from pinlab.sim.engine import Ctx
from pinlab.sim.metrics import TenantResult, metric
from pinlab.sim.workloads.base import Gen, ToolTable, WorkloadParams, idle, param
from pinlab.sim.workloads.gpu_copy import CopyFlow, copy_flow, cpu_bar_write_rate, jittered
from pinlab.units import Size

__all__ = ["CopylatRow", "GdrcopyParams", "GdrcopyResult", "gdrcopy"]

MAX_BUCKETS = 100
"""copylat's ``max_num_buckets`` (gdrcopy 2.6)."""


class GdrcopyParams(WorkloadParams):
    """``gdrcopy``: copylat on one GPU."""

    workload: Literal["gdrcopy"] = "gdrcopy"

    device: str | None = param(None, "the GPU (default: the node's first device)")
    size: Size = param("16MiB", "buffer size; copies go from 1 B to it (copylat -s)", unit="B")
    write_iters: int = param(10000, "gdr_copy_to_mapping calls per size (-w)", ge=1)
    read_iters: int = param(100, "gdr_copy_from_mapping calls per size (-r)", ge=1)
    legacy: bool = param(False, "copylat before gdrcopy 2.6: one mean per size, no buckets")
    readback: bool = param(False, "read 4 bytes back after every write (copylat of early 2020)")
    cumemcpy: bool = param(False, "also time cuMemcpy host-to-device and device-to-host (-c)")


@dataclass(frozen=True, slots=True)
class CopylatRow:
    """One printed line: test, size in bytes, and the median, minimum and mean of the buckets'
    mean times in seconds (with ``legacy``: one bucket, all three the mean)."""

    test: str
    size: int
    median: float
    minimum: float
    mean: float


@dataclass(slots=True)
class GdrcopyResult(TenantResult, ToolTable[CopylatRow]):
    """What ``gdrcopy`` measured: copylat's rows and its headline numbers, on ``device``."""

    store_floor: float | None = metric("s", "gdr_copy_to_mapping time of 1 byte")
    load_floor: float | None = metric("s", "gdr_copy_from_mapping time of 1 byte")
    store_bandwidth: float | None = metric("B/s", "gdr_copy_to_mapping rate at the largest size")
    load_bandwidth: float | None = metric("B/s", "gdr_copy_from_mapping rate at the largest size")
    device: str = ""


def _sizes(limit: int) -> list[int]:
    out = [1]
    while out[-1] * 2 <= limit:
        out.append(out[-1] * 2)
    return out


def gdrcopy(ctx: Ctx, p: GdrcopyParams, r: GdrcopyResult) -> Gen:
    """copylat on ``p.device`` (module docstring)."""
    machine = ctx.machine
    dev = p.device if p.device is not None else machine.spec.devices[0].name
    machine.spec.device(dev)
    r.device = dev
    cost = ctx.cost
    host = machine.host_of(dev)
    link_write = cpu_bar_write_rate(machine, dev)
    r.data_start = ctx.now
    rows: list[CopylatRow] = []
    tests: list[tuple[str, int, Callable[[int], float]]] = []
    load = cost.cpu.bar_load_latency

    def store(n: int) -> float:
        t = bar_store_time(cost, n, link_write)
        return t + bar_load_time(cost, 4, load) if p.readback else t

    tests.append(("gdr_copy_to_mapping", p.write_iters, store))
    tests.append(("gdr_copy_from_mapping", p.read_iters, lambda n: bar_load_time(cost, n, load)))
    if p.cumemcpy:
        h2d = copy_flow(machine, host, dev, initiator=dev)
        d2h = copy_flow(machine, dev, host, initiator=dev)

        def memcpy(flow: CopyFlow, n: int) -> float:
            rate = min(flow.cap, machine.bottleneck(flow.uses))
            return cost.stage.copy_launch + n / rate

        tests.insert(0, ("cuMemcpy_D2H", p.read_iters, lambda n: memcpy(d2h, n)))
        tests.insert(0, ("cuMemcpy_H2D", p.write_iters, lambda n: memcpy(h2d, n)))
    spread = cost.gpucopy.jitter
    for name, iters, fn in tests:
        buckets = iters if p.legacy else min(iters, MAX_BUCKETS)
        per = max(1, math.ceil(iters / buckets)) if not p.legacy else iters
        for n in _sizes(p.size):
            base = fn(n)
            if p.legacy:
                means = [jittered(ctx, spread / math.sqrt(iters), base)]
            else:
                means = sorted(jittered(ctx, spread / math.sqrt(per), base) for _ in range(buckets))
            yield ctx.sleep(sum(means) * per)
            mean = sum(means) / len(means)
            rows.append(CopylatRow(name, n, means[len(means) // 2], means[0], mean))
    r.rows = rows
    r.data_end = ctx.now
    writes = [row for row in rows if row.test == "gdr_copy_to_mapping"]
    reads = [row for row in rows if row.test == "gdr_copy_from_mapping"]
    r.store_floor, r.load_floor = writes[0].median, reads[0].median
    r.store_bandwidth = writes[-1].size / writes[-1].median
    r.load_bandwidth = reads[-1].size / reads[-1].median
    yield from idle(ctx)
