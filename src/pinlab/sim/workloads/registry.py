"""The one place a workload is declared: its name, parameter model, result (the metrics it
reports) and function -- :data:`WORKLOADS` -- and how a tenant starts one (:func:`spawn`).

A workload is a SimPy generator function ``fn(ctx, params, result)`` of a
:class:`~pinlab.sim.engine.Ctx`, its validated parameter model (a
:class:`~pinlab.sim.workloads.base.WorkloadParams` whose ``workload`` field is its name) and
the :class:`~pinlab.sim.metrics.TenantResult` it fills in; the result's fields declared with
:func:`~pinlab.sim.metrics.metric` are the metrics it reports (``tenant.<name>.<field>``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pinlab.plugins import PluginRegistry, describe
from pinlab.sim.engine import Ctx, Simulation, Tenant
from pinlab.sim.metrics import MetricSpec, TenantResult, declared
from pinlab.sim.workloads import (
    allreduce,
    desktop,
    gdrcopy,
    kv_transfer,
    nccl,
    nvbandwidth,
    p2p,
    perftest,
    pressure,
    reg_mr,
)
from pinlab.sim.workloads.base import Gen, WorkloadParams

P = TypeVar("P", bound=WorkloadParams)
R = TypeVar("R", bound=TenantResult)


@dataclass(frozen=True, slots=True)
class WorkloadDef(Generic[P, R]):
    """A registered workload: its parameter model, result type, function and one-line
    summary. Its name is the parameter model's ``workload`` literal."""

    params: type[P]
    result: type[R]
    fn: Callable[[Ctx, P, R], Gen]
    summary: str

    @property
    def name(self) -> str:
        return str(self.params.model_fields["workload"].default)

    def metrics(self) -> list[MetricSpec]:
        """The metrics it reports beyond every tenant's (``tenant.<name>.<metric>``)."""
        return declared(self.result)


def _table(*defs: WorkloadDef[Any, Any]) -> PluginRegistry[str, WorkloadDef[Any, Any]]:
    return PluginRegistry((d.name, d) for d in defs)


WORKLOADS: PluginRegistry[str, WorkloadDef[Any, Any]] = _table(
    WorkloadDef(
        allreduce.AllreduceParams,
        allreduce.AllreduceResult,
        allreduce.allreduce,
        "ring all-reduce over RDMA NICs; one rank per device, one ring across tenants and nodes",
    ),
    WorkloadDef(
        kv_transfer.KvTransferParams,
        kv_transfer.KvTransferResult,
        kv_transfer.kv_transfer,
        "KV-cache blocks sent (or received) through one registered buffer; latency percentiles",
    ),
    WorkloadDef(
        desktop.CompositorParams,
        desktop.CompositorResult,
        desktop.compositor,
        "scanout at a frame rate; a new framebuffer every realloc_every; missed frames counted",
    ),
    WorkloadDef(
        desktop.AppParams,
        desktop.AppResult,
        desktop.app,
        "a working set in device memory, touched every period",
    ),
    WorkloadDef(
        perftest.PerftestParams,
        perftest.PerftestResult,
        perftest.perftest,
        "perftest's ib_{send,write,read}_{lat,bw} between a client and a server on two nodes, "
        "message by message as on an idle network (other tenants' flows and the link counters "
        "do not see its messages)",
    ),
    WorkloadDef(
        pressure.PinHogParams,
        pressure.PinHogResult,
        pressure.pin_hog,
        "allocates and pins (dma-buf MRs) until refused; keeps all",
    ),
    WorkloadDef(
        pressure.PressureParams,
        pressure.PressureResult,
        pressure.pressure,
        "allocation bursts that force eviction",
    ),
    WorkloadDef(
        nvbandwidth.NvbandwidthParams,
        nvbandwidth.NvbandwidthResult,
        nvbandwidth.nvbandwidth,
        "nvbandwidth test cases: host/device copies by copy engines or kernels, as matrices",
    ),
    WorkloadDef(
        p2p.P2pParams,
        p2p.P2pResult,
        p2p.p2p,
        "p2pBandwidthLatencyTest: GPU-to-GPU bandwidth and latency, P2P disabled and enabled",
    ),
    WorkloadDef(
        nccl.NcclParams,
        nccl.NcclResult,
        nccl.nccl,
        "NCCL all-reduce over a size sweep (all_reduce_perf): rings over NVLink, PCIe and NICs",
    ),
    WorkloadDef(
        gdrcopy.GdrcopyParams,
        gdrcopy.GdrcopyResult,
        gdrcopy.gdrcopy,
        "gdrcopy copylat: CPU stores into and loads from a GPU BAR mapping, by size",
    ),
    WorkloadDef(
        reg_mr.RegMrParams,
        reg_mr.RegMrResult,
        reg_mr.reg_mr,
        "one timed memory registration after device memory registered before (reg_mr)",
    ),
)
"""Workloads by name (``workload = "allreduce"`` in a scenario file): the built-in ones, then
the installed plugins' (``pinlab.plugins``)."""


def _register_plugin(name: str, obj: object) -> None:
    if not isinstance(obj, WorkloadDef):
        raise TypeError(f"expected a pinlab.sim.workloads.WorkloadDef, found {describe(obj)}")
    if obj.name != name:
        raise ValueError(
            f"expected a workload named {name!r} (its params' workload), found {obj.name!r}"
        )
    if name in WORKLOADS:
        raise ValueError(f"expected a new workload name, found {name!r} (already registered)")
    WORKLOADS[name] = obj


WORKLOADS.plugins("pinlab.workloads", _register_plugin)


def workload(name: str) -> WorkloadDef[Any, Any]:
    """Workload ``name`` (``KeyError`` listing the known ones)."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise KeyError(f"no workload {name!r} (expected one of {', '.join(WORKLOADS)})") from None


def spawn(
    sim: Simulation,
    tenant: str,
    params: WorkloadParams,
    *,
    node: str | None = None,
    start: float = 0.0,
    process_args: dict[str, Any] | None = None,
) -> Tenant:
    """Start the workload ``params`` names as tenant ``tenant`` (``Simulation.spawn``'s
    ``node``, ``start`` and ``process_args``), with a fresh result of its type."""
    wd = workload(params.workload)
    if not isinstance(params, wd.params):
        raise TypeError(f"{params!r} is not a {wd.params.__name__}")
    result = wd.result()
    fn = wd.fn

    def run(ctx: Ctx) -> Gen:
        return fn(ctx, params, result)

    return sim.spawn(tenant, run, result=result, node=node, start=start, process_args=process_args)
