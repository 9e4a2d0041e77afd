"""Physical-range mappings for MMIO exporters (drivers/dma-buf/dma-buf-mapping.c, v6.19).

Exporters whose memory is a PCI BAR without ``struct page`` behind it -- vfio-pci
(``kernel.md`` §13, K-103) and the RDMA ``UVERBS_OBJECT_DMABUF`` exporter (K-122) -- describe
it as a list of physical ranges (``struct dma_buf_phys_vec``) and let
:func:`dma_buf_phys_vec_to_sgt` turn it into an sg_table for one attachment. The series that
added it, Leon Romanovsky's "[PATCH v7 00/11] vfio/pci: Allow MMIO regions to be exported
through dma-buf" (3aa31a8bb11e "dma-buf: provide phys_vec to scatter-gather mapping routine"),
also split P2PDMA so that a provider exists per BAR without struct pages
(``pcim_p2pdma_provider``).

What the importer gets depends on the PCI P2PDMA map type between the BAR's function and the
attached device (``pci_p2pdma_map_type``, K-84): PCI bus addresses below a common switch
(``BUS_ADDR``), addresses from the importer's IOMMU when the path crosses a host bridge that
allows it (``THRU_HOST_BRIDGE``), and ``-EINVAL`` for anything else. The exporter's attach
does not check this; an importer the topology cannot reach attaches and fails at map.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaDataDirection,
    SgTable,
    dma_buf_notify_move,
)
from pinlab.kernel.errno import Errno, err
from pinlab.kernel.p2pdma import PciP2pdmaMapType, pci_p2pdma_map_type
from pinlab.kernel.pci import PciDev
from pinlab.kernel.resv import MAX_SCHEDULE_TIMEOUT, DmaResvUsage

UINT_MAX = (1 << 32) - 1
"""The largest length of one sg entry (``sg_dma_len`` is an ``unsigned int``)."""


@dataclass(frozen=True, slots=True)
class DmaBufPhysVec:
    """``struct dma_buf_phys_vec``: one physical range of MMIO."""

    paddr: int
    len: int


def pcim_p2pdma_provider(pdev: PciDev, bar_size: int, p2pdma_enabled: bool) -> PciDev | None:
    """``pcim_p2pdma_provider(pdev, bar)``: the P2PDMA provider of one memory BAR, or None
    when the BAR is absent (no memory resource) or the kernel has no PCI P2PDMA. pinlab's
    P2PDMA keys its answers by PCI function, so the provider is the function itself."""
    if bar_size <= 0 or not p2pdma_enabled:
        return None
    return pdev


def dma_buf_phys_vec_to_sgt(
    attach: DmaBufAttachment,
    provider: PciDev | None,
    phys_vec: Sequence[DmaBufPhysVec],
    size: int,
    direction: DmaDataDirection,
    *,
    epoch: int = 0,
) -> SgTable:
    """``dma_buf_phys_vec_to_sgt``: an sg_table of ``phys_vec`` for ``attach->dev`` (K-103).

    Caller: the exporter's ``map_dma_buf``, with the resv held. A NULL provider WARNs and is
    ``-EINVAL``. The map type of ``attach->dev`` against the provider decides: ``BUS_ADDR``
    gives the ranges' bus addresses, ``THRU_HOST_BRIDGE`` IOVAs from the importer's IOMMU (the
    model keeps the physical values: no IOVA space is modelled), any other answer is
    ``-EINVAL``. Each range becomes entries of at most ``UINT_MAX`` bytes. The table is
    page-less (no struct pages: only P2P-capable importers can use it), ``memory="bar"``, and
    carries ``epoch`` (the exporter's revoke generation) for the stale-DMA detector.
    """
    fn = "dma_buf_phys_vec_to_sgt"
    dmabuf = attach.dmabuf
    dmabuf.resv.assert_held(fn)
    if provider is None:
        dmabuf.kernel.warn(fn, "!provider")
        raise err(Errno.EINVAL, fn, "no P2PDMA provider")
    map_type = pci_p2pdma_map_type(provider, attach.dev)
    if map_type not in (PciP2pdmaMapType.BUS_ADDR, PciP2pdmaMapType.THRU_HOST_BRIDGE):
        raise err(
            Errno.EINVAL,
            fn,
            f"{attach.dev.name} cannot reach {provider.name} peer-to-peer ({map_type.name})",
        )
    segments: list[tuple[int, int]] = []
    for vec in phys_vec:
        addr, left = vec.paddr, vec.len
        while left:
            length = min(left, UINT_MAX)
            segments.append((addr, length))
            addr += length
            left -= length
    assert sum(length for _, length in segments) == size, "ranges do not add up to the size"
    return SgTable(tuple(segments), page_less=True, memory="bar", epoch=epoch, p2p=True)


def dma_buf_free_sgt(attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection) -> None:
    """``dma_buf_free_sgt``: unmap (IOVA case) and free a table of
    :func:`dma_buf_phys_vec_to_sgt`. Nothing the model tracks changes."""


def dma_buf_invalidate_and_wait(
    dmabuf: DmaBuf,
    revoke: Callable[[], None] | None,
    mappings: Callable[[], int],
    function: str,
    what: str,
) -> None:
    """The revoke sequence of the MMIO exporters that wait for their importers (vfio-pci 7.1,
    "vfio: Wait for dma-buf invalidation to complete"; the RDMA exporter; K-105, K-123).

    Under the resv: ``revoke()`` (mark the buffer revoked; None for an un-revoke, which marks
    it usable only afterwards), ``dma_buf_invalidate_mappings``, and a wait without timeout for
    every fence up to BOOKKEEP (handed to the kernel's waiter). Then, revoking, the exporter
    drops its initial mapping reference and waits -- without bound -- until the importers
    unmapped (``wait_for_completion``). Every correct importer unmaps inside its callback; one
    that kept a mapping (``mappings() > 0``) leaves the task blocked for good: the kernel logs
    a hung task and :class:`~pinlab.kernel.errno.KernelHang` is raised (K-120).
    """
    with dmabuf.resv:
        if revoke is not None:
            revoke()
        dma_buf_notify_move(dmabuf)
        dmabuf.resv.wait_timeout(DmaResvUsage.BOOKKEEP, False, MAX_SCHEDULE_TIMEOUT)
    if revoke is not None and mappings():
        raise dmabuf.kernel.hang(
            function,
            f"{mappings()} importer mapping(s) of {what} still mapped after "
            "dma_buf_invalidate_mappings",
        )
