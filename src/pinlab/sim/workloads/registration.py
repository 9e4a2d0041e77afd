"""One buffer of a tenant registered for RDMA: registration and its cost, the fallbacks, and
the access check that registers again after a NIC reset (``cost-model.md`` §6, §7).

* **registration** (§6): a dma-buf MR costs what the NIC driver's registration model says
  (the driver declares it, ``RdmaDevice.registration_model``; ``reg.<model>.dmabuf``), ×
  ``reg.dmabuf_vs_peermem``: EFA (``reg.efa``) an admin command per MR, ``fixed`` +
  ``per_own_byte`` × its length + ``per_registered`` × the device memory this process already
  registered on the same NIC (the growth of §6.2; a protection domain is per process); mlx5
  (``reg.mlx5``) a UMR post with an mkey-cache hit, ``fixed`` + ``per_page`` × its pages (an
  ODP MR writes no pages up front); a host bounce buffer costs ``reg.host.fixed`` +
  ``reg.host.per_byte`` × its length (§6.1);
* **pin and migration** (§1 item 4, §8): the exporter decides where a pin lands; a migration
  is a copy job of the device's copy engine, and the registering call waits for its fence;
* **fallbacks** (:data:`~pinlab.sim.workloads.base.Fallback`): a refused ODP registration
  retries pinned, a refused pinned one stages through host memory.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from pinlab.drivers.base import DeviceBuffer
from pinlab.drivers.rdma import DmaResult, MemoryRegion
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
)
from pinlab.sim.engine import Ctx
from pinlab.sim.flows import Link
from pinlab.sim.metrics import TenantResult, bump, metric
from pinlab.sim.workloads.nic import nic_access
from pinlab.sim.workloads.paths import Side, nic_side, route, staged_side
from pinlab.uapi.process import HostMemoryRegion

ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE
"""Access flags the workloads' MRs ask for (reads and writes by the NIC), less what the device
does not offer (:func:`mr_access`)."""


def mr_access(ctx: Ctx, nic: str) -> int:
    """The access of an MR on ``nic``: :data:`ACCESS` as far as ``ibv_query_device`` reports
    it, the way verbs middleware registers (a first-generation EFA, without RDMA write, gets
    local write and remote read)."""
    return ACCESS & ctx.call_nowait(ctx.proc.ibv_query_device, nic)


REREGISTER = (Errno.EINVAL, Errno.EFAULT, Errno.EIO)
"""errnos after which a workload whose MR is gone (NIC reset, revoke) registers again."""


@dataclass(slots=True)
class RdmaResult(TenantResult):
    """What a workload with registered buffers reports: its setup and its fallbacks."""

    setup_time: float | None = metric(
        "s", "allocation, export, registration and the pins' migrations before the data phase"
    )
    fallback_pinned: int | None = metric(
        "count", "ODP registrations refused (-EOPNOTSUPP) and registered pinned instead"
    )
    fallback_staged: int | None = metric(
        "count", "pinned registrations refused (-EPERM, -EOPNOTSUPP) and staged through host memory"
    )
    reregistrations: int | None = metric(
        "count", "MRs registered again after a NIC reset or a revoke took them away"
    )


def dmabuf_reg_cost(ctx: Ctx, nic: str, length: int, *, odp: bool) -> float:
    """Seconds a dma-buf MR registration takes on ``nic`` (``cost-model.md`` §6.2; ODP: §7
    notes): the registration model its driver declares, given the device memory this process
    already registered (pinned) on the same NIC."""
    reg = ctx.cost.reg
    model = reg.model(ctx.machine.nics[nic].registration_model)
    before = sum(
        mr.length
        for mr in ctx.proc.mrs.values()
        if mr.nic.name == nic and not mr.odp and not mr.deregistered
    )
    return model.dmabuf(length, before, odp=odp) * reg.dmabuf_vs_peermem


def register_dmabuf(
    ctx: Ctx, nic: str, fd: int, length: int, *, odp: bool = False, wait: bool = True
) -> Generator[simpy.Event, Any, tuple[MemoryRegion, float]]:
    """``ibv_reg_dmabuf_mr`` of ``[0, length)`` of ``fd`` on ``nic`` (``IB_ACCESS_ON_DEMAND``
    with ``odp``). Returns (MR, registration seconds); with ``wait`` the tenant waits for the
    pin's fences and then the registration time, otherwise both are left to the caller
    (parallel registrations). Raises the call's ``KernelError``."""
    cost = dmabuf_reg_cost(ctx, nic, length, odp=odp)
    access = mr_access(ctx, nic) | (IB_ACCESS_ON_DEMAND if odp else 0)
    mr = ctx.call_nowait(ctx.proc.ibv_reg_dmabuf_mr, nic, fd, 0, length, access)
    if wait:
        yield from ctx.wait_pending()
        yield ctx.sleep(cost)
    return mr, cost


