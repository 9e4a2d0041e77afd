"""What every exporter model shares, and what the rest of pinlab may know of one.

A driver's *autonomy* (the settlement's first pillar) lives in its callbacks: where
``dma_buf_pin`` places memory, whether attach refuses, whether a move is announced. The kernel
core (``pinlab.kernel``) stays neutral. Drivers register here by name so scenarios can select
them (``exporter = "amdgpu"``).

The seam between a driver and the layers above is what the driver *declares*, never a probe:
the attributes of :class:`ExporterDriver` (``bdev``, ``vram_region``, ``move_notifies``, its
``dma_buf_ops`` table ``ops``), its class-level capabilities (``carve_out``,
``imports_dmabufs``, ``shareable_domain``, ``has_display``,
:meth:`~ExporterDriver.host_memory_domains`) and its :meth:`~ExporterDriver.from_spec`
constructor. Whether an exporter is dynamic is read off its ops table, as the kernel's
``dma_buf_is_dynamic()`` reads ``ops->pin`` (K-6).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, TypeVar, cast

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaBufOps,
    DmaDataDirection,
    Module,
    SgTable,
)
from pinlab.kernel.dmem import DmemRegion
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci import PciDev
from pinlab.kernel.pin_hooks import BufferLocation
from pinlab.kernel.profile import KernelProfile
from pinlab.kernel.ttm import TtmDevice
from pinlab.plugins import PluginRegistry, describe

if TYPE_CHECKING:
    from pinlab.drivers.vfio_pci import VfioPciDevice

DriverOptions = Mapping[str, bool | int | str]
"""A platform file's ``driver_options``: extra constructor keyword arguments."""


class ExporterSpec(Protocol):
    """What a platform description says about one exporting device (the platform layer's
    ``DeviceSpec`` is one). Sizes are bytes; None leaves the driver's default."""

    @property
    def name(self) -> str: ...
    @property
    def memory(self) -> int: ...
    @property
    def gtt(self) -> int | None: ...
    @property
    def system(self) -> int | None: ...
    @property
    def bar(self) -> int | None: ...
    @property
    def driver_options(self) -> DriverOptions: ...


def reject_unknown(options: Mapping[str, object], known: Iterable[str], owner: type) -> None:
    """``TypeError`` for a keyword argument of ``options`` not in ``known`` -- what Python
    says for an unexpected keyword, for constructors that take ``**options``."""
    unknown = sorted(options.keys() - set(known))
    if unknown:
        raise TypeError(f"{owner.__name__}() got an unexpected keyword argument {unknown[0]!r}")


def constructor_options(options: DriverOptions, **sizes: int | None) -> dict[str, Any]:
    """Keyword arguments for a driver constructor: the ``sizes`` a spec sets (None keeps the
    driver's default), then the spec's ``driver_options``, which win."""
    kwargs: dict[str, Any] = {key: value for key, value in sizes.items() if value is not None}
    kwargs.update(options)
    return kwargs


class ImportPath(enum.Enum):
    """How an importer reaches the dma-buf core with a buffer (``kernel-semantics.md`` §3)."""

    PINNED = "pin"
    """A dynamic attachment pinned at import (``ib_umem_dmabuf_get_pinned``): the exporter's
    pin decides where the buffer lands."""
    DYNAMIC = "dynamic"
    """A dynamic attachment that survives moves (ODP MRs, a GPU import)."""
    STATIC = "static"
    """A static attachment (no importer ops): the core pins for it, it never has peer2peer."""
    PHYS = "phys"
    """A dynamic attachment that never maps: the exporter hands physical addresses over a
    private interconnect (iommufd ↔ vfio-pci, ``vfio_pci_dma_buf_iommufd_map``; K-107)."""


def placed_by_pin(path: ImportPath, exporter_dynamic: bool, profile: KernelProfile) -> bool:
    """Whether the exporter's pin, not an unpinned map, places a buffer for an importer on
    ``path``: every path but a dynamic one pins; a dynamic map pins too where the exporter is
    dynamic and the profile has ``CONFIG_DMABUF_MOVE_NOTIFY`` off (K-26, K-34). What
    :meth:`ExporterDriver.checklist_items` takes as ``by_pin``."""
    return path is not ImportPath.DYNAMIC or (exporter_dynamic and not profile.move_notify)


class BufferSource(enum.Enum):
    """How userspace gets a dma-buf of an exporter's memory."""

    GEM = "gem"
    """Create a buffer (GEM create, or habanalabs' memory ioctl) and export it (PRIME)."""
    VFIO_BAR = "vfio-bar"
    """``VFIO_DEVICE_FEATURE_DMA_BUF`` on the device fd: ranges of a PCI BAR (K-98)."""


