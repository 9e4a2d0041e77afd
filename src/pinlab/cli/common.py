"""What every ``pinlab`` subcommand shares: the one-line user error and the shaping of bad
input (and of failed points) into it, the command type, the typed option values
(:class:`ArgType`, ``--seed``), the options several commands declare alike, each with one
declaration (``--json``, ``--set``, ``--seed``, ``--out``, ``--quiet``, ``--jobs``/``--dask``,
the scenario argument, ``--root`` and the host directory it names), the printing of
``--json``, the console widened for a pipe, the declaration of a command (its help: its
function's docstring) and of a listing command, the table it prints and the walk of the
subcommand tree."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

from rich.console import Console, RenderableType
from rich.table import Table

from pinlab.errors import ConfigError
from pinlab.fsutil import output_dir, output_file, what_is

__all__ = [
    "ArgType",
    "Command",
    "UserError",
    "add_command",
    "add_json_flag",
    "add_listing",
    "add_out_flag",
    "add_quiet_flag",
    "add_root_flag",
    "add_scenario_arg",
    "add_seed_flag",
    "add_set_flag",
    "add_workers",
    "as_user_error",
    "check_profile",
    "host_root",
    "out_dir",
    "out_file",
    "point_errors",
    "print_json",
    "print_table",
    "seed_arg",
    "subcommands",
    "wide",
]


class UserError(Exception):
    """A mistake in the user's input: reported in one line, exit status 2."""


Command = Callable[[argparse.Namespace, Console], int]
"""A subcommand: parsed arguments and the console in, exit status out."""

T = TypeVar("T")


def _anything(value: object) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class ArgType(Generic[T]):
    """An argparse ``type=``: an option's text read by ``read`` (``int``, ``float``) and
    accepted when ``accept(value)``; otherwise argparse's one-line error ``expected WHAT,
    found 'TEXT'`` -- ``expected`` for text ``read`` cannot read, ``within`` (by default
    ``expected``) for a value outside; ``show_value``: the value read, not the text, after
    ``found``."""

    read: Callable[[str], T]
    expected: str
    accept: Callable[[T], bool] = _anything
    within: str = ""
    show_value: bool = False

    def __call__(self, text: str) -> T:
        try:
            value = self.read(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.expected}, found {text!r}") from None
        if not self.accept(value):
            found = value if self.show_value else repr(text)
            raise argparse.ArgumentTypeError(
                f"expected {self.within or self.expected}, found {found}"
            )
        return value


def _seed_in_range(seed: int) -> bool:
    from pinlab.scenarios.fields import SEED_MAX  # imported only once a seed is given

    return 0 <= seed <= SEED_MAX


seed_arg = ArgType(
    partial(int, base=0),
    "an integer seed",
    _seed_in_range,
    "a seed from 0 to 2^63-1",
)
"""``--seed N`` of a run (decimal, ``0x..``): what ``[scenario] seed`` takes."""


@contextmanager
def as_user_error(*kinds: type[Exception]) -> Iterator[None]:
    """Within: an exception of ``kinds`` (by default ``ConfigError``: bad input found while
    reading it, its message already the one line naming file, field, expected and found) is
    the user's mistake, a :class:`UserError` with that message."""
    from pinlab.errors import ConfigError

    caught = kinds or (ConfigError,)
    try:
        yield
    except caught as e:
        raise UserError(str(e)) from None


@contextmanager
def point_errors(out: Path, writing: str = "") -> Iterator[None]:
    """Around running points (a sweep's, an advice's, ``--robust`` reruns): a configuration
    error -- of the whole, or of one point (``PointError.user``) -- and an unwritable ``out``
    (``--out OUT: cannot write WRITING: ...``) are the user's, a :class:`UserError`; a point
    that failed otherwise goes on as its ``PointError``, for the command to report."""
    from pinlab.errors import ConfigError
    from pinlab.sweep import PointError

    try:
        yield
    except ConfigError as e:
        raise UserError(str(e)) from None
    except PointError as e:
        if e.user:
            raise UserError(str(e)) from None
        raise
    except OSError as e:
        what = f" {writing}" if writing else ""
        raise UserError(f"--out {out}: cannot write{what}: {e.strerror or e}") from None


