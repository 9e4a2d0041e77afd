"""The ``matrix`` preset: the machine of ``pinlab matrix`` (:mod:`pinlab.report.matrix`), one
exporter and one importer of every registered kind."""

from __future__ import annotations

from pydantic import validate_call

from pinlab.drivers import EXPORTERS, IMPORTERS
from pinlab.drivers.rdma import RdmaDevice
from pinlab.platform.preset_parts import AMD, STRICT_CALL
from pinlab.platform.spec import (
    CpuSpec,
    DeviceSpec,
    DisplaySpec,
    DramSpec,
    HostBridgeSpec,
    NicSpec,
    PlatformSpec,
    SwitchSpec,
)
from pinlab.units import GiB, MiB, Size, parse_rate

__all__ = ["matrix"]


@validate_call(config=STRICT_CALL)
def matrix(
    *,
    exporter: str = "amdgpu",
    broken_mlx5: bool = False,
    memory: Size = 256 * MiB,
    kernel: str | None = None,
) -> PlatformSpec:
    """The machine of ``pinlab matrix`` (:mod:`pinlab.report.matrix`): one exporter and one
    importer of every kind, all able to reach each other peer-to-peer.

    * an AMD Zen host (host-bridge P2P allowed whatever the whitelist, K-83) with one root
      complex ``rc0`` (AMD 0x1022:0x1480) and one PCIe switch ``sw0`` on a root port;
    * ``gpu0``: the ``exporter`` driver with ``memory`` of device memory (256 MiB), 1 GiB GTT
      and 2 GiB system domains where the driver has them, on the switch -- or, for a driver
      whose memory is a carve-out of host DRAM (the APU), an integrated function on the root
      bus; no GPU importer of its own;
    * on the switch: ``efa0`` (EFA-like, pinned MRs), ``mlx5_0`` (mlx5-like with ODP; with
      ``broken_mlx5`` the deliberately broken importer that ignores ``move_notify``, the
      stale-DMA detector's negative control), ``mlx5_1`` (mlx5-like without ODP) and ``gpu1``,
      a second amdgpu-like GPU (same sizes) that imports buffers (``gpu1:import``) and owns the
      display engine ``display0`` -- dma-buf scanout happens on the *second* GPU in practice
      (PRIME: one GPU renders, another scans out).
    * ``<driver>0`` on the switch for every other registered RDMA driver (a plugin's).

    pinlab's assumptions beyond the matrix: host DRAM 64 GiB at 89.6 GB/s and the links'
    default rates (the matrix measures placements, not bandwidth).
    """
    integrated = exporter in EXPORTERS and EXPORTERS[exporter].carve_out
    nics = (
        NicSpec(name="efa0", driver="efa", parent="sw0"),
        NicSpec(
            name="mlx5_0",
            driver="mlx5",
            parent="sw0",
            odp=True,
            driver_options={"ignore_move_notify": True} if broken_mlx5 else {},
        ),
        NicSpec(name="mlx5_1", driver="mlx5", parent="sw0"),
    )
    return PlatformSpec(
        name=f"matrix-{exporter}",
        description="pinlab matrix: one exporter, an EFA, two mlx5 (ODP, no ODP), a GPU "
        "importer with a display, below one PCIe switch",
        kernel=kernel,
        cpu=CpuSpec(vendor="amd", family=0x19, model="AMD Zen"),
        dram=DramSpec(size=64 * GiB, bandwidth=parse_rate("89.6GB/s")),
        host_bridges=(HostBridgeSpec(name="rc0", socket=0, vendor=AMD, device=0x1480),),
        switches=(SwitchSpec(name="sw0", parent="rc0"),),
        devices=(
            DeviceSpec(
                name="gpu0",
                driver=exporter,
                parent="rc0" if integrated else "sw0",
                rciep=integrated,
                gpu_import=False,
                memory=memory,
                gtt=1 * GiB,
                system=2 * GiB,
            ),
            DeviceSpec(
                name="gpu1",
                driver="amdgpu",
                parent="sw0",
                memory=memory,
                gtt=1 * GiB,
                system=2 * GiB,
            ),
        ),
        nics=(*nics, *_other_rdma_nics({n.driver for n in nics})),
        displays=(DisplaySpec(name="display0", device="gpu1"),),
    )


def _other_rdma_nics(used: set[str]) -> list[NicSpec]:
    """One NIC ``<driver>0`` on the switch for each registered RDMA driver the matrix machine
    has none of (a plugin's, ``pinlab.plugins``), so every RDMA importer is a matrix column."""
    return [
        NicSpec(name=f"{name}0", driver=name, parent="sw0")
        for name, cls in IMPORTERS.items()
        if issubclass(cls, RdmaDevice) and name not in used
    ]
