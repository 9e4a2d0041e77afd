"""habanalabs-like exporter (drivers/accel/habanalabs/common/memory.c; drivers/misc/habanalabs
before ≈v6.2/6.3; ``kernel-semantics.md`` §7.2, §10.3, K-52, K-75, K-82, K-93).

**Pin policy -- nothing to decide: device memory is always resident.** An AI accelerator in a
training cluster exists to hold one job's data in its HBM (the fourth camp of the 2021 debate),
so its device memory is allocated once, at a fixed device address, and never moves. The
exporter therefore has **no pin/unpin ops**: it is a *static* exporter, ``dma_buf_pin`` is a
successful no-op (K-20, K-93) and no ``move_notify`` is ever sent.

What it does decide is *who may map*: only a peer that can reach the device BAR over PCIe.

* ``attach`` (``hl_dmabuf_attach``): a negative ``pci_p2pdma_distance(pdev, attach->dev,
  verbose=true)`` clears ``peer2peer``; attach **always succeeds** (K-52);
* ``map_dma_buf`` (``hl_map_dmabuf``): without ``peer2peer`` → ``-EPERM`` and the log line
  "Failed to map dmabuf because p2p is disabled"; otherwise a page-less sg_table of BAR
  addresses (``memory="vram"``, ``p2p=True``). A static importer (peer2peer always False)
  can attach but never map.

Consequence across profiles (K-75): in presets 5.16-6.14 a dynamic importer of this static
exporter is mapped at attach time, so an importer without a usable P2P path fails already in
``dma_buf_dynamic_attach`` with ``-EPERM``; from 6.16 the attach succeeds and the first map
returns ``-EPERM``.

Device memory is a :class:`~pinlab.kernel.range_alloc.RangeAllocator` over the HBM, in DRAM
pages (``dram_page_size``); a handle is ``struct hl_vm_phys_pg_pack``. Freeing a handle whose
export count is > 0 fails with ``-EINVAL`` ("handle %u is exported, cannot free", K-82); the
count drops when the dma-buf's last reference goes (``hl_release_dmabuf``), after which the
free succeeds. (Later kernels refcount the pack instead and let the free go through
[inferred]; pinlab models the v5.16 behaviour that K-82 names.) Each export makes a new
dma-buf, as ``export_dmabuf_from_handle`` does. Not modelled: the newer refusal to export
when device DRAM uses virtual memory (``-EOPNOTSUPP``) and the export-by-address alignment
checks (pinlab always exports whole handles).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Self

from pinlab.drivers.base import (
    DeviceBuffer,
    ExporterDriver,
    ExporterSpec,
    ImportPath,
    RegionUsage,
    constructor_options,
    register_exporter,
)
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaBufExportInfo,
    DmaDataDirection,
    SgTable,
    dma_buf_export,
)
from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.p2pdma import pci_p2pdma_distance
from pinlab.kernel.pci import PciDev
from pinlab.kernel.range_alloc import Allocation, RangeAllocator
from pinlab.units import GiB, MiB

_DEVICE_DOMAINS = ("vram", "hbm", "device")


class HlDeviceMemory(DeviceBuffer):
    """``struct hl_vm_phys_pg_pack``: one handle's device-memory pages.

    ``exporting_cnt`` counts the live dma-bufs exported from it. It never moves, so it is
    ``pinned`` for as long as it exists.
    """

    __slots__ = ("allocation", "exporting_cnt", "freed", "handle", "hdev", "name", "size")

    def __init__(
        self, hdev: HabanalabsDevice, handle: int, allocation: Allocation, name: str
    ) -> None:
        self.hdev = hdev
        self.handle = handle
        self.allocation = allocation
        self.size = allocation.size
        self.name = name or f"handle{handle}"
        self.exporting_cnt = 0
        self.freed = False

    @property
    def location(self) -> str | None:
        return None if self.freed else "vram"

    @property
    def pinned(self) -> bool:
        return not self.freed

    def __repr__(self) -> str:
        return (
            f"<hl_phys_pg_pack {self.name} handle={self.handle} {self.size:#x} "
            f"exported={self.exporting_cnt}>"
        )


@register_exporter("habanalabs")
class HabanalabsDevice(ExporterDriver):
    """One habanalabs-like accelerator (Gaudi): HBM that never moves, exported statically."""

    pin_policy = (
        "always resident: static exporter, no pin op (dma_buf_pin is a no-op); "
        "map needs a P2P path, else -EPERM"
    )
    exp_name = "habanalabs"

    def __init__(
        self,
        kernel: Kernel,
        pdev: PciDev,
        *,
        hbm_size: int = 32 * GiB,
        dram_page_size: int = 2 * MiB,
        name: str = "",
    ) -> None:
        """``hbm_size`` defaults to Gaudi's 32 GiB (the 2021 DL1 target); allocations are
        rounded up to ``dram_page_size`` (a power of two dividing ``hbm_size``)."""
        super().__init__(kernel, pdev, name or f"{self.driver_name}-{pdev.name}")
        self.dram = RangeAllocator(hbm_size, granule=dram_page_size, name=f"{self.name}:hbm")
        self.handles: dict[int, HlDeviceMemory] = {}
        self._next_handle = 1
        self.ops = self.dma_buf_ops()

    @classmethod
    def from_spec(cls, kernel: Kernel, pdev: PciDev, spec: ExporterSpec) -> Self:
        """``hbm_size`` = the spec's ``memory``; the device has no GTT or SYSTEM domain and
        its BAR exposes all of the HBM."""
        options = constructor_options(spec.driver_options, hbm_size=spec.memory)
        return cls(kernel, pdev, name=spec.name, **options)

    def checklist_items(self, path: ImportPath, *, by_pin: bool, refused: bool) -> tuple[str, ...]:
        """K-52 (map needs peer2peer); K-75 for a refused dynamic importer (attach- or
        map-time refusal by profile)."""
        return ("K-52", "K-75") if refused and path is not ImportPath.STATIC else ("K-52",)

    def _log(self, message: str) -> None:
        self.kernel.log(f"habanalabs {self.pdev.name}: {message}")

    # -- device memory ---------------------------------------------------------------------
    @classmethod
    def domain_error(cls, domain: str) -> str | None:
        if domain.lower().strip() in _DEVICE_DOMAINS:
            return None
        return f"one of {', '.join(_DEVICE_DOMAINS)} (only device memory is exported)"

    def create_buffer(
        self, size: int, domain: str = "vram", *, name: str = "", contiguous: bool = False
    ) -> HlDeviceMemory:
        """``alloc_device_memory``: ``size`` bytes of HBM (rounded up to DRAM pages), as one
        range when ``contiguous`` (``HL_MEM_CONTIGUOUS``). ``domain`` must name device memory
        (``"vram"``, ``"hbm"`` or ``"device"``): the exporter exports nothing else.
        ``-ENOMEM`` when the HBM has no room."""
        if domain.lower().strip() not in _DEVICE_DOMAINS:
            raise err(
                Errno.EINVAL,
                "alloc_device_memory",
                f"unknown habanalabs domain {domain!r} (expected one of "
                f"{', '.join(_DEVICE_DOMAINS)}: only device memory is exported)",
            )
        if size <= 0:
            raise err(Errno.EINVAL, "alloc_device_memory", f"size {size} must be positive")
        try:
            allocation = self.dram.alloc(size, contiguous=contiguous)
        except KernelError:
            raise err(
                Errno.ENOMEM, "alloc_device_memory", f"no {size:#x} bytes of HBM left"
            ) from None
        handle = self._next_handle
        self._next_handle += 1
        mem = HlDeviceMemory(self, handle, allocation, name)
        self.handles[handle] = mem
        return mem

    def free_buffer(self, buf: DeviceBuffer) -> None:
        """``free_device_memory`` (K-82): ``-EINVAL`` for an unknown handle and, with the log
        line "handle %u is exported, cannot free", while any dma-buf from it is alive."""
        if not isinstance(buf, HlDeviceMemory) or self.handles.get(buf.handle) is not buf:
            handle = buf.handle if isinstance(buf, HlDeviceMemory) else -1
            self._log(f"free device memory failed, no match for handle {handle}")
            raise err(Errno.EINVAL, "free_device_memory", f"no match for handle {handle}")
        if buf.exporting_cnt > 0:
            self._log(f"handle {buf.handle} is exported, cannot free")
            raise err(Errno.EINVAL, "free_device_memory", f"handle {buf.handle} is exported")
        del self.handles[buf.handle]
        self.dram.free(buf.allocation)
        buf.freed = True

    # -- export ----------------------------------------------------------------------------
    def export(self, buf: DeviceBuffer) -> DmaBuf:
        """``export_dmabuf_from_handle``: a new dma-buf over the whole handle; its export
        count goes up until the dma-buf is released."""
        if not isinstance(buf, HlDeviceMemory) or self.handles.get(buf.handle) is not buf:
            raise err(Errno.EINVAL, "export_dmabuf_from_handle", f"{buf!r} is not allocated")
        dmabuf = dma_buf_export(
            self.kernel,
            DmaBufExportInfo.define(self.module, self.ops, buf.size, buf),
        )
        self.publish_location(dmabuf)
        buf.exporting_cnt += 1
        return dmabuf

    def buffer_of(self, dmabuf: DmaBuf) -> HlDeviceMemory:
        mem = dmabuf.priv
        if not isinstance(mem, HlDeviceMemory) or mem.hdev is not self:
            raise ValueError(f"{dmabuf!r} was not exported by {self.name}")
        return mem

    # -- dma_buf_ops -----------------------------------------------------------------------
    def _attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``hl_dmabuf_attach`` (K-52): clear peer2peer when the importer cannot reach the
        BAR (verbose P2PDMA query). Never fails."""
        if pci_p2pdma_distance(self.pdev, attach.dev, True) < 0:
            attach.peer2peer = False
        attach.priv = self.buffer_of(dmabuf)

    def _map(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        """``hl_map_dmabuf`` (K-52): ``-EPERM`` without peer2peer; else the BAR addresses of
        the handle's pages, page-less."""
        if not attach.peer2peer:
            self._log("Failed to map dmabuf because p2p is disabled")
            raise err(Errno.EPERM, "hl_map_dmabuf", "p2p is disabled")
        mem = self.buffer_of(attach.dmabuf)
        return SgTable(mem.allocation.segments, page_less=True, memory="vram", epoch=0, p2p=True)

    def _unmap(self, attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection) -> None:
        """``hl_unmap_dmabuf``: ``dma_unmap_resource`` of each entry (nothing to model)."""

    def _release(self, dmabuf: DmaBuf) -> None:
        """``hl_release_dmabuf``: the handle's export count goes down."""
        self.buffer_of(dmabuf).exporting_cnt -= 1

    # -- reporting -------------------------------------------------------------------------
    def watch_regions(self, on_change: Callable[[], None]) -> bool:
        """The HBM allocator's allocations and frees (nothing else changes the region)."""
        self.dram.on_change = on_change
        return True

    def regions(self) -> list[RegionUsage]:
        """One region, ``"vram"`` (the HBM). All used bytes count as pinned: none can move."""
        dram = self.dram
        return [RegionUsage("vram", dram.size, dram.used, dram.used, dram.largest_free)]
