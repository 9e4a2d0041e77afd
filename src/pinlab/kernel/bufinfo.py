"""debugfs ``dma_buf/bufinfo``: print the model's buffers as the kernel does, and read dumps back.

``kernel-semantics.md`` §4.1/§4.2; checklist items K-67 (layout), K-68 (``count`` is the raw file
refcount) and K-94 (fence line format per release).

:func:`render_bufinfo` reproduces ``dma_buf_debug_show`` (drivers/dma-buf/dma-buf.c) byte for
byte, with the fence lines of ``dma_resv_describe`` (drivers/dma-buf/dma-resv.c) and
``dma_fence_describe`` (drivers/dma-buf/dma-fence.c). :func:`parse_bufinfo` reads such text
back -- from the model or from a real machine -- into :class:`BufinfoDump` records.

Formats, checked against the kernel sources and the patches that changed them:

* **Table** (every release modelled): title ``\\nDma-buf Objects:\\n``; header
  ``%-8s\\t%-8s\\t%-8s\\t%-8s\\texp_name\\t%-8s`` of size/flags/mode/count/ino; one line
  ``%08zu\\t%08x\\t%08x\\t%08ld\\t%s\\t%08lu\\t%s\\n`` per buffer (size, ``file->f_flags``,
  ``file->f_mode``, ``file_count(file)`` -- not reduced by one, K-68 --, exp_name, inode number,
  name); the fence lines; ``\\tAttached Devices:\\n``; ``\\t%s\\n`` per attachment in list order
  (newest first); ``Total %d devices attached\\n\\n``; finally ``\\nTotal %d objects, %zu
  bytes\\n``. Buffers come in ``db_list`` order, newest first.
* **Name column**: "dma-buf: add the name field to the table header" (commit 6c01aa13894f,
  merged for v6.0) appended ``\\tname`` to the header and changed an unset name from ``""`` to
  ``"<none>"``. Before it (preset 5.16, and 5.19) the header ends after ``ino`` and an unnamed
  buffer's line ends in a bare tab. The profile has no switch for this, so it is keyed on
  :data:`BUFINFO_NAME_COLUMN_SINCE`.
* **Fence lines**, :class:`~pinlab.kernel.profile.FenceFormat` (K-94):

  - ``EXCLUSIVE_SHARED`` (preset 5.16): ``dma_buf_debug_show`` printed the fences itself,
    ``\\t%s fence: %s %s %ssignalled\\n`` with ``Exclusive``/``Shared``, driver name, timeline
    name -- a space after the colon and **no sequence number**. ``dma_resv_describe`` and
    ``dma_fence_describe`` only arrived in v5.17. The pre-5.19 resv held one exclusive fence
    and a shared list; the model's usages map onto them as KERNEL/WRITE -> Exclusive (TTM's
    move fences and writers were the exclusive fence) and READ -> Shared, exclusive first, as
    the 5.16 iterator walked them. BOOKKEEP has no 5.16 counterpart and is not printed. Should
    the model hold several KERNEL/WRITE fences (a real 5.16 resv kept only the newest), each is
    printed as an ``Exclusive`` line.
  - ``CLASSIC`` (v5.19 .. v6.18; presets 6.12/6.14/6.16): ``dma_resv_describe`` walks the resv
    with usage READ (so BOOKKEEP never appears) and prints ``\\t%s fence:`` with ``kernel``,
    ``write`` or ``read`` -- **no space after the colon** -- then ``dma_fence_describe`` prints
    ``%s %s seq %llu %ssignalled\\n`` (driver, timeline, seqno). (v6.17/6.18 print the
    placeholders ``detached-driver``/``signaled-timeline`` for signalled fences; the presets
    do not cover those releases.)
  - ``CONTEXT_FIRST`` (preset 7.1): "dma-buf: cleanup dma_fence_describe v3" (commit
    ac364014fd81, merged for v6.19) prints ``%llu:%llu %s %s %ssignalled\\n`` -- context and
    seqno joined by a colon, then **timeline, then driver**, both empty once the fence has
    signalled (so a signalled fence reads ``7:3   signalled``). The ``%llu %s %s seq %llu``
    layout of §4.2 (and of :meth:`DmaFence.describe`) is that patch's v2, which was not merged;
    :func:`dma_fence_describe` here follows the merged v3.

* **Escaping**: none. Names, exporter and device names go through ``%s`` unchanged, so a name
  containing a tab or newline corrupts the table in the kernel too; :func:`render_bufinfo`
  reproduces that and :func:`parse_bufinfo` cannot recover such names.

Locking: ``dma_buf_debug_show`` takes ``db_list.lock`` and each buffer's resv with the
interruptible variants and returns the error (``-EINTR``) as the ``read(2)`` result, with no
partial output, if one fails. :func:`render_bufinfo` takes each resv through
:meth:`DmaResv.lock_interruptible` and raises :class:`~pinlab.kernel.errno.KernelError` with
``-EINTR`` likewise. A resv held by another context would make the real reader sleep until the
holder unlocks; in the synchronous model nothing can unlock it meanwhile, so the only way such
a read ends is the reader being interrupted: ``-EINTR`` again (never a
:class:`~pinlab.kernel.errno.LockingError`). A resv the caller already holds is read without
locking it again (a model convenience: a real reader is a fresh syscall that holds no resv).
``db_list.lock`` has no model counterpart.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING

from pinlab.kernel.errno import Errno, KernelError, err
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.profile import FenceFormat, KernelProfile
from pinlab.kernel.resv import DmaResv, DmaResvUsage
from pinlab.tomlfile import read_user_file

if TYPE_CHECKING:
    from pinlab.kernel.dma_buf import DmaBuf
    from pinlab.kernel.kernel import Kernel

__all__ = [
    "BUFINFO_NAME_COLUMN_SINCE",
    "BufinfoDump",
    "BufinfoFence",
    "BufinfoParseError",
    "BufinfoRecord",
    "bufinfo_has_name_column",
    "dma_fence_describe",
    "dma_resv_describe",
    "parse_bufinfo",
    "parse_bufinfo_file",
    "render_bufinfo",
]

BUFINFO_NAME_COLUMN_SINCE = (6, 0)
"""First release whose header has the ``name`` column and prints ``<none>`` (commit
6c01aa13894f, drm-misc-next for 5.20, released as v6.0)."""

TITLE = "\nDma-buf Objects:\n"
NO_NAME = "<none>"
ATTACHED_DEVICES = "Attached Devices:"

_USAGE_LABELS: dict[DmaResvUsage, str] = {
    DmaResvUsage.KERNEL: "kernel",
    DmaResvUsage.WRITE: "write",
    DmaResvUsage.READ: "read",
    DmaResvUsage.BOOKKEEP: "bookkeep",  # in the kernel's table, unreachable with usage READ
}
_U32 = 0xFFFF_FFFF
_U64 = 0xFFFF_FFFF_FFFF_FFFF


# -- rendering -------------------------------------------------------------------------------


def bufinfo_has_name_column(profile: KernelProfile) -> bool:
    """Whether ``profile``'s bufinfo header ends in ``name`` and unset names print ``<none>``."""
    return profile.version >= BUFINFO_NAME_COLUMN_SINCE


