"""The simulation: a built platform on one SimPy clock, with bandwidth, copy engines,
workloads as processes, fault injection and metrics.

:class:`Simulation` builds every node of the platform (one :class:`~pinlab.platform.Machine` per
node, each with its own kernel, all on one profile), turns every directed link into a
:class:`~pinlab.sim.flows.Link` of one :class:`~pinlab.sim.flows.FlowNetwork` (node links are
qualified ``"<node>/<link>/<direction>"``; a single-node platform uses the node name
``"node"``), and attaches a :class:`~pinlab.sim.copy_engine.CopyEngine` to every TTM device, so
migrations and evictions take time and their fences signal when the bytes have moved.

A tenant runs a SimPy generator function of one :class:`Ctx` (the built-in workloads of
:mod:`pinlab.sim.workloads` bind their typed parameters and result first); :class:`Ctx` is
what it sees: its process (``ctx.proc``, a :class:`pinlab.uapi.Process`), syscalls that wait
for the fences the kernel collected (``yield from ctx.call(...)``), transfers over the flow
network (``yield from ctx.transfer(...)``; the NIC helpers of :mod:`pinlab.sim.workloads`),
and its statistics. Time enters the model only here: the kernel never sleeps, the simulator
waits on its fences. Userspace enters the model only through the process's syscalls, and the
faults through the machine's operations (``System.hot_unplug``, ``System.reset_nic``).

What a tenant achieved is reported by the tenant itself (:meth:`Tenant.report`); the copy
engines report their moves; :meth:`Simulation.teardown` ends every process and reports what a
real kernel would leak.

Determinism: every stochastic source draws from its own seeded numpy generator
(:class:`~pinlab.sim.randomness.Streams`: derived from the run seed and the component's name,
``ctx.random(source)``), SimPy's FIFO event order, and no wall-clock reads -- the same scenario
and seed give the same results, byte for byte; :attr:`Simulation.random_sources` lists the
sources that drew (none: the run is deterministic).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import numpy as np
import simpy

from pinlab.drivers.base import ExporterDriver
from pinlab.gcpolicy import retune, tuned_collector
from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.profile import KernelProfile, get_profile
from pinlab.kernel.ttm import CopyJob
from pinlab.platform import LinkUse, Machine, PlatformSpec, build
from pinlab.platform.cluster import Cluster, ClusterSpec, build_cluster
from pinlab.sim.collective import Collectives
from pinlab.sim.copy_engine import CopyEngine, CopyRates, local_rate
from pinlab.sim.fences import wait_all
from pinlab.sim.flows import FlowNetwork, Link
from pinlab.sim.metrics import (
    TENANT_METRICS,
    Metric,
    Recorder,
    TenantResult,
    TenantStats,
    TraceArgs,
    TraceInstant,
    TraceSlice,
    metric,
    num,
    report_fields,
    track_name,
)
from pinlab.sim.randomness import Streams
from pinlab.sim.sampling import Sampler
from pinlab.uapi.process import Process

T = TypeVar("T")
Run = Callable[["Ctx"], Generator[simpy.Event, Any, Any]]
"""What a tenant runs: a generator function of its :class:`Ctx`."""

SINGLE_NODE = "node"


@dataclass(slots=True)
class Tenant:
    """One workload instance: its process, statistics, result and SimPy process."""

    name: str
    node: str
    proc: Process
    stats: TenantStats
    result: TenantResult
    ctx: Ctx
    process: simpy.Process | None = None
    error: BaseException | None = None

    def report(self, duration: float) -> dict[str, Metric]:
        """``tenant.<name>.*``: what it moved and suffered, its denials (counted by its process
        at the syscall boundary, by errno and by the policy that refused), whether it was gone
        at the end or died of an error, and its workload's result fields once it started."""
        stats, result, denials = self.stats, self.result, self.proc.stats
        base = f"tenant.{self.name}"
        start = result.data_start
        if start is None:
            start = stats.started if stats.started is not None else 0.0
        end = result.data_end
        if end is None:
            end = stats.finished if stats.finished is not None else duration
        elapsed = max(end - start, 0.0)
        spec = TENANT_METRICS
        values: dict[str, float | int] = {
            "throughput": num(stats.bytes / elapsed if elapsed > 0 else 0.0),
            "bytes": num(stats.bytes),
            "transfers": stats.transfers,
            "latency_p50": num(stats.percentile(50)),
            "latency_p99": num(stats.percentile(99)),
            "stall_time": num(stats.stall_time),
            "odp_faults": stats.odp_faults,
            "denials": denials.total,
        }
        m = {f"{base}.{name}": spec[name](value) for name, value in values.items()}
        for errno in sorted(denials.denials):
            member = spec["denied.<ERRNO>"].fill(errno.lstrip("-"))
            m[f"{base}.{member.name}"] = member(denials.denials[errno])
        for policy in sorted(denials.denials_by_policy):
            member = spec["denied_by.<policy>"].fill(policy)
            m[f"{base}.{member.name}"] = member(denials.denials_by_policy[policy])
        m[f"{base}.killed"] = spec["killed"](0 if self.proc.alive else 1)
        m[f"{base}.failed"] = spec["failed"](1 if self.error is not None else 0)
        if stats.started is not None:
            m.update(report_fields(result, base))
        return m


