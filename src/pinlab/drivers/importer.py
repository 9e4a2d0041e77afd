"""What every dma-buf importer model shares, and the registry that selects them by name.

An importer is a device that maps other devices' buffers: an RDMA NIC
(:mod:`~pinlab.drivers.rdma`), a display engine (:mod:`~pinlab.drivers.display`) or a GPU
importing a foreign buffer (:mod:`~pinlab.drivers.gpu_import`). Each checks its accesses with
a :class:`~pinlab.drivers.dma_check.StaleDmaDetector`.
"""

from __future__ import annotations

from typing import ClassVar, TypedDict, Unpack

from pinlab.drivers.base import Driver, ImportEntry, ImportPath, Registry, reject_unknown
from pinlab.drivers.dma_check import StaleDmaDetector
from pinlab.kernel.device import Device
from pinlab.kernel.kernel import Kernel


class Importer(Driver):
    """A dma-buf importer: its ``driver_name`` (set by :func:`register_importer`), kernel,
    name and stale-DMA detector. Declared by every importer class: ``import_entry``, the
    userspace call that hands it a dma-buf fd (:class:`~pinlab.drivers.base.ImportEntry`), and
    ``import_path``, how that call reaches the dma-buf core (an RDMA NIC's depends on the
    registration's access flags: :meth:`~pinlab.drivers.rdma.RdmaDevice.mr_path`)."""

    import_entry: ClassVar[ImportEntry]
    import_path: ClassVar[ImportPath]

    kernel: Kernel
    name: str
    detector: StaleDmaDetector

    def checklist_items(self, exporter_dynamic: bool) -> tuple[str, ...]:
        """The checklist items (``kernel-semantics.md`` §12) of this importer's path into the
        core, for a dynamic or static exporter under the importer's kernel profile."""
        return ()


class ImporterOptions(TypedDict, total=False):
    """The keyword arguments every :class:`DeviceImporter` takes: its ``name`` (default: the
    driver's ``default_name``) and the ``detector`` its accesses report to."""

    name: str
    detector: StaleDmaDetector | None


class DeviceImporter(Importer):
    """An importer with its own ``struct device`` (``dev``) below a PCI function (``pdev``):
    what the P2PDMA distance is computed for."""

    default_name: ClassVar[str]

    def __init__(self, kernel: Kernel, pdev: Device, **options: Unpack[ImporterOptions]) -> None:
        reject_unknown(options, ImporterOptions.__optional_keys__, type(self))
        self.kernel = kernel
        self.pdev = pdev
        self.name = options.get("name") or self.default_name
        self.dev = Device(self.name, pdev)
        detector = options.get("detector")
        self.detector = detector if detector is not None else StaleDmaDetector()

    def __repr__(self) -> str:
        return f"<{self.driver_name} {self.name}>"


IMPORTERS: Registry[Importer] = Registry()
"""Importer models by name, in registration order: ``efa``, ``mlx5``, ``display``,
``gpu-import``."""

register_importer = IMPORTERS.register