class ImportEntry(enum.StrEnum):
    """How userspace hands a dma-buf fd to an importer -- the call it makes, and the one that
    then has the device touch the buffer -- as :class:`BufferSource` says how it gets one from
    an exporter. Every importer class declares one (``Importer.import_entry``)."""

    REG_MR = "mr"
    """``ibv_reg_dmabuf_mr`` on the NIC, then a work request through the MR
    (``Process.nic_dma``)."""
    SCANOUT = "scanout"
    """``drmModeAddFB2`` on the display (``Process.set_scanout``), then a vblank reads it
    (``DisplayEngine.scan_frame``: a device event, not a call)."""
    PRIME_IMPORT = "prime"
    """``DRM_IOCTL_PRIME_FD_TO_HANDLE`` on the importing GPU, then a GPU job
    (``Process.gpu_access``)."""
    IOAS_MAP = "iommufd"
    """``IOMMU_IOAS_MAP_FILE`` into the process's IOAS, then a device DMA at the IOVA
    (``Process.iommufd_dma``)."""


@dataclass(frozen=True, slots=True)
class RegionUsage:
    """Bytes of one memory region of a device, for reports and the simulator's counters."""

    name: str  # e.g. "vram", "gtt", "hbm"
    size: int
    used: int
    pinned: int
    largest_free: int

    @property
    def free(self) -> int:
        return self.size - self.used

    @property
    def fragmentation(self) -> float:
        free = self.free
        return 0.0 if free <= 0 else 1.0 - self.largest_free / free


class DeviceBuffer(ABC):
    """A buffer a driver created (a GEM object or device-memory handle).

    Subclasses declare ``__slots__``: a machine may hold a million of them."""

    __slots__ = ()

    name: str
    size: int

    @property
    @abstractmethod
    def location(self) -> str | None:
        """Where the bytes are now: ``"vram"``, ``"gtt"``, ``"system"`` or None (no backing)."""

    @property
    @abstractmethod
    def pinned(self) -> bool:
        """Whether the buffer may not move."""

    @property
    def epoch(self) -> int:
        """How many times the backing changed; a mapping made at an older epoch is stale.

        Buffers that never move (static exporters) keep the default 0.
        """
        return 0

    @property
    def dmem_pool(self) -> object | None:
        """The dmem pool the bytes are charged to (None: uncharged, or not TTM memory)."""
        return None


class BarBuffer(DeviceBuffer):
    """A buffer of MMIO BAR ranges: at a fixed bus address, so it never moves; its backing
    changes only when the exporter revokes it, so the epoch is the revoke count."""

    __slots__ = ()

    revocations: int

    @property
    def location(self) -> str | None:
        return "bar"

    @property
    def pinned(self) -> bool:
        return True

    @property
    def epoch(self) -> int:
        return self.revocations


class Driver:
    """A driver model: what the registries know it by."""

    driver_name: ClassVar[str]


_D = TypeVar("_D", bound=Driver)


class Registry(PluginRegistry[str, type[_D]]):
    """Driver classes by name, in registration order: the built-in ones, then the installed
    plugins' (``pinlab.plugins``, loaded on the first read)."""

    def register(self, name: str) -> Callable[[type[_D]], type[_D]]:
        """Class decorator: make a driver selectable by ``name`` (its ``driver_name``)."""

        def deco(cls: type[_D]) -> type[_D]:
            cls.driver_name = name
            self[name] = cls
            return cls

        return deco

    def register_plugin(self, name: str, obj: object, base: type) -> None:
        """Register a plugin's driver class ``obj`` (an entry point's object) as ``name``;
        ``TypeError``/``ValueError`` saying what was expected (``pinlab.plugins``)."""
        if not (isinstance(obj, type) and issubclass(obj, base)):
            raise TypeError(f"expected a {base.__name__} subclass, found {describe(obj)}")
        abstract = sorted(getattr(obj, "__abstractmethods__", ()))
        if abstract:
            raise TypeError(
                f"expected a concrete {base.__name__}, found {obj.__qualname__} without "
                f"{', '.join(abstract)}"
            )
        if self.get(name, obj) is not obj:
            raise ValueError(
                f"expected a new driver name, found {name!r} (already {self[name].__qualname__})"
            )
        self.register(name)(cast("type[_D]", obj))


