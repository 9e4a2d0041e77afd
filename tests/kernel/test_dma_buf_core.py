"""The dma-buf core: export, references, attach/detach, pin/unpin, CPU access, fdinfo.

kernel-semantics.md §2.1-§2.7 and §2.10, §4.3; checklist items K-1..K-23, K-68, K-70..K-75,
K-89. Map/unmap and move notification live in ``test_dma_buf_map.py``, the locking table in
``test_dma_buf_locking.py``; both reuse the helpers defined at the top of this module.

Tags follow the checklist: (≤6.15) = presets 5.16/6.12/6.14 (:data:`CACHING`), (≥6.16) =
6.16/6.19/7.1/next (:data:`PIN_AT_MAP`), untagged = :data:`ALL` presets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    DmaBufAttachment,
    DmaBufAttachOps,
    DmaBufExportInfo,
    DmaBufOps,
    DmaDataDirection,
    Module,
    SgTable,
    dma_buf_attach,
    dma_buf_attach_revocable,
    dma_buf_begin_cpu_access,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_end_cpu_access,
    dma_buf_export,
    dma_buf_fd,
    dma_buf_get,
    dma_buf_invalidate_mappings,
    dma_buf_is_dynamic,
    dma_buf_map_attachment,
    dma_buf_mmap,
    dma_buf_pin,
    dma_buf_put,
    dma_buf_set_name,
    dma_buf_show_fdinfo,
    dma_buf_unmap_attachment,
    dma_buf_unpin,
    dma_buf_vmap,
    dma_buf_vmap_unlocked,
    dma_buf_vunmap,
    dma_buf_vunmap_unlocked,
    get_dma_buf,
)
from pinlab.kernel.errno import Errno, KernelBug, KernelError, LockingError, NotInProfile
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.file import FdTable, File
from pinlab.kernel.kernel import Kernel, Task
from pinlab.kernel.profile import KernelProfile
from pinlab.kernel.resv import DmaResv, DmaResvUsage
from pinlab.kernel.ttm import TtmMemType, placement
from tests.kernel.fakes import Importer, MiB, StaticExporter, TtmExporter, make_ttm_device

# -- helpers shared with test_dma_buf_map.py and test_dma_buf_locking.py ---------------------

ALL = ("5.16", "6.12", "6.14", "6.16", "6.19", "7.1", "next")
CACHING = ("5.16", "6.12", "6.14")  # (≤6.15)
PIN_AT_MAP = ("6.16", "6.19", "7.1", "next")  # (≥6.16)
REVOKE = ("7.1", "next")  # the revoke family
BEFORE_7_1 = ("5.16", "6.12", "6.14", "6.16", "6.19")
BIDI = DmaDataDirection.BIDIRECTIONAL

SPIED_OPS = (
    "attach",
    "detach",
    "pin",
    "unpin",
    "map_dma_buf",
    "unmap_dma_buf",
    "release",
    "begin_cpu_access",
    "end_cpu_access",
    "mmap",
    "vmap",
    "vunmap",
)


@dataclass(frozen=True)
class Call:
    """One exporter callback as the core made it."""

    name: str
    held: bool  # did the caller hold the buffer's resv at the time?
    direction: DmaDataDirection | None = None


class Spy:
    """Wraps every exporter callback of a dma-buf to record name, lock state and direction."""

    def __init__(self, dmabuf: DmaBuf) -> None:
        self.log: list[Call] = []
        ops = dmabuf.ops
        for name in SPIED_OPS:
            fn = getattr(ops, name)
            if fn is not None:
                setattr(ops, name, self._wrap(dmabuf, name, fn))

    def _wrap(self, dmabuf: DmaBuf, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            direction = next((a for a in args if isinstance(a, DmaDataDirection)), None)
            self.log.append(Call(name, dmabuf.resv.held_by_caller(), direction))
            return fn(*args)

        return wrapper

    def names(self) -> list[str]:
        return [c.name for c in self.log]

    def count(self, name: str) -> int:
        return sum(1 for c in self.log if c.name == name)

    def clear(self) -> None:
        self.log.clear()


class Rig:
    """A kernel with one TTM device, a dynamic (or static) :class:`TtmExporter` and one BO
    exported as ``dmabuf``; every exporter callback is spied."""

    def __init__(
        self,
        profile: str | KernelProfile,
        *,
        where: TtmMemType = TtmMemType.TT,
        size: int = 16 * MiB,
        vram: int = 1 << 30,
        ops: dict[str, Any] | None = None,
        **exporter_kw: Any,
    ) -> None:
        self.kernel = Kernel(profile)
        self.bdev = make_ttm_device(self.kernel, vram=vram)
        self.exp = TtmExporter(self.bdev, **exporter_kw)
        self.bo = self.exp.create_bo(size, where, name="bo")
        self.dmabuf = self.exp.export(self.bo)
        for key, value in (ops or {}).items():
            setattr(self.dmabuf.ops, key, value)  # replace exporter callbacks before spying
        self.spy = Spy(self.dmabuf)

    @property
    def resv(self) -> DmaResv:
        return self.dmabuf.resv

    def static_attach(self, name: str = "disp0") -> DmaBufAttachment:
        return dma_buf_attach(self.dmabuf, Device(name))

    def dynamic_attach(self, importer: Importer | None = None) -> DmaBufAttachment:
        imp = importer if importer is not None else Importer()
        return dma_buf_dynamic_attach(self.dmabuf, imp.dev, imp.ops, imp)


class StaticRig:
    """A kernel with a :class:`StaticExporter` (habanalabs-like) and one exported buffer."""

    def __init__(
        self,
        profile: str | KernelProfile,
        *,
        cache_sgt_mapping: bool = False,
        vmap: bool = True,
        ops: dict[str, Any] | None = None,
    ) -> None:
        self.kernel = Kernel(profile)
        self.exp = StaticExporter(self.kernel, cache_sgt_mapping=cache_sgt_mapping, vmap=vmap)
        self.dmabuf = self.exp.export(16 * MiB)
        for key, value in (ops or {}).items():
            setattr(self.dmabuf.ops, key, value)  # replace exporter callbacks before spying
        self.spy = Spy(self.dmabuf)

    @property
    def resv(self) -> DmaResv:
        return self.dmabuf.resv

    def static_attach(self, name: str = "disp0") -> DmaBufAttachment:
        return dma_buf_attach(self.dmabuf, Device(name))

    def dynamic_attach(self, importer: Importer | None = None) -> DmaBufAttachment:
        imp = importer if importer is not None else Importer()
        return dma_buf_dynamic_attach(self.dmabuf, imp.dev, imp.ops, imp)


def map_locked(attach: DmaBufAttachment, direction: DmaDataDirection = BIDI) -> SgTable:
    """``dma_resv_lock`` + ``dma_buf_map_attachment`` + ``dma_resv_unlock``."""
    with attach.dmabuf.resv:
        return dma_buf_map_attachment(attach, direction)


def unmap_locked(
    attach: DmaBufAttachment, sgt: SgTable, direction: DmaDataDirection = BIDI
) -> None:
    with attach.dmabuf.resv:
        dma_buf_unmap_attachment(attach, sgt, direction)


def pin_locked(attach: DmaBufAttachment) -> None:
    with attach.dmabuf.resv:
        dma_buf_pin(attach)


def unpin_locked(attach: DmaBufAttachment) -> None:
    with attach.dmabuf.resv:
        dma_buf_unpin(attach)


def add_fence(resv: DmaResv, usage: DmaResvUsage, timeline: str = "job") -> DmaFence:
    """An unsignalled fence on a fresh context, added to ``resv`` with ``usage``."""
    fence = resv.kernel.timeline("test", timeline).next_fence()
    with resv:
        resv.add_fence(fence, usage)
    return fence


class RecordingWaiter:
    """A :class:`~pinlab.kernel.kernel.FenceWaiter` that records each wait and returns
    ``result`` (> 0 signalled, 0 timeout, < 0 interrupted)."""

    def __init__(self, result: int = 1, order: list[str] | None = None) -> None:
        self.result = result
        self.order = order  # if given, "wait" is appended to it on every wait
        self.calls: list[tuple[list[DmaFence], bool, int | None]] = []

    def wait(self, fences: Sequence[DmaFence], *, intr: bool, timeout: int | None) -> int:
        self.calls.append((list(fences), intr, timeout))
        if self.order is not None:
            self.order.append("wait")
        return self.result


def full_ops(**overrides: Any) -> DmaBufOps:
    """A complete static exporter's ops; ``overrides`` replace (or remove, with None) fields."""
    ops = DmaBufOps(
        map_dma_buf=lambda a, d: SgTable(((0, a.dmabuf.size),)),
        unmap_dma_buf=lambda a, s, d: None,
        release=lambda d: None,
    )
    for key, value in overrides.items():
        setattr(ops, key, value)
    return ops


