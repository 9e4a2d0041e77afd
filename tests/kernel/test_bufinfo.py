"""debugfs ``dma_buf/bufinfo`` and the fdinfo count (kernel-semantics.md §4; K-67, K-68, K-94).

Golden tests pin the exact text of ``dma_buf_debug_show`` per preset; a hypothesis test checks
that ``parse_bufinfo(render_bufinfo(k))`` gives back the model's state; the fixtures under
``tests/kernel/data/bufinfo/`` are dumps from real machines or shaped like them:

* ``amdgpu-5.14-bugzilla-214621.txt``: real, v5.14.14 with amdgpu, from kernel bugzilla 214621
  comment #4 (via the dri-devel archive), tabs expanded as posted; only Bugzilla's 80-column
  wrapping of the long lines is undone. No name column, empty names, ``Shared fence:`` lines.
* ``asahi-6.x-issue-126-excerpt.txt``: real excerpt (first four buffers) of a dump posted on
  AsahiLinux/linux issue #126 (2023), tabs expanded; the trailer is recomputed for the excerpt.
  Name column, ``<none>``, ``write fence:`` lines without a space after the colon.
* ``p2p-classic-crlf.txt``, ``context-first-6.19.txt``, ``android-5.10-dma-heaps.txt``:
  synthesized in the formats of the sources (raw tabs, CRLF, trailing whitespace, dma-heap
  exporters, the v6.19 fence layout).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinlab.kernel.bufinfo import (
    BufinfoDump,
    BufinfoFence,
    BufinfoParseError,
    BufinfoRecord,
    bufinfo_has_name_column,
    dma_fence_describe,
    dma_resv_describe,
    parse_bufinfo,
    parse_bufinfo_file,
    render_bufinfo,
)
from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import (
    DmaBuf,
    dma_buf_attach,
    dma_buf_fd,
    dma_buf_get,
    dma_buf_put,
    dma_buf_set_name,
    dma_buf_show_fdinfo,
    get_dma_buf,
)
from pinlab.kernel.errno import Errno, KernelError, LockingError
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.file import FdTable
from pinlab.kernel.kernel import Kernel, Task
from pinlab.kernel.profile import FenceFormat, get_profile
from pinlab.kernel.resv import DmaResv, DmaResvUsage, WwAcquireCtx
from tests.kernel.fakes import MiB, StaticExporter

DATA = Path(__file__).parent / "data" / "bufinfo"
ALL = ("5.16", "6.12", "6.14", "6.16", "7.1")
HEADER = "size    \tflags   \tmode    \tcount   \texp_name\tino     \tname\n"
HEADER_PRE_6_0 = "size    \tflags   \tmode    \tcount   \texp_name\tino     \n"


# -- the golden state ------------------------------------------------------------------------


def golden_state(profile: str) -> tuple[Kernel, DmaBuf, DmaBuf]:
    """Two buffers: ``gpu`` (ino 1, unnamed, two attachments, one fence per usage with the
    KERNEL one signalled) and the newer ``staging`` (ino 2, named, one fd plus a
    ``dma_buf_get`` reference, no attachments)."""
    kernel = Kernel(profile)
    exporter = StaticExporter(kernel)
    gpu = exporter.export(16 * MiB, name="habanalabs")
    dma_buf_attach(gpu, Device("0000:41:00.0"))
    dma_buf_attach(gpu, Device("mlx5_0"))  # newest attachment: listed first
    fences = []
    for driver, timeline, last_seqno in (
        ("ttm", "move", 6),  # KERNEL, context 1, seq 7
        ("habanalabs", "dma", 41),  # WRITE, context 2, seq 42
        ("mlx5", "rx", 2),  # READ, context 3, seq 3
        ("amdgpu", "vm", 0),  # BOOKKEEP, context 4, seq 1: never printed
    ):
        tl = kernel.timeline(driver, timeline)
        tl.seqno = last_seqno
        fences.append(tl.next_fence())
    with gpu.resv:
        for fence, usage in zip(fences, DmaResvUsage, strict=True):
            gpu.resv.add_fence(fence, usage)
    fences[0].signal()

    staging = exporter.export(4096, name="system")
    dma_buf_set_name(staging, "rdma staging")
    files = FdTable()
    fd = dma_buf_fd(staging, files=files)
    dma_buf_get(kernel, fd, files=files)
    return kernel, gpu, staging


def golden_text(profile: str, gpu: DmaBuf, staging: DmaBuf) -> str:
    fence_lines = {
        "6.16": (
            "\tkernel fence:ttm move seq 7 signalled\n"
            "\twrite fence:habanalabs dma seq 42 unsignalled\n"
            "\tread fence:mlx5 rx seq 3 unsignalled\n"
        ),
        "7.1": (
            "\tkernel fence:1:7   signalled\n"
            "\twrite fence:2:42 dma habanalabs unsignalled\n"
            "\tread fence:3:3 rx mlx5 unsignalled\n"
        ),
        "5.16": (
            "\tExclusive fence: ttm move signalled\n"
            "\tExclusive fence: habanalabs dma unsignalled\n"
            "\tShared fence: mlx5 rx unsignalled\n"
        ),
    }[profile]
    header, unnamed = (HEADER_PRE_6_0, "") if profile == "5.16" else (HEADER, "<none>")
    # f_mode comes from the model's struct file (see FMODE_LSEEK in the report), flags O_RDWR.
    staging_mode, gpu_mode = f"{staging.file.f_mode:08x}", f"{gpu.file.f_mode:08x}"
    return (
        "\nDma-buf Objects:\n"
        + header
        + f"00004096\t00000002\t{staging_mode}\t00000002\tsystem\t00000002\trdma staging\n"
        + "\tAttached Devices:\n"
        + "Total 0 devices attached\n"
        + "\n"
        + f"16777216\t00000002\t{gpu_mode}\t00000001\thabanalabs\t00000001\t{unnamed}\n"
        + fence_lines
        + "\tAttached Devices:\n"
        + "\tmlx5_0\n"
        + "\t0000:41:00.0\n"
        + "Total 2 devices attached\n"
        + "\n"
        + "\nTotal 2 objects, 16781312 bytes\n"
    )


@pytest.mark.parametrize("profile", ["6.16", "7.1", "5.16"])
def test_k67_k94_golden_bufinfo(profile: str) -> None:
    """K-67/K-94: exact text per preset -- newest buffer first, ``<none>`` (6.0+) or an empty
    field (5.16) for an unset name, KERNEL/WRITE/READ fences in the preset's layout and no
    BOOKKEEP line, attachments newest first, per-buffer and global totals."""
    kernel, gpu, staging = golden_state(profile)
    assert gpu.file.f_flags == 0o2  # O_RDWR
    assert render_bufinfo(kernel) == golden_text(profile, gpu, staging)


@pytest.mark.parametrize("profile", ALL)
def test_k94_bookkeep_never_printed(profile: str) -> None:
    """K-94: ``dma_resv_describe`` walks with usage READ; a BOOKKEEP fence is invisible."""
    kernel, gpu, _ = golden_state(profile)
    text = render_bufinfo(kernel)
    assert "amdgpu" not in text and "bookkeep" not in text
    (gpu_rec,) = [rec for rec in parse_bufinfo(text).objects if rec.ino == gpu.ino]
    assert len(gpu_rec.fences) == 3


@pytest.mark.parametrize("profile", ["6.12", "6.14"])
def test_k94_classic_presets_match_616(profile: str) -> None:
    """K-94: 6.12 and 6.14 print the same 5.19-6.18 layout as 6.16."""
    kernel, gpu, staging = golden_state(profile)
    assert render_bufinfo(kernel) == golden_text("6.16", gpu, staging)


@pytest.mark.parametrize("profile", ["6.16", "7.1", "5.16"])
def test_k67_golden_parses_back(profile: str) -> None:
    """K-67: the golden text parses (format auto-detected) into the two records."""
    kernel, _, _ = golden_state(profile)
    dump = parse_bufinfo(render_bufinfo(kernel))
    assert dump.consistent and dump.total_objects == 2 and dump.total_bytes == 16781312
    assert dump.name_column is (profile != "5.16")
    first, second = dump.objects
    assert (first.ino, first.name, first.count, first.exp_name) == (2, "rdma staging", 2, "system")
    assert (second.ino, second.name, second.count) == (1, None, 1)
    assert second.attached_devices == ["mlx5_0", "0000:41:00.0"]
    assert second.declared_devices == 2 and first.declared_devices == 0
    assert [f.usage for f in second.fences] == {
        "6.16": ["kernel", "write", "read"],
        "7.1": ["kernel", "write", "read"],
        "5.16": ["Exclusive", "Exclusive", "Shared"],
    }[profile]
    assert [f.signalled for f in second.fences] == [True, False, False]


# -- dma_fence_describe / dma_resv_describe ------------------------------------------------------


def test_k94_dma_fence_describe_layouts() -> None:
    """K-94: the three descriptions of one fence, before and after it signals."""
    fence = DmaFence(17, 5, "amdgpu", "sdma0")
    assert dma_fence_describe(fence, FenceFormat.CLASSIC) == "amdgpu sdma0 seq 5 unsignalled"
    assert dma_fence_describe(fence, FenceFormat.CONTEXT_FIRST) == "17:5 sdma0 amdgpu unsignalled"
    assert dma_fence_describe(fence, FenceFormat.EXCLUSIVE_SHARED) == "amdgpu sdma0 unsignalled"
    fence.signal()
    assert dma_fence_describe(fence, FenceFormat.CLASSIC) == "amdgpu sdma0 seq 5 signalled"
    assert dma_fence_describe(fence, FenceFormat.CONTEXT_FIRST) == "17:5   signalled"
    assert dma_fence_describe(fence, FenceFormat.EXCLUSIVE_SHARED) == "amdgpu sdma0 signalled"


def test_k94_dma_resv_describe_needs_the_lock() -> None:
    """``dma_resv_describe`` iterates with ``dma_resv_for_each_fence``: resv held or lockdep."""
    _, gpu, _ = golden_state("6.16")
    with pytest.raises(LockingError, match="dma_resv_describe"):
        dma_resv_describe(gpu.resv, FenceFormat.CLASSIC)
    with gpu.resv:
        assert dma_resv_describe(gpu.resv, FenceFormat.CLASSIC).count("\n") == 3


def test_k94_exclusive_shared_orders_exclusive_first() -> None:
    """K-94 (5.16): KERNEL/WRITE fences are the exclusive slot and print before READ ones,
    whatever order the model added them in."""
    kernel = Kernel("5.16")
    buf = StaticExporter(kernel).export(4096)
    read = kernel.timeline("mlx5", "rx").next_fence()
    write = kernel.timeline("gpu", "gfx").next_fence()
    with buf.resv:
        buf.resv.add_fence(read, DmaResvUsage.READ)
        buf.resv.add_fence(write, DmaResvUsage.WRITE)
        text = dma_resv_describe(buf.resv, FenceFormat.EXCLUSIVE_SHARED)
    assert text == "\tExclusive fence: gpu gfx unsignalled\n\tShared fence: mlx5 rx unsignalled\n"


# -- K-68: bufinfo count vs fdinfo count -----------------------------------------------------


@pytest.mark.parametrize("profile", ALL)
def test_k67_mode_column_of_an_o_rdwr_export_is_the_real_dumps_mode(profile: str) -> None:
    """K-67 (dma_buf_debug_show prints file->f_flags and file->f_mode; dma_buf_getfile): an
    O_RDWR export has FMODE_READ | FMODE_WRITE, FMODE_LSEEK (dma_buf_fops has .llseek) and
    FMODE_OPENED: 00080007, the mode of the real amdgpu 5.14 dump (fixture in data/bufinfo)."""
    kernel = Kernel(profile)
    StaticExporter(kernel).export(MiB)
    [rec] = parse_bufinfo(render_bufinfo(kernel)).objects
    assert (rec.flags, rec.mode) == (0o2, 0x80007)


@pytest.mark.parametrize("profile", ALL)
def test_k68_bufinfo_count_is_raw_refcount_fdinfo_minus_one(profile: str) -> None:
    """K-68: bufinfo prints ``file_count`` as is; ``dma_buf_show_fdinfo`` prints it minus one
    (the reference procfs' ``seq_show`` holds while it runs)."""
    kernel = Kernel(profile)
    buf = StaticExporter(kernel).export(4096)
    files = FdTable()
    fd = dma_buf_fd(buf, files=files)
    got = dma_buf_get(kernel, fd, files=files)
    assert buf.refcount == 2
    (rec,) = parse_bufinfo(render_bufinfo(kernel)).objects
    assert rec.count == 2
    assert "\t00000002\t" in render_bufinfo(kernel)
    assert f"count:\t{buf.refcount - 1}\n" in dma_buf_show_fdinfo(buf)
    # As procfs calls it: with its temporary reference, fdinfo shows what bufinfo shows.
    buf.file.get()
    try:
        assert f"count:\t{rec.count}\n" in dma_buf_show_fdinfo(buf)
    finally:
        buf.file.put()
    dma_buf_put(got)
    (rec,) = parse_bufinfo(render_bufinfo(kernel)).objects
    assert rec.count == 1


# -- locking -----------------------------------------------------------------------------------


def test_k95_interrupted_resv_lock_fails_the_read_with_eintr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """K-95: when ``dma_resv_lock_interruptible`` returns ``-EINTR`` (a signal arrived while
    the reader waited), the read fails with ``-EINTR``, no partial text, and no resv stays
    locked -- here on the second buffer, after the first was printed and unlocked."""
    kernel, gpu, staging = golden_state("6.16")
    real = DmaResv.lock_interruptible

    def interrupted_on_gpu(self: DmaResv, ctx: WwAcquireCtx | None = None) -> None:
        if self is gpu.resv:
            raise KernelError(Errno.EINTR, "dma_resv_lock_interruptible", "signal")
        real(self, ctx)

    monkeypatch.setattr(DmaResv, "lock_interruptible", interrupted_on_gpu)
    with pytest.raises(KernelError) as exc:
        render_bufinfo(kernel)
    assert exc.value.errno is Errno.EINTR and exc.value.function == "dma_buf_debug_show"
    assert not gpu.resv.is_locked() and not staging.resv.is_locked()


def test_signal_pending_without_buffers_still_reads() -> None:
    """No buffer, no resv lock to interrupt: the empty table."""
    kernel = Kernel("6.16")
    reader = Task(100, "cat")
    reader.sigpending = True
    kernel.current = reader
    assert render_bufinfo(kernel) == (
        "\nDma-buf Objects:\n" + HEADER + "\nTotal 0 objects, 0 bytes\n"
    )


def test_resv_held_by_another_context_reads_as_eintr() -> None:
    """A resv held elsewhere: the reader would sleep until interrupted, so ``-EINTR`` -- and
    the resv of the buffer already printed is unlocked again."""
    kernel, gpu, staging = golden_state("6.16")
    worker, reader = Task(1, "worker"), Task(2, "cat")
    kernel.current = worker
    gpu.resv.lock()  # gpu is printed second, after staging
    kernel.current = reader
    with pytest.raises(KernelError) as exc:
        render_bufinfo(kernel)
    assert exc.value.errno is Errno.EINTR
    assert not staging.resv.is_locked()
    kernel.current = worker
    assert gpu.resv.held_by_caller()
    gpu.resv.unlock()


def test_resv_held_by_caller_is_read_without_relocking() -> None:
    """A caller holding a resv (a test or simulator step) gets the dump and keeps the lock."""
    kernel, gpu, staging = golden_state("6.16")
    with gpu.resv:
        assert render_bufinfo(kernel) == golden_text("6.16", gpu, staging)
        assert gpu.resv.held_by_caller()
    assert not gpu.resv.is_locked()


# -- round trip ------------------------------------------------------------------------------

_TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.,:", min_size=1, max_size=12)
_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.[]: ", max_size=16)
_NAMES = st.text(
    alphabet=st.characters(categories=("L", "N", "P", "S")) | st.just(" "), max_size=12
).filter(lambda s: s == s.strip() and s != "<none>" and len(s.encode()) < 32)
_DEVICES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789:._- ", min_size=1, max_size=16)


@st.composite
def kernel_states(draw: st.DrawFn) -> Kernel:
    kernel = Kernel(draw(st.sampled_from(ALL)))
    exporter = StaticExporter(kernel)
    for _ in range(draw(st.integers(0, 5))):
        buf = exporter.export(draw(st.integers(1, 1 << 44)), name=draw(_TOKEN))
        if draw(st.booleans()):
            dma_buf_set_name(buf, draw(_NAMES))
        for _ in range(draw(st.integers(0, 3))):
            dma_buf_attach(buf, Device(draw(_DEVICES.filter(lambda s: s.strip() == s))))
        for _ in range(draw(st.integers(0, 3))):
            get_dma_buf(buf)
        specs = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(DmaResvUsage),
                    _TOKEN,
                    _WORDS,
                    st.integers(0, (1 << 64) - 1),
                    st.booleans(),
                ),
                max_size=4,
            )
        )
        made = []
        with buf.resv:
            for usage, driver, timeline, seqno, _ in specs:
                fence = DmaFence(kernel.dma_fence_context_alloc(), seqno, driver, timeline)
                buf.resv.add_fence(fence, usage)
                made.append(fence)
        for fence, spec in zip(made, specs, strict=True):
            if spec[4]:
                fence.signal()
    return kernel


