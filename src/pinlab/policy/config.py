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
    [proposals.pin-vram-percent]              # xe's out-of-tree dma-buf pin budget
    percent = 50                              # of each device's VRAM; 0 = no limit
    [proposals.dmem-pinning]                  # RFC: pins charged to dmem, refused above min
    [proposals.dmem-peak]                     # the 7.3 dmem.peak file on an earlier preset

:func:`load_policy` reads the file through :func:`~pinlab.tomlfile.read_toml` and validates it;
every problem is one :class:`~pinlab.errors.ConfigError` line (:class:`PolicyError` for the
policy's own rules) naming the file, the field path (TOML key syntax), what was expected and
what was found -- ``desktop.toml: users.alice.memlock: expected a size like "64MiB" or
"unlimited", found "lots"`` -- and a TOML syntax error names the line and column. Sizes are
:mod:`pinlab.units` sizes plus the kernel's ``memparse`` suffixes; a limit above 2^64-1
(``RLIM_INFINITY``, or what ``memparse`` would wrap) is refused. :func:`apply_policy` puts a
validated policy onto a kernel + :class:`~pinlab.policy.cgroup.CgroupTree` +
:class:`~pinlab.policy.dmem.DmemCgroupController` and returns the live proposals and the
users' process settings (this layer cannot spawn processes; :meth:`AppliedPolicy.spawn_args`
gives ``System.spawn`` its keyword arguments).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
)

from pinlab.errors import ConfigError, config_error, show_value, toml_path
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
from pinlab.policy.proposals import PROPOSALS, ProposalSite
from pinlab.policy.proposals.pin_vram_percent import DEFAULT_PERCENT
from pinlab.tomlfile import parse_toml, read_toml
from pinlab.units import UnitError, compact_size, parse_limit, parse_size, unit_validator

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
    "load_policy",
    "parse_policy",
    "preview_policy",
]

CAPABILITIES = {"CAP_IPC_LOCK": CAP_IPC_LOCK, "CAP_SYS_RESOURCE": CAP_SYS_RESOURCE}
DMEM_FILES = ("dmem.min", "dmem.low", "dmem.max", "dmem.pin.max")
DMEM_PIN_MAX = "dmem-pin-max"
_INTERFACE_FILES = frozenset((*DMEM_FILES, "dmem.current", "dmem.capacity"))
"""dmem's interface files: a cgroup of one of these names would collide with the file
(``cgroup_mkdir`` answers ``-EEXIST``), as would any ``cgroup.*`` name."""


class PolicyError(ConfigError):
    """A policy file problem, as one line: ``FILE: FIELD: expected ..., found ...``."""

    @classmethod
    def of(cls, error: ConfigError) -> PolicyError:
        """``error`` (say, from :func:`~pinlab.errors.config_error`) as a policy error."""
        return cls(error.source, error.where, error.message)


# -- sizes ---------------------------------------------------------------------------------------

_RLIMIT_BOUND = "RLIM_INFINITY (2^64-1)"
_DMEM_BOUND = "2^64-1, the largest value memparse reads without wrapping"


def _limit(word: str, bound: str) -> Any:
    """A validator of a size that may be ``word`` (no limit, None), with memparse suffixes."""

    def parse(value: object) -> int | None:
        if value is None:  # already parsed (a scalar memlock expanded to soft = hard)
            return None
        return parse_limit(value, unlimited=word, bound=bound)

    return unit_validator(parse)


def _capacity(value: object) -> int:
    return parse_size(value, memparse=True)


MemlockSize = Annotated[int | None, BeforeValidator(_limit("unlimited", _RLIMIT_BOUND))]
"""RLIMIT_MEMLOCK in bytes, at most ``RLIM_INFINITY``; None is ``RLIM_INFINITY``."""
CapSize = Annotated[
    int | None, BeforeValidator(_limit("unlimited", "2^64-1 bytes, the largest size"))
]
Capacity = Annotated[int, BeforeValidator(unit_validator(_capacity))]


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
    """``<region> <bytes|max>``; the value below 2^64, so that ``memparse`` (which wraps at
    64 bits, ``lib/cmdline.c``) reads the number written, never 0 for 2^64."""
    parts = value.split() if isinstance(value, str) else []
    if len(parts) != 2:
        raise UnitError('a line "<region> <bytes|max>" like "drm/0000:03:00.0/vram 2GiB"', value)
    region, raw = parts
    try:
        size = parse_limit(raw, unlimited="max", bound=_DMEM_BOUND)
    except UnitError as e:
        raise UnitError(
            f'a value in bytes, K/M/G, KiB/MiB/GiB or "max" after {region}', raw, e.detail
        ) from None
    return DmemLine(region, size)


