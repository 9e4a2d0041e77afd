"""EFA-like importer: pinned dma-buf MRs only (drivers/infiniband/hw/efa/efa_verbs.c,
``efa_reg_user_mr_dmabuf``, v5.16; ``kernel-semantics.md`` §5.3, §10.1, §10.3).

**Pin policy -- needs pins.** EFA has no on-demand paging, so a dma-buf MR is built with
``ib_umem_dmabuf_get_pinned``: dynamic attach with ``allow_peer2peer``, ``dma_buf_pin``, map,
all at registration. The exporter decides where the pin lands (habanalabs: HBM in place;
amdgpu ≤6.15: migrated to GTT). The NIC never faults; a mapping that moved under it would be
corruption, which the stale-DMA detector would report (and a correct exporter never causes).

``revocable=True`` (preset 7.1 only) registers *pinned but revocable* MRs, as the March 2026
RDMA follow-up allows (``ib_umem_dmabuf_get_pinned_revocable_and_lock`` +
``ib_umem_dmabuf_set_revoke_locked``, first used by irdma; ``kernel-semantics.md`` §1.4, K-90,
K-115): an exporter's ``dma_buf_invalidate_mappings`` makes the driver stop the hardware (the MR
reports ``revoked``, its translation is gone) before the core unmaps and unpins. The MR is dead
for good; userspace must re-register.
"""

from __future__ import annotations

from typing import Unpack

from pinlab.drivers.importer import ImporterOptions, register_importer
from pinlab.drivers.rdma import MemoryRegion, RdmaDevice
from pinlab.kernel.device import Device
from pinlab.kernel.errno import Errno, err
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
)


@register_importer("efa")
class EfaDevice(RdmaDevice):
    """An EFA-like NIC. ``rdma_write`` enables ``IB_ACCESS_REMOTE_WRITE`` (newer devices)."""

    default_name = "efa_0"
    nic_model = "efa"
    registration_model = "efa"  # an admin-queue command (EFA_ADMIN_REG_MR) per MR
    ordered_delivery = False  # SRD: reliable, but neither ordered nor free of duplicates

    def __init__(
        self,
        kernel: Kernel,
        pdev: Device,
        *,
        rdma_write: bool = True,
        revocable: bool = False,
        **options: Unpack[ImporterOptions],
    ) -> None:
        super().__init__(kernel, pdev, **options)
        self.rdma_write = rdma_write
        if revocable and not kernel.profile.umem_revocable_pinned_ops:
            raise ValueError(
                f"revocable pinned EFA MRs need kernel profile 7.1, not {kernel.profile.name}"
            )
        self.revocable = revocable
        if revocable:
            self.pinned_revoke = self._revoke_locked

    @property
    def supported_access(self) -> int:
        supp = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ
        return supp | IB_ACCESS_REMOTE_WRITE if self.rdma_write else supp

    def check_access(self, access: int) -> None:
        """``efa_reg_user_mr_dmabuf``: unsupported access flags (``IB_ACCESS_ON_DEMAND``
        among them) → ``-EOPNOTSUPP``; everything else is a pinned umem (errors pass
        through), revocable with ``revocable``."""
        if access & ~self.supported_access:
            raise err(
                Errno.EOPNOTSUPP,
                "efa_reg_user_mr_dmabuf",
                f"unsupported access flags {access & ~self.supported_access:#x}",
            )

    def _revoke_locked(self, priv: object) -> None:
        """The driver's revoke callback (``pinned_revoke``, as irdma's): the hardware stops
        using the MR -- its translation is dropped and, when the exporter revoked it (not at
        deregistration, which runs the same sequence), it reports ``revoked``. The core then
        unmaps and unpins (``ib_umem_dmabuf_revoke_locked``, K-116)."""
        assert isinstance(priv, MemoryRegion)
        priv.mtt_valid = False
        if not priv.deregistered:
            priv.revoked = True
            priv.invalidations += 1
