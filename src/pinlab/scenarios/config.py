"""Load a scenario: a built-in name or a TOML file, with its variants, claim and ``--set``
overrides, validated up front.

The API ``pinlab run`` codes against (running is :mod:`pinlab.scenarios.runner`):

* :data:`BUILTIN` -- the six debate scenarios in order; :func:`list_scenarios` gives each
  name with its claim;
* :func:`load_scenario` -- a built-in name or a TOML file (format: :mod:`pinlab.scenarios.schema`),
  with ``--set key=value`` overrides; every variant is validated up front, every problem is one
  :class:`~pinlab.errors.ConfigError` line, naming the input that caused it
  (:mod:`pinlab.scenarios.blame`: the ``--set``, the variant or the file);
* :class:`ScenarioConfig` -- ``.name``, ``.scenario`` (``[scenario]``), ``.claim``
  (``[claim]``: statement, camp, expectations), ``.variants``, ``.catalog(variant)`` (the
  metric names a claim can use), ``.to_toml(variant)``, ``.with_set(...)``,
  ``.with_profile(p)``, ``.with_seed(n)``.

The claim is checked with the variants, before anything runs: an expectation naming a variant
or a metric the scenario does not have is a :class:`~pinlab.errors.ConfigError` naming the
known ones (:func:`pinlab.scenarios.claims.bind_claim`).
"""

from __future__ import annotations

import copy
import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from pinlab.errors import ConfigError, found_value, show_value
from pinlab.kernel.profile import PRESETS as KERNEL_PRESETS
from pinlab.platform.presets import AnySpec
from pinlab.scenarios.blame import (
    CrossFieldError,
    addresses,
    canonical,
    claim_error,
    covers,
    culprit,
    dotted,
)
from pinlab.scenarios.catalog import Catalog, variant_catalog
from pinlab.scenarios.claims import BoundClaim, bind_claim
from pinlab.scenarios.claimspec import ClaimSpec
from pinlab.scenarios.fields import SEED_MAX, check_name
from pinlab.scenarios.paths import deep_merge, quote
from pinlab.scenarios.policy import PolicyDocumentError, written_by
from pinlab.scenarios.references import rename_references
from pinlab.scenarios.schema import (
    ResolvedScenario,
    ScenarioMeta,
    apply_changes,
    apply_set,
    normalise_path,
    parse_path,
    parse_set,
    validate_document,
)
from pinlab.tomlfile import read_toml

__all__ = [
    "BASE_VARIANT",
    "BUILTIN",
    "ScenarioConfig",
    "builtin_path",
    "check_profile",
    "check_seed",
    "check_sets",
    "list_scenarios",
    "load_scenario",
]

BUILTIN: tuple[str, ...] = (
    "efa-gaudi",
    "desktop-pin-hog",
    "cluster-128",
    "odp-vs-pin",
    "apu-display",
    "settlement",
)
"""The debate's scenarios, in the order ``pinlab run`` shows them."""

BASE_VARIANT = "base"
"""The only variant of a scenario file without ``[variants]``."""


def builtin_path(name: str) -> Path:
    """The file of built-in scenario ``name``."""
    ref = resources.files("pinlab.scenarios") / "builtin" / f"{name}.toml"
    return Path(str(ref))