def expected_fences(buf: DmaBuf, fmt: FenceFormat) -> list[tuple[object, ...]]:
    """What each format can show of the model's fences: (label, driver, timeline, seqno,
    signalled, context)."""
    with buf.resv:
        entries = list(buf.resv.iter_fences(DmaResvUsage.READ))
    if fmt is FenceFormat.EXCLUSIVE_SHARED:
        excl = [("Exclusive", f) for f, u in entries if u <= DmaResvUsage.WRITE]
        shared = [("Shared", f) for f, u in entries if u is DmaResvUsage.READ]
        return [
            (lbl, f.timeline.driver_name, f.timeline.timeline_name, None, f.signaled, None)
            for lbl, f in excl + shared
        ]
    labels = {DmaResvUsage.KERNEL: "kernel", DmaResvUsage.WRITE: "write", DmaResvUsage.READ: "read"}
    if fmt is FenceFormat.CONTEXT_FIRST:
        return [
            (
                labels[u],
                "" if f.signaled else f.timeline.driver_name,
                "" if f.signaled else f.timeline.timeline_name,
                f.seqno,
                f.signaled,
                f.context,
            )
            for f, u in entries
        ]
    return [
        (labels[u], f.timeline.driver_name, f.timeline.timeline_name, f.seqno, f.signaled, None)
        for f, u in entries
    ]


