"""The kernel instance: profile, WARN log, global dma-buf list, ``current`` and fence waits.

One :class:`Kernel` is one booted machine. Nothing here reads a clock or sleeps (design
principle 4): a wait on fences is delegated to a :class:`FenceWaiter`. The default waiter,
:class:`DeferredWaiter`, answers "the wait will complete" and records the fences, so whoever
drives time (the simulator, or a test) makes the caller's timeline wait for them before the
device touches memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from pinlab.kernel.errno import Errno, KernelHang
from pinlab.kernel.fence import DmaFence, FenceTimeline
from pinlab.kernel.file import FdTable
from pinlab.kernel.limits import ULONG_MAX
from pinlab.kernel.profile import KernelProfile, get_profile
from pinlab.kernel.warn import WarnLog

if TYPE_CHECKING:
    from pinlab.kernel.dma_buf import DmaBuf
    from pinlab.kernel.dmem import DmemController, DmemRegion
    from pinlab.kernel.pin_hooks import PinHook


class FenceWaiter(Protocol):
    """Whoever drives time decides how a kernel wait on ``fences`` ends.

    Return > 0 when the fences (will) signal before the caller proceeds, 0 for a timeout and a
    negative errno (``-ERESTARTSYS``, ``-EINTR``) for an interrupted wait.
    """

    def wait(self, fences: Sequence[DmaFence], *, intr: bool, timeout: int | None) -> int: ...


class DeferredWaiter:
    """The default waiter: record the unsignalled fences and report success.

    An interruptible wait of a task with a signal pending returns ``-ERESTARTSYS`` (K-28).
    The simulator (or a test) drains :attr:`pending` with :meth:`take` and waits for those
    fences in simulated time.
    """

    __slots__ = ("kernel", "pending")

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.pending: list[DmaFence] = []

    def wait(self, fences: Sequence[DmaFence], *, intr: bool, timeout: int | None) -> int:
        if intr and self.kernel.signal_pending():
            return -int(Errno.ERESTARTSYS)
        self.pending.extend(f for f in fences if not f.signaled)
        return 1 if timeout is None else max(timeout, 1)

    def take(self) -> list[DmaFence]:
        """Hand over (and forget) the fences waited on since the last call."""
        pending = self.pending
        if not pending:  # the common case: every syscall asks
            return []
        self.pending = []
        return [f for f in pending if not f.signaled]


RLIM_INFINITY = ULONG_MAX
"""``RLIM_INFINITY``: no limit (``(~0UL)``, include/uapi/asm-generic/resource.h)."""
RLIMIT_MEMLOCK = 8
"""The resource number of ``RLIMIT_MEMLOCK``."""
CAP_IPC_LOCK = 14
CAP_SYS_RESOURCE = 24
DEFAULT_MEMLOCK = 8 << 20
"""Linux's default ``RLIMIT_MEMLOCK`` (``MLOCK_LIMIT``, 8 MiB since 5.16)."""


class Rlimit(NamedTuple):
    """``struct rlimit``: soft (``rlim_cur``) and hard (``rlim_max``) limits in bytes."""

    cur: int
    max: int


class MmStruct:
    """The ``mm_struct`` counters RLIMIT_MEMLOCK accounting uses, in pages.

    ``locked_vm`` is mlock-style locking, ``pinned_vm`` long-term pins (RDMA umems); the
    accounting rules live in ``pinlab.policy`` (``policy-semantics.md`` §1).
    """

    __slots__ = ("locked_vm", "pinned_vm")

    def __init__(self) -> None:
        self.locked_vm = 0
        self.pinned_vm = 0


class UserStruct:
    """``struct user_struct``: per-uid counters shared by all of a user's processes."""

    __slots__ = ("locked_vm", "uid")

    def __init__(self, uid: int) -> None:
        self.uid = uid
        self.locked_vm = 0


class Task:
    """``struct task_struct``, as far as the kernel layer needs it: pid and name, the fd table,
    a pending-signal flag, credentials (uid, capabilities), rlimits, the mm counters, the
    per-user struct and the cgroup (an opaque object the dmem controller understands).

    ``pinlab.uapi`` extends it into a userspace process.
    """

    __slots__ = (
        "caps",
        "cgroup",
        "comm",
        "files",
        "mm",
        "pid",
        "rlimits",
        "sigpending",
        "uid",
        "user",
    )

    def __init__(
        self,
        pid: int,
        comm: str,
        *,
        uid: int = 1000,
        caps: frozenset[int] = frozenset(),
        memlock: Rlimit | None = None,
        user: UserStruct | None = None,
        cgroup: object | None = None,
    ) -> None:
        self.pid = pid
        self.comm = comm
        self.files = FdTable()
        self.sigpending = False
        self.uid = uid
        self.caps = caps
        limit = memlock if memlock is not None else Rlimit(DEFAULT_MEMLOCK, DEFAULT_MEMLOCK)
        self.rlimits: dict[int, Rlimit] = {RLIMIT_MEMLOCK: limit}
        self.mm = MmStruct()
        self.user = user if user is not None else UserStruct(uid)
        self.cgroup = cgroup

    def capable(self, cap: int) -> bool:
        """``capable(cap)`` for this task."""
        return cap in self.caps

    def rlimit(self, resource: int) -> int:
        """``rlimit(resource)``: the soft limit."""
        return self.rlimits[resource].cur

    def __repr__(self) -> str:
        return f"<task {self.comm}[{self.pid}]>"


