"""Scenario files: TOML, validated into typed configuration with one-line errors.

A scenario describes a machine, a kernel, an administrator's policy and the tenants that run
on it, lists *variants* -- the same scenario with a few settings changed -- and states a claim
whose expectations the variants' outcomes decide (``[claim]``, :mod:`pinlab.scenarios.claimspec`;
the whole format with examples: ``docs/scenarios.md``)::

    [scenario]
    name = "desktop-pin-hog"
    duration = "100s"             # simulated time of each variant
    seed = 1                      # the same seed gives byte-identical summary.json
    sample_interval = "500ms"     # optional: time-series resolution (default duration/200)

    [claim]
    statement = "Without limits a pin-hog starves the compositor; each policy contains it."
    camp = "stability"            # stability | performance | mechanism | ai | settlement
    [[claim.expect]]
    variant = "none"
    metric = "tenant.compositor.denied.ENOMEM"
    op = ">"
    value = 0

    [platform]
    preset = "workstation"        # a platform preset: `pinlab platforms` lists them
    params = { resizable_bar = true }     # the preset's keyword parameters
    # or: file = "my-platform.toml" (relative to the scenario file)
    [platform.devices.gpu0]       # field overrides of a preset's device (DeviceSpec)
    driver = "amdgpu"
    [platform.nics.mlx5_0]        # ... of a NIC (NicSpec)
    odp = false
    [[platform.add_nics]]         # NICs, devices, switches, displays added to the node
    name = "efa0"                 #   (add_switches, add_devices, add_nics, add_displays)
    driver = "efa"
    parent = "rc0"

    [kernel]
    profile = "6.16"              # `pinlab profiles` lists them (default: the platform's)
    move_notify = true            # configuration switches (`pinlab profiles`): move_notify,
                                  # pci_p2pdma, dmabuf_debug, dma_api_debug,
                                  # umem_pinned_double_unpin
    [cost]                        # cost-model overrides, dotted keys or nested tables
    "odp.fault" = "2ms"

    [policy]                      # an administrator policy (pinlab.policy.config format),
    [policy.users.mallory]        # or: file = "desktop.toml"
    uid = 1002
    cgroup = "user.slice/mallory"
    [policy.cgroups."user.slice/mallory"]
    "dmem.max" = "drm/{gpu0}/vram 4GiB"   # {gpu0} becomes gpu0's PCI address; [regions]
                                          # may be omitted: the machine's regions are declared

    [[tenants]]
    name = "hog"
    workload = "pin-hog"          # pinlab.sim.workloads.WORKLOADS
    user = "mallory"              # a policy user: uid, RLIMIT_MEMLOCK, capabilities, cgroup
    start = "1s"
    node = "node03"               # clusters only; "*" runs one tenant per node, "<name>@<node>"
    params = { chunk = "1GiB" }   # the workload's parameters (units as strings)

    [[faults]]
    at = "30s"
    kind = "nic-reset"            # kill (target: tenant) | hot-unplug (device) | nic-reset (NIC)
    target = "mlx5_0"

    [variants.memlock]            # dotted keys: paths into the document above, applied on
    "policy.proposals.memlock-dmabuf-pins" = {}   # top of it; tables merge, values replace
    "tenants.hog.params.chunk" = "512MiB"         # tenants (and faults) by name or index

A path segment may be quoted (``policy.cgroups."user.slice/a"."dmem.max"``). ``--set
key=value`` (the CLI) uses the same paths; the value is read as a TOML value if it parses
(``3``, ``true``, ``{}``, ``"x"``) and as a string otherwise (``2ms``, ``512MiB``). Sets apply to
every variant, after the variant's own changes. ``enabled = false`` removes a tenant or fault
in a variant.

Every problem is one line -- the file (or ``--set ...``), the field path, what was expected and
what was found -- raised as :class:`~pinlab.errors.ConfigError`; TOML syntax errors
name the line and column.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pinlab.errors import ConfigError, config_error, show_value, toml_path
from pinlab.kernel.profile import CONFIG_SWITCHES, DEFAULT_PROFILE, get_profile
from pinlab.platform.cluster import ClusterSpec
from pinlab.platform.cost import CostModel
from pinlab.platform.presets import AnySpec
from pinlab.scenarios.blame import CrossFieldError
from pinlab.scenarios.claimspec import CAMPS, ClaimSpec
from pinlab.scenarios.fields import (
    MAX_SAMPLES,
    Name,
    ProfileName,
    Seed,
    TenantName,
    WorkloadName,
)
from pinlab.scenarios.paths import (
    deep_merge,
    flatten_cost,
    parse_path,
    parse_set,
    parse_value,
    quote,
    select,
    where_of,
)
from pinlab.scenarios.platform import PlatformConfig, build_platform, host_switches
from pinlab.scenarios.policy import dmem_settings, policy_document, validate_policy
from pinlab.scenarios.references import check_references
from pinlab.sim.workloads import WORKLOADS, WorkloadParams, param_unit
from pinlab.sim.workloads.base import MAX_EVENTS
from pinlab.units import STRICT_UNITS, Duration, exact_size, exact_time

__all__ = [
    "CAMPS",
    "ClaimSpec",
    "FaultSpec",
    "KernelConfig",
    "PlatformConfig",
    "ResolvedScenario",
    "ScenarioMeta",
    "TenantSpec",
    "WorkloadParamsUnion",
    "apply_changes",
    "apply_set",
    "build_platform",
    "deep_merge",
    "parse_path",
    "parse_set",
    "parse_value",
    "policy_document",
    "validate_document",
    "validate_policy",
]


if TYPE_CHECKING:
    WorkloadParamsUnion = WorkloadParams
else:
    WorkloadParamsUnion = Annotated[
        Union[tuple(wd.params for wd in WORKLOADS.values())],  # noqa: UP007
        Field(discriminator="workload"),
    ]
"""A tenant's ``params``: the discriminated union of every registered workload's parameter
model, chosen by the tenant's ``workload`` (copied into ``params.workload`` before
validation, so a scenario file writes it once)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, strict=True)


