"""Workloads: what tenants do, as SimPy generator functions ``workload(ctx, **params)``.

Each built-in workload is registered in :data:`WORKLOADS` with a pydantic model of its
parameters (units as strings, ``"1GiB"``, ``"500ms"``; parsed by :mod:`pinlab.units`)
and runs on a :class:`~pinlab.sim.engine.Ctx`: every kernel interaction is a uapi call made
through ``ctx.call`` (denials counted by errno and policy, fences waited for in simulated
time), every byte moved is a flow of the simulator's :class:`~pinlab.sim.flows.FlowNetwork`
over the platform's links. The costs are ``cost-model.md``'s:

* **registration** (§6): a dma-buf MR costs ``reg.dev.fixed`` + ``reg.dev.per_own_byte`` ×
  its length + ``reg.dev.per_registered`` × the device memory this process already registered
  on the same NIC (the growth of §6.2; a protection domain is per process), × ``reg.
  dmabuf_vs_peermem``; an ODP MR pins nothing and costs ``reg.dev.fixed`` only (§7 notes); a
  host bounce buffer costs ``reg.host.fixed`` + ``reg.host.per_byte`` × its length (§6.1);
* **pin and migration** (§1 item 4, §8): the exporter decides where a pin lands; a migration is
  a copy job of the device's copy engine, and the registering call waits for its fence;
* **P2P versus host memory** (§1 items 3, 4): after each NIC access check the bytes flow over
  ``path(device, nic)`` capped at ``Machine.p2p_capacity`` when the mapping is peer-to-peer,
  else over ``path(host, nic)`` at the NIC's rate; every message pays ``nic.alpha`` (§1 item 2);
* **staging** (§1 item 5): when the exporter refuses P2P (habanalabs ``-EPERM``) or the NIC
  cannot import (``-EOPNOTSUPP``), workloads with ``fallback = "auto"`` bounce through a pinned
  host buffer next to the NIC: a D2H copy over ``path(device, host)`` at ``evict.d2h.genN`` and
  the NIC from host memory, as one flow over both stages' links (so host DRAM is crossed twice),
  capped at ``stage.pipeline_eff`` × the slowest stage and delayed by one chunk's fill
  (``stage.copy_launch`` + ``stage.chunk`` / copy rate) -- the *aggregate* mode; with
  ``stage.mode = "pipeline"`` ``kv-transfer`` runs the explicit chunk pipeline instead;
* **ODP** (§1 item 6, §7): an access whose translation was invalidated faults; it costs
  ``odp.fault`` (× ``odp.tail_multiplier`` with probability ``odp.tail_prob``, drawn from the
  tenant's seeded generator) + ``odp.mtt_update_per_page`` × the MR's pages, after waiting
  for the move's fence; one invalidation unmaps the whole MR;
* **the accelerator's own accesses** (§1 item 4): a buffer in device memory is read and written
  at the device-memory rate (``mem:<dev>``: memory bandwidth × ``hbm.copy_efficiency``, §8;
  modelled as an uncontended delay), a buffer that migrated to host memory over the device's
  PCIe link (a flow that competes with everything else on it).

Workloads: ``allreduce`` (a ring over NICs, one group across tenants and nodes),
``kv-transfer`` (KV-cache blocks as request/response transfers, latency percentiles),
``compositor`` (periodic scanout with framebuffer reallocations), ``app`` (a VRAM working set
touched periodically), ``pin-hog`` (pins all it can) and ``pressure`` (allocation bursts that
force eviction). Custom workloads are plain generator functions with the same signature, passed
to :meth:`Simulation.spawn <pinlab.sim.engine.Simulation.spawn>`; the helpers below
(:func:`register_dmabuf`, :func:`nic_access`, :func:`send`, :func:`device_access`) are
public for them.

Not modelled (cost-model rows the workloads do not use): ``pcie.bidir_h2d_factor`` and
``pcie.large_buffer_factor`` (the flow network shares link capacity without them),
``numa.remote_*`` (bounce buffers sit in the NIC's socket), ``nic.single_msg_efficiency``
(messages stream back to back), ``policy.hybrid_threshold`` (pure policies), ``reg.multi_nic_
factor`` (one NIC per buffer), ``odp.fault_granularity``/``odp.rdma_prefetch_max``/
``odp.implicit_chunk`` (dma-buf ODP MRs fault as a whole, §1 item 6), the ``swodp.*`` and
``uvm.*`` comparisons.

A workload reports scalar results in ``ctx.notes`` (``data_start``, ``setup_time``,
``frames``, ``missed_frames`` ...), which the scenario runner publishes as metrics.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import simpy
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pinlab.drivers.display import Scanout
from pinlab.drivers.rdma import DmaResult, MemoryRegion
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
)
from pinlab.platform.topology import LinkUse, Machine
from pinlab.sim.copy_engine import local_rate
from pinlab.sim.engine import Ctx, Simulation
from pinlab.sim.flows import FlowNetwork, Link
from pinlab.uapi.process import HostMemoryRegion
from pinlab.units import Duration, Fraction, Size

__all__ = [
    "WORKLOADS",
    "AllreduceParams",
    "AppParams",
    "Collective",
    "CompositorParams",
    "KvTransferParams",
    "PinHogParams",
    "PressureParams",
    "Side",
    "WorkloadDef",
    "allreduce",
    "app",
    "compositor",
    "device_access",
    "kv_transfer",
    "nic_access",
    "pin_hog",
    "pressure",
    "register_dmabuf",
    "register_host",
    "send",
]

Gen = Generator[simpy.Event, Any, Any]
FlowSpec = tuple[float, Sequence[Link | str], float | None, str]
"""``(nbytes, links, cap, label)``: one transfer for ``FlowNetwork.transfer_many``."""

ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE
"""Access flags of every dma-buf MR the workloads register (reads and writes by the NIC)."""

_REREGISTER = (Errno.EINVAL, Errno.EFAULT, Errno.EIO)
"""errnos after which a workload whose MR is gone (NIC reset, revoke) registers again."""


# -- parameters -----------------------------------------------------------------------------------


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def _unit(default: str, description: str = "") -> Any:
    """A field with a default written as a scenario file would write it (``"1GiB"``), so it
    is validated and shown like a user's value."""
    return Field(default=default, description=description)


