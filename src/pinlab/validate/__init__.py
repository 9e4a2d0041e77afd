"""``pinlab validate``: pinlab's cost model against published measurements (issue 11, item 4).

Each file of ``tables/`` (package data; :data:`DEFAULT_DIR`) is one published table -- its
source, setup, the ``pinlab bench`` command that reproduces it, the measured points and a
tolerance (:mod:`.schema`). The runner (:mod:`.runner`) runs the commands through
:func:`pinlab.bench.run_bench` (or a function passed in its place), reads the simulated value
of every point and computes the errors (:mod:`.stats`); :mod:`.output` prints them,
:mod:`.html` writes ``report.html`` with :mod:`.plots`' figures, and
:func:`.command.validate_command` is the subcommand.
"""

from pinlab.validate.command import DEFAULT_DIR, DEFAULT_OUT, select_tables, validate_command
from pinlab.validate.runner import (
    Bench,
    PointResult,
    Summary,
    TableResult,
    ValidationResult,
    run_table,
    run_tables,
)
from pinlab.validate.schema import ValidationTable, load_table, load_tables

__all__ = [
    "DEFAULT_DIR",
    "DEFAULT_OUT",
    "Bench",
    "PointResult",
    "Summary",
    "TableResult",
    "ValidationResult",
    "ValidationTable",
    "load_table",
    "load_tables",
    "run_table",
    "run_tables",
    "select_tables",
    "validate_command",
]
