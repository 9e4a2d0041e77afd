"""Opt-in policies proposed upstream but never merged (policy-semantics.md §1.11).

:data:`PROPOSALS` maps each policy's id (the module's ``NAME``) to its module, in the order
policy files, ``pinlab matrix`` and the reports list them; it is the one list of proposals.
Every module's docstring says who proposed it and what it changes, and the module offers
``install(...)`` (returning the policy object, whose ``uninstall()`` switches it off again)
and ``from_policy(settings, site)``, the same from its ``[proposals.<id>]`` table of a policy
file on a :class:`ProposalSite`:

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
    dmem_pin_max,
    dmem_pinning,
    memlock_dmabuf_pins,
    pin_vram_percent,
    revocable_pins,
)
from pinlab.policy.proposals._base import ProposalSite

PROPOSALS: dict[str, ModuleType] = {
    module.NAME: module
    for module in (
        memlock_dmabuf_pins,
        device_pin_cap,
        revocable_pins,
        dmem_pin_max,
        pin_vram_percent,
        dmem_pinning,
        dmem_peak,
    )
}
"""Policy id → module. Every module has ``NAME``, ``install`` and ``from_policy``; the id is
the policy's ``name``."""


def summary(name: str) -> str:
    """The first line of a proposal module's docstring (``KeyError`` for an unknown id)."""
    doc = PROPOSALS[name].__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else name


__all__ = ["PROPOSALS", "ProposalSite", "summary"]
