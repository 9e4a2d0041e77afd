"""NVIDIA-compute-like exporter: pin **in place** in device memory (``kernel-semantics.md``
§7 intro, ``cost-model.md`` §6.3, §9.2; ``seed-brief.md`` pillar 1).

**This is a model of a position, not of an upstream driver.** It is the performance camp's
(John Hubbard's) reading of ``dma_buf_pin`` made executable: a compute device pins where the
memory already is, so a P2P importer keeps the full device-memory bandwidth. NVIDIA's open
kernel driver does not export device memory through an upstream ``dma_buf_ops`` like this one;
in practice its P2P path is nvidia-peermem / the dma-buf export of the proprietary stack, whose
capacity is bounded by the GPU's BAR1 window. pinlab uses this model for the "pin-in-place"
arm of every comparison (the p4d-like preset of ``cost-model.md`` §9.2).

**Pin policy -- pin where it is, if the pinner can reach it.**

* ``pin`` on behalf of an attachment with ``peer2peer``, of a buffer created for device memory
  (``create_buffer`` domain including ``"vram"``): the BO stays in (or, if it was evicted,
  returns to) device memory (``TtmMemType.VRAM``, ``location == "vram"``) and is pinned
  there. Its bytes must fit the **BAR1 window**: ``bar1_size`` bytes (default: the whole device
  memory, the datacenter case of ``pin.bar1_bytes``; 256 MiB models a consumer part) bound the
  bytes pinned for P2P at any time; a pin that would exceed it fails with ``-ENOMEM``, as
  ``ibv_reg_mr`` does on a small-BAR1 GPU. The window is taken on a BO's first P2P pin in device
  memory and given back when its last pin goes.
* ``pin`` for an attachment without ``peer2peer`` (a static importer, a NIC the PCI topology
  cannot reach): migrate to system memory (TT, ``location == "gtt"``) and pin there -- or, with
  ``strict_p2p=True`` (a compute node that refuses anything but P2P), fail with ``-EINVAL``.
  Like amdgpu's VRAM BOs (whose allowed domains always include GTT), any buffer may be moved
  to TT this way, whatever domain it was created in. A P2P pin of a buffer created for
  system memory only (``"gtt"``) pins it in TT: the peer can use system pages too.
* a BO already pinned stays where it is: another pin adds a count if its memory suits the
  request (a P2P pinner is content with either place; a non-P2P pinner needs TT), else
  ``-EINVAL`` (a pinned BO cannot move, K-37).
* the decision looks only at the **pinning attachment** -- unlike amdgpu (every attachment
  present) -- which is exactly the "neutral ``dma_buf_pin``" the performance camp asked for.
  A later non-P2P importer of a BO pinned in device memory is refused (``-EINVAL``) instead of
  forcing a migration.

``map``: an unpinned BO is validated into its own device-memory/TT placements for a P2P
attachment (kept where it is when compatible) and into TT otherwise; then device memory → a
page-less P2P sg_table (``-EINVAL`` for an attachment without peer2peer: it cannot use BAR
addresses), TT → a page sg_table (``-EBUSY`` if DMA-mapping fails, see ``dma_map_fault``).
Moves of exported BOs out of device memory or TT notify dynamic importers first, as amdgpu's
do. Unpinned memory is evictable (device memory → TT → system) like any TTM device's.

Not modelled: BAR1 space used by *unpinned* dynamic P2P mappings (they are revocable through
``move_notify`` and are not charged to the window), BAR1 alignment (``pin.alignment``) and MIG
partitions.
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

_VRAM = (TtmPlace(TtmMemType.VRAM),)
_TT = (TtmPlace(TtmMemType.TT),)


class NvBo(TtmGemBuffer):
    """A device-memory allocation of the compute GPU; ``bar1`` = it holds BAR1 window space
    (pinned in device memory for P2P)."""

    __slots__ = ("bar1",)

    def __init__(
        self, owner: NvidiaComputeDevice, tbo: TtmBufferObject, placements: TtmPlacement
    ) -> None:
        super().__init__(owner, tbo, placements)
        self.bar1 = False


@register_exporter("nvidia-compute")
class NvidiaComputeDevice(TtmGemExporter[NvBo]):
    """A compute GPU (A100/H100-like) that pins in place for P2P importers (a model)."""

    pin_policy = (
        "pin in place: device memory for a P2P pinner (bounded by BAR1, else -ENOMEM); "
        "system memory (TT) otherwise, or -EINVAL with strict_p2p"
    )
    exp_name = "nvidia"
    dmem_region_name = "vram0"
    default_sizes = domain_sizes(vram=80 * GiB, gtt=64 * GiB, system=256 * GiB)
    domain_aliases = domain_names(vram=("vram", "hbm"), tt=("gtt", "tt"), system=("system", "cpu"))

    def __init__(
        self,
        kernel: Kernel,
        pdev: PciDev,
        *,
        bar1_size: int | None = None,
        strict_p2p: bool = False,
        **options: Unpack[TtmOptions],
    ) -> None:
        """``bar1_size`` defaults to the device memory (``pin.bar1_bytes``, datacenter part)."""
        if bar1_size is not None and bar1_size < 0:
            raise ValueError(f"bar1_size must be >= 0, got {bar1_size}")
        super().__init__(kernel, pdev, **options)
        vram = options.get("vram_size", self.default_sizes[TtmMemType.VRAM])
        self.bar1_size = vram if bar1_size is None else bar1_size
        self.bar1_used = 0
        self.strict_p2p = strict_p2p
        self.ops = self.dma_buf_ops(pin=self._pin, unpin=self._unpin)

    @classmethod
    def from_spec(cls, kernel: Kernel, pdev: PciDev, spec: ExporterSpec) -> Self:
        """As every TTM exporter, plus ``bar1_size`` = the spec's ``bar`` when set."""
        options = constructor_options(
            spec.driver_options,
            vram_size=spec.memory,
            gtt_size=spec.gtt,
            system_size=spec.system,
            bar1_size=spec.bar,
        )
        return cls(kernel, pdev, name=spec.name, **options)

    def checklist_items(self, path: ImportPath, *, by_pin: bool, refused: bool) -> tuple[str, ...]:
        """A position model: no upstream item."""
        return ("model",)

    def _new_buffer(self, tbo: TtmBufferObject, placements: TtmPlacement) -> NvBo:
        return NvBo(self, tbo, placements)

    @property
    def bar1_free(self) -> int:
        """BAR1 window bytes still available for P2P pins."""
        return self.bar1_size - self.bar1_used

    # -- pinning ---------------------------------------------------------------------------
    def pin_bo(self, bo: NvBo, p2p: bool) -> None:
        """Pin ``bo`` for a pinner that can (``p2p``) or cannot reach device memory. Resv
        held. See the module docstring for the policy."""
        tbo = bo.tbo
        fn = "nv_dma_buf_pin"
        if not p2p and self.strict_p2p:
            raise err(Errno.EINVAL, fn, "strict_p2p: only P2P importers may pin")
        if bo.pinned:
            mem = tbo.mem_type
            if mem is TtmMemType.TT or (p2p and mem is TtmMemType.VRAM):
                ttm_bo_pin(tbo)
                return
            raise err(Errno.EINVAL, fn, f"{bo.name} is pinned in {mem}, cannot migrate")
        if p2p and bo.can_migrate(TtmMemType.VRAM):
            if bo.size > self.bar1_free:
                raise err(
                    Errno.ENOMEM,
                    fn,
                    f"BAR1 exhausted: {bo.size:#x} bytes requested, "
                    f"{self.bar1_free:#x} of {self.bar1_size:#x} free",
                )
            ttm_bo_validate(tbo, _VRAM)
            ttm_bo_pin(tbo)
            self.bar1_used += bo.size
            bo.bar1 = True
            return
        ttm_bo_validate(tbo, _TT)
        ttm_bo_pin(tbo)

    def _unpin_bo(self, buf: NvBo) -> None:
        tbo = buf.tbo
        ttm_bo_unpin(tbo)
        if not tbo.pin_count and buf.bar1:
            self.bar1_used -= buf.size
            buf.bar1 = False

    # -- dma_buf_ops -----------------------------------------------------------------------
    def _attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """Clear peer2peer for an importer the PCI topology cannot reach. Never fails."""
        self.clear_unreachable_p2p(attach)

    def _pin(self, attach: DmaBufAttachment) -> None:
        self.pin_bo(self.buffer_of(attach.dmabuf), attach.peer2peer)

    def _map(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        bo = self.buffer_of(attach.dmabuf)
        tbo = bo.tbo
        fn = "nv_dma_buf_map"
        if not bo.pinned:
            plc: TtmPlacement = _TT
            if attach.peer2peer:
                plc = tuple(p for p in bo.placements if p.mem_type is not TtmMemType.SYSTEM) or _TT
            ttm_bo_validate(tbo, plc)
        if bo.mem_type is TtmMemType.VRAM and not attach.peer2peer:
            raise err(Errno.EINVAL, fn, f"{bo.name} is in device memory, importer not P2P")
        return self.map_backing(bo, attach, fn)