def register_host(
    ctx: Ctx, nic: str, length: int
) -> Generator[simpy.Event, Any, tuple[HostMemoryRegion, float]]:
    """``ibv_reg_mr`` of a pinned host bounce buffer (charged to ``pinned_vm`` against
    RLIMIT_MEMLOCK); costs ``reg.host.fixed`` + ``reg.host.per_byte`` × length (§6.1)."""
    mr = ctx.call_nowait(ctx.proc.ibv_reg_mr, length, mr_access(ctx, nic), nic=nic)
    cost = ctx.cost.reg.host.fixed + ctx.cost.reg.host.per_byte * length
    yield ctx.sleep(0)
    return mr, cost


def bounce_size(ctx: Ctx) -> int:
    """The pinned host bounce buffer of a staged endpoint: four ``stage.chunk`` slots (§5),
    double buffering in each direction [assumption: the doc gives the chunk, not the ring]."""
    return 4 * ctx.cost.stage.chunk


def location_of(mr: MemoryRegion | None) -> str:
    if mr is None:
        return "system"
    loc = mr.dmabuf.locate()
    return loc.memory if loc is not None else "vram"


@dataclass(eq=False, slots=True)
class Endpoint:
    """A buffer of one tenant registered for RDMA: the GEM handle, its dma-buf fd and MR (or
    the host bounce MR when staged), and how the NIC reaches it."""

    node: str
    device: str
    nic: str
    handle: int
    fd: int
    length: int
    odp: bool
    mr: MemoryRegion | None = None
    bounce: HostMemoryRegion | None = None
    send_side: Side | None = None
    recv_side: Side | None = None
    owner: str = ""
    message: int = 0  # bytes per message the workload sends (0: the whole buffer)
    sides_p2p: bool | None = None  # the mapping kind the sides were computed for
    buffer: DeviceBuffer | None = None  # the GEM buffer, for where its bytes are
    # the route to a receiver last asked for (:func:`route_to`): both sides and route()'s answer
    route_cache: tuple[Side, Side, tuple[Link, ...], float, float] | None = None

    @property
    def staged(self) -> bool:
        return self.mr is None

    @property
    def location(self) -> str:
        """Where the buffer's bytes are now (``vram``, ``gtt``, ``system``)."""
        loc = self.buffer.location if self.buffer is not None else None
        return loc if loc is not None else location_of(self.mr)


def setup_endpoint(
    ctx: Ctx,
    ep: Endpoint,
    fallback: str,
    costs: list[float],
    result: RdmaResult,
) -> Generator[simpy.Event, Any, None]:
    """Register ``ep`` (ODP, or pinned, with the fallbacks of :data:`Fallback`); fences and
    registration time are left to the caller (``costs`` gets the time)."""
    if ep.odp:
        try:
            mr, cost = yield from register_dmabuf(
                ctx, ep.nic, ep.fd, ep.length, odp=True, wait=False
            )
            ep.mr = mr
            costs.append(cost)
            refresh_sides(ctx, ep)
            return
        except KernelError as e:
            if fallback != "auto" or e.errno is not Errno.EOPNOTSUPP:
                raise
            ep.odp = False
            result.fallback_pinned = bump(result.fallback_pinned)
    try:
        mr, cost = yield from register_dmabuf(ctx, ep.nic, ep.fd, ep.length, wait=False)
        ep.mr = mr
        costs.append(cost)
    except KernelError as e:
        if fallback != "auto" or e.errno not in (Errno.EPERM, Errno.EOPNOTSUPP):
            raise
        ep.bounce, cost = yield from register_host(ctx, ep.nic, bounce_size(ctx))
        costs.append(cost)
        result.fallback_staged = bump(result.fallback_staged)
    refresh_sides(ctx, ep)


