"""A userspace process and the calls a workload makes.

Each method is one syscall or library call, run with ``kernel.current`` set to the process,
so the kernel sees the right task (fd table, rlimits, cgroup). Kernel errors surface as
:class:`~pinlab.kernel.errno.KernelError`, exactly as the call's ``-errno``. Fences the kernel
handed to the fence waiter during a call are collected in :attr:`Process.waits`; whoever
drives time (the simulator) waits for them before the process's next step.

:meth:`Process.exit` (and :meth:`Process.kill`) release everything in kernel order (design
principle 5): MRs deregistered (unmap, unpin, detach, put), scanouts cleared, GPU imports
closed, fds closed, GEM handles closed; then host-memory MRs (``ib_umem_release``), the
io_uring ring and every mlock go (``exit_mmap``), so ``locked_vm``, ``pinned_vm`` and the
user's ``locked_vm`` return what the process charged. Nothing leaks.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

from pinlab.drivers.amdgpu import AmdgpuBo
from pinlab.drivers.base import DeviceBuffer, ExporterDriver
from pinlab.drivers.display import Scanout
from pinlab.drivers.gpu_import import GpuAccess, GpuImporter
from pinlab.drivers.rdma import DmaResult, MemoryRegion, RdmaDevice
from pinlab.kernel.dma_buf import DmaBuf, dma_buf_fd
from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.file import O_CLOEXEC, O_RDWR
from pinlab.kernel.kernel import (
    CAP_SYS_RESOURCE,
    RLIM_INFINITY,
    RLIMIT_MEMLOCK,
    Kernel,
    Rlimit,
    Task,
    UserStruct,
)
from pinlab.kernel.umem import IB_ACCESS_ON_DEMAND
from pinlab.policy import rlimit
from pinlab.policy.dmem import DmemCgroupController
from pinlab.uapi.p2p import P2pCalls

if TYPE_CHECKING:
    from pinlab.uapi.system import System

_handles = itertools.count(1)
_host_keys = itertools.count(0x10000)


@dataclass(eq=False, slots=True)
class GemHandle:
    """A GEM handle: this process's reference to a device buffer."""

    handle: int
    driver: ExporterDriver
    buffer: DeviceBuffer
    importer: GpuImporter | None = None  # set for prime imports into a GPU
    closed: bool = False


@dataclass(eq=False, slots=True)
class HostMemoryRegion:
    """An MR over this process's own (host) memory: ``ibv_reg_mr``. ``umem`` is the pinned
    :class:`~pinlab.policy.rlimit.IbUmem` (charged to ``pinned_vm``) or, for
    ``IB_ACCESS_ON_DEMAND`` on an ODP-capable NIC, an uncharged
    :class:`~pinlab.policy.rlimit.IbUmemOdp`."""

    lkey: int
    nic: str | None
    umem: rlimit.IbUmem | rlimit.IbUmemOdp
    access: int
    pid: int

    @property
    def odp(self) -> bool:
        return isinstance(self.umem, rlimit.IbUmemOdp)

    @property
    def length(self) -> int:
        return self.umem.length

    @property
    def pages(self) -> int:
        """Pages charged to ``pinned_vm`` (0 for ODP)."""
        return self.umem.npages if isinstance(self.umem, rlimit.IbUmem) else 0

    def __repr__(self) -> str:
        kind = "odp" if self.odp else "pinned"
        return f"<host mr lkey={self.lkey:#x} {kind} {self.length:#x}>"


@dataclass(slots=True)
class ProcessStats:
    """The calls the kernel refused this process -- the one place denials are counted, at the
    syscall boundary: by errno (``"-ENOMEM"``) and by the policy that refused
    (``KernelError.policy``: a pin proposal's name, or ``dmem.max``)."""

    denials: Counter[str] = field(default_factory=Counter)  # "-ENOMEM" -> n
    denials_by_policy: Counter[str] = field(default_factory=Counter)  # "dmem-pin-max" -> n
    on_deny: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    """Called after every denial (the simulator's sampler, instead of polling)."""

    @property
    def total(self) -> int:
        return sum(self.denials.values())

    def deny(self, e: KernelError) -> None:
        self.denials[str(e.errno)] += 1
        if e.policy:
            self.denials_by_policy[e.policy] += 1
        if self.on_deny is not None:
            self.on_deny()