def _noop_attach(a: DmaBufAttachment) -> None:
    return None


# -- export and reference counting ---------------------------------------------------------


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("missing", ["priv", "ops", "map_dma_buf", "unmap_dma_buf", "release"])
def test_k1_export_without_mandatory_field_warns_einval_and_creates_nothing(
    profile: str, missing: str
) -> None:
    """K-1: priv, ops, map_dma_buf, unmap_dma_buf and release are mandatory."""
    kernel = Kernel(profile)
    ops: DmaBufOps | None = full_ops()
    priv: object = object()
    if missing == "priv":
        priv = None
    elif missing == "ops":
        ops = None
    else:
        ops = full_ops(**{missing: None})
    with pytest.raises(KernelError) as exc:
        dma_buf_export(kernel, DmaBufExportInfo(ops=ops, size=MiB, priv=priv))
    assert exc.value.errno is Errno.EINVAL
    assert exc.value.value == -22
    assert kernel.warnings.count("dma_buf_export") == 1
    assert list(kernel.dma_bufs()) == []


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("missing", ["priv", "map_dma_buf", "unmap_dma_buf", "release"])
def test_k1_mandatory_field_never_set_counts_as_missing(profile: str, missing: str) -> None:
    """K-1 (dma_buf_export): a field the exporter never sets is NULL in the kernel
    (DEFINE_DMA_BUF_EXPORT_INFO and static ops structs are zero-initialised), so leaving
    it out of the constructors is the same WARN and -EINVAL as passing None."""
    kernel = Kernel(profile)
    given: dict[str, Any] = {
        "map_dma_buf": lambda a, d: SgTable(((0, a.dmabuf.size),)),
        "unmap_dma_buf": lambda a, s, d: None,
        "release": lambda d: None,
    }
    ops = DmaBufOps(**{key: fn for key, fn in given.items() if key != missing})
    info = (
        DmaBufExportInfo(ops=ops, size=MiB)
        if missing == "priv"
        else DmaBufExportInfo(ops=ops, size=MiB, priv=object())
    )
    with pytest.raises(KernelError) as exc:
        dma_buf_export(kernel, info)
    assert exc.value.errno is Errno.EINVAL
    assert kernel.warnings.count("dma_buf_export") == 1
    assert list(kernel.dma_bufs()) == []


@pytest.mark.parametrize("profile", ALL)
def test_k1_export_checks_no_size(profile: str) -> None:
    """K-1 (dma_buf_export, drivers/dma-buf/dma-buf.c): the kernel checks priv, the ops and
    the module, never the size (dma_buf_getfile takes any); the model refused a size of 0
    with -EINVAL. An empty buffer exports and releases like any other. A negative size has
    no C counterpart (size_t) and is the caller's bug."""
    kernel = Kernel(profile)
    dmabuf = dma_buf_export(kernel, DmaBufExportInfo(ops=full_ops(), size=0, priv=object()))
    assert dmabuf.size == 0 and list(kernel.dma_bufs()) == [dmabuf]
    assert kernel.warnings.count("dma_buf_export") == 0
    dma_buf_put(dmabuf)
    assert list(kernel.dma_bufs()) == []
    with pytest.raises(ValueError, match="negative"):
        dma_buf_export(kernel, DmaBufExportInfo(ops=full_ops(), size=-1, priv=object()))


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("which", ["pin", "unpin"])
def test_k2_export_with_exactly_one_of_pin_unpin_warns_einval(profile: str, which: str) -> None:
    """K-2: pin without unpin (or unpin without pin) is refused."""
    kernel = Kernel(profile)
    ops = full_ops(**{which: _noop_attach})
    with pytest.raises(KernelError) as exc:
        dma_buf_export(kernel, DmaBufExportInfo(ops=ops, size=MiB, priv=object()))
    assert exc.value.errno is Errno.EINVAL
    assert kernel.warnings.count("dma_buf_export", "pin") == 1
    assert list(kernel.dma_bufs()) == []


@pytest.mark.parametrize("profile", ALL)
def test_k2_export_with_both_pin_and_unpin_is_dynamic(profile: str) -> None:
    """K-2, K-6: both pin and unpin is a valid dynamic exporter."""
    kernel = Kernel(profile)
    ops = full_ops(pin=_noop_attach, unpin=_noop_attach)
    dmabuf = dma_buf_export(kernel, DmaBufExportInfo(ops=ops, size=MiB, priv=object()))
    assert dma_buf_is_dynamic(dmabuf)
    assert len(kernel.warnings) == 0