def dma_fence_describe(fence: DmaFence, fmt: FenceFormat) -> str:
    """The text ``dma_fence_describe`` prints for ``fence``, without the newline (K-94).

    ``CLASSIC``: ``<driver> <timeline> seq <seqno> <un>signalled``. ``CONTEXT_FIRST`` (v6.19+,
    the merged v3 of the cleanup): ``<context>:<seqno> <timeline> <driver> <un>signalled`` with
    timeline and driver empty once signalled. ``EXCLUSIVE_SHARED``: what 5.16's
    ``dma_buf_debug_show`` printed after the label, ``<driver> <timeline> <un>signalled``.
    """
    return fence.describe(fmt)


def dma_resv_describe(resv: DmaResv, fmt: FenceFormat) -> str:
    """The fence lines bufinfo prints for ``resv`` (``dma_resv_describe``; K-67, K-94).

    The caller holds the resv (``dma_resv_for_each_fence`` asserts it). Usages up to READ are
    listed in the resv's order; BOOKKEEP fences never appear. ``EXCLUSIVE_SHARED`` prints the
    5.16 lines instead: KERNEL/WRITE fences as ``Exclusive``, then READ fences as ``Shared``.
    """
    resv.assert_held("dma_resv_describe")
    entries = list(resv.iter_fences(DmaResvUsage.READ))
    if fmt is FenceFormat.EXCLUSIVE_SHARED:
        exclusive = [f for f, usage in entries if usage <= DmaResvUsage.WRITE]
        shared = [f for f, usage in entries if usage is DmaResvUsage.READ]
        return "".join(
            [f"\tExclusive fence: {dma_fence_describe(f, fmt)}\n" for f in exclusive]
            + [f"\tShared fence: {dma_fence_describe(f, fmt)}\n" for f in shared]
        )
    return "".join(
        f"\t{_USAGE_LABELS[usage]} fence:{dma_fence_describe(f, fmt)}\n" for f, usage in entries
    )