class _Syscall:
    """The steps of :meth:`Process._syscall` as a plain context manager (every syscall and
    every NIC access goes through one; a generator-based one cost about as much as a short
    call): on entry ``-ESRCH`` for an exited process, else the process becomes ``current``;
    on exit a :class:`KernelError` is counted as a denial (attributed to ``dmem.max`` when
    the controller refused a charge meanwhile), the kernel's waits are collected, the
    previous task is ``current`` again and exited processes are reaped -- in that order,
    whatever was raised."""

    __slots__ = ("_dmem", "_hits", "_kernel", "_name", "_previous", "_proc")

    def __init__(self, proc: Process, name: str) -> None:
        self._proc = proc
        self._name = name

    def __enter__(self) -> None:
        proc = self._proc
        if not proc.alive:
            gone = err(Errno.ESRCH, self._name, f"process {proc.pid} has exited")
            proc.stats.deny(gone)
            raise gone
        kernel = self._kernel = proc.system.kernel
        dmem = kernel.dmem if isinstance(kernel.dmem, DmemCgroupController) else None
        self._dmem = dmem
        self._hits = dmem.limit_hits if dmem is not None else 0
        self._previous = kernel.current
        kernel.current = proc

    def __exit__(
        self,
        kind: type[BaseException] | None,
        e: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc, kernel = self._proc, self._kernel
        try:
            try:
                if isinstance(e, KernelError):
                    dmem = self._dmem
                    if e.policy is None and dmem is not None and dmem.limit_hits > self._hits:
                        e.policy = "dmem.max"
                    proc.stats.deny(e)
            finally:
                proc.waits.extend(kernel.take_waits())
        finally:
            kernel.current = self._previous
            proc.system.reap()


class Process(P2pCalls, Task):
    """A userspace process on a :class:`~pinlab.uapi.system.System`; its vfio-pci, iommufd
    and RDMA device-memory calls are in :class:`~pinlab.uapi.p2p.P2pCalls`."""

    def __init__(
        self,
        system: System,
        pid: int,
        comm: str,
        *,
        uid: int,
        caps: frozenset[int],
        memlock: Rlimit | None,
        user: UserStruct,
        cgroup: object | None,
    ) -> None:
        super().__init__(pid, comm, uid=uid, caps=caps, memlock=memlock, user=user, cgroup=cgroup)
        self.system = system
        self.alive = True
        self.exit_code: int | None = None
        self.handles: dict[int, GemHandle] = {}
        self.mrs: dict[int, MemoryRegion] = {}
        self.scanouts: list[Scanout] = []
        self.waits: list[DmaFence] = []
        self.stats = ProcessStats()
        self.vm_locked = rlimit.VmLocked()  # VM_LOCKED pages (mlock)
        self.host_mrs: dict[int, HostMemoryRegion] = {}
        self.io_ring: rlimit.IoRingCtx | None = None
        self._init_p2p()

    # -- plumbing --------------------------------------------------------------------------
    @contextmanager
    def _as_current(self) -> Iterator[Kernel]:
        """Run kernel code as this task (``current``), then restore the previous one."""
        kernel = self.system.kernel
        previous = kernel.current
        kernel.current = self
        try:
            yield kernel
        finally:
            kernel.current = previous

    def _syscall(self, name: str) -> _Syscall:
        """Run a call as this task; count a denial (:meth:`ProcessStats.deny`); collect the
        fences the kernel handed to the waiter (``with self._syscall(name):``, :class:`_Syscall`).

        A denial no pin policy claimed is attributed to ``dmem.max`` (``e.policy``) when the
        dmem controller refused a charge during the call (its ``limit_hits`` grew): TTM turns
        the controller's ``-EAGAIN`` into the ``-ENOMEM`` userspace sees, so the errno alone
        cannot say that an administrator's limit was the cause."""
        return _Syscall(self, name)

    def take_waits(self) -> list[DmaFence]:
        """Fences this process must wait for before its next step (then forgotten)."""
        waits = self.waits
        if not waits:  # the common case: the simulator asks after every call
            return []
        self.waits = []
        return [f for f in waits if not f.signaled]

    def _handle(self, handle: int) -> GemHandle:
        gem = self.handles.get(handle)
        if gem is None or gem.closed:
            raise err(Errno.ENOENT, "drm_gem_object_lookup", f"no GEM handle {handle}")
        return gem

    # -- GEM / PRIME ---------------------------------------------------------------------------
    def gem_create(self, device: str, size: int, domain: str = "vram", *, name: str = "") -> int:
        """``DRM_IOCTL_*_GEM_CREATE`` on ``device``: a buffer in ``domain``; returns a handle."""
        with self._syscall("gem_create"):
            if size <= 0:
                raise err(Errno.EINVAL, "gem_create", f"size must be positive, got {size}")
            driver = self.system.exporter(device)
            buf = driver.create_buffer(size, domain, name=name or f"{self.comm}-{next(_handles)}")
            handle = next(_handles)
            self.handles[handle] = GemHandle(handle, driver, buf)
            return handle

    def prime_handle_to_fd(self, handle: int, flags: int = O_CLOEXEC | O_RDWR) -> int:
        """``DRM_IOCTL_PRIME_HANDLE_TO_FD``: export the buffer as a dma-buf fd."""
        with self._syscall("prime_handle_to_fd"):
            gem = self._handle(handle)
            dmabuf = gem.driver.export(gem.buffer)
            return dma_buf_fd(dmabuf, flags, self.files)

    def prime_fd_to_handle(self, device: str, fd: int) -> int:
        """``DRM_IOCTL_PRIME_FD_TO_HANDLE`` on an importing GPU: a handle for ``fd``'s buffer."""
        with self._syscall("prime_fd_to_handle"):
            importer = self.system.gpu_importer(device)
            abo = importer.import_fd(fd, files=self.files)
            handle = next(_handles)
            self.handles[handle] = GemHandle(handle, importer.adev, abo, importer)
            return handle

    def gpu_access(self, handle: int) -> GpuAccess:
        """A GPU job on an imported buffer (maps it again after a move_notify)."""
        with self._syscall("gpu_access"):
            gem = self._handle(handle)
            if gem.importer is None or not isinstance(gem.buffer, AmdgpuBo):
                raise err(Errno.EINVAL, "gpu_access", f"handle {handle} is not a prime import")
            result = gem.importer.access(gem.buffer)
            self.waits.extend(result.wait)
            return result

    def amdgpu_cs(self, handle: int) -> str | None:
        """``DRM_IOCTL_AMDGPU_CS`` with the buffer behind ``handle`` in its BO list: a GPU job
        that reads or writes it. Returns where the buffer is for the job (``vram``, ``gtt``,
        ``system``).

        On an amdgpu BO the driver validates it first
        (:meth:`~pinlab.drivers.amdgpu.AmdgpuDevice.amdgpu_cs_ioctl`: an evicted, unpinned BO
        moves back into VRAM when there is room and the per-device move throttle allows it)
        and the job waits for the BO's KERNEL fences (K-64), collected in :attr:`waits`. The
        throttle accrues with time: the call passes the machine's clock (``ktime_get()``, the
        :class:`~pinlab.uapi.system.System` clock the simulator drives) so that the driver
        never reads one. Other drivers' submission ioctls are not modelled: their job runs
        on the buffer where it is.
        """
        with self._syscall("amdgpu_cs_ioctl"):
            buf = self._handle(handle).buffer
            if isinstance(buf, AmdgpuBo):
                self.waits.extend(buf.adev.amdgpu_cs_ioctl([buf], self.system.now()))
            return buf.location

    def gem_close(self, handle: int) -> None:
        """``DRM_IOCTL_GEM_CLOSE``: drop the handle (the buffer lives on while exported)."""
        with self._syscall("gem_close"):
            gem = self._handle(handle)
            self._close_handle(gem)

    def _close_handle(self, gem: GemHandle) -> None:
        if gem.importer is not None:
            assert isinstance(gem.buffer, AmdgpuBo)
            gem.importer.release(gem.buffer)
        else:
            gem.driver.free_buffer(gem.buffer)
        gem.closed = True
        del self.handles[gem.handle]

    def buffer(self, handle: int) -> DeviceBuffer:
        """The buffer behind a handle (for inspection)."""
        return self._handle(handle).buffer

    # -- fds -------------------------------------------------------------------------------
    def close(self, fd: int) -> None:
        """``close(2)``: ``-EBADF`` for a descriptor that is not open."""
        with self._syscall("close"):
            if not self.files.close(fd):
                raise err(Errno.EBADF, "close", f"fd {fd} is not open")

    def dup(self, fd: int) -> int:
        """``dup(2)``: a new descriptor for the same open file."""
        with self._syscall("dup"):
            file = self.files.lookup(fd)
            if file is None:
                raise err(Errno.EBADF, "dup", f"fd {fd} is not open")
            return self.files.install(file.get())

    def send_fd(self, fd: int, to: Process) -> int:
        """Pass ``fd`` to another process (``SCM_RIGHTS``); returns its number there."""
        with self._syscall("sendmsg"):
            file = self.files.lookup(fd)
            if file is None:
                raise err(Errno.EBADF, "sendmsg", f"fd {fd} is not open")
            if not to.alive:
                raise err(Errno.EPIPE, "sendmsg", f"process {to.pid} has exited")
            return to.files.install(file.get(), O_CLOEXEC)

    def dmabuf(self, fd: int) -> DmaBuf:
        """The dma-buf behind ``fd`` (for inspection; takes no reference)."""
        file = self.files.lookup(fd)
        if file is None or not isinstance(file.private_data, DmaBuf):
            raise err(Errno.EBADF, "dmabuf", f"fd {fd} is not a dma-buf")
        return file.private_data

    # -- RDMA ------------------------------------------------------------------------------
    def ibv_query_device(self, nic: str) -> int:
        """``ibv_query_device`` (with ``efadv_query_device`` on EFA): the access flags an MR
        on ``nic`` may ask for. Verbs middleware registers with what the device reports --
        UCX's EFA memory domain (``uct_ib_efadv_access_flags``) and libfabric's EFA provider
        add ``IB_ACCESS_REMOTE_READ``/``_WRITE`` only when the device has RDMA read/write."""
        with self._syscall("ibv_query_device"):
            return self.system.nic(nic).supported_access

    def ibv_reg_dmabuf_mr(
        self, nic: str, fd: int, offset: int, length: int, access: int
    ) -> MemoryRegion:
        """``ibv_reg_dmabuf_mr``: register ``[offset, offset + length)`` of ``fd`` on ``nic``
        (``IB_ACCESS_ON_DEMAND`` selects the ODP path where the NIC has one)."""
        with self._syscall("ibv_reg_dmabuf_mr"):
            if not self.system.uverbs_reg_dmabuf_mr:
                raise err(
                    Errno.EPROTONOSUPPORT,
                    "ib_uverbs_ioctl",
                    "this kernel's uverbs has no UVERBS_METHOD_REG_DMABUF_MR (Linux < 5.12)",
                )
            device = self.system.nic(nic)
            mr = device.reg_dmabuf_mr(fd, offset, length, access, files=self.files, pid=self.pid)
            self.mrs[mr.lkey] = mr
            return mr

    def ibv_reg_mr(
        self, length: int, access: int, offset: int = 0, *, nic: str | None = None
    ) -> HostMemoryRegion:
        """``ibv_reg_mr``: register ``[offset, offset + length)`` of this process's memory.

        The pinned path is ``ib_umem_get`` (``pinned_vm`` against RLIMIT_MEMLOCK: ``-EPERM``
        at a zero limit without ``CAP_IPC_LOCK``, ``-ENOMEM`` over it, ``-EINVAL`` for a zero
        length). ``IB_ACCESS_ON_DEMAND`` on a NIC with ODP (``nic`` names an mlx5-like device
        with ``odp``) registers an ODP umem that charges nothing; anywhere else it reaches
        ``ib_umem_get`` and fails with ``-EOPNOTSUPP``. ``nic=None`` is a generic verbs device.
        """
        with self._syscall("ibv_reg_mr"):
            umem: rlimit.IbUmem | rlimit.IbUmemOdp
            device = self.system.nic(nic) if nic is not None else None
            if access & IB_ACCESS_ON_DEMAND and device is not None and device.odp:
                umem = rlimit.ib_umem_odp_get(self, offset, length, access)
            else:
                umem = rlimit.ib_umem_get(self, offset, length, access)
            mr = HostMemoryRegion(next(_host_keys), nic, umem, access, self.pid)
            self.host_mrs[mr.lkey] = mr
            return mr

    def _release_host_mr(self, mr: HostMemoryRegion) -> None:
        del self.host_mrs[mr.lkey]
        if isinstance(mr.umem, rlimit.IbUmem):
            rlimit.ib_umem_release(mr.umem, kernel=self.system.kernel)
        else:
            rlimit.ib_umem_odp_release(mr.umem)

    def ibv_dereg_mr(self, mr: MemoryRegion | HostMemoryRegion) -> None:
        """``ibv_dereg_mr``: ``-EINVAL`` for an MR this process does not own. A host-memory
        MR returns exactly the pages it charged, to this process's mm (``ib_umem_release``)."""
        with self._syscall("ibv_dereg_mr"):
            if isinstance(mr, HostMemoryRegion):
                if self.host_mrs.get(mr.lkey) is not mr:
                    raise err(Errno.EINVAL, "ibv_dereg_mr", f"{mr!r} is not this process's")
                self._release_host_mr(mr)
                return
            if self.mrs.get(mr.lkey) is not mr:
                raise err(Errno.EINVAL, "ibv_dereg_mr", f"{mr!r} is not this process's")
            del self.mrs[mr.lkey]
            mr.nic.dereg_mr(mr)

    def ibv_advise_mr(self, mr: MemoryRegion) -> int:
        """``ibv_advise_mr(IBV_ADVISE_MR_ADVICE_PREFETCH)``: fault the MR in; pages mapped.

        ``-EINVAL`` for an MR this process does not own (the MR handle is looked up in the
        caller's uverbs file), ``-EOPNOTSUPP`` for a pinned MR or a NIC without ODP.
        """
        with self._syscall("ibv_advise_mr"):
            if self.mrs.get(mr.lkey) is not mr:
                raise err(Errno.EINVAL, "ibv_advise_mr", f"{mr!r} is not this process's")
            return mr.nic.advise_mr(mr)

    def nic_dma(
        self, mr: MemoryRegion, nbytes: int | None = None, *, write: bool = False
    ) -> DmaResult:
        """The NIC moves ``nbytes`` through ``mr`` on this process's behalf (a work request);
        ``write`` = the NIC writes into the MR (needs write access, else ``-EPERM``)."""
        with self._syscall("ibv_post_send"):
            if self.mrs.get(mr.lkey) is not mr:
                raise err(Errno.EINVAL, "ibv_post_send", f"{mr!r} is not this process's")
            result = mr.nic.dma(mr, nbytes, write=write)
            self.waits.extend(result.wait)
            return result

    # -- display ---------------------------------------------------------------------------
    def set_scanout(self, display: str, fd: int) -> Scanout:
        """Put ``fd``'s buffer on ``display`` (``drmModeAddFB2`` + page flip)."""
        with self._syscall("drm_mode_addfb2"):
            scanout = self.system.display(display).set_scanout(fd, files=self.files, pid=self.pid)
            self.scanouts.append(scanout)
            return scanout

    def clear_scanout(self, scanout: Scanout) -> None:
        """Take a framebuffer off screen (``drmModeRmFB``)."""
        with self._syscall("drm_mode_rmfb"):
            if scanout not in self.scanouts:
                raise err(Errno.ENOENT, "drm_mode_rmfb", "not this process's framebuffer")
            self.scanouts.remove(scanout)
            scanout.display.clear_scanout(scanout)

    # -- locked and pinned host memory ----------------------------------------------------
    def mlock(self, length: int, offset: int = 0) -> None:
        """``mlock(offset, length)``: lock the pages ``[offset, offset + length)`` touches
        (counted from ``offset``'s page boundary) into ``mm->locked_vm``. ``-EPERM`` when
        RLIMIT_MEMLOCK is 0 without ``CAP_IPC_LOCK``; ``-ENOMEM`` when the newly locked pages
        would take ``locked_vm`` past the limit (``CAP_IPC_LOCK`` bypasses, still counted);
        re-locking locked pages costs nothing (P-7)."""
        with self._syscall("mlock"):
            rlimit.do_mlock(self, self.vm_locked, offset, length, kernel=self.system.kernel)

    def munlock(self, length: int, offset: int = 0) -> None:
        """``munlock(offset, length)``: unlock those pages; ``locked_vm`` drops by the pages
        that were locked."""
        with self._syscall("munlock"):
            rlimit.do_munlock(self, self.vm_locked, offset, length, kernel=self.system.kernel)

    def munlockall(self) -> None:
        """``munlockall()``: every locked page leaves ``locked_vm``."""
        with self._syscall("munlockall"):
            rlimit.munlock_all(self, self.vm_locked, kernel=self.system.kernel)

    def io_uring_register_buffers(
        self, length: int, offset: int = 0, *, count: int = 1, hpage_size: int = 0
    ) -> list[rlimit.IoMappedUbuf]:
        """``io_uring_setup`` (once) + ``IORING_REGISTER_BUFFERS`` of ``count`` adjacent
        buffers of ``length`` bytes from ``offset``: charged to the uid's shared
        ``user->locked_vm`` (``-ENOMEM`` over the limit; skipped with ``CAP_IPC_LOCK``) and,
        unlimited, to ``pinned_vm`` (P-8, P-9). ``hpage_size`` backs them with huge pages,
        each charged once at its full size (P-14). ``-EBUSY`` if buffers are registered."""
        with self._syscall("io_uring_register"):
            if self.io_ring is None:
                self.io_ring = rlimit.io_uring_setup(self)
            iovecs = [(offset + i * length, length) for i in range(count)]
            return rlimit.io_sqe_buffers_register(
                self.io_ring, self, iovecs, hpage_size=hpage_size, kernel=self.system.kernel
            )

    def io_uring_unregister_buffers(self) -> None:
        """``IORING_UNREGISTER_BUFFERS``: ``-ENXIO`` without registered buffers."""
        with self._syscall("io_uring_register"):
            if self.io_ring is None:
                raise err(Errno.ENXIO, "io_sqe_buffers_unregister", "no io_uring instance")
            rlimit.io_sqe_buffers_unregister(self.io_ring, kernel=self.system.kernel)

    # -- rlimits ---------------------------------------------------------------------------
    def getrlimit(self, resource: int = RLIMIT_MEMLOCK) -> Rlimit:
        return self.rlimits[resource]

    def setrlimit(self, resource: int, soft: int, hard: int | None = None) -> None:
        """``setrlimit(2)``: ``-EINVAL`` if soft > hard; ``-EPERM`` raising the hard limit
        without ``CAP_SYS_RESOURCE``."""
        with self._syscall("setrlimit"):
            if resource not in self.rlimits:
                raise err(Errno.EINVAL, "setrlimit", f"unknown resource {resource}")
            hard = soft if hard is None else hard
            if soft < 0 or hard < 0 or soft > RLIM_INFINITY or hard > RLIM_INFINITY:
                raise err(Errno.EINVAL, "setrlimit", "limits must be 0 .. RLIM_INFINITY")
            if soft > hard:
                raise err(Errno.EINVAL, "setrlimit", f"soft {soft} > hard {hard}")
            if hard > self.rlimits[resource].max and not self.capable(CAP_SYS_RESOURCE):
                raise err(Errno.EPERM, "setrlimit", "raising the hard limit needs CAP_SYS_RESOURCE")
            self.rlimits[resource] = Rlimit(soft, hard)

    # -- exit ------------------------------------------------------------------------------
    def exit(self, code: int = 0) -> None:
        """``exit(2)``: release everything in kernel order, then the task is gone.

        MRs first (each dereg unmaps, unpins, detaches and puts), then scanouts and GPU
        imports, then the RDMA exports, the iommufd context and the VFIO device fds
        (:meth:`~pinlab.uapi.p2p.P2pCalls.release_p2p`), then the fd table (``exit_files``),
        then the GEM handles (``drm_release``).

        A driver that refuses to free memory that is still exported (habanalabs, K-82) keeps
        it alive past the exit: the dma-buf holds the device file (``get_file`` /
        ``hl_ctx_get`` at export), so the memory is freed when the last dma-buf from it is
        released (:meth:`System.reap`).

        Whoever drives the process learns of the exit first (:attr:`System.on_exit`, as a
        parent learns from ``SIGCHLD``): the simulator stops the workload.
        """
        if not self.alive:
            return
        for listener in self.system.on_exit:
            listener(self)
        with self._as_current() as kernel:
            for mr in list(self.mrs.values()):
                del self.mrs[mr.lkey]
                mr.nic.dereg_mr(mr)
            for scanout in list(self.scanouts):
                self.scanouts.remove(scanout)
                scanout.display.clear_scanout(scanout)
            for gem in [g for g in self.handles.values() if g.importer is not None]:
                self._close_handle(gem)
            self.release_p2p()
            self.files.close_all()
            for gem in list(self.handles.values()):
                try:
                    self._close_handle(gem)
                except KernelError:
                    # still exported: the exporter's dma-buf keeps the device file open
                    del self.handles[gem.handle]
                    self.system.orphans.append(gem)
            for host_mr in list(self.host_mrs.values()):
                self._release_host_mr(host_mr)
            if self.io_ring is not None:
                rlimit.io_ring_ctx_free(self.io_ring, kernel=kernel)
            rlimit.munlock_all(self, self.vm_locked, kernel=kernel)  # exit_mmap
            kernel.take_waits()
        self.alive = False
        self.exit_code = code
        self.system.reap()

    def uverbs_destroy_ufile_hw(self, nic: RdmaDevice) -> int:
        """The kernel destroys this process's MRs on ``nic`` because the device goes away
        (``ib_unregister_device`` → ``uverbs_destroy_ufile_hw(ufile,
        RDMA_REMOVE_DRIVER_REMOVE)`` on every open uverbs file, as a NIC reset or removal
        does): each MR leaves the MR table and is deregistered as :meth:`ibv_dereg_mr` would
        (unmap, unpin, detach, put), as this task so that what it charged returns to it. The
        fences the teardown collects are nobody's to wait for. The process lives on; its next
        work request on such an MR fails. Returns how many MRs went."""
        dropped = 0
        for mr in [m for m in self.mrs.values() if m.nic is nic]:
            del self.mrs[mr.lkey]
            with self._as_current() as kernel:
                try:
                    nic.dereg_mr(mr)
                finally:
                    kernel.take_waits()
            dropped += 1
        with self._as_current() as kernel:
            try:
                self.destroy_rdma_exports(nic)  # the dma-buf and DM uobjects go too (K-123)
            finally:
                kernel.take_waits()
        return dropped

    def kill(self, signal: int = 9) -> None:
        """``kill -9``: the same teardown as :meth:`exit`, exit code 128 + signal."""
        self.exit(128 + signal)
