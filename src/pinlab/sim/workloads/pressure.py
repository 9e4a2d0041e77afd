"""The pressure family: ``pin-hog`` (pins all it can and keeps it) and ``pressure``
(allocation bursts that force eviction)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pinlab.kernel.errno import KernelError
from pinlab.sim.engine import Ctx
from pinlab.sim.metrics import TenantResult, metric
from pinlab.sim.workloads.base import Gen, WorkloadParams, idle, param, undo_export
from pinlab.sim.workloads.nic import default_device, nearest_nic
from pinlab.sim.workloads.registration import register_dmabuf
from pinlab.units import Duration, Size

# -- pin-hog ---------------------------------------------------------------------------------------


class PinHogParams(WorkloadParams):
    """``pin-hog``: allocate and pin (dma-buf MRs) until refused; keep everything."""

    workload: Literal["pin-hog"] = "pin-hog"
    device: str | None = param(
        None, "device it allocates on (default: the node's first)", ref="device"
    )
    nic: str | None = param(None, "RDMA NIC it registers on (default: the nearest)", ref="nic")
    chunk: Size = param("1GiB", "first size tried per buffer", unit="B", gt=0)
    min_chunk: Size = param("64MiB", "halve down to this after a refusal", unit="B", gt=0)
    limit: Size | None = param(None, "stop after pinning this much (default: never)", unit="B")
    retry: Duration = param("1s", "wait after a refusal at min_chunk (0: stop)", unit="s", ge=0)
    domain: str = param("vram", "GEM domain of the buffers", ref="domain")

    def events(self, duration: float) -> float:
        halvings = max(self.chunk // self.min_chunk, 1).bit_length()
        return (duration / self.retry if self.retry else 1.0) * halvings


@dataclass(slots=True)
class PinHogResult(TenantResult):
    """What ``pin-hog`` counts from its start."""

    pinned_bytes: int = metric("B", "device memory it holds pinned", default=0)
    refusals: int = metric(
        "count", "allocations or registrations refused (then it halves the chunk)", default=0
    )
    buffers: int = metric("count", "buffers it allocated, exported and pinned", default=0)


def pin_hog(ctx: Ctx, p: PinHogParams, r: PinHogResult) -> Gen:
    """The stability camp's nightmare: allocate ``chunk`` bytes of device memory, export them
    and register them as a pinned dma-buf MR (EFA-style, no ODP), again and again, keeping
    everything. A refusal (allocation ``-ENOMEM``, a policy's denial) halves the chunk down to
    ``min_chunk``; a refusal at ``min_chunk`` waits ``retry`` and tries again (0: stop and just
    hold). Registration time follows §6.2."""
    machine = ctx.machine
    device = p.device or default_device(machine)
    nic = p.nic or nearest_nic(machine, device)
    chunk = p.chunk
    pinned = 0
    r.data_start = ctx.now
    while p.limit is None or pinned < p.limit:
        size = chunk if p.limit is None else min(chunk, p.limit - pinned)
        handle: int | None = None
        fd: int | None = None
        try:
            handle = yield from ctx.call(ctx.proc.gem_create, device, size, p.domain)
            fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
            yield from register_dmabuf(ctx, nic, fd, size)
        except KernelError:
            r.refusals += 1
            yield from undo_export(ctx, handle, fd)
            if chunk > p.min_chunk:
                chunk = max(p.min_chunk, chunk // 2)
                continue
            if p.retry <= 0:
                break
            yield ctx.sleep(p.retry)
            continue
        pinned += size
        r.pinned_bytes = pinned
        r.buffers += 1
        ctx.stats.record_transfer(size, 0.0)
    yield from idle(ctx)


# -- pressure --------------------------------------------------------------------------------------


class PressureParams(WorkloadParams):
    """``pressure``: allocation bursts that force eviction."""

    workload: Literal["pressure"] = "pressure"
    device: str | None = param(
        None, "device it allocates on (default: the node's first)", ref="device"
    )
    burst: Size = param("8GiB", "bytes allocated per burst", unit="B", gt=0)
    buffer: Size = param("1GiB", "size of each allocation", unit="B", gt=0)
    hold: Duration = param("200ms", "how long a burst is kept", unit="s", ge=0)
    period: Duration = param("1s", "time between burst starts", unit="s", gt=0)
    bursts: int = param(0, "bursts (0: until the end)", ge=0)
    domain: str = param("vram", "GEM domain of the allocations", ref="domain")

    def events(self, duration: float) -> float:
        return duration / self.period * -(-self.burst // self.buffer)


@dataclass(slots=True)
class PressureResult(TenantResult):
    """What ``pressure`` counts from its start."""

    alloc_failures: int = metric(
        "count", "allocations refused (-ENOMEM when what is left is pinned)", default=0
    )
    bursts: int = metric("count", "bursts completed", default=0)


def pressure(ctx: Ctx, p: PressureParams, r: PressureResult) -> Gen:
    """Memory pressure: every ``period`` allocate ``burst`` bytes of ``domain`` in ``buffer``
    pieces (each allocation may evict other tenants' unpinned buffers -- a copy job whose fence
    the allocation waits for), hold them for ``hold``, free them. Refused allocations are
    counted; allocated bytes are this tenant's transfers."""
    device = p.device or default_device(ctx.machine)
    r.data_start = ctx.now
    done = 0
    while p.bursts == 0 or done < p.bursts:
        start = ctx.now
        handles: list[int] = []
        left = p.burst
        while left > 0:
            size = min(p.buffer, left)
            left -= size
            t = ctx.now
            try:
                handles.append((yield from ctx.call(ctx.proc.gem_create, device, size, p.domain)))
            except KernelError:
                r.alloc_failures += 1
                continue
            ctx.stats.record_transfer(size, ctx.now - t)
        yield ctx.sleep(p.hold)
        for h in handles:
            yield from ctx.call(ctx.proc.gem_close, h)
        done += 1
        r.bursts = done
        yield ctx.sleep(p.period - (ctx.now - start))
    yield from idle(ctx)
