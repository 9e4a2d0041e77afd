"""Fault injection: kill a tenant, hot-unplug a device, reset a NIC -- at a simulated time.

* **kill** (:func:`kill`): ``kill -9`` of a tenant's process (``Simulation.kill``): its SimPy
  process is interrupted and the kernel tears everything down in order (MRs, scanouts, imports,
  fds, GEM handles), so its pins and allocations are released.
* **hot-unplug** (:func:`hot_unplug`): a device leaves the bus. pinlab's model: every tenant
  whose process uses it -- a GEM handle on it, an MR on it (a NIC), a scanout on one of its
  displays -- is killed (as the SIGBUS of a mapped device BAR, or the driver's
  ``drm_dev_unplug`` ending every client, would), which tears its buffers down; then the
  device's driver is removed from the system, so later calls naming it fail with ``-ENODEV``
  (``System`` lookups). Its memory is gone: its regions are reported at the time of the unplug.
* **nic-reset** (:func:`nic_reset`): a NIC reset (``ib_dispatch_event(IB_EVENT_DEVICE_FATAL)``
  followed by recovery): every MR on the NIC is deregistered by the kernel (unmap, unpin,
  detach, put) and disappears from its owner's MR table. The owner's next work request on it
  fails (``ibv_post_send`` → ``-EINVAL`` in the model, a completion error on hardware) and the
  workloads register again (``ctx.notes["reregistrations"]``).

Each fault is recorded as an event and counted (``faults/<kind>``).
"""

from __future__ import annotations

from collections.abc import Callable

from pinlab.sim.engine import Simulation

__all__ = ["FAULTS", "hot_unplug", "inject", "kill", "nic_reset"]


def kill(sim: Simulation, target: str, node: str | None = None) -> None:
    """Kill tenant ``target`` (``node`` is ignored: tenants have unique names)."""
    if target not in sim.tenants:
        raise KeyError(f"no tenant named {target!r} (have {', '.join(sim.tenants)})")
    sim.kill(target)
    sim.recorder.count("faults/kill")


def _uses_device(tenant_proc: object, device: str, displays: set[str]) -> bool:
    from pinlab.uapi.process import Process

    assert isinstance(tenant_proc, Process)
    proc = tenant_proc
    if any(g.driver.name == device for g in proc.handles.values()):
        return True
    if any(mr.nic.name == device for mr in proc.mrs.values()):
        return True
    return any(s.display.name in displays for s in proc.scanouts)


def hot_unplug(sim: Simulation, target: str, node: str | None = None) -> None:
    """Unplug device (or NIC) ``target`` on ``node`` (default: the first node)."""
    state = sim.node(node)
    machine = state.machine
    system = machine.system
    displays = {d.name for d in machine.spec.displays if d.device == target}
    victims = [
        t.name
        for t in sim.tenants.values()
        if t.node == state.name and t.proc.alive and _uses_device(t.proc, target, displays)
    ]
    for name in victims:
        sim.kill(name)
    system.reap()
    unplugged: dict[str, object] = sim.shared.setdefault("unplugged", {})
    driver = system.exporters.pop(target, None)
    if driver is not None:
        unplugged[f"{state.name}/{target}"] = driver
        # the device's last samples: its regions as the unplug leaves them
        now = sim.env.now
        for region in driver.regions():
            base = f"device/{state.name}/{target}/{region.name}"
            sim.recorder.sample(f"{base}/used", now, region.used)
            sim.recorder.sample(f"{base}/pinned", now, region.pinned)
            sim.recorder.sample(f"{base}/free", now, region.free)
            sim.recorder.sample(f"{base}/fragmentation", now, round(region.fragmentation, 6))
    system.nics.pop(target, None)
    for d in displays:
        system.displays.pop(d, None)
    system.gpu_importers.pop(f"{target}:import", None)
    sim.recorder.count("faults/hot-unplug")
    sim.recorder.count("faults/hot-unplug/killed", len(victims))


def nic_reset(sim: Simulation, target: str, node: str | None = None) -> None:
    """Reset NIC ``target`` on ``node``: every MR on it is deregistered by the kernel."""
    state = sim.node(node)
    system = state.machine.system
    nic = system.nic(target)
    kernel = system.kernel
    dropped = 0
    for proc in list(system.live_processes()):
        for mr in [m for m in proc.mrs.values() if m.nic is nic]:
            del proc.mrs[mr.lkey]
            previous = kernel.current
            kernel.current = proc
            try:
                nic.dereg_mr(mr)
            finally:
                kernel.current = previous
                kernel.take_waits()
            dropped += 1
    system.reap()
    sim.recorder.count("faults/nic-reset")
    sim.recorder.count(f"nic/{state.name}/{target}/reset_mrs", dropped)


FAULTS: dict[str, Callable[[Simulation, str, str | None], None]] = {
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
        action(sim, target, node)

    sim.at(at, fire, f"{kind} {target}" + (f" on {node}" if node else ""))
