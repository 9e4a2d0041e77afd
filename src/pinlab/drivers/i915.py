"""i915-like exporter (drivers/gpu/drm/i915/gem/i915_gem_dmabuf.c; ``kernel-semantics.md``
§7.4, K-54).

**Pin policy -- migrate to system memory at attach, pin the pages until detach; no P2P.**
i915 is a *static* exporter: it has no pin/unpin ops, so the dma-buf core never pins for it
(``dma_buf_pin`` is a no-op, K-20) and no importer is ever told about a move. Instead every
attachment pins, in the exporter's own ``attach``:

* ``i915_gem_dmabuf_attach``: an object whose placements exclude system memory (SMEM) -- an
  LMEM-only object -- cannot be shared: ``-EOPNOTSUPP`` (K-54). Otherwise, under the object
  lock, migrate it to SMEM (a copy job whose fence goes into the resv as KERNEL), **wait for the
  migration** (``i915_gem_object_wait_migration``, uninterruptible; the kernel's fence waiter
  receives the fence), then **pin its pages** (``i915_gem_object_pin_pages``, modelled as a TTM
  pin, so TTM never evicts the object while it is attached);
* ``i915_gem_dmabuf_detach``: unpin the pages;
* ``map_dma_buf``: a page-backed sg_table of the SMEM pages. Device-local memory is never
  exported for peer access: every importer, P2P-capable or not, gets system memory.

This is the stability camp's answer taken to its end: sharing a buffer always moves it out of
device memory, and the cost is paid at attach time rather than at pin time. An attachment pins
for its whole life, however long the importer keeps it.

Memory: LMEM (``TtmMemType.VRAM``, ``location == "vram"``; ``lmem_size=0`` models an
integrated GPU without LMEM) and SMEM (``TtmMemType.SYSTEM``, ``location == "system"``);
LMEM eviction goes to SMEM. ``create_buffer`` domains are the object's placement list, as
passed with ``I915_GEM_CREATE_EXT_MEMORY_REGIONS``: ``"vram"`` (alias ``"lmem"``: LMEM only,
never shareable), ``"system"`` (alias ``"smem"``) or ``"vram|system"``. i915 has no dmem
cgroup support, so its LMEM is not a dmem region.
"""

from __future__ import annotations

from typing import Self, Unpack

from pinlab.drivers.base import ExporterSpec, ImportPath, constructor_options, register_exporter
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
from pinlab.kernel.resv import DmaResvUsage
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


class I915Object(TtmGemBuffer):
    """``struct drm_i915_gem_object`` backed by TTM; ``attach_pins`` counts the page pins
    its dma-buf attachments hold."""

    __slots__ = ("attach_pins",)

    def __init__(self, owner: I915Device, tbo: TtmBufferObject, placements: TtmPlacement) -> None:
        super().__init__(owner, tbo, placements)
        self.attach_pins = 0


@register_exporter("i915")
class I915Device(TtmGemExporter[I915Object]):
    """One i915-like GPU: LMEM (discrete parts) and SMEM."""

    pin_policy = (
        "static: attach migrates to system memory and pins the pages until detach; "
        "no P2P; -EOPNOTSUPP for LMEM-only objects"
    )
    exp_name = "i915"
    has_display = True
    shareable_domain = "vram|system"
    default_sizes = domain_sizes(vram=16 * GiB, system=64 * GiB)
    domain_aliases = domain_names(vram=("vram", "lmem"), system=("system", "smem"))
    notifies_moves = False
    evict_to = (TtmPlace(TtmMemType.SYSTEM),)

    def __init__(
        self,
        kernel: Kernel,
        pdev: PciDev,
        *,
        lmem_size: int | None = None,
        **options: Unpack[TtmOptions],
    ) -> None:
        """``lmem_size`` is i915's name for the device memory (``vram_size``)."""
        if lmem_size is not None:
            options["vram_size"] = lmem_size
        super().__init__(kernel, pdev, **options)
        self.ops = self.dma_buf_ops(detach=self._detach)

    @classmethod
    def from_spec(cls, kernel: Kernel, pdev: PciDev, spec: ExporterSpec) -> Self:
        """``lmem_size`` = the spec's ``memory``, ``system_size`` when set; i915 has no GTT
        domain of its own."""
        options = constructor_options(
            spec.driver_options, lmem_size=spec.memory, system_size=spec.system
        )
        return cls(kernel, pdev, name=spec.name, **options)

    def checklist_items(self, path: ImportPath, *, by_pin: bool, refused: bool) -> tuple[str, ...]:
        """K-54: every attachment migrates to SMEM and pins there."""
        return ("K-54",)

    def _new_buffer(self, tbo: TtmBufferObject, placements: TtmPlacement) -> I915Object:
        return I915Object(self, tbo, placements)

    def _unpin_bo(self, buf: I915Object) -> None:
        ttm_bo_unpin(buf.tbo)
        if buf.attach_pins:
            buf.attach_pins -= 1

    # -- dma_buf_ops -----------------------------------------------------------------------
    def _attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``i915_gem_dmabuf_attach`` (K-54): ``-EOPNOTSUPP`` unless the object may live in
        SMEM; else migrate there, wait for the migration and pin the pages."""
        obj = self.buffer_of(dmabuf)
        if not obj.can_migrate(TtmMemType.SYSTEM):
            raise err(
                Errno.EOPNOTSUPP, "i915_gem_dmabuf_attach", f"{obj.name} cannot migrate to SMEM"
            )
        tbo = obj.tbo
        with tbo.resv:  # i915_gem_object_lock: attach runs without the resv (§2.3)
            ttm_bo_validate(tbo, (TtmPlace(TtmMemType.SYSTEM),))  # i915_gem_object_migrate
            ret = tbo.resv.wait_timeout(DmaResvUsage.KERNEL, False)  # wait_migration
            if ret < 0:
                raise err(Errno(-ret), "i915_gem_dmabuf_attach", "waiting for the migration")
            ttm_bo_pin(tbo)  # i915_gem_object_pin_pages
            obj.attach_pins += 1
        attach.priv = obj

    def _detach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``i915_gem_dmabuf_detach``: unpin the pages the attach pinned."""
        obj = self.buffer_of(dmabuf)
        with obj.tbo.resv:
            self._unpin_bo(obj)
        attach.priv = None

    def _map(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        """``i915_gem_map_dma_buf``: the pinned SMEM pages, page-backed, never P2P."""
        obj = self.buffer_of(attach.dmabuf)
        tbo = obj.tbo
        res = tbo.resource
        if res is None or res.mem_type is not TtmMemType.SYSTEM or not tbo.pin_count:
            raise err(Errno.EINVAL, "i915_gem_map_dma_buf", f"{obj.name} has no pinned pages")
        return obj.sg_table()
