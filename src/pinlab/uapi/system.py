"""A booted machine as userspace sees it: the kernel, the device drivers by name, the
processes, and the stale-DMA detector every device access goes through."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pinlab.drivers.base import ExporterDriver
from pinlab.drivers.display import DisplayEngine
from pinlab.drivers.dma_check import StaleDmaDetector
from pinlab.drivers.gpu_import import GpuImporter
from pinlab.drivers.importer import Importer
from pinlab.drivers.iommufd import IommufdDevice
from pinlab.drivers.rdma import RdmaDevice
from pinlab.drivers.vfio_pci import VfioPciDevice
from pinlab.kernel.errno import Errno, err
from pinlab.kernel.kernel import CAP_IPC_LOCK, Kernel, Rlimit

if TYPE_CHECKING:
    from pinlab.uapi.process import GemHandle, Process

_T = TypeVar("_T")
_I = TypeVar("_I", RdmaDevice, DisplayEngine, GpuImporter)


@dataclass(frozen=True, slots=True)
class Unplugged:
    """What :meth:`System.hot_unplug` removed: the device's name, its exporting driver (None
    for a NIC) and the processes it killed, in pid order."""

    device: str
    exporter: ExporterDriver | None
    killed: tuple[Process, ...]


class System:
    """One machine: ``kernel``, exporters, NICs, displays and GPU importers by device name,
    and -- from 6.19 -- ``iommufd``, the kernel's one iommufd instance as a dma-buf importer.

    ``clock`` is the machine's time in seconds (``ktime_get()``; the simulator passes
    ``env.now``): it stamps stale-DMA incidents and is the *now* of the kernel paths that
    depend on elapsed time (amdgpu's command-submission move throttle). Without one, time
    stands still at 0.
    """

    def __init__(self, kernel: Kernel, *, clock: Callable[[], float] | None = None) -> None:
        self.kernel = kernel
        self.clock = clock
        self.detector = StaleDmaDetector(clock)
        self.exporters: dict[str, ExporterDriver] = {}
        self.nics: dict[str, RdmaDevice] = {}
        self.displays: dict[str, DisplayEngine] = {}
        self.gpu_importers: dict[str, GpuImporter] = {}
        self.iommufd: IommufdDevice | None = None
        if kernel.profile.iommufd_dmabuf:  # /dev/iommu takes dma-bufs from 6.19 (K-108)
            self.iommufd = IommufdDevice(kernel, detector=self.detector)
        self.processes: dict[int, Process] = {}
        # called with each process at the start of its exit (whoever drives the processes
        # learns of it, as a parent from SIGCHLD: the simulator stops the workload)
        self.on_exit: list[Callable[[Process], None]] = []
        # GEM handles of exited processes whose memory the driver refused to free while it
        # was still exported (habanalabs, K-82); freed by reap() once no dma-buf is left
        self.orphans: list[GemHandle] = []
        # whether ib_uverbs has UVERBS_METHOD_REG_DMABUF_MR (Linux 5.12, bfe0cc6eb249): without
        # it the ioctl dispatch finds no method and returns -EPROTONOSUPPORT (a kernel too old,
        # or a distribution kernel without the backport; linux-rdma/perftest#280)
        self.uverbs_reg_dmabuf_mr = True
        self._next_pid = 1000

    def now(self) -> float:
        """The machine's time in seconds (0 without a clock)."""
        return self.clock() if self.clock is not None else 0.0

    # -- devices ---------------------------------------------------------------------------
    def add_exporter(self, name: str, driver: ExporterDriver) -> ExporterDriver:
        self._unique(name)
        self.exporters[name] = driver
        return driver

    def add_nic(self, name: str, nic: RdmaDevice) -> RdmaDevice:
        return self._add_importer(self.nics, name, nic)

    def add_display(self, name: str, display: DisplayEngine) -> DisplayEngine:
        return self._add_importer(self.displays, name, display)

    def add_gpu_importer(self, name: str, importer: GpuImporter) -> GpuImporter:
        return self._add_importer(self.gpu_importers, name, importer)

    def _add_importer(self, table: dict[str, _I], name: str, device: _I) -> _I:
        """Register an importing device; its accesses go through this system's detector."""
        self._unique(name)
        device.detector = self.detector
        table[name] = device
        return device

    def _unique(self, name: str) -> None:
        taken = self.exporters.keys() | self.nics.keys() | self.displays.keys()
        if name in taken or name in self.gpu_importers or name == "iommufd":
            raise ValueError(f"device name {name!r} is already used on this system")

    def importers(self) -> dict[str, Importer]:
        """Every importing device by name: NICs, displays, GPU importers, then iommufd."""
        out: dict[str, Importer] = {**self.nics, **self.displays, **self.gpu_importers}
        if self.iommufd is not None:
            out["iommufd"] = self.iommufd
        return out

    def exporter(self, name: str) -> ExporterDriver:
        return self._get(self.exporters, name, "exporting device")

    def nic(self, name: str) -> RdmaDevice:
        return self._get(self.nics, name, "RDMA device")

    def display(self, name: str) -> DisplayEngine:
        return self._get(self.displays, name, "display")

    def gpu_importer(self, name: str) -> GpuImporter:
        return self._get(self.gpu_importers, name, "importing GPU")

    def vfio(self, name: str) -> VfioPciDevice:
        """The vfio-pci device ``name`` (``-ENODEV`` for any other device)."""
        vdev = self._get(self.exporters, name, "exporting device").vfio_device()
        if vdev is None:
            raise err(Errno.ENODEV, "vfio_device_open", f"{name} is not bound to vfio-pci")
        return vdev

    def iommufd_device(self) -> IommufdDevice:
        """``/dev/iommu`` as a dma-buf importer; ``-ENODEV`` before 6.19 (pinlab models
        iommufd only as the dma-buf importer it became in 6.19)."""
        if self.iommufd is None:
            raise err(
                Errno.ENODEV,
                "iommufd_fops_open",
                f"kernel {self.kernel.profile.name}: iommufd imports no dma-bufs (6.19 on)",
            )
        return self.iommufd

    @staticmethod
    def _get(table: dict[str, _T], name: str, what: str) -> _T:
        try:
            return table[name]
        except KeyError:
            raise err(Errno.ENODEV, "open", f"no {what} named {name!r}") from None

    # -- device removal and reset ------------------------------------------------------------
    def hot_unplug(self, device: str) -> Unplugged:
        """Surprise removal of ``device``'s PCI function (``pci_stop_and_remove_bus_device``
        → the bound driver's ``remove``: ``amdgpu_pci_remove`` → ``drm_dev_unplug`` for a
        GPU, ``ib_unregister_device`` for a NIC).

        pinlab's model of what userspace sees: every process using the device -- a GEM
        handle on it (own or imported), an MR or device memory on it, a scanout on one of its
        displays, its VFIO device fd -- is killed (as the ``SIGBUS`` of a mapped BAR, or the
        driver ending every client, would), which tears its buffers down in kernel order; then
        everything bound to the function leaves the system -- the exporter, the NIC, its
        display engines, its GPU importer -- so later calls naming them fail with ``-ENODEV``.
        Returns what went, the exporter with its memory regions as the unplug left them.
        """
        exporter = self.exporters.get(device)
        nic = self.nics.get(device)
        displays = [
            n for n, d in self.displays.items() if exporter is not None and d.pdev is exporter.dev
        ]
        importers = [
            n for n, i in self.gpu_importers.items() if exporter is not None and i.adev is exporter
        ]
        scanned = {self.displays[n] for n in displays}
        victims = tuple(
            p
            for p in self.live_processes()
            if any(g.driver is exporter for g in p.handles.values())
            or any(mr.nic is nic for mr in p.mrs.values())
            or any(s.display in scanned for s in p.scanouts)
            or device in p.vfio
            or any(d is nic for d, _ in p.dms)
        )
        for proc in victims:
            proc.kill()
        if exporter is not None:
            exporter.remove()
        self.reap()
        self.exporters.pop(device, None)
        self.nics.pop(device, None)
        for name in displays:
            del self.displays[name]
        for name in importers:
            del self.gpu_importers[name]
        return Unplugged(device, exporter, victims)

    def _as_owner(self, vdev: VfioPciDevice) -> Process | None:
        owner = self.processes.get(vdev.owner) if vdev.owner is not None else None
        return owner if owner is not None and owner.alive else None

    def vfio_event(self, name: str, event: str) -> None:
        """A device event on vfio-pci device ``name``, run as its owner (the process with the
        device fd open; kernel context without one): ``"reset"`` (``VFIO_DEVICE_RESET``),
        ``"memory-off"`` / ``"memory-on"`` (a config write of ``PCI_COMMAND``),
        ``"low-power"`` / ``"resume"``. Each revokes or un-revokes the device's dma-bufs
        (K-104); ``ValueError`` for an unknown event."""
        vdev = self.vfio(name)
        actions = {
            "reset": vdev.reset,
            "memory-off": lambda: vdev.config_write_command(False),
            "memory-on": lambda: vdev.config_write_command(True),
            "low-power": vdev.low_power_entry,
            "resume": vdev.low_power_exit,
        }
        if event not in actions:
            raise ValueError(f"unknown vfio event {event!r} (expected one of {', '.join(actions)})")
        owner = self._as_owner(vdev)
        previous = self.kernel.current
        self.kernel.current = owner
        try:
            actions[event]()
        finally:
            self.kernel.current = previous
            self.kernel.take_waits()
            self.reap()

    def reset_nic(self, name: str) -> int:
        """A fatal error of NIC ``name`` and its recovery (mlx5's health recovery after
        ``IB_EVENT_DEVICE_FATAL``: the ``ib_device`` is unregistered and registered again):
        the kernel destroys every process's MRs on it
        (:meth:`~pinlab.uapi.process.Process.uverbs_destroy_ufile_hw`); the NIC stays. The
        owners' next work request on such an MR fails (``ibv_post_send`` → ``-EINVAL`` in
        the model, a completion error on hardware). Returns how many MRs were dropped."""
        nic = self.nic(name)
        dropped = sum(proc.uverbs_destroy_ufile_hw(nic) for proc in list(self.live_processes()))
        self.reap()
        return dropped

    # -- processes -------------------------------------------------------------------------
    def spawn(
        self,
        comm: str,
        *,
        uid: int = 1000,
        cap_ipc_lock: bool = False,
        caps: Iterable[int] = (),
        memlock: int | tuple[int, int] | None = None,
        cgroup: object | None = None,
    ) -> Process:
        """Start a process. ``memlock`` is RLIMIT_MEMLOCK in bytes (soft = hard) or a
        (soft, hard) pair; the default is Linux's 8 MiB. ``caps`` adds capabilities
        (e.g. ``CAP_SYS_RESOURCE``) to ``CAP_IPC_LOCK`` from ``cap_ipc_lock``."""
        from pinlab.uapi.process import Process

        pid = self._next_pid
        self._next_pid += 1
        caps = frozenset(caps) | (frozenset({CAP_IPC_LOCK}) if cap_ipc_lock else frozenset())
        limit = None
        if memlock is not None:
            soft, hard = (memlock, memlock) if isinstance(memlock, int) else memlock
            limit = Rlimit(soft, hard)
        proc = Process(
            self,
            pid,
            comm,
            uid=uid,
            caps=caps,
            memlock=limit,
            user=self.kernel.get_user(uid),
            cgroup=cgroup,
        )
        self.processes[pid] = proc
        return proc

    def live_processes(self) -> Iterator[Process]:
        return (p for p in self.processes.values() if p.alive)

    def reap(self) -> int:
        """Free the memory of exited processes that the driver had to keep while it was
        exported (:attr:`orphans`), once no live dma-buf refers to it any more (the device
        file's last reference, ``hl_ctx_put``). Runs after every call and exit; returns how
        many handles were freed."""
        if not self.orphans:
            return 0
        exported = {id(d.priv) for d in self.kernel.dma_bufs()}
        freed = 0
        for gem in list(self.orphans):
            if id(gem.buffer) in exported:
                continue
            self.orphans.remove(gem)
            gem.driver.free_buffer(gem.buffer)
            gem.closed = True
            freed += 1
        return freed
