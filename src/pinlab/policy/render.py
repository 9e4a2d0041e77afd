"""Render a policy -- a live cgroup tree with its dmem settings, the users and the proposals --
for the console, ``systemd-cgls`` style (``pinlab policy show``; the simulator renders the
same view after a run, with usage and denials).

Everything is read through the cgroup interface files (``dmem.min``/``low``/``max``,
``dmem.pin.max``, ``dmem.current``, ``dmem.pin.current``, ``cgroup.procs``), exactly as an
administrator would ``cat`` them, so the view shows what the kernel model holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from pinlab.kernel.kernel import Kernel
from pinlab.policy.cgroup import Cgroup, CgroupTree
from pinlab.policy.config import UserSpec
from pinlab.policy.dmem import DmemCgroupController
from pinlab.policy.proposals import PROPOSALS, summary
from pinlab.units import compact_size

__all__ = ["render_policy"]

_SETTINGS = (("dmem.min", "0"), ("dmem.low", "0"), ("dmem.max", "max"), ("dmem.pin.max", "max"))
_USAGE = (("dmem.current", "current"), ("dmem.pin.current", "pinned"))


def _lines(tree: CgroupTree, cgrp: Cgroup, filename: str) -> list[tuple[str, str]]:
    if filename not in tree.files(cgrp):
        return []
    out = []
    for line in tree.read(cgrp, filename).splitlines():
        region, _, value = line.partition(" ")
        if region:
            out.append((region, value.strip()))
    return out


def _value(raw: str) -> str:
    return raw if raw == "max" else compact_size(int(raw))


def _label(
    tree: CgroupTree,
    cgrp: Cgroup,
    *,
    usage: bool,
    single_region: bool,
    notes: Mapping[str, str],
) -> Text:
    text = Text(cgrp.name if not cgrp.is_root else "/", style="bold")
    parts: list[str] = []

    def region_text(region: str) -> str:
        return "" if single_region else f" {region}"

    for filename, default in _SETTINGS:
        for region, raw in _lines(tree, cgrp, filename):
            if raw != default:
                parts.append(f"{filename.removeprefix('dmem.')}{region_text(region)}={_value(raw)}")
    if cgrp.is_root:
        for region, raw in _lines(tree, cgrp, "dmem.capacity"):
            parts.append(f"capacity {region} {_value(raw)}")
    if parts:
        text.append("  " + "  ".join(parts), style="cyan")
    if usage:
        used: list[str] = []
        for filename, word in _USAGE:
            for region, raw in _lines(tree, cgrp, filename):
                if raw not in ("0", "max"):
                    used.append(f"{word}{region_text(region)}={_value(raw)}")
        procs = len(tree.read(cgrp, "cgroup.procs").split())
        if procs:
            used.append(f"{procs} proc{'s' if procs != 1 else ''}")
        if used:
            text.append("  [" + ", ".join(used) + "]", style="green")
    note = notes.get(cgrp.path)
    if note:
        text.append(f"  # {note}", style="dim")
    return text


def _cgroup_tree(
    tree: CgroupTree,
    dmem: DmemCgroupController | None,
    *,
    usage: bool,
    title: str,
    notes: Mapping[str, str],
) -> Tree:
    single = dmem is not None and len(dmem.regions) == 1
    label = Text.assemble(
        (f"{title}\n", "bold underline"),
        _label(tree, tree.root, usage=usage, single_region=single, notes=notes),
    )
    if single and dmem is not None:
        label.append(f"  (dmem region {dmem.regions[0].name})", style="dim")
    root = Tree(label, guide_style="dim")
    nodes: dict[Cgroup, Tree] = {tree.root: root}
    for cgrp in tree.walk():
        if cgrp.is_root or cgrp.parent is None:
            continue
        nodes[cgrp] = nodes[cgrp.parent].add(
            _label(tree, cgrp, usage=usage, single_region=single, notes=notes)
        )
    return root


def _memlock(spec: UserSpec) -> str:
    soft, hard = spec.memlock.soft, spec.memlock.hard
    text = compact_size(soft)
    return text if soft == hard else f"{text} (hard {compact_size(hard)})"


def _users_table(users: Mapping[str, UserSpec], kernel: Kernel | None, *, usage: bool) -> Table:
    table = Table(title="users", title_justify="left")
    for col in ("user", "uid", "RLIMIT_MEMLOCK", "capabilities", "cgroup"):
        table.add_column(col)
    with_usage = usage and kernel is not None
    if with_usage:
        table.add_column("user->locked_vm")
    for name, spec in users.items():
        row = [
            name,
            str(spec.uid),
            _memlock(spec),
            ", ".join(spec.capabilities) or "-",
            spec.cgroup,
        ]
        if with_usage and kernel is not None:
            user = kernel.users.get(spec.uid)
            row.append(compact_size(user.locked_vm * 4096) if user is not None else "0B")
        table.add_row(*row)
    return table


_LIVE_SETTINGS = ("device_memory_only", "max_per_device", "per_device")


def _settings(spec: object) -> str:
    if isinstance(spec, BaseModel):
        items = spec.model_dump(by_alias=True)
    else:  # a live policy object: the parameters it was installed with
        items = {k: getattr(spec, k) for k in _LIVE_SETTINGS if hasattr(spec, k)}
    if items:
        parts = []
        for key, value in items.items():
            if key == "enabled":
                continue
            if isinstance(value, dict):
                value = ", ".join(f"{k}={_size_text(v)}" for k, v in value.items()) or "-"
            elif key.startswith("max") or key.endswith("max"):
                value = _size_text(value)
            parts.append(f"{key}={value}")
        return "; ".join(parts) or "-"
    return "-"


def _size_text(value: object) -> str:
    if value is None:
        return "unlimited"
    if isinstance(value, int) and not isinstance(value, bool):
        return compact_size(value)
    return str(value)


def _denials(policy: object) -> str:
    denials = getattr(policy, "denials", None)
    if isinstance(denials, Mapping):
        return ", ".join(f"{k} x{v}" for k, v in sorted(denials.items())) or "none"
    if isinstance(denials, int):
        return f"{denials}" if denials else "none"
    return "-"


def _counters(policy: object) -> str:
    out: list[str] = []
    formats: tuple[tuple[str, Callable[[int], str]], ...] = (
        ("charged_pages", lambda v: f"charged {compact_size(v * 4096)}"),
        ("pins", lambda v: f"{v} pins"),
        ("charged", lambda v: f"{v} buffers charged"),
        ("revocations", lambda v: f"{v} revoked"),
        ("revoked_bytes", lambda v: f"{compact_size(v)} taken back"),
        ("refused", lambda v: f"{v} not revocable"),
    )
    for attr, fmt in formats:
        value = getattr(policy, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            out.append(fmt(value))
    pinned = getattr(policy, "pinned", None)
    if isinstance(pinned, Mapping):
        out.extend(f"{dev} pinned {compact_size(v)}" for dev, v in pinned.items())
    return ", ".join(out) or "-"


def _proposals_table(proposals: Mapping[str, object], *, usage: bool) -> Table:
    table = Table(title="proposals on", title_justify="left")
    table.add_column("proposal")
    table.add_column("what it changes")
    table.add_column("settings")
    if usage:
        table.add_column("denials")
        table.add_column("counters")
    for name, obj in proposals.items():
        what = summary(name).split(":", 1)[-1].strip() if name in PROPOSALS else ""
        what = what.replace("``", "").replace("**", "")
        row = [name, what, _settings(obj)]
        if usage:
            row += [_denials(obj), _counters(obj)]
        table.add_row(*row)
    if not proposals:
        table.add_row("(none -- upstream behaviour)", "", "", *([""] * (2 if usage else 0)))
    return table


def render_policy(
    tree: CgroupTree,
    dmem: DmemCgroupController | None,
    proposals: Mapping[str, Any],
    usage: bool = True,
    *,
    users: Mapping[str, UserSpec] | None = None,
    kernel: Kernel | None = None,
    title: str = "cgroup tree",
    notes: Mapping[str, str] | None = None,
) -> RenderableType:
    """A console view of a policy on a live tree.

    ``proposals`` maps proposal ids to either their settings (a validated spec from a policy
    file) or the live policy objects (then ``usage`` adds their denials by errno and
    counters). With ``usage`` the tree shows each cgroup's ``dmem.current``,
    ``dmem.pin.current`` and process count, and the users table each uid's
    ``user->locked_vm`` (when ``kernel`` is given). ``notes`` adds a comment to cgroups by
    path (``/user.slice``), e.g. the descriptions of a policy file.
    """
    parts: list[RenderableType] = [
        _cgroup_tree(tree, dmem, usage=usage, title=title, notes=notes or {})
    ]
    if users:
        parts.append(_users_table(users, kernel, usage=usage))
    parts.append(_proposals_table(proposals, usage=usage))
    return Group(*parts)
