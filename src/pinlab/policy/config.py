"""Administrator policy files: the cgroup tree with dmem limits, users with RLIMIT_MEMLOCK and
capabilities, and which never-merged proposals are on (TOML, validated with pydantic v2).

A policy file (see ``examples/policy/desktop.toml``)::

    description = "a shared workstation"

    [regions]                                   # device memory regions the limits name
    "drm/0000:03:00.0/vram" = "16GiB"           # name = capacity

    [cgroups."user.slice/user-1002.slice"]      # key = cgroup path; parents are implied
    "dmem.max" = "drm/0000:03:00.0/vram 4GiB"   # one "<region> <value>" line, or a list
    "dmem.pin.max" = ["drm/0000:03:00.0/vram 1GiB"]   # needs [proposals.dmem-pin-max]
    # also "dmem.min", "dmem.low"; values: bytes, K/M/G (memparse), KiB/MiB/GiB, KB/MB/GB, max

    [users.mallory]
    uid = 1002
    memlock = "8MiB"          # RLIMIT_MEMLOCK soft = hard; "unlimited"; or {soft=, hard=}
    capabilities = []         # "CAP_IPC_LOCK", "CAP_SYS_RESOURCE"
    cgroup = "user.slice/user-1002.slice"   # where the user's processes start

    [proposals.memlock-dmabuf-pins]           # a table switches a proposal on
    [proposals.device-pin-cap]
    max_per_device = "8GiB"
    per_device = { gpu0 = "4GiB" }
    [proposals.revocable-pins]                # preset 7.1 only
    enabled = false                           # keep the table, switch it off

:func:`load_policy` reads and validates a file; every problem is one :class:`PolicyError` line
naming the file, the field path (TOML key syntax), what was expected and what was found --
``desktop.toml: users.alice.memlock: expected a size like "64MiB" or "unlimited", found
"lots"`` -- and a TOML syntax error names the line and column. :func:`apply_policy` puts a
validated policy onto a kernel + :class:`~pinlab.policy.cgroup.CgroupTree` +
:class:`~pinlab.policy.dmem.DmemCgroupController` and returns the live proposals and the
users' process settings (this layer cannot spawn processes; :meth:`AppliedPolicy.spawn_args`
gives ``System.spawn`` its keyword arguments).
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
)

from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import (
    CAP_IPC_LOCK,
    CAP_SYS_RESOURCE,
    DEFAULT_MEMLOCK,
    RLIM_INFINITY,
    Kernel,
)
from pinlab.kernel.ttm import TtmDevice
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.dmem import DmemCgroupController
from pinlab.policy.proposals import (
    PROPOSALS,
    device_pin_cap,
    memlock_dmabuf_pins,
    revocable_pins,
)

__all__ = [
    "CAPABILITIES",
    "DMEM_FILES",
    "AppliedPolicy",
    "CgroupSpec",
    "DmemLine",
    "MemlockSpec",
    "PolicyConfig",
    "PolicyError",
    "UserSpec",
    "apply_policy",
    "format_size",
    "load_policy",
    "parse_policy",
    "parse_size",
    "preview_policy",
]

CAPABILITIES = {"CAP_IPC_LOCK": CAP_IPC_LOCK, "CAP_SYS_RESOURCE": CAP_SYS_RESOURCE}
DMEM_FILES = ("dmem.min", "dmem.low", "dmem.max", "dmem.pin.max")
DMEM_PIN_MAX = "dmem-pin-max"

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "m": 1 << 20,
    "g": 1 << 30,
    "t": 1 << 40,
    "p": 1 << 50,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "pib": 1 << 50,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


class PolicyError(Exception):
    """A policy file problem, as one line: ``FILE: FIELD: expected ..., found ...``."""


# -- sizes ---------------------------------------------------------------------------------------


def _found(value: object) -> str:
    """A value as the message shows it (strings in double quotes, like the file)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def parse_size(value: object, *, unlimited: str | None = None) -> int | None:
    """Bytes from ``value``: an integer, or a string with an optional unit -- ``K``/``M``/``G``
    (binary, as the kernel's memparse), ``KiB``/``MiB``/``GiB``/``TiB`` (binary),
    ``KB``/``MB``/``GB``/``TB`` (decimal), ``B``. ``unlimited`` names the word for "no limit"
    (``"unlimited"``, ``"max"``), returned as None. ``ValueError`` otherwise."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(value)
        return value
    if not isinstance(value, str):
        raise ValueError(value)
    if unlimited is not None and value.strip().lower() == unlimited:
        return None
    m = _SIZE_RE.match(value)
    if m is None or m.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(value)
    number = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if not math.isfinite(number) or number != int(number):
        raise ValueError(value)
    return int(number)


def format_size(value: int | None, *, unlimited: str = "unlimited") -> str:
    """``64MiB``, ``1.5GiB``, ``4096B``; None as ``unlimited``."""
    if value is None:
        return unlimited
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale and value % (scale // 16) == 0:
            text = f"{value / scale:.4f}".rstrip("0").rstrip(".")
            return f"{text}{unit}"
    return f"{value}B"


def _size_or(word: str) -> Any:
    def parse(value: object) -> int | None:
        if value is None:  # already parsed (a scalar memlock expanded to soft = hard)
            return None
        try:
            return parse_size(value, unlimited=word)
        except ValueError:
            raise ValueError(
                f'expected a size like "64MiB" or "{word}", found {_found(value)}'
            ) from None

    return parse


def _size_only(value: object) -> int:
    try:
        size = parse_size(value)
    except ValueError:
        raise ValueError(f'expected a size like "16GiB", found {_found(value)}') from None
    assert size is not None
    return size


MemlockSize = Annotated[int | None, BeforeValidator(_size_or("unlimited"))]
"""RLIMIT_MEMLOCK in bytes; None is ``RLIM_INFINITY``."""
CapSize = Annotated[int | None, BeforeValidator(_size_or("unlimited"))]
Capacity = Annotated[int, BeforeValidator(_size_only)]


# -- dmem lines ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DmemLine:
    """One ``<region> <value>`` line of a dmem file; ``value`` None is ``max``."""

    region: str
    value: int | None

    def render(self) -> str:
        """The line as written to the cgroup file (bytes, or ``max``)."""
        return f"{self.region} {'max' if self.value is None else self.value}"


def _dmem_line(value: object) -> DmemLine:
    expected = 'expected a line "<region> <bytes|max>" like "drm/0000:03:00.0/vram 2GiB"'
    if not isinstance(value, str):
        raise ValueError(f"{expected}, found {_found(value)}")
    parts = value.split()
    if len(parts) != 2:
        raise ValueError(f"{expected}, found {_found(value)}")
    region, raw = parts
    try:
        size = parse_size(raw, unlimited="max")
    except ValueError:
        raise ValueError(
            f'expected a value in bytes, K/M/G, KiB/MiB/GiB or "max" after {region}, '
            f"found {_found(raw)}"
        ) from None
    return DmemLine(region, size)


def _as_list(value: object) -> object:
    """A single line (or a multi-line string) may stand for a list of lines."""
    if isinstance(value, str):
        lines = [line for line in value.splitlines() if line.strip()]
        return lines if len(lines) > 1 else [value]
    return value


DmemLines = Annotated[
    list[Annotated[DmemLine, BeforeValidator(_dmem_line)]], BeforeValidator(_as_list)
]


# -- the schema ----------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, arbitrary_types_allowed=True)


class MemlockSpec(_Strict):
    """RLIMIT_MEMLOCK as soft and hard limits (None: unlimited)."""

    soft: MemlockSize
    hard: MemlockSize

    def as_rlimit(self) -> tuple[int, int]:
        soft = RLIM_INFINITY if self.soft is None else self.soft
        hard = RLIM_INFINITY if self.hard is None else self.hard
        return soft, hard


def _memlock(value: object) -> object:
    if isinstance(value, dict):
        return value
    size = _size_or("unlimited")(value)
    return {"soft": size, "hard": size}


class UserSpec(_Strict):
    """One user: uid, RLIMIT_MEMLOCK, capabilities and the cgroup their processes start in."""

    uid: Annotated[StrictInt, Field(ge=0, lt=2**32 - 1)]
    memlock: Annotated[MemlockSpec, BeforeValidator(_memlock)] = Field(
        default_factory=lambda: MemlockSpec(soft=DEFAULT_MEMLOCK, hard=DEFAULT_MEMLOCK)
    )
    capabilities: list[Literal["CAP_IPC_LOCK", "CAP_SYS_RESOURCE"]] = []
    cgroup: str = "/"

    @property
    def caps(self) -> frozenset[int]:
        return frozenset(CAPABILITIES[c] for c in self.capabilities)


class CgroupSpec(_Strict):
    """The dmem settings of one cgroup (each a list of ``<region> <value>`` lines)."""

    dmem_min: DmemLines = Field(default=[], alias="dmem.min")
    dmem_low: DmemLines = Field(default=[], alias="dmem.low")
    dmem_max: DmemLines = Field(default=[], alias="dmem.max")
    dmem_pin_max: DmemLines = Field(default=[], alias="dmem.pin.max")
    description: str = ""

    def files(self) -> dict[str, list[DmemLine]]:
        """Non-empty settings by cgroup file name."""
        out = {
            "dmem.min": self.dmem_min,
            "dmem.low": self.dmem_low,
            "dmem.max": self.dmem_max,
            "dmem.pin.max": self.dmem_pin_max,
        }
        return {name: lines for name, lines in out.items() if lines}


class MemlockDmabufPinsSpec(_Strict):
    enabled: StrictBool = True
    device_memory_only: StrictBool = False


class DevicePinCapSpec(_Strict):
    enabled: StrictBool = True
    max_per_device: CapSize = None
    per_device: dict[str, CapSize] = {}


class RevocablePinsSpec(_Strict):
    enabled: StrictBool = True


class DmemPinMaxSpec(_Strict):
    enabled: StrictBool = True


class ProposalsSpec(_Strict):
    """Which proposals are on (a table present and not ``enabled = false``)."""

    memlock_dmabuf_pins: MemlockDmabufPinsSpec | None = Field(
        default=None, alias="memlock-dmabuf-pins"
    )
    device_pin_cap: DevicePinCapSpec | None = Field(default=None, alias="device-pin-cap")
    revocable_pins: RevocablePinsSpec | None = Field(default=None, alias="revocable-pins")
    dmem_pin_max: DmemPinMaxSpec | None = Field(default=None, alias="dmem-pin-max")

    def enabled(self) -> dict[str, BaseModel]:
        """Proposal id → its settings, for the proposals switched on, in registry order."""
        specs: dict[str, BaseModel | None] = {
            "memlock-dmabuf-pins": self.memlock_dmabuf_pins,
            "device-pin-cap": self.device_pin_cap,
            "revocable-pins": self.revocable_pins,
            DMEM_PIN_MAX: self.dmem_pin_max,
        }
        return {
            name: spec
            for name, spec in specs.items()
            if spec is not None and getattr(spec, "enabled", True)
        }


class PolicyConfig(_Strict):
    """A whole policy file."""

    description: str = ""
    regions: dict[str, Capacity] = {}
    cgroups: dict[str, CgroupSpec] = {}
    users: dict[str, UserSpec] = {}
    proposals: ProposalsSpec = Field(default_factory=ProposalsSpec)

    def cgroup_paths(self) -> list[str]:
        """Every cgroup the file creates, parents first (``/a``, ``/a/b``), normalised."""
        paths: dict[str, None] = {}
        for key in self.cgroups:
            parts = _path_parts(key)
            for i in range(1, len(parts) + 1):
                paths["/" + "/".join(parts[:i])] = None
        return list(paths)


def _path_parts(path: str) -> list[str]:
    return [p for p in path.strip().split("/") if p]


def _norm(path: str) -> str:
    return "/" + "/".join(_path_parts(path))


# -- loading -------------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    return part if _BARE_KEY.match(part) else json.dumps(part, ensure_ascii=False)


def _loc_path(loc: Iterable[str | int]) -> str:
    text = ""
    for part in loc:
        key = _key(part)
        text += key if key.startswith("[") else (f".{key}" if text else key)
    return text or "(top level)"


_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}


def _error_message(error: Mapping[str, Any]) -> str:
    kind = str(error["type"])
    found = _found(error.get("input"))
    ctx = error.get("ctx") or {}
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    if kind == "missing":
        return "expected a value, found nothing"
    if kind == "extra_forbidden":
        return f"unknown field, found {found}"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected', '')}, found {found}"
    if kind in ("greater_than_equal", "less_than", "greater_than", "less_than_equal"):
        bound = {
            "greater_than_equal": f">= {ctx.get('ge')}",
            "greater_than": f"> {ctx.get('gt')}",
            "less_than": f"< {ctx.get('lt')}",
            "less_than_equal": f"<= {ctx.get('le')}",
        }[kind]
        return f"expected a number {bound}, found {found}"
    if kind in _TYPE_NAMES:
        return f"expected {_TYPE_NAMES[kind]}, found {found}"
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, found {found}"


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


def _allowed_fields(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The field names (aliases) the table at ``loc[:-1]`` accepts, for unknown-field
    messages; walks models, ``dict[str, X]`` and ``list[X]`` along the error location."""
    ann: Any = model
    for part in loc[:-1]:
        ann = _unwrap(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            match = next(
                (f for name, f in ann.model_fields.items() if part in (f.alias, name)), None
            )
            if match is None:
                return []
            ann = match.annotation
        elif get_origin(ann) is dict:
            ann = get_args(ann)[1]
        elif get_origin(ann) is list:
            ann = get_args(ann)[0]
        else:
            return []
    ann = _unwrap(ann)
    if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
        return []
    return [f.alias or name for name, f in ann.model_fields.items()]


def _validation_message(source: str, e: ValidationError, model: type[BaseModel]) -> str:
    errors = e.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    message = _error_message(first)
    if first["type"] == "extra_forbidden":
        allowed = _allowed_fields(model, loc)
        if allowed:
            message = f"unknown field (expected one of {', '.join(allowed)})"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {_loc_path(loc)}: {message}{more}"


_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def parse_policy(text: str, source: str = "<policy>") -> PolicyConfig:
    """Validate policy ``text``; ``source`` names it in error messages (a file name)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_POS.search(msg)
        if m is not None:
            where = f"line {m.group(1)}, column {m.group(2)}"
            raise PolicyError(f"{source}: {where}: invalid TOML: {msg[: m.start()]}") from None
        raise PolicyError(f"{source}: invalid TOML: {msg}") from None
    try:
        config = PolicyConfig.model_validate(data)
    except ValidationError as e:
        raise PolicyError(_validation_message(source, e, PolicyConfig)) from None
    _check_references(config, source)
    return config


def load_policy(path: str | Path) -> PolicyConfig:
    """Read and validate a policy file (``PolicyError`` for a missing or invalid file)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyError(f"{source}: no such file (expected a TOML policy file)") from None
    except IsADirectoryError:
        raise PolicyError(f"{source}: is a directory (expected a TOML policy file)") from None
    except UnicodeDecodeError as e:
        raise PolicyError(f"{source}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise PolicyError(f"{source}: cannot read: {e.strerror}") from None
    return parse_policy(text, source)


def _check_references(config: PolicyConfig, source: str) -> None:
    """Cross-field rules pydantic cannot see, with the same one-line messages."""
    seen: dict[str, str] = {}
    for key in config.cgroups:
        parts = _path_parts(key)
        where = f"cgroups.{_key(key)}"
        if not parts:
            raise PolicyError(
                f"{source}: {where}: expected a cgroup below the root (the root has no "
                f"dmem.min/low/max), found {_found(key)}"
            )
        bad = next((p for p in parts if p in (".", "..") or p.startswith("cgroup.")), None)
        if bad is not None:
            raise PolicyError(
                f"{source}: {where}: expected a path of cgroup names, found {_found(bad)}"
            )
        norm = _norm(key)
        if norm in seen:
            raise PolicyError(
                f"{source}: {where}: expected each cgroup once, found it again "
                f"(also cgroups.{_key(seen[norm])})"
            )
        seen[norm] = key
    declared = ", ".join(config.regions) or "none"
    pin_max_on = DMEM_PIN_MAX in config.proposals.enabled()
    for key, spec in config.cgroups.items():
        for filename, lines in spec.files().items():
            for i, line in enumerate(lines):
                where = f"cgroups.{_key(key)}.{_key(filename)}[{i}]"
                if line.region not in config.regions:
                    raise PolicyError(
                        f"{source}: {where}: expected a region declared in [regions] "
                        f"({declared}), found {_found(line.region)}"
                    )
                if filename == "dmem.pin.max" and not pin_max_on:
                    raise PolicyError(
                        f"{source}: {where}: expected [proposals.{DMEM_PIN_MAX}] to be on "
                        f"(dmem.pin.max is its file), found it off"
                    )
    for name, region_size in config.regions.items():
        if region_size <= 0:
            raise PolicyError(
                f"{source}: regions.{_key(name)}: expected a capacity above 0 (a region of "
                f"size 0 is no region), found {_found(region_size)}"
            )
    paths = set(config.cgroup_paths()) | {"/"}
    uids: dict[int, str] = {}
    for name, user in config.users.items():
        where = f"users.{_key(name)}"
        if _norm(user.cgroup) not in paths:
            raise PolicyError(
                f"{source}: {where}.cgroup: expected a cgroup of [cgroups] or one of its "
                f"parents, found {_found(user.cgroup)}"
            )
        if user.uid in uids:
            raise PolicyError(
                f"{source}: {where}.uid: expected a uid of its own, found {user.uid} "
                f"(also users.{_key(uids[user.uid])}.uid)"
            )
        uids[user.uid] = name
        soft, hard = user.memlock.as_rlimit()
        if soft > hard:
            raise PolicyError(
                f"{source}: {where}.memlock: expected soft <= hard, found soft "
                f"{format_size(user.memlock.soft)} > hard {format_size(user.memlock.hard)}"
            )
    cap = config.proposals.device_pin_cap
    if cap is not None:
        for device in cap.per_device:
            if not device:
                raise PolicyError(
                    f"{source}: proposals.device-pin-cap.per_device: expected device names, "
                    'found ""'
                )


# -- applying ------------------------------------------------------------------------------------


@dataclass
class AppliedPolicy:
    """A policy put onto a machine: the config, the live proposal objects by id, the users."""

    config: PolicyConfig
    kernel: Kernel
    tree: CgroupTree
    dmem: DmemCgroupController | None
    proposals: dict[str, Any] = field(default_factory=dict)

    @property
    def users(self) -> dict[str, UserSpec]:
        return self.config.users

    def spawn_args(self, user: str) -> dict[str, Any]:
        """Keyword arguments for ``System.spawn`` for a process of ``user`` (``KeyError`` for an
        unknown user): ``uid``, ``caps``, ``memlock`` (soft, hard) and ``cgroup``."""
        spec = self.config.users[user]
        return {
            "uid": spec.uid,
            "caps": spec.caps,
            "memlock": spec.memlock.as_rlimit(),
            "cgroup": self.tree.lookup(_norm(spec.cgroup)),
        }

    def spawn(self, system: Any, user: str, comm: str) -> Any:
        """Start a process of ``user`` on ``system`` (a ``pinlab.uapi.System``) with the user's
        credentials and limits, attached to the user's cgroup."""
        args = self.spawn_args(user)
        proc = system.spawn(comm, **args)
        self.tree.attach(proc, args["cgroup"])
        return proc

    def uninstall(self) -> None:
        """Switch every proposal off again (cgroup settings stay)."""
        for policy in self.proposals.values():
            policy.uninstall()
        self.proposals.clear()


def apply_policy(
    config: PolicyConfig,
    kernel: Kernel,
    tree: CgroupTree,
    dmem: DmemCgroupController | None = None,
    *,
    ttm_devices: Iterable[TtmDevice] = (),
    source: str = "policy",
    only_proposals: Iterable[str] | None = None,
) -> AppliedPolicy:
    """Apply a validated policy: check the regions exist on this machine, create the cgroups
    (parents first), switch the proposals on, write the dmem files, create the users'
    ``user_struct``. ``ttm_devices`` are the GPUs ``revocable-pins`` acts on;
    ``only_proposals`` restricts which enabled proposals are installed (None: all). Problems
    are one :class:`PolicyError` line naming ``source`` and the field."""
    has_limits = any(spec.files() for spec in config.cgroups.values())
    if has_limits:
        if not kernel.profile.dmem:
            raise PolicyError(
                f"{source}: cgroups: expected a kernel with the dmem controller (profile 6.14 "
                f"or later) for dmem limits, found kernel {kernel.profile.name}"
            )
        if dmem is None:
            raise PolicyError(
                f"{source}: cgroups: expected a dmem controller to apply dmem limits to, found none"
            )
    if dmem is not None:
        registered = {r.name for r in dmem.regions}
        for name in config.regions:
            if name not in registered:
                have = ", ".join(sorted(registered)) or "none"
                raise PolicyError(
                    f"{source}: regions.{_key(name)}: expected a region registered on this "
                    f"machine ({have}), found {_found(name)}"
                )
    for path in config.cgroup_paths():
        if not tree.exists(path):
            tree.mkdir(path)
    applied = AppliedPolicy(config, kernel, tree, dmem)
    devices = list(ttm_devices)
    wanted = None if only_proposals is None else set(only_proposals)
    try:
        for name, spec in config.proposals.enabled().items():
            if wanted is not None and name not in wanted:
                continue
            applied.proposals[name] = _install(name, spec, kernel, tree, dmem, devices)
    except ValueError as e:
        applied.uninstall()
        raise PolicyError(f"{source}: proposals.{name}: {e}") from None
    for key, spec in config.cgroups.items():
        for filename, lines in spec.files().items():
            for i, line in enumerate(lines):
                try:
                    tree.write(_norm(key), filename, line.render())
                except KernelError as e:
                    where = f"cgroups.{_key(key)}.{_key(filename)}[{i}]"
                    raise PolicyError(f"{source}: {where}: {e}") from None
    for user in config.users.values():
        kernel.get_user(user.uid)
    return applied


def preview_policy(config: PolicyConfig, source: str = "policy") -> AppliedPolicy:
    """The policy on a machine of its own, for ``pinlab policy show``: a default-profile kernel
    whose dmem controller has exactly the regions the file declares, the cgroups and their
    settings applied, and of the proposals only ``dmem-pin-max`` (its files hold settings);
    the others need real devices and are listed from the file."""
    from pinlab.kernel.dmem import DmemRegion

    kernel = Kernel()
    tree = CgroupTree()
    dmem = DmemCgroupController(tree).install(kernel)
    for name, size in config.regions.items():
        dmem.register_region(DmemRegion(name, size))
    return apply_policy(config, kernel, tree, dmem, source=source, only_proposals=[DMEM_PIN_MAX])


def _install(
    name: str,
    spec: BaseModel,
    kernel: Kernel,
    tree: CgroupTree,
    dmem: DmemCgroupController | None,
    devices: list[TtmDevice],
) -> Any:
    if isinstance(spec, MemlockDmabufPinsSpec):
        return memlock_dmabuf_pins.install(kernel, device_memory_only=spec.device_memory_only)
    if isinstance(spec, DevicePinCapSpec):
        return device_pin_cap.install(kernel, spec.max_per_device, spec.per_device)
    if isinstance(spec, RevocablePinsSpec):
        if not devices:
            revocable_pins.RevocablePins.check_profile(kernel)
            raise ValueError("expected the GPUs' TTM devices to act on (ttm_devices), found none")
        return revocable_pins.install(kernel, devices)
    module = PROPOSALS[name]
    return module.install(kernel, tree, dmem=dmem)
