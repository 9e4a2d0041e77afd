"""RDMA dma-buf umems (drivers/infiniband/core/umem_dmabuf.c).

kernel-semantics.md §5 and checklist items K-40, K-42 (the ``map_pages`` part), K-43 … K-47,
K-90 and K-93. The exporter is the TTM-backed ``TtmExporter`` (dynamic, pins into GTT by
default) or the habanalabs-like ``StaticExporter``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachOps,
    DmaBufOps,
    SgTable,
    dma_buf_attach_revocable,
    dma_buf_export,
    dma_buf_fd,
    dma_buf_invalidate_mappings,
    dma_buf_move_notify,
)
from pinlab.kernel.dma_buf import DmaBufExportInfo as ExportInfo
from pinlab.kernel.errno import Errno, KernelError, LockingError, NotInProfile, err
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.file import FdTable, File
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.limits import U64_MAX
from pinlab.kernel.profile import PRESETS, KernelProfile, get_profile
from pinlab.kernel.resv import DmaResvUsage
from pinlab.kernel.ttm import (
    TtmBufferObject,
    TtmMemType,
    placement,
    ttm_bo_clear,
    ttm_bo_pin,
    ttm_bo_validate,
)
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_MW_BIND,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_ATOMIC,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
    IbUmemDmabuf,
    ib_umem_dmabuf_attach_pinned_ops,
    ib_umem_dmabuf_attach_pinned_revocable_ops,
    ib_umem_dmabuf_get,
    ib_umem_dmabuf_get_pinned,
    ib_umem_dmabuf_get_pinned_revocable_and_lock,
    ib_umem_dmabuf_map_pages,
    ib_umem_dmabuf_release,
    ib_umem_dmabuf_revoke,
    ib_umem_dmabuf_set_revoke_locked,
    ib_umem_dmabuf_unmap_pages,
    ib_umem_num_pages,
)
from tests.kernel.fakes import MiB, StaticExporter, TtmExporter, make_ttm_device

PAGE = 4096
ALL_PRESETS = list(PRESETS)
PRE_REVOKE = [p for p in PRESETS if PRESETS[p].umem_pinned_warn_callback]
ACCESS = IB_ACCESS_LOCAL_WRITE


@dataclass
class Setup:
    """One kernel, a TTM device, an exported VRAM BO installed as ``fd`` in ``files``."""

    kernel: Kernel
    exporter: TtmExporter
    bo: TtmBufferObject
    dmabuf: DmaBuf
    files: FdTable
    fd: int
    nic: Device


def setup(
    profile: str | KernelProfile = "6.16",
    size: int = 4 * MiB,
    where: TtmMemType = TtmMemType.VRAM,
    **exp_kw: object,
) -> Setup:
    """The exporter pins into GTT unless told otherwise, so a VRAM BO migrates on pin."""
    kernel = Kernel(profile)
    bdev = make_ttm_device(kernel, vram=64 * MiB, gtt=64 * MiB, system=256 * MiB)
    exporter = TtmExporter(bdev, **exp_kw)  # type: ignore[arg-type]
    bo = exporter.create_bo(size, where)
    dmabuf = exporter.export(bo)
    files = FdTable()
    fd = dma_buf_fd(dmabuf, files=files)
    return Setup(kernel, exporter, bo, dmabuf, files, fd, Device("efa0"))


def get(s: Setup, offset: int = 0, size: int | None = None, **kw: object) -> IbUmemDmabuf:
    ops = kw.pop("ops", DmaBufAttachOps(allow_peer2peer=True, move_notify=lambda a: None))
    return ib_umem_dmabuf_get(
        s.kernel,
        s.nic,
        offset,
        s.dmabuf.size if size is None else size,
        s.fd,
        ACCESS,
        ops,  # type: ignore[arg-type]
        files=s.files,
    )


def get_pinned(s: Setup, offset: int = 0, size: int | None = None, **kw: bool) -> IbUmemDmabuf:
    return ib_umem_dmabuf_get_pinned(
        s.kernel,
        s.nic,
        offset,
        s.dmabuf.size if size is None else size,
        s.fd,
        ACCESS,
        files=s.files,
        **kw,
    )


class ScriptedWaiter:
    """A FenceWaiter returning a fixed result and recording what it was asked."""

    def __init__(self, result: int) -> None:
        self.result = result
        self.calls: list[tuple[list[DmaFence], bool, int | None]] = []

    def wait(self, fences: Sequence[DmaFence], *, intr: bool, timeout: int | None) -> int:
        self.calls.append((list(fences), intr, timeout))
        return self.result


def assert_errno(exc: pytest.ExceptionInfo[KernelError], errno: Errno) -> None:
    assert exc.value.errno is errno, str(exc.value)


def assert_released(s: Setup) -> None:
    """Nothing of a failed or released umem is left: reference, attachment, pin, lock."""
    assert s.dmabuf.refcount == 1
    assert s.dmabuf.attachments == []
    assert s.bo.pin_count == 0
    assert not s.dmabuf.resv.is_locked()
    assert s.kernel.leaks == []


def add_kernel_fence(s: Setup) -> DmaFence:
    with s.bo.resv:
        return ttm_bo_clear(s.bo)


# -- K-43: ib_umem_dmabuf_get ------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k43_einval_cases_keep_the_refcount(profile: str) -> None:
    """K-43: overflow, missing ops or callback (≤6.19; K-114: accepted from 7.1), a too-small
    buffer and a zero-page range are each -EINVAL; after every failure the dma-buf refcount is
    back where it was."""
    s = setup(profile)
    size = s.dmabuf.size
    ops = DmaBufAttachOps(allow_peer2peer=True, move_notify=lambda a: None)
    cases: list[tuple[str, int, int, DmaBufAttachOps | None]] = [
        ("offset + size overflows", U64_MAX, 1, ops),
        ("offset + size overflows (size)", 1, U64_MAX, ops),
        ("buffer smaller than size", 0, size + 1, ops),
        ("buffer smaller than offset + size", PAGE, size, ops),
        ("offset past the end", size, 1, ops),
        ("zero pages", 0, 0, ops),
        ("zero pages at an aligned offset", 2 * PAGE, 0, ops),
        ("zero pages at an unaligned offset", 100, 0, ops),
    ]
    if not s.kernel.profile.invalidate_mappings:
        cases += [
            ("no ops", 0, size, None),
            ("no move_notify", 0, size, DmaBufAttachOps(allow_peer2peer=True)),
        ]
    for what, offset, length, case_ops in cases:
        with pytest.raises(KernelError) as exc:
            ib_umem_dmabuf_get(
                s.kernel, s.nic, offset, length, s.fd, ACCESS, case_ops, files=s.files
            )
        assert exc.value.errno is Errno.EINVAL, what
        assert s.dmabuf.refcount == 1, what
        assert s.dmabuf.attachments == [], what
    assert s.exporter.calls == []


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k43_dma_buf_get_errors_pass_through(profile: str) -> None:
    """K-43/K-4: -EBADF for a closed fd and -EINVAL for a file that is not a dma-buf come
    from dma_buf_get unchanged."""
    s = setup(profile)
    with pytest.raises(KernelError) as exc:
        ib_umem_dmabuf_get(
            s.kernel,
            s.nic,
            0,
            PAGE,
            999,
            ACCESS,
            DmaBufAttachOps(True, lambda a: None),
            files=s.files,
        )
    assert_errno(exc, Errno.EBADF)
    other = s.files.install(File("drm", object()))
    with pytest.raises(KernelError) as exc:
        ib_umem_dmabuf_get(
            s.kernel,
            s.nic,
            0,
            PAGE,
            other,
            ACCESS,
            DmaBufAttachOps(True, lambda a: None),
            files=s.files,
        )
    assert_errno(exc, Errno.EINVAL)
    assert s.dmabuf.refcount == 1


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k43_attach_error_passes_through_and_drops_the_reference(profile: str) -> None:
    """K-43/K-10: an exporter attach error is returned unchanged; the reference is dropped."""
    kernel = Kernel(profile)

    def refuse(dmabuf: DmaBuf, attach: object) -> None:
        raise err(Errno.EOPNOTSUPP, "fake_attach")

    ops = DmaBufOps(
        map_dma_buf=lambda a, d: SgTable(((0, PAGE),)),
        unmap_dma_buf=lambda a, sgt, d: None,
        release=lambda d: None,
        attach=refuse,
    )
    dmabuf = dma_buf_export(kernel, ExportInfo(ops=ops, size=4 * PAGE, priv=object()))
    files = FdTable()
    fd = dma_buf_fd(dmabuf, files=files)
    with pytest.raises(KernelError) as exc:
        ib_umem_dmabuf_get(
            kernel,
            Device("mlx5_0"),
            0,
            PAGE,
            fd,
            ACCESS,
            DmaBufAttachOps(True, lambda a: None),
            files=files,
        )
    assert_errno(exc, Errno.EOPNOTSUPP)
    assert dmabuf.refcount == 1 and dmabuf.attachments == []


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k43_success_maps_nothing(profile: str) -> None:
    """K-43/§5.1: success is a dynamic attachment with one more reference; nothing is pinned
    or mapped (the importer maps later, in map_pages)."""
    s = setup(profile)
    umem = get(s, offset=PAGE + 100, size=3 * PAGE)
    assert s.dmabuf.refcount == 2
    assert umem.attach is not None and umem.attach in s.dmabuf.attachments
    assert umem.attach.importer_priv is umem and umem.attach.importer_ops is not None
    assert umem.sgt is None and umem.pinned is False and umem.revoked is False
    # The rest of the struct is zeroed as by kzalloc: no trim recorded, no driver state.
    assert (umem.first_sg_offset, umem.last_sg_trim) == (0, 0)
    assert umem.private is None and umem.pinned_revoke is None
    assert s.exporter.calls == ["attach"]
    assert s.bo.pin_count == 0 and s.bo.mem_type is TtmMemType.VRAM
    ib_umem_dmabuf_release(umem)
    assert_released(s)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k43_checks_run_in_the_kernel_order(profile: str) -> None:
    """K-43/§5.1: the overflow and ops checks come before ``dma_buf_get``, the zero-page check
    after it; so a closed fd turns only the later ones into -EBADF. A range ending exactly at
    U64_MAX does not overflow."""
    s = setup(profile)
    ops = DmaBufAttachOps(allow_peer2peer=True, move_notify=lambda a: None)
    cases: list[tuple[str, int, int, DmaBufAttachOps | None, Errno]] = [
        ("overflow", U64_MAX, 1, ops, Errno.EINVAL),
        ("negative offset", -1, PAGE, ops, Errno.EINVAL),
        ("negative size", 0, -1, ops, Errno.EINVAL),
        ("ends at U64_MAX", U64_MAX - PAGE, PAGE, ops, Errno.EBADF),
        ("zero pages", 0, 0, ops, Errno.EBADF),
    ]
    if not s.kernel.profile.invalidate_mappings:
        cases.append(
            ("no move_notify", 0, PAGE, DmaBufAttachOps(allow_peer2peer=True), Errno.EINVAL)
        )
    for what, offset, length, case_ops, errno in cases:
        with pytest.raises(KernelError) as exc:
            ib_umem_dmabuf_get(
                s.kernel, s.nic, offset, length, 999, ACCESS, case_ops, files=s.files
            )
        assert exc.value.errno is errno, what


def test_k43_ib_umem_num_pages_counts_every_page_touched() -> None:
    """K-43: ``ib_umem_num_pages`` = pages of [ALIGN_DOWN(offset), ALIGN(offset + length)); a
    sub-page range is one page, a range straddling a page boundary two."""
    cases = [
        ((0, 0), 0),
        ((0, 1), 1),
        ((0, PAGE), 1),
        ((0, PAGE + 1), 2),
        ((100, 0), 1),  # why the import counts from iova 0: an offset alone touches a page
        ((100, PAGE), 2),
        ((PAGE - 1, 2), 2),
        ((3 * PAGE, PAGE), 1),
        ((3 * PAGE + 5, 2 * PAGE), 3),
    ]
    for (offset, length), pages in cases:
        n = ib_umem_num_pages(offset, length)
        assert n == pages and isinstance(n, int), (offset, length)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k43_a_sub_page_range_is_accepted(profile: str) -> None:
    """K-43: the zero-page check refuses only size 0; one byte covers a page."""
    s = setup(profile)
    umem = get(s, offset=0, size=1)
    assert umem.length == 1
    ib_umem_dmabuf_release(umem)
    assert_released(s)


def test_k43_access_flags_and_writable() -> None:
    """K-43/§5.1: the import records ``ib_access_writable(access)``: any write, atomic or
    memory-window-bind access makes the umem writable; the flags are the uverbs values."""
    assert (
        IB_ACCESS_LOCAL_WRITE,
        IB_ACCESS_REMOTE_WRITE,
        IB_ACCESS_REMOTE_READ,
        IB_ACCESS_REMOTE_ATOMIC,
        IB_ACCESS_MW_BIND,
        IB_ACCESS_ON_DEMAND,
    ) == (1, 2, 4, 8, 16, 64)
    s = setup()
    writable = {
        IB_ACCESS_LOCAL_WRITE: True,
        IB_ACCESS_REMOTE_WRITE: True,
        IB_ACCESS_REMOTE_ATOMIC: True,
        IB_ACCESS_MW_BIND: True,
        IB_ACCESS_REMOTE_READ: False,
        IB_ACCESS_ON_DEMAND: False,
        0: False,
    }
    for access, expected in writable.items():
        assert IbUmemDmabuf(s.nic, s.dmabuf, 0, PAGE, access).writable is expected, access


def test_k43_umems_are_distinct_objects() -> None:
    """K-43: two imports of the same range are two umems (compared by identity, hashable)."""
    s = setup()
    a, b = get(s, size=PAGE), get(s, size=PAGE)
    assert a != b and len({a, b}) == 2
    for umem in (a, b):
        ib_umem_dmabuf_release(umem)
    assert_released(s)


# -- K-44 / K-42: map_pages ----------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k44_map_pages_maps_once_and_waits_every_time(profile: str) -> None:
    """K-44: map_pages on an already mapped umem skips the map but still waits (KERNEL usage,
    uninterruptible, no timeout); the table is trimmed to the page-aligned window
    [PAGE, 4 * PAGE) of the range, here one entry covering the whole buffer."""
    s = setup(profile)
    umem = get(s, offset=PAGE + 100, size=2 * PAGE)
    fence = add_kernel_fence(s)
    waiter = ScriptedWaiter(1)
    s.kernel.waiter = waiter
    with s.dmabuf.resv:
        ib_umem_dmabuf_map_pages(umem)
        sgt = umem.sgt
        ib_umem_dmabuf_map_pages(umem)
        assert umem.sgt is sgt
    assert sgt is not None
    assert s.exporter.calls.count("map") == 1
    # (with MN off the core pins around the map, which may move the BO: the resv then holds
    # that move's fence, a later fence on the same copy timeline, instead of the clear's)
    (latest,) = s.bo.resv.fences(DmaResvUsage.KERNEL)
    assert latest.is_later_or_same(fence)
    assert waiter.calls == [([latest], False, None), ([latest], False, None)]
    assert umem.first_sg_offset == PAGE and umem.last_sg_trim == s.dmabuf.size - 4 * PAGE
    with s.dmabuf.resv:
        ib_umem_dmabuf_unmap_pages(umem)
        assert umem.sgt is None and umem.first_sg_offset == 0 and umem.last_sg_trim == 0
        ib_umem_dmabuf_unmap_pages(umem)  # nothing mapped: nothing to do
    assert s.exporter.calls.count("unmap") == 1
    ib_umem_dmabuf_release(umem)
    assert_released(s)


@pytest.mark.parametrize(
    ("offset", "length", "first", "trim"),
    [
        (PAGE + 100, 2 * PAGE, PAGE, PAGE),  # window [P, 4P): from entry 0 into entry 1
        (100, 200, 0, PAGE),  # window [0, P) inside entry 0
        (6 * PAGE, PAGE - 1, PAGE, PAGE),  # window [6P, 7P) inside entry 2
        (2 * PAGE, 3 * PAGE, 0, 0),  # exactly entry 1
        (0, 8 * PAGE, 0, 0),  # the whole table
        (7 * PAGE, 2 * PAGE, 2 * PAGE, 0),  # the window's end is past the table's
        (8 * PAGE, PAGE, 0, 0),  # the whole window is past the table's end
    ],
)
def test_k44_map_pages_records_the_trim_of_the_first_and_last_entry(
    offset: int, length: int, first: int, trim: int
) -> None:
    """K-44/§5.2: the table is cut to the page-aligned window of the range: ``first_sg_offset``
    is what the entry holding the window's start loses in front, ``last_sg_trim`` what the
    entry holding its end loses behind (entries of 2, 3 and 3 pages here, of a 10-page buffer:
    an edge outside the table records nothing). Unmap undoes it."""
    kernel = Kernel("6.16")
    segments = ((0x10_0000, 2 * PAGE), (0x40_0000, 3 * PAGE), (0x80_0000, 3 * PAGE))
    ops = DmaBufOps(
        map_dma_buf=lambda a, d: SgTable(segments),
        unmap_dma_buf=lambda a, sgt, d: None,
        release=lambda d: None,
    )
    dmabuf = dma_buf_export(kernel, ExportInfo(ops=ops, size=10 * PAGE, priv=object()))
    files = FdTable()
    fd = dma_buf_fd(dmabuf, files=files)
    umem = ib_umem_dmabuf_get(
        kernel,
        Device("mlx5_0"),
        offset,
        length,
        fd,
        ACCESS,
        DmaBufAttachOps(True, lambda a: None),
        files=files,
    )
    with dmabuf.resv:
        ib_umem_dmabuf_map_pages(umem)
        assert (umem.first_sg_offset, umem.last_sg_trim) == (first, trim)
        ib_umem_dmabuf_unmap_pages(umem)
        assert (umem.first_sg_offset, umem.last_sg_trim) == (0, 0)
    ib_umem_dmabuf_release(umem)
    assert dmabuf.refcount == 1 and dmabuf.attachments == []


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k44_map_pages_on_revoked_umem_is_einval(profile: str) -> None:
    """K-44: a revoked umem cannot be mapped again."""
    s = setup(profile)
    umem = get(s)
    ib_umem_dmabuf_revoke(umem)
    with s.dmabuf.resv, pytest.raises(KernelError) as exc:
        ib_umem_dmabuf_map_pages(umem)
    assert_errno(exc, Errno.EINVAL)
    assert "map" not in s.exporter.calls
    ib_umem_dmabuf_release(umem)
    assert_released(s)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_map_pages_and_unmap_pages_need_the_resv(profile: str) -> None:
    """§5.2: both run with the resv held (dma_resv_assert_held)."""
    s = setup(profile)
    umem = get(s)
    with pytest.raises(LockingError):
        ib_umem_dmabuf_map_pages(umem)
    with pytest.raises(LockingError):
        ib_umem_dmabuf_unmap_pages(umem)
    assert "map" not in s.exporter.calls
    ib_umem_dmabuf_release(umem)


@pytest.mark.parametrize(("result", "errno"), [(0, Errno.ETIMEDOUT), (-5, Errno.EIO)])
@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k42_map_pages_wait_result(profile: str, result: int, errno: Errno) -> None:
    """K-42 (map_pages part): a wait result of 0 becomes -ETIMEDOUT, a negative one is
    returned as that errno."""
    s = setup(profile)
    umem = get(s)
    add_kernel_fence(s)
    s.kernel.waiter = ScriptedWaiter(result)
    with s.dmabuf.resv, pytest.raises(KernelError) as exc:
        ib_umem_dmabuf_map_pages(umem)
    assert_errno(exc, errno)
    ib_umem_dmabuf_release(umem)
    assert_released(s)


# -- K-45: get_pinned ------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k45_get_pinned_success(profile: str) -> None:
    """K-45: attach with allow_peer2peer, pin, pinned = 1, map (waiting for the pin's move
    fence), resv released."""
    s = setup(profile)
    s.kernel.take_waits()
    umem = get_pinned(s)
    attach = umem.attach
    assert attach is not None and attach.importer_ops is not None
    assert attach.importer_ops.allow_peer2peer and attach.peer2peer
    assert umem.pinned and not umem.revoked and umem.sgt is not None
    assert s.bo.pin_count >= 1 and s.bo.mem_type is TtmMemType.TT  # pinned into GTT
    assert not s.dmabuf.resv.is_locked()
    assert s.exporter.calls[:2] == ["attach", "pin"] and s.exporter.calls[-1] == "map"
    (move,) = s.bo.resv.fences(DmaResvUsage.KERNEL)
    assert s.kernel.take_waits() == [move]
    assert s.dmabuf.refcount == 2
    ib_umem_dmabuf_release(umem)
    assert_released(s)
    assert s.exporter.calls.count("pin") == s.exporter.calls.count("unpin")


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k45_pin_failure_releases_everything_without_unpin(profile: str) -> None:
    """K-45/K-23: dma_buf_pin failing (the exporter took no pin) → detach, put, error returned;
    nothing to unpin."""
    s = setup(profile, fail_pin=Errno.ENOMEM)
    with pytest.raises(KernelError) as exc:
        get_pinned(s)
    assert_errno(exc, Errno.ENOMEM)
    assert s.exporter.calls == ["attach", "pin", "detach"]
    assert_released(s)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k45_real_pin_failure_from_ttm(profile: str) -> None:
    """K-45/K-23 end to end: the exporter pins into VRAM only, VRAM is full of pinned BOs, so
    ttm_bo_validate fails with -ENOMEM and the pinned import fails with it."""
    s = setup(profile, size=32 * MiB)
    s.exporter.pin_domain = placement(TtmMemType.VRAM)
    with s.bo.resv:  # the exported BO sits in SYSTEM, so pinning it needs VRAM room
        ttm_bo_validate(s.bo, placement(TtmMemType.SYSTEM))
    filler = s.exporter.create_bo(64 * MiB, TtmMemType.VRAM)
    with filler.resv:
        ttm_bo_pin(filler)
    with pytest.raises(KernelError) as exc:
        get_pinned(s)
    assert_errno(exc, Errno.ENOMEM)
    assert "unpin" not in s.exporter.calls
    assert_released(s)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k45_map_failure_unpins_exactly_once(profile: str) -> None:
    """K-45: the map failing after the pin releases everything with exactly one unpin. MN on
    (always in 7.1) so that the core takes no map-time pin of its own."""
    s = setup(get_profile(profile, move_notify=True), fail_map=Errno.EIO)
    with pytest.raises(KernelError) as exc:
        get_pinned(s)
    assert_errno(exc, Errno.EIO)
    assert s.exporter.calls == ["attach", "pin", "map", "unpin", "detach"]
    assert_released(s)
    assert len(s.kernel.warnings) == 0


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k45_map_failure_balances_pins_with_mn_off(profile: str) -> None:
    """K-45 with the preset's default MN (off before 7.1: the core also pins around the map):
    every exporter pin is matched by exactly one unpin; no WARN."""
    s = setup(profile, fail_map=Errno.EIO)
    with pytest.raises(KernelError):
        get_pinned(s)
    assert s.exporter.calls.count("unpin") == s.exporter.calls.count("pin") >= 1
    assert_released(s)
    assert s.kernel.warnings.count("ttm_bo_unpin") == 0


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k45_wait_failure_unpins_exactly_once(profile: str) -> None:
    """K-45 with K-42: the fence wait in map_pages timing out (-ETIMEDOUT) after a successful
    map unmaps and unpins once."""
    s = setup(get_profile(profile, move_notify=True))
    s.kernel.waiter = ScriptedWaiter(0)
    with pytest.raises(KernelError) as exc:
        get_pinned(s)
    assert_errno(exc, Errno.ETIMEDOUT)
    assert s.exporter.calls == ["attach", "pin", "map", "unmap", "unpin", "detach"]
    assert_released(s)


def test_k45_double_unpin_reproduction() -> None:
    """K-45/§5.3: with ``umem_pinned_double_unpin`` (the pre-February-2026 error path) the
    map-failure branch unpins once more than it pinned and TTM WARNs on the underflow."""
    s = setup(get_profile("6.16", umem_pinned_double_unpin=True), fail_map=Errno.EIO)
    with pytest.raises(KernelError) as exc:
        get_pinned(s)
    assert_errno(exc, Errno.EIO)
    assert s.exporter.calls.count("unpin") == s.exporter.calls.count("pin") + 1
    assert s.kernel.warnings.count("ttm_bo_unpin", "pin_count") == 1
    assert_released(s)
    # the fixed default on the same preset
    s = setup("6.16", fail_map=Errno.EIO)
    with pytest.raises(KernelError):
        get_pinned(s)
    assert s.kernel.warnings.count("ttm_bo_unpin") == 0


# -- K-46 / K-47: revoke and release ------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k46_revoke_is_idempotent(profile: str) -> None:
    """K-46: revoke unmaps, unpins (pinned umem) and sets revoked; a second revoke does
    nothing."""
    s = setup(profile)
    umem = get_pinned(s)
    n = len(s.exporter.calls)
    ib_umem_dmabuf_revoke(umem)
    first = s.exporter.calls[n:]
    assert "unmap" in first and first[-1] == "unpin"
    assert umem.revoked is True and umem.pinned is False and umem.sgt is None
    assert s.bo.pin_count == 0 and not s.dmabuf.resv.is_locked()
    ib_umem_dmabuf_revoke(umem)
    assert s.exporter.calls[n:] == first
    assert umem.attach in s.dmabuf.attachments  # revoke does not detach
    ib_umem_dmabuf_release(umem)
    assert s.exporter.calls[n + len(first) :] == ["detach"]
    assert_released(s)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k46_revoke_of_dynamic_umem_only_unmaps(profile: str) -> None:
    """K-46: a non-pinned umem is unmapped but never dma_buf_unpin'ed by revoke."""
    s = setup(get_profile(profile, move_notify=True))
    umem = get(s)
    with s.dmabuf.resv:
        ib_umem_dmabuf_map_pages(umem)
    ib_umem_dmabuf_revoke(umem)
    assert s.exporter.calls == ["attach", "map", "unmap"]
    assert umem.revoked and umem.sgt is None
    ib_umem_dmabuf_release(umem)
    assert_released(s)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k47_release_revokes_detaches_and_puts(profile: str) -> None:
    """K-47: release = revoke, detach, put; closing the fd afterwards releases the buffer."""
    s = setup(profile)
    umem = get_pinned(s)
    assert s.dmabuf.refcount == 2
    ib_umem_dmabuf_release(umem)
    assert umem.revoked and umem.attach is None
    calls = s.exporter.calls
    assert calls[-1] == "detach" and calls[-2] == "unpin"
    assert_released(s)
    assert s.files.close(s.fd)
    assert s.dmabuf.released and s.exporter.calls[-1] == "release"
    assert len(s.kernel.warnings) == 0


