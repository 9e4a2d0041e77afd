"""amdgpu-like exporter and importer (drivers/gpu/drm/amd/amdgpu/amdgpu_dma_buf.c,
amdgpu_object.c; ``kernel-semantics.md`` §7.1, K-38, K-48..K-51, K-63, K-76..K-80).

**Pin policy -- migrate on pin, VRAM only when everyone can do P2P.** A general-purpose GPU
must stay free to move buffers, so its dma-buf pin chooses where to pin:

* presets 5.16-6.14: always GTT -- pinning an exported VRAM buffer migrates it to system
  memory (the performance camp's complaint);
* 6.16: VRAM when ``CONFIG_DMABUF_MOVE_NOTIFY`` is on and every attachment present at pin time
  has peer2peer, else GTT (commit f5e7fabd1f5c);
* 7.1: VRAM when every attachment has peer2peer (the MN condition is gone).

Attach never fails for P2P reasons: an importer the PCI topology cannot reach (negative
P2PDMA distance) just loses ``peer2peer``. A move of an exported BO out of a non-SYSTEM
placement notifies importers first.

VRAM pins need CPU-visible VRAM (``CPU_ACCESS_REQUIRED``); pinlab models VRAM as one range
without the visible/invisible split, so the BAR size does not yet bound VRAM pins.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

from pinlab.drivers.base import DeviceBuffer, ImportPath, register_exporter
from pinlab.drivers.gem_ttm import (
    GemTtmFuncs,
    TtmGemBuffer,
    TtmGemExporter,
    TtmOptions,
    domain_names,
    domain_sizes,
)
from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaBufAttachOps,
    DmaDataDirection,
    SgTable,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_map_attachment,
    dma_buf_pin,
    dma_buf_put,
    dma_buf_unmap_attachment,
    dma_buf_unpin,
    get_dma_buf,
)
from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.p2pdma import pci_p2pdma_distance
from pinlab.kernel.pci import PciDev, find_parent_pci_dev
from pinlab.kernel.profile import VramPinRule
from pinlab.kernel.resv import DmaResv, DmaResvUsage
from pinlab.kernel.ttm import (
    TtmBoType,
    TtmBufferObject,
    TtmMemType,
    TtmPlace,
    TtmPlacement,
    TtmPlFlag,
    TtmResource,
    ttm_bo_clear,
    ttm_bo_init_reserved,
    ttm_bo_pin,
    ttm_bo_release,
    ttm_bo_unpin,
    ttm_bo_validate,
)
from pinlab.units import GiB


class AmdgpuDomain(enum.IntFlag):
    """``AMDGPU_GEM_DOMAIN_*``."""

    NONE = 0
    CPU = 0x1
    GTT = 0x2
    VRAM = 0x4


class AmdgpuCreate(enum.IntFlag):
    """``AMDGPU_GEM_CREATE_*`` flags pinlab uses."""

    NONE = 0
    CPU_ACCESS_REQUIRED = 1 << 0
    VRAM_CLEARED = 1 << 3
    VRAM_CONTIGUOUS = 1 << 5
    GFX12_DCC = 1 << 16


_DOMAIN_OF_MEM = {
    TtmMemType.VRAM: AmdgpuDomain.VRAM,
    TtmMemType.TT: AmdgpuDomain.GTT,
    TtmMemType.SYSTEM: AmdgpuDomain.CPU,
}


@functools.cache
def _placement_from_domain(domain: AmdgpuDomain, flags: AmdgpuCreate) -> TtmPlacement:
    """The body of ``amdgpu_bo_placement_from_domain``: a placement is immutable (a tuple of
    frozen places) and depends on nothing but its two arguments, so each pair is built once
    -- every validation of every BO asks for one."""
    places: list[TtmPlace] = []
    if AmdgpuDomain.VRAM in domain:
        contig = TtmPlFlag.CONTIGUOUS if AmdgpuCreate.VRAM_CONTIGUOUS in flags else TtmPlFlag.NONE
        places.append(TtmPlace(TtmMemType.VRAM, contig))
    if AmdgpuDomain.GTT in domain:
        places.append(TtmPlace(TtmMemType.TT))
    if AmdgpuDomain.CPU in domain:
        places.append(TtmPlace(TtmMemType.SYSTEM))
    return tuple(places)


class AmdgpuBo(TtmGemBuffer):
    """``struct amdgpu_bo``: a GEM BO plus its domains and creation flags. A VRAM-only BO
    may still fall back to GTT when evicted (``amdgpu_bo_create``), so its allowed domains
    include GTT."""

    __slots__ = ("adev", "allowed_domains", "flags", "import_sgt", "preferred_domains", "userptr")

    def __init__(
        self,
        adev: AmdgpuDevice,
        tbo: TtmBufferObject,
        domain: AmdgpuDomain,
        flags: AmdgpuCreate,
    ) -> None:
        allowed = domain | AmdgpuDomain.GTT if domain == AmdgpuDomain.VRAM else domain
        super().__init__(adev, tbo, adev.placement_from_domain(allowed, flags))
        self.adev = adev
        self.preferred_domains = domain
        self.allowed_domains = allowed
        self.flags = flags
        self.userptr = False
        self.import_sgt: SgTable | None = None

    def __repr__(self) -> str:
        return f"<amdgpu_bo {self.name} {self.size:#x} in {self.location} pin={self.tbo.pin_count}>"


class AmdgpuTtmFuncs(GemTtmFuncs):
    """amdgpu's TTM callbacks: eviction targets (TtmDeviceFuncs defaults, K-63) and
    ``amdgpu_bo_move_notify`` (K-38, K-80): an import losing its backing is unmapped, an
    export moving out of a non-SYSTEM placement notifies its importers."""

    def move_notify(self, bo: TtmBufferObject, evict: bool, new_res: TtmResource | None) -> None:
        abo = bo.driver_priv
        if isinstance(abo, AmdgpuBo) and abo.import_sgt is not None:
            # an import losing its backing: unpopulate, i.e. unmap the attachment (K-80)
            attach = bo.import_attach
            assert isinstance(attach, DmaBufAttachment)
            dma_buf_unmap_attachment(attach, abo.import_sgt, DmaDataDirection.BIDIRECTIONAL)
            abo.import_sgt = None
        super().move_notify(bo, evict, new_res)


@register_exporter("amdgpu")
class AmdgpuDevice(TtmGemExporter[AmdgpuBo]):
    """One amdgpu-like GPU: VRAM, a GTT window and system memory under TTM."""

    pin_policy = (
        "migrate on pin: GTT (<=6.15); VRAM only if every attachment is P2P "
        "(6.16: and MOVE_NOTIFY on; 7.1)"
    )
    exp_name = "amdgpu"
    imports_dmabufs = True
    has_display = True
    dmem_region_name = "vram"
    default_sizes = domain_sizes(vram=16 * GiB, gtt=16 * GiB, system=64 * GiB)
    domain_aliases = domain_names(vram=("vram",), tt=("gtt", "tt"), system=("system", "cpu"))

    def __init__(
        self,
        kernel: Kernel,
        pdev: PciDev,
        *,
        gfx_version: tuple[int, int] = (11, 0),
        xgmi_peers: tuple[PciDev, ...] = (),
        **options: Unpack[TtmOptions],
    ) -> None:
        super().__init__(kernel, pdev, **options)
        self.gfx_version = gfx_version
        self.xgmi_peers = set(xgmi_peers)
        self.runtime_pm_active = True
        self.runtime_pm_refs = 0
        self.vram_pin_size = 0
        self.gart_pin_size = 0
        self.ops = self.dma_buf_ops(detach=self._detach, pin=self._pin, unpin=self._unpin)
        self.import_ops = DmaBufAttachOps(
            allow_peer2peer=True, move_notify=self._import_move_notify
        )

    def _ttm_funcs(self) -> AmdgpuTtmFuncs:
        return AmdgpuTtmFuncs(self)

    def checklist_items(self, path: ImportPath, *, by_pin: bool, refused: bool) -> tuple[str, ...]:
        """K-77 (a dynamic importer's map), K-48 (attach clears peer2peer), then K-49 (pin)
        or K-51 (unpinned map)."""
        items = ["K-77"] if path is ImportPath.DYNAMIC else []
        if path is not ImportPath.STATIC:
            items.append("K-48")
        items.append("K-49" if by_pin else "K-51")
        return tuple(items)

    # -- BOs -------------------------------------------------------------------------------
    def placement_from_domain(
        self, domain: AmdgpuDomain, flags: AmdgpuCreate = AmdgpuCreate.NONE
    ) -> TtmPlacement:
        """``amdgpu_bo_placement_from_domain``: VRAM before GTT before CPU."""
        return _placement_from_domain(domain, flags)

    def amdgpu_bo_create(
        self,
        size: int,
        domain: AmdgpuDomain,
        flags: AmdgpuCreate = AmdgpuCreate.NONE,
        *,
        bo_type: TtmBoType = TtmBoType.DEVICE,
        name: str = "",
        resv: object = None,
    ) -> AmdgpuBo:
        """``amdgpu_bo_create``: a BO validated into ``domain`` (``-ENOMEM`` when nothing fits).

        ``VRAM_CLEARED`` BOs that land in VRAM get a clear job (a KERNEL fence, K-64).
        """
        shared = resv if isinstance(resv, DmaResv) else None
        if shared is not None:
            shared.lock()
        try:
            tbo = ttm_bo_init_reserved(
                self.bdev,
                size,
                self.placement_from_domain(domain, flags),
                bo_type,
                resv=shared,
                name=name,
            )
            abo = AmdgpuBo(self, tbo, domain, flags)
            if flags & AmdgpuCreate.VRAM_CLEARED and tbo.mem_type is TtmMemType.VRAM:
                ttm_bo_clear(tbo)
        finally:
            if shared is not None:
                shared.unlock()
        if shared is None:
            tbo.resv.unlock()
        return abo

    def create_buffer(self, size: int, domain: str = "vram", *, name: str = "") -> AmdgpuBo:
        """``amdgpu_gem_create_ioctl``: ``domain`` names the preferred domains (``"vram"``,
        ``"gtt"``, ``"system"``/``"cpu"`` or several joined with ``|``); VRAM is cleared."""
        mask = AmdgpuDomain.NONE
        for mem in self.parse_domain(domain):
            mask |= _DOMAIN_OF_MEM[mem]
        return self.amdgpu_bo_create(
            self.gem_size(size), mask, AmdgpuCreate.VRAM_CLEARED, name=name
        )

    def amdgpu_bo_pin(self, abo: AmdgpuBo, domain: AmdgpuDomain) -> None:
        """``amdgpu_bo_pin`` (K-50, K-79). Caller holds the resv.

        userptr → ``-EPERM``; an import pins only in GTT (else ``-EINVAL``) and forwards
        ``dma_buf_pin`` on the first pin; an already pinned BO outside ``domain`` →
        ``-EINVAL``, otherwise one more pin without moving; else validate (``-ENOMEM``
        possible) and pin.
        """
        tbo = abo.tbo
        if abo.userptr:
            raise err(Errno.EPERM, "amdgpu_bo_pin", "userptr BO")
        if abo.preferred_domains & domain:
            domain &= abo.preferred_domains
        if abo.is_import:
            if not domain & AmdgpuDomain.GTT:
                raise err(Errno.EINVAL, "amdgpu_bo_pin", "imported BO can only be pinned in GTT")
            domain = AmdgpuDomain.GTT
        if tbo.pin_count:
            mem = tbo.mem_type
            if mem is None or not _DOMAIN_OF_MEM[mem] & domain:
                raise err(
                    Errno.EINVAL, "amdgpu_bo_pin", f"pinned in {mem} but {domain!r} requested"
                )
            ttm_bo_pin(tbo)
            return
        if abo.is_import:
            attach = tbo.import_attach
            assert isinstance(attach, DmaBufAttachment)
            dma_buf_pin(attach)
        try:
            ttm_bo_validate(tbo, self.placement_from_domain(domain, abo.flags))
        except KernelError:
            if abo.is_import:
                attach = tbo.import_attach
                assert isinstance(attach, DmaBufAttachment)
                dma_buf_unpin(attach)
            raise
        ttm_bo_pin(tbo)
        if tbo.mem_type is TtmMemType.VRAM:
            self.vram_pin_size += tbo.size
        elif tbo.mem_type is TtmMemType.TT:
            self.gart_pin_size += tbo.size

    def amdgpu_bo_unpin(self, abo: AmdgpuBo) -> None:
        """``amdgpu_bo_unpin``: one count down; on the last, forward ``dma_buf_unpin`` for an
        import and drop the pin statistics (K-79)."""
        tbo = abo.tbo
        was_pinned = tbo.pin_count > 0
        ttm_bo_unpin(tbo)  # WARNs on underflow (K-59)
        if tbo.pin_count or not was_pinned:
            return
        if abo.is_import:
            attach = tbo.import_attach
            assert isinstance(attach, DmaBufAttachment)
            dma_buf_unpin(attach)
        if tbo.mem_type is TtmMemType.VRAM:
            self.vram_pin_size -= tbo.size
        elif tbo.mem_type is TtmMemType.TT:
            self.gart_pin_size -= tbo.size

    def _unpin_bo(self, buf: AmdgpuBo) -> None:
        self.amdgpu_bo_unpin(buf)

    # -- export ----------------------------------------------------------------------------
    def export(self, buf: DeviceBuffer) -> DmaBuf:
        """``amdgpu_gem_prime_export``: ``-EPERM`` for a userptr BO, else the GEM export
        sharing the BO's resv with the dma-buf."""
        abo = self._own(buf)
        if abo.userptr:
            raise err(Errno.EPERM, "amdgpu_gem_prime_export", "userptr BO")
        return super().export(abo)

    def _xgmi_reachable(self, dev: Device) -> bool:
        pdev = find_parent_pci_dev(dev)
        return pdev is not None and pdev in self.xgmi_peers

    def _attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``amdgpu_dma_buf_attach`` (K-48): clear peer2peer for GFX12 DCC BOs, for importers
        the P2PDMA distance rejects (unless XGMI-reachable) and (7.1) while runtime PM is
        suspended. Never fails for P2P reasons."""
        abo = self.buffer_of(dmabuf)
        if self.gfx_version >= (12, 0) and abo.flags & AmdgpuCreate.GFX12_DCC:
            attach.peer2peer = False
        if not self._xgmi_reachable(attach.dev) and pci_p2pdma_distance(self.pdev, attach.dev) < 0:
            attach.peer2peer = False
        if self.kernel.profile.amdgpu_p2p_requires_runtime_pm:
            if not self.runtime_pm_active:
                attach.peer2peer = False
            self.runtime_pm_refs += 1

    def _detach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        if self.kernel.profile.amdgpu_p2p_requires_runtime_pm:
            self.runtime_pm_refs -= 1

    def pin_domains(self, dmabuf: DmaBuf) -> AmdgpuDomain:
        """Where ``amdgpu_dma_buf_pin`` may pin under this profile (K-49)."""
        abo = self.buffer_of(dmabuf)
        profile = self.kernel.profile
        rule = profile.amdgpu_vram_pin
        if rule is VramPinRule.NEVER:
            return AmdgpuDomain.GTT
        domains = abo.allowed_domains
        if rule is VramPinRule.IF_P2P_AND_MN and not profile.move_notify:
            domains &= ~AmdgpuDomain.VRAM
        if any(not a.peer2peer for a in dmabuf.attachments):
            domains &= ~AmdgpuDomain.VRAM
        return domains

    def _pin(self, attach: DmaBufAttachment) -> None:
        """``amdgpu_dma_buf_pin`` (K-49): choose the domains, then ``amdgpu_bo_pin``."""
        dmabuf = attach.dmabuf
        abo = self.buffer_of(dmabuf)
        domains = self.pin_domains(dmabuf)
        if domains & AmdgpuDomain.VRAM:
            abo.flags |= AmdgpuCreate.CPU_ACCESS_REQUIRED
        if not domains:
            self.kernel.warn("amdgpu_dma_buf_pin", "!domains")
            raise err(Errno.EINVAL, "amdgpu_dma_buf_pin", "no domain left to pin in")
        self.amdgpu_bo_pin(abo, domains)

    def _map(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        """``amdgpu_dma_buf_map`` (K-51, K-78): an unpinned BO is validated into GTT, or
        GTT|VRAM for a P2P attachment of a VRAM-preferring BO; then a page sg_table for GTT,
        a page-less P2P table for VRAM, ``-EINVAL`` for anything else."""
        dmabuf = attach.dmabuf
        abo = self.buffer_of(dmabuf)
        tbo = abo.tbo
        if not tbo.pin_count:
            domains = AmdgpuDomain.GTT
            if abo.preferred_domains & AmdgpuDomain.VRAM and attach.peer2peer:
                abo.flags |= AmdgpuCreate.CPU_ACCESS_REQUIRED
                domains |= AmdgpuDomain.VRAM
            ttm_bo_validate(tbo, self.placement_from_domain(domains, abo.flags))
        if tbo.mem_type is TtmMemType.VRAM and self._xgmi_reachable(attach.dev):
            self.kernel.warn("amdgpu_dma_buf_map", "VRAM sgt for an XGMI importer")
            raise err(Errno.EINVAL, "amdgpu_dma_buf_map", "XGMI importer")
        return self.map_backing(abo, attach, "amdgpu_dma_buf_map")

    # -- import ----------------------------------------------------------------------------
    def prime_import(self, dmabuf: DmaBuf) -> AmdgpuBo:
        """``amdgpu_gem_prime_import``: our own export comes back as the same BO with one more
        GEM reference (``drm_gem_object_get``; the dma-buf's file count is not raised, as the
        driver's comment says), dropped by :meth:`release_import`; anything else becomes an
        sg BO sharing the dma-buf's resv, attached dynamically with allow_peer2peer (K-79)."""
        priv = dmabuf.priv
        if dmabuf.ops is self.ops and isinstance(priv, AmdgpuBo) and priv.owner is self:
            priv.refs += 1
            return priv
        tbo = TtmBufferObject(self.bdev, dmabuf.size, TtmBoType.SG, resv=dmabuf.resv)
        abo = AmdgpuBo(self, tbo, AmdgpuDomain.GTT, AmdgpuCreate.NONE)
        get_dma_buf(dmabuf)
        try:
            tbo.import_attach = dma_buf_dynamic_attach(dmabuf, self.dev, self.import_ops, abo)
        except KernelError:
            dma_buf_put(dmabuf)
            raise
        return abo

    def import_bind(self, abo: AmdgpuBo) -> SgTable:
        """Make an import usable: validate into GTT and map the attachment
        (``amdgpu_ttm_backend_bind`` of an sg BO). Caller holds the resv."""
        attach = abo.tbo.import_attach
        assert isinstance(attach, DmaBufAttachment)
        ttm_bo_validate(abo.tbo, (TtmPlace(TtmMemType.TT),))
        if abo.import_sgt is None:
            abo.import_sgt = dma_buf_map_attachment(attach, DmaDataDirection.BIDIRECTIONAL)
        return abo.import_sgt

    def _import_move_notify(self, attach: DmaBufAttachment) -> None:
        """``amdgpu_dma_buf_move_notify`` (K-80): gut the import BO (empty placement); it is
        re-mapped at next use."""
        abo = attach.importer_priv
        assert isinstance(abo, AmdgpuBo)
        if abo.tbo.resource is not None or abo.import_sgt is not None:
            if abo.import_sgt is not None and abo.tbo.resource is None:
                dma_buf_unmap_attachment(attach, abo.import_sgt, DmaDataDirection.BIDIRECTIONAL)
                abo.import_sgt = None
            ttm_bo_validate(abo.tbo, ())

    def release_import(self, abo: AmdgpuBo) -> None:
        """Close an imported BO: unmap, unpin what we pinned, detach, put."""
        attach = abo.tbo.import_attach
        assert isinstance(attach, DmaBufAttachment)
        dmabuf = attach.dmabuf
        with dmabuf.resv:
            while abo.tbo.pin_count:
                self.amdgpu_bo_unpin(abo)
            if abo.import_sgt is not None:
                dma_buf_unmap_attachment(attach, abo.import_sgt, DmaDataDirection.BIDIRECTIONAL)
                abo.import_sgt = None
        ttm_bo_release(abo.tbo)
        dma_buf_detach(dmabuf, attach)
        dma_buf_put(dmabuf)

    # -- command submission (amdgpu_cs.c) ------------------------------------------------------
    mm_stats: AmdgpuMoveStats | None = None
    """The command-submission move throttle (``adev->mm_stats``, one per device); None: moves
    back are not throttled (``cost-model.md`` §8 ``evict.moveback_throttle = off``)."""

    def set_move_throttle(self, max_rate: float) -> None:
        """``adev->mm_stats`` with ``log2_max_MBps`` = ``max_rate``: command submissions move
        BOs back into VRAM at most at that rate (:meth:`amdgpu_cs_get_threshold_for_moves`)."""
        self.mm_stats = AmdgpuMoveStats(max_rate)

    def amdgpu_cs_get_threshold_for_moves(self, now: float) -> float | None:
        """``amdgpu_cs_get_threshold_for_moves``: the bytes this submission may move, or None
        when moves are not throttled.

        The allowance accrues at the device's copy rate (``log2_max_MBps``) for the time since
        the last update, capped at 200 ms worth (``us_upper_bound``); a device that moved more
        than that is in debt (a negative allowance). ``now`` is the kernel's ``ktime_get()``,
        passed in because the driver reads no clock: userspace's entry point
        (:meth:`pinlab.uapi.process.Process.amdgpu_cs`) takes it from the machine's clock. The
        first submission finds the full 200 ms banked (the kernel's ``last_update_us`` starts
        at 0, longer ago than the cap since boot). Not modelled: the kernel's head start when
        VRAM is at least 1/8 or 128 MiB free (``min_us`` from a quarter of free VRAM) and the
        CPU-visible-VRAM threshold (pinlab has no visible/invisible split).
        """
        stats = self.mm_stats
        if stats is None:
            return None
        if stats.last_update is None:
            stats.accum = stats.max_rate * AMDGPU_CS_MOVE_WINDOW
            stats.last_update = now
        stats.accum = min(
            stats.accum + (now - stats.last_update) * stats.max_rate,
            stats.max_rate * AMDGPU_CS_MOVE_WINDOW,
        )
        stats.last_update = now
        return stats.accum

    def amdgpu_cs_report_moved_bytes(self, nbytes: int) -> None:
        """``amdgpu_cs_report_moved_bytes``: what a submission moved leaves the allowance."""
        if self.mm_stats is not None:
            self.mm_stats.accum -= nbytes

    def amdgpu_cs_ioctl(self, bos: Sequence[AmdgpuBo], now: float) -> list[DmaFence]:
        """``amdgpu_cs_ioctl`` → ``amdgpu_cs_parser_bos`` → ``amdgpu_cs_bo_validate`` for a
        submission whose BO list is ``bos``; returns the fences the job must wait for.

        An unpinned, non-imported BO away from a preferred VRAM domain (evicted to GTT or
        system memory, or without backing) is validated back into its preferred domains --
        a TTM move that notifies importers (K-38) and is a copy job with a KERNEL fence (K-64),
        and may evict others (K-62) -- when the move throttle allows it
        (:meth:`amdgpu_cs_get_threshold_for_moves`); otherwise, or when nothing fits, the job
        runs on the BO where it is (the kernel's fallback to ``allowed_domains``, which keeps
        a GTT placement). Pinned BOs never move (K-37, K-61). The job then waits for every
        BO's unsignalled KERNEL fences (a move or clear in flight, K-64), returned for the
        caller's timeline.

        The allowance is brought up to date only when a BO needs a move; the accrual is linear
        up to its cap, so this equals the kernel's update at every submission. pinlab lets a
        BO move only when the allowance covers all of it (the kernel starts a move while
        anything is left, which with one BO per submission would let any BO through on a
        positive balance) [assumption, ``cost-model.md`` §8 leaves the throttle open]; and it
        also moves exported BOs back, where the kernel leaves a BO with dma-buf attachments in
        its allowed domains.
        """
        allowance: float | None = None
        checked = False
        moved = 0
        for abo in bos:
            if abo.pinned or abo.is_import:
                continue
            loc = abo.location
            if not (loc is None or (loc != "vram" and abo.preferred_domains & AmdgpuDomain.VRAM)):
                continue
            if not checked:
                allowance, checked = self.amdgpu_cs_get_threshold_for_moves(now), True
            if allowance is None or allowance - moved >= abo.size or loc is None:
                before = self.bdev.moved_bytes
                try:
                    with abo.tbo.resv:
                        ttm_bo_validate(
                            abo.tbo, self.placement_from_domain(abo.preferred_domains, abo.flags)
                        )
                except KernelError:
                    pass  # no room: the job runs on the buffer where it is
                moved += self.bdev.moved_bytes - before
        if checked:
            self.amdgpu_cs_report_moved_bytes(moved)
        fences: list[DmaFence] = []
        for abo in bos:
            fences.extend(abo.tbo.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True))
        return fences


AMDGPU_CS_MOVE_WINDOW = 0.2
"""Seconds of copy bandwidth a device banks for command-submission moves (the 200 ms
``us_upper_bound`` of ``amdgpu_cs_get_threshold_for_moves``)."""


@dataclass(slots=True)
class AmdgpuMoveStats:
    """``adev->mm_stats`` as the move throttle uses it: ``max_rate`` (bytes/s, the driver's
    ``log2_max_MBps`` estimate of its copy throughput), the allowance ``accum`` in bytes (the
    kernel counts it in microseconds of ``max_rate``) and the time of its last update."""

    max_rate: float
    accum: float = 0.0
    last_update: float | None = None