def _lock_for_show(resv: DmaResv) -> bool:
    """``dma_resv_lock_interruptible(buf_obj->resv, NULL)`` as the debugfs reader; True when
    this call took the lock (and must drop it)."""
    if resv.held_by_caller():
        return False
    if resv.is_locked():
        raise err(
            Errno.EINTR,
            "dma_buf_debug_show",
            f"{resv!r} is held by another context: the reader sleeps in "
            "dma_resv_lock_interruptible until a signal interrupts it",
        )
    try:
        resv.lock_interruptible()
    except KernelError as e:
        raise err(e.errno, "dma_buf_debug_show", f"locking {resv!r}: {e}") from e
    return True


def _buffer_block(dmabuf: DmaBuf, fmt: FenceFormat, name_column: bool) -> str:
    unset = NO_NAME if name_column else ""  # `buf_obj->name ?: "<none>"` (before v6.0: "")
    name = dmabuf.name if dmabuf.name is not None else unset
    file = dmabuf.file
    devices = [attach.dev.name for attach in dmabuf.attachments]
    return "".join(
        [
            f"{dmabuf.size & _U64:08d}\t{file.f_flags & _U32:08x}\t{file.f_mode & _U32:08x}\t"
            f"{dmabuf.refcount:08d}\t{dmabuf.exp_name}\t{dmabuf.ino & _U64:08d}\t{name}\n",
            dma_resv_describe(dmabuf.resv, fmt),
            f"\t{ATTACHED_DEVICES}\n",
            *(f"\t{dev}\n" for dev in devices),
        ]
    )


def render_bufinfo(kernel: Kernel) -> str:
    """The text of ``/sys/kernel/debug/dma_buf/bufinfo`` for the model's live buffers.

    ``dma_buf_debug_show`` (K-67): buffers newest first, ``count`` the raw file refcount
    (K-68), fence lines in the profile's format (K-94), attachments newest first. Each
    buffer's resv is taken with ``dma_resv_lock_interruptible`` unless the caller holds it.

    Raises:
        KernelError: ``-EINTR`` when a resv lock is interrupted (a signal is pending) or held
            by another context (the reader would sleep until interrupted). The kernel's
            ``read(2)`` fails the same way and returns no partial text.
    """
    profile = kernel.profile
    fmt = profile.bufinfo_fence_format
    name_column = bufinfo_has_name_column(profile)
    header = "size    \tflags   \tmode    \tcount   \texp_name\tino     "
    out = [TITLE, header + ("\tname\n" if name_column else "\n")]
    count = 0
    total = 0
    for dmabuf in kernel.dma_bufs():
        resv = dmabuf.resv
        took = _lock_for_show(resv)
        try:
            out.append(_buffer_block(dmabuf, fmt, name_column))
        finally:
            if took:
                resv.unlock()
        out.append(f"Total {len(dmabuf.attachments)} devices attached\n\n")
        count += 1
        total += dmabuf.size
    out.append(f"\nTotal {count} objects, {total & _U64} bytes\n")
    return "".join(out)


