"""How bytes travel: the NIC ends of a transfer, its route over the flow network, staging
through host memory, and the accelerator's own accesses to its buffer (``cost-model.md`` §1).

* **P2P versus host memory** (§1 items 3, 4): a buffer whose NIC mapping is peer-to-peer is
  read over ``path(device, nic)``, one that migrated to host memory over ``path(host, nic)``;
  each end of a transfer is capped by the RDMA and PCIe mechanisms for one message of its
  size and delays it by that message's latency (:meth:`Machine.nic_end
  <pinlab.platform.topology.Machine.nic_end>`: NIC reads are bounded by outstanding reads
  over the read latency and the host bridge's P2P forwarding, writes by the posted-write
  rate, both by the port);
* **staging** (§1 item 5): a bounce through a pinned host buffer next to the NIC -- the
  explicit chunk pipeline: each ``stage.chunk`` is copied by the copy engine over
  ``path(device, host)`` (``stage.copy_launch`` + the chunk at ``evict.d2h.genN``), then sent
  by the NIC from host memory (its own :meth:`~Machine.nic_end`), chunk *i* entering a stage
  when chunk *i − 1* left it. As one flow over both stages' links (host DRAM crossed twice)
  its rate is ``chunk / slowest stage time`` and its delay the first chunk's copy
  (:func:`staged_side`); :func:`staged_pipeline` runs the same pipeline chunk by chunk.
  ``stage.mode = "aggregate"`` is the documented fallback ``stage.pipeline_eff`` × the
  slowest stage, unused by the built-in scenarios;
* **the accelerator's own accesses** (§1 item 4, :func:`device_access`): a buffer in device
  memory is read and written at the on-device rate (``copy_engine.local_rate``, an
  uncontended delay), a buffer that migrated to host memory over the device's PCIe link (a
  flow that competes with everything else on it).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from pinlab.platform.topology import LinkUse, Machine
from pinlab.sim.copy_engine import local_rate
from pinlab.sim.engine import Ctx, Simulation
from pinlab.sim.flows import Link
from pinlab.sim.workloads.base import Gen


@dataclass(frozen=True, slots=True)
class Side:
    """One end of a NIC transfer on one node: the links between the buffer's memory and the
    wire (in the order a byte crosses them), the rate cap of that end (the mechanism's, for
    one message of the transfer's size), its uncontended bottleneck (``Machine.bottleneck``:
    DRAM / 2 when host memory is crossed twice), and the latency ``fill`` it adds (its half of
    the message latency; a staged end also the first chunk's copy). ``staged`` marks a bounce
    through host memory."""

    node: str
    uses: tuple[LinkUse, ...]
    cap: float
    bottleneck: float
    fill: float = 0.0
    staged: bool = False
    nic: str = ""  # the NIC this end goes through (its trace track)


def _port_rate(machine: Machine, nic: str, write: bool) -> float:
    return machine.links[machine.nic_port(nic)].capacity["rx" if write else "tx"]


def _end_cap(rate: float, where: str) -> float:
    if rate <= 0:
        raise ValueError(
            f"{where}: the PCIe path cannot carry this transfer (the host bridge "
            "forwards no P2P requests of this kind)"
        )
    return rate


def nic_side(
    ctx: Ctx,
    node: str,
    machine: Machine,
    device: str,
    nic: str,
    *,
    p2p: bool,
    write: bool,
    nbytes: int,
    qps: int = 1,
) -> Side:
    """The NIC end of an MR whose mapping is peer-to-peer (``p2p``: device memory through the
    BAR, §1 item 3) or host memory (after a migration, §1 item 4: the host memory of the
    NIC's socket), for messages of ``nbytes`` on ``qps`` QPs: :meth:`Machine.nic_end` gives
    its rate and delay."""
    port = LinkUse(machine.nic_port(nic), "rx" if write else "tx")
    memory = device if p2p else machine.host_of(nic)
    path = machine.path(nic, memory) if write else machine.path(memory, nic)
    end = machine.nic_end(nic, memory, nbytes, write=write, qps=qps)
    cap = _end_cap(end.rate, f"{nic} {'writing' if write else 'reading'} {memory}")
    uses = (port, *path) if write else (*path, port)
    return Side(node, uses, cap, machine.bottleneck(uses), end.latency, nic=nic)


def staging_chunks(
    ctx: Ctx, machine: Machine, device: str, nic: str, *, write: bool
) -> tuple[float, float, float, float]:
    """The two stages of staging one ``stage.chunk`` (§1 item 5): (copy seconds, copy rate,
    NIC seconds, NIC delay) -- the copy engine's ``stage.copy_launch`` + chunk / copy rate
    (``evict.d2h.genN`` out of the device, ``restore.h2d.genN`` into it), the NIC's chunk
    through its end of the mechanism for host memory (:meth:`Machine.nic_end`)."""
    cost = machine.cost
    gen = machine.spec.device(device).gen
    chunk = cost.stage.chunk
    copy = cost.restore_h2d(gen) if write else cost.evict_d2h(gen)
    end = machine.nic_end(nic, machine.host_of(nic), chunk, write=write)
    rate = _end_cap(end.rate, f"{nic} and host memory")
    return cost.stage.copy_launch + chunk / copy, copy, chunk / rate, end.latency


def staged_side(
    ctx: Ctx, node: str, machine: Machine, device: str, nic: str, *, write: bool
) -> Side:
    """A staged end (§1 item 5): device ↔ bounce buffer in the NIC's host memory by the copy
    engine, plus NIC ↔ host memory, one flow over both stages' links (host DRAM crossed
    twice). Pipelined by chunks (:func:`staging_chunks`): rate ``chunk / max(copy seconds,
    NIC seconds)``, delay one chunk's copy plus the NIC's delay. With ``stage.mode =
    "aggregate"`` (the fallback): ``stage.pipeline_eff`` × the slower stage's rate."""
    cost = machine.cost
    host = machine.host_of(nic)
    port = LinkUse(machine.nic_port(nic), "rx" if write else "tx")
    if write:
        uses = (port, *machine.path(nic, host), *machine.path(host, device))
    else:
        uses = (*machine.path(device, host), *machine.path(host, nic), port)
    t_copy, copy, t_nic, nic_delay = staging_chunks(ctx, machine, device, nic, write=write)
    chunk = cost.stage.chunk
    if cost.stage.mode == "aggregate":
        cap = cost.stage.pipeline_eff * min(copy, chunk / t_nic)
    else:
        cap = chunk / max(t_copy, t_nic)
    fill = t_copy + nic_delay
    return Side(node, uses, cap, machine.bottleneck(uses), fill, staged=True, nic=nic)


def route(
    sim: Simulation, sender: Side, receiver: Side | None = None
) -> tuple[list[Link], float, float]:
    """The flow for a message from ``sender``'s memory to ``receiver``'s (or to the wire):
    links, rate cap and latency (both ends' delays and, across nodes, the fabric's). Across
    nodes the fabric's shared core is crossed when the cluster has one."""
    links = sim.links(sender.node, sender.uses)
    cap = min(sender.cap, sender.bottleneck)
    latency = sender.fill
    if receiver is not None:
        if receiver.node != sender.node:
            core = sim.net.links.get("fabric:core/xfer")
            if core is not None:
                links.append(core)
            if sim.cluster is not None:
                latency += sim.cluster.spec.fabric.latency
        links += sim.links(receiver.node, receiver.uses)
        cap = min(cap, receiver.cap, receiver.bottleneck)
        latency += receiver.fill
    return links, cap, latency


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


def staged_pipeline(
    ctx: Ctx, nbytes: int, device: str, nic: str, *, write: bool
) -> Generator[simpy.Event, Any, float]:
    """The explicit staging pipeline (§1 item 5), chunk by chunk: chunks of ``stage.chunk``
    go through a copy stage (``stage.copy_launch``, then the chunk over the device ↔ host path
    at the copy rate) and a NIC stage (the chunk over host ↔ wire at the NIC's rate for host
    memory, then the NIC's delay, which the next chunks overlap: the NIC keeps several messages
    in flight, :func:`staging_chunks`); chunk *i* enters a stage when it left the previous one
    and chunk *i − 1* left this one, so T ≈ Σ t_i + (k − 1) · max t_i. Bounded per stage by
    ``stage.pipeline_eff`` only in the ``aggregate`` fallback."""
    machine = ctx.machine
    cost = ctx.cost
    chunk = cost.stage.chunk
    k = max(1, math.ceil(nbytes / chunk))
    host = machine.host_of(nic)
    port = LinkUse(machine.nic_port(nic), "rx" if write else "tx")
    _, copy_rate, t_nic, nic_delay = staging_chunks(ctx, machine, device, nic, write=write)
    # each stage: (links, rate, serial overhead per chunk, delay per chunk the next overlap)
    copy_stage = (
        ctx.sim.links(
            ctx.node.name, machine.path(host, device) if write else machine.path(device, host)
        ),
        copy_rate,
        cost.stage.copy_launch,
        0.0,
    )
    nic_uses = [port, *machine.path(nic, host)] if write else [*machine.path(host, nic), port]
    nic_stage = (ctx.sim.links(ctx.node.name, nic_uses), chunk / t_nic, 0.0, nic_delay)
    stages = [nic_stage, copy_stage] if write else [copy_stage, nic_stage]
    # trace tracks: the copy stage on the device's DMA lane, the NIC stage on the tenant's QP;
    # one flow per chunk joins its stages
    comm = ctx.proc.comm
    copy_track = (device, f"dma {comm}", "stage h2d" if write else "stage d2h")
    nic_track = (nic, f"qp {comm}", "stage recv" if write else "stage send")
    tracks = [nic_track, copy_track] if write else [copy_track, nic_track]
    env = ctx.env
    done = [[env.event() for _ in range(k)] for _ in stages]
    eff = cost.stage.pipeline_eff if cost.stage.mode == "aggregate" else 1.0
    flows = [ctx.new_flow() for _ in range(k)] if ctx.sim.recorder.tracing else [None] * k

    def finish(event: simpy.Event, delay: float) -> Gen:
        yield env.timeout(delay)
        event.succeed()

    def run_stage(j: int) -> Gen:
        links, rate, overhead, delay = stages[j]
        process, thread, name = tracks[j]
        for i in range(k):
            if j > 0:
                yield done[j - 1][i]
            size = min(chunk, nbytes - i * chunk)
            if overhead > 0:
                yield env.timeout(overhead)
            start = ctx.now
            yield ctx.sim.net.transfer(size, links, cap=rate * eff, label="stage")
            ctx.trace(
                process, thread, name, "transfer", start, {"bytes": size, "chunk": i}, flows[i]
            )
            if delay > 0:
                env.process(finish(done[j][i], delay))
            else:
                done[j][i].succeed()

    t0 = env.now
    for j in range(len(stages)):
        env.process(run_stage(j))
    yield done[-1][-1]
    return float(env.now - t0)


def local_delay(ctx: Ctx, device: str, location: str | None, nbytes: float) -> float | None:
    """How long the accelerator's access to ``nbytes`` of its buffer takes when that is an
    uncontended delay -- the buffer in device memory that is not a carve-out -- else None (the
    access is a flow, :func:`device_access`)."""
    if location != "vram":
        return None
    rate = ctx.local_rate(device)
    return None if rate is None else nbytes / rate


def trace_access(
    ctx: Ctx, device: str, location: str | None, nbytes: float, start: float, *, write: bool
) -> None:
    """The ``trace.json`` slice of one access by the accelerator, from ``start`` to now."""
    local = location == "vram" or ctx.local_rate(device) is None
    ctx.trace(
        device,
        f"dma {ctx.proc.comm}",
        ("write" if write else "read") + ("" if local else " host"),
        "transfer",
        start,
        {"bytes": nbytes, "location": location or "-"},
    )


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
    start = ctx.now
    if location == "vram" or spec.is_carve_out:
        uses = machine.path(device, device)
        if spec.is_carve_out and uses:
            yield ctx.sim.net.transfer(
                nbytes, ctx.sim.links(ctx.node.name, uses[:1]), label=f"{device}:access"
            )
        else:
            yield ctx.sleep(nbytes / local_rate(machine, device))
    else:
        host = machine.host_of(device)
        uses = machine.path(device, host) if write else machine.path(host, device)
        links = ctx.sim.links(ctx.node.name, uses)
        yield ctx.sim.net.transfer(nbytes, links, label=f"{device}:pcie")
    trace_access(ctx, device, location, nbytes, start, write=write)
