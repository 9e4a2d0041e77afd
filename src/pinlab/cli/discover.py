"""``pinlab scenarios``, ``workloads``, ``params`` and ``metrics``: what a scenario can use.

* ``pinlab scenarios [--json]`` -- the built-in scenarios: name, camp, claim;
  ``pinlab scenarios show NAME [--json]`` -- a built-in scenario's TOML, to copy and edit;
* ``pinlab workloads [NAME] [--json]`` -- the workloads; with NAME its parameters (type, unit,
  default, what it names on the platform, description) and the metrics it reports;
* ``pinlab params [PATTERN] [--json]`` -- every cost-model parameter (or those whose key
  matches the fnmatch PATTERN, ``'odp.*'``): value, unit, sweep range, confidence, source;
* ``pinlab metrics SCENARIO [--json]`` -- the metric names a claim of SCENARIO (a built-in
  name or a file) can use, with units, when each is reported and in which variants, and the
  claim functions;
* ``pinlab platforms [NAME] [--json]`` -- the platform presets (``preset = NAME`` of a platform
  file, ``pinlab bench --platform NAME``) and their parameters, defaults as a file writes them;
* ``pinlab plugins [--json]`` -- each plugin group's registry, its built-in names and the
  installed plugins' entry points (:mod:`pinlab.plugins`).
"""

from __future__ import annotations

import argparse
import fnmatch
import inspect
import sys
import types
import typing
from collections.abc import Callable, Collection
from typing import Any

from rich.console import Console
from rich.markup import escape

from pinlab.cli.common import (
    Command,
    UserError,
    add_listing,
    as_user_error,
    print_json,
    print_table,
    wide,
)

__all__ = ["add_parsers"]


PLUGIN_REGISTRIES: dict[str, tuple[str, str]] = {
    "pinlab.exporters": ("pinlab.drivers", "EXPORTERS"),
    "pinlab.importers": ("pinlab.drivers", "IMPORTERS"),
    "pinlab.workloads": ("pinlab.sim.workloads", "WORKLOADS"),
    "pinlab.presets": ("pinlab.platform", "PRESETS"),
    "pinlab.claim_functions": ("pinlab.scenarios.claimfns", "CLAIM_FUNCTIONS"),
}
"""The registry (module, name) each entry-point group of :data:`pinlab.plugins.GROUPS` fills."""


def _registry(group: str) -> Collection[str]:
    """The registry the entry-point ``group`` fills (its names), loading its plugins."""
    import importlib

    module, attr = PLUGIN_REGISTRIES[group]
    names: Collection[str] = getattr(importlib.import_module(module), attr)
    return names


def _registry_command(
    group: str,
    info: Callable[[str], dict[str, Any]],
    render: Callable[[dict[str, Any], Console], None],
    *,
    command: str,
    what: str,
    title: str,
    summary: str,
    doc: str,
) -> Command:
    """``pinlab COMMAND [NAME] [--json]`` over the registry the plugin ``group`` fills
    (workloads, platform presets): without NAME each entry's ``info`` as JSON, or a table
    titled ``title`` of its name, number of parameters and summary (the column headed
    ``summary``); with NAME, one in the registry, its info as JSON or drawn by ``render``. The
    registry is read when the command runs: reading it loads its plugins. ``doc`` is the
    command's help (:func:`~pinlab.cli.common.add_command`)."""

    def run(args: argparse.Namespace, console: Console) -> int:
        names = _registry(group)
        console = wide(console)
        if args.name is None:
            infos = [info(n) for n in names]
            if args.json:
                return print_json(infos)
            print_table(
                console,
                title,
                ("name", "parameters", summary),
                ((i["name"], str(len(i["params"])), escape(i["summary"])) for i in infos),
                right=("parameters",),
            )
            return 0
        if args.name not in names:
            raise UserError(
                f"{command}: expected a {what} ({', '.join(names)}), found {args.name!r}"
            )
        entry = info(args.name)
        if args.json:
            return print_json(entry)
        render(entry, console)
        return 0

    run.__doc__ = doc
    return run


# -- scenarios ----------------------------------------------------------------------------------


