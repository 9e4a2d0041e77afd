"""The RDMA dma-buf exporter (``UVERBS_OBJECT_DMABUF``, ``pinlab.drivers.uverbs_dmabuf``):
mlx5 device memory exported as a dma-buf, through the userspace calls.

Checks K-121 (``UVERBS_METHOD_DMABUF_ALLOC`` and its refusals), K-122 (attach needs P2P, every
pin is refused, map by mapping reference) and K-123 (removing the mmap entry or destroying the
uobject revokes for good, and the exit releases everything).
"""

from __future__ import annotations

import pytest

from pinlab.drivers.uverbs_dmabuf import UverbsDmabuf
from pinlab.kernel.errno import Errno, KernelError
from pinlab.report.matrix import (
    ACCESS,
    DISPLAY,
    EFA,
    GPU_IMPORT,
    MLX5,
    MLX5_NO_ODP,
    MatrixMachine,
    build_machine,
)
from pinlab.uapi.process import Process

KiB = 1 << 10
SIZE = 64 * KiB


def machine(profile: str = "7.1") -> tuple[MatrixMachine, Process]:
    m = build_machine("amdgpu", profile)
    return m, m.system.spawn("app")


def export(proc: Process, nic: str = MLX5) -> tuple[int, UverbsDmabuf]:
    entry = proc.ibv_alloc_dm(nic, SIZE)
    fd = proc.ibv_export_dmabuf(nic, entry.pgoff)
    priv = proc.dmabuf(fd).priv
    assert isinstance(priv, UverbsDmabuf)
    return fd, priv


def test_k121_device_memory_exports_as_a_dmabuf_of_the_bar() -> None:
    m, proc = machine()
    fd, priv = export(proc)
    dmabuf = proc.dmabuf(fd)
    assert dmabuf.size == SIZE and dmabuf.exp_name == "ib_uverbs"
    nic = m.system.nic(MLX5)
    assert nic.dmabuf_exporter is not None
    start = nic.dmabuf_exporter.bar_start
    assert start <= priv.phys[0].paddr < start + nic.dmabuf_exporter.bar_size
    handle = proc.prime_fd_to_handle(GPU_IMPORT, fd)
    access = proc.gpu_access(handle)
    assert access.memory == "bar" and access.p2p
    assert priv.mappings == 1


def test_k121_refusals() -> None:
    m, proc = machine()
    with pytest.raises(KernelError) as e:  # no entry at that page offset
        proc.ibv_export_dmabuf(MLX5, 0x7777)
    assert e.value.errno is Errno.EINVAL
    entry = proc.ibv_alloc_dm(MLX5, SIZE)
    other = m.system.spawn("other")  # an entry of another ucontext is not found
    with pytest.raises(KernelError) as e:
        other.ibv_export_dmabuf(MLX5, entry.pgoff)
    assert e.value.errno is Errno.EINVAL
    with pytest.raises(KernelError) as e:  # EFA has neither device memory nor the object
        proc.ibv_alloc_dm(EFA, SIZE)
    assert e.value.errno is Errno.EOPNOTSUPP
    with pytest.raises(KernelError) as e:
        proc.ibv_alloc_dm(MLX5, 1 << 30)  # more than the MEMIC window
    assert e.value.errno is Errno.ENOMEM


def test_k121_the_object_exists_from_7_0_only() -> None:
    m, proc = machine("6.19")
    entry = proc.ibv_alloc_dm(MLX5, SIZE)  # device memory itself is older
    with pytest.raises(KernelError) as e:
        proc.ibv_export_dmabuf(MLX5, entry.pgoff)
    assert e.value.errno is Errno.EOPNOTSUPP
    assert m.system.nic(MLX5_NO_ODP).dmabuf_exporter is None


def test_k122_static_and_pinned_importers_are_refused() -> None:
    _m, proc = machine()
    fd, priv = export(proc)
    with pytest.raises(KernelError) as e:
        proc.set_scanout(DISPLAY, fd)
    assert (e.value.errno, e.value.function) == (Errno.EOPNOTSUPP, "uverbs_dmabuf_attach")
    with pytest.raises(KernelError) as e:
        proc.ibv_reg_dmabuf_mr(EFA, fd, 0, SIZE, ACCESS)
    assert (e.value.errno, e.value.function) == (Errno.EOPNOTSUPP, "uverbs_dmabuf_pin")
    with pytest.raises(KernelError) as e:  # iommufd's 7.1 dma_buf_pin fails the same way
        proc.iommufd_map(fd)
    assert (e.value.errno, e.value.function) == (Errno.EOPNOTSUPP, "uverbs_dmabuf_pin")
    assert proc.dmabuf(fd).attachments == [] and priv.mappings == 0


def test_k123_freeing_the_device_memory_revokes_for_good() -> None:
    m, proc = machine()
    entry = proc.ibv_alloc_dm(MLX5, SIZE)
    fd = proc.ibv_export_dmabuf(MLX5, entry.pgoff)
    priv = proc.dmabuf(fd).priv
    assert isinstance(priv, UverbsDmabuf)
    handle = proc.prime_fd_to_handle(GPU_IMPORT, fd)
    proc.gpu_access(handle)
    proc.ibv_free_dm(MLX5, entry)
    assert priv.revoked and priv.mappings == 0  # the importer unmapped inside the wait
    assert entry.driver_removed
    with pytest.raises(KernelError) as e:
        proc.gpu_access(handle)
    assert (e.value.errno, e.value.function) == (Errno.ENODEV, "uverbs_dmabuf_map")
    with pytest.raises(KernelError) as e:  # a removed entry cannot be exported again
        proc.ibv_export_dmabuf(MLX5, entry.pgoff)
    assert e.value.errno is Errno.EINVAL
    proc.exit()
    assert proc.dmabuf is not None and not m.kernel.warnings and not m.kernel.hung_tasks


def test_k123_exit_and_nic_reset_destroy_the_uobjects() -> None:
    m, proc = machine()
    fd, priv = export(proc)
    peer = m.system.spawn("peer")
    peer_fd = proc.send_fd(fd, peer)
    handle = peer.prime_fd_to_handle(GPU_IMPORT, peer_fd)
    peer.gpu_access(handle)
    proc.exit()  # the ucontext goes: the dma-buf uobject is destroyed, the buffer revoked
    assert priv.revoked
    with pytest.raises(KernelError):
        peer.gpu_access(handle)
    peer.exit()
    m.settle()
    assert priv.dmabuf is not None and priv.dmabuf.released
    assert not m.kernel.warnings

    m, proc = machine()
    fd, priv = export(proc)
    assert proc.uverbs_destroy_ufile_hw(m.system.nic(MLX5)) >= 0
    assert priv.revoked and proc.dms == [] and proc.rdma_exports == []
