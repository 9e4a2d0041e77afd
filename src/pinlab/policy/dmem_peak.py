"""``dmem.peak``: the highest dmem usage each cgroup ever reached (queued for 7.3, K-125).

Source: "[PATCH v3] cgroup/dmem: introduce a peak file", Thadeu Lima de Souza Cascardo,
2026-05-14, in drm-misc-next for 7.3. Read-only, not on the root; one ``<region> <bytes>`` line
per registered region: the page_counter watermark of the cgroup's pool -- hierarchical, so the
cgroup's descendants count -- since the pool was created, ``max`` only at ``PAGE_COUNTER_MAX``,
0 where no pool exists. It cannot be reset.

The dmem controller adds the file by itself under a profile that has it (``next``); on earlier
presets the opt-in policy ``dmem-peak`` (:mod:`pinlab.policy.proposals.dmem_peak`, P-63) adds
the same file, as a backport would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pinlab.kernel.dmem import DmemRegion
from pinlab.policy.cgroup import CfType, Cgroup, CgroupFile, CgroupSubsys, CgroupTree

if TYPE_CHECKING:
    from pinlab.policy.dmem import DmemCgroupController

NAME = "dmem-peak"


class DmemPeakFile(CgroupSubsys):
    """The ``dmem.peak`` file of one dmem controller (registered as its own subsystem so that
    the controller's own file list stays the 6.14 one)."""

    name = NAME

    def __init__(self, dmem: DmemCgroupController) -> None:
        self.dmem = dmem

    def cftypes(self) -> Sequence[CgroupFile]:
        from pinlab.policy.dmem_limits import dmemcg_limit_show

        def show(cgrp: Cgroup) -> str:
            def peak(region: DmemRegion) -> int:
                pool = self.dmem.find_pool(cgrp, region)
                return pool.cnt.watermark if pool is not None else 0

            return dmemcg_limit_show(self.dmem.regions, peak)

        return (CgroupFile("dmem.peak", show, None, CfType.NOT_ON_ROOT),)

    def uninstall(self) -> None:
        """A backport cannot be unloaded; the file stays (``uninstall`` is for symmetry)."""


def add_peak_file(tree: CgroupTree, dmem: DmemCgroupController) -> DmemPeakFile:
    """Register ``dmem.peak`` for ``dmem`` in ``tree`` (once: a second call returns the same)."""
    found = tree.controller(NAME)
    if isinstance(found, DmemPeakFile):
        return found
    return tree.register(DmemPeakFile(dmem))
