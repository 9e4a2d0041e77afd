"""``pinlab.platform``: the hardware pinlab simulates, and what it costs.

* :mod:`~pinlab.platform.cost` -- :class:`CostModel`, every parameter of ``cost-model.md``
  §2–§8 with unit, sweep range and source;
* :mod:`~pinlab.platform.spec` -- :class:`PlatformSpec`, a declarative node (CPU, DRAM, PCIe
  tree, devices, NICs, displays), validated against the driver registries;
* :mod:`~pinlab.platform.topology` -- :class:`Machine`: the kernel's PCI tree, the drivers in a
  :class:`~pinlab.uapi.system.System`, and the link graph (:class:`PlatformLink`) with
  :meth:`Machine.path`, P2P path classes and capacities;
* :mod:`~pinlab.platform.builder` -- :func:`build`, which makes a :class:`Machine` from a
  :class:`PlatformSpec`, constructing each driver through its ``from_spec``;
* :mod:`~pinlab.platform.cluster` -- N-node clusters (one kernel per node);
* :mod:`~pinlab.platform.pcie_model`, :mod:`~pinlab.platform.rdma_model` -- the PCIe and
  RDMA NIC mechanisms (pure functions of the cost model and a path);
* :mod:`~pinlab.platform.presets` -- the preset registry :data:`PRESETS` and TOML platform
  files; the presets themselves by family: :mod:`~pinlab.platform.presets_aws` (``dl1``,
  ``p4d``, ``cluster``, ``cost-model.md`` §9), :mod:`~pinlab.platform.presets_host`
  (``workstation``, ``workstation-amd``, ``apu-laptop``, ``cx-pair``: two ConnectX hosts back
  to back, ``pinlab bench``), :mod:`~pinlab.platform.presets_gpu` (``dgx-a100``, ``dgx-h100``,
  ``p5``, ``gpu-box``), :mod:`~pinlab.platform.presets_matrix` (``matrix``, the machine of
  ``pinlab matrix``), all built from :mod:`~pinlab.platform.preset_parts`.
"""

from pinlab.platform import presets
from pinlab.platform.builder import build
from pinlab.platform.cluster import Cluster, ClusterSpec, FabricSpec, build_cluster
from pinlab.platform.cost import CostModel, P2pPathClass, ParamInfo, parameters
from pinlab.platform.presets import *  # noqa: F403 -- the presets and platform files
from pinlab.platform.spec import (
    CpuSpec,
    DeviceSpec,
    DisplaySpec,
    DramSpec,
    HostBridgeSpec,
    InterSocketSpec,
    LinkSpec,
    NicSpec,
    PlatformSpec,
    SwitchSpec,
    WhitelistEntrySpec,
)
from pinlab.platform.topology import LinkUse, Machine, PlatformLink

__all__ = [
    "Cluster",
    "ClusterSpec",
    "CostModel",
    "CpuSpec",
    "DeviceSpec",
    "DisplaySpec",
    "DramSpec",
    "FabricSpec",
    "HostBridgeSpec",
    "InterSocketSpec",
    "LinkSpec",
    "LinkUse",
    "Machine",
    "NicSpec",
    "P2pPathClass",
    "ParamInfo",
    "PlatformLink",
    "PlatformSpec",
    "SwitchSpec",
    "WhitelistEntrySpec",
    "build",
    "build_cluster",
    "parameters",
]
__all__ += presets.__all__