@pytest.mark.parametrize("profile", CACHING)
@pytest.mark.parametrize("pin_ops", [("pin", "unpin"), ("pin",), ("unpin",)])
def test_k3_caching_export_with_cache_sgt_mapping_and_pin_warns_einval(
    profile: str, pin_ops: tuple[str, ...]
) -> None:
    """K-3 (≤6.15): cache_sgt_mapping and dynamic exporting are mutually exclusive; this
    check comes before the pin/unpin pairing check."""
    kernel = Kernel(profile)
    ops = full_ops(cache_sgt_mapping=True, **dict.fromkeys(pin_ops, _noop_attach))
    with pytest.raises(KernelError) as exc:
        dma_buf_export(kernel, DmaBufExportInfo(ops=ops, size=MiB, priv=object()))
    assert exc.value.errno is Errno.EINVAL
    assert kernel.warnings.count("dma_buf_export", "cache_sgt_mapping") == 1
    assert kernel.warnings.count("dma_buf_export") == 1
    assert list(kernel.dma_bufs()) == []


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k3_pin_at_map_ignores_cache_sgt_mapping(profile: str) -> None:
    """K-3: ≥6.16 dropped sg_table caching, so the flag neither refuses the export nor caches
    anything: a static importer of a dynamic exporter gets a fresh table per map."""
    rig = Rig(profile, cache_sgt_mapping=True)
    assert not rig.kernel.profile.cache_sgt_mapping_flag
    assert len(rig.kernel.warnings) == 0
    attach = rig.static_attach()
    first = map_locked(attach)
    second = map_locked(attach)
    assert first is not second
    assert attach.sgt is None
    assert rig.spy.count("map_dma_buf") == 2


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k3_pin_at_map_static_exporter_cache_flag_is_ignored(profile: str) -> None:
    """K-3/K-33: in ≥6.16 even a static exporter's cache_sgt_mapping caches nothing."""
    rig = StaticRig(profile, cache_sgt_mapping=True)
    attach = rig.static_attach()
    first = map_locked(attach)
    unmap_locked(attach, first)
    assert rig.spy.names() == ["map_dma_buf", "unmap_dma_buf"]
    assert attach.sgt is None


@pytest.mark.parametrize("profile", ALL)
def test_k70_export_with_unloading_module_is_enoent(profile: str) -> None:
    """K-70: try_module_get failing gives -ENOENT, no buffer and no module reference."""
    kernel = Kernel(profile)
    module = Module("amdgpu")
    module.unloading = True
    with pytest.raises(KernelError) as exc:
        dma_buf_export(kernel, DmaBufExportInfo(ops=full_ops(), size=MiB, priv=1, owner=module))
    assert exc.value.errno is Errno.ENOENT
    assert module.refcnt == 0
    assert list(kernel.dma_bufs()) == []


def test_k70_export_holds_module_reference_until_release() -> None:
    """K-70: a successful export takes the module reference; the final put drops it."""
    kernel = Kernel()
    module = Module("amdgpu")
    dmabuf = dma_buf_export(
        kernel, DmaBufExportInfo(ops=full_ops(), size=MiB, priv=1, owner=module)
    )
    assert module.refcnt == 1
    dma_buf_put(dmabuf)
    assert module.refcnt == 0
    assert dmabuf.released


def test_k70_every_buffer_holds_its_own_module_reference() -> None:
    """K-70 (dma_buf_export, dma_buf_release): try_module_get per export, module_put per
    release, so two live buffers of one module hold two references."""
    kernel = Kernel()
    module = Module("amdgpu")
    first, second = (
        dma_buf_export(kernel, DmaBufExportInfo(ops=full_ops(), size=MiB, priv=1, owner=module))
        for _ in range(2)
    )
    assert module.refcnt == 2
    dma_buf_put(first)
    assert module.refcnt == 1
    dma_buf_put(second)
    assert module.refcnt == 0


@pytest.mark.parametrize("profile", ALL)
def test_k71_dma_buf_fd_null_or_fileless_buffer_is_einval(profile: str) -> None:
    """K-71: dma_buf_fd(NULL) and a buffer whose file is gone give -EINVAL."""
    rig = StaticRig(profile)
    table = FdTable()
    with pytest.raises(KernelError) as exc:
        dma_buf_fd(None, files=table)
    assert exc.value.errno is Errno.EINVAL
    dma_buf_put(rig.dmabuf)  # file released
    with pytest.raises(KernelError) as exc:
        dma_buf_fd(rig.dmabuf, files=table)
    assert exc.value.errno is Errno.EINVAL
    assert len(table) == 0


def test_k71_dma_buf_fd_installs_the_export_reference_in_current() -> None:
    """K-71: the fd owns the export's reference (no new one); default table is current's."""
    rig = StaticRig("6.16")
    rig.kernel.current = Task(100, "app")
    fd = dma_buf_fd(rig.dmabuf)
    assert rig.kernel.current.files.lookup(fd) is rig.dmabuf.file
    assert rig.dmabuf.refcount == 1
    assert rig.kernel.current.files.close(fd)
    assert rig.dmabuf.released
    assert rig.spy.names() == ["release"]


@pytest.mark.parametrize("profile", ALL)
def test_k4_dma_buf_get_ebadf_einval_and_reference(profile: str) -> None:
    """K-4: -EBADF for a closed fd, -EINVAL for a non-dma-buf file, else refcount + 1."""
    rig = StaticRig(profile)
    table = FdTable()
    fd = dma_buf_fd(rig.dmabuf, files=table)
    other = table.install(File("drm", object()))
    with pytest.raises(KernelError) as exc:
        dma_buf_get(rig.kernel, 999, files=table)
    assert exc.value.errno is Errno.EBADF
    with pytest.raises(KernelError) as exc:
        dma_buf_get(rig.kernel, other, files=table)
    assert exc.value.errno is Errno.EINVAL
    assert rig.dmabuf.refcount == 1
    got = dma_buf_get(rig.kernel, fd, files=table)
    assert got is rig.dmabuf
    assert rig.dmabuf.refcount == 2
    dma_buf_put(got)
    assert rig.dmabuf.refcount == 1


def test_k4_dma_buf_get_goes_by_the_file_type_only() -> None:
    """K-4 (dma_buf_get, is_dma_buf_file): only the file's operations make it a dma-buf; a
    file of another type is -EINVAL whatever its private data, and takes no reference."""
    rig = StaticRig("6.16")
    table = FdTable()
    fd = table.install(File("drm", rig.dmabuf))
    with pytest.raises(KernelError) as exc:
        dma_buf_get(rig.kernel, fd, files=table)
    assert exc.value.errno is Errno.EINVAL
    assert rig.dmabuf.refcount == 1


def test_k4_dma_buf_get_after_close_is_ebadf() -> None:
    """K-4: a closed fd is not open any more."""
    rig = StaticRig("6.12")
    table = FdTable()
    fd = dma_buf_fd(rig.dmabuf, files=table)
    kept = dma_buf_get(rig.kernel, fd, files=table)
    table.close(fd)
    with pytest.raises(KernelError) as exc:
        dma_buf_get(rig.kernel, fd, files=table)
    assert exc.value.errno is Errno.EBADF
    assert kept.refcount == 1 and not kept.released


@pytest.mark.parametrize("profile", ALL)
def test_k5_release_runs_only_at_refcount_zero(profile: str) -> None:
    """K-5: the exporter's release runs exactly once, when the last reference goes."""
    rig = StaticRig(profile)
    get_dma_buf(rig.dmabuf)
    get_dma_buf(rig.dmabuf)
    assert rig.dmabuf.refcount == 3
    dma_buf_put(rig.dmabuf)
    dma_buf_put(rig.dmabuf)
    assert rig.spy.count("release") == 0
    assert list(rig.kernel.dma_bufs()) == [rig.dmabuf]
    dma_buf_put(rig.dmabuf)
    assert rig.spy.names() == ["release"]
    assert rig.dmabuf.released
    assert list(rig.kernel.dma_bufs()) == []
    assert len(rig.kernel.warnings) == 0
    with pytest.raises(KernelBug):
        dma_buf_put(rig.dmabuf)  # use after free


def test_k5_put_of_null_is_a_no_op() -> None:
    """K-5: dma_buf_put(NULL) returns without effect."""
    dma_buf_put(None)