# -- parsed records --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BufinfoFence:
    """One fence line of a bufinfo dump.

    ``usage`` is the label as printed: ``kernel``/``write``/``read`` (v5.19+) or
    ``Exclusive``/``Shared`` (up to v5.18). ``description`` is the text after ``fence:``.
    ``seqno`` is None in the up-to-5.16 format, which does not print it; ``context`` is only
    printed from v6.19 on. A signalled fence in that format shows empty driver and timeline.
    ``format`` is the description layout recognised.
    """

    usage: str
    description: str
    driver: str
    timeline: str
    seqno: int | None
    signalled: bool
    context: int | None = None
    format: FenceFormat = FenceFormat.CLASSIC


@dataclass(slots=True)
class BufinfoRecord:
    """One buffer of a bufinfo dump (the ``%08zu\\t%08x...`` line and what follows it).

    ``count`` is the raw file refcount (K-68). ``ino`` is None for dumps older than v5.3
    (no inode column). ``name`` is None for an unset name (``<none>``, or an empty field in
    dumps without the name column). ``declared_devices`` is the N of ``Total N devices
    attached``; ``line`` the 1-based line number of the buffer line.
    """

    size: int
    flags: int
    mode: int
    count: int
    exp_name: str
    ino: int | None
    name: str | None
    fences: list[BufinfoFence] = field(default_factory=list)
    attached_devices: list[str] = field(default_factory=list)
    declared_devices: int = 0
    line: int = 0

    @property
    def consistent(self) -> bool:
        """Whether the declared device count matches the device lines."""
        return self.declared_devices == len(self.attached_devices)


@dataclass(slots=True)
class BufinfoDump:
    """A parsed bufinfo file: the buffers in file order plus the trailer's totals.

    ``columns`` is the header as printed (``size flags mode count exp_name ino name`` since
    v6.0; without ``name`` before; without ``ino`` before v5.3).
    """

    objects: list[BufinfoRecord]
    total_objects: int
    total_bytes: int
    columns: tuple[str, ...] = ("size", "flags", "mode", "count", "exp_name", "ino", "name")

    @property
    def name_column(self) -> bool:
        """Whether the header has the ``name`` column (v6.0+)."""
        return "name" in self.columns

    def problems(self) -> list[str]:
        """Each way the dump disagrees with itself (empty when :attr:`consistent`)."""
        found: list[str] = []
        if self.total_objects != len(self.objects):
            found.append(
                f"trailer says {self.total_objects} objects, the dump lists {len(self.objects)}"
            )
        size = sum(rec.size for rec in self.objects)
        if self.total_bytes != size:
            found.append(f"trailer says {self.total_bytes} bytes, the buffers add up to {size}")
        for rec in self.objects:
            if not rec.consistent:
                found.append(
                    f"buffer at line {rec.line} declares {rec.declared_devices} devices "
                    f"but lists {len(rec.attached_devices)}"
                )
        return found

    @property
    def consistent(self) -> bool:
        """Whether the trailer's totals and every device count match the records."""
        return not self.problems()


class BufinfoParseError(ValueError):
    """Malformed bufinfo text: names the line, what was expected there and what was found."""

    def __init__(self, line: int, expected: str, found: str, path: str | None = None) -> None:
        self.line = line
        self.expected = expected
        self.found = found
        self.path = path
        where = f"{path}, line {line}" if path is not None else f"line {line}"
        super().__init__(f"{where}: expected {expected}, found {found}")

    def with_path(self, path: str) -> BufinfoParseError:
        """The same error, naming the file it came from."""
        return BufinfoParseError(self.line, self.expected, self.found, path)


# -- parsing ---------------------------------------------------------------------------------

