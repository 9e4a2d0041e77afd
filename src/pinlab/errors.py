"""One-line configuration errors (``design.md``, "Scenario files").

Every error names the file (or other source, such as ``--set``), the field path, what was
expected and what was found, on one line, with no traceback:

    dl1.toml: devices[3].memory: expected a size like "32GiB", ..., found "lots"

Field paths are written in TOML key syntax (:func:`toml_path`: ``cgroups."a/b"."dmem.max"[0]``)
and found values as a TOML file writes them (:func:`show_value`: ``"lots"``, ``true``,
``[1, 2]``), so what the message shows can be searched for in the file.
:func:`config_error` turns a pydantic ``ValidationError`` into that line, as a
:class:`ConfigError`; given the model, an unknown field lists the fields its table accepts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

__all__ = [
    "ConfigError",
    "config_error",
    "exactly_one",
    "found_value",
    "one_line",
    "show_value",
    "str_argument",
    "toml_inline",
    "toml_path",
]


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
        super().__init__(one_line(": ".join([*parts, message])))


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""C0 and C1 controls (``\\x9b`` is a terminal's CSI) and the Unicode line separators."""


def exactly_one(names: str, first: object, second: object) -> None:
    """Raise ``ValueError`` (a model validator's error) unless exactly one of two optional
    fields, ``names`` (as the message words them: ``"'preset' and 'file'"``), is given."""
    if (first is None) == (second is None):
        found = "both" if first is not None else "neither"
        raise ValueError(f"expected exactly one of {names}, found {found}")


_FOUND_WIDTH = 60
"""The longest ``found ...`` :func:`found_value` shows as a value before it names its type."""


def found_value(value: object) -> str:
    """``value`` as the ``found ...`` of an API argument's error, bounded: a short scalar or
    container as its ``repr`` (``3``, ``None``, ``'odp'``, ``[1, 2]``), a long string cut
    (``'aaa...'``), a long container by its type and size (``a list of 5000 items``) and any
    other object by its type (``a RunResult``) -- never the repr of a large object, which
    would turn the one-line error into kilobytes."""
    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        shown = repr(value)
        return shown if len(shown) <= _FOUND_WIDTH else f"{shown[: _FOUND_WIDTH - 3]}..."
    kind = type(value).__name__
    if isinstance(value, list | tuple | dict | set | frozenset):
        shown = repr(value)
        if len(shown) <= _FOUND_WIDTH:
            return shown
        return f"a {kind} of {len(value)} item{'' if len(value) == 1 else 's'}"
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def str_argument(name: str, value: object, what: str) -> str:
    """``value`` when it is a string, else the :class:`ConfigError` naming the API argument
    ``name`` and what it should hold (``what``: ``"a metric's name"``), so that a lookup given
    a number says so instead of failing inside with an ``AttributeError``."""
    if not isinstance(value, str):
        raise ConfigError(name, "", f"expected {what} (a string), found {found_value(value)}")
    return value


def one_line(text: str) -> str:
    """``text`` with control characters (a newline in a ``--set`` value or a cgroup name the
    user typed, a terminal escape in a pasted file) shown as escapes, so that the error stays
    the one line it promises."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    """A key as TOML writes it: bare when it can be, else a basic string."""
    return key if _BARE.match(key) else json.dumps(key, ensure_ascii=False)


def toml_path(loc: Sequence[str | int]) -> str:
    """A key path in TOML syntax: ``("tenants", 2, "params", "dmem.max")`` →
    ``tenants[2].params."dmem.max"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = _toml_key(part)
            out += f".{key}" if out else key
    return out


_SHOWN_MAX = 60
"""Longest rendering of a value in a message; a longer one is cut short or described."""


def toml_inline(value: object) -> str:
    """``value`` as an inline TOML value -- ``"1GiB"``, ``true``, ``inf``, ``[1, 2]``,
    ``{ a = 1 }`` -- exactly, as a ``--set`` right-hand side that parses back to it.
    ``TypeError`` for what TOML cannot hold (None, other objects)."""
    return _inline(value, shown=False)


def show_value(value: object) -> str:
    """``value`` as a message shows it: as TOML writes it (:func:`toml_inline`), a long string
    cut short with its length, a long array or table as ``an array of N values`` / ``a table
    of N keys``, None (no value) as ``nothing``, anything else by ``repr``."""
    text = _inline(value, shown=True)
    if len(text) <= _SHOWN_MAX or not isinstance(value, list | tuple | Mapping):
        return text
    if isinstance(value, Mapping):
        return f"a table of {len(value)} keys"
    return f"an array of {len(value)} values"


def _inline(value: object, *, shown: bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        if shown and len(value) > _SHOWN_MAX:
            head = json.dumps(value[: _SHOWN_MAX - 10], ensure_ascii=False)
            return f'{head[:-1]}…" ({len(value)} characters)'
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_inline(v, shown=shown) for v in value) + "]"
    if isinstance(value, Mapping):
        items = ", ".join(
            f"{_toml_key(str(k))} = {_inline(v, shown=shown)}" for k, v in value.items()
        )
        return "{ " + items + " }" if items else "{}"
    if not shown:
        raise TypeError(f"expected a TOML value, found {type(value).__name__}")
    return "nothing" if value is None else repr(value)


