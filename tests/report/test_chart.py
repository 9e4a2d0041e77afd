"""The reports' SVG written without matplotlib (issue 12, item 4): every figure is a Chart
(panels, limits, labels, marks as data), written as SVG by pinlab.report.chart and drawn as a
matplotlib Figure from the same chart. Held here: the SVG is well-formed, escapes its text,
is deterministic, carries every label and value of the chart; its ticks are matplotlib's;
a report is rendered without importing matplotlib."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from pinlab.report import chart, plots
from pinlab.report.figure import chart_figure
from pinlab.scenarios.result import Metric
from tests.report.test_plots import _other_run, make_result

GB = 10**9
SVG = "{http://www.w3.org/2000/svg}"


def _texts(svg: str) -> list[str]:
    """Every text of an SVG document, in document order (entities decoded)."""
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]


def _charts() -> list[chart.Chart]:
    runs = [make_result(), _other_run(), make_result(byte_series=False, denial_series=False)]
    out = [fn(r) for r in runs for fn in plots.CHARTS.values()]
    pair = [make_result(variant="a"), make_result(variant="b", rate=3 * GB)]
    out += [plots.variant_bars_chart(pair, p) for p in ("tenant.*.throughput", "global.denials")]
    return out


# -- ticks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("bins", [5, 6])
def test_ticks_are_the_ones_matplotlib_places(bins: int, integer: bool) -> None:
    """The chart's ticks are MaxNLocator's (steps 1, 2, 2.5, 5, 10) inside the axis limits, so
    the SVG and the matplotlib Figure of a chart tick alike -- over ranges of every size."""
    from matplotlib.ticker import MaxNLocator

    rng = np.random.default_rng(bins + 10 * integer)
    cases = [(0.0, 1.0), (0.0, 10.5), (3.95, 4.35), (0.0, 0.055), (-0.6, 1.4), (0.0, 3.15)]
    for _ in range(500):
        lo = float(rng.uniform(-100, 100)) * 10.0 ** int(rng.integers(-6, 6))
        cases.append((lo, lo + float(rng.uniform(0.001, 100)) * 10.0 ** int(rng.integers(-6, 6))))
    locator = MaxNLocator(bins, steps=[1, 2, 2.5, 5, 10], integer=integer)
    for lo, hi in cases:
        slack = (hi - lo) * 1e-12
        theirs = [t for t in locator.tick_values(lo, hi) if lo - slack <= t <= hi + slack]
        mine = chart.nice_ticks(lo, hi, bins, integer=integer)
        assert len(mine) == len(theirs), (lo, hi)
        assert np.allclose(mine, theirs, rtol=1e-9, atol=(hi - lo) * 1e-9), (lo, hi)


def test_tick_texts_share_their_decimals_and_use_a_minus_sign() -> None:
    assert chart.tick_texts([0.0, 0.25, 0.5]) == ["0.00", "0.25", "0.50"]
    assert chart.tick_texts([3 * 0.1 * k for k in range(3)]) == ["0.0", "0.3", "0.6"]
    assert chart.tick_texts([-1.0, 0.0, 1.0]) == ["\u22121", "0", "1"]
    assert chart.tick_texts([-0.5, 0.0, 0.5]) == ["\u22120.5", "0.0", "0.5"]  # no "-0.0"
    assert chart.tick_texts([0.0, 20000.0, 40000.0]) == ["0", "20000", "40000"]


# -- the SVG -------------------------------------------------------------------------------------


def test_every_chart_is_well_formed_svg_and_deterministic() -> None:
    for one, two in zip(_charts(), _charts(), strict=True):
        svg = chart.chart_svg(one)
        assert svg == chart.chart_svg(two)
        root = ET.fromstring(svg)  # well-formed XML
        assert root.tag == f"{SVG}svg" and root.get("viewBox") == f"0 0 576 {one.height * 72:g}"
        ids = [e.get("id") for e in root.iter() if e.get("id")]
        assert len(ids) == len(set(ids))
        refs = set(re.findall(r"url\(#([^)]+)\)", svg))
        assert refs <= set(ids)


def test_the_svg_says_every_text_of_the_chart() -> None:
    """Titles, axis labels, legend labels, notes and -- for bars -- every value and variant:
    nothing the matplotlib Figure shows is missing from the report's SVG."""
    for c in _charts():
        texts = _texts(chart.chart_svg(c))
        joined = "\n".join(texts)
        if c.suptitle:
            assert c.suptitle in texts
        for p in c.panels:
            if p.title:
                assert p.title in texts
            if p.note is not None:
                assert " ".join(p.note.split()) in " ".join(joined.split())
                continue
            for label in (p.ylabel, p.xlabel):
                assert not label or label in texts
            for mark in p.marks:
                if isinstance(mark, chart.Bars):
                    assert all(t in texts for t in mark.texts)
            for _, name in p.categories or ():
                assert name in texts
        assert [t for t, _ in chart.legend_entries(c.panels[0])] == [
            t for t in texts if t in {label for label, _ in chart.legend_entries(c.panels[0])}
        ]


