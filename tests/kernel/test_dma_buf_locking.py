"""The dma-buf locking convention (kernel-semantics.md §2.3; K-18, K-24, K-35, K-72, K-95).

Three rules are checked for every preset:

* the importer **must hold** the resv for pin, unpin, map, unmap, vmap, vunmap, and the
  exporter for the move notification -- otherwise ``LockingError`` (lockdep's
  ``dma_resv_assert_held``), never an errno;
* the importer **must not hold** it for attach, detach, export, fd, get, put, mmap, the CPU
  access brackets and the ``*_unlocked`` variants -- otherwise ``LockingError``;
* exporter callbacks run with the lock (pin, unpin, map_dma_buf, unmap_dma_buf, vmap, vunmap)
  or without it (attach, detach, release, begin/end_cpu_access, mmap).

The ``*_unlocked`` variants do not exist in preset 5.16 (``NotInProfile``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBufExportInfo,
    DmaDataDirection,
    dma_buf_attach,
    dma_buf_begin_cpu_access,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_end_cpu_access,
    dma_buf_export,
    dma_buf_fd,
    dma_buf_get,
    dma_buf_invalidate_mappings,
    dma_buf_map_attachment,
    dma_buf_map_attachment_unlocked,
    dma_buf_mmap,
    dma_buf_move_notify,
    dma_buf_pin,
    dma_buf_put,
    dma_buf_unmap_attachment,
    dma_buf_unmap_attachment_unlocked,
    dma_buf_unpin,
    dma_buf_vmap,
    dma_buf_vmap_unlocked,
    dma_buf_vunmap,
    dma_buf_vunmap_unlocked,
    get_dma_buf,
)
from pinlab.kernel.errno import LockingError, NotInProfile
from pinlab.kernel.file import FdTable
from pinlab.kernel.resv import WwAcquireCtx
from tests.kernel.fakes import Importer
from tests.kernel.test_dma_buf_core import (
    ALL,
    BIDI,
    CACHING,
    Rig,
    StaticRig,
    full_ops,
    map_locked,
)

UNLOCKED_PRESETS = ("6.12", "6.14", "6.16", "6.19", "7.1", "next")


class World:
    """A dynamic-exporter buffer and a static-exporter buffer, each with a dynamic and a
    static attachment; one live mapping, one pin and one vmap to undo."""

    def __init__(self, profile: str) -> None:
        self.rig = Rig(profile)
        self.srig = StaticRig(profile)
        self.importer = Importer()
        self.dyn = self.rig.dynamic_attach(self.importer)
        self.stat = self.srig.static_attach()
        self.sgt = map_locked(self.dyn)
        self.ssgt = map_locked(self.stat)
        with self.srig.resv:
            self.vaddr = dma_buf_vmap(self.srig.dmabuf)
        pinner = self.rig.dynamic_attach(Importer("pinner"))
        with self.rig.resv:
            dma_buf_pin(pinner)
        self.files = FdTable()
        self.fd = dma_buf_fd(get_dma_buf(self.rig.dmabuf), files=self.files)
        self.rig.spy.clear()
        self.srig.spy.clear()

    def notify(self) -> None:
        if self.rig.kernel.profile.invalidate_mappings:
            dma_buf_invalidate_mappings(self.rig.dmabuf)
        else:
            dma_buf_move_notify(self.rig.dmabuf)


MUST_HOLD: dict[str, Callable[[World], object]] = {
    "dma_buf_pin": lambda w: dma_buf_pin(w.dyn),
    "dma_buf_unpin": lambda w: dma_buf_unpin(w.dyn),
    "dma_buf_map_attachment": lambda w: dma_buf_map_attachment(w.dyn, BIDI),
    "dma_buf_unmap_attachment": lambda w: dma_buf_unmap_attachment(w.dyn, w.sgt, BIDI),
    "dma_buf_vmap": lambda w: dma_buf_vmap(w.srig.dmabuf),
    "dma_buf_vunmap": lambda w: dma_buf_vunmap(w.srig.dmabuf, w.vaddr),
    "move_notify": World.notify,
}


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("function", list(MUST_HOLD))
def test_k18_k24_k35_k72_must_hold_functions_without_resv(profile: str, function: str) -> None:
    """K-18 (pin/unpin), K-24 (map/unmap), K-35 (move notify), K-72 (vmap/vunmap): called
    without the resv they raise LockingError naming the function; nothing reaches the
    exporter or the importer."""
    world = World(profile)
    name = world.rig.kernel.profile.move_notify_name if function == "move_notify" else function
    with pytest.raises(LockingError, match=name):
        MUST_HOLD[function](world)
    assert world.rig.spy.log == [] and world.srig.spy.log == []
    assert world.importer.notified == []


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("function", list(MUST_HOLD))
def test_k95_must_hold_satisfied_by_acquire_context(profile: str, function: str) -> None:
    """K-95/§2.3: a resv taken through a ww_acquire_ctx counts as held by the caller."""
    world = World(profile)
    ctx = WwAcquireCtx("importer")
    world.rig.resv.lock(ctx)
    world.srig.resv.lock(ctx)
    MUST_HOLD[function](world)
    world.srig.resv.unlock(ctx)
    world.rig.resv.unlock(ctx)
    assert ctx.held == []


def _export_locked(w: World) -> object:
    """dma_buf_export of a buffer whose (exporter-supplied) resv the caller holds."""
    return dma_buf_export(
        w.rig.kernel,
        DmaBufExportInfo(ops=full_ops(), size=4096, priv=1, resv=w.rig.resv),
    )


MUST_NOT_HOLD: dict[str, Callable[[World], object]] = {
    "dma_buf_attach": lambda w: dma_buf_attach(w.rig.dmabuf, Device("disp1")),
    "dma_buf_dynamic_attach": lambda w: dma_buf_dynamic_attach(
        w.rig.dmabuf, Device("nic9"), Importer().ops, None
    ),
    "dma_buf_detach": lambda w: dma_buf_detach(w.rig.dmabuf, w.dyn),
    "dma_buf_export": _export_locked,
    "dma_buf_fd": lambda w: dma_buf_fd(w.rig.dmabuf, files=w.files),
    "dma_buf_get": lambda w: dma_buf_get(w.rig.kernel, w.fd, files=w.files),
    "dma_buf_put": lambda w: dma_buf_put(w.rig.dmabuf),
    "dma_buf_mmap": lambda w: dma_buf_mmap(w.srig.dmabuf, 0, 1),
    "dma_buf_begin_cpu_access": lambda w: dma_buf_begin_cpu_access(w.srig.dmabuf, BIDI),
    "dma_buf_end_cpu_access": lambda w: dma_buf_end_cpu_access(w.srig.dmabuf, BIDI),
    "dma_buf_map_attachment_unlocked": lambda w: dma_buf_map_attachment_unlocked(w.dyn, BIDI),
    "dma_buf_unmap_attachment_unlocked": lambda w: dma_buf_unmap_attachment_unlocked(
        w.dyn, w.sgt, BIDI
    ),
    "dma_buf_vmap_unlocked": lambda w: dma_buf_vmap_unlocked(w.srig.dmabuf),
    "dma_buf_vunmap_unlocked": lambda w: dma_buf_vunmap_unlocked(w.srig.dmabuf, w.vaddr),
}
UNLOCKED_VARIANTS = [name for name in MUST_NOT_HOLD if name.endswith("_unlocked")]


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("function", list(MUST_NOT_HOLD))
def test_must_not_hold_functions_with_resv_held(profile: str, function: str) -> None:
    """§2.3 (K-72 for vmap_unlocked): with the resv held these raise LockingError naming
    the function (the _unlocked ones would self-deadlock); nothing changes. In 5.16 the
    _unlocked variants do not exist at all."""
    world = World(profile)
    refcount = world.rig.dmabuf.refcount
    attachments = list(world.rig.dmabuf.attachments)
    files = len(world.files)
    expect: type[Exception] = LockingError
    if function in UNLOCKED_VARIANTS and profile not in UNLOCKED_PRESETS:
        expect = NotInProfile
    # dma_buf_attach is dma_buf_dynamic_attach with NULL ops: the splat names the latter
    pattern = "dma_buf_(dynamic_)?attach" if function == "dma_buf_attach" else function
    with world.rig.resv, world.srig.resv, pytest.raises(expect, match=pattern):
        MUST_NOT_HOLD[function](world)
    assert world.rig.spy.log == [] and world.srig.spy.log == []
    assert world.rig.dmabuf.refcount == refcount
    assert world.rig.dmabuf.attachments == attachments
    assert len(world.files) == files
    assert not world.rig.resv.is_locked() and not world.srig.resv.is_locked()


@pytest.mark.parametrize("function", UNLOCKED_VARIANTS)
def test_unlocked_variants_not_in_5_16(function: str) -> None:
    """§1.3: the *_unlocked map/unmap/vmap/vunmap variants appeared in v6.2."""
    world = World("5.16")
    with pytest.raises(NotInProfile, match=r"v6\.2"):
        MUST_NOT_HOLD[function](world)


@pytest.mark.parametrize("profile", UNLOCKED_PRESETS)
@pytest.mark.parametrize("function", list(MUST_NOT_HOLD))
def test_must_not_hold_functions_work_unlocked(profile: str, function: str) -> None:
    """§2.3: the same calls succeed without the resv and leave it unlocked."""
    world = World(profile)
    if function in ("dma_buf_fd", "dma_buf_put"):
        get_dma_buf(world.rig.dmabuf)  # give the call its own reference to consume
    MUST_NOT_HOLD[function](world)
    assert not world.rig.resv.is_locked() and not world.srig.resv.is_locked()


WITH_LOCK = {"pin", "unpin", "map_dma_buf", "unmap_dma_buf", "vmap", "vunmap"}
WITHOUT_LOCK = {"attach", "detach", "release", "begin_cpu_access", "end_cpu_access", "mmap"}


@pytest.mark.parametrize("profile", ALL)
def test_exporter_callbacks_lock_state_over_a_lifecycle(profile: str) -> None:
    """§2.3: pin/unpin/map/unmap/vmap/vunmap run under the resv; attach/detach/release/
    begin_cpu_access/end_cpu_access/mmap without it -- including the caching family's
    attach-time pin+map and detach-time unmap+unpin."""
    rig = Rig(profile)
    srig = StaticRig(profile, ops={"end_cpu_access": lambda d, dr: None})
    static = rig.static_attach()
    dynamic = rig.dynamic_attach()
    s_dyn = srig.dynamic_attach()
    s_stat = srig.static_attach()
    for attach in (static, dynamic, s_dyn, s_stat):
        sgt = map_locked(attach)
        with attach.dmabuf.resv:
            dma_buf_unmap_attachment(attach, sgt, BIDI)
    with rig.resv:
        dma_buf_pin(dynamic)
        dma_buf_unpin(dynamic)
    with srig.resv:
        dma_buf_vunmap(srig.dmabuf, dma_buf_vmap(srig.dmabuf))
    dma_buf_mmap(srig.dmabuf, 0, 1)
    dma_buf_begin_cpu_access(srig.dmabuf, DmaDataDirection.FROM_DEVICE)
    dma_buf_end_cpu_access(srig.dmabuf, DmaDataDirection.FROM_DEVICE)
    for attach in (static, dynamic, s_dyn, s_stat):
        dma_buf_detach(attach.dmabuf, attach)
    dma_buf_put(rig.dmabuf)
    dma_buf_put(srig.dmabuf)

    log = rig.spy.log + srig.spy.log
    seen = {c.name for c in log}
    assert seen == WITH_LOCK | WITHOUT_LOCK
    for call in log:
        assert call.held is (call.name in WITH_LOCK), call
    assert rig.kernel.leaks == [] and srig.kernel.leaks == []
    if profile in CACHING:  # attach-time pin+map and detach-time unmap+unpin happened
        assert rig.spy.names()[:3] == ["attach", "pin", "map_dma_buf"]
