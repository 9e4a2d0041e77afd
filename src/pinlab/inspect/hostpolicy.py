"""A host's limits as a pinlab policy document (``pinlab inspect --policy``).

:func:`host_policy` turns a snapshot's limits into the ``pinlab.policy.config`` format
(``policy-semantics.md`` §1 for RLIMIT_MEMLOCK and capabilities, §2 for dmem): one user,
``host`` (the caller's uid, RLIMIT_MEMLOCK soft/hard, ``CAP_IPC_LOCK``/``CAP_SYS_RESOURCE``,
the cgroup it runs in), the dmem regions (``dmem.capacity``) and each cgroup of the caller's
chain with the dmem ``min``/``low``/``max`` it sets. Region names use the platform's device
names as placeholders (``drm/{gpu0}/vram``), so the file applies to the platform ``pinlab
inspect`` wrote (the placeholders become the modelled PCI addresses,
:func:`pinlab.scenarios.policy.policy_document`).
Unknown limits are left out (the policy's defaults apply) and named in the description.

:func:`host_policy_text` renders it as TOML for ``pinlab run --policy``.
"""

from __future__ import annotations

import re
from typing import Any

import tomli_w

from pinlab.inspect.snapshot import Snapshot
from pinlab.units import compact_size

__all__ = ["HOST_USER", "host_policy", "host_policy_text"]

HOST_USER = "host"
"""The policy user that stands for the process ``pinlab inspect`` ran as."""

_CGROUP_NAME = re.compile(r"^[A-Za-z0-9_.:@+-]+$")


def _region(name: str, aliases: dict[str, str]) -> str:
    """``drm/<PCI address>/<region>`` with the address replaced by ``{<device>}``."""
    parts = name.split("/")
    if len(parts) == 3 and parts[0] == "drm" and parts[1] in aliases:
        return f"drm/{{{aliases[parts[1]]}}}/{parts[2]}"
    return name


def host_policy(snap: Snapshot) -> dict[str, Any]:
    """The policy document of ``snap``'s limits (module docstring)."""
    limits = snap.limits
    unknown: list[str] = []
    user: dict[str, Any] = {"uid": limits.uid if limits.uid is not None else 1000}
    if limits.uid is None:
        unknown.append("uid (1000 assumed)")
    if limits.memlock_known:
        user["memlock"] = {
            "soft": compact_size(limits.memlock_soft),
            "hard": compact_size(limits.memlock_hard),
        }
    else:
        unknown.append("RLIMIT_MEMLOCK (the policy default, 8 MiB, applies)")
    if limits.capabilities is not None:
        user["capabilities"] = list(limits.capabilities)
    else:
        unknown.append("capabilities (none assumed)")
    cgroup = (limits.cgroup or "/").strip("/")
    valid = all(_CGROUP_NAME.match(p) for p in cgroup.split("/")) if cgroup else True
    if cgroup and valid:
        user["cgroup"] = cgroup
    devices = {a: n for a, n in snap.aliases().items() if n.startswith(("gpu", "accel"))}
    cgroups: dict[str, dict[str, str]] = {}
    if valid:
        for f in limits.dmem:
            path = f.cgroup.strip("/")
            if not path or f.file == "dmem.current":
                continue
            lines = [
                f"{_region(region, devices)} {compact_size(value, unlimited='max')}"
                for region, value in sorted(f.values.items())
            ]
            if lines:
                cgroups.setdefault(path, {})[f.file] = "\n".join(lines)
        if cgroup and cgroup not in cgroups:
            cgroups[cgroup] = {}
    description = f"limits of {snap.hostname or 'a host'} as read by pinlab inspect"
    if unknown:
        description += "; not read: " + ", ".join(unknown)
    doc: dict[str, Any] = {"description": description, "users": {HOST_USER: user}}
    regions = {
        _region(name, devices): compact_size(size)
        for name, size in sorted(limits.dmem_capacity.items())
    }
    if regions and any(lines for lines in cgroups.values()):
        doc["regions"] = regions
    if cgroups:
        doc["cgroups"] = cgroups
    return doc


def host_policy_text(snap: Snapshot) -> str:
    """:func:`host_policy` as a TOML policy file."""
    header = (
        "# pinlab policy file written by `pinlab inspect --policy`: this host's RLIMIT_MEMLOCK,\n"
        "# capabilities and dmem limits. Region names use the platform's device names\n"
        "# ({gpu0}); use it with: pinlab run SCENARIO --platform <platform> --policy <this>\n\n"
    )
    return header + tomli_w.dumps(host_policy(snap))
