"""``pinlab.drivers``: each driver's autonomous choices, plugged into ``pinlab.kernel``.

Exporters decide where ``dma_buf_pin`` puts memory (pin in place, migrate on pin, refuse);
importers decide whether they need pins or survive moves. Select them by name through
:data:`EXPORTERS`.
"""

from pinlab.drivers import (  # noqa: F401  (registration by import)
    amdgpu,
    apu,
    display,
    efa,
    gpu_import,
    habanalabs,
    i915,
    mlx5,
    nvidia_compute,
    xe,
)
from pinlab.drivers.base import EXPORTERS, DeviceBuffer, ExporterDriver, RegionUsage
from pinlab.drivers.rdma import IMPORTERS

__all__ = ["EXPORTERS", "IMPORTERS", "DeviceBuffer", "ExporterDriver", "RegionUsage"]
