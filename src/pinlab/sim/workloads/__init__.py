"""Workloads: what tenants do, as SimPy generator functions of a
:class:`~pinlab.sim.engine.Ctx`, their typed parameters and the result they fill in.

Every kernel interaction is a uapi call made through ``ctx.call`` (denials counted by the
process, fences waited for in simulated time), every byte moved is a flow of the simulator's
:class:`~pinlab.sim.flows.FlowNetwork` over the platform's links; the costs are
``cost-model.md``'s (the helper modules say which). The package:

* :mod:`~.registry` -- :data:`WORKLOADS`, the one declaration of each workload (name,
  parameter model, result, function), and :func:`spawn`; a workload's function is
  ``WORKLOADS[name].fn`` (the package's attributes ``allreduce``, ``kv_transfer`` and
  ``pressure`` are the family modules);
* :mod:`~.base` -- the parameter base model and field helper (units, defaults,
  descriptions);
* the families: :mod:`~.kv_transfer` (``kv-transfer``: KV-cache blocks as request/response
  transfers, latency percentiles), :mod:`~.perftest` (``perftest``: the linux-rdma perftest
  tools between two nodes, message by message), :mod:`~.allreduce` (``allreduce``: a ring
  over NICs, one group across tenants and nodes), :mod:`~.desktop` (``compositor``: periodic
  scanout with framebuffer reallocations; ``app``: a VRAM working set touched periodically) and
  :mod:`~.pressure` (``pin-hog``: pins all it can; ``pressure``: allocation bursts that force
  eviction);
* the shared helpers, public for custom workloads: :mod:`~.nic` (which device and NIC, the
  NIC access and its ODP fault cost), :mod:`~.paths` (how bytes travel: P2P, host memory,
  staging, the accelerator's own accesses) and :mod:`~.registration` (one registered buffer:
  registration cost, fallbacks, re-registration after a NIC reset).

Custom workloads are generator functions of a ``Ctx``, started with
:meth:`Simulation.spawn <pinlab.sim.engine.Simulation.spawn>`.

Not modelled (cost-model rows the workloads do not use): ``pcie.bidir_h2d_factor`` and
``pcie.large_buffer_factor`` (the flow network shares link capacity without them),
``numa.remote_*`` (bounce buffers sit in the NIC's socket), ``policy.hybrid_threshold`` (pure
policies), ``reg.multi_nic_factor`` (one NIC per buffer), ``odp.fault_granularity``/
``odp.rdma_prefetch_max``/``odp.implicit_chunk`` (dma-buf ODP MRs fault as a whole, §1 item
6), the ``swodp.*`` and ``uvm.*`` comparisons.
"""

from pinlab.sim.workloads.allreduce import AllreduceParams, AllreduceResult
from pinlab.sim.workloads.base import Fallback, WorkloadParams, idle, param, param_unit
from pinlab.sim.workloads.desktop import AppParams, AppResult, CompositorParams, CompositorResult
from pinlab.sim.workloads.kv_transfer import KvTransferParams, KvTransferResult
from pinlab.sim.workloads.nic import default_device, nearest_nic, nic_access
from pinlab.sim.workloads.paths import (
    Side,
    device_access,
    nic_side,
    route,
    send,
    staged_pipeline,
    staged_side,
)
from pinlab.sim.workloads.perftest import PerftestParams, PerftestResult
from pinlab.sim.workloads.pressure import PinHogParams, PinHogResult, PressureParams, PressureResult
from pinlab.sim.workloads.registration import (
    ACCESS,
    Endpoint,
    RdmaResult,
    bounce_size,
    dmabuf_reg_cost,
    register_dmabuf,
    register_host,
)
from pinlab.sim.workloads.registry import WORKLOADS, WorkloadDef, spawn, workload

__all__ = [
    "ACCESS",
    "WORKLOADS",
    "AllreduceParams",
    "AllreduceResult",
    "AppParams",
    "AppResult",
    "CompositorParams",
    "CompositorResult",
    "Endpoint",
    "Fallback",
    "KvTransferParams",
    "KvTransferResult",
    "PerftestParams",
    "PerftestResult",
    "PinHogParams",
    "PinHogResult",
    "PressureParams",
    "PressureResult",
    "RdmaResult",
    "Side",
    "WorkloadDef",
    "WorkloadParams",
    "bounce_size",
    "default_device",
    "device_access",
    "dmabuf_reg_cost",
    "idle",
    "nearest_nic",
    "nic_access",
    "nic_side",
    "param",
    "param_unit",
    "register_dmabuf",
    "register_host",
    "route",
    "send",
    "spawn",
    "staged_pipeline",
    "staged_side",
    "workload",
]
