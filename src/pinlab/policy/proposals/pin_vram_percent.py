"""``pin-vram-percent``: xe's per-device budget for dma-buf pins in VRAM (out of tree).

Who proposed it: Intel, in the DKMS backport of xe for distribution kernels
(intel-gpu/xekmd-backports, README section "DMA-VRAM-PINNING" and xe_ttm_vram_mgr.c, 2026): the
module parameter ``pin_vram_percent`` (0-100, default 50; 0 = no limit). Per VRAM region the
driver computes, once at load, a budget of region size × percent / 100 for dma-buf pins and
refuses a pin that would exceed it; its debugfs shows ``pin_dmabuf_used``,
``pin_dmabuf_limit`` and ``pin_total_used``. It is compiled only for kernels without dmem
region registration (before 6.14) and was never proposed upstream (``policy.md`` §1.11, P-61).
The check's code is not in the sources pinlab could read -- only the README, the init and
debugfs code -- so this models the README's rule.

What it changes: each ``dma_buf_pin`` that leaves a buffer of a listed driver (default ``xe``)
in **device memory** counts the buffer's size once against its device's budget -- the first
pin of a buffer charges it, further pins of the same buffer are free, the last unpin returns
it (the counting of ``device-pin-cap``). A pin that would take the device's dma-buf-pinned
bytes over ``capacity × percent // 100`` is refused with **-ENOSPC** (the README's errno);
``used + size == budget`` is allowed. Pins that leave the buffer in TT or system memory, and
buffers of other drivers, are not counted. The budget is fixed when the policy is installed
(the parameter is read at load), so it needs the device's VRAM size from its exporter.

Modelling note: the hook runs after the exporter's pin, so a refused pin may already have
validated the BO in VRAM (xe keeps it there only when every attachment is P2P); the core undoes
the pin, the importer sees the same -ENOSPC.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pinlab.kernel.errno import Errno, err
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pin_hooks import BufferLocation
from pinlab.policy.proposals._base import DevicePinBudget, ProposalSite

NAME = "pin-vram-percent"
DEFAULT_PERCENT = 50


@dataclass(frozen=True, slots=True)
class PinVramUsage:
    """One device's counters, as xe's VRAM manager debugfs shows them."""

    device: str
    pin_dmabuf_used: int
    pin_dmabuf_limit: int | None  # None: percent 0, no limit


class PinVramPercent(DevicePinBudget):
    """The ``pin-vram-percent`` pin hook: ``percent`` of each device's VRAM may be pinned
    through dma-buf, for exporters whose driver is in ``drivers``."""

    name = NAME

    def __init__(self, percent: int = DEFAULT_PERCENT, drivers: Iterable[str] = ("xe",)) -> None:
        super().__init__()
        if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
            raise ValueError(f"pin_vram_percent must be an integer 0..100, got {percent!r}")
        self.percent = percent
        self.drivers = frozenset(drivers)
        self.limits: dict[str, int | None] = {}

    def limit_for(self, device: str, capacity: int) -> int | None:
        """The device's budget, fixed at its first use (the module parameter is read once)."""
        if device not in self.limits:
            self.limits[device] = capacity * self.percent // 100 if self.percent else None
        return self.limits[device]

    def counts(self, loc: BufferLocation) -> bool:
        return loc.device_memory and loc.driver in self.drivers

    def check(self, loc: BufferLocation, used: int, size: int) -> None:
        limit = self.limit_for(loc.device, loc.capacity)
        if limit is not None and used + size > limit:
            raise self._deny(
                err(
                    Errno.ENOSPC,
                    "dma_buf_pin",
                    f"{loc.device}: pin_dmabuf_used {used} + {size} > pin_dmabuf_limit "
                    f"{limit} ({self.percent}% of {loc.capacity})",
                )
            )

    def usage(self) -> list[PinVramUsage]:
        """Every device seen so far, in first-use order."""
        return [PinVramUsage(d, self.pinned.get(d, 0), limit) for d, limit in self.limits.items()]


def install(
    kernel: Kernel, percent: int = DEFAULT_PERCENT, drivers: Iterable[str] = ("xe",)
) -> PinVramPercent:
    """Switch the budget on for ``kernel``; returns the policy (``.uninstall()`` to stop)."""
    policy = PinVramPercent(percent, drivers)
    policy.install(kernel)
    return policy


def from_policy(settings: Any, site: ProposalSite) -> PinVramPercent:
    """``[proposals.pin-vram-percent]`` of a policy file (``percent``, ``drivers``)."""
    return install(site.kernel, settings.percent, settings.drivers)
