"""iommufd as a dma-buf importer (``pinlab.drivers.iommufd``), through the userspace calls.

Checks K-108 (``IOMMU_IOAS_MAP_FILE`` checks; nothing charged), K-109 (a dynamic attachment to
a non-PCI device, the 7.1 pin, no map, release order), K-110 (revoke unmaps the IOVA for good),
K-111 (7.1: a non-VFIO dynamic exporter is pinned -- and moved -- before the refusal), K-107
(the private VFIO interconnect's refusals), and what vfio-pci's revoke points (K-104) and
un-revoke (K-106) do to it.
"""

from __future__ import annotations

import pytest

from pinlab.drivers.vfio_pci import VfioPciDevice
from pinlab.kernel.dma_buf import dma_buf_attachment_is_dynamic
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.profile import get_profile
from pinlab.report.matrix import BUFFER_SIZE, GPU, MatrixMachine, build_machine
from pinlab.uapi.process import Process

MiB = 1 << 20


def machine(profile: str = "7.1", exporter: str = "vfio-pci") -> tuple[MatrixMachine, Process]:
    m = build_machine(exporter, get_profile(profile))
    return m, m.system.spawn("vmm")


def vfio_fd(proc: Process, *ranges: tuple[int, int]) -> int:
    return proc.vfio_dma_buf(GPU, 0, 0, 0, ranges=list(ranges or [(0, BUFFER_SIZE)]))


@pytest.mark.parametrize("profile", ["6.19", "7.1"])
def test_k108_k109_map_file_attaches_without_mapping_and_charges_nothing(profile: str) -> None:
    m, proc = machine(profile)
    fd = vfio_fd(proc)
    iova = proc.iommufd_map(fd)
    dma = proc.iommufd_dma(iova)
    assert dma.p2p and dma.memory == "bar" and dma.incident is None
    (attach,) = proc.dmabuf(fd).attachments
    assert dma_buf_attachment_is_dynamic(attach)
    assert attach.dev.name == "iommufd" and attach.sgt is None  # never mapped
    # 7.1 calls dma_buf_pin, a no-op on the static VFIO exporter (K-20); 6.19 does not
    assert attach.importer_priv.pinned is (profile == "7.1")
    assert attach.importer_pins == 0
    assert proc.mm.pinned_vm == 0 and proc.mm.locked_vm == 0
    assert m.system.iommufd_device().contexts[0].owner == proc.pid


@pytest.mark.parametrize(
    ("start", "length", "errno"),
    [
        (0, 0, Errno.EINVAL),  # length 0
        (4096, BUFFER_SIZE, Errno.EINVAL),  # past the dma-buf
        (100, 4096, Errno.EINVAL),  # not page-aligned
    ],
)
def test_k108_map_file_refusals(start: int, length: int, errno: Errno) -> None:
    _m, proc = machine("6.19")
    fd = vfio_fd(proc)
    with pytest.raises(KernelError) as e:
        proc.iommufd_map(fd, start=start, length=length)
    assert e.value.errno is errno
    assert proc.dmabuf(fd).attachments == []


def test_k108_iommufd_imports_dmabufs_from_6_19_only() -> None:
    m = build_machine("amdgpu", "6.16")
    proc = m.system.spawn("vmm")
    with pytest.raises(KernelError) as e:
        proc.iommufd_map(3)
    assert e.value.errno is Errno.ENODEV


def test_k107_the_interconnect_takes_one_range_of_a_live_vfio_buffer() -> None:
    _m, proc = machine("7.1")
    fd = vfio_fd(proc, (0, MiB), (4 * MiB, MiB))
    with pytest.raises(KernelError) as e:
        proc.iommufd_map(fd)
    assert e.value.errno is Errno.EOPNOTSUPP
    assert e.value.function == "vfio_pci_dma_buf_iommufd_map"
    assert proc.dmabuf(fd).attachments == []  # unpinned and detached again


def test_k110_revoke_unmaps_every_domain_for_good() -> None:
    m, proc = machine("7.1")
    fd = vfio_fd(proc)
    iova = proc.iommufd_map(fd)
    proc.iommufd_attach_domain("hwpt1")
    assert proc.iommufd_dma(iova, domain="hwpt1").memory == "bar"
    proc.vfio_reset(GPU)  # revoke, reset, un-revoke: iommufd stays revoked
    vdev = m.exporter
    assert isinstance(vdev, VfioPciDevice)
    assert not vdev.buffer_of(proc.dmabuf(fd)).revoked
    for domain in ("hwpt0", "hwpt1"):
        with pytest.raises(KernelError) as e:
            proc.iommufd_dma(iova, domain=domain)
        assert e.value.errno is Errno.EFAULT
    proc.iommufd_attach_domain("hwpt2")  # a later domain is not filled either
    with pytest.raises(KernelError):
        proc.iommufd_dma(iova, domain="hwpt2")
    assert proc.iommufd_unmap(iova) == BUFFER_SIZE
    assert proc.dmabuf(fd).attachments == []
    proc.exit()
    assert not m.kernel.warnings


def test_k110_release_after_close_of_the_device() -> None:
    m, proc = machine("6.19")
    fd = vfio_fd(proc)
    iova = proc.iommufd_map(fd)
    proc.vfio_close(GPU)  # permanent revoke
    with pytest.raises(KernelError):
        proc.iommufd_dma(iova)
    dmabuf = proc.dmabuf(fd)
    proc.exit()
    assert dmabuf.released and not m.kernel.warnings


def test_k111_7_1_pins_an_amdgpu_buffer_into_gtt_before_refusing_it() -> None:
    m, proc = machine("7.1", exporter="amdgpu")
    handle = proc.gem_create(GPU, BUFFER_SIZE, "vram")
    fd = proc.prime_handle_to_fd(handle)
    m.settle(proc)
    buf = proc.buffer(handle)
    assert buf.location == "vram"
    with pytest.raises(KernelError) as e:
        proc.iommufd_map(fd)
    assert e.value.errno is Errno.EOPNOTSUPP
    assert buf.location == "gtt"  # the pin's migration is not undone
    assert not buf.pinned  # ...but the pin is (balanced)
    assert proc.dmabuf(fd).attachments == []


def test_k111_6_19_refuses_an_amdgpu_buffer_without_moving_it() -> None:
    m, proc = machine("6.19", exporter="amdgpu")
    handle = proc.gem_create(GPU, BUFFER_SIZE, "vram")
    fd = proc.prime_handle_to_fd(handle)
    m.settle(proc)
    with pytest.raises(KernelError) as e:
        proc.iommufd_map(fd)
    assert e.value.errno is Errno.EOPNOTSUPP
    assert proc.buffer(handle).location == "vram"
