"""The calls of a process that shares PCI MMIO peer-to-peer (6.19 and later): vfio-pci's
dma-buf export of BAR ranges and its revoke points, iommufd's import into an IOAS, and the
RDMA device's export of its on-device memory (``docs/semantics/kernel.md`` §13).

:class:`P2pCalls` is mixed into :class:`~pinlab.uapi.process.Process`; every method is one
ioctl, run as the process (``_syscall``), failing with the ioctl's errno. The state it keeps --
the VFIO devices this process opened, its iommufd context, its device-memory allocations and
the dma-bufs it exported from them -- is released in kernel order by :meth:`release_p2p`,
which :meth:`~pinlab.uapi.process.Process.exit` calls after the MRs are gone and before the fd
table closes.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from pinlab.drivers.iommufd import IommuDma, IommufdCtx, IommufdDevice
from pinlab.drivers.rdma import RdmaDevice
from pinlab.drivers.uverbs_dmabuf import RdmaUserMmapEntry, UverbsDmabuf
from pinlab.drivers.vfio_pci import VfioPciDevice, VfioRegionDmaRange
from pinlab.kernel.dma_buf import DmaBuf
from pinlab.kernel.errno import Errno, err
from pinlab.kernel.file import O_CLOEXEC, O_RDWR, FdTable

if TYPE_CHECKING:
    from pinlab.uapi.system import System


class P2pCalls:
    """vfio-pci, iommufd and RDMA device-memory calls of a process (a mixin of ``Process``)."""

    system: System
    pid: int
    files: FdTable

    def _syscall(self, name: str) -> AbstractContextManager[None]:
        raise NotImplementedError  # Process provides it

    def _init_p2p(self) -> None:
        self.vfio: dict[str, VfioPciDevice] = {}
        self.iommufd_ctx: IommufdCtx | None = None
        self.dms: list[tuple[RdmaDevice, RdmaUserMmapEntry]] = []
        self.rdma_exports: list[tuple[RdmaDevice, UverbsDmabuf]] = []

    # -- vfio-pci --------------------------------------------------------------------------
    def _vfio(self, device: str) -> VfioPciDevice:
        vdev = self.vfio.get(device)
        if vdev is None:
            raise err(Errno.EBADF, "vfio_device_fops", f"{device} is not open in this process")
        return vdev

    def vfio_open(self, device: str) -> None:
        """Open ``device``'s VFIO device fd (cdev/group): one owner at a time (``-EBUSY``);
        ``-ENODEV`` for a device that is not bound to vfio-pci."""
        with self._syscall("vfio_device_open"):
            if device in self.vfio:
                return
            vdev = self.system.vfio(device)
            if vdev.owner is not None:
                raise err(Errno.EBUSY, "vfio_device_open", f"{device} is open by {vdev.owner}")
            vdev.owner = self.pid
            self.vfio[device] = vdev

    def vfio_dma_buf(
        self,
        device: str,
        bar: int,
        offset: int,
        size: int,
        *,
        ranges: Sequence[tuple[int, int]] | None = None,
        open_flags: int = O_CLOEXEC | O_RDWR,
    ) -> int:
        """``VFIO_DEVICE_FEATURE(GET | DMA_BUF)``: export ``[offset, offset + size)`` of BAR
        ``bar`` (or the ``(offset, length)`` ``ranges``) as a dma-buf; its fd (K-98, K-99).
        Opens the device first if this process has not."""
        self.vfio_open(device)
        with self._syscall("vfio_pci_core_feature_dma_buf"):
            spans = [(offset, size)] if ranges is None else list(ranges)
            dma_ranges = [VfioRegionDmaRange(o, n) for o, n in spans]
            return self._vfio(device).vfio_pci_core_feature_dma_buf(
                bar, dma_ranges, open_flags=open_flags, files=self.files
            )

    def vfio_set_memory(self, device: str, enabled: bool) -> None:
        """A config-space write of ``PCI_COMMAND`` setting or clearing memory decoding: clear
        revokes every dma-buf of the device, set un-revokes (K-104)."""
        with self._syscall("vfio_pci_config_rw"):
            self._vfio(device).config_write_command(enabled)

    def vfio_reset(self, device: str) -> None:
        """``VFIO_DEVICE_RESET``: revoke, reset, un-revoke if memory decoding is on (K-104)."""
        with self._syscall("vfio_pci_core_ioctl_reset"):
            self._vfio(device).reset()

    def vfio_low_power(self, device: str, enter: bool) -> None:
        """``VFIO_DEVICE_FEATURE_LOW_POWER_ENTRY`` (revoke) or the exit from it (un-revoke
        when memory decoding is on, K-104)."""
        with self._syscall("vfio_pci_core_pm_entry" if enter else "vfio_pci_core_pm_exit"):
            vdev = self._vfio(device)
            if enter:
                vdev.low_power_entry()
            else:
                vdev.low_power_exit()

    def vfio_dmabuf_revoke(self, device: str, fd: int) -> None:
        """(``next``, RFC) ``VFIO_DEVICE_PCI_DMABUF_REVOKE``: revoke the dma-buf ``fd`` of
        ``device`` for good; ``-ENOTTY`` where the ioctl does not exist."""
        with self._syscall("vfio_pci_core_ioctl"):
            vdev = self._vfio(device)
            file = self.files.lookup(fd)
            if file is None:
                raise err(Errno.EBADF, "vfio_pci_dma_buf_revoke", f"fd {fd} is not open")
            if not isinstance(file.private_data, DmaBuf):
                raise err(Errno.EINVAL, "vfio_pci_dma_buf_revoke", f"fd {fd} is not a dma-buf")
            vdev.dmabuf_revoke(file.private_data)

    def vfio_close(self, device: str) -> None:
        """Close the device fd: ``vfio_pci_core_close_device`` revokes every dma-buf of the
        device for good (K-104); the dma-buf fds stay open but useless."""
        with self._syscall("vfio_device_fops_release"):
            self._vfio(device).close_device()
            del self.vfio[device]

    # -- iommufd ---------------------------------------------------------------------------
    def _iommufd(self) -> tuple[IommufdDevice, IommufdCtx]:
        iommufd = self.system.iommufd_device()
        if self.iommufd_ctx is None:
            self.iommufd_ctx = iommufd.open(self.pid)
        return iommufd, self.iommufd_ctx

    def iommufd_map(
        self,
        fd: int,
        *,
        start: int = 0,
        length: int | None = None,
        iova: int | None = None,
        writable: bool = True,
    ) -> int:
        """``IOMMU_IOAS_MAP_FILE`` of the dma-buf ``fd`` (``start``, ``length``: a window of
        it, default all) into this process's IOAS (opened on first use); the IOVA (K-108,
        K-109). Charges nothing to RLIMIT_MEMLOCK."""
        with self._syscall("iommufd_ioas_map_file"):
            iommufd, ctx = self._iommufd()
            return iommufd.ioas_map_file(
                ctx, fd, start, length, iova=iova, writable=writable, files=self.files
            )

    def iommufd_unmap(self, iova: int) -> int:
        """``IOMMU_IOAS_UNMAP`` of the area at ``iova``; its length."""
        with self._syscall("iommufd_ioas_unmap"):
            iommufd, ctx = self._iommufd()
            return iommufd.ioas_unmap(ctx, iova)

    def iommufd_attach_domain(self, domain: str) -> None:
        """Attach one more device (its IOMMU domain ``domain``) to the IOAS (K-110)."""
        with self._syscall("iommufd_hwpt_alloc"):
            iommufd, ctx = self._iommufd()
            iommufd.attach_domain(ctx, domain)

    def iommufd_dma(
        self, iova: int, nbytes: int | None = None, *, domain: str = "hwpt0", write: bool = False
    ) -> IommuDma:
        """A device attached to the IOAS (``domain``) does DMA at ``iova``: ``-EFAULT`` when
        the IOVA is not mapped there (never, unmapped, or revoked: K-110)."""
        with self._syscall("iommu_dma"):
            iommufd, ctx = self._iommufd()
            return iommufd.dma(ctx, iova, nbytes, domain=domain, write=write, pid=self.pid)

    # -- RDMA device memory and its export ---------------------------------------------------
    def ibv_alloc_dm(self, nic: str, size: int) -> RdmaUserMmapEntry:
        """``ibv_alloc_dm`` on ``nic``: on-device memory with an mmap entry (mlx5 MEMIC);
        ``-EOPNOTSUPP`` on a driver without it."""
        with self._syscall("ib_uverbs_alloc_dm"):
            device = self.system.nic(nic)
            entry = device.alloc_dm(size, self.pid)
            self.dms.append((device, entry))
            return entry

    def ibv_export_dmabuf(self, nic: str, pgoff: int) -> int:
        """``UVERBS_METHOD_DMABUF_ALLOC(pgoff)``: export the mmap entry at ``pgoff`` of this
        process's ucontext as a dma-buf; its fd (K-121)."""
        with self._syscall("uverbs_dmabuf_alloc"):
            device = self.system.nic(nic)
            fd = device.export_dmabuf(pgoff, self.pid, files=self.files)
            file = self.files.lookup(fd)
            assert file is not None and isinstance(file.private_data, DmaBuf)
            priv = file.private_data.priv
            assert isinstance(priv, UverbsDmabuf)
            self.rdma_exports.append((device, priv))
            return fd

    def ibv_free_dm(self, nic: str, entry: RdmaUserMmapEntry) -> None:
        """``ibv_free_dm``: the driver removes the mmap entry, which revokes every dma-buf
        exported from it (K-123), and frees the memory."""
        with self._syscall("ib_uverbs_free_dm"):
            device = self.system.nic(nic)
            if (device, entry) not in self.dms:
                raise err(Errno.EINVAL, "ib_uverbs_free_dm", f"{entry!r} is not this process's")
            self.dms.remove((device, entry))
            device.free_dm(entry)

    # -- release -----------------------------------------------------------------------------
    def destroy_rdma_exports(self, nic: RdmaDevice | None = None) -> int:
        """The ucontext cleanup of ``nic`` (every NIC when None): each exported dma-buf's
        uobject is destroyed (revoke, K-123), then each device-memory allocation is freed.
        Returns how many objects went."""
        gone = 0
        for device, priv in list(self.rdma_exports):
            if nic is None or device is nic:
                self.rdma_exports.remove((device, priv))
                if device.dmabuf_exporter is not None:
                    device.dmabuf_exporter.revoke(priv)
                gone += 1
        for device, entry in list(self.dms):
            if nic is None or device is nic:
                self.dms.remove((device, entry))
                device.free_dm(entry)
                gone += 1
        return gone

    def release_p2p(self) -> None:
        """At exit: the RDMA ucontext's exports and device memory, the iommufd context (every
        area unmapped, its pages released) and the VFIO device fds (a permanent revoke of
        every dma-buf of those devices)."""
        self.destroy_rdma_exports()
        if self.iommufd_ctx is not None:
            self.system.iommufd_device().close(self.iommufd_ctx)
            self.iommufd_ctx = None
        for device in list(self.vfio):
            self.vfio.pop(device).close_device()
