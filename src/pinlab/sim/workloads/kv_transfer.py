"""``kv-transfer``: inference KV-cache blocks sent (or received) through one registered buffer."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

from pydantic import model_validator

from pinlab.sim.engine import Ctx
from pinlab.sim.metrics import metric
from pinlab.sim.workloads.base import (
    FASTEST_PATH,
    Fallback,
    Gen,
    WorkloadParams,
    at_most,
    fallback,
    idle,
    param,
)
from pinlab.sim.workloads.nic import default_device, nearest_nic
from pinlab.sim.workloads.paths import device_access, send, staged_pipeline
from pinlab.sim.workloads.registration import Endpoint, RdmaResult, check_access, setup_endpoint
from pinlab.units import Size


class KvTransferParams(WorkloadParams):
    """``kv-transfer``: KV-cache blocks sent (or received) through one registered buffer."""

    workload: Literal["kv-transfer"] = "kv-transfer"
    device: str | None = param(None, "exporting device (default: the node's first)", ref="device")
    nic: str | None = param(None, "RDMA NIC (default: the nearest, nearest_nic)", ref="nic")
    buffer: Size = param("1GiB", "KV cache allocated, exported and registered", unit="B", gt=0)
    block: Size = param("64MiB", "bytes per request", unit="B", gt=0)
    rate: float = param(0.0, "requests per second, Poisson (0: back to back)", unit="1/s", ge=0)
    requests: int = param(0, "requests to serve (0: until the end)", ge=0)
    access: Literal["pinned", "odp"] = param(
        "pinned", "the MR: pinned, or on-demand paging (IB_ACCESS_ON_DEMAND)"
    )
    prefetch: bool = param(False, "ibv_advise_mr before a send whose MR was invalidated (ODP)")
    produce: bool = param(True, "the GPU writes each block into the buffer before it is sent")
    direction: Literal["send", "recv"] = param(
        "send", "send: the NIC reads the buffer; recv: it writes into it"
    )
    fallback: Fallback = fallback()
    domain: str = param("vram", "GEM domain of the buffer", ref="domain")

    def events(self, duration: float) -> float:
        if self.requests:
            return float(self.requests)
        back_to_back = duration * FASTEST_PATH / self.block
        return min(back_to_back, 2 * duration * self.rate) if self.rate else back_to_back

    @model_validator(mode="after")
    def _block_fits(self) -> KvTransferParams:
        at_most("block", self.block, "buffer", self.buffer)
        return self


@dataclass(slots=True)
class KvTransferResult(RdmaResult):
    """What ``kv-transfer`` reports (its latency percentiles are the tenant's)."""

    staged: int | None = metric("count", "1 if the buffer is staged through host memory")
    path_rate: float | None = metric(
        "B/s", "uncontended rate of the path the first message takes (P2P: the P2P capacity)"
    )
    requests: int | None = metric("count", "requests served, once a finite run is done")


def kv_transfer(ctx: Ctx, p: KvTransferParams, r: KvTransferResult) -> Gen:
    """Inference KV transfer (prefill → decode): one buffer of ``buffer`` bytes in device
    memory, exported and registered on ``nic`` (``access = "odp"`` asks for on-demand paging);
    requests of ``block`` bytes arrive at ``rate`` per second (Poisson, from the tenant's seeded
    generator; 0 = back to back) and are served in order: the GPU writes the block into the
    buffer (``produce``: a command submission that moves an evicted buffer back, then the
    write), then the NIC sends it (or, ``direction = "recv"``, writes it). Each request's
    latency runs from its arrival to the end of its transfer; throughput counts the NIC bytes.
    """
    machine = ctx.machine
    t0 = ctx.now
    device = p.device or default_device(machine)
    nic = p.nic or nearest_nic(machine, device)
    handle = yield from ctx.call(ctx.proc.gem_create, device, p.buffer, p.domain)
    fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
    ep = Endpoint(ctx.node.name, device, nic, handle, fd, p.buffer, p.access == "odp")
    ep.buffer = ctx.proc.buffer(handle)
    ep.message = p.block
    costs: list[float] = []
    yield from setup_endpoint(ctx, ep, p.fallback, costs, r)
    yield from ctx.wait_pending()
    yield ctx.sleep(max(costs, default=0.0))
    r.setup_time = ctx.now - t0
    r.data_start = ctx.now
    r.staged = 1 if ep.staged else 0
    write = p.direction == "recv"
    first = ep.recv_side if write else ep.send_side
    if first is not None:
        r.path_rate = min(first.cap, first.bottleneck)
    arrivals: deque[float] = deque()
    next_arrival = ctx.now
    served = 0
    while p.requests == 0 or served < p.requests:
        if p.rate > 0:
            while next_arrival <= ctx.now:
                arrivals.append(next_arrival)
                next_arrival += float(ctx.random("arrivals").exponential(1 / p.rate))
            if not arrivals:
                yield ctx.sleep(next_arrival - ctx.now)
                continue
            arrived = arrivals.popleft()
        else:
            arrived = ctx.now
        if p.produce and not write:
            loc = ctx.call_nowait(ctx.proc.amdgpu_cs, handle)
            yield from ctx.wait_pending()
            yield from device_access(ctx, device, loc, p.block, write=True)
        yield from check_access(ctx, ep, p.block, r, write=write, prefetch=p.prefetch)
        if ep.staged and ctx.cost.stage.mode == "pipeline":
            yield from staged_pipeline(ctx, p.block, device, nic, write=write)
        else:
            side = ep.recv_side if write else ep.send_side
            assert side is not None
            yield from send(ctx, side, p.block)
        ctx.stats.record_transfer(p.block, ctx.now - arrived)
        served += 1
    r.requests = served
    r.data_end = ctx.now
    yield from idle(ctx)
