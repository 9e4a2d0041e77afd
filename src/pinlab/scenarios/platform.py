"""``[platform]`` of a scenario: a preset (or a platform file) and its patches, built into
the platform description the simulation runs on."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pinlab.errors import ConfigError, config_error, exactly_one
from pinlab.kernel.profile import PRESETS as KERNEL_PRESETS
from pinlab.platform.cluster import ClusterSpec
from pinlab.platform.presets import AnySpec, build_refusal, load_platform, platform_from_dict
from pinlab.platform.spec import PlatformSpec
from pinlab.scenarios.paths import quote
from pinlab.units import STRICT_UNITS

__all__ = ["PlatformConfig", "build_platform", "host_switches", "machine_error"]


class PlatformConfig(BaseModel):
    """``[platform]``: a preset with parameters (or a platform file) and patches."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, strict=True)

    preset: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    file: str | None = None
    devices: dict[str, dict[str, Any]] = Field(default_factory=dict)
    nics: dict[str, dict[str, Any]] = Field(default_factory=dict)
    add_switches: list[dict[str, Any]] = Field(default_factory=list)
    add_devices: list[dict[str, Any]] = Field(default_factory=list)
    add_nics: list[dict[str, Any]] = Field(default_factory=list)
    add_displays: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_source(self) -> PlatformConfig:
        exactly_one("'preset' and 'file'", self.preset, self.file)
        if self.file is not None and self.params:
            raise ValueError("expected no 'params' with 'file', found some")
        return self


def build_platform(cfg: PlatformConfig, source: str, base_dir: Path | None = None) -> AnySpec:
    """The platform description: the preset (or file), then the device/NIC patches and
    additions (for a cluster, to its node). :class:`ConfigError` naming ``platform.<field>``."""
    if cfg.file is not None:
        path = Path(cfg.file)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        spec = load_platform(path)
    else:
        try:
            spec = platform_from_dict({"preset": cfg.preset, "params": dict(cfg.params)}, source)
        except ConfigError as e:
            raise ConfigError(source, f"platform.{e.where}", e.message) from None
    node = spec.node if isinstance(spec, ClusterSpec) else spec
    patched = _patch_node(node, cfg, source)
    if patched is not node:  # what only building the patched node can check (a size's granule)
        refused = build_refusal(patched)
        if isinstance(refused, ConfigError):
            raise machine_error(refused, cfg, patched, source, base_dir)
        if refused is not None:
            raise ConfigError(source, "platform", str(refused))
    if isinstance(spec, ClusterSpec):
        return spec.model_copy(update={"node": patched})
    return patched


def _patch_node(node: PlatformSpec, cfg: PlatformConfig, source: str) -> PlatformSpec:
    if not (
        cfg.devices
        or cfg.nics
        or cfg.add_switches
        or cfg.add_devices
        or cfg.add_nics
        or cfg.add_displays
    ):
        return node
    data = node.model_dump(mode="json", exclude_none=True)
    for group, patches in (("devices", cfg.devices), ("nics", cfg.nics)):
        names = [d["name"] for d in data[group]]
        for name, fields in patches.items():
            if name == "*":
                data[group] = [{**d, **fields} for d in data[group]]
                continue
            if name not in names:
                raise ConfigError(
                    source,
                    f"platform.{group}.{quote(name)}",
                    f"expected one of the preset's {group} ({', '.join(names) or 'none'}), "
                    f"found {name!r}",
                )
            i = names.index(name)
            data[group][i] = {**data[group][i], **fields}
    for group, extra in (
        ("switches", cfg.add_switches),
        ("devices", cfg.add_devices),
        ("nics", cfg.add_nics),
        ("displays", cfg.add_displays),
    ):
        data[group] = [*data.get(group, []), *extra]
    try:
        return PlatformSpec.model_validate(data, context=STRICT_UNITS)
    except ValidationError as e:
        err = config_error(e, source, model=PlatformSpec)
        raise ConfigError(source, _user_field(err.where, node, cfg, data), err.message) from None


