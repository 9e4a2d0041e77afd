"""GEM objects backed by TTM: what the TTM-based exporter models (amdgpu, apu, xe, i915,
nvidia-compute) share (drivers/gpu/drm/drm_gem_ttm_helper.c, drm_prime.c).

The driver-independent half of a TTM exporter is the same everywhere and lives here:

* :class:`TtmGemBuffer` -- a GEM object: a TTM BO, the memory types its creator allowed
  (its *placements*, in preference order) and the GEM refcount (the creator's handle plus one
  reference per live dma-buf, ``drm_gem_prime_export``); drivers subclass it for their own
  per-BO state (``struct amdgpu_bo``, ``struct xe_bo`` ...);
* :data:`TTM_LOCATION` and :func:`parse_ttm_domain` -- the memory types' names, and a
  ``create_buffer`` domain string under the names a driver accepts (``domain_aliases``);
* :class:`GemTtmFuncs` -- the TTM callbacks with the exporter side of ``move_notify``: an
  exported, non-imported BO that changes backing tells its dynamic importers first
  (``dma_buf_move_notify``, ``dma_buf_invalidate_mappings`` in 7.1). Each driver chooses
  whether a move out of SYSTEM counts (amdgpu-like: no; xe-like: yes) or whether it notifies
  at all (static exporters never do);
* :class:`TtmGemExporter` -- the TTM device with its managers and dmem region, create,
  export (one dma-buf per BO, sharing the BO's resv), release, GEM close, ``regions()``, the
  backing epoch, the DMA-mapping fault hook, the quiet P2P reachability check of an attach
  (``clear_unreachable_p2p``), the page and P2P sg_tables of a BO (and the end of
  a dynamic exporter's map that hands them out, ``map_backing``), the unpin op, and the
  platform constructor. Each driver supplies its ``dma_buf_ops`` callbacks
  (:meth:`~pinlab.drivers.base.ExporterDriver.dma_buf_ops`) -- the pin policy is the
  driver's, not this module's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Generic, Self, TypedDict, TypeVar, Unpack

from pinlab.drivers.base import (
    DeviceBuffer,
    ExporterDriver,
    ExporterSpec,
    RegionUsage,
    constructor_options,
    reject_unknown,
)
from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaBufExportInfo,
    SgTable,
    dma_buf_export,
    dma_buf_notify_move,
    get_dma_buf,
)
from pinlab.kernel.dmem import dmem_cgroup_register_region
from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.p2pdma import pci_p2pdma_distance
from pinlab.kernel.pci import PciDev
from pinlab.kernel.range_alloc import PAGE_SIZE
from pinlab.kernel.ttm import (
    TtmBoType,
    TtmBufferObject,
    TtmDevice,
    TtmDeviceFuncs,
    TtmMemType,
    TtmPlace,
    TtmPlacement,
    TtmResource,
    ttm_bo_clear,
    ttm_bo_init_reserved,
    ttm_bo_release,
    ttm_bo_unpin,
)

TTM_LOCATION: dict[TtmMemType, str] = {
    TtmMemType.VRAM: "vram",
    TtmMemType.TT: "gtt",
    TtmMemType.SYSTEM: "system",
}
"""``DeviceBuffer.location`` of each TTM memory type (device memory is always ``"vram"``)."""


def domain_sizes(
    *, vram: int | None = None, gtt: int | None = None, system: int | None = None
) -> Mapping[TtmMemType, int]:
    """A driver's memory domains (the ones given) and their default sizes in bytes."""
    sizes = {TtmMemType.VRAM: vram, TtmMemType.TT: gtt, TtmMemType.SYSTEM: system}
    return MappingProxyType({mem: size for mem, size in sizes.items() if size is not None})


