"""PCI and CPU identifiers P2PDMA consults, and its host-bridge whitelist.

The vendor IDs are ``include/linux/pci_ids.h``'s; the CPUID vendor strings are what
``cpu_supports_p2pdma`` compares (``boot_cpu_data.x86_vendor``); the whitelist is
``pci_p2pdma_whitelist[]`` of ``drivers/pci/p2pdma.c`` (K-83), kept apart from the PCI tree
(:mod:`pinlab.kernel.pci`): the kernel profile names its release's table
(:class:`P2pdmaWhitelistRelease`), and a platform may replace it.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = [
    "PCI_ANY_ID",
    "PCI_DEVICE_ID_INTEL_DSA_DMR",
    "PCI_DEVICE_ID_INTEL_DSA_GNRD",
    "PCI_DEVICE_ID_INTEL_DSA_SPR0",
    "PCI_DEVICE_ID_INTEL_IAA_DMR",
    "PCI_DEVICE_ID_INTEL_IAX_SPR0",
    "PCI_DEVICE_ID_INTEL_ICX_ROOT",
    "PCI_DEVICE_ID_INTEL_QAT_4XXX",
    "PCI_DEVICE_ID_INTEL_QAT_6XXX",
    "PCI_DEVICE_ID_INTEL_QAT_401XX",
    "PCI_DEVICE_ID_INTEL_QAT_402XX",
    "PCI_DEVICE_ID_INTEL_QAT_420XX",
    "PCI_P2PDMA_WHITELIST_V5_17",
    "PCI_P2PDMA_WHITELIST_V5_18",
    "PCI_P2PDMA_WHITELIST_V7_1",
    "PCI_P2PDMA_WHITELIST_V7_2",
    "PCI_VENDOR_ID_AMD",
    "PCI_VENDOR_ID_GOOGLE",
    "PCI_VENDOR_ID_INTEL",
    "X86_VENDOR_AMD",
    "X86_VENDOR_INTEL",
    "P2pdmaWhitelistEntry",
    "P2pdmaWhitelistFlag",
    "P2pdmaWhitelistRelease",
    "p2pdma_whitelist_release",
    "pci_p2pdma_whitelist",
    "pci_p2pdma_whitelist_lookup",
]

PCI_VENDOR_ID_INTEL = 0x8086
PCI_VENDOR_ID_AMD = 0x1022
PCI_ANY_ID = 0xFFFF
"""Wildcard device ID in a whitelist entry (v7.1 on, K-134)."""

X86_VENDOR_INTEL = "GenuineIntel"
X86_VENDOR_AMD = "AuthenticAMD"
"""CPUID vendor strings; ``cpu_supports_p2pdma`` tests for ``X86_VENDOR_AMD``."""


class P2pdmaWhitelistFlag(enum.Flag):
    """Flags of a ``struct pci_p2pdma_whitelist_entry``."""

    NONE = 0
    REQ_SAME_HOST_BRIDGE = 1 << 0
    """The entry allows host-bridge P2P only between devices below this one host bridge."""


@dataclasses.dataclass(frozen=True, slots=True)
class P2pdmaWhitelistEntry:
    """One row of ``pci_p2pdma_whitelist[]``: the host bridge function's vendor and device ID.

    ``device`` may be :data:`PCI_ANY_ID` (any device of that vendor), as v7.1 and later allow.
    """

    vendor: int
    device: int
    flags: P2pdmaWhitelistFlag = P2pdmaWhitelistFlag.NONE

    def matches(self, vendor: int, device: int, *, any_device: bool = True) -> bool:
        """True when ``vendor:device`` is this entry (the whitelist lookup's match test).
        ``any_device``: the kernel reads :data:`PCI_ANY_ID` as every device (v7.1 on, K-134);
        before, the device IDs are compared as they are, and 0xffff matches no real device."""
        wildcard = any_device and self.device == PCI_ANY_ID
        return vendor == self.vendor and (wildcard or device == self.device)


_SAME_HB = P2pdmaWhitelistFlag.REQ_SAME_HOST_BRIDGE


class P2pdmaWhitelistRelease(enum.Enum):
    """Which release's ``pci_p2pdma_whitelist[]`` a kernel has (K-133, K-134, K-135).

    The value names the first release with that table; a kernel profile names its table by
    member (``KernelProfile.p2pdma_whitelist``) and :func:`pci_p2pdma_whitelist` returns it.
    """

    V5_17 = "5.17"
    """Before v5.18: Xeon E5 / E7 v3 (same host bridge only) and Skylake-E."""
    V5_18 = "5.18"
    """v5.18 to v7.0: plus Intel 0x09a2, the first root-bus device of Xeons since Ice Lake."""
    V7_1 = "7.1"
    """v7.1: plus every Google device (a wildcard device ID)."""
    V7_2 = "7.2"
    """v7.2: plus the QAT, DSA and IAA accelerators that head their own Xeon root buses."""

    @property
    def any_device(self) -> bool:
        """Whether this release's lookup reads a :data:`PCI_ANY_ID` device as every device:
        "PCI/P2PDMA: Allow wildcard Device IDs in host bridge list" (1a1f96e3e2a8) came with
        the first wildcard entry, in v7.1 (K-134)."""
        return self in (P2pdmaWhitelistRelease.V7_1, P2pdmaWhitelistRelease.V7_2)


PCI_VENDOR_ID_GOOGLE = 0x1AE0

PCI_DEVICE_ID_INTEL_DSA_SPR0 = 0x0B25
PCI_DEVICE_ID_INTEL_IAX_SPR0 = 0x0CFE
PCI_DEVICE_ID_INTEL_DSA_GNRD = 0x11FB
PCI_DEVICE_ID_INTEL_DSA_DMR = 0x1212
PCI_DEVICE_ID_INTEL_IAA_DMR = 0x1216
PCI_DEVICE_ID_INTEL_QAT_4XXX = 0x4940
PCI_DEVICE_ID_INTEL_QAT_401XX = 0x4942
PCI_DEVICE_ID_INTEL_QAT_402XX = 0x4944
PCI_DEVICE_ID_INTEL_QAT_420XX = 0x4946
PCI_DEVICE_ID_INTEL_QAT_6XXX = 0x4948
"""Intel accelerator device IDs (include/linux/pci_ids.h from v7.2, drivers/dma/idxd before)."""

PCI_DEVICE_ID_INTEL_ICX_ROOT = 0x09A2
"""The first device on a root bus of every Xeon since Ice Lake-SP (3rd Gen Xeon Scalable)."""

PCI_P2PDMA_WHITELIST_V5_17: tuple[P2pdmaWhitelistEntry, ...] = (
    # Intel Xeon E5 / Core i7 (same host bridge only).
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, 0x3C00, _SAME_HB),
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, 0x3C01, _SAME_HB),
    # Intel Xeon E7 v3 / Xeon E5 v3 / Core i7 (same host bridge only).
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, 0x2F00, _SAME_HB),
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, 0x2F01, _SAME_HB),
    # Intel Skylake-E.
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, 0x2030),
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, 0x2031),
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, 0x2032),
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, 0x2033),
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, 0x2020),
)
"""``pci_p2pdma_whitelist[]`` before v5.18 (the ``P2P`` snapshot of ``kernel.md`` §0.3, K-83)."""

PCI_P2PDMA_WHITELIST_V5_18: tuple[P2pdmaWhitelistEntry, ...] = (
    *PCI_P2PDMA_WHITELIST_V5_17,
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, PCI_DEVICE_ID_INTEL_ICX_ROOT),
)
"""v5.18 to v7.0: "PCI/P2PDMA: Add Intel 3rd Gen Intel Xeon Scalable Processors to whitelist"
(feaea1fe8b36, K-133)."""

PCI_P2PDMA_WHITELIST_V7_1: tuple[P2pdmaWhitelistEntry, ...] = (
    *PCI_P2PDMA_WHITELIST_V5_18,
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_GOOGLE, PCI_ANY_ID),
)
"""v7.1: "PCI/P2PDMA: Add Google SoCs to the P2P DMA host bridge list" (70cf146a674c) after
"PCI/P2PDMA: Allow wildcard Device IDs in host bridge list" (1a1f96e3e2a8), K-134."""

PCI_P2PDMA_WHITELIST_V7_2: tuple[P2pdmaWhitelistEntry, ...] = (
    *PCI_P2PDMA_WHITELIST_V5_18,
    *(
        P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, device)
        for device in (
            PCI_DEVICE_ID_INTEL_DSA_SPR0,
            PCI_DEVICE_ID_INTEL_IAX_SPR0,
            PCI_DEVICE_ID_INTEL_DSA_GNRD,
            PCI_DEVICE_ID_INTEL_DSA_DMR,
            PCI_DEVICE_ID_INTEL_IAA_DMR,
            PCI_DEVICE_ID_INTEL_QAT_4XXX,
            PCI_DEVICE_ID_INTEL_QAT_401XX,
            PCI_DEVICE_ID_INTEL_QAT_402XX,
            PCI_DEVICE_ID_INTEL_QAT_420XX,
            PCI_DEVICE_ID_INTEL_QAT_6XXX,
        )
    ),
    P2pdmaWhitelistEntry(PCI_VENDOR_ID_GOOGLE, PCI_ANY_ID),
)
"""v7.2 (and 7.1.3): "PCI/P2PDMA: Add Intel QAT, DSA, IAA devices to whitelist" (0ba76b19fd4c),
inserted before the Google entry, K-135."""

_WHITELISTS: dict[P2pdmaWhitelistRelease, tuple[P2pdmaWhitelistEntry, ...]] = {
    P2pdmaWhitelistRelease.V5_17: PCI_P2PDMA_WHITELIST_V5_17,
    P2pdmaWhitelistRelease.V5_18: PCI_P2PDMA_WHITELIST_V5_18,
    P2pdmaWhitelistRelease.V7_1: PCI_P2PDMA_WHITELIST_V7_1,
    P2pdmaWhitelistRelease.V7_2: PCI_P2PDMA_WHITELIST_V7_2,
}


def p2pdma_whitelist_release(version: tuple[int, int, int]) -> P2pdmaWhitelistRelease:
    """Which table a kernel of ``version`` (major, minor, stable patch level) compiles, by
    mainline and stable numbering: v5.18 added 0x09a2 (K-133), v7.1 the Google wildcard
    (K-134), v7.2 -- and the 7.1 stable series from 7.1.3 -- the Xeon accelerators (K-135). A
    distribution kernel that backports differently has the table of what it backported."""
    if version < (5, 18, 0):
        return P2pdmaWhitelistRelease.V5_17
    if version < (7, 1, 0):
        return P2pdmaWhitelistRelease.V5_18
    if version < (7, 1, 3):
        return P2pdmaWhitelistRelease.V7_1
    return P2pdmaWhitelistRelease.V7_2


def pci_p2pdma_whitelist_lookup(
    table: tuple[P2pdmaWhitelistEntry, ...], vendor: int, device: int, *, any_device: bool
) -> P2pdmaWhitelistEntry | None:
    """The entry of ``table`` that decides for host bridge ``vendor:device`` -- the first that
    matches, as ``__host_bridge_whitelist`` walks the array -- or None (not listed);
    ``any_device``: the release reads :data:`PCI_ANY_ID` as a wildcard (K-134)."""
    return next((e for e in table if e.matches(vendor, device, any_device=any_device)), None)


def pci_p2pdma_whitelist(release: P2pdmaWhitelistRelease) -> tuple[P2pdmaWhitelistEntry, ...]:
    """``pci_p2pdma_whitelist[]`` as the kernel of ``release`` compiles it (K-133 … K-135)."""
    return _WHITELISTS[release]
