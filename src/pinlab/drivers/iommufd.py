"""iommufd as a dma-buf importer: VFIO BAR dma-bufs mapped into an IOAS (drivers/iommu/iommufd/
pages.c, io_pagetable.c, v6.19; ``docs/semantics/kernel.md`` §13, K-108 … K-111).

Source: Jason Gunthorpe's "Initial DMABUF support for iommufd" ("[PATCH 1/8] iommufd: Add DMABUF
to iopt_pages", 2025-10-27; v2 2025-11-21 with "iommufd: Allow a DMABUF to be revoked"), merged
for v6.19 with the vfio-pci exporter; 7.1 adds "iommufd: Add dma_buf_pin()" (Leon Romanovsky,
revoke series v7 8/8, 2026-01-31).

**Pin policy -- pinned by contract, revoked for good.** A VMM maps a device BAR (its own
passthrough device's, or a peer's) into an I/O address space so that devices attached to the
IOAS can DMA to it. ``IOMMU_IOAS_MAP_FILE`` with a dma-buf fd:

1. length 0 → ``-EINVAL``; ``start + length - 1`` overflows → ``-EOVERFLOW``; a range past
   the buffer → ``-EINVAL`` (K-108);
2. attaches **dynamically** to one global dummy device that is not below any PCI function, with
   ``allow_peer2peer`` and ``invalidate`` = ``iopt_revoke_notify``; under the resv, (7.1)
   ``dma_buf_pin`` -- *before* checking that the buffer is a VFIO one -- then the private
   interconnect ``vfio_pci_dma_buf_iommufd_map`` (``-EOPNOTSUPP`` for any other exporter,
   ``-ENODEV`` when revoked, one range only); a failure unpins (7.1) and detaches (K-109);
3. never calls ``dma_buf_map_attachment``, charges nothing to RLIMIT_MEMLOCK, ``pinned_vm``
   or dmem (``IOPT_PAGES_ACCOUNT_NONE``, K-108), and keeps the attachment until the last area
   of its pages is unmapped (``iopt_release_pages``: (7.1) unpin, detach, put).

An invalidation (``iopt_revoke_notify``, under the resv, then the pages mutex) unmaps the IOVA
of every (area, domain) it filled and marks the pages revoked; revocation is **permanent**: a
second notification, an un-revoke and a domain attached later leave the IOVA unmapped, so
device DMA faults instead of reaching the BAR (K-110).

Consequence worth knowing (K-111, a faithful reading of 7.1, not a model defect): mapping a
*non*-VFIO dynamic exporter's buffer (amdgpu, xe) pins it first -- amdgpu's pin migrates a
VRAM BO to GTT (the dummy device is never peer2peer) and notifies the other importers -- and
only then fails with ``-EOPNOTSUPP``; the pin is undone, the migration is not.

Model-only: each area records the exporter's backing epoch at fill time, so a DMA through an
IOVA the model failed to unmap would be a ``stale`` incident.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar, TypedDict, Unpack

from sortedcontainers import SortedDict

from pinlab.drivers.base import DeviceBuffer, ImportEntry, ImportPath
from pinlab.drivers.dma_check import DmaIncident, StaleDmaDetector
from pinlab.drivers.importer import Importer, register_importer
from pinlab.drivers.vfio_pci import vfio_pci_dma_buf_iommufd_map
from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    PAGE_SIZE,
    DmaBuf,
    DmaBufAttachment,
    DmaBufAttachOps,
    SgTable,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_get,
    dma_buf_pin,
    dma_buf_put,
    dma_buf_unpin,
)
from pinlab.kernel.dma_buf_mapping import DmaBufPhysVec
from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.file import FdTable
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.limits import ULONG_MAX

IOVA_BASE = 1 << 32
"""Where pinlab's IOVA allocator starts (any address above the low 4 GiB would do)."""


