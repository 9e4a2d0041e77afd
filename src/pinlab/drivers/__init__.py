"""``pinlab.drivers``: each driver's autonomous choices, plugged into ``pinlab.kernel``.

Exporters decide where ``dma_buf_pin`` puts memory (pin in place, migrate on pin, refuse);
importers decide whether they need pins or survive moves. Select them by name through
:data:`EXPORTERS` and :data:`IMPORTERS`; what the layers above may know of a driver is what it
declares (:class:`ExporterDriver`, :class:`~pinlab.drivers.rdma.RdmaDevice`).
"""

# Importing a driver module registers it; the registries keep this order, which is the order
# `pinlab matrix` shows: the dynamic GPUs, the static accelerator, the pin-in-place model,
# then Intel's two and vfio-pci's BARs; the RDMA NICs, then the display, the GPU importer and
# iommufd.
# isort: off
from pinlab.drivers import amdgpu, apu, habanalabs, nvidia_compute, xe, i915  # noqa: F401
from pinlab.drivers import vfio_pci  # noqa: F401
from pinlab.drivers import efa, mlx5, display, gpu_import, iommufd  # noqa: F401

# isort: on
from pinlab.drivers.base import EXPORTERS, DeviceBuffer, ExporterDriver, RegionUsage
from pinlab.drivers.importer import IMPORTERS, Importer

# then the installed plugins' drivers (``pinlab.plugins``), after every built-in one
EXPORTERS.plugins("pinlab.exporters", lambda n, o: EXPORTERS.register_plugin(n, o, ExporterDriver))
IMPORTERS.plugins("pinlab.importers", lambda n, o: IMPORTERS.register_plugin(n, o, Importer))

__all__ = ["EXPORTERS", "IMPORTERS", "DeviceBuffer", "ExporterDriver", "Importer", "RegionUsage"]
