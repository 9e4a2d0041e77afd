"""The stale-DMA detector: every device access is checked against the exporter's truth.

In hardware a NIC or display engine that DMAs through a mapping whose buffer has since moved
reads or writes memory that now belongs to someone else: silent corruption or a crashed
device. pinlab cannot corrupt memory, so it records such an access as an *incident*
(design principle 6). Two kinds are told apart:

* ``stale`` -- the mapping was made before the buffer's backing last changed (a move or
  gutting happened and the importer kept using its old addresses: it ignored ``move_notify``,
  or the exporter moved a buffer it should not have);
* ``unfenced`` -- the mapping is current but a KERNEL fence on the buffer (the copy that moved
  it there, or the clear) has not signalled: the importer did not wait (K-39, K-64).

Every upstream-correct combination of drivers yields zero incidents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pinlab.drivers.base import DeviceBuffer
from pinlab.kernel.dma_buf import DmaBuf, SgTable
from pinlab.kernel.resv import DmaResvUsage


@dataclass(frozen=True, slots=True)
class DmaIncident:
    """One unsafe device access."""

    time: float
    kind: str  # "stale" | "unfenced"
    device: str
    buffer: str
    pid: int | None
    detail: str


class StaleDmaDetector:
    """Checks device accesses; ``clock`` gives the time stamp (the simulator's ``env.now``)."""

    __slots__ = ("accesses", "clock", "incidents", "on_incident")

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock if clock is not None else (lambda: 0.0)
        self.incidents: list[DmaIncident] = []
        self.accesses = 0
        # called after an incident is recorded (the simulator's sampler, instead of polling)
        self.on_incident: Callable[[], None] | None = None

    def check(
        self,
        device: str,
        dmabuf: DmaBuf,
        sgt: SgTable | None,
        pid: int | None = None,
        *,
        waited: bool = False,
    ) -> DmaIncident | None:
        """Check one access by ``device`` through ``sgt``; record and return an incident.

        ``waited`` means the access happens after the caller waited for the buffer's KERNEL
        fences (a fault handler that ran ``map_pages``), so only staleness is checked.
        """
        self.accesses += 1
        buf = dmabuf.priv
        name = buf.name if isinstance(buf, DeviceBuffer) else repr(dmabuf)
        incident: DmaIncident | None = None
        if sgt is None:
            incident = DmaIncident(
                self.clock(), "stale", device, name, pid, "access without a mapping"
            )
        elif isinstance(buf, DeviceBuffer) and sgt.epoch != buf.epoch:
            incident = DmaIncident(
                self.clock(),
                "stale",
                device,
                name,
                pid,
                f"mapping of epoch {sgt.epoch}, buffer now at epoch {buf.epoch} ({buf.location})",
            )
        elif not waited and not dmabuf.resv.test_signaled(DmaResvUsage.KERNEL):
            pending = dmabuf.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True)
            incident = DmaIncident(
                self.clock(),
                "unfenced",
                device,
                name,
                pid,
                f"{len(pending)} KERNEL fence(s) pending: {pending[0]!r}",
            )
        if incident is not None:
            self.incidents.append(incident)
            if self.on_incident is not None:
                self.on_incident()
        return incident

    def __len__(self) -> int:
        return len(self.incidents)