def domain_names(
    *, vram: Iterable[str] = (), tt: Iterable[str] = (), system: Iterable[str] = ()
) -> Mapping[str, TtmMemType]:
    """A driver's ``create_buffer`` domain names: the names it accepts for each memory type,
    in the order error messages list them."""
    names = {name: TtmMemType.VRAM for name in vram}
    names.update({name: TtmMemType.TT for name in tt})
    names.update({name: TtmMemType.SYSTEM for name in system})
    return MappingProxyType(names)


def parse_ttm_domain(
    domain: str, aliases: Mapping[str, TtmMemType], driver: str
) -> tuple[TtmMemType, ...]:
    """A domain string (``"vram"``, ``"vram|system"`` ...) to TTM memory types, in the
    preference order every modelled driver uses: device memory, then TT, then SYSTEM.

    ``aliases`` maps the names a driver accepts to memory types. Anything else, or an empty
    domain, is the create ioctl's ``-EINVAL`` (an unknown domain bit), naming the accepted
    names.
    """
    found: set[TtmMemType] = set()
    for part in domain.lower().split("|"):
        name = part.strip()
        mem = aliases.get(name)
        if mem is None:
            raise err(
                Errno.EINVAL,
                f"{driver}_gem_create_ioctl",
                f"unknown domain {name!r} (expected one of {', '.join(aliases)}, "
                "or several joined with '|')",
            )
        found.add(mem)
    return tuple(sorted(found, reverse=True))


_PLACEMENTS: dict[TtmPlacement, TtmPlacement] = {}


def shared_placement(placement: TtmPlacement) -> TtmPlacement:
    """The one stored copy of ``placement``: places are frozen values and a driver makes a
    handful of distinct placements, so every BO keeps a shared tuple, not its own."""
    return _PLACEMENTS.setdefault(placement, placement)


class TtmGemBuffer(DeviceBuffer):
    """A GEM object backed by a TTM BO.

    ``placements`` are the memory types its creator allowed, in preference order (what
    ``xe_bo_can_migrate`` and ``i915_gem_object_can_migrate`` consult); ``refs`` is the GEM
    kref: 1 for the creator's handle plus 1 per dma-buf exported from it.
    """

    __slots__ = ("name", "owner", "placements", "refs", "size", "tbo")

    def __init__(
        self, owner: TtmGemExporter[Any], tbo: TtmBufferObject, placements: TtmPlacement
    ) -> None:
        self.owner = owner
        self.tbo = tbo
        self.name = tbo.name
        self.size = tbo.size
        self.placements = shared_placement(placements)
        self.refs = 1
        tbo.driver_priv = self

    @property
    def mem_type(self) -> TtmMemType | None:
        return self.tbo.mem_type

    @property
    def location(self) -> str | None:
        mem = self.tbo.mem_type
        return None if mem is None else TTM_LOCATION[mem]

    @property
    def pinned(self) -> bool:
        return self.tbo.pin_count > 0

    @property
    def epoch(self) -> int:
        return self.tbo.epoch

    @property
    def dmem_pool(self) -> object | None:
        res = self.tbo.resource
        return res.pool if res is not None else None

    @property
    def is_import(self) -> bool:
        """Whether the BO is another device's dma-buf imported here (an sg BO)."""
        return self.tbo.import_attach is not None

    def can_migrate(self, mem: TtmMemType) -> bool:
        """Whether the creator allowed ``mem`` (``xe_bo_can_migrate``,
        ``i915_gem_object_can_migrate``). Imports (sg BOs) never migrate."""
        if self.tbo.type is TtmBoType.SG:
            return False
        return any(place.mem_type is mem for place in self.placements)

    def sg_table(self) -> SgTable:
        """The sg_table of the BO's current backing: page-less bus addresses of the device
        memory for a peer (a P2P mapping), or the DMA-mapped pages of TT/SYSTEM memory.
        The BO must have a backing."""
        res = self.tbo.resource
        assert res is not None, f"{self!r} has no backing"
        device_memory = res.mem_type is TtmMemType.VRAM
        return SgTable(
            res.allocation.segments,
            device_memory,
            TTM_LOCATION[res.mem_type],
            self.tbo.epoch,
            device_memory,
        )

    def __repr__(self) -> str:
        kind = type(self).__name__
        return f"<{kind} {self.name} {self.size:#x} in {self.location} pin={self.tbo.pin_count}>"


