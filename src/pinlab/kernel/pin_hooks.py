"""Hooks through which administrator policy sees dma-buf pins (none exist upstream).

Upstream charges nothing for ``dma_buf_pin`` (``policy-semantics.md`` §1.9, P-12). The
proposals the 2021 debate produced -- charge pins to RLIMIT_MEMLOCK, cap pinned device memory
per cgroup or per device -- need to see each pin, its size and where the exporter put it.
This module is the mechanism for that: an empty list of hooks (upstream behaviour) that
``pinlab.policy`` fills when a proposal is switched on, so ``pinlab.kernel`` never imports
policy.

Contract, as :func:`~pinlab.kernel.dma_buf.dma_buf_pin` applies it: after the exporter's
``pin`` succeeded (so the placement is known), every hook's :meth:`PinHook.pin` runs with the
resv held and ``current`` set; a hook that raises ``KernelError`` denies the pin -- the core
releases the hooks already charged and the exporter pin, then returns that error. The matching
:func:`~pinlab.kernel.dma_buf.dma_buf_unpin` hands each hook its token back. Pins the core takes
on behalf of static importers (attach- or map-time) are not hooked: they are bounded by the
importer's own mappings, not by a userspace request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pinlab.kernel.dmem import DmemRegion

if TYPE_CHECKING:
    from pinlab.kernel.dma_buf import DmaBufAttachment
    from pinlab.kernel.kernel import Task


@dataclass(frozen=True, slots=True)
class BufferLocation:
    """Where an exported buffer's bytes are, as its exporter reports it.

    ``device`` names the exporting device, ``memory`` is ``"vram"`` (device memory), ``"gtt"``,
    ``"system"`` or ``"none"``, and ``region`` the dmem region of device memory, if registered;
    ``driver``, ``capacity`` and ``pool`` serve policies that budget per device or per cgroup.
    """

    device: str
    memory: str
    region: DmemRegion | None = None
    driver: str = ""
    """The exporter's driver name (``xe``, ``amdgpu`` ...)."""
    capacity: int = 0
    """Bytes of the exporting device's device memory (0: none, or not TTM-managed)."""
    pool: object | None = None
    """The dmem pool the buffer's device memory is charged to (None: not charged)."""

    @property
    def device_memory(self) -> bool:
        return self.memory == "vram"


class PinHook(Protocol):
    """One policy's view of ``dma_buf_pin`` / ``dma_buf_unpin``."""

    name: str

    def pin(self, attach: DmaBufAttachment, task: Task | None) -> object:
        """Charge the pin; return a token for :meth:`unpin`, or raise ``KernelError``."""
        ...

    def unpin(self, attach: DmaBufAttachment, token: object) -> None:
        """Release exactly what :meth:`pin` charged."""
        ...
