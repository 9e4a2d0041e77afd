"""EFA-like importer: pinned dma-buf MRs only (drivers/infiniband/hw/efa/efa_verbs.c,
``efa_reg_user_mr_dmabuf``, v5.16; ``kernel-semantics.md`` §5.3, §10.1, §10.3).

**Pin policy -- needs pins.** EFA has no on-demand paging, so a dma-buf MR is built with
``ib_umem_dmabuf_get_pinned``: dynamic attach with ``allow_peer2peer``, ``dma_buf_pin``, map,
all at registration. The exporter decides where the pin lands (habanalabs: HBM in place;
amdgpu ≤6.15: migrated to GTT). The NIC never faults; a mapping that moved under it would be
corruption, which the stale-DMA detector would report (and a correct exporter never causes).
"""

from __future__ import annotations

from pinlab.drivers.dma_check import StaleDmaDetector
from pinlab.drivers.rdma import MemoryRegion, RdmaDevice, register_importer
from pinlab.kernel.device import Device
from pinlab.kernel.errno import Errno, err
from pinlab.kernel.file import FdTable
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
    ib_umem_dmabuf_release,
)


@register_importer("efa")
class EfaDevice(RdmaDevice):
    """An EFA-like NIC. ``rdma_write`` enables ``IB_ACCESS_REMOTE_WRITE`` (newer devices)."""

    driver_name = "efa"

    def __init__(
        self,
        kernel: Kernel,
        pdev: Device,
        *,
        name: str = "",
        detector: StaleDmaDetector | None = None,
        rdma_write: bool = True,
    ) -> None:
        super().__init__(kernel, pdev, name=name, detector=detector)
        self.rdma_write = rdma_write

    @property
    def supported_access(self) -> int:
        supp = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ
        return supp | IB_ACCESS_REMOTE_WRITE if self.rdma_write else supp

    def reg_dmabuf_mr(
        self,
        fd: int,
        offset: int,
        length: int,
        access: int,
        *,
        files: FdTable | None = None,
        pid: int | None = None,
    ) -> MemoryRegion:
        """``efa_reg_user_mr_dmabuf``: unsupported access flags (``IB_ACCESS_ON_DEMAND``
        among them) → ``-EOPNOTSUPP``; otherwise a pinned umem (errors pass through)."""
        if access & ~self.supported_access:
            raise err(
                Errno.EOPNOTSUPP,
                "efa_reg_user_mr_dmabuf",
                f"unsupported access flags {access & ~self.supported_access:#x}",
            )
        return self._reg_pinned(fd, offset, length, access, files, pid)

    def dereg_mr(self, mr: MemoryRegion) -> None:
        """``efa_dereg_mr``: ``ib_umem_release`` -- revoke (unmap, unpin), detach, put."""
        self._lookup(mr)
        del self.mrs[mr.lkey]
        mr.deregistered = True
        ib_umem_dmabuf_release(mr.umem)