# -- K-40 / K-90: notifications to a pinned umem --------------------------------------------


@pytest.mark.parametrize("profile", PRE_REVOKE)
def test_k40_pinned_umem_callback_only_logs(profile: str) -> None:
    """K-40: a move notification reaching a pinned umem only logs "Invalidate callback should
    not be called when memory is pinned"; the umem keeps its mapping and pin."""
    s = setup(profile, where=TtmMemType.TT)  # already where it is pinned: no migration
    umem = get_pinned(s)
    assert s.kernel.dmesg == []
    sgt, n = umem.sgt, len(s.exporter.calls)
    with s.dmabuf.resv:
        dma_buf_move_notify(s.dmabuf)
    assert s.kernel.dmesg == [
        "efa0: Invalidate callback should not be called when memory is pinned"
    ]
    assert umem.sgt is sgt and umem.pinned and not umem.revoked
    assert s.exporter.calls[n:] == [] and s.bo.pin_count >= 1
    assert len(s.kernel.warnings) == 0  # a log line, not a WARN
    ib_umem_dmabuf_release(umem)
    assert_released(s)


def test_k90_default_pinned_umem_is_not_revocable_in_7_1() -> None:
    """K-90 (7.1): the default pinned ops have no invalidate_mappings: the attachment is not
    revocable and an invalidation does nothing to it."""
    s = setup("7.1", where=TtmMemType.TT)
    assert ib_umem_dmabuf_attach_pinned_ops(s.kernel).invalidate_mappings is None
    umem = get_pinned(s)
    assert umem.attach is not None
    assert dma_buf_attach_revocable(umem.attach) is False
    sgt, n = umem.sgt, len(s.exporter.calls)
    with s.dmabuf.resv:
        dma_buf_invalidate_mappings(s.dmabuf)
    assert umem.sgt is sgt and umem.pinned and not umem.revoked
    assert s.exporter.calls[n:] == [] and s.kernel.dmesg == []
    ib_umem_dmabuf_release(umem)
    assert_released(s)