Fallback = Literal["auto", "none"]
"""``auto``: an ODP registration refused (``-EOPNOTSUPP``) retries pinned, a pinned one refused
(habanalabs ``-EPERM`` without P2P, ``-EOPNOTSUPP``) stages through host memory; ``none``:
the refusal ends the workload."""


class AllreduceParams(_Params):
    """``allreduce``: ring all-reduce over RDMA NICs (one rank per device)."""

    devices: list[str] | Literal["all"] = _unit(
        "all", "the node's devices that are ranks ('all': every one)"
    )
    nics: list[str] | Literal["auto"] = _unit(
        "auto",
        "a NIC per rank; 'auto': one behind the same switch, else spread evenly",
    )
    buffer: Size | Literal["all"] = _unit(
        "1GiB",
        "device memory each rank allocates, exports and registers ('all': the "
        "device's whole memory -- a job locking all HBM)",
    )
    size: Size = _unit("256MiB", "bytes all-reduced per iteration")
    iterations: int = Field(default=0, ge=0, description="iterations (0: until the run ends)")
    model: Literal["steps", "aggregate"] = _unit(
        "steps",
        "'steps': 2(N-1) ring steps of size/N; 'aggregate': one transfer of "
        "2(N-1)/N x size per iteration after 2(N-1) x nic.alpha (the same for symmetric ranks)",
    )
    access: Literal["pinned", "odp"] = "pinned"
    fallback: Fallback = "auto"
    compute: bool = Field(
        default=True,
        description="model the accelerator's accesses to the buffer: gradients written, two "
        "chunks read and one written per reduce step, the result read",
    )
    group: str = _unit("allreduce", "ranks of one group form one ring")
    world: int = Field(default=0, ge=0, description="tenants expected in the group (0: all)")
    domain: str = _unit("vram", "GEM domain of the buffers")

    @model_validator(mode="after")
    def _size_fits(self) -> AllreduceParams:
        if self.buffer != "all" and self.size > self.buffer:
            raise ValueError(
                f"expected size <= buffer ({self.buffer} B), found size = {self.size} B"
            )
        return self


class KvTransferParams(_Params):
    """``kv-transfer``: KV-cache blocks sent (or received) through one registered buffer."""

    device: str | None = Field(default=None, description="exporting device (default: first)")
    nic: str | None = Field(default=None, description="RDMA NIC (default: nearest)")
    buffer: Size = _unit("1GiB", "KV cache allocated and registered")
    block: Size = _unit("64MiB", "bytes per request")
    rate: float = Field(
        default=0.0, ge=0, description="requests per second, Poisson (0: back to back)"
    )
    requests: int = Field(default=0, ge=0, description="requests to serve (0: until the end)")
    access: Literal["pinned", "odp"] = "pinned"
    prefetch: bool = Field(
        default=False, description="ibv_advise_mr before a send whose MR was invalidated (ODP)"
    )
    produce: bool = Field(
        default=True, description="the GPU writes each block into the buffer before it is sent"
    )
    direction: Literal["send", "recv"] = "send"
    fallback: Fallback = "auto"
    domain: str = "vram"

    @model_validator(mode="after")
    def _block_fits(self) -> KvTransferParams:
        if self.block > self.buffer:
            raise ValueError(
                f"expected block <= buffer ({self.buffer} B), found block = {self.block} B"
            )
        return self


class CompositorParams(_Params):
    """``compositor``: scanout at a frame rate; new framebuffers every ``realloc_every``."""

    display: str = "display0"
    device: str | None = Field(default=None, description="GPU (default: the display's)")
    fps: float = Field(default=60.0, gt=0, le=1000)
    framebuffer: Size = _unit("32MiB", "one framebuffer (4K XRGB8888)")
    realloc_every: Duration = _unit(
        "500ms", "a new client surface / resize: allocate a new framebuffer"
    )
    domain: str = "vram"


class AppParams(_Params):
    """``app``: a working set in device memory, touched every ``period``."""

    device: str | None = None
    working_set: Size = _unit("2GiB", "bytes in device memory")
    buffers: int = Field(default=4, ge=1)
    period: Duration = _unit("100ms", "time between touches")
    touch: Fraction = Field(default=0.25, description="fraction of the set touched per period")
    retry: Duration = _unit("1s", "wait before retrying a failed allocation")
    domain: str = "vram"


class PinHogParams(_Params):
    """``pin-hog``: allocate and pin (dma-buf MRs) until refused; keep everything."""

    device: str | None = None
    nic: str | None = None
    chunk: Size = _unit("1GiB", "first size tried per buffer")
    min_chunk: Size = _unit("64MiB", "halve down to this after a refusal")
    limit: Size | None = Field(default=None, description="stop after pinning this much")
    retry: Duration = _unit("1s", "wait after a refusal at min_chunk (0: stop)")
    domain: str = "vram"


class PressureParams(_Params):
    """``pressure``: allocation bursts that force eviction."""

    device: str | None = None
    burst: Size = _unit("8GiB", "bytes allocated per burst")
    buffer: Size = _unit("1GiB", "size of each allocation")
    hold: Duration = _unit("200ms", "how long a burst is kept")
    period: Duration = _unit("1s", "time between burst starts")
    bursts: int = Field(default=0, ge=0, description="bursts (0: until the end)")
    domain: str = "vram"


@dataclass(frozen=True, slots=True)
class WorkloadDef:
    """A registered workload: its function, parameter model and one-line summary."""

    name: str
    fn: Callable[..., Gen]
    params: type[BaseModel]
    summary: str


