"""The dma-buf core (drivers/dma-buf/dma-buf.c, include/linux/dma-buf.h).

Every function below keeps its kernel name and states its contract up front, as the kernel
source does: who may call it, which lock must (or must not) be held, what it returns. Errors
are raised as :class:`~pinlab.kernel.errno.KernelError` (the negative errno the kernel
returns), broken locking rules as :class:`~pinlab.kernel.errno.LockingError`, ``BUG()`` as
:class:`~pinlab.kernel.errno.KernelBug`; WARNs are recorded on the kernel instance.

Behaviour follows the kernel profile (``kernel-semantics.md`` §1.3):

* caching family (5.16, 6.12, 6.14): attach maps (and for a static importer of a dynamic
  exporter, pins) when importer and exporter differ in dynamicness, and caches the sg_table;
* pin-at-map (6.16): nothing is cached; a static importer of a dynamic exporter takes one
  exporter pin per live mapping;
* revoke (7.1): ``move_notify`` is ``invalidate_mappings`` and optional; MN always on.

The core keeps no pin count of its own (K-21). For reporting, each attachment carries
model-only counters of the pins and mappings made through it, so that leaks at detach (K-15)
can be shown instead of silently lost.
"""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pinlab.kernel.device import Device
from pinlab.kernel.errno import Errno, KernelBug, KernelError, NotInProfile, err
from pinlab.kernel.file import (
    FMODE_LSEEK,
    FMODE_OPENED,
    O_ACCMODE,
    O_CLOEXEC,
    O_NONBLOCK,
    O_RDWR,
    FdTable,
    File,
    open_fmode,
)
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.limits import ULONG_MAX
from pinlab.kernel.pin_hooks import BufferLocation, PinHook
from pinlab.kernel.profile import CoreFamily
from pinlab.kernel.resv import DmaResv, DmaResvUsage, dma_resv_usage_rw

PAGE_SIZE = 4096
PAGE_SHIFT = 12
DMA_BUF_NAME_LEN = 32


class DmaDataDirection(enum.IntEnum):
    """``enum dma_data_direction``."""

    BIDIRECTIONAL = 0
    TO_DEVICE = 1
    FROM_DEVICE = 2
    NONE = 3


_sgt_ids = itertools.count(1)


@dataclass(frozen=True, slots=True, eq=False)
class SgTable:
    """``struct sg_table`` as an importer sees it: DMA address ranges.

    ``page_less`` marks an sg_table without ``struct page`` behind it (P2P BAR addresses), which
    only importers with ``allow_peer2peer`` can handle. ``memory`` names where the bytes are
    (``"vram"``, ``"tt"``, ``"system"``) and ``epoch`` the exporter's backing generation when
    the table was made: a device access through a table whose buffer has moved since is a
    stale DMA (model-only fields used by the detector; ``checked`` is the detector's note of
    the last access through the table it found safe, the one field it sets). Tables compare
    by identity, like pointers.
    """

    segments: tuple[tuple[int, int], ...]
    page_less: bool = False
    memory: str = "system"
    epoch: int = 0
    p2p: bool = False
    serial: int = field(default_factory=lambda: next(_sgt_ids))
    wrapped: SgTable | None = None  # CONFIG_DMABUF_DEBUG: the exporter's own table
    # (dma-buf, its priv, backing epoch, resv seq, fences looked at): drivers/dma_check.py
    checked: tuple[Any, ...] | None = field(default=None, repr=False)

    @property
    def nbytes(self) -> int:
        return sum(length for _, length in self.segments)

    def page_less_copy(self) -> SgTable:
        """The ``CONFIG_DMABUF_DEBUG`` wrapper: the same addresses with the pages hidden;
        ``wrapped`` keeps the exporter's table for unmap."""
        return SgTable(self.segments, True, self.memory, self.epoch, self.p2p, wrapped=self)

    def unwrap(self) -> SgTable:
        """The exporter's table behind a debug wrapper (itself when not wrapped)."""
        return self.wrapped if self.wrapped is not None else self


@dataclass(slots=True)
class DmaBufOps:
    """``struct dma_buf_ops``: the exporter's callbacks.

    Callbacks report failure by raising :class:`KernelError`. ``map_dma_buf`` may also return
    None, which the core turns into ``-ENOMEM``. A ``pin`` op makes the exporter dynamic (K-6).
    """

    map_dma_buf: Callable[[DmaBufAttachment, DmaDataDirection], SgTable | None] | None = None
    unmap_dma_buf: Callable[[DmaBufAttachment, SgTable, DmaDataDirection], None] | None = None
    release: Callable[[DmaBuf], None] | None = None
    attach: Callable[[DmaBuf, DmaBufAttachment], None] | None = None
    detach: Callable[[DmaBuf, DmaBufAttachment], None] | None = None
    pin: Callable[[DmaBufAttachment], None] | None = None
    unpin: Callable[[DmaBufAttachment], None] | None = None
    begin_cpu_access: Callable[[DmaBuf, DmaDataDirection], None] | None = None
    end_cpu_access: Callable[[DmaBuf, DmaDataDirection], None] | None = None
    mmap: Callable[[DmaBuf, int, int], None] | None = None
    vmap: Callable[[DmaBuf], int] | None = None
    vunmap: Callable[[DmaBuf, int], None] | None = None
    cache_sgt_mapping: bool = False


