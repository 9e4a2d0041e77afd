"""Running validation tables: each table's ``pinlab bench`` invocations, the simulated value
of every measured point, and the errors (:mod:`pinlab.validate.stats`).

:func:`run_table` calls ``bench`` -- :func:`pinlab.bench.run_bench` unless a caller passes
another function with its signature -- once per distinct command of the table (the
``[run]`` argv, or a series' own), then reads each point from the returned
:class:`~pinlab.bench.BenchTable`:

* a matrix table (nvbandwidth, p2pBandwidthLatencyTest): the cell ``x = "<row>-><col>"``
  (as :meth:`BenchTable.cell`: the row whose first column is ``<row>``, column ``<col>``); a
  tool that prints several matrices (p2pBandwidthLatencyTest) stacks them, its first column
  :data:`MATRIX_COLUMN` holding each row's matrix title as printed and its second the row
  key, and the point reads the matrix titled ``y``;
* any other: the row whose ``[compare] x`` column equals the point's ``x`` (and whose
  ``where`` columns equal theirs), in column ``y`` (nccl-tests: ``"<placement> <y>"``).

A point the simulated output does not have is a mismatch between the file and the tool --
a :class:`ConfigError` naming the file and the point, not a failed comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pinlab.bench import BenchTable, run_bench
from pinlab.errors import ConfigError, show_value
from pinlab.validate import stats
from pinlab.validate.schema import ValidationTable, parse_cell

__all__ = [
    "MATRIX_COLUMN",
    "Bench",
    "PointResult",
    "Summary",
    "TableResult",
    "ValidationResult",
    "run_table",
    "run_tables",
]

Bench = Callable[..., BenchTable]
"""A function with :func:`pinlab.bench.run_bench`'s signature."""

MATRIX_COLUMN = "matrix"
"""First column of a table of stacked matrices: the matrix title each row belongs to."""


@dataclass(frozen=True, slots=True)
class PointResult:
    """One measured point and what pinlab simulated for it."""

    x: int | float | str
    series: str | None
    measured: float
    simulated: float

    @property
    def error(self) -> float:
        """``simulated / measured - 1`` (``inf`` when nothing usable was simulated)."""
        return stats.point_error(self.simulated, self.measured)


@dataclass(frozen=True, slots=True)
class TableResult:
    """A table's points, compared; the bench outputs they were read from."""

    table: ValidationTable
    points: tuple[PointResult, ...]
    outputs: tuple[BenchTable, ...]

    @property
    def error(self) -> float:
        """The table's geometric-mean error."""
        return stats.geomean_error((p.simulated, p.measured) for p in self.points)

    @property
    def tolerance(self) -> float:
        return self.table.spec.compare.tolerance

    @property
    def passed(self) -> bool:
        """Whether the table's error is within its tolerance."""
        return self.error <= self.tolerance


@dataclass(frozen=True, slots=True)
class Summary:
    """The overall errors of a set of tables."""

    tables: int
    points: int
    passed: int
    error: float  # geometric-mean error over every point of every table
    mean_table_error: float  # arithmetic mean of the tables' errors

    @classmethod
    def of(cls, results: Sequence[TableResult]) -> Summary | None:
        """The summary of ``results`` (None when there are none)."""
        if not results:
            return None
        pairs = [(p.simulated, p.measured) for r in results for p in r.points]
        return cls(
            tables=len(results),
            points=len(pairs),
            passed=sum(1 for r in results if r.passed),
            error=stats.geomean_error(pairs),
            mean_table_error=stats.mean_error(r.error for r in results),
        )


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Every table's result; the validation tables and the holdout tables summed apart."""

    results: tuple[TableResult, ...]

    @property
    def validation(self) -> tuple[TableResult, ...]:
        return tuple(r for r in self.results if not r.table.holdout)

    @property
    def holdout(self) -> tuple[TableResult, ...]:
        return tuple(r for r in self.results if r.table.holdout)

    @property
    def passed(self) -> bool:
        """Whether every table (validation and holdout) is within its tolerance."""
        return all(r.passed for r in self.results)


def _same(a: Any, b: Any) -> bool:
    """Whether a printed value equals a file's value (numbers compared as numbers)."""
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LookupError(f"expected a number in {what}, found {value!r}")
    return float(value)


def _y_column(table: ValidationTable, y: str) -> str:
    """The output column of a table's ``y`` (nccl-tests: ``"<placement> <y>"``)."""
    placement = table.spec.compare.placement
    return f"{placement} {y}" if placement else y


