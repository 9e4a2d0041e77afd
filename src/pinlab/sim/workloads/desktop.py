"""The desktop family: ``compositor`` (scanout with framebuffer reallocations) and ``app``
(a working set in device memory touched periodically)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal

import simpy

from pinlab.drivers.display import Scanout
from pinlab.kernel.errno import KernelError
from pinlab.sim.engine import Ctx
from pinlab.sim.metrics import TenantResult, metric
from pinlab.sim.workloads.base import Gen, WorkloadParams, param, undo_export
from pinlab.sim.workloads.nic import default_device
from pinlab.sim.workloads.paths import device_access
from pinlab.units import Duration, Fraction, Size

Arrivals = Literal["periodic", "poisson"]
"""How a desktop client's events arrive: at a fixed gap, or as a Poisson process (exponential
gaps with that mean, drawn from the tenant's seeded ``arrivals`` stream)."""


def _gap(ctx: Ctx, mean: float, arrivals: Arrivals) -> float:
    """The time to a client's next event."""
    if arrivals == "periodic":
        return mean
    return float(ctx.random("arrivals").exponential(mean))


# -- compositor ------------------------------------------------------------------------------------


class CompositorParams(WorkloadParams):
    """``compositor``: scanout at a frame rate; new framebuffers every ``realloc_every``."""

    workload: Literal["compositor"] = "compositor"
    display: str = param("display0", "the display engine it scans out on", ref="display")
    device: str | None = param(
        None, "GPU its framebuffers live on (default: the display's)", ref="device"
    )
    fps: float = param(60.0, "frames per second", unit="1/s", gt=0, le=1000)
    framebuffer: Size = param("32MiB", "one framebuffer (4K XRGB8888)", unit="B", gt=0)
    realloc_every: Duration = param(
        "500ms", "a new client surface / resize: allocate a new framebuffer", unit="s", gt=0
    )
    arrivals: Arrivals = param(
        "periodic",
        "new surfaces every realloc_every, or as a Poisson process with that mean gap",
    )
    domain: str = param("vram", "GEM domain of the framebuffers", ref="domain")

    def events(self, duration: float) -> float:
        return duration * (self.fps + 1 / self.realloc_every)


@dataclass(slots=True)
class CompositorResult(TenantResult):
    """What ``compositor`` counts from its start."""

    frames: int = metric("count", "frames scanned out or due", default=0)
    missed_frames: int = metric(
        "count", "frames due while a new surface could not be allocated", default=0
    )
    alloc_failures: int = metric(
        "count", "framebuffer allocations the kernel refused (retried every frame)", default=0
    )
    framebuffers: int = metric("count", "framebuffers allocated and put on screen", default=0)


@dataclass(slots=True)
class _Framebuffer:
    handle: int
    fd: int
    scanout: Scanout


def compositor(ctx: Ctx, p: CompositorParams, r: CompositorResult) -> Gen:
    """A desktop compositor. At ``fps`` the display engine scans the current framebuffer out
    (``DisplayEngine.scan_frame``: the stale-DMA detector checks every frame). Every
    ``realloc_every`` (a new client surface, a resize; ``arrivals = "poisson"``: exponential
    gaps with that mean) it allocates a new framebuffer in
    ``domain`` (GEM create + export + ``drmModeAddFB2``/flip, which pins it for the display)
    and drops the old one. An allocation the kernel refuses (``-ENOMEM`` when device memory is
    pinned full) is counted and retried every frame; each frame with a surface it could not
    allocate is a *missed frame*."""
    machine = ctx.machine
    device = p.device
    if device is None:
        owner = next((d.device for d in machine.spec.displays if d.name == p.display), None)
        device = owner or default_device(machine)
    display = machine.system.display(p.display)
    period = 1.0 / p.fps
    current: _Framebuffer | None = None
    next_realloc = ctx.now
    r.data_start = ctx.now

    def allocate() -> Generator[simpy.Event, Any, _Framebuffer | None]:
        handle: int | None = None
        fd: int | None = None
        try:
            handle = yield from ctx.call(ctx.proc.gem_create, device, p.framebuffer, p.domain)
            fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
            scanout = yield from ctx.call(ctx.proc.set_scanout, p.display, fd)
        except KernelError:
            r.alloc_failures += 1
            yield from undo_export(ctx, handle, fd)
            return None
        r.framebuffers += 1
        return _Framebuffer(handle, fd, scanout)

    while True:
        frame_start = ctx.now
        pending = ctx.now >= next_realloc
        if pending:
            fb = yield from allocate()
            if fb is not None:
                if current is not None:
                    yield from ctx.call(ctx.proc.clear_scanout, current.scanout)
                    yield from ctx.call(ctx.proc.close, current.fd)
                    yield from ctx.call(ctx.proc.gem_close, current.handle)
                current = fb
                next_realloc = ctx.now + _gap(ctx, p.realloc_every, p.arrivals)
                pending = False
        if current is not None:
            display.scan_frame(current.scanout)
        r.frames += 1
        if pending or current is None:
            r.missed_frames += 1
        else:
            ctx.stats.record_transfer(p.framebuffer, ctx.now - frame_start)
        yield ctx.sleep(period - (ctx.now - frame_start) % period)


