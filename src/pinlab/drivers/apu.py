"""AMD APU exporter: amdgpu on an integrated GPU (``seed-brief.md`` pillar 1; ``cost-model.md``
§9.4; ``kernel-semantics.md`` §7.1).

**Pin policy -- pin means migrate to system memory (GTT), in every profile.** An APU's "VRAM"
is a carve-out of system DRAM reserved at boot (2 GiB by default here) that the display engine
scans out of and the GPU's own allocations compete for. The settlement's first pillar lets such
a general-purpose GPU keep "pin means migrate to system memory" so that no importer can lock up
the carve-out the desktop needs: a dma-buf pin always lands in GTT, whatever the profile, the
MOVE_NOTIFY option or the importers' P2P abilities -- where a discrete amdgpu (≥6.16) would pin
in VRAM.

Everything else -- attach (peer2peer cleared for unreachable importers, never fails), map (an
unpinned P2P mapping may stay in the carve-out), move notification, the GEM import side -- is
amdgpu's, inherited from :class:`~pinlab.drivers.amdgpu.AmdgpuDevice`; the only override is
:meth:`AmdgpuApuDevice.pin_domains`. A pin of a BO already pinned in VRAM (by the driver
itself, e.g. a scanout) therefore still fails with ``-EINVAL`` (K-50).
"""

from __future__ import annotations

from pinlab.drivers.amdgpu import AmdgpuDevice, AmdgpuDomain
from pinlab.drivers.base import ImportPath, register_exporter
from pinlab.drivers.gem_ttm import domain_sizes
from pinlab.kernel.dma_buf import DmaBuf
from pinlab.units import GiB


@register_exporter("apu")
class AmdgpuApuDevice(AmdgpuDevice):
    """An amdgpu APU: ``vram_size`` is the carve-out of system DRAM."""

    pin_policy = "migrate on pin, always: GTT in every profile (keeps the carve-out free)"
    carve_out = True
    default_sizes = domain_sizes(vram=2 * GiB, gtt=16 * GiB, system=32 * GiB)

    def checklist_items(self, path: ImportPath, *, by_pin: bool, refused: bool) -> tuple[str, ...]:
        """K-49 with the APU's always-GTT pin (a model), or K-51 for an unpinned map."""
        return ("K-49", "model") if by_pin else ("K-51",)

    def pin_domains(self, dmabuf: DmaBuf) -> AmdgpuDomain:
        """Where ``amdgpu_dma_buf_pin`` may pin: GTT, regardless of profile and importers."""
        return AmdgpuDomain.GTT
