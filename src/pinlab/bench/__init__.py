"""``pinlab bench``: the microbenchmarks users already run, on a modelled machine.

Each *tool* mirrors a real one -- its flag names, its output columns and number formats -- so
that a published table can be reproduced line by line (``validate/tables/``, ``pinlab validate``):
``perftest`` (``ib_send_lat`` … ``ib_read_bw``), ``nvbandwidth``, ``p2p``
(cuda-samples ``p2pBandwidthLatencyTest``), ``nccl-tests`` (``all_reduce_perf``), ``gdrcopy``
(``copylat``). A tool parses the real tool's arguments, runs the matching scenario workload
(:mod:`pinlab.sim.workloads`) in a :class:`~pinlab.sim.engine.Simulation` of the platform, and
renders what the workload measured as the real tool prints it.

The contract every tool keeps (:class:`BenchTool`): arguments are validated before anything
runs (a bad flag is one :class:`~pinlab.errors.ConfigError` line naming the flag, what was
expected and what was found); the same arguments, platform and seed give the same table, byte
for byte; nothing is read from the wall clock.

:func:`run_bench` is the one entry point (the CLI, ``pinlab validate`` and the public API use
it). Each tool module registers its tool -- name, summary and the function that runs it -- in
:data:`TOOLS` with :func:`register_tool`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinlab.errors import ConfigError, found_value, toml_inline
from pinlab.scenarios.config import check_seed, check_sets

__all__ = [
    "TOOLS",
    "BenchSetup",
    "BenchTable",
    "BenchTool",
    "bench_argv",
    "param_text",
    "param_value",
    "register_tool",
    "run_bench",
    "tool",
    "tool_names",
]

Cell = float | int | str


@dataclass(frozen=True, slots=True)
class BenchTable:
    """What one tool run printed, as data and as text.

    ``columns`` are the headers exactly as the tool prints them (``"BW average[Gb/sec]"``);
    ``rows`` one tuple per printed line of results. For matrix outputs (``p2p``,
    ``nvbandwidth``) the first column names the row (``"gpu0"``) and the other columns name
    the destinations; :meth:`cell` reads one. ``text`` is the whole output as the tool would
    print it; ``meta`` says how it was made (platform, NIC model, seed, pinlab version).
    """

    tool: str
    test: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    text: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    def column(self, name: str) -> list[Cell]:
        """Every row's value in column ``name`` (``KeyError`` naming the known columns)."""
        try:
            i = self.columns.index(name)
        except ValueError:
            raise KeyError(
                f"{self.tool} {self.test} has no column {name!r} "
                f"(columns: {', '.join(self.columns)})"
            ) from None
        return [row[i] for row in self.rows]

    def cell(self, row_key: str, col_key: str) -> float:
        """The value at row ``row_key`` (first column) and column ``col_key`` of a matrix."""
        keys = [str(row[0]) for row in self.rows]
        if row_key not in keys:
            raise KeyError(f"{self.tool} {self.test} has no row {row_key!r} (rows: {keys})")
        value = self.column(col_key)[keys.index(row_key)]
        if isinstance(value, str):
            raise KeyError(f"{self.tool} {self.test}: cell {row_key}->{col_key} is {value!r}")
        return float(value)


@dataclass(frozen=True, slots=True)
class BenchSetup:
    """Where and how a tool runs (:func:`run_bench`'s keywords): ``platform`` (a preset name or
    a platform file) with ``platform_params``, ``nodes`` (None: the tool's own choice), the
    ``sets`` ``key=value`` cost overrides and the ``seed`` of every random draw."""

    platform: str = "cx-pair"
    platform_params: Mapping[str, Any] = field(default_factory=dict)
    nodes: int | None = None
    sets: tuple[str, ...] = ()
    seed: int = 0


@dataclass(frozen=True, slots=True)
class BenchTool:
    """One tool: its ``name``, the ``summary`` ``pinlab bench`` lists, and ``run``, which parses
    ``argv`` (the real tool's arguments, test name first where the tool has several) and runs
    it on ``setup``; ``ConfigError`` for bad arguments, before any work."""

    name: str
    summary: str
    run: Callable[[Sequence[str], BenchSetup], BenchTable]


TOOLS: dict[str, BenchTool] = {}
"""The registered tools by name (``perftest``, ``nvbandwidth`` ...)."""


def register_tool(
    name: str, summary: str, run: Callable[[Sequence[str], BenchSetup], BenchTable]
) -> BenchTool:
    """Make the tool ``name`` (``summary``, run by ``run``: :class:`BenchTool`) available to
    :func:`run_bench` and ``pinlab bench``; the tool."""
    if name in TOOLS:
        raise ValueError(f"bench tool {name!r} is already registered")
    tool = TOOLS[name] = BenchTool(name, summary, run)
    return tool