@dataclass(slots=True)
class Leaks:
    """What :meth:`Simulation.teardown` found after every process exited."""

    leaks: int = metric(
        "count", "what a real kernel would leak, after exit", default=0, integral=True
    )
    leaked_bytes: int = metric(
        "B", "device memory still allocated after every process exited", default=0, integral=True
    )


@dataclass(slots=True)
class NodeState:
    """One node of the simulation."""

    name: str
    machine: Machine
    engines: dict[str, CopyEngine] = field(default_factory=dict)
    unplugged: dict[str, ExporterDriver] = field(default_factory=dict)
    """Exporters a hot-unplug removed, by device name (their memory is reported as it was)."""
    local_rates: dict[str, float | None] = field(default_factory=dict)
    """Each device's on-device rate once asked for (:meth:`Ctx.local_rate`)."""

    @property
    def kernel(self) -> Kernel:
        return self.machine.kernel


class Simulation:
    """One run of one platform under one kernel profile."""

    def __init__(
        self,
        platform: PlatformSpec | ClusterSpec,
        profile: KernelProfile | str | None = None,
        *,
        cost_overrides: dict[str, object] | None = None,
        seed: int = 0,
        sample_interval: float = 0.01,
    ) -> None:
        self.env = simpy.Environment()
        self.seed = seed
        self.streams = Streams(seed)
        self.net = FlowNetwork(self.env)
        self.recorder = Recorder()
        self.sample_interval = sample_interval
        self.tenants: dict[str, Tenant] = {}
        self._by_process: dict[tuple[str, int], Tenant] = {}
        self._routes: dict[tuple[str, tuple[LinkUse, ...]], tuple[Link, ...]] = {}
        self.nodes: dict[str, NodeState] = {}
        self.collectives = Collectives(self.env, self.net)
        clock = self._now
        with tuned_collector():  # the platform is long-lived: gcpolicy
            if isinstance(platform, ClusterSpec):
                prof = profile if isinstance(profile, KernelProfile) else None
                name = profile if isinstance(profile, str) else None
                cluster = build_cluster(
                    platform, prof or name, overrides=cost_overrides, clock=clock
                )
                self.cluster: Cluster | None = cluster
                for node_name, machine in cluster.machines():  # built here, node by node
                    self.nodes[node_name] = NodeState(node_name, machine)
                    if len(self.nodes) & (len(self.nodes) - 1) == 0:
                        retune()  # the heap doubled: keep the collector's threshold in step
                for key, cap in cluster.directed_capacities().items():
                    self.net.add_link(key, cap)
            else:
                self.cluster = None
                kernel = Kernel(get_profile(profile) if isinstance(profile, str) else profile)
                machine = build(platform, kernel, overrides=cost_overrides, clock=clock)
                self.nodes[SINGLE_NODE] = NodeState(SINGLE_NODE, machine)
                for key, cap in machine.directed_capacities().items():
                    self.net.add_link(f"{SINGLE_NODE}/{key}", cap)
            for node in self.nodes.values():
                node.machine.system.on_exit.append(partial(self._process_exited, node.name))
                self._attach_copy_engines(node)
                for dev in node.machine.exporters:
                    self.recorder.add_process(track_name(node.name, dev), "device")
                for nic in node.machine.nics:
                    self.recorder.add_process(track_name(node.name, nic), "nic")
        self._sampling = Sampler(self)
        self.env.process(self._sampler())

    # -- construction ----------------------------------------------------------------------
    def _now(self) -> float:
        return float(self.env.now)

    def key(self, node: str, use: LinkUse) -> str:
        """The flow-network name of a node link use."""
        if self.cluster is not None and ("/" in use.link or use.link in self.cluster.fabric):
            # already qualified by the cluster, or a fabric link (shared by every node)
            return f"{use.link}/{use.direction}"
        return f"{node}/{use.link}/{use.direction}"

    def links(self, node: str, uses: list[LinkUse] | tuple[LinkUse, ...]) -> list[Link]:
        """The flow-network links of ``uses`` on ``node`` (a new list). A tuple's, which a
        workload's route keeps (``Side.uses``) and asks for at every message, is looked up
        once: the network's links never change."""
        if not isinstance(uses, tuple):
            return [self.net.links[self.key(node, u)] for u in uses]
        found = self._routes.get((node, uses))
        if found is None:
            found = self._routes[node, uses] = tuple(
                self.net.links[self.key(node, u)] for u in uses
            )
        return list(found)

    def _attach_copy_engines(self, node: NodeState) -> None:
        machine = node.machine
        cost = machine.cost
        for name, driver in machine.exporters.items():
            bdev = driver.bdev
            if bdev is None:
                continue  # static exporters (habanalabs) never move memory
            spec = machine.spec.device(name)
            host = machine.host_of(name)
            to_host = self.links(node.name, machine.path(name, host))
            from_host = self.links(node.name, machine.path(host, name))
            rates = CopyRates(
                d2h=cost.evict_d2h(spec.gen),
                h2d=cost.restore_h2d(spec.gen),
                local=local_rate(machine, name),
            )
            if cost.evict.moveback_throttle:
                # a driver's estimate of its copy throughput is the copy engine's D2H rate
                # (``evict.moveback_throttle``'s rate is an open assumption, cost-model.md §8)
                driver.set_move_throttle(rates.d2h)
            node.engines[name] = CopyEngine(
                self.env,
                self.net,
                bdev,
                rates,
                to_host=to_host,
                from_host=from_host,
                on_job=self._copy_hook(node.name, name),
            )

    def _copy_hook(self, node: str, device: str) -> Callable[[CopyJob, float, float], None]:
        process = track_name(node, device)

        def hook(job: CopyJob, start: float, end: float) -> None:
            self._copy_done(node, device, job.kind, job.nbytes, start, end)
            if self.recorder.tracing:
                src = job.src.name.lower() if job.src is not None else "-"
                name = "evict" if job.evict else job.kind
                # the BO's owner, not its name: BO serials are process-global, so they would
                # make trace.json differ between runs in one interpreter
                owner = job.bo.name.rstrip("0123456789").rstrip("-") or "bo"
                args: TraceArgs = {
                    "bytes": job.nbytes,
                    "owner": owner,
                    "from": src,
                    "to": job.dst.name.lower(),
                }
                rec = self.recorder
                rec.log(TraceSlice(process, "copy engine", name, "copy", start, end - start, args))
                if job.evict:
                    rec.log(TraceInstant(start, process, "copy engine", "eviction", owner))

        return hook

    def _copy_done(
        self, node: str, device: str, kind: str, nbytes: int, start: float, end: float
    ) -> None:
        self.recorder.event(
            start, f"copy-{kind}", f"{node}/{device} {nbytes} B for {end - start:.6f} s"
        )

    # -- tenants ---------------------------------------------------------------------------
    def node(self, name: str | None = None) -> NodeState:
        if name is None:
            name = next(iter(self.nodes))
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node named {name!r} (have {', '.join(self.nodes)})") from None

    def spawn(
        self,
        name: str,
        run: Run,
        *,
        result: TenantResult | None = None,
        node: str | None = None,
        start: float = 0.0,
        process_args: dict[str, Any] | None = None,
    ) -> Tenant:
        """Start ``run(ctx)`` as tenant ``name`` on ``node`` at ``start`` seconds, in a new
        process (``process_args``: ``System.spawn``'s credentials and limits); ``result`` is
        what the workload fills in (default: a bare :class:`TenantResult`). Built-in
        workloads start through :func:`pinlab.sim.workloads.spawn`."""
        if name in self.tenants:
            raise ValueError(f"tenant {name!r} already exists")
        state = self.node(node)
        proc = state.machine.system.spawn(name, **(process_args or {}))
        stats = self.recorder.tenant(name)
        ctx = Ctx(self, state, proc, stats, name)
        tenant = Tenant(name, state.name, proc, stats, result or TenantResult(), ctx)
        self.tenants[name] = tenant
        self._by_process[(state.name, proc.pid)] = tenant
        self._sampling.add_tenant(tenant)
        tenant.process = self.env.process(self._run_tenant(tenant, run, start))
        return tenant

    def _run_tenant(
        self, tenant: Tenant, run: Run, start: float
    ) -> Generator[simpy.Event, Any, None]:
        try:
            # a process killed before its start never runs its workload: the interrupt
            # ends the wait as it ends a running workload
            if start > 0:
                yield self.env.timeout(start)
            tenant.stats.started = self.env.now
            yield from run(tenant.ctx)
        except simpy.Interrupt:
            pass
        except KernelError as e:
            # a denial the workload did not handle ends it; the program exits with status 1,
            # which releases what it held, as a real program that dies of an error does
            tenant.error = e
            tenant.proc.exit(1)
        tenant.stats.finished = self.env.now

    # -- faults ----------------------------------------------------------------------------
    def at(self, time: float, action: Callable[[], None], label: str = "") -> None:
        """Run ``action`` at simulated ``time`` (fault injection)."""

        def fire() -> Generator[simpy.Event, Any, None]:
            # ``time`` is absolute, not a delay from the call
            yield self.env.timeout(max(time - self.env.now, 0.0))
            self.recorder.event(self.env.now, "fault", label or action.__name__)
            action()

        self.env.process(fire())

    def kill(self, tenant: str) -> None:
        """``kill -9`` a tenant's process: the kernel tears down, the workload stops."""
        self.tenants[tenant].proc.kill()

    def _process_exited(self, node: str, proc: Process) -> None:
        """``System.on_exit`` of ``node``: a tenant's process is exiting (killed, its device
        unplugged, or at the end of the run), so its workload stops -- unless the workload is
        what runs now (it ends its process itself after an unhandled denial)."""
        tenant = self._by_process.get((node, proc.pid))
        if tenant is None or tenant.process is None:
            return
        if tenant.process.is_alive and tenant.process is not self.env.active_process:
            tenant.process.interrupt("exited")

    # -- sampling --------------------------------------------------------------------------
    def _sampler(self) -> Generator[simpy.Event, Any, None]:
        while True:
            self.sample()
            yield self.env.timeout(self.sample_interval)

    def sample(self) -> None:
        """Record every device region's used/pinned/free bytes and fragmentation, every
        tenant's cumulative bytes and denials, every link's mean utilisation since the last
        sample, and stale-DMA incidents so far -- reading only what changed since the last
        sample (:mod:`pinlab.sim.sampling`). Series store points only on change."""
        self._sampling.sample()

    def sample_regions(self, node: str, device: str, driver: ExporterDriver) -> None:
        """Record the used/pinned/free bytes and fragmentation of every region of ``device``
        now (a hot-unplug, for the device's last samples)."""
        now = self.env.now
        rec = self.recorder
        for region in driver.regions():
            base = f"device.{node}/{device}.{region.name}"
            rec.sample(f"{base}.used", now, region.used)
            rec.sample(f"{base}.pinned", now, region.pinned)
            rec.sample(f"{base}.free", now, region.free)
            rec.sample(f"{base}.fragmentation", now, round(region.fragmentation, 6))

    # -- running ---------------------------------------------------------------------------
    def run(self, until: float) -> Recorder:
        """Run to simulated time ``until`` and return the recorder (under the tuned
        collector, :mod:`pinlab.gcpolicy`: the run's heap is long-lived; entering it
        counts the frozen heap, so a caller that steps ``env.run`` in many small steps
        enters it once around them)."""
        with tuned_collector():
            self.env.run(until=until)
        self.sample()
        return self.recorder

    @property
    def random_sources(self) -> list[str]:
        """The stochastic sources that drew in this run (``"<tenant>/<source>"``), sorted;
        empty: the run is deterministic and its seed changes nothing."""
        return self.streams.sources

    def stale_incidents(self) -> int:
        return sum(len(n.machine.system.detector.incidents) for n in self.nodes.values())

    def teardown(self) -> Leaks:
        """End of the run: every process exits (in kernel order, ``Process.exit``); then what
        a real kernel would leak (``kernel.leaks``) and the device memory (VRAM, GTT) still
        allocated, unplugged devices included."""
        out = Leaks()
        for node in self.nodes.values():
            system = node.machine.system
            for proc in list(system.live_processes()):
                proc.exit()
            system.reap()
            kernel = node.kernel
            kernel.take_waits()
            out.leaks += len(kernel.leaks)
            for driver in [*system.exporters.values(), *node.unplugged.values()]:
                for region in driver.regions():
                    if region.name in ("vram", "gtt"):
                        out.leaked_bytes += region.used
        return out


