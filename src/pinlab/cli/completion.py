"""Shell completion of ``pinlab`` (argcomplete): the names a command line can use.

:func:`install` gives the parser's arguments their completers (:data:`COMPLETERS`: scenario
names and files, the variants of the scenario already typed, kernel profiles, workloads,
platform presets, driver names, cost-parameter keys, ``--set`` paths, bench tools, validation
tables, pin proposals, ``inspect --paste`` kinds; nothing for a free value such as ``doctor
--device``) and hooks argcomplete into the parser -- only when the shell's
completion function is asking (``_ARGCOMPLETE`` in the environment). Enabling it in bash or
zsh: README, or the end of ``pinlab --help``.

Each completer is a function ``(prefix, parsed_args, **kwargs) -> list[str]``, as argcomplete
calls it; a completer whose source cannot be read (an unreadable scenario file) offers nothing
rather than breaking the shell.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pinlab.cli.common import subcommands

__all__ = [
    "COMPLETERS",
    "attach",
    "bench_tools",
    "comma_list",
    "cost_keys",
    "explore_policies",
    "exporter_kinds",
    "importer_kinds",
    "install",
    "names_of",
    "no_names",
    "paste_sources",
    "preset_names",
    "preset_or_file",
    "preset_params",
    "profile_names",
    "proposal_ids",
    "scenario_names",
    "scenario_or_file",
    "set_paths",
    "toml_files",
    "validation_tables",
    "variant_names",
    "workload_names",
]

Completer = Callable[..., list[str]]


def names_of(module: str, registry: str, what: str) -> Completer:
    """A completer of the names in ``module.registry`` (a dict or tuple of names, plugins'
    included, or a function returning them), imported when the shell first asks; ``what`` is
    its docstring."""

    def complete(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
        names = getattr(importlib.import_module(module), registry)
        if callable(names):
            names = names()
        return [n for n in names if n.startswith(prefix)]

    complete.__doc__ = what
    return complete


scenario_names = names_of("pinlab.scenarios.config", "BUILTIN", "The built-in scenarios.")
profile_names = names_of("pinlab.kernel.profile", "PRESETS", "The kernel profiles.")
workload_names = names_of("pinlab.sim.workloads", "WORKLOADS", "The workloads.")
preset_names = names_of("pinlab.platform", "PRESETS", "The platform presets.")
importer_kinds = names_of("pinlab.explore", "importer_kinds", "explore's importer kinds.")
exporter_kinds = names_of("pinlab.explore", "exporter_kinds", "explore's exporter kinds.")
explore_policies = names_of("pinlab.explore", "POLICIES", "explore's policies.")
proposal_ids = names_of("pinlab.policy.proposals", "PROPOSALS", "The opt-in pin policies.")


def toml_files(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """``.toml`` files and the directories on the way to them."""
    from argcomplete.completers import FilesCompleter

    return list(FilesCompleter(allowednames=("toml",))(prefix))


def scenario_or_file(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """A built-in scenario or a scenario file (``pinlab run NAME|FILE``, ``metrics``)."""
    return scenario_names(prefix) + toml_files(prefix)


def _scenario_of(parsed_args: Any) -> str | None:
    name = getattr(parsed_args, "scenario", None)
    return name if isinstance(name, str) and name else None


def variant_names(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """The variants of the scenario on the command line; without one, those of every
    built-in scenario (``pinlab run`` with no scenario runs them all)."""
    from pinlab.scenarios.config import BUILTIN

    scenario = _scenario_of(parsed_args)
    names: dict[str, None] = {}
    for ref in [scenario] if scenario else BUILTIN:
        doc = _document(ref)
        variants = doc.get("variants") if doc else None
        names.update(dict.fromkeys(variants if isinstance(variants, Mapping) else ()))
    return [n for n in names if n.startswith(prefix)]


def preset_or_file(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """A platform preset or a platform file (``pinlab bench --platform PRESET|FILE``)."""
    return preset_names(prefix) + toml_files(prefix)


def preset_params(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """``KEY=`` for ``pinlab bench --param``: the keyword parameters of the ``--platform``
    preset; after ``KEY=``, the values of a parameter whose choices are a ``Literal``."""
    import inspect
    import typing

    from pinlab.platform import PRESETS

    name = getattr(parsed_args, "platform", None)
    if not isinstance(name, str) or name not in PRESETS:
        return []
    key, sep, _typed = prefix.partition("=")
    if not sep:
        params = inspect.signature(PRESETS[name]).parameters
        return [f"{k}=" for k in params if k.startswith(prefix)]
    try:
        hint = typing.get_type_hints(PRESETS[name]).get(key)
    except (NameError, TypeError):  # a plugin's unresolvable annotation: no choices known
        return []
    choices = [
        c
        for t in (hint, *typing.get_args(hint))
        if typing.get_origin(t) is typing.Literal
        for c in typing.get_args(t)
    ]
    values = [f"{key}={c}" for c in choices]
    return [v for v in values if v.startswith(prefix)]


def comma_list(names: Completer) -> Completer:
    """A completer of a comma-separated LIST (``--exporters amdgpu,xe``): the names ``names``
    offers for the item being typed, each after the items already typed."""

    def complete(prefix: str = "", parsed_args: Any = None, **kwargs: Any) -> list[str]:
        done, _, item = prefix.rpartition(",")
        head = f"{done}," if done else ""
        typed = set(done.split(",")) if done else set()
        return [head + n for n in names(item, parsed_args) if n not in typed]

    return complete


def paste_sources(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """``KIND=`` for ``pinlab inspect --paste KIND=FILE`` (the pasted commands' names,
    ``lspci-tv=`` ...); after a known ``KIND=``, the files, each after it."""
    from argcomplete.completers import FilesCompleter

    from pinlab.inspect.paste import PASTE_KINDS

    kind, sep, path = prefix.partition("=")
    if not sep:
        return [f"{k}=" for k in PASTE_KINDS if k.startswith(prefix)]
    if kind not in PASTE_KINDS:
        return []
    return [f"{kind}={p}" for p in FilesCompleter()(path)]


def no_names(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """Nothing: a free value (``pinlab doctor --device gpu0``, a size) is no file name, and
    the names it takes are the host's or the snapshot's, not known while a line is typed."""
    return []


def cost_keys(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """The cost-model parameter keys (``pinlab params PATTERN``)."""
    from pinlab.platform.cost import parameters

    return [p.key for p in parameters() if p.key.startswith(prefix)]


def _paths(node: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The dotted ``--set`` paths of a scenario document's values: tables by key, lists of
    tables by their entries' ``name`` (the address of an entry, not a value to set)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _paths(value, (*path, str(key)))
    elif isinstance(node, list) and node and all(isinstance(v, Mapping) for v in node):
        for entry in node:
            name = entry.get("name")
            if isinstance(name, str):
                fields = {k: v for k, v in entry.items() if k != "name"}
                yield from _paths(fields, (*path, name))
    elif path:
        yield path


_NOT_SET = ("variants", "claim")
"""Top-level tables of a scenario that ``--set`` does not address (a variant's changes, the
claim's expectations)."""


def set_paths(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """``KEY=`` for ``--set``: every value of the scenario on the command line and
    ``cost.KEY`` of every cost parameter; a key segment that is not a bare TOML key is quoted
    as ``--set`` reads it (``policy.cgroups."user.slice".weight``)."""
    from pinlab.scenarios.paths import where_of

    scenario = _scenario_of(parsed_args)
    doc = _document(scenario) if scenario else None
    keys: dict[str, None] = {}
    for key, value in (doc or {}).items():
        if key not in _NOT_SET:
            keys.update(dict.fromkeys(where_of(p) for p in _paths(value, (key,))))
    keys.update(dict.fromkeys(f"cost.{k}" for k in cost_keys()))
    return [f"{k}=" for k in keys if k.startswith(prefix)]


def bench_tools(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """The ``pinlab bench`` tools."""
    from pinlab.bench import tool_names

    return [n for n in tool_names() if n.startswith(prefix)]


def validation_tables(prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
    """The table ids of ``pinlab validate --dir`` (default: the shipped tables) and table files."""
    from pinlab.errors import ConfigError
    from pinlab.validate import DEFAULT_DIR, load_tables

    directory = getattr(parsed_args, "dir", None) or DEFAULT_DIR
    try:
        ids = [t.id for t in load_tables(directory)]
    except (ConfigError, OSError):
        ids = []
    return [i for i in ids if i.startswith(prefix)] + toml_files(prefix)


def _document(ref: str) -> dict[str, Any] | None:
    """The TOML document of a built-in scenario or a scenario file; ``None`` when it cannot be
    read (completion offers less, it does not fail)."""
    from pathlib import Path

    from pinlab.errors import ConfigError
    from pinlab.scenarios.config import BUILTIN, builtin_path
    from pinlab.tomlfile import read_toml

    path = builtin_path(ref) if ref in BUILTIN else Path(ref)
    try:
        return read_toml(path, what="a scenario file", source=str(ref))
    except (ConfigError, OSError):
        return None


COMPLETERS: dict[tuple[str, str], Completer] = {
    ("run", "scenario"): scenario_or_file,
    ("run", "variant"): variant_names,
    ("run", "profile"): profile_names,
    ("run", "compare_profile"): profile_names,
    ("run", "set"): set_paths,
    ("run", "platform"): toml_files,
    ("run", "policy"): toml_files,
    ("matrix", "profile"): profile_names,
    ("matrix", "proposal"): proposal_ids,
    ("scenarios show", "name"): scenario_names,
    ("workloads", "name"): workload_names,
    ("params", "pattern"): cost_keys,
    ("platforms", "name"): preset_names,
    ("metrics", "scenario"): scenario_or_file,
    ("advise", "scenario"): scenario_or_file,
    ("advise", "variant"): variant_names,
    ("advise", "set"): set_paths,
    ("bench", "tool"): bench_tools,
    ("bench", "platform"): preset_or_file,
    ("bench", "param"): preset_params,
    ("bench", "set"): lambda prefix, **_: [f"{k}=" for k in cost_keys(prefix)],
    ("bench", "args"): no_names,  # the tool's own arguments: no file names
    ("doctor", "device"): no_names,
    ("doctor", "nic"): no_names,
    ("doctor", "size"): no_names,
    ("inspect", "paste"): paste_sources,
    ("validate", "tables"): validation_tables,
    ("sweep", "file"): toml_files,
    ("explore", "exporters"): comma_list(exporter_kinds),
    ("explore", "importers"): comma_list(importer_kinds),
    ("explore", "profiles"): comma_list(profile_names),
    ("explore", "policies"): comma_list(explore_policies),
    ("policy show", "file"): toml_files,
    ("policy check", "file"): toml_files,
}
"""The completer of each ``(command, argument dest)``; ``command`` is the subcommand path
below ``pinlab`` (``"scenarios show"``)."""


def attach(parser: argparse.ArgumentParser) -> None:
    """Give ``parser``'s arguments their completers (:data:`COMPLETERS`); ``KeyError`` for an
    entry naming a subcommand ``parser`` does not have."""
    parsers = {" ".join(path): child for path, child, _ in subcommands(parser)}
    for (command, dest), completer in COMPLETERS.items():
        for action in parsers[command]._actions:
            if action.dest == dest:
                action.completer = completer  # type: ignore[attr-defined]


def install(parser: argparse.ArgumentParser) -> None:
    """When the shell's completion function is asking (``_ARGCOMPLETE`` in the environment):
    attach the completers, print the completions to fd 8 and exit. Otherwise return at once,
    without importing argcomplete (a command pays nothing for completion)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    attach(parser)
    argcomplete.autocomplete(parser)