@pytest.mark.parametrize("profile", ALL)
def test_k5_release_with_listed_attachment_warns_and_still_releases(profile: str) -> None:
    """K-5: attachments still listed at release WARN (and are reported as a leak)."""
    rig = StaticRig(profile)
    rig.static_attach()
    dma_buf_put(rig.dmabuf)
    assert rig.kernel.warnings.count("dma_buf_release", "attachments") == 1
    assert any(leak.function == "dma_buf_release" for leak in rig.kernel.leaks)
    assert rig.spy.count("release") == 1
    assert rig.dmabuf.released


@pytest.mark.parametrize("profile", ALL)
def test_k5_release_with_live_vmap_is_a_bug(profile: str) -> None:
    """K-5: a non-zero vmapping_counter at release is a BUG."""
    rig = StaticRig(profile)
    with rig.resv:
        dma_buf_vmap(rig.dmabuf)
    with pytest.raises(KernelBug):
        dma_buf_put(rig.dmabuf)
    assert rig.spy.count("release") == 0


@pytest.mark.parametrize("profile", ALL)
def test_k6_dma_buf_is_dynamic_exactly_when_exporter_has_pin(profile: str) -> None:
    """K-6: classification by the pin op."""
    assert dma_buf_is_dynamic(Rig(profile).dmabuf)
    assert not dma_buf_is_dynamic(Rig(profile, dynamic=False).dmabuf)
    assert not dma_buf_is_dynamic(StaticRig(profile).dmabuf)


# -- attach and detach ---------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL)
def test_k7_attach_with_null_device_or_buffer_is_einval(profile: str) -> None:
    """K-7: NULL dev WARNs and returns -EINVAL; NULL dmabuf returns -EINVAL."""
    rig = Rig(profile)
    imp = Importer()
    calls: list[Callable[[], object]] = [
        lambda: dma_buf_dynamic_attach(rig.dmabuf, None, imp.ops, imp),
        lambda: dma_buf_attach(rig.dmabuf, None),
    ]
    for call in calls:
        with pytest.raises(KernelError) as exc:
            call()
        assert exc.value.errno is Errno.EINVAL
    assert rig.kernel.warnings.count("dma_buf_dynamic_attach") == 2
    with pytest.raises(KernelError) as exc:
        dma_buf_dynamic_attach(None, imp.dev, imp.ops, imp)
    assert exc.value.errno is Errno.EINVAL
    assert rig.dmabuf.attachments == []
    assert rig.spy.log == []


@pytest.mark.parametrize("profile", BEFORE_7_1)
def test_k8_dynamic_attach_without_move_notify_warns_einval(profile: str) -> None:
    """K-8 (before 7.1): importer ops without move_notify are refused before the exporter's
    attach runs."""
    rig = Rig(profile)
    ops = DmaBufAttachOps(allow_peer2peer=True, move_notify=None)
    with pytest.raises(KernelError) as exc:
        dma_buf_dynamic_attach(rig.dmabuf, Device("nic0"), ops, None)
    assert exc.value.errno is Errno.EINVAL
    assert rig.kernel.warnings.count("dma_buf_dynamic_attach", "move_notify") == 1
    assert rig.dmabuf.attachments == []
    assert rig.spy.log == []


