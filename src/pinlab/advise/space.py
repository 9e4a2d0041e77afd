"""The policy space ``pinlab advise`` searches: knobs over an administrator policy document.

A scenario's policy (``[policy]`` of the variant advised, :mod:`pinlab.policy.config`'s
format) names users and cgroups; the space keeps who they are (uid, cgroup, capabilities)
and varies what limits them:

* ``users.<u>.memlock`` -- RLIMIT_MEMLOCK (P- items of ``rlimit.py``): 64 KiB (the historical
  default) to 64 GiB in powers of two, then ``unlimited``;
* ``cgroups."<cg>"."dmem.max"|"dmem.min"|"dmem.low".<region>`` -- the dmem controller's
  files for each device memory region of the machine, in sixteenths of the region (``max``
  above them for ``dmem.max``, 0 below them for the protections);
* ``proposals.pins`` -- which never-merged pin proposal is on (``none``,
  ``memlock-dmabuf-pins``, ``device-pin-cap``, ``dmem-pin-max``; ``revocable-pins`` too on a
  kernel that has it), with the caps of the one chosen: ``device-pin-cap.max_per_device`` and
  each cgroup's ``dmem.pin.max``.

Every knob but the proposal is a **limit**: an ordered grid from its tight end (least
privilege: the smallest grant, the least protection) to its generous end. A knob's values are
grid *indices*, so the optimiser's trials and the bisection's steps are exact grid points and
each point's policy is a pure function of its knob values (:meth:`Space.policy`). The values
the scenario's own variants use are added to the grids, so those policies are points of the
space (:meth:`Space.knobs_of`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pinlab.errors import toml_path
from pinlab.kernel.kernel import DEFAULT_MEMLOCK
from pinlab.units import GiB, KiB, UnitError, compact_size, parse_limit

__all__ = ["NO_PROPOSAL", "Knob", "Space", "build_space"]

NO_PROPOSAL = "none"
PIN_PROPOSALS = ("memlock-dmabuf-pins", "device-pin-cap", "dmem-pin-max")
REVOCABLE = "revocable-pins"
_CONTROLLED_FILES = ("dmem.min", "dmem.low", "dmem.max", "dmem.pin.max")
_MEMLOCK_GRID = tuple(64 * KiB << k for k in range(21))  # 64 KiB ... 64 GiB
_STEPS = 16
"""dmem knobs move in sixteenths of the region's capacity."""


@dataclass(frozen=True, slots=True)
class Knob:
    """One dimension of the space. ``values``: a limit's grid from the tight end (bytes;
    None is no limit: ``unlimited``/``max``), or a choice's options. ``needs``: the proposal
    that must be chosen for the knob to be in the policy at all (None: always)."""

    name: str
    values: tuple[Any, ...]
    limit: bool = True
    needs: str | None = None
    target: tuple[str, ...] = ()
    """What it sets: ``("memlock", user)``, ``("cap",)`` or ``("dmem", cgroup, file, region)``."""

    def show(self, index: int) -> str:
        value = self.values[index]
        if not self.limit:
            return str(value)
        if value is None:
            return "unlimited" if self.target[0] == "memlock" else "max"
        return compact_size(value) if value else "0"

    def index_of(self, value: Any) -> int:
        return self.values.index(value)


def _with(values: Sequence[int | None], extra: Sequence[int | None]) -> tuple[int | None, ...]:
    """A grid with more values merged in, tight end first (None last)."""
    sizes = sorted({v for v in (*values, *extra) if v is not None})
    tail: tuple[None, ...] = (None,) if None in values or None in extra else ()
    return (*sizes, *tail)


def _size(raw: object, word: str) -> int | None:
    try:
        return parse_limit(raw, unlimited=word, bound="2^64-1")
    except UnitError:
        return None


def _dmem_value(lines: object, region: str) -> int | str | None:
    """The value a dmem file's lines give ``region``; ``"absent"`` when they name it not."""
    items = [lines] if isinstance(lines, str) else lines if isinstance(lines, list) else []
    for item in items:
        for line in str(item).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == region:
                return _size(parts[1], "max")
    return "absent"