def _as_list(value: object) -> object:
    """A single line (or a multi-line string) may stand for a list of lines."""
    if isinstance(value, str):
        lines = [line for line in value.splitlines() if line.strip()]
        return lines if len(lines) > 1 else [value]
    return value


DmemLines = Annotated[
    list[Annotated[DmemLine, BeforeValidator(unit_validator(_dmem_line))]],
    BeforeValidator(_as_list),
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


_MEMLOCK = _limit("unlimited", _RLIMIT_BOUND)


def _memlock(value: object, info: ValidationInfo) -> object:
    """A scalar memlock is soft = hard."""
    if isinstance(value, dict):
        return value
    size = _MEMLOCK(value, info)
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


class PinVramPercentSpec(_Strict):
    enabled: StrictBool = True
    percent: int = Field(default=DEFAULT_PERCENT, ge=0, le=100, strict=True)
    drivers: list[str] = ["xe"]


class DmemPinningSpec(_Strict):
    enabled: StrictBool = True


class DmemPeakSpec(_Strict):
    enabled: StrictBool = True


class ProposalsSpec(_Strict):
    """Which proposals are on (a table present and not ``enabled = false``): a field per
    proposal of :data:`~pinlab.policy.proposals.PROPOSALS`, its id the alias."""

    memlock_dmabuf_pins: MemlockDmabufPinsSpec | None = Field(
        default=None, alias="memlock-dmabuf-pins"
    )
    device_pin_cap: DevicePinCapSpec | None = Field(default=None, alias="device-pin-cap")
    revocable_pins: RevocablePinsSpec | None = Field(default=None, alias="revocable-pins")
    dmem_pin_max: DmemPinMaxSpec | None = Field(default=None, alias="dmem-pin-max")
    pin_vram_percent: PinVramPercentSpec | None = Field(default=None, alias="pin-vram-percent")
    dmem_pinning: DmemPinningSpec | None = Field(default=None, alias="dmem-pinning")
    dmem_peak: DmemPeakSpec | None = Field(default=None, alias="dmem-peak")

    def enabled(self) -> dict[str, BaseModel]:
        """Proposal id → its settings, for the proposals switched on, in registry order."""
        specs: dict[str | None, BaseModel | None] = {
            info.alias: getattr(self, name) for name, info in type(self).model_fields.items()
        }
        return {
            name: spec
            for name in PROPOSALS
            if (spec := specs[name]) is not None and getattr(spec, "enabled", True)
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


def parse_policy(text: str, source: str = "<policy>") -> PolicyConfig:
    """Validate policy ``text``; ``source`` names it in error messages (a file name).

    Raises :class:`~pinlab.errors.ConfigError` for text that is not TOML
    (:func:`~pinlab.tomlfile.parse_toml`), :class:`PolicyError` for a policy that is not valid.
    """
    return _validate(parse_toml(text, source), source)


def load_policy(path: str | Path) -> PolicyConfig:
    """Read and validate a policy file (:func:`~pinlab.tomlfile.read_toml`'s errors for a
    missing or unreadable file, :class:`PolicyError` for an invalid policy)."""
    return _validate(read_toml(path, what="a TOML policy file"), str(path))


def _validate(data: dict[str, Any], source: str) -> PolicyConfig:
    try:
        config = PolicyConfig.model_validate(data)
    except ValidationError as e:
        raise PolicyError.of(config_error(e, source, model=PolicyConfig)) from None
    _check_references(config, source)
    return config


def _check_references(config: PolicyConfig, source: str) -> None:
    """Cross-field rules pydantic cannot see, with the same one-line messages."""
    seen: dict[str, str] = {}
    for key in config.cgroups:
        parts = _path_parts(key)
        where = toml_path(("cgroups", key))
        if not parts:
            raise PolicyError(
                source,
                where,
                "expected a cgroup below the root (the root has no dmem.min/low/max), "
                f"found {show_value(key)}",
            )
        bad = next((p for p in parts if not _is_cgroup_name(p)), None)
        if bad is not None:
            raise PolicyError(
                source,
                where,
                "expected a path of cgroup names (no newline, not . or .., not the name of an "
                f"interface file), found {show_value(bad)}",
            )
        norm = _norm(key)
        if norm in seen:
            raise PolicyError(
                source,
                where,
                "expected each cgroup once, found it again "
                f"(also {toml_path(('cgroups', seen[norm]))})",
            )
        seen[norm] = key
    declared = ", ".join(config.regions) or "none"
    pin_max_on = DMEM_PIN_MAX in config.proposals.enabled()
    for key, spec in config.cgroups.items():
        for filename, lines in spec.files().items():
            for i, line in enumerate(lines):
                where = toml_path(("cgroups", key, filename, i))
                if line.region not in config.regions:
                    raise PolicyError(
                        source,
                        where,
                        f"expected a region declared in [regions] ({declared}), "
                        f"found {show_value(line.region)}",
                    )
                if filename == "dmem.pin.max" and not pin_max_on:
                    raise PolicyError(
                        source,
                        where,
                        f"expected [proposals.{DMEM_PIN_MAX}] to be on (dmem.pin.max is its "
                        "file), found it off",
                    )
    for name, region_size in config.regions.items():
        if region_size <= 0:
            raise PolicyError(
                source,
                toml_path(("regions", name)),
                "expected a capacity above 0 (a region of size 0 is no region), "
                f"found {show_value(region_size)}",
            )
    paths = set(config.cgroup_paths()) | {"/"}
    uids: dict[int, str] = {}
    for name, user in config.users.items():
        if _norm(user.cgroup) not in paths:
            raise PolicyError(
                source,
                toml_path(("users", name, "cgroup")),
                "expected a cgroup of [cgroups] or one of its parents, "
                f"found {show_value(user.cgroup)}",
            )
        if user.uid in uids:
            raise PolicyError(
                source,
                toml_path(("users", name, "uid")),
                f"expected a uid of its own, found {user.uid} "
                f"(also {toml_path(('users', uids[user.uid], 'uid'))})",
            )
        uids[user.uid] = name
        soft, hard = user.memlock.as_rlimit()
        if soft > hard:
            raise PolicyError(
                source,
                toml_path(("users", name, "memlock")),
                f"expected soft <= hard, found soft {compact_size(user.memlock.soft)} > "
                f"hard {compact_size(user.memlock.hard)}",
            )
    cap = config.proposals.device_pin_cap
    if cap is not None:
        for device in cap.per_device:
            if not device:
                raise PolicyError(
                    source,
                    "proposals.device-pin-cap.per_device",
                    'expected device names, found ""',
                )


def _is_cgroup_name(name: str) -> bool:
    """What ``cgroup_mkdir`` accepts as a name (``-EINVAL`` for a newline, ``-EEXIST`` for
    ``.``, ``..`` and the names of interface files)."""
    return (
        "\n" not in name
        and name not in (".", "..")
        and not name.startswith("cgroup.")
        and name not in _INTERFACE_FILES
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
                source,
                "cgroups",
                "expected a kernel with the dmem controller (profile 6.14 or later) for dmem "
                f"limits, found kernel {kernel.profile.name}",
            )
        if dmem is None:
            raise PolicyError(
                source, "cgroups", "expected a dmem controller to apply dmem limits to, found none"
            )
    if dmem is not None:
        registered = {r.name for r in dmem.regions}
        for name in config.regions:
            if name not in registered:
                have = ", ".join(sorted(registered)) or "none"
                raise PolicyError(
                    source,
                    toml_path(("regions", name)),
                    f"expected a region registered on this machine ({have}), "
                    f"found {show_value(name)}",
                )
    for path in config.cgroup_paths():
        if not tree.exists(path):
            try:
                tree.mkdir(path)
            except KernelError as e:  # validated names: only a clash with this tree's files
                raise PolicyError(source, toml_path(("cgroups", path)), str(e)) from None
    applied = AppliedPolicy(config, kernel, tree, dmem)
    site = ProposalSite(kernel, tree, dmem, list(ttm_devices))
    wanted = None if only_proposals is None else set(only_proposals)
    try:
        for name, spec in config.proposals.enabled().items():
            if wanted is not None and name not in wanted:
                continue
            applied.proposals[name] = PROPOSALS[name].from_policy(spec, site)
    except ValueError as e:
        applied.uninstall()
        raise PolicyError(source, f"proposals.{name}", str(e)) from None
    for key, spec in config.cgroups.items():
        for filename, lines in spec.files().items():
            for i, line in enumerate(lines):
                try:
                    tree.write(_norm(key), filename, line.render())
                except KernelError as e:
                    where = toml_path(("cgroups", key, filename, i))
                    raise PolicyError(source, where, str(e)) from None
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
