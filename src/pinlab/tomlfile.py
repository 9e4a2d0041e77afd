"""Reading the TOML files users write: scenarios, sweeps, policies and platforms.

Every reader of a user's file goes through :func:`read_toml` (or :func:`parse_toml` for text
that did not come from a file), so every file gets the same one-line errors
(:class:`~pinlab.errors.ConfigError`, ``design.md`` "Scenario files"):

* the path: empty, with a NUL byte, missing, a directory, unreadable;
* the bytes: not UTF-8 (a UTF-16 byte-order mark is named as such), or a NUL byte;
* the syntax: the parser's message with ``line L, column C``;
* the shape: nesting deeper than :data:`MAX_DEPTH` tables/arrays (the parser would recurse
  until Python's stack gives out), and TOML date/time values, which no pinlab file uses -- a
  ``start = 1979-05-27`` is a mistake that would otherwise reach a number field as a
  ``datetime`` and be reported as something else;
* the numbers: integers outside TOML's 64-bit range (:data:`INT_MIN` … :data:`INT_MAX`),
  which the parser accepts, or too long for Python to convert at all.

This module belongs to the ground floor: it imports nothing of pinlab but :mod:`pinlab.errors`.
"""

from __future__ import annotations

import datetime as _dt
import re
import tomllib
from pathlib import Path
from typing import Any

from pinlab.errors import ConfigError, toml_path

__all__ = ["INT_MAX", "INT_MIN", "MAX_DEPTH", "parse_toml", "read_toml", "read_user_file"]

MAX_DEPTH = 64
"""Deepest nesting of tables and arrays a pinlab file may use (the deepest built-in one
uses 5)."""

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
"""TOML integers are 64-bit signed ("if an integer cannot be represented losslessly, an error
must be thrown", toml.io v1.0.0); ``tomllib`` accepts any size, so the range is checked here."""

_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def read_toml(
    path: str | Path, *, what: str = "a TOML file", source: str | None = None
) -> dict[str, Any]:
    """The table of the TOML file at ``path``.

    ``what`` names the expected file in messages (``"a scenario file"``); ``source`` is how the
    file is named in them (default: the path as given). Raises :class:`ConfigError`.
    """
    name = str(path) if source is None else source
    return parse_toml(_decode(read_user_file(path, what=what, source=source), name, what), name)


def read_user_file(path: str | Path, *, what: str, source: str | None = None) -> bytes:
    """The bytes of the file a user named, or the one-line :class:`ConfigError` of why not
    (an empty path, a NUL byte, no such file, a directory, no permission), naming the file as
    ``source`` does (default: the path as given) and the file expected (``what``)."""
    name = str(path) if source is None else source
    text = str(path)
    if not text:
        raise ConfigError(name or "(empty path)", "", f"expected {what}, found an empty path")
    if "\x00" in text:
        raise ConfigError(
            name.replace("\x00", "\\0"), "", f"expected {what}, found a NUL byte in the path"
        )
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(name, "", f"expected {what}, found no such file") from None
    except IsADirectoryError:
        raise ConfigError(name, "", f"expected {what}, found a directory") from None
    except PermissionError:
        raise ConfigError(
            name, "", f"expected {what}, found a file that cannot be read (permission denied)"
        ) from None
    except OSError as e:
        raise ConfigError(name, "", f"expected a readable file, found {e.strerror or e}") from None


def _decode(raw: bytes, name: str, what: str) -> str:
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            raise ConfigError(name, "", f"expected {what} in UTF-8, found {encoding} text")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(
            name,
            "",
            f"expected {what} in UTF-8, found byte 0x{raw[e.start]:02x} at offset {e.start}",
        ) from None
    if "\x00" in text:
        raise ConfigError(
            name, "", f"expected {what} (text), found a NUL byte at offset {text.index(chr(0))}"
        )
    return text


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """The table of TOML ``text``; ``source`` names it in messages. Raises :class:`ConfigError`."""
    # every level of nesting opens a bracket or a brace, so a text with few of them needs no
    # scan (nearly every file and every ``--set`` value)
    openers = text.count("[") + text.count("{")
    depth = _bracket_depth(text) if openers > MAX_DEPTH else openers
    if depth > MAX_DEPTH:
        raise ConfigError(
            source, "", f"expected tables and arrays nested at most {MAX_DEPTH} deep, found {depth}"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_POS.search(msg)
        where = f"line {m.group(1)}, column {m.group(2)}" if m else ""
        raise ConfigError(
            source, where, f"expected valid TOML, found {msg[: m.start()] if m else msg}"
        ) from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ConfigError(
            source, "", "expected valid TOML, found nesting too deep to read"
        ) from None
    except ValueError as e:  # tomllib's int() of a number too long for Python to convert
        raise ConfigError(
            source, "", f"expected valid TOML, found a number too long to read ({e})"
        ) from None
    _check_values(data, source)
    return data


def _bracket_depth(text: str) -> int:
    """An upper bound of the nesting depth of inline arrays and tables (brackets and braces
    outside strings and comments), found without recursion."""
    depth = deepest = 0
    quote = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if text.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
        elif c in "\"'":
            quote = c * 3 if text.startswith(c * 3, i) else c
            i += len(quote)
            continue
        elif c == "#":
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return deepest


def _check_values(value: Any, source: str) -> None:
    """Refuse what the parser accepts but no pinlab file may hold: integers outside TOML's
    64-bit range and date/time values."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, (*where, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*where, i)) for i, v in enumerate(node))
        elif (
            isinstance(node, int) and not isinstance(node, bool) and not INT_MIN <= node <= INT_MAX
        ):
            digits = len(str(abs(node)))
            shown = str(node) if digits <= 30 else f"an integer of {digits} digits"
            raise ConfigError(
                source,
                toml_path(where),
                f"expected an integer within TOML's 64-bit range (-2^63 to 2^63-1), found {shown}",
            )
        elif isinstance(node, (_dt.datetime, _dt.date, _dt.time)):
            raise ConfigError(
                source,
                toml_path(where),
                "expected a number, string, boolean, array or table, "
                f"found the TOML date/time {node.isoformat()}",
            )