@dataclass(frozen=True, slots=True)
class Space:
    """The knobs over a template policy (the advised variant's, less what the knobs set)."""

    template: dict[str, Any]
    knobs: tuple[Knob, ...]
    regions: dict[str, int]

    def knob(self, name: str) -> Knob:
        return next(k for k in self.knobs if k.name == name)

    @property
    def proposal(self) -> Knob:
        return self.knob("proposals.pins")

    def active(self, values: Mapping[str, int], knob: Knob) -> bool:
        """Whether ``knob`` is in the policy of ``values`` (a cap of a proposal not chosen
        is not)."""
        if knob.needs is None:
            return True
        return bool(self.proposal.values[values[self.proposal.name]] == knob.needs)

    def shown(self, values: Mapping[str, int]) -> dict[str, str]:
        """Each knob's value as text, ``-`` for a knob not in this point's policy."""
        return {
            k.name: k.show(values[k.name]) if self.active(values, k) else "-" for k in self.knobs
        }

    def policy(self, values: Mapping[str, int]) -> dict[str, Any]:
        """The policy document of a point (knob name -> grid index)."""
        doc = copy.deepcopy(self.template)
        chosen = self.proposal.values[values[self.proposal.name]]
        proposals = doc.setdefault("proposals", {})
        if chosen != NO_PROPOSAL:
            proposals[chosen] = {}
        lines: dict[tuple[str, str], list[str]] = {}
        for knob in self.knobs:
            if knob.name == self.proposal.name or not self.active(values, knob):
                continue
            value = knob.values[values[knob.name]]
            if knob.target[0] == "memlock":
                doc["users"][knob.target[1]]["memlock"] = knob.show(values[knob.name])
            elif knob.target[0] == "cap":
                if value is not None:
                    proposals["device-pin-cap"]["max_per_device"] = compact_size(value)
            else:
                _, cgroup, filename, region = knob.target
                neutral = None if filename in ("dmem.max", "dmem.pin.max") else 0
                if value != neutral:
                    shown = "max" if value is None else compact_size(value) if value else "0"
                    lines.setdefault((cgroup, filename), []).append(f"{region} {shown}")
        for (cgroup, filename), text in lines.items():
            doc["cgroups"][cgroup][filename] = text if len(text) > 1 else text[0]
        used = sorted({line.split()[0] for text in lines.values() for line in text})
        if used:  # declared, so that the file is a policy file on its own (pinlab policy check)
            regions = doc.setdefault("regions", {})
            for region in used:
                regions.setdefault(region, compact_size(self.regions[region]))
        if not proposals:
            doc.pop("proposals")
        return doc

    def knobs_of(self, policy: Mapping[str, Any]) -> dict[str, int] | None:
        """The point of a policy document written with the template's users and cgroups
        (a variant's), or None when it sets something the space cannot express."""
        proposals = dict(policy.get("proposals") or {})
        on = [p for p in proposals if (proposals[p] or {}).get("enabled", True) is not False]
        pins = [p for p in on if p in self.proposal.values]
        if len(pins) > 1 or len(on) != len(pins):
            return None
        values = {self.proposal.name: self.proposal.index_of(pins[0] if pins else NO_PROPOSAL)}
        users = policy.get("users") or {}
        cgroups = policy.get("cgroups") or {}
        for knob in self.knobs:
            if knob.name == self.proposal.name:
                continue
            found: int | str | None
            if knob.target[0] == "memlock":
                raw = (users.get(knob.target[1]) or {}).get("memlock", DEFAULT_MEMLOCK)
                found = _size(raw, "unlimited") if not isinstance(raw, dict) else "absent"
                if found is None and raw != "unlimited":
                    return None
            elif knob.target[0] == "cap":
                raw = (proposals.get("device-pin-cap") or {}).get("max_per_device", "unlimited")
                found = _size(raw, "unlimited")
            else:
                _, cgroup, filename, region = knob.target
                found = _dmem_value((cgroups.get(cgroup) or {}).get(filename), region)
                if found == "absent":
                    found = None if filename in ("dmem.max", "dmem.pin.max") else 0
            if found not in knob.values:
                return None
            values[knob.name] = knob.index_of(found)
        return values


