"""Headline metrics of one run (``summary.json``), with units.

Names are dotted; node-qualified parts use ``/`` (``node/gpu0``, ``node03/pcie:gaudi0/up``):

* ``tenant.<t>.*`` -- ``throughput`` (B/s: bytes moved over the tenant's data phase, from
  ``ctx.notes["data_start"]`` -- after its setup: allocation, registration, migration -- to the
  end of the run or of the tenant), ``bytes``, ``transfers``, ``latency_p50``/``latency_p99``
  (s), ``stall_time`` (s: fence waits and ODP faults), ``odp_faults``, ``denials`` and
  ``denied.<ERRNO>`` (by errno), ``denied_by.<policy>`` (by the policy that refused), and
  the workload's notes (``setup_time``, ``frames``, ``missed_frames``, ``pinned_bytes`` ...);
* ``device.<node>/<dev>.<region>.*`` -- ``used_peak``, ``used_final``, ``pinned_peak``,
  ``pinned_final``, ``free_final``, ``fragmentation_final``, ``evictions``, ``evicted_bytes``
  (regions that held anything); ``device.<node>/<dev>.bytes_migrated`` (copy-engine moves),
  ``.move_notifies`` (the exporter's ``move_notify`` calls);
* ``nic.<node>/<nic>.*`` -- ``odp_faults``, ``odp_invalidations``, ``mrs_reset``;
* ``link.<node>/<link>/<dir>.utilisation`` -- mean over the run, links that carried bytes;
* ``global.*`` -- ``stale_dma_incidents`` (0 in every upstream-correct configuration),
  ``kernel_warnings``, ``denials``, ``faults``, and after every process exited at the end,
  ``leaks`` (what a real kernel would leak) and ``leaked_bytes`` (device memory still used).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pinlab.kernel.ttm import TtmDevice, TtmMemType
from pinlab.policy.config import AppliedPolicy
from pinlab.scenarios.result import Metric
from pinlab.sim.engine import Simulation

__all__ = ["collect_metrics"]

_MEM = {"vram": TtmMemType.VRAM, "gtt": TtmMemType.TT, "system": TtmMemType.SYSTEM}

_NOTE_UNITS = (
    ("_bytes", "B"),
    ("_time", "s"),
    ("_rate", "B/s"),
    ("data_start", "s"),
)


def _note_unit(key: str) -> str:
    for suffix, unit in _NOTE_UNITS:
        if key.endswith(suffix):
            return unit
    return "count"


def _num(x: float) -> float:
    """Floats rounded to 12 significant digits: stable text, no float noise in summaries."""
    return float(f"{x:.12g}")


def collect_metrics(
    sim: Simulation, duration: float, policies: Mapping[str, AppliedPolicy] | None = None
) -> dict[str, Metric]:
    """Every headline metric of a finished run (module docstring), then the teardown check."""
    m: dict[str, Metric] = {}
    rec = sim.recorder
    total_denials = 0
    for name, tenant in sim.tenants.items():
        stats = tenant.stats
        notes = tenant.ctx.notes
        base = f"tenant.{name}"
        start = notes.get("data_start", stats.started if stats.started is not None else 0.0)
        end = notes.get("data_end", stats.finished if stats.finished is not None else duration)
        elapsed = max(end - start, 0.0)
        m[f"{base}.throughput"] = Metric(
            _num(stats.bytes / elapsed if elapsed > 0 else 0.0),
            "B/s",
            "bytes moved per second of the data phase (after setup)",
        )
        m[f"{base}.bytes"] = Metric(_num(stats.bytes), "B", "bytes moved")
        m[f"{base}.transfers"] = Metric(stats.transfers, "count", "transfers completed")
        m[f"{base}.latency_p50"] = Metric(_num(stats.percentile(50)), "s", "median latency")
        m[f"{base}.latency_p99"] = Metric(_num(stats.percentile(99)), "s", "99th percentile")
        m[f"{base}.stall_time"] = Metric(
            _num(stats.stall_time), "s", "waiting for fences and ODP faults"
        )
        m[f"{base}.odp_faults"] = Metric(stats.odp_faults, "count", "NIC page faults taken")
        denials = sum(stats.denials.values())
        total_denials += denials
        m[f"{base}.denials"] = Metric(denials, "count", "calls the kernel refused")
        for errno in sorted(stats.denials):
            m[f"{base}.denied.{errno.lstrip('-')}"] = Metric(
                stats.denials[errno], "count", f"calls refused with {errno}"
            )
        for policy in sorted(stats.denials_by_policy):
            m[f"{base}.denied_by.{policy}"] = Metric(
                stats.denials_by_policy[policy], "count", f"refusals by the {policy} policy"
            )
        m[f"{base}.killed"] = Metric(
            0 if tenant.proc.alive else 1, "count", "1 if the process was gone at the end"
        )
        m[f"{base}.failed"] = Metric(
            1 if tenant.error is not None else 0, "count", "1 if an unhandled error ended it"
        )
        for key in sorted(notes):
            if key in ("data_start", "data_end"):
                continue
            m[f"{base}.{key}"] = Metric(
                _num(notes[key]), _note_unit(key), "reported by the workload"
            )
    _devices(sim, m)
    _nics(sim, m)
    for key in sorted(sim.net.links):
        link = sim.net.links[key]
        if link.bytes_carried > 0:
            m[f"link.{key}.utilisation"] = Metric(
                _num(link.utilisation(duration)), "ratio", "mean utilisation over the run"
            )
    warnings = sum(n.kernel.warnings.count() for n in sim.nodes.values())
    m["global.stale_dma_incidents"] = Metric(
        sim.stale_incidents(), "count", "DMA through a stale or unfenced mapping (must be 0)"
    )
    m["global.kernel_warnings"] = Metric(warnings, "count", "kernel WARN hits")
    m["global.denials"] = Metric(total_denials, "count", "calls refused, all tenants")
    m["global.faults"] = Metric(
        sum(v for k, v in rec.counters.items() if k.startswith("faults/") and k.count("/") == 1),
        "count",
        "faults injected",
    )
    leaks, leaked = _teardown(sim)
    m["global.leaks"] = Metric(leaks, "count", "what a real kernel would leak, after exit")
    m["global.leaked_bytes"] = Metric(
        leaked, "B", "device memory still allocated after every process exited"
    )
    return m


def _devices(sim: Simulation, m: dict[str, Metric]) -> None:
    rec = sim.recorder
    for node_name, node in sim.nodes.items():
        drivers = dict(node.machine.exporters)
        for dev, driver in node.unplugged.items():
            drivers.setdefault(dev, driver)
        for dev in sorted(drivers):
            driver = drivers[dev]
            prefix = f"device/{node_name}/{dev}"
            base = f"device.{node_name}/{dev}"
            bdev = getattr(driver, "bdev", None)
            regions = driver.regions()
            if not any(_region_used(rec.series, prefix, r.name, r.used) for r in regions):
                continue
            for region in regions:
                series = rec.series
                used = series.get(f"{prefix}/{region.name}/used")
                pinned = series.get(f"{prefix}/{region.name}/pinned")
                frag = series.get(f"{prefix}/{region.name}/fragmentation")
                free = series.get(f"{prefix}/{region.name}/free")
                used_peak = used.peak() if used is not None else region.used
                man = bdev.manager(_MEM[region.name]) if isinstance(bdev, TtmDevice) else None
                evictions = man.evictions if man is not None else 0
                rb = f"{base}.{region.name}"
                m[f"{rb}.size"] = Metric(region.size, "B", "capacity")
                m[f"{rb}.used_peak"] = Metric(int(used_peak), "B", "peak bytes allocated")
                m[f"{rb}.used_final"] = Metric(
                    int(used.last if used is not None else region.used), "B", "allocated at the end"
                )
                m[f"{rb}.pinned_peak"] = Metric(
                    int(pinned.peak() if pinned is not None else region.pinned), "B", "peak pinned"
                )
                m[f"{rb}.pinned_final"] = Metric(
                    int(pinned.last if pinned is not None else region.pinned),
                    "B",
                    "pinned at the end",
                )
                m[f"{rb}.free_final"] = Metric(
                    int(free.last if free is not None else region.free), "B", "free at the end"
                )
                m[f"{rb}.fragmentation_final"] = Metric(
                    _num(frag.last if frag is not None else region.fragmentation),
                    "ratio",
                    "1 - largest free block / free bytes",
                )
                m[f"{rb}.evictions"] = Metric(evictions, "count", "buffers evicted out of it")
                m[f"{rb}.evicted_bytes"] = Metric(
                    man.evicted_bytes if man is not None else 0, "B", "bytes evicted out of it"
                )
            m[f"{base}.bytes_migrated"] = Metric(
                int(rec.counters.get(f"{prefix}/bytes_migrated", 0)),
                "B",
                "bytes moved by its copy engine",
            )
            m[f"{base}.move_notifies"] = Metric(
                int(getattr(driver, "move_notifies", 0)), "count", "move_notify calls it sent"
            )


def _region_used(series: Mapping[str, Any], prefix: str, region: str, now: int) -> bool:
    used = series.get(f"{prefix}/{region}/used")
    return now > 0 or (used is not None and used.peak() > 0)


def _nics(sim: Simulation, m: dict[str, Metric]) -> None:
    rec = sim.recorder
    for node_name, node in sim.nodes.items():
        for name in sorted(node.machine.system.nics):
            nic = node.machine.system.nics[name]
            faults = int(getattr(nic, "faults", 0))
            inval = int(getattr(nic, "invalidations", 0))
            reset = int(rec.counters.get(f"nic/{node_name}/{name}/reset_mrs", 0))
            if not (faults or inval or reset):
                continue
            base = f"nic.{node_name}/{name}"
            m[f"{base}.odp_faults"] = Metric(faults, "count", "ODP faults the NIC took")
            m[f"{base}.odp_invalidations"] = Metric(inval, "count", "whole-MR invalidations")
            m[f"{base}.mrs_reset"] = Metric(reset, "count", "MRs a NIC reset dropped")


def _teardown(sim: Simulation) -> tuple[int, int]:
    """Every process exits; returns (kernel leak reports, device bytes still allocated,
    unplugged devices included)."""
    leaks = 0
    leaked = 0
    for node in sim.nodes.values():
        system = node.machine.system
        gone = list(node.unplugged.values())
        for proc in list(system.live_processes()):
            proc.exit()
        system.reap()
        kernel = node.kernel
        kernel.take_waits()
        leaks += len(kernel.leaks)
        for driver in [*system.exporters.values(), *gone]:
            for region in driver.regions():
                if region.name in ("vram", "gtt"):
                    leaked += region.used
    return leaks, leaked
