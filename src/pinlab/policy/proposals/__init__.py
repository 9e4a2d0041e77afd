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
  ``install(kernel, tree)``.
"""

from __future__ import annotations

from types import ModuleType

from pinlab.policy.proposals import device_pin_cap, memlock_dmabuf_pins, revocable_pins

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


def summary(name: str) -> str:
    """The first line of a proposal module's docstring (``KeyError`` for an unknown id)."""
    doc = PROPOSALS[name].__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else name


__all__ = ["PROPOSALS", "summary"]