class ScenarioConfig(BaseModel):
    """A loaded, validated scenario: the document, its variants and the ``--set`` overrides.

    ``resolve(variant)`` gives the fully resolved configuration of a variant
    (:class:`~pinlab.scenarios.schema.ResolvedScenario`); ``to_toml`` its file form.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    source: str
    base_dir: str | None = None
    document: dict[str, Any]
    variant_docs: dict[str, dict[str, Any]]
    claim_document: dict[str, Any] = {}
    sets: tuple[tuple[tuple[str, ...], Any, str], ...] = ()
    variant_sets: tuple[tuple[str, str, Any, str], ...] = ()
    """``--set variants.<v>.<key>=...``: ``(v, key, value, expression)``, applied after the
    variant's own changes and before the other ``--set`` overrides."""
    claim_sets: tuple[tuple[str, str], ...] = ()
    profile_override: str | None = None
    seed_override: int | None = None
    policy_source: str = ""
    """What gave the policy merged over the scenario's (``--policy FILE``), if anything."""
    policy_overlay: dict[str, Any] = {}
    policy_own: dict[str, Any] = {}
    """The merged policy document and the scenario's own ``[policy]`` it was merged over."""
    _resolved: dict[str, ResolvedScenario] = PrivateAttr(default_factory=dict)
    _specs: dict[str, AnySpec] = PrivateAttr(default_factory=dict)
    _catalogs: dict[str, Catalog] = PrivateAttr(default_factory=dict)
    _bound: BoundClaim | None = PrivateAttr(default=None)

    # -- what the CLI shows ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def variants(self) -> list[str]:
        """Variant names in file order. Without ``[variants]``: the file's own top-level
        ``variant`` (a run's ``config.toml`` names the variant it resolved, so rerunning it
        keeps that name), else ``["base"]``."""
        if self.variant_docs:
            return list(self.variant_docs)
        own = self.document.get("variant")
        return [own if isinstance(own, str) and own else BASE_VARIANT]

    @property
    def scenario(self) -> ScenarioMeta:
        """``[scenario]`` as the first variant resolves it: ``.name``, ``.duration``,
        ``.seed`` ..."""
        return self.resolve(self.variants[0]).scenario

    @property
    def claim(self) -> ClaimSpec:
        """``[claim]``: ``.statement``, ``.camp``, ``.expect`` (the expectations), ``.show``."""
        try:
            return ClaimSpec.model_validate(self.claim_document)
        except ValidationError as e:
            raise self._blame_claim(claim_error(e, self.source, self.claim_document)) from None

    @property
    def camp(self) -> str:
        return self.claim.camp or ""

    def catalog(self, variant: str | None = None) -> Catalog:
        """The metrics ``variant`` can report (:mod:`pinlab.scenarios.catalog`)."""
        name = self.check_variant(variant, "variant")
        if name not in self._catalogs:
            self._catalogs[name] = variant_catalog(self.resolve(name), self.platform_spec(name))
        return self._catalogs[name]

    @property
    def bound_claim(self) -> BoundClaim:
        """The claim checked against every variant (:func:`~pinlab.scenarios.claims.bind_claim`)."""
        if self._bound is None:
            catalogs = {v: self.catalog(v) for v in self.variants}
            try:
                self._bound = bind_claim(self.claim, catalogs, self.source, self._written_name())
            except ConfigError as e:
                raise self._blame_claim(e) from None
        return self._bound

    # -- resolution --------------------------------------------------------------------------
    def _written_name(self) -> str:
        """The scenario's name as the file writes it (before any variant resolves)."""
        scenario = self.document.get("scenario")
        name = scenario.get("name") if isinstance(scenario, dict) else None
        return str(name) if name is not None else self.source

    def check_variant(self, variant: str | None, argument: str | None = None) -> str:
        """``variant``'s name (None: the first variant's); a one-line ``ConfigError`` naming
        the scenario's variants for any other name, or anything but a string. The error names
        ``argument`` (an API argument: ``variant``) when given, else the scenario's
        ``variants``."""
        name = variant if variant is not None else self.variants[0]
        if not isinstance(name, str) or name not in self.variants:
            source, where = (argument, "") if argument is not None else (self.source, "variants")
            raise ConfigError(
                source,
                where,
                f"expected a variant of {self._written_name()} "
                f"({', '.join(self.variants)}), found {found_value(name)}",
            )
        return name

    def variant_document(self, variant: str | None = None) -> dict[str, Any]:
        """The raw document of ``variant``: base, then the variant's changes, then ``--set``,
        then the profile/seed overrides."""
        return self._variant_document(variant)[0]

    def _variant_document(
        self, variant: str | None
    ) -> tuple[dict[str, Any], list[list[str | int]]]:
        """:meth:`variant_document`, and the path each ``--set`` set, its list elements as
        indices (:func:`~pinlab.scenarios.schema.apply_set`)."""
        name = self.check_variant(variant)
        doc = copy.deepcopy(self.document)
        if name in self.variant_docs:
            doc = apply_changes(
                doc, self.variant_docs[name], f"{self.source}: variants.{quote(name)}"
            )
        for variant, key, value, text in self.variant_sets:
            if variant == name:
                doc = apply_changes(doc, {key: value}, f"--set {text}")
        placed = [
            apply_set(doc, list(path), value, f"--set {text}") for path, value, text in self.sets
        ]
        if self.profile_override is not None:
            doc.setdefault("kernel", {})["profile"] = self.profile_override
        if self.seed_override is not None:
            doc.setdefault("scenario", {})["seed"] = self.seed_override
        claim = self.claim_document
        meta = {k: claim[k] for k in ("statement", "camp") if k in claim}
        if meta:
            doc["claim"] = meta
        doc["variant"] = name
        return doc, placed

    def resolve(self, variant: str | None = None) -> ResolvedScenario:
        """The validated configuration of ``variant`` (default: the first)."""
        name = self.check_variant(variant)
        cached = self._resolved.get(name)
        if cached is None:
            doc = self.variant_document(name)
            base = Path(self.base_dir) if self.base_dir else None
            try:
                cached, spec = validate_document(doc, self.source, base)
            except ConfigError as e:
                raise self.blame(e, name) from None
            self._resolved[name] = cached
            self._specs[name] = spec
        return cached

    def platform_spec(self, variant: str | None = None) -> AnySpec:
        name = self.check_variant(variant)
        self.resolve(name)
        return self._specs[name]

    def blame(self, e: ConfigError, variant: str) -> ConfigError:
        """Name the ``--set`` (or the variant) whose value the error is about
        (:func:`~pinlab.scenarios.blame.culprit`: the last that set the field, else the last
        that set another field the check compared, else the last that set the key defining
        the field's table). A ``--set`` is matched by its key as written and as the document
        addresses it after every ``--set``: ``tenants.3.start`` is ``tenants.hog.start``, and
        ``tenants.a.name="b"`` set ``tenants.b.name``."""
        if isinstance(e, PolicyDocumentError):
            return self.blame_policy(e)
        where = canonical(e.where)
        if not where:
            return e
        if where == "claim" or where.startswith("claim."):  # statement and camp resolve too
            return self._blame_claim(e)
        wheres = (where, dotted(e.where))
        fields = e.fields if isinstance(e, CrossFieldError) else ()
        doc, placed = self._variant_document(variant)
        # every --set that reached this variant, in the order applied: its own, then the rest
        own = [(key, value, text) for v, key, value, text in self.variant_sets if v == variant]
        texts = [text for _key, _value, text in own] + [text for _p, _v, text in self.sets]
        sets = [({_normalised(key)}, value) for key, value, _text in own]
        sets += [
            ({".".join(normalise_path(list(path))), *addresses(doc, done)}, value)
            for (path, value, _text), done in zip(self.sets, placed, strict=True)
        ]
        i = culprit(wheres, fields, sets)
        if i is not None:
            return ConfigError(f"--set {texts[i]}", e.where, e.message)
        if variant not in self.variant_docs or e.source != self.source:
            return e
        changes = [({_normalised(raw)}, value) for raw, value in self.variant_docs[variant].items()]
        if culprit(wheres, fields, changes) is not None:
            return ConfigError(f"{self.source}: variants.{quote(variant)}", e.where, e.message)
        return e

    def blame_policy(self, e: PolicyDocumentError) -> ConfigError:
        """The policy error ``e`` naming ``--policy FILE`` when that file wrote its field
        (:func:`~pinlab.scenarios.policy.written_by`), else ``e``: also for the check of the
        policy against the machine a run builds (its dmem regions)."""
        if self.policy_source and written_by(self.policy_overlay, self.policy_own, e.policy_where):
            return ConfigError(self.policy_source, e.policy_where, e.policy_message)
        return e

    def _blame_claim(self, e: ConfigError) -> ConfigError:
        """Name the ``--set claim.<key>=...`` whose value a claim error is about (the last one
        to set that key), not the scenario file."""
        if e.source != self.source:
            return e
        where = dotted(e.where)
        for key, text in reversed(self.claim_sets):
            if covers(where, key):
                return ConfigError(f"--set {text}", e.where, e.message)
        return e

    def to_toml(self, variant: str | None = None) -> str:
        """``config.toml``: the fully resolved configuration of ``variant``."""
        return tomli_w.dumps(self.resolve(self.check_variant(variant, "variant")).document())

    def _copy(self, **update: Any) -> ScenarioConfig:
        out = self.model_copy(update=update)
        out._resolved, out._specs, out._catalogs, out._bound = {}, {}, {}, None
        return out

    def with_profile(self, profile: str) -> ScenarioConfig:
        """A copy whose variants all run under kernel ``profile`` (:class:`ConfigError` for
        one that is not a profile)."""
        return self._copy(profile_override=check_profile(profile))

    def with_seed(self, seed: int) -> ScenarioConfig:
        """A copy with run seed ``seed`` (:class:`ConfigError` unless 0 … 2^63-1)."""
        return self._copy(seed_override=check_seed(seed))

    def with_set(self, *exprs: str) -> ScenarioConfig:
        """A copy with more ``key=value`` overrides (``pinlab run --set``), validated now:
        ``cfg.with_set("duration=5s", "tenants.hog.params.chunk=512MiB")``."""
        claim = copy.deepcopy(self.claim_document)
        sets, variant_sets, claim_sets = _parse_sets(
            check_sets(exprs, "with_set"), self.variants if self.variant_docs else [], claim
        )
        out = self._copy(
            claim_document=claim,
            sets=self.sets + sets,
            variant_sets=self.variant_sets + variant_sets,
            claim_sets=self.claim_sets + claim_sets,
        )
        out.validate_all()
        return out

    def validate_all(self) -> None:
        """Resolve every variant and bind the claim: :class:`ConfigError` on the first problem."""
        for variant in self.variants:
            self.resolve(variant)
        self.bound_claim  # noqa: B018 - binding is the check