class ScenarioMeta(_Model):
    """``[scenario]``: its name and how long each variant runs (the claim: ``[claim]``)."""

    name: Name
    duration: Duration = Field(description="simulated time of each variant")
    seed: Seed = 0
    sample_interval: Duration | None = Field(
        default=None, description="time-series resolution (default duration / 200)"
    )
    description: str = ""

    @field_validator("duration", "sample_interval")
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError(f'expected a time above 0, found "{exact_time(value)}"')
        return value


class KernelConfig(_Model):
    """``[kernel]``: the profile and its configuration switches (``kernel-semantics.md`` §1.5)."""

    profile: ProfileName = None
    move_notify: bool | None = None
    dmem: bool | None = None
    dmabuf_debug: bool | None = None
    dma_api_debug: bool | None = None
    pci_p2pdma: bool | None = None
    umem_pinned_double_unpin: bool | None = None

    def switches(self) -> dict[str, bool]:
        return {k: v for k in CONFIG_SWITCHES if (v := getattr(self, k)) is not None}


class TenantSpec(_Model):
    """``[[tenants]]``: one workload process (one per node with ``node = "*"``); ``params``
    are validated here, once, into the workload's parameter model."""

    name: TenantName
    workload: WorkloadName
    node: str | None = Field(default=None, description="cluster node, or '*' for every node")
    user: str | None = Field(default=None, description="a user of [policy.users]")
    start: Duration = Field(default="0s", description="when the workload starts")  # type: ignore[assignment]
    enabled: bool = True
    params: WorkloadParamsUnion

    @model_validator(mode="before")
    @classmethod
    def _tag_params(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        params = data.get("params", {})
        workload = data.get("workload")
        if isinstance(workload, str) and workload in WORKLOADS and isinstance(params, dict):
            data = {**data, "params": {"workload": data["workload"], **params}}
        return data


class FaultSpec(_Model):
    """``[[faults]]``: a fault injected at ``at``."""

    name: str | None = None
    at: Duration
    kind: Literal["kill", "hot-unplug", "nic-reset"]
    target: str
    node: str | None = None
    enabled: bool = True


class ResolvedScenario(_Model):
    """One variant, fully resolved: what ``config.toml`` holds. Its ``claim`` is the
    scenario's statement and camp; the expectations compare variants, so they stay with the
    scenario (``ScenarioConfig.claim``) and a ``config.toml`` run alone is not judged."""

    scenario: ScenarioMeta
    claim: ClaimSpec = Field(default_factory=ClaimSpec)
    variant: Name = "base"
    platform: PlatformConfig
    kernel: KernelConfig = Field(default_factory=KernelConfig)
    cost: dict[str, Any] = Field(default_factory=dict)
    policy: dict[str, Any] | None = None
    tenants: list[TenantSpec] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(default_factory=list)

    def active_tenants(self) -> list[TenantSpec]:
        return [t for t in self.tenants if t.enabled]

    def active_faults(self) -> list[FaultSpec]:
        return [f for f in self.faults if f.enabled]

    def document(self) -> dict[str, Any]:
        """The TOML-serialisable document (units as exact strings, no nulls, every parameter
        of every tenant with its value)."""
        data: dict[str, Any] = _drop_none(self.model_dump(mode="json", exclude_none=True))
        claim = {k: data["claim"][k] for k in ("statement", "camp") if data["claim"].get(k)}
        if claim:
            data["claim"] = claim
        else:
            del data["claim"]
        for tenant in data.get("tenants", []):
            tenant["params"].pop("workload", None)
        return data


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


# -- paths and values -----------------------------------------------------------------------------


def normalise_path(path: Sequence[str]) -> list[str]:
    """Shorthands: ``duration``, ``seed``, ``sample_interval`` ... (fields of ``[scenario]``)
    stand for ``scenario.<field>``."""
    out = list(path)
    if out and out[0] in ScenarioMeta.model_fields and out[0] not in ResolvedScenario.model_fields:
        out.insert(0, "scenario")
    return out


def apply_set(doc: dict[str, Any], path: Sequence[str], value: Any, source: str) -> list[str | int]:
    """Set ``value`` at ``path`` in ``doc`` (in place): tables are created, lists of tables
    are indexed by position or ``name``, a table value is merged into an existing table.
    ``path`` may use the shorthands of :func:`normalise_path`. Returns the path it set, with
    each list element as its index (``tenants.hog.start`` → ``["tenants", 3, "start"]``)."""
    path = normalise_path(path)
    node: Any = doc
    where: list[str | int] = []
    done: list[str | int] = []
    for i, seg in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, list):
            j = select(node, seg, where, source)
            where.append(seg)
            done.append(j)
            if last:
                node[j] = deep_merge(node[j], value) if isinstance(value, dict) else value
                return done
            node = node[j]
            continue
        if not isinstance(node, dict):
            raise ConfigError(
                source, where_of(where), f"expected a table to set {seg!r} in, found {node!r}"
            )
        where.append(seg)
        done.append(seg)
        if last:
            old = node.get(seg)
            if isinstance(old, dict) and isinstance(value, dict):
                node[seg] = deep_merge(old, value)
            else:
                node[seg] = copy.deepcopy(value)
            return done
        child = node.get(seg)
        if child is None:
            child = node[seg] = {}
        node = child
    return done