def test_k90_revocable_pinned_umem_is_revoked_by_an_invalidation() -> None:
    """K-90 (7.1): with the revocable pinned ops an invalidation runs the revoke sequence
    under the held resv: unmap, unpin, revoked = 1; release afterwards unpins nothing more."""
    s = setup("7.1", where=TtmMemType.TT)  # a pin that does not migrate (VFIO-like)
    umem = get_pinned(s, revocable=True)
    attach = umem.attach
    assert attach is not None and attach.importer_ops is not None
    assert attach.importer_ops.allow_peer2peer
    assert dma_buf_attach_revocable(attach) is True
    n = len(s.exporter.calls)
    with s.dmabuf.resv:
        dma_buf_invalidate_mappings(s.dmabuf)
    assert s.exporter.calls[n:] == ["unmap", "unpin"]
    assert umem.revoked and not umem.pinned and umem.sgt is None
    assert s.bo.pin_count == 0
    with s.dmabuf.resv, pytest.raises(KernelError) as exc:
        ib_umem_dmabuf_map_pages(umem)
    assert_errno(exc, Errno.EINVAL)
    ib_umem_dmabuf_release(umem)
    assert s.exporter.calls[n + 2 :] == ["detach"]
    assert_released(s)
    assert len(s.kernel.warnings) == 0


