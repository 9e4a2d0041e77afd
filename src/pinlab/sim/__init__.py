"""``pinlab.sim``: time, bandwidth and contention on top of the model (SimPy).

:mod:`~pinlab.sim.engine` runs a platform on one clock with tenants whose workloads
(:mod:`~pinlab.sim.workloads`) enter the model only through their processes' syscalls;
:mod:`~pinlab.sim.flows` shares link bandwidth between concurrent transfers, max-min fairly;
:mod:`~pinlab.sim.copy_engine` carries out TTM's copy jobs; :mod:`~pinlab.sim.faults`
schedules the machine's faults; :mod:`~pinlab.sim.metrics` names and declares what is
reported, and :mod:`~pinlab.sim.collectors` collects the devices', NICs' and links' metrics;
the ground floor's :mod:`~pinlab.gcpolicy` sets the garbage collector for a build and a run.
"""

from pinlab.sim import native as _native

_native.install()
