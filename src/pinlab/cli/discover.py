"""``pinlab scenarios``, ``workloads``, ``params`` and ``metrics``: what a scenario can use.

* ``pinlab scenarios [--json]`` -- the built-in scenarios: name, camp, claim;
  ``pinlab scenarios show NAME [--json]`` -- a built-in scenario's TOML, to copy and edit;
* ``pinlab workloads [NAME] [--json]`` -- the workloads; with NAME its parameters (type, unit,
  default, what it names on the platform, description) and the metrics it reports;
* ``pinlab params [PATTERN] [--json]`` -- every cost-model parameter (or those whose key
  matches the fnmatch PATTERN, ``'odp.*'``): value, unit, sweep range, confidence, source;
* ``pinlab metrics SCENARIO [--json]`` -- the metric names a claim of SCENARIO (a built-in
  name or a file) can use, with units, when each is reported and in which variants, and the
  claim functions.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import typing
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pinlab.cli.common import UserError

__all__ = ["add_parsers"]


def _wide(console: Console) -> Console:
    """Piped or captured: full rows instead of 80 columns."""
    return console if console.is_terminal else Console(width=max(console.width, 160))


def _print_json(data: Any) -> int:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    return 0


# -- scenarios ----------------------------------------------------------------------------------


def _cmd_scenarios(args: argparse.Namespace, console: Console) -> int:
    from pinlab.errors import ConfigError
    from pinlab.scenarios import runner

    rows = []
    for name, claim in runner.list_scenarios():
        try:
            camp = str(getattr(runner.load_scenario(name), "camp", "") or "")
        except ConfigError:  # a broken built-in still shows up in the list
            camp = ""
        rows.append((name, camp, claim))
    if args.json:
        return _print_json([{"name": n, "camp": c, "claim": s} for n, c, s in rows])
    table = Table(title="built-in scenarios (pinlab run NAME)", title_justify="left")
    table.add_column("name", no_wrap=True)
    with_camp = any(camp for _, camp, _ in rows)
    if with_camp:
        table.add_column("camp")
    table.add_column("claim")
    for name, camp, claim in rows:
        table.add_row(name, *((camp,) if with_camp else ()), claim)
    _wide(console).print(table)
    return 0


def _cmd_scenario_show(args: argparse.Namespace, console: Console) -> int:
    from pinlab.scenarios import runner
    from pinlab.tomlfile import read_toml

    if args.name not in runner.BUILTIN:
        raise UserError(
            f"scenarios show: expected a built-in scenario ({', '.join(runner.BUILTIN)}), "
            f"found {args.name!r}"
        )
    path = runner.builtin_path(args.name)
    text = path.read_text(encoding="utf-8")
    if args.json:
        document = read_toml(path, what="a scenario file", source=f"{args.name}.toml")
        info = {"name": args.name, "file": str(path), "toml": text, "document": document}
        return _print_json(info)
    sys.stdout.write(text)
    return 0


# -- workloads ----------------------------------------------------------------------------------

_UNIT_KIND = {"B": "size", "s": "time", "B/s": "rate", "1/s": "rate", "ratio": "ratio"}


def _type_text(annotation: Any, unit: str) -> str:
    """A parameter's type for people: ``size``, ``int``, ``pinned | odp``, ``str or none``."""
    if unit in _UNIT_KIND:
        return _UNIT_KIND[unit]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if args and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return " | ".join(_type_text(a, "") for a in inner) + " or none"
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


def _cmd_workloads(args: argparse.Namespace, console: Console) -> int:
    from pinlab.sim.workloads import WORKLOADS

    console = _wide(console)
    if args.name is None:
        if args.json:
            return _print_json([workload_info(n) for n in WORKLOADS])
        table = Table(title="workloads (pinlab workloads NAME)", title_justify="left")
        table.add_column("name", no_wrap=True)
        table.add_column("parameters", justify="right")
        table.add_column("what it does")
        for name, wd in WORKLOADS.items():
            table.add_row(name, str(len(wd.params.model_fields) - 1), wd.summary)
        console.print(table)
        return 0
    if args.name not in WORKLOADS:
        raise UserError(
            f"workloads: expected a workload ({', '.join(WORKLOADS)}), found {args.name!r}"
        )
    info = workload_info(args.name)
    if args.json:
        return _print_json(info)
    table = Table(
        title=escape(f"{args.name}: {info['summary']} (params = {{ ... }} of a [[tenants]] entry)"),
        title_justify="left",
    )
    for column in ("parameter", "type", "unit", "default", "names a", "description"):
        table.add_column(column, no_wrap=column == "parameter")
    for p in info["params"]:
        description = p["description"] + (
            f" ({', '.join(p['constraints'])})" if p["constraints"] else ""
        )
        table.add_row(
            p["name"],
            p["type"],
            p["unit"],
            str(p["default"]),
            p["refers_to"] or "",
            description,
        )
    console.print(table)
    metrics = Table(
        title=f"what {args.name} reports besides every tenant's metrics "
        "(tenant.<name>.<metric>; pinlab metrics SCENARIO lists them all)",
        title_justify="left",
    )
    for column in ("metric", "unit", "description"):
        metrics.add_column(column, no_wrap=column == "metric")
    for m in info["metrics"]:
        metrics.add_row(m["name"], m["unit"], m["description"])
    console.print(metrics)
    return 0


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


