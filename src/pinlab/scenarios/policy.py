"""``[policy]`` of a scenario: an administrator policy document (``pinlab.policy.config``
format, inline or a ``file``) with ``{device}`` placeholders and completed ``[regions]``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from pinlab.errors import ConfigError, toml_path
from pinlab.policy.config import PolicyConfig, PolicyError, parse_policy
from pinlab.scenarios.paths import deep_merge
from pinlab.tomlfile import read_toml

__all__ = [
    "PolicyDocumentError",
    "dmem_settings",
    "policy_document",
    "validate_policy",
    "written_by",
]

_PLACEHOLDER = re.compile(r"\{([A-Za-z][A-Za-z0-9_.+-]*)\}")


def _substitute(value: Any, names: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: names.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {_substitute(k, names): _substitute(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, names) for v in value]
    return value


def _tables(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``doc[key]`` when it is a table, else empty: a ``cgroups`` or ``regions`` of another
    type is left for :func:`validate_policy` to name."""
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _mentioned_regions(doc: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for spec in _tables(doc, "cgroups").values():
        if not isinstance(spec, dict):
            continue
        for key, lines in spec.items():
            if not key.startswith("dmem."):
                continue
            items = [lines] if isinstance(lines, str) else lines if isinstance(lines, list) else []
            for line in items:
                if isinstance(line, str):
                    for part in line.splitlines():
                        if part.split():
                            out.append(part.split()[0])
    return out


def dmem_settings(doc: Mapping[str, Any]) -> list[str]:
    """The key paths of a policy document that need the dmem cgroup controller: every
    ``dmem.*`` file a cgroup sets, and ``dmem-pin-max`` (whose files live beside them)."""
    out: list[str] = []
    for path, spec in _tables(doc, "cgroups").items():
        if isinstance(spec, dict):
            out += [f'cgroups."{path}"."{key}"' for key in spec if str(key).startswith("dmem.")]
    proposals = doc.get("proposals") or {}
    if isinstance(proposals, dict) and "dmem-pin-max" in proposals:
        out.append("proposals.dmem-pin-max")
    return out


def policy_document(
    policy: Mapping[str, Any],
    pci_names: Mapping[str, str],
    regions: Mapping[str, int] | None,
    base_dir: Path | None = None,
) -> dict[str, Any]:
    """The policy as a ``pinlab.policy.config`` document: a ``file`` read, ``{device}``
    placeholders replaced by PCI addresses, and ``[regions]`` completed -- from the machine's
    registered regions when given, otherwise with a placeholder capacity for each region the
    cgroups mention (validation before a machine exists)."""
    doc: dict[str, Any] = dict(policy)
    if "file" in doc:
        path = Path(str(doc.pop("file")))
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        doc = deep_merge(read_toml(path, what="a policy file"), doc)
    doc = _substitute(doc, pci_names)
    if "regions" in doc and not isinstance(doc["regions"], dict):
        return doc
    declared = dict(_tables(doc, "regions"))
    if regions is not None:
        for name, size in regions.items():
            declared.setdefault(name, size)
    else:
        for name in _mentioned_regions(doc):
            declared.setdefault(name, 1 << 40)
    if declared:
        doc["regions"] = declared
    return doc


class PolicyDocumentError(ConfigError):
    """:func:`validate_policy`'s one line, keeping the policy's own field path and message
    (``policy_where``, ``policy_message``) so that the error can be blamed on a ``--policy``
    file that wrote the field (:func:`written_by`)."""

    def __init__(self, error: PolicyError) -> None:
        super().__init__("", "", str(error))
        self.policy_where = error.where
        self.policy_message = error.message


def validate_policy(doc: Mapping[str, Any], source: str) -> PolicyConfig:
    """Validate a policy document with ``pinlab.policy.config``'s one-line messages."""
    try:
        return parse_policy(tomli_w.dumps(dict(doc)), f"{source}: policy")
    except PolicyError as e:
        raise PolicyDocumentError(e) from None


def written_by(overlay: Mapping[str, Any], own: object, where: str) -> bool:
    """Whether the policy field ``where`` (a :class:`PolicyDocumentError`'s path) is one
    ``overlay`` -- a ``--policy`` document merged over the scenario's own ``[policy]``,
    ``own`` -- wrote: the field itself, an element of a value it wrote (a scalar dmem line is
    read as a list), or a field missing from a table only the overlay has."""

    def walk(node: object, path: tuple[str | int, ...], mine: object) -> bool:
        at = toml_path(path)
        if path and where == at:
            return True
        if not isinstance(node, dict):
            return bool(path) and where.startswith(at + "[")
        if path and not isinstance(mine, dict) and where.startswith(at + "."):
            return True
        inner = mine if isinstance(mine, dict) else {}
        return any(walk(v, (*path, str(k)), inner.get(k)) for k, v in node.items())

    return walk(overlay, (), own)
