"""Fault injection: kill a tenant, hot-unplug a device, reset a NIC -- at a simulated time.

The faults are operations of the machine (:class:`~pinlab.uapi.system.System`) and of the
simulation; this module only schedules them (:func:`inject`) and counts them:

* **kill** (:func:`kill`): ``kill -9`` of a tenant's process (``Simulation.kill``): the kernel
  tears everything down in order (MRs, scanouts, imports, fds, GEM handles), so its pins and
  allocations are released, and the workload stops.
* **hot-unplug** (:func:`hot_unplug`): the device leaves the bus (``System.hot_unplug``): every
  process using it is killed, then its driver, displays and importer leave the system, so later
  calls naming it fail with ``-ENODEV``. Its memory is gone: its regions are reported at the
  time of the unplug.
* **nic-reset** (:func:`nic_reset`): a fatal NIC error and its recovery (``System.reset_nic``):
  every MR on the NIC is deregistered by the kernel; the owner's next work request on it fails
  and the workloads register again.

Each fault is logged as an event and, with what it did, as a
:class:`~pinlab.sim.metrics.FaultRecord` (``Recorder.faults``).
"""

from __future__ import annotations

from collections.abc import Callable

from pinlab.sim.engine import Simulation
from pinlab.sim.metrics import FaultRecord

__all__ = ["FAULTS", "hot_unplug", "inject", "kill", "nic_reset"]


def kill(sim: Simulation, target: str, node: str | None = None) -> FaultRecord:
    """Kill tenant ``target``; with ``node``, a tenant that runs on every node (named
    ``<target>@<node>``) is killed there."""
    if target not in sim.tenants and node is not None:
        target = f"{target}@{node}"
    if target not in sim.tenants:
        raise KeyError(f"no tenant named {target!r} (have {', '.join(sim.tenants)})")
    sim.kill(target)
    return FaultRecord(sim.env.now, "kill", target, sim.tenants[target].node, killed=1)


def hot_unplug(sim: Simulation, target: str, node: str | None = None) -> FaultRecord:
    """Unplug device (or NIC) ``target`` on ``node`` (default: the first node):
    :meth:`System.hot_unplug <pinlab.uapi.system.System.hot_unplug>`; the device's regions
    are sampled one last time, as the unplug left them."""
    state = sim.node(node)
    unplugged = state.machine.system.hot_unplug(target)
    if unplugged.exporter is not None:
        state.unplugged[target] = unplugged.exporter
        sim.sample_regions(state.name, target, unplugged.exporter)
    return FaultRecord(sim.env.now, "hot-unplug", target, state.name, killed=len(unplugged.killed))


def nic_reset(sim: Simulation, target: str, node: str | None = None) -> FaultRecord:
    """Reset NIC ``target`` on ``node``: :meth:`System.reset_nic
    <pinlab.uapi.system.System.reset_nic>` drops every MR on it."""
    state = sim.node(node)
    dropped = state.machine.system.reset_nic(target)
    return FaultRecord(sim.env.now, "nic-reset", target, state.name, mrs_dropped=dropped)


FAULTS: dict[str, Callable[[Simulation, str, str | None], FaultRecord]] = {
    "kill": kill,
    "hot-unplug": hot_unplug,
    "nic-reset": nic_reset,
}
"""Fault kinds by name (``kind = "nic-reset"`` in a scenario file)."""


def inject(sim: Simulation, at: float, kind: str, target: str, node: str | None = None) -> None:
    """Schedule fault ``kind`` on ``target`` at simulated time ``at``."""
    try:
        action = FAULTS[kind]
    except KeyError:
        raise KeyError(f"no fault kind {kind!r} (expected one of {', '.join(FAULTS)})") from None

    def fire() -> None:
        sim.recorder.faults.append(action(sim, target, node))

    sim.at(at, fire, f"{kind} {target}" + (f" on {node}" if node else ""))
