"""RDMA importers: what a NIC does with a dma-buf memory region (MR).

:class:`RdmaDevice` is the part every RDMA driver model shares: an ``ib_device`` (a
:class:`~pinlab.kernel.device.Device` below the NIC's PCI function), its MR table, and device
accesses (NIC DMA) that go through the MR's *current* mapping and are checked by the stale-DMA
detector. Drivers (:mod:`pinlab.drivers.efa`, :mod:`pinlab.drivers.mlx5`) decide how a
registration imports the buffer: pinned, or on demand.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple, Protocol, Self, Unpack

from pinlab.drivers.base import DriverOptions, ImportEntry, ImportPath, constructor_options
from pinlab.drivers.dma_check import DmaIncident
from pinlab.drivers.importer import DeviceImporter, ImporterOptions
from pinlab.drivers.uverbs_dmabuf import RdmaUserMmapEntry, UverbsDmabufExporter
from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import DmaBuf
from pinlab.kernel.errno import Errno, err
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.file import FdTable
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_ATOMIC,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
    IbUmemDmabuf,
    ib_umem_dmabuf_get_pinned,
    ib_umem_dmabuf_get_pinned_revocable_and_lock,
    ib_umem_dmabuf_release,
    ib_umem_dmabuf_set_revoke_locked,
    ib_umem_num_pages,
)

_keys = itertools.count(0x100)

_NIC_WRITE_ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC
"""The access flags under which the NIC writes into an MR itself. Not ``umem->writable``
(``ib_access_writable``), which also counts ``IB_ACCESS_MW_BIND``: binding a memory window
makes the pages writable through the window, while a write addressed to the MR still needs
the MR's own write access."""


@dataclass(eq=False, slots=True)
class MemoryRegion:
    """``struct ib_mr`` of a dma-buf MR, with the counters reports need."""

    nic: RdmaDevice
    umem: IbUmemDmabuf
    access: int
    odp: bool
    pid: int | None = None
    lkey: int = field(default_factory=lambda: next(_keys))
    mtt_valid: bool = False  # the NIC's translations (MTTs) point at the current mapping
    faults: int = 0
    prefetches: int = 0
    invalidations: int = 0
    deregistered: bool = False
    revoked: bool = False  # a revocable pinned import lost its mapping (7.1)
    length: int = field(init=False)  # mr->length: fixed at registration, as the umem's

    def __post_init__(self) -> None:
        self.length = self.umem.length

    @property
    def rkey(self) -> int:
        return self.lkey

    @property
    def dmabuf(self) -> DmaBuf:
        return self.umem.dmabuf

    @property
    def pages(self) -> int:
        return ib_umem_num_pages(self.umem.offset, self.umem.length)

    def __repr__(self) -> str:
        kind = "odp" if self.odp else "pinned"
        return f"<mr {self.nic.name} lkey={self.lkey:#x} {kind} {self.length:#x}>"


class DmaResult(NamedTuple):
    """What one NIC access through an MR did.

    ``wait`` are KERNEL fences the access had to wait for (a fault re-mapped onto memory a copy
    engine is still filling); ``p2p`` whether the bytes moved peer-to-peer; ``memory`` where
    they were; ``incident`` a stale or unfenced access, if any. A named tuple: made at every
    NIC access, where a frozen dataclass's field-by-field ``__init__`` cost more than the
    access's own checks.
    """

    nbytes: int
    faulted: bool
    pages_faulted: int
    p2p: bool
    memory: str
    wait: tuple[DmaFence, ...] = ()
    incident: DmaIncident | None = None
    write: bool = False


@dataclass(frozen=True, slots=True)
class MrRequest:
    """The arguments of one ``ib_reg_user_mr_dmabuf``: ``[offset, offset + length)`` of the
    dma-buf ``fd`` (looked up in ``files``) with ``access``, on behalf of process ``pid``."""

    fd: int
    offset: int
    length: int
    access: int
    files: FdTable | None = None
    pid: int | None = None