WORKLOADS: dict[str, WorkloadDef] = {}
"""Built-in workloads by name (``workload = "allreduce"`` in a scenario file)."""


def _register(
    name: str, params: type[BaseModel], summary: str
) -> Callable[[Callable[..., Gen]], Callable[..., Gen]]:
    def deco(fn: Callable[..., Gen]) -> Callable[..., Gen]:
        WORKLOADS[name] = WorkloadDef(name, fn, params, summary)
        return fn

    return deco


# -- helpers: devices, NICs, registration ----------------------------------------------------------


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


def dmabuf_reg_cost(ctx: Ctx, nic: str, length: int, *, odp: bool) -> float:
    """Seconds a dma-buf MR registration takes (``cost-model.md`` §6.2; ODP: §7 notes)."""
    reg = ctx.cost.reg
    if odp:
        return reg.dev.fixed * reg.dmabuf_vs_peermem
    before = sum(
        mr.length
        for mr in ctx.proc.mrs.values()
        if mr.nic.name == nic and not mr.odp and not mr.deregistered
    )
    t = reg.dev.fixed + reg.dev.per_own_byte * length + reg.dev.per_registered * before
    return t * reg.dmabuf_vs_peermem


def register_dmabuf(
    ctx: Ctx, nic: str, fd: int, length: int, *, odp: bool = False, wait: bool = True
) -> Generator[simpy.Event, Any, tuple[MemoryRegion, float]]:
    """``ibv_reg_dmabuf_mr`` of ``[0, length)`` of ``fd`` on ``nic`` (``IB_ACCESS_ON_DEMAND``
    with ``odp``). Returns (MR, registration seconds); with ``wait`` the tenant waits for the
    pin's fences and then the registration time, otherwise both are left to the caller
    (parallel registrations). Raises the call's ``KernelError``."""
    cost = dmabuf_reg_cost(ctx, nic, length, odp=odp)
    access = ACCESS | (IB_ACCESS_ON_DEMAND if odp else 0)
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
    mr = ctx.call_nowait(ctx.proc.ibv_reg_mr, length, ACCESS, nic=nic)
    cost = ctx.cost.reg.host.fixed + ctx.cost.reg.host.per_byte * length
    yield ctx.sleep(0)
    return mr, cost


def bounce_size(ctx: Ctx) -> int:
    """The pinned host bounce buffer of a staged endpoint: four ``stage.chunk`` slots (§5),
    double buffering in each direction [assumption: the doc gives the chunk, not the ring]."""
    return 4 * ctx.cost.stage.chunk


# -- helpers: how bytes travel --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Side:
    """One end of a NIC transfer on one node: the links between the buffer's memory and the
    wire (in the order a byte crosses them), the rate cap of that end, its uncontended
    bottleneck (``Machine.bottleneck``: DRAM / 2 when host memory is crossed twice), and an
    added latency ``fill`` (a staged end's pipeline fill; ``nic.alpha_host_delta`` for host
    memory, §4). ``staged`` marks a bounce through host memory."""

    node: str
    uses: tuple[LinkUse, ...]
    cap: float
    bottleneck: float
    fill: float = 0.0
    staged: bool = False
    nic: str = ""  # the NIC this end goes through (its trace track)


def _port_rate(machine: Machine, nic: str, write: bool) -> float:
    return machine.links[machine.nic_port(nic)].capacity["rx" if write else "tx"]


def nic_side(
    ctx: Ctx, node: str, machine: Machine, device: str, nic: str, *, p2p: bool, write: bool
) -> Side:
    """The NIC end of an MR whose mapping is peer-to-peer (``p2p``: device memory through the
    BAR, capacity ``Machine.p2p_capacity``, §1 item 3) or host memory (after a migration, §1
    item 4: the NIC's rate from the host memory of its socket)."""
    port = LinkUse(machine.nic_port(nic), "rx" if write else "tx")
    line = _port_rate(machine, nic, write)
    extra = 0.0
    if p2p:
        path = machine.path(nic, device) if write else machine.path(device, nic)
        cap = machine.p2p_capacity(device, nic, nic_reads=not write) or line
    else:
        host = machine.host_of(nic)
        path = machine.path(nic, host) if write else machine.path(host, nic)
        cap = line
        extra = machine.cost.nic.alpha_host_delta  # §4: host vs GDR endpoints (default 0)
    uses = (port, *path) if write else (*path, port)
    return Side(node, uses, cap, machine.bottleneck(uses), extra, nic=nic)


def staged_side(
    ctx: Ctx, node: str, machine: Machine, device: str, nic: str, *, write: bool
) -> Side:
    """A staged end (§1 item 5): device ↔ bounce buffer in the NIC's host memory by the copy
    engine (``evict.d2h.genN`` / ``restore.h2d.genN``, §8) plus NIC ↔ host memory. The bytes
    cross host DRAM twice. ``fill`` is one chunk through the copy stage: ``stage.copy_launch``
    + ``stage.chunk`` / copy rate."""
    cost = machine.cost
    host = machine.host_of(nic)
    gen = machine.spec.device(device).gen
    port = LinkUse(machine.nic_port(nic), "rx" if write else "tx")
    if write:
        uses = (port, *machine.path(nic, host), *machine.path(host, device))
        copy = cost.restore_h2d(gen)
    else:
        uses = (*machine.path(device, host), *machine.path(host, nic), port)
        copy = cost.evict_d2h(gen)
    cap = min(copy, _port_rate(machine, nic, write))
    fill = cost.stage.copy_launch + cost.stage.chunk / copy + cost.nic.alpha_host_delta
    return Side(node, uses, cap, machine.bottleneck(uses), fill, staged=True, nic=nic)