_DEC = r"[0-9]{1,20}"  # ASCII only: \d would take other scripts' digits
_HEX = r"[0-9a-fA-F]{1,16}"
_OBJ_WS = re.compile(
    rf"^(?P<size>{_DEC})\s+(?P<flags>{_HEX})\s+(?P<mode>{_HEX})\s+(?P<count>-?{_DEC})"
    rf"\s+(?P<exp>\S+)(?:\s+(?P<ino>{_DEC})(?:\s+(?P<name>.*))?)?$"
)
_DEC_FULL = re.compile(rf"^{_DEC}$")
_SDEC_FULL = re.compile(rf"^-?{_DEC}$")
_HEX_FULL = re.compile(rf"^{_HEX}$")
_FENCE = re.compile(r"^(?P<label>[A-Za-z_]+) fence:(?P<rest>.*)$")
_DESC: dict[FenceFormat, re.Pattern[str]] = {
    FenceFormat.CONTEXT_FIRST: re.compile(
        rf"^(?P<ctx>{_DEC}):(?P<seq>{_DEC}) (?P<timeline>.*) (?P<driver>\S*) "
        r"(?P<un>un)?signalled$"
    ),
    FenceFormat.CLASSIC: re.compile(
        rf"^(?P<driver>\S*) (?P<timeline>.*) seq (?P<seq>{_DEC}) (?P<un>un)?signalled$"
    ),
    FenceFormat.EXCLUSIVE_SHARED: re.compile(
        r"^ ?(?P<driver>\S*) (?P<timeline>.*) (?P<un>un)?signalled$"
    ),
}
_AUTO_ORDER = (FenceFormat.CONTEXT_FIRST, FenceFormat.CLASSIC, FenceFormat.EXCLUSIVE_SHARED)
# Only the up-to-5.16 lines have a space after "fence:" (the later ones start with the driver
# name or the context), so such a description is tried as that layout first.
_AUTO_ORDER_SPACED = (FenceFormat.EXCLUSIVE_SHARED, FenceFormat.CLASSIC, FenceFormat.CONTEXT_FIRST)
_DEVICES_TOTAL = re.compile(rf"^Total (?P<n>-?{_DEC}) devices attached$")
_TRAILER = re.compile(rf"^Total (?P<n>-?{_DEC}) objects, (?P<bytes>{_DEC}) bytes$")
_HEADERS: tuple[tuple[str, ...], ...] = (
    ("size", "flags", "mode", "count", "exp_name", "ino", "name"),
    ("size", "flags", "mode", "count", "exp_name", "ino"),
    ("size", "flags", "mode", "count", "exp_name"),
)
_OBJECT_LINE = "a buffer line ('<size> <flags> <mode> <count> <exp_name> <ino> <name>')"
_TRAILER_TEXT = "the trailer 'Total <n> objects, <bytes> bytes'"
_FENCE_TEXT = {
    FenceFormat.CONTEXT_FIRST: "'<context>:<seqno> <timeline> <driver> [un]signalled'",
    FenceFormat.CLASSIC: "'<driver> <timeline> seq <seqno> [un]signalled'",
    FenceFormat.EXCLUSIVE_SHARED: "'<driver> <timeline> [un]signalled'",
}


def _show(line: str | None) -> str:
    if line is None:
        return "end of input"
    text = line if len(line) <= 80 else line[:77] + "..."
    return repr(text) if text.strip() else f"blank line {text!r}"


class _Lines:
    """A cursor over the input's lines (CRLF tolerated), 1-based line numbers."""

    __slots__ = ("index", "lines")

    def __init__(self, text: str) -> None:
        self.lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
        if self.lines and self.lines[-1] == "":
            self.lines.pop()  # the final newline ends the last line
        self.index = 0

    def peek(self) -> str | None:
        return self.lines[self.index] if self.index < len(self.lines) else None

    def take(self) -> str | None:
        line = self.peek()
        if line is not None:
            self.index += 1
        return line

    @property
    def lineno(self) -> int:
        """The number of the line :meth:`peek` returns."""
        return self.index + 1

    def skip_blank(self) -> None:
        while (line := self.peek()) is not None and not line.strip():
            self.index += 1

    def fail(self, expected: str) -> BufinfoParseError:
        return BufinfoParseError(self.lineno, expected, _show(self.peek()))


