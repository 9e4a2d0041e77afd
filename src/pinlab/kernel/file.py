"""``struct file`` and the per-process fd table (``struct files_struct``).

A dma-buf *is* a file: its refcount is the file's ``f_count`` (``kernel-semantics.md`` §2.1), so
passing an fd to another process, ``dup``-ing it or closing it is ordinary file refcounting.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

# include/uapi/asm-generic/fcntl.h
O_RDONLY = 0o0
O_WRONLY = 0o1
O_RDWR = 0o2
O_ACCMODE = 0o3
O_NONBLOCK = 0o4000
O_CLOEXEC = 0o2000000
# include/linux/fs.h
FMODE_READ = 0x1
FMODE_WRITE = 0x2
FMODE_LSEEK = 0x4
FMODE_PREAD = 0x8
FMODE_PWRITE = 0x10
FMODE_OPENED = 0x80000


def open_fmode(flags: int) -> int:
    """``OPEN_FMODE(flag)``: the read/write mode bits implied by the access mode."""
    acc = (flags + 1) & 0o3
    return (FMODE_READ if acc & 1 else 0) | (FMODE_WRITE if acc & 2 else 0)


class File:
    """A refcounted open file. ``release`` runs when ``f_count`` drops to zero (``fput``)."""

    __slots__ = ("f_count", "f_flags", "f_mode", "ino", "kind", "private_data", "release")

    def __init__(
        self,
        kind: str,
        private_data: object,
        *,
        f_flags: int = O_RDWR,
        f_mode: int | None = None,
        ino: int = 0,
        release: Callable[[File], None] | None = None,
    ) -> None:
        self.kind = kind  # which file_operations: "dma-buf", "drm", ...
        self.private_data = private_data
        self.f_flags = f_flags
        self.f_mode = f_mode if f_mode is not None else open_fmode(f_flags) | FMODE_OPENED
        self.ino = ino
        self.f_count = 1
        self.release = release

    def get(self) -> File:
        """``get_file``: take one more reference."""
        self.f_count += 1
        return self

    def put(self) -> None:
        """``fput``: drop a reference; the last one runs ``release``."""
        if self.f_count <= 0:
            raise RuntimeError(f"fput on a released {self.kind} file (model bug)")
        self.f_count -= 1
        if self.f_count == 0 and self.release is not None:
            self.release(self)

    def __repr__(self) -> str:
        return f"<File {self.kind} ino={self.ino} f_count={self.f_count}>"


class FdTable:
    """``struct files_struct``: fd numbers to files, lowest free number first (O(log n)).

    The files sit in an array indexed by fd number, as ``fdt->fd[]`` does (a slot is ``None``
    when the number is free): 8 bytes a slot, where a dict would cost an entry of ~40 bytes
    and an int object per open fd (a process may hold a million dma-buf fds).
    """

    __slots__ = ("_cloexec", "_fds", "_free", "_open")

    def __init__(self) -> None:
        self._fds: list[File | None] = [None, None, None]  # 0, 1, 2 are stdio, not modelled
        self._free: list[int] = []  # heap of numbers below len(_fds) that were closed
        self._open = 0
        # fdt->close_on_exec: a bitmap, one bit per fd number (a set would cost ~50 bytes
        # per open fd)
        self._cloexec = bytearray()

    def get_unused_fd(self) -> int:
        """``get_unused_fd_flags``: the lowest free descriptor number."""
        fds = self._fds
        while self._free:
            fd = heapq.heappop(self._free)
            if fds[fd] is None:
                return fd
        return len(fds)

    def install(self, file: File, flags: int = 0) -> int:
        """``fd_install`` into the lowest free number; the table now owns that reference."""
        fd = self.get_unused_fd()
        if fd == len(self._fds):
            self._fds.append(file)
        else:
            self._fds[fd] = file
        self._open += 1
        self._set_close_on_exec(fd, bool(flags & O_CLOEXEC))
        return fd

    def _set_close_on_exec(self, fd: int, on: bool) -> None:
        """``__set_close_on_exec`` / ``__clear_close_on_exec``."""
        byte, bit = fd >> 3, 1 << (fd & 7)
        bitmap = self._cloexec
        if byte >= len(bitmap):
            if not on:
                return
            bitmap.extend(bytes(byte + 1 - len(bitmap)))
        if on:
            bitmap[byte] |= bit
        else:
            bitmap[byte] &= ~bit

    def close_on_exec(self, fd: int) -> bool:
        """``close_on_exec(fd, fdt)``: whether ``fd`` is closed at exec (``FD_CLOEXEC``)."""
        byte = fd >> 3
        return byte < len(self._cloexec) and bool(self._cloexec[byte] & 1 << (fd & 7))

    def lookup(self, fd: int) -> File | None:
        """``fget`` without taking a reference: the open file behind ``fd`` or None."""
        if 0 <= fd < len(self._fds):
            return self._fds[fd]
        return None

    def close(self, fd: int) -> bool:
        """``close_fd``: False if ``fd`` was not open (the syscall's ``-EBADF``)."""
        file = self.lookup(fd)
        if file is None:
            return False
        self._fds[fd] = None
        self._open -= 1
        self._set_close_on_exec(fd, False)
        heapq.heappush(self._free, fd)
        file.put()
        return True

    def close_all(self) -> None:
        """Close every descriptor, highest first (``exit_files``)."""
        for fd in reversed(list(self)):
            self.close(fd)

    def __contains__(self, fd: object) -> bool:
        return isinstance(fd, int) and self.lookup(fd) is not None

    def __iter__(self) -> Iterator[int]:
        """The open descriptor numbers, lowest first (a snapshot: closing while iterating is
        fine)."""
        return iter([fd for fd, file in enumerate(self._fds) if file is not None])

    def __len__(self) -> int:
        return self._open