class Leak:
    """Something the real kernel would leak (K-15): recorded, reported, never raised."""

    __slots__ = ("function", "what")

    def __init__(self, function: str, what: str) -> None:
        self.function = function
        self.what = what

    def __repr__(self) -> str:
        return f"<leak in {self.function}: {self.what}>"


_KERNEL_CONTEXT = object()


class Kernel:
    """One modelled kernel: its :class:`KernelProfile` and global state.

    Attributes:
        profile: the release being modelled.
        warnings: every WARN / WARN_ON_ONCE hit (:class:`WarnLog`).
        dmesg: other kernel log lines (``pr_warn``, ``ibdev_warn_ratelimited`` ...).
        leaks: pins, mappings or references left behind that a real kernel would leak.
        waiter: how fence waits end (:class:`FenceWaiter`); :class:`DeferredWaiter` by default.
        current: the task on whose behalf the kernel is running, or None (kernel context).
        pin_hooks: policies that see every ``dma_buf_pin`` (:mod:`pinlab.kernel.pin_hooks`);
            empty upstream.
        dmem: the cgroup dmem controller TTM charges (plugged in by ``pinlab.policy``); used
            only when the profile has dmem (6.14+).
    """

    __slots__ = (
        "_buffers",
        "_next_context",
        "_next_ino",
        "current",
        "dmem",
        "dmem_regions",
        "dmesg",
        "hung_tasks",
        "leaks",
        "pin_hooks",
        "profile",
        "users",
        "waiter",
        "warnings",
    )

    def __init__(self, profile: KernelProfile | str | None = None) -> None:
        if profile is None or isinstance(profile, str):
            profile = get_profile() if profile is None else get_profile(profile)
        self.profile: KernelProfile = profile
        self.warnings = WarnLog()
        self.dmesg: list[str] = []
        self.leaks: list[Leak] = []
        self.hung_tasks: list[str] = []  # tasks blocked for good (KernelHang)
        self.waiter: FenceWaiter = DeferredWaiter(self)
        self.current: Task | None = None
        self.dmem: DmemController | None = None
        self.dmem_regions: list[DmemRegion] = []  # dmem_cgroup_register_region, in order
        self.users: dict[int, UserStruct] = {}
        self.pin_hooks: list[PinHook] = []  # empty upstream; filled by opt-in policies
        self._buffers: dict[int, DmaBuf] = {}
        self._next_context = 1
        self._next_ino = 1

    # -- logging ---------------------------------------------------------------------------
    def warn(self, function: str, message: str, *, once: bool = False) -> None:
        """Record a WARN (``once`` for WARN_ON_ONCE) and carry on."""
        self.warnings.warn(function, message, once=once)

    def log(self, line: str) -> None:
        """Append a non-WARN kernel log line."""
        self.dmesg.append(line)

    def leak(self, function: str, what: str) -> None:
        """Record a resource the real kernel would leak."""
        self.leaks.append(Leak(function, what))

    def hang(self, function: str, what: str) -> KernelHang:
        """A task blocks for good in ``function``: log it as khungtaskd would, record it, and
        return the :class:`~pinlab.kernel.errno.KernelHang` for the caller to raise."""
        task = self.current.comm if self.current is not None else "kworker"
        line = f"INFO: task {task} blocked for more than 120 seconds in {function}: {what}"
        self.hung_tasks.append(line)
        self.log(line)
        return KernelHang(line)

    # -- tasks -----------------------------------------------------------------------------
    def current_owner(self) -> object:
        """The lock-owner token of the running context: ``current`` or kernel context."""
        return self.current if self.current is not None else _KERNEL_CONTEXT

    def signal_pending(self) -> bool:
        """``signal_pending(current)``."""
        return self.current is not None and self.current.sigpending

    def get_user(self, uid: int) -> UserStruct:
        """``get_uid``/``alloc_uid``: the one ``user_struct`` of ``uid``."""
        user = self.users.get(uid)
        if user is None:
            user = self.users[uid] = UserStruct(uid)
        return user

    # -- fences ----------------------------------------------------------------------------
    def dma_fence_context_alloc(self, num: int = 1) -> int:
        """``dma_fence_context_alloc``: reserve ``num`` fence contexts, return the first."""
        first = self._next_context
        self._next_context += num
        return first

    def timeline(self, driver_name: str, timeline_name: str) -> FenceTimeline:
        """A new fence timeline on a freshly allocated context."""
        return FenceTimeline(self.dma_fence_context_alloc(), driver_name, timeline_name)

    def take_waits(self) -> list[DmaFence]:
        """Fences the default waiter collected since the last call (empty for other waiters)."""
        if isinstance(self.waiter, DeferredWaiter):
            return self.waiter.take()
        return []

    # -- the global dma-buf list (db_list) --------------------------------------------------
    def next_ino(self) -> int:
        """The dma-buf inode number (``atomic64_add_return(1, &dmabuf_inode)``)."""
        ino = self._next_ino
        self._next_ino += 1
        return ino

    def add_dma_buf(self, dmabuf: DmaBuf) -> None:
        self._buffers[dmabuf.ino] = dmabuf

    def remove_dma_buf(self, dmabuf: DmaBuf) -> None:
        self._buffers.pop(dmabuf.ino, None)

    def dma_bufs(self) -> Iterator[DmaBuf]:
        """Every live dma-buf, newest first (the order debugfs walks, K-67)."""
        return reversed(list(self._buffers.values()))

    def __repr__(self) -> str:
        return f"<Kernel {self.profile.name}>"