@dataclass(slots=True)
class DmaBufAttachOps:
    """``struct dma_buf_attach_ops``: the importer's side of a dynamic attachment.

    ``move_notify`` is the callback's name up to 6.16; preset 7.1 calls it
    ``invalidate_mappings`` (the same slot, see :attr:`invalidate_mappings`).
    """

    allow_peer2peer: bool = False
    move_notify: Callable[[DmaBufAttachment], None] | None = None

    @property
    def invalidate_mappings(self) -> Callable[[DmaBufAttachment], None] | None:
        return self.move_notify


class Module:
    """An exporter's ``struct module`` (``THIS_MODULE``); ``try_module_get`` fails while it is
    being unloaded (K-70)."""

    __slots__ = ("name", "refcnt", "unloading")

    def __init__(self, name: str) -> None:
        self.name = name
        self.refcnt = 0
        self.unloading = False

    def try_get(self) -> bool:
        if self.unloading:
            return False
        self.refcnt += 1
        return True

    def put(self) -> None:
        self.refcnt -= 1


class BufferLocator(Protocol):
    """What an exporter publishes on its dma-bufs (``DmaBuf.locator``): where one of them is
    (model-only; the pin hooks of ``pin_hooks.py`` read it through :meth:`DmaBuf.locate`)."""

    def locate(self, dmabuf: DmaBuf) -> BufferLocation:
        """The location of ``dmabuf``'s bytes now."""
        ...


@dataclass(slots=True)
class DmaBufExportInfo:
    """``struct dma_buf_export_info`` (``DEFINE_DMA_BUF_EXPORT_INFO``)."""

    ops: DmaBufOps | None
    size: int
    priv: object = None
    exp_name: str = "pinlab"
    flags: int = O_RDWR
    resv: DmaResv | None = None
    owner: Module | None = None

    @classmethod
    def define(
        cls,
        module: Module,
        ops: DmaBufOps,
        size: int,
        priv: object,
        *,
        flags: int = O_RDWR,
        resv: DmaResv | None = None,
    ) -> DmaBufExportInfo:
        """What a driver's ``DEFINE_DMA_BUF_EXPORT_INFO(exp_info)`` plus its own fields give:
        ``exp_name`` is the module's name (``KBUILD_MODNAME``), ``owner`` the module
        (``THIS_MODULE``)."""
        return cls(ops, size, priv, module.name, flags, resv, module)


@functools.cache
def _dma_buf_fmode(f_flags: int) -> int:
    """The ``f_mode`` of a dma-buf file opened with ``f_flags``: one int object per flags
    value, not one per buffer."""
    return open_fmode(f_flags) | FMODE_LSEEK | FMODE_OPENED


@functools.cache
def _resv_name(exp_name: str) -> str:
    """The name of a dma-buf's own resv: one string per exporter name, not one per buffer."""
    return f"dmabuf:{exp_name}"


class DmaBuf:
    """``struct dma_buf``. Its refcount is its file's ``f_count``."""

    __slots__ = (
        "_attachments",
        "exp_name",
        "file",
        "ino",
        "kernel",
        "locator",
        "move_notify_count",
        "name",
        "ops",
        "owner",
        "priv",
        "released",
        "resv",
        "size",
        "vmap_ptr",
        "vmapping_counter",
    )

    def __init__(self, kernel: Kernel, info: DmaBufExportInfo, ops: DmaBufOps) -> None:
        self.kernel = kernel
        self.size = info.size
        self.ops = ops
        self.priv = info.priv
        self.exp_name = info.exp_name
        self.owner = info.owner
        self.name: str | None = None
        self.resv = (
            info.resv if info.resv is not None else DmaResv(kernel, _resv_name(info.exp_name))
        )
        # head = newest (K-11); made by the first attach: most exported buffers never get one
        self._attachments: list[DmaBufAttachment] | None = None
        self.vmapping_counter = 0
        self.vmap_ptr: int | None = None
        self.ino = kernel.next_ino()
        # dma_buf_getfile: f_flags keep only O_ACCMODE | O_NONBLOCK; dma_buf_fops has
        # .llseek, so alloc_file adds FMODE_LSEEK (real dumps show mode 00080007 for O_RDWR)
        f_flags = info.flags & (O_ACCMODE | O_NONBLOCK)
        self.file = File(
            "dma-buf",
            self,
            f_flags=f_flags,
            f_mode=_dma_buf_fmode(f_flags),
            ino=self.ino,
            release=_dma_buf_file_release,
        )
        self.move_notify_count = 0
        self.released = False
        # model-only: who says where the bytes are (policies ask it through locate()); one
        # object per exporter, so a buffer carries a reference and no closure of its own
        self.locator: BufferLocator | None = None

    @property
    def refcount(self) -> int:
        """``file_count(dmabuf->file)``: what bufinfo prints as ``count`` (K-68)."""
        return self.file.f_count

    @property
    def attachments(self) -> list[DmaBufAttachment]:
        """``dmabuf->attachments``, newest first (K-11); read-only for everyone but attach
        and detach (an unattached buffer returns a new empty list)."""
        return self._attachments if self._attachments is not None else []

    def locate(self) -> BufferLocation | None:
        """Where the bytes are now, as the exporter reports it (model-only, pin_hooks.py);
        None when the exporter publishes no location."""
        locator = self.locator
        return None if locator is None else locator.locate(self)

    def __repr__(self) -> str:
        return f"<dma_buf {self.exp_name} ino={self.ino} size={self.size}>"


