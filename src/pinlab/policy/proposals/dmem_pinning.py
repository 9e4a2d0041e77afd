"""``dmem-pinning``: pinned device memory charged to dmem and refused above ``dmem.min`` (RFC).

Who proposed it: Maarten Lankhorst, "[RFC 0/3] cgroups: Add support for pinned device memory"
(2025-08-19; intel-xe, dri-devel, cgroups, linux-mm): 1/3 "page_counter: Allow for pinning
some amount of memory", 2/3 "cgroup/dmem: Implement pinning device memory", 3/3 "drm/xe: Add
DRM_XE_GEM_CREATE_FLAG_PINNED flag and implementation". An open RFC, never merged
(``policy.md`` §1.11, P-62). Its rationale: memory up to ``dmem.min`` is already guaranteed
never to be evicted, so pinning it costs the system nothing it had not promised.

The RFC's rule, which pinlab applies: pinning requires the memory to be charged already; a pin
of ``n`` bytes adds ``n`` to a ``pinned`` count of the charged pool **and of every ancestor**,
and fails if at any level below the root ``pinned`` would exceed that level's ``dmem.min``
(the root has no ``dmem.min``; that it never refuses is pinlab's reading) -- the levels
already done are undone and the refusal is counted for the refusing level
(``page_counter_try_pin``; the RFC bumps ``failcnt`` only with ``track_failcnt``, which dmem
never sets, so this count is pinlab's, P-64). ``dmem_cgroup_unpin`` subtracts at every level
(an underflow WARNs and clamps to 0). A read-only file ``dmem.pinned`` (on every cgroup, the
root included) shows the pinned bytes per region.

Where pinlab applies it: the RFC pins xe BOs created with ``DRM_XE_GEM_CREATE_FLAG_PINNED``;
pinlab has no such flag and applies the rule to what the 2021 debate was about, every
``dma_buf_pin`` that leaves a buffer in **device memory** -- charged to the pool the buffer's
VRAM was charged to (its allocating cgroup, not the pinning task's), once per buffer (further
pins of a pinned buffer are free, the last unpin returns it). Buffers outside device memory or
not charged to dmem (presets before 6.14, drivers without a region) are not counted.

Errno: the RFC's ``dmem_cgroup_try_pin`` returns ``-EAGAIN`` and xe reports it to userspace as
**-ENOSPC**, which the importer sees here. Not modelled: the RFC's change to effective
protection (a level whose pinned exceeds its min counts as min 0, and ``evict_valuable``
compares usage against emin + pinned) -- pinned BOs are never evicted anyway; only the
protection of the cgroup's *other* BOs would change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pinlab.kernel.dma_buf import DmaBufAttachment
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import Kernel, Task
from pinlab.policy.cgroup import Cgroup, CgroupFile, CgroupSubsys, CgroupTree
from pinlab.policy.dmem import DmemCgroupController, DmemPool
from pinlab.policy.proposals._base import (
    BufferCharge,
    BufferCharges,
    PinHookPolicy,
    ProposalSite,
)

NAME = "dmem-pinning"
DENIAL_ERRNO = Errno.ENOSPC


class PinnedCharge(BufferCharge[DmemPool]):
    """One buffer's pin: the pool it was charged to, its size and how many pins hold it."""

    __slots__ = ()


