"""A sweep's tables: one typed row per finished point, and the summary by factor.

Written into the sweep's directory (:mod:`pinlab.sweep.execute` has the layout) from the
point files, each atomically: ``results.parquet``/``results.csv`` (meta columns, then the
factors and fixed values typed by :func:`pinlab.sweep.analysis.typed_column` with their
``:label`` columns, then the metrics), ``units.json`` (metric and factor units; also in the
Parquet schema metadata), ``summary.parquet``/``summary.csv`` (:data:`SUMMARY_COLUMNS`) and
``notes.json`` (points not replicated, identical-replication warnings).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinlab import fsutil, provenance
from pinlab.sweep.analysis import LABEL_SUFFIX, replication_warnings, summarise, typed_column
from pinlab.sweep.spec import Sweep

__all__ = [
    "META_COLUMNS",
    "SUMMARY_COLUMNS",
    "Analysis",
    "build_table",
    "table_csv",
    "table_parquet",
    "write_table",
]

META_COLUMNS: tuple[str, ...] = (
    "point",
    "point_id",
    "scenario",
    "variant",
    "profile",
    "seed",
    "deterministic",
)
"""The columns every sweep table starts with (``deterministic``: no stochastic source drew,
so the seed changed nothing)."""

CSV_FILE = "results.csv"
PARQUET_FILE = "results.parquet"
UNITS_FILE = "units.json"
SUMMARY_CSV = "summary.csv"
SUMMARY_PARQUET = "summary.parquet"
NOTES_FILE = "notes.json"
"""The sweep's notes: points not replicated (deterministic) and warnings (identical
replications)."""
INCOMPLETE_FILE = "INCOMPLETE"
"""Present beside the tables while they hold fewer rows than the sweep has points (an
interrupted or ``--max-points`` run): what is missing and how to finish."""


def _write_atomic(path: Path, data: bytes) -> None:
    fsutil.write_atomic(path, data, make_parents=False)


def build_table(
    sweep: Sweep, done: dict[str, dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]], dict[str, str]]:
    """``(columns, rows, units)`` of the finished points, rows by point index. The ``point``
    column is the point's index in the sweep as it is now. Then the factors and the fixed
    values, typed (:func:`pinlab.sweep.analysis.typed_column`: their units join the metrics'
    in ``units``, a ``<name>:label`` column keeps values as written), then the metrics."""
    rows: list[dict[str, Any]] = []
    units: dict[str, str] = {}
    metric_names: set[str] = set()
    for point in sweep.points:
        rec = done.get(point.id)
        if rec is None:
            continue
        row = dict(rec["row"])
        row["point"] = point.index
        row.update(point.fixed)
        rows.append(row)
        units.update(rec["units"])
        metric_names.update(rec["units"])
    fixed_names = [n for n in dict.fromkeys(k for p in sweep.points for k in p.fixed)]
    config: list[str] = []
    for name in [*sweep.factor_names, *(n for n in fixed_names if n not in sweep.factor_names)]:
        typed, unit, labels = typed_column([row.get(name) for row in rows])
        config.append(name)
        for row, value in zip(rows, typed, strict=True):
            row[name] = value
        if unit:
            units[name] = unit
        if labels is not None:
            config.append(name + LABEL_SUFFIX)
            for row, label in zip(rows, labels, strict=True):
                row[name + LABEL_SUFFIX] = label
    head = [*META_COLUMNS, *config]
    columns = head + sorted(metric_names - set(head))
    return columns, rows, {k: units[k] for k in sorted(units)}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def table_csv(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    """The table as CSV text (``\\n`` line ends, floats as ``repr``)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in columns])
    return buf.getvalue()


def _column(values: list[Any]) -> Any:
    """A pyarrow array: bool, int64, float64 or string, by what the values are."""
    import pyarrow as pa

    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.bool_())
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.int64())
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    return pa.array([None if v is None else _cell(v) for v in values], type=pa.string())


