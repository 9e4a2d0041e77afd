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
* :mod:`~pinlab.platform.presets` -- ``dl1``, ``p4d``, ``workstation``, ``workstation-amd``,
  ``apu-laptop``, ``cluster`` (``cost-model.md`` §9), ``cx-pair`` (two ConnectX hosts back
  to back, ``pinlab bench``), ``matrix`` (the machine of ``pinlab matrix``) and TOML platform
  files.
"""

from pinlab.platform.builder import build
from pinlab.platform.cluster import Cluster, ClusterSpec, FabricSpec, build_cluster
from pinlab.platform.cost import CostModel, P2pPathClass, ParamInfo, parameters
from pinlab.platform.presets import (
    PRESETS,
    AnySpec,
    apu_laptop,
    cluster,
    cx_pair,
    dl1,
    dump_platform,
    load_platform,
    matrix,
    p4d,
    platform_from_dict,
    resolve_platform,
    workstation,
    workstation_amd,
)
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
    "PRESETS",
    "AnySpec",
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
    "apu_laptop",
    "build",
    "build_cluster",
    "cluster",
    "cx_pair",
    "dl1",
    "dump_platform",
    "load_platform",
    "matrix",
    "p4d",
    "parameters",
    "platform_from_dict",
    "resolve_platform",
    "workstation",
    "workstation_amd",
]
