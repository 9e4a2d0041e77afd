"""Validation tables: one TOML file per published measurement table (``validate/tables/*.toml``).

A file is read with :func:`pinlab.tomlfile.read_toml`, its shape checked by pydantic and its
meaning by :func:`_check`; every problem is one :class:`~pinlab.errors.ConfigError` line
naming the file, the field, what was expected and what was found. ``validate/tables/README.md``
documents the format; in short::

    [table]                  # id (= file stem), title, kind, setup, notes
    [table.source]           # repo, one of issue/pr/file, commit or author (+ date), url
    [run]                    # tool, argv, platform, platform_params, nodes, set
    [compare]                # x, y, unit, tolerance, placement (nccl-tests), where
    [series.NAME]            # optional: another column/matrix (y), command (argv) or filter
    [[points]]               # x, y as measured, series (default: compare's)

Three public tables are reserved as a holdout (issue 11): tables citing them are refused
here and accepted only from a holdout directory (``pinlab validate --holdout DIR``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictFloat,
    StrictInt,
    StrictStr,
)
from pydantic import ValidationError as _PydanticError
from pydantic_core import PydanticCustomError

from pinlab.errors import ConfigError, config_error, show_value
from pinlab.tomlfile import read_toml

__all__ = [
    "HOLDOUT_SOURCES",
    "KINDS",
    "MATRIX_KINDS",
    "MATRIX_X",
    "PLATFORMS",
    "UNITS",
    "Compare",
    "Point",
    "Run",
    "Series",
    "Source",
    "TableFile",
    "TableInfo",
    "ValidationTable",
    "column_unit",
    "holdout_reference",
    "load_table",
    "load_tables",
    "parse_cell",
]

Kind = Literal["perftest", "nvbandwidth", "p2p", "nccl-tests", "gdrcopy", "registration"]
KINDS: tuple[str, ...] = ("perftest", "nvbandwidth", "p2p", "nccl-tests", "gdrcopy", "registration")
"""The tools a table can come from; ``[table] kind`` and ``[run] tool`` name the same one."""

MATRIX_KINDS = frozenset({"nvbandwidth", "p2p"})
"""Tools that print matrices: a point's ``x`` is a cell ``"<row>-><column>"``."""

MATRIX_X = "row->column"
"""``[compare] x`` of a matrix table."""

Platform = Literal[
    "cx-pair", "dgx-a100", "dgx-h100", "p4d", "p5", "dl1", "workstation-amd", "gpu-box"
]
PLATFORMS: tuple[str, ...] = (
    "cx-pair",
    "dgx-a100",
    "dgx-h100",
    "p4d",
    "p5",
    "dl1",
    "workstation-amd",
    "gpu-box",
)
"""The platform presets ``pinlab bench`` runs on."""

UNITS: dict[str, str] = {
    "Gb/s": "gigabits per second (10^9 bit/s; perftest --report_gbits)",
    "MiB/s": "mebibytes per second (2^20 B/s; perftest's default, printed MB/sec before 24.07)",
    "GB/s": "gigabytes per second (10^9 B/s; nvbandwidth, p2pBandwidthLatencyTest, nccl-tests)",
    "Mpps": "million messages per second (perftest MsgRate)",
    "us": "microseconds",
    "ms": "milliseconds",
}
"""The units ``[compare] unit`` may name."""

Placement = Literal["out-of-place", "in-place"]

HOLDOUT_SOURCES: tuple[tuple[str, str, int], ...] = (
    ("linux-rdma/perftest", "pr", 98),
    ("NVIDIA/nccl", "issue", 1264),
    ("NVIDIA/nccl", "issue", 778),
)
"""The reserved tables (repository, kind of reference, number): never calibration data."""

_ID = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
_CELL = re.compile(r"^([^\s>-]+)->([^\s>-]+)$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")