def check_profile(profile: object, source: str = "profile") -> str:
    """``profile``, a kernel profile's name; else :class:`ConfigError` naming ``source`` (the
    argument that gave it), as ``--profile`` is refused."""
    if not isinstance(profile, str) or profile not in KERNEL_PRESETS:
        known = ", ".join(KERNEL_PRESETS)
        raise ConfigError(
            source, "", f"expected a kernel profile ({known}), found {found_value(profile)}"
        )
    return profile


def check_seed(seed: object, source: str = "seed") -> int:
    """``seed`` as an int, if it is an integer 0 … 2^63-1 (what ``[scenario] seed`` takes); a
    bool or a float is no seed, not even 1.0: else :class:`ConfigError` naming ``source``."""
    value: int | None = None
    if not isinstance(seed, bool):
        try:
            value = operator.index(seed)  # type: ignore[arg-type]
        except TypeError:
            value = None
    if value is None or not 0 <= value <= SEED_MAX:
        raise ConfigError(
            source, "", f"expected an integer seed from 0 to 2^63-1, found {found_value(seed)}"
        )
    return value


def check_sets(exprs: object, source: str = "sets") -> tuple[str, ...]:
    """``exprs`` as a tuple of ``key=value`` strings; a bare string would be read one character
    at a time, so it is refused, as is anything else that is not a list of strings:
    :class:`ConfigError` naming ``source`` (the argument)."""
    if isinstance(exprs, str | bytes):
        raise ConfigError(
            source,
            "",
            f"expected a list of key=value strings, found the string {found_value(exprs)} "
            f"(a list of one: [{found_value(exprs)}])",
        )
    if not isinstance(exprs, Iterable) or isinstance(exprs, Mapping):
        raise ConfigError(
            source, "", f"expected a list of key=value strings, found {found_value(exprs)}"
        )
    out = tuple(exprs)
    for i, expr in enumerate(out):
        if not isinstance(expr, str):
            raise ConfigError(
                f"{source}[{i}]", "", f"expected a key=value string, found {found_value(expr)}"
            )
    return out


