"""``device-pin-cap``: a per-device cap on pinned device memory.

Who proposed it: AMD, as the amdgpu module parameter ``dmabuf_pin_max_mb`` in ROCm/amdgpu
PR #212 ("Fix/ttm deadlock and rdma pin limit", April 2026, open): a dedicated
``rdma_pinned_bytes`` counter per GPU and a cap on RDMA-pinned VRAM, because unbounded pinning
under multi-process RDMA load starved other processes of VRAM (``policy-semantics.md`` §1.11,
``cost-model.md`` §6.3 ``pin.max_per_device``). The same worry -- one process pinning all of
VRAM -- was Christian König's and Dave Airlie's in 2021 (§5.2). Never merged upstream.

What it changes: each ``dma_buf_pin`` whose buffer the exporter placed in **device memory**
(``attach.dmabuf.locate()`` → ``BufferLocation.device_memory``) counts the buffer's size once
against its device's cap -- the first pin of a buffer charges it, further pins of the same
(already pinned) buffer are free, and the last unpin returns it, so the counter is the device
memory actually held pinned. Pins that landed in GTT or system memory (amdgpu ≤6.15 migrating
on pin) and buffers without a location are not counted. A pin that would take the device
above its cap is refused; ``usage + size == cap`` is allowed.

Errno: **ENOSPC**, as the proposal returns (its test plan reports "126 excess rejected with
-ENOSPC", and it teaches PeerDirect to tell quota rejections (-ENOSPC) from other pin errors).
ENOSPC also says the right thing: the *device's pin budget* is full, not the caller's memory
(ENOMEM, which RLIMIT_MEMLOCK and TTM use) and not a permission problem (EPERM); TTM itself
uses -ENOSPC for "this placement has no room". The parameter's ``0`` means "no cap" in the
PR; here ``None`` means no cap and ``0`` forbids device-memory pins outright.

Modelling note: the hook runs after the exporter's pin (that is when the placement is known),
so a refused pin may already have moved the buffer into VRAM before the core undoes the pin;
the PR checks before pinning. The refusal the importer sees is the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pinlab.kernel.errno import Errno, err
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pin_hooks import BufferLocation
from pinlab.policy.proposals._base import DevicePinBudget, ProposalSite

NAME = "device-pin-cap"


class DevicePinCap(DevicePinBudget):
    """The ``device-pin-cap`` pin hook.

    ``max_per_device`` is the default cap in bytes (None: no cap); ``per_device`` overrides it
    for devices by name (``BufferLocation.device``, the exporter's device name). ``pinned``
    holds the pinned device-memory bytes per device.
    """

    name = NAME

    def __init__(
        self,
        max_per_device: int | None = None,
        per_device: Mapping[str, int | None] | None = None,
    ) -> None:
        super().__init__()
        for cap in [max_per_device, *(per_device or {}).values()]:
            if cap is not None and cap < 0:
                raise ValueError(f"a pin cap must be >= 0 bytes or None, got {cap}")
        self.max_per_device = max_per_device
        self.per_device: dict[str, int | None] = dict(per_device or {})

    def cap_for(self, device: str) -> int | None:
        """The cap in bytes for ``device`` (None: unlimited)."""
        return self.per_device.get(device, self.max_per_device)

    def check(self, loc: BufferLocation, used: int, size: int) -> None:
        cap = self.cap_for(loc.device)
        if cap is not None and used + size > cap:
            raise self._deny(
                err(
                    Errno.ENOSPC,
                    "dma_buf_pin",
                    f"{loc.device}: {used} + {size} pinned bytes > cap {cap}",
                )
            )


def install(
    kernel: Kernel,
    max_per_device: int | None = None,
    per_device: Mapping[str, int | None] | None = None,
) -> DevicePinCap:
    """Switch the cap on for ``kernel``; returns the policy (``.uninstall()`` to stop)."""
    policy = DevicePinCap(max_per_device, per_device)
    policy.install(kernel)
    return policy


def from_policy(settings: Any, site: ProposalSite) -> DevicePinCap:
    """``[proposals.device-pin-cap]`` of a policy file (``max_per_device``, ``per_device``)."""
    return install(site.kernel, settings.max_per_device, settings.per_device)