class IoptPagesDmabuf:
    """``struct iopt_pages`` of type ``IOPT_ADDRESS_DMABUF``: ``[start, start + length)`` of
    one dma-buf, its attachment, the physical range (``phys.len == 0`` once revoked), the
    (area, domain) pairs it filled (the revoke ``tracker``) and whether 7.1 pinned it."""

    __slots__ = (
        "attach",
        "dmabuf",
        "epoch",
        "length",
        "phys",
        "pinned",
        "revoked",
        "start",
        "tracker",
        "users",
        "writable",
    )

    def __init__(self, dmabuf: DmaBuf, start: int, length: int, writable: bool) -> None:
        self.dmabuf = dmabuf
        self.start = start
        self.length = length
        self.writable = writable
        self.attach: DmaBufAttachment | None = None
        self.phys: DmaBufPhysVec | None = None
        self.revoked = False
        self.pinned = False
        self.tracker: list[tuple[IoptArea, str]] = []
        self.users = 0  # areas using these pages (the kref iopt_release_pages drops)
        self.epoch = 0

    def __repr__(self) -> str:
        state = "revoked" if self.revoked else "live"
        return f"<iopt_pages dmabuf {self.dmabuf!r} +{self.start:#x} {self.length:#x} {state}>"


@dataclass(eq=False, slots=True)
class IoptArea:
    """``struct iopt_area``: ``[iova, iova + length)`` of an IOAS backed by ``pages``;
    ``domains`` are the IOMMU domains whose page tables hold it now."""

    iova: int
    length: int
    pages: IoptPagesDmabuf
    domains: set[str] = field(default_factory=set)

    @property
    def last(self) -> int:
        return self.iova + self.length - 1


@dataclass(eq=False, slots=True)
class IommufdCtx:
    """``struct iommufd_ctx`` with one IOAS (``IOMMU_IOAS_ALLOC``): its areas by IOVA and the
    IOMMU domains attached to it (one per device a VMM attached; ``hwpt0`` from the start)."""

    owner: int | None
    areas: SortedDict = field(default_factory=SortedDict)  # iova -> IoptArea
    domains: list[str] = field(default_factory=lambda: ["hwpt0"])
    next_iova: int = IOVA_BASE
    closed: bool = False

    def area_at(self, iova: int) -> IoptArea | None:
        """The area containing ``iova`` (O(log n))."""
        idx = self.areas.bisect_right(iova) - 1
        if idx < 0:
            return None
        area: IoptArea = self.areas.peekitem(idx)[1]
        return area if area.iova <= iova <= area.last else None

    def overlaps(self, iova: int, length: int) -> bool:
        last = iova + length - 1
        idx = self.areas.bisect_right(last) - 1
        if idx < 0:
            return False
        area: IoptArea = self.areas.peekitem(idx)[1]
        return area.last >= iova

    def __iter__(self) -> Iterator[IoptArea]:
        return iter(list(self.areas.values()))


@dataclass(frozen=True, slots=True)
class IommuDma:
    """One device DMA through an IOAS: bytes, where they were, whether peer-to-peer, the
    detector's verdict."""

    nbytes: int
    memory: str
    p2p: bool
    incident: DmaIncident | None


class IommufdOptions(TypedDict, total=False):
    name: str
    detector: StaleDmaDetector | None