def _read(path: Path, source: str) -> dict[str, Any]:
    if not path.exists() and "\x00" not in str(path):
        raise ConfigError(
            source,
            "",
            "expected a scenario file or a built-in name "
            f"({', '.join(BUILTIN)}), found no such file",
        )
    return read_toml(path, what="a scenario file", source=source)


def load_scenario(
    name_or_path: str | Path,
    *,
    sets: Sequence[str] = (),
    platform: str | Path | None = None,
    rename: Mapping[str, str] | None = None,
    policy: str | Path | Mapping[str, Any] | None = None,
    profile: str | None = None,
) -> ScenarioConfig:
    """A built-in scenario by name, or a scenario file; ``sets`` are ``key=value``
    overrides (dotted paths into the document). ``platform`` replaces the scenario's whole
    ``[platform]`` table with a platform file (``pinlab run --platform``, e.g. the output of
    ``pinlab inspect``); tenants and variants that name devices the file lacks then fail
    validation, one line naming them. ``rename`` maps the scenario's device, NIC and display
    names to the platform's in its tenants, policy and variants (``pinlab run --map``).
    ``policy`` (a policy file, or a policy document) is the administrator's: merged over the
    scenario's ``[policy]`` (what the scenario declares and the file does not set stays, every
    value the file sets wins) and replacing every variant's changes to it (``pinlab run
    --policy``, e.g. the output of ``pinlab inspect --policy`` or ``pinlab advise``): each
    variant runs under that policy and differs from the others only in the rest. ``profile``
    (``pinlab run --profile``) is the kernel profile every variant runs under. Every variant
    is validated now, under that profile; :class:`ConfigError` (one line) on the first
    problem."""
    sets = check_sets(sets)
    if profile is not None:
        profile = check_profile(profile)
    if str(name_or_path) == "":  # Path("") is the current directory
        raise ConfigError(
            "(empty path)",
            "",
            f"expected a built-in scenario ({', '.join(BUILTIN)}) or a scenario file, "
            "found an empty name",
        )
    if isinstance(name_or_path, str) and name_or_path in BUILTIN:
        path = builtin_path(name_or_path)
        source = f"{name_or_path}.toml"
    else:
        path = Path(name_or_path)
        source = str(name_or_path)
    data = _read(path, source)
    if platform is not None:
        platform_path = Path(platform)
        found = _not_a_file(platform)
        if found is not None:
            flag = f"--platform {platform}" if str(platform) else "--platform"
            raise ConfigError(flag, "", f"expected a platform file, found {found}")
        data["platform"] = {"file": str(platform_path.resolve())}
    policy_given: dict[str, Any] = {}
    own_policy = data.get("policy")
    if policy is not None:
        policy_given = _policy_document(policy)
        data["policy"] = deep_merge(own_policy or {}, policy_given)
    if rename:
        for key in ("tenants", "policy"):
            if key in data:
                data[key] = rename_references(data[key], rename)
        if isinstance(data.get("variants"), dict):
            data["variants"] = rename_references(data["variants"], rename)
    variants = data.pop("variants", {}) or {}
    if not isinstance(variants, dict) or not all(isinstance(v, dict) for v in variants.values()):
        raise ConfigError(
            source, "variants", "expected tables [variants.<name>], found something else"
        )
    if policy is not None:
        variants = {name: _without_policy(changes) for name, changes in variants.items()}
    claim = data.pop("claim", {})
    if not isinstance(claim, dict):
        raise ConfigError(source, "claim", f"expected a table [claim], found {claim!r}")
    for name, changes in variants.items():
        check_name(str(name), source, f"variants.{quote(str(name))}")
        for key in changes:
            _not_the_claim(source, str(name), str(key))
    _check_own_variant(data, source, bool(variants))
    variant_docs = {str(k): dict(v) for k, v in variants.items()}
    parsed, variant_sets, claim_sets = _parse_sets(sets, list(variant_docs), claim)
    cfg = ScenarioConfig(
        source=source,
        base_dir=str(path.parent),
        document=data,
        variant_docs=variant_docs,
        claim_document=claim,
        sets=parsed,
        variant_sets=variant_sets,
        claim_sets=claim_sets,
        policy_source=_policy_source(policy),
        policy_overlay=policy_given,
        policy_own=own_policy if isinstance(own_policy, dict) else {},
        profile_override=profile,
    )
    cfg.validate_all()
    return cfg