def _cmd_scenarios(args: argparse.Namespace, console: Console) -> int:
    """list the built-in scenarios and their claims; `scenarios show NAME` prints one

    The built-in scenarios: name, camp and claim. `pinlab scenarios show NAME` prints a built-in
    scenario's TOML, to copy as the start of your own."""
    from pinlab.errors import ConfigError
    from pinlab.scenarios import config

    rows = []
    for name, claim in config.list_scenarios():
        try:
            camp = str(getattr(config.load_scenario(name), "camp", "") or "")
        except ConfigError:  # a broken built-in still shows up in the list
            camp = ""
        rows.append((name, camp, claim))
    if args.json:
        return print_json([{"name": n, "camp": c, "claim": s} for n, c, s in rows])
    with_camp = any(camp for _, camp, _ in rows)
    print_table(
        wide(console),
        "built-in scenarios (pinlab run NAME)",
        ("name", "camp", "claim") if with_camp else ("name", "claim"),
        ((name, camp, claim) if with_camp else (name, claim) for name, camp, claim in rows),
    )
    return 0


def _cmd_scenario_show(args: argparse.Namespace, console: Console) -> int:
    """print a built-in scenario's TOML

    Print a built-in scenario's TOML file as it ships, to copy and edit into your own
    (docs/scenarios.md); with --json, the text and its parsed document."""
    from pinlab.scenarios import config
    from pinlab.tomlfile import read_toml

    if args.name not in config.BUILTIN:
        raise UserError(
            f"scenarios show: expected a built-in scenario ({', '.join(config.BUILTIN)}), "
            f"found {args.name!r}"
        )
    path = config.builtin_path(args.name)
    text = path.read_text(encoding="utf-8")
    if args.json:
        document = read_toml(path, what="a scenario file", source=f"{args.name}.toml")
        info = {"name": args.name, "file": str(path), "toml": text, "document": document}
        return print_json(info)
    sys.stdout.write(text)
    return 0


# -- workloads ----------------------------------------------------------------------------------

_UNIT_KIND = {"B": "size", "s": "time", "B/s": "rate", "1/s": "rate", "ratio": "ratio"}


def _unit_aliases() -> tuple[tuple[Any, str], ...]:
    from pinlab.units import Duration, LineRate, Rate, Size

    return ((Size, "size"), (Rate, "rate"), (LineRate, "rate"), (Duration, "time"))


def _type_text(annotation: Any, unit: str) -> str:
    """A parameter's type for people: ``size``, ``int``, ``pinned | odp``, ``str or none``."""
    if unit in _UNIT_KIND:
        return _UNIT_KIND[unit]
    for alias, kind in _unit_aliases():
        if annotation == alias:
            return kind
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if args and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return " | ".join(_type_text(a, "") for a in inner) + " or none"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(a, "") for a in args)
    if origin in (list, tuple) and args:
        return f"list of {_type_text(args[0], '')}"
    if origin is typing.Annotated or hasattr(annotation, "__metadata__"):
        return _type_text(args[0], unit) if args else str(annotation)
    return getattr(annotation, "__name__", str(annotation))