def _cmd_params(args: argparse.Namespace, console: Console) -> int:
    from pinlab.platform.cost import parameters

    pattern = args.pattern or "*"
    params = [p for p in parameters() if fnmatch.fnmatchcase(p.key, pattern)]
    if not params:
        groups = sorted({p.key.split(".")[0] + ".*" for p in parameters()})
        raise UserError(
            f"params: expected a pattern matching cost parameters ({', '.join(groups)}), "
            f"found {pattern!r}"
        )
    if args.json:
        return _print_json(
            [
                {
                    "key": p.key,
                    "value": p.value,
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
    table = Table(
        title=escape(
            f"cost parameters{'' if pattern == '*' else f' matching {pattern}'} "
            f"({len(params)}; override with [cost] or --set cost.KEY=VALUE)"
        ),
        title_justify="left",
    )
    for column in ("key", "value", "range", "confidence", "source", "description"):
        table.add_column(column, no_wrap=column in ("key", "value"))
    for p in params:
        source = f"{p.section} {p.source}".strip()
        marker = f" [{p.marker}]" if p.marker else ""
        table.add_row(p.key, p.text, _range_text(p), p.confidence + marker, source, p.description)
    _wide(console).print(table)
    return 0


# -- metrics --------------------------------------------------------------------------------------


def _cmd_metrics(args: argparse.Namespace, console: Console) -> int:
    from pinlab.errors import ConfigError
    from pinlab.scenarios import runner
    from pinlab.scenarios.catalog import domain_text, merged
    from pinlab.scenarios.claimfns import CLAIM_FUNCTIONS

    try:
        cfg = runner.load_scenario(args.scenario)
        catalogs = {v: cfg.catalog(v) for v in cfg.variants}
    except ConfigError as e:
        raise UserError(str(e)) from None
    variants = list(catalogs)
    entries = merged(catalogs)
    domains: dict[str, Any] = {}
    for catalog in catalogs.values():
        domains.update(catalog.domains)
    functions = [
        {"name": f.name, "arity": f.arity, "summary": f.summary} for f in CLAIM_FUNCTIONS.values()
    ]
    if args.json:
        return _print_json(
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
    console = _wide(console)
    table = Table(
        title=escape(
            f"{cfg.name}: the metrics a [claim] can use (variants: {', '.join(variants)})"
        ),
        title_justify="left",
    )
    for column in ("metric", "unit", "reported", "variants", "description"):
        table.add_column(column, no_wrap=column == "metric")
    for entry, vs in entries:
        shown = "all" if len(vs) == len(variants) else ", ".join(vs)
        table.add_row(
            escape(entry.name), entry.unit, entry.reported, shown, escape(entry.description)
        )
    console.print(table)
    for key, text in domain_text(domains).items():
        console.print(f"<{key}>: {text}", markup=False, highlight=False)
    console.print(
        "claim functions (fn = ...): "
        + "; ".join(f"{f['name']}: {f['summary']}" for f in functions),
        markup=False,
        highlight=False,
    )
    return 0


def add_parsers(sub: Any) -> None:
    scenarios = sub.add_parser(
        "scenarios",
        help="list the built-in scenarios and their claims; `scenarios show NAME` prints one",
        description="The built-in scenarios: name, camp and claim. `pinlab scenarios show NAME` "
        "prints a built-in scenario's TOML, to copy as the start of your own.",
    )
    scenarios.add_argument("--json", action="store_true", help="machine-readable output")
    scenarios.set_defaults(func=_cmd_scenarios)
    actions = scenarios.add_subparsers(dest="scenarios_command", metavar="ACTION")
    show = actions.add_parser("show", help="print a built-in scenario's TOML")
    show.add_argument("name", metavar="NAME", help="a built-in scenario")
    show.add_argument("--json", action="store_true", help="the file's text and its document")
    show.set_defaults(func=_cmd_scenario_show)

    workloads = sub.add_parser(
        "workloads",
        help="list the workloads; with NAME, its parameters and metrics",
        description="The workloads a [[tenants]] entry can run. With NAME: each parameter's "
        "type, unit, default, what it names on the platform and meaning, and the metrics the "
        "workload reports.",
    )
    workloads.add_argument("name", nargs="?", metavar="NAME", help="a workload")
    workloads.add_argument("--json", action="store_true", help="machine-readable output")
    workloads.set_defaults(func=_cmd_workloads)

    params = sub.add_parser(
        "params",
        help="list the cost-model parameters: value, unit, range, confidence, source",
        description="Every cost-model parameter (docs/cost-model), or those whose key matches "
        "PATTERN (fnmatch: 'odp.*', '*latency*'): its value in its unit, sweep range or "
        "choices, confidence and source. Override one with [cost] in a scenario or "
        "--set cost.KEY=VALUE.",
    )
    params.add_argument("pattern", nargs="?", metavar="PATTERN", help="fnmatch over the keys")
    params.add_argument("--json", action="store_true", help="machine-readable output")
    params.set_defaults(func=_cmd_params)

    metrics = sub.add_parser(
        "metrics",
        help="list the metric names a scenario's claim can use",
        description="The metrics SCENARIO (a built-in name or a scenario file) can report, "
        "per variant, with units, when each is reported and what it measures: the names a "
        "[[claim.expect]] can compare (docs/scenarios.md), and the claim functions.",
    )
    metrics.add_argument("scenario", metavar="SCENARIO", help="a built-in name or a .toml file")
    metrics.add_argument("--json", action="store_true", help="machine-readable output")
    metrics.set_defaults(func=_cmd_metrics)