def test_k115_k116_revocable_and_lock_returns_locked_and_revoke_calls_the_driver_first() -> None:
    """K-115: the revocable import returns with the resv held, so the driver installs its
    callback before anyone can revoke (outside the resv that is a locking error). K-116: the
    revoke calls the driver's callback before unmap and unpin, runs once, and the release
    after it unpins nothing more."""
    s = setup("7.1", where=TtmMemType.TT)  # a pin that does not migrate
    umem = ib_umem_dmabuf_get_pinned_revocable_and_lock(
        s.kernel, s.nic, 0, s.dmabuf.size, s.fd, ACCESS, files=s.files
    )
    assert s.dmabuf.resv.held_by_caller()
    events: list[str] = []
    ib_umem_dmabuf_set_revoke_locked(umem, lambda priv: events.append(f"driver {priv}"), "mr1")
    s.dmabuf.resv.unlock()
    with pytest.raises(LockingError):
        ib_umem_dmabuf_set_revoke_locked(umem, lambda priv: None, None)
    n = len(s.exporter.calls)
    with s.dmabuf.resv:
        dma_buf_invalidate_mappings(s.dmabuf)
        events.extend(s.exporter.calls[n:])
        dma_buf_invalidate_mappings(s.dmabuf)  # at most once
    assert events == ["driver mr1", "unmap", "unpin"]
    assert umem.revoked and not umem.pinned
    ib_umem_dmabuf_release(umem)
    assert s.exporter.calls[n + 2 :] == ["detach"]
    assert_released(s)


