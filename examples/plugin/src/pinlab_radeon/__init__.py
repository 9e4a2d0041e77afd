"""A radeon-like exporter for pinlab, shipped as a plugin (entry point ``pinlab.exporters``).

radeon (drivers/gpu/drm/radeon/) exports GEM objects through the DRM PRIME helpers
(drivers/gpu/drm/drm_prime.c), so it is a **static** exporter: its ``dma_buf_ops`` are
``drm_gem_prime_dmabuf_ops``, which have no ``pin``/``unpin``, and it never sends
``move_notify`` (``dma_buf_is_dynamic()`` is false, K-6).

**Pin policy -- pin in GTT at attach, for every importer.**

* ``attach`` is ``drm_gem_map_attach``, which calls ``drm_gem_pin`` → the driver's
  ``radeon_gem_prime_pin``: reserve the BO and ``radeon_bo_pin(bo, RADEON_GEM_DOMAIN_GTT)``.
  A BO in VRAM is first moved to GTT (system pages the GPU maps through its GART); a BO
  already pinned elsewhere cannot move (``-EINVAL``, K-37); no room in GTT is ``-ENOMEM``.
  Whether the importer could do peer-to-peer does not matter: radeon never hands out VRAM.
* ``detach`` is ``drm_gem_map_detach`` → ``radeon_gem_prime_unpin``: one pin dropped.
* ``map_dma_buf`` is ``drm_gem_map_dma_buf`` → ``radeon_gem_prime_get_sg_table``: the BO's
  TTM pages as a page sg_table (``drm_prime_pages_to_sg``), DMA-mapped for the importer.

So a buffer stays pinned in system memory for as long as anything is attached: a NIC that
registers it reads host DRAM, never the GPU's memory, and the pin counts against GTT (not
VRAM: radeon registers no dmem region).

Not modelled: userptr BOs (``radeon_bo_pin`` refuses them, ``-EPERM``), the BO's
``prime_shared_count``, the GART aperture's address space.
"""

from __future__ import annotations

from typing import Unpack

from pinlab.drivers.base import ImportPath
from pinlab.drivers.gem_ttm import (
    TtmGemBuffer,
    TtmGemExporter,
    TtmOptions,
    domain_names,
    domain_sizes,
)
from pinlab.kernel.dma_buf import DmaBuf, DmaBufAttachment, DmaDataDirection, SgTable
from pinlab.kernel.errno import Errno, err
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci import PciDev
from pinlab.kernel.ttm import (
    TtmBufferObject,
    TtmMemType,
    TtmPlace,
    TtmPlacement,
    ttm_bo_pin,
    ttm_bo_unpin,
    ttm_bo_validate,
)
from pinlab.units import GiB

__all__ = ["RadeonBo", "RadeonDevice"]

_GTT = (TtmPlace(TtmMemType.TT),)


class RadeonBo(TtmGemBuffer):
    """``struct radeon_bo``: a TTM BO with the domains its creator allowed."""

    __slots__ = ()


class RadeonDevice(TtmGemExporter[RadeonBo]):
    """A radeon-driven discrete GPU: VRAM, GTT and system memory under TTM; a static exporter
    that pins every attached buffer in GTT (see the module docstring)."""

    pin_policy = "pin in GTT at attach, for every importer (static exporter, never P2P)"
    exp_name = "radeon"
    has_display = True  # radeon_modeset_init: its display block is a KMS device
    notifies_moves = False
    default_sizes = domain_sizes(vram=2 * GiB, gtt=1 * GiB, system=16 * GiB)
    domain_aliases = domain_names(vram=("vram",), tt=("gtt", "tt"), system=("system", "cpu"))

    def __init__(self, kernel: Kernel, pdev: PciDev, **options: Unpack[TtmOptions]) -> None:
        super().__init__(kernel, pdev, **options)
        self.ops = self.dma_buf_ops(detach=self._detach)

    def checklist_items(self, path: ImportPath, *, by_pin: bool, refused: bool) -> tuple[str, ...]:
        """The static-exporter rules: K-6 (not dynamic: no pin op), K-37 (a pinned BO does not
        move)."""
        return ("K-6", "K-37")

    def _new_buffer(self, tbo: TtmBufferObject, placements: TtmPlacement) -> RadeonBo:
        return RadeonBo(self, tbo, placements)

    # -- drm_gem_prime_dmabuf_ops ------------------------------------------------------------
    def _attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``drm_gem_map_attach`` → ``radeon_gem_prime_pin``: pin in GTT (moving it there
        first); ``-EINVAL`` for a BO pinned outside GTT, ``-ENOMEM`` when GTT is full."""
        bo = self.buffer_of(dmabuf)
        tbo = bo.tbo
        with tbo.resv:  # radeon_bo_reserve
            if bo.pinned and tbo.mem_type is not TtmMemType.TT:
                raise err(
                    Errno.EINVAL,
                    "radeon_bo_pin",
                    f"{bo.name} is pinned in {tbo.mem_type}, cannot move to GTT",
                )
            ttm_bo_validate(tbo, _GTT)
            ttm_bo_pin(tbo)

    def _detach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``drm_gem_map_detach`` → ``radeon_gem_prime_unpin``: drop the attach's pin."""
        tbo = self.buffer_of(dmabuf).tbo
        with tbo.resv:
            ttm_bo_unpin(tbo)

    def _map(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        """``drm_gem_map_dma_buf`` → ``radeon_gem_prime_get_sg_table``: the pinned GTT pages
        (``-EBUSY`` when DMA-mapping them for the importer fails)."""
        bo = self.buffer_of(attach.dmabuf)
        if bo.mem_type is not TtmMemType.TT:
            raise err(Errno.EINVAL, "drm_gem_map_dma_buf", f"{bo.name} is not in GTT")
        if self.dma_map_fails(attach.dev):
            raise err(Errno.EBUSY, "drm_gem_map_dma_buf", f"dma_map_sgtable for {attach.dev}")
        return bo.sg_table()
