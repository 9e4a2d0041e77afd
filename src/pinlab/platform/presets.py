"""Platform presets (``cost-model.md`` §9) and platform files.

Each preset is a function returning a :class:`~pinlab.platform.spec.PlatformSpec` (or, for
``cluster``, a :class:`~pinlab.platform.cluster.ClusterSpec`); keyword parameters are the knobs
a sweep turns (``dl1(efa_behind_switch=True)``, ``cluster(nodes=16)``); ``matrix`` is the
machine ``pinlab matrix`` builds for each exporter. :data:`PRESETS` maps
their names to them. Values the doc marks [assumption] are modelling choices -- sweep them; the
extra ones pinlab had to make are listed in each preset's docstring.

A platform file (what ``pinlab run --platform FILE`` accepts) is TOML, either a full description
(the fields of :class:`PlatformSpec`; ``kind = "cluster"`` for a :class:`ClusterSpec`), as
:func:`dump_platform` writes it, or a preset with parameters::

    preset = "dl1"
    [params]
    efa_behind_switch = true

:func:`load_platform` reads either, with one-line errors naming the file and field;
:func:`resolve_platform` takes a preset name or a path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import ConfigDict, ValidationError, validate_call

from pinlab.drivers import EXPORTERS, IMPORTERS
from pinlab.drivers.rdma import RdmaDevice
from pinlab.errors import ConfigError, config_error
from pinlab.platform.cluster import ClusterSpec, FabricSpec
from pinlab.platform.gpu_model import GPU_MODELS
from pinlab.platform.presets_gpu import dgx_a100, dgx_h100, gpu_box, p5
from pinlab.platform.spec import (
    CpuSpec,
    DeviceSpec,
    DisplaySpec,
    DramSpec,
    HostBridgeSpec,
    Name,
    NicSpec,
    NvlinkSpec,
    PcieGen,
    PlatformSpec,
    SwitchSpec,
)
from pinlab.plugins import PluginRegistry, describe
from pinlab.tomlfile import read_toml
from pinlab.units import (
    GB,
    STRICT_UNITS,
    Duration,
    GiB,
    LineRate,
    MiB,
    Rate,
    Size,
    parse_rate,
)

__all__ = [
    "GPUS",
    "PRESETS",
    "AnySpec",
    "apu_laptop",
    "cluster",
    "cx_pair",
    "dl1",
    "dump_platform",
    "load_platform",
    "matrix",
    "p4d",
    "platform_from_dict",
    "resolve_platform",
    "workstation",
    "workstation_amd",
]

AnySpec = PlatformSpec | ClusterSpec

# PCI IDs used by the presets (vendor IDs are the PCI-SIG assignments; device IDs [assumption])
_INTEL = 0x8086
_AMD = 0x1022
_AMD_GPU = 0x1002
_HABANA = 0x1DA3
_AMAZON = 0x1D0F
_NVIDIA = 0x10DE
_MELLANOX = 0x15B3

_SKYLAKE_E_ROOT = 0x2030
"""Skylake-E / Cascade Lake root port ID, on the P2PDMA whitelist (``cost-model.md`` §9.1)."""

_DDR4_2933_X6 = "140.8GB/s"
"""DDR4-2933 × 6 channels per socket (Cascade Lake), ``cost-model.md`` §5 table."""

_100G = parse_rate("100Gbps")

_CALL = ConfigDict(arbitrary_types_allowed=False, strict=True)


NicChoice = Literal["efa", "cx5", "cx6", "cx7"]
"""A preset's NIC model: AWS EFA (the ``efa`` driver) or a ConnectX (the ``mlx5`` driver)."""


def _rdma_nic(
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
            vendor=_AMAZON,
            device=0xEFA0,
        )
    return NicSpec(
        name=f"mlx5_{i}",
        driver="mlx5",
        model=model,
        parent=parent,
        line_rate=line_rate,
        odp=odp,
        gen=gen,
        width=16,
        vendor=_MELLANOX,
        device=_CX_DEVICE[model],
    )


_CX_DEVICE = {"cx5": 0x1017, "cx6": 0x101B, "cx7": 0x1021}
"""PCI device IDs of ConnectX-5/6/7 (PCI ID repository)."""