def test_k90_revocable_umem_revoked_by_its_own_pin_migration() -> None:
    """K-90 / K-117 edge, kernel-faithful: a pin that *migrates* the BO makes the exporter
    invalidate every attachment, the pinning umem included. With the revocable ops the umem
    revokes itself inside dma_buf_pin (pinned is not yet 1, so nothing is unpinned), map_pages
    then returns -EINVAL and the release path, finding the umem already revoked, never unpins:
    the exporter pin leaks (as in umem_dmabuf.c, which checks ``revoked`` first)."""
    s = setup("7.1")  # in VRAM; the exporter pins into GTT
    with pytest.raises(KernelError) as exc:
        get_pinned(s, revocable=True)
    assert_errno(exc, Errno.EINVAL)
    assert s.exporter.calls == ["attach", "pin", "detach"]
    assert s.bo.pin_count == 1 and s.bo.mem_type is TtmMemType.TT
    assert [leak.function for leak in s.kernel.leaks] == ["dma_buf_detach"]
    assert s.dmabuf.refcount == 1 and s.dmabuf.attachments == []


@pytest.mark.parametrize("profile", PRE_REVOKE)
def test_k40_pin_migration_reaches_the_pinning_umem(profile: str) -> None:
    """K-40 / K-118 edge, kernel-faithful: the migration done by the exporter's pin notifies every
    dynamic attachment, including the one being pinned, so the warn-only callback logs once
    during registration (≤6.16) and the import still succeeds."""
    s = setup(profile)  # in VRAM; the exporter pins into GTT
    umem = get_pinned(s)
    assert s.kernel.dmesg == [
        "efa0: Invalidate callback should not be called when memory is pinned"
    ]
    assert umem.pinned and not umem.revoked and umem.sgt is not None
    ib_umem_dmabuf_release(umem)
    assert_released(s)


