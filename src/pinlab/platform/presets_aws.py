"""The AWS presets of the debate (``cost-model.md`` §9.1, §9.2): ``dl1`` (Gaudi and EFA), ``p4d``
(A100 and EFA) and ``cluster``, ``nodes`` of one of them on a fabric."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, validate_call

from pinlab.platform.cluster import ClusterSpec, FabricSpec
from pinlab.platform.gpu_model import GPU_MODELS
from pinlab.platform.preset_parts import (
    DDR4_2933_X6,
    HABANA,
    INTEL,
    NVIDIA,
    SKYLAKE_E_ROOT,
    STRICT_CALL,
    NicChoice,
    rdma_nic,
)
from pinlab.platform.spec import (
    CpuSpec,
    DeviceSpec,
    DramSpec,
    HostBridgeSpec,
    NvlinkSpec,
    PlatformSpec,
    SwitchSpec,
)
from pinlab.units import GiB, Rate, Size, parse_rate

__all__ = ["cluster", "dl1", "p4d"]


@validate_call(config=STRICT_CALL)
def dl1(
    *,
    efa_behind_switch: bool = False,
    hbm: Size = 32 * GiB,
    sockets: Literal[1, 2] = 2,
    host_bridge_device: int = SKYLAKE_E_ROOT,
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
        HostBridgeSpec(name=f"rc{s}", socket=s, vendor=INTEL, device=host_bridge_device)
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
            vendor=HABANA,
            device=0x1000,
        )
        for i in range(8)
    ]
    nics = [
        rdma_nic(nic, i, f"sw{i}" if efa_behind_switch else f"rc{i // per_socket}", gen=3)
        for i in range(4)
    ]
    return PlatformSpec(
        name="dl1" + ("-efa-switch" if efa_behind_switch else ""),
        description="AWS dl1.24xlarge-like: 8 Gaudi, Gaudi pairs share a Gen3 x16 link, "
        "4 × 100 Gbps EFA (cost-model.md §9.1)",
        kernel=kernel,
        cpu=CpuSpec(vendor="intel", family=6, model="Intel Xeon (Cascade Lake)", sockets=sockets),
        dram=DramSpec(size=768 * GiB // sockets, bandwidth=parse_rate(DDR4_2933_X6)),
        host_bridges=tuple(host_bridges),
        switches=tuple(switches),
        devices=tuple(devices),
        nics=tuple(nics),
    )


@validate_call(config=STRICT_CALL)
def p4d(
    *,
    gpu_memory: Size | None = None,
    gpu: Literal["a100-sxm4-40gb", "a100-sxm4-80gb"] = "a100-sxm4-40gb",
    sockets: Literal[1, 2] = 2,
    host_bridge_device: int = SKYLAKE_E_ROOT,
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
        dram=DramSpec(size=1152 * GiB // sockets, bandwidth=parse_rate(DDR4_2933_X6)),
        host_bridges=tuple(
            HostBridgeSpec(name=f"rc{s}", socket=s, vendor=INTEL, device=host_bridge_device)
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
                vendor=NVIDIA,
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
            for n in (rdma_nic(nic, i, f"sw{i}", gen=4) for i in range(4))
        ),
    )


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