class NicSpecLike(Protocol):
    """What a platform description says about one NIC (the platform layer's ``NicSpec``)."""

    @property
    def name(self) -> str: ...
    @property
    def odp(self) -> bool: ...
    @property
    def driver_options(self) -> DriverOptions: ...


class RdmaDevice(DeviceImporter):
    """An RDMA NIC's ``ib_device`` as an importer of dma-bufs.

    Declared by every driver: ``nic_model`` and ``registration_model`` (the cost model's NIC
    model and dma-buf registration model for it), ``supports_odp`` (the driver can build
    on-demand-paging MRs at all; EFA cannot), ``ordered_delivery`` (its transport keeps a
    connection's writes in order; EFA's does not), ``odp`` (this device has ODP enabled), and
    the device-wide counters ``faults`` (ODP page faults resolved) and ``invalidations``
    (``move_notify`` calls that zapped a mapping), 0 for a driver that never faults.

    Registration (:meth:`reg_dmabuf_mr`) is shared: an ``IB_ACCESS_ON_DEMAND`` request goes to
    the driver's :meth:`reg_odp_mr` (``-EOPNOTSUPP`` without ODP), anything else to the pinned
    path :meth:`reg_pinned_mr`.
    """

    driver_name: ClassVar[str] = "rdma"
    default_name: ClassVar[str] = "rdma_0"
    import_entry: ClassVar[ImportEntry] = ImportEntry.REG_MR
    nic_model: ClassVar[str] = "cx5"
    """The NIC model of the cost model (``nic.<model>``) a NIC of this driver is unless its
    platform entry names one."""
    registration_model: ClassVar[str] = "mlx5"
    """The dma-buf registration cost model (``reg.<model>``) of this driver's
    ``ib_reg_user_mr_dmabuf``: how the driver builds the device's translation."""
    ordered_delivery: ClassVar[bool] = True
    """Whether the device's transport delivers a connection's writes in order (InfiniBand and
    RoCE reliable connections do; EFA's SRD may reorder or repeat them)."""
    supports_odp: ClassVar[bool] = False
    odp_items: ClassVar[tuple[str, ...]] = ()
    exports_device_memory: ClassVar[bool] = False
    """The driver has device memory (``ibv_alloc_dm``) whose mmap entries it exports as
    dma-bufs where the kernel has ``UVERBS_OBJECT_DMABUF`` (K-121)."""
    """The checklist items of the driver's ODP path (invalidate, fault)."""

    def __init__(self, kernel: Kernel, pdev: Device, **options: Unpack[ImporterOptions]) -> None:
        super().__init__(kernel, pdev, **options)
        self.odp = False
        self.faults = 0
        self.invalidations = 0
        self.mrs: dict[int, MemoryRegion] = {}
        self.on_fault: Callable[[MemoryRegion, int], None] | None = None
        self.pinned_revoke: Callable[[object], None] | None = None
        """The driver's revoke callback (called with the MR) when its pinned MRs are
        revocable (7.1, K-90, K-115)."""
        self.dmabuf_exporter: UverbsDmabufExporter | None = None
        """``UVERBS_OBJECT_DMABUF`` (7.0+) for a driver with ``mmap_get_pfns`` (mlx5)."""
        self.mmap_entries: dict[tuple[int | None, int], RdmaUserMmapEntry] = {}
        """The ucontexts' mmap entries by (owner pid, pgoff)."""

    @classmethod
    def from_spec(cls, kernel: Kernel, pdev: Device, spec: NicSpecLike) -> Self:
        """The driver for a platform's NIC description (``driver_options`` as keyword
        arguments; ``ValueError``/``TypeError`` for options it refuses)."""
        return cls(kernel, pdev, name=spec.name, **constructor_options(spec.driver_options))

    def mr_path(self, access: int) -> ImportPath | None:
        """How an MR registered with ``access`` reaches the dma-buf core: ODP MRs attach
        dynamically, others are pinned; None when the device refuses the registration before
        the core (``IB_ACCESS_ON_DEMAND`` without ODP, ``kernel-semantics.md`` §6)."""
        if access & IB_ACCESS_ON_DEMAND:
            return ImportPath.DYNAMIC if self.odp else None
        return ImportPath.PINNED

    def mr_checklist_items(self, access: int, exporter_dynamic: bool) -> tuple[str, ...]:
        """The checklist items of registering with ``access``: §6 for a refusal, K-45 for a
        pinned import (with K-93 and K-20 where the exporter is static: ``dma_buf_pin`` is a
        no-op), the driver's :attr:`odp_items` for an ODP one."""
        path = self.mr_path(access)
        if path is None:
            return ("§6",)
        if path is ImportPath.PINNED:
            return ("K-45",) if exporter_dynamic else ("K-45", "K-93", "K-20")
        return self.odp_items

    # -- registration ----------------------------------------------------------------------
    def reg_dmabuf_mr(
        self,
        fd: int,
        offset: int,
        length: int,
        access: int,
        *,
        files: FdTable | None = None,
        pid: int | None = None,
    ) -> MemoryRegion:
        """``ib_reg_user_mr_dmabuf``: the driver's access check, then an ODP MR for
        ``IB_ACCESS_ON_DEMAND``, else a pinned one. Raises ``KernelError``."""
        req = MrRequest(fd, offset, length, access, files, pid)
        self.check_access(access)
        if access & IB_ACCESS_ON_DEMAND:
            return self.reg_odp_mr(req)
        return self.reg_pinned_mr(req)

    @property
    def supported_access(self) -> int:
        """The remote and local access an MR on this device may ask for, as the device reports
        it to userspace (``ib_query_device``'s capabilities; EFA: the RDMA read/write bits of
        ``efa_query_device``'s ``device_caps``). Default: local write, remote read and write."""
        return IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE

    def check_access(self, access: int) -> None:
        """Refuse access flags the device does not support (default: accept all)."""

    def reg_odp_mr(self, req: MrRequest) -> MemoryRegion:
        """An on-demand-paging dma-buf MR; drivers without ODP refuse (``-EOPNOTSUPP``)."""
        raise err(Errno.EOPNOTSUPP, "ib_reg_user_mr_dmabuf", f"{self.name} has no ODP support")

    def reg_pinned_mr(self, req: MrRequest) -> MemoryRegion:
        """A pinned dma-buf MR: ``ib_umem_dmabuf_get_pinned`` and a valid translation.

        With :attr:`pinned_revoke` set it is *pinned but revocable* (7.1, K-90, K-115), as
        irdma's ``irdma_reg_user_mr_dmabuf`` does it: the import returns with the resv held
        (``ib_umem_dmabuf_get_pinned_revocable_and_lock``), the driver builds its MR and
        installs its revoke callback with ``ib_umem_dmabuf_set_revoke_locked``, then unlocks.
        """
        revoke = self.pinned_revoke
        get = (
            ib_umem_dmabuf_get_pinned
            if revoke is None
            else ib_umem_dmabuf_get_pinned_revocable_and_lock
        )
        umem = get(
            self.kernel, self.dev, req.offset, req.length, req.fd, req.access, files=req.files
        )
        mr = MemoryRegion(self, umem, req.access, odp=False, pid=req.pid, mtt_valid=True)
        if revoke is not None:
            ib_umem_dmabuf_set_revoke_locked(umem, revoke, mr)
            umem.dmabuf.resv.unlock()
        umem.private = mr
        self.mrs[mr.lkey] = mr
        return mr

    def dereg_mr(self, mr: MemoryRegion) -> None:
        """``ib_dereg_mr``: forget the MR, let the driver revoke it (:meth:`revoke_mr`), then
        ``ib_umem_release`` -- unmap, unpin, detach, put."""
        self._lookup(mr)
        del self.mrs[mr.lkey]
        mr.deregistered = True
        self.revoke_mr(mr)
        ib_umem_dmabuf_release(mr.umem)

    def revoke_mr(self, mr: MemoryRegion) -> None:
        """The driver's first half of deregistration, before the umem goes (default: none)."""

    # -- device memory and dma-buf export (UVERBS_OBJECT_DM, UVERBS_OBJECT_DMABUF) --------------
    def alloc_dm(self, size: int, owner: int | None = None) -> RdmaUserMmapEntry:
        """``ibv_alloc_dm``: on-device memory with an mmap entry; drivers without it refuse
        (``-EOPNOTSUPP``)."""
        raise err(
            Errno.EOPNOTSUPP, "ib_uverbs_alloc_dm", f"{self.driver_name} has no device memory"
        )

    def free_dm(self, entry: RdmaUserMmapEntry) -> None:
        """``ibv_free_dm``: the driver removes the entry (revoking the dma-bufs exported from
        it, K-123) and frees the memory."""
        raise err(Errno.EINVAL, "ib_uverbs_free_dm", f"{entry!r} is not on {self.name}")

    def export_dmabuf(self, pgoff: int, owner: int | None, *, files: FdTable | None = None) -> int:
        """``UVERBS_METHOD_DMABUF_ALLOC(pgoff)`` for the ucontext of ``owner`` (K-121):
        ``-EOPNOTSUPP`` on a driver or kernel without the object."""
        exporter = self.dmabuf_exporter
        if exporter is None:
            raise err(Errno.EOPNOTSUPP, "ib_uverbs_ioctl", f"{self.name}: no UVERBS_OBJECT_DMABUF")
        return exporter.dmabuf_alloc(self.mmap_entries.get((owner, pgoff)), pgoff, files=files)

    def advise_mr(self, mr: MemoryRegion) -> int:
        """``ibv_advise_mr`` prefetch; only ODP MRs support it (``-EOPNOTSUPP`` otherwise)."""
        raise err(Errno.EOPNOTSUPP, "ib_advise_mr", f"{self.driver_name} has no advise_mr")

    def _lookup(self, mr: MemoryRegion) -> MemoryRegion:
        if mr.deregistered or self.mrs.get(mr.lkey) is not mr:
            raise err(Errno.EINVAL, "ib_uverbs", f"{mr!r} is not registered on {self.name}")
        return mr

    def _fault_in(self, mr: MemoryRegion) -> int:
        """Resolve a missing translation; only ODP drivers can."""
        raise err(Errno.EFAULT, "nic_dma", f"{mr!r}: translation missing on a pinned MR")

    def dma(self, mr: MemoryRegion, nbytes: int | None = None, *, write: bool = False) -> DmaResult:
        """One NIC access to ``nbytes`` of the MR: fault if the translation is missing (ODP),
        then DMA through the current mapping, checked by the stale-DMA detector.

        ``write`` is a NIC write into the MR (an incoming RDMA write or receive); an MR
        registered without write access refuses it, as the NIC completes such a work request
        with a protection error (``IBV_WC_LOC_PROT_ERR`` / remote access error), modelled as
        ``-EPERM``.
        """
        self._lookup(mr)
        if write and not mr.access & _NIC_WRITE_ACCESS:
            raise err(Errno.EPERM, "nic_dma", f"{mr!r} was registered without write access")
        nbytes = mr.length if nbytes is None else nbytes
        faulted = False
        pages = 0
        if mr.revoked:
            raise err(Errno.EFAULT, "nic_dma", f"{mr!r} was revoked; re-register it")
        if not mr.mtt_valid:
            pages = self._fault_in(mr)
            faulted = True
        # a fault handler waited (in map_pages) for the KERNEL fences it found; the simulator
        # makes the access wait for them (``wait``) before bytes move
        wait = tuple(self.kernel.take_waits()) if faulted else ()
        sgt = mr.umem.sgt
        incident = self.detector.check(self.name, mr.dmabuf, sgt, mr.pid, waited=faulted)
        return DmaResult(
            nbytes,
            faulted,
            pages,
            bool(sgt and sgt.p2p),
            sgt.memory if sgt is not None else "none",
            wait,
            incident,
            write,
        )
