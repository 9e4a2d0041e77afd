"""The RDMA dma-buf exporter: one mmap entry of an RDMA device's own BAR as a dma-buf
(drivers/infiniband/core/uverbs_std_types_dmabuf.c, ib_core_uverbs.c; mlx5; v7.0;
``docs/semantics/kernel.md`` §13, K-121 … K-123).

Source: Edward Srouji / Yishai Hadas, "[PATCH rdma-next v3 0/3] ... dmabuf-export" (2026-02-01;
0ac6f4056c4a "RDMA/uverbs: Add DMABUF object type and operations", "RDMA/mlx5: Implement DMABUF
export ops"), merged for v7.0 ("DMA-buf export for GPU/NVMe P2P transfers"); 7.1 names the
notification ``dma_buf_invalidate_mappings``.

**What is exported**: exactly one ``rdma_user_mmap_entry`` of the caller's ucontext -- a range
of the device's memory BAR that the driver already lets userspace mmap. For mlx5 pinlab models
the device-memory entries of ``ibv_alloc_dm`` (MEMIC); UAR pages are entries too but are not
modelled. The memory is MMIO: it never moves and is never evicted.

``UVERBS_METHOD_DMABUF_ALLOC(pgoff)`` (K-121): no entry at ``pgoff`` (or one the driver removed)
→ ``-EINVAL``; the driver's ``mmap_get_pfns``: an address outside a memory BAR → ``-EINVAL``,
no PCI P2PDMA → ``-EOPNOTSUPP``; the fd is ``O_CLOEXEC``. Devices without the two driver ops
(EFA) have no such method (``-EOPNOTSUPP``).

Ops (K-122): attach refuses a non-peer2peer importer (``-EOPNOTSUPP``) and checks nothing else
(no ``dma_buf_attach_revocable``, even in 7.1); **pin always ``-EOPNOTSUPP``**, unpin does
nothing -- so pinned importers (EFA, the revocable pinned umem, iommufd's 7.1 pin) fail; map:
resv held, revoked → ``-ENODEV``, else the single range through
:func:`~pinlab.kernel.dma_buf_mapping.dma_buf_phys_vec_to_sgt` and one more mapping reference;
unmap drops it.

Revoke (K-123), permanent, the VFIO 7.1 sequence: under the resv mark revoked and unlink,
invalidate, wait for every fence up to BOOKKEEP; then drop the initial mapping reference and
wait -- without bound -- until every importer unmapped. It runs when the driver removes the
mmap entry (``rdma_user_mmap_entry_remove``: ``ibv_free_dm``, device disassociation) and when
the dma-buf's uobject is destroyed (ucontext cleanup at process exit or disassociation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pinlab.drivers.base import BarBuffer
from pinlab.kernel.dma_buf import (
    PAGE_SIZE,
    DmaBuf,
    DmaBufAttachment,
    DmaBufExportInfo,
    DmaBufOps,
    DmaDataDirection,
    Module,
    SgTable,
    dma_buf_export,
    dma_buf_fd,
)
from pinlab.kernel.dma_buf_mapping import (
    DmaBufPhysVec,
    dma_buf_free_sgt,
    dma_buf_invalidate_and_wait,
    dma_buf_phys_vec_to_sgt,
    pcim_p2pdma_provider,
)
from pinlab.kernel.errno import Errno, err
from pinlab.kernel.file import O_CLOEXEC, O_RDWR, FdTable
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci import PciDev


@dataclass(eq=False, slots=True)
class RdmaUserMmapEntry:
    """``struct rdma_user_mmap_entry``: ``npages`` pages at bus address ``address`` of the
    device's BAR, reachable by mmap at ``pgoff`` of one ucontext (``owner`` pid);
    ``driver_removed`` once the driver removed it; ``dmabufs`` exported from it."""

    pgoff: int
    address: int
    npages: int
    owner: int | None
    kind: str = "dm"
    driver_removed: bool = False
    dmabufs: list[UverbsDmabuf] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.npages * PAGE_SIZE


class UverbsDmabuf(BarBuffer):
    """The exporter's private object for one dma-buf: the mmap entry, its physical range,
    the P2PDMA provider, ``revoked``, the outstanding importer mappings and the revoke count
    (the model's backing epoch)."""

    __slots__ = (
        "dmabuf",
        "entry",
        "mappings",
        "name",
        "phys",
        "provider",
        "revocations",
        "revoked",
        "size",
    )

    def __init__(self, name: str, entry: RdmaUserMmapEntry, provider: PciDev) -> None:
        self.name = name
        self.entry = entry
        self.phys = (DmaBufPhysVec(entry.address, entry.size),)
        self.provider = provider
        self.size = entry.size
        self.dmabuf: DmaBuf | None = None
        self.revoked = False
        self.mappings = 0
        self.revocations = 0

    def __repr__(self) -> str:
        return f"<uverbs dmabuf {self.name} {self.size:#x}{' revoked' if self.revoked else ''}>"


class UverbsDmabufExporter:
    """``UVERBS_OBJECT_DMABUF`` of one RDMA device (``pdev``, its memory BAR at ``bar_start``
    of ``bar_size`` bytes): the dma-buf ops and the revoke."""

    exp_name = "ib_uverbs"

    def __init__(self, kernel: Kernel, pdev: PciDev, name: str, bar_start: int, bar_size: int):
        self.kernel = kernel
        self.pdev = pdev
        self.name = name
        self.bar_start = bar_start
        self.bar_size = bar_size
        self.module = Module(self.exp_name)
        self.ops = DmaBufOps(
            attach=self._attach,
            pin=self._pin,
            unpin=self._unpin,
            map_dma_buf=self._map,
            unmap_dma_buf=self._unmap,
            release=self._release,
        )

    def mmap_get_pfns(self, entry: RdmaUserMmapEntry) -> tuple[DmaBufPhysVec, PciDev]:
        """The driver's ``mmap_get_pfns`` (mlx5): the entry's range inside the memory BAR
        (``-EINVAL`` outside it) and the BAR's P2PDMA provider (``-EOPNOTSUPP`` without
        PCI P2PDMA)."""
        fn = "mlx5_ib_mmap_get_pfns"
        end = entry.address + entry.size
        if entry.address < self.bar_start or end > self.bar_start + self.bar_size:
            raise err(Errno.EINVAL, fn, f"entry {entry.pgoff:#x} is outside the memory BAR")
        provider = pcim_p2pdma_provider(self.pdev, self.bar_size, self.pdev.topology.p2pdma_enabled)
        if provider is None:
            raise err(Errno.EOPNOTSUPP, fn, "no PCI P2PDMA")
        return DmaBufPhysVec(entry.address, entry.size), provider

    def dmabuf_alloc(
        self, entry: RdmaUserMmapEntry | None, pgoff: int, *, files: FdTable | None = None
    ) -> int:
        """``UVERBS_METHOD_DMABUF_ALLOC`` (K-121): export ``entry`` (the ucontext's entry at
        ``pgoff``, None when there is none); the new fd."""
        if entry is None or entry.driver_removed:
            raise err(Errno.EINVAL, "rdma_user_mmap_entry_get_pgoff", f"no entry at {pgoff:#x}")
        _, provider = self.mmap_get_pfns(entry)
        priv = UverbsDmabuf(f"{self.name}:{entry.kind}{pgoff:#x}", entry, provider)
        dmabuf = dma_buf_export(
            self.kernel,
            DmaBufExportInfo.define(self.module, self.ops, priv.size, priv, flags=O_RDWR),
        )
        priv.dmabuf = dmabuf
        entry.dmabufs.append(priv)
        return dma_buf_fd(dmabuf, O_CLOEXEC | O_RDWR, files)

    def revoke(self, priv: UverbsDmabuf) -> None:
        """The permanent revoke (K-123), a no-op for an already revoked buffer."""
        if priv.revoked or priv.dmabuf is None or priv.dmabuf.released:
            return

        def mark() -> None:
            priv.revoked = True
            priv.revocations += 1
            if priv in priv.entry.dmabufs:
                priv.entry.dmabufs.remove(priv)

        dma_buf_invalidate_and_wait(
            priv.dmabuf, mark, lambda: priv.mappings, "uverbs_dmabuf_revoke", repr(priv)
        )

    def rdma_user_mmap_entry_remove(self, entry: RdmaUserMmapEntry) -> None:
        """``rdma_user_mmap_entry_remove``: the driver removes the entry (``ibv_free_dm``,
        disassociation): it is marked removed and every dma-buf from it is revoked (K-123)."""
        entry.driver_removed = True
        for priv in list(entry.dmabufs):
            self.revoke(priv)

    # -- dma_buf_ops -----------------------------------------------------------------------
    @staticmethod
    def _priv(dmabuf: DmaBuf) -> UverbsDmabuf:
        priv = dmabuf.priv
        assert isinstance(priv, UverbsDmabuf)
        return priv

    def _attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``uverbs_dmabuf_attach``: not peer2peer → ``-EOPNOTSUPP`` (nothing else)."""
        if not attach.peer2peer:
            raise err(Errno.EOPNOTSUPP, "uverbs_dmabuf_attach", f"{attach.dev.name} is not P2P")

    def _pin(self, attach: DmaBufAttachment) -> None:
        """``uverbs_dmabuf_pin``: every pin is refused (K-122)."""
        raise err(Errno.EOPNOTSUPP, "uverbs_dmabuf_pin", "RDMA dma-bufs cannot be pinned")

    def _unpin(self, attach: DmaBufAttachment) -> None:
        """``uverbs_dmabuf_unpin``: nothing to do."""

    def _map(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        """``uverbs_dmabuf_map``: resv held; revoked → ``-ENODEV``; else one range, and one
        more mapping reference."""
        attach.dmabuf.resv.assert_held("uverbs_dmabuf_map")
        priv = self._priv(attach.dmabuf)
        if priv.revoked:
            raise err(Errno.ENODEV, "uverbs_dmabuf_map", f"{priv.name} is revoked")
        sgt = dma_buf_phys_vec_to_sgt(
            attach, priv.provider, priv.phys, priv.size, direction, epoch=priv.epoch
        )
        priv.mappings += 1
        return sgt

    def _unmap(self, attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection) -> None:
        attach.dmabuf.resv.assert_held("uverbs_dmabuf_unmap")
        dma_buf_free_sgt(attach, sgt, direction)
        self._priv(attach.dmabuf).mappings -= 1

    def _release(self, dmabuf: DmaBuf) -> None:
        """The dma-buf file's release: unlink from the entry if still linked."""
        priv = self._priv(dmabuf)
        if priv in priv.entry.dmabufs:
            priv.entry.dmabufs.remove(priv)