def print_json(data: Any) -> int:
    """Print ``data`` as the ``--json`` of a command (indented, one document, a newline at the
    end; values JSON cannot hold as their text) and return exit status 0."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    return 0


def add_json_flag(parser: Any, help: str = "machine-readable output") -> None:
    """The ``--json`` flag of ``parser`` (a parser or an argument group): the command's output
    as :func:`print_json` prints it; ``help`` says what that output holds."""
    parser.add_argument("--json", action="store_true", help=help)


def add_set_flag(parser: Any, help: str) -> None:
    """The repeatable ``--set KEY=VALUE`` of ``parser``: one override a line (a scenario field,
    a cost-model parameter: ``help`` says which)."""
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help=help)


def add_seed_flag(
    parser: Any, help: str, *, default: int | None = None, type: ArgType[int] = seed_arg
) -> None:
    """``--seed N`` of ``parser``: the seed of a command's random draws, read by ``type``
    (by default :data:`seed_arg`, what ``[scenario] seed`` takes); ``default`` when it is
    absent (None: the scenario's own)."""
    parser.add_argument("--seed", type=type, default=default, metavar="N", help=help)


def add_out_flag(
    parser: Any,
    help: str,
    *,
    default: str | None = None,
    required: bool = False,
    metavar: str = "DIR",
) -> None:
    """``--out DIR`` of ``parser``: where a command writes what it made (a directory; a file
    with ``metavar="FILE"``); ``help`` says what goes there."""
    parser.add_argument("--out", default=default, required=required, metavar=metavar, help=help)


def add_quiet_flag(parser: Any, help: str = "no progress bar and no summary") -> None:
    """``--quiet`` of ``parser``: a command that writes files prints nothing but errors while
    it runs (the files are written all the same); ``help`` says what it leaves out."""
    parser.add_argument("--quiet", action="store_true", help=help)


def add_scenario_arg(parser: Any, *, optional: bool = False) -> None:
    """The ``NAME|FILE`` argument of ``parser``: a built-in scenario or a scenario file;
    ``optional``: it may be left out (the command says what it does then)."""
    parser.add_argument(
        "scenario",
        nargs="?" if optional else None,
        metavar="NAME|FILE",
        help="a built-in scenario (see `pinlab scenarios`) or a scenario .toml file",
    )


def add_root_flag(parser: Any, help: str = "read the host below DIR (default /)") -> None:
    """``--root DIR`` of ``parser``: the directory a command reads a host below (``/``, this
    host, by default; a copied tree in tests); :func:`host_root` checks it."""
    parser.add_argument("--root", default="/", metavar="DIR", help=help)


def host_root(args: argparse.Namespace) -> Path:
    """The ``--root`` of ``args`` as a path; :class:`UserError` when it is no directory."""
    if not args.root:  # Path("") is the current directory
        raise UserError("--root: expected a directory (a host's /), found an empty path")
    root = Path(args.root)
    if not root.is_dir():
        raise UserError(
            f"--root {args.root}: expected a directory (a host's /), found {what_is(root)}"
        )
    return root


def out_dir(text: str, flag: str = "--out") -> Path:
    """The directory ``flag`` names (``text``), checked before any work and without writing
    anything (:func:`pinlab.fsutil.output_dir`); :class:`UserError` naming ``flag``."""
    try:
        return output_dir(text, flag)
    except ConfigError as e:
        raise UserError(str(e)) from None


def out_file(text: str, flag: str) -> Path:
    """The file ``flag`` names (``text``), checked before any work and without writing
    anything (:func:`pinlab.fsutil.output_file`); :class:`UserError` naming ``flag``."""
    try:
        return output_file(text, flag)
    except ConfigError as e:
        raise UserError(str(e)) from None


def check_profile(option: str, profile: str | None) -> None:
    """:class:`UserError` unless ``profile`` (the value of ``option``, None: not given) names a
    kernel profile preset."""
    from pinlab.kernel.profile import PRESETS

    if profile is not None and profile not in PRESETS:
        raise UserError(
            f"{option}: expected a kernel profile ({', '.join(PRESETS)}), found {profile!r}"
        )


def add_workers(
    parser: Any, *, jobs: str = "local worker processes (default: CPU count)", dask: str
) -> None:
    """``--jobs N`` and ``--dask local|ADDRESS`` of ``parser``: where a command's points run,
    a local process pool or a Dask cluster (pinlab.sweep); ``jobs`` and ``dask`` their help."""
    parser.add_argument("--jobs", type=int, metavar="N", help=jobs)
    parser.add_argument("--dask", metavar="local|ADDRESS", help=dask)


def add_command(sub: Any, name: str, func: Command) -> argparse.ArgumentParser:
    """Declare the subcommand ``name`` of ``sub`` (a subparsers action), run by ``func``. The
    docstring of ``func`` is the command's help: its first paragraph the line its parent's
    ``--help`` lists it with, the rest the description its own ``--help`` prints (white space
    folded, as argparse prints them)."""
    summary, _, description = inspect.cleandoc(func.__doc__ or "").partition("\n\n")
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=" ".join(summary.split()), description=" ".join(description.split())
    )
    parser.set_defaults(func=func)
    return parser


def add_listing(
    sub: Any, name: str, func: Command, *, json_help: str = "machine-readable output"
) -> argparse.ArgumentParser:
    """Declare the subcommand ``name`` of ``sub`` that lists something (:func:`add_command`),
    with a ``--json`` flag; the caller adds its positional arguments to the parser returned."""
    parser = add_command(sub, name, func)
    add_json_flag(parser, json_help)
    return parser


def wide(console: Console, width: int = 160) -> Console:
    """``console``, or when it is piped or captured one at least ``width`` columns wide: full
    rows instead of rows wrapped at 80 columns."""
    return console if console.is_terminal else Console(width=max(console.width, width))


def print_table(
    console: Console,
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[RenderableType]],
    *,
    no_wrap: int = 1,
    right: Collection[str] = (),
) -> None:
    """Print a listing: a table titled ``title`` (on the left) with ``columns``, the first
    ``no_wrap`` of them (the names a reader looks up) never wrapped and those in ``right``
    (counts) right-justified, one line per row of ``rows``."""
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(
            column, no_wrap=i < no_wrap, justify="right" if column in right else "left"
        )
    for row in rows:
        table.add_row(*row)
    console.print(table)


def subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str | None]]:
    """Every subcommand below ``parser``, depth first: its path (``("policy", "show")``), its
    parser and the one-line help ``pinlab --help`` shows for it."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help for a in action._choices_actions}
        for name, child in action.choices.items():
            yield (*path, name), child, helps.get(name)
            yield from subcommands(child, (*path, name))
