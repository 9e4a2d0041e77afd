"""Proposal "dmem-pin-max": a per-cgroup cap on **pinned** device memory (never merged).

Who proposed it. In the 2021 dma-buf P2P discussion (``policy-semantics.md`` §5.2) Christian
König argued that pinned device memory cannot be evicted, so it needs a limit "such as a
cgroup", or a runaway process exhausts VRAM and an unrelated process gets the ENOMEM; Daniel
Vetter listed "a cgroup for pinned buffers" among the options (expecting it to be slow to agree
because of the overlap with memcg). Alistair Popple's series "[PATCH 00/19] mm: Introduce a
cgroup to limit the amount of locked and pinned memory" (an RFC of 24 January 2023; §1.11
cites the linux-mm posting of 6 February 2023) built the generic version -- a ``pins``
controller with ``pins.max`` / ``pins.current`` charged through ``vm_account_pinned()`` -- for
pinned *host* pages; it was not merged (§1.11). Upstream ``dma_buf_pin`` is charged to nothing
(P-12), and the dmem controller that did land in 6.14 limits device-memory *allocation*, not
pins (§2).

What it changes. With the policy installed, every importer ``dma_buf_pin``
(:mod:`pinlab.kernel.pin_hooks`) of a buffer whose exporter reports it in **device memory**
after pinning (``BufferLocation.memory == "vram"``) charges the buffer's size to a per-region
pin counter of the **pinning task's** cgroup and of every ancestor -- the dmem charging rule
(P-16) applied to pins. Two new files, which do not exist upstream, show and limit it with
the dmem syntax (one ``<region> <value>`` line per region, K/M/G suffixes, ``max``):

* ``dmem.pin.current`` (every cgroup): bytes pinned from this subtree, per region;
* ``dmem.pin.max`` (not on the root): the cap. Like Popple's ``pins.max`` a value below the
  current total is accepted and binds new pins only -- existing pins are never revoked.

A pin that would take any level over its cap is denied: the exporter pin is undone by the core
and the importer sees **-ENOMEM** -- the errno Popple's ``vm_account_pinned()`` returns when
the pins cgroup refuses ("0 on success, -ENOMEM if a limit would be exceeded", its internal
``pins_try_charge`` being ``-EAGAIN``), which is also what ``ib_umem_get`` returns for an
RLIMIT_MEMLOCK overrun (P-1) and what a dmem-limited allocation shows userspace (P-28): this
is a per-cgroup *memory limit*, and existing userspace already reads ENOMEM that way.
(``-EAGAIN`` or ``-EBUSY`` would invite a retry that cannot succeed while the cgroup's pins
stay, and ``-ENOSPC`` -- which the per-device ``device-pin-cap`` returns -- says "this
device's budget is full" rather than "your cgroup is over its limit".) Denials are counted
per policy by errno (:attr:`DmemPinMax.denials`, ``{"-ENOMEM": n}``) and per refusing level
(its ``failcnt``).

Counting rules (the same as ``device-pin-cap``'s): a cap on pinned device *bytes* counts the
device memory actually held pinned -- the first hooked pin of a buffer charges its size to the
pinning task's cgroup, further pins of the already pinned buffer are free, and the last unpin
returns the charge to the cgroup that paid, wherever the task or its cgroup went since. A pin
that leaves the buffer outside device memory (amdgpu's migrate-on-pin to GTT) charges
nothing. Pins the core takes for static importers are not hooked (pin_hooks.py). Without a
dmem region (presets before 6.14, or a driver that registers none, e.g. habanalabs) the
counter is keyed by ``<exporting device>/<memory>`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pinlab.kernel.dma_buf import DmaBufAttachment
from pinlab.kernel.dmem import DmemRegion
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import Kernel, Task
from pinlab.kernel.pin_hooks import BufferLocation
from pinlab.policy.cgroup import CfType, Cgroup, CgroupFile, CgroupSubsys, CgroupTree
from pinlab.policy.dmem import DmemCgroupController, PoolTable, RegionPool
from pinlab.policy.dmem_limits import dmemcg_limit_write, format_limit
from pinlab.policy.page_counter import PAGE_COUNTER_MAX
from pinlab.policy.proposals._base import (
    BufferCharge,
    BufferCharges,
    PinHookPolicy,
    ProposalSite,
)

NAME = "dmem-pin-max"
DENIAL_ERRNO = Errno.ENOMEM


class PinPool(RegionPool):
    """Pinned bytes of one region in one cgroup (a counter without protection)."""

    __slots__ = ()
    label = "dmem.pin"
    kind = "pin pool"
    protection = False


class PinCharge(BufferCharge[PinPool]):
    """What one buffer's pins charged, and where: the token :meth:`DmemPinMax.pin` returns
    for every pin of that buffer; the last unpin returns ``size`` to ``pool``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<pin charge {self.size} to {self.pool.cgroup.path} x{self.pins}>"


