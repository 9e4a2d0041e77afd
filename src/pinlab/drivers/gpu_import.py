"""GPU import: one GPU using another device's buffer (``amdgpu_gem_prime_import``;
``kernel-semantics.md`` §7.1 importer side, K-79, K-80).

**Pin policy -- survives moves.** The importing GPU attaches dynamically with
``allow_peer2peer``; on ``move_notify`` it guts its import BO (drops the mapping) and maps
again at next use, after waiting for the exporter's KERNEL fences like any GPU job that syncs
to the buffer's reservation.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuDevice
from pinlab.drivers.base import ExporterDriver, ImportEntry, ImportPath
from pinlab.drivers.dma_check import DmaIncident, StaleDmaDetector
from pinlab.drivers.importer import Importer, register_importer
from pinlab.kernel.dma_buf import DmaBufAttachment, dma_buf_get, dma_buf_put
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.file import FdTable
from pinlab.kernel.resv import DmaResvUsage


@dataclass(frozen=True, slots=True)
class GpuAccess:
    """One GPU job touching an imported buffer."""

    remapped: bool
    memory: str
    p2p: bool
    wait: tuple[DmaFence, ...]
    incident: DmaIncident | None


@register_importer("gpu-import")
class GpuImporter(Importer):
    """An amdgpu-like GPU importing foreign dma-bufs."""

    import_entry = ImportEntry.PRIME_IMPORT
    import_path = ImportPath.DYNAMIC

    @classmethod
    def on(cls, driver: ExporterDriver) -> GpuImporter:
        """The GPU importer of an exporter that declares ``imports_dmabufs`` (``ValueError``
        for any other: the import path modelled is amdgpu's)."""
        if not driver.imports_dmabufs or not isinstance(driver, AmdgpuDevice):
            raise ValueError(f"{driver.driver_name} does not import dma-bufs")
        return cls(driver)

    def __init__(self, adev: AmdgpuDevice, *, detector: StaleDmaDetector | None = None) -> None:
        self.adev = adev
        self.kernel = adev.kernel
        self.name = adev.name
        self.detector = detector if detector is not None else StaleDmaDetector()
        self.imports: list[AmdgpuBo] = []

    def import_fd(self, fd: int, *, files: FdTable | None = None) -> AmdgpuBo:
        """``DRM_IOCTL_PRIME_FD_TO_HANDLE``: an sg BO attached dynamically (or our own BO)."""
        dmabuf = dma_buf_get(self.kernel, fd, files)
        try:
            abo = self.adev.prime_import(dmabuf)
        finally:
            dma_buf_put(dmabuf)
        if abo.is_import:
            self.imports.append(abo)
        return abo

    def access(self, abo: AmdgpuBo) -> GpuAccess:
        """A GPU job using the import: bind (map) if the backing was dropped, sync to the
        buffer's KERNEL fences, then DMA through the current mapping."""
        attach = abo.tbo.import_attach
        if attach is None:  # our own export: local memory, nothing to map
            return GpuAccess(False, str(abo.location), False, (), None)
        assert isinstance(attach, DmaBufAttachment)
        dmabuf = attach.dmabuf
        with dmabuf.resv:
            remapped = abo.import_sgt is None
            sgt = self.adev.import_bind(abo)
            wait = tuple(dmabuf.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True))
        incident = self.detector.check(self.name, dmabuf, sgt, waited=True)
        return GpuAccess(remapped, sgt.memory, sgt.p2p, wait, incident)

    def release(self, abo: AmdgpuBo) -> None:
        """Close the imported handle: a foreign buffer's import is torn down; our own buffer
        (a self-import) gives back the GEM reference :meth:`AmdgpuDevice.prime_import` took."""
        if abo in self.imports:
            self.imports.remove(abo)
            self.adev.release_import(abo)
        elif not abo.is_import:
            self.adev.gem_object_put(abo)
