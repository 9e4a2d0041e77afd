"""``reg_mr``: the time of one memory registration against what the process registered before
(the ``registration`` bench tool; ``cost-model.md`` §6; ``validate/tables/`` F1).

One GPU buffer (``mem = "cuda"``: ``gem_create`` on the device, ``prime_handle_to_fd``, then
``ibv_reg_dmabuf_mr`` on the device's nearest NIC) or one host buffer (``mem = "host"``:
``ibv_reg_mr``) of ``size`` bytes is registered after ``registered`` bytes of device memory
were registered (pinned) by the same process on the same NIC, as one buffer of that size. The
timed registration costs what the NIC driver's registration model says
(:func:`~pinlab.sim.workloads.registration.dmabuf_reg_cost`: on EFA an admin command whose
time grows with the device memory already registered on the domain) and waits for the pin's
fences; the filler's own registration is not timed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pinlab.sim.engine import Ctx
from pinlab.sim.metrics import TenantResult, metric
from pinlab.sim.workloads.base import Gen, WorkloadParams, idle, param
from pinlab.sim.workloads.nic import nearest_nic
from pinlab.sim.workloads.registration import register_dmabuf, register_host
from pinlab.units import Size

__all__ = ["RegMrParams", "RegMrResult", "reg_mr"]


class RegMrParams(WorkloadParams):
    """``reg_mr``: one timed registration after ``registered`` bytes of device memory."""

    workload: Literal["reg_mr"] = "reg_mr"

    device: str | None = param(None, "the GPU (default: the node's first device)")
    nic: str | None = param(None, "the NIC (default: the GPU's nearest)")
    mem: Literal["cuda", "host"] = param("cuda", "device memory (dma-buf) or host memory")
    size: Size = param("2MiB", "bytes of the timed registration", unit="B")
    registered: Size = param(0, "device memory the process registered on the NIC before", unit="B")


@dataclass(slots=True)
class RegMrResult(TenantResult):
    """What ``reg_mr`` measured."""

    t_reg: float | None = metric("s", "time of the timed registration (call to return)")


def reg_mr(ctx: Ctx, p: RegMrParams, r: RegMrResult) -> Gen:
    """The registrations of the module docstring."""
    machine = ctx.machine
    dev = p.device if p.device is not None else machine.spec.devices[0].name
    machine.spec.device(dev)
    nic = p.nic if p.nic is not None else nearest_nic(machine, dev)
    if p.registered > 0:
        handle = yield from ctx.call(ctx.proc.gem_create, dev, p.registered, "vram")
        fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
        yield from register_dmabuf(ctx, nic, fd, p.registered)
    r.data_start = t0 = ctx.now
    if p.mem == "host":
        _mr, cost = yield from register_host(ctx, nic, p.size)
        yield ctx.sleep(cost)
    else:
        handle = yield from ctx.call(ctx.proc.gem_create, dev, p.size, "vram")
        fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
        t0 = ctx.now  # the allocation and export are not part of the registration
        yield from register_dmabuf(ctx, nic, fd, p.size)
    r.t_reg = ctx.now - t0
    r.data_end = ctx.now
    yield from idle(ctx)