def host_switches(
    node: PlatformSpec, profile: str, own: Mapping[str, bool], cfg: PlatformConfig, source: str
) -> dict[str, bool]:
    """The kernel configuration switches of the platform's host (its ``[kernel_config]``,
    written by ``pinlab inspect``) that the scenario's ``[kernel]`` does not set, for a run
    under ``profile`` (``move_notify`` only where the profile has the option). A switch the
    scenario (or its variant, or a ``--set``) sets otherwise than the host's kernel is refused:
    the run would allow or refuse what the host's kernel does not (``kernel-semantics.md``
    §1.5). :class:`ConfigError` naming ``kernel.<switch>``."""
    if node.kernel_config is None:
        return {}
    host = node.kernel_config.for_profile(KERNEL_PRESETS[profile])
    for key, value in host.items():
        if key in own and own[key] is not value:
            option = f"{node.kernel_config.OPTIONS[key]}={'y' if value else 'n'}"
            where = f" of {cfg.file}" if cfg.file is not None else ""
            raise ConfigError(
                source,
                f"kernel.{key}",
                f"expected {toml_bool(value)}, the host kernel's ({option}: kernel_config.{key}"
                f"{where}), found {toml_bool(own[key])}; on a host platform a scenario runs "
                "under the host kernel's configuration",
            )
    return {k: v for k, v in host.items() if k not in own}


def toml_bool(value: bool) -> str:
    """``true`` / ``false``, as a TOML file writes it."""
    return "true" if value else "false"


_ITEM = re.compile(r"^(devices|nics|switches|displays)\[(\d+)\](.*)$")


def _user_field(where: str, node: PlatformSpec, cfg: PlatformConfig, data: dict[str, Any]) -> str:
    """Where the user wrote the field an error of the patched node is about: the patch by
    name (``platform.devices.gpu0.vram``), the ``"*"`` patch, or the added item
    (``platform.add_devices[0].driver``). A field of the preset no patch touched keeps the
    patched node's path."""
    m = _ITEM.match(where)
    if m:
        group, i, rest = m[1], int(m[2]), m[3]
        before = len(getattr(node, group))
        if i >= before:
            return f"platform.add_{group}[{i - before}]{rest}"
        patches: dict[str, dict[str, Any]] = getattr(cfg, group, {})
        name = data[group][i].get("name")
        for key in (name, "*"):
            if key in patches:
                return f"platform.{group}.{quote(str(key))}{rest}"
    return f"platform (patched {node.name}).{where}"


def machine_error(
    e: ConfigError, cfg: PlatformConfig, spec: AnySpec, source: str, base_dir: Path | None
) -> ConfigError:
    """A refusal by the machine's build -- a driver's of its device's sizes or options,
    raised as ``platform NAME`` -- named after the input the platform came from: its platform
    file, else the scenario's ``[platform]``."""
    node = spec.node if isinstance(spec, ClusterSpec) else spec
    if e.source not in (f"platform {spec.name}", f"platform {node.name}"):
        return e
    if cfg.file is not None:
        path = Path(cfg.file)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return ConfigError(str(path), e.where, e.message)
    # devices[0] (gpu0) is the device the scenario addresses as platform.devices.gpu0
    part = _PART.match(e.where)
    if part is not None:
        group, index, rest = part.group(1), int(part.group(2)), part.group(3)
        items = node.devices if group == "devices" else node.nics
        if index < len(items):
            return ConfigError(
                source, f"platform.{group}.{quote(items[index].name)}{rest}", e.message
            )
    return ConfigError(source, "platform", f"{e.where}: {e.message}" if e.where else e.message)


_PART = re.compile(r"^(devices|nics)\[(\d+)\](?: \([^)]*\))?(.*)$")
"""A build error's device or NIC: its group, index in the spec and the field below it."""
