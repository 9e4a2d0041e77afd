"""HTML reports (issue "Seeing and scaling", item 3): ``report.html`` per run and one for the
suite -- self-contained (inline SVG, no network), with the claim, the verdict table, the
plots and links to the data files; rendered in headless Chromium without console errors or
missing images (skipped where no Chromium is installed)."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markupsafe import escape

from pinlab.report.html import (
    inline_svg,
    render_run_html,
    render_suite_html,
    run_report_files,
    write_report,
    write_run_report,
    write_suite_report,
)
from pinlab.report.output import write_run
from pinlab.report.tables import Table, escape_text
from pinlab.scenarios.result import Metric, RunResult, Verdict
from tests.report.test_plots import GB, make_result

EVIL = '<script>alert("pwned")</script> & <img src=x onerror=alert(1)>'


def make_verdict(
    held: bool = True, claim: str = "Pinning in place is at least 1.5x faster."
) -> Verdict:
    return Verdict(
        scenario="toy",
        claim=claim,
        held=held,
        columns=["variant", "throughput", "denials"],
        rows=[
            {"variant": "pin-in-place", "throughput": "10 GB/s", "denials": "0"},
            {"variant": "migrate-on-pin", "throughput": "4 GB/s", "denials": "3"},
        ],
        explanation="pin-in-place moved 2.5x the bytes of migrate-on-pin.",
    )


def _ids(page: str) -> list[str]:
    return re.findall(r'\bid="([^"]+)"', page)


def assert_self_contained(page: str) -> None:
    """No reference that a browser would fetch: every URL in the page is an XML namespace
    name, and nothing loads from anywhere (no src/href/url() to the network, no <link>)."""
    for m in re.finditer(r"https?://", page):
        attr = page[max(0, m.start() - 20) : m.start()]
        assert re.search(r'xmlns(:\w+)?="$', attr), (
            f"external URL at {page[m.start() - 40 : m.end() + 40]!r}"
        )
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)
    assert "<link" not in page and "@import" not in page
    assert not re.search(r"url\((?!#)", page)  # only url(#clip-path-id) references


def assert_ids_unique_and_resolved(page: str) -> None:
    ids = _ids(page)
    dupes = [i for i, n in Counter(ids).items() if n > 1]
    assert not dupes, f"duplicate ids: {dupes[:5]}"
    refs = set(re.findall(r'href="#([^"]+)"', page)) | set(re.findall(r"url\(#([^)]+)\)", page))
    assert refs <= set(ids), f"dangling references: {sorted(refs - set(ids))[:5]}"


# -- the run page ------------------------------------------------------------------------------


def test_run_page_has_claim_verdict_metrics_plots_and_links() -> None:
    page = render_run_html(make_result(), make_verdict())
    assert "<title>toy / pin-in-place</title>" in page
    assert "Pinning in place is at least 1.5x faster." in page
    assert "Performance first (Hubbard)" in page  # the camp, from config["claim"]["camp"]
    assert '<span class="badge held">HELD</span>' in page
    assert "pin-in-place moved 2.5x the bytes of migrate-on-pin." in page
    # the verdict table, this run's row marked
    assert re.search(r'<tr class="current"><td>pin-in-place</td><td class="num">10 GB/s</td>', page)
    assert "<td>migrate-on-pin</td>" in page
    # headline metrics with units
    assert '<td class="num">10 GB/s</td>' in page  # tenant throughput, formatted
    assert "stale_dma_incidents" in page and "8 GiB" in page
    # three inline plots, no <img>
    assert page.count('<svg class="plot" role="img"') == 3
    assert 'data-images-expected="3"' in page
    assert "<img" not in page
    # links to the files that exist, relative
    for name in ("summary.json", "series.csv", "config.toml"):
        assert f'href="{name}"' in page
    assert "trace.json" not in page
    assert_self_contained(page)
    assert_ids_unique_and_resolved(page)


def test_an_errno_in_a_column_header_stays_on_one_line() -> None:
    """odp-vs-pin's verdict table broke ``pressure -ENOMEM`` after the minus sign in a narrow
    column (``-`` above ``ENOMEM``). Errnos are kept whole; other hyphens break as before."""
    from pinlab.report.html import keep_errnos

    verdict = make_verdict()
    verdict.columns = ["variant", "pressure -ENOMEM", "-EOPNOTSUPP", "fell-back"]
    verdict.rows = [
        {"variant": "pin-in-place", "pressure -ENOMEM": "19", "-EOPNOTSUPP": "0", "fell-back": "1"}
    ]
    page = render_run_html(make_result(), verdict)
    assert '<th class="num">pressure <span class="nowrap">-ENOMEM</span></th>' in page
    assert '<span class="nowrap">-EOPNOTSUPP</span></th>' in page
    assert ">fell-back</th>" in page
    assert (
        str(keep_errnos("x-EFAULT <-EIO>")) == 'x-EFAULT &lt;<span class="nowrap">-EIO</span>&gt;'
    )
    assert_self_contained(page)


def test_trace_is_linked_only_when_it_exists() -> None:
    links = ["summary.json", "series.csv", "config.toml", "trace.json", "bufinfo.txt"]
    page = render_run_html(make_result(), make_verdict(), links)
    assert 'href="trace.json"' in page and "Perfetto" in page
    assert 'href="bufinfo.txt"' in page


def test_failed_verdict_and_no_verdict() -> None:
    failed = render_run_html(make_result(), make_verdict(held=False))
    assert '<span class="badge failed">FAILED</span>' in failed
    assert "HELD</span>" not in failed
    bare = render_run_html(make_result())
    assert "badge" not in bare.split("<main>", 1)[1]  # no verdict: no badge, no table
    assert 'id="verdict"' not in bare
    assert "Pinning in place is at least 1.5x faster." in bare  # the claim from the config


def test_all_text_is_escaped() -> None:
    """A hostile claim, explanation, variant, tenant and metric description stay text."""
    result = make_result(tenants=("<b>trainer</b>", "hog"), claim=EVIL, camp=EVIL)
    result.variant = "<i>v</i>"
    result.metrics["global.evil"] = Metric(1, "count", EVIL)
    verdict = make_verdict(claim=EVIL)
    verdict.explanation = EVIL
    verdict.rows[0]["variant"] = "<i>v</i>"
    page = render_run_html(result, verdict, ["summary.json", '"><script>x()</script>'])
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "<b>trainer</b>" not in page and "<i>v</i>" not in page
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt; &amp; &lt;img" in page
    assert "<script>x()" not in page
    assert page.count("<script>") == 1  # only the page's own check script
    assert_self_contained(page)


def test_script_is_allowed_by_its_hash_only() -> None:
    page = render_run_html(make_result(), make_verdict())
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None
    policy = html.unescape(csp.group(1))
    assert f"script-src 'sha256-{digest}'" in policy
    assert "default-src 'none'" in policy


def test_same_run_gives_the_same_page() -> None:
    assert render_run_html(make_result(), make_verdict()) == render_run_html(
        make_result(), make_verdict()
    )


def test_inline_svg_prefixes_ids_and_references() -> None:
    svg = (
        '<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
        '"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n'
        '<svg xmlns="http://www.w3.org/2000/svg" width="10pt">'
        "<metadata><rdf:RDF>http://purl.org/dc/dcmitype/StillImage</rdf:RDF></metadata>"
        '<defs><style type="text/css">*{stroke-linejoin: round}</style>'
        '<clipPath id="p1"><rect/></clipPath><path id="m1"/></defs>'
        '<g id="line2d_1" clip-path="url(#p1)"><use xlink:href="#m1"/><use href="#m1"/></g></svg>'
    )
    out = str(inline_svg(svg, "f3-", 'label "x" <y>'))
    assert out.startswith('<svg class="plot" role="img" aria-label="label &#34;x&#34; &lt;y&gt;"')
    assert 'id="f3-p1"' in out and "url(#f3-p1)" in out and 'id="f3-line2d_1"' in out
    assert 'xlink:href="#f3-m1"' in out and 'href="#f3-m1"' in out
    assert "<metadata>" not in out and "DOCTYPE" not in out and "*{" not in out
    assert "purl.org" not in out


def test_run_report_files_for_a_directory_writer() -> None:
    files = run_report_files(make_result(), make_verdict())
    assert sorted(files) == [
        "plot-denials.svg",
        "plot-memory.svg",
        "plot-throughput.svg",
        "report.html",
    ]
    page = files["report.html"]
    assert isinstance(page, str)
    assert 'href="plot-memory.svg">SVG</a>' in page and "PNG" not in page
    # the inline copy is the file's SVG, ids prefixed
    assert page.count('<svg class="plot"') == 3
    svg = files["plot-memory.svg"]
    assert isinstance(svg, str)
    assert str(inline_svg(svg, "p1-", "Pinned versus free device memory over time")) in page


def test_png_only_on_request() -> None:
    files = run_report_files(make_result(), make_verdict(), png=True)
    assert {"plot-denials.png", "plot-memory.png", "plot-throughput.png"} <= set(files)
    assert isinstance(files["plot-memory.png"], bytes)
    page = files["report.html"]
    assert isinstance(page, str)
    assert 'href="plot-memory.png">PNG</a>' in page and 'href="plot-memory.svg">SVG</a>' in page
    assert page.count('<svg class="plot"') == 3 and "<img" not in page  # still inline SVG


def test_write_run_report_into_a_run_directory(tmp_path: Path) -> None:
    result = make_result()
    run_dir = write_run(result, tmp_path)
    page = write_run_report(run_dir, result, make_verdict())
    assert page == run_dir / "report.html"
    names = sorted(p.name for p in run_dir.iterdir())
    assert "plot-throughput.svg" in names and "plot-throughput.png" not in names
    assert not [n for n in names if n.startswith(".")]  # no temporary files left
    text = page.read_text()
    assert 'href="trace.json"' in text  # write_run writes trace.json; the page links it
    (run_dir / "trace.json").unlink()
    assert "trace.json" not in write_run_report(run_dir, result, make_verdict()).read_text()


def test_write_report_is_atomic(tmp_path: Path) -> None:
    path = write_report(tmp_path / "r" / "report.html", "<p>one</p>")
    write_report(path, "<p>two</p>")
    assert path.read_text() == "<p>two</p>"
    assert [p.name for p in path.parent.iterdir()] == ["report.html"]


# -- the suite page ------------------------------------------------------------------------------


def _suite() -> list[tuple[list[RunResult], Verdict]]:
    toy = [make_result(variant="pin-in-place"), make_result(variant="migrate-on-pin", rate=4 * GB)]
    other = [make_result(variant="none", camp="stability"), make_result(variant="dmem.max")]
    for r in other:
        r.scenario = "pin-hog"
    hog = Verdict("pin-hog", "A hog starves the desktop.", False, ["variant"], [], "no denials")
    return [(toy, make_verdict()), (other, hog)]


def test_suite_page_lists_every_claim_and_links_every_run() -> None:
    page = render_suite_html(_suite())
    assert "2 scenarios" in page and "1 claim held" in page and "1 failed" in page
    assert 'href="#scenario-toy"' in page and 'id="scenario-pin-hog"' in page
    assert "Stability first" in page and "Performance first" in page
    assert 'href="toy/pin-in-place/report.html"' in page
    assert 'href="pin-hog/dmem.max/summary.json"' in page
    # variant bars per scenario (throughput; denials where any), ids unique across all plots
    assert page.count('<svg class="plot"') == 4
    assert_self_contained(page)
    assert_ids_unique_and_resolved(page)


def test_suite_page_keeps_its_title_after_the_bar_charts() -> None:
    # the charts' titles once overwrote the page's (a loop variable of the same name)
    default = render_suite_html(_suite())
    heading = "pinlab: the 2021 dma_buf_pin debate, replayed"
    assert f"<title>{heading}</title>" in default and f"<h1>{heading}</h1>" in default
    named = render_suite_html(_suite(), title="my cluster")
    assert "<title>my cluster</title>" in named and "<h1>my cluster</h1>" in named


def test_suite_links_only_existing_files_and_compared_profiles(tmp_path: Path) -> None:
    entries = _suite()
    toy = entries[0][0]
    again = make_result(variant="pin-in-place")
    again.profile = "5.16"
    toy.append(again)  # a --compare-profile rerun of the same variant
    for results, _ in entries:
        for r in results[:2]:
            write_run(r, tmp_path)
    write_run(again, tmp_path, compare_profile=True)
    (tmp_path / "toy" / "pin-in-place" / "trace.json").write_text("{}")
    path = write_suite_report(tmp_path, entries)
    page = path.read_text()
    assert path == tmp_path / "report.html"
    assert 'href="toy/pin-in-place/trace.json"' in page
    assert 'href="toy/pin-in-place@5.16/summary.json"' in page
    assert "toy/pin-in-place/report.html" not in page  # no run report written: not linked


# -- headless Chromium ----------------------------------------------------------------------------

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--enable-logging=stderr",
    "--v=0",
)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless Chromium: install Debian packages chromium and chromium-driver")


def _load(browser: str, page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """Load ``page`` in headless Chromium: (the DOM after the load event, console lines)."""
    profile = tmp_path / f"chromium-profile-{page.stem}"
    proc = subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}"
    console = [
        line
        for line in proc.stderr.splitlines()
        if re.search(r"CONSOLE[:(]\d+", line) or "Uncaught" in line
    ]
    return proc.stdout, console


def _body(dom: str) -> dict[str, str]:
    tag = re.search(r"<body([^>]*)>", dom)
    assert tag is not None, dom[:500]
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag.group(1)))


def test_reports_render_in_headless_chromium(tmp_path: Path) -> None:
    """The run page and the suite page load with no console message at all (a blocked
    fetch, a script error or a CSP violation would log one) and every plot renders."""
    browser = _chromium()
    result = make_result()
    run_dir = write_run(result, tmp_path / "out")
    pages = [write_run_report(run_dir, result, make_verdict())]
    pages.append(write_suite_report(tmp_path / "out", [([result], make_verdict())]))
    for page in pages:
        dom, console = _load(browser, page, tmp_path)
        assert console == [], f"{page.name}: console output: {console}"
        body = _body(dom)
        assert "data-images-failed" not in body, body
        expected = int(body["data-images-expected"])
        assert expected > 0
        assert body.get("data-images-ok") == str(expected) == body.get("data-images-total"), body


def test_headless_chromium_check_catches_a_broken_page(tmp_path: Path) -> None:
    """Negative control: the same check fails on a page with a missing image and an
    external reference -- so a passing render test means something."""
    browser = _chromium()
    page = render_run_html(make_result(), make_verdict())
    images = '<img src="missing.png" alt="missing">'
    images += '<img src="https://example.invalid/x.png" alt="remote">'
    broken = page.replace("<main>", "<main>" + images, 1)
    path = write_report(tmp_path / "broken.html", broken)
    dom, console = _load(browser, path, tmp_path)
    body = _body(dom)
    assert body.get("data-images-failed") == "missing; remote"
    assert body["data-images-ok"] == "3" and body["data-images-total"] == "5"
    assert any("not rendered" in line for line in console)
    assert any("Content Security Policy" in line for line in console)  # the fetch was blocked


_ROW_LOOP = (
    "{% for row in t.rows %}\n"
    "<tr{% if t.row_classes and t.row_classes[loop.index0] %}"
    ' class="{{ t.row_classes[loop.index0] }}"{% endif %}>'
    '{% for text, cls in row %}<td{% if cls %} class="{{ cls }}"{% endif %}>{{ text }}</td>'
    "{% endfor %}</tr>\n"
    "{% endfor %}\n"
)


@given(
    st.lists(
        st.lists(st.tuples(st.text(max_size=12), st.sampled_from(["", "num", "a&'b"])), max_size=4),
        max_size=5,
    ),
    st.lists(st.sampled_from(["", "mine", '<"x">']), max_size=6),
)
def test_table_body_is_the_template_loop_it_replaces(
    rows: list[list[tuple[str, str]]], row_classes: list[str]
) -> None:
    """The rows joined in Python are byte for byte what jinja2's autoescaped loop wrote."""
    import jinja2

    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    table = Table("t", ["a"], rows, row_classes, [])
    assert str(table.body) == env.from_string(_ROW_LOOP).render(t=table)


