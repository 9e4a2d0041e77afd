"""Display engine: a *static* dma-buf importer that scans a buffer out every frame
(``kernel-semantics.md`` §10.4).

**Pin policy -- pinned while mapped, by the core.** A display engine cannot take faults or
react to ``move_notify``; it attaches statically (``dma_buf_attach``), so the core pins the
buffer for it: from attach to detach in presets ≤6.15 (cached mapping), for every live mapping
in ≥6.16. A scanout buffer therefore never moves while it is on screen. amdgpu pins such a
buffer in GTT (a static attachment has no peer2peer); if P2P importers already pinned it in
VRAM, the display's map fails with ``-EINVAL`` (K-76).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

from pinlab.drivers.base import ImportEntry, ImportPath
from pinlab.drivers.dma_check import DmaIncident
from pinlab.drivers.importer import DeviceImporter, ImporterOptions, register_importer
from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    SgTable,
    dma_buf_attach,
    dma_buf_detach,
    dma_buf_get,
    dma_buf_map_attachment,
    dma_buf_put,
    dma_buf_unmap_attachment,
)
from pinlab.kernel.errno import KernelError
from pinlab.kernel.file import FdTable
from pinlab.kernel.kernel import Kernel


@dataclass(eq=False, slots=True)
class Scanout:
    """One framebuffer on one display engine."""

    display: DisplayEngine
    dmabuf: DmaBuf
    attach: DmaBufAttachment
    sgt: SgTable
    pid: int | None = None
    frames: int = 0
    active: bool = True


@register_importer("display")
class DisplayEngine(DeviceImporter):
    """A display controller (for example a GPU's display block) importing framebuffers."""

    default_name = "display0"
    import_entry = ImportEntry.SCANOUT
    import_path = ImportPath.STATIC

    def checklist_items(self, exporter_dynamic: bool) -> tuple[str, ...]:
        """A static attachment of a dynamic exporter: mapped and cached at attach (K-13, up
        to 6.15) or pinned per mapping (K-25); of a static one, plainly mapped (K-97)."""
        if not exporter_dynamic:
            return ("K-97",)
        return ("K-13",) if self.kernel.profile.cache_sgt_at_attach else ("K-25",)

    def __init__(self, kernel: Kernel, pdev: Device, **options: Unpack[ImporterOptions]) -> None:
        super().__init__(kernel, pdev, **options)
        self.scanouts: list[Scanout] = []

    def set_scanout(
        self, fd: int, *, files: FdTable | None = None, pid: int | None = None
    ) -> Scanout:
        """Import ``fd`` as a framebuffer: ``dma_buf_get``, static attach, map (the core pins
        as the profile says and waits for KERNEL fences). Errors undo everything."""
        dmabuf = dma_buf_get(self.kernel, fd, files)
        try:
            attach = dma_buf_attach(dmabuf, self.dev)
        except KernelError:
            dma_buf_put(dmabuf)
            raise
        try:
            with dmabuf.resv:
                sgt = dma_buf_map_attachment(attach)
        except KernelError:
            dma_buf_detach(dmabuf, attach)
            dma_buf_put(dmabuf)
            raise
        scanout = Scanout(self, dmabuf, attach, sgt, pid)
        self.scanouts.append(scanout)
        return scanout

    def scan_frame(self, scanout: Scanout) -> DmaIncident | None:
        """One vblank: the engine reads the framebuffer through its mapping."""
        scanout.frames += 1
        return self.detector.check(self.name, scanout.dmabuf, scanout.sgt, scanout.pid)

    def clear_scanout(self, scanout: Scanout) -> None:
        """Take the framebuffer off screen: unmap (unpins in ≥6.16), detach, put."""
        if not scanout.active:
            return
        scanout.active = False
        with scanout.dmabuf.resv:
            dma_buf_unmap_attachment(scanout.attach, scanout.sgt)
        dma_buf_detach(scanout.dmabuf, scanout.attach)
        dma_buf_put(scanout.dmabuf)
        self.scanouts.remove(scanout)