def as_tuple(fence: BufinfoFence) -> tuple[object, ...]:
    return (fence.usage, fence.driver, fence.timeline, fence.seqno, fence.signalled, fence.context)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernel_states())
def test_k67_round_trip_reproduces_model_state(kernel: Kernel) -> None:
    """K-67/K-68/K-94: ``parse_bufinfo(render_bufinfo(k))`` gives back every live buffer,
    newest first, with its raw refcount, name, visible fences and attachments."""
    fmt = kernel.profile.bufinfo_fence_format
    name_column = bufinfo_has_name_column(kernel.profile)
    dump = parse_bufinfo(render_bufinfo(kernel), fence_format=fmt)
    bufs = list(kernel.dma_bufs())
    assert dump.consistent
    assert dump.total_objects == len(bufs) == len(dump.objects)
    assert dump.total_bytes == sum(b.size for b in bufs)
    assert dump.name_column is name_column
    for rec, buf in zip(dump.objects, bufs, strict=True):
        assert (rec.size, rec.flags, rec.mode, rec.count, rec.exp_name, rec.ino) == (
            buf.size,
            buf.file.f_flags,
            buf.file.f_mode,
            buf.refcount,
            buf.exp_name,
            buf.ino,
        )
        assert rec.name == (buf.name if name_column else buf.name or None)
        assert rec.attached_devices == [a.dev.name for a in buf.attachments]
        assert rec.declared_devices == len(buf.attachments)
        assert [as_tuple(f) for f in rec.fences] == expected_fences(buf, fmt)
        assert all(f.format is fmt for f in rec.fences)