def refresh_sides(ctx: Ctx, ep: Endpoint, result: DmaResult | None = None) -> None:
    """Recompute how the NIC reaches ``ep`` when its mapping changed kind (P2P ↔ host)."""
    node = ctx.node.name
    machine = ctx.machine
    if ep.mr is None:
        if ep.sides_p2p is None and ep.send_side is not None:
            return
        ep.sides_p2p = None
        ep.send_side = staged_side(ctx, node, machine, ep.device, ep.nic, write=False)
        ep.recv_side = staged_side(ctx, node, machine, ep.device, ep.nic, write=True)
        return
    if result is not None:
        p2p = result.p2p
    else:
        sgt = ep.mr.umem.sgt
        p2p = bool(sgt.p2p) if sgt is not None else ep.location == "vram"
    if ep.sides_p2p is p2p and ep.send_side is not None:
        return
    ep.sides_p2p = p2p
    size = ep.message or ep.length
    ep.send_side = nic_side(
        ctx, node, machine, ep.device, ep.nic, p2p=p2p, write=False, nbytes=size
    )
    ep.recv_side = nic_side(ctx, node, machine, ep.device, ep.nic, p2p=p2p, write=True, nbytes=size)


def route_to(ctx: Ctx, ep: Endpoint, receiver: Endpoint) -> tuple[tuple[Link, ...], float, float]:
    """:func:`~pinlab.sim.workloads.paths.route` from ``ep``'s send side to ``receiver``'s
    receive side (links, rate cap, latency), kept on ``ep`` until either side changes (a
    mapping that changed kind, :func:`refresh_sides`): a ring sends to the same successor at
    every step, and a route depends on nothing else (the network's links never change)."""
    sender, into = ep.send_side, receiver.recv_side
    assert sender is not None and into is not None
    cached = ep.route_cache
    if cached is None or cached[0] is not sender or cached[1] is not into:
        links, cap, latency = route(ctx.sim, sender, into)
        cached = ep.route_cache = (sender, into, tuple(links), cap, latency)
    return cached[2], cached[3], cached[4]


def check_access(
    ctx: Ctx,
    ep: Endpoint,
    nbytes: int,
    result: RdmaResult,
    *,
    write: bool,
    prefetch: bool = False,
) -> Generator[simpy.Event, Any, None]:
    """The NIC access check of one message through ``ep``; re-registers an MR that a NIC reset
    or a revoke took away (``result.reregistrations``)."""
    mr = ep.mr
    if mr is None:
        return
    if prefetch and mr.odp and not mr.mtt_valid and not mr.deregistered:
        yield from ctx.call(ctx.proc.ibv_advise_mr, mr)
    try:
        access = yield from nic_access(ctx, mr, nbytes, write=write)
    except KernelError as e:
        if not (mr.deregistered or mr.revoked) or e.errno not in REREGISTER:
            raise
        if not mr.deregistered and ctx.proc.mrs.get(mr.lkey) is mr:
            yield from ctx.call(ctx.proc.ibv_dereg_mr, mr)
        new, _cost = yield from register_dmabuf(ctx, ep.nic, ep.fd, ep.length, odp=ep.odp)
        ep.mr = new
        result.reregistrations = bump(result.reregistrations)
        access = yield from nic_access(ctx, new, nbytes, write=write)
    refresh_sides(ctx, ep, access)