class DmaBufAttachment:
    """``struct dma_buf_attachment``.

    ``sgt``/``dir`` exist in the caching family only (K-32). ``core_pins``, ``importer_pins``
    and ``mappings`` are model-only counters for leak reports; the kernel keeps none (K-21).
    """

    __slots__ = (
        "core_pins",
        "dev",
        "dir",
        "dmabuf",
        "importer_ops",
        "importer_pins",
        "importer_priv",
        "mappings",
        "peer2peer",
        "pin_tokens",
        "priv",
        "sgt",
    )

    def __init__(
        self,
        dmabuf: DmaBuf,
        dev: Device,
        importer_ops: DmaBufAttachOps | None,
        importer_priv: object,
    ) -> None:
        self.dmabuf = dmabuf
        self.dev = dev
        self.importer_ops = importer_ops
        self.importer_priv = importer_priv
        self.priv: object = None
        # K-9: a static attachment always starts without peer2peer
        self.peer2peer = importer_ops.allow_peer2peer if importer_ops is not None else False
        self.sgt: SgTable | None = None
        self.dir = DmaDataDirection.NONE
        self.core_pins = 0
        self.importer_pins = 0
        self.pin_tokens: list[list[tuple[PinHook, object]]] = []  # one entry per dma_buf_pin
        self.mappings = 0

    def __repr__(self) -> str:
        kind = "dynamic" if self.importer_ops is not None else "static"
        return f"<attachment {self.dev.name} ({kind}) on {self.dmabuf!r}>"


# -- classification ------------------------------------------------------------------------


def dma_buf_is_dynamic(dmabuf: DmaBuf) -> bool:
    """True exactly when the exporter supplies ``pin`` (K-6)."""
    return dmabuf.ops.pin is not None


def dma_buf_attachment_is_dynamic(attach: DmaBufAttachment) -> bool:
    """True exactly when the attachment was made with importer ops."""
    return attach.importer_ops is not None


def dma_buf_attach_revocable(attach: DmaBufAttachment) -> bool:
    """(7.1) True when ``attach`` is dynamic and provides ``invalidate_mappings`` (K-69)."""
    if not attach.dmabuf.kernel.profile.attach_revocable:
        raise NotInProfile("dma_buf_attach_revocable exists from preset 7.1 on")
    ops = attach.importer_ops
    return ops is not None and ops.invalidate_mappings is not None


def _pin_on_map(attach: DmaBufAttachment) -> bool:
    """``dma_buf_pin_on_map`` (≥6.16): whether map takes (and unmap drops) an exporter pin.

    6.16: E has pin AND (A static OR MN off). 7.1: E has pin AND A static. (K-26)
    """
    dmabuf = attach.dmabuf
    if not dma_buf_is_dynamic(dmabuf):
        return False
    profile = dmabuf.kernel.profile
    if profile.family is CoreFamily.REVOKE:
        return not dma_buf_attachment_is_dynamic(attach)
    return not dma_buf_attachment_is_dynamic(attach) or not profile.move_notify


# -- export, fd, get, put ------------------------------------------------------------------


def dma_buf_export(kernel: Kernel, exp_info: DmaBufExportInfo) -> DmaBuf:
    """``dma_buf_export``: create a dma-buf (K-1, K-2, K-3, K-70).

    Caller: the exporter, without any resv held. Checks, in order: priv/ops/map/unmap/release
    present (else WARN, ``-EINVAL``); (≤6.15) ``cache_sgt_mapping`` with pin ops (WARN,
    ``-EINVAL``); exactly one of pin/unpin (WARN, ``-EINVAL``); the exporter module reference
    (``-ENOENT``). On success the buffer joins the global list, newest first, with refcount 1.
    """
    ops = exp_info.ops
    if (
        exp_info.priv is None
        or ops is None
        or ops.map_dma_buf is None
        or ops.unmap_dma_buf is None
        or ops.release is None
    ):
        kernel.warn(
            "dma_buf_export", "!exp_info->priv || !ops || !map_dma_buf || !unmap || !release"
        )
        raise err(Errno.EINVAL, "dma_buf_export", "missing priv or a mandatory op")
    if (
        kernel.profile.cache_sgt_mapping_flag
        and ops.cache_sgt_mapping
        and (ops.pin is not None or ops.unpin is not None)
    ):
        kernel.warn("dma_buf_export", "cache_sgt_mapping && (pin || unpin)")
        raise err(Errno.EINVAL, "dma_buf_export", "cache_sgt_mapping with a dynamic exporter")
    if (ops.pin is None) != (ops.unpin is None):
        kernel.warn("dma_buf_export", "!!ops->pin != !!ops->unpin")
        raise err(Errno.EINVAL, "dma_buf_export", "exactly one of pin/unpin")
    if exp_info.size < 0:  # size_t: no C caller can pass one; the kernel checks no size
        raise ValueError(f"dma_buf_export: size {exp_info.size} is negative")
    if exp_info.resv is not None:
        exp_info.resv.assert_not_held("dma_buf_export")
    if exp_info.owner is not None and not exp_info.owner.try_get():
        raise err(Errno.ENOENT, "dma_buf_export", f"module {exp_info.owner.name} is unloading")
    dmabuf = DmaBuf(kernel, exp_info, ops)
    kernel.add_dma_buf(dmabuf)
    return dmabuf


def dma_buf_fd(dmabuf: DmaBuf | None, flags: int = O_CLOEXEC, files: FdTable | None = None) -> int:
    """``dma_buf_fd``: install the buffer's file in an fd table (K-71).

    The fd table defaults to ``current``'s. ``-EINVAL`` for a NULL buffer or a buffer without
    a file. The new fd owns the export's reference (no new reference is taken). Caller must
    not hold the resv (§2.3).
    """
    if dmabuf is None or dmabuf.released:
        raise err(Errno.EINVAL, "dma_buf_fd", "NULL dma_buf or file")
    # §2.3: importers must not hold the resv when calling dma_buf_fd (locking convention).
    dmabuf.resv.assert_not_held("dma_buf_fd")
    table = files if files is not None else _current_files(dmabuf.kernel, "dma_buf_fd")
    return table.install(dmabuf.file, flags)


