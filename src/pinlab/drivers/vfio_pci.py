"""vfio-pci's dma-buf exporter: PCI BAR ranges as dma-bufs (drivers/vfio/pci/vfio_pci_dmabuf.c,
v6.19; ``docs/semantics/kernel.md`` §13, K-98 … K-107, K-119, K-120).

Source: Leon Romanovsky's "[PATCH v7 00/11] vfio/pci: Allow MMIO regions to be exported through
dma-buf" (with Jason Gunthorpe and Vivek Kasireddy; 5d74781ebc86 "vfio/pci: Add dma-buf export
support for MMIO regions"), merged for v6.19; the 6.19-rc7 fix 61ceaf236115 "vfio: Prevent from
pinned DMABUF importers to attach to VFIO DMABUF" (2026-01-21); in 7.1 the revoke series' "vfio:
Wait for dma-buf invalidation to complete" and "vfio: Permit VFIO to work with pinned
importers" (v7, 2026-01-31).

**Pin policy -- nothing ever moves, so the only question is revocation.** A device assigned to
userspace (a VM, a DPDK-like driver) exports ranges of one of its BARs: MMIO without
``struct page``, at a fixed bus address. The buffer never migrates; what can happen is that
the device stops decoding memory (a config write clearing ``PCI_COMMAND_MEMORY``, a reset,
low-power entry) or goes away (the device fd's last close), and then every importer must stop
using the addresses. The exporter's rules follow the profile (``KernelProfile.vfio_dmabuf``):

* ``pin-refused`` (6.19 final, 7.0): a dynamic exporter whose ``pin`` returns ``-EOPNOTSUPP``
  and ``unpin`` does nothing (K-101) -- pinned importers (EFA, the default pinned umem) fail
  at ``dma_buf_pin``; with ``CONFIG_DMABUF_MOVE_NOTIFY=n`` even a dynamic importer's map fails,
  because the core pins for it (pin-on-map, K-26, K-102). A revoke is a plain
  ``dma_buf_move_notify`` under the resv;
* ``revocable-only`` (7.1): no pin op (a static exporter, ``dma_buf_pin`` is a no-op, K-20);
  attach refuses an importer that is not ``dma_buf_attach_revocable`` (K-100, K-119); each map
  takes a mapping reference, and a revoke waits -- without bound -- for every resv fence up to
  BOOKKEEP and for every importer to unmap (K-105). An importer whose callback does not unmap
  blocks it for good (:class:`~pinlab.kernel.errno.KernelHang`, K-120).

Attach (both): a static importer (no ``peer2peer``) → ``-EOPNOTSUPP``; a revoked buffer →
``-ENODEV``; the P2P distance is *not* checked -- an unreachable importer fails at map
(``dma_buf_phys_vec_to_sgt``: ``-EINVAL``, K-103). The ``iommufd`` importer never maps: it
takes the single physical range through :func:`vfio_pci_dma_buf_iommufd_map` (K-107).

Revoke points (K-104): clearing ``PCI_COMMAND_MEMORY`` revokes, setting it un-revokes;
``VFIO_DEVICE_RESET`` revokes, resets, and un-revokes if memory decoding is on; low-power entry
revokes and exit un-revokes; closing the device revokes for good (the buffer is orphaned: later
attaches and maps are ``-ENODEV``). ``next`` adds the RFC ioctl
``VFIO_DEVICE_PCI_DMABUF_REVOKE`` (Matt Evans, "[PATCH v2 0/9] vfio/pci: Add mmap() for
DMABUFs", 2026-05-27): a permanent revoke of one buffer.

Model-only: each revoke bumps the buffer's ``epoch``, so the stale-DMA detector reports an
access through a mapping made before it. BAR bus addresses are synthetic (derived from the
function's bus/devfn), only their ranges matter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

from pinlab.drivers.base import (
    BarBuffer,
    BufferSource,
    DeviceBuffer,
    ExporterDriver,
    ExporterSpec,
    ImportPath,
    RegionUsage,
    constructor_options,
    register_exporter,
)
from pinlab.kernel.dma_buf import (
    PAGE_SIZE,
    DmaBuf,
    DmaBufAttachment,
    DmaBufExportInfo,
    DmaDataDirection,
    SgTable,
    dma_buf_attach_revocable,
    dma_buf_export,
    dma_buf_fd,
    dma_buf_notify_move,
    dma_buf_put,
)
from pinlab.kernel.dma_buf_mapping import (
    DmaBufPhysVec,
    dma_buf_free_sgt,
    dma_buf_invalidate_and_wait,
    dma_buf_phys_vec_to_sgt,
    pcim_p2pdma_provider,
)
from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.file import O_CLOEXEC, O_RDWR, FdTable
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.limits import U64_MAX
from pinlab.kernel.pci import PCI_BAR_SPAN, PciDev, pci_resource_start
from pinlab.kernel.profile import KernelProfile, VfioDmabuf
from pinlab.units import MiB

VFIO_PCI_ROM_REGION_INDEX = 6
"""Region indices 0-5 are the BARs; 6 is the ROM (``enum vfio_pci_region_index``)."""
VFIO_DEVICE_FEATURE_PROBE = 1 << 16
VFIO_DEVICE_FEATURE_GET = 1 << 17
VFIO_DEVICE_FEATURE_SET = 1 << 18
DMA_IOVA_USE_SWIOTLB = 1 << 63
"""A total length with this bit set is refused: ``dma_iova_try_alloc`` would WARN on it."""


@dataclass(frozen=True, slots=True)
class VfioRegionDmaRange:
    """``struct vfio_region_dma_range``: ``[offset, offset + length)`` of the BAR."""

    offset: int
    length: int


class VfioPciDmaBuf(BarBuffer):
    """``struct vfio_pci_dma_buf``: one exported set of BAR ranges.

    ``vdev`` is None once the device closed (the buffer is orphaned); ``mappings`` is the
    mapping reference count minus the initial reference (7.1's ``kref``); ``revocations``
    counts revokes (the model's backing epoch); ``revoked_for_good`` is the RFC's permanent
    state (``next``).
    """

    __slots__ = (
        "bar",
        "dmabuf",
        "mappings",
        "name",
        "nr_ranges",
        "phys_vec",
        "provider",
        "revocations",
        "revoked",
        "revoked_for_good",
        "size",
        "vdev",
    )

    def __init__(
        self,
        vdev: VfioPciDevice,
        bar: int,
        phys_vec: tuple[DmaBufPhysVec, ...],
        provider: PciDev | None,
        size: int,
    ) -> None:
        self.vdev: VfioPciDevice | None = vdev
        self.bar = bar
        self.phys_vec = phys_vec
        self.nr_ranges = len(phys_vec)
        self.provider = provider
        self.size = size
        self.name = f"{vdev.name}:bar{bar}+{phys_vec[0].paddr - vdev.bar_start(bar):#x}"
        self.dmabuf: DmaBuf | None = None
        self.revoked = False
        self.revoked_for_good = False
        self.revocations = 0
        self.mappings = 0

    def __repr__(self) -> str:
        state = "revoked" if self.revoked else "usable"
        return f"<vfio_pci_dma_buf {self.name} {self.size:#x} {state}>"


@register_exporter("vfio-pci")
class VfioPciDevice(ExporterDriver):
    """One PCI function bound to vfio-pci, with its BARs (index → size in bytes).

    ``memory_enabled`` is ``PCI_COMMAND_MEMORY``; ``low_power`` the runtime-PM low-power state
    userspace entered; ``owner`` the pid whose device fd is open (one opener at a time, as a
    VFIO device fd is exclusive).
    """

    pin_policy = (
        "BAR MMIO never moves; 6.19: pin refused (-EOPNOTSUPP); 7.1: static, only "
        "revocable importers attach; revoked on memory-decode clear, reset, close"
    )
    exp_name = "vfio_pci_core"
    shareable_domain = "bar0"
    buffer_source = BufferSource.VFIO_BAR

    def __init__(
        self,
        kernel: Kernel,
        pdev: PciDev,
        *,
        bars: dict[int, int] | None = None,
        memory_bar: int = 0,
        name: str = "",
    ) -> None:
        """``bars`` defaults to one 256 MiB memory BAR at ``memory_bar`` (0)."""
        profile = kernel.profile
        if not self.exists_in(profile):
            raise ValueError(
                f"vfio-pci exports no dma-bufs in kernel {profile.name} "
                "(VFIO_DEVICE_FEATURE_DMA_BUF is in 6.19); choose preset 6.19 or later"
            )
        super().__init__(kernel, pdev, name or f"{self.driver_name}-{pdev.name}")
        layout = {memory_bar: 256 * MiB} if bars is None else dict(bars)
        for index, size in layout.items():
            if not 0 <= index < VFIO_PCI_ROM_REGION_INDEX:
                raise ValueError(f"BAR index {index} is not 0..5")
            if size < 0 or size >= PCI_BAR_SPAN or size % PAGE_SIZE:
                raise ValueError(f"BAR {index} size {size:#x} must be page-aligned, < 2 TiB")
        self.bars = layout
        self.memory_bar = memory_bar
        self.memory_enabled = True
        self.low_power = False
        self.owner: int | None = None
        self.registered = True  # the vfio_device registration (false once it goes away)
        self.dmabufs: list[VfioPciDmaBuf] = []
        self.resets = 0
        if profile.vfio_dmabuf is VfioDmabuf.PIN_REFUSED:
            self.ops = self.dma_buf_ops(pin=self._pin, unpin=self._unpin)
        else:
            self.ops = self.dma_buf_ops()

    @classmethod
    def exists_in(cls, profile: KernelProfile) -> bool:
        return profile.vfio_dmabuf is not VfioDmabuf.ABSENT

    @classmethod
    def from_spec(cls, kernel: Kernel, pdev: PciDev, spec: ExporterSpec) -> Self:
        """One memory BAR of the spec's ``bar`` size (else its ``memory``) at index
        ``memory_bar`` (a ``driver_options`` key, default 0)."""
        options = constructor_options(spec.driver_options)
        bar_index = options.pop("memory_bar", 0)
        if not isinstance(bar_index, int) or isinstance(bar_index, bool):
            raise ValueError(f"memory_bar must be a BAR index 0..5, not {bar_index!r}")
        size = spec.bar if spec.bar is not None else spec.memory
        return cls(
            kernel, pdev, bars={bar_index: size}, memory_bar=bar_index, name=spec.name, **options
        )

    def checklist_items(self, path: ImportPath, *, by_pin: bool, refused: bool) -> tuple[str, ...]:
        """K-100 (attach), K-101 (pin) and K-103 (map); K-102 for a dynamic importer pinned
        at map in 6.19; K-107 for iommufd's private interconnect."""
        items = ["K-100"]
        if path is ImportPath.PHYS:
            return ("K-100", "K-107")
        if path is not ImportPath.STATIC:
            items.append("K-101")
        if path is ImportPath.DYNAMIC and self.dynamic and not self.kernel.profile.move_notify:
            items.append("K-102")
        items.append("K-103")
        return tuple(items)

    @classmethod
    def domain_error(cls, domain: str) -> str | None:
        return "a BAR range through VFIO_DEVICE_FEATURE_DMA_BUF (vfio-pci has no GEM objects)"

    # -- the device ------------------------------------------------------------------------
    def bar_start(self, index: int) -> int:
        """``pci_resource_start(pdev, index)`` (synthetic, per function)."""
        return pci_resource_start(self.pdev, index)

    def memory_decoding(self) -> bool:
        """``__vfio_pci_memory_enabled``: ``PCI_COMMAND_MEMORY`` set and not in low power."""
        return self.memory_enabled and not self.low_power

    def _log(self, message: str) -> None:
        self.kernel.log(f"vfio-pci {self.pdev.name}: {message}")

    # -- VFIO_DEVICE_FEATURE_DMA_BUF -------------------------------------------------------
    def vfio_pci_core_feature_dma_buf(
        self,
        region_index: int,
        ranges: Sequence[VfioRegionDmaRange],
        *,
        feature: int = VFIO_DEVICE_FEATURE_GET,
        flags: int = 0,
        open_flags: int = O_CLOEXEC | O_RDWR,
        files: FdTable | None = None,
    ) -> int:
        """``vfio_pci_core_feature_dma_buf``: export ``ranges`` of BAR ``region_index``; the
        new dma-buf's fd, or 0 for a PROBE (K-98, K-99).

        Refusals, in the kernel's order: not a GET → ``-EINVAL`` (a PROBE returns 0); no range
        or ``flags`` ≠ 0 → ``-EINVAL``; region ≥ the ROM index → ``-ENODEV`` (7.1: also a
        BAR whose resources cannot be claimed, i.e. absent); a range of length 0, unaligned,
        or a total that overflows or has the SWIOTLB bit → ``-EINVAL``; no P2PDMA provider
        for the BAR → ``-EINVAL``; a range whose address overflows → ``-EOVERFLOW``; a range
        past the BAR → ``-EINVAL``; the device unregistering → ``-ENODEV``. The buffer starts
        revoked when memory decoding is off (K-99).
        """
        fn = "vfio_pci_core_feature_dma_buf"
        if feature & VFIO_DEVICE_FEATURE_PROBE:
            if feature & VFIO_DEVICE_FEATURE_SET:
                raise err(Errno.EINVAL, "vfio_check_feature", "DMA_BUF supports GET only")
            return 0
        if not feature & VFIO_DEVICE_FEATURE_GET or feature & VFIO_DEVICE_FEATURE_SET:
            raise err(Errno.EINVAL, "vfio_check_feature", "DMA_BUF supports GET only")
        if not ranges or flags:
            raise err(Errno.EINVAL, fn, "nr_ranges == 0 or flags != 0")
        if not 0 <= region_index < VFIO_PCI_ROM_REGION_INDEX:
            raise err(Errno.ENODEV, fn, f"region {region_index} is not a BAR")
        bar_size = self.bars.get(region_index, 0)
        if self.kernel.profile.vfio_dmabuf is VfioDmabuf.REVOCABLE_ONLY and bar_size == 0:
            raise err(Errno.ENODEV, "vfio_pci_core_setup_barmap", f"BAR {region_index} absent")
        length = 0
        for r in ranges:
            if r.length <= 0 or r.offset < 0 or r.offset % PAGE_SIZE or r.length % PAGE_SIZE:
                raise err(Errno.EINVAL, "validate_dmabuf_input", f"range {r} not page-aligned")
            length += r.length
            if length > U64_MAX:
                raise err(Errno.EINVAL, "validate_dmabuf_input", "total length overflows")
        if length & DMA_IOVA_USE_SWIOTLB:
            raise err(Errno.EINVAL, "validate_dmabuf_input", "total length too large")
        provider = pcim_p2pdma_provider(self.pdev, bar_size, self.pdev.topology.p2pdma_enabled)
        if provider is None:
            raise err(Errno.EINVAL, "vfio_pci_core_get_dmabuf_phys", "no P2PDMA provider")
        start, end_max = self.bar_start(region_index), self.bar_start(region_index) + bar_size
        phys: list[DmaBufPhysVec] = []
        for r in ranges:
            paddr, end = start + r.offset, start + r.offset + r.length
            if paddr > U64_MAX or end > U64_MAX:
                raise err(Errno.EOVERFLOW, "vfio_pci_core_fill_phys_vec", f"range {r}")
            if end > end_max:
                raise err(Errno.EINVAL, "vfio_pci_core_fill_phys_vec", f"{r} is past the BAR")
            phys.append(DmaBufPhysVec(paddr, r.length))
        if not self.registered:
            raise err(Errno.ENODEV, "vfio_device_try_get_registration", "device going away")
        priv = VfioPciDmaBuf(self, region_index, tuple(phys), provider, length)
        dmabuf = dma_buf_export(
            self.kernel,
            DmaBufExportInfo.define(self.module, self.ops, length, priv, flags=open_flags),
        )
        priv.dmabuf = dmabuf
        self.publish_location(dmabuf)
        with dmabuf.resv:
            priv.revoked = not self.memory_decoding()
            self.dmabufs.append(priv)
        try:
            return dma_buf_fd(dmabuf, open_flags, files)
        except KernelError:
            dma_buf_put(dmabuf)
            raise

    # -- revocation ------------------------------------------------------------------------
    def vfio_pci_dma_buf_move(self, revoked: bool) -> None:
        """``vfio_pci_dma_buf_move``: bring every live buffer of the device to ``revoked``
        (K-104, K-105). Caller holds the device's ``memory_lock`` for write.

        6.19: under the resv set the state and ``dma_buf_move_notify``. 7.1: under the resv
        (revoking: set ``revoked``) ``dma_buf_invalidate_mappings`` and wait for every fence
        up to BOOKKEEP; then, revoking, drop the initial mapping reference and wait until every
        importer unmapped -- an importer that kept a mapping makes this wait forever
        (``KernelHang``, K-120); un-revoking, clear ``revoked`` under the resv afterwards.
        Buffers revoked for good (close, the RFC ioctl) are never un-revoked.
        """
        for priv in list(self.dmabufs):
            if priv.dmabuf is None or priv.dmabuf.released or priv.revoked == revoked:
                continue
            if not revoked and priv.revoked_for_good:
                continue
            self._move_one(priv, revoked)

    def _move_one(self, priv: VfioPciDmaBuf, revoked: bool) -> None:
        dmabuf = priv.dmabuf
        assert dmabuf is not None
        if revoked:
            priv.revocations += 1
        if self.kernel.profile.vfio_dmabuf is VfioDmabuf.PIN_REFUSED:
            with dmabuf.resv:
                priv.revoked = revoked
                dma_buf_notify_move(dmabuf)
            return

        def mark() -> None:
            priv.revoked = True

        dma_buf_invalidate_and_wait(
            dmabuf,
            mark if revoked else None,
            lambda: priv.mappings,
            "vfio_pci_dma_buf_move",
            repr(priv),
        )
        if not revoked:
            with dmabuf.resv:
                priv.revoked = False

    def config_write_command(self, memory: bool) -> None:
        """``vfio_basic_config_write`` of ``PCI_COMMAND``: clearing the memory-space bit
        revokes every buffer, setting it un-revokes them (K-104)."""
        was = self.memory_decoding()
        self.memory_enabled = memory
        if was != self.memory_decoding():
            self.vfio_pci_dma_buf_move(not self.memory_decoding())

    def vfio_device(self) -> VfioPciDevice:
        """The function's ``vfio_device``: this driver."""
        return self

    def remove(self) -> None:
        """``vfio_pci_core_unregister_device``: the ``vfio_device`` registration goes, so a
        later ``VFIO_DEVICE_FEATURE_DMA_BUF`` fails with ``-ENODEV``."""
        self.registered = False

    def reset(self) -> None:
        """``VFIO_DEVICE_RESET`` (``vfio_pci_core_ioctl_reset``): revoke, reset the function
        (its config state is saved and restored), un-revoke if memory decoding is on (K-104)."""
        self.vfio_pci_dma_buf_move(True)
        self.resets += 1
        if self.memory_decoding():
            self.vfio_pci_dma_buf_move(False)

    def low_power_entry(self) -> None:
        """``VFIO_DEVICE_FEATURE_LOW_POWER_ENTRY``: revoke (K-104)."""
        self.low_power = True
        self.vfio_pci_dma_buf_move(True)

    def low_power_exit(self) -> None:
        """Runtime-PM resume: un-revoke if memory decoding is on (K-104)."""
        self.low_power = False
        if self.memory_decoding():
            self.vfio_pci_dma_buf_move(False)

    def dmabuf_revoke(self, dmabuf: DmaBuf) -> None:
        """(``next``, RFC) ``VFIO_DEVICE_PCI_DMABUF_REVOKE``: revoke one of this device's
        buffers for good. ``-EINVAL`` for a dma-buf that is not one of its exports [inferred
        errno: the RFC is under review]."""
        if not self.kernel.profile.vfio_dmabuf_revoke_ioctl:
            raise err(Errno.ENOTTY, "vfio_pci_core_ioctl", "no VFIO_DEVICE_PCI_DMABUF_REVOKE")
        priv = dmabuf.priv
        if not isinstance(priv, VfioPciDmaBuf) or priv.vdev is not self:
            raise err(Errno.EINVAL, "vfio_pci_dma_buf_revoke", f"{dmabuf!r} is not exported here")
        priv.revoked_for_good = True
        if not priv.revoked:
            self._move_one(priv, True)

    def close_device(self) -> None:
        """``vfio_pci_core_close_device`` → ``vfio_pci_dma_buf_cleanup``: revoke every buffer
        for good and orphan it (``vdev = NULL``); the fds stay valid but every later attach and
        map is ``-ENODEV`` (K-104). 6.19 notifies again a buffer that was already revoked; 7.1
        reuses the revoke path, which leaves it alone."""
        if self.kernel.profile.vfio_dmabuf is VfioDmabuf.PIN_REFUSED:
            for priv in list(self.dmabufs):
                if priv.dmabuf is None or priv.dmabuf.released:
                    continue
                with priv.dmabuf.resv:
                    self.dmabufs.remove(priv)
                    priv.vdev = None
                    if not priv.revoked:
                        priv.revocations += 1
                    priv.revoked = priv.revoked_for_good = True
                    dma_buf_notify_move(priv.dmabuf)
        else:
            for priv in self.dmabufs:
                priv.revoked_for_good = True
            self.vfio_pci_dma_buf_move(True)
            for priv in list(self.dmabufs):
                self.dmabufs.remove(priv)
                priv.vdev = None
        self.owner = None

    # -- dma_buf_ops -----------------------------------------------------------------------
    def buffer_of(self, dmabuf: DmaBuf) -> VfioPciDmaBuf:
        priv = dmabuf.priv
        if not isinstance(priv, VfioPciDmaBuf) or priv.dmabuf is not dmabuf:
            raise ValueError(f"{dmabuf!r} was not exported by vfio-pci")
        return priv

    def _attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``vfio_pci_dma_buf_attach`` (K-100): not peer2peer → ``-EOPNOTSUPP``; revoked →
        ``-ENODEV``; (7.1) not ``dma_buf_attach_revocable`` → ``-EOPNOTSUPP``."""
        priv = self.buffer_of(dmabuf)
        fn = "vfio_pci_dma_buf_attach"
        if not attach.peer2peer:
            raise err(Errno.EOPNOTSUPP, fn, f"{attach.dev.name} is not a peer-to-peer importer")
        if priv.revoked:
            raise err(Errno.ENODEV, fn, f"{priv.name} is revoked")
        if self.kernel.profile.attach_revocable and not dma_buf_attach_revocable(attach):
            raise err(Errno.EOPNOTSUPP, fn, f"{attach.dev.name} cannot be revoked")

    def _pin(self, attach: DmaBufAttachment) -> None:
        """``vfio_pci_dma_buf_pin`` (6.19 final, 7.0; K-101): every pin is refused."""
        raise err(Errno.EOPNOTSUPP, "vfio_pci_dma_buf_pin", "VFIO dma-bufs cannot be pinned")

    def _unpin(self, attach: DmaBufAttachment) -> None:
        """``vfio_pci_dma_buf_unpin``: nothing to do."""

    def _map(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        """``vfio_pci_dma_buf_map`` (K-103): resv held; revoked → ``-ENODEV``; else the
        ranges through :func:`~pinlab.kernel.dma_buf_mapping.dma_buf_phys_vec_to_sgt`; (7.1)
        one more mapping reference."""
        dmabuf = attach.dmabuf
        dmabuf.resv.assert_held("vfio_pci_dma_buf_map")
        priv = self.buffer_of(dmabuf)
        if priv.revoked:
            raise err(Errno.ENODEV, "vfio_pci_dma_buf_map", f"{priv.name} is revoked")
        sgt = dma_buf_phys_vec_to_sgt(
            attach, priv.provider, priv.phys_vec, priv.size, direction, epoch=priv.epoch
        )
        if self.kernel.profile.vfio_dmabuf is VfioDmabuf.REVOCABLE_ONLY:
            priv.mappings += 1
        return sgt

    def _unmap(self, attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection) -> None:
        """``vfio_pci_dma_buf_unmap``: free the table; (7.1) resv held, drop the mapping
        reference."""
        priv = self.buffer_of(attach.dmabuf)
        dma_buf_free_sgt(attach, sgt, direction)
        if self.kernel.profile.vfio_dmabuf is VfioDmabuf.REVOCABLE_ONLY:
            attach.dmabuf.resv.assert_held("vfio_pci_dma_buf_unmap")
            priv.mappings -= 1

    def _release(self, dmabuf: DmaBuf) -> None:
        """``vfio_pci_dma_buf_release``: unlink from the device (if it is still attached)."""
        priv = self.buffer_of(dmabuf)
        if priv.vdev is not None and priv in self.dmabufs:
            self.dmabufs.remove(priv)

    # -- what a GEM exporter has, and vfio-pci has not --------------------------------------
    def create_buffer(self, size: int, domain: str = "bar0", *, name: str = "") -> DeviceBuffer:
        """vfio-pci has no GEM create: the device fd answers ``-ENOTTY``; its buffers come
        from :meth:`vfio_pci_core_feature_dma_buf`."""
        raise err(Errno.ENOTTY, "vfio_pci_core_ioctl", "no GEM create on a VFIO device fd")

    def export(self, buf: DeviceBuffer) -> DmaBuf:
        """No PRIME export either (``-ENOTTY``): see :meth:`create_buffer`."""
        raise err(Errno.ENOTTY, "vfio_pci_core_ioctl", "no PRIME export on a VFIO device fd")

    def free_buffer(self, buf: DeviceBuffer) -> None:
        """No GEM close (``-ENOTTY``): a VFIO dma-buf goes with its last reference."""
        raise err(Errno.ENOTTY, "vfio_pci_core_ioctl", "no GEM close on a VFIO device fd")

    # -- reporting -------------------------------------------------------------------------
    def regions(self) -> list[RegionUsage]:
        """One region per BAR, ``bar<i>``: the bytes of live exports (overlaps counted
        once per export, capped at the BAR), all of them pinned (MMIO never moves)."""
        out = []
        for index, size in sorted(self.bars.items()):
            used = min(size, sum(p.size for p in self.dmabufs if p.bar == index))
            out.append(RegionUsage(f"bar{index}", size, used, used, size - used))
        return out


def vfio_pci_dma_buf_iommufd_map(attach: DmaBufAttachment) -> DmaBufPhysVec:
    """``vfio_pci_dma_buf_iommufd_map``: the private interconnect to iommufd (K-107).

    Resv held. Not a vfio-pci dma-buf → ``-EOPNOTSUPP``; revoked → ``-ENODEV``; more than one
    range → ``-EOPNOTSUPP``; else the one physical range. Contract: an invalidation of such an
    attachment means revoke, not move.
    """
    fn = "vfio_pci_dma_buf_iommufd_map"
    dmabuf = attach.dmabuf
    dmabuf.resv.assert_held(fn)
    priv = dmabuf.priv
    if not isinstance(priv, VfioPciDmaBuf):
        raise err(Errno.EOPNOTSUPP, fn, f"{dmabuf!r} is not a VFIO dma-buf")
    if priv.revoked:
        raise err(Errno.ENODEV, fn, f"{priv.name} is revoked")
    if priv.nr_ranges != 1:
        raise err(Errno.EOPNOTSUPP, fn, f"{priv.nr_ranges} ranges (iommufd takes one)")
    return priv.phys_vec[0]