BufT = TypeVar("BufT", bound=TtmGemBuffer)


class GemTtmFuncs(TtmDeviceFuncs):
    """TTM callbacks of a GEM exporter: TtmDeviceFuncs' eviction targets (or the exporter's
    ``evict_to``) plus the exporter's move notification as it declares it
    (``notifies_moves``, ``notifies_moves_from_system``; K-36, K-38 for amdgpu-like,
    ``xe_bo_move_notify`` for xe-like)."""

    def __init__(self, exporter: TtmGemExporter[Any]) -> None:
        self.exporter = exporter

    def evict_flags(self, bo: TtmBufferObject) -> TtmPlacement:
        placement = self.exporter.evict_to
        if placement is not None and bo.type is not TtmBoType.SG:
            return placement
        return super().evict_flags(bo)

    def move_notify(self, bo: TtmBufferObject, evict: bool, new_res: TtmResource | None) -> None:
        dmabuf = bo.dma_buf
        exporter = self.exporter
        if (
            exporter.notifies_moves
            and isinstance(dmabuf, DmaBuf)
            and bo.import_attach is None
            and bo.resource is not None
            and (
                exporter.notifies_moves_from_system or bo.resource.mem_type is not TtmMemType.SYSTEM
            )
        ):
            self.exporter.move_notifies += 1
            dma_buf_notify_move(dmabuf)


class TtmOptions(TypedDict, total=False):
    """The keyword arguments every TTM exporter takes: its ``name`` (default
    ``<driver>-<pci>``) and the size in bytes of each memory domain it has (default: the
    driver's ``default_sizes``; 0 leaves the domain out)."""

    name: str
    vram_size: int
    gtt_size: int
    system_size: int