def _dmem_name(cgroup: str, filename: str, region: str) -> str:
    return f"{toml_path(('cgroups', cgroup, filename))}.{region}"


def _collect(
    policies: Sequence[Mapping[str, Any]], regions: Mapping[str, int]
) -> dict[str, set[int | None]]:
    """Every limit value the given policies write, by knob name (to add to the grids)."""
    seen: dict[str, set[int | None]] = {}
    for doc in policies:
        for user, spec in (doc.get("users") or {}).items():
            raw = (spec or {}).get("memlock")
            if raw is not None and not isinstance(raw, dict):
                seen.setdefault(f"users.{user}.memlock", set()).add(_size(raw, "unlimited"))
        for cgroup, spec in (doc.get("cgroups") or {}).items():
            for filename in _CONTROLLED_FILES:
                for region in regions:
                    value = _dmem_value((spec or {}).get(filename), region)
                    if value != "absent":
                        name = _dmem_name(cgroup, filename, region)
                        seen.setdefault(name, set()).add(value)  # type: ignore[arg-type]
        cap = ((doc.get("proposals") or {}).get("device-pin-cap") or {}).get("max_per_device")
        if cap is not None:
            seen.setdefault("device-pin-cap.max_per_device", set()).add(_size(cap, "unlimited"))
    return seen


def build_space(
    base: Mapping[str, Any],
    regions: Mapping[str, int],
    *,
    revocable: bool,
    variants: Sequence[Mapping[str, Any]] = (),
) -> Space:
    """The space over ``base`` (the advised variant's policy document, ``{device}`` region
    names as scenarios write them); ``regions``: the machine's dmem regions by that name with
    their capacity; ``revocable``: the kernel has ``revocable-pins``; ``variants``: the
    scenario's variants' policies, whose values join the grids."""
    template = copy.deepcopy(dict(base))
    users = template.setdefault("users", {})
    cgroups = template.setdefault("cgroups", {})
    for spec in users.values():
        spec.pop("memlock", None)
    for spec in cgroups.values():
        for filename in _CONTROLLED_FILES:
            spec.pop(filename, None)
    proposals = template.get("proposals") or {}
    for name in (*PIN_PROPOSALS, REVOCABLE):
        proposals.pop(name, None)
    if not proposals:
        template.pop("proposals", None)
    extra = _collect([base, *variants], regions)
    knobs: list[Knob] = []
    choices = (NO_PROPOSAL, *PIN_PROPOSALS, *((REVOCABLE,) if revocable else ()))
    knobs.append(Knob("proposals.pins", choices, limit=False))
    for user in users:
        name = f"users.{user}.memlock"
        grid = _with((*_MEMLOCK_GRID, None), list(extra.get(name, ())))
        knobs.append(Knob(name, grid, target=("memlock", user)))
    top = max(regions.values(), default=64 * GiB)
    name = "device-pin-cap.max_per_device"
    steps = tuple(top * k // _STEPS for k in range(1, _STEPS + 1))
    grid = _with((*steps, None), list(extra.get(name, ())))
    knobs.append(Knob(name, grid, needs="device-pin-cap", target=("cap",)))
    for cgroup in cgroups:
        for region, size in regions.items():
            steps = tuple(size * k // _STEPS for k in range(1, _STEPS + 1))
            for filename in _CONTROLLED_FILES:
                name = _dmem_name(cgroup, filename, region)
                grid = (0, *steps) if filename in ("dmem.min", "dmem.low") else (*steps, None)
                needs = "dmem-pin-max" if filename == "dmem.pin.max" else None
                target = ("dmem", cgroup, filename, region)
                knobs.append(
                    Knob(name, _with(grid, list(extra.get(name, ()))), needs=needs, target=target)
                )
    return Space(template, tuple(knobs), dict(regions))