def _load_tools() -> None:
    """Import the built-in tools (each registers itself)."""
    import importlib

    for module in ("perftest", "nvbandwidth", "p2p", "nccl_tests", "gdrcopy", "registration"):
        try:
            importlib.import_module(f"pinlab.bench.{module}")
        except ModuleNotFoundError as e:
            if e.name != f"pinlab.bench.{module}":
                raise


def tool_names() -> list[str]:
    """The names of the registered tools, sorted (``pinlab bench`` lists them)."""
    _load_tools()
    return sorted(TOOLS)


def tool(name: str) -> BenchTool:
    """The tool called ``name``; ``ConfigError`` naming the known ones."""
    _load_tools()
    try:
        return TOOLS[name]
    except KeyError:
        known = ", ".join(sorted(TOOLS)) or "none"
        raise ConfigError("bench", "tool", f"expected one of {known}, found {name!r}") from None


def param_value(text: str) -> object:
    """A ``pinlab bench --param`` value: a TOML scalar (``2``, ``true``, ``"x"``) or, failing
    that, the text itself (``cx7``, ``100Gbps``)."""
    import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def param_text(value: object) -> str:
    """The ``--param`` text that :func:`param_value` reads back as ``value``: a string as
    itself unless it would read as something else (the string ``7`` is written quoted,
    ``"7"``, or it would read back as the number)."""
    if isinstance(value, str) and param_value(value) == value:
        return value
    return toml_inline(value)


def bench_argv(tool_name: str, argv: Sequence[str], setup: BenchSetup) -> list[str]:
    """The arguments of the ``pinlab bench`` command that runs ``tool_name`` with ``argv`` on
    ``setup``: pinlab's options first, then the tool and its own arguments (everything after
    the tool is the tool's). A seed other than 0, the default, is given too."""
    out = ["bench", "--platform", setup.platform]
    for key, value in setup.platform_params.items():
        out += ["--param", f"{key}={param_text(value)}"]
    if setup.nodes is not None:
        out += ["--nodes", str(setup.nodes)]
    for item in setup.sets:
        out += ["--set", item]
    if setup.seed:
        out += ["--seed", str(setup.seed)]
    return [*out, tool_name, *argv]


def run_bench(
    tool_name: str,
    argv: Sequence[str],
    *,
    platform: str = "cx-pair",
    platform_params: Mapping[str, Any] | None = None,
    nodes: int | None = None,
    sets: Sequence[str] = (),
    seed: int = 0,
) -> BenchTable:
    """Run ``tool_name`` with the real tool's ``argv`` on ``platform`` (a preset name, or a
    platform file) with ``platform_params``; ``nodes`` overrides how many nodes the tool
    spans (perftest needs two, nccl-tests ``--nodes``); ``sets`` are ``key=value`` cost
    overrides; ``seed`` seeds every random draw. ``ConfigError`` on bad input: ``argv`` is
    a list of strings (one string would be read a character at a time), ``platform`` a preset
    or a file that exists (the message lists the presets)."""
    from pinlab.platform.presets import PRESETS

    if not isinstance(tool_name, str):
        raise ConfigError(
            "tool", "", f"expected a tool's name (a string), found {found_value(tool_name)}"
        )
    if isinstance(argv, str | bytes):
        raise ConfigError(
            "argv", "", f"expected a list of arguments, found a string {found_value(argv)}"
        )
    if not isinstance(argv, Sequence):
        raise ConfigError("argv", "", f"expected a list of arguments, found {found_value(argv)}")
    for i, arg in enumerate(argv):
        if not isinstance(arg, str):
            raise ConfigError(
                f"argv[{i}]", "", f"expected an argument (a string), found {found_value(arg)}"
            )
    if not isinstance(platform, str | os.PathLike):
        raise ConfigError(
            "platform",
            "",
            f"expected a preset name or a platform file's path, found {found_value(platform)}",
        )
    if not (isinstance(platform, str) and platform in PRESETS) and not Path(platform).exists():
        raise ConfigError(
            f"--platform {os.fspath(platform)}",
            "",
            f"expected a preset ({', '.join(PRESETS)}) or a platform file, found neither",
        )
    params = {} if platform_params is None else platform_params
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise ConfigError(
            "platform_params",
            "",
            f"expected a table of preset parameters, found {found_value(params)}",
        )
    setup = BenchSetup(platform, dict(params), nodes, check_sets(sets), check_seed(seed, "seed"))
    return tool(tool_name).run(argv, setup)
