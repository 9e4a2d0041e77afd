"""Atomic file writes shared by every user-facing writer (reports, sweeps, inspect).

A file is written into a temporary sibling, flushed and fsync'ed, given the permissions a
plain ``open()`` would (``0o666 & ~umask``) and renamed over the target with
:func:`os.replace`: a reader sees the old file or the new one, never a part, and a failure
leaves no temporary file behind. This module belongs to no layer; any layer may use it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path | str, data: bytes | str, *, make_parents: bool = True) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically; return the path.

    Raises ``OSError`` when the directory is missing (with ``make_parents=False``) or not
    writable.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if make_parents:
        directory.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target