def _row_value(
    out: BenchTable, table: ValidationTable, column: str, where: Mapping[str, Any], x: Any
) -> float:
    cmp = table.spec.compare
    name = _y_column(table, column)
    xs = out.column(cmp.x)
    ys = out.column(name)
    filters = [(out.column(k), v) for k, v in where.items()]
    hits = [
        i for i in range(len(xs)) if _same(xs[i], x) and all(_same(col[i], v) for col, v in filters)
    ]
    cond = "".join(f", {k} = {v!r}" for k, v in where.items())
    if not hits:
        printed = ", ".join(str(v) for v in dict.fromkeys(xs))
        raise LookupError(f"expected a row with {cmp.x} = {x!r}{cond}, found {cmp.x} {printed}")
    if len(hits) > 1:
        raise LookupError(f"expected one row with {cmp.x} = {x!r}{cond}, found {len(hits)}")
    return _number(ys[hits[0]], f"{name!r} at {cmp.x} = {x!r}")


def _matrix_value(out: BenchTable, title: str, row: str, col: str) -> float:
    """The cell (``row``, ``col``) of ``out`` (one matrix, first column the row key) or of its
    matrix ``title`` (stacked matrices); a cell printed ``N/A`` is ``nan`` -- a failed point,
    not a missing one."""
    stacked = bool(out.columns) and out.columns[0] == MATRIX_COLUMN
    keys = out.column(out.columns[1 if stacked else 0])
    titles = out.column(MATRIX_COLUMN) if stacked else [title] * len(keys)
    values = out.column(col)
    for t, k, v in zip(titles, keys, values, strict=True):
        if str(t) == title and str(k) == row:
            return math.nan if v == "N/A" else _number(v, f"{title!r} at {row}->{col}")
    if stacked:
        printed = "; ".join(dict.fromkeys(str(t) for t in titles))
        raise LookupError(f"expected a row {row!r} of the matrix {title!r}, found {printed}")
    raise LookupError(f"expected a row {row!r}, found the rows {', '.join(map(str, keys))}")


def _value(out: BenchTable, table: ValidationTable, series: str | None, x: Any) -> float:
    column = table.series_y(series)
    if table.is_matrix:
        row, col = parse_cell(str(x))
        return _matrix_value(out, column, row, col)
    return _row_value(out, table, column, table.series_where(series), x)


def _check_columns(table: ValidationTable, out: BenchTable, series: str | None) -> None:
    """The columns a table's rows are read by exist in the tool's output, else the one-line
    :class:`ConfigError` naming the field that names the column (``compare.x``,
    ``series.<s>.y``, ``compare.where.<key>`` ...), not the point that first read it."""
    if table.is_matrix:
        return
    spec = table.spec.series.get(series) if series else None
    own = f"series.{series}" if spec is not None else "compare"
    y_field = f"{own}.y" if spec is not None and spec.y is not None else "compare.y"
    where = f"{own}.where" if spec is not None and spec.where is not None else "compare.where"
    wanted = [
        ("compare.x", table.spec.compare.x),
        (y_field, _y_column(table, table.series_y(series))),
    ]
    wanted += [(f"{where}.{key}", key) for key in table.series_where(series)]
    for field_path, name in wanted:
        if name not in out.columns:
            raise ConfigError(
                table.path,
                field_path,
                f"expected a column of {out.tool} {out.test} ({', '.join(out.columns)}), "
                f"found {show_value(name)}",
            )


def run_table(table: ValidationTable, bench: Bench = run_bench, *, seed: int = 0) -> TableResult:
    """Run ``table``'s commands with ``bench`` and compare every point. Raises
    :class:`ConfigError` (naming the file) when ``bench`` refuses a command or its output
    lacks a point."""
    run = table.spec.run
    outputs: dict[tuple[str, ...], BenchTable] = {}
    points: list[PointResult] = []
    for i, p in enumerate(table.spec.points):
        argv = table.series_argv(p.series)
        if argv not in outputs:
            try:
                outputs[argv] = bench(
                    run.tool,
                    list(argv),
                    platform=run.platform,
                    platform_params=dict(run.platform_params),
                    nodes=run.nodes,
                    sets=list(run.sets),
                    seed=seed,
                )
            except ConfigError as e:
                raise ConfigError(table.path, "run", str(e)) from None
        out = outputs[argv]
        _check_columns(table, out, p.series)
        try:
            simulated = _value(out, table, p.series, p.x)
        except LookupError as e:
            raise ConfigError(
                table.path, f"points[{i}]", f"simulated {out.test}: {e.args[0]}"
            ) from None
        points.append(PointResult(x=p.x, series=p.series, measured=p.y, simulated=simulated))
    return TableResult(table=table, points=tuple(points), outputs=tuple(outputs.values()))


def run_tables(
    tables: Iterable[ValidationTable],
    bench: Bench = run_bench,
    *,
    seed: int = 0,
    progress: Callable[[ValidationTable], None] | None = None,
) -> ValidationResult:
    """:func:`run_table` for each table in order; ``progress`` is called before each."""
    results = []
    for table in tables:
        if progress is not None:
            progress(table)
        results.append(run_table(table, bench, seed=seed))
    return ValidationResult(results=tuple(results))
