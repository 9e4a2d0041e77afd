"""What every ``pinlab`` subcommand shares: the one-line user error, the command type, the
printing of ``--json`` and the walk of the subcommand tree."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console

__all__ = ["Command", "UserError", "print_json", "subcommands"]


class UserError(Exception):
    """A mistake in the user's input: reported in one line, exit status 2."""


Command = Callable[[argparse.Namespace, Console], int]
"""A subcommand: parsed arguments and the console in, exit status out."""


def print_json(data: Any) -> int:
    """Print ``data`` as the ``--json`` of a command (indented, one document, a newline at the
    end; values JSON cannot hold as their text) and return exit status 0."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    return 0


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
