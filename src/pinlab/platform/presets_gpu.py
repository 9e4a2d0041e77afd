"""GPU platform presets: NVSwitch servers (``dgx-a100``, ``dgx-h100``, ``p5``) and PCIe GPU
boxes (``gpu-box``), the machines of the published GPU tables (``docs/cost-model/gpu.md`` §G6).

Registered in :data:`pinlab.platform.presets.PRESETS` beside the §9 presets. Facts carry their
source in the docstrings; what pinlab had to choose is marked [assumption].
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, validate_call

from pinlab.platform.gpu_model import GPU_MODELS, GpuModel
from pinlab.platform.preset_parts import AMAZON, AMD, INTEL, ConnectX, HostCpu, connectx
from pinlab.platform.spec import (
    CpuSpec,
    DeviceSpec,
    DramSpec,
    HostBridgeSpec,
    InterSocketSpec,
    NicSpec,
    NvlinkSpec,
    PlatformSpec,
    SwitchSpec,
)
from pinlab.platform.spec_fields import Mtu
from pinlab.units import GiB, LineRate, TiB, parse_rate

__all__ = ["GPU_BOX_CPUS", "dgx_a100", "dgx_h100", "gpu_box", "gpu_device", "p5"]

_CALL = ConfigDict(arbitrary_types_allowed=False)

_BROADCOM = 0x1000
"""Broadcom/LSI: the PEX88000/89000 switches of DGX servers (``0x1000:0xc010`` in the DGX A100
topology dump of ``NVIDIA/nccl`` #1505)."""

_PCI_DEVICE = {
    # CUDA device IDs [assumption beyond the A100's 0x20b0, read in NVIDIA/nccl #1505]
    "a100-sxm4-40gb": 0x20B0,
    "a100-sxm4-80gb": 0x20B2,
    "h100-sxm5-80gb": 0x2330,
}

GpuKey = Literal[
    "a100-sxm4-40gb",
    "a100-sxm4-80gb",
    "a100-pcie-40gb",
    "h100-sxm5-80gb",
    "rtx6000-ada",
    "rtx-a6000",
    "rtx4090",
    "v100-sxm2-32gb",
    "p100-pcie-16gb",
    "radeon-pro-wx8100",
    "mi25",
]
"""Keys of :data:`pinlab.platform.gpu_model.GPU_MODELS` a preset accepts."""


def gpu_device(
    name: str, key: str, parent: str, *, host_memory: int | None = None, width: int = 16
) -> DeviceSpec:
    """A :class:`DeviceSpec` of GPU model ``key`` named ``name`` below ``parent``: memory,
    bandwidth, PCIe generation, PCI vendor, model name and compute capability from the model;
    an AMD GPU (amdgpu exporter) gets GTT = half of ``host_memory`` (TTM's default page limit)
    and SYSTEM = ``host_memory``. The nvidia-compute model keeps its own TT and SYSTEM sizes
    (``default_sizes``): sizing them from the host too, as its declared host-memory domains
    would suggest, changes the NVIDIA ``gpu-box`` presets and is left for a change of the
    model."""
    g: GpuModel = GPU_MODELS[key]
    amd = g.driver == "amdgpu"
    return DeviceSpec(
        name=name,
        driver=g.driver,
        parent=parent,
        memory=g.memory,
        memory_bandwidth=g.memory_bandwidth,
        gtt=host_memory // 2 if amd and host_memory else None,
        system=host_memory if amd and host_memory else None,
        gen=g.pcie_gen,
        width=width,  # type: ignore[arg-type]
        vendor=g.vendor,
        device=_PCI_DEVICE.get(key, 0),
        model=g.name,
        compute_capability=g.compute_capability,
        bar_read=g.bar_read,
        gpu_import=False,
    )


def _nvswitch(key: str, gpus: int, switches: int) -> tuple[NvlinkSpec, ...]:
    g = GPU_MODELS[key]
    if g.nvlink_gen is None or gpus < 2:
        return ()
    return (
        NvlinkSpec(
            name="nvswitch",
            gen=g.nvlink_gen,
            devices=tuple(f"gpu{i}" for i in range(gpus)),
            links=g.nvlink_links,
            switches=switches,
        ),
    )


@validate_call(config=_CALL)
def dgx_a100(
    *,
    gpu: Literal["a100-sxm4-40gb", "a100-sxm4-80gb"] = "a100-sxm4-40gb",
    nic: ConnectX = "cx6",
    link: Literal["ib", "roce"] = "ib",
    line_rate: LineRate | None = None,
    mtu: Mtu | None = None,
    gpus: Annotated[int, Field(ge=1, le=8)] = 8,
    nics: Annotated[int, Field(ge=0, le=8)] = 8,
    kernel: str | None = None,
) -> PlatformSpec:
    """NVIDIA DGX A100 (``docs/cost-model/gpu.md`` §G6); ``gpus``/``nics`` keep the first so
    many of each (a run that uses fewer); ``nic``, ``link``, ``line_rate``, ``mtu``: the compute
    NICs' ConnectX model (``nic.<model>``), link layer, line rate (an HDR100 port: ``100Gbps``)
    and active MTU, as ``cx-pair`` takes them.

    * 8 × A100 SXM4 (``gpu``: 40 GB in the DGX A100 320GB, 80 GB in the 640GB), all 12 NVLink 3
      links of each to 6 NVSwitches (``nvswitch``; 4.8 TB/s bidirectional in total);
    * 2 × AMD EPYC 7742 (Rome, 64 cores), 8 channels of DDR4-3200 per socket (204.8 GB/s;
      [unverified] per SKU), 1 TB (320GB model) or 2 TB (640GB);
    * 8 × single-port ConnectX-6 HDR 200 Gb/s (``mlx5_0``–``mlx5_7``) for compute;
    * PCIe Gen4: four switch complexes, one per root complex (``rc0``–``rc3``, two per
      socket), each holding two GPUs and two compute NICs: GPU0/1 ↔ mlx5_0/1 ``PXB``, every
      other GPU–NIC pair ``SYS`` (``nvidia-smi topo -m`` of a DGX A100 in ``NVIDIA/nccl`` #1505
      and ``rapidsai/ucx-py`` #749); mlcommons DGX-A100 system JSON for CPU and memory.

    pinlab's assumptions: each GPU and NIC sits behind its own second-level switch below the
    complex's top switch (so every pair in a complex is ``PXB``, as ``nvidia-smi`` shows);
    NPS1 (one NUMA node per socket; the real DGX runs NPS4, so GPU pairs on one socket show
    ``SYS`` there and ``NODE`` here -- both beyond NCCL's ``PXB`` default); the two storage
    NICs are left out; xGMI between the sockets 4 × x16 at 16 GT/s (126 GB/s per direction).
    """
    g = GPU_MODELS[gpu]
    host = (1 if gpu == "a100-sxm4-40gb" else 2) * TiB
    switches: list[SwitchSpec] = []
    devices: list[DeviceSpec] = []
    nic_specs: list[NicSpec] = []
    for k in range(4):
        top = f"plx{k}"
        switches.append(SwitchSpec(name=top, parent=f"rc{k}", vendor=_BROADCOM, device=0xC010))
        for j in range(2):
            i = 2 * k + j
            switches.append(SwitchSpec(name=f"{top}.g{j}", parent=top, vendor=_BROADCOM))
            switches.append(SwitchSpec(name=f"{top}.n{j}", parent=top, vendor=_BROADCOM))
            devices.append(gpu_device(f"gpu{i}", gpu, f"{top}.g{j}"))
            nic_specs.append(
                connectx(
                    f"mlx5_{i}",
                    f"{top}.n{j}",
                    nic,
                    gen=4,
                    line_rate=line_rate,
                    link_layer=link,
                    mtu=mtu,
                )
            )
    return PlatformSpec(
        name="dgx-a100",
        description=f"NVIDIA DGX A100: 8 × {g.name}, 6 NVSwitch, 8 × HDR ConnectX-6, 2 × EPYC 7742",
        kernel=kernel,
        cpu=CpuSpec(vendor="amd", family=0x17, model="AMD EPYC 7742 (Rome)", sockets=2),
        dram=DramSpec(size=host // 2, bandwidth=parse_rate("204.8GB/s")),
        host_bridges=tuple(
            HostBridgeSpec(name=f"rc{k}", socket=k // 2, vendor=AMD, device=0x1480)
            for k in range(4)
        ),
        switches=tuple(switches),
        devices=tuple(devices[:gpus]),
        nics=tuple(nic_specs[:nics]),
        nvlink=_nvswitch(gpu, gpus, 6),
        inter_socket=InterSocketSpec(bandwidth=parse_rate("126GB/s")),
    )


_SPR = CpuSpec(
    vendor="intel", family=6, model="Intel Xeon Platinum 8480C (Sapphire Rapids)", sockets=2
)
_SPR_DRAM = "307.2GB/s"
"""DDR5-4800 × 8 channels per socket (cost-model.md §5 table)."""
_SPR_ROOT = 0x09A2
"""The first device on a Sapphire Rapids root bus, as on every Xeon since Ice Lake-SP ("PCI/P2PDMA:
Add Intel QAT, DSA, IAA devices to whitelist" says so). On the P2PDMA whitelist from v5.18
(K-133): root-complex P2P between switches is refused only by the ``5.16`` preset; GPU and NIC
below one switch are unaffected."""


def _hopper_node(
    name: str, description: str, cpu: CpuSpec, dram: str, nics: list[NicSpec], gpus: int
) -> PlatformSpec:
    switches = [
        SwitchSpec(name=f"sw{i}", parent=f"rc{i // 4}", gen=5, vendor=_BROADCOM, device=0xC030)
        for i in range(8)
    ]
    devices = [gpu_device(f"gpu{i}", "h100-sxm5-80gb", f"sw{i}") for i in range(gpus)]
    root = _SPR_ROOT if cpu.vendor == "intel" else 0x1480
    return PlatformSpec(
        name=name,
        description=description,
        cpu=cpu,
        dram=DramSpec(size=1 * TiB, bandwidth=parse_rate(dram)),
        host_bridges=tuple(
            HostBridgeSpec(
                name=f"rc{s}",
                socket=s,
                vendor=INTEL if cpu.vendor == "intel" else AMD,
                device=root,
            )
            for s in range(2)
        ),
        switches=tuple(switches),
        devices=tuple(devices),
        nics=tuple(nics),
        nvlink=_nvswitch("h100-sxm5-80gb", gpus, 4),
        inter_socket=InterSocketSpec(bandwidth=parse_rate("128GB/s")),
    )


@validate_call(config=_CALL)
def dgx_h100(
    *,
    nic: ConnectX = "cx7",
    link: Literal["ib", "roce"] = "ib",
    line_rate: LineRate | None = None,
    mtu: Mtu | None = None,
    gpus: Annotated[int, Field(ge=1, le=8)] = 8,
    nics: Annotated[int, Field(ge=0, le=8)] = 8,
    kernel: str | None = None,
) -> PlatformSpec:
    """NVIDIA DGX H100 (``docs/cost-model/gpu.md`` §G6); ``gpus``/``nics`` keep the first so
    many of each; ``nic``, ``link``, ``line_rate``, ``mtu`` as for ``dgx-a100``.

    * 8 × H100 SXM5 80 GB, 18 NVLink 4 links each to the NVSwitches (900 GB/s bidirectional);
      4 NVSwitch chips [unverified];
    * 2 × Intel Xeon Platinum 8480C (56 cores), 2 TB = 32 × 64 GB DDR5-4800 (8 channels per
      socket, 307.2 GB/s);
    * 8 × ConnectX-7 NDR 400 Gb/s for compute (``mlx5_0``–``mlx5_7``), PCIe Gen5 x16 host links
      (mlcommons inference_results_v4.1 DGX-H100 system JSON: "10x 400Gbe", "PCIe Gen5");
    * each GPU ``PIX`` to its own NIC (``deepseek-ai/DeepEP`` #128, an HGX H100).

    pinlab's assumptions: one Gen5 switch per GPU–NIC pair, four per socket on one root
    complex; UPI 4 × 32 GB/s per direction; storage NICs left out.
    """
    nic_specs = [
        connectx(f"mlx5_{i}", f"sw{i}", nic, gen=5, line_rate=line_rate, link_layer=link, mtu=mtu)
        for i in range(8)
    ][:nics]
    spec = _hopper_node(
        "dgx-h100",
        "NVIDIA DGX H100: 8 × H100 SXM5, NVSwitch, 8 × NDR ConnectX-7, 2 × Xeon 8480C",
        _SPR,
        _SPR_DRAM,
        nic_specs,
        gpus,
    )
    return spec.model_copy(update={"kernel": kernel})


@validate_call(config=_CALL)
def p5(
    *,
    cpu: Literal["spr", "milan"] = "milan",
    efa_per_gpu: Annotated[int, Field(ge=1, le=8)] = 4,
    gpus: Annotated[int, Field(ge=1, le=8)] = 8,
    kernel: str | None = None,
) -> PlatformSpec:
    """AWS p5.48xlarge-like node (``docs/cost-model/gpu.md`` §G6).

    * 8 × H100 SXM5 80 GB on NVSwitch (NVLink 4), PCIe Gen5 host links;
    * 32 × 100 Gb/s EFA = 3.2 Tb/s (``efa0``–``efa31``), ``efa_per_gpu`` (4) on each GPU's PCIe
      switch (cost-model §9.5; ``stas00/ml-engineering``);
    * 2 TiB host memory; ``cpu``: ``"milan"`` (the default: two AMD EPYC 7R13, 3rd generation,
      DDR4-3200 × 8 per socket -- the processors AWS's instance page names for p5.48xlarge) or
      ``"spr"`` (Sapphire Rapids, DDR5-4800 × 8 per socket: p5en.48xlarge's, cost-model.md
      §9.5).

    pinlab's assumptions: the EFA links Gen4 x16; one switch per GPU with its EFAs.
    """
    nic_specs = [
        NicSpec(
            name=f"efa{i * efa_per_gpu + j}",
            driver="efa",
            model="efa",
            parent=f"sw{i}",
            line_rate=parse_rate("100Gbps"),
            vendor=AMAZON,
            device=0xEFA1,
            driver_options={"rdma_write": True},
        )
        for i in range(gpus)
        for j in range(efa_per_gpu)
    ]
    cpu_spec = (
        _SPR
        if cpu == "spr"
        else CpuSpec(vendor="amd", family=0x19, model="AMD EPYC 7R13 (Milan)", sockets=2)
    )
    spec = _hopper_node(
        "p5",
        f"AWS p5.48xlarge-like: 8 × H100 SXM5, NVSwitch, {8 * efa_per_gpu} × 100 Gbps EFA",
        cpu_spec,
        _SPR_DRAM if cpu == "spr" else "204.8GB/s",
        nic_specs,
        gpus,
    )
    return spec.model_copy(update={"kernel": kernel})


# -- PCIe GPU boxes ------------------------------------------------------------------------------

GPU_BOX_CPUS: dict[str, tuple[HostCpu, str, str]] = {
    # key: (cpu with its socket count and host bridge IDs, DRAM per socket, socket link)
    # DRAM = channels × MT/s × 8 B from the vendors' product pages [unverified]
    "threadripper-pro-7965wx": (
        HostCpu(
            CpuSpec(
                vendor="amd", family=0x19, model="AMD Ryzen Threadripper PRO 7965WX", sockets=1
            ),
            AMD,
            0x14A4,
        ),
        "332.8GB/s",
        "41.6GB/s",
    ),
    "epyc-9374f": (
        HostCpu(
            CpuSpec(vendor="amd", family=0x19, model="AMD EPYC 9374F (Genoa)", sockets=2),
            AMD,
            0x14A4,
        ),
        "460.8GB/s",
        "256GB/s",
    ),
    "epyc-7261": (
        HostCpu(
            CpuSpec(vendor="amd", family=0x17, model="AMD EPYC 7261 (Naples)", sockets=1),
            AMD,
            0x1450,
        ),
        "170.6GB/s",
        "41.6GB/s",
    ),
    "xeon-w-2123": (
        HostCpu(
            CpuSpec(vendor="intel", family=6, model="Intel Xeon W-2123 (Skylake-W)", sockets=1),
            INTEL,
            0x2020,
        ),
        "85.3GB/s",
        "41.6GB/s",
    ),
    "core-i7-6900k": (
        HostCpu(
            CpuSpec(vendor="intel", family=6, model="Intel Core i7-6900K (Broadwell-E)", sockets=1),
            INTEL,
            0x6F00,
        ),
        "76.8GB/s",
        "41.6GB/s",
    ),
    "xeon-e5-2698v4": (
        HostCpu(
            CpuSpec(
                vendor="intel", family=6, model="Intel Xeon E5-2698 v4 (Broadwell-EP)", sockets=2
            ),
            INTEL,
            0x6F00,
        ),
        "76.8GB/s",
        "38.4GB/s",
    ),
    "xeon-gold-6248": (
        HostCpu(
            CpuSpec(
                vendor="intel", family=6, model="Intel Xeon Gold 6248 (Cascade Lake)", sockets=2
            ),
            INTEL,
            0x2030,
        ),
        "140.8GB/s",
        "62.4GB/s",
    ),
}
"""CPUs a :func:`gpu_box` can have."""

BoxCpu = Literal[
    "threadripper-pro-7965wx",
    "epyc-9374f",
    "epyc-7261",
    "xeon-w-2123",
    "core-i7-6900k",
    "xeon-e5-2698v4",
    "xeon-gold-6248",
]
"""Keys of :data:`GPU_BOX_CPUS`."""

BoxLayout = Literal["root-ports", "host-bridges", "switch", "switch-pairs"]
"""How a :func:`gpu_box`'s GPUs attach on each socket: each on its own root port of one host
bridge (``PHB`` between them), each on its own host bridge (``NODE``), all behind one PCIe
switch (``PIX``), or pairs behind a switch each (``PIX`` within, ``PHB`` between pairs)."""


@validate_call(config=_CALL)
def gpu_box(
    *,
    gpus: Annotated[int, Field(ge=1, le=16)] = 2,
    gpu: GpuKey = "rtx6000-ada",
    cpu: BoxCpu = "threadripper-pro-7965wx",
    sockets: Literal[1, 2] | None = None,
    layout: BoxLayout = "root-ports",
    nvlink_pairs: bool = False,
    nics: int = 0,
    nic: ConnectX = "cx7",
    nic_rate: Literal["100Gbps", "200Gbps", "400Gbps"] = "200Gbps",
    host_memory_per_socket: int = 256 * GiB,
    kernel: str | None = None,
) -> PlatformSpec:
    """N PCIe GPUs under one or two sockets (``docs/cost-model/gpu.md`` §G6): the machines of
    the ``p2pBandwidthLatencyTest`` tables of PCIe boxes and the ROCm workstations.

    * ``gpus`` × ``gpu`` (a :data:`~pinlab.platform.gpu_model.GPU_MODELS` key; an AMD GPU gets
      the amdgpu exporter), split evenly over the sockets, attached per ``layout``
      (:data:`BoxLayout`); ``nvlink_pairs`` bridges GPU 2k and 2k+1 with NVLink (the GPU's
      generation, 4 links [assumption]) when the model has NVLink;
    * ``cpu``: a :data:`GPU_BOX_CPUS` key (its vendor and family decide root-complex P2P, its
      host bridge ID the Intel whitelist); ``sockets`` defaults to the CPU's;
    * ``nics`` ConnectX NICs of model ``nic`` at ``nic_rate``, spread over the sockets, each on
      its own host bridge (``NODE`` to the GPUs, as in the RTX 6000 Ada boxes of C3/C4).

    C3 is ``gpu_box(gpus=2)``; C4 ``gpu_box(gpus=4, cpu="epyc-9374f", layout="host-bridges")``;
    C6 (b) ``gpu_box(gpu="radeon-pro-wx8100", cpu="xeon-w-2123")``; C7
    ``gpu_box(gpu="mi25", cpu="epyc-7261")``.
    """
    host, dram, socket_link = GPU_BOX_CPUS[cpu]
    n_sockets = sockets if sockets is not None else host.cpu.sockets
    cpu_spec = host.cpu.model_copy(update={"sockets": n_sockets})
    host_bridges: list[HostBridgeSpec] = []
    switches: list[SwitchSpec] = []
    devices: list[DeviceSpec] = []
    per_socket = -(-gpus // n_sockets)
    for i in range(gpus):
        s = min(i // per_socket, n_sockets - 1)
        k = i - s * per_socket  # index on its socket
        if layout == "host-bridges":
            parent = f"rc{s}.{k}"
            host_bridges.append(host.host_bridge(parent, s))
        elif layout == "switch":
            parent = f"sw{s}"
        elif layout == "switch-pairs":
            parent = f"sw{s}.{k // 2}"
        else:
            parent = f"rc{s}"
        if layout in ("switch", "switch-pairs") and all(sw.name != parent for sw in switches):
            switches.append(SwitchSpec(name=parent, parent=f"rc{s}", gen=GPU_MODELS[gpu].pcie_gen))
        devices.append(gpu_device(f"gpu{i}", gpu, parent, host_memory=host_memory_per_socket))
    if layout != "host-bridges":
        host_bridges = [host.host_bridge(f"rc{s}", s) for s in range(n_sockets)]
    nic_specs: list[NicSpec] = []
    for j in range(nics):
        s = j % n_sockets
        bridge = f"rc{s}.nic{j}"
        host_bridges.append(host.host_bridge(bridge, s))
        nic_specs.append(
            connectx(
                f"mlx5_{j}",
                bridge,
                nic,
                gen=4 if nic != "cx7" else 5,
                line_rate=parse_rate(nic_rate),
                link_layer="ib",
            )
        )
    g = GPU_MODELS[gpu]
    nvlink: tuple[NvlinkSpec, ...] = ()
    if nvlink_pairs and g.nvlink_gen is not None:
        nvlink = tuple(
            NvlinkSpec(
                name=f"bridge{k}",
                gen=g.nvlink_gen,
                devices=(f"gpu{2 * k}", f"gpu{2 * k + 1}"),
                links=4,
            )
            for k in range(gpus // 2)
        )
    return PlatformSpec(
        name="gpu-box",
        description=f"{gpus} × {g.name} on PCIe ({layout}), {cpu_spec.model}",
        kernel=kernel,
        cpu=cpu_spec,
        dram=DramSpec(size=host_memory_per_socket, bandwidth=parse_rate(dram)),
        host_bridges=tuple(host_bridges),
        switches=tuple(switches),
        devices=tuple(devices),
        nics=tuple(nic_specs),
        nvlink=nvlink,
        inter_socket=InterSocketSpec(bandwidth=parse_rate(socket_link)),
    )
