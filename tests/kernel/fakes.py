"""Test exporters and importers built only on ``pinlab.kernel``.

``TtmExporter`` is a minimal dynamic exporter over TTM, shaped like amdgpu (pin validates into
a domain then ``ttm_bo_pin``; map validates an unpinned BO and builds an sg_table from the
resource; moves notify importers first). ``StaticExporter`` is a static exporter whose memory
never moves (habanalabs-like: map without peer2peer is ``-EPERM``). Tests use them to exercise
the core; the real driver models live in ``pinlab.drivers``.
"""

from __future__ import annotations

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaBufAttachOps,
    DmaBufExportInfo,
    DmaBufOps,
    DmaDataDirection,
    SgTable,
    dma_buf_export,
    dma_buf_notify_move,
)
from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.ttm import (
    TtmBufferObject,
    TtmDevice,
    TtmDeviceFuncs,
    TtmMemType,
    TtmPlace,
    TtmPlacement,
    TtmResource,
    placement,
    ttm_bo_init_validate,
    ttm_bo_pin,
    ttm_bo_unpin,
    ttm_bo_validate,
)

GiB = 1 << 30
MiB = 1 << 20


class ExportingFuncs(TtmDeviceFuncs):
    """amdgpu_bo_move_notify: an exported BO leaving a non-SYSTEM place notifies importers."""

    def __init__(self) -> None:
        self.notified: list[TtmBufferObject] = []

    def move_notify(self, bo: TtmBufferObject, evict: bool, new_res: TtmResource | None) -> None:
        dmabuf = bo.dma_buf
        if (
            isinstance(dmabuf, DmaBuf)
            and bo.resource is not None
            and bo.resource.mem_type is not TtmMemType.SYSTEM
        ):
            self.notified.append(bo)
            dma_buf_notify_move(dmabuf)


def make_ttm_device(
    kernel: Kernel,
    name: str = "gpu0",
    vram: int = 1 * GiB,
    gtt: int = 2 * GiB,
    system: int = 8 * GiB,
) -> TtmDevice:
    bdev = TtmDevice(kernel, name, ExportingFuncs())
    bdev.add_manager(TtmMemType.VRAM, vram, name=f"{name}:vram")
    bdev.add_manager(TtmMemType.TT, gtt, name=f"{name}:gtt")
    bdev.add_manager(TtmMemType.SYSTEM, system, name=f"{name}:system")
    return bdev


