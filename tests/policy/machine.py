"""A small workstation for the policy tests: an AMD Zen host with a PCIe switch holding an
amdgpu-like GPU (``gpu0``) and an EFA-like NIC (``efa0``), and an mlx5-like NIC with ODP
(``mlx5_0``) beside them."""

from __future__ import annotations

from dataclasses import dataclass

from pinlab.drivers.amdgpu import AmdgpuDevice
from pinlab.drivers.efa import EfaDevice
from pinlab.drivers.mlx5 import Mlx5Device
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci_ids import PCI_VENDOR_ID_AMD, X86_VENDOR_AMD
from pinlab.kernel.pci_topology import PciTopology
from pinlab.kernel.profile import PRESETS, get_profile
from pinlab.kernel.umem import IB_ACCESS_LOCAL_WRITE
from pinlab.uapi import Process, System

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
PAGE = 4096
ACCESS = IB_ACCESS_LOCAL_WRITE


@dataclass
class Workstation:
    kernel: Kernel
    system: System
    gpu: AmdgpuDevice
    efa: EfaDevice

    def pin_vram(self, proc: Process, size: int, *, name: str = "") -> tuple[int, object]:
        """GEM-create ``size`` bytes of VRAM, export it and register it whole on EFA (a
        pinned dma-buf MR). Returns (fd, mr)."""
        handle = proc.gem_create("gpu0", size, "vram", name=name)
        fd = proc.prime_handle_to_fd(handle)
        mr = proc.ibv_reg_dmabuf_mr("efa0", fd, 0, size, ACCESS)
        return fd, mr


def make_workstation(
    profile: str = "6.16",
    *,
    move_notify: bool = True,
    vram: int = 8 * GiB,
    gtt: int = 16 * GiB,
    revocable_efa: bool = False,
) -> Workstation:
    """``profile`` with CONFIG_DMABUF_MOVE_NOTIFY=``move_notify`` where it is an option."""
    switches = {"move_notify": move_notify} if PRESETS[profile].move_notify_is_option else {}
    kernel = Kernel(get_profile(profile, **switches))
    topo = PciTopology(cpu_vendor=X86_VENDOR_AMD, cpu_family=0x19)
    switch = topo.add_host_bridge(PCI_VENDOR_ID_AMD, 0x1480).add_root_port().add_switch(3)
    gpu_pdev = switch.downstream_ports[0].add_endpoint(label="gpu0")
    nic_pdev = switch.downstream_ports[1].add_endpoint(label="efa0")
    mlx5_pdev = switch.downstream_ports[2].add_endpoint(label="mlx5")
    system = System(kernel)
    gpu = AmdgpuDevice(kernel, gpu_pdev, vram_size=vram, gtt_size=gtt, name="gpu0")
    system.add_exporter("gpu0", gpu)
    efa = EfaDevice(kernel, nic_pdev, name="efa0", revocable=revocable_efa)
    system.add_nic("efa0", efa)
    system.add_nic("mlx5_0", Mlx5Device(kernel, mlx5_pdev, name="mlx5_0", odp=True))
    return Workstation(kernel, system, gpu, efa)


def counters(proc: Process) -> tuple[int, int, int]:
    """(mm->locked_vm, mm->pinned_vm, user->locked_vm) of ``proc``."""
    return proc.mm.locked_vm, proc.mm.pinned_vm, proc.user.locked_vm