class TtmGemExporter(ExporterDriver, Generic[BufT]):
    """The common half of a TTM-based dma-buf exporter.

    Subclasses declare :attr:`exp_name`, :attr:`default_sizes`, :attr:`domain_aliases`,
    :attr:`dmem_region_name` and how moves are announced, set ``self.ops`` (from
    :meth:`~pinlab.drivers.base.ExporterDriver.dma_buf_ops`) and implement
    :meth:`_new_buffer`. ``dma_map_fault`` is a fault-injection hook: when it returns True for
    an importer device, DMA-mapping a page-backed sg_table for that device fails (the
    exporter decides the errno, e.g. xe's ``-EBUSY``, K-81).
    """

    default_sizes: ClassVar[Mapping[TtmMemType, int]]
    """The device's memory domains and their default sizes."""
    domain_aliases: ClassVar[Mapping[str, TtmMemType]]
    notifies_moves: ClassVar[bool] = True
    """Whether a move of an exported BO notifies its importers (a static exporter: no)."""
    notifies_moves_from_system: ClassVar[bool] = False
    """Whether a move whose old placement is SYSTEM is announced too (xe: yes; amdgpu and the
    nvidia-compute model: no, SYSTEM pages were never mapped for a peer)."""
    evict_to: ClassVar[TtmPlacement | None] = None
    """Where eviction sends device BOs (None: TTM's defaults, device memory → TT → SYSTEM)."""
    dmem_region_name: ClassVar[str | None] = None
    """The dmem region the device memory registers as (``drm/<pci>/<name>``), None for a
    driver without dmem cgroup support."""
    clear_on_alloc: ClassVar[bool] = True
    """New device-memory BOs get a clear job (a KERNEL fence, K-64), as amdgpu's
    VRAM_CLEARED, xe's and i915's LMEM clears do."""

    bdev: TtmDevice

    def __init__(self, kernel: Kernel, pdev: PciDev, **options: Unpack[TtmOptions]) -> None:
        reject_unknown(options, TtmOptions.__optional_keys__, type(self))
        name = options.get("name") or f"{self.driver_name}-{pdev.name}"
        super().__init__(kernel, pdev, name)
        self.dma_map_fault: Callable[[Device], bool] | None = None
        self.bdev = TtmDevice(kernel, name, self._ttm_funcs())
        requested = {
            TtmMemType.VRAM: options.get("vram_size"),
            TtmMemType.TT: options.get("gtt_size"),
            TtmMemType.SYSTEM: options.get("system_size"),
        }
        for mem in (TtmMemType.VRAM, TtmMemType.TT, TtmMemType.SYSTEM):
            if mem not in self.default_sizes:
                if requested[mem] is not None:
                    raise TypeError(f"{self.driver_name} has no {TTM_LOCATION[mem]} domain")
                continue
            size = requested[mem]
            size = self.default_sizes[mem] if size is None else size
            if size <= 0:
                continue
            region = None
            if mem is TtmMemType.VRAM:
                self.vram_size = size
            if mem is TtmMemType.VRAM and self.dmem_region_name is not None:
                region = dmem_cgroup_register_region(
                    kernel, size, f"drm/{pdev.name}/{self.dmem_region_name}"
                )
                self.vram_region = region
            self.bdev.add_manager(mem, size, name=f"{name}:{TTM_LOCATION[mem]}", region=region)

    def _ttm_funcs(self) -> GemTtmFuncs:
        """The TTM callbacks of the device (drivers with their own override)."""
        return GemTtmFuncs(self)

    @classmethod
    def from_spec(cls, kernel: Kernel, pdev: PciDev, spec: ExporterSpec) -> Self:
        """``vram_size`` = the spec's ``memory``, ``gtt_size`` and ``system_size`` when the
        spec sets them, then its ``driver_options``."""
        options = constructor_options(
            spec.driver_options, vram_size=spec.memory, gtt_size=spec.gtt, system_size=spec.system
        )
        return cls(kernel, pdev, name=spec.name, **options)

    # -- buffers ---------------------------------------------------------------------------
    def _new_buffer(self, tbo: TtmBufferObject, placements: TtmPlacement) -> BufT:
        """Wrap a freshly created BO in the driver's buffer type (drivers that create BOs
        through :meth:`bo_create` implement it)."""
        raise NotImplementedError(f"{type(self).__name__} creates its BOs itself")

    @classmethod
    def host_memory_domains(cls) -> frozenset[str]:
        """The TT and SYSTEM domains among the driver's :attr:`default_sizes` (i915 has no TT:
        its SMEM placement is TTM's SYSTEM)."""
        return frozenset(TTM_LOCATION[m] for m in cls.default_sizes if m is not TtmMemType.VRAM)

    @classmethod
    def domain_error(cls, domain: str) -> str | None:
        try:
            parse_ttm_domain(domain, cls.domain_aliases, cls.driver_name)
        except KernelError as e:
            return e.reason
        return None

    def parse_domain(self, domain: str) -> tuple[TtmMemType, ...]:
        """The memory types a ``create_buffer`` domain string names; ``-EINVAL`` if it names
        one this device does not have (a VRAM domain on an integrated part)."""
        mems = parse_ttm_domain(domain, self.domain_aliases, self.driver_name)
        missing = [m for m in mems if self.bdev.manager(m) is None]
        if missing:
            names = ", ".join(TTM_LOCATION[m] for m in missing)
            raise err(
                Errno.EINVAL,
                f"{self.driver_name}_gem_create_ioctl",
                f"{self.name} has no {names} memory (domain {domain!r})",
            )
        return mems

    def gem_size(self, size: int) -> int:
        """The size of a new GEM object: rounded up to ``PAGE_SIZE``, as ``amdgpu_bo_create``
        (``ALIGN(size, PAGE_SIZE)``) and i915's user-object create (``round_up``) do --
        ``drm_gem_private_object_init`` BUGs on an unaligned size. Drivers whose ioctl
        refuses unaligned sizes instead (xe) override."""
        if size <= 0:
            raise err(Errno.EINVAL, f"{self.driver_name}_gem_create_ioctl", f"size {size}")
        if not size % PAGE_SIZE:
            return size  # the caller's int: a million equal sizes stay one object
        return -(-size // PAGE_SIZE) * PAGE_SIZE

    def bo_create(self, size: int, mems: Sequence[TtmMemType], *, name: str = "") -> BufT:
        """GEM create: a BO validated into the first of ``mems`` with room (TTM may evict
        unpinned BOs; ``-ENOMEM`` when nothing fits, K-62). A BO landing in device memory
        gets a clear job when :attr:`clear_on_alloc`."""
        if not mems:
            raise ValueError(f"{self.name}: a buffer needs at least one placement")
        size = self.gem_size(size)
        placements = tuple(TtmPlace(m) for m in mems)
        tbo = ttm_bo_init_reserved(self.bdev, size, placements, TtmBoType.DEVICE, name=name)
        try:
            buf = self._new_buffer(tbo, placements)
            if self.clear_on_alloc and tbo.mem_type is TtmMemType.VRAM:
                ttm_bo_clear(tbo)
        finally:
            tbo.resv.unlock()
        return buf

    def create_buffer(self, size: int, domain: str = "vram", *, name: str = "") -> BufT:
        return self.bo_create(size, self.parse_domain(domain), name=name)

    def free_buffer(self, buf: DeviceBuffer) -> None:
        """GEM close of the creator's handle; the BO lives on while a dma-buf holds it."""
        self._put(self._own(buf))

    def _own(self, buf: DeviceBuffer) -> BufT:
        if not isinstance(buf, TtmGemBuffer) or buf.owner is not self:
            raise ValueError(f"{buf!r} is not a buffer of {self.name}")
        return buf  # type: ignore[return-value]

    def gem_object_put(self, buf: DeviceBuffer) -> None:
        """``drm_gem_object_put`` of a reference a caller took (a handle of a self-import)."""
        self._put(self._own(buf))

    def _put(self, buf: BufT) -> None:
        """``drm_gem_object_put``: the last reference destroys the BO."""
        buf.refs -= 1
        if buf.refs == 0 and not buf.tbo.deleted:
            self._destroy(buf)

    def _destroy(self, buf: BufT) -> None:
        """Free the BO. A pin still held here is a leak the kernel WARNs about in
        ``ttm_bo_release`` (K-87); the model balances it first, like amdgpu's unpin-all."""
        tbo = buf.tbo
        if tbo.pin_count:
            with tbo.resv:
                while tbo.pin_count:
                    self._unpin_bo(buf)
        ttm_bo_release(tbo)

    def _unpin_bo(self, buf: BufT) -> None:
        """Drop one pin of ``buf``; drivers with per-pin accounting override. Resv held."""
        ttm_bo_unpin(buf.tbo)

    def _unpin(self, attach: DmaBufAttachment) -> None:
        """``unpin`` of a dynamic TTM exporter (``amdgpu_dma_buf_unpin``,
        ``xe_dma_buf_unpin``): drop the pin its ``pin`` took, :meth:`_unpin_bo`."""
        self._unpin_bo(self.buffer_of(attach.dmabuf))

    # -- export ----------------------------------------------------------------------------
    def export(self, buf: DeviceBuffer) -> DmaBuf:
        """``drm_gem_prime_export``: one dma-buf per BO (a second export of a live one returns
        it with one more reference), sharing the BO's resv; the dma-buf holds a GEM ref."""
        bo = self._own(buf)
        if bo.tbo.deleted:
            raise err(Errno.EINVAL, "drm_gem_prime_export", f"{bo.name} was freed")
        attach = bo.tbo.import_attach
        if isinstance(attach, DmaBufAttachment):
            # drm_gem_prime_handle_to_fd: an imported object is exported as the dma-buf it
            # came from (one more reference), never wrapped in a second one
            return get_dma_buf(attach.dmabuf)
        dmabuf = bo.tbo.dma_buf
        if isinstance(dmabuf, DmaBuf) and not dmabuf.released:
            return get_dma_buf(dmabuf)
        dmabuf = dma_buf_export(
            self.kernel,
            DmaBufExportInfo.define(self.module, self.ops, bo.size, bo, resv=bo.tbo.resv),
        )
        self.publish_location(dmabuf)
        bo.tbo.dma_buf = dmabuf
        bo.refs += 1
        return dmabuf

    def _release(self, dmabuf: DmaBuf) -> None:
        """``drm_gem_dmabuf_release``: the export's GEM reference is dropped."""
        bo = self.buffer_of(dmabuf)
        bo.tbo.dma_buf = None
        self._put(bo)

    def buffer_of(self, dmabuf: DmaBuf) -> BufT:
        bo = dmabuf.priv
        if not isinstance(bo, TtmGemBuffer) or bo.owner is not self:
            raise ValueError(f"{dmabuf!r} was not exported by {self.name}")
        return bo  # type: ignore[return-value]

    def backing_epoch(self, dmabuf: DmaBuf) -> int:
        return self.buffer_of(dmabuf).tbo.epoch

    def dma_map_fails(self, dev: Device) -> bool:
        """Whether the fault-injection hook makes a DMA mapping for ``dev`` fail."""
        return self.dma_map_fault is not None and self.dma_map_fault(dev)

    def clear_unreachable_p2p(self, attach: DmaBufAttachment) -> None:
        """Clear ``peer2peer`` for an importer the PCI topology cannot reach, asking quietly
        (``attach->peer2peer && pci_p2pdma_distance(pdev, attach->dev, false) < 0``, as
        ``xe_dma_buf_attach`` does; the nvidia-compute model does the same)."""
        if attach.peer2peer and pci_p2pdma_distance(self.pdev, attach.dev, False) < 0:
            attach.peer2peer = False

    def map_backing(self, bo: BufT, attach: DmaBufAttachment, fn: str) -> SgTable:
        """The end of a dynamic TTM exporter's ``map_dma_buf``, once the BO is placed (K-78,
        K-81): TT pages DMA-mapped for the importer (``-EBUSY`` where that mapping fails, see
        :attr:`dma_map_fault`), device memory as a page-less P2P table, ``-EINVAL`` for a BO
        without backing or in SYSTEM. Whatever forbids a device-memory table to this importer
        (amdgpu: XGMI; nvidia-compute: no peer2peer) the driver checks first."""
        mem = bo.mem_type
        if mem is None:
            raise err(Errno.EINVAL, fn, f"{bo.name} has no backing")
        if mem is TtmMemType.TT:
            if self.dma_map_fails(attach.dev):
                raise err(Errno.EBUSY, fn, f"dma_map_sgtable for {attach.dev}")
            return bo.sg_table()
        if mem is TtmMemType.VRAM:
            return bo.sg_table()
        raise err(Errno.EINVAL, fn, f"cannot map a BO in {mem}")

    # -- reporting -------------------------------------------------------------------------
    def watch_regions(self, on_change: Callable[[], None]) -> bool:
        """Every manager's allocations and frees, and its pins that move nothing."""
        for man in self.bdev.managers.values():
            man.allocator.on_change = on_change
            man.on_pin_change = on_change
        return True

    def regions(self) -> list[RegionUsage]:
        """:class:`RegionUsage` of every memory type of the device (device memory first)."""
        out = []
        for mem in (TtmMemType.VRAM, TtmMemType.TT, TtmMemType.SYSTEM):
            man = self.bdev.manager(mem)
            if man is None:
                continue
            out.append(
                RegionUsage(
                    TTM_LOCATION[mem],
                    man.size,
                    man.used,
                    man.pinned_bytes,
                    man.allocator.largest_free,
                )
            )
        return out
