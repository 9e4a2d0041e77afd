"""What every driver model shares: exporters of device buffers and dma-buf importers.

A driver's *autonomy* (the settlement's first pillar) lives in its callbacks: where
``dma_buf_pin`` places memory, whether attach refuses, whether a move is announced. The kernel
core (``pinlab.kernel``) stays neutral. Drivers register here by name so scenarios can select
them (``exporter = "amdgpu"``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import DmaBuf, SgTable
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pin_hooks import BufferLocation


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
    """A buffer a driver created (a GEM object or device-memory handle)."""

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


class ExporterDriver(ABC):
    """A device driver that exports device memory as dma-bufs.

    ``pin_policy`` states the driver's pin decision in one line (shown by ``pinlab matrix``).
    """

    driver_name: ClassVar[str]
    pin_policy: ClassVar[str]
    dynamic: ClassVar[bool]

    kernel: Kernel
    dev: Device

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

    @abstractmethod
    def buffer_of(self, dmabuf: DmaBuf) -> DeviceBuffer:
        """The buffer behind one of this driver's dma-bufs."""

    def publish_location(self, dmabuf: DmaBuf, buf: DeviceBuffer) -> None:
        """Let policies see where ``buf``'s bytes are (``DmaBuf.locate``, pin_hooks.py)."""
        region = getattr(self, "vram_region", None)
        device = getattr(self, "name", self.driver_name)

        def locate() -> BufferLocation:
            memory = buf.location or "none"
            return BufferLocation(device, memory, region if memory == "vram" else None)

        dmabuf.locate = locate

    def mapping_current(self, dmabuf: DmaBuf, sgt: SgTable) -> bool:
        """Whether ``sgt`` still points at the buffer's bytes (stale-DMA detection).

        The default compares the table's epoch with the buffer's backing epoch.
        """
        return sgt.epoch == self.backing_epoch(dmabuf)

    def backing_epoch(self, dmabuf: DmaBuf) -> int:
        """How many times the buffer's backing changed; exporters that move override."""
        return 0


EXPORTERS: dict[str, Callable[..., ExporterDriver]] = {}


def register_exporter(name: str) -> Callable[[type[ExporterDriver]], type[ExporterDriver]]:
    """Class decorator: make an exporter selectable by ``name``."""

    def deco(cls: type[ExporterDriver]) -> type[ExporterDriver]:
        EXPORTERS[name] = cls
        return cls

    return deco