def dma_buf_get(kernel: Kernel, fd: int, files: FdTable | None = None) -> DmaBuf:
    """``dma_buf_get``: a new reference to the dma-buf behind ``fd`` (K-4).

    ``-EBADF`` if the fd is not open; ``-EINVAL`` if it is open but not a dma-buf. Caller
    must not hold the buffer's resv (§2.3).
    """
    table = files if files is not None else _current_files(kernel, "dma_buf_get")
    file = table.lookup(fd)
    if file is None:
        raise err(Errno.EBADF, "dma_buf_get", f"fd {fd} is not open")
    if file.kind != "dma-buf" or not isinstance(file.private_data, DmaBuf):
        raise err(Errno.EINVAL, "dma_buf_get", f"fd {fd} is not a dma-buf")
    # §2.3: importers must not hold the resv when calling dma_buf_get (locking convention).
    file.private_data.resv.assert_not_held("dma_buf_get")
    file.get()
    return file.private_data


def get_dma_buf(dmabuf: DmaBuf) -> DmaBuf:
    """``get_dma_buf``: take one more reference."""
    dmabuf.file.get()
    return dmabuf


def dma_buf_put(dmabuf: DmaBuf | None) -> None:
    """``dma_buf_put``: drop a reference; the last one releases the buffer (K-5)."""
    if dmabuf is None:
        return
    if dmabuf.released:
        raise KernelBug(f"dma_buf_put on released {dmabuf!r} (use after free)")
    dmabuf.resv.assert_not_held("dma_buf_put")
    dmabuf.file.put()


def _dma_buf_file_release(file: File) -> None:
    """``dma_buf_release``: the file's last reference is gone (K-5).

    BUG on a live vmap; WARN if attachments remain; then the exporter's ``release``.
    """
    dmabuf = file.private_data
    assert isinstance(dmabuf, DmaBuf)
    kernel = dmabuf.kernel
    if dmabuf.vmapping_counter:
        raise KernelBug(f"dma_buf_release: vmapping_counter={dmabuf.vmapping_counter}")
    if dmabuf.attachments:
        kernel.warn("dma_buf_release", "!list_empty(&dmabuf->attachments)")
        kernel.leak("dma_buf_release", f"{len(dmabuf.attachments)} attachment(s) on {dmabuf!r}")
    dmabuf.released = True
    assert dmabuf.ops.release is not None
    dmabuf.ops.release(dmabuf)
    kernel.remove_dma_buf(dmabuf)
    if dmabuf.owner is not None:
        dmabuf.owner.put()


def _current_files(kernel: Kernel, function: str) -> FdTable:
    if kernel.current is None:
        raise KernelBug(f"{function}: no current task (pass files= in kernel context)")
    return kernel.current.files


# -- attach and detach ---------------------------------------------------------------------


def dma_buf_dynamic_attach(
    dmabuf: DmaBuf | None,
    dev: Device | None,
    importer_ops: DmaBufAttachOps | None = None,
    importer_priv: object = None,
) -> DmaBufAttachment:
    """``dma_buf_dynamic_attach``: attach ``dev`` to the buffer (K-7..K-14, K-75, K-89).

    Caller: the importer, **without** the resv held. ``importer_ops`` given makes the
    attachment dynamic; before 7.1 it must provide ``move_notify`` (else WARN, ``-EINVAL``).
    The exporter's ``attach`` runs without the resv and its error is returned unchanged. The
    attachment goes to the head of the list.

    Caching family only: when importer and exporter differ in dynamicness the core maps
    (BIDIRECTIONAL) right away and caches the sg_table; for a static importer of a dynamic
    exporter it first calls ``ops->pin`` and holds that pin until detach. A failure there
    unpins what was pinned, detaches, and returns the error.
    """
    if dmabuf is None or dev is None:
        kernel = dmabuf.kernel if dmabuf is not None else None
        if kernel is not None:
            kernel.warn("dma_buf_dynamic_attach", "!dmabuf || !dev")
        raise err(Errno.EINVAL, "dma_buf_dynamic_attach", "NULL dmabuf or device")
    kernel = dmabuf.kernel
    profile = kernel.profile
    if (
        importer_ops is not None
        and importer_ops.move_notify is None
        and not profile.invalidate_mappings
    ):
        kernel.warn("dma_buf_dynamic_attach", "importer_ops && !importer_ops->move_notify")
        raise err(Errno.EINVAL, "dma_buf_dynamic_attach", "dynamic importer without move_notify")
    if dmabuf.released:
        raise KernelBug(f"dma_buf_dynamic_attach on released {dmabuf!r}")
    dmabuf.resv.assert_not_held("dma_buf_dynamic_attach")

    attach = DmaBufAttachment(dmabuf, dev, importer_ops, importer_priv)
    if dmabuf.ops.attach is not None:
        dmabuf.ops.attach(dmabuf, attach)  # K-10: errors propagate; nothing listed
    with dmabuf.resv:
        if dmabuf._attachments is None:
            dmabuf._attachments = [attach]
        else:
            dmabuf._attachments.insert(0, attach)  # K-11

    if profile.cache_sgt_at_attach and (
        dma_buf_attachment_is_dynamic(attach) != dma_buf_is_dynamic(dmabuf)
    ):
        _attach_map_and_cache(attach)
    return attach