def apply_changes(doc: dict[str, Any], changes: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A variant's table on top of ``doc``: a key with dots (``"a.b.c"``) is a path; a plain
    key with a table value merges; anything else replaces."""
    out = copy.deepcopy(doc)
    for key, value in changes.items():
        try:
            path = parse_path(key)
        except ValueError as e:
            raise ConfigError(source, key, str(e)) from None
        apply_set(out, path, value, source)
    return out


# -- the whole document ----------------------------------------------------------------------------


_BOUND_WORDS = {
    "greater_than": ("above", "gt"),
    "greater_than_equal": ("at least", "ge"),
    "less_than": ("below", "lt"),
    "less_than_equal": ("at most", "le"),
}
_UNIT_WORDS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "B": ("a size", exact_size),
    "s": ("a time", exact_time),
}


def _unit_bound(err: Mapping[str, Any], workload: object, params: object) -> str | None:
    """A size or time parameter's bound (``gt=0``) as ``scenario.duration``'s is worded:
    ``expected a size above 0, found "0B"``, the value as the user wrote it -- pydantic checks
    the bound on the parsed number and would say ``expected a number > 0, found 0``. None
    for any other error."""
    bound = _BOUND_WORDS.get(str(err.get("type")))
    loc = err.get("loc", ())
    if bound is None or len(loc) != 5 or loc[2] != "params" or workload not in WORKLOADS:
        return None
    field = loc[4]
    words = _UNIT_WORDS.get(param_unit(WORKLOADS[str(workload)].params, str(field)))
    if words is None:
        return None
    kind, exact = words
    limit = (err.get("ctx") or {}).get(bound[1])
    written = params.get(field) if isinstance(params, dict) else None
    found = show_value(written) if written is not None else f'"{exact(err.get("input"))}"'
    return f"expected {kind} {bound[0]} {0 if limit == 0 else exact(limit)}, found {found}"


def _document_error(e: ValidationError, doc: Mapping[str, Any], source: str) -> ConfigError:
    """The first error as one line; a tenant's field is named by the tenant's name
    (``tenants.kv.params.block``), the way ``--set`` and ``[variants]`` address it, without the
    union's workload tag, and a parameter model's own check says only what it found."""
    err = config_error(e, source, model=ResolvedScenario)
    errors = e.errors()
    first = errors[0]
    loc = list(first.get("loc", ()))
    tenants = doc.get("tenants")
    if len(loc) < 2 or loc[0] != "tenants" or not isinstance(loc[1], int):
        return err
    if not isinstance(tenants, list) or loc[1] >= len(tenants):
        return err
    raw = tenants[loc[1]]
    name = raw.get("name") if isinstance(raw, dict) else None
    if not isinstance(name, str):
        return err
    rest = loc[2:]
    if rest[:1] == ["params"] and len(rest) > 1 and rest[1] in WORKLOADS:
        del rest[1]
    message = err.message
    if first["type"] == "value_error":  # a model validator's "expected ..., found ..."
        message = str(first["msg"]).removeprefix("Value error, ")
    elif (bounded := _unit_bound(first, raw.get("workload"), raw.get("params"))) is not None:
        message = bounded
    # an unknown workload leaves its params without a union member: not a second problem
    others = [x for x in errors[1:] if not str(x["type"]).startswith("union_tag")]
    message = re.sub(r" \(and \d+ more\)$", "", message)
    if others:
        message += f" (and {len(others)} more)"
    where = f"tenants.{quote(name)}" + (f".{toml_path(rest)}" if rest else "")
    return ConfigError(source, where, message)


def _written(doc: Mapping[str, Any], path: Sequence[str | int], parsed: float) -> str:
    """A time of ``doc`` as a message shows it: as the user wrote it (``"100000h"``), else (a
    default) as the parsed value's exact string."""
    node: Any = doc
    for part in path:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
    return show_value(node) if node is not None else f'"{exact_time(parsed)}"'


def _check_samples(doc: Mapping[str, Any], meta: ScenarioMeta, source: str) -> None:
    """At most :data:`MAX_SAMPLES` samples per series, and at least one interval in the run.
    The default interval, duration / 200, always fits: only a given one can be too fine or
    too coarse, or the duration too long or too short for it."""
    interval = meta.sample_interval
    if interval is None:
        return
    duration = _written(doc, ("scenario", "duration"), meta.duration)
    given = _written(doc, ("scenario", "sample_interval"), interval)
    if interval > meta.duration:
        raise CrossFieldError(
            source,
            "scenario.sample_interval",
            f"expected at most the duration ({duration}: a series needs an interval inside "
            f"the run), found {given}",
            ("scenario.duration",),
        )
    if meta.duration / interval <= MAX_SAMPLES:
        return
    raise CrossFieldError(
        source,
        "scenario.sample_interval",
        f"expected at most {MAX_SAMPLES} samples per series (duration / sample_interval), "
        f"found {duration} / {given} = {meta.duration / interval:.3g}",
        ("scenario.duration",),
    )


def _nodes(spec: AnySpec) -> tuple[str, ...]:
    return spec.node_names() if isinstance(spec, ClusterSpec) else ()


def _check_fault(
    source: str,
    i: int,
    f: FaultSpec,
    tenants: list[TenantSpec],
    nodes: tuple[str, ...],
    devices: list[str],
    nics: list[str],
) -> None:
    """Fault ``i`` names a node of the cluster, and a tenant, device or NIC there: a tenant
    that runs on every node (``node = "*"``) as ``<name>@<node>`` or by its name with the
    fault's ``node``; a device or NIC by its name, on ``node`` (default: the first node).
    Each error names the other fields it compared (:class:`CrossFieldError`): the platform
    for nodes, devices and NICs, the tenants' names and nodes for a kill."""
    where = f"faults[{i}]"
    placement = [f"tenants.{j}.{key}" for j in range(len(tenants)) for key in ("name", "node")]

    def error(field: str, message: str, *fields: str) -> CrossFieldError:
        return CrossFieldError(source, f"{where}.{field}", message, fields)

    if f.node is not None and f.node not in nodes:
        have = f"{nodes[0]}..{nodes[-1]}" if nodes else "none: a single-node platform"
        raise error(
            "node", f"expected a node of the cluster ({have}), found {f.node!r}", "platform"
        )
    if f.kind != "kill":
        what, names = ("a device", devices) if f.kind == "hot-unplug" else ("a NIC", nics)
        if f.target not in names:
            other = f"; on a node other than {nodes[0]}: {where}.node" if nodes else ""
            have = ", ".join(names) or "none"
            raise error(
                "target", f"expected {what} ({have}{other}), found {f.target!r}", "platform"
            )
        return
    everywhere = {t.name for t in tenants if t.node == "*"}
    placed = {t.name: t.node or (nodes[0] if nodes else None) for t in tenants if t.node != "*"}
    name, at, on = f.target.rpartition("@")
    if at and name in everywhere and on in nodes:
        runs_on: str | None = on
    elif f.target in everywhere:
        if f.node is None:
            raise error(
                "node",
                f"expected the node of the {f.target!r} to kill (it runs on every node: "
                f"{f.target}@{nodes[0]} ...), found none",
                f"faults.{i}.target",
                *placement,
            )
        return
    elif f.target in placed:
        runs_on = placed[f.target]
    else:
        known = sorted([*placed, *(f"{t}@{nodes[0]}..{nodes[-1]}" for t in everywhere)])
        raise error(
            "target",
            f"expected a tenant ({', '.join(known) or 'none'}), found {f.target!r}",
            *placement,
        )
    if f.node is not None and f.node != runs_on:
        raise error(
            "node",
            f"expected {runs_on} (where {f.target!r} runs) or none, found {f.node!r}",
            f"faults.{i}.target",
            *placement,
            "platform",
        )


def validate_document(
    doc: Mapping[str, Any], source: str, base_dir: Path | None = None
) -> tuple[ResolvedScenario, AnySpec]:
    """Validate a (variant's) document: the schema, then cross references -- the platform
    builds, the kernel profile and switches exist, cost keys are cost-model parameters, the
    policy is valid, tenants name known workloads, users, nodes and valid parameters, faults
    name tenants, devices or NICs. :class:`ConfigError` (one line) on the first problem."""
    try:
        resolved = ResolvedScenario.model_validate(dict(doc), context=STRICT_UNITS)
    except ValidationError as e:
        raise _document_error(e, doc, source) from None
    _check_samples(doc, resolved.scenario, source)
    spec = build_platform(resolved.platform, source, base_dir)
    node = spec.node if isinstance(spec, ClusterSpec) else spec
    profile = resolved.kernel.profile or node.kernel or DEFAULT_PROFILE
    host = host_switches(node, profile, resolved.kernel.switches(), resolved.platform, source)
    if host:  # the host's kernel configuration, where the scenario sets none
        resolved = resolved.model_copy(update={"kernel": resolved.kernel.model_copy(update=host)})
    try:
        get_profile(profile, **resolved.kernel.switches())
    except ValueError as e:  # the profile may be the platform's suggestion
        raise CrossFieldError(
            source, "kernel", f"expected valid switches: {e}", ("platform",)
        ) from None
    if resolved.kernel.profile is None:  # resolved: the platform's suggestion or the default
        kernel = resolved.kernel.model_copy(update={"profile": profile})
        resolved = resolved.model_copy(update={"kernel": kernel})
    if resolved.cost:
        try:
            CostModel().with_overrides(flatten_cost(resolved.cost), source=f"{source}: cost")
        except ConfigError as e:
            raise ConfigError(source, f"cost.{e.where}", e.message) from None
    users: set[str] = set()
    if resolved.policy is not None:
        names = {d.name: d.name for d in node.devices}
        pdoc = policy_document(resolved.policy, names, None, base_dir)
        needs = dmem_settings(pdoc)
        if needs and not get_profile(profile, **resolved.kernel.switches()).dmem:
            why = (
                "built without it (CONFIG_CGROUP_DMEM=n: kernel.dmem = false, or the host's "
                "kernel_config.dmem)"
                if get_profile(profile).dmem
                else "which has none"
            )
            raise CrossFieldError(
                source,
                f"policy.{needs[0]}",
                "expected a kernel with the cgroup v2 dmem controller (profiles 6.14 and "
                f"later), found profile {profile}, {why}",
                ("kernel.profile", "kernel.dmem", "platform"),
            )
        users = set(validate_policy(pdoc, source).users)
    nodes = _nodes(spec)
    seen: set[str] = set()
    for i, t in enumerate(resolved.tenants):
        where = f"tenants.{quote(t.name)}"
        if t.name in seen:
            raise ConfigError(
                source, f"{where}.name", f"expected a unique name, found {t.name!r} twice"
            )
        seen.add(t.name)
        if t.user is not None and t.user not in users:
            have = ", ".join(sorted(users)) or "none: the scenario has no [policy.users]"
            raise CrossFieldError(
                source,
                f"{where}.user",
                f"expected a policy user ({have}), found {t.user!r}",
                ("policy.users", "policy.file"),
            )
        if nodes:
            if t.node is not None and t.node != "*" and t.node not in nodes:
                raise CrossFieldError(
                    source,
                    f"{where}.node",
                    f"expected '*' or {nodes[0]}..{nodes[-1]}, found {t.node!r}",
                    ("platform",),
                )
        elif t.node is not None:
            raise CrossFieldError(
                source,
                f"{where}.node",
                f"expected no node on a single-node platform, found {t.node!r}",
                ("platform",),
            )
        try:
            check_references(t.params, node, source, where)
        except ConfigError as e:  # a name the platform lacks, or one the platform dropped
            raise CrossFieldError(e.source, e.where, e.message, ("platform",)) from None
        duration = resolved.scenario.duration
        planned = t.params.events(max(duration - t.start, 0.0))
        if planned > MAX_EVENTS:
            until = _written(doc, ("scenario", "duration"), duration)
            span = (
                f"from {_written(doc, ('tenants', i, 'start'), t.start)} to {until}"
                if t.start
                else f"over {until}"
            )
            raise CrossFieldError(
                source,
                f"{where}.params",
                f"expected at most {MAX_EVENTS:.0e} workload iterations in a run, found "
                f"{planned:.3g} ({t.workload} {span})",
                ("scenario.duration", f"tenants.{i}.start"),
            )
    devices = sorted(d.name for d in node.devices)
    nics = sorted(n.name for n in node.nics)
    for i, f in enumerate(resolved.faults):
        _check_fault(source, i, f, resolved.tenants, nodes, devices, nics)
    return resolved, spec
