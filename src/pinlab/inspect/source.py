"""What every host reader of :mod:`pinlab.inspect` shares: the statuses, file access below a
root, and the record base.

Each reader takes ``root`` (default ``/``) so that tests can point it at a fake sysfs/procfs
tree, reads only files below it, and returns a small frozen :class:`SourceRecord` whose
``status`` is one of

* :data:`OK` -- the source was read (it may still say "nothing here", e.g. no regions);
* :data:`MISSING` -- the file or directory does not exist (``detail`` says what that means);
* ``"unreadable: <reason>"`` (:func:`unreadable`) -- it exists but could not be read or parsed
  (permission denied, a directory where a file was expected, malformed text);
* :data:`NOT_APPLICABLE` -- a source that depends on another one that is absent (dmem
  without a cgroup v2 mount).

No reader raises for a missing, unreadable or malformed source. Every file is opened by
:func:`read_bytes` (through :func:`_open`, which tests replace to make any path fail).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator, PlainSerializer

from pinlab.units import compact_size, parse_size

__all__ = [
    "MISSING",
    "NOT_APPLICABLE",
    "OK",
    "ROOT",
    "HexId",
    "Record",
    "Size",
    "SourceRecord",
    "listdir",
    "opt_int",
    "opt_text",
    "read_bytes",
    "read_text",
    "try_read",
    "under",
    "unreadable",
    "why",
]

OK = "ok"
MISSING = "missing"
NOT_APPLICABLE = "not applicable"

ROOT = Path("/")


def unreadable(reason: str) -> str:
    """The status ``"unreadable: <reason>"``."""
    return f"unreadable: {reason}"


# -- file access ----------------------------------------------------------------------------------


def _open(path: Path) -> bytes:
    """The one place a file is read: tests monkeypatch it to raise for a path."""
    with open(path, "rb") as f:
        return f.read()


def read_bytes(path: Path) -> bytes:
    """A whole file's bytes (``OSError`` as ``open`` raises it)."""
    return _open(path)


def read_text(path: Path) -> str:
    """A whole file as text; bytes that are not UTF-8 are kept as ``\\xNN`` escapes."""
    return _open(path).decode("utf-8", errors="backslashreplace")


def why(exc: OSError) -> str:
    """A short reason for an ``OSError``: ``permission denied``, ``is a directory`` ..."""
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


def under(root: Path, path: str) -> Path:
    """``path`` (absolute, as the kernel prints it) inside ``root``."""
    return root / path.lstrip("/")


T = TypeVar("T")


def try_read(path: Path, parse: Callable[[str], T]) -> tuple[str, T | None]:
    """(status, value): ``ok`` and ``parse(text)``, ``missing``, or ``unreadable: why``."""
    try:
        text = read_text(path)
    except FileNotFoundError:
        return MISSING, None
    except OSError as e:
        return unreadable(why(e)), None
    try:
        return OK, parse(text)
    except (ValueError, IndexError) as e:
        return unreadable(f"malformed {path.name}: {e}"), None


def opt_text(path: Path) -> str | None:
    """The stripped text of an optional attribute, None if it is absent or unreadable."""
    try:
        return read_text(path).strip()
    except OSError:
        return None


def opt_int(path: Path, base: int = 0) -> int | None:
    """An optional integer attribute, None if it is absent, unreadable or not a number."""
    text = opt_text(path)
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def listdir(path: Path) -> tuple[str, ...]:
    """The sorted names in a directory, ``()`` if it cannot be listed."""
    try:
        return tuple(sorted(p.name for p in path.iterdir()))
    except OSError:
        return ()


# -- records --------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "to_json"):
        return value.to_json()
    return value


_HEX_MAX = 0xFFFF_FFFF
"""The widest PCI config register an ID is read from (32 bits)."""


def _hex(value: object) -> object:
    number = value
    if isinstance(value, str):
        try:
            number = int(value.strip().lower(), 16)
        except ValueError:
            number = None
    # a sign or a width no PCI register has is a typo, not an ID (int() takes "-0x10")
    if isinstance(number, int) and not isinstance(number, bool) and 0 <= number <= _HEX_MAX:
        return number
    if isinstance(value, str | int | float):
        raise ValueError(f'expected a hexadecimal ID like "0x15b3", found {value!r}')
    return value


HexId = Annotated[int, BeforeValidator(_hex), PlainSerializer(lambda v: f"0x{v:04x}")]
"""A PCI ID or register in a snapshot: written ``"0x15b3"``, read from that or a number."""
Size = Annotated[int, BeforeValidator(lambda v: parse_size(v)), PlainSerializer(compact_size)]
"""Bytes in a snapshot: written compactly (``"32GiB"``), read from any size or a number."""


class Record:
    """Mixin of the frozen records: ``to_json`` over the fields (of a dataclass or a model)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON types."""
        names = getattr(self, "__dataclass_fields__", None) or getattr(
            type(self), "model_fields", {}
        )
        return {name: _jsonable(getattr(self, name)) for name in names}


@dataclass(frozen=True, slots=True)
class SourceRecord(Record):
    """What one reader returns: its ``status`` (module docstring) and ``source``, the files it
    read; each reader's record adds its fields (and a ``detail`` that explains the status)."""

    status: str
    source: str