def _attach_map_and_cache(attach: DmaBufAttachment) -> None:
    """(≤6.15) The attach-time pin + map + cache of ``dma_buf_dynamic_attach`` (K-13, K-14)."""
    dmabuf = attach.dmabuf
    dynamic_exporter = dma_buf_is_dynamic(dmabuf)
    dmabuf.resv.lock()
    try:
        if dynamic_exporter:
            assert dmabuf.ops.pin is not None
            dmabuf.ops.pin(attach)  # direct ops->pin, not dma_buf_pin (no static-A WARN)
            attach.core_pins += 1
        try:
            sgt = _map_dma_buf(attach, DmaDataDirection.BIDIRECTIONAL, "dma_buf_dynamic_attach")
        except KernelError:
            if dynamic_exporter:
                _exporter_unpin(attach)
            raise
        if dmabuf.kernel.profile.dmabuf_debug:
            sgt = sgt.page_less_copy()  # 6.12 wraps inside __map_dma_buf: cached ones too
        attach.sgt = sgt
        attach.dir = DmaDataDirection.BIDIRECTIONAL
        attach.mappings += 1
    except KernelError:
        dmabuf.resv.unlock()
        dma_buf_detach(dmabuf, attach)
        raise
    dmabuf.resv.unlock()


def dma_buf_attach(dmabuf: DmaBuf | None, dev: Device | None) -> DmaBufAttachment:
    """``dma_buf_attach``: a static attachment (no importer ops, peer2peer False)."""
    return dma_buf_dynamic_attach(dmabuf, dev, None, None)


def dma_buf_detach(dmabuf: DmaBuf | None, attach: DmaBufAttachment | None) -> None:
    """``dma_buf_detach``: remove an attachment (K-15, K-16, K-17).

    Caller: the importer, without the resv held. NULL arguments or ``attach->dmabuf !=
    dmabuf`` WARN and change nothing. Caching family: the cached sg_table is unmapped and, for
    a dynamic exporter, the attach-time pin dropped. ≥6.16: only unlinks; live mappings and
    pins are the importer's bug and are recorded as leaks.
    """
    if dmabuf is None or attach is None or attach.dmabuf is not dmabuf:
        kernel = dmabuf.kernel if dmabuf is not None else None
        if kernel is not None:
            kernel.warn("dma_buf_detach", "!dmabuf || !attach || attach->dmabuf != dmabuf")
        return
    kernel = dmabuf.kernel
    dmabuf.resv.assert_not_held("dma_buf_detach")
    with dmabuf.resv:
        if attach.sgt is not None:
            assert dmabuf.ops.unmap_dma_buf is not None
            dmabuf.ops.unmap_dma_buf(attach, attach.sgt.unwrap(), attach.dir)
            attach.mappings -= 1
            attach.sgt = None
            if dma_buf_is_dynamic(dmabuf) and attach.core_pins:
                _exporter_unpin(attach)
        if dmabuf._attachments is not None and attach in dmabuf._attachments:
            dmabuf._attachments.remove(attach)
    if dmabuf.ops.detach is not None:
        dmabuf.ops.detach(dmabuf, attach)
    if attach.mappings:
        kernel.leak("dma_buf_detach", f"{attach.mappings} live mapping(s) of {attach!r}")
    if attach.core_pins:
        kernel.leak("dma_buf_detach", f"{attach.core_pins} map-time pin(s) of {attach!r}")
    if attach.importer_pins:
        kernel.leak(
            "dma_buf_detach", f"{attach.importer_pins} unbalanced dma_buf_pin of {attach!r}"
        )


# -- pin and unpin -------------------------------------------------------------------------


def dma_buf_pin(attach: DmaBufAttachment) -> None:
    """``dma_buf_pin``: ask the exporter to keep the buffer where it is (K-18..K-23).

    Caller: a **dynamic** importer, with the resv held. A static attachment WARNs but the pin
    is still forwarded. A static exporter (no ``pin``) returns 0 without effect. The core
    counts nothing: N calls make N exporter pins; an exporter error is returned unchanged.
    """
    dmabuf = attach.dmabuf
    if not dma_buf_attachment_is_dynamic(attach):
        dmabuf.kernel.warn("dma_buf_pin", "!attach->importer_ops")
    dmabuf.resv.assert_held("dma_buf_pin")
    kernel = dmabuf.kernel
    if dmabuf.ops.pin is not None:
        dmabuf.ops.pin(attach)
        attach.importer_pins += 1
    if kernel.pin_hooks:
        charged: list[tuple[PinHook, object]] = []
        try:
            for hook in kernel.pin_hooks:
                charged.append((hook, hook.pin(attach, kernel.current)))
        except KernelError:
            for hook, token in reversed(charged):
                hook.unpin(attach, token)
            if dmabuf.ops.unpin is not None:
                dmabuf.ops.unpin(attach)
                attach.importer_pins -= 1
            raise
        attach.pin_tokens.append(charged)


def dma_buf_unpin(attach: DmaBufAttachment) -> None:
    """``dma_buf_unpin``: drop one exporter pin (K-22). Same WARN and lock rule as pin."""
    dmabuf = attach.dmabuf
    if not dma_buf_attachment_is_dynamic(attach):
        dmabuf.kernel.warn("dma_buf_unpin", "!attach->importer_ops")
    dmabuf.resv.assert_held("dma_buf_unpin")
    if attach.pin_tokens:
        for hook, token in reversed(attach.pin_tokens.pop()):
            hook.unpin(attach, token)
    if dmabuf.ops.unpin is not None:
        dmabuf.ops.unpin(attach)
        if attach.importer_pins:
            attach.importer_pins -= 1


