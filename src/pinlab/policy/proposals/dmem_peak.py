"""``dmem-peak``: the 7.3 ``dmem.peak`` file on an earlier preset (a backport, P-63).

Who proposed it: Thadeu Lima de Souza Cascardo (Igalia), "[PATCH v3] cgroup/dmem: introduce a
peak file" (2026-05-14), queued in drm-misc-next for 7.3; preset ``next`` has it by itself
(K-125). Unlike the other proposals it limits nothing: it is a *reading* an administrator needs
to size ``dmem.max`` and ``dmem.min`` -- the highest usage each cgroup (with its descendants)
ever reached per region, which ``dmem.current`` loses as soon as the usage falls. The file's
rules are :mod:`pinlab.policy.dmem_peak`'s.
"""

from __future__ import annotations

from typing import Any

from pinlab.kernel.kernel import Kernel
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.dmem import DmemCgroupController
from pinlab.policy.dmem_peak import NAME, DmemPeakFile, add_peak_file
from pinlab.policy.proposals._base import ProposalSite

__all__ = ["NAME", "DmemPeakFile", "from_policy", "install"]


def install(kernel: Kernel, tree: CgroupTree, *, dmem: DmemCgroupController | None) -> DmemPeakFile:
    """Add ``dmem.peak`` to ``tree`` for ``dmem``; ``ValueError`` without a dmem controller
    (presets before 6.14)."""
    if dmem is None:
        raise ValueError(
            f"{NAME} reads dmem pools: kernel profile {kernel.profile.name} has no dmem "
            "controller (6.14 on)"
        )
    return add_peak_file(tree, dmem)


def from_policy(settings: Any, site: ProposalSite) -> DmemPeakFile:
    """``[proposals.dmem-peak]`` of a policy file: ``dmem.peak`` in the site's tree."""
    return install(site.kernel, site.tree, dmem=site.dmem)
