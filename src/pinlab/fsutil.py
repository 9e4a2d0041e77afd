"""Atomic file writes shared by every user-facing writer (reports, sweeps, inspect).

A file is written into a temporary sibling, flushed and fsync'ed, given the permissions a
plain ``open()`` would (``0o666 & ~umask``) and renamed over the target with
:func:`os.replace`: a reader sees the old file or the new one, never a part, and a failure
leaves no temporary file behind. This module belongs to no layer; any layer may use it.

:func:`output_dir` and :func:`output_file` check, before any work and without writing, that
a place the user named for output can take it (the one-line
:class:`~pinlab.errors.ConfigError` otherwise).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pinlab.errors import ConfigError


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


def what_is(path: Path) -> str:
    """What stands at ``path`` where a directory was expected, for a ``found ...``."""
    if path.is_symlink() and not path.exists():
        return "a broken symbolic link"
    if not path.exists():
        return "no such directory"
    return "a file" if path.is_file() else "something other than a directory"


def output_dir(text: str | os.PathLike[str], flag: str = "out") -> Path:
    """The output directory ``flag`` (a flag or an argument's name) names: a directory this
    process can write, or a path whose nearest existing ancestor is one (the rest is made
    when the output is written). :class:`ConfigError` otherwise: an empty path (it would be
    the current directory), a file on the way, a place this process cannot write."""
    out, source = _output_path(text, flag, "a directory")
    existing = out
    with _refused_paths(source, "a directory"):
        while not (existing.exists() or existing.is_symlink()) and existing.parent != existing:
            existing = existing.parent
        found = None if existing.is_dir() else what_is(existing)
    if found is not None:
        at = "" if existing == out else f" at {existing}"
        raise ConfigError(source, "", f"expected a directory, found {found}{at}")
    _writable(existing, out, source, "directory")
    return out


def refused_write(source: str, error: OSError) -> ConfigError:
    """The :class:`ConfigError` for an output directory ``source`` names (``--out DIR``,
    ``out DIR``) that passed :func:`output_dir` but that the system refused when it was
    written -- ``mkdir`` under ``/proc`` (``ENOENT``) or ``/sys`` (``EPERM``), a full disk --
    which ``access(2)`` cannot foresee for root."""
    return ConfigError(
        source,
        "",
        "expected a directory pinlab can write, found one the system refuses to write "
        f"({error.strerror or type(error).__name__})",
    )


def output_file(text: str | os.PathLike[str], flag: str) -> Path:
    """The output file ``flag`` names: a file this process can write, or a new name in a
    directory it can write. :class:`ConfigError` otherwise (an empty path, a directory, a
    missing directory, a file on the way, a place this process cannot write)."""
    out, source = _output_path(text, flag, "a file")
    with _refused_paths(source, "a file"):
        exists = out.exists() or out.is_symlink()
        is_dir = out.is_dir()
        parent = out.parent
        parent_found = None if parent.is_dir() else what_is(parent)
    if is_dir:
        raise ConfigError(source, "", "expected a file, found a directory")
    if exists:
        _writable(out, out, source, "file", os.W_OK)
        return out
    if parent_found is not None:
        raise ConfigError(
            source, "", f"expected a file in a directory, found {parent_found} at {parent}"
        )
    _writable(parent, out, source, "file")
    return out


def _output_path(text: str | os.PathLike[str], flag: str, what: str) -> tuple[Path, str]:
    """``text`` as a path, and how messages name it (``flag text``)."""
    if not isinstance(text, str | os.PathLike):
        raise ConfigError(flag, "", f"expected {what}'s path, found {text!r}")
    shown = os.fspath(text)
    if not shown:  # Path("") is the current directory
        raise ConfigError(flag, "", f"expected {what}, found an empty path")
    if "\x00" in shown:
        escaped = shown.replace("\x00", "\\0")
        raise ConfigError(f"{flag} {escaped}", "", f"expected {what}, found a NUL byte in the path")
    return Path(shown), f"{flag} {shown}"


@contextmanager
def _refused_paths(source: str, what: str) -> Iterator[None]:
    """A path the system refuses to look at (a name too long, a loop of symbolic links)."""
    try:
        yield
    except OSError as e:
        raise ConfigError(
            source, "", f"expected {what}, found a path the system refuses ({e.strerror})"
        ) from None


def _writable(
    place: Path, out: Path, source: str, what: str, mode: int = os.W_OK | os.X_OK
) -> None:
    if not os.access(place, mode):  # EROFS too: access(2) reports it
        where = "one" if place == out else f"{place}, which"
        raise ConfigError(
            source, "", f"expected a writable {what}, found {where} this process cannot write"
        )