@validate_call(config=_CALL)
def dl1(
    *,
    efa_behind_switch: bool = False,
    hbm: Size = 32 * GiB,
    sockets: Literal[1, 2] = 2,
    host_bridge_device: int = _SKYLAKE_E_ROOT,
    nic: NicChoice = "efa",
    kernel: str | None = "5.16",
) -> PlatformSpec:
    """AWS dl1.24xlarge-like node (``cost-model.md`` §9.1).

    * 8 Habana Gaudi accelerators ``gaudi0``–``gaudi7`` (habanalabs exporter), ``hbm`` each
      (32 GiB; "32 GB HBM2", §9.1), HBM ~1 TB/s [unverified];
    * pairs of Gaudis behind one PCIe switch (``sw0``–``sw3``) whose Gen3 x16 link to its root
      port they share: ``pcie:swN`` = ``pcie.gen3.eff`` = 12 GB/s per pair (§9.1, §2.1);
    * 4 × 100 Gbps EFA (``efa0``–``efa3``, pinned dma-buf MRs, no ODP) on their own root
      ports, so Gaudi ↔ EFA P2P crosses the root complex (§9.1); with ``efa_behind_switch``
      EFA *i* sits behind switch *i* instead (bus-address P2P, distance 4, §9.1 variant);
    * Intel Xeon host bridges with ``host_bridge_device`` (Skylake-E 0x2030, whitelisted;
      §9.1, ``kernel-semantics.md`` §8.3) -- pass an unlisted ID to see P2P refused; their P2P
      forwarding is ``pcie.rc.intel_server``'s;
    * 768 GiB host memory (§9.1);
    * ``nic``: the NIC model, EFA by default (``"cx5"``/``"cx6"``/``"cx7"``: ConnectX NICs
      ``mlx5_0``… driven by mlx5, at their own line rate, in the same places).

    pinlab's assumptions beyond the doc: ``sockets`` = 2 (96 vCPU = 2 × 24-core Cascade Lake
    Xeon), each socket holding two Gaudi pairs and two EFAs, one host bridge per socket,
    DDR4-2933 × 6 channels (140.8 GB/s, §5 table) per socket; Gaudi and EFA links Gen3 x16.
    With 2 sockets, Gaudi ↔ EFA on the other socket is a ``cross_socket`` path.
    """
    per_socket = 4 // sockets
    host_bridges = [
        HostBridgeSpec(name=f"rc{s}", socket=s, vendor=_INTEL, device=host_bridge_device)
        for s in range(sockets)
    ]
    switches = [
        SwitchSpec(name=f"sw{i}", parent=f"rc{i // (per_socket)}", gen=3, width=16)
        for i in range(4)
    ]
    devices = [
        DeviceSpec(
            name=f"gaudi{i}",
            driver="habanalabs",
            parent=f"sw{i // 2}",
            memory=hbm,
            memory_bandwidth=parse_rate("1TB/s"),
            gen=3,
            width=16,
            vendor=_HABANA,
            device=0x1000,
        )
        for i in range(8)
    ]
    nics = [
        _rdma_nic(nic, i, f"sw{i}" if efa_behind_switch else f"rc{i // per_socket}", gen=3)
        for i in range(4)
    ]
    return PlatformSpec(
        name="dl1" + ("-efa-switch" if efa_behind_switch else ""),
        description="AWS dl1.24xlarge-like: 8 Gaudi, Gaudi pairs share a Gen3 x16 link, "
        "4 × 100 Gbps EFA (cost-model.md §9.1)",
        kernel=kernel,
        cpu=CpuSpec(vendor="intel", family=6, model="Intel Xeon (Cascade Lake)", sockets=sockets),
        dram=DramSpec(size=768 * GiB // sockets, bandwidth=parse_rate(_DDR4_2933_X6)),
        host_bridges=tuple(host_bridges),
        switches=tuple(switches),
        devices=tuple(devices),
        nics=tuple(nics),
    )


@validate_call(config=_CALL)
def p4d(
    *,
    gpu_memory: Size | None = None,
    gpu: Literal["a100-sxm4-40gb", "a100-sxm4-80gb"] = "a100-sxm4-40gb",
    sockets: Literal[1, 2] = 2,
    host_bridge_device: int = _SKYLAKE_E_ROOT,
    nic: NicChoice = "efa",
    kernel: str | None = "5.16",
) -> PlatformSpec:
    """AWS p4d.24xlarge-like node (``cost-model.md`` §9.2); ``gpu="a100-sxm4-80gb"`` is the
    p4de.24xlarge.

    * 8 × A100 SXM4 (``gpu0``–``gpu7``, nvidia-compute exporter: pin in place, BAR1 = HBM
      size), 40 GB at 1555 GB/s HBM (§9.2; p4de: 80 GB at 2039 GB/s), ``gpu_memory``
      overriding the size;
    * all 12 NVLink 3 links of each GPU to 6 NVSwitches (600 GB/s bidirectional GPU–GPU, §9.2;
      ``docs/cost-model/gpu.md`` §G1) -- CUDA peer copies and NCCL use them, dma-buf P2P with
      NICs never does;
    * PCIe Gen4 x16 host link per GPU, ≈ 25 GB/s (§9.2, §2.1);
    * GPUs and EFA NICs paired behind PCIe switches (§9.2 [assumption]): 4 switches, each with
      2 GPUs and 1 × 100 Gbps EFA (4 × 100 Gbps = 400 Gbps, §9.2);
    * Intel Cascade Lake host bridges (whitelisted Skylake-E-class ID, §9.2);
    * 1152 GiB host memory [unverified] (§9.2), DDR4-2933 × 6 channels per socket (140.8 GB/s,
      §5 table; Cascade Lake has six channels);
    * ``nic``: the NIC model, EFA by default (a ConnectX model: ``mlx5_0``… instead).

    pinlab's assumptions beyond the doc: 2 sockets, 2 switches per socket, switch uplinks Gen4
    x16 (two GPUs share one), EFA links Gen4 x16; the first-generation EFAs without RDMA write
    (``driver_options`` ``rdma_write = false``) [unverified: RDMA write came with later EFA
    devices, which is why aws-ofi-nccl lifts its NCCL_PROTO=simple only on P5,
    ``aws/aws-ofi-nccl`` PR #280].
    """
    per_socket = 4 // sockets
    g = GPU_MODELS[gpu]
    return PlatformSpec(
        name="p4d" if gpu == "a100-sxm4-40gb" else "p4de",
        description=f"AWS p4d.24xlarge-like: 8 × {g.name}, NVSwitch, GPU pairs and an EFA behind "
        "each PCIe switch (cost-model.md §9.2)",
        kernel=kernel,
        cpu=CpuSpec(vendor="intel", family=6, model="Intel Xeon (Cascade Lake)", sockets=sockets),
        dram=DramSpec(size=1152 * GiB // sockets, bandwidth=parse_rate(_DDR4_2933_X6)),
        host_bridges=tuple(
            HostBridgeSpec(name=f"rc{s}", socket=s, vendor=_INTEL, device=host_bridge_device)
            for s in range(sockets)
        ),
        switches=tuple(
            SwitchSpec(name=f"sw{i}", parent=f"rc{i // per_socket}", gen=4, width=16)
            for i in range(4)
        ),
        devices=tuple(
            DeviceSpec(
                name=f"gpu{i}",
                driver="nvidia-compute",
                parent=f"sw{i // 2}",
                memory=g.memory if gpu_memory is None else gpu_memory,
                memory_bandwidth=g.memory_bandwidth,
                gen=4,
                width=16,
                vendor=_NVIDIA,
                device=0x20B0 if gpu == "a100-sxm4-40gb" else 0x20B2,
                model=g.name,
                compute_capability=g.compute_capability,
            )
            for i in range(8)
        ),
        nvlink=(
            NvlinkSpec(
                name="nvswitch", gen=3, devices=tuple(f"gpu{i}" for i in range(8)), switches=6
            ),
        ),
        nics=tuple(
            n.model_copy(update={"driver_options": {"rdma_write": False}})
            if n.driver == "efa"
            else n
            for n in (_rdma_nic(nic, i, f"sw{i}", gen=4) for i in range(4))
        ),
    )


_CPU_DESKTOP: dict[str, tuple[CpuSpec, int, int]] = {
    # (cpu, host bridge vendor, host bridge device) -- device IDs [assumption]
    "amd": (CpuSpec(vendor="amd", family=0x19, model="AMD Ryzen (Zen 4)"), _AMD, 0x14D8),
    "intel": (
        CpuSpec(vendor="intel", family=6, model="Intel Core (client)", segment="client"),
        _INTEL,
        0xA700,
    ),
}


@validate_call(config=_CALL)
def workstation(
    *,
    cpu: Literal["amd", "intel"] = "amd",
    vram: Size = 16 * GiB,
    bar: Size = 256 * MiB,
    resizable_bar: bool = False,
    host_memory: Size = 64 * GiB,
    nic: bool = True,
    nic_model: Literal["cx5", "cx6", "cx7"] = "cx5",
    kernel: str | None = "6.16",
) -> PlatformSpec:
    """A desktop with one discrete GPU (``cost-model.md`` §9.3).

    * ``gpu0``: amdgpu-like exporter, ``vram`` (16 GiB, sweep 8–24 GiB), PCIe Gen4 x16
      (≈ 25 GB/s), driving ``display0`` (static importer); CPU-visible BAR ``bar`` (256 MiB =
      ``pin.bar1_consumer``), or all of VRAM with ``resizable_bar`` (§9.3, §6.3);
    * ``mlx5_0``: a ConnectX (``nic_model``, default ConnectX-5 EDR 100 Gbps) with ODP on CPU
      lanes (its own root port, §9.3); ``nic=False`` leaves it out;
    * ``cpu``: ``"amd"`` (Zen: host-bridge P2P allowed, forwarded as ``pcie.rc.amd_zen``) or
      ``"intel"`` (client host bridge not on the whitelist: P2P refused → migrate-to-host; its
      root ports forward no P2P reads, ``pcie.rc.intel_client``) (§9.3); GPU ↔ NIC P2P goes
      through the root complex, so its rate is the read mechanism's (``pcie.lat.*``), not a
      factor;
    * dual-channel DDR5-5600: 89.6 GB/s theoretical (§9.3).

    pinlab's assumptions beyond the doc: ``host_memory`` 64 GiB; host bridge IDs AMD
    0x1022:0x14d8 / Intel 0x8086:0xa700; GTT = half of host memory (TTM's default page
    limit), SYSTEM = host memory.
    """
    cpu_spec, hb_vendor, hb_device = _CPU_DESKTOP[cpu]
    return PlatformSpec(
        name="workstation" if cpu == "amd" else "workstation-intel",
        description="desktop: one amdgpu-like dGPU with a display, an ODP-capable NIC "
        "(cost-model.md §9.3)",
        kernel=kernel,
        cpu=cpu_spec,
        dram=DramSpec(size=host_memory, bandwidth=parse_rate("89.6GB/s")),
        host_bridges=(HostBridgeSpec(name="rc0", socket=0, vendor=hb_vendor, device=hb_device),),
        devices=(
            DeviceSpec(
                name="gpu0",
                driver="amdgpu",
                parent="rc0",
                memory=vram,
                bar=vram if resizable_bar else bar,
                gtt=host_memory // 2,
                system=host_memory,
                gen=4,
                width=16,
                vendor=_AMD_GPU,
                device=0x744C,
            ),
        ),
        nics=(
            (
                NicSpec(
                    name="mlx5_0",
                    driver="mlx5",
                    model=nic_model,
                    parent="rc0",
                    odp=True,
                    gen=4,
                    width=16,
                    vendor=_MELLANOX,
                    device=_CX_DEVICE[nic_model],
                ),
            )
            if nic
            else ()
        ),
        displays=(DisplaySpec(name="display0", device="gpu0"),),
    )


@validate_call(config=_CALL)
def apu_laptop(
    *,
    carve_out: Size = 2 * GiB,
    host_memory: Size = 32 * GiB,
    cpu: Literal["amd", "intel"] = "amd",
    kernel: str | None = "6.16",
) -> PlatformSpec:
    """An APU laptop (``cost-model.md`` §9.4).

    * ``apu0``: integrated GPU, APU exporter (pins always migrate to GTT), a root-complex
      integrated endpoint whose "VRAM" is a ``carve_out`` of system DRAM (2 GiB, sweep
      512 MiB–8 GiB), so its memory link is ``dram:0`` and a VRAM ↔ GTT migration crosses DRAM
      twice (at most DRAM / 2, §9.4);
    * ``display0`` on it (static importer); no RDMA NIC (§9.4);
    * shared dual-channel DDR5-4800: 76.8 GB/s theoretical (§9.4).

    pinlab's assumptions beyond the doc: ``host_memory`` 32 GiB; AMD Zen 4 host bridge
    0x1022:0x14e8 (``cpu="intel"``: an unlisted Intel client bridge); GTT = half of host memory;
    the camera/video engines (§9.4) are not modelled separately (they are static importers
    like the display).
    """
    cpu_spec, hb_vendor, hb_device = _CPU_DESKTOP[cpu]
    if cpu == "amd":
        hb_device = 0x14E8
    return PlatformSpec(
        name="apu-laptop" if cpu == "amd" else "apu-laptop-intel",
        description="APU laptop: an integrated GPU with a DRAM carve-out and a display "
        "(cost-model.md §9.4)",
        kernel=kernel,
        cpu=cpu_spec,
        dram=DramSpec(size=host_memory, bandwidth=parse_rate("76.8GB/s")),
        host_bridges=(HostBridgeSpec(name="rc0", socket=0, vendor=hb_vendor, device=hb_device),),
        devices=(
            DeviceSpec(
                name="apu0",
                driver="apu",
                parent="rc0",
                rciep=True,
                carve_out=True,
                memory=carve_out,
                gtt=host_memory // 2,
                system=host_memory,
                vendor=_AMD_GPU,
                device=0x15BF,
            ),
        ),
        displays=(DisplaySpec(name="display0", device="apu0"),),
    )


@dataclass(frozen=True, slots=True)
class _Gpu:
    """A GPU a preset can put in a host (:data:`GPUS`)."""

    model: str
    driver: str
    memory: int
    bandwidth: str
    gen: PcieGen
    vendor: int
    device: int
    bar_read: str | None


GPUS: dict[str, _Gpu] = {
    "a100": _Gpu(
        "NVIDIA A100-SXM4-80GB",
        "nvidia-compute",
        80 * GiB,
        "2039GB/s",
        4,
        _NVIDIA,
        0x20B2,
        "a100",
    ),
    "h100": _Gpu(
        "NVIDIA H100 80GB HBM3",
        "nvidia-compute",
        80 * GiB,
        "3350GB/s",
        5,
        _NVIDIA,
        0x2330,
        "h200",
    ),
    "h200": _Gpu(
        "NVIDIA H200",
        "nvidia-compute",
        141 * GB // (2 * MiB) * (2 * MiB),  # 141 GB, in whole 2 MiB pages
        "4800GB/s",
        5,
        _NVIDIA,
        0x2335,
        "h200",
    ),
    "mi210": _Gpu(
        "AMD Instinct MI210",
        "amdgpu",
        64 * GiB,
        "1638GB/s",
        4,
        _AMD_GPU,
        0x740F,
        None,
    ),
}
"""GPUs ``cx-pair`` can place next to its NIC (HBM sizes and rates: vendor data sheets; the
BAR read latency is the cost model's ``pcie.bar_read`` row, the H100 [assumption] the
H200's)."""

_NIC_GEN: dict[str, PcieGen] = {"cx5": 3, "cx6": 4, "cx7": 5}
"""The PCIe generation of each ConnectX's host link (x16): CX-5 Gen3 (Gen4 on some SKUs), CX-6
Gen4, CX-7 Gen5 (NVIDIA product briefs)."""

_SERVER_CPU: dict[str, tuple[CpuSpec, int, int]] = {
    "intel": (
        CpuSpec(vendor="intel", family=6, model="Intel Xeon (Ice Lake / Sapphire Rapids)"),
        _INTEL,
        _SKYLAKE_E_ROOT,
    ),
    "amd": (CpuSpec(vendor="amd", family=0x19, model="AMD EPYC (Zen 3/4)"), _AMD, 0x1480),
}


def _gpu_device(gpu: _Gpu, parent: str) -> DeviceSpec:
    return DeviceSpec(
        name="gpu0",
        driver=gpu.driver,
        parent=parent,
        memory=gpu.memory,
        memory_bandwidth=parse_rate(gpu.bandwidth),
        gen=gpu.gen,
        width=16,
        vendor=gpu.vendor,
        device=gpu.device,
        bar_read=gpu.bar_read,
        gpu_import=False,
    )


@validate_call(config=_CALL)
def cx_pair(
    *,
    nic: Literal["cx5", "cx6", "cx7"] = "cx6",
    link: Literal["ib", "roce"] = "ib",
    line_rate: LineRate | None = None,
    mtu: Literal[256, 512, 1024, 2048, 4096] | None = None,
    cpu: Literal["intel", "amd"] = "intel",
    gpu: Literal["a100", "h100", "h200", "mi210"] | None = None,
    gpu_distance: Literal["switch", "root_complex", "cross_socket"] = "switch",
    nic_name: Name = "mlx5_0",
    cable: Duration = 10e-9,
    kernel: str | None = "6.16",
) -> ClusterSpec:
    """Two identical hosts, one ConnectX each, cabled back to back: the machine of
    ``pinlab bench perftest`` (the default platform of ``pinlab bench``).

    * ``nic``: ConnectX-5 (EDR 100G, Gen3 x16), ConnectX-6 (HDR 200G, Gen4) or ConnectX-7
      (NDR 400G, Gen5) -- the cost model's ``nic.<model>``; ``line_rate`` overrides the
      model's (an HDR100 port: ``"100Gbps"``), ``mtu`` its active MTU; ``link``: InfiniBand or
      RoCEv2; the NIC is ``nic_name`` (perftest's ``-d``), below a PCIe switch ``sw0`` of its
      generation on socket 0's root complex;
    * ``cpu``: Intel Xeon (P2P forwarding ``pcie.rc.intel_server``) or AMD EPYC
      (``pcie.rc.amd_zen``), 2 sockets, 8 channels of DDR4-3200 per socket (DDR5-4800 with a
      Gen5 NIC);
    * ``gpu``: an optional GPU ``gpu0`` for perftest's ``--use_cuda`` / ``--use_dmabuf``
      (:data:`GPUS`: A100, H100, H200 (nvidia-compute), MI210 (amdgpu)); ``gpu_distance``:
      behind the NIC's switch (``"switch"``, NVIDIA's PIX/PXB), on another root port of the
      same socket (``"root_complex"``, PHB) or on the other socket (``"cross_socket"``, SYS);
    * ``cable``: one-way latency of the cable between the two NICs (≈ 5 ns/m: 2 m copper).

    pinlab's assumptions: the host bridge IDs (Intel 0x2030, whitelisted; AMD 0x1480), host
    memory 512 GiB per socket, every link x16 at the default MPS.
    """
    cpu_spec, hb_vendor, hb_device = _SERVER_CPU[cpu]
    cpu_spec = cpu_spec.model_copy(update={"sockets": 2})
    gen = _NIC_GEN[nic]
    gpus: tuple[DeviceSpec, ...] = ()
    if gpu is not None:
        parent = {"switch": "sw0", "root_complex": "rc0", "cross_socket": "rc1"}[gpu_distance]
        gpus = (_gpu_device(GPUS[gpu], parent),)
    dram = "409.6GB/s" if gen == 5 else "204.8GB/s"
    node = PlatformSpec(
        name=f"cx-{nic}-{link}" + (f"-{gpu}-{gpu_distance}" if gpu else ""),
        description=f"a host with one {nic.upper()} ({link})"
        + (f" and an {GPUS[gpu].model} ({gpu_distance})" if gpu else ""),
        kernel=kernel,
        cpu=cpu_spec,
        dram=DramSpec(size=512 * GiB, bandwidth=parse_rate(dram)),
        host_bridges=tuple(
            HostBridgeSpec(name=f"rc{s}", socket=s, vendor=hb_vendor, device=hb_device)
            for s in range(2)
        ),
        switches=(SwitchSpec(name="sw0", parent="rc0", gen=gen, width=16),),
        devices=gpus,
        nics=(
            NicSpec(
                name=nic_name,
                driver="mlx5",
                model=nic,
                parent="sw0",
                line_rate=line_rate,
                link_layer=link,
                mtu=mtu,
                gen=gen,
                width=16,
                vendor=_MELLANOX,
                device=_CX_DEVICE[nic],
            ),
        ),
    )
    return ClusterSpec(
        name=f"pair-{node.name}",
        description=f"2 × ({node.description}), back to back",
        nodes=2,
        node=node,
        fabric=FabricSpec(latency=cable),
    )


_WORKSTATION_CPU: dict[str, tuple[CpuSpec, int, int]] = {
    "amd": (
        CpuSpec(vendor="amd", family=0x19, model="AMD Threadripper PRO (Zen 4)"),
        _AMD,
        0x14D8,
    ),
    "intel": (CpuSpec(vendor="intel", family=6, model="Intel Xeon W"), _INTEL, _SKYLAKE_E_ROOT),
    "intel-client": _CPU_DESKTOP["intel"],
}


@validate_call(config=_CALL)
def workstation_amd(
    *,
    cpu: Literal["amd", "intel", "intel-client"] = "amd",
    slots: Literal["switch", "root_complex"] = "root_complex",
    nic_model: Literal["cx5", "cx6", "cx7"] = "cx5",
    vram: Size = 32 * GiB,
    host_memory: Size = 128 * GiB,
    kernel: str | None = "6.16",
) -> PlatformSpec:
    """A workstation with an AMD GPU and a ConnectX NIC (issue 11's "workstation with an AMD
    GPU and a ConnectX NIC").

    * ``gpu0``: amdgpu, ``vram`` of VRAM (32 GiB, a Radeon PRO W6800-class card), PCIe Gen4
      x16, 512 GB/s, its BAR = all of VRAM (large BAR, which ROCm's P2P needs);
    * ``mlx5_0``: a ConnectX (``nic_model``, default ConnectX-5 EDR 100G) with ODP;
    * ``cpu``: AMD Zen 4 Threadripper PRO (P2P through the host bridge: ``pcie.rc.amd_zen``),
      Intel Xeon W (``pcie.rc.intel_server``, whitelisted host bridge) or an Intel Core client
      (not whitelisted: P2PDMA refuses; its root ports forward no P2P reads);
    * ``slots``: the GPU and the NIC on CPU root ports (``"root_complex"``, NVIDIA's PHB) or
      behind one PCIe switch (``"switch"``, PIX).

    pinlab's assumptions: one socket with 8 channels of DDR5-4800 (307.2 GB/s), host bridge
    IDs as :func:`workstation`'s and :func:`cx_pair`'s; ``pinlab bench`` makes a pair of it.
    """
    cpu_spec, hb_vendor, hb_device = _WORKSTATION_CPU[cpu]
    switches = (SwitchSpec(name="sw0", parent="rc0", gen=4, width=16),) if slots == "switch" else ()
    parent = "sw0" if slots == "switch" else "rc0"
    return PlatformSpec(
        name="workstation-amd"
        + ("" if cpu == "amd" else f"-{cpu}")
        + ("-switch" if slots == "switch" else ""),
        description="workstation: an amdgpu GPU and a ConnectX NIC",
        kernel=kernel,
        cpu=cpu_spec,
        dram=DramSpec(size=host_memory, bandwidth=parse_rate("307.2GB/s")),
        host_bridges=(HostBridgeSpec(name="rc0", socket=0, vendor=hb_vendor, device=hb_device),),
        switches=switches,
        devices=(
            DeviceSpec(
                name="gpu0",
                driver="amdgpu",
                parent=parent,
                memory=vram,
                memory_bandwidth=parse_rate("512GB/s"),
                gtt=host_memory // 2,
                system=host_memory,
                gen=4,
                width=16,
                vendor=_AMD_GPU,
                device=0x73A3,
            ),
        ),
        nics=(_rdma_nic(nic_model, 0, parent, gen=_NIC_GEN[nic_model], odp=True),),
    )


@validate_call(config=_CALL)
def matrix(
    *,
    exporter: str = "amdgpu",
    broken_mlx5: bool = False,
    memory: Size = 256 * MiB,
    kernel: str | None = None,
) -> PlatformSpec:
    """The machine of ``pinlab matrix`` (:mod:`pinlab.report.matrix`): one exporter and one
    importer of every kind, all able to reach each other peer-to-peer.

    * an AMD Zen host (host-bridge P2P allowed whatever the whitelist, K-83) with one root
      complex ``rc0`` (AMD 0x1022:0x1480) and one PCIe switch ``sw0`` on a root port;
    * ``gpu0``: the ``exporter`` driver with ``memory`` of device memory (256 MiB), 1 GiB GTT
      and 2 GiB system domains where the driver has them, on the switch -- or, for a driver
      whose memory is a carve-out of host DRAM (the APU), an integrated function on the root
      bus; no GPU importer of its own;
    * on the switch: ``efa0`` (EFA-like, pinned MRs), ``mlx5_0`` (mlx5-like with ODP; with
      ``broken_mlx5`` the deliberately broken importer that ignores ``move_notify``, the
      stale-DMA detector's negative control), ``mlx5_1`` (mlx5-like without ODP) and ``gpu1``,
      a second amdgpu-like GPU (same sizes) that imports buffers (``gpu1:import``) and owns the
      display engine ``display0`` -- dma-buf scanout happens on the *second* GPU in practice
      (PRIME: one GPU renders, another scans out).
    * ``<driver>0`` on the switch for every other registered RDMA driver (a plugin's).

    pinlab's assumptions beyond the matrix: host DRAM 64 GiB at 89.6 GB/s and the links'
    default rates (the matrix measures placements, not bandwidth).
    """
    integrated = exporter in EXPORTERS and EXPORTERS[exporter].carve_out
    nics = (
        NicSpec(name="efa0", driver="efa", parent="sw0"),
        NicSpec(
            name="mlx5_0",
            driver="mlx5",
            parent="sw0",
            odp=True,
            driver_options={"ignore_move_notify": True} if broken_mlx5 else {},
        ),
        NicSpec(name="mlx5_1", driver="mlx5", parent="sw0"),
    )
    return PlatformSpec(
        name=f"matrix-{exporter}",
        description="pinlab matrix: one exporter, an EFA, two mlx5 (ODP, no ODP), a GPU "
        "importer with a display, below one PCIe switch",
        kernel=kernel,
        cpu=CpuSpec(vendor="amd", family=0x19, model="AMD Zen"),
        dram=DramSpec(size=64 * GiB, bandwidth=parse_rate("89.6GB/s")),
        host_bridges=(HostBridgeSpec(name="rc0", socket=0, vendor=_AMD, device=0x1480),),
        switches=(SwitchSpec(name="sw0", parent="rc0"),),
        devices=(
            DeviceSpec(
                name="gpu0",
                driver=exporter,
                parent="rc0" if integrated else "sw0",
                rciep=integrated,
                gpu_import=False,
                memory=memory,
                gtt=1 * GiB,
                system=2 * GiB,
            ),
            DeviceSpec(
                name="gpu1",
                driver="amdgpu",
                parent="sw0",
                memory=memory,
                gtt=1 * GiB,
                system=2 * GiB,
            ),
        ),
        nics=(*nics, *_other_rdma_nics({n.driver for n in nics})),
        displays=(DisplaySpec(name="display0", device="gpu1"),),
    )


def _other_rdma_nics(used: set[str]) -> list[NicSpec]:
    """One NIC ``<driver>0`` on the switch for each registered RDMA driver the matrix machine
    has none of (a plugin's, ``pinlab.plugins``), so every RDMA importer is a matrix column."""
    return [
        NicSpec(name=f"{name}0", driver=name, parent="sw0")
        for name, cls in IMPORTERS.items()
        if issubclass(cls, RdmaDevice) and name not in used
    ]


@validate_call(config=ConfigDict(arbitrary_types_allowed=True))
def cluster(
    *,
    nodes: int = 16,
    node: PlatformSpec | None = None,
    efa_behind_switch: bool = False,
    nic: NicChoice = "efa",
    core_bandwidth: Rate | None = None,
) -> ClusterSpec:
    """``nodes`` DL1-like nodes (default 16: the debate's 128-accelerator cluster, seed-brief).

    ``node`` defaults to :func:`dl1` (``efa_behind_switch`` and ``nic`` passed on). The fabric is
    non-blocking unless ``core_bandwidth`` is given; one kernel per node, one profile for all
    (:mod:`pinlab.platform.cluster`).
    """
    spec = node if node is not None else dl1(efa_behind_switch=efa_behind_switch, nic=nic)
    return ClusterSpec(
        name=f"cluster{nodes}-{spec.name}",
        description=f"{nodes} × {spec.name} joined by a "
        + ("non-blocking fabric" if core_bandwidth is None else "shared fabric core"),
        nodes=nodes,
        node=spec,
        fabric=FabricSpec(core_bandwidth=core_bandwidth),
    )


PRESETS: PluginRegistry[str, Callable[..., AnySpec]] = PluginRegistry(
    {
        "dl1": dl1,
        "p4d": p4d,
        "workstation": workstation,
        "workstation-amd": workstation_amd,
        "cx-pair": cx_pair,
        "apu-laptop": apu_laptop,
        "cluster": cluster,
        "matrix": matrix,
        "dgx-a100": dgx_a100,
        "dgx-h100": dgx_h100,
        "p5": p5,
        "gpu-box": gpu_box,
    }
)
"""Preset platforms by name (``pinlab run --platform NAME``): the built-in ones, then the
installed plugins' (``pinlab.plugins``)."""


def _register_plugin(name: str, obj: object) -> None:
    if not callable(obj):
        raise TypeError(f"expected a function giving a platform spec, found {describe(obj)}")
    if name in PRESETS:
        raise ValueError(f"expected a new preset name, found {name!r} (already registered)")
    PRESETS[name] = obj


PRESETS.plugins("pinlab.presets", _register_plugin)


# -- files ---------------------------------------------------------------------------------------


def _preset(name: object, params: object, source: str) -> AnySpec:
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(source, "preset", f"expected one of {', '.join(PRESETS)}, found {name!r}")
    if not isinstance(params, Mapping):
        raise ConfigError(source, "params", f"expected a table of parameters, found {params!r}")
    func = PRESETS[name]
    allowed = list(inspect.signature(func).parameters)
    for key in params:
        if key not in allowed:
            raise ConfigError(
                source,
                f"params.{key}",
                f"expected a parameter of preset {name!r} ({', '.join(allowed)}), found {key!r}",
            )
    try:
        spec = func(**params)
    except ValidationError as e:
        raise config_error(e, source, "params") from None
    if not isinstance(spec, PlatformSpec | ClusterSpec):
        # a plugin's preset function (``pinlab.presets``) may give anything
        raise ConfigError(
            source, "preset", f"expected {name!r} to give a platform spec, found {spec!r}"[:200]
        )
    return spec


def platform_from_dict(data: Mapping[str, Any], source: str = "platform") -> AnySpec:
    """Validate a parsed platform file (see the module docstring) with one-line errors."""
    if "preset" in data:
        extra = set(data) - {"preset", "params"}
        if extra:
            key = sorted(extra)[0]
            raise ConfigError(
                source, key, f"expected only 'preset' and 'params' in a preset file, found {key!r}"
            )
        return _preset(data["preset"], data.get("params", {}), source)
    kind = data.get("kind", "node")
    try:
        if kind == "cluster":
            return ClusterSpec.model_validate(dict(data), context=STRICT_UNITS)
        if kind != "node":
            raise ConfigError(source, "kind", f"expected 'node' or 'cluster', found {kind!r}")
        return PlatformSpec.model_validate(dict(data), context=STRICT_UNITS)
    except ValidationError as e:
        raise config_error(e, source) from None


def load_platform(path: str | Path) -> AnySpec:
    """Read a TOML platform file; :class:`ConfigError` (one line, file and field) on error."""
    source = str(path)
    data = read_toml(path, what="a platform file")
    return platform_from_dict(data, source)


def dump_platform(spec: AnySpec) -> str:
    """``spec`` as a TOML platform file (every field, exact unit strings); loads back equal."""
    return tomli_w.dumps(spec.model_dump(mode="json", exclude_none=True))


def resolve_platform(name_or_path: str | Path, **params: Any) -> AnySpec:
    """A preset by name (with ``params``), or a platform file by path."""
    if isinstance(name_or_path, str) and name_or_path in PRESETS:
        return _preset(name_or_path, params, f"preset {name_or_path}")
    if params:
        raise ConfigError(str(name_or_path), "params", "expected no parameters for a file")
    return load_platform(name_or_path)
