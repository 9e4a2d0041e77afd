"""Validation files that are malformed give one ConfigError line naming the file, the field,
what was expected and what was found; well-formed ones load (tests.validate.tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlab.errors import ConfigError
from pinlab.validate import load_table, load_tables, select_tables
from pinlab.validate.schema import holdout_reference, parse_cell
from tests.validate.tables import NCCL, P2P, PERFTEST, TEMPLATES, write_table


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_test_tables_load(tmp_path: Path, name: str) -> None:
    t = load_table(write_table(tmp_path, f"t-{name}", TEMPLATES[name]))
    assert t.id == f"t-{name}" and t.spec.points and not t.holdout


CASES: list[tuple[str, str, list[tuple[str, str]], str, str]] = [
    # (label, template, changes, field in the message, words in the message)
    ("no tolerance", PERFTEST, [("tolerance = 0.10\n", "")], "compare.tolerance", "required"),
    (
        "zero tolerance",
        PERFTEST,
        [("tolerance = 0.10", "tolerance = 0")],
        "compare.tolerance",
        "a number > 0",
    ),
    (
        "unknown unit",
        PERFTEST,
        [('unit = "Gb/s"', 'unit = "Gbps"')],
        "compare.unit",
        "expected one of",
    ),
    (
        "unit not the column's",
        PERFTEST,
        [('unit = "Gb/s"', 'unit = "GB/s"')],
        "compare.y",
        "printed in Gb/s",
    ),
    (
        "kind and tool differ",
        PERFTEST,
        [('tool = "perftest"', 'tool = "nccl-tests"')],
        "run.tool",
        "the table's kind",
    ),
    (
        "id is not the stem",
        PERFTEST,
        [('id = "bad"', 'id = "other-name"')],
        "table.id",
        "file's stem",
    ),
    ("id with capitals", PERFTEST, [('id = "bad"', 'id = "Bad_Id"')], "table.id", "lower-case"),
    (
        "two references",
        PERFTEST,
        [('file = "results/perftest.md"', 'file = "a.md"\nissue = 4')],
        "table.source",
        "exactly one of issue, pr, file",
    ),
    (
        "no commit or author",
        PERFTEST,
        [('commit = "0123456789abcdef0123456789abcdef01234567"\n', "")],
        "table.source",
        "commit or an author",
    ),
    (
        "bad commit",
        PERFTEST,
        [('commit = "0123456789abcdef0123456789abcdef01234567"', 'commit = "HEAD"')],
        "table.source.commit",
        "hex digits",
    ),
    (
        "url elsewhere",
        PERFTEST,
        [("https://github.com/example/measurements/blob", "https://example.com/x")],
        "table.source.url",
        "starting https://github.com/example/measurements/",
    ),
    (
        "a TOML date",
        NCCL,
        [('date = "2024-01-02"', "date = 2024-01-02")],
        "table.source.date",
        "TOML date",
    ),
    (
        "date as text but wrong",
        NCCL,
        [('date = "2024-01-02"', 'date = "Jan 2024"')],
        "table.source.date",
        "YYYY-MM-DD",
    ),
    (
        "holdout source",
        NCCL,
        [("issue = 7", "issue = 1264"), ("example/measurements", "NVIDIA/nccl")],
        "table.source",
        "reserved as a holdout",
    ),
    ("zero measured", PERFTEST, [("y = 0.06", "y = 0")], "points[0].y", "a number > 0"),
    ("negative measured", PERFTEST, [("y = 0.06", "y = -0.06")], "points[0].y", "a number > 0"),
    (
        "text x for a size",
        PERFTEST,
        [("x = 2\n", 'x = "2"\n')],
        "points[0].x",
        "expected a number (#bytes)",
    ),
    (
        "numeric x for a matrix",
        P2P,
        [('x = "gpu1->gpu0"', "x = 1")],
        "points[1].x",
        'matrix cell like "0->1"',
    ),
    (
        "malformed cell",
        P2P,
        [('x = "gpu1->gpu0"', 'x = "gpu1 to gpu0"')],
        "points[1].x",
        "matrix cell",
    ),
    ("repeated x", PERFTEST, [("x = 65536", "x = 2")], "points[1].x", "one point per x"),
    (
        "unknown series",
        P2P,
        [('series = "off"', 'series = "on"')],
        "points[2].series",
        "[series.NAME] (off)",
    ),
    (
        "unused series",
        P2P,
        [('x = "gpu0->gpu1"\ny = 22.23\nseries = "off"', 'x = "gpu0->gpu0"\ny = 22.23')],
        "series.off",
        "some point uses",
    ),
    (
        "nccl without placement",
        NCCL,
        [('placement = "out-of-place"\n', "")],
        "compare.placement",
        "out-of-place",
    ),
    (
        "placement for perftest",
        PERFTEST,
        [('y = "BW average[Gb/sec]"', 'y = "BW average[Gb/sec]"\nplacement = "in-place"')],
        "compare.placement",
        "no placement",
    ),
    ("matrix x column", P2P, [('x = "row->column"', 'x = "cell"')], "compare.x", "'row->column'"),
    (
        "row->column for perftest",
        PERFTEST,
        [('x = "#bytes"', 'x = "row->column"')],
        "compare.x",
        "a column of perftest",
    ),
    (
        "unknown field",
        PERFTEST,
        [("nodes = 2", "nodes = 2\nnode = 2")],
        "run.node",
        "unknown field",
    ),
    (
        "unknown platform",
        PERFTEST,
        [('platform = "cx-pair"', 'platform = "laptop"')],
        "run.platform",
        '"cx-pair"',
    ),
    ("three nodes", PERFTEST, [("nodes = 2", "nodes = 3")], "run.nodes", "1 or 2"),
    (
        "set without =",
        PERFTEST,
        [("nodes = 2", 'nodes = 2\nset = ["pcie.efficiency"]')],
        "run.set[0]",
        "key=value",
    ),
    (
        "empty argv",
        PERFTEST,
        [('argv = ["ib_write_bw", "-a", "--report_gbits"]', "argv = []")],
        "run.argv",
        "at least 1",
    ),
    ("no points", PERFTEST, [(PERFTEST[PERFTEST.index("[[points]]") :], "")], "points", "required"),
    ("TOML syntax", PERFTEST, [("nodes = 2", "nodes = = 2")], "line", "valid TOML"),
]


@pytest.mark.parametrize(
    ("label", "template", "changes", "field", "words"), CASES, ids=[c[0] for c in CASES]
)
def test_a_malformed_file_is_one_line_naming_file_and_field(
    tmp_path: Path,
    label: str,
    template: str,
    changes: list[tuple[str, str]],
    field: str,
    words: str,
) -> None:
    path = write_table(tmp_path, "bad", template, changes)
    with pytest.raises(ConfigError) as info:
        load_table(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: "), message
    assert field in message, message
    assert words in message, message


def test_a_holdout_table_loads_from_a_holdout_directory_only(tmp_path: Path) -> None:
    changes = [("issue = 7", "issue = 778"), ("example/measurements", "NVIDIA/nccl")]
    holdout = tmp_path / "holdout"
    holdout.mkdir()
    write_table(holdout, "reserved", NCCL, changes)
    (loaded,) = load_tables(holdout, holdout=True)
    assert loaded.holdout and holdout_reference(loaded.spec.table.source) == "NVIDIA/nccl #778"
    with pytest.raises(ConfigError, match="reserved as a holdout"):
        load_tables(holdout)


def test_holdout_reference_knows_the_three_and_only_them() -> None:
    from pinlab.validate.schema import Source

    def src(repo: str, **ref: object) -> Source:
        return Source(repo=repo, url=f"https://github.com/{repo}/x", author="a", **ref)  # type: ignore[arg-type]

    assert holdout_reference(src("linux-rdma/perftest", pr=98)) == "linux-rdma/perftest PR #98"
    assert holdout_reference(src("NVIDIA/nccl", issue=1264)) == "NVIDIA/nccl #1264"
    assert holdout_reference(src("nvidia/NCCL", issue=778)) == "NVIDIA/nccl #778"
    by_url = Source(
        repo="NVIDIA/nccl", file="x", author="a", url="https://github.com/NVIDIA/nccl/issues/1264#c"
    )
    assert holdout_reference(by_url) == "NVIDIA/nccl #1264"
    assert holdout_reference(src("NVIDIA/nccl", issue=814)) is None
    assert holdout_reference(src("linux-rdma/perftest", issue=98 * 4)) is None


def test_parse_cell() -> None:
    assert parse_cell("gpu0->gpu7") == ("gpu0", "gpu7")
    assert parse_cell("cpu0->gpu1") == ("cpu0", "gpu1")
    with pytest.raises(ValueError, match="matrix cell"):
        parse_cell("gpu0-gpu1")


def test_directory_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected a directory of validation tables, found none"):
        load_tables(tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"expected validation tables \(\*\.toml\), found none"):
        select_tables([], tmp_path)
    write_table(tmp_path, "one")
    other = tmp_path / "other"
    other.mkdir()
    write_table(other, "one")
    with pytest.raises(ConfigError, match="expected a new id, found 'one'"):
        select_tables([], tmp_path, other)


def test_select_tables_by_id_and_path(tmp_path: Path) -> None:
    write_table(tmp_path, "a")
    write_table(tmp_path, "b")
    elsewhere = tmp_path / "x"
    elsewhere.mkdir()
    path = write_table(elsewhere, "c")
    chosen = select_tables(["b", str(path), "b"], tmp_path)
    assert [t.id for t in chosen] == ["b", "c"]
    assert [t.id for t in select_tables([], tmp_path)] == ["a", "b"]
    with pytest.raises(ConfigError, match=r"TABLE: expected a table id \(a, b\), found 'zzz'"):
        select_tables(["zzz"], tmp_path)