# -- real-world dumps ------------------------------------------------------------------------


def test_real_amdgpu_5_14_dump_tabs_expanded() -> None:
    """Real v5.14.14 amdgpu dump: header without ``name``, empty name fields, 5.16-era
    ``Shared fence: <driver> <timeline> signalled`` lines without seqno, prompt line ignored."""
    dump = parse_bufinfo_file(DATA / "amdgpu-5.14-bugzilla-214621.txt")
    assert dump.columns == ("size", "flags", "mode", "count", "exp_name", "ino")
    assert dump.consistent
    assert (dump.total_objects, dump.total_bytes) == (9, 38608896)
    first = dump.objects[0]
    assert first == BufinfoRecord(
        size=3047424,
        flags=0o2,
        mode=0x80007,
        count=3,
        exp_name="drm",
        ino=415409,
        name=None,
        fences=[
            BufinfoFence(
                usage="Shared",
                description="drm_sched gfx signalled",
                driver="drm_sched",
                timeline="gfx",
                seqno=None,
                signalled=True,
                format=FenceFormat.EXCLUSIVE_SHARED,
            )
        ],
        attached_devices=[],
        declared_devices=0,
        line=5,
    )
    assert [len(r.fences) for r in dump.objects] == [1, 1, 0, 1, 1, 1, 0, 0, 1]
    assert [r.count for r in dump.objects][-2:] == [4, 2]


