"""A small machine for the exporter-model tests.

One host bridge with a root port, a PCIe switch below it holding the exporter's function
(``gpu``) and a NIC function whose RDMA port (``nic``, a plain ``Device``) is the usual
P2P-capable importer; a second root port with another NIC (``far_nic``: P2P only through the
host bridge, allowed on an AMD Zen CPU, refused on an unlisted Intel one); and ``virt``, a
device with no PCI function above it (P2PDMA distance always -1). ``files`` is the fd table
that exported buffers are installed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaBufAttachOps,
    dma_buf_fd,
)
from pinlab.kernel.file import FdTable
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci import PciDev
from pinlab.kernel.pci_ids import (
    PCI_VENDOR_ID_AMD,
    PCI_VENDOR_ID_INTEL,
    X86_VENDOR_AMD,
    X86_VENDOR_INTEL,
)
from pinlab.kernel.pci_topology import PciTopology
from pinlab.kernel.profile import PRESETS, KernelProfile, get_profile
from pinlab.kernel.umem import IB_ACCESS_LOCAL_WRITE, IbUmemDmabuf, ib_umem_dmabuf_get_pinned

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
ACCESS = IB_ACCESS_LOCAL_WRITE

ALL_PRESETS = list(PRESETS)
CACHING = [p for p in PRESETS if PRESETS[p].cache_sgt_at_attach]
PIN_AT_MAP = [p for p in PRESETS if not PRESETS[p].cache_sgt_at_attach]


def profile_mn(name: str, mn: bool) -> KernelProfile:
    """Preset ``name`` with CONFIG_DMABUF_MOVE_NOTIFY set to ``mn`` (7.1 has it always on)."""
    base = get_profile(name)
    if not base.move_notify_is_option:
        return base
    return base.with_(move_notify=mn)


@dataclass
class Machine:
    kernel: Kernel
    topo: PciTopology
    gpu: PciDev
    nic: Device
    far_nic: Device
    virt: Device
    files: FdTable = field(default_factory=FdTable)

    def fd(self, dmabuf: DmaBuf) -> int:
        """Install ``dmabuf`` (its export reference) in :attr:`files`."""
        return dma_buf_fd(dmabuf, files=self.files)

    def pinned_umem(self, dev: Device, fd: int, size: int) -> IbUmemDmabuf:
        """An EFA-like pinned import of ``[0, size)`` of ``fd`` by ``dev``."""
        return ib_umem_dmabuf_get_pinned(self.kernel, dev, 0, size, fd, ACCESS, files=self.files)


def make_machine(
    profile: str | KernelProfile = "6.16", *, cpu: str = "amd", **switches: Any
) -> Machine:
    """``cpu="amd"``: a Zen host (host-bridge P2P allowed); ``"intel"``: an Intel host bridge
    that is not on the P2PDMA whitelist (host-bridge P2P refused)."""
    prof = get_profile(profile, **switches) if isinstance(profile, str) else profile
    if cpu == "amd":
        topo = PciTopology(cpu_vendor=X86_VENDOR_AMD, cpu_family=0x19)
        hb = topo.add_host_bridge(PCI_VENDOR_ID_AMD, 0x1480)
    else:
        topo = PciTopology(cpu_vendor=X86_VENDOR_INTEL, cpu_family=6)
        hb = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, 0x9A14)
    sw = hb.add_root_port().add_switch(2)
    gpu = sw.downstream_ports[0].add_endpoint(label="gpu0")
    nic_fn = sw.downstream_ports[1].add_endpoint(label="nic0")
    far_fn = hb.add_root_port().add_endpoint(label="nic1")
    return Machine(
        Kernel(prof),
        topo,
        gpu,
        Device("rdma0", nic_fn),
        Device("rdma1", far_fn),
        Device("virt0"),
    )


class Recorder:
    """Dynamic importer ops that record every move_notify."""

    def __init__(self, allow_peer2peer: bool = True) -> None:
        self.notified: list[DmaBufAttachment] = []
        self.ops = DmaBufAttachOps(
            allow_peer2peer=allow_peer2peer, move_notify=self.notified.append
        )
