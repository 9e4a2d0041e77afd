"""What the platform presets are built from: PCI IDs, the CPUs and host bridges they put in a
host, and the RDMA NICs they hang below it (:mod:`pinlab.platform.presets` and the preset
families it registers)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from pydantic import ConfigDict

from pinlab.platform.cost import LinkLayer
from pinlab.platform.spec import CpuSpec, HostBridgeSpec, NicSpec
from pinlab.platform.spec_fields import Mtu, PcieGen
from pinlab.units import parse_rate

__all__ = [
    "AMAZON",
    "AMD",
    "AMD_GPU",
    "CPU_DESKTOP",
    "CX_DEVICE",
    "DDR4_2933_X6",
    "HABANA",
    "INTEL",
    "MELLANOX",
    "NIC_GEN",
    "NVIDIA",
    "SERVER_CPU",
    "SKYLAKE_E_ROOT",
    "STRICT_CALL",
    "WORKSTATION_CPU",
    "ConnectX",
    "HostCpu",
    "NicChoice",
    "connectx",
    "rdma_nic",
]

# PCI IDs used by the presets (vendor IDs are the PCI-SIG assignments; device IDs [assumption])
INTEL = 0x8086
AMD = 0x1022
AMD_GPU = 0x1002
HABANA = 0x1DA3
AMAZON = 0x1D0F
NVIDIA = 0x10DE
MELLANOX = 0x15B3

SKYLAKE_E_ROOT = 0x2030
"""Skylake-E / Cascade Lake root port ID, on the P2PDMA whitelist (``cost-model.md`` §9.1)."""

DDR4_2933_X6 = "140.8GB/s"
"""DDR4-2933 × 6 channels per socket (Cascade Lake), ``cost-model.md`` §5 table."""

STRICT_CALL = ConfigDict(arbitrary_types_allowed=False, strict=True)
"""How the §9 presets validate their keyword parameters (``validate_call``)."""

ConnectX = Literal["cx5", "cx6", "cx7"]
"""The ConnectX models of the cost model's NIC table (``nic.<model>``)."""

NicChoice = Literal["efa", "cx5", "cx6", "cx7"]
"""A preset's NIC model: AWS EFA (the ``efa`` driver) or a ConnectX (the ``mlx5`` driver)."""

CX_DEVICE = {"cx5": 0x1017, "cx6": 0x101B, "cx7": 0x1021}
"""PCI device IDs of ConnectX-5/6/7 (PCI ID repository)."""

NIC_GEN: dict[str, PcieGen] = {"cx5": 3, "cx6": 4, "cx7": 5}
"""The PCIe generation of each ConnectX's host link (x16): CX-5 Gen3 (Gen4 on some SKUs), CX-6
Gen4, CX-7 Gen5 (NVIDIA product briefs)."""

_100G = parse_rate("100Gbps")


@dataclass(frozen=True, slots=True)
class HostCpu:
    """A preset's CPU and the PCI IDs of its host bridges (device IDs [assumption])."""

    cpu: CpuSpec
    bridge_vendor: int
    bridge_device: int

    def host_bridge(self, name: str = "rc0", socket: int = 0) -> HostBridgeSpec:
        """One of this CPU's host bridges (a root complex), ``name`` on ``socket``."""
        return HostBridgeSpec(
            name=name, socket=socket, vendor=self.bridge_vendor, device=self.bridge_device
        )

    def with_bridge_device(self, device: int) -> HostCpu:
        """The same CPU with another host bridge device ID (a different part of the family)."""
        return replace(self, bridge_device=device)


CPU_DESKTOP: dict[str, HostCpu] = {
    "amd": HostCpu(CpuSpec(vendor="amd", family=0x19, model="AMD Ryzen (Zen 4)"), AMD, 0x14D8),
    "intel": HostCpu(
        CpuSpec(vendor="intel", family=6, model="Intel Core (client)", segment="client"),
        INTEL,
        0xA700,
    ),
}
"""Desktop CPUs (``workstation``, ``apu-laptop``)."""

SERVER_CPU: dict[str, HostCpu] = {
    "intel": HostCpu(
        CpuSpec(vendor="intel", family=6, model="Intel Xeon (Ice Lake / Sapphire Rapids)"),
        INTEL,
        SKYLAKE_E_ROOT,
    ),
    "amd": HostCpu(CpuSpec(vendor="amd", family=0x19, model="AMD EPYC (Zen 3/4)"), AMD, 0x1480),
}
"""Server CPUs (``cx-pair``)."""

WORKSTATION_CPU: dict[str, HostCpu] = {
    "amd": HostCpu(
        CpuSpec(vendor="amd", family=0x19, model="AMD Threadripper PRO (Zen 4)"),
        AMD,
        0x14D8,
    ),
    "intel": HostCpu(
        CpuSpec(vendor="intel", family=6, model="Intel Xeon W"), INTEL, SKYLAKE_E_ROOT
    ),
    "intel-client": CPU_DESKTOP["intel"],
}
"""Workstation CPUs (``workstation-amd``)."""


def connectx(
    name: str,
    parent: str,
    model: ConnectX,
    *,
    gen: PcieGen,
    line_rate: float | None = None,
    link_layer: LinkLayer | None = None,
    mtu: Mtu | None = None,
    odp: bool = False,
) -> NicSpec:
    """A ConnectX NIC of ``model`` (the mlx5 driver) below ``parent`` on a x16 link; unset
    rate, link layer and MTU are the model's; ``odp`` for on-demand paging."""
    return NicSpec(
        name=name,
        driver="mlx5",
        model=model,
        parent=parent,
        line_rate=line_rate,
        link_layer=link_layer,
        mtu=mtu,
        odp=odp,
        gen=gen,
        width=16,
        vendor=MELLANOX,
        device=CX_DEVICE[model],
    )


def rdma_nic(
    model: NicChoice,
    i: int,
    parent: str,
    *,
    gen: PcieGen,
    line_rate: float | None = None,
    odp: bool = False,
) -> NicSpec:
    """NIC ``i`` of a preset: ``efa<i>`` (EFA, 100 Gbps) or ``mlx5_<i>`` (ConnectX ``model``,
    its own line rate unless ``line_rate``; ``odp`` for on-demand paging)."""
    if model == "efa":
        return NicSpec(
            name=f"efa{i}",
            driver="efa",
            model="efa",
            parent=parent,
            line_rate=_100G if line_rate is None else line_rate,
            gen=gen,
            width=16,
            vendor=AMAZON,
            device=0xEFA0,
        )
    return connectx(f"mlx5_{i}", parent, model, gen=gen, line_rate=line_rate, odp=odp)