def test_real_asahi_excerpt_name_column_write_fences() -> None:
    """Real 6.x Asahi excerpt: ``<none>``, ``write fence:`` without a space after the colon,
    seqnos, devices, buffers without attachments."""
    dump = parse_bufinfo_file(DATA / "asahi-6.x-issue-126-excerpt.txt")
    assert dump.name_column and dump.consistent
    assert [r.ino for r in dump.objects] == [125955, 125953, 125950, 125948]
    assert all(r.name is None and r.exp_name == "drm" and r.mode == 0x80005 for r in dump.objects)
    rec = dump.objects[0]
    assert rec.attached_devices == ["soc:display-subsystem"]
    assert [(f.usage, f.driver, f.timeline, f.seqno, f.signalled) for f in rec.fences] == [
        ("write", "drm_sched", "asahi_sched", 5809165, True),
        ("write", "drm_sched", "asahi_sched", 5808999, True),
    ]
    assert dump.objects[3].attached_devices == [] and dump.objects[3].declared_devices == 0


def test_p2p_dump_with_crlf_trailing_whitespace_and_names_with_spaces() -> None:
    dump = parse_bufinfo_file(DATA / "p2p-classic-crlf.txt")
    assert dump.consistent and (dump.total_objects, dump.total_bytes) == (4, 271585280)
    assert [r.exp_name for r in dump.objects] == ["system", "drm", "drm", "udmabuf"]
    assert [r.name for r in dump.objects] == [None, "rdma pool 0", "ring buffer", None]
    pool = dump.objects[1]
    assert pool.size == 256 * MiB and pool.count == 3
    assert pool.attached_devices == ["0000:41:00.0", "0000:03:00.0"]
    assert [(f.usage, f.driver, f.timeline, f.seqno, f.signalled) for f in pool.fences] == [
        ("kernel", "amdgpu", "sdma0", 1207, True),
        ("read", "drm_sched", "gfx_0.0.0", 88412, False),
    ]