def _exporter_pin(attach: DmaBufAttachment) -> None:
    assert attach.dmabuf.ops.pin is not None
    attach.dmabuf.ops.pin(attach)
    attach.core_pins += 1


def _exporter_unpin(attach: DmaBufAttachment) -> None:
    assert attach.dmabuf.ops.unpin is not None
    attach.dmabuf.ops.unpin(attach)
    attach.core_pins -= 1


# -- map and unmap -------------------------------------------------------------------------


def _assert_map_lock(attach: DmaBufAttachment, function: str) -> None:
    """Map/unmap need the resv; before v6.2 (preset 5.16) only for dynamic attachments (K-24)."""
    dmabuf = attach.dmabuf
    if dmabuf.kernel.profile.common_locking or dma_buf_attachment_is_dynamic(attach):
        dmabuf.resv.assert_held(function)


def _map_dma_buf(attach: DmaBufAttachment, direction: DmaDataDirection, function: str) -> SgTable:
    """``__map_dma_buf``: exporter map, then for static attachments the interruptible wait
    for KERNEL fences (K-28, K-29, K-97); a failed wait unmaps and returns the error. With
    ``dma_api_debug`` each entry not on page boundaries is logged, as the kernel's pr_debug
    does; the mapping is returned all the same."""
    dmabuf = attach.dmabuf
    assert dmabuf.ops.map_dma_buf is not None and dmabuf.ops.unmap_dma_buf is not None
    sgt = dmabuf.ops.map_dma_buf(attach, direction)
    if sgt is None:
        raise err(Errno.ENOMEM, function, "exporter map_dma_buf returned NULL")
    if not dma_buf_attachment_is_dynamic(attach):
        ret = dmabuf.resv.wait_timeout(DmaResvUsage.KERNEL, True)
        if ret < 0:
            dmabuf.ops.unmap_dma_buf(attach, sgt, direction)
            raise err(Errno(-ret), function, "interrupted waiting for KERNEL fences")
    if dmabuf.kernel.profile.dma_api_debug:
        # CONFIG_DMA_API_DEBUG: a pr_debug per unaligned entry, neither a WARN nor an error
        # (drivers/dma-buf/dma-buf.c, dma_buf_map_attachment)
        for addr, length in sgt.segments:
            if addr % PAGE_SIZE or length % PAGE_SIZE:
                dmabuf.kernel.log(
                    f"{function}: addr {addr:x} or len {length:x} is not page aligned!"
                )
    return sgt


def _pin_and_map(
    attach: DmaBufAttachment, direction: DmaDataDirection, fn: str, pin: bool, *, warn_ebusy: bool
) -> SgTable:
    """The common tail of both map families: ``ops->pin`` when ``pin``, then map; a failed map
    undoes the pin. ≥6.16 also WARN_ON_ONCEs an ``-EBUSY`` from the pin (``warn_ebusy``)."""
    kernel = attach.dmabuf.kernel
    if pin:
        try:
            _exporter_pin(attach)
        except KernelError as e:
            if warn_ebusy and e.errno is Errno.EBUSY:
                kernel.warn(fn, "pin returned -EBUSY", once=True)
            raise
    try:
        sgt = _map_dma_buf(attach, direction, fn)
    except KernelError:
        if pin:
            _exporter_unpin(attach)
        raise
    if kernel.profile.dmabuf_debug:
        sgt = sgt.page_less_copy()
    attach.mappings += 1
    return sgt


def dma_buf_map_attachment(
    attach: DmaBufAttachment | None, direction: DmaDataDirection = DmaDataDirection.BIDIRECTIONAL
) -> SgTable:
    """``dma_buf_map_attachment``: DMA addresses of the buffer for the attached device.

    Caller: the importer with the resv held (preset 5.16: dynamic attachments only). May
    sleep (fence waits go to the kernel's waiter).

    ≥6.16 (K-25..K-31): when pin-on-map applies, ``ops->pin`` first (``-EBUSY`` from it also
    WARN_ON_ONCE); map (NULL → ``-ENOMEM``; an error undoes the pin); for a static attachment
    wait for KERNEL fences (interruption unmaps, unpins, returns ``-ERESTARTSYS``). Every call
    returns a new table.

    ≤6.15 (K-32..K-34): a cached table is returned again, without pin or wait, unless the
    direction conflicts (``-EBUSY``); otherwise a dynamic exporter with MN off is pinned, the
    buffer mapped, and the first mapping cached if the exporter asked for it.
    """
    if attach is None:
        raise err(Errno.EINVAL, "dma_buf_map_attachment", "NULL attachment")
    dmabuf = attach.dmabuf
    kernel = dmabuf.kernel
    fn = "dma_buf_map_attachment"
    _assert_map_lock(attach, fn)

    if kernel.profile.family is not CoreFamily.CACHING:
        return _pin_and_map(attach, direction, fn, _pin_on_map(attach), warn_ebusy=True)

    # caching family
    if attach.sgt is not None:
        if attach.dir != direction and attach.dir != DmaDataDirection.BIDIRECTIONAL:
            raise err(Errno.EBUSY, fn, "cached mapping has another direction")
        return attach.sgt
    pin = dma_buf_is_dynamic(dmabuf) and not kernel.profile.move_notify
    sgt = _pin_and_map(attach, direction, fn, pin, warn_ebusy=False)
    if dmabuf.ops.cache_sgt_mapping:
        attach.sgt = sgt
        attach.dir = direction
    return sgt


