"""RDMA dma-buf umems (drivers/infiniband/core/umem_dmabuf.c, ``kernel-semantics.md`` §5).

An RDMA importer is always a *dynamic* dma-buf importer. Two flavours exist:

* :func:`ib_umem_dmabuf_get` (v5.12) -- the ODP-style import (mlx5): nothing is pinned or mapped
  at registration; :func:`ib_umem_dmabuf_map_pages` maps under the resv and waits for KERNEL
  fences; the importer's ``move_notify`` unmaps.
* :func:`ib_umem_dmabuf_get_pinned` (v5.16, the EFA series) -- attach, ``dma_buf_pin``, map,
  all at registration; the importer callback only warns (until 7.1, where it is gone, unless
  the revocable pinned ops of the March 2026 follow-up are used: Jacob Moroni's "[PATCH
  rdma-next v3 0/5] Add pinned revocable dmabuf import interface",
  :func:`ib_umem_dmabuf_get_pinned_revocable_and_lock`, K-115, K-116).

No RLIMIT_MEMLOCK or cgroup accounting happens on these paths upstream (§5.1); policies that
would add it live in ``pinlab.policy``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    PAGE_SIZE,
    DmaBuf,
    DmaBufAttachment,
    DmaBufAttachOps,
    DmaDataDirection,
    SgTable,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_get,
    dma_buf_map_attachment,
    dma_buf_pin,
    dma_buf_put,
    dma_buf_unmap_attachment,
    dma_buf_unpin,
)
from pinlab.kernel.errno import Errno, KernelError, NotInProfile, err
from pinlab.kernel.file import FdTable
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.limits import U64_MAX
from pinlab.kernel.resv import MAX_SCHEDULE_TIMEOUT, DmaResvUsage

# include/rdma/ib_verbs.h enum ib_access_flags
IB_ACCESS_LOCAL_WRITE = 1 << 0
IB_ACCESS_REMOTE_WRITE = 1 << 1
IB_ACCESS_REMOTE_READ = 1 << 2
IB_ACCESS_REMOTE_ATOMIC = 1 << 3
IB_ACCESS_MW_BIND = 1 << 4
IB_ACCESS_ON_DEMAND = 1 << 6


def ib_access_writable(access: int) -> bool:
    """``ib_access_writable()`` (include/rdma/ib_verbs.h): whether an MR with ``access`` can
    modify its memory -- a local or remote write, an atomic, or binding a memory window (which
    can grant write access later). ``ib_umem_get`` and ``ib_umem_dmabuf_get`` store it as
    ``umem->writable``."""
    return bool(
        access
        & (
            IB_ACCESS_LOCAL_WRITE
            | IB_ACCESS_REMOTE_WRITE
            | IB_ACCESS_REMOTE_ATOMIC
            | IB_ACCESS_MW_BIND
        )
    )


@dataclass(eq=False, slots=True)
class IbUmemDmabuf:
    """``struct ib_umem_dmabuf``: one registered dma-buf range of one RDMA device.

    ``private`` is the importer's pointer (mlx5's MR); ``sgt`` is the current mapping, trimmed
    to the page-aligned window ``[ALIGN_DOWN(offset), ALIGN(offset + length))``. The trim is
    recorded rather than applied to the table: ``first_sg_offset`` is what the kernel cuts from
    the front of the entry holding the window's start, ``last_sg_trim`` what it cuts from the
    end of the entry holding the window's end (both 0 while unmapped, or when an edge falls
    outside the table).
    """

    ibdev: Device
    dmabuf: DmaBuf
    offset: int
    length: int
    access: int
    attach: DmaBufAttachment | None = field(default=None, init=False)
    sgt: SgTable | None = field(default=None, init=False)
    pinned: bool = field(default=False, init=False)
    revoked: bool = field(default=False, init=False)
    # (7.1) the driver's revoke callback, set by ib_umem_dmabuf_set_revoke_locked (K-115)
    pinned_revoke: Callable[[object], None] | None = field(default=None, init=False)
    pinned_revoke_priv: object = field(default=None, init=False)
    private: object | None = field(default=None, init=False)
    first_sg_offset: int = field(default=0, init=False)
    last_sg_trim: int = field(default=0, init=False)

    @property
    def writable(self) -> bool:
        """``umem->writable``: :func:`ib_access_writable` of the registration's access."""
        return ib_access_writable(self.access)

    def __repr__(self) -> str:
        state = "revoked" if self.revoked else ("pinned" if self.pinned else "dynamic")
        return f"<ib_umem_dmabuf {self.ibdev.name} {self.offset:#x}+{self.length:#x} {state}>"


