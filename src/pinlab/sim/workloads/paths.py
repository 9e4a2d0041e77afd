"""How bytes travel: the NIC ends of a transfer, its route over the flow network, staging
through host memory, and the accelerator's own accesses to its buffer (``cost-model.md`` §1).

* **P2P versus host memory** (§1 items 3, 4): a buffer whose NIC mapping is peer-to-peer is
  read over ``path(device, nic)`` capped at ``Machine.p2p_capacity``, one that migrated to
  host memory over ``path(host, nic)`` at the NIC's rate; every message pays ``nic.alpha``
  (§1 item 2);
* **staging** (§1 item 5): a bounce through a pinned host buffer next to the NIC -- a D2H copy
  over ``path(device, host)`` at ``evict.d2h.genN`` and the NIC from host memory, as one flow
  over both stages' links (so host DRAM is crossed twice), capped at ``stage.pipeline_eff`` ×
  the slowest stage and delayed by one chunk's fill (``stage.copy_launch`` + ``stage.chunk`` /
  copy rate) -- the *aggregate* mode; :func:`staged_pipeline` is the explicit chunk pipeline
  (``stage.mode = "pipeline"``);
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
    local = location == "vram" or spec.is_carve_out
    start = ctx.now
    if local:
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
    ctx.trace(
        device,
        f"dma {ctx.proc.comm}",
        ("write" if write else "read") + ("" if local else " host"),
        "transfer",
        start,
        {"bytes": nbytes, "location": location or "-"},
    )
