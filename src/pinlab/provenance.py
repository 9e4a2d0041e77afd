"""What made an output: the pinlab version and the command line.

Every file pinlab writes names the version that wrote it (``series.csv`` excepted: a CSV has
no place for it); the files a user opens to see *how* a result came about --
``config.toml`` (in its header comment), ``report.html``, a sweep's ``results.parquet`` --
also carry the full command line. ``summary.json``, ``series.csv`` and ``trace.json`` carry
no command: they are the results, byte-identical for the same scenario and seed whatever
``--out`` or the order of the flags was.

The command is recorded by :func:`recording` (``pinlab.cli.main`` wraps each command in
it); code run from the Python API records none, and its outputs say so by omission.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from pinlab import __version__

__all__ = ["command", "header", "recording", "stamp", "version"]

_COMMAND: ContextVar[str | None] = ContextVar("pinlab_command", default=None)


def version() -> str:
    """The version of the pinlab that is running."""
    return __version__


def command() -> str | None:
    """The command line being run (``pinlab run efa-gaudi --out x``), or None from the API."""
    return _COMMAND.get()


@contextmanager
def recording(argv: Sequence[str]) -> Iterator[None]:
    """Within the block, outputs record ``pinlab`` followed by ``argv``, shell-quoted."""
    token = _COMMAND.set(shlex.join(["pinlab", *argv]))
    try:
        yield
    finally:
        _COMMAND.reset(token)


def stamp() -> dict[str, str]:
    """``{"version": ..., "command": ...}`` (no ``command`` from the API), for JSON metadata."""
    out = {"version": __version__}
    cmd = command()
    if cmd is not None:
        out["command"] = cmd
    return out


def header(comment: str = "# ") -> str:
    """Comment lines naming the version and the command, for the top of a text file."""
    lines = [f"{comment}written by pinlab {__version__}"]
    cmd = command()
    if cmd is not None:
        lines.append(f"{comment}command: {cmd}")
    return "".join(f"{line}\n" for line in lines)
