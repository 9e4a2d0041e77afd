"""Kernel error model: errno values, ``KernelError``, lockdep and BUG.

Models the three ways the kernel reports trouble (``kernel-semantics.md`` §0.1):

* an errno returned to the caller -- :class:`KernelError`, printed as the kernel prints it
  (``-ENOMEM``);
* a broken locking contract that lockdep would splat about (``dma_resv_assert_held``) --
  :class:`LockingError`, a bug in the *caller*, never an errno;
* ``BUG()`` -- :class:`KernelBug`; the model state afterwards is undefined;
* a wait without timeout that nothing will ever end -- :class:`KernelHang`: the task blocks
  for good (the hung-task detector reports it after 120 s).

WARNs are not exceptions at all: they are recorded on the kernel instance
(:class:`pinlab.kernel.warn.WarnLog`) and execution continues.
"""

from __future__ import annotations

import enum


class Errno(enum.IntEnum):
    """The errno values pinlab's kernel model can return (Linux asm-generic numbers)."""

    EPERM = 1
    ENOENT = 2
    ESRCH = 3
    EINTR = 4
    EIO = 5
    ENXIO = 6
    EBADF = 9
    EAGAIN = 11
    ENOMEM = 12
    EFAULT = 14
    EBUSY = 16
    EEXIST = 17
    ENODEV = 19
    EINVAL = 22
    ENOTTY = 25
    ENOSPC = 28
    EPIPE = 32
    ERANGE = 34
    EDEADLK = 35
    EOVERFLOW = 75
    EPROTONOSUPPORT = 93
    EOPNOTSUPP = 95
    ETIMEDOUT = 110
    ERESTARTSYS = 512
    EMULTIHOP = 72

    def __str__(self) -> str:
        return f"-{self.name}"


class KernelError(Exception):
    """A kernel function returned a negative errno.

    ``errno`` is the :class:`Errno`; ``str(err)`` starts with ``-ENAME`` exactly as a kernel
    log line would print the return value, followed by the function and the reason when known.
    """

    __slots__ = ("errno", "function", "policy", "reason")

    def __init__(self, errno: Errno, function: str = "", reason: str = "") -> None:
        # The text is built when it is read, not here: a refused placement raises errors
        # that its caller catches and never prints (an allocation that fails over its
        # places raises one per place), so formatting at every raise would cost on a hot path.
        # ``args`` stays what the class was called with (``BaseException.__new__``).
        self.errno = errno if type(errno) is Errno else Errno(errno)
        self.function = function
        self.reason = reason
        self.policy: str | None = None  # the opt-in policy that refused, when one did

    def __reduce__(self) -> tuple[object, ...]:
        # the constructor's arguments, then the slots set since (``policy``, a subclass's)
        state = {
            name: getattr(self, name)
            for cls in type(self).__mro__
            for name in cls.__dict__.get("__slots__", ())
            if hasattr(self, name)
        }
        return (type(self), self.args, state)

    @property
    def value(self) -> int:
        """The value the kernel function returns: the negative errno."""
        return -int(self.errno)

    def __str__(self) -> str:
        text = str(self.errno)
        if self.function:
            text += f" from {self.function}"
        if self.reason:
            text += f": {self.reason}"
        return text

    def __repr__(self) -> str:
        return f"KernelError({self.errno.name}, {self.function!r}, {self.reason!r})"


class LockingError(Exception):
    """A locking rule was broken: what lockdep would splat about.

    Raised, not recorded, because it is a bug in the caller (``dma_resv_assert_held`` failing,
    or a function that must be called *without* the reservation held being called with it).
    """


class KernelBug(Exception):
    """``BUG()``: the kernel would oops here. Model state afterwards is undefined."""


class KernelHang(Exception):
    """The calling task blocks forever: an unbounded wait (``wait_for_completion``, a fence
    wait with ``MAX_SCHEDULE_TIMEOUT``) whose waker will never run, because the importer it
    waits for does not do what its contract says (unmap after ``invalidate_mappings``, K-120).

    Raised so that a hang is never a silent success; the kernel also logs it
    (``kernel.hung_tasks``). The model state afterwards is that of the blocked task: the wait
    has not returned, and what it guards (the device's ``memory_lock``) stays taken.
    """


def err(errno: Errno, function: str = "", reason: str = "") -> KernelError:
    """Build a :class:`KernelError`; ``raise err(Errno.EINVAL, "dma_buf_export")`` reads well."""
    return KernelError(errno, function, reason)


class NotInProfile(Exception):
    """The function or callback does not exist in the selected kernel profile.

    For example ``dma_buf_invalidate_mappings`` before preset ``7.1``, or the ``*_unlocked``
    map variants in preset ``5.16``. Calling it is a build error in a real kernel, so it is
    neither an errno nor a WARN.
    """
