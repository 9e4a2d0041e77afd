"""Platform presets (``cost-model.md`` §9) and platform files.

Each preset is a function returning a :class:`~pinlab.platform.spec.PlatformSpec` (or, for
``cluster``, a :class:`~pinlab.platform.cluster.ClusterSpec`); keyword parameters are the knobs
a sweep turns (``dl1(efa_behind_switch=True)``, ``cluster(nodes=16)``); ``matrix`` is the
machine ``pinlab matrix`` builds for each exporter. :data:`PRESETS` maps
their names to them. Values the doc marks [assumption] are modelling choices -- sweep them; the
extra ones pinlab had to make are listed in each preset's docstring.

A platform file (what ``pinlab run --platform FILE`` accepts) is TOML, either a full description
(the fields of :class:`PlatformSpec`; ``kind = "cluster"`` for a :class:`ClusterSpec`), as
:func:`dump_platform` writes it, or a preset with parameters::

    preset = "dl1"
    [params]
    efa_behind_switch = true

:func:`load_platform` reads either, with one-line errors naming the file and field;
:func:`resolve_platform` takes a preset name or a path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from pinlab.errors import ConfigError, config_error, show_value
from pinlab.platform.cluster import ClusterSpec
from pinlab.platform.presets_aws import cluster, dl1, p4d
from pinlab.platform.presets_gpu import dgx_a100, dgx_h100, gpu_box, p5
from pinlab.platform.presets_host import GPUS, apu_laptop, cx_pair, workstation, workstation_amd
from pinlab.platform.presets_matrix import matrix
from pinlab.platform.spec import PlatformSpec
from pinlab.plugins import PluginRegistry, describe
from pinlab.tomlfile import read_toml
from pinlab.units import STRICT_UNITS

__all__ = [
    "GPUS",
    "PRESETS",
    "AnySpec",
    "apu_laptop",
    "cluster",
    "cx_pair",
    "dl1",
    "dump_platform",
    "load_platform",
    "matrix",
    "p4d",
    "platform_from_dict",
    "resolve_platform",
    "workstation",
    "workstation_amd",
]

AnySpec = PlatformSpec | ClusterSpec


PRESETS: PluginRegistry[str, Callable[..., AnySpec]] = PluginRegistry(
    {
        "dl1": dl1,
        "p4d": p4d,
        "workstation": workstation,
        "workstation-amd": workstation_amd,
        "cx-pair": cx_pair,
        "apu-laptop": apu_laptop,
        "cluster": cluster,
        "matrix": matrix,
        "dgx-a100": dgx_a100,
        "dgx-h100": dgx_h100,
        "p5": p5,
        "gpu-box": gpu_box,
    }
)
"""Preset platforms by name (``pinlab run --platform NAME``): the built-in ones, then the
installed plugins' (``pinlab.plugins``)."""


def _register_plugin(name: str, obj: object) -> None:
    if not callable(obj):
        raise TypeError(f"expected a function giving a platform spec, found {describe(obj)}")
    if name in PRESETS:
        raise ValueError(f"expected a new preset name, found {name!r} (already registered)")
    PRESETS[name] = obj


PRESETS.plugins("pinlab.presets", _register_plugin)


# -- files ---------------------------------------------------------------------------------------


def _preset(name: object, params: object, source: str) -> AnySpec:
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(source, "preset", f"expected one of {', '.join(PRESETS)}, found {name!r}")
    if not isinstance(params, Mapping):
        raise ConfigError(source, "params", f"expected a table of parameters, found {params!r}")
    func = PRESETS[name]
    allowed = list(inspect.signature(func).parameters)
    for key in params:
        if key not in allowed:
            raise ConfigError(
                source,
                f"params.{key}",
                f"expected a parameter of preset {name!r} ({', '.join(allowed)}), found {key!r}",
            )
    try:
        spec = func(**params)
    except ValidationError as e:
        raise config_error(e, source, "params") from None
    if not isinstance(spec, PlatformSpec | ClusterSpec):
        # a plugin's preset function (``pinlab.presets``) may give anything
        raise ConfigError(
            source, "preset", f"expected {name!r} to give a platform spec, found {spec!r}"[:200]
        )
    if params:
        _check_params(name, func, params, spec, source)
    return spec


def build_refusal(spec: AnySpec) -> ConfigError | ValueError | None:
    """What the machine's build (its drivers' checks of sizes and options) refuses, if any: a
    check that only building the node can make, done before a run needs the machine (a
    cluster's node is built once)."""
    from pinlab.platform.builder import build

    try:
        build(spec.node if isinstance(spec, ClusterSpec) else spec)
    except (ConfigError, ValueError) as e:
        return e
    return None


def _check_params(
    name: str, func: Callable[..., AnySpec], params: Mapping[str, Any], spec: AnySpec, source: str
) -> None:
    """The preset's machine builds with ``params``, else the parameter that alone makes it
    fail is named (``params.vram``: a VRAM size no granule divides), with what the build said;
    checked here, where the user's parameter is known, not later at the device it became."""
    error = build_refusal(spec)
    if error is None:
        return
    for key, value in params.items():
        alone = build_refusal(func(**{key: value}))
        if alone is not None:
            raise ConfigError(
                source,
                f"params.{key}",
                f"expected a value preset {name!r} builds with, found {show_value(value)} "
                f"({_reason(alone)})",
            )
    raise ConfigError(
        source,
        "params",
        f"expected parameters preset {name!r} builds with, found "
        f"{show_value(dict(params))} ({_reason(error)})",
    )


def _reason(error: ConfigError | ValueError) -> str:
    if isinstance(error, ConfigError):
        return f"{error.where}: {error.message}" if error.where else error.message
    return str(error)


def platform_from_dict(data: Mapping[str, Any], source: str = "platform") -> AnySpec:
    """Validate a parsed platform file (see the module docstring) with one-line errors."""
    if "preset" in data:
        extra = set(data) - {"preset", "params"}
        if extra:
            key = sorted(extra)[0]
            raise ConfigError(
                source, key, f"expected only 'preset' and 'params' in a preset file, found {key!r}"
            )
        return _preset(data["preset"], data.get("params", {}), source)
    kind = data.get("kind", "node")
    if kind not in ("node", "cluster"):
        raise ConfigError(source, "kind", f"expected 'node' or 'cluster', found {kind!r}")
    model: type[PlatformSpec | ClusterSpec] = ClusterSpec if kind == "cluster" else PlatformSpec
    try:
        return model.model_validate(dict(data), context=STRICT_UNITS)
    except ValidationError as e:
        raise config_error(e, source, model=model) from None


def load_platform(path: str | Path) -> AnySpec:
    """Read a TOML platform file; :class:`ConfigError` (one line, file and field) on error."""
    source = str(path)
    data = read_toml(path, what="a platform file")
    return platform_from_dict(data, source)


def dump_platform(spec: AnySpec) -> str:
    """``spec`` as a TOML platform file (every field, exact unit strings); loads back equal."""
    return tomli_w.dumps(spec.model_dump(mode="json", exclude_none=True))


def resolve_platform(name_or_path: str | Path, **params: Any) -> AnySpec:
    """A preset by name (with ``params``), or a platform file by path."""
    if isinstance(name_or_path, str) and name_or_path in PRESETS:
        return _preset(name_or_path, params, f"preset {name_or_path}")
    if params:
        raise ConfigError(str(name_or_path), "params", "expected no parameters for a file")
    return load_platform(name_or_path)
