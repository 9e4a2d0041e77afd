"""``pinlab validate [TABLE...] [--dir DIR] [--holdout DIR] [--out DIR] [--json]``.

Loads the validation tables of ``--dir`` (and the holdout tables of ``--holdout``), keeps
the ones named (by id, or by a path to a table file), runs them, prints every point and the
errors, writes ``report.html`` into ``--out`` (default ``pinlab-validation``) and returns the exit
status: 0 when every table is within its tolerance, 1 when one is not. Bad input raises
:class:`~pinlab.errors.ConfigError` (the CLI prints its line and exits 2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from pinlab.bench import run_bench
from pinlab.errors import ConfigError
from pinlab.fsutil import output_dir
from pinlab.validate.html import write_validation_report
from pinlab.validate.output import print_result, result_json
from pinlab.validate.runner import Bench, run_tables
from pinlab.validate.schema import ValidationTable, load_table, load_tables

__all__ = ["DEFAULT_DIR", "DEFAULT_OUT", "select_tables", "validate_command"]

DEFAULT_DIR = Path(__file__).resolve().parent / "tables"
"""The published tables shipped with pinlab, as package data (``pinlab/validate/tables/``), so
that ``pinlab validate`` runs them from any directory, installed or in the source tree."""

DEFAULT_OUT = "pinlab-validation"
"""Where ``report.html`` goes without ``--out``: the working directory, never the tables'."""


def select_tables(
    names: Sequence[str], directory: str | Path, holdout: str | Path | None = None
) -> list[ValidationTable]:
    """The tables of ``directory`` (and ``holdout``) named in ``names`` -- ids, or paths to
    ``.toml`` files -- in the order given; all of them when ``names`` is empty."""
    tables = load_tables(directory)
    if holdout is not None:
        tables += load_tables(holdout, holdout=True)
    by_id: dict[str, ValidationTable] = {}
    for t in tables:
        if t.id in by_id:
            raise ConfigError(
                t.path, "table.id", f"expected a new id, found {t.id!r} (also {by_id[t.id].path})"
            )
        by_id[t.id] = t
    if not names:
        if not tables:
            raise ConfigError(str(directory), "", "expected validation tables (*.toml), found none")
        return tables
    chosen: list[ValidationTable] = []
    for name in dict.fromkeys(names):
        if name in by_id:
            chosen.append(by_id[name])
        elif name.endswith(".toml"):
            chosen.append(load_table(name))
        else:
            known = ", ".join(by_id) or "none"
            raise ConfigError("TABLE", "", f"expected a table id ({known}), found {name!r}")
    return chosen


def validate_command(
    names: Sequence[str],
    console: Console,
    *,
    directory: str | Path = DEFAULT_DIR,
    holdout: str | Path | None = None,
    out: str | Path | None = None,
    as_json: bool = False,
    bench: Bench = run_bench,
) -> int:
    """Run the named tables (all by default) with ``bench``; print, write the report, and
    return 0 (every table within tolerance) or 1. The tables are read, and where the report
    goes (``out``, else :data:`DEFAULT_OUT`) is checked (:func:`~pinlab.fsutil.output_dir`),
    before any table runs."""
    tables = select_tables(names, directory, holdout)
    flag = "--out"
    out_dir = output_dir(out if out is not None else DEFAULT_OUT, flag)
    result = run_tables(tables, bench)
    try:
        page = write_validation_report(out_dir, result)
    except OSError as e:
        raise ConfigError(
            flag, str(out_dir), f"expected a writable directory, found: {e.strerror or e}"
        ) from None
    if as_json:
        print(json.dumps(result_json(result, str(page)), indent=2))
    else:
        print_result(result, console, str(page))
    return 0 if result.passed else 1
