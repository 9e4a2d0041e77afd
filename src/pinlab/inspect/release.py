"""What the host's running release decides, beside the profile pinlab suggests for it.

A profile is a preset of a few releases (:data:`pinlab.kernel.profile.PRESETS`): a host on 6.8
is modelled by 5.16, the newest released preset not above it (:func:`suggest_kernel`). Where
the release differs from that preset in what decides a P2P answer, the platform file carries
the release's own fact -- its P2PDMA whitelist (K-133 … K-135, :func:`host_whitelist`) and its
host-bridge lookup rule (K-132, :func:`host_root_port_lookup`) -- each with a note; an exporter
the suggested profile lacks is a note too (:func:`absent_drivers`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pinlab.drivers import EXPORTERS
from pinlab.inspect.proc import SystemInfo
from pinlab.kernel.pci_ids import (
    p2pdma_whitelist_release,
    pci_p2pdma_whitelist,
    pci_p2pdma_whitelist_lookup,
)
from pinlab.kernel.profile import PRESETS as KERNEL_PRESETS
from pinlab.platform.spec import DeviceSpec, HostBridgeSpec, WhitelistEntrySpec

__all__ = ["absent_drivers", "host_root_port_lookup", "host_whitelist", "suggest_kernel"]


def host_root_port_lookup(
    system: SystemInfo | None,
    kernel: str | None,
    host_bridges: Sequence[HostBridgeSpec],
    notes: list[str],
) -> bool | None:
    """The running release's host-bridge lookup rule for the file (K-132), when it differs
    from the suggested profile's and one of the host's bridges is known by a first Root Port:
    a 6.8 host finds it (v5.19 on), its profile 5.16 would not."""
    version = system.stable_version if system is not None else None
    if system is None or version is None or kernel is None:
        return None
    host_rule = version >= (5, 19, 0)
    if host_rule is KERNEL_PRESETS[kernel].p2pdma_whitelist_root_port:
        return None
    by_port = [hb.name for hb in host_bridges if hb.root_port_slot is not None]
    if not by_port:
        return None
    finds = "finds" if host_rule else "does not find"
    notes.append(
        f"Linux {system.release} {finds} {', '.join(by_port)} by a first Root Port (v5.19 "
        f"on), unlike profile {kernel}: the file carries the host's rule "
        "(p2pdma_root_port_lookup)"
    )
    return host_rule


def host_whitelist(
    system: SystemInfo | None,
    kernel: str | None,
    host_bridges: Sequence[HostBridgeSpec],
    notes: list[str],
) -> tuple[WhitelistEntrySpec, ...] | None:
    """The running release's P2PDMA whitelist for the file, when it judges one of the host's
    bridges otherwise than the suggested profile's table (K-133 … K-135): a host on 6.8 is
    modelled by profile 5.16, whose table lacks the root of Xeons since Ice Lake (0x09a2)
    that 6.8 lists."""
    version = system.stable_version if system is not None else None
    if system is None or version is None or kernel is None:
        return None
    profile = KERNEL_PRESETS[kernel]
    host_release = p2pdma_whitelist_release(version)
    if host_release is profile.p2pdma_whitelist:
        return None
    host_table = pci_p2pdma_whitelist(host_release)
    profile_table = pci_p2pdma_whitelist(profile.p2pdma_whitelist)
    any_host, any_profile = host_release.any_device, profile.p2pdma_whitelist.any_device
    differ = [
        hb.name
        for hb in host_bridges
        if pci_p2pdma_whitelist_lookup(host_table, hb.vendor, hb.device, any_device=any_host)
        != pci_p2pdma_whitelist_lookup(profile_table, hb.vendor, hb.device, any_device=any_profile)
    ]
    if not differ:
        return None
    notes.append(
        f"Linux {system.release} compiles the P2PDMA whitelist of {host_release.value} and "
        f"later, profile {kernel} that of {profile.p2pdma_whitelist.value}, and they judge "
        f"{', '.join(differ)} differently: the file carries the host's (p2pdma_whitelist)"
    )
    return tuple(WhitelistEntrySpec.of(e) for e in host_table)


def suggest_kernel(system: SystemInfo | None) -> str | None:
    """The newest released pinlab kernel profile whose version is not above the running
    release (``next`` is queued work, not a kernel anyone runs)."""
    if system is None or system.version is None:
        return None
    fitting = [p for p in KERNEL_PRESETS.values() if p.released and p.version <= system.version]
    return max(fitting, key=lambda p: p.version).name if fitting else None


def absent_drivers(devices: Sequence[DeviceSpec], kernel: str) -> list[str]:
    """A note for each exporter of ``devices`` that does not exist in kernel profile
    ``kernel`` (``ExporterDriver.exists_in``: xe before 6.12), naming the oldest released
    profile that has it."""
    notes = []
    profile = KERNEL_PRESETS[kernel]
    for drv in dict.fromkeys(d.driver for d in devices):
        model = EXPORTERS[drv]
        if model.exists_in(profile):
            continue
        having = [p for p in KERNEL_PRESETS.values() if p.released and model.exists_in(p)]
        if having:
            oldest = min(having, key=lambda p: p.version).name
            notes.append(
                f"{drv} needs a kernel profile with {drv} ({oldest} or later), not {kernel}"
            )
        else:
            notes.append(f"{drv} exists in no released kernel profile pinlab models")
    return notes