# -- pydantic errors ---------------------------------------------------------------------------

_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "an array",
    "tuple_type": "an array",
    "set_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "dataclass_type": "a table",
}
"""What a pydantic type error expected, in TOML's words."""

_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}
_PY_QUOTED = re.compile(r"'([^']*)'")
_PYDANTIC_PREFIX = "Input should be "


def _message(err: Mapping[str, Any], allowed: Sequence[str]) -> str:
    kind = str(err.get("type", ""))
    msg = str(err.get("msg", ""))
    ctx = err.get("ctx") or {}
    found = show_value(err.get("input"))
    if kind.startswith("pinlab_"):
        return msg  # already "expected ..., found ..."
    if kind == "missing":
        return "expected a value, found nothing (the field is required)"
    if kind == "extra_forbidden":
        if allowed:
            return f"unknown field (expected one of {', '.join(allowed)})"
        return f"unknown field (found {found})"
    if kind in ("literal_error", "enum"):
        expected = _PY_QUOTED.sub(r'"\1"', str(ctx.get("expected", "")))
        return f"expected one of {expected}, found {found}"
    if kind in _BOUNDS:
        op, key = _BOUNDS[kind]
        return f"expected a number {op} {ctx.get(key)}, found {found}"
    if kind in _TYPE_NAMES:
        return f"expected {_TYPE_NAMES[kind]}, found {found}"
    for head in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(head)
    if ", found " in msg and msg.startswith("expected"):
        return msg  # a validator's own full message
    if msg.startswith(_PYDANTIC_PREFIX):
        msg = "expected " + msg[len(_PYDANTIC_PREFIX) :]
    elif not msg.startswith("expected"):
        msg = f"expected a valid value: {msg[:1].lower()}{msg[1:]}"
    return f"{msg}, found {found}"


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated[...]`` and ``X | None`` down to the one interesting type."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
            continue
        if origin in (Union, UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if len(args) == 1:
                annotation = args[0]
                continue
        return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _tagged(member: Any, tag: str | int) -> bool:
    """Whether union member ``member`` is a model with a ``Literal`` field that ``tag`` is a
    value of (pydantic puts a discriminated union's tag in an error's location)."""
    if not _is_model(member):
        return False
    return any(_is_tag(f.annotation, tag) for f in member.model_fields.values())


def _is_tag(annotation: Any, tag: str | int) -> bool:
    return get_origin(annotation) is Literal and tag in get_args(annotation)


def _allowed_fields(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The field names (aliases) the table at ``loc[:-1]`` of ``model`` accepts, in
    declaration order, walking models, ``dict[str, X]`` and ``list[X]`` along the error
    location; ``[]`` where the walk cannot follow it. A tagged union's member leaves out its
    tag field (the tag is chosen elsewhere: a tenant's ``workload``)."""
    ann: Any = model
    tag: str | int | None = None
    for part in loc[:-1]:
        ann = _unwrap(ann)
        if get_origin(ann) in (Union, UnionType):  # a tagged union: the member ``part`` tags
            ann = next((m for m in get_args(ann) if _tagged(m, part)), None)
            if ann is None:
                return []
            tag = part
            continue
        tag = None
        if _is_model(ann):
            match = next(
                (f for name, f in ann.model_fields.items() if part in (f.alias, name)), None
            )
            if match is None:
                return []
            ann = match.annotation
        elif get_origin(ann) is dict:
            ann = get_args(ann)[1]
        elif get_origin(ann) in (list, tuple):
            ann = get_args(ann)[0]
        else:
            return []
    ann = _unwrap(ann)
    if not _is_model(ann):
        return []
    return [
        f.alias or name
        for name, f in ann.model_fields.items()
        if tag is None or not _is_tag(f.annotation, tag)
    ]


def config_error(
    exc: ValidationError,
    source: str = "",
    prefix: str = "",
    model: type[BaseModel] | None = None,
) -> ConfigError:
    """The first error of ``exc`` as one :class:`ConfigError` line,
    ``source: key.path: expected ..., found ...``; ``" (and N more)"`` when there are more.

    ``prefix`` is a key path put before the error's own (``"params"`` for a preset's
    parameters); ``model`` is the model ``exc`` came from, so that an unknown field lists the
    fields its table accepts.
    """
    errors = exc.errors(include_url=False)
    if not errors:  # pragma: no cover - pydantic never raises an empty error list
        return ConfigError(source, prefix, str(exc).replace("\n", " "))
    first = errors[0]
    loc = tuple(first.get("loc", ()))
    allowed = (
        _allowed_fields(model, loc)
        if model is not None and first.get("type") == "extra_forbidden"
        else []
    )
    path = toml_path(loc)
    if prefix and path:
        path = prefix + path if path.startswith("[") else f"{prefix}.{path}"
    message = _message(first, allowed)
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return ConfigError(source, path or prefix, message.replace("\n", " "))
