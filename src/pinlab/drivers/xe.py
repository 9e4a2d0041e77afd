"""xe-like exporter (drivers/gpu/drm/xe/xe_dma_buf.c, xe_bo.c; ``kernel-semantics.md`` §7.3,
K-53, K-81).

**Pin policy -- migrate on pin into TT; refuse what cannot be reached.** Intel's discrete-GPU
driver, like amdgpu, keeps the freedom to move VRAM, so ``dma_buf_pin`` moves an exported BO to
TT (system pages mapped for the GPU) before pinning it. Two things set it apart:

* **attach can refuse.** ``xe_dma_buf_attach`` clears ``peer2peer`` for an importer the PCI
  topology cannot reach (``pci_p2pdma_distance(..., verbose=false) < 0``); if the attachment
  is then not P2P and the BO may not live in TT (its creator allowed VRAM only), the attach
  fails with ``-EOPNOTSUPP`` (K-53). Each successful attach holds a runtime-PM reference until
  detach;
* **where pin may put the BO follows the profile** (``KernelProfile.xe_vram_pin``): presets
  6.12-6.16 pin in TT only (the XE snapshot: "pinning in VRAM requires PIN accounting which is a
  to-do"); 6.19 keeps the BO where it is -- VRAM included -- when ``CONFIG_DMABUF_MOVE_NOTIFY``
  is on and every attachment is P2P, else TT (df636bf28366 "drm/xe/dma-buf: Allow pinning of
  p2p dma-buf", Thomas Hellström, in drm-xe-next-2025-10-20 towards 6.19, K-131); 7.1 drops the
  MN condition (the 2026 revoke series).

``xe_dma_buf_pin``: a BO that is already pinned outside TT (and not in VRAM where VRAM is
allowed) cannot move → ``-EINVAL`` ("Can't migrate pinned bo for dma-buf pin."); else
migrate to TT (``xe_bo_migrate``: ``-EINVAL`` if TT is not among its placements; TTM errors
such as ``-ENOMEM`` propagate) and pin.

``xe_dma_buf_map`` (K-81): not P2P and not migratable to TT → ``-EOPNOTSUPP``; an unpinned BO
migrates to TT for a non-P2P attachment or is validated in place for a P2P one; then TT → a page
sg_table (a DMA-mapping failure → ``-EBUSY``; see ``dma_map_fault``), VRAM → a page-less P2P
sg_table, anything else → ``-EINVAL``.

Moves of exported, non-imported BOs notify importers first (``xe_bo_move_notify``), including
moves out of SYSTEM. xe entered mainline after 5.16 (≈6.8): constructing an :class:`XeDevice`
under preset 5.16 raises ``ValueError``.

``create_buffer`` domains are the BO's placement mask, exactly as userspace passes it to
``DRM_IOCTL_XE_GEM_CREATE``: ``"vram"`` (VRAM only -- it can never reach a non-P2P importer),
``"system"`` (alias ``"tt"``/``"gtt"``: ``XE_BO_FLAG_SYSTEM``, placed in TT) or
``"vram|system"``. ``vm_private=True`` models a BO created for one VM (``bo->vm``), which
``xe_gem_prime_export`` refuses with ``-EPERM``. Not modelled: xe's importer side, CPU-access
migration (``begin_cpu_access``), multi-tile VRAM.
"""

from __future__ import annotations

from typing import Unpack

from pinlab.drivers.base import DeviceBuffer, ImportPath, register_exporter
from pinlab.drivers.gem_ttm import (
    TtmGemBuffer,
    TtmGemExporter,
    TtmOptions,
    domain_names,
    domain_sizes,
)
from pinlab.kernel.dma_buf import DmaBuf, DmaBufAttachment, DmaDataDirection, SgTable
from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci import PciDev
from pinlab.kernel.profile import KernelProfile, VramPinRule
from pinlab.kernel.range_alloc import PAGE_SIZE
from pinlab.kernel.ttm import (
    TtmBufferObject,
    TtmMemType,
    TtmPlace,
    TtmPlacement,
    ttm_bo_pin,
    ttm_bo_validate,
)
from pinlab.units import GiB


