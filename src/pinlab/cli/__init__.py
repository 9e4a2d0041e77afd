# PYTHON_ARGCOMPLETE_OK: argcomplete's global completion completes a console script only when
# its module starts with this marker (README, "Shell completion")
"""The ``pinlab`` command line.

Subcommands:

* ``pinlab demo [--profile P]`` -- the dma-buf pin/move walkthrough;
* ``pinlab profiles [--json]`` -- the kernel profiles and the switches where they differ;
* ``pinlab bufinfo FILE [--json]`` -- parse a real (or pinlab-written) debugfs
  ``dma_buf/bufinfo``;
* ``pinlab matrix [--profile P] [--move-notify] [--json]`` -- every exporter × importer pair:
  where import + pin + map puts the memory, whether the path is P2P, which K- items decide;
* ``pinlab policy show FILE [--json]`` / ``pinlab policy check FILE`` -- an administrator
  policy file (cgroup tree with dmem limits, users' RLIMIT_MEMLOCK, proposals on): rendered /
  validated;
* ``pinlab run [NAME|FILE] [--variant V] [--profile P] [--set key=value] [--seed N]
  [--out DIR] [--compare-profile P2] [--quiet]`` -- run one scenario (or, with no argument,
  the whole debate suite), write each run's directory (``config.toml``, ``summary.json``,
  ``series.csv``) and print one verdict table per scenario; exit 1 when a claim failed (0 when
  it held or was not judged: no expectations, or its variants not all run);
* ``pinlab scenarios [show NAME]``, ``pinlab workloads [NAME]``, ``pinlab params [PATTERN]``,
  ``pinlab metrics SCENARIO`` (each with ``--json``) -- what a scenario can use: the built-in
  scenarios and their TOML, the workloads' parameters, the cost parameters, the metric names
  a claim can compare; ``pinlab platforms [NAME]``, ``pinlab plugins`` (with ``--json``) --
  the platform presets and their parameters, the plugin groups and the installed plugins;
* ``pinlab sweep SWEEP.toml [--out DIR] [--jobs N] [--dask local|ADDRESS] [--max-points N]
  [--dry-run [--json]] [--quiet]`` -- a parameter sweep into ``DIR/results.{parquet,csv}``,
  resumable;
* ``pinlab bench [TOOL ARGS...] [--json]`` -- a microbenchmark on a modelled machine (without
  TOOL: the tools); ``pinlab validate [TABLE...] [--list] [--json]`` -- the cost model against
  published tables (``--list``: the tables, not run);
* ``pinlab explore [--exporters ...] [--importers ...] [--profiles ...] [--policies ...]
  [--depth N] [--budget SECONDS] [--seed N] [--json] [--out DIR]`` -- search sequences of
  calls and device events for broken invariants; findings shrunk, classified, reproducible.
* ``pinlab advise SCENARIO --protect EXPR ... [--maximise METRIC] [--budget N] [--seed N]
  [--jobs N] [--dask ADDR] --out DIR`` -- a policy meeting every ``--protect``, verified.

Every command that lists things takes ``--json`` (one JSON document on stdout); shell
completion is :mod:`pinlab.cli.completion`. User errors (a missing file, a malformed dump, an
unknown profile) print one line naming what was expected and what was found, and exit with
status 2 -- never a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from rich.console import Console

from pinlab import __version__, gcpolicy, provenance
from pinlab.cli import (
    advise,
    bench,
    completion,
    discover,
    doctor,
    explore,
    inspect,
    kernel,
    policy,
    run,
    sweep,
    validate,
)
from pinlab.cli.common import UserError
from pinlab.errors import one_line
from pinlab.plugins import PluginError

__all__ = ["build_parser", "main"]

SUBCOMMANDS = (
    kernel,
    policy,
    inspect,
    doctor,
    run,
    discover,
    sweep,
    advise,
    bench,
    validate,
    explore,
)
"""The modules that add subcommands, in ``--help`` order."""


EPILOG = """\
Each COMMAND has its own --help. Every command that lists things takes --json.
Tab completion (bash, zsh) of commands, options, scenario, profile, workload, preset,
driver and cost-parameter names:
  eval "$(register-python-argcomplete pinlab)"   # in ~/.bashrc or ~/.zshrc