class Ctx:
    """What a workload sees: its process, syscalls that wait in simulated time, transfers."""

    def __init__(
        self,
        sim: Simulation,
        node: NodeState,
        proc: Process,
        stats: TenantStats,
        name: str,
    ) -> None:
        self.sim = sim
        self.env = sim.env
        self.node = node
        self.machine = node.machine
        self.cost = node.machine.cost
        self.proc = proc
        self.stats = stats
        self.name = name
        self._tracks: dict[str, str] = {}  # trace process names by device/NIC/link (trace)

    def random(self, source: str) -> np.random.Generator:
        """The seeded generator of this tenant's stochastic ``source`` (``"arrivals"``,
        ``"odp-tail"``, ...): :meth:`Streams.generator` of ``"<tenant>/<source>"``. Ask for it
        only where a number is drawn: asking makes the run stochastic."""
        return self.sim.streams.generator(f"{self.name}/{source}")

    @property
    def now(self) -> float:
        return float(self.env.now)

    def trace(
        self,
        process: str,
        thread: str,
        name: str,
        cat: str,
        start: float,
        args: TraceArgs | None = None,
        flow: int | None = None,
    ) -> None:
        """Log a ``trace.json`` slice from ``start`` to now on ``process`` (a device, NIC or
        link of this node) / ``thread``."""
        rec = self.sim.recorder
        if rec.tracing:
            # one string per process name, not one per slice: an all-reduce logs ~24 slices
            # per accelerator, on a few names each
            proc = self._tracks.get(process)
            if proc is None:
                proc = self._tracks[process] = track_name(self.node.name, process)
            rec.log(TraceSlice(proc, thread, name, cat, start, self.now - start, args, flow))

    def local_rate(self, device: str) -> float | None:
        """The rate of the accelerator's accesses to its own memory on this node
        (:func:`~pinlab.sim.copy_engine.local_rate`), None when that memory is host DRAM (a
        carve-out: the access is a flow). Read once per node and device: the platform's
        description and costs do not change during a run."""
        rates = self.node.local_rates
        if device in rates:
            return rates[device]
        machine = self.machine
        rate = None if machine.spec.device(device).is_carve_out else local_rate(machine, device)
        rates[device] = rate
        return rate

    def new_flow(self) -> int:
        """A flow id joining the stages of one staged message in ``trace.json``."""
        return self.sim.recorder.new_flow()

    def sleep(self, seconds: float) -> simpy.Timeout:
        return self.env.timeout(max(seconds, 0.0))

    def call(
        self, fn: Callable[..., T], *args: Any, **kwargs: Any
    ) -> Generator[simpy.Event, Any, T]:
        """Run a syscall (a denial is logged, :meth:`call_nowait`, and re-raised); then wait
        for the fences the kernel collected (stall time)."""
        try:
            result = self.call_nowait(fn, *args, **kwargs)
        except KernelError:
            yield from self.wait_pending()
            raise
        fences = self.proc.take_waits()
        if fences:  # what wait_pending does, without its generator on every NIC access
            yield from self._wait(fences)
        return result

    def call_nowait(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a syscall without waiting: the fences it collected stay in ``proc.waits``
        until :meth:`wait_pending`, so that one tenant can start several migrations and wait
        for them together, as parallel registrations on several devices do.

        A denial is counted once, by the process at the syscall boundary
        (``Process.stats``); here it is logged as an event and a trace instant, with the
        policy that refused (``KernelError.policy``)."""
        try:
            return fn(*args, **kwargs)
        except KernelError as e:
            rec = self.sim.recorder
            rec.event(self.now, "denial", f"{self.proc.comm}: {e}")
            if rec.tracing:
                tenants = track_name(self.node.name, "tenants")
                rec.add_process(tenants, "tenants")
                detail = f"{e} ({e.policy or '-'})"
                rec.log(TraceInstant(self.now, tenants, self.proc.comm, "denial", detail))
            raise

    def wait_pending(self) -> Generator[simpy.Event, Any, None]:
        """Wait for every fence this tenant's calls collected so far (stall time)."""
        yield from self._wait(self.proc.take_waits())

    def _wait(self, fences: list[Any]) -> Generator[simpy.Event, Any, None]:
        if fences:
            t0 = self.env.now
            yield wait_all(self.env, fences)
            self.stats.stall_time += self.env.now - t0

    def transfer(
        self,
        nbytes: float,
        uses: list[LinkUse] | tuple[LinkUse, ...],
        *,
        cap: float | None = None,
        latency: float = 0.0,
        label: str = "",
        record: bool = True,
    ) -> Generator[simpy.Event, Any, float]:
        """Move ``nbytes`` over a path of this node's links; returns the elapsed time."""
        t0 = self.env.now
        if latency > 0:
            yield self.env.timeout(latency)
        t1 = self.now
        yield self.sim.net.transfer(
            nbytes, self.sim.links(self.node.name, uses), cap=cap, label=label
        )
        if uses:
            self.trace(
                f"link {uses[0].link}",
                f"xfer {self.proc.comm}",
                label or "transfer",
                "transfer",
                t1,
                {"bytes": nbytes},
            )
        elapsed = self.env.now - t0
        if record:
            self.stats.record_transfer(nbytes, elapsed)
        return elapsed
