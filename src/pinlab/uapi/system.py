"""A booted machine as userspace sees it: the kernel, the device drivers by name, the
processes, and the stale-DMA detector every device access goes through."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

from pinlab.drivers.base import ExporterDriver
from pinlab.drivers.display import DisplayEngine
from pinlab.drivers.dma_check import StaleDmaDetector
from pinlab.drivers.gpu_import import GpuImporter
from pinlab.drivers.rdma import RdmaDevice
from pinlab.kernel.errno import Errno, err
from pinlab.kernel.kernel import CAP_IPC_LOCK, Kernel, Rlimit

if TYPE_CHECKING:
    from pinlab.uapi.process import GemHandle, Process

_T = TypeVar("_T")


class System:
    """One machine: ``kernel``, exporters, NICs, displays and GPU importers by device name.

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
        self.processes: dict[int, Process] = {}
        # GEM handles of exited processes whose memory the driver refused to free while it
        # was still exported (habanalabs, K-82); freed by reap() once no dma-buf is left
        self.orphans: list[GemHandle] = []
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
        self._unique(name)
        nic.detector = self.detector
        self.nics[name] = nic
        return nic

    def add_display(self, name: str, display: DisplayEngine) -> DisplayEngine:
        self._unique(name)
        display.detector = self.detector
        self.displays[name] = display
        return display

    def add_gpu_importer(self, name: str, importer: GpuImporter) -> GpuImporter:
        self._unique(name)
        importer.detector = self.detector
        self.gpu_importers[name] = importer
        return importer

    def _unique(self, name: str) -> None:
        taken = self.exporters.keys() | self.nics.keys() | self.displays.keys()
        if name in taken or name in self.gpu_importers:
            raise ValueError(f"device name {name!r} is already used on this system")

    def exporter(self, name: str) -> ExporterDriver:
        return self._get(self.exporters, name, "exporting device")

    def nic(self, name: str) -> RdmaDevice:
        return self._get(self.nics, name, "RDMA device")

    def display(self, name: str) -> DisplayEngine:
        return self._get(self.displays, name, "display")

    def gpu_importer(self, name: str) -> GpuImporter:
        return self._get(self.gpu_importers, name, "importing GPU")

    @staticmethod
    def _get(table: dict[str, _T], name: str, what: str) -> _T:
        try:
            return table[name]
        except KeyError:
            raise err(Errno.ENODEV, "open", f"no {what} named {name!r}") from None

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