@register_importer("iommufd")
class IommufdDevice(Importer):
    """iommufd as a dma-buf importer; ``dev`` is ``iommufd_global_device()``."""

    import_entry: ClassVar[ImportEntry] = ImportEntry.IOAS_MAP
    import_path: ClassVar[ImportPath] = ImportPath.PHYS

    def __init__(self, kernel: Kernel, **options: Unpack[IommufdOptions]) -> None:
        self.kernel = kernel
        self.name = options.get("name") or "iommufd"
        detector = options.get("detector")
        self.detector = detector if detector is not None else StaleDmaDetector()
        self.dev = Device("iommufd")  # no PCI parent: never peer2peer by topology (K-55)
        self.attach_ops = DmaBufAttachOps(allow_peer2peer=True, move_notify=self.iopt_revoke_notify)
        self.contexts: list[IommufdCtx] = []

    def __repr__(self) -> str:
        return f"<iommufd {self.name}>"

    def checklist_items(self, exporter_dynamic: bool) -> tuple[str, ...]:
        """K-108 (map file), K-109 (attach, pin, private interconnect)."""
        return ("K-108", "K-109")

    # -- /dev/iommu ------------------------------------------------------------------------
    def open(self, owner: int | None = None) -> IommufdCtx:
        """``open("/dev/iommu")`` + ``IOMMU_IOAS_ALLOC``."""
        ctx = IommufdCtx(owner)
        self.contexts.append(ctx)
        return ctx

    def close(self, ctx: IommufdCtx) -> None:
        """The fd's last close (``iommufd_fops_release``): every area is unmapped and its
        pages released."""
        for area in ctx:
            self._remove_area(ctx, area)
        ctx.closed = True
        if ctx in self.contexts:
            self.contexts.remove(ctx)

    # -- IOMMU_IOAS_MAP_FILE ---------------------------------------------------------------
    def ioas_map_file(
        self,
        ctx: IommufdCtx,
        fd: int,
        start: int = 0,
        length: int | None = None,
        *,
        iova: int | None = None,
        writable: bool = True,
        files: FdTable | None = None,
    ) -> int:
        """``IOMMU_IOAS_MAP_FILE`` → ``iopt_map_file_pages`` for a dma-buf fd: the IOVA of
        the new area (K-108, K-109). ``iova`` asks for ``IOMMU_IOAS_MAP_FIXED_IOVA``
        (``-EEXIST`` when taken, ``-EINVAL`` unaligned)."""
        fn = "iopt_map_file_pages"
        if ctx.closed:
            raise err(Errno.EBADF, fn, "iommufd closed")
        try:
            dmabuf = dma_buf_get(self.kernel, fd, files)
        except KernelError as e:
            if e.errno is Errno.EINVAL:  # an open file that is no dma-buf: the memfd path
                raise err(
                    Errno.EOPNOTSUPP,
                    fn,
                    f"fd {fd} is not a dma-buf (pinlab models IOMMU_IOAS_MAP_FILE of memfds "
                    "only as accounting, pinlab.policy.iommufd)",
                ) from None
            raise
        try:
            size = dmabuf.size - start if length is None else length
            if size <= 0:
                raise err(Errno.EINVAL, fn, "length 0")
            if start < 0 or start + size - 1 > ULONG_MAX:
                raise err(Errno.EOVERFLOW, fn, "start + length overflows")
            if start % PAGE_SIZE or size % PAGE_SIZE:
                raise err(Errno.EINVAL, "iopt_alloc_dmabuf_pages", "range not page-aligned")
            if start + size > dmabuf.size:
                raise err(Errno.EINVAL, "iopt_alloc_dmabuf_pages", "range past the dma-buf")
            pages = IoptPagesDmabuf(dmabuf, start, size, writable)  # IOPT_PAGES_ACCOUNT_NONE
            where = self._alloc_iova(ctx, iova, size)
            self.iopt_map_dmabuf(pages)
        except KernelError:
            dma_buf_put(dmabuf)
            raise
        area = IoptArea(where, size, pages)
        pages.users += 1
        ctx.areas[where] = area
        self._fill_domains(area, ctx.domains)
        return where

    def _alloc_iova(self, ctx: IommufdCtx, iova: int | None, length: int) -> int:
        if iova is not None:
            if iova % PAGE_SIZE:
                raise err(Errno.EINVAL, "iopt_map_pages", f"IOVA {iova:#x} not page-aligned")
            if ctx.overlaps(iova, length):
                raise err(Errno.EEXIST, "iopt_map_pages", f"IOVA {iova:#x} is taken")
            return iova
        where = ctx.next_iova
        ctx.next_iova += length
        return where

    def iopt_map_dmabuf(self, pages: IoptPagesDmabuf) -> None:
        """``iopt_map_dmabuf`` (K-109): attach to the global device, take the resv, (7.1)
        ``dma_buf_pin``, the private interconnect; errors unpin and detach."""
        dmabuf = pages.dmabuf
        attach = dma_buf_dynamic_attach(dmabuf, self.dev, self.attach_ops, pages)
        resv = dmabuf.resv
        resv.lock()
        try:
            if self.kernel.profile.iommufd_dmabuf_pin:
                dma_buf_pin(attach)
                pages.pinned = True
            try:
                pages.phys = vfio_pci_dma_buf_iommufd_map(attach)
            except KernelError:
                if pages.pinned:
                    dma_buf_unpin(attach)
                    pages.pinned = False
                raise
        except KernelError:
            resv.unlock()
            dma_buf_detach(dmabuf, attach)
            raise
        buf = dmabuf.priv
        pages.epoch = buf.epoch if isinstance(buf, DeviceBuffer) else 0
        resv.unlock()
        pages.attach = attach

    def _fill_domains(self, area: IoptArea, domains: list[str]) -> None:
        """``iopt_area_fill_domains``: map the area into each domain -- unless its pages are
        revoked (K-110) -- and track the pair for a later revoke."""
        pages = area.pages
        with pages.dmabuf.resv:
            for domain in domains:
                if pages.revoked or domain in area.domains:
                    continue
                area.domains.add(domain)
                pages.tracker.append((area, domain))

    def attach_domain(self, ctx: IommufdCtx, domain: str) -> None:
        """A device attached to the IOAS (``IOMMU_HWPT_ALLOC`` / a VFIO device's
        ``VFIO_DEVICE_ATTACH_IOMMUFD_PT``): every area is filled into its domain, except those
        whose pages are revoked (K-110)."""
        if domain in ctx.domains:
            return
        ctx.domains.append(domain)
        for area in ctx:
            self._fill_domains(area, [domain])

    # -- IOMMU_IOAS_UNMAP ------------------------------------------------------------------
    def ioas_unmap(self, ctx: IommufdCtx, iova: int) -> int:
        """``IOMMU_IOAS_UNMAP`` of the area starting at ``iova``: its bytes (``-ENOENT`` when
        nothing starts there)."""
        area: IoptArea | None = ctx.areas.get(iova)
        if area is None:
            raise err(Errno.ENOENT, "iopt_unmap_iova", f"no area at IOVA {iova:#x}")
        self._remove_area(ctx, area)
        return area.length

    def _remove_area(self, ctx: IommufdCtx, area: IoptArea) -> None:
        pages = area.pages
        with pages.dmabuf.resv:
            pages.tracker = [(a, d) for a, d in pages.tracker if a is not area]
            area.domains.clear()
        del ctx.areas[area.iova]
        pages.users -= 1
        if pages.users == 0:
            self.iopt_release_pages(pages)

    def iopt_release_pages(self, pages: IoptPagesDmabuf) -> None:
        """``iopt_release_pages`` (K-109): (7.1) ``dma_buf_unpin`` under the resv, detach,
        put; WARN if the revoke tracker is not empty."""
        attach = pages.attach
        dmabuf = pages.dmabuf
        if attach is not None:
            if pages.pinned:
                with dmabuf.resv:
                    dma_buf_unpin(attach)
                pages.pinned = False
            dma_buf_detach(dmabuf, attach)
            pages.attach = None
        if pages.tracker:
            self.kernel.warn("iopt_release_pages", "!list_empty(&pages->dmabuf.tracker)")
        dma_buf_put(dmabuf)

    # -- revoke ----------------------------------------------------------------------------
    def iopt_revoke_notify(self, attach: DmaBufAttachment) -> None:
        """``iopt_revoke_notify`` (K-110): under the resv and the pages mutex, unless already
        revoked, unmap every tracked (area, domain) and mark the pages revoked -- for good."""
        attach.dmabuf.resv.assert_held("iopt_revoke_notify")
        pages = attach.importer_priv
        assert isinstance(pages, IoptPagesDmabuf)
        if pages.revoked:
            return
        for area, domain in pages.tracker:
            area.domains.discard(domain)
        pages.tracker = []
        pages.revoked = True

    # -- device DMA ------------------------------------------------------------------------
    def dma(
        self,
        ctx: IommufdCtx,
        iova: int,
        nbytes: int | None = None,
        *,
        domain: str = "hwpt0",
        write: bool = False,
        pid: int | None = None,
    ) -> IommuDma:
        """A device behind ``domain`` reads (or ``write``s) at ``iova``: ``-EFAULT`` (an IOMMU
        fault) when the IOVA is not mapped in that domain -- never mapped, unmapped, or revoked
        (K-110) -- or ``write`` to a read-only area; else the access, checked by the stale-DMA
        detector against the exporter's backing epoch."""
        area = ctx.area_at(iova)
        if area is None or domain not in area.domains:
            raise err(Errno.EFAULT, "iommu_fault", f"{domain}: no translation for {iova:#x}")
        pages = area.pages
        if write and not pages.writable:
            raise err(Errno.EFAULT, "iommu_fault", f"{domain}: {iova:#x} is read-only")
        assert pages.phys is not None
        sgt = SgTable(
            ((pages.phys.paddr + pages.start, pages.length),), True, "bar", pages.epoch, True
        )
        incident = self.detector.check(self.name, pages.dmabuf, sgt, pid, waited=True)
        return IommuDma(area.length if nbytes is None else nbytes, "bar", True, incident)