class XeBo(TtmGemBuffer):
    """``struct xe_bo``: a TTM BO with its placement mask; ``vm_private`` = ``bo->vm`` set."""

    __slots__ = ("vm_private",)

    def __init__(self, owner: XeDevice, tbo: TtmBufferObject, placements: TtmPlacement) -> None:
        super().__init__(owner, tbo, placements)
        self.vm_private = False


@register_exporter("xe")
class XeDevice(TtmGemExporter[XeBo]):
    """One xe-like discrete GPU: VRAM, TT and system memory under TTM."""

    pin_policy = (
        "migrate on pin: TT (6.19: VRAM if MOVE_NOTIFY and every attachment is P2P; 7.1: "
        "VRAM if every attachment is P2P); attach refuses non-P2P importers of VRAM-only "
        "BOs (-EOPNOTSUPP)"
    )
    exp_name = "xe"
    has_display = True
    shareable_domain = "vram|system"
    dmem_region_name = "vram0"
    notifies_moves_from_system = True
    default_sizes = domain_sizes(vram=16 * GiB, gtt=16 * GiB, system=64 * GiB)
    domain_aliases = domain_names(vram=("vram",), tt=("system", "tt", "gtt"))

    def __init__(self, kernel: Kernel, pdev: PciDev, **options: Unpack[TtmOptions]) -> None:
        profile = kernel.profile
        if not self.exists_in(profile):
            raise ValueError(
                f"the xe driver does not exist in kernel {profile.name} "
                "(it entered mainline in ≈6.8); choose preset 6.12 or later"
            )
        super().__init__(kernel, pdev, **options)
        self.runtime_pm_refs = 0
        self.ops = self.dma_buf_ops(detach=self._detach, pin=self._pin, unpin=self._unpin)

    @classmethod
    def exists_in(cls, profile: KernelProfile) -> bool:
        return profile.xe_available

    def checklist_items(self, path: ImportPath, *, by_pin: bool, refused: bool) -> tuple[str, ...]:
        """K-53 (pin) or K-81 (unpinned map); K-131 where a pin may stay in VRAM (6.19, 7.1)."""
        if not by_pin:
            return ("K-81",)
        if self.kernel.profile.xe_vram_pin is VramPinRule.NEVER:
            return ("K-53",)
        return ("K-53", "K-131")

    def _new_buffer(self, tbo: TtmBufferObject, placements: TtmPlacement) -> XeBo:
        return XeBo(self, tbo, placements)

    def gem_size(self, size: int) -> int:
        """``xe_gem_create_ioctl`` refuses a size that is not a multiple of ``PAGE_SIZE``
        (``-EINVAL``) rather than rounding it."""
        if size <= 0 or size % PAGE_SIZE:
            raise err(
                Errno.EINVAL,
                "xe_gem_create_ioctl",
                f"size {size:#x} is not a multiple of PAGE_SIZE",
            )
        return size

    def create_buffer(
        self, size: int, domain: str = "vram", *, name: str = "", vm_private: bool = False
    ) -> XeBo:
        """``xe_gem_create_ioctl``: a BO whose placements are exactly ``domain``."""
        bo = self.bo_create(size, self.parse_domain(domain), name=name)
        bo.vm_private = vm_private
        return bo

    def export(self, buf: DeviceBuffer) -> DmaBuf:
        """``xe_gem_prime_export``: ``-EPERM`` for a VM-private BO, else the GEM export."""
        bo = self._own(buf)
        if bo.vm_private:
            raise err(Errno.EPERM, "xe_gem_prime_export", f"{bo.name} is private to a VM")
        return super().export(bo)

    def _log(self, message: str) -> None:
        self.kernel.log(f"xe {self.pdev.name}: [drm:xe_dma_buf] {message}")

    # -- xe_bo helpers ---------------------------------------------------------------------
    def xe_bo_migrate(self, bo: XeBo, mem: TtmMemType) -> None:
        """``xe_bo_migrate``: ``-EINVAL`` unless ``mem`` is among the BO's placements; then
        validate into ``mem`` (no move if it is already there; a pinned BO that would have to
        move → ``-EINVAL``; no room → ``-ENOMEM``). Resv held."""
        if not bo.can_migrate(mem):
            raise err(Errno.EINVAL, "xe_bo_migrate", f"{bo.name} may not be placed in {mem}")
        ttm_bo_validate(bo.tbo, (TtmPlace(mem),))

    def xe_bo_validate(self, bo: XeBo) -> None:
        """``xe_bo_validate``: keep a compatible placement, else the first with room."""
        ttm_bo_validate(bo.tbo, bo.placements)

    def pin_allows_vram(self, dmabuf: DmaBuf) -> bool:
        """Whether ``xe_dma_buf_pin`` may leave the BO in VRAM under this profile (K-131):
        never in 6.12-6.16; (6.19) with MN on and (7.1) always, when every attachment present
        has peer2peer."""
        profile = self.kernel.profile
        rule = profile.xe_vram_pin
        if rule is VramPinRule.NEVER:
            return False
        if rule is VramPinRule.IF_P2P_AND_MN and not profile.move_notify:
            return False
        return all(a.peer2peer for a in dmabuf.attachments)

    # -- dma_buf_ops -----------------------------------------------------------------------
    def _attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``xe_dma_buf_attach`` (K-53): clear peer2peer for an unreachable importer; a
        non-P2P attachment of a BO that cannot migrate to TT → ``-EOPNOTSUPP``; else take a
        runtime-PM reference."""
        bo = self.buffer_of(dmabuf)
        self.clear_unreachable_p2p(attach)
        if not attach.peer2peer and not bo.can_migrate(TtmMemType.TT):
            raise err(Errno.EOPNOTSUPP, "xe_dma_buf_attach", f"{bo.name} cannot migrate to TT")
        self.runtime_pm_refs += 1

    def _detach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``xe_dma_buf_detach``: drop the runtime-PM reference."""
        self.runtime_pm_refs -= 1

    def _pin(self, attach: DmaBufAttachment) -> None:
        """``xe_dma_buf_pin`` (K-53): see the module docstring."""
        dmabuf = attach.dmabuf
        bo = self.buffer_of(dmabuf)
        allow_vram = self.pin_allows_vram(dmabuf)
        mem = bo.mem_type
        if bo.pinned and mem is not TtmMemType.TT and not (mem is TtmMemType.VRAM and allow_vram):
            self._log("Can't migrate pinned bo for dma-buf pin.")
            raise err(Errno.EINVAL, "xe_dma_buf_pin", f"{bo.name} is pinned in {mem}")
        try:
            if allow_vram:
                self.xe_bo_validate(bo)  # xe_bo_pin_external(bo, in_place=false)
            else:
                self.xe_bo_migrate(bo, TtmMemType.TT)
        except KernelError as e:
            if e.errno not in (Errno.EINTR, Errno.ERESTARTSYS):
                self._log(f"Failed migrating dma-buf to TT memory: {e.errno}")
            raise
        ttm_bo_pin(bo.tbo)  # xe_bo_pin_external

    def _map(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        """``xe_dma_buf_map`` (K-81): see the module docstring."""
        bo = self.buffer_of(attach.dmabuf)
        if not attach.peer2peer and not bo.can_migrate(TtmMemType.TT):
            raise err(Errno.EOPNOTSUPP, "xe_dma_buf_map", f"{bo.name} cannot migrate to TT")
        if not bo.pinned:
            if attach.peer2peer:
                self.xe_bo_validate(bo)
            else:
                self.xe_bo_migrate(bo, TtmMemType.TT)
        return self.map_backing(bo, attach, "xe_dma_buf_map")
