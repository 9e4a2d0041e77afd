r"""Which input an error is about: the field paths of :class:`~pinlab.errors.ConfigError`\ s
compared with the keys of ``--set`` overrides and ``[variants]`` changes, so that
:class:`~pinlab.scenarios.config.ScenarioConfig` names the ``--set`` (or the variant) whose
value caused an error rather than the scenario file, and a ``[claim]`` error named at the
user's field path.

A field path as an error names it (``tenants.kv.params.block``, ``faults[0].target``,
``claim."expect[0]".op``) and a ``--set`` key (``tenants.3.params.block``,
``claim.expect.0.op``) compare once both are one dotted key (:func:`dotted`, :func:`canonical`).
A change *reaches* a field when it set the field, a table inside it, or a table around it
whose new value holds the field (:func:`reaches`: a table merged into an existing one leaves
the keys it does not name as they were; an array or a value replaces all below its key).

Which change an error is blamed on (:func:`culprit`), of the ``--set`` overrides in the order
they are given (and then of a variant's changes):

1. the last change that reached the field the error names -- the one whose value stands there,
   as the last ``--set`` of a key wins;
2. else, for a check that compares fields (:class:`CrossFieldError`: ``duration`` /
   ``sample_interval``, a tenant's iterations over ``duration`` from its ``start``, a fault's
   ``target`` against the tenants or the platform), the last change that reached any of them;
3. else the last change of the key that decides what the field's table may hold
   (:func:`defines`: a tenant's ``workload`` decides its ``params``, a fault's ``kind`` its
   ``target``).

No change: the error is the file's, as raised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from pinlab.errors import ConfigError, config_error, toml_path
from pinlab.scenarios.claimspec import ClaimSpec

__all__ = [
    "DEFINING",
    "CrossFieldError",
    "addresses",
    "canonical",
    "claim_error",
    "covers",
    "culprit",
    "defines",
    "dotted",
    "reaches",
]


class CrossFieldError(ConfigError):
    """The error of a check that compares fields: reported at ``where``, but a change of any of
    ``fields`` (dotted, list elements by index: ``scenario.duration``, ``tenants.3.start``)
    may be what caused it -- a ``sample_interval`` too fine for the ``duration`` a ``--set``
    lengthened is that ``--set``'s error."""

    def __init__(self, source: str, where: str, message: str, fields: Iterable[str]) -> None:
        super().__init__(source, where, message)
        self.fields = tuple(fields)


def dotted(where: str) -> str:
    """A field path as one dotted key, list indices as keys, so that a ``--set`` key and an
    error's field path compare: ``claim."expect[0]".op`` and ``claim.expect.0.op`` both →
    ``claim.expect.0.op``, ``faults[0].target`` → ``faults.0.target``."""
    return re.sub(r"\[(\d+)\]", r".\1", where.replace('"', "").replace("'", "")).strip(".")


def _user_loc(err: Mapping[str, Any], doc: Any) -> tuple[str | int, ...]:
    """The location of a pydantic error in the user's document: without the union members'
    tags pydantic puts in it (``show[0].str``, ``expect[0].comparison``), which name no key of
    the document. A key the document lacks stays only as a missing field's name."""
    loc = list(err.get("loc", ()))
    out: list[str | int] = []
    node = doc
    for i, part in enumerate(loc):
        in_list = isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node)
        if in_list or (isinstance(part, str) and isinstance(node, dict) and part in node):
            out.append(part)
            node = node[part]
        elif i == len(loc) - 1 and err.get("type") == "missing":
            out.append(part)
    return tuple(out)


def claim_error(e: ValidationError, source: str, doc: Mapping[str, Any]) -> ConfigError:
    """A ``[claim]`` validation error as one line at the user's field path (:func:`_user_loc`).
    Of a union's members the one that got furthest into the value is the user's intent (a
    table in ``show`` is an operand, not a failed string); members that fail at the same place
    are alternatives: ``expected a string or an array, found 3``."""
    located = [(_user_loc(err, doc), err) for err in e.errors(include_url=False)]
    deepest = max(len(loc) for loc, _ in located)
    loc = next(loc for loc, _ in located if len(loc) == deepest)
    messages: list[str] = []
    for where, err in located:
        if where != loc:
            continue
        details: Any = {k: v for k, v in err.items() if k != "msg"} | {"loc": loc}
        try:
            one = ValidationError.from_exception_data(e.title, [details])
        except (KeyError, TypeError, ValueError):  # a custom error type: its line, at ``loc``
            custom = PydanticCustomError(str(err["type"]), str(err["msg"]))
            plain = InitErrorDetails(type=custom, loc=loc, input=err.get("input"))
            one = ValidationError.from_exception_data(e.title, [plain])
        messages.append(config_error(one, source, "claim", ClaimSpec).message)
    parts = [m.removeprefix("expected ").rpartition(", found ") for m in messages]
    message = messages[0]
    if len(messages) > 1 and all(
        m.startswith("expected ") and p[1] for m, p in zip(messages, parts, strict=True)
    ):
        alternatives = " or ".join(dict.fromkeys(expected for expected, _, _ in parts))
        message = f"expected {alternatives}, found {parts[0][2]}"
    # an error of another place; a member that failed on the way to ``loc`` is not one
    others = sum(1 for where, _ in located if where != loc[: len(where)])
    if others:
        message += f" (and {others} more)"
    return ConfigError(source, toml_path(("claim", *loc)), message)


