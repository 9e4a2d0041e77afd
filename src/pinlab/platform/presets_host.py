"""Single-host presets (``cost-model.md`` §9.3, §9.4) and the pair ``pinlab bench`` measures:
``workstation`` and ``apu-laptop`` (a GPU with a display), ``workstation-amd`` (an AMD GPU and
a ConnectX), ``cx-pair`` (two ConnectX hosts back to back, with an optional GPU)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import validate_call

from pinlab.platform.cluster import ClusterSpec, FabricSpec
from pinlab.platform.preset_parts import (
    AMD_GPU,
    CPU_DESKTOP,
    NIC_GEN,
    NVIDIA,
    SERVER_CPU,
    STRICT_CALL,
    WORKSTATION_CPU,
    HostCpu,
    connectx,
    rdma_nic,
)
from pinlab.platform.spec import (
    DeviceSpec,
    DisplaySpec,
    DramSpec,
    PlatformSpec,
    SwitchSpec,
)
from pinlab.platform.spec_fields import Name, PcieGen
from pinlab.units import GB, Duration, GiB, LineRate, MiB, Size, parse_rate

__all__ = ["GPUS", "apu_laptop", "cx_pair", "workstation", "workstation_amd"]


def _one_socket(
    host: HostCpu, *, host_memory: int, dram: str, gpu: dict[str, Any], **spec: Any
) -> PlatformSpec:
    """A one-socket host around one GPU: ``host``'s CPU with its one host bridge ``rc0``,
    ``host_memory`` of DRAM at ``dram`` (its theoretical rate), and the GPU of ``gpu`` (its
    :class:`DeviceSpec` fields) with GTT = half of host memory (TTM's default page limit) and
    SYSTEM = host memory; ``spec``: the platform's other fields (name, kernel, NICs, ...)."""
    return PlatformSpec(
        cpu=host.cpu,
        dram=DramSpec(size=host_memory, bandwidth=parse_rate(dram)),
        host_bridges=(host.host_bridge(),),
        devices=(DeviceSpec(gtt=host_memory // 2, system=host_memory, **gpu),),
        **spec,
    )


def _amdgpu(parent: str, vram: int, device: int, **fields: Any) -> dict[str, Any]:
    """The fields of ``gpu0``, an amdgpu discrete GPU with ``vram`` in a PCIe Gen4 x16 slot
    below ``parent`` (PCI device ID ``device``), for :func:`_one_socket`; ``fields``: more."""
    return {
        "name": "gpu0",
        "driver": "amdgpu",
        "parent": parent,
        "memory": vram,
        "gen": 4,
        "width": 16,
        "vendor": AMD_GPU,
        "device": device,
        **fields,
    }


@validate_call(config=STRICT_CALL)
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
    return _one_socket(
        CPU_DESKTOP[cpu],
        host_memory=host_memory,
        dram="89.6GB/s",
        gpu=_amdgpu("rc0", vram, 0x744C, bar=vram if resizable_bar else bar),
        name="workstation" if cpu == "amd" else "workstation-intel",
        description="desktop: one amdgpu-like dGPU with a display, an ODP-capable NIC "
        "(cost-model.md §9.3)",
        kernel=kernel,
        nics=((connectx("mlx5_0", "rc0", nic_model, gen=4, odp=True),) if nic else ()),
        displays=(DisplaySpec(name="display0", device="gpu0"),),
    )


@validate_call(config=STRICT_CALL)
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
    host = CPU_DESKTOP[cpu]
    if cpu == "amd":
        host = host.with_bridge_device(0x14E8)
    return _one_socket(
        host,
        host_memory=host_memory,
        dram="76.8GB/s",
        gpu={
            "name": "apu0",
            "driver": "apu",
            "parent": "rc0",
            "rciep": True,
            "carve_out": True,
            "memory": carve_out,
            "vendor": AMD_GPU,
            "device": 0x15BF,
        },
        name="apu-laptop" if cpu == "amd" else "apu-laptop-intel",
        description="APU laptop: an integrated GPU with a DRAM carve-out and a display "
        "(cost-model.md §9.4)",
        kernel=kernel,
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
        NVIDIA,
        0x20B2,
        "a100",
    ),
    "h100": _Gpu(
        "NVIDIA H100 80GB HBM3",
        "nvidia-compute",
        80 * GiB,
        "3350GB/s",
        5,
        NVIDIA,
        0x2330,
        "h200",
    ),
    "h200": _Gpu(
        "NVIDIA H200",
        "nvidia-compute",
        141 * GB // (2 * MiB) * (2 * MiB),  # 141 GB, in whole 2 MiB pages
        "4800GB/s",
        5,
        NVIDIA,
        0x2335,
        "h200",
    ),
    "mi210": _Gpu(
        "AMD Instinct MI210",
        "amdgpu",
        64 * GiB,
        "1638GB/s",
        4,
        AMD_GPU,
        0x740F,
        None,
    ),
}
"""GPUs ``cx-pair`` can place next to its NIC (HBM sizes and rates: vendor data sheets; the
BAR read latency is the cost model's ``pcie.bar_read`` row, the H100 [assumption] the
H200's)."""


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


@validate_call(config=STRICT_CALL)
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
    host = SERVER_CPU[cpu]
    cpu_spec = host.cpu.model_copy(update={"sockets": 2})
    gen = NIC_GEN[nic]
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
        host_bridges=tuple(host.host_bridge(f"rc{s}", s) for s in range(2)),
        switches=(SwitchSpec(name="sw0", parent="rc0", gen=gen, width=16),),
        devices=gpus,
        nics=(
            connectx(nic_name, "sw0", nic, gen=gen, line_rate=line_rate, link_layer=link, mtu=mtu),
        ),
    )
    return ClusterSpec(
        name=f"pair-{node.name}",
        description=f"2 × ({node.description}), back to back",
        nodes=2,
        node=node,
        fabric=FabricSpec(latency=cable),
    )


@validate_call(config=STRICT_CALL)
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
    switches = (SwitchSpec(name="sw0", parent="rc0", gen=4, width=16),) if slots == "switch" else ()
    parent = "sw0" if slots == "switch" else "rc0"
    return _one_socket(
        WORKSTATION_CPU[cpu],
        host_memory=host_memory,
        dram="307.2GB/s",
        gpu=_amdgpu(parent, vram, 0x73A3, memory_bandwidth=parse_rate("512GB/s")),
        name="workstation-amd"
        + ("" if cpu == "amd" else f"-{cpu}")
        + ("-switch" if slots == "switch" else ""),
        description="workstation: an amdgpu GPU and a ConnectX NIC",
        kernel=kernel,
        switches=switches,
        nics=(rdma_nic(nic_model, 0, parent, gen=NIC_GEN[nic_model], odp=True),),
    )