def dma_buf_unmap_attachment(
    attach: DmaBufAttachment | None,
    sgt: SgTable | None,
    direction: DmaDataDirection = DmaDataDirection.BIDIRECTIONAL,
) -> None:
    """``dma_buf_unmap_attachment``: release a mapping (K-31, K-33, K-34).

    Caller: the importer with the resv held. NULL arguments WARN and return. ≥6.16: exporter
    unmap, then one unpin when pin-on-map applies. ≤6.15: unmapping the cached table is a
    no-op; otherwise exporter unmap, then unpin for a dynamic exporter with MN off.
    """
    fn = "dma_buf_unmap_attachment"
    if attach is None or sgt is None:
        if attach is not None:
            attach.dmabuf.kernel.warn(fn, "!attach || !sg_table")
        return
    dmabuf = attach.dmabuf
    kernel = dmabuf.kernel
    _assert_map_lock(attach, fn)
    if kernel.profile.family is CoreFamily.CACHING and attach.sgt is sgt:
        return
    assert dmabuf.ops.unmap_dma_buf is not None
    dmabuf.ops.unmap_dma_buf(attach, sgt.unwrap(), direction)  # debug: unwrap first
    attach.mappings -= 1
    if kernel.profile.family is CoreFamily.CACHING:
        if dma_buf_is_dynamic(dmabuf) and not kernel.profile.move_notify:
            _exporter_unpin(attach)
    elif _pin_on_map(attach):
        _exporter_unpin(attach)


def _require_unlocked_variants(kernel: Kernel, function: str) -> None:
    if not kernel.profile.unlocked_variants:
        raise NotInProfile(f"{function} exists from v6.2 on (not in preset {kernel.profile.name})")


def dma_buf_map_attachment_unlocked(
    attach: DmaBufAttachment | None, direction: DmaDataDirection = DmaDataDirection.BIDIRECTIONAL
) -> SgTable:
    """``dma_buf_map_attachment_unlocked`` (v6.2+): take the resv, map, release it.

    Caller must not hold the resv.
    """
    if attach is None:
        raise err(Errno.EINVAL, "dma_buf_map_attachment_unlocked", "NULL attachment")
    _require_unlocked_variants(attach.dmabuf.kernel, "dma_buf_map_attachment_unlocked")
    resv = attach.dmabuf.resv
    resv.assert_not_held("dma_buf_map_attachment_unlocked")
    with resv:
        return dma_buf_map_attachment(attach, direction)


def dma_buf_unmap_attachment_unlocked(
    attach: DmaBufAttachment | None,
    sgt: SgTable | None,
    direction: DmaDataDirection = DmaDataDirection.BIDIRECTIONAL,
) -> None:
    """``dma_buf_unmap_attachment_unlocked`` (v6.2+): take the resv, unmap, release it."""
    if attach is None or sgt is None:
        if attach is not None:
            attach.dmabuf.kernel.warn("dma_buf_unmap_attachment_unlocked", "!attach || !sgt")
        return
    _require_unlocked_variants(attach.dmabuf.kernel, "dma_buf_unmap_attachment_unlocked")
    resv = attach.dmabuf.resv
    resv.assert_not_held("dma_buf_unmap_attachment_unlocked")
    with resv:
        dma_buf_unmap_attachment(attach, sgt, direction)


# -- move notification ---------------------------------------------------------------------


def _notify_importers(dmabuf: DmaBuf, function: str) -> None:
    dmabuf.resv.assert_held(function)
    dmabuf.move_notify_count += 1
    for attach in list(dmabuf.attachments):
        ops = attach.importer_ops
        if ops is not None and ops.move_notify is not None:
            ops.move_notify(attach)


def dma_buf_move_notify(dmabuf: DmaBuf) -> None:
    """``dma_buf_move_notify`` (up to 6.16): tell every dynamic importer the buffer moves.

    Caller: the exporter, with the resv held (K-35), before the move. Calls ``move_notify``
    exactly once for every dynamic attachment, pinned or not, never for static ones; returns
    nothing and cannot fail (K-36).
    """
    if dmabuf.kernel.profile.invalidate_mappings:
        raise NotInProfile("dma_buf_move_notify is dma_buf_invalidate_mappings in preset 7.1")
    _notify_importers(dmabuf, "dma_buf_move_notify")


def dma_buf_invalidate_mappings(dmabuf: DmaBuf) -> None:
    """``dma_buf_invalidate_mappings`` (7.1): ``dma_buf_move_notify`` renamed (K-36, K-69).

    Only attachments that provide ``invalidate_mappings`` are called. After it returns the
    exporter must still wait for every fence up to BOOKKEEP and for the importers' unmaps
    before reusing the memory (K-91).
    """
    if not dmabuf.kernel.profile.invalidate_mappings:
        raise NotInProfile("dma_buf_invalidate_mappings exists from preset 7.1 on")
    _notify_importers(dmabuf, "dma_buf_invalidate_mappings")


def dma_buf_notify_move(dmabuf: DmaBuf) -> None:
    """The exporter's notification under whichever name the profile has."""
    if dmabuf.kernel.profile.invalidate_mappings:
        dma_buf_invalidate_mappings(dmabuf)
    else:
        dma_buf_move_notify(dmabuf)


# -- CPU access ----------------------------------------------------------------------------


def dma_buf_vmap(dmabuf: DmaBuf | None) -> int:
    """``dma_buf_vmap``: a kernel virtual address for the buffer (K-72).

    Caller holds the resv. ``-EINVAL`` without a ``vmap`` op. Refcounted: only the first call
    reaches the exporter; later ones return the same address.
    """
    if dmabuf is None:
        raise err(Errno.EINVAL, "dma_buf_vmap", "NULL dmabuf")
    dmabuf.resv.assert_held("dma_buf_vmap")
    if dmabuf.ops.vmap is None:
        raise err(Errno.EINVAL, "dma_buf_vmap", "exporter has no vmap")
    if dmabuf.vmapping_counter:
        dmabuf.vmapping_counter += 1
        assert dmabuf.vmap_ptr is not None
        return dmabuf.vmap_ptr
    ptr = dmabuf.ops.vmap(dmabuf)
    dmabuf.vmap_ptr = ptr
    dmabuf.vmapping_counter = 1
    return ptr


