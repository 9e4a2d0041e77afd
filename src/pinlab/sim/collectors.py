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
from pinlab.sim.metrics import Metric, MetricSpec, Series, declared, num, report_fields

__all__ = [
    "DEVICE_METRICS",
    "LINK_METRICS",
    "NIC_METRICS",
    "REGIONS",
    "REGION_METRICS",
    "device_metrics",
    "link_metrics",
    "nic_metrics",
]

_MEM = {"vram": TtmMemType.VRAM, "gtt": TtmMemType.TT, "system": TtmMemType.SYSTEM}

REGIONS: tuple[str, ...] = tuple(_MEM)
"""The memory regions a device may report (``device.<node>/<dev>.<region>.*``)."""


def _specs(*specs: MetricSpec) -> dict[str, MetricSpec]:
    return {s.name: s for s in specs}


# A device, NIC or link that did nothing reports nothing: its counts and peaks are then 0
# (``absent=0``); its capacity, free bytes and fragmentation are not known.
REGION_METRICS: dict[str, MetricSpec] = _specs(
    MetricSpec("size", "B", "capacity"),
    MetricSpec("used_peak", "B", "peak bytes allocated", absent=0),
    MetricSpec("used_final", "B", "allocated at the end", absent=0),
    MetricSpec("pinned_peak", "B", "peak pinned", absent=0),
    MetricSpec("pinned_final", "B", "pinned at the end", absent=0),
    MetricSpec("free_final", "B", "free at the end"),
    MetricSpec("fragmentation_final", "ratio", "1 - largest free block / free bytes"),
    MetricSpec("evictions", "count", "buffers evicted out of it", absent=0),
    MetricSpec("evicted_bytes", "B", "bytes evicted out of it", absent=0),
)
"""What each region of a device reports (``device.<node>/<dev>.<region>.<metric>``), for a
device one of whose regions held anything during the run."""

DEVICE_METRICS: dict[str, MetricSpec] = _specs(
    *(MetricSpec(s.name, s.unit, s.description, absent=0) for s in declared(CopyStats)),
    MetricSpec("move_notifies", "count", "move_notify calls it sent", absent=0),
)
"""What a device reports besides its regions (``device.<node>/<dev>.<metric>``): its copy
engine's statistics and the exporter's ``move_notify`` calls."""

NIC_METRICS: dict[str, MetricSpec] = _specs(
    MetricSpec("odp_faults", "count", "ODP faults the NIC took", absent=0),
    MetricSpec("odp_invalidations", "count", "whole-MR invalidations", absent=0),
    MetricSpec("mrs_reset", "count", "MRs a NIC reset dropped", absent=0),
)
"""What a NIC that faulted, invalidated or was reset reports (``nic.<node>/<nic>.<metric>``)."""

LINK_METRICS: dict[str, MetricSpec] = _specs(
    MetricSpec("utilisation", "ratio", "mean utilisation over the run"),
)
"""What a link that carried bytes reports (``link.<key>.<metric>``). A link's key is known
only once it carried something, so an unreported one is not known rather than 0."""


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
        spec = REGION_METRICS
        values: dict[str, float | int] = {
            "size": region.size,
            "used_peak": int(used.peak() if used is not None else region.used),
            "used_final": int(used.last if used is not None else region.used),
            "pinned_peak": int(pinned.peak() if pinned is not None else region.pinned),
            "pinned_final": int(pinned.last if pinned is not None else region.pinned),
            "free_final": int(free.last if free is not None else region.free),
            "fragmentation_final": num(frag.last if frag is not None else region.fragmentation),
            "evictions": man.evictions if man is not None else 0,
            "evicted_bytes": man.evicted_bytes if man is not None else 0,
        }
        m.update({f"{stem}.{name}": spec[name](value) for name, value in values.items()})
    engine = node.engines.get(dev)
    m.update(report_fields(engine.stats if engine is not None else CopyStats(), base))
    m[f"{base}.move_notifies"] = DEVICE_METRICS["move_notifies"](driver.move_notifies)
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
            counts = {"odp_faults": faults, "odp_invalidations": inval, "mrs_reset": reset}
            m.update({f"{base}.{k}": NIC_METRICS[k](v) for k, v in counts.items()})
    return m


def link_metrics(sim: Simulation, duration: float) -> dict[str, Metric]:
    """``link.<key>.utilisation`` of every link that carried bytes: bytes carried /
    (capacity × the run's duration)."""
    m: dict[str, Metric] = {}
    links = sim.net.links
    # only the links that carried anything are sorted (about half of a cluster's links)
    for key in sorted([key for key, link in links.items() if link.bytes_carried > 0]):
        link = links[key]
        mean = (
            link.bytes_carried / (link.capacity * duration)
            if duration > 0 and link.capacity > 0
            else 0.0
        )
        m[f"link.{key}.utilisation"] = LINK_METRICS["utilisation"](num(mean))
    return m
