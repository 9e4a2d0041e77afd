"""A scenario on an inspected host: ``pinlab run SCENARIO --platform host.toml --map A=B``.

:func:`parse_maps` reads ``--map SCENARIO_NAME=HOST_NAME`` items; :func:`resolve_maps` turns each
host name into the platform's own name -- a device, NIC or display of the file, or a host
name of the ``aliases`` header line ``pinlab inspect`` writes (PCI address, DRM card ``card1``,
RDMA device ``mlx5_0``; :data:`~pinlab.inspect.platform.ALIASES_PREFIX`). The scenario's
references are renamed to those (:func:`pinlab.scenarios.references.rename_references`).

A scenario that needs what the host lacks -- a device or NIC it names, more than one node, a
platform patch a real host cannot take -- is refused in one line by :func:`refusal`, naming
what it needs (with the driver its own platform gives it) and what the host has.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pinlab.errors import ConfigError
from pinlab.inspect.platform import ALIASES_PREFIX
from pinlab.inspect.source import read_text
from pinlab.platform.cluster import ClusterSpec
from pinlab.platform.presets import load_platform
from pinlab.platform.spec import PlatformSpec
from pinlab.scenarios.references import check_references

__all__ = [
    "check_map_sources",
    "first_missing_reference",
    "host_summary",
    "parse_maps",
    "read_aliases",
    "refusal",
    "resolve_maps",
]


def parse_maps(items: Sequence[str]) -> dict[str, str]:
    """``["gpu0=card1", ...]`` → ``{"gpu0": "card1"}``; :class:`ConfigError` for a bad item."""
    out: dict[str, str] = {}
    for item in items:
        left, sep, right = item.partition("=")
        if not sep or not left.strip() or not right.strip():
            raise ConfigError(
                f"--map {item}", "", "expected SCENARIO_NAME=HOST_NAME, e.g. gpu0=card1"
            )
        if left.strip() in out:
            raise ConfigError(
                f"--map {item}", "", f"expected {left.strip()} mapped once, found twice"
            )
        out[left.strip()] = right.strip()
    return out


def check_map_sources(maps: dict[str, str], scenarios: Sequence[Any]) -> None:
    """Refuse a ``--map`` whose scenario-side name no scenario's own platform gives (in any
    variant): the rename would silently do nothing. ``scenarios`` are
    :class:`~pinlab.scenarios.config.ScenarioConfig` loaded on their own platforms."""
    if not scenarios:  # none loads on its own platform: nothing to check the names against
        return
    names: set[str] = set()
    for cfg in scenarios:
        for variant in cfg.variants:
            spec = cfg.platform_spec(variant)
            names.update(_names(spec.node if isinstance(spec, ClusterSpec) else spec))
    for scenario_name, host_name in maps.items():
        if scenario_name not in names:
            whose = scenarios[0].name if len(scenarios) == 1 else "the scenarios"
            raise ConfigError(
                f"--map {scenario_name}={host_name}",
                "",
                f"expected a device, NIC or display name of {whose}'s own platform "
                f"({', '.join(sorted(names)) or 'none'}), found {scenario_name!r}",
            )


def read_aliases(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``aliases`` header line of a platform file ``pinlab inspect`` wrote ({} if none)."""
    try:
        text = read_text(Path(path))
    except OSError:
        return {}
    for line in text.splitlines():
        body = line.removeprefix("#").strip()
        if body.startswith(ALIASES_PREFIX):
            pairs = body[len(ALIASES_PREFIX) :].split()
            return dict(p.split("=", 1) for p in pairs if "=" in p)
    return {}


def _names(spec: PlatformSpec) -> dict[str, str]:
    """Every name a scenario can reference → what it is (``device (amdgpu)``)."""
    out = {d.name: f"device ({d.driver})" for d in spec.devices}
    out.update({n.name: f"NIC ({n.driver})" for n in spec.nics})
    out.update({d.name: f"display (of {d.device})" for d in spec.displays})
    return out


def host_summary(spec: PlatformSpec) -> str:
    """``devices gpu0 (amdgpu); NICs mlx5_0 (mlx5); displays display0``."""
    parts = [
        "devices " + (", ".join(f"{d.name} ({d.driver})" for d in spec.devices) or "none"),
        "NICs " + (", ".join(f"{n.name} ({n.driver})" for n in spec.nics) or "none"),
    ]
    if spec.displays:
        parts.append("displays " + ", ".join(d.name for d in spec.displays))
    return "; ".join(parts)


def _node(path: str | os.PathLike[str]) -> PlatformSpec:
    spec = load_platform(Path(path))
    return spec.node if isinstance(spec, ClusterSpec) else spec


def resolve_maps(maps: dict[str, str], platform: str | os.PathLike[str]) -> dict[str, str]:
    """Scenario name → the platform's name for each ``--map`` (module docstring)."""
    spec = _node(platform)
    names = _names(spec)
    aliases = read_aliases(platform)
    out: dict[str, str] = {}
    for scenario_name, host_name in maps.items():
        target = host_name if host_name in names else aliases.get(host_name)
        if target is None:
            known = sorted({*names, *aliases})
            raise ConfigError(
                f"--map {scenario_name}={host_name}",
                "",
                f"expected a name of platform {spec.name} ({', '.join(known) or 'none'}), "
                f"found {host_name!r}",
            )
        out[scenario_name] = target
    return out


def first_missing_reference(cfg: Any, platform: str | os.PathLike[str]) -> ConfigError | None:
    """The first tenant reference of scenario ``cfg`` (a
    :class:`~pinlab.scenarios.config.ScenarioConfig` loaded on its own platform) to a device,
    NIC or display the host platform lacks, in variant order -- what the scenario *needs*,
    whatever other check would have failed first."""
    spec = _node(platform)
    for variant in cfg.variants:
        resolved = cfg.resolve(variant)
        for i, t in enumerate(resolved.active_tenants()):
            try:
                check_references(t.params, spec, cfg.source, f"tenants[{i}] ({t.name})")
            except ConfigError as e:
                return e
    return None


def refusal(
    scenario: str,
    platform: str | os.PathLike[str],
    error: ConfigError,
    own: PlatformSpec | None = None,
) -> str:
    """The one line refusing ``scenario`` on the host platform: what failed (``error``), what
    the name is in the scenario's own platform ``own``, and what the host has."""
    spec = _node(platform)
    text = error.message or str(error)
    needs = ""
    if own is not None:
        for name, what in _names(own).items():
            quoted = (repr(name), f'"{name}"')
            if any(q in text for q in quoted) and name not in _names(spec):
                kind, _, driver = what.partition(" ")
                needs = f" -- it needs {kind} {name} {driver}"
                break
    if not needs and error.where.startswith("platform"):
        needs = " -- it changes the platform itself (presets, patches), which a real host cannot"
    return (
        f"{scenario}: refused on host platform {spec.name}{needs}: {error}; the host has "
        f"{host_summary(spec)} (map a scenario name onto the host's with --map NAME=HOST_NAME)"
    )
