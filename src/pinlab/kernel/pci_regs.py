"""PCI register-level definitions (include/uapi/linux/pci_regs.h, include/linux/pci.h):
the device/function number, the ACS Control bits and the PCIe device/port types that
:mod:`pinlab.kernel.pci` builds its tree with and :mod:`pinlab.kernel.p2pdma` reads."""

from __future__ import annotations

import enum

__all__ = ["PciAcs", "PciExpType", "pci_devfn"]


def pci_devfn(slot: int, func: int) -> int:
    """``PCI_DEVFN(slot, func)``: the 8-bit device/function number."""
    return ((slot & 0x1F) << 3) | (func & 0x07)


class PciAcs(enum.Flag):
    """Bits of the ACS Control register (``PCI_ACS_CTRL``), with the kernel's bit values.

    Only request redirect (``RR``), completion redirect (``CR``) and egress control (``EC``)
    matter to P2PDMA (``pci_bridge_has_acs_redir``, K-57); :attr:`REDIR` is their union. The other
    bits are modelled so that a port can carry them without changing the answer.
    """

    NONE = 0
    SV = 0x0001
    """Source Validation."""
    TB = 0x0002
    """Translation Blocking."""
    RR = 0x0004
    """P2P Request Redirect."""
    CR = 0x0008
    """P2P Completion Redirect."""
    UF = 0x0010
    """Upstream Forwarding."""
    EC = 0x0020
    """P2P Egress Control."""
    DT = 0x0040
    """Direct Translated P2P."""
    REDIR = RR | CR | EC
    """The bits ``pci_bridge_has_acs_redir`` tests."""


class PciExpType(enum.IntEnum):
    """``pci_pcie_type()``: the PCIe device/port type (``PCI_EXP_TYPE_*`` values)."""

    ENDPOINT = 0x0
    ROOT_PORT = 0x4
    UPSTREAM = 0x5
    DOWNSTREAM = 0x6
    RC_END = 0x9
    """Root Complex Integrated Endpoint: sits directly on a root bus, no upstream bridge."""