# -- app -------------------------------------------------------------------------------------------


class AppParams(WorkloadParams):
    """``app``: a working set in device memory, touched every ``period``."""

    workload: Literal["app"] = "app"
    device: str | None = param(
        None, "GPU its buffers live on (default: the node's first)", ref="device"
    )
    working_set: Size = param("2GiB", "bytes in device memory", unit="B", gt=0)
    buffers: int = param(4, "buffers the working set is split into", ge=1)
    period: Duration = param("100ms", "time between touches", unit="s", gt=0)
    touch: Fraction = param(0.25, "fraction of the set touched per period", unit="ratio")
    retry: Duration = param("1s", "wait before retrying a failed allocation", unit="s", gt=0)
    arrivals: Arrivals = param(
        "periodic", "touches every period, or as a Poisson process with that mean gap"
    )
    domain: str = param("vram", "GEM domain of the buffers", ref="domain")

    def events(self, duration: float) -> float:
        return duration / min(self.period, self.retry) * self.buffers


@dataclass(slots=True)
class AppResult(TenantResult):
    """What ``app`` counts from its start."""

    alloc_failures: int = metric(
        "count", "allocations of its working set the kernel refused (retried)", default=0
    )


def app(ctx: Ctx, p: AppParams, r: AppResult) -> Gen:
    """An application (a game, a CAD tool) with ``working_set`` bytes in ``buffers`` device
    buffers. Every ``period`` (``arrivals = "poisson"``: exponential gaps with that mean) it
    touches ``touch`` × the set: a command submission per buffer
    (``Process.amdgpu_cs``: an evicted buffer moves back if there is room) and the GPU's reads
    at the rate of wherever the buffer is (device memory, or over PCIe after an eviction, §1
    item 4). Allocation failures are retried every ``retry``. Each touch is a transfer whose
    latency includes waiting for a move back: the app's frame time grows while its set is
    evicted."""
    device = p.device or default_device(ctx.machine)
    each = max(p.working_set // p.buffers, 4096)
    handles: list[int] = []
    while len(handles) < p.buffers:
        try:
            handles.append((yield from ctx.call(ctx.proc.gem_create, device, each, p.domain)))
        except KernelError:
            r.alloc_failures += 1
            yield ctx.sleep(p.retry)
    r.data_start = ctx.now
    per_period = int(p.touch * p.working_set)
    i = 0
    while True:
        start = ctx.now
        left = per_period
        while left > 0:
            handle = handles[i % len(handles)]
            i += 1
            nbytes = min(each, left)
            left -= nbytes
            t = ctx.now
            loc = ctx.call_nowait(ctx.proc.amdgpu_cs, handle)
            yield from ctx.wait_pending()
            yield from device_access(ctx, device, loc, nbytes, write=False)
            ctx.stats.record_transfer(nbytes, ctx.now - t)
        yield ctx.sleep(_gap(ctx, p.period, p.arrivals) - (ctx.now - start))