class DmemPinning(PinHookPolicy, CgroupSubsys):
    """The RFC's ``dmem_cgroup_try_pin`` / ``dmem_cgroup_unpin`` as a pin hook, and its file
    ``dmem.pinned``. ``pinned`` maps each pool to its pinned bytes (hierarchical);
    ``failcnt`` counts refusals per pool; ``warnings`` the unpin underflows."""

    name = NAME

    def __init__(self, tree: CgroupTree, dmem: DmemCgroupController) -> None:
        PinHookPolicy.__init__(self)
        self.tree = tree
        self.dmem = dmem
        self.pinned: dict[DmemPool, int] = {}
        self.failcnt: dict[DmemPool, int] = {}
        self.warnings: list[str] = []
        self._held = BufferCharges(NAME, PinnedCharge)
        tree.register(self)

    # -- page_counter_try_pin / page_counter_unpin --------------------------------------------
    def try_pin(self, pool: DmemPool, size: int) -> DmemPool | None:
        """Pin ``size`` bytes at ``pool`` and every ancestor; None on success, else the level
        whose ``min`` refused (nothing stays pinned). The root-level pool counts but never
        refuses: the root has no ``dmem.min`` [inferred: otherwise no pin could succeed]."""
        done: list[DmemPool] = []
        level: DmemPool | None = pool
        while level is not None:
            new = self.pinned.get(level, 0) + size
            if level.parent is not None and new > level.cnt.min:
                for undo in done:
                    self.pinned[undo] -= size
                self.failcnt[level] = self.failcnt.get(level, 0) + 1
                return level
            self.pinned[level] = new
            done.append(level)
            level = level.parent
        return None

    def unpin_pool(self, pool: DmemPool, size: int) -> None:
        level: DmemPool | None = pool
        while level is not None:
            new = self.pinned.get(level, 0) - size
            if new < 0:
                self.warnings.append(f"dmem.pinned {level.cgroup.path}: unpin below 0")
                new = 0
            self.pinned[level] = new
            level = level.parent

    # -- the PinHook interface ---------------------------------------------------------------
    def pin(self, attach: DmaBufAttachment, task: Task | None) -> PinnedCharge | None:
        dmabuf = attach.dmabuf
        held = self._held.repin(dmabuf)
        if held is not None:
            return held
        loc = self._location(dmabuf)
        if loc is None or not loc.device_memory or not isinstance(loc.pool, DmemPool):
            return None
        pool = loc.pool
        refused = self.try_pin(pool, dmabuf.size)
        if refused is not None:
            raise self._deny(
                KernelError(
                    DENIAL_ERRNO,
                    "dma_buf_pin",
                    f"{NAME}: {refused.cgroup.path} {pool.region.name}: "
                    f"{self.pinned.get(refused, 0)} pinned + {dmabuf.size} > dmem.min "
                    f"{refused.cnt.min}",
                )
            )
        return self._held.add(PinnedCharge(dmabuf, pool, dmabuf.size))

    def unpin(self, attach: DmaBufAttachment, token: object) -> None:
        charge = self._held.release(token)
        if charge is not None:
            self.unpin_pool(charge.pool, charge.size)

    # -- cgroup file ---------------------------------------------------------------------------
    def cftypes(self) -> Sequence[CgroupFile]:
        return (CgroupFile("dmem.pinned", self._pinned_show),)

    def _pinned_show(self, cgrp: Cgroup) -> str:
        lines = []
        for region in self.dmem.regions:
            pool = self.dmem.find_pool(cgrp, region)
            lines.append(f"{region.name} {self.pinned.get(pool, 0) if pool is not None else 0}\n")
        return "".join(lines)

    def __repr__(self) -> str:
        return f"<{NAME}: {len(self._held)} buffers pinned, {sum(self.denials.values())} denied>"


def install(kernel: Kernel, tree: CgroupTree, *, dmem: DmemCgroupController | None) -> DmemPinning:
    """Switch the RFC on: register ``dmem.pinned`` in ``tree`` and hook ``dma_buf_pin``.
    ``ValueError`` without a dmem controller (presets before 6.14)."""
    if dmem is None:
        raise ValueError(
            f"{NAME} charges pins to dmem pools: kernel profile {kernel.profile.name} has no "
            "dmem controller (6.14 on)"
        )
    policy = DmemPinning(tree, dmem)
    policy.install(kernel)
    return policy


def from_policy(settings: Any, site: ProposalSite) -> DmemPinning:
    """``[proposals.dmem-pinning]`` of a policy file: ``dmem.pinned`` in the site's tree."""
    return install(site.kernel, site.tree, dmem=site.dmem)
