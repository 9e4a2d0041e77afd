"""mlx5-like importer: on-demand-paging dma-buf MRs (drivers/infiniband/hw/mlx5/mr.c, odp.c;
``kernel-semantics.md`` §6, §10.2; K-41, K-42, K-92).

**Pin policy -- survives moves.** With ``IB_ACCESS_ON_DEMAND`` the MR imports the buffer
dynamically (``ib_umem_dmabuf_get``) and pins nothing. When the exporter moves the buffer it
calls ``move_notify``; the driver zaps the MR's translations (MTTs) and unmaps. The NIC's next
access faults: under the resv the fault handler re-maps (waiting for the move's KERNEL fence)
and rewrites the MTTs. Granularity is the whole MR: one invalidation unmaps all of it, one
fault maps all of it back.

pinlab's convention for registrations *without* ``IB_ACCESS_ON_DEMAND``: they take the pinned
path (``ib_umem_dmabuf_get_pinned``), as mlx5's data-direct pinned mode and the pinned-only RDMA
drivers do. A NIC without ODP support (``odp=False``) refuses ON_DEMAND registrations with
``-EOPNOTSUPP``, like a kernel built without ``CONFIG_INFINIBAND_ON_DEMAND_PAGING``.

``ignore_move_notify=True`` builds a deliberately *broken* importer that keeps using its old
mapping after a notification: the stale-DMA detector's negative control.

mlx5 is also a dma-buf **exporter** from 7.0 (``UVERBS_OBJECT_DMABUF``, K-121 … K-123): a
process allocates on-device memory (``ibv_alloc_dm``, MEMIC, ``memic_size`` bytes of the
device's BAR 0, 256 KiB by default [assumption: the size varies by ConnectX generation]) and
exports its mmap entry as a dma-buf (:mod:`pinlab.drivers.uverbs_dmabuf`).
"""

from __future__ import annotations

from typing import Self, Unpack

from pinlab.drivers.base import constructor_options
from pinlab.drivers.importer import ImporterOptions, register_importer
from pinlab.drivers.rdma import MemoryRegion, MrRequest, NicSpecLike, RdmaDevice
from pinlab.drivers.uverbs_dmabuf import RdmaUserMmapEntry, UverbsDmabufExporter
from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import PAGE_SIZE, DmaBufAttachment, DmaBufAttachOps
from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci import PciDev, pci_resource_start
from pinlab.kernel.range_alloc import Allocation, RangeAllocator
from pinlab.kernel.umem import (
    IbUmemDmabuf,
    ib_umem_dmabuf_get,
    ib_umem_dmabuf_map_pages,
    ib_umem_dmabuf_release,
    ib_umem_dmabuf_unmap_pages,
    ib_umem_num_pages,
)