# The unit a column header carries: "BW average[Gb/sec]", "t_typical[usec]", "(GB/s)".
_HEADER_UNIT = re.compile(r"[\[(]([^\[\]()]+)[\])]\s*$")
_HEADER_UNITS = {
    "Gb/sec": "Gb/s",
    "MiB/sec": "MiB/s",
    "MB/sec": "MiB/s",  # perftest before 24.07 printed MB/sec for the same 2^20-based value
    "Mpps": "Mpps",
    "usec": "us",
    "us": "us",
    "GB/s": "GB/s",
    "ms": "ms",
}
_NCCL_UNITS = {"time": "us", "algbw": "GB/s", "busbw": "GB/s"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _scalar(value: object) -> str | bool | int | float:
    # one check, so that a wrong value is one error at its key, not one per union member
    # under pydantic's member tags (where.Test.str, where.Test.bool ...)
    if isinstance(value, str | bool | int | float):
        return value
    raise PydanticCustomError(
        "pinlab_scalar",
        "expected a string, a number or a boolean, found {found}",
        {"found": show_value(value)},
    )


Scalar = Annotated[str | bool | int | float, PlainValidator(_scalar)]
Number = StrictInt | StrictFloat


class Source(_Strict):
    """``[table.source]``: where the numbers were published."""

    repo: str = Field(description="owner/name on GitHub")
    issue: int | None = Field(default=None, ge=1)
    pr: int | None = Field(default=None, ge=1)
    file: str | None = None
    commit: str | None = None
    author: str | None = None
    date: str | None = None
    section: str | None = None
    url: str

    def reference(self) -> str:
        """``owner/repo #N``, ``owner/repo PR #N`` or ``owner/repo path@commit``."""
        if self.issue is not None:
            return f"{self.repo} #{self.issue}"
        if self.pr is not None:
            return f"{self.repo} PR #{self.pr}"
        at = f"@{self.commit[:12]}" if self.commit else ""
        return f"{self.repo} {self.file}{at}"

    def citation(self) -> str:
        """The reference with author, date and section, for people."""
        extra = [p for p in (self.author, self.date) if p]
        text = self.reference() + (f" ({', '.join(extra)})" if extra else "")
        return text + (f", {self.section}" if self.section else "")


class TableInfo(_Strict):
    """``[table]``."""

    id: str
    title: str = Field(min_length=1)
    kind: Kind
    setup: str = Field(min_length=1)
    notes: str = Field(min_length=1)
    source: Source


class Run(_Strict):
    """``[run]``: the ``pinlab bench`` invocation that reproduces the table."""

    tool: Kind
    argv: list[StrictStr] = Field(min_length=1)
    platform: Platform
    platform_params: dict[str, Scalar] = Field(default_factory=dict)
    nodes: Literal[1, 2]
    sets: list[StrictStr] = Field(default_factory=list, alias="set")


class Compare(_Strict):
    """``[compare]``: which printed column is compared, in which unit, within what bound."""

    x: str
    y: str
    unit: str
    tolerance: float = Field(gt=0, le=1, allow_inf_nan=False)
    placement: Placement | None = None
    where: dict[str, Scalar] = Field(default_factory=dict)
    label: str | None = None  # how the points without a series are named beside [series.*]


class Series(_Strict):
    """``[series.NAME]``: points read from another column or matrix (``y``), from another
    command (``argv``) or with another row filter (``where``) than ``[compare]``'s."""

    y: str | None = None
    argv: list[StrictStr] | None = Field(default=None, min_length=1)
    where: dict[str, Scalar] | None = None
    label: str | None = None


class Point(_Strict):
    """``[[points]]``: one measured value, as the source printed it."""

    x: Annotated[StrictInt | StrictFloat | StrictStr, Field(union_mode="left_to_right")]
    y: float = Field(gt=0, allow_inf_nan=False)
    series: str | None = None


class TableFile(_Strict):
    """A whole validation file."""

    table: TableInfo
    run: Run
    compare: Compare
    series: dict[str, Series] = Field(default_factory=dict)
    points: list[Point] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class ValidationTable:
    """A loaded, checked table: the file's content, where it came from, and whether it is
    a holdout table."""

    spec: TableFile
    path: str
    holdout: bool = False

    @property
    def id(self) -> str:
        return self.spec.table.id

    @property
    def kind(self) -> str:
        return self.spec.table.kind

    @property
    def is_matrix(self) -> bool:
        return self.kind in MATRIX_KINDS

    def series_y(self, name: str | None) -> str:
        """The column (or matrix title) a point of series ``name`` is read from."""
        s = self.spec.series.get(name) if name else None
        return s.y if s is not None and s.y is not None else self.spec.compare.y

    def series_argv(self, name: str | None) -> tuple[str, ...]:
        """The tool arguments a point of series ``name`` runs with."""
        s = self.spec.series.get(name) if name else None
        return tuple(s.argv if s is not None and s.argv is not None else self.spec.run.argv)

    def series_where(self, name: str | None) -> Mapping[str, Any]:
        """The row filter of series ``name``."""
        s = self.spec.series.get(name) if name else None
        return s.where if s is not None and s.where is not None else self.spec.compare.where

    def series_label(self, name: str | None) -> str:
        """How series ``name`` is named in output: its label, else its column or matrix."""
        s = self.spec.series.get(name) if name else None
        if s is not None and s.label:
            return s.label
        if name is None and self.spec.compare.label:
            return self.spec.compare.label
        return name or self.spec.compare.y


def parse_cell(x: str) -> tuple[str, str]:
    """A matrix cell selector ``"<row>-><column>"`` as (row label, column label)."""
    m = _CELL.match(x)
    if m is None:
        raise ValueError(f'expected a matrix cell like "0->1", found {x!r}')
    return m.group(1), m.group(2)


def column_unit(kind: str, column: str) -> str | None:
    """The unit ``column`` is printed in, when its header says (``[Gb/sec]``, ``(GB/s)``) or
    the tool's documentation does (nccl-tests' ``time``, ``algbw``, ``busbw``); else None."""
    if kind == "nccl-tests":
        return _NCCL_UNITS.get(column)
    m = _HEADER_UNIT.search(column)
    return _HEADER_UNITS.get(m.group(1)) if m else None


def holdout_reference(source: Source) -> str | None:
    """The reserved table ``source`` cites (``"NVIDIA/nccl #1264"``), or None."""
    repo = source.repo.lower()
    for hrepo, kind, number in HOLDOUT_SOURCES:
        if repo != hrepo.lower():
            continue
        if source.issue == number or source.pr == number:
            return f"{hrepo} {'PR ' if kind == 'pr' else ''}#{number}"
        if re.search(rf"/(issues|pull)/{number}(\D|$)", source.url):
            return f"{hrepo} {'PR ' if kind == 'pr' else ''}#{number}"
    return None


def _check(spec: TableFile, name: str, stem: str | None, holdout: bool) -> None:
    """The rules pydantic's types do not express, each failing as one ConfigError line."""
    t, run, cmp = spec.table, spec.run, spec.compare
    if not _ID.match(t.id):
        raise ConfigError(
            name, "table.id", f"expected lower-case letters, digits and '-', found {t.id!r}"
        )
    if stem is not None and t.id != stem:
        raise ConfigError(name, "table.id", f"expected the file's stem {stem!r}, found {t.id!r}")
    if run.tool != t.kind:
        raise ConfigError(
            name, "run.tool", f"expected the table's kind {t.kind!r}, found {run.tool!r}"
        )
    _check_source(t.source, name, holdout)
    for i, item in enumerate(run.sets):
        key, eq, _ = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(name, f"run.set[{i}]", f"expected key=value, found {item!r}")
    if cmp.unit not in UNITS:
        raise ConfigError(
            name, "compare.unit", f"expected one of {', '.join(UNITS)}, found {cmp.unit!r}"
        )
    if (run.tool == "nccl-tests") != (cmp.placement is not None):
        found = repr(cmp.placement) if cmp.placement else "nothing"
        need = '"out-of-place" or "in-place"' if run.tool == "nccl-tests" else "no placement"
        raise ConfigError(
            name, "compare.placement", f"expected {need} for {run.tool}, found {found}"
        )
    if t.kind in MATRIX_KINDS:
        if cmp.x != MATRIX_X:
            raise ConfigError(
                name, "compare.x", f"expected {MATRIX_X!r} for a {t.kind} matrix, found {cmp.x!r}"
            )
        if cmp.where:
            raise ConfigError(
                name, "compare.where", "expected no row filter for a matrix, found one"
            )
    elif cmp.x == MATRIX_X:
        raise ConfigError(
            name, "compare.x", f"expected a column of {t.kind}'s output, found {cmp.x!r}"
        )
    for sname, series in spec.series.items():
        if not _NAME.match(sname):
            raise ConfigError(
                name, f"series.{sname}", "expected a name of lower-case letters, digits and '-'"
            )
        if t.kind in MATRIX_KINDS and series.where:
            raise ConfigError(
                name, f"series.{sname}.where", "expected no row filter for a matrix, found one"
            )
    _check_units(spec, name)
    _check_points(spec, name)


def _check_source(src: Source, name: str, holdout: bool) -> None:
    if not _REPO.match(src.repo):
        raise ConfigError(name, "table.source.repo", f"expected owner/name, found {src.repo!r}")
    refs = [k for k in ("issue", "pr", "file") if getattr(src, k) is not None]
    if len(refs) != 1:
        raise ConfigError(
            name,
            "table.source",
            f"expected exactly one of issue, pr, file, found {', '.join(refs) or 'none'}",
        )
    if src.commit is None and src.author is None:
        raise ConfigError(
            name, "table.source", "expected a commit or an author (with date), found neither"
        )
    if src.commit is not None and not _COMMIT.match(src.commit):
        raise ConfigError(
            name, "table.source.commit", f"expected 7-40 hex digits, found {src.commit!r}"
        )
    if src.date is not None and not _DATE.match(src.date):
        raise ConfigError(
            name, "table.source.date", f'expected "YYYY-MM-DD" or "YYYY-MM", found {src.date!r}'
        )
    prefix = f"https://github.com/{src.repo}/"
    if not src.url.startswith(prefix):
        raise ConfigError(
            name, "table.source.url", f"expected a URL starting {prefix}, found {src.url!r}"
        )
    reserved = holdout_reference(src)
    if reserved is not None and not holdout:
        raise ConfigError(
            name,
            "table.source",
            f"expected a table that is not reserved as a holdout, found {reserved} "
            "(holdout tables belong in a holdout directory: pinlab validate --holdout DIR)",
        )


def _check_units(spec: TableFile, name: str) -> None:
    kind, unit = spec.table.kind, spec.compare.unit
    columns = [("compare.y", spec.compare.y)]
    columns += [(f"series.{n}.y", s.y) for n, s in spec.series.items() if s.y is not None]
    for field, column in columns:
        printed = column_unit(kind, column)
        if printed is not None and printed != unit:
            raise ConfigError(
                name,
                field,
                f"expected a column printed in compare.unit {unit!r}, "
                f"found {column!r} (printed in {printed})",
            )


def _check_points(spec: TableFile, name: str) -> None:
    matrix = spec.table.kind in MATRIX_KINDS
    seen: set[tuple[str | None, Any]] = set()
    used: set[str] = set()
    for i, p in enumerate(spec.points):
        where = f"points[{i}]"
        if p.series is not None:
            if p.series not in spec.series:
                defined = ", ".join(spec.series) or "none defined"
                raise ConfigError(
                    name,
                    f"{where}.series",
                    f"expected a [series.NAME] ({defined}), found {p.series!r}",
                )
            used.add(p.series)
        if matrix:
            if not isinstance(p.x, str):
                raise ConfigError(
                    name, f"{where}.x", f'expected a matrix cell like "0->1", found {p.x!r}'
                )
            try:
                parse_cell(p.x)
            except ValueError as e:
                raise ConfigError(name, f"{where}.x", str(e)) from None
            key: Any = p.x
        else:
            if isinstance(p.x, str) or not math.isfinite(p.x):
                raise ConfigError(
                    name, f"{where}.x", f"expected a number ({spec.compare.x}), found {p.x!r}"
                )
            key = float(p.x)
        if (p.series, key) in seen:
            label = f"series {p.series!r}" if p.series else "the table"
            raise ConfigError(
                name, f"{where}.x", f"expected one point per x in {label}, found {p.x!r} twice"
            )
        seen.add((p.series, key))
    unused = [s for s in spec.series if s not in used]
    if unused:
        raise ConfigError(
            name, f"series.{unused[0]}", "expected a series some point uses, found none using it"
        )


def load_table(path: str | Path, *, holdout: bool = False) -> ValidationTable:
    """The validation table in ``path``, checked. ``holdout`` allows a reserved source.
    Raises :class:`ConfigError`."""
    name = str(path)
    data = read_toml(path, what="a validation table (TOML)")
    try:
        spec = TableFile.model_validate(data)
    except _PydanticError as e:
        raise config_error(e, name) from None
    _check(spec, name, Path(path).stem, holdout)
    return ValidationTable(spec=spec, path=name, holdout=holdout)


def load_tables(directory: str | Path, *, holdout: bool = False) -> list[ValidationTable]:
    """Every ``*.toml`` table directly in ``directory`` (not its subdirectories), by file
    name. Raises :class:`ConfigError` for a missing directory, a bad file or a repeated id."""
    what = "holdout tables" if holdout else "validation tables"
    if str(directory) == "":  # Path("") is the current directory
        raise ConfigError(
            "(empty path)", "", f"expected a directory of {what}, found an empty path"
        )
    d = Path(directory)
    if not d.is_dir():
        raise ConfigError(str(directory), "", f"expected a directory of {what}, found none")
    tables = [load_table(p, holdout=holdout) for p in sorted(d.glob("*.toml"))]
    _unique(tables)
    return tables


def _unique(tables: Iterable[ValidationTable]) -> None:
    seen: dict[str, str] = {}
    for t in tables:
        if t.id in seen:
            raise ConfigError(
                t.path, "table.id", f"expected a new id, found {t.id!r} (also {seen[t.id]})"
            )
        seen[t.id] = t.path