def dma_buf_vunmap(dmabuf: DmaBuf, vaddr: int) -> None:
    """``dma_buf_vunmap``: drop a vmap reference; a zero counter or another address is a BUG
    (K-72). The last reference reaches the exporter's ``vunmap``."""
    dmabuf.resv.assert_held("dma_buf_vunmap")
    if dmabuf.vmap_ptr is None or dmabuf.vmapping_counter == 0:
        raise KernelBug("dma_buf_vunmap: vmapping_counter is 0")
    if dmabuf.vmap_ptr != vaddr:
        raise KernelBug("dma_buf_vunmap: address differs from the vmap address")
    dmabuf.vmapping_counter -= 1
    if dmabuf.vmapping_counter == 0:
        if dmabuf.ops.vunmap is not None:
            dmabuf.ops.vunmap(dmabuf, vaddr)
        dmabuf.vmap_ptr = None


def dma_buf_vmap_unlocked(dmabuf: DmaBuf) -> int:
    """``dma_buf_vmap_unlocked`` (v6.2+): take the resv around :func:`dma_buf_vmap`."""
    _require_unlocked_variants(dmabuf.kernel, "dma_buf_vmap_unlocked")
    dmabuf.resv.assert_not_held("dma_buf_vmap_unlocked")
    with dmabuf.resv:
        return dma_buf_vmap(dmabuf)


def dma_buf_vunmap_unlocked(dmabuf: DmaBuf, vaddr: int) -> None:
    """``dma_buf_vunmap_unlocked`` (v6.2+)."""
    _require_unlocked_variants(dmabuf.kernel, "dma_buf_vunmap_unlocked")
    dmabuf.resv.assert_not_held("dma_buf_vunmap_unlocked")
    with dmabuf.resv:
        dma_buf_vunmap(dmabuf, vaddr)


def dma_buf_mmap(dmabuf: DmaBuf, pgoff: int, npages: int) -> None:
    """``dma_buf_mmap``: map ``npages`` pages from page offset ``pgoff`` into userspace (K-73).

    ``-EINVAL`` without an ``mmap`` op; ``-EOVERFLOW`` when ``pgoff + npages`` wraps an
    unsigned long; ``-EINVAL`` when the range passes the end of the buffer.
    """
    dmabuf.resv.assert_not_held("dma_buf_mmap")
    if dmabuf.ops.mmap is None:
        raise err(Errno.EINVAL, "dma_buf_mmap", "exporter has no mmap")
    if pgoff + npages > ULONG_MAX:
        raise err(Errno.EOVERFLOW, "dma_buf_mmap", "pgoff + pages overflows")
    if pgoff + npages > dmabuf.size >> PAGE_SHIFT:
        raise err(Errno.EINVAL, "dma_buf_mmap", "range exceeds the buffer")
    dmabuf.ops.mmap(dmabuf, pgoff, npages)


def dma_buf_begin_cpu_access(dmabuf: DmaBuf, direction: DmaDataDirection) -> None:
    """``dma_buf_begin_cpu_access`` (K-96): the exporter's callback, then an interruptible
    wait on ``dma_resv_usage_rw(write)``. Caller must not hold the resv."""
    fn = "dma_buf_begin_cpu_access"
    dmabuf.resv.assert_not_held(fn)
    if dmabuf.ops.begin_cpu_access is not None:
        dmabuf.ops.begin_cpu_access(dmabuf, direction)
    write = direction in (DmaDataDirection.BIDIRECTIONAL, DmaDataDirection.TO_DEVICE)
    ret = dmabuf.resv.wait_timeout(dma_resv_usage_rw(write), True)
    if ret < 0:
        raise err(Errno(-ret), fn, "interrupted waiting for fences")


def dma_buf_end_cpu_access(dmabuf: DmaBuf, direction: DmaDataDirection) -> None:
    """``dma_buf_end_cpu_access``: the exporter's callback, if any."""
    dmabuf.resv.assert_not_held("dma_buf_end_cpu_access")
    if dmabuf.ops.end_cpu_access is not None:
        dmabuf.ops.end_cpu_access(dmabuf, direction)


def dma_buf_set_name(dmabuf: DmaBuf, name: str) -> None:
    """``DMA_BUF_SET_NAME``: rename, even while attachments exist (K-74).

    A name longer than ``DMA_BUF_NAME_LEN - 1`` bytes gives ``-EINVAL`` (``strndup_user``).
    """
    if len(name.encode()) >= DMA_BUF_NAME_LEN:
        raise err(Errno.EINVAL, "dma_buf_set_name", f"name longer than {DMA_BUF_NAME_LEN - 1}")
    dmabuf.name = name


def dma_buf_show_fdinfo(dmabuf: DmaBuf) -> str:
    """``dma_buf_show_fdinfo``: the fdinfo lines; ``count`` is the refcount minus one (K-68)."""
    lines = [
        f"size:\t{dmabuf.size}",
        f"count:\t{dmabuf.refcount - 1}",
        f"exp_name:\t{dmabuf.exp_name}",
    ]
    if dmabuf.name is not None:
        lines.append(f"name:\t{dmabuf.name}")
    return "\n".join(lines) + "\n"