def _parse_object(line: str, name_column: bool) -> BufinfoRecord | None:
    """A buffer line, tab-separated as printed or with the tabs expanded to spaces."""
    parts = line.split("\t", 6)
    fields: list[str | None]
    if (
        len(parts) >= 5
        and _DEC_FULL.match(parts[0].strip())
        and _HEX_FULL.match(parts[1].strip())
        and _HEX_FULL.match(parts[2].strip())
        and _SDEC_FULL.match(parts[3].strip())
        and (len(parts) == 5 or _DEC_FULL.match(parts[5].strip()))
    ):
        fields = [p.strip() for p in parts[:5]]
        fields.append(parts[5].strip() if len(parts) > 5 else None)
        fields.append(parts[6].rstrip() if len(parts) > 6 else None)
    else:
        m = _OBJ_WS.match(line.strip())
        if m is None:
            return None
        fields = [m["size"], m["flags"], m["mode"], m["count"], m["exp"], m["ino"]]
        fields.append(m["name"].rstrip() if m["name"] is not None else None)
    size, flags, mode, count, exp_name, ino, raw_name = fields
    assert size is not None and flags is not None and mode is not None and count is not None
    name: str | None
    if raw_name is None or (raw_name == NO_NAME and name_column):
        name = None
    elif not raw_name and not name_column:
        name = None  # before v6.0 an unset name printed as ""
    else:
        name = raw_name
    return BufinfoRecord(
        size=int(size),
        flags=int(flags, 16),
        mode=int(mode, 16),
        count=int(count),
        exp_name=exp_name or "",
        ino=int(ino) if ino is not None else None,
        name=name,
    )


def _parse_fence(label: str, rest: str, fmts: tuple[FenceFormat, ...]) -> BufinfoFence | None:
    """The fence description after ``<label> fence:`` in the first layout of ``fmts`` that
    matches, or None."""
    desc = rest.rstrip()
    for fmt in fmts:
        m = _DESC[fmt].match(desc)
        if m is None:
            continue
        seq = m.groupdict().get("seq")
        ctx = m.groupdict().get("ctx")
        return BufinfoFence(
            usage=label,
            description=desc.strip(),
            driver=m["driver"],
            timeline=m["timeline"],
            seqno=int(seq) if seq is not None else None,
            signalled=m["un"] is None,
            context=int(ctx) if ctx is not None else None,
            format=fmt,
        )
    return None


def _parse_block(cur: _Lines, record: BufinfoRecord, fmts: tuple[FenceFormat, ...]) -> None:
    # fence lines, then "\tAttached Devices:"
    while True:
        line = cur.peek()
        text = line.strip() if line is not None else ""
        if line is not None and text == ATTACHED_DEVICES:
            cur.take()
            break
        m = _FENCE.match(text) if line is not None else None
        if m is None:
            raise cur.fail("a fence line ('<usage> fence:<description>') or '\\tAttached Devices:'")
        rest = m["rest"]
        order = _AUTO_ORDER_SPACED if fmts is _AUTO_ORDER and rest[:1] == " " else fmts
        fence = _parse_fence(m["label"], rest, order)
        if fence is None:
            layouts = " or ".join(_FENCE_TEXT[f] for f in order)
            raise cur.fail(f"a fence description {layouts} after '{m['label']} fence:'")
        record.fences.append(fence)
        cur.take()
    # device lines, then "Total N devices attached"
    while True:
        line = cur.peek()
        if line is None:
            raise cur.fail("a device line or 'Total <n> devices attached'")
        text = line.strip()
        indented = line[:1].isspace()
        m = _DEVICES_TOTAL.match(text)
        if m is not None and not indented:
            record.declared_devices = int(m["n"])
            cur.take()
            return
        if not text:
            raise cur.fail("a device line or 'Total <n> devices attached'")
        record.attached_devices.append(text)
        cur.take()