def route(
    sim: Simulation, sender: Side, receiver: Side | None = None
) -> tuple[list[Link], float, float]:
    """The flow for a message from ``sender``'s memory to ``receiver``'s (or to the wire):
    links, rate cap and latency (``nic.alpha`` + the ends' fill). Across nodes the fabric's
    shared core is crossed when the cluster has one. A staged end in *aggregate* mode caps the
    whole transfer at ``stage.pipeline_eff`` × min(stage rates, the ends' bottlenecks)
    (``cost-model.md`` §1 item 5)."""
    links = sim.links(sender.node, sender.uses)
    cap = min(sender.cap, sender.bottleneck)
    latency = sim.node(sender.node).machine.cost.nic.alpha + sender.fill
    staged = sender.staged
    if receiver is not None:
        if receiver.node != sender.node:
            core = sim.net.links.get("fabric:core/xfer")
            if core is not None:
                links.append(core)
        links += sim.links(receiver.node, receiver.uses)
        cap = min(cap, receiver.cap, receiver.bottleneck)
        latency += receiver.fill
        staged = staged or receiver.staged
    stage = sim.node(sender.node).machine.cost.stage
    if staged and stage.mode == "aggregate":
        cap *= stage.pipeline_eff
    return links, cap, latency


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
        if odp.tail_prob > 0 and ctx.rng.random() < odp.tail_prob:
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


def send(
    ctx: Ctx, sender: Side, nbytes: float, receiver: Side | None = None
) -> Generator[simpy.Event, Any, float]:
    """Move ``nbytes`` from ``sender`` to ``receiver`` (or the wire) as one flow after the
    route's latency; returns the elapsed time (not recorded)."""
    links, cap, latency = route(ctx.sim, sender, receiver)
    t0 = ctx.env.now
    yield ctx.sleep(latency)
    t1 = ctx.now
    yield ctx.sim.net.transfer(nbytes, links, cap=cap, label=f"{ctx.proc.comm}:send")
    if sender.nic:
        ctx.trace(
            sender.nic,
            f"qp {ctx.proc.comm}",
            "staged send" if sender.staged else "send",
            "transfer",
            t1,
            {"bytes": nbytes, "staged": int(sender.staged)},
        )
    return float(ctx.env.now - t0)


def _staged_pipeline(
    ctx: Ctx, nbytes: int, device: str, nic: str, *, write: bool
) -> Generator[simpy.Event, Any, float]:
    """The explicit staging pipeline (``stage.mode = "pipeline"``, §1 item 5): chunks of
    ``stage.chunk`` go through a copy stage (``stage.copy_launch`` + chunk over the device ↔
    host path at the copy rate) and a NIC stage (``nic.alpha`` + chunk over host ↔ wire);
    chunk *i* enters a stage when it left the previous one and chunk *i − 1* left this one,
    so T ≈ Σ t_i + (k − 1) · max t_i."""
    machine = ctx.machine
    cost = ctx.cost
    chunk = cost.stage.chunk
    k = max(1, math.ceil(nbytes / chunk))
    host = machine.host_of(nic)
    gen = machine.spec.device(device).gen
    port = LinkUse(machine.nic_port(nic), "rx" if write else "tx")
    line = _port_rate(machine, nic, write)
    copy_stage = (
        ctx.sim.links(
            ctx.node.name, machine.path(host, device) if write else machine.path(device, host)
        ),
        cost.restore_h2d(gen) if write else cost.evict_d2h(gen),
        cost.stage.copy_launch,
    )
    nic_uses = [port, *machine.path(nic, host)] if write else [*machine.path(host, nic), port]
    nic_stage = (ctx.sim.links(ctx.node.name, nic_uses), line, cost.nic.alpha)
    stages = [nic_stage, copy_stage] if write else [copy_stage, nic_stage]
    # trace tracks: the copy stage on the device's DMA lane, the NIC stage on the tenant's QP;
    # one flow per chunk joins its stages
    comm = ctx.proc.comm
    copy_track = (device, f"dma {comm}", "stage h2d" if write else "stage d2h")
    nic_track = (nic, f"qp {comm}", "stage recv" if write else "stage send")
    tracks = [nic_track, copy_track] if write else [copy_track, nic_track]
    env = ctx.env
    done = [[env.event() for _ in range(k)] for _ in stages]
    eff = cost.stage.pipeline_eff
    flows = [ctx.new_flow() for _ in range(k)] if ctx.sim.recorder.tracing else [None] * k

    def run_stage(j: int) -> Gen:
        links, rate, overhead = stages[j]
        process, thread, name = tracks[j]
        for i in range(k):
            if j > 0:
                yield done[j - 1][i]
            size = min(chunk, nbytes - i * chunk)
            yield env.timeout(overhead)
            start = ctx.now
            yield ctx.sim.net.transfer(size, links, cap=rate * eff, label="stage")
            ctx.trace(
                process, thread, name, "transfer", start, {"bytes": size, "chunk": i}, flows[i]
            )
            done[j][i].succeed()

    t0 = env.now
    for j in range(len(stages)):
        env.process(run_stage(j))
    yield done[-1][-1]
    return float(env.now - t0)


def device_access(
    ctx: Ctx, device: str, location: str | None, nbytes: float, *, write: bool
) -> Gen:
    """The accelerator reads or writes ``nbytes`` of its buffer (§1 item 4). In device memory:
    at the device-memory rate (``mem:<dev>``, or the carve-out's DRAM for an APU), an
    uncontended delay; in host memory (``gtt``/``system``, after a migration or eviction): a
    flow over the device's PCIe path that competes with every other transfer on it."""
    if nbytes <= 0:
        return
    machine = ctx.machine
    spec = machine.spec.device(device)
    if location == "vram" or spec.is_carve_out:
        uses = machine.path(device, device)
        start = ctx.now
        if spec.is_carve_out and uses:
            yield ctx.sim.net.transfer(
                nbytes, ctx.sim.links(ctx.node.name, uses[:1]), label=f"{device}:access"
            )
        else:
            yield ctx.sleep(nbytes / local_rate(machine, device))
        ctx.trace(
            device,
            f"dma {ctx.proc.comm}",
            "write" if write else "read",
            "transfer",
            start,
            {"bytes": nbytes, "location": location or "-"},
        )
        return
    host = machine.host_of(device)
    uses = machine.path(device, host) if write else machine.path(host, device)
    start = ctx.now
    yield ctx.sim.net.transfer(nbytes, ctx.sim.links(ctx.node.name, uses), label=f"{device}:pcie")
    ctx.trace(
        device,
        f"dma {ctx.proc.comm}",
        "write host" if write else "read host",
        "transfer",
        start,
        {"bytes": nbytes, "location": location or "-"},
    )