class ExporterDriver(Driver, ABC):
    """A device driver that exports device memory as dma-bufs.

    Class-level declarations:

    * ``driver_name`` -- the registry name (set by :func:`register_exporter`);
    * ``pin_policy`` -- the driver's pin decision in one line (shown by ``pinlab matrix``);
    * ``exp_name`` -- ``dma_buf->exp_name`` and the module name of its dma-bufs;
    * ``carve_out`` -- its device memory is a carve-out of host DRAM (an APU), so copies in
      and out of it cross host DRAM;
    * ``imports_dmabufs`` -- the driver also imports other devices' dma-bufs (a
      :class:`~pinlab.drivers.gpu_import.GpuImporter` can sit on it);
    * ``shareable_domain`` -- the ``create_buffer`` domain userspace uses for a buffer it
      means to share (``"vram"``; xe and i915 need a system-memory placement too);
    * ``buffer_source`` -- how userspace gets a dma-buf from it (:class:`BufferSource`: GEM
      create + export, or vfio-pci's BAR ranges);
    * ``has_display`` -- its device's display block is driven by the driver through DRM KMS,
      so a display engine may import on its function;
    * :meth:`host_memory_domains` -- the host-memory domains it manages besides device memory
      (TTM's GTT and SYSTEM), which a platform spec's ``gtt``/``system`` size.

    Instance attributes every exporter sets (:meth:`__init__`): ``kernel``, ``pdev`` (its PCI
    function, also ``dev``), ``name``, ``module``, ``ops`` (its ``dma_buf_ops``), ``bdev``
    (the TTM device, None for an exporter whose memory TTM does not manage), ``vram_region``
    (the dmem region of its device memory, None without dmem accounting) and
    ``move_notifies`` (``move_notify`` calls it sent; stays 0 for one that never moves).
    """

    pin_policy: ClassVar[str]
    exp_name: ClassVar[str]
    carve_out: ClassVar[bool] = False
    imports_dmabufs: ClassVar[bool] = False
    shareable_domain: ClassVar[str] = "vram"
    buffer_source: ClassVar[BufferSource] = BufferSource.GEM
    has_display: ClassVar[bool] = False
    """Whether the driver drives a display block of its device through DRM KMS (it calls
    ``drm_mode_config_init`` and takes framebuffers with ``drmModeAddFB2``: amdgpu's DC in
    drivers/gpu/drm/amd/display, i915's and xe's display code in drivers/gpu/drm/i915/display),
    so a :class:`~pinlab.drivers.display.DisplayEngine` may sit on its function. False for a
    driver with no KMS: a compute or accelerator driver, vfio-pci."""

    ops: DmaBufOps

    def __init__(self, kernel: Kernel, pdev: PciDev, name: str) -> None:
        self.kernel = kernel
        self.pdev = pdev
        self.dev: Device = pdev
        self.name = name
        self.module = Module(self.exp_name)
        self.bdev: TtmDevice | None = None
        self.vram_region: DmemRegion | None = None
        self.vram_size = 0  # bytes of TTM-managed device memory (a policy's budget base)
        self.move_notifies = 0

    @classmethod
    @abstractmethod
    def from_spec(cls, kernel: Kernel, pdev: PciDev, spec: ExporterSpec) -> Self:
        """The driver for a platform's device description: ``spec``'s sizes under this
        driver's constructor arguments, plus its ``driver_options``. Raises ``ValueError`` or
        ``TypeError`` for options the driver refuses."""

    @classmethod
    def exists_in(cls, profile: KernelProfile) -> bool:
        """Whether the driver exists in the kernel ``profile`` models (constructing it under
        one where it does not raises ``ValueError``)."""
        return True

    @classmethod
    def host_memory_domains(cls) -> frozenset[str]:
        """The domains in host memory the driver manages besides its device memory --
        ``"gtt"`` (TTM's TT: system pages bound for device access, amdgpu's GTT) and ``"system"``
        (TTM's SYSTEM) -- whose sizes a platform spec's ``gtt``/``system`` set
        (:meth:`from_spec`). The default, an exporter whose memory TTM does not manage
        (habanalabs' HBM, vfio-pci's BAR), has none."""
        return frozenset()

    @classmethod
    def domain_error(cls, domain: str) -> str | None:
        """Why its GEM create would refuse ``domain`` by name alone (the ``expected ...`` part
        of a message), or None; lets a scenario be validated before a machine exists. The
        default accepts every name and leaves the decision to the create ioctl."""
        return None

    @property
    def dynamic(self) -> bool:
        """Whether the exporter has ``pin``/``unpin`` ops (``dma_buf_is_dynamic``, K-6)."""
        return self.ops.pin is not None

    def remove(self) -> None:
        """The PCI driver's ``remove`` callback at hot-unplug, once every client is gone; the
        default keeps no state that outlives it."""

    def vfio_device(self) -> VfioPciDevice | None:
        """The ``vfio_device`` the driver registered for its function
        (``vfio_pci_core_register_device``), which userspace opens as a VFIO device fd; the
        default, a driver that is not a VFIO driver, registered none."""
        return None

    def set_move_throttle(self, max_rate: float) -> None:
        """Throttle the moves its command submission makes back into device memory to
        ``max_rate`` (bytes/s, the driver's estimate of its copy throughput), where the driver
        has such a throttle (amdgpu's ``adev->mm_stats``); the default, a driver without one,
        ignores it."""

    @abstractmethod
    def checklist_items(self, path: ImportPath, *, by_pin: bool, refused: bool) -> tuple[str, ...]:
        """The checklist items (``kernel-semantics.md`` §12) of this driver's rule that decide
        where a buffer lands for an importer on ``path`` under the driver's kernel profile:
        placed by a pin (``by_pin``) or by an unpinned map; ``refused`` when the import
        failed. ``"model"`` marks a pinlab position model with no upstream item."""

    def dma_buf_ops(
        self,
        *,
        detach: Callable[[DmaBuf, DmaBufAttachment], None] | None = None,
        pin: Callable[[DmaBufAttachment], None] | None = None,
        unpin: Callable[[DmaBufAttachment], None] | None = None,
    ) -> DmaBufOps:
        """This driver's ``struct dma_buf_ops``: its attach, map, unmap and release callbacks,
        plus the optional ones it has -- ``detach``, and ``pin``/``unpin`` for a dynamic
        exporter."""
        return DmaBufOps(
            attach=self._attach,
            detach=detach,
            pin=pin,
            unpin=unpin,
            map_dma_buf=self._map,
            unmap_dma_buf=self._unmap,
            release=self._release,
        )

    # -- dma_buf_ops callbacks -------------------------------------------------------------
    @abstractmethod
    def _attach(self, dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        """``attach``: decide the attachment's ``peer2peer``, or refuse it."""

    @abstractmethod
    def _map(self, attach: DmaBufAttachment, direction: DmaDataDirection) -> SgTable | None:
        """``map_dma_buf``: the sg_table of the buffer's current backing."""

    def _unmap(self, attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection) -> None:
        """``unmap_dma_buf``: unmap and free the table."""

    @abstractmethod
    def _release(self, dmabuf: DmaBuf) -> None:
        """``release``: the dma-buf's last reference is gone."""

    # -- buffers ---------------------------------------------------------------------------
    @abstractmethod
    def create_buffer(self, size: int, domain: str = "vram", *, name: str = "") -> DeviceBuffer:
        """Allocate a buffer in ``domain`` (GEM create). Raises ``KernelError``."""

    @abstractmethod
    def export(self, buf: DeviceBuffer) -> DmaBuf:
        """Export ``buf`` as a dma-buf (``drm_gem_prime_export``); refcount 1, no fd yet."""

    @abstractmethod
    def free_buffer(self, buf: DeviceBuffer) -> None:
        """Drop the creator's handle (GEM close). Raises ``KernelError`` where the driver
        refuses (habanalabs: ``-EINVAL`` while exported)."""

    @abstractmethod
    def regions(self) -> list[RegionUsage]:
        """Usage of each memory region of the device."""

    def watch_regions(self, on_change: Callable[[], None]) -> bool:
        """Have ``on_change`` called whenever :meth:`regions` may have changed; False when the
        driver cannot say (then an observer polls). Not a kernel interface: the simulator's
        sampler reads the regions only after a change."""
        return False

    @abstractmethod
    def buffer_of(self, dmabuf: DmaBuf) -> DeviceBuffer:
        """The buffer behind one of this driver's dma-bufs."""

    def publish_location(self, dmabuf: DmaBuf) -> None:
        """Let policies see where one of this driver's dma-bufs is (``DmaBuf.locate``,
        pin_hooks.py): the driver becomes the buffer's locator (:meth:`locate`)."""
        dmabuf.locator = self

    def locate(self, dmabuf: DmaBuf) -> BufferLocation:
        """Where the bytes behind ``dmabuf`` are now; device memory is named by its dmem
        region and pool."""
        buf = self.buffer_of(dmabuf)
        memory = buf.location or "none"
        in_vram = memory == "vram"
        return BufferLocation(
            self.name,
            memory,
            self.vram_region if in_vram else None,
            self.driver_name,
            self.vram_size,
            buf.dmem_pool if in_vram else None,
        )

    def mapping_current(self, dmabuf: DmaBuf, sgt: SgTable) -> bool:
        """Whether ``sgt`` still points at the buffer's bytes (stale-DMA detection).

        The default compares the table's epoch with the buffer's backing epoch.
        """
        return sgt.epoch == self.backing_epoch(dmabuf)

    def backing_epoch(self, dmabuf: DmaBuf) -> int:
        """How many times the buffer's backing changed; exporters that move override."""
        return 0


EXPORTERS: Registry[ExporterDriver] = Registry()
"""Exporter models by name, in registration order (``pinlab.drivers``' import order)."""

register_exporter = EXPORTERS.register
