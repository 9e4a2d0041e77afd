"""``revocable-pins``: under memory pressure the exporter revokes revocable pinned imports.

Who proposed it: the mechanism is the 2026 revoke series -- Leon Romanovsky's "dma-buf: Use
revoke mechanism to invalidate shared buffers" (``move_notify`` → ``invalidate_mappings``,
``dma_buf_attach_revocable()``; drm-misc-next, February 2026) and Jacob Moroni's RDMA
follow-up (March 2026) that lets a *pinned* RDMA import be revocable
(``ib_umem_dmabuf_get_pinned_revocable_and_lock``) -- see ``kernel-semantics.md`` §1.4, K-90,
K-91. The idea of using revocation to take pinned memory back goes back to Daniel Vetter's
2021 list of options ("a soft pin whose revocation is catastrophic for the importer",
``policy-semantics.md`` §5.2). Upstream no policy uses it to reclaim pinned VRAM (§1.11): TTM
never evicts a pinned BO (K-60). This proposal is that policy.

What it changes: on each TTM device it is installed on (``bdev.revoke_pinned``), when the
eviction walk finds nothing evictable, TTM offers it the pinned BOs (least recently pinned
first, resv held). For an exported BO whose every pin is held by a *revocable* attachment
(``dma_buf_attach_revocable``), the policy calls ``dma_buf_invalidate_mappings`` under the held
resv: each revocable importer revokes -- the driver stops its hardware, the core unmaps and
unpins -- and the BO, now unpinned, is evicted like any other. The importer has lost its
mapping for good (a revoked EFA MR reports ``revoked``; DMA through it fails) and must
re-register. A BO with any non-revocable pin (a default pinned umem, a static importer's
map-time pin, a driver-internal pin) is left alone: revoking the others would not free it.

Exists only from preset 7.1 (``dma_buf_invalidate_mappings`` and revocable pinned umems);
:meth:`RevocablePins.install` refuses other profiles with a ``ValueError``.

Counters: ``revocations`` (BOs whose pins were revoked), ``revoked_bytes``, ``revoked_attachments``
and ``refused`` (pinned BOs offered but not revocable). ``denials`` stays empty: the policy
refuses no request, it takes memory back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pinlab.kernel.dma_buf import DmaBuf, dma_buf_attach_revocable, dma_buf_invalidate_mappings
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.ttm import TtmBufferObject, TtmDevice
from pinlab.policy.proposals._base import ProposalSite

NAME = "revocable-pins"


class RevocablePins:
    """The ``revocable-pins`` policy: a ``TtmDevice.revoke_pinned`` hook."""

    name = NAME

    def __init__(self) -> None:
        self.kernel: Kernel | None = None
        self.devices: list[TtmDevice] = []
        self.denials: dict[str, int] = {}
        self.revocations = 0
        self.revoked_bytes = 0
        self.revoked_attachments = 0
        self.refused = 0

    @staticmethod
    def check_profile(kernel: Kernel) -> None:
        """``ValueError`` unless the kernel has the 2026 revoke series (preset 7.1)."""
        profile = kernel.profile
        if not (profile.invalidate_mappings and profile.umem_revocable_pinned_ops):
            raise ValueError(
                f"{NAME} needs kernel profile 7.1 (dma_buf_invalidate_mappings and revocable "
                f"pinned imports); this kernel is {profile.name}"
            )

    def install(self, kernel: Kernel, devices: Iterable[TtmDevice]) -> None:
        """Become ``revoke_pinned`` of every TTM device in ``devices`` (of ``kernel``)."""
        self.check_profile(kernel)
        devs = list(devices)
        for bdev in devs:
            if bdev.kernel is not kernel:
                raise ValueError(f"TTM device {bdev.name} belongs to another kernel")
            if bdev.revoke_pinned is not None and bdev.revoke_pinned != self.revoke:
                raise ValueError(f"TTM device {bdev.name} already has a revoke_pinned policy")
        for bdev in devs:
            bdev.revoke_pinned = self.revoke
            if bdev not in self.devices:
                self.devices.append(bdev)
        self.kernel = kernel

    def uninstall(self) -> None:
        """Give the devices back to upstream behaviour (pinned BOs are never evicted)."""
        for bdev in self.devices:
            if bdev.revoke_pinned == self.revoke:
                bdev.revoke_pinned = None
        self.devices.clear()
        self.kernel = None

    @property
    def installed(self) -> bool:
        return self.kernel is not None

    def revoke(self, bo: TtmBufferObject) -> bool:
        """The hook: revoke ``bo``'s pins if every one is revocable; True when its pin count
        dropped to 0. Called by TTM's eviction walk with ``bo``'s resv held."""
        dmabuf = bo.dma_buf
        if not isinstance(dmabuf, DmaBuf) or not bo.pin_count:
            self.refused += 1
            return False
        revocable = [a for a in dmabuf.attachments if dma_buf_attach_revocable(a)]
        revocable_pins = sum(a.importer_pins for a in revocable)
        if revocable_pins < bo.pin_count:
            self.refused += 1
            return False
        held = sum(1 for a in revocable if a.importer_pins)
        dma_buf_invalidate_mappings(dmabuf)
        if bo.pin_count:
            return False
        self.revocations += 1
        self.revoked_bytes += bo.size
        self.revoked_attachments += held
        return True


def install(kernel: Kernel, devices: Iterable[TtmDevice]) -> RevocablePins:
    """Switch the policy on for ``devices`` (e.g. ``[gpu.bdev]``); ``ValueError`` outside 7.1."""
    policy = RevocablePins()
    policy.install(kernel, devices)
    return policy


def from_policy(settings: Any, site: ProposalSite) -> RevocablePins:
    """``[proposals.revocable-pins]`` of a policy file, for the site's GPUs; ``ValueError``
    outside 7.1 or without GPUs to act on."""
    if not site.devices:
        RevocablePins.check_profile(site.kernel)
        raise ValueError("expected the GPUs' TTM devices to act on (ttm_devices), found none")
    return install(site.kernel, site.devices)
