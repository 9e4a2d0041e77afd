"""``pinlab bench``: a microbenchmark users run (``perftest ib_write_bw -a``) on a modelled
machine, printed as the tool prints it (:mod:`pinlab.bench`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from rich.console import Console

from pinlab.cli.common import (
    ArgType,
    UserError,
    add_command,
    add_json_flag,
    add_seed_flag,
    add_set_flag,
    as_user_error,
    print_json,
)


def _list_tools(args: argparse.Namespace, console: Console) -> int:
    """``pinlab bench`` without a tool: the tools, with what each mirrors."""
    from rich.table import Table

    from pinlab.bench import tool, tool_names

    tools = [{"name": name, "summary": tool(name).summary} for name in tool_names()]
    if args.json:
        return print_json(tools)
    table = Table(title="bench tools (pinlab bench TOOL ARGS...)", title_justify="left")
    table.add_column("tool", no_wrap=True)
    table.add_column("what it runs")
    for t in tools:
        table.add_row(t["name"], t["summary"])
    console.print(table)
    return 0


def _cmd_bench(args: argparse.Namespace, console: Console) -> int:
    """run a microbenchmark users run (perftest ...) on a modelled machine

    Run TOOL with the real tool's arguments on a modelled machine and print what the tool prints
    (e.g. pinlab bench perftest ib_write_bw -a --report_gbits). Without TOOL: list the tools."""
    from pinlab.bench import param_value, run_bench

    if args.tool is None:
        return _list_tools(args, console)
    first = args.args[0].partition("=")[0] if args.args else ""
    if first in args.own_options:  # argparse hands everything after TOOL to the tool
        raise UserError(
            f"bench: {first}: expected pinlab bench's options before TOOL "
            f"(pinlab bench {first} ... {args.tool} ...), "
            "found it after"
        )

    params: dict[str, object] = {}
    for item in args.param or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--param {item}: expected key=value, found no '='")
        params[key.strip()] = param_value(value.strip())
    with as_user_error():
        table = run_bench(
            args.tool,
            list(args.args),
            platform=args.platform,
            platform_params=params,
            nodes=args.nodes,
            sets=tuple(args.set or ()),
            seed=args.seed,
        )
    if args.json:
        data = dataclasses.asdict(table)
        data["meta"] = dict(table.meta)
        return print_json(data)
    sys.stdout.write(table.text)
    return 0


_nodes_arg = ArgType(
    int, "a number of nodes", lambda n: 1 <= n <= 16384, "1 to 16384 nodes", show_value=True
)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """The options ``parser`` declares so far (``--platform`` ...)."""
    return [o for action in parser._actions for o in action.option_strings]


def add_parsers(sub: Any) -> None:
    bench = add_command(sub, "bench", _cmd_bench)
    bench.add_argument(
        "--platform",
        default="cx-pair",
        metavar="PRESET|FILE",
        help="a preset or platform file (default cx-pair: two ConnectX hosts back to back)",
    )
    bench.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="a preset parameter (repeatable), e.g. --param nic=cx7 --param gpu=h200",
    )
    add_set_flag(bench, "a cost-model override (repeatable), e.g. --set nic.cx6.qp_msg_cost=0us")
    add_seed_flag(bench, "seed of every random draw", default=0)
    bench.add_argument(
        "--nodes", type=_nodes_arg, default=None, help="nodes the tool spans (perftest: 2)"
    )
    add_json_flag(bench, "the table (without TOOL: the tools) as JSON")
    # a tool's own --help stays the tool's
    own = [o for o in _option_strings(bench) if o not in ("-h", "--help")]
    bench.set_defaults(own_options=tuple(own))
    bench.add_argument(
        "tool",
        nargs="?",
        help="the tool, e.g. perftest, nvbandwidth, nccl-tests (without TOOL: list them)",
    )
    bench.add_argument(
        "args", nargs=argparse.REMAINDER, help="the tool's own arguments (test name first)"
    )