class TtmExporter:
    """A dynamic dma-buf exporter of TTM BOs (amdgpu-shaped, minimal)."""

    def __init__(
        self,
        bdev: TtmDevice,
        *,
        pin_domain: TtmPlacement | None = None,
        dynamic: bool = True,
        cache_sgt_mapping: bool = False,
        fail_map: Errno | None = None,
        fail_pin: Errno | None = None,
    ) -> None:
        self.bdev = bdev
        self.pin_domain = pin_domain if pin_domain is not None else placement(TtmMemType.TT)
        self.fail_map = fail_map
        self.fail_pin = fail_pin
        self.calls: list[str] = []
        self.ops = DmaBufOps(
            map_dma_buf=self.map_dma_buf,
            unmap_dma_buf=self.unmap_dma_buf,
            release=self.release,
            attach=self.attach,
            detach=self.detach,
            pin=self.pin if dynamic else None,
            unpin=self.unpin if dynamic else None,
            cache_sgt_mapping=cache_sgt_mapping,
        )
        self.released: list[DmaBuf] = []

    def create_bo(
        self, size: int, where: TtmMemType = TtmMemType.VRAM, name: str = ""
    ) -> TtmBufferObject:
        return ttm_bo_init_validate(self.bdev, size, placement(where), name=name)

    def export(self, bo: TtmBufferObject) -> DmaBuf:
        dmabuf = dma_buf_export(
            self.bdev.kernel,
            DmaBufExportInfo(
                ops=self.ops, size=bo.size, priv=bo, exp_name="ttm-test", resv=bo.resv
            ),
        )
        bo.dma_buf = dmabuf
        return dmabuf

    # -- dma_buf_ops --------------------------------------------------------------------
    def attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        self.calls.append("attach")

    def detach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        self.calls.append("detach")

    def pin(self, attach: DmaBufAttachment) -> None:
        self.calls.append("pin")
        if self.fail_pin is not None:
            raise err(self.fail_pin, "fake_pin")
        bo = attach.dmabuf.priv
        assert isinstance(bo, TtmBufferObject)
        if bo.pin_count:
            if bo.mem_type not in {p.mem_type for p in self.pin_domain}:
                raise err(Errno.EINVAL, "fake_pin", "pinned elsewhere")
        else:
            ttm_bo_validate(bo, self.pin_domain)
        ttm_bo_pin(bo)

    def unpin(self, attach: DmaBufAttachment) -> None:
        self.calls.append("unpin")
        bo = attach.dmabuf.priv
        assert isinstance(bo, TtmBufferObject)
        ttm_bo_unpin(bo)

    def map_dma_buf(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        self.calls.append("map")
        if self.fail_map is not None:
            raise err(self.fail_map, "fake_map")
        bo = attach.dmabuf.priv
        assert isinstance(bo, TtmBufferObject)
        if not bo.pin_count:
            plc = (
                placement(TtmMemType.VRAM, TtmMemType.TT)
                if attach.peer2peer
                else placement(TtmMemType.TT)
            )
            ttm_bo_validate(bo, plc)
        res = bo.resource
        if res is None:
            raise err(Errno.EINVAL, "fake_map", "no backing")
        vram = res.mem_type is TtmMemType.VRAM
        return SgTable(
            res.allocation.segments,
            page_less=vram,
            memory=str(res.mem_type).lower(),
            epoch=bo.epoch,
            p2p=vram,
        )

    def unmap_dma_buf(
        self, attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection
    ) -> None:
        self.calls.append("unmap")

    def release(self, dmabuf: DmaBuf) -> None:
        self.calls.append("release")
        self.released.append(dmabuf)


class StaticExporter:
    """A static exporter of always-resident device memory (habanalabs-like)."""

    def __init__(
        self, kernel: Kernel, *, cache_sgt_mapping: bool = False, vmap: bool = True
    ) -> None:
        self.kernel = kernel
        self.calls: list[str] = []
        self.ops = DmaBufOps(
            map_dma_buf=self.map_dma_buf,
            unmap_dma_buf=self.unmap_dma_buf,
            release=lambda d: self.calls.append("release"),
            vmap=self.vmap if vmap else None,
            vunmap=lambda d, a: self.calls.append("vunmap"),
            mmap=lambda d, off, n: self.calls.append("mmap"),
            begin_cpu_access=lambda d, dr: self.calls.append("begin_cpu_access"),
            cache_sgt_mapping=cache_sgt_mapping,
        )
        self.require_p2p = False

    def export(self, size: int = 16 * MiB, name: str = "static") -> DmaBuf:
        return dma_buf_export(
            self.kernel, DmaBufExportInfo(ops=self.ops, size=size, priv=object(), exp_name=name)
        )

    def map_dma_buf(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        self.calls.append("map")
        if self.require_p2p and not attach.peer2peer:
            raise err(Errno.EPERM, "hl_map_dmabuf", "p2p is disabled")
        return SgTable(
            ((0x1000_0000, attach.dmabuf.size),), page_less=True, memory="vram", p2p=True
        )

    def unmap_dma_buf(
        self, attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection
    ) -> None:
        self.calls.append("unmap")

    def vmap(self, dmabuf: DmaBuf) -> int:
        self.calls.append("vmap")
        return 0xFFFF_8000_0000_0000


class Importer:
    """A dynamic importer recording its move_notify calls."""

    def __init__(self, name: str = "nic0", allow_peer2peer: bool = True) -> None:
        self.dev = Device(name)
        self.notified: list[DmaBufAttachment] = []
        self.ops = DmaBufAttachOps(
            allow_peer2peer=allow_peer2peer, move_notify=self.notified.append
        )


__all__ = [
    "GiB",
    "Importer",
    "KernelError",
    "MiB",
    "StaticExporter",
    "TtmExporter",
    "TtmPlace",
    "make_ttm_device",
]