@pytest.mark.parametrize("profile", PRE_REVOKE)
def test_k90_revocable_ops_do_not_exist_before_7_1(profile: str) -> None:
    s = setup(profile)
    with pytest.raises(NotInProfile):
        ib_umem_dmabuf_attach_pinned_revocable_ops(s.kernel)
    with pytest.raises(NotInProfile):
        get_pinned(s, revocable=True)
    assert s.dmabuf.refcount == 1 and s.exporter.calls == []


# -- K-93: static exporter -------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k93_pinned_umem_on_static_exporter(profile: str) -> None:
    """K-93: on a static exporter dma_buf_pin is a successful no-op, pinned is still set, and
    the unpin at revoke is a no-op for the exporter; the one mapping is torn down by release."""
    kernel = Kernel(profile)
    exporter = StaticExporter(kernel)
    exporter.require_p2p = True  # the umem's attachment is peer2peer
    dmabuf = exporter.export(8 * PAGE)
    files = FdTable()
    fd = dma_buf_fd(dmabuf, files=files)
    umem = ib_umem_dmabuf_get_pinned(kernel, Device("efa0"), 0, 8 * PAGE, fd, ACCESS, files=files)
    assert umem.pinned and umem.sgt is not None and umem.sgt.page_less
    assert exporter.calls == ["map"]
    ib_umem_dmabuf_revoke(umem)
    assert not umem.pinned and umem.revoked
    ib_umem_dmabuf_release(umem)
    assert exporter.calls == ["map", "unmap"]
    assert dmabuf.refcount == 1 and dmabuf.attachments == [] and kernel.leaks == []
    assert len(kernel.warnings) == 0