def test_k94_context_first_dump() -> None:
    """K-94 (v6.19+/7.1): ``<context>:<seqno> <timeline> <driver>``, empty once signalled."""
    dump = parse_bufinfo_file(DATA / "context-first-6.19.txt")
    assert dump.consistent
    kernel_fence, write_fence, _ = dump.objects[0].fences
    assert (kernel_fence.context, kernel_fence.seqno, kernel_fence.driver) == (1523, 77, "")
    assert kernel_fence.signalled and kernel_fence.timeline == ""
    assert (write_fence.context, write_fence.seqno) == (1601, 4521)
    assert (write_fence.timeline, write_fence.driver) == ("gfx_0.0.0", "drm_sched")
    assert not write_fence.signalled and write_fence.format is FenceFormat.CONTEXT_FIRST
    assert dump.objects[1].exp_name == "i915" and dump.objects[1].name == "cursor"


def test_android_dma_heap_dump_pre_6_0() -> None:
    """Before v6.0 an unset name is an empty field (trailing tab); dma-heap exporter names."""
    dump = parse_bufinfo_file(DATA / "android-5.10-dma-heaps.txt")
    assert not dump.name_column and dump.consistent
    assert [r.exp_name for r in dump.objects] == ["qcom,system", "system", "qcom,system"]
    assert [r.name for r in dump.objects] == ["FramebufferSurface", None, "SurfaceView camera"]
    cam = dump.objects[2]
    assert [(f.usage, f.timeline, f.signalled) for f in cam.fences] == [
        ("Exclusive", "kgsl-3d0 ctx 12", True),
        ("Shared", "kgsl-3d0 ctx 14", False),
    ]