def parse_bufinfo(text: str, *, fence_format: FenceFormat | None = None) -> BufinfoDump:
    """Parse the text of a ``dma_buf/bufinfo`` file (``dma_buf_debug_show``, K-67).

    Accepts what kernels since v5.3 print (older ones without the ``ino`` column too): the
    header with or without ``name``; buffer lines with tabs or with the tabs expanded to
    spaces (as in dumps pasted into bug reports); every fence format of K-94 (the
    ``Exclusive``/``Shared`` lines of v5.16 and earlier, ``dma_fence_describe``'s 5.17-6.18
    layout, and the v6.19 context-first layout); buffers without attachments; CRLF line
    endings, trailing whitespace, lost indentation. Lines before the title (a shell prompt)
    and after the trailer are ignored; a second title after the trailer is an error.

    A name is None for ``<none>``, and for an empty name field in dumps without the name
    column (where an unset name printed as ``""``). Names lose trailing whitespace, so a
    buffer literally named ``<none>`` or ending in spaces cannot be told apart.

    ``fence_format`` restricts fence descriptions to one layout, for when the kernel is known
    (a classic line whose driver name looked like ``<context>:<seqno>`` would otherwise read
    as the v6.19 layout). By default each line is matched against context-first, classic,
    then the 5.16 layout -- the 5.16 layout first when a space follows ``fence:``, since only
    that layout prints one.

    Raises:
        BufinfoParseError: malformed text, naming the line, what was expected and what was
            found. Inconsistent totals are not an error: see :attr:`BufinfoDump.consistent`.
    """
    cur = _Lines(text)
    while (line := cur.peek()) is not None and line.strip() != "Dma-buf Objects:":
        cur.take()
    if cur.peek() is None:
        cur.index = 0
        cur.skip_blank()
        raise cur.fail("the title 'Dma-buf Objects:'")
    cur.take()

    header = cur.peek()
    columns = tuple(header.split()) if header is not None else ()
    if columns not in _HEADERS:
        raise cur.fail("the column header 'size flags mode count exp_name ino name'")
    cur.take()
    name_column = "name" in columns

    fmts = (fence_format,) if fence_format is not None else _AUTO_ORDER
    objects: list[BufinfoRecord] = []
    while True:
        cur.skip_blank()
        line = cur.peek()
        if line is None:
            raise cur.fail(f"{_OBJECT_LINE} or {_TRAILER_TEXT}")
        trailer = _TRAILER.match(line.strip())
        if trailer is not None:
            cur.take()
            break
        record = _parse_object(line, name_column)
        if record is None:
            raise cur.fail(f"{_OBJECT_LINE} or {_TRAILER_TEXT}")
        record.line = cur.lineno
        cur.take()
        _parse_block(cur, record, fmts)
        objects.append(record)

    while (line := cur.peek()) is not None:
        if line.strip() == "Dma-buf Objects:":
            raise cur.fail("nothing after the trailer (one dump per text)")
        cur.take()
    return BufinfoDump(
        objects=objects,
        total_objects=int(trailer["n"]),
        total_bytes=int(trailer["bytes"]),
        columns=columns,
    )


def parse_bufinfo_file(
    path: str | PathLike[str], *, fence_format: FenceFormat | None = None
) -> BufinfoDump:
    """:func:`parse_bufinfo` on a file; a parse error names the file as well as the line, a
    file that cannot be read is a :class:`~pinlab.errors.ConfigError` naming it.

    Bytes that are not UTF-8 (names are arbitrary bytes in the kernel) are kept as
    backslash escapes.
    """
    data = read_user_file(os.fspath(path), what="a dma_buf/bufinfo dump")
    try:
        return parse_bufinfo(
            data.decode("utf-8", errors="backslashreplace"), fence_format=fence_format
        )
    except BufinfoParseError as e:
        raise e.with_path(str(path)) from None
