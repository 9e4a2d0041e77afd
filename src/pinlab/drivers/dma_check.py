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

**Re-checks skipped while nothing changed.** A device goes on using one mapping for many
accesses (every message of an MR, every frame of a scanout), and between them nothing that
could make it unsafe usually happens. What can is a closed list, each changing one of the three
things a verdict reads:

* the importer's mapping -- ``dma_buf_unmap_attachment`` and a new ``dma_buf_map_attachment``
  after ``dma_buf_move_notify`` (``invalidate_mappings`` in 7.1), an ODP fault's remap, a
  re-registration: the access comes through another :class:`SgTable`;
* the buffer's backing -- a TTM move, gutting or release (``ttm_bo_handle_move_mem``,
  ``ttm_bo_pipeline_gutting``, ``ttm_bo_release``: ``TtmBufferObject.epoch``), a revoke
  (vfio-pci's ``vfio_pci_dma_buf_move``, a uverbs export's ``revoke``):
  :attr:`DeviceBuffer.epoch <pinlab.drivers.base.DeviceBuffer.epoch>`, read on every access;
* the buffer's KERNEL fences -- ``dma_resv_add_fence`` of the move's or clear's fence:
  ``DmaResv.seq``. A fence that signalled never unsignals, so fences all signalled at one
  ``seq`` are all signalled while it stands.

So a clean verdict is noted on the table (``SgTable.checked``: the dma-buf and its buffer, the
buffer's epoch, the resv's ``seq``, and whether the fences were looked at -- a ``waited``
access does not look), and the next access through the same table with the same epoch and
``seq`` is counted and passes without the fence walk (and without the type test the full check
starts with: the note is made only for a :class:`DeviceBuffer`). Any change in the list makes
the next access a full check, so every access that could be stale or unfenced is checked in
full; an incident is never noted, so an access after one is checked in full too.
``_SKIP = False`` turns the note off (the tests' reference: the same incidents, access by
access).
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


_SKIP = True
"""Whether a clean verdict's note on the table lets the next unchanged access skip the walk
(module docstring); the tests turn it off for their reference run."""


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
        fences (a fault handler that ran ``map_pages``), so only staleness is checked. An
        access through a table found clean since the last change of the buffer's backing
        and fences passes without the walk (module docstring).
        """
        self.accesses += 1
        if _SKIP and sgt is not None:
            note = sgt.checked
            if note is not None:
                noted, buf, epoch, seq, fenced = note
                if (
                    noted is dmabuf
                    and dmabuf.priv is buf
                    and buf.epoch == epoch
                    and dmabuf.resv.seq == seq
                    and (fenced or waited)
                ):
                    return None
        buf = dmabuf.priv
        if not isinstance(buf, DeviceBuffer):
            return self._record(self._verdict(device, dmabuf, sgt, 0, pid, waited))
        epoch = buf.epoch
        incident = self._verdict(device, dmabuf, sgt, epoch, pid, waited)
        if incident is None:
            assert sgt is not None
            # frozen for importers; this note is the detector's own (SgTable docstring)
            note = (dmabuf, buf, epoch, dmabuf.resv.seq, not waited)
            object.__setattr__(sgt, "checked", note)
            return None
        return self._record(incident)

    def _record(self, incident: DmaIncident | None) -> DmaIncident | None:
        if incident is None:
            return None
        self.incidents.append(incident)
        if self.on_incident is not None:
            self.on_incident()
        return incident

    def _verdict(
        self,
        device: str,
        dmabuf: DmaBuf,
        sgt: SgTable | None,
        epoch: int,
        pid: int | None,
        waited: bool,
    ) -> DmaIncident | None:
        """The full check of one access (``epoch``: the buffer's backing epoch now)."""
        buf = dmabuf.priv
        name = buf.name if isinstance(buf, DeviceBuffer) else repr(dmabuf)
        if sgt is None:
            return DmaIncident(self.clock(), "stale", device, name, pid, "access without a mapping")
        if isinstance(buf, DeviceBuffer) and sgt.epoch != epoch:
            return DmaIncident(
                self.clock(),
                "stale",
                device,
                name,
                pid,
                f"mapping of epoch {sgt.epoch}, buffer now at epoch {epoch} ({buf.location})",
            )
        if not waited and not dmabuf.resv.test_signaled(DmaResvUsage.KERNEL):
            pending = dmabuf.resv.fences(DmaResvUsage.KERNEL, unsignaled_only=True)
            return DmaIncident(
                self.clock(),
                "unfenced",
                device,
                name,
                pid,
                f"{len(pending)} KERNEL fence(s) pending: {pending[0]!r}",
            )
        return None

    def __len__(self) -> int:
        return len(self.incidents)
