"""Copy engines: carry out TTM moves and clears in simulated time and signal their fences.

Each TTM device hands its copy jobs (:class:`~pinlab.kernel.ttm.CopyJob`) to a
:class:`CopyEngine` through ``TtmDevice.copy_submit``. The engine runs ``channels`` jobs at a
time in submission order (a GPU's SDMA rings); a move between device memory and host memory is
a transfer over the device's host link in the direction of the copy, capped at the copy rate
(``cost-model.md`` §8: ``evict.d2h.genN``, ``restore.h2d.genN``); a clear or a device-local
move runs at the on-device rate. When the bytes have moved, the job's fence signals with the
current time -- every importer waiting on it (K-64) proceeds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import simpy

from pinlab.kernel.ttm import CopyJob, TtmDevice, TtmMemType
from pinlab.platform.topology import Machine
from pinlab.sim.flows import FlowNetwork, Link
from pinlab.sim.metrics import metric


def local_rate(machine: Machine, device: str) -> float:
    """The on-device rate of ``device`` in bytes/s: its copy engine's clears and VRAM → VRAM
    moves, and the accelerator's own accesses to its memory. The ``mem:<dev>`` link's rate,
    memory bandwidth × ``hbm.copy_efficiency`` (``cost-model.md`` §8), when the spec gives a
    bandwidth; else 10 × ``evict.d2h.genN`` [assumption: on-device copies are an order of
    magnitude faster than over PCIe]."""
    spec = machine.spec.device(device)
    cost = machine.cost
    if spec.memory_bandwidth:
        return spec.memory_bandwidth * cost.hbm.copy_efficiency
    return cost.evict_d2h(spec.gen) * 10


@dataclass(frozen=True, slots=True)
class CopyRates:
    """Copy speeds in bytes/s: device→host, host→device, on-device (clear / VRAM→VRAM)."""

    d2h: float
    h2d: float
    local: float


@dataclass(slots=True)
class CopyStats:
    """What one device's copy engine did; ``bytes_migrated`` is its reported metric
    (``device.<node>/<dev>.bytes_migrated``; a device without a copy engine reports a fresh
    ``CopyStats``: nothing moved)."""

    jobs: int = 0
    moves: int = 0
    clears: int = 0
    bytes_migrated: int = metric(
        "B",
        "bytes its copy engine moved between memories (migrations, evictions, moves back)",
        default=0,
        integral=True,
    )
    busy_time: float = 0.0


class CopyEngine:
    """The copy engine(s) of one TTM device."""

    def __init__(
        self,
        env: simpy.Environment,
        net: FlowNetwork,
        bdev: TtmDevice,
        rates: CopyRates,
        *,
        to_host: list[Link] | None = None,
        from_host: list[Link] | None = None,
        channels: int = 1,
        on_job: Callable[[CopyJob, float, float], None] | None = None,
    ) -> None:
        if channels < 1:
            raise ValueError("a copy engine needs at least one channel")
        self.env = env
        self.net = net
        self.bdev = bdev
        self.rates = rates
        self.to_host = to_host or []
        self.from_host = from_host or []
        self.channels = channels
        self.queue: deque[CopyJob] = deque()
        self.running = 0
        self.stats = CopyStats()
        self.on_job = on_job  # (job, start, end) for traces
        bdev.copy_submit = self.submit
        for job in list(bdev.copy_queue):  # jobs submitted before the engine existed
            self.submit(job)
        bdev.copy_queue.clear()

    def submit(self, job: CopyJob) -> None:
        """``TtmDevice.copy_submit``: queue the job; start it if a channel is free."""
        self.queue.append(job)
        self._kick()

    def _kick(self) -> None:
        while self.running < self.channels and self.queue:
            job = self.queue.popleft()
            self.running += 1
            self.env.process(self._run(job))

    def _path(self, job: CopyJob) -> tuple[list[Link], float]:
        device_side = {TtmMemType.VRAM}
        src_dev = job.src in device_side
        dst_dev = job.dst in device_side
        if job.kind == "clear" or job.src is None or (src_dev and dst_dev):
            return [], self.rates.local
        if src_dev and not dst_dev:
            return self.to_host, self.rates.d2h
        if dst_dev and not src_dev:
            return self.from_host, self.rates.h2d
        return [], self.rates.local  # host to host (GTT <-> SYSTEM): page remapping only

    def _run(self, job: CopyJob):  # type: ignore[no-untyped-def]
        start = self.env.now
        links, rate = self._path(job)
        yield self.net.transfer(job.nbytes, links, cap=rate, label=f"{job.kind}:{job.bo.name}")
        end = self.env.now
        job.fence.signal(end)
        stats = self.stats
        stats.jobs += 1
        stats.busy_time += end - start
        if job.kind == "clear":
            stats.clears += 1
        else:
            stats.moves += 1
            stats.bytes_migrated += job.nbytes
        if self.on_job is not None:
            self.on_job(job, start, end)
        self.running -= 1
        self._kick()