DEFINING = {
    ("tenants", "workload", 3),
    ("faults", "kind", 3),
    ("platform", "preset", 2),
    ("platform", "file", 2),
}
"""Keys that decide what the rest of their table may hold (``(table, key, path length)``):
a tenant's ``workload`` its ``params``, a fault's ``kind`` its ``target``, the platform's
``preset`` or ``file`` its ``params`` and the devices and NICs a patch may name."""


def covers(where: str, key: str) -> bool:
    """Whether a change of ``key`` is the change of field ``where``: the field itself, a
    table around it or one inside it."""
    return where == key or where.startswith(key + ".") or key.startswith(where + ".")


def reaches(where: str, key: str, value: Any) -> bool:
    """Whether setting ``key`` to ``value`` set field ``where`` (both dotted): the field
    itself, a table inside it, or a table around it whose value holds the field -- a table
    value is merged into the table there, so a key it lacks keeps its value; an array or a
    plain value replaces everything below ``key``."""
    if where == key or key.startswith(where + "."):
        return True  # the field itself, or a key inside it
    if not where.startswith(key + "."):
        return False
    rest = where[len(key) + 1 :].split(".")
    node = value
    while rest:
        if not isinstance(node, dict):
            return True
        for n in range(len(rest), 0, -1):  # a key may hold dots: cgroups."user.slice/a"
            head = ".".join(rest[:n])
            if head in node:
                node, rest = node[head], rest[n:]
                break
        else:
            return False
    return True


def _keys(key: str, value: Any) -> list[str]:
    """``key`` and the key of every value a table ``value`` holds (``platform = { preset =
    "dl1" }`` sets ``platform.preset``)."""
    if not isinstance(value, dict):
        return [key]
    return [key, *(k for sub, v in value.items() for k in _keys(f"{key}.{sub}", v))]


def culprit(
    wheres: Iterable[str], fields: Iterable[str], changes: Sequence[tuple[Iterable[str], Any]]
) -> int | None:
    """The index of the change an error is blamed on (the rules of this module's docstring):
    ``wheres`` are the forms of the error's field (:func:`canonical`, :func:`dotted`),
    ``fields`` the other fields its check compared (:class:`CrossFieldError`), ``changes``
    each change's keys (every form that addresses the field it set) and value, in the order
    they were applied. None: no change caused it."""
    wheres, fields = tuple(wheres), tuple(fields)
    keyed = [(tuple(keys), value) for keys, value in changes]

    def tier(n: int, key: str, value: Any) -> bool:
        if n == 0:
            return any(reaches(w, key, value) for w in wheres)
        if n == 1:
            return any(reaches(f, key, value) for f in fields)
        return any(defines(w, k) for w in wheres for k in _keys(key, value))

    for n in range(3):
        for i in reversed(range(len(keyed))):
            keys, value = keyed[i]
            if any(tier(n, k, value) for k in keys):
                return i
    return None


def defines(where: str, key: str) -> bool:
    """Whether ``key`` is a :data:`DEFINING` key of the table ``where`` is in."""
    parts = key.split(".")
    head = (parts[0], parts[-1], len(parts))
    if head not in DEFINING:
        return False
    return where.startswith(key.rpartition(".")[0] + ".")


def addresses(doc: Mapping[str, Any], done: Sequence[str | int]) -> set[str]:
    """The keys an error names a field ``apply_set`` set at ``done`` by: a list element by its
    index (``faults.0.target``) and, if it has one, by its ``name`` in ``doc`` (the document
    after every change: ``tenants.hog.start``; a ``name`` set renames)."""
    by_index: list[str] = []
    by_name: list[str] = []
    node: Any = doc
    for part in done:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
            name = node.get("name") if isinstance(node, dict) else None
            by_index.append(str(part))
            by_name.append(name if isinstance(name, str) else str(part))
            continue
        node = node.get(part) if isinstance(node, dict) else None
        by_index.append(part)
        by_name.append(part)
    return {".".join(by_index), ".".join(by_name)}


def canonical(where: str) -> str:
    """A field path without quotes or list indices: ``cost."odp.fault"`` → ``cost.odp.fault``."""
    return re.sub(r"\[\d+\]", "", where.replace('"', "").replace("'", "")).strip(".")