def _location(mr: MemoryRegion | None) -> str:
    if mr is None:
        return "system"
    loc = mr.dmabuf.locate() if mr.dmabuf.locate is not None else None
    return loc.memory if loc is not None else "vram"


def _idle(ctx: Ctx) -> Gen:
    """Hold the process (and everything it owns) until the run ends."""
    yield ctx.env.event()


# -- one buffer registered on one NIC (kv-transfer) ------------------------------------------------


@dataclass(eq=False, slots=True)
class _Endpoint:
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
    sides_p2p: bool | None = None  # the mapping kind the sides were computed for
    buffer: Any = None  # the GEM buffer (DeviceBuffer), for where its bytes are

    @property
    def staged(self) -> bool:
        return self.mr is None

    @property
    def location(self) -> str:
        """Where the buffer's bytes are now (``vram``, ``gtt``, ``system``)."""
        loc = getattr(self.buffer, "location", None)
        return str(loc) if loc is not None else _location(self.mr)


def _setup_endpoint(
    ctx: Ctx,
    ep: _Endpoint,
    fallback: str,
    costs: list[float],
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
            _refresh_sides(ctx, ep)
            return
        except KernelError as e:
            if fallback != "auto" or e.errno is not Errno.EOPNOTSUPP:
                raise
            ep.odp = False
            ctx.notes["fallback_pinned"] = ctx.notes.get("fallback_pinned", 0) + 1
    try:
        mr, cost = yield from register_dmabuf(ctx, ep.nic, ep.fd, ep.length, wait=False)
        ep.mr = mr
        costs.append(cost)
    except KernelError as e:
        if fallback != "auto" or e.errno not in (Errno.EPERM, Errno.EOPNOTSUPP):
            raise
        ep.bounce, cost = yield from register_host(ctx, ep.nic, bounce_size(ctx))
        costs.append(cost)
        ctx.notes["fallback_staged"] = ctx.notes.get("fallback_staged", 0) + 1
    _refresh_sides(ctx, ep)


def _refresh_sides(ctx: Ctx, ep: _Endpoint, result: DmaResult | None = None) -> None:
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
    ep.send_side = nic_side(ctx, node, machine, ep.device, ep.nic, p2p=p2p, write=False)
    ep.recv_side = nic_side(ctx, node, machine, ep.device, ep.nic, p2p=p2p, write=True)


def _check(
    ctx: Ctx, ep: _Endpoint, nbytes: int, *, write: bool, prefetch: bool = False
) -> Generator[simpy.Event, Any, None]:
    """The NIC access check of one message through ``ep``; re-registers an MR that a NIC reset
    or a revoke took away (``ctx.notes["reregistrations"]``)."""
    mr = ep.mr
    if mr is None:
        return
    if prefetch and mr.odp and not mr.mtt_valid and not mr.deregistered:
        yield from ctx.call(ctx.proc.ibv_advise_mr, mr)
    try:
        result = yield from nic_access(ctx, mr, nbytes, write=write)
    except KernelError as e:
        if not (mr.deregistered or mr.revoked) or e.errno not in _REREGISTER:
            raise
        if not mr.deregistered and ctx.proc.mrs.get(mr.lkey) is mr:
            yield from ctx.call(ctx.proc.ibv_dereg_mr, mr)
        new, _cost = yield from register_dmabuf(ctx, ep.nic, ep.fd, ep.length, odp=ep.odp)
        ep.mr = new
        ctx.notes["reregistrations"] = ctx.notes.get("reregistrations", 0) + 1
        result = yield from nic_access(ctx, new, nbytes, write=write)
    _refresh_sides(ctx, ep, result)


# -- kv-transfer -----------------------------------------------------------------------------------


@_register(
    "kv-transfer",
    KvTransferParams,
    "KV-cache blocks sent (or received) through one registered buffer; latency percentiles",
)
def kv_transfer(ctx: Ctx, **params: Any) -> Gen:
    """Inference KV transfer (prefill → decode): one buffer of ``buffer`` bytes in device
    memory, exported and registered on ``nic`` (``access = "odp"`` asks for on-demand paging);
    requests of ``block`` bytes arrive at ``rate`` per second (Poisson, from the tenant's seeded
    generator; 0 = back to back) and are served in order: the GPU writes the block into the
    buffer (``produce``: a command submission that moves an evicted buffer back, then the
    write), then the NIC sends it (or, ``direction = "recv"``, writes it). Each request's
    latency runs from its arrival to the end of its transfer; throughput counts the NIC bytes.
    """
    p = KvTransferParams.model_validate(params)
    machine = ctx.machine
    t0 = ctx.now
    device = p.device or default_device(machine)
    nic = p.nic or nearest_nic(machine, device)
    handle = yield from ctx.call(ctx.proc.gem_create, device, p.buffer, p.domain)
    fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
    ep = _Endpoint(ctx.node.name, device, nic, handle, fd, p.buffer, p.access == "odp")
    ep.buffer = ctx.proc.buffer(handle)
    costs: list[float] = []
    yield from _setup_endpoint(ctx, ep, p.fallback, costs)
    yield from ctx.wait_pending()
    yield ctx.sleep(max(costs, default=0.0))
    ctx.notes["setup_time"] = ctx.now - t0
    ctx.notes["data_start"] = ctx.now
    ctx.notes["staged"] = 1.0 if ep.staged else 0.0
    write = p.direction == "recv"
    first = ep.recv_side if write else ep.send_side
    if first is not None:
        # the uncontended rate of the path the first message takes (P2P: Machine.p2p_capacity)
        ctx.notes["path_rate"] = min(first.cap, first.bottleneck)
    arrivals: deque[float] = deque()
    next_arrival = ctx.now
    served = 0
    while p.requests == 0 or served < p.requests:
        if p.rate > 0:
            while next_arrival <= ctx.now:
                arrivals.append(next_arrival)
                next_arrival += ctx.rng.expovariate(p.rate)
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
        yield from _check(ctx, ep, p.block, write=write, prefetch=p.prefetch)
        if ep.staged and ctx.cost.stage.mode == "pipeline":
            yield from _staged_pipeline(ctx, p.block, device, nic, write=write)
        else:
            side = ep.recv_side if write else ep.send_side
            assert side is not None
            yield from send(ctx, side, p.block)
        ctx.stats.record_transfer(p.block, ctx.now - arrived)
        served += 1
    ctx.notes["requests"] = served
    ctx.notes["data_end"] = ctx.now
    yield from _idle(ctx)


# -- allreduce -------------------------------------------------------------------------------------


class Collective:
    """The ranks of one all-reduce group across tenants (and nodes): the ring, a barrier, and
    the ring steps.

    Ranks are kept in member order (tenants in the order they joined -- spawn order -- and
    each tenant's devices in order), which is the ring. A tenant that dies or finishes leaves
    the group: its ranks drop out of the ring and nobody waits for it. ``world`` > 0 holds the
    first barrier until that many tenants joined.

    A ring step is started by the group, not by each tenant: every member submits its ranks'
    flows (:meth:`submit`), and when the last one has, all flows start together after the
    largest latency -- one rate computation for the whole cluster, where one per tenant would
    make a 1024-accelerator step quadratic -- and every member resumes when the step's last
    byte has arrived, which is also the step's barrier.
    """

    __slots__ = (
        "arrived",
        "env",
        "members",
        "name",
        "net",
        "ranks",
        "submitted",
        "waiting",
        "world",
    )

    def __init__(self, env: simpy.Environment, net: FlowNetwork, name: str, world: int = 0) -> None:
        self.env = env
        self.net = net
        self.name = name
        self.world = world
        self.members: list[str] = []
        self.ranks: list[_Endpoint] = []
        self.arrived: set[str] = set()
        self.waiting: list[simpy.Event] = []
        self.submitted: dict[str, tuple[list[FlowSpec], float]] = {}

    def join(self, tenant: str) -> None:
        """Become a member (at the workload's start, so the first barrier waits for it)."""
        if tenant not in self.members:
            self.members.append(tenant)

    def add_ranks(self, tenant: str, ranks: Sequence[_Endpoint]) -> None:
        """Put a member's ranks into the ring, in member order (not arrival order)."""
        self.ranks.extend(ranks)
        order = {m: i for i, m in enumerate(self.members)}
        self.ranks.sort(key=lambda r: order.get(r.owner, len(order)))

    def leave(self, tenant: str) -> None:
        if tenant in self.members:
            self.members.remove(tenant)
            self.ranks = [r for r in self.ranks if r.owner != tenant]
        self.arrived.discard(tenant)
        self.submitted.pop(tenant, None)
        self._release()
        self._launch()

    def barrier(self, tenant: str) -> simpy.Event:
        """An event that fires when every member reached the barrier."""
        event = self.env.event()
        self.arrived.add(tenant)
        self.waiting.append(event)
        self._release()
        return event

    def _ready(self, done: Iterable[str]) -> bool:
        return len(self.members) >= self.world and all(m in done for m in self.members)

    def _release(self) -> None:
        if self.waiting and self._ready(self.arrived):
            waiting, self.waiting = self.waiting, []
            self.arrived = set()
            for ev in waiting:
                ev.succeed()

    def submit(self, tenant: str, flows: list[FlowSpec], latency: float) -> simpy.Event:
        """This member's flows of the current step; fires when the whole step is done."""
        event = self.env.event()
        self.submitted[tenant] = (flows, latency)
        self.waiting.append(event)
        self.arrived.add(tenant)
        self._launch()
        return event

    def _launch(self) -> None:
        if not self.submitted or not self._ready(self.submitted):
            return
        specs = [f for m in self.members for f in self.submitted[m][0]]
        latency = max(lat for _, lat in self.submitted.values())
        waiting, self.waiting = self.waiting, []
        self.submitted = {}
        self.arrived = set()
        self.env.process(self._step(specs, latency, waiting))

    def _step(self, specs: list[FlowSpec], latency: float, waiting: list[simpy.Event]) -> Gen:
        yield self.env.timeout(latency)
        yield simpy.AllOf(self.env, self.net.transfer_many(specs))
        for ev in waiting:
            ev.succeed()

    def successor(self, rank: _Endpoint) -> _Endpoint:
        i = self.ranks.index(rank)
        return self.ranks[(i + 1) % len(self.ranks)]


def _collective(ctx: Ctx, name: str, world: int) -> Collective:
    key = f"collective:{name}"
    coll = ctx.sim.shared.get(key)
    if coll is None:
        coll = ctx.sim.shared[key] = Collective(ctx.env, ctx.sim.net, name, world)
    assert isinstance(coll, Collective)
    return coll


@_register(
    "allreduce",
    AllreduceParams,
    "ring all-reduce over RDMA NICs; one rank per device, one ring across tenants and nodes",
)
def allreduce(ctx: Ctx, **params: Any) -> Gen:
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
    2(N − 1)/N × ``size`` bytes per rank as one transfer after 2(N − 1) × ``nic.alpha``: the
    α–β form of the same algorithm (§1 item 2), identical for symmetric ranks and far cheaper
    for 128 of them. Each iteration the accelerator also writes the gradients (``size``) and
    reads the result (``size``). Throughput counts the bytes this tenant's ranks sent.
    """
    p = AllreduceParams.model_validate(params)
    machine = ctx.machine
    t0 = ctx.now
    devices = [d.name for d in machine.spec.devices] if p.devices == "all" else list(p.devices)
    if p.nics == "auto":
        nics = [nearest_nic(machine, d) for d in devices]
    else:
        if len(p.nics) != len(devices):
            raise ValueError(f"allreduce: {len(devices)} devices but {len(p.nics)} NICs")
        nics = list(p.nics)
    coll = _collective(ctx, p.group, p.world)
    coll.join(ctx.proc.comm)
    try:
        ranks: list[_Endpoint] = []
        costs: list[float] = []
        for dev, nic in zip(devices, nics, strict=True):
            length = machine.spec.device(dev).memory if p.buffer == "all" else p.buffer
            handle = ctx.call_nowait(ctx.proc.gem_create, dev, length, p.domain)
            fd = ctx.call_nowait(ctx.proc.prime_handle_to_fd, handle)
            ep = _Endpoint(ctx.node.name, dev, nic, handle, fd, length, p.access == "odp")
            ep.owner = ctx.proc.comm
            ep.buffer = ctx.proc.buffer(handle)
            yield from _setup_endpoint(ctx, ep, p.fallback, costs)
            ranks.append(ep)
        yield from ctx.wait_pending()
        yield ctx.sleep(max(costs, default=0.0))
        coll.add_ranks(ctx.proc.comm, ranks)
        yield coll.barrier(ctx.proc.comm)
        notes = ctx.notes
        notes["setup_time"] = ctx.now - t0
        notes["data_start"] = ctx.now
        notes["ranks"] = len(ranks)
        notes["world_ranks"] = len(coll.ranks)
        notes["staged_ranks"] = sum(1 for r in ranks if r.staged)
        notes["host_ranks"] = sum(1 for r in ranks if r.location != "vram")
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
            for nbytes, messages, reduced in plan:
                yield from _ring_step(ctx, coll, ranks, nbytes, messages)
                if p.compute and reduced:
                    yield from _compute_all(ctx, ranks, 2 * reduced, write=False)
                    yield from _compute_all(ctx, ranks, reduced, write=True)
                    yield coll.barrier(ctx.proc.comm)
            if p.compute:
                yield from _compute_all(ctx, ranks, p.size, write=False)
            done += 1
            notes["iterations"] = done
            notes["data_end"] = ctx.now
    finally:
        # done, killed or refused: the ring goes on without this tenant's ranks
        coll.leave(ctx.proc.comm)
    yield from _idle(ctx)


def _ring_step(
    ctx: Ctx, coll: Collective, ranks: list[_Endpoint], nbytes: int, messages: int
) -> Generator[simpy.Event, Any, None]:
    """Every rank of the group sends ``nbytes`` to its successor, concurrently (this tenant
    submits its ranks' flows to the group, :meth:`Collective.submit`); ``messages`` is how many
    message latencies the transfer pays (1 per ring step; 2(N − 1) in aggregate mode)."""
    for ep in ranks:
        yield from _check(ctx, ep, nbytes, write=False)
        yield from _check(ctx, ep, nbytes, write=True)
    latency = 0.0
    flows: list[FlowSpec] = []
    label = f"{ctx.proc.comm}:ring"
    for ep in ranks:
        succ = coll.successor(ep)
        assert ep.send_side is not None and succ.recv_side is not None
        links, cap, lat = route(ctx.sim, ep.send_side, succ.recv_side)
        latency = max(latency, lat + (messages - 1) * ctx.cost.nic.alpha)
        flows.append((nbytes, links, cap, label))
    t0 = ctx.env.now
    yield coll.submit(ctx.proc.comm, flows, latency)
    elapsed = ctx.env.now - t0
    for _ in ranks:
        ctx.stats.record_transfer(nbytes, elapsed)


def _compute_all(
    ctx: Ctx, ranks: list[_Endpoint], nbytes: int, *, write: bool
) -> Generator[simpy.Event, Any, None]:
    """Every local rank's accelerator accesses ``nbytes`` of its buffer, concurrently."""
    events = [
        ctx.env.process(device_access(ctx, ep.device, ep.location, nbytes, write=write))
        for ep in ranks
    ]
    yield simpy.AllOf(ctx.env, events)


# -- compositor ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Framebuffer:
    handle: int
    fd: int
    scanout: Scanout


@_register(
    "compositor",
    CompositorParams,
    "scanout at a frame rate; a new framebuffer every realloc_every; missed frames counted",
)
def compositor(ctx: Ctx, **params: Any) -> Gen:
    """A desktop compositor. At ``fps`` the display engine scans the current framebuffer out
    (``DisplayEngine.scan_frame``: the stale-DMA detector checks every frame). Every
    ``realloc_every`` (a new client surface, a resize) it allocates a new framebuffer in
    ``domain`` (GEM create + export + ``drmModeAddFB2``/flip, which pins it for the display)
    and drops the old one. An allocation the kernel refuses (``-ENOMEM`` when device memory is
    pinned full) is counted and retried every frame; each frame with a surface it could not
    allocate is a *missed frame* (``ctx.notes["missed_frames"]``)."""
    p = CompositorParams.model_validate(params)
    machine = ctx.machine
    device = p.device
    if device is None:
        owner = next((d.device for d in machine.spec.displays if d.name == p.display), None)
        device = owner or default_device(machine)
    display = machine.system.display(p.display)
    period = 1.0 / p.fps
    notes = ctx.notes
    notes.update(frames=0, missed_frames=0, alloc_failures=0, framebuffers=0)
    current: _Framebuffer | None = None
    next_realloc = ctx.now
    ctx.notes["data_start"] = ctx.now

    def allocate() -> Generator[simpy.Event, Any, _Framebuffer | None]:
        handle: int | None = None
        fd: int | None = None
        try:
            handle = yield from ctx.call(ctx.proc.gem_create, device, p.framebuffer, p.domain)
            fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
            scanout = yield from ctx.call(ctx.proc.set_scanout, p.display, fd)
        except KernelError:
            notes["alloc_failures"] += 1
            if fd is not None:
                yield from ctx.call(ctx.proc.close, fd)
            if handle is not None:
                yield from ctx.call(ctx.proc.gem_close, handle)
            return None
        notes["framebuffers"] += 1
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
                next_realloc = ctx.now + p.realloc_every
                pending = False
        if current is not None:
            display.scan_frame(current.scanout)
        notes["frames"] += 1
        if pending or current is None:
            notes["missed_frames"] += 1
        else:
            ctx.stats.record_transfer(p.framebuffer, ctx.now - frame_start)
        yield ctx.sleep(period - (ctx.now - frame_start) % period)


# -- app -------------------------------------------------------------------------------------------


@_register("app", AppParams, "a working set in device memory, touched every period")
def app(ctx: Ctx, **params: Any) -> Gen:
    """An application (a game, a CAD tool) with ``working_set`` bytes in ``buffers`` device
    buffers. Every ``period`` it touches ``touch`` × the set: a command submission per buffer
    (an evicted buffer moves back if there is room, ``Process.amdgpu_cs``) and the GPU's reads at
    the rate of wherever the buffer is (device memory, or over PCIe after an eviction, §1 item
    4). Allocation failures are retried every ``retry``. Each touch is a transfer whose latency
    includes waiting for a move back: the app's frame time grows while its set is evicted."""
    p = AppParams.model_validate(params)
    device = p.device or default_device(ctx.machine)
    each = max(p.working_set // p.buffers, 4096)
    handles: list[int] = []
    ctx.notes["alloc_failures"] = 0
    while len(handles) < p.buffers:
        try:
            handles.append((yield from ctx.call(ctx.proc.gem_create, device, each, p.domain)))
        except KernelError:
            ctx.notes["alloc_failures"] += 1
            yield ctx.sleep(p.retry)
    ctx.notes["data_start"] = ctx.now
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
        yield ctx.sleep(p.period - (ctx.now - start))


# -- pin-hog ---------------------------------------------------------------------------------------


@_register("pin-hog", PinHogParams, "allocates and pins (dma-buf MRs) until refused; keeps all")
def pin_hog(ctx: Ctx, **params: Any) -> Gen:
    """The stability camp's nightmare: allocate ``chunk`` bytes of device memory, export them
    and register them as a pinned dma-buf MR (EFA-style, no ODP), again and again, keeping
    everything. A refusal (allocation ``-ENOMEM``, a policy's denial) halves the chunk down to
    ``min_chunk``; a refusal at ``min_chunk`` waits ``retry`` and tries again (0: stop and just
    hold). Registration time follows §6.2. ``ctx.notes["pinned_bytes"]`` is what it holds."""
    p = PinHogParams.model_validate(params)
    machine = ctx.machine
    device = p.device or default_device(machine)
    nic = p.nic or nearest_nic(machine, device)
    chunk = p.chunk
    pinned = 0
    notes = ctx.notes
    notes.update(pinned_bytes=0, refusals=0, buffers=0)
    notes["data_start"] = ctx.now
    while p.limit is None or pinned < p.limit:
        size = chunk if p.limit is None else min(chunk, p.limit - pinned)
        handle: int | None = None
        fd: int | None = None
        try:
            handle = yield from ctx.call(ctx.proc.gem_create, device, size, p.domain)
            fd = yield from ctx.call(ctx.proc.prime_handle_to_fd, handle)
            yield from register_dmabuf(ctx, nic, fd, size)
        except KernelError:
            notes["refusals"] += 1
            if fd is not None:
                yield from ctx.call(ctx.proc.close, fd)
            if handle is not None:
                yield from ctx.call(ctx.proc.gem_close, handle)
            if chunk > p.min_chunk:
                chunk = max(p.min_chunk, chunk // 2)
                continue
            if p.retry <= 0:
                break
            yield ctx.sleep(p.retry)
            continue
        pinned += size
        notes["pinned_bytes"] = pinned
        notes["buffers"] += 1
        ctx.stats.record_transfer(size, 0.0)
    yield from _idle(ctx)


# -- pressure --------------------------------------------------------------------------------------


@_register("pressure", PressureParams, "allocation bursts that force eviction")
def pressure(ctx: Ctx, **params: Any) -> Gen:
    """Memory pressure: every ``period`` allocate ``burst`` bytes of ``domain`` in ``buffer``
    pieces (each allocation may evict other tenants' unpinned buffers -- a copy job whose fence
    the allocation waits for), hold them for ``hold``, free them. Refused allocations
    (``-ENOMEM`` when what is left is pinned) are counted (``ctx.notes["alloc_failures"]``);
    allocated bytes are this tenant's transfers."""
    p = PressureParams.model_validate(params)
    device = p.device or default_device(ctx.machine)
    notes = ctx.notes
    notes.update(alloc_failures=0, bursts=0)
    notes["data_start"] = ctx.now
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
                notes["alloc_failures"] += 1
                continue
            ctx.stats.record_transfer(size, ctx.now - t)
        yield ctx.sleep(p.hold)
        for h in handles:
            yield from ctx.call(ctx.proc.gem_close, h)
        done += 1
        notes["bursts"] = done
        yield ctx.sleep(p.period - (ctx.now - start))
    yield from _idle(ctx)


def params_model(name: str) -> type[BaseModel]:
    """The parameter model of workload ``name`` (``KeyError`` listing the known ones)."""
    try:
        return WORKLOADS[name].params
    except KeyError:
        raise KeyError(f"no workload {name!r} (expected one of {', '.join(WORKLOADS)})") from None