def test_svg_and_figure_of_a_chart_agree() -> None:
    """The Figure (API, PNG) and the report's SVG are drawn from one chart: the same titles,
    legend, limits and tick labels."""
    for c in _charts():
        fig = chart_figure(c)
        texts = _texts(chart.chart_svg(c))
        assert plots.legend_labels(fig) == [t for t, _ in chart.legend_entries(c.panels[0])]
        for ax, p in zip(fig.axes, c.panels, strict=True):
            assert ax.get_title(loc="left") == p.title
            if p.note is not None:
                continue
            assert ax.get_xlim() == pytest.approx(p.xlim) and ax.get_ylim() == pytest.approx(p.ylim)
            lo, hi = p.ylim
            ticks = [t for t in ax.get_yticks() if lo - 1e-9 <= t <= hi + 1e-9]
            assert ticks == pytest.approx(chart.nice_ticks(lo, hi, 5, integer=p.integer))
            assert all(t in texts for t in chart.tick_texts(ticks))


def test_text_is_escaped_and_plain() -> None:
    """A tenant named like markup or mathtext is drawn as written; the SVG escapes it."""
    result = make_result(tenants=("$x^2$", "<b>&hog"))
    svg = plots.run_figure_svgs(result)["throughput"]
    assert "&lt;b&gt;&amp;hog" in svg and "<b>" not in svg
    assert any(t.startswith("<b>&hog") for t in _texts(svg))
    assert any(t.startswith("$x^2$") for t in _texts(svg))
    bars = plots.variant_bars_svg([make_result(variant='"q" & <v>')], "global.denials")
    assert '"q" & <v>' in _texts(bars)


def test_negative_bars_hang_below_zero_with_their_value() -> None:
    a, b = make_result(variant="a"), make_result(variant="b")
    a.metrics["global.delta"] = Metric(-2.0, "", "change")
    b.metrics["global.delta"] = Metric(3.0, "", "change")
    c = plots.variant_bars_chart([a, b], "global.delta")
    svg = chart.chart_svg(c)
    root = ET.fromstring(svg)
    neg, pos = (r for r in root.iter(f"{SVG}rect") if r.get("fill") == plots.PALETTE[0])
    y, height = (float(neg.get(k, "")) for k in ("y", "height"))
    top, tall = (float(pos.get(k, "")) for k in ("y", "height"))
    assert y == pytest.approx(top + tall, abs=0.02)  # both from 0: one down, one up
    assert tall / height == pytest.approx(1.5, rel=1e-2)
    assert {"-2", "3"} <= set(_texts(svg))


def test_a_long_series_is_written_thinned() -> None:
    result = make_result()
    for k in range(50_000):
        result.recorder.sample("device.node/gpu0.vram.used", 1.0 * k / 50_000, float(k % 977))
    vram = plots.memory_chart(result).panels[1]
    used = next(m for m in vram.marks if isinstance(m, chart.Step) and m.label == "used")
    assert len(used.x) <= 4 * plots.COLUMNS
    svg = chart.chart_svg(plots.memory_chart(result))
    assert len(svg) < 400_000


def test_a_report_is_rendered_without_importing_matplotlib(tmp_path: Path) -> None:
    """Issue 12, item 4: the run report and the suite page are written from charts, so a
    whole ``pinlab run`` (in a fresh interpreter) never loads matplotlib."""
    code = (
        "import sys; from pinlab.cli import main; "
        f"rc = main(['run', 'efa-gaudi', '--out', {str(tmp_path)!r}, '--quiet']); "
        "print(rc, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "False"]
    report = (tmp_path / "efa-gaudi" / "staged" / "report.html").read_text()
    assert report.count('<svg class="plot"') == len(plots.FIGURES)


def test_every_bar_has_a_tooltip_naming_variant_series_value_and_unit() -> None:
    results = [make_result(variant="pin", rate=12 * GB), make_result(variant="staged", rate=6 * GB)]
    svg = plots.variant_bars_svg(results, "tenant.*.throughput")
    tips = [t.text for t in ET.fromstring(svg).iter(f"{SVG}title")]
    assert tips == [
        "pin · hog: 6 GB/s",
        "staged · hog: 3 GB/s",
        "pin · trainer: 12 GB/s",
        "staged · trainer: 6 GB/s",
    ]
    counts = plots.variant_bars_svg(results, "global.denials")
    assert [t.text for t in ET.fromstring(counts).iter(f"{SVG}title")] == ["pin: 3", "staged: 3"]