def ib_umem_num_pages(offset: int, length: int) -> int:
    """``ib_umem_num_pages``: pages covered by ``[offset, offset + length)``."""
    start = offset - offset % PAGE_SIZE
    end = -(-(offset + length) // PAGE_SIZE) * PAGE_SIZE
    return (end - start) // PAGE_SIZE


def ib_umem_dmabuf_get(
    kernel: Kernel,
    ibdev: Device,
    offset: int,
    size: int,
    fd: int,
    access: int,
    ops: DmaBufAttachOps | None,
    *,
    files: FdTable | None = None,
) -> IbUmemDmabuf:
    """``ib_umem_dmabuf_get``: import ``[offset, offset + size)`` of the dma-buf behind ``fd``
    as a dynamic attachment (K-43, K-114).

    Caller: an RDMA driver's ``reg_user_mr_dmabuf``, without the resv held. ``-EINVAL`` for an
    overflowing range, (≤6.19) missing ops or ``move_notify``, a buffer smaller than the range,
    or a range of zero pages; ``dma_buf_get`` and attach errors pass through. Every error path
    drops the reference it took. Nothing is mapped yet. In 7.1 the callback is optional
    ("dma-buf: Make .invalidate_mapping() truly optional", K-114): ops without one attach
    dynamically but are never notified, and NULL ops attach statically.
    """
    fn = "ib_umem_dmabuf_get"
    if offset < 0 or size < 0 or offset + size > U64_MAX:
        raise err(Errno.EINVAL, fn, "offset + size overflows")
    if not kernel.profile.invalidate_mappings and (ops is None or ops.move_notify is None):
        raise err(Errno.EINVAL, fn, "importer ops without move_notify")
    dmabuf = dma_buf_get(kernel, fd, files)
    try:
        if dmabuf.size < offset + size:
            raise err(Errno.EINVAL, fn, f"dma-buf of {dmabuf.size} bytes < {offset + size}")
        # ib_umem_num_pages() counts from umem->iova, which is still 0 (kzalloc) here, not from
        # the offset: only size == 0 covers zero pages, whatever the offset's alignment (K-43).
        if ib_umem_num_pages(0, size) == 0:
            raise err(Errno.EINVAL, fn, "range covers zero pages")
        umem = IbUmemDmabuf(ibdev, dmabuf, offset, size, access)
        umem.attach = dma_buf_dynamic_attach(dmabuf, ibdev, ops, umem)
    except KernelError:
        dma_buf_put(dmabuf)
        raise
    return umem


def _sg_window_trim(umem: IbUmemDmabuf) -> tuple[int, int]:
    """How ``map_pages`` trims the new table to the umem's page-aligned window (K-44).

    The window's edges are byte positions in the buffer; the table's entries cover it in order.
    The entry holding the start loses the bytes before it, the first entry whose end reaches the
    window's end loses the bytes after it.
    """
    assert umem.sgt is not None
    start = umem.offset - umem.offset % PAGE_SIZE
    end = -(-(umem.offset + umem.length) // PAGE_SIZE) * PAGE_SIZE
    first_offset = 0
    pos = 0
    for _, seg_len in umem.sgt.segments:
        seg_end = pos + seg_len
        if pos <= start < seg_end:
            first_offset = start - pos
        if pos < end <= seg_end:
            return first_offset, seg_end - end
        pos = seg_end
    return first_offset, 0


def ib_umem_dmabuf_map_pages(umem: IbUmemDmabuf) -> None:
    """``ib_umem_dmabuf_map_pages``: map (unless mapped) and wait for KERNEL fences (K-44).

    Caller holds the resv. A revoked umem gives ``-EINVAL``. The wait is uninterruptible and
    without timeout: a 0 result becomes ``-ETIMEDOUT``, a negative one is returned.
    """
    fn = "ib_umem_dmabuf_map_pages"
    dmabuf = umem.dmabuf
    dmabuf.resv.assert_held(fn)
    if umem.revoked:
        raise err(Errno.EINVAL, fn, "umem revoked")
    if umem.sgt is None:
        assert umem.attach is not None
        umem.sgt = dma_buf_map_attachment(umem.attach, DmaDataDirection.BIDIRECTIONAL)
        umem.first_sg_offset, umem.last_sg_trim = _sg_window_trim(umem)
    ret = dmabuf.resv.wait_timeout(DmaResvUsage.KERNEL, False, MAX_SCHEDULE_TIMEOUT)
    if ret < 0:
        raise err(Errno(-ret), fn, "waiting for KERNEL fences")
    if ret == 0:
        raise err(Errno.ETIMEDOUT, fn, "KERNEL fences did not signal")


def ib_umem_dmabuf_unmap_pages(umem: IbUmemDmabuf) -> None:
    """``ib_umem_dmabuf_unmap_pages``: undo the trim, unmap, forget the table. Resv held."""
    umem.dmabuf.resv.assert_held("ib_umem_dmabuf_unmap_pages")
    if umem.sgt is None:
        return
    umem.first_sg_offset = umem.last_sg_trim = 0
    dma_buf_unmap_attachment(umem.attach, umem.sgt, DmaDataDirection.BIDIRECTIONAL)
    umem.sgt = None


def ib_umem_dmabuf_unsupported_move_notify(attach: DmaBufAttachment) -> None:
    """The pinned umem's callback: a rate-limited warning, nothing else (K-40)."""
    umem = attach.importer_priv
    assert isinstance(umem, IbUmemDmabuf)
    attach.dmabuf.kernel.log(
        f"{umem.ibdev.name}: Invalidate callback should not be called when memory is pinned"
    )


def ib_umem_dmabuf_revoke_locked(umem: IbUmemDmabuf) -> None:
    """``ib_umem_dmabuf_revoke_locked``: the revoke sequence, at most once (K-46, K-90, K-116).

    Caller holds the resv. A revoked umem is left alone; otherwise (7.1) the driver's
    ``pinned_revoke`` runs first (the hardware stops using the region), then unmap, unpin if
    ``pinned``, ``revoked = 1``. Release runs it too, so a umem revoked by an invalidation is
    not unpinned again -- nor ever, if it was revoked before ``pinned`` was set (K-117).
    """
    umem.dmabuf.resv.assert_held("ib_umem_dmabuf_revoke_locked")
    if umem.revoked:
        return
    if umem.pinned_revoke is not None:
        umem.pinned_revoke(umem.pinned_revoke_priv)
    ib_umem_dmabuf_unmap_pages(umem)
    if umem.pinned:
        assert umem.attach is not None
        dma_buf_unpin(umem.attach)
        umem.pinned = False
    umem.revoked = True


def ib_umem_dmabuf_revoke(umem: IbUmemDmabuf) -> None:
    """``ib_umem_dmabuf_revoke``: :func:`ib_umem_dmabuf_revoke_locked` under the resv (K-46)."""
    resv = umem.dmabuf.resv
    with resv:
        ib_umem_dmabuf_revoke_locked(umem)


def ib_umem_dmabuf_release(umem: IbUmemDmabuf) -> None:
    """``ib_umem_dmabuf_release``: revoke, detach, put (K-47)."""
    ib_umem_dmabuf_revoke(umem)
    dma_buf_detach(umem.dmabuf, umem.attach)
    umem.attach = None
    dma_buf_put(umem.dmabuf)


def _revoke_cb(attach: DmaBufAttachment) -> None:
    umem = attach.importer_priv
    assert isinstance(umem, IbUmemDmabuf)
    ib_umem_dmabuf_revoke_locked(umem)


def ib_umem_dmabuf_attach_pinned_ops(kernel: Kernel) -> DmaBufAttachOps:
    """``ib_umem_dmabuf_attach_pinned_ops``: allow_peer2peer, warn-only callback (≤6.16); no
    callback at all in 7.1, so the import is not revocable (K-90)."""
    cb: Callable[[DmaBufAttachment], None] | None = (
        ib_umem_dmabuf_unsupported_move_notify if kernel.profile.umem_pinned_warn_callback else None
    )
    return DmaBufAttachOps(allow_peer2peer=True, move_notify=cb)


def ib_umem_dmabuf_attach_pinned_revocable_ops(kernel: Kernel) -> DmaBufAttachOps:
    """(7.1) ``ib_umem_dmabuf_attach_pinned_revocable_ops``: an invalidation revokes (K-90)."""
    if not kernel.profile.umem_revocable_pinned_ops:
        raise NotInProfile("revocable pinned umem ops exist from preset 7.1 on")
    return DmaBufAttachOps(allow_peer2peer=True, move_notify=_revoke_cb)


def ib_umem_dmabuf_get_pinned_and_lock(
    kernel: Kernel,
    ibdev: Device,
    offset: int,
    size: int,
    fd: int,
    access: int,
    ops: DmaBufAttachOps,
    *,
    files: FdTable | None = None,
) -> IbUmemDmabuf:
    """``ib_umem_dmabuf_get_pinned_and_lock`` (33960c206db2, "RDMA/umem: Add
    ib_umem_dmabuf_get_pinned_and_lock helper"): import with ``ops``, take the resv,
    ``dma_buf_pin``, ``pinned = 1``, ``map_pages``, and **return with the resv held** (K-45,
    K-115).

    Any failure drops the resv and releases everything through ``ib_umem_release`` (whose
    revoke unpins exactly once -- unless the umem is already revoked, K-117). The pre-February
    2026 error path that unpinned twice is reproduced with the profile switch
    ``umem_pinned_double_unpin``. On a static exporter the pin is a no-op but ``pinned`` is
    still set (K-93).
    """
    umem = ib_umem_dmabuf_get(kernel, ibdev, offset, size, fd, access, ops, files=files)
    attach = umem.attach
    assert attach is not None
    resv = umem.dmabuf.resv
    resv.lock()
    try:
        dma_buf_pin(attach)
    except KernelError:
        resv.unlock()
        ib_umem_dmabuf_release(umem)
        raise
    umem.pinned = True
    try:
        ib_umem_dmabuf_map_pages(umem)
    except KernelError:
        if kernel.profile.umem_pinned_double_unpin:
            dma_buf_unpin(attach)  # the pre-fix branch; the release path unpins again
        resv.unlock()
        ib_umem_dmabuf_release(umem)
        raise
    return umem


def ib_umem_dmabuf_get_pinned_revocable_and_lock(
    kernel: Kernel,
    ibdev: Device,
    offset: int,
    size: int,
    fd: int,
    access: int,
    *,
    files: FdTable | None = None,
) -> IbUmemDmabuf:
    """(7.1) ``ib_umem_dmabuf_get_pinned_revocable_and_lock`` (932f1eef09ec): the pinned
    import with the revocable ops (``invalidate_mappings`` = ``ib_umem_dmabuf_revoke_locked``),
    returned with the resv held so that the driver can install its revoke callback
    (:func:`ib_umem_dmabuf_set_revoke_locked`) before anyone can revoke (K-115).

    The attachment is on the buffer's list before ``dma_buf_pin`` runs: an exporter whose pin
    moves the buffer invalidates it inside the pin, before ``pinned`` is set (K-117).
    """
    ops = ib_umem_dmabuf_attach_pinned_revocable_ops(kernel)
    return ib_umem_dmabuf_get_pinned_and_lock(
        kernel, ibdev, offset, size, fd, access, ops, files=files
    )


def ib_umem_dmabuf_set_revoke_locked(
    umem: IbUmemDmabuf, revoke: Callable[[object], None], priv: object
) -> None:
    """(7.1) ``ib_umem_dmabuf_set_revoke_locked``: install the driver's revoke callback, which
    :func:`ib_umem_dmabuf_revoke_locked` calls before it unmaps (K-115). Resv held."""
    umem.dmabuf.resv.assert_held("ib_umem_dmabuf_set_revoke_locked")
    umem.pinned_revoke = revoke
    umem.pinned_revoke_priv = priv


def ib_umem_dmabuf_get_pinned(
    kernel: Kernel,
    ibdev: Device,
    offset: int,
    size: int,
    fd: int,
    access: int,
    *,
    files: FdTable | None = None,
    revocable: bool = False,
) -> IbUmemDmabuf:
    """``ib_umem_dmabuf_get_pinned``: import, pin and map in one go, then unlock (K-45, K-93).

    Caller: a pinned-only RDMA driver (EFA), without the resv held; see
    :func:`ib_umem_dmabuf_get_pinned_and_lock`. ``revocable`` selects the 7.1 revocable pinned
    ops (:func:`ib_umem_dmabuf_get_pinned_revocable_and_lock` without a driver callback).
    """
    ops = (
        ib_umem_dmabuf_attach_pinned_revocable_ops(kernel)
        if revocable
        else ib_umem_dmabuf_attach_pinned_ops(kernel)
    )
    umem = ib_umem_dmabuf_get_pinned_and_lock(
        kernel, ibdev, offset, size, fd, access, ops, files=files
    )
    umem.dmabuf.resv.unlock()
    return umem