@dataclass(frozen=True, slots=True)
class PinPoolStats:
    """One pin pool's numbers for reports."""

    cgroup: str
    region: str
    current: int
    peak: int
    max: int
    failcnt: int


class DmemPinMax(PinHookPolicy, CgroupSubsys):
    """The dmem-pin-max policy: a :class:`~pinlab.kernel.pin_hooks.PinHook` (through
    :class:`~pinlab.policy.proposals._base.PinHookPolicy`) plus the cgroup files
    ``dmem.pin.current`` / ``dmem.pin.max`` (a :class:`~pinlab.policy.cgroup.CgroupSubsys`
    named ``dmem-pin-max``).

    Region names in the files are those of the dmem controller (``dmem``), when one is
    registered in the tree, followed by regions only this policy has seen or was given
    (:meth:`register_region`).

    Attributes:
        charged: buffers charged since creation; ``denials``: refused pins by errno.
        warnings: page_counter WARNs (an uncharge of more than was charged).
    """

    name = NAME

    def __init__(self, tree: CgroupTree, dmem: DmemCgroupController | None = None) -> None:
        PinHookPolicy.__init__(self)
        self.tree = tree
        if dmem is None:
            found = tree.controller("dmem")
            dmem = found if isinstance(found, DmemCgroupController) else None
        self.dmem = dmem
        self._own_regions: list[DmemRegion] = []
        self.warnings: list[str] = []
        self._pools: PoolTable[PinPool] = PoolTable(
            tree, lambda cgrp, region, parent: PinPool(cgrp, region, parent, self.warnings)
        )
        self._held = BufferCharges(NAME, PinCharge)
        self.charged = 0
        tree.register(self)

    # -- regions --------------------------------------------------------------------------------
    def regions(self) -> list[DmemRegion]:
        """Regions listed in the files: the dmem controller's, then this policy's own."""
        shared = list(self.dmem.regions) if self.dmem is not None else []
        extra = [r for r in self._own_regions if not any(r is s for s in shared)]
        return [r for r in shared + extra if not r.unregistered]

    def register_region(self, region: DmemRegion) -> DmemRegion:
        """Make ``region`` known (so a cap can be written before the first pin)."""
        if not any(r is region for r in self._own_regions):
            self._own_regions.append(region)
        return region

    def region_by_name(self, name: str) -> DmemRegion | None:
        for region in self.regions():
            if region.name == name:
                return region
        return None

    def _region_of(self, loc: BufferLocation) -> DmemRegion | None:
        """The region a pin in device memory is charged to (None: not device memory)."""
        if not loc.device_memory:
            return None
        region = loc.region
        if region is None:
            name = f"{loc.device}/{loc.memory}"
            region = self.region_by_name(name)
            if region is None:
                region = self.register_region(DmemRegion(name, 0))
        elif not any(r is region for r in self.regions()):
            self.register_region(region)
        return None if region.unregistered else region

    # -- pools ----------------------------------------------------------------------------------
    def find_pool(self, cgrp: Cgroup | str, region: DmemRegion) -> PinPool | None:
        return self._pools.find(cgrp, region)

    def get_pool(self, cgrp: Cgroup, region: DmemRegion) -> PinPool:
        return self._pools.get(cgrp, region)

    # -- the PinHook interface ------------------------------------------------------------------
    def pin(self, attach: DmaBufAttachment, task: Task | None) -> PinCharge | None:
        """Charge a ``dma_buf_pin`` of ``attach`` to ``task``'s cgroup and its ancestors.

        A buffer this policy already holds charged costs nothing more (one more pin on its
        token). Nothing is charged when the exporter publishes no location or the pinned
        buffer is not in device memory. Over a ``dmem.pin.max`` anywhere up the tree:
        -ENOMEM, the refusing level's failcnt and ``denials["-ENOMEM"]`` grow, and nothing
        stays charged.
        """
        dmabuf = attach.dmabuf
        held = self._held.repin(dmabuf)
        if held is not None:
            return held
        loc = self._location(dmabuf)
        if loc is None:
            return None
        region = self._region_of(loc)
        if region is None:
            return None
        cgrp = self.tree.cgroup_of(task)
        pool = self.get_pool(cgrp, region)
        size = dmabuf.size
        fail = pool.cnt.try_charge(size)
        if fail is not None:
            limit = fail.owner
            assert isinstance(limit, PinPool)
            raise self._deny(
                KernelError(
                    DENIAL_ERRNO,
                    "dma_buf_pin",
                    f"{NAME}: {limit.cgroup.path} dmem.pin.max {region.name} "
                    f"{format_limit(limit.cnt.max)}, {limit.cnt.usage} pinned + {size} "
                    "would exceed it",
                )
            )
        cgrp.css_get()
        self.charged += 1
        return self._held.add(PinCharge(dmabuf, pool, size))

    def unpin(self, attach: DmaBufAttachment, token: object) -> None:
        """One pin fewer; the buffer's last one returns exactly what was charged."""
        charge = self._held.release(token)
        if charge is not None:
            charge.pool.cnt.uncharge(charge.size)
            charge.pool.cgroup.css_put()

    @property
    def held(self) -> int:
        """Buffers currently charged (held pinned in device memory through hooked pins)."""
        return len(self._held)

    # -- cgroup callbacks and files ---------------------------------------------------------------
    def css_offline(self, cgrp: Cgroup) -> None:
        """A removed cgroup's caps return to ``max`` (as dmem's limits do, P-32)."""
        for pool in self._pools.of(cgrp):
            pool.cnt.max = PAGE_COUNTER_MAX

    def css_released(self, cgrp: Cgroup) -> None:
        self._pools.release(cgrp)

    def cftypes(self) -> Sequence[CgroupFile]:
        current = self._pools.show(self.regions, lambda p: p.cnt.usage if p else 0)
        cap = self._pools.show(self.regions, lambda p: p.cnt.max if p else PAGE_COUNTER_MAX)
        return (
            CgroupFile("dmem.pin.current", current),
            CgroupFile("dmem.pin.max", cap, self._max_write, CfType.NOT_ON_ROOT),
        )

    def _max_write(self, cgrp: Cgroup, text: str) -> None:
        """Set caps with the dmem syntax; stored even below the current total (binds new
        pins only, like ``pins_max_write``)."""

        def apply(region: DmemRegion, value: int) -> None:
            self.get_pool(cgrp, region).cnt.max = value

        dmemcg_limit_write(cgrp, "dmem.pin.max", text, self.region_by_name, apply)

    # -- reporting --------------------------------------------------------------------------------
    def stats(self) -> list[PinPoolStats]:
        """Every pin pool's numbers, cgroups in pre-order (dying ones included)."""
        out = []
        for pool in self._pools.of():
            cnt = pool.cnt
            out.append(
                PinPoolStats(
                    pool.cgroup.path,
                    pool.region.name,
                    cnt.usage,
                    cnt.watermark,
                    cnt.max,
                    cnt.failcnt,
                )
            )
        return out

    def __repr__(self) -> str:
        denied = sum(self.denials.values())
        return f"<{NAME}: {self.held} buffers held, {denied} pins denied>"


def install(
    kernel: Kernel, tree: CgroupTree, *, dmem: DmemCgroupController | None = None
) -> DmemPinMax:
    """Switch the proposal on: register its files in ``tree`` and hook ``dma_buf_pin``;
    returns the policy (``.uninstall()`` to stop)."""
    policy = DmemPinMax(tree, dmem)
    policy.install(kernel)
    return policy


def from_policy(settings: Any, site: ProposalSite) -> DmemPinMax:
    """``[proposals.dmem-pin-max]`` of a policy file: its files in the site's cgroup tree."""
    return install(site.kernel, site.tree, dmem=site.dmem)
