"""Opt-in policies proposed upstream but never merged (policy-semantics.md §1.11).

:data:`PROPOSALS` maps each policy's id to its module. Every module's docstring says who
proposed it and what it changes, and the module offers ``install(...)`` (returning the policy
object, whose ``uninstall()`` switches it off again):

* ``memlock-dmabuf-pins`` -- charge ``dma_buf_pin`` to the pinner's ``pinned_vm`` against
  RLIMIT_MEMLOCK (Jason Gunthorpe, 2021): ``install(kernel)``;
* ``device-pin-cap`` -- a per-device cap on pinned device memory (ROCm/amdgpu PR #212,
  ``dmabuf_pin_max_mb``): ``install(kernel, max_per_device, per_device)``;
* ``revocable-pins`` -- revoke revocable pinned imports under memory pressure (2026 revoke
  series; preset 7.1 only): ``install(kernel, ttm_devices)``;
* ``dmem-pin-max`` -- a per-cgroup cap on pinned device memory (``dmem.pin.max``):
  ``install(kernel, tree)``;
* ``pin-vram-percent`` -- xe's out-of-tree budget for dma-buf pins, a percentage of each
  device's VRAM (``pin_vram_percent``): ``install(kernel, percent, drivers)``;
* ``dmem-pinning`` -- Maarten Lankhorst's RFC: pins charged to dmem and refused above
  ``dmem.min`` (``dmem.pinned``): ``install(kernel, tree, dmem=...)``;
* ``dmem-peak`` -- the 7.3 ``dmem.peak`` file on an earlier preset (a reading, no limit):
  ``install(kernel, tree, dmem=...)``.
"""

from __future__ import annotations

from types import ModuleType

from pinlab.policy.proposals import (
    device_pin_cap,
    dmem_peak,
    dmem_pinning,
    memlock_dmabuf_pins,
    pin_vram_percent,
    revocable_pins,
)

PROPOSALS: dict[str, ModuleType] = {
    memlock_dmabuf_pins.NAME: memlock_dmabuf_pins,
    device_pin_cap.NAME: device_pin_cap,
    revocable_pins.NAME: revocable_pins,
}
"""Policy id → module. Every module has ``install``; the id is the policy's ``name``."""

try:
    from pinlab.policy.proposals import dmem_pin_max
except ImportError:  # pragma: no cover - the cgroup half may be absent in a partial checkout
    pass
else:
    PROPOSALS[dmem_pin_max.POLICY_NAME] = dmem_pin_max

for _module in (pin_vram_percent, dmem_pinning, dmem_peak):
    PROPOSALS[_module.NAME] = _module


def summary(name: str) -> str:
    """The first line of a proposal module's docstring (``KeyError`` for an unknown id)."""
    doc = PROPOSALS[name].__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else name


__all__ = ["PROPOSALS", "summary"]
