"""Which device and NIC a workload uses, and one NIC access through an MR.

:func:`nic_access` is the one place an ODP fault costs time (``cost-model.md`` §7).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from pinlab.drivers.rdma import DmaResult, MemoryRegion
from pinlab.platform.topology import Machine
from pinlab.sim.engine import Ctx


def default_device(machine: Machine) -> str:
    """The node's first exporting device."""
    if not machine.spec.devices:
        raise ValueError(f"platform {machine.name} has no device")
    return machine.spec.devices[0].name


def nearest_nic(machine: Machine, device: str) -> str:
    """A NIC for ``device``: one below the same PCIe switch if any, else NICs are spread
    evenly over the devices in order (device *i* of *D* gets NIC ⌊i·N/D⌋, so DL1's Gaudi
    pairs share one EFA each), preferring the device's socket."""
    spec = machine.spec
    nics = [n.name for n in spec.nics]
    if not nics:
        raise ValueError(f"platform {machine.name} has no RDMA NIC")
    parent = spec.device(device).parent if device in {d.name for d in spec.devices} else None
    for n in spec.nics:
        if parent is not None and n.parent == parent and parent not in _bridges(machine):
            return n.name
    devices = [d.name for d in spec.devices]
    idx = devices.index(device) if device in devices else 0
    choice = nics[idx * len(nics) // max(len(devices), 1)]
    socket = machine.socket_of(device)
    if machine.socket_of(choice) != socket:
        local = [n for n in nics if machine.socket_of(n) == socket]
        if local:
            choice = local[idx % len(local)]
    return choice


def _bridges(machine: Machine) -> set[str]:
    return {hb.name for hb in machine.spec.host_bridges}


def nic_access(
    ctx: Ctx, mr: MemoryRegion, nbytes: int, *, write: bool = False
) -> Generator[simpy.Event, Any, DmaResult]:
    """One NIC access through ``mr`` (``ibv_post_send``): the stale-DMA detector checks it; an
    ODP MR whose translation is gone faults -- the call waits for the move's fences, then the
    fault costs ``odp.fault`` (tail: × ``odp.tail_multiplier`` with ``odp.tail_prob``) +
    ``odp.mtt_update_per_page`` × pages (``cost-model.md`` §7), counted as stall time."""
    result: DmaResult = yield from ctx.call(ctx.proc.nic_dma, mr, int(nbytes), write=write)
    if result.faulted:
        odp = ctx.cost.odp
        t = odp.fault
        if odp.tail_prob > 0 and ctx.random("odp-tail").random() < odp.tail_prob:
            t = odp.fault * odp.tail_multiplier
        t += odp.mtt_update_per_page * result.pages_faulted
        ctx.stats.odp_faults += 1
        ctx.stats.stall_time += t
        start = ctx.now
        yield ctx.sleep(t)
        ctx.trace(
            mr.nic.name,
            "odp faults",
            "odp fault",
            "odp",
            start,
            {"tenant": ctx.proc.comm, "pages": result.pages_faulted},
        )
    return result