def _policy_source(policy: str | Path | Mapping[str, Any] | None) -> str:
    """How an error in the ``policy`` of :func:`load_scenario` names it: as the
    ``--policy`` it came from, or as the argument."""
    if policy is None:
        return ""
    if isinstance(policy, Mapping):
        return "policy"
    return f"--policy {policy}"


def _policy_document(policy: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """The policy of ``--policy``: a policy file's document, or the document itself."""
    if isinstance(policy, Mapping):
        return copy.deepcopy(dict(policy))
    found = _not_a_file(policy)
    flag = f"--policy {policy}" if str(policy) else "--policy"
    if found is not None:
        raise ConfigError(flag, "", f"expected a policy file, found {found}")
    return read_toml(policy, what="a policy file", source=flag)


def _not_a_file(path: str | Path) -> str | None:
    """What stands at ``path`` where a file was expected (None: a file). An empty path is
    none, though ``Path("")`` is the current directory."""
    if str(path) == "":
        return "an empty path"
    p = Path(path)
    if p.is_file():
        return None
    return "a directory" if p.is_dir() else "no such file"


def _without_policy(changes: Mapping[str, Any]) -> dict[str, Any]:
    """A variant's changes less those to ``[policy]`` (under ``--policy`` the policy is the
    administrator's, the same for every variant)."""
    out: dict[str, Any] = {}
    for key, value in changes.items():
        try:
            head = parse_path(str(key))[0]
        except ValueError:
            head = str(key)
        if head != "policy":
            out[key] = value
    return out


def _not_the_claim(source: str, variant: str, key: str) -> None:
    """:class:`ConfigError` if a variant's change ``key`` changes the claim, which is the
    scenario's (its expectations name variants)."""
    if key == "claim" or key.startswith("claim."):
        raise ConfigError(
            source,
            f"variants.{quote(variant)}.{key}",
            "expected a change to the variant's setup, found a change to the claim "
            "(the claim is the scenario's: its expectations name variants)",
        )


def _check_own_variant(data: Mapping[str, Any], source: str, tables: bool) -> None:
    """A file's top-level ``variant`` (a run's ``config.toml`` names the variant it resolved):
    a name, and only in a file without ``[variants]`` tables, whose names it would contradict."""
    if "variant" not in data:
        return
    own = data["variant"]
    if tables:
        raise ConfigError(
            source,
            "variant",
            "expected [variants.<name>] tables or a top-level variant naming the file's one "
            f"variant, found both (variant = {show_value(own)})",
        )
    if not isinstance(own, str):
        raise ConfigError(source, "variant", f"expected a variant's name, found {show_value(own)}")
    check_name(own, source, "variant")


def _normalised(key: str) -> str:
    """A change's key (``tenants.hog."params".start``) as one dotted key, for blaming."""
    try:
        return ".".join(normalise_path(parse_path(key)))
    except ValueError:
        return key


def _parse_sets(
    exprs: Sequence[str], variants: Sequence[str], claim: dict[str, Any]
) -> tuple[
    tuple[tuple[tuple[str, ...], Any, str], ...],
    tuple[tuple[str, str, Any, str], ...],
    tuple[tuple[str, str], ...],
]:
    """``--set`` expressions: ``variants.<v>.<key>=...`` changes variant ``v`` (one of
    ``variants``, the scenario's ``[variants]``), after its own changes; ``claim.<key>=...``
    changes the claim (in place); the rest apply to every variant. Returns the rest, the
    variants' ``(v, key, value, expression)``, and each claim set's key
    (:func:`~pinlab.scenarios.blame.dotted`) with its expression. ``variant`` itself is not a
    key to set: ``--variant`` chooses the variant."""
    parsed: list[tuple[tuple[str, ...], Any, str]] = []
    variant_sets: list[tuple[str, str, Any, str]] = []
    claim_sets: list[tuple[str, str]] = []
    for expr in exprs:
        p, value = parse_set(expr)
        if p == ["variant"]:
            raise ConfigError(
                f"--set {expr}",
                "variant",
                "expected a key of the scenario's setup, found the variant's name "
                "(--variant chooses the variant to run)",
            )
        if p[0] == "variants":
            if len(p) < 3 or p[1] not in variants:
                found = repr(p[1]) if len(p) > 1 else "no variant"
                raise ConfigError(
                    f"--set {expr}",
                    "variants",
                    "expected variants.<variant>.<key> with a variant of the scenario "
                    f"({', '.join(variants) or 'it has no [variants]'}), found {found}"
                    + (" and no key" if len(p) == 2 and p[1] in variants else ""),
                )
            _not_the_claim(f"--set {expr}", p[1], _join(p[2:]))
            variant_sets.append((p[1], _join(p[2:]), value, expr))
            continue
        if p[0] == "claim":
            if len(p) == 1:
                raise ConfigError(f"--set {expr}", "claim", "expected a key inside the claim")
            apply_set(claim, list(p[1:]), value, f"--set {expr}")
            claim_sets.append((dotted(".".join(p)), expr))
            continue
        parsed.append((tuple(p), value, expr))
    return tuple(parsed), tuple(variant_sets), tuple(claim_sets)


def _join(path: Sequence[str]) -> str:
    return ".".join(
        p if p.replace("-", "").replace("_", "").isalnum() else json.dumps(p) for p in path
    )


def list_scenarios() -> list[tuple[str, str]]:
    """``(name, claim)`` of every built-in scenario, in :data:`BUILTIN` order."""
    out = []
    for name in BUILTIN:
        data = _read(builtin_path(name), f"{name}.toml")
        claim = data.get("claim", {})
        out.append((name, str(claim.get("statement", "")) if isinstance(claim, dict) else ""))
    return out
