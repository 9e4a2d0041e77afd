"""PCI and CPU identifiers P2PDMA consults, and its host-bridge whitelist.

The vendor IDs are ``include/linux/pci_ids.h``'s; the CPUID vendor strings are what
``cpu_supports_p2pdma`` compares (``boot_cpu_data.x86_vendor``); the whitelist is
``pci_p2pdma_whitelist[]`` of ``drivers/pci/p2pdma.c`` (K-83), kept apart from the PCI tree
(:mod:`pinlab.kernel.pci`) so that a profile or platform can pass a newer table.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = [
    "PCI_ANY_ID",
    "PCI_P2PDMA_WHITELIST_V6_0",
    "PCI_VENDOR_ID_AMD",
    "PCI_VENDOR_ID_INTEL",
    "X86_VENDOR_AMD",
    "X86_VENDOR_INTEL",
    "P2pdmaWhitelistEntry",
    "P2pdmaWhitelistFlag",
]

PCI_VENDOR_ID_INTEL = 0x8086
PCI_VENDOR_ID_AMD = 0x1022
PCI_ANY_ID = 0xFFFF
"""Wildcard device ID in a whitelist entry (used by whitelists newer than ≈6.0)."""

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

    ``device`` may be :data:`PCI_ANY_ID` (any device of that vendor), as later kernels allow.
    """

    vendor: int
    device: int
    flags: P2pdmaWhitelistFlag = P2pdmaWhitelistFlag.NONE

    def matches(self, vendor: int, device: int) -> bool:
        """True when ``vendor:device`` is this entry (the whitelist lookup's match test)."""
        return vendor == self.vendor and (self.device == PCI_ANY_ID or device == self.device)


_SAME_HB = P2pdmaWhitelistFlag.REQ_SAME_HOST_BRIDGE

PCI_P2PDMA_WHITELIST_V6_0: tuple[P2pdmaWhitelistEntry, ...] = (
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
"""``pci_p2pdma_whitelist[]`` of the ≈v6.0 snapshot (``kernel-semantics.md`` §8.3, K-83).

Newer kernels list more host bridges; :class:`PciTopology` takes the whitelist as a parameter.
"""