@given(st.text())
def test_escape_text_escapes_as_markupsafe_does(text: str) -> None:
    assert escape_text(text) == str(escape(text))


def test_long_tables_show_their_first_rows_and_say_how_many_are_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A metric table longer than SHOWN_ROWS shows that many rows, then one saying how many
    more summary.json holds; its heading counts them all. Shorter tables are whole."""
    from pinlab.report import tables as report_tables

    result = make_result(devices=2, tenants=tuple(f"t{i}" for i in range(20)))
    whole = render_run_html(result, make_verdict())
    metrics = len(result.metrics)
    assert "more rows, not shown" not in whole
    assert f"All {metrics} metrics" in whole

    monkeypatch.setattr(report_tables, "SHOWN_ROWS", 4)
    page = render_run_html(result, make_verdict())
    assert f"All {metrics} metrics" in page
    assert "Tenants (20 rows)" in page  # the heading counts every tenant
    assert page.count("more rows, not shown: every value is in summary.json") >= 2
    assert f'<td colspan="4">{metrics - 4:,} more rows' in page  # the all-metrics table
    assert ">16 more rows, not shown" in page  # 20 tenants, 4 shown
    first = sorted(f"t{i}" for i in range(20))  # t0 t1 t10 t11 | t12 ...: in name order
    assert all(f"<td>{t}</td>" in page for t in first[:4])
    assert "<td>t12</td>" not in page and "<td>t12</td>" in whole
    assert_self_contained(page)
    assert_ids_unique_and_resolved(page)
