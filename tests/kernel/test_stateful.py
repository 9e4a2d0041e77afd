"""Stateful: random TTM / dma-buf / umem operation sequences under every preset.

A hypothesis ``RuleBasedStateMachine`` creates, exports, attaches (static and dynamic),
pins, maps, evicts under pressure, runs copies, detaches, closes and releases buffers and
pinned RDMA umems, in random order, on a small device (VRAM and GTT of 32 pages each) so
that eviction is frequent. After every step it checks (design.md "Tests"; K-37, K-60):

1. a pinned BO never moves: its resource (the same object) and backing epoch stay while its
   pin_count is > 0 (also checked at every single move, inside the driver's ``move``);
2. every resource manager's allocator passes ``check_invariants()``, ``used`` equals the sum
   of its live resources' sizes, the resources do not overlap, and the manager's LRU and
   unevictable lists hold exactly those BOs;
3. every operation either succeeds or raises ``KernelError`` (``LockingError`` only where the
   rule breaks the locking contract on purpose); nothing else escapes;
4. a pinned BO is never on an LRU, an unpinned one always is;

plus: no reservation lock is left held, and (dmem presets) the fake dmem pools are charged
exactly the VRAM resources. Teardown releases everything and checks every manager is back
to ``used == 0`` and every pool to zero.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaBufAttachOps,
    DmaDataDirection,
    SgTable,
    dma_buf_attach,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_fd,
    dma_buf_map_attachment,
    dma_buf_map_attachment_unlocked,
    dma_buf_pin,
    dma_buf_put,
    dma_buf_unmap_attachment,
    dma_buf_unmap_attachment_unlocked,
    dma_buf_unpin,
    get_dma_buf,
)
from pinlab.kernel.dmem import DmemRegion
from pinlab.kernel.errno import KernelError, LockingError
from pinlab.kernel.file import FdTable
from pinlab.kernel.kernel import Kernel, Task
from pinlab.kernel.profile import PRESETS, get_profile
from pinlab.kernel.resv import DmaResvUsage
from pinlab.kernel.ttm import (
    TtmBufferObject,
    TtmDevice,
    TtmMemType,
    TtmPlace,
    TtmPlFlag,
    TtmResource,
    placement,
    ttm_bo_clear,
    ttm_bo_init_validate,
    ttm_bo_move_to_lru_tail,
    ttm_bo_pin,
    ttm_bo_release,
    ttm_bo_unpin,
    ttm_bo_validate,
)
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IbUmemDmabuf,
    ib_umem_dmabuf_get,
    ib_umem_dmabuf_get_pinned,
    ib_umem_dmabuf_map_pages,
    ib_umem_dmabuf_release,
    ib_umem_dmabuf_unmap_pages,
)
from tests.kernel.fakes import ExportingFuncs, Importer, TtmExporter
from tests.kernel.test_ttm import FakeDmem

PAGE = 4096
VRAM, TT, SYSTEM = TtmMemType.VRAM, TtmMemType.TT, TtmMemType.SYSTEM
T = TypeVar("T")

PLACEMENTS: list[tuple[TtmPlace, ...]] = [
    placement(VRAM),
    placement(TT),
    placement(VRAM, TT),
    placement(TT, VRAM),
    placement(SYSTEM),
    (TtmPlace(VRAM), TtmPlace(TT, TtmPlFlag.FALLBACK)),
    (TtmPlace(VRAM, TtmPlFlag.DESIRED), TtmPlace(TT)),
    (TtmPlace(VRAM, TtmPlFlag.CONTIGUOUS),),
]


class CheckingFuncs(ExportingFuncs):
    """ExportingFuncs that asserts, at every backing change, that the BO is not pinned."""

    def move(self, bo: TtmBufferObject, evict: bool, new_res: TtmResource) -> None:
        if bo.resource is not None:
            assert bo.pin_count == 0, f"TTM moves pinned {bo!r}"
        super().move(bo, evict, new_res)

    def move_notify(self, bo: TtmBufferObject, evict: bool, new_res: TtmResource | None) -> None:
        if new_res is None:  # gutting: only ever asked for unpinned BOs here
            assert bo.pin_count == 0, f"TTM guts pinned {bo!r}"
        super().move_notify(bo, evict, new_res)


@dataclass
class AttRec:
    attach: DmaBufAttachment
    dynamic: bool
    sgts: list[SgTable] = field(default_factory=list)
    pins: int = 0  # our dma_buf_pin calls not yet undone


@dataclass
class BoRec:
    bo: TtmBufferObject
    exporter: TtmExporter
    dmabuf: DmaBuf | None = None
    fd: int | None = None
    attachments: list[AttRec] = field(default_factory=list)
    umems: list[IbUmemDmabuf] = field(default_factory=list)
    ttm_pins: int = 0  # driver-internal ttm_bo_pin calls not yet undone

    @property
    def live_dmabuf(self) -> DmaBuf | None:
        return self.dmabuf if self.dmabuf is not None and not self.dmabuf.released else None


def pick(items: list[T], i: int) -> T | None:
    return items[i % len(items)] if items else None


class TtmDmaBufMachine(RuleBasedStateMachine):
    PROFILE = "6.16"
    SWITCHES: ClassVar[dict[str, bool]] = {}  # configuration switches (§1.5): move_notify

    def __init__(self) -> None:
        super().__init__()
        self.kernel = Kernel(get_profile(self.PROFILE, **self.SWITCHES))
        self.bdev = TtmDevice(self.kernel, "gpu0", CheckingFuncs())
        vram = self.bdev.add_manager(VRAM, 32 * PAGE, name="gpu0:vram")
        self.bdev.add_manager(TT, 32 * PAGE, name="gpu0:gtt")
        self.bdev.add_manager(SYSTEM, 256 * PAGE, name="gpu0:system")
        self.exporters = [
            TtmExporter(self.bdev),  # pins into GTT (amdgpu ≤6.15 style)
            TtmExporter(self.bdev, pin_domain=placement(VRAM, TT)),  # may pin in VRAM
        ]
        self.files = FdTable()
        self.bos: list[BoRec] = []
        self.pinned_at: dict[int, tuple[TtmResource | None, int]] = {}
        self.dmem: FakeDmem | None = None
        self.tasks = [Task(1, "app"), Task(2, "batch")]
        if self.kernel.profile.dmem:
            self.dmem = FakeDmem()
            self.dmem.add("app")
            self.dmem.add("batch", max=16 * PAGE, low=4 * PAGE)
            vram.region = DmemRegion("drm/0000:03:00.0/vram0", vram.size)
            self.kernel.dmem = self.dmem
            self.kernel.current = self.tasks[0]
        self.ops = 0
        self.errors = 0

    # -- helpers --------------------------------------------------------------------------
    def op(self, fn: Callable[[], T]) -> T | None:
        """Run one kernel operation: success, or a KernelError (recorded), nothing else."""
        self.ops += 1
        try:
            return fn()
        except KernelError:
            self.errors += 1
            return None

    def live(self) -> list[BoRec]:
        return [r for r in self.bos if not r.bo.deleted]

    def exported(self) -> list[BoRec]:
        return [r for r in self.live() if r.live_dmabuf is not None]

    def all_attachments(self) -> list[tuple[BoRec, AttRec]]:
        return [(r, a) for r in self.live() for a in r.attachments]

    def all_umems(self) -> list[tuple[BoRec, IbUmemDmabuf]]:
        return [(r, u) for r in self.live() for u in r.umems]

    def forget_released(self, rec: BoRec) -> None:
        """The GEM object forgets its dma-buf once the buffer is released."""
        if rec.dmabuf is not None and rec.dmabuf.released:
            rec.bo.dma_buf = None

    # -- rules: buffers -------------------------------------------------------------------
    @initialize(sizes=st.lists(st.integers(1, 8), min_size=1, max_size=4))
    def start(self, sizes: list[int]) -> None:
        """A few BOs in VRAM, the first one exported, so that every rule has material."""
        for n, pages in enumerate(sizes):
            bo = self.op(
                lambda pages=pages: ttm_bo_init_validate(self.bdev, pages * PAGE, placement(VRAM))
            )
            if bo is not None:
                self.bos.append(BoRec(bo, self.exporters[n % 2]))
        if self.bos:
            rec = self.bos[0]
            rec.dmabuf = rec.exporter.export(rec.bo)
            rec.fd = dma_buf_fd(rec.dmabuf, files=self.files)

    @rule(
        pages=st.integers(1, 12),
        plc=st.sampled_from(PLACEMENTS[:4]),
        exp=st.integers(0, 1),
    )
    def create_bo(self, pages: int, plc: tuple[TtmPlace, ...], exp: int) -> None:
        exporter = self.exporters[exp]
        bo = self.op(lambda: ttm_bo_init_validate(self.bdev, pages * PAGE, plc))
        if bo is not None:
            self.bos.append(BoRec(bo, exporter))

    @rule(pages=st.integers(8, 28), vram=st.booleans(), keep=st.booleans())
    def pressure(self, pages: int, vram: bool, keep: bool) -> None:
        """A large allocation that forces eviction; kept or freed again at once."""
        where = VRAM if vram else TT
        bo = self.op(lambda: ttm_bo_init_validate(self.bdev, pages * PAGE, placement(where)))
        if bo is None:
            return
        if keep:
            self.bos.append(BoRec(bo, self.exporters[0]))
        else:
            ttm_bo_release(bo)

    @rule(i=st.integers(0, 1 << 16), plc=st.sampled_from(PLACEMENTS), gut=st.booleans())
    @precondition(lambda self: self.live())
    def validate(self, i: int, plc: tuple[TtmPlace, ...], gut: bool) -> None:
        rec = pick(self.live(), i)
        if rec is None:
            return
        bo = rec.bo
        if gut and bo.pin_count == 0:
            plc = ()  # gutting is only ever asked for unpinned BOs here
        with bo.resv:
            self.op(lambda: ttm_bo_validate(bo, plc))

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: self.live())
    def touch(self, i: int) -> None:
        rec = pick(self.live(), i)
        if rec is not None:
            ttm_bo_move_to_lru_tail(rec.bo)

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: any(r.bo.resource is not None for r in self.live()))
    def clear(self, i: int) -> None:
        rec = pick([r for r in self.live() if r.bo.resource is not None], i)
        if rec is not None:
            with rec.bo.resv:
                fence = ttm_bo_clear(rec.bo)
            assert fence in rec.bo.resv.fences(DmaResvUsage.KERNEL)

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: any(r.bo.resource is not None for r in self.live()))
    def driver_pin(self, i: int) -> None:
        """A driver-internal pin in place (scanout-like): ttm_bo_pin under the resv."""
        rec = pick([r for r in self.live() if r.bo.resource is not None], i)
        if rec is not None:
            with rec.bo.resv:
                ttm_bo_pin(rec.bo)
            rec.ttm_pins += 1

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: any(r.ttm_pins for r in self.live()))
    def driver_unpin(self, i: int) -> None:
        rec = pick([r for r in self.live() if r.ttm_pins], i)
        if rec is not None:
            with rec.bo.resv:
                ttm_bo_unpin(rec.bo)
            rec.ttm_pins -= 1

    @rule(ts=st.floats(0, 1e6, allow_nan=False))
    def run_copies(self, ts: float) -> None:
        queued = list(self.bdev.copy_queue)
        assert self.bdev.run_copies(ts) == len(queued)
        assert all(job.fence.signaled for job in queued)
        self.kernel.take_waits()

    @rule(i=st.integers(0, 1))
    @precondition(lambda self: self.dmem is not None)
    def switch_task(self, i: int) -> None:
        if self.dmem is not None:
            self.kernel.current = self.tasks[i]

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: self.live())
    def release_bo(self, i: int) -> None:
        """Drop the last BO reference: only once no dma-buf, attachment or umem uses it."""
        rec = pick(
            [r for r in self.live() if r.live_dmabuf is None and not r.attachments and not r.umems],
            i,
        )
        if rec is None:
            return
        with rec.bo.resv:
            for _ in range(rec.ttm_pins):
                ttm_bo_unpin(rec.bo)
        rec.ttm_pins = 0
        ttm_bo_release(rec.bo)

    # -- rules: dma-buf -------------------------------------------------------------------
    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: any(r.dmabuf is None for r in self.live()))
    def export(self, i: int) -> None:
        rec = pick([r for r in self.live() if r.dmabuf is None], i)
        if rec is None:
            return
        dmabuf = self.op(lambda: rec.exporter.export(rec.bo))
        if dmabuf is not None:
            rec.dmabuf = dmabuf
            rec.fd = dma_buf_fd(dmabuf, files=self.files)

    @rule(i=st.integers(0, 1 << 16), dynamic=st.booleans(), p2p=st.booleans())
    @precondition(lambda self: self.exported())
    def attach(self, i: int, dynamic: bool, p2p: bool) -> None:
        rec = pick(self.exported(), i)
        if rec is None:
            return
        dmabuf = rec.live_dmabuf
        assert dmabuf is not None
        get_dma_buf(dmabuf)  # the importer's reference
        if dynamic:
            imp = Importer(f"imp{self.ops}", allow_peer2peer=p2p)
            attach = self.op(lambda: dma_buf_dynamic_attach(dmabuf, imp.dev, imp.ops, imp))
        else:
            attach = self.op(lambda: dma_buf_attach(dmabuf, Device(f"disp{self.ops}")))
        if attach is None:
            dma_buf_put(dmabuf)
            return
        rec.attachments.append(AttRec(attach, dynamic))

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: any(a.dynamic for _, a in self.all_attachments()))
    def pin(self, i: int) -> None:
        found = pick([(r, a) for r, a in self.all_attachments() if a.dynamic], i)
        if found is None:
            return
        _, att = found

        def do_pin() -> bool:
            dma_buf_pin(att.attach)
            return True

        with att.attach.dmabuf.resv:
            pinned = self.op(do_pin)
        if pinned:
            att.pins += 1

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: any(a.pins for _, a in self.all_attachments()))
    def unpin(self, i: int) -> None:
        found = pick([(r, a) for r, a in self.all_attachments() if a.pins], i)
        if found is None:
            return
        _, att = found
        with att.attach.dmabuf.resv:
            dma_buf_unpin(att.attach)
        att.pins -= 1

    @rule(i=st.integers(0, 1 << 16), unlocked=st.booleans())
    @precondition(lambda self: self.all_attachments())
    def map(self, i: int, unlocked: bool) -> None:
        found = pick(self.all_attachments(), i)
        if found is None:
            return
        _, att = found
        if unlocked and self.kernel.profile.unlocked_variants:
            sgt = self.op(lambda: dma_buf_map_attachment_unlocked(att.attach))
        else:
            with att.attach.dmabuf.resv:
                sgt = self.op(
                    lambda: dma_buf_map_attachment(att.attach, DmaDataDirection.BIDIRECTIONAL)
                )
        if sgt is not None:
            att.sgts.append(sgt)

    @rule(i=st.integers(0, 1 << 16), unlocked=st.booleans())
    @precondition(lambda self: any(a.sgts for _, a in self.all_attachments()))
    def unmap(self, i: int, unlocked: bool) -> None:
        found = pick([(r, a) for r, a in self.all_attachments() if a.sgts], i)
        if found is None:
            return
        _, att = found
        sgt = att.sgts.pop()
        if unlocked and self.kernel.profile.unlocked_variants:
            dma_buf_unmap_attachment_unlocked(att.attach, sgt)
        else:
            with att.attach.dmabuf.resv:
                dma_buf_unmap_attachment(att.attach, sgt, DmaDataDirection.BIDIRECTIONAL)

    def _detach(self, rec: BoRec, att: AttRec) -> None:
        dmabuf = att.attach.dmabuf
        with dmabuf.resv:
            while att.sgts:
                dma_buf_unmap_attachment(att.attach, att.sgts.pop())
            for _ in range(att.pins):
                dma_buf_unpin(att.attach)
        att.pins = 0
        dma_buf_detach(dmabuf, att.attach)
        rec.attachments.remove(att)
        dma_buf_put(dmabuf)
        self.forget_released(rec)

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: self.all_attachments())
    def detach(self, i: int) -> None:
        found = pick(self.all_attachments(), i)
        if found is not None:
            self._detach(*found)

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: any(r.fd is not None for r in self.live()))
    def close(self, i: int) -> None:
        rec = pick([r for r in self.live() if r.fd is not None], i)
        if rec is None or rec.fd is None:
            return
        assert self.files.close(rec.fd)
        rec.fd = None
        self.forget_released(rec)

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: any(a.dynamic for _, a in self.all_attachments()))
    def pin_without_lock(self, i: int) -> None:
        """Breaking the locking contract raises LockingError and changes nothing (K-18)."""
        found = pick([(r, a) for r, a in self.all_attachments() if a.dynamic], i)
        if found is None:
            return
        rec, att = found
        before = (rec.bo.pin_count, rec.bo.mem_type, att.attach.importer_pins)
        with pytest.raises(LockingError):
            dma_buf_pin(att.attach)
        with pytest.raises(LockingError):
            ttm_bo_validate(rec.bo, placement(SYSTEM))
        assert (rec.bo.pin_count, rec.bo.mem_type, att.attach.importer_pins) == before

    # -- rules: RDMA umems ----------------------------------------------------------------
    @rule(
        i=st.integers(0, 1 << 16),
        off=st.integers(0, 1 << 20),
        length=st.integers(0, 1 << 20),
        bad=st.sampled_from([False, False, False, True]),
        revocable=st.booleans(),
    )
    @precondition(lambda self: any(r.fd is not None for r in self.exported()))
    def umem_get_pinned(self, i: int, off: int, length: int, bad: bool, revocable: bool) -> None:
        rec = pick([r for r in self.exported() if r.fd is not None], i)
        if rec is None or rec.fd is None:
            return
        fd = rec.fd
        if bad:  # anything, mostly out of range or empty (K-43)
            offset, size = off % (2 * rec.bo.size), length % (2 * rec.bo.size)
        else:  # a valid, possibly unaligned, window of the buffer
            offset = off % rec.bo.size
            size = 1 + length % (rec.bo.size - offset)
        revocable = revocable and self.kernel.profile.umem_revocable_pinned_ops
        umem = self.op(
            lambda: ib_umem_dmabuf_get_pinned(
                self.kernel,
                Device(f"efa{self.ops}"),
                offset,
                size,
                fd,
                IB_ACCESS_LOCAL_WRITE,
                files=self.files,
                revocable=revocable,
            )
        )
        if umem is not None:
            assert umem.pinned or umem.revoked
            rec.umems.append(umem)

    @rule(i=st.integers(0, 1 << 16), offset=st.integers(0, 8 * PAGE))
    @precondition(lambda self: any(r.fd is not None for r in self.exported()))
    def umem_get_dynamic(self, i: int, offset: int) -> None:
        """An mlx5-like dynamic umem whose callback unmaps (under the held resv)."""
        rec = pick([r for r in self.exported() if r.fd is not None], i)
        if rec is None or rec.fd is None:
            return
        fd = rec.fd

        def invalidate(attach: DmaBufAttachment) -> None:
            umem = attach.importer_priv
            assert isinstance(umem, IbUmemDmabuf)
            ib_umem_dmabuf_unmap_pages(umem)

        ops = DmaBufAttachOps(allow_peer2peer=True, move_notify=invalidate)
        umem = self.op(
            lambda: ib_umem_dmabuf_get(
                self.kernel,
                Device(f"mlx{self.ops}"),
                offset,
                PAGE,
                fd,
                IB_ACCESS_LOCAL_WRITE,
                ops,
                files=self.files,
            )
        )
        if umem is not None:
            rec.umems.append(umem)

    @rule(i=st.integers(0, 1 << 16), unmap=st.booleans())
    @precondition(lambda self: any(not u.pinned for _, u in self.all_umems()))
    def umem_map(self, i: int, unmap: bool) -> None:
        found = pick([(r, u) for r, u in self.all_umems() if not u.pinned], i)
        if found is None:
            return
        _, umem = found
        with umem.dmabuf.resv:
            if unmap:
                ib_umem_dmabuf_unmap_pages(umem)
            else:
                self.op(lambda: ib_umem_dmabuf_map_pages(umem))

    @rule(i=st.integers(0, 1 << 16))
    @precondition(lambda self: self.all_umems())
    def umem_release(self, i: int) -> None:
        found = pick(self.all_umems(), i)
        if found is None:
            return
        rec, umem = found
        ib_umem_dmabuf_release(umem)
        rec.umems.remove(umem)
        self.forget_released(rec)

    # -- invariants -----------------------------------------------------------------------
    @invariant()
    def pinned_bos_never_move(self) -> None:
        """(1) K-37/K-60: while pin_count > 0 the resource and the epoch stay the same."""
        for rec in self.live():
            bo = rec.bo
            if bo.pin_count:
                key = (bo.resource, bo.epoch)  # the resource by identity
                prev = self.pinned_at.get(bo.serial)
                assert prev is None or prev == key, f"pinned {bo!r} moved"
                self.pinned_at[bo.serial] = key
            else:
                self.pinned_at.pop(bo.serial, None)

    @invariant()
    def managers_are_consistent(self) -> None:
        """(2) and (4): allocator invariants, no lost bytes, no overlap, LRU membership."""
        live = self.live()
        for mem_type, man in self.bdev.managers.items():
            man.allocator.check_invariants()
            here = [
                r.bo for r in live if r.bo.resource is not None and r.bo.resource.manager is man
            ]
            assert man.used == sum(bo.resource.size for bo in here if bo.resource), mem_type
            segments = sorted(
                seg for bo in here if bo.resource for seg in bo.resource.allocation.segments
            )
            for (s0, l0), (s1, _) in itertools.pairwise(segments):
                assert s0 + l0 <= s1, f"overlapping resources in {man.name}"
            assert all(bo.resource is not None and bo.resource.allocation.live for bo in here)
            assert set(man.lru) | set(man.pinned) == {bo.serial for bo in here}
            for bo in here:
                if bo.pin_count:
                    assert bo.serial in man.pinned and bo.serial not in man.lru
                else:
                    assert bo.serial in man.lru and bo.serial not in man.pinned
            if self.dmem is not None and mem_type is VRAM:
                charged = sum(bo.size for bo in here if bo.resource and bo.resource.pool)
                assert charged == sum(p.usage for p in self.dmem.pools.values())

    @invariant()
    def no_lock_left_held(self) -> None:
        for rec in self.live():
            assert not rec.bo.resv.is_locked(), f"{rec.bo!r} left locked"

    # -- teardown -------------------------------------------------------------------------
    def teardown(self) -> None:
        """Release everything in kernel order; every manager returns to used == 0."""
        for rec, umem in self.all_umems():
            ib_umem_dmabuf_release(umem)
            rec.umems.remove(umem)
        for rec, att in self.all_attachments():
            self._detach(rec, att)
        for rec in self.live():
            if rec.fd is not None:
                assert self.files.close(rec.fd)
                rec.fd = None
            assert rec.dmabuf is None or rec.dmabuf.released
            with rec.bo.resv:
                for _ in range(rec.ttm_pins):
                    ttm_bo_unpin(rec.bo)
            ttm_bo_release(rec.bo)
        self.bdev.run_copies()
        for man in self.bdev.managers.values():
            man.allocator.check_invariants()
            assert man.used == 0 and not man.lru and not man.pinned, man
        if self.dmem is not None:
            assert all(p.usage == 0 for p in self.dmem.pools.values())
        assert len(self.files) == 0


SETTINGS = settings(
    max_examples=120,
    stateful_step_count=50,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],  # no slow 'explain' phase
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SETTINGS_MN = settings(SETTINGS, max_examples=40)


@pytest.mark.parametrize("profile", list(PRESETS))
def test_random_operation_sequences_keep_the_invariants(profile: str) -> None:
    """K-37, K-60 and the TTM/dma-buf/umem accounting invariants, for every preset."""
    machine = type(f"Machine_{profile.replace('.', '_')}", (TtmDmaBufMachine,), {})
    machine.PROFILE = profile
    run_state_machine_as_test(machine, settings=SETTINGS)


@pytest.mark.parametrize("profile", [p for p in PRESETS if PRESETS[p].move_notify_is_option])
def test_random_operation_sequences_with_move_notify(profile: str) -> None:
    """The same with CONFIG_DMABUF_MOVE_NOTIFY=y: dynamic importers map without pinning, so
    mapped buffers move and importers are notified (K-26, K-34, K-36)."""
    machine = type(f"MachineMN_{profile.replace('.', '_')}", (TtmDmaBufMachine,), {})
    machine.PROFILE = profile
    machine.SWITCHES = {"move_notify": True}
    run_state_machine_as_test(machine, settings=SETTINGS_MN)
