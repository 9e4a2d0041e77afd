"""``struct device``: anything a dma-buf can be attached to.

Importers attach *devices* (``attach->dev``), and P2PDMA resolves a device to its nearest PCI
ancestor (``find_parent_pci_dev``), so a plain device may hang below a PCI function (an RDMA
port below its NIC function, a display engine below a GPU) or have no PCI parent at all (a
virtual device).
"""

from __future__ import annotations


class Device:
    """A kernel device: a name (``dev_name``) and an optional parent device."""

    __slots__ = ("__weakref__", "name", "parent")

    def __init__(self, name: str, parent: Device | None = None) -> None:
        if not name:
            raise ValueError("a device needs a non-empty name")
        self.name = name
        self.parent = parent

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __str__(self) -> str:
        return self.name