@pytest.mark.parametrize(
    ("text", "check"),
    [
        pytest.param(
            # v5.17/5.18: Exclusive/Shared labels with dma_fence_describe's seqno layout
            "\nDma-buf Objects:\n" + HEADER_PRE_6_0 + "00004096\t00000002\t00080007\t00000001"
            "\tdrm\t00000003\t\n\tExclusive fence:drm_sched gfx seq 12 signalled\n"
            "\tAttached Devices:\nTotal 0 devices attached\n\n\nTotal 1 objects, 4096 bytes\n",
            ("Exclusive", "drm_sched", "gfx", 12, FenceFormat.CLASSIC),
            id="5.17",
        ),
        pytest.param(
            # v5.19: usage labels, still no name column
            "\nDma-buf Objects:\n" + HEADER_PRE_6_0 + "00004096\t00000002\t00080007\t00000001"
            "\tdrm\t00000003\t\n\tkernel fence:amdgpu sdma0 seq 9 unsignalled\n"
            "\tAttached Devices:\nTotal 0 devices attached\n\n\nTotal 1 objects, 4096 bytes\n",
            ("kernel", "amdgpu", "sdma0", 9, FenceFormat.CLASSIC),
            id="5.19",
        ),
    ],
)
def test_kernel_variations_between_presets(text: str, check: tuple[object, ...]) -> None:
    (rec,) = parse_bufinfo(text).objects
    (fence,) = rec.fences
    assert (fence.usage, fence.driver, fence.timeline, fence.seqno, fence.format) == check
    assert rec.name is None


def test_pre_5_3_dump_without_ino_column() -> None:
    """Before v5.3 there was neither ``ino`` nor ``name``."""
    text = (
        "\nDma-buf Objects:\nsize\tflags\tmode\tcount\texp_name\n"
        "00004096\t00000002\t00000003\t00000001\tion\n\tAttached Devices:\n\tmdss_mdp\n"
        "Total 1 devices attached\n\n\nTotal 1 objects, 4096 bytes\n"
    )
    dump = parse_bufinfo(text)
    (rec,) = dump.objects
    assert (rec.ino, rec.name, rec.exp_name, rec.attached_devices) == (
        None,
        None,
        "ion",
        ["mdss_mdp"],
    )
    assert dump.columns == ("size", "flags", "mode", "count", "exp_name")


def test_fence_format_hint_resolves_ambiguity() -> None:
    """A (contrived) classic line whose driver looks like ``<context>:<seqno>`` reads as the
    v6.19 layout unless the caller names the format."""
    text = (
        "\nDma-buf Objects:\n" + HEADER + "00004096\t00000002\t00080007\t00000001\tdrm\t00000003"
        "\t<none>\n\twrite fence:12:7 tl seq 3 unsignalled\n\tAttached Devices:\n"
        "Total 0 devices attached\n\n\nTotal 1 objects, 4096 bytes\n"
    )
    (auto,) = parse_bufinfo(text).objects[0].fences
    assert auto.format is FenceFormat.CONTEXT_FIRST
    (hinted,) = parse_bufinfo(text, fence_format=FenceFormat.CLASSIC).objects[0].fences
    assert (hinted.driver, hinted.timeline, hinted.seqno) == ("12:7", "tl", 3)


def test_inconsistent_dump_is_reported_not_rejected() -> None:
    """Totals that disagree with the records (an edited or truncated dump) parse, and
    :attr:`BufinfoDump.consistent` says so."""
    kernel, _, _ = golden_state("6.16")
    text = render_bufinfo(kernel)
    edited = text.replace("Total 2 objects, 16781312 bytes", "Total 3 objects, 99 bytes")
    edited = edited.replace("Total 2 devices attached", "Total 5 devices attached")
    dump = parse_bufinfo(edited)
    assert not dump.consistent
    problems = dump.problems()
    assert len(problems) == 3
    assert "3 objects" in problems[0] and "99 bytes" in problems[1] and "declares 5" in problems[2]
    assert isinstance(dump, BufinfoDump) and parse_bufinfo(text).consistent


# -- malformed input -------------------------------------------------------------------------

GOOD_HEAD = "\nDma-buf Objects:\n" + HEADER
GOOD_OBJ = "00004096\t00000002\t00080007\t00000001\tdrm\t00000003\t<none>\n"


