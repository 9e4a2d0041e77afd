"""``pinlab.inspect``: read the real host and describe it as a pinlab platform.

* :mod:`~pinlab.inspect.host` -- :func:`inspect_host` reads every source into a
  :class:`HostReport`; one reader module per source -- :mod:`~pinlab.inspect.proc` (RLIMIT_MEMLOCK,
  capabilities, memory, kernel release), :mod:`~pinlab.inspect.cgroup` (cgroup v2, dmem),
  :mod:`~pinlab.inspect.debugfs` (``dma_buf/bufinfo``), :mod:`~pinlab.inspect.pci` (the PCI
  tree), :mod:`~pinlab.inspect.cpu` -- each returns a record with a ``status`` (``ok``,
  ``missing``, ``unreadable: <reason>``, ``not applicable``; :mod:`~pinlab.inspect.source`) and
  never raises for a missing source;
* :mod:`~pinlab.inspect.platform` -- :func:`plan_platform` maps the PCI
  tree, CPU and memory to a :class:`~pinlab.platform.spec.PlatformSpec`;
  :func:`platform_text` and :func:`write_platform` write the file ``pinlab run --platform``
  accepts;
* :mod:`~pinlab.inspect.summary` -- the ``pinlab inspect`` summary (rich or JSON) and the
  load-and-build check of the written file;
* :mod:`~pinlab.inspect.snapshot` -- the portable host snapshot (facts a diagnosis needs;
  versioned TOML, validated on load), from a host or from pasted command output
  (:mod:`~pinlab.inspect.paste`, :mod:`~pinlab.inspect.topo`); :mod:`~pinlab.inspect.hostpolicy`
  -- the host's limits as a policy file;
* :mod:`~pinlab.inspect.doctor` -- ``pinlab doctor``: registrations run through the model
  (:mod:`~pinlab.inspect.doctor_run`: the inputs from the snapshot, each step), the path and
  its rates, headroom, model-verified fixes (:mod:`~pinlab.inspect.doctor_report` prints
  them); :mod:`~pinlab.inspect.fit` -- ``pinlab run --platform --map``.

A user-facing layer, beside ``report``: it may import ``scenarios``, ``platform``, ``policy`` and
``kernel``; nothing below imports it.
"""

from pinlab.inspect.host import HostReport, inspect_host
from pinlab.inspect.platform import (
    PlatformPlan,
    plan_platform,
    platform_text,
    use_it,
    write_platform,
)
from pinlab.inspect.summary import (
    PlatformCheck,
    check_platform,
    plan_host,
    render_summary,
    summary_json,
)

__all__ = [
    "HostReport",
    "PlatformCheck",
    "PlatformPlan",
    "check_platform",
    "inspect_host",
    "plan_host",
    "plan_platform",
    "platform_text",
    "render_summary",
    "summary_json",
    "use_it",
    "write_platform",
]
