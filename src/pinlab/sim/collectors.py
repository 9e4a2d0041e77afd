"""The device, NIC and link collectors: what the machine's devices report at the end of a
run, with units (names: :mod:`pinlab.sim.metrics`, all listed in ``docs/metrics.md``).

* ``device.<node>/<dev>.<region>.*`` for every region of a device that held anything: its
  ``size``, peak and final ``used`` and ``pinned`` bytes, final ``free`` bytes and
  ``fragmentation``, and the ``evictions``/``evicted_bytes`` TTM made out of it; and per
  device ``bytes_migrated`` (its copy engine, :class:`~pinlab.sim.copy_engine.CopyStats`) and
  ``move_notifies`` (the exporter's ``move_notify`` calls). An unplugged device reports its
  memory as the unplug left it.
* ``nic.<node>/<nic>.*`` for a NIC that faulted, invalidated or was reset: ``odp_faults``,
  ``odp_invalidations`` (whole-MR invalidations), ``mrs_reset`` (MRs its resets dropped).
* ``link.<key>.utilisation``: the mean over the run of every link that carried bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

from pinlab.drivers.base import ExporterDriver, RegionUsage
from pinlab.kernel.ttm import TtmMemType
from pinlab.sim.copy_engine import CopyStats
from pinlab.sim.engine import NodeState, Simulation
from pinlab.sim.metrics import Metric, Series, num, report_fields

__all__ = ["device_metrics", "link_metrics", "nic_metrics"]

_MEM = {"vram": TtmMemType.VRAM, "gtt": TtmMemType.TT, "system": TtmMemType.SYSTEM}


def device_metrics(sim: Simulation) -> dict[str, Metric]:
    """``device.*`` of every node, live and unplugged devices."""
    m: dict[str, Metric] = {}
    for node in sim.nodes.values():
        drivers = dict(node.machine.exporters)
        for dev, driver in node.unplugged.items():
            drivers.setdefault(dev, driver)
        for dev in sorted(drivers):
            m.update(_device(sim.recorder.series, node, dev, drivers[dev]))
    return m


def _device(
    series: Mapping[str, Series], node: NodeState, dev: str, driver: ExporterDriver
) -> dict[str, Metric]:
    base = f"device.{node.name}/{dev}"
    regions = driver.regions()
    if not any(_held(series, base, r) for r in regions):
        return {}
    bdev = driver.bdev
    m: dict[str, Metric] = {}
    for region in regions:
        stem = f"{base}.{region.name}"
        used = series.get(f"{stem}.used")
        pinned = series.get(f"{stem}.pinned")
        frag = series.get(f"{stem}.fragmentation")
        free = series.get(f"{stem}.free")
        man = bdev.manager(_MEM[region.name]) if bdev is not None else None
        m[f"{stem}.size"] = Metric(region.size, "B", "capacity")
        m[f"{stem}.used_peak"] = Metric(
            int(used.peak() if used is not None else region.used), "B", "peak bytes allocated"
        )
        m[f"{stem}.used_final"] = Metric(
            int(used.last if used is not None else region.used), "B", "allocated at the end"
        )
        m[f"{stem}.pinned_peak"] = Metric(
            int(pinned.peak() if pinned is not None else region.pinned), "B", "peak pinned"
        )
        m[f"{stem}.pinned_final"] = Metric(
            int(pinned.last if pinned is not None else region.pinned), "B", "pinned at the end"
        )
        m[f"{stem}.free_final"] = Metric(
            int(free.last if free is not None else region.free), "B", "free at the end"
        )
        m[f"{stem}.fragmentation_final"] = Metric(
            num(frag.last if frag is not None else region.fragmentation),
            "ratio",
            "1 - largest free block / free bytes",
        )
        m[f"{stem}.evictions"] = Metric(
            man.evictions if man is not None else 0, "count", "buffers evicted out of it"
        )
        m[f"{stem}.evicted_bytes"] = Metric(
            man.evicted_bytes if man is not None else 0, "B", "bytes evicted out of it"
        )
    engine = node.engines.get(dev)
    m.update(report_fields(engine.stats if engine is not None else CopyStats(), base))
    m[f"{base}.move_notifies"] = Metric(driver.move_notifies, "count", "move_notify calls it sent")
    return m


def _held(series: Mapping[str, Series], base: str, region: RegionUsage) -> bool:
    """Whether a region holds anything now or ever did (its ``used`` series)."""
    used = series.get(f"{base}.{region.name}.used")
    return region.used > 0 or (used is not None and used.peak() > 0)


def nic_metrics(sim: Simulation) -> dict[str, Metric]:
    """``nic.*`` of every NIC that faulted, invalidated or was reset."""
    m: dict[str, Metric] = {}
    for node_name, node in sim.nodes.items():
        for name in sorted(node.machine.system.nics):
            nic = node.machine.system.nics[name]
            faults = nic.faults
            inval = nic.invalidations
            reset = sum(
                f.mrs_dropped
                for f in sim.recorder.faults
                if f.kind == "nic-reset" and f.node == node_name and f.target == name
            )
            if not (faults or inval or reset):
                continue
            base = f"nic.{node_name}/{name}"
            m[f"{base}.odp_faults"] = Metric(faults, "count", "ODP faults the NIC took")
            m[f"{base}.odp_invalidations"] = Metric(inval, "count", "whole-MR invalidations")
            m[f"{base}.mrs_reset"] = Metric(reset, "count", "MRs a NIC reset dropped")
    return m


def link_metrics(sim: Simulation, duration: float) -> dict[str, Metric]:
    """``link.<key>.utilisation`` of every link that carried bytes: bytes carried /
    (capacity × the run's duration)."""
    m: dict[str, Metric] = {}
    for key in sorted(sim.net.links):
        link = sim.net.links[key]
        if link.bytes_carried > 0:
            mean = (
                link.bytes_carried / (link.capacity * duration)
                if duration > 0 and link.capacity > 0
                else 0.0
            )
            m[f"link.{key}.utilisation"] = Metric(
                num(mean), "ratio", "mean utilisation over the run"
            )
    return m
