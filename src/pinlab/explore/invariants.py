"""The invariants every explored sequence is checked against, after each step and at teardown.

:class:`Checker` wraps each userspace call or device event of a sequence (:meth:`Checker.call`):
a :class:`~pinlab.kernel.errno.KernelError` is the call's ``-errno`` (recorded, not a problem);
any other exception escaping the model is a violation (``escape``: the model raised where the
kernel returns an errno; ``BUG`` for :class:`~pinlab.kernel.errno.KernelBug`, ``hang`` for
:class:`~pinlab.kernel.errno.KernelHang`). After every step time passes (each TTM device's
queued copies run and their fences signal, :meth:`Checker.settle` -- a process waits for what
the kernel told it to before its next step), then:

* ``leak`` -- a pin, mapping or reference the kernel model records as leaked (K-15);
* ``warn`` -- a WARN / WARN_ON_ONCE hit (:class:`~pinlab.kernel.warn.WarnRecord`);
* ``stale-dma`` -- a device access through a stale or unfenced mapping (the stale-DMA detector,
  K-39);
* ``quota`` -- the policy's quota exceeded: ``dmem.max`` or ``dmem.pin.max`` of ``/limited``,
  the per-device pin cap, RLIMIT_MEMLOCK under ``memlock-dmabuf-pins`` (P-27, P-12);
* ``underflow`` -- a reference count or pin count below zero.

At teardown every process exits and time passes; then nothing may be left (``teardown``):
every region's used and pinned bytes, every module reference, dma-buf, MR, scanout, import,
RDMA mmap entry (device memory), iommufd IOAS area, ``locked_vm`` and dmem charge is back at
its value after boot, and no new leak or WARN is recorded (K-4, K-5, K-47, K-82, P-29). A
task that blocks for good (``hang``) is one violation whatever step blocked: its signature is
the function it blocked in and why (K-120).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pinlab.drivers.base import DeviceBuffer
from pinlab.drivers.display import Scanout
from pinlab.drivers.rdma import MemoryRegion
from pinlab.explore.target import LIMIT, Booted
from pinlab.kernel.errno import KernelBug, KernelError, KernelHang
from pinlab.kernel.kernel import CAP_IPC_LOCK, RLIM_INFINITY, RLIMIT_MEMLOCK

PAGE = 4096
_SLOT = re.compile(r"(b|f|a|dm)\d")
"""A sequence's object variables (:mod:`pinlab.explore.ops`): handles, fds, imports, device
memory."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: its ``kind`` (module docstring), the kernel function or the
    counter it is about (``where``), what happened (``what``) and the step (1-based; 0 =
    teardown) it was seen after."""

    kind: str
    where: str
    what: str
    step: int
    context: str = ""
    """What varies between ways into the same violation (a hang's task and step): shown,
    not part of the signature."""

    @property
    def signature(self) -> str:
        """The violation without what varies between equivalent sequences (object
        addresses, sizes, counts, pids): the deduplication key of a finding."""
        what = self.what
        while (simpler := re.sub(r"<(?!obj>)[^<>]*>", "<obj>", what)) != what:
            what = simpler
        what = re.sub(r"\b(0x[0-9a-f]+|\d+)\b", "N", what)
        return f"{self.kind}:{self.where}:{what}"

    def __str__(self) -> str:
        at = "teardown" if self.step == 0 else f"step {self.step}"
        context = f" [{self.context}]" if self.context else ""
        return f"{self.kind} in {self.where}: {self.what}{context} ({at})"


class Checker:
    """Runs a sequence's steps on a :class:`~pinlab.explore.target.Booted` machine and checks
    the invariants (module docstring). ``violations`` collects what broke; ``errors`` the
    ``-errno`` of each step (None for success); ``dead`` is set once the model raised
    something other than a ``KernelError`` (its state is undefined from then on).
    ``exact_epochs`` keeps each buffer's move count in the state's fingerprint (needed where
    an importer's mapping is not visible to it: the GPU import)."""

    def __init__(self, booted: Booted, policy: str = "none", *, exact_epochs: bool = True) -> None:
        self.b = booted
        self.policy = policy
        self.exact_epochs = exact_epochs
        self.violations: list[Violation] = []
        self.errors: list[str | None] = []
        self.dead = False
        self.buffers: dict[str, DeviceBuffer] = {}
        system = booted.system
        # the devices as booted: a hot-unplugged one leaves the system's tables, but what it
        # still holds must be accounted for all the same
        self.exporters = dict(system.exporters)
        self.nics = dict(system.nics)
        self.displays = dict(system.displays)
        self.gpu_importers = dict(system.gpu_importers)
        self._seen_leaks = 0
        self._seen_warns: dict[tuple[str, str], int] = {}
        self._seen_incidents = 0
        self._seen_hangs = 0
        self._settle()
        self._mark()
        self.baseline = self.snapshot()

    # -- steps -----------------------------------------------------------------------------
    @contextmanager
    def call(self, label: str) -> Iterator[None]:
        """One step: run the body, record its errno or the exception that escaped, let time
        pass, check the invariants."""
        step = len(self.errors) + 1
        errno: str | None = None
        try:
            yield
        except KernelError as e:
            errno = f"{e.errno} ({e.function})"
        except KernelHang as e:
            self._hang(str(e), label, step)
            self.dead = True
        except KernelBug as e:
            self._violate("BUG", label, str(e), step)
            self.dead = True
        except Exception as e:  # any other exception is the model's, not the kernel's
            self._violate("escape", label, f"{type(e).__name__}: {e}", step)
            self.dead = True
        self.errors.append(errno)
        if not self.dead:
            self._settle()
            self._check(step)

    def track(self, var: str, buffer: DeviceBuffer) -> None:
        """Remember the buffer behind GEM handle variable ``var`` (for the state's hash)."""
        self.buffers[var] = buffer

    def _violate(self, kind: str, where: str, what: str, step: int, context: str = "") -> None:
        self.violations.append(Violation(kind, where, what, step, context))

    def _hang(self, line: str, step_label: str, step: int) -> None:
        """A task blocked for good: the function it blocked in and why are the violation,
        the task and the step that blocked its context -- every way into the same unbounded
        wait (each revoke point, an exit) is one signature. A line in another format is kept
        whole."""
        m = _HUNG.fullmatch(line)
        if m is None:
            self._violate("hang", step_label, line, step)
            return
        task, function, why = m.groups()
        self._violate("hang", function, why, step, f"task {task} in {step_label}")

    def _settle(self) -> None:
        for bdev in self.b.machine.ttm_devices():
            bdev.run_copies()
        for proc in self.b.system.processes.values():
            proc.take_waits()
        self.b.kernel.take_waits()

    def _mark(self) -> None:
        k = self.b.kernel
        self._seen_leaks = len(k.leaks)
        self._seen_warns = {(r.function, r.message): r.count for r in k.warnings.records()}
        self._seen_incidents = len(self.b.system.detector.incidents)
        self._seen_hangs = len(k.hung_tasks)

    def _check(self, step: int) -> None:
        k = self.b.kernel
        for leak in k.leaks[self._seen_leaks :]:
            self._violate("leak", leak.function, leak.what, step)
        for rec in k.warnings.records():
            if rec.count > self._seen_warns.get((rec.function, rec.message), 0):
                self._violate("warn", rec.function, rec.message, step)
        for inc in self.b.system.detector.incidents[self._seen_incidents :]:
            self._violate("stale-dma", inc.device, f"{inc.kind}: {inc.detail}", step)
        for line in k.hung_tasks[self._seen_hangs :]:
            self._hang(line, "hung_task", step)
        self._mark()
        self._check_quotas(step)
        self._check_counts(step)

    def _check_quotas(self, step: int) -> None:
        b = self.b
        if self.policy in ("dmem-max", "dmem-pin-max"):
            file = "dmem.current" if self.policy == "dmem-max" else "dmem.pin.current"
            for region, value in _lines(b.tree, "/limited", file):
                if int(value) > LIMIT:
                    self._violate("quota", f"{file} /limited", f"{region} holds {value}", step)
        if self.policy == "device-pin-cap":
            # the proposal's rule, counted independently of its own counter: device memory
            # held by dma_buf_pin, each buffer once; the pins the core takes for a static
            # attachment are not the proposal's (pinlab.kernel.pin_hooks), so not counted
            held = sum(
                d.size
                for d in b.kernel.dma_bufs()
                if any(a.importer_pins for a in d.attachments)
                and isinstance(d.priv, DeviceBuffer)
                and d.priv.location == "vram"
            )
            if held > LIMIT:
                self._violate("quota", "device-pin-cap", f"{held} bytes of VRAM pinned", step)
        if self.policy == "memlock-dmabuf-pins":
            for p in b.system.live_processes():
                limit = p.getrlimit(RLIMIT_MEMLOCK).cur
                if CAP_IPC_LOCK in p.caps or limit == RLIM_INFINITY:
                    continue
                if p.mm.pinned_vm > limit // PAGE:
                    what = f"pinned_vm {p.mm.pinned_vm} pages > RLIMIT_MEMLOCK {limit}"
                    self._violate("quota", f"RLIMIT_MEMLOCK {p.comm}", what, step)

    def _check_counts(self, step: int) -> None:
        k = self.b.kernel
        for d in k.dma_bufs():
            if d.refcount < 0:
                self._violate("underflow", "dma_buf refcount", repr(d), step)
            for a in d.attachments:
                if min(a.importer_pins, a.core_pins, a.mappings) < 0:
                    self._violate("underflow", "attachment counters", repr(a), step)
        for name, drv in self.exporters.items():
            if drv.module.refcnt < 0:
                self._violate("underflow", f"{name} module refcount", str(drv.module.refcnt), step)
            for r in drv.regions():
                if r.used < 0 or r.pinned < 0:
                    self._violate("underflow", f"region {r.name}", f"{r.used}/{r.pinned}", step)
        for p in self.b.system.processes.values():
            if p.mm.pinned_vm < 0 or p.mm.locked_vm < 0:
                self._violate("underflow", f"mm of {p.comm}", "pinned_vm or locked_vm < 0", step)

    # -- teardown --------------------------------------------------------------------------
    def teardown(self) -> list[Violation]:
        """Every process exits, time passes; then everything must be back (module
        docstring). Returns all violations of the sequence."""
        if self.dead:
            return self.violations
        try:
            for proc in list(self.b.system.processes.values()):
                proc.exit()
            self._settle()
            self.b.system.reap()
        except KernelHang as e:  # an exit blocked for good: the same hang as in a step
            self._hang(str(e), "exit", 0)
            return self.violations
        except (KernelBug, KernelError, Exception) as e:
            self._violate("escape", "exit", f"{type(e).__name__}: {e}", 0)
            return self.violations
        self._check(0)
        after = self.snapshot()
        for key, value in self.baseline.items():
            if after.get(key) != value:
                self._violate("teardown", key, f"{value} after boot, {after.get(key)} now", 0)
        return self.violations

    def snapshot(self) -> dict[str, Any]:
        """The counters that must return to their boot value once every process exited."""
        b = self.b
        snap: dict[str, Any] = {}
        for name, drv in sorted(self.exporters.items()):
            for r in drv.regions():
                snap[f"{name} {r.name} used"] = r.used
                snap[f"{name} {r.name} pinned"] = r.pinned
            snap[f"{name} module refcount"] = drv.module.refcnt
        snap["dma-bufs"] = len(list(b.kernel.dma_bufs()))
        for n, nic in self.nics.items():
            snap[f"{n} MRs"] = len(nic.mrs)
            snap[f"{n} mmap entries"] = len(nic.mmap_entries)
        for n, d in self.displays.items():
            snap[f"{n} scanouts"] = len(d.scanouts)
        for n, g in self.gpu_importers.items():
            snap[f"{n} imports"] = len(g.imports)
        if b.system.iommufd is not None:
            snap["iommufd IOAS areas"] = sum(len(c.areas) for c in b.system.iommufd.contexts)
        snap["locked_vm"] = sum(u.locked_vm for u in b.kernel.users.values())
        if b.dmem is not None:
            snap["dmem.current /"] = b.tree.read("/", "dmem.current")
        return snap

    def exit_status(self) -> int:
        """For a reproducer script: print the violations, 1 if there are any."""
        for v in self.violations:
            print(v)
        return 1 if self.violations else 0

    # -- the state, for pruning ------------------------------------------------------------
    def fingerprint(self, ns: dict[str, Any]) -> tuple[Any, ...]:
        """What distinguishes states that can behave differently from here on: the
        sequence's live variables, which processes live, every tracked buffer's placement,
        pins and attachments, every MR's and scanout's state, the regions' counters and how
        many problems were recorded. Handle, fd and key numbers are left out: they differ
        between equivalent interleavings."""
        b = self.b
        objs: list[Any] = []
        for var in sorted(v for v in ns if _SLOT.match(v)):
            obj = ns[var]
            if isinstance(obj, MemoryRegion):
                mapping = _current(obj.umem.sgt, obj.umem.dmabuf.priv)
                objs.append((var, obj.revoked, obj.mtt_valid, obj.deregistered, mapping))
            elif isinstance(obj, Scanout):
                objs.append((var, obj.active, _current(obj.sgt, obj.dmabuf.priv)))
            else:
                objs.append(var)
        bufs = []
        for var, buf in sorted(self.buffers.items()):
            dmabuf = _dmabuf_of(b, buf)
            atts: tuple[Any, ...] = ()
            if dmabuf is not None:
                atts = (
                    dmabuf.refcount,
                    tuple(
                        sorted(
                            (a.dev.name, a.peer2peer, a.importer_pins, a.core_pins, a.mappings)
                            for a in dmabuf.attachments
                        )
                    ),
                )
            # how often a buffer moved matters only through the mappings made before a move
            # (MRs and scanouts above); a GPU import keeps its mapping where the fingerprint
            # cannot see it, so there the move count stays in
            epoch = buf.epoch if self.exact_epochs else None
            bufs.append((var, buf.location, buf.pinned, epoch, atts))
        regions = tuple(
            (r.name, r.used, r.pinned) for d in self.exporters.values() for r in d.regions()
        )
        alive = tuple(p.alive for p in b.system.processes.values())
        problems = (len(self.violations), tuple(sorted(b.system.exporters)))
        return (tuple(objs), tuple(bufs), regions, alive, problems)


_HUNG = re.compile(r"INFO: task (\S+) blocked for more than \d+ seconds in (\S+): (.*)")
"""A hung-task line as :meth:`~pinlab.kernel.kernel.Kernel.hang` logs it."""


def _current(sgt: Any, buf: object) -> tuple[bool, bool]:
    """(mapped, the mapping is of the buffer's current backing) of one importer mapping."""
    if sgt is None:
        return (False, False)
    return (True, isinstance(buf, DeviceBuffer) and sgt.epoch == buf.epoch)


def _dmabuf_of(b: Booted, buf: DeviceBuffer) -> Any:
    for d in b.kernel.dma_bufs():
        if d.priv is buf:
            return d
    return None


def _lines(tree: Any, path: str, file: str) -> list[tuple[str, str]]:
    try:
        text = tree.read(path, file)
    except KernelError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out.append((parts[0], parts[1]))
    return out