def table_parquet(
    columns: Sequence[str], rows: Sequence[dict[str, Any]], units: dict[str, str]
) -> bytes:
    """The table as Parquet bytes; the units are in the schema metadata (``pinlab.units``),
    with the version and command that wrote it (``pinlab``, :mod:`pinlab.provenance`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = [_column([row.get(c) for row in rows]) for c in columns]
    table = pa.Table.from_arrays(arrays, names=list(columns))
    table = table.replace_schema_metadata(
        {
            "pinlab.units": json.dumps(units, sort_keys=True),
            "pinlab": json.dumps(provenance.stamp(), sort_keys=True),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


SUMMARY_COLUMNS = (
    "factor",
    "value",
    "label",
    "variant",
    "metric",
    "unit",
    "mean",
    "spread",
    "min",
    "max",
    "n",
)
"""The columns of ``summary.csv``/``summary.parquet`` (:func:`pinlab.sweep.analysis.summarise`;
``value`` is the factor's typed value, as text in the Parquet file where factors' types
differ)."""


def _summary_parquet(records: Sequence[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = []
    for c in SUMMARY_COLUMNS:
        values = [r.get(c) for r in records]
        kinds = {type(v) for v in values if v is not None}
        if c == "value" and len(kinds) > 1:
            values = [None if v is None else _cell(v) for v in values]
        arrays.append(_column(values))
    table = pa.Table.from_arrays(arrays, names=list(SUMMARY_COLUMNS))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


@dataclass(frozen=True, slots=True)
class Analysis:
    """What :func:`write_table` wrote besides the table: the summary records (one per factor
    value, variant and metric: :data:`SUMMARY_COLUMNS`), the units of metrics and typed
    factors, the warnings and the note on points not replicated."""

    rows: int
    summary: tuple[dict[str, Any], ...] = ()
    units: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    note: str = ""


def write_table(
    out: Path, sweep: Sweep, done: dict[str, dict[str, Any]], unreplicated: Sequence[str] = ()
) -> Analysis:
    """Rebuild ``results.parquet``, ``results.csv``, ``units.json``, the summary by factor
    (``summary.csv``, ``summary.parquet``) and ``notes.json`` from the finished points, each
    atomically; what it wrote (:class:`Analysis`). ``unreplicated`` are the ids of points
    left out because their replication would repeat a deterministic run."""
    columns, rows, units = build_table(sweep, done)
    marker = out / INCOMPLETE_FILE
    expected = len(sweep.points) - len(unreplicated)
    missing = expected - len(rows)
    if missing:  # before the tables: a reader never sees partial tables without the marker
        _write_atomic(
            marker,
            f"{len(rows)} of {expected} points; {missing} missing. Run the sweep "
            "again to finish (finished points are kept).\n".encode(),
        )
    _write_atomic(out / PARQUET_FILE, table_parquet(columns, rows, units))
    _write_atomic(out / CSV_FILE, table_csv(columns, rows).encode())
    _write_atomic(out / UNITS_FILE, (json.dumps(units, indent=2, sort_keys=True) + "\n").encode())
    metrics = [c for c in columns if c in _metric_units(done)]
    factors = list(sweep.factor_names)
    records = summarise(rows, factors, metrics, units)
    _write_atomic(out / SUMMARY_CSV, table_csv(SUMMARY_COLUMNS, records).encode())
    _write_atomic(out / SUMMARY_PARQUET, _summary_parquet(records))
    warnings = replication_warnings(rows, factors, metrics)
    note = ""
    if unreplicated:
        note = (
            f"{len(unreplicated)} point(s) not run: their variant and factors ran "
            "deterministically (no stochastic source), so another seed would repeat them; "
            "one replication each"
        )
    notes = {"unreplicated": len(unreplicated), "warnings": warnings, "note": note}
    _write_atomic(out / NOTES_FILE, (json.dumps(notes, indent=2, sort_keys=True) + "\n").encode())
    if not missing:
        marker.unlink(missing_ok=True)
    return Analysis(len(rows), tuple(records), units, tuple(warnings), note)


def _metric_units(done: dict[str, dict[str, Any]]) -> dict[str, str]:
    units: dict[str, str] = {}
    for rec in done.values():
        units.update(rec["units"])
    return units
