"""report.html of pinlab validate: self-contained like the run and suite pages (no outside
reference, unique ids, CSP with the check script's hash), one measured-vs-simulated plot per
table plus the parity plot, every point shown, text escaped, same result -> same bytes;
rendered in headless Chromium where one is installed."""

from __future__ import annotations

import html
import re
from pathlib import Path

from pinlab.validate import load_table, run_tables
from pinlab.validate.html import REPORT_FILE, render_validation_html, write_validation_report
from pinlab.validate.runner import ValidationResult
from tests.report.test_html import (
    EVIL,
    _body,
    _chromium,
    _load,
    assert_ids_unique_and_resolved,
    assert_self_contained,
)
from tests.validate.fakebench import FakeBench
from tests.validate.tables import GDRCOPY, NVBW, P2P, PERFTEST, table, write_table


def _result(tmp_path: Path, title: str | None = None) -> ValidationResult:
    tables = [
        table(tmp_path, "sweep", PERFTEST),
        table(tmp_path, "matrix", P2P),
        table(tmp_path, "host", NVBW),
        table(tmp_path, "reads", GDRCOPY),
    ]
    if title is not None:
        tables.append(
            load_table(
                write_table(tmp_path, "evil", PERFTEST, [("ib_write_bw on two test hosts", title)])
            )
        )

    def value(argv: tuple[str, ...], column: str, key: tuple[object, ...]) -> float:
        return 0.0 if key == ("gpu1", "gpu0") else 25.0  # one unusable simulated value

    return run_tables(tables, FakeBench(value))


def test_report_is_self_contained_with_a_plot_per_table(tmp_path: Path) -> None:
    result = _result(tmp_path)
    page = render_validation_html(result)
    assert_self_contained(page)
    assert_ids_unique_and_resolved(page)
    svgs = re.findall(r'<svg class="plot"', page)
    assert len(svgs) == len(result.results) + 1  # and the parity plot
    assert f'data-images-expected="{len(svgs)}"' in page
    for r in result.results:
        assert f'id="table-{r.table.id}"' in page and f'href="#table-{r.table.id}"' in page
    assert "github.com/example/measurements/issues/9" in page  # the source, as text
    assert "not drawn" in page  # the zero simulated value is said, not plotted


def test_every_point_is_in_the_report(tmp_path: Path) -> None:
    result = _result(tmp_path)
    page = html.unescape(render_validation_html(result))
    for r in result.results:
        for p in r.points:
            assert re.search(
                rf">{re.escape(str(p.x))}</td><td class=\"num\">{p.measured:.6g}<", page
            )
    assert (
        "pinlab bench --platform cx-pair --param nic=cx6 --param link=ib --nodes 2 perftest "
        "ib_write_bw -a --report_gbits" in page
    )


def test_the_overview_puts_each_verdict_before_the_sources(tmp_path: Path) -> None:
    """The overview table scrolls sideways in a narrow window, the long source references
    widest: with the verdict and the tolerance after them, a reader of 23 tables saw errors
    but not which tables failed. They follow the table's name now."""
    page = render_validation_html(_result(tmp_path))
    overview = page[page.index('<section id="overview">') :]
    head = re.search(r"<thead><tr>(.*?)</tr></thead>", overview)
    assert head is not None
    columns = re.findall(r"<th[^>]*>([^<]*)</th>", head.group(1))
    assert columns[:4] == ["table", "verdict", "error", "tolerance"]
    assert columns[-1] == "source"
    first_row = re.search(r"<tbody>\s*<tr>(.*?)</tr>", overview, re.S)
    assert first_row is not None and re.search(
        r"</a></td><td><span class=\"badge", first_row.group(1)
    )


def test_the_reproducing_command_runs_as_written(capsys) -> None:  # type: ignore[no-untyped-def]
    """Each shipped table's "Reproduced with" line is a command one can paste: it printed
    pinlab's options after the tool (where they are the tool's) and the preset's parameters in
    parentheses, so none of them ran. Each parses back to the table's own run, and one runs."""
    import shlex

    from pinlab.bench import BenchSetup, param_value, tool
    from pinlab.cli import build_parser, main
    from pinlab.validate import DEFAULT_DIR
    from pinlab.validate.html import command_line
    from pinlab.validate.runner import TableResult

    tables = [load_table(p) for p in sorted(DEFAULT_DIR.glob("*.toml"))]
    assert len(tables) >= 8
    for t in tables:
        run = t.spec.run
        line = command_line(TableResult(table=t, points=(), outputs=())).split("; also: ")[0]
        argv = shlex.split(line)
        assert argv[0] == "pinlab"
        ns = build_parser().parse_args(argv[1:])
        assert (ns.tool, ns.args, ns.platform, ns.nodes) == (
            run.tool,
            run.argv,
            run.platform,
            run.nodes,
        ), t.id
        params = dict(item.split("=", 1) for item in ns.param or ())
        assert {k: param_value(v) for k, v in params.items()} == run.platform_params, t.id
        assert list(ns.set or ()) == run.sets, t.id
    (gdrcopy,) = [t for t in tables if t.id == "gdrcopy-copylat-p100-pcie-write"]
    run = gdrcopy.spec.run
    line = command_line(TableResult(table=gdrcopy, points=(), outputs=()))
    assert main(shlex.split(line)[1:]) == 0
    setup = BenchSetup(run.platform, dict(run.platform_params), run.nodes, tuple(run.sets))
    assert capsys.readouterr().out == tool(run.tool).run(run.argv, setup).text


def test_text_from_files_is_escaped(tmp_path: Path) -> None:
    page = render_validation_html(_result(tmp_path, title=EVIL.replace('"', "'")))
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert" in page


def test_same_result_same_bytes_and_atomic_write(tmp_path: Path) -> None:
    result = _result(tmp_path)
    assert render_validation_html(result) == render_validation_html(result)
    out = tmp_path / "out"
    path = write_validation_report(out, result)
    assert path == out / REPORT_FILE
    assert path.read_text(encoding="utf-8") == render_validation_html(result)
    assert sorted(p.name for p in out.iterdir()) == [REPORT_FILE]  # no temporary left


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    page = write_validation_report(tmp_path / "out", _result(tmp_path))
    dom, console = _load(browser, page, tmp_path)
    assert console == [], console
    body = _body(dom)
    assert "data-images-failed" not in body, body
    assert (
        body.get("data-images-ok") == body["data-images-expected"] == body.get("data-images-total")
    )


def test_an_empty_result_renders() -> None:
    page = render_validation_html(ValidationResult(results=()))
    assert_self_contained(page)
    assert 'data-images-expected="0"' in page