def test_k8_k89_7_1_dynamic_attach_without_invalidate_mappings_succeeds() -> None:
    """K-8 does not apply in 7.1; K-89: the attach succeeds, is not revocable and the core
    never pins on its behalf (not at attach, not at map)."""
    rig = Rig("7.1")
    ops = DmaBufAttachOps(allow_peer2peer=True)
    attach = dma_buf_dynamic_attach(rig.dmabuf, Device("iommufd"), ops, None)
    assert len(rig.kernel.warnings) == 0
    assert rig.dmabuf.attachments == [attach]
    assert not dma_buf_attach_revocable(attach)
    sgt = map_locked(attach)
    assert rig.spy.names() == ["attach", "map_dma_buf"]
    assert rig.bo.pin_count == 0
    unmap_locked(attach, sgt)
    assert rig.spy.count("unpin") == 0
    # an invalidation skips it (nothing to call) and cannot fail
    with rig.resv:
        dma_buf_invalidate_mappings(rig.dmabuf)
    dma_buf_detach(rig.dmabuf, attach)
    assert rig.kernel.leaks == []


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize(
    ("kind", "expected"), [("dynamic-p2p", True), ("dynamic-no-p2p", False), ("static", False)]
)
def test_k9_peer2peer_before_exporter_attach(profile: str, kind: str, expected: bool) -> None:
    """K-9: when the exporter's attach runs, peer2peer is allow_peer2peer (dynamic A) or
    False (static A); the exporter may clear it but never set it."""
    rig = Rig(profile)
    seen: list[bool] = []
    inner = rig.dmabuf.ops.attach
    assert inner is not None

    def attach_cb(dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        seen.append(attach.peer2peer)
        inner(dmabuf, attach)

    rig.dmabuf.ops.attach = attach_cb
    if kind == "static":
        attach = rig.static_attach()
    else:
        attach = rig.dynamic_attach(Importer(allow_peer2peer=kind == "dynamic-p2p"))
    assert seen == [expected]
    assert attach.peer2peer is expected


@pytest.mark.parametrize("profile", ALL)
def test_k9_attach_ops_without_allow_peer2peer_give_no_peer2peer(profile: str) -> None:
    """K-9 (dma_buf_dynamic_attach): importer ops that never set allow_peer2peer (a
    zero-initialised dma_buf_attach_ops) give a dynamic attachment with peer2peer False."""
    rig = StaticRig(profile)
    ops = DmaBufAttachOps(move_notify=lambda a: None)
    attach = dma_buf_dynamic_attach(rig.dmabuf, Device("nic0"), ops, None)
    assert attach.peer2peer is False


@pytest.mark.parametrize("profile", ALL)
def test_k9_exporter_attach_may_clear_peer2peer(profile: str) -> None:
    """K-9/K-48: an exporter's attach clearing peer2peer sticks."""
    rig = Rig(profile)

    def clear(dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        attach.peer2peer = False

    rig.dmabuf.ops.attach = clear
    attach = rig.dynamic_attach(Importer(allow_peer2peer=True))
    assert attach.peer2peer is False


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("errno", [Errno.EOPNOTSUPP, Errno.EBUSY, Errno.ENODEV])
@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_k10_exporter_attach_error_is_returned_and_nothing_listed(
    profile: str, errno: Errno, kind: str
) -> None:
    """K-10: the exporter's error comes back unchanged; the attachment is freed, never listed,
    and neither pinned nor mapped (also not in the caching family), nor detached."""

    def refuse(dmabuf: DmaBuf, attach: DmaBufAttachment) -> None:
        raise KernelError(errno, "xe_dma_buf_attach")

    rig = Rig(profile, ops={"attach": refuse})
    with pytest.raises(KernelError) as exc:
        rig.static_attach() if kind == "static" else rig.dynamic_attach()
    assert exc.value.errno is errno
    assert exc.value.function == "xe_dma_buf_attach"
    assert rig.dmabuf.attachments == []
    assert rig.spy.names() == ["attach"]
    assert rig.bo.pin_count == 0
    assert not rig.resv.is_locked()


@pytest.mark.parametrize("profile", ALL)
def test_k11_attach_inserts_at_head(profile: str) -> None:
    """K-11: newest attachment first (debugfs lists the newest first)."""
    rig = StaticRig(profile)
    first = rig.static_attach("a")
    second = rig.dynamic_attach(Importer("b"))
    third = rig.static_attach("c")
    assert rig.dmabuf.attachments == [third, second, first]
    dma_buf_detach(rig.dmabuf, second)
    assert rig.dmabuf.attachments == [third, first]


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k12_pin_at_map_attach_never_pins_or_maps(profile: str) -> None:
    """K-12 (≥6.16): neither a static nor a dynamic attach pins or maps, whatever the
    exporter's dynamicness."""
    rig = Rig(profile)
    rig.static_attach()
    rig.dynamic_attach()
    assert rig.spy.names() == ["attach", "attach"]
    assert rig.bo.pin_count == 0
    srig = StaticRig(profile)
    srig.dynamic_attach()
    srig.static_attach()
    assert srig.spy.log == []
    assert all(a.sgt is None for a in rig.dmabuf.attachments + srig.dmabuf.attachments)


@pytest.mark.parametrize("profile", CACHING)
def test_k13_static_importer_of_dynamic_exporter_pins_and_maps_at_attach(profile: str) -> None:
    """K-13 (≤6.15): one direct E.pin and one E.map(BIDIRECTIONAL), under the resv, with the
    sg_table cached; no dma_buf_pin WARN for the static attachment."""
    rig = Rig(profile)
    attach = rig.static_attach()
    assert rig.spy.log == [
        Call("attach", False),
        Call("pin", True),
        Call("map_dma_buf", True, BIDI),
    ]
    assert attach.sgt is not None
    assert attach.dir is BIDI
    assert rig.bo.pin_count == 1
    assert len(rig.kernel.warnings) == 0
    assert not rig.resv.is_locked()


@pytest.mark.parametrize("profile", CACHING)
@pytest.mark.parametrize("errno", [Errno.ENOMEM, Errno.EINVAL, Errno.EBUSY])
def test_k13_attach_time_pin_failure_fails_the_attach(profile: str, errno: Errno) -> None:
    """K-13 (≤6.15): a pin failure is the attach's error; the core releases the lock and
    detaches (the exporter's detach runs), nothing is mapped or listed."""
    rig = Rig(profile, fail_pin=errno)
    with pytest.raises(KernelError) as exc:
        rig.static_attach()
    assert exc.value.errno is errno
    assert rig.spy.names() == ["attach", "pin", "detach"]
    assert rig.dmabuf.attachments == []
    assert rig.bo.pin_count == 0
    assert not rig.resv.is_locked()
    assert rig.kernel.leaks == []


@pytest.mark.parametrize("profile", CACHING)
@pytest.mark.parametrize("failure", ["error", "null"])
def test_k13_attach_time_map_failure_unpins_and_detaches(profile: str, failure: str) -> None:
    """K-13 (≤6.15): a map failure unpins exactly once, detaches and returns the error; a
    NULL map result becomes -ENOMEM."""
    if failure == "error":
        rig = Rig(profile, fail_map=Errno.EFAULT)
        expected = Errno.EFAULT
    else:
        rig = Rig(profile, ops={"map_dma_buf": lambda a, d: None})
        expected = Errno.ENOMEM
    with pytest.raises(KernelError) as exc:
        rig.static_attach()
    assert exc.value.errno is expected
    assert rig.spy.names() == ["attach", "pin", "map_dma_buf", "unpin", "detach"]
    assert rig.dmabuf.attachments == []
    assert rig.bo.pin_count == 0
    assert not rig.resv.is_locked()


@pytest.mark.parametrize("profile", CACHING)
def test_k13_attach_time_wait_interrupted_undoes_map_and_pin(profile: str) -> None:
    """K-13/K-28 (≤6.15): the attach-time map of a static attachment waits for KERNEL
    fences; an interruption unmaps, unpins, detaches and fails the attach."""
    rig = Rig(profile)
    add_fence(rig.resv, DmaResvUsage.KERNEL)
    rig.kernel.current = Task(1, "app")
    rig.kernel.current.sigpending = True
    with pytest.raises(KernelError) as exc:
        rig.static_attach()
    assert exc.value.errno is Errno.ERESTARTSYS
    assert rig.spy.names() == ["attach", "pin", "map_dma_buf", "unmap_dma_buf", "unpin", "detach"]
    assert rig.bo.pin_count == 0
    assert rig.dmabuf.attachments == []


@pytest.mark.parametrize("profile", CACHING)
def test_k14_dynamic_importer_of_static_exporter_maps_at_attach(profile: str) -> None:
    """K-14 (≤6.15): one map(BIDIRECTIONAL) at attach, cached, no pin; no fence wait since
    the attachment is dynamic."""
    rig = StaticRig(profile)
    add_fence(rig.resv, DmaResvUsage.KERNEL)
    waiter = RecordingWaiter()
    rig.kernel.waiter = waiter
    attach = rig.dynamic_attach()
    assert rig.spy.log == [Call("map_dma_buf", True, BIDI)]
    assert attach.sgt is not None and attach.dir is BIDI
    assert waiter.calls == []


@pytest.mark.parametrize("profile", CACHING)
def test_k14_same_dynamicness_is_not_mapped_at_attach(profile: str) -> None:
    """K-13/K-14 (≤6.15): only a dynamicness mismatch maps at attach."""
    rig = Rig(profile)
    dyn = rig.dynamic_attach()
    srig = StaticRig(profile)
    stat = srig.static_attach()
    assert rig.spy.names() == ["attach"]
    assert srig.spy.log == []
    assert dyn.sgt is None and stat.sgt is None
    assert rig.bo.pin_count == 0


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k15_pin_at_map_detach_only_unlinks_and_reports_leaks(profile: str) -> None:
    """K-15 (≥6.16): detach calls E.detach and unlinks; live mappings, map-time pins and
    unbalanced dma_buf_pin calls stay behind and are recorded in kernel.leaks."""
    rig = Rig(profile)
    static = rig.static_attach()
    map_locked(static)
    map_locked(static)
    dynamic = rig.dynamic_attach()
    pin_locked(dynamic)
    assert rig.bo.pin_count == 3
    rig.spy.clear()

    dma_buf_detach(rig.dmabuf, static)
    assert rig.spy.log == [Call("detach", False)]
    assert rig.dmabuf.attachments == [dynamic]
    assert rig.bo.pin_count == 3  # nothing unpinned
    whats = [leak.what for leak in rig.kernel.leaks]
    assert len(whats) == 2
    assert "2 live mapping(s)" in whats[0]
    assert "2 map-time pin(s)" in whats[1]

    dma_buf_detach(rig.dmabuf, dynamic)
    assert rig.spy.names() == ["detach", "detach"]
    assert "1 unbalanced dma_buf_pin" in rig.kernel.leaks[-1].what
    assert rig.bo.pin_count == 3
    assert all(leak.function == "dma_buf_detach" for leak in rig.kernel.leaks)


@pytest.mark.parametrize("profile", ALL)
def test_k15_balanced_importer_detaches_without_leaks(profile: str) -> None:
    """K-15/K-16: an importer that unmapped and unpinned everything leaks nothing."""
    rig = Rig(profile)
    attach = rig.dynamic_attach()
    sgt = map_locked(attach)
    pin_locked(attach)
    unpin_locked(attach)
    unmap_locked(attach, sgt)
    dma_buf_detach(rig.dmabuf, attach)
    assert rig.kernel.leaks == []
    assert rig.bo.pin_count == 0


@pytest.mark.parametrize("profile", ALL)
def test_k15_k21_every_unmatched_pin_call_is_reported_at_detach(profile: str) -> None:
    """K-15, K-21 (dma_buf_pin, dma_buf_detach): the core forwards every call, so two
    dma_buf_pin and one dma_buf_unpin leave one exporter pin; detach reports it."""
    rig = Rig(profile)
    attach = rig.dynamic_attach()
    pin_locked(attach)
    pin_locked(attach)
    unpin_locked(attach)
    assert rig.bo.pin_count == 1
    dma_buf_detach(rig.dmabuf, attach)
    [leak] = rig.kernel.leaks
    assert leak.function == "dma_buf_detach"
    assert "1 unbalanced dma_buf_pin" in leak.what


@pytest.mark.parametrize("profile", CACHING)
def test_k16_caching_detach_unmaps_cached_sgt_and_unpins_once(profile: str) -> None:
    """K-16 (≤6.15): under the resv the cached sg_table is unmapped and the attach-time pin
    dropped (once); then E.detach runs without the lock."""
    rig = Rig(profile)
    attach = rig.static_attach()
    sgt = map_locked(attach)  # the cached table
    unmap_locked(attach, sgt)  # a no-op for the cached table
    rig.spy.clear()
    dma_buf_detach(rig.dmabuf, attach)
    assert rig.spy.log == [
        Call("unmap_dma_buf", True, BIDI),
        Call("unpin", True),
        Call("detach", False),
    ]
    assert rig.bo.pin_count == 0
    assert attach.sgt is None
    assert rig.kernel.leaks == []


@pytest.mark.parametrize("profile", CACHING)
def test_k16_caching_detach_of_static_exporter_unmaps_without_unpin(profile: str) -> None:
    """K-16 (≤6.15): for a static exporter the cached table is unmapped, no unpin exists."""
    rig = StaticRig(profile)
    attach = rig.dynamic_attach()
    rig.spy.clear()
    dma_buf_detach(rig.dmabuf, attach)
    assert rig.spy.log == [Call("unmap_dma_buf", True, BIDI)]
    assert rig.kernel.leaks == []


@pytest.mark.parametrize("profile", ALL)
def test_k17_detach_with_foreign_attachment_warns_and_changes_nothing(profile: str) -> None:
    """K-17: attach.dmabuf != dmabuf (or a NULL argument) WARNs and returns."""
    rig = Rig(profile)
    other = Rig(rig.kernel.profile)  # a second buffer on its own kernel
    attach = rig.static_attach()
    pins = rig.bo.pin_count
    rig.spy.clear()
    dma_buf_detach(other.dmabuf, attach)
    assert other.kernel.warnings.count("dma_buf_detach") == 1
    dma_buf_detach(rig.dmabuf, None)
    assert rig.kernel.warnings.count("dma_buf_detach") == 1
    dma_buf_detach(None, attach)  # no kernel to warn on; still nothing happens
    assert rig.dmabuf.attachments == [attach]
    assert rig.bo.pin_count == pins
    assert rig.spy.log == [] and other.spy.log == []


@pytest.mark.parametrize("profile", CACHING)
def test_k75_caching_dynamic_importer_of_static_exporter_map_failure_fails_attach(
    profile: str,
) -> None:
    """K-75 (≤6.15): habanalabs-like exporter, importer without peer2peer: the attach-time
    map fails with -EPERM and so does the attach."""
    rig = StaticRig(profile)
    rig.exp.require_p2p = True
    with pytest.raises(KernelError) as exc:
        rig.dynamic_attach(Importer(allow_peer2peer=False))
    assert exc.value.errno is Errno.EPERM
    assert rig.dmabuf.attachments == []
    assert rig.spy.names() == ["map_dma_buf"]
    # a P2P-capable importer attaches fine
    good = rig.dynamic_attach(Importer(allow_peer2peer=True))
    assert good.sgt is not None


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k75_pin_at_map_attach_succeeds_and_first_map_fails(profile: str) -> None:
    """K-75 (≥6.16): the attach succeeds; the first map returns -EPERM."""
    rig = StaticRig(profile)
    rig.exp.require_p2p = True
    attach = rig.dynamic_attach(Importer(allow_peer2peer=False))
    assert rig.dmabuf.attachments == [attach]
    assert rig.spy.log == []
    with pytest.raises(KernelError) as exc:
        map_locked(attach)
    assert exc.value.errno is Errno.EPERM
    assert attach.mappings == 0


# -- pin and unpin -------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL)
def test_k18_pin_and_unpin_without_resv_raise_locking_error(profile: str) -> None:
    """K-18: dma_buf_pin/dma_buf_unpin assert the resv is held; the exporter is not called."""
    rig = Rig(profile)
    attach = rig.dynamic_attach()
    rig.spy.clear()
    with pytest.raises(LockingError, match="dma_buf_pin"):
        dma_buf_pin(attach)
    with pytest.raises(LockingError, match="dma_buf_unpin"):
        dma_buf_unpin(attach)
    assert rig.spy.log == []
    assert rig.bo.pin_count == 0


@pytest.mark.parametrize("profile", ALL)
def test_k19_pin_on_static_attachment_warns_but_pins(profile: str) -> None:
    """K-19: a static attachment WARNs in dma_buf_pin, but E.pin still runs and its result is
    returned (here: success, then an error)."""
    rig = Rig(profile)
    attach = rig.static_attach()
    before = rig.bo.pin_count  # 1 in the caching family (attach-time pin), else 0
    rig.spy.clear()
    pin_locked(attach)
    assert rig.kernel.warnings.count("dma_buf_pin", "importer_ops") == 1
    assert rig.spy.log == [Call("pin", True)]
    assert rig.bo.pin_count == before + 1
    rig.exp.fail_pin = Errno.ENOSPC
    with pytest.raises(KernelError) as exc:
        pin_locked(attach)
    assert exc.value.errno is Errno.ENOSPC
    assert rig.kernel.warnings.count("dma_buf_pin", "importer_ops") == 2
    assert rig.bo.pin_count == before + 1


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_k20_pin_of_static_exporter_is_successful_no_op(profile: str, kind: str) -> None:
    """K-20: no pin op: dma_buf_pin returns 0 and has no effect."""
    rig = StaticRig(profile)
    attach = rig.static_attach() if kind == "static" else rig.dynamic_attach()
    rig.spy.clear()
    with rig.resv:
        dma_buf_pin(attach)  # returns 0: no exception
    assert rig.spy.log == []
    assert attach.importer_pins == 0


@pytest.mark.parametrize("profile", ALL)
def test_k21_core_does_not_count_pins(profile: str) -> None:
    """K-21: N dma_buf_pin calls make N E.pin calls; the exporter (TTM) counts them, across
    attachments too."""
    rig = Rig(profile)
    a = rig.dynamic_attach(Importer("nic0"))
    b = rig.dynamic_attach(Importer("nic1"))
    with rig.resv:
        for _ in range(3):
            dma_buf_pin(a)
        dma_buf_pin(b)
    assert rig.spy.count("pin") == 4
    assert rig.bo.pin_count == 4
    assert len(rig.kernel.warnings) == 0


@pytest.mark.parametrize("profile", ALL)
def test_k22_unpin_dynamic_exporter_drops_one_count(profile: str) -> None:
    """K-22: on a dynamic exporter dma_buf_unpin calls E.unpin once per call."""
    rig = Rig(profile)
    attach = rig.dynamic_attach()
    with rig.resv:
        dma_buf_pin(attach)
        dma_buf_pin(attach)
        dma_buf_unpin(attach)
    assert rig.bo.pin_count == 1
    assert rig.spy.count("unpin") == 1
    unpin_locked(attach)
    assert rig.bo.pin_count == 0


@pytest.mark.parametrize("profile", ALL)
def test_k22_unpin_static_attachment_warns_and_static_exporter_no_op(profile: str) -> None:
    """K-22: WARN for a static attachment; nothing to call on a static exporter."""
    rig = StaticRig(profile)
    attach = rig.static_attach()
    rig.spy.clear()
    unpin_locked(attach)
    assert rig.kernel.warnings.count("dma_buf_unpin", "importer_ops") == 1
    assert rig.spy.log == []
    dyn = rig.dynamic_attach()
    rig.spy.clear()
    unpin_locked(dyn)
    assert rig.spy.log == []
    assert rig.kernel.warnings.count("dma_buf_unpin") == 1


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("errno", [Errno.EINVAL, Errno.ENOMEM])
def test_k23_exporter_pin_error_is_returned_unchanged(profile: str, errno: Errno) -> None:
    """K-23: an E.pin error comes back unchanged and no pin count is taken."""
    rig = Rig(profile, fail_pin=errno)
    attach = rig.dynamic_attach()
    with pytest.raises(KernelError) as exc:
        pin_locked(attach)
    assert exc.value.errno is errno
    assert exc.value.function == "fake_pin"
    assert rig.bo.pin_count == 0
    assert attach.importer_pins == 0


@pytest.mark.parametrize("profile", ALL)
def test_k23_pin_validation_failure_enomem_takes_no_count(profile: str) -> None:
    """K-23: a real validation failure (no room in the pin domain) is -ENOMEM from
    ttm_bo_validate, returned by dma_buf_pin; the BO stays put and unpinned."""
    rig = Rig(profile, where=TtmMemType.TT, vram=4 * MiB, pin_domain=placement(TtmMemType.VRAM))
    attach = rig.dynamic_attach()
    with pytest.raises(KernelError) as exc:
        pin_locked(attach)
    assert exc.value.errno is Errno.ENOMEM
    assert rig.bo.pin_count == 0
    assert rig.bo.mem_type is TtmMemType.TT


# -- CPU access ----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ALL)
def test_k72_vmap_is_refcounted_and_needs_the_resv(profile: str) -> None:
    """K-72: LockingError without the resv; only the first vmap reaches the exporter and
    later ones return the same address; the last vunmap reaches E.vunmap."""
    rig = StaticRig(profile)
    with pytest.raises(LockingError, match="dma_buf_vmap"):
        dma_buf_vmap(rig.dmabuf)
    with rig.resv:
        addr = dma_buf_vmap(rig.dmabuf)
        assert dma_buf_vmap(rig.dmabuf) == addr
        assert rig.dmabuf.vmapping_counter == 2
        assert rig.spy.log == [Call("vmap", True)]
        dma_buf_vunmap(rig.dmabuf, addr)
        assert rig.spy.count("vunmap") == 0
        dma_buf_vunmap(rig.dmabuf, addr)
    assert rig.spy.log[-1] == Call("vunmap", True)
    assert rig.dmabuf.vmapping_counter == 0
    with pytest.raises(LockingError, match="dma_buf_vunmap"):
        dma_buf_vunmap(rig.dmabuf, addr)


@pytest.mark.parametrize("profile", ALL)
def test_k72_vmap_without_op_is_einval(profile: str) -> None:
    """K-72: no vmap op → -EINVAL."""
    rig = StaticRig(profile, vmap=False)
    with rig.resv, pytest.raises(KernelError) as exc:
        dma_buf_vmap(rig.dmabuf)
    assert exc.value.errno is Errno.EINVAL
    assert rig.dmabuf.vmapping_counter == 0


@pytest.mark.parametrize("profile", ALL)
def test_k72_vunmap_bug_cases(profile: str) -> None:
    """K-72: vunmap with the counter at 0, or with another address, is a BUG."""
    rig = StaticRig(profile)
    with rig.resv:
        with pytest.raises(KernelBug):
            dma_buf_vunmap(rig.dmabuf, 0xFFFF_8000_0000_0000)
        addr = dma_buf_vmap(rig.dmabuf)
        with pytest.raises(KernelBug):
            dma_buf_vunmap(rig.dmabuf, addr + 4096)


@pytest.mark.parametrize("profile", ("6.12", "6.14", "6.16", "7.1"))
def test_k72_vmap_unlocked_variants_take_the_lock(profile: str) -> None:
    """K-72 (v6.2+): the _unlocked variants take the resv around the locked functions."""
    rig = StaticRig(profile)
    addr = dma_buf_vmap_unlocked(rig.dmabuf)
    assert not rig.resv.is_locked()
    dma_buf_vunmap_unlocked(rig.dmabuf, addr)
    assert rig.spy.log == [Call("vmap", True), Call("vunmap", True)]


def test_k72_vmap_unlocked_variants_not_in_5_16() -> None:
    """K-72: the _unlocked vmap variants do not exist before v6.2 (preset 5.16)."""
    rig = StaticRig("5.16")
    with pytest.raises(NotInProfile):
        dma_buf_vmap_unlocked(rig.dmabuf)
    with pytest.raises(NotInProfile):
        dma_buf_vunmap_unlocked(rig.dmabuf, 0)


@pytest.mark.parametrize("profile", ALL)
def test_k73_mmap_checks(profile: str) -> None:
    """K-73: -EINVAL without an mmap op or past the end; -EOVERFLOW when pgoff + pages
    wraps; a valid range reaches E.mmap without the resv."""
    rig = StaticRig(profile)  # 16 MiB = 4096 pages
    pages = rig.dmabuf.size >> 12
    dma_buf_mmap(rig.dmabuf, 0, pages)
    dma_buf_mmap(rig.dmabuf, pages - 1, 1)
    assert rig.spy.log == [Call("mmap", False), Call("mmap", False)]
    for pgoff, npages in ((pages, 1), (0, pages + 1)):
        with pytest.raises(KernelError) as exc:
            dma_buf_mmap(rig.dmabuf, pgoff, npages)
        assert exc.value.errno is Errno.EINVAL
    with pytest.raises(KernelError) as exc:
        dma_buf_mmap(rig.dmabuf, (1 << 64) - 1, 1)
    assert exc.value.errno is Errno.EOVERFLOW
    rig.dmabuf.ops.mmap = None
    with pytest.raises(KernelError) as exc:
        dma_buf_mmap(rig.dmabuf, 0, 1)
    assert exc.value.errno is Errno.EINVAL
    assert rig.spy.count("mmap") == 2


@pytest.mark.parametrize("profile", ALL)
def test_k73_mmap_range_ending_at_ulong_max_does_not_overflow(profile: str) -> None:
    """K-73 (dma_buf_mmap): -EOVERFLOW only when pgoff + pages wraps an unsigned long; a
    sum of exactly ULONG_MAX does not wrap and is -EINVAL for passing the end."""
    rig = StaticRig(profile)
    with pytest.raises(KernelError) as exc:
        dma_buf_mmap(rig.dmabuf, (1 << 64) - 2, 1)
    assert exc.value.errno is Errno.EINVAL
    assert rig.spy.count("mmap") == 0


@pytest.mark.parametrize("profile", ALL)
def test_k72_k73_k96_optional_ops_never_set_are_absent(profile: str) -> None:
    """K-72, K-73, K-96: an exporter that sets only the mandatory ops: dma_buf_vmap and
    dma_buf_mmap are -EINVAL, begin_cpu_access skips the callback but still waits, and
    end_cpu_access does nothing; with vmap but no vunmap the last vunmap calls nothing."""
    kernel = Kernel(profile)
    ops = full_ops()
    dmabuf = dma_buf_export(kernel, DmaBufExportInfo(ops=ops, size=MiB, priv=object()))
    with dmabuf.resv, pytest.raises(KernelError) as exc:
        dma_buf_vmap(dmabuf)
    assert exc.value.errno is Errno.EINVAL
    with pytest.raises(KernelError) as exc:
        dma_buf_mmap(dmabuf, 0, 1)
    assert exc.value.errno is Errno.EINVAL
    fence = add_fence(dmabuf.resv, DmaResvUsage.WRITE)
    waiter = RecordingWaiter()
    kernel.waiter = waiter
    dma_buf_begin_cpu_access(dmabuf, DmaDataDirection.FROM_DEVICE)
    assert waiter.calls == [([fence], True, None)]
    dma_buf_end_cpu_access(dmabuf, DmaDataDirection.FROM_DEVICE)
    ops.vmap = lambda d: 0xFFFF_8000_0000_0000
    with dmabuf.resv:
        dma_buf_vunmap(dmabuf, dma_buf_vmap(dmabuf))
    assert dmabuf.vmapping_counter == 0
    assert len(kernel.warnings) == 0


@pytest.mark.parametrize("profile", ALL)
def test_k74_set_name_succeeds_while_attached(profile: str) -> None:
    """K-74: DMA_BUF_SET_NAME renames even with attachments (the -EBUSY refusal is ≈5.5)."""
    rig = Rig(profile)
    rig.static_attach()
    rig.dynamic_attach()
    dma_buf_set_name(rig.dmabuf, "kv-cache")
    assert rig.dmabuf.name == "kv-cache"
    dma_buf_set_name(rig.dmabuf, "x" * 31)
    with pytest.raises(KernelError) as exc:
        dma_buf_set_name(rig.dmabuf, "x" * 32)
    assert exc.value.errno is Errno.EINVAL
    assert rig.dmabuf.name == "x" * 31


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize(
    ("direction", "usage"),
    [
        (DmaDataDirection.FROM_DEVICE, DmaResvUsage.WRITE),  # a reader waits for writers
        (DmaDataDirection.TO_DEVICE, DmaResvUsage.READ),  # a writer waits for all
        (DmaDataDirection.BIDIRECTIONAL, DmaResvUsage.READ),
    ],
)
def test_k96_begin_cpu_access_calls_exporter_then_waits_usage_rw(
    profile: str, direction: DmaDataDirection, usage: DmaResvUsage
) -> None:
    """K-96: E.begin_cpu_access first (without the resv), then an interruptible wait without
    timeout on the fences of dma_resv_usage_rw(write)."""
    rig = StaticRig(profile)
    fences = {u: add_fence(rig.resv, u, u.name) for u in DmaResvUsage}
    order: list[str] = []
    waiter = RecordingWaiter(order=order)
    rig.kernel.waiter = waiter
    begin = rig.dmabuf.ops.begin_cpu_access
    assert begin is not None

    def begin_cb(d: DmaBuf, dr: DmaDataDirection) -> None:
        order.append("begin_cpu_access")
        begin(d, dr)

    rig.dmabuf.ops.begin_cpu_access = begin_cb
    dma_buf_begin_cpu_access(rig.dmabuf, direction)
    assert order == ["begin_cpu_access", "wait"]
    [(waited, intr, timeout)] = waiter.calls
    assert waited == [fences[u] for u in DmaResvUsage if u <= usage]
    assert intr is True and timeout is None
    assert rig.spy.log == [Call("begin_cpu_access", False, direction)]
    dma_buf_end_cpu_access(rig.dmabuf, direction)


@pytest.mark.parametrize("profile", ALL)
def test_k96_begin_cpu_access_interrupted(profile: str) -> None:
    """K-96: the wait is interruptible: a pending signal gives -ERESTARTSYS."""
    rig = StaticRig(profile)
    add_fence(rig.resv, DmaResvUsage.WRITE)
    rig.kernel.current = Task(7, "reader")
    rig.kernel.current.sigpending = True
    with pytest.raises(KernelError) as exc:
        dma_buf_begin_cpu_access(rig.dmabuf, DmaDataDirection.FROM_DEVICE)
    assert exc.value.errno is Errno.ERESTARTSYS
    assert rig.spy.count("begin_cpu_access") == 1


@pytest.mark.parametrize("profile", ALL)
def test_k96_k66_begin_cpu_access_fails_only_on_a_negative_wait_result(profile: str) -> None:
    """K-96, K-66 (dma_buf_begin_cpu_access): only a negative wait result is an error; a
    zero (timeout) result is not turned into one."""
    rig = StaticRig(profile)
    add_fence(rig.resv, DmaResvUsage.WRITE)
    waiter = RecordingWaiter(result=0)
    rig.kernel.waiter = waiter
    dma_buf_begin_cpu_access(rig.dmabuf, DmaDataDirection.FROM_DEVICE)
    assert len(waiter.calls) == 1


@pytest.mark.parametrize("profile", ALL)
def test_k68_fdinfo_count_is_refcount_minus_one(profile: str) -> None:
    """K-68: fdinfo prints size, count = file refcount - 1, exp_name, and name if set."""
    rig = StaticRig(profile)
    size = rig.dmabuf.size
    assert dma_buf_show_fdinfo(rig.dmabuf) == f"size:\t{size}\ncount:\t0\nexp_name:\tstatic\n"
    get_dma_buf(rig.dmabuf)
    get_dma_buf(rig.dmabuf)
    dma_buf_set_name(rig.dmabuf, "weights")
    assert rig.dmabuf.refcount == 3
    assert dma_buf_show_fdinfo(rig.dmabuf) == (
        f"size:\t{size}\ncount:\t2\nexp_name:\tstatic\nname:\tweights\n"
    )
