"""``allreduce``: ring all-reduce over RDMA NICs, one ring across tenants and nodes (the
collectives family; the group mechanism is :mod:`pinlab.sim.collective`)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal

import simpy
from pydantic import model_validator

from pinlab.sim.collective import Collective, FlowSpec
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
from pinlab.sim.workloads.nic import nearest_nic
from pinlab.sim.workloads.paths import device_access, local_delay, trace_access
from pinlab.sim.workloads.registration import (
    Endpoint,
    RdmaResult,
    check_access,
    route_to,
    setup_endpoint,
)
from pinlab.units import Size


class AllreduceParams(WorkloadParams):
    """``allreduce``: ring all-reduce over RDMA NICs (one rank per device)."""

    workload: Literal["allreduce"] = "allreduce"

    devices: list[str] | Literal["all"] = param(
        "all", "the node's devices that are ranks ('all': every one)", ref="device"
    )
    nics: list[str] | Literal["auto"] = param(
        "auto",
        "a NIC per rank; 'auto': one behind the same switch, else spread evenly",
        ref="nic",
    )
    buffer: Size | Literal["all"] = param(
        "1GiB",
        "device memory each rank allocates, exports and registers ('all': the "
        "device's whole memory -- a job locking all HBM)",
        unit="B",
    )
    size: Size = param("256MiB", "bytes all-reduced per iteration", unit="B", gt=0)
    iterations: int = param(0, "iterations (0: until the run ends)", ge=0)
    model: Literal["steps", "aggregate"] = param(
        "steps",
        "'steps': 2(N-1) ring steps of size/N; 'aggregate': one transfer of "
        "2(N-1)/N x size per iteration after 2(N-1) message latencies (the same for symmetric "
        "ranks)",
    )
    access: Literal["pinned", "odp"] = param(
        "pinned", "the MRs: pinned, or on-demand paging (IB_ACCESS_ON_DEMAND)"
    )
    fallback: Fallback = fallback()
    compute: bool = param(
        True,
        "model the accelerator's accesses to the buffer: gradients written, two "
        "chunks read and one written per reduce step, the result read",
    )
    group: str = param("allreduce", "ranks of one group form one ring")
    world: int = param(
        0,
        "tenants the group waits for before it forms (0: those starting together); a later one "
        "joins the ring at the end of an iteration",
        ge=0,
    )
    domain: str = param("vram", "GEM domain of the buffers", ref="domain")

    def events(self, duration: float) -> float:
        # an iteration moves 2(N-1)/N x size >= size through each rank's NIC, in 2(N-1) steps
        # of which each rank's process waits on about two per step
        iterations = duration * FASTEST_PATH / self.size
        if self.iterations:
            iterations = min(iterations, self.iterations)
        return iterations * (1 if self.model == "aggregate" else 4)

    @model_validator(mode="after")
    def _size_fits(self) -> AllreduceParams:
        if self.buffer != "all":
            at_most("size", self.size, "buffer", self.buffer)
        return self


@dataclass(slots=True)
class AllreduceResult(RdmaResult):
    """What ``allreduce`` reports once its ranks joined the ring."""

    ranks: int | None = metric("count", "this tenant's ranks (its devices)")
    world_ranks: int | None = metric("count", "ranks in the whole ring at the first barrier")
    staged_ranks: int | None = metric("count", "ranks staged through host memory")
    host_ranks: int | None = metric(
        "count", "ranks whose buffer is not in device memory (a pin migrated it)"
    )
    iterations: int | None = metric("count", "iterations completed")


def allreduce(ctx: Ctx, p: AllreduceParams, r: AllreduceResult) -> Gen:
    """Ring all-reduce (reduce-scatter then all-gather) of ``size`` bytes per iteration.

    Every device in ``devices`` is a rank: it allocates ``buffer`` bytes of device memory,
    exports them and registers them on its NIC (pinned by default; parallel across ranks, so
    the setup costs the slowest registration plus the pins' migrations). All ranks of all
    tenants with the same ``group`` form one ring, in join order. Each of the 2(N − 1) steps
    (``model = "steps"``) every rank sends ``size``/N bytes to its successor -- one flow from
    the sender's memory through its NIC, the fabric and the receiver's NIC into the receiver's
    memory, each end P2P, host memory or staged as its registration turned out -- the first
    N − 1 steps followed by the reduction (the accelerator reads two chunks and writes one,
    ``compute``), and a barrier across the group. ``model = "aggregate"`` sends the same
    2(N − 1)/N × ``size`` bytes per rank as one transfer after 2(N − 1) message latencies: the
    α–β form of the same algorithm (§1 item 2), identical for symmetric ranks and far cheaper
    for 128 of them. Each iteration the accelerator also writes the gradients (``size``) and
    reads the result (``size``). Throughput counts the bytes this tenant's ranks sent.
    """
    machine = ctx.machine
    t0 = ctx.now
    devices = [d.name for d in machine.spec.devices] if p.devices == "all" else list(p.devices)
    if p.nics == "auto":
        nics = [nearest_nic(machine, d) for d in devices]
    else:
        if len(p.nics) != len(devices):
            raise ValueError(f"allreduce: {len(devices)} devices but {len(p.nics)} NICs")
        nics = list(p.nics)
    coll = ctx.sim.collectives.group(p.group, p.world)
    coll.join(ctx.proc.comm)
    try:
        ranks: list[Endpoint] = []
        costs: list[float] = []
        for dev, nic in zip(devices, nics, strict=True):
            length = machine.spec.device(dev).memory if p.buffer == "all" else p.buffer
            handle = ctx.call_nowait(ctx.proc.gem_create, dev, length, p.domain)
            fd = ctx.call_nowait(ctx.proc.prime_handle_to_fd, handle)
            ep = Endpoint(ctx.node.name, dev, nic, handle, fd, length, p.access == "odp")
            ep.owner = ctx.proc.comm
            ep.buffer = ctx.proc.buffer(handle)
            ep.message = p.size
            yield from setup_endpoint(ctx, ep, p.fallback, costs, r)
            ranks.append(ep)
        yield from ctx.wait_pending()
        yield ctx.sleep(max(costs, default=0.0))
        coll.add_ranks(ctx.proc.comm, ranks)
        yield coll.barrier(ctx.proc.comm)
        r.setup_time = ctx.now - t0
        r.data_start = ctx.now
        r.ranks = len(ranks)
        r.world_ranks = len(coll.ranks)
        r.staged_ranks = sum(1 for ep in ranks if ep.staged)
        r.host_ranks = sum(1 for ep in ranks if ep.location != "vram")
        done = 0
        while p.iterations == 0 or done < p.iterations:
            n = len(coll.ranks)
            if n < 2:
                break
            if p.compute:
                yield from _compute_all(ctx, ranks, p.size, write=True)
            if p.model == "aggregate":
                plan = [(2 * (n - 1) * p.size // n, 2 * (n - 1), (n - 1) * p.size // n)]
            else:
                c = p.size // n
                plan = [(c, 1, c if s < n - 1 else 0) for s in range(2 * (n - 1))]
            for k, (nbytes, messages, reduced) in enumerate(plan):
                last = k == len(plan) - 1  # the iteration's end: joiners are admitted then
                yield from _ring_step(ctx, coll, ranks, nbytes, messages, r, last=last)
                if p.compute and reduced:
                    yield from _compute_all(ctx, ranks, 2 * reduced, write=False)
                    yield from _compute_all(ctx, ranks, reduced, write=True)
                    yield coll.barrier(ctx.proc.comm)
            if p.compute:
                yield from _compute_all(ctx, ranks, p.size, write=False)
            done += 1
            r.iterations = done
            r.data_end = ctx.now
    finally:
        # done, killed or refused: the ring goes on without this tenant's ranks
        coll.leave(ctx.proc.comm)
    yield from idle(ctx)


def _ring_step(
    ctx: Ctx,
    coll: Collective[Endpoint],
    ranks: list[Endpoint],
    nbytes: int,
    messages: int,
    r: AllreduceResult,
    *,
    last: bool = False,
) -> Generator[simpy.Event, Any, None]:
    """Every rank of the group sends ``nbytes`` to its successor, concurrently (this tenant
    submits its ranks' flows to the group, :meth:`Collective.submit`); ``messages`` is how many
    message latencies the transfer pays (1 per ring step; 2(N − 1) in aggregate mode); ``last``
    marks the iteration's last step, after which tenants that joined the running group are
    admitted to the ring (:class:`~pinlab.sim.collective.Collective`)."""
    for ep in ranks:
        yield from check_access(ctx, ep, nbytes, r, write=False)
        yield from check_access(ctx, ep, nbytes, r, write=True)
    latency = 0.0
    flows: list[FlowSpec] = []
    label = f"{ctx.proc.comm}:ring"
    for ep in ranks:
        links, cap, lat = route_to(ctx, ep, coll.successor(ep))
        latency = max(latency, lat * messages)
        flows.append((nbytes, links, cap, label))
    t0 = ctx.env.now
    yield coll.submit(ctx.proc.comm, flows, latency, last=last)
    elapsed = ctx.env.now - t0
    for _ in ranks:
        ctx.stats.record_transfer(nbytes, elapsed)


def _compute_all(
    ctx: Ctx, ranks: list[Endpoint], nbytes: int, *, write: bool
) -> Generator[simpy.Event, Any, None]:
    """Every local rank's accelerator accesses ``nbytes`` of its buffer, concurrently.

    Symmetric ranks -- every buffer in device memory, every access the same uncontended delay
    -- wait on one timer instead of one process each: they end at the same instant, in rank
    order, either way. Otherwise each rank's access is a process of its own (a flow competes
    with the others)."""
    locations = [ep.location for ep in ranks]
    delays = {
        local_delay(ctx, ep.device, loc, nbytes) for ep, loc in zip(ranks, locations, strict=True)
    }
    if nbytes > 0 and len(delays) == 1 and None not in delays:
        start = ctx.now
        (delay,) = delays
        assert delay is not None
        yield ctx.sleep(delay)
        for ep, loc in zip(ranks, locations, strict=True):
            trace_access(ctx, ep.device, loc, nbytes, start, write=write)
        return
    events = [
        ctx.env.process(device_access(ctx, ep.device, ep.location, nbytes, write=write))
        for ep in ranks
    ]
    yield simpy.AllOf(ctx.env, events)