@pytest.mark.parametrize(
    ("text", "line", "expected", "found"),
    [
        ("", 1, "the title 'Dma-buf Objects:'", "end of input"),
        ("hello\n", 1, "the title", "'hello'"),
        ("\nDma-buf Objects:\nsize flags\n", 3, "column header", "'size flags'"),
        ("\nDma-buf Objects:\n", 3, "column header", "end of input"),
        (GOOD_HEAD + "oops\n", 4, "a buffer line", "'oops'"),
        (GOOD_HEAD + GOOD_OBJ.replace("00000002", "0000000g", 1), 4, "buffer line", "0000000g"),
        (GOOD_HEAD + "9" * 5000 + "\t1\t1\t1\tx\t1\tn\n", 4, "a buffer line", "..."),
        (GOOD_HEAD + GOOD_OBJ.replace("00004096", "0000409\u0663"), 4, "buffer line", "409"),
        (GOOD_HEAD + GOOD_OBJ, 5, "a fence line", "end of input"),
        (GOOD_HEAD + GOOD_OBJ + "\twrite fence:nonsense\n", 5, "a fence description", "nonsense"),
        (GOOD_HEAD + GOOD_OBJ + "\n\tAttached Devices:\n", 5, "a fence line", "blank line"),
        (GOOD_HEAD + GOOD_OBJ + "\tAttached Devices:\n", 6, "'Total <n> devices", "end of input"),
        (
            GOOD_HEAD + GOOD_OBJ + "\tAttached Devices:\nTotal 0 devices attached\n",
            7,
            "the trailer 'Total <n> objects, <bytes> bytes'",
            "end of input",
        ),
        (
            GOOD_HEAD + GOOD_OBJ + "\tAttached Devices:\nTotal 0 devices attached\n\n"
            "Total 1 objects, 4096 bytes\n\nDma-buf Objects:\n",
            10,
            "nothing after the trailer",
            "'Dma-buf Objects:'",
        ),
    ],
)
def test_malformed_input_names_line_expected_and_found(
    text: str, line: int, expected: str, found: str
) -> None:
    with pytest.raises(BufinfoParseError) as exc:
        parse_bufinfo(text)
    err = exc.value
    assert err.line == line
    assert str(err).startswith(f"line {line}: expected ")
    assert expected in err.expected and found in err.found
    assert isinstance(err, ValueError)


def test_fence_format_hint_rejects_other_layouts() -> None:
    text = (
        GOOD_HEAD + GOOD_OBJ + "\twrite fence:amdgpu gfx seq 3 signalled\n\tAttached Devices:\n"
        "Total 0 devices attached\n\nTotal 1 objects, 4096 bytes\n"
    )
    with pytest.raises(
        BufinfoParseError, match=r"^line 5: expected a fence description '<context>"
    ):
        parse_bufinfo(text, fence_format=FenceFormat.CONTEXT_FIRST)


def test_parse_file_error_names_the_path(tmp_path: Path) -> None:
    bad = tmp_path / "bufinfo"
    bad.write_bytes(b"\nDma-buf Objects:\r\nsize\tflags\r\n")
    with pytest.raises(BufinfoParseError) as exc:
        parse_bufinfo_file(bad)
    assert str(exc.value).startswith(f"{bad}, line 3: expected the column header")
    assert exc.value.path == str(bad)


def test_parse_file_keeps_non_utf8_name_bytes(tmp_path: Path) -> None:
    path = tmp_path / "bufinfo"
    path.write_bytes(
        (GOOD_HEAD + GOOD_OBJ.replace("<none>", "cam\xff")).encode("latin-1")
        + b"\tAttached Devices:\nTotal 0 devices attached\n\nTotal 1 objects, 4096 bytes\n"
    )
    (rec,) = parse_bufinfo_file(path).objects
    assert rec.name == "cam\\xff"


_LINE_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["delete", "duplicate", "replace", "insert"]),
        st.integers(0, 40),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=30),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(profile=st.sampled_from(ALL), edits=_LINE_EDITS)
def test_mutated_dumps_fail_only_with_bufinfo_parse_error(
    profile: str, edits: list[tuple[str, int, str]]
) -> None:
    """Whatever is done to a dump's lines, the parser either reads it or raises
    :class:`BufinfoParseError` naming a line -- never an IndexError or the like."""
    kernel, _, _ = golden_state(profile)
    lines = render_bufinfo(kernel).split("\n")
    for op, index, text in edits:
        i = index % len(lines)
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "replace":
            lines[i] = text
        else:
            lines.insert(i, text)
        if not lines:
            lines = [""]
    text = "\n".join(lines)
    try:
        parse_bufinfo(text)
    except BufinfoParseError as e:
        assert re.match(r"^line \d+: expected .+, found .+", str(e), re.S)
        # an edit's text may itself hold newlines: count the lines the parser was given
        assert 1 <= e.line <= len(text.split("\n")) + 1


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_fails_only_with_bufinfo_parse_error(text: str) -> None:
    try:
        parse_bufinfo(text)
    except BufinfoParseError as e:
        assert e.line >= 1


def test_profile_switch_for_name_column() -> None:
    assert not bufinfo_has_name_column(get_profile("5.16"))
    assert all(bufinfo_has_name_column(get_profile(p)) for p in ALL[1:])
