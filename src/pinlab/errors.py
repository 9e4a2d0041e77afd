"""One-line configuration errors (``design.md``, "Scenario files").

Every error names the file (or other source, such as ``--set``), the field path, what was
expected and what was found, on one line, with no traceback:

    dl1.toml: devices[3].memory: expected a size like "32GiB", ..., found 'lots'

:func:`format_validation_error` turns a pydantic ``ValidationError`` into that line;
:class:`ConfigError` carries it. The simulator's scenario loader may reuse both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import ValidationError

__all__ = ["ConfigError", "format_loc", "format_validation_error", "toml_path"]


class ConfigError(ValueError):
    """A configuration problem, already phrased as the one line a user should see.

    ``source`` is the file (or ``"--set"``, ``"cost model"``); ``where`` the field path;
    ``message`` the expected/found part.
    """

    def __init__(self, source: str, where: str, message: str) -> None:
        self.source = source
        self.where = where
        self.message = message
        parts = [p for p in (source, where) if p]
        super().__init__(": ".join([*parts, message]))


def format_loc(loc: Sequence[int | str]) -> str:
    """A pydantic location as a field path: ``("devices", 3, "memory")`` → ``devices[3].memory``.

    A key containing a dot is quoted: ``("cost_overrides", "odp.fault")`` →
    ``cost_overrides['odp.fault']``.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "." in part or not part:
            out += f"[{part!r}]" if out else repr(part)
        else:
            out += f".{part}" if out else part
    return out


_PYDANTIC_PREFIX = "Input should be "


def _message(err: dict[str, object]) -> str:
    kind = str(err.get("type", ""))
    msg = str(err.get("msg", ""))
    found = err.get("input")
    if kind.startswith("pinlab_"):
        return msg  # already "expected ..., found ..."
    if kind == "missing":
        return "expected a value, found nothing (the field is required)"
    if kind == "extra_forbidden":
        return f"unknown field (found {found!r})"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if msg.startswith(_PYDANTIC_PREFIX):
        msg = "expected " + msg[len(_PYDANTIC_PREFIX) :]
    elif not msg.startswith("expected"):
        msg = f"expected a valid value: {msg}"
    return f"{msg}, found {found!r}"


def format_validation_error(exc: ValidationError, source: str = "", prefix: str = "") -> str:
    """The first error of ``exc`` as one line, ``source: field.path: expected ..., found ...``.

    ``prefix`` is prepended to the field path (``"node"`` for a cluster's node description).
    When there are more errors, ``" (and N more)"`` is appended.
    """
    return str(config_error(exc, source, prefix))


def config_error(exc: ValidationError, source: str = "", prefix: str = "") -> ConfigError:
    """Like :func:`format_validation_error`, as a :class:`ConfigError`."""
    errors = exc.errors()
    if not errors:  # pragma: no cover - pydantic never raises an empty error list
        return ConfigError(source, prefix, str(exc).replace("\n", " "))
    first = errors[0]
    where = format_loc([p for p in (prefix,) if p] + list(first.get("loc", ())))
    message = _message(dict(first))
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return ConfigError(source, where, message.replace("\n", " "))


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_path(loc: tuple[str | int, ...] | list[str | int]) -> str:
    """A key path in TOML syntax: ``tenants[2].params."dmem.max"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        key = (
            part
            if _BARE.match(part)
            else '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'
        )
        out += f".{key}" if out else key
    return out