@register_importer("mlx5")
class Mlx5Device(RdmaDevice):
    """An mlx5-like NIC; ``odp`` says whether it supports on-demand paging."""

    default_name = "mlx5_0"
    nic_model = "cx5"
    registration_model = "mlx5"  # an mkey from the cache, the page list written by UMR
    supports_odp = True
    exports_device_memory = True  # MEMIC, UVERBS_OBJECT_DMABUF (module docstring)
    odp_items = ("K-43", "K-42")

    def __init__(
        self,
        kernel: Kernel,
        pdev: Device,
        *,
        odp: bool = True,
        ignore_move_notify: bool = False,
        memic_size: int = 256 * 1024,
        **options: Unpack[ImporterOptions],
    ) -> None:
        super().__init__(kernel, pdev, **options)
        self.odp = odp
        self.ignore_move_notify = ignore_move_notify
        self.attach_ops = DmaBufAttachOps(
            allow_peer2peer=True, move_notify=self.mlx5_ib_dmabuf_invalidate_cb
        )
        if memic_size <= 0 or memic_size % PAGE_SIZE:
            raise ValueError(f"memic_size {memic_size} must be a positive multiple of 4 KiB")
        self.memic = RangeAllocator(memic_size, name=f"{self.name}:memic")
        self._dm: dict[RdmaUserMmapEntry, Allocation] = {}
        self._next_pgoff = 0x100
        if kernel.profile.rdma_dmabuf_export and isinstance(pdev, PciDev):
            self.dmabuf_exporter = UverbsDmabufExporter(
                kernel, pdev, self.name, self.memic_start, memic_size
            )

    @classmethod
    def from_spec(cls, kernel: Kernel, pdev: Device, spec: NicSpecLike) -> Self:
        """The NIC of a platform description; ``spec.odp`` enables on-demand paging."""
        options = constructor_options(spec.driver_options, odp=spec.odp)
        return cls(kernel, pdev, name=spec.name, **options)

    # -- registration ----------------------------------------------------------------------
    def reg_odp_mr(self, req: MrRequest) -> MemoryRegion:
        """``mlx5_ib_reg_user_mr_dmabuf`` with ``IB_ACCESS_ON_DEMAND``: ODP import plus the
        first fault-in of the whole MR (``mlx5_ib_init_dmabuf_mr``); ``-EOPNOTSUPP`` on a
        device without ODP. Without ``IB_ACCESS_ON_DEMAND`` the pinned path is taken."""
        if not self.odp:
            raise err(
                Errno.EOPNOTSUPP, "mlx5_ib_reg_user_mr_dmabuf", f"{self.name} has no ODP support"
            )
        umem = ib_umem_dmabuf_get(
            self.kernel,
            self.dev,
            req.offset,
            req.length,
            req.fd,
            req.access,
            self.attach_ops,
            files=req.files,
        )
        mr = MemoryRegion(self, umem, req.access, odp=True, pid=req.pid)
        umem.private = mr  # mlx5r_store_odp_mkey: the fault handler can find it
        try:
            self.pagefault_dmabuf_mr(mr)
        except KernelError:
            umem.private = None
            ib_umem_dmabuf_release(umem)
            raise
        # the initial fault-in is registration, not a fault: take it back from both counters
        mr.faults = 0
        self.faults -= 1
        self.mrs[mr.lkey] = mr
        return mr

    def mlx5_revoke_mr(self, mr: MemoryRegion) -> None:
        """``mlx5_revoke_mr``, the first half of deregistration (K-92): for a non-pinned
        dma-buf MR, under the dma-buf's resv, clear the umem's private pointer (so a later
        ``move_notify`` finds no MR and is ignored) and disable the mkey. Split out of
        :meth:`dereg_mr` so tests can reach the window between revoke and release."""
        if not mr.odp:
            return
        umem = mr.umem
        with umem.dmabuf.resv:
            umem.private = None
            mr.mtt_valid = False

    revoke_mr = mlx5_revoke_mr  # mlx5_ib_dereg_mr revokes before the umem is released

    # -- device memory (mlx5_ib_alloc_dm, MLX5_IB_UAPI_DM_TYPE_MEMIC) ----------------------
    @property
    def memic_start(self) -> int:
        """Bus address of the MEMIC window (BAR 0 of the NIC's function)."""
        pdev = self.pdev
        return pci_resource_start(pdev, 0) if isinstance(pdev, PciDev) else 0

    def alloc_dm(self, size: int, owner: int | None = None) -> RdmaUserMmapEntry:
        """``mlx5_ib_alloc_dm`` (MEMIC): ``size`` bytes (page-rounded) of on-device memory and
        an mmap entry at a new page offset; ``-EINVAL`` for size 0, ``-ENOMEM`` when full."""
        if size <= 0:
            raise err(Errno.EINVAL, "mlx5_ib_alloc_dm", "size 0")
        try:
            allocation = self.memic.alloc(size, contiguous=True)
        except KernelError:
            raise err(Errno.ENOMEM, "mlx5_ib_alloc_memic", f"{self.name}: MEMIC full") from None
        pgoff = self._next_pgoff
        self._next_pgoff += -(-size // PAGE_SIZE)
        start = allocation.segments[0][0]
        entry = RdmaUserMmapEntry(pgoff, self.memic_start + start, -(-size // PAGE_SIZE), owner)
        self.mmap_entries[(owner, pgoff)] = entry
        self._dm[entry] = allocation
        return entry

    def free_dm(self, entry: RdmaUserMmapEntry) -> None:
        """``mlx5_ib_dealloc_dm``: ``rdma_user_mmap_entry_remove`` (revoking every dma-buf
        exported from the entry, K-123), then the MEMIC is freed."""
        allocation = self._dm.pop(entry, None)
        if allocation is None or self.mmap_entries.get((entry.owner, entry.pgoff)) is not entry:
            raise err(Errno.EINVAL, "mlx5_ib_dealloc_dm", f"{entry!r} is not on {self.name}")
        del self.mmap_entries[(entry.owner, entry.pgoff)]
        if self.dmabuf_exporter is not None:
            self.dmabuf_exporter.rdma_user_mmap_entry_remove(entry)
        else:
            entry.driver_removed = True
        self.memic.free(allocation)

    # -- ODP -------------------------------------------------------------------------------
    def mlx5_ib_dmabuf_invalidate_cb(self, attach: DmaBufAttachment) -> None:
        """The ``move_notify`` callback (K-41): with an sg_table present, zap every MTT and
        unmap; with none (or a deregistered MR, K-92) do nothing."""
        attach.dmabuf.resv.assert_held("mlx5_ib_dmabuf_invalidate_cb")
        umem = attach.importer_priv
        assert isinstance(umem, IbUmemDmabuf)
        mr = umem.private
        if not isinstance(mr, MemoryRegion) or umem.sgt is None:
            return
        if self.ignore_move_notify:
            return  # the broken importer: keeps DMAing through the old mapping
        mr.mtt_valid = False  # mlx5r_umr_update_mr_pas(MLX5_IB_UPD_XLT_ZAP)
        mr.invalidations += 1
        self.invalidations += 1
        ib_umem_dmabuf_unmap_pages(umem)

    def pagefault_dmabuf_mr(self, mr: MemoryRegion) -> int:
        """``pagefault_dmabuf_mr`` (K-42): under the resv re-map the whole MR (waiting for
        KERNEL fences; 0 → ``-ETIMEDOUT``), check the fixed PAGE_SIZE (else unmap,
        ``-EINVAL``), re-enable the MTTs; return the MR's page count."""
        umem = mr.umem
        resv = umem.dmabuf.resv
        with resv:
            ib_umem_dmabuf_map_pages(umem)
            sgt = umem.sgt
            assert sgt is not None
            if any(addr % PAGE_SIZE or length % PAGE_SIZE for addr, length in sgt.segments):
                ib_umem_dmabuf_unmap_pages(umem)
                raise err(Errno.EINVAL, "pagefault_dmabuf_mr", "page size does not fit")
            mr.mtt_valid = True
        mr.faults += 1
        self.faults += 1
        return ib_umem_num_pages(umem.offset, umem.length)

    def _fault_in(self, mr: MemoryRegion) -> int:
        if not mr.odp:
            return super()._fault_in(mr)
        pages = self.pagefault_dmabuf_mr(mr)
        if self.on_fault is not None:
            self.on_fault(mr, pages)
        return pages

    def advise_mr(self, mr: MemoryRegion) -> int:
        """``mlx5_ib_advise_mr_prefetch``: fault the MR in ahead of use; pages mapped."""
        self._lookup(mr)
        if not mr.odp:
            raise err(Errno.EOPNOTSUPP, "mlx5_ib_advise_mr", "prefetch needs an ODP MR")
        if mr.mtt_valid:
            return 0
        pages = self.pagefault_dmabuf_mr(mr)
        mr.faults -= 1
        self.faults -= 1
        mr.prefetches += 1
        return pages