"""
"""The end of ``pinlab --help``: completion is the one setup step a user cannot discover
from the commands themselves."""


_ARGPARSE_FORMS = (
    (
        re.compile(r"^argument (\S+?): invalid int value: (.*)$"),
        r"\1: expected an integer, found \2",
    ),
    (
        re.compile(r"^argument (\S+?): invalid float value: (.*)$"),
        r"\1: expected a number, found \2",
    ),
    (
        re.compile(r"^argument (\S+?): invalid choice: (.*) \(choose from (.*)\)$"),
        r"\1: expected one of \3, found \2",
    ),
    (re.compile(r"^argument (\S+?): expected one argument$"), r"\1: expected a value, found none"),
    (re.compile(r"^argument (\S+?): (expected .*)$"), r"\1: \2"),
    (
        re.compile(r"^unrecognized arguments: (.*)$"),
        r"expected the command's flags and arguments, found \1",
    ),
    (
        re.compile(r"^the following arguments are required: (.*)$"),
        r"\1: expected a value, found none",
    ),
)
"""argparse's own messages in pinlab's ``FIELD: expected ..., found ...`` form."""


def _pinlab_form(message: str) -> str:
    for pattern, form in _ARGPARSE_FORMS:
        if pattern.match(message):
            return pattern.sub(form, message)
    return message.removeprefix("argument ")


class _Parser(argparse.ArgumentParser):
    """argparse with pinlab's one-line errors: ``pinlab: error: run: --seed: expected ...``
    and exit status 2, without the usage block (``--help`` still prints it)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("pinlab").strip()
        where = f"{command}: " if command else ""
        message = _pinlab_form(message)
        line = f"pinlab: error: {where}{message} (see pinlab {command} --help)".replace("  ", " ")
        Console(stderr=True, soft_wrap=True).print(line, markup=False, highlight=False)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pinlab",
        description="Who may pin dma-buf device memory, where, how much, and at what cost.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pinlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for module in SUBCOMMANDS:
        module.add_parsers(sub)
    return parser


def _chosen_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The (sub)command parser ``args`` were parsed by: ``pinlab scenarios show``'s for
    ``pinlab scenarios show X``, following each level's subcommand ``dest``."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs else None
        if chosen is None or chosen not in subs[0].choices:
            return parser
        parser = subs[0].choices[chosen]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    completion.install(parser)
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command that was given them, not by ``pinlab`` itself
        _chosen_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    console = Console()
    try:
        with provenance.recording(sys.argv[1:] if argv is None else argv):
            result: int = args.func(args, console)
            sys.stdout.flush()  # a closed pipe is seen here, not in the interpreter's exit
    except BrokenPipeError:
        # the reader went away (``pinlab matrix --json | head``): end quietly, and keep the
        # interpreter's own flush at exit from raising again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        # what finished is kept (run directories and sweep points are atomic); say so in one
        # line, with the shell's status for SIGINT
        Console(stderr=True, soft_wrap=True).print(
            "pinlab: interrupted; finished runs and sweep points are kept", markup=False
        )
        return 130
    except (UserError, PluginError) as e:
        # soft_wrap: the one-line error stays one line on narrow or non-terminal stderr
        Console(stderr=True, soft_wrap=True).print(
            f"pinlab: error: {one_line(str(e))}", markup=False, highlight=False
        )
        return 2
    return result


def console_main() -> int:
    """The ``pinlab`` executable and ``python -m pinlab.cli``: :func:`main`, then the heap
    frozen for the interpreter's exit (:func:`pinlab.gcpolicy.freeze_for_exit`), since the
    process ends next. In-process callers use :func:`main`, which leaves the collector as
    it found it."""
    code = main()
    gcpolicy.freeze_for_exit()
    return code
