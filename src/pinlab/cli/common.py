"""What every ``pinlab`` subcommand shares: the one-line user error and the command type."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console

__all__ = ["Command", "UserError"]


class UserError(Exception):
    """A mistake in the user's input: reported in one line, exit status 2."""


Command = Callable[[argparse.Namespace, Console], int]
"""A subcommand: parsed arguments and the console in, exit status out."""
