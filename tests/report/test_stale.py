"""The suite page after a partial rerun (issue 13, item 7): ``pinlab run SCENARIO --out DIR``
into a suite directory leaves ``DIR/report.html`` with a visible stale banner naming the
scenarios rerun since the page was written; a full run writes a page without one. Driven by
the fake runner of ``tests/test_cli_run.py`` (nothing is simulated)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlab.cli import main
from pinlab.report.stale import mark_stale, stale_scenarios
from tests.test_cli_run import FakeRunner, fake

__all__ = ["fake"]  # the fixture, used by name


def test_a_partial_rerun_marks_the_suite_page_stale(
    fake: FakeRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--out", str(tmp_path), "--quiet"]) == 0
    page = tmp_path / "report.html"
    assert stale_scenarios(page.read_text()) == []
    assert main(["run", "beta", "--out", str(tmp_path)]) == 0
    text = page.read_text()
    assert stale_scenarios(text) == ["beta"]
    assert 'class="stale"' in text and "Stale." in text
    assert '<a href="#scenario-beta">beta</a>' in text
    assert f"pinlab run --out {tmp_path}" in text  # how to rebuild it
    assert "marked stale" in capsys.readouterr().out
    # a second partial rerun adds to the list; rerunning one already named does not repeat it
    assert main(["run", "alpha", "--out", str(tmp_path), "--no-report", "--quiet"]) == 0
    assert main(["run", "beta", "--out", str(tmp_path), "--quiet"]) == 0
    assert stale_scenarios(page.read_text()) == ["beta", "alpha"]
    # a full run rebuilds the page: current again
    assert main(["run", "--out", str(tmp_path), "--quiet"]) == 0
    assert stale_scenarios(page.read_text()) == []
    assert 'class="stale"' not in page.read_text()


def test_a_single_scenario_into_a_fresh_directory_writes_no_suite_page(
    fake: FakeRunner, tmp_path: Path
) -> None:
    assert main(["run", "alpha", "--out", str(tmp_path), "--quiet"]) == 0
    assert not (tmp_path / "report.html").exists()


def test_mark_stale_leaves_other_pages_alone_and_escapes_names(tmp_path: Path) -> None:
    assert mark_stale(tmp_path, ["x"]) is None  # no page
    run_page = tmp_path / "report.html"
    run_page.write_text("<html><main><p>a run's own page</p></main></html>")
    assert mark_stale(tmp_path, ["x"]) is None
    assert run_page.read_text() == "<html><main><p>a run's own page</p></main></html>"
    run_page.write_text(
        '<main><header class="page"><div class="kicker">pinlab suite report</div></header>'
        "<!-- pinlab:stale --></main>"
    )
    assert mark_stale(tmp_path, ['<b>&"x" y']) == run_page
    text = run_page.read_text()
    assert "<b>" not in text and "&lt;b&gt;&amp;" in text
    assert stale_scenarios(text) == ['<b>&"x" y']