def _default_text(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    return "none" if value is None else value


_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def _constraint(meta: Any) -> str:
    """``>= 0`` of pydantic's ``Ge(ge=0)``; ``""`` for anything else."""
    for attr, op in _BOUNDS:
        if type(meta).__name__.lower() == attr and hasattr(meta, attr):
            return f"{op} {getattr(meta, attr)}"
    return ""


def workload_info(name: str) -> dict[str, Any]:
    """One workload as data: its summary, parameters and the metrics it reports."""
    from pinlab.sim.metrics import TENANT_METRICS
    from pinlab.sim.workloads import WORKLOADS
    from pinlab.sim.workloads.base import param_ref, param_unit

    wd = WORKLOADS[name]
    params = []
    for field, info in wd.params.model_fields.items():
        if field == "workload":
            continue
        unit = param_unit(wd.params, field)
        constraints = [c for m in info.metadata if (c := _constraint(m))]
        params.append(
            {
                "name": field,
                "type": _type_text(info.annotation, unit),
                "unit": unit,
                "default": _default_text(info.default),
                "refers_to": param_ref(wd.params, field),
                "constraints": constraints,
                "description": info.description or "",
            }
        )
    own = [{"name": m.name, "unit": m.unit, "description": m.description} for m in wd.metrics()]
    every = [
        {"name": m.name, "unit": m.unit, "description": m.description}
        for m in TENANT_METRICS.values()
    ]
    return {
        "name": name,
        "summary": wd.summary,
        "params": params,
        "metrics": own,
        "tenant_metrics": every,
    }


def _render_workload(info: dict[str, Any], console: Console) -> None:
    name = info["name"]
    print_table(
        console,
        escape(f"{name}: {info['summary']} (params = {{ ... }} of a [[tenants]] entry)"),
        ("parameter", "type", "unit", "default", "names a", "description"),
        (
            (
                p["name"],
                p["type"],
                p["unit"],
                str(p["default"]),
                p["refers_to"] or "",
                p["description"]
                + (f" ({', '.join(p['constraints'])})" if p["constraints"] else ""),
            )
            for p in info["params"]
        ),
    )
    print_table(
        console,
        f"what {name} reports besides every tenant's metrics "
        "(tenant.<name>.<metric>; pinlab metrics SCENARIO lists them all)",
        ("metric", "unit", "description"),
        ((m["name"], m["unit"], m["description"]) for m in info["metrics"]),
    )


_cmd_workloads = _registry_command(
    "pinlab.workloads",
    workload_info,
    _render_workload,
    command="workloads",
    what="workload",
    title="workloads (pinlab workloads NAME)",
    summary="what it does",
    doc="""list the workloads; with NAME, its parameters and metrics

    The workloads a [[tenants]] entry can run. With NAME: each parameter's type, unit, default, what
    it names on the platform and meaning, and the metrics the workload reports.""",
)


# -- params ---------------------------------------------------------------------------------------


def _range_text(p: Any) -> str:
    """The sweep range or the choices, as the cost model writes them."""
    if p.choices is not None:
        return " | ".join(str(_default_text(c)) for c in p.choices)
    if p.sweep is not None:
        low, high = p.sweep
        unit = f" {p.unit}" if all(isinstance(x, int | float) for x in p.sweep) else ""
        return f"{low} – {high}{unit}"
    return ""


_VALUE_UNIT = {
    **dict.fromkeys(("ns", "us", "ms"), "s"),
    **dict.fromkeys(("KiB", "MiB", "GiB"), "B"),
    **dict.fromkeys(("GB/s", "Gbps"), "B/s"),
    **dict.fromkeys(("ns/B", "ms/GB", "ms/MB", "ms/GiB"), "s/B"),
}
"""The unit of a parameter's ``value`` (held in base units) where the cost-model document
writes it in another (``unit``: ``us`` -> a value in s); ``text`` is the value in the doc's."""


def _key_matches(key: str, pattern: str) -> bool:
    """``key`` matches ``pattern``: an fnmatch pattern when it has a wildcard, else the key
    itself or a dotted prefix of it (``nic.efa`` matches ``nic.efa.mtu``, not ``nic.efax``)."""
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(key, pattern)
    return key == pattern or key.startswith(pattern + ".")


def _cmd_params(args: argparse.Namespace, console: Console) -> int:
    """list the cost-model parameters: value, unit, range, confidence, source

    Every cost-model parameter (docs/cost-model), or those whose key matches PATTERN (fnmatch:
    'odp.*', '*latency*'; without a wildcard, a key and the keys below it: 'nic.efa'): its
    value in its unit, sweep range or choices, confidence and source. Override one with
    [cost] in a scenario or --set cost.KEY=VALUE."""
    from pinlab.platform.cost import parameters

    pattern = args.pattern or "*"
    params = [p for p in parameters() if _key_matches(p.key, pattern)]
    if not params:
        groups = sorted({p.key.split(".")[0] + ".*" for p in parameters()})
        raise UserError(
            f"params: expected a pattern matching cost parameters ({', '.join(groups)}), "
            f"found {pattern!r}"
        )
    if args.json:
        return print_json(
            [
                {
                    "key": p.key,
                    "value": p.value,
                    "value_unit": _VALUE_UNIT.get(p.unit, p.unit),
                    "text": p.text,
                    "unit": p.unit,
                    "sweep": p.sweep,
                    "choices": p.choices,
                    "confidence": p.confidence,
                    "marker": p.marker,
                    "section": p.section,
                    "source": p.source,
                    "description": p.description,
                }
                for p in params
            ]
        )
    print_table(
        wide(console),
        escape(
            f"cost parameters{'' if pattern == '*' else f' matching {pattern}'} "
            f"({len(params)}; override with [cost] or --set cost.KEY=VALUE)"
        ),
        ("key", "value", "range", "confidence", "source", "description"),
        (
            (
                p.key,
                p.text,
                _range_text(p),
                p.confidence + (f" [{p.marker}]" if p.marker else ""),
                f"{p.section} {p.source}".strip(),
                p.description,
            )
            for p in params
        ),
        no_wrap=2,
    )
    return 0


# -- metrics --------------------------------------------------------------------------------------


def _cmd_metrics(args: argparse.Namespace, console: Console) -> int:
    """list the metric names a scenario's claim can use

    The metrics SCENARIO (a built-in name or a scenario file) can report, per variant, with units,
    when each is reported and what it measures: the names a [[claim.expect]] can compare
    (docs/scenarios.md), and the claim functions."""
    from pinlab.scenarios import config
    from pinlab.scenarios.catalog import domain_text, merged
    from pinlab.scenarios.claimfns import CLAIM_FUNCTIONS

    with as_user_error():
        cfg = config.load_scenario(args.scenario)
        catalogs = {v: cfg.catalog(v) for v in cfg.variants}
    variants = list(catalogs)
    entries = merged(catalogs)
    domains: dict[str, Any] = {}
    for catalog in catalogs.values():
        domains.update(catalog.domains)
    functions = [
        {"name": f.name, "arity": f.arity, "summary": f.summary} for f in CLAIM_FUNCTIONS.values()
    ]
    if args.json:
        return print_json(
            {
                "scenario": cfg.name,
                "variants": variants,
                "metrics": [
                    {**e.to_json(), "variants": list(vs) if len(vs) < len(variants) else ["*"]}
                    for e, vs in entries
                ],
                "placeholders": {k: list(v) if v is not None else None for k, v in domains.items()},
                "functions": functions,
            }
        )
    console = wide(console)
    print_table(
        console,
        escape(f"{cfg.name}: the metrics a [claim] can use (variants: {', '.join(variants)})"),
        ("metric", "unit", "reported", "variants", "description"),
        (
            (
                escape(entry.name),
                entry.unit,
                entry.reported,
                "all" if len(vs) == len(variants) else ", ".join(vs),
                escape(entry.description),
            )
            for entry, vs in entries
        ),
    )
    for key, text in domain_text(domains).items():
        console.print(f"<{key}>: {text}", markup=False, highlight=False)
    console.print(
        "claim functions (fn = ...): "
        + "; ".join(f"{f['name']}: {f['summary']}" for f in functions),
        markup=False,
        highlight=False,
    )
    return 0


# -- platforms and plugins ----------------------------------------------------------------------


def _written(annotation: Any, value: Any) -> Any:
    """``value`` as a file writes it: through the serializer of its unit type (``"32GiB"``,
    ``"100Gbps"``), else as it is."""
    from pydantic import PlainSerializer

    if value is None:
        return None
    candidates = [annotation, *typing.get_args(annotation)]
    for candidate in candidates:
        for meta in getattr(candidate, "__metadata__", ()):
            if isinstance(meta, PlainSerializer):
                return meta.func(value)  # type: ignore[call-arg]
    return value


def preset_info(name: str) -> dict[str, Any]:
    """One platform preset as data: its summary, description and keyword parameters (type,
    default as a platform file writes it)."""
    from pinlab.platform import PRESETS

    func = PRESETS[name]
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except (NameError, TypeError):  # a plugin's unresolvable annotation: types unknown
        hints = {}
    doc = inspect.getdoc(func) or ""
    params = []
    for pname, param in inspect.signature(func).parameters.items():
        annotation = hints.get(pname, param.annotation)
        required = param.default is inspect.Parameter.empty
        params.append(
            {
                "name": pname,
                "type": "" if annotation is inspect.Parameter.empty else _type_text(annotation, ""),
                "required": required,
                "default": None if required else _written(annotation, param.default),
            }
        )
    return {
        "name": name,
        "summary": " ".join(doc.split("\n\n")[0].split()),
        "description": doc,
        "params": params,
    }


def _render_preset(info: dict[str, Any], console: Console) -> None:
    name = info["name"]
    console.print(f"{name}: {info['description']}", markup=False, highlight=False)
    print_table(
        console,
        f"parameters (params = {{ ... }} of a platform file with preset = {name!r})",
        ("parameter", "type", "default"),
        (
            (
                p["name"],
                escape(p["type"]),
                escape("(required)" if p["required"] else str(_default_text(p["default"]))),
            )
            for p in info["params"]
        ),
    )


_cmd_platforms = _registry_command(
    "pinlab.presets",
    preset_info,
    _render_preset,
    command="platforms",
    what="preset",
    title="platform presets (pinlab platforms NAME)",
    summary="what it models",
    doc="""list the platform presets; with NAME, its parameters and defaults

    The platform presets a platform file names (preset = NAME, params = { ... }) and pinlab bench
    --platform NAME takes, the installed plugins' included. With NAME: each keyword parameter's type
    and default, written as a file writes it.""",
)


def plugins_info() -> list[dict[str, Any]]:
    """Per plugin group: its registry, the built-in names and the installed entry points.
    Reading each registry loads its plugins, so a broken one is a ``PluginError`` here."""
    from importlib.metadata import entry_points

    from pinlab.plugins import GROUPS

    groups = []
    for group in GROUPS:
        module, attr = PLUGIN_REGISTRIES[group]
        names = list(_registry(group))
        eps = sorted(entry_points(group=group), key=lambda e: (e.name, e.value))
        plugged = {ep.name for ep in eps}
        groups.append(
            {
                "group": group,
                "registry": f"{module}.{attr}",
                "builtin": [n for n in names if n not in plugged],
                "plugins": [
                    {
                        "name": ep.name,
                        "value": ep.value,
                        "distribution": ep.dist.name if ep.dist is not None else None,
                        "version": ep.dist.version if ep.dist is not None else None,
                    }
                    for ep in eps
                ],
            }
        )
    return groups


def _cmd_plugins(args: argparse.Namespace, console: Console) -> int:
    """list the plugin groups, their registries and the installed plugins

    The entry-point groups pinlab reads (pinlab.exporters, pinlab.importers, pinlab.workloads,
    pinlab.presets, pinlab.claim_functions): for each, the registry it fills, how many built-in
    names it holds and the installed packages' entry points. A plugin that cannot be loaded is
    reported in one line (exit 2)."""
    groups = plugins_info()
    if args.json:
        return print_json(groups)

    def installed(group: dict[str, Any]) -> str:
        return "; ".join(
            f"{p['name']} = {p['value']}"
            + (f" ({p['distribution']} {p['version']})" if p["distribution"] else "")
            for p in group["plugins"]
        )

    print_table(
        wide(console),
        "plugin groups (entry points, pinlab.plugins)",
        ("group", "registry", "built-in", "installed plugins"),
        (
            (g["group"], g["registry"], str(len(g["builtin"])), escape(installed(g) or "none"))
            for g in groups
        ),
        no_wrap=3,
    )
    return 0


def add_parsers(sub: Any) -> None:
    scenarios = add_listing(sub, "scenarios", _cmd_scenarios)
    actions = scenarios.add_subparsers(dest="scenarios_command", metavar="ACTION")
    show = add_listing(
        actions, "show", _cmd_scenario_show, json_help="the file's text and its document"
    )
    show.add_argument("name", metavar="NAME", help="a built-in scenario")

    workloads = add_listing(sub, "workloads", _cmd_workloads)
    workloads.add_argument("name", nargs="?", metavar="NAME", help="a workload")

    params = add_listing(sub, "params", _cmd_params)
    params.add_argument(
        "pattern", nargs="?", metavar="PATTERN", help="fnmatch over the keys, or a dotted prefix"
    )

    metrics = add_listing(sub, "metrics", _cmd_metrics)
    metrics.add_argument("scenario", metavar="SCENARIO", help="a built-in name or a .toml file")

    platforms = add_listing(sub, "platforms", _cmd_platforms)
    platforms.add_argument("name", nargs="?", metavar="NAME", help="a platform preset")

    add_listing(sub, "plugins", _cmd_plugins)
