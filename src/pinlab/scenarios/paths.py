"""Dotted key paths into a scenario document (``--set key=value``, ``[variants]``): parsing
paths and values, quoting, and merging tables."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from pinlab.errors import ConfigError

__all__ = [
    "deep_merge",
    "flatten_cost",
    "parse_path",
    "parse_set",
    "parse_value",
    "quote",
    "select",
    "where_of",
]

_SEGMENT = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([^.\'"\s]+))\s*(\.|$)')


def parse_path(text: str) -> list[str]:
    """``a.b."c.d".e`` → ``["a", "b", "c.d", "e"]`` (TOML key syntax; ``ValueError``)."""
    out: list[str] = []
    pos = 0
    text = text.strip()
    if not text:
        raise ValueError("expected a dotted key path, found an empty one")
    while pos < len(text):
        m = _SEGMENT.match(text, pos)
        if m is None:
            raise ValueError(f'expected a dotted key path like a.b."c", found {text!r}')
        dq, sq, bare, sep = m.groups()
        out.append(json.loads(f'"{dq}"') if dq is not None else sq if sq is not None else bare)
        pos = m.end()
        if sep == "" and pos < len(text):
            raise ValueError(f"expected a dotted key path, found {text!r}")
    return out


def parse_value(text: str) -> Any:
    """A ``--set`` value: a TOML value if it parses, else the text as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


def parse_set(expr: str) -> tuple[list[str], Any]:
    """``"a.b=value"`` → (path, value); :class:`ConfigError` naming the ``--set``."""
    key, sep, value = expr.partition("=")
    if not sep:
        raise ConfigError(f"--set {expr}", "", "expected key=value, found no '='")
    try:
        path = parse_path(key)
    except ValueError as e:
        raise ConfigError(f"--set {expr}", key.strip(), str(e)) from None
    return path, parse_value(value)


def quote(seg: str) -> str:
    return seg if re.fullmatch(r"[A-Za-z0-9_-]+", seg) else json.dumps(seg)


def where_of(path: Sequence[str | int]) -> str:
    return ".".join(quote(str(p)) for p in path)


def select(items: list[Any], seg: str, where: list[str | int], source: str) -> int:
    """The index of the list element ``seg`` names: an index or a ``name``."""
    if seg.isdigit():
        i = int(seg)
        if i < len(items):
            return i
        raise ConfigError(
            source, where_of(where), f"expected an index below {len(items)}, found {seg}"
        )
    names = [x.get("name") for x in items if isinstance(x, dict)]
    for i, x in enumerate(items):
        if isinstance(x, dict) and x.get("name") == seg:
            return i
    have = ", ".join(str(n) for n in names if n) or "none"
    raise ConfigError(source, where_of(where), f"expected an entry name ({have}), found {seg!r}")


def deep_merge(base: Any, over: Any) -> Any:
    """``over`` on top of ``base``: tables merge recursively, anything else replaces."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = deep_merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def flatten_cost(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted cost keys from nested tables: ``{"odp": {"fault": "2ms"}, "rdma.post_cost":
    "2us"}`` → ``{"odp.fault": "2ms", "rdma.post_cost": "2us"}``."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten_cost(v, key + "."))
        else:
            out[key] = v
    return out
