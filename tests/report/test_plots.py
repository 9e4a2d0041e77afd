"""Plots of a run (issue "Seeing and scaling", item 2): throughput per tenant, pinned versus
free device memory, denials over time, variant comparison bars; SVG (PNG on request), written
atomically, byte-identical for the same run -- also when drawn on a kept figure after another
run (issue 12, item 4); series thinned to the plot's pixel columns without losing an extreme.
Built from hand-made RunResults, no runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle, StepPatch

from pinlab.report import plots
from pinlab.scenarios.result import Metric, RunResult
from pinlab.sim.metrics import Recorder
from pinlab.units import fmt_rate

GiB = 1 << 30
GB = 10**9


def make_result(
    *,
    variant: str = "pin-in-place",
    tenants: tuple[str, ...] = ("trainer", "hog"),
    rate: float = 10 * GB,
    byte_series: bool = True,
    denial_series: bool = True,
    devices: int = 1,
    claim: str = "Pinning in place is at least 1.5x faster.",
    camp: str = "performance",
    throughput: float | None = None,
) -> RunResult:
    """A small, fully deterministic run: 1 s; the first tenant moves ``rate`` bytes/s in
    0.1 s steps; the second is denied three times; ``devices`` GPUs with a VRAM and a GTT
    region; one injected fault at 0.5 s."""
    rec = Recorder()
    for i, name in enumerate(tenants):
        stats = rec.tenant(name)
        stats.started, stats.finished = 0.0, 1.0
        per_step = rate / 10 / (i + 1)
        if byte_series:
            for k in range(11):
                rec.sample(f"tenant.{name}.bytes", k / 10, per_step * k)
        stats.bytes = per_step * 10
        if i == 1:
            for k, t in enumerate((0.2, 0.4, 0.8), start=1):
                rec.event(t, "denial", f"{name}: -ENOMEM (dma_buf_pin)")
                if denial_series:
                    rec.sample(f"tenant.{name}.denials", t, float(k))
    for d in range(devices):
        base = f"device.node/gpu{d}"
        for k in range(11):
            t = k / 10
            pinned = min(k, 8) * GiB
            rec.sample(f"{base}.vram.pinned", t, pinned)
            rec.sample(f"{base}.vram.used", t, pinned + GiB)
            rec.sample(f"{base}.vram.free", t, 16 * GiB - pinned - GiB)
            rec.sample(f"{base}.gtt.used", t, 0.0 if k < 5 else 2 * GiB)
            rec.sample(f"{base}.gtt.pinned", t, 0.0)
            rec.sample(f"{base}.gtt.free", t, 32 * GiB - (0.0 if k < 5 else 2 * GiB))
    rec.sample("node.node.stale_dma_incidents", 0.0, 0.0)
    rec.event(0.5, "fault", "kill hog")
    metrics = {
        "global.stale_dma_incidents": Metric(0, "count", "DMA through a stale mapping"),
        "global.denials": Metric(3, "count", "calls refused, all tenants"),
    }
    for i, name in enumerate(tenants):
        value = rate / (i + 1) if throughput is None else throughput / (i + 1)
        metrics[f"tenant.{name}.throughput"] = Metric(value, "B/s", "bytes moved per second")
        metrics[f"tenant.{name}.denials"] = Metric(3 if i == 1 else 0, "count", "refused")
    metrics["device.node/gpu0.vram.pinned_peak"] = Metric(8 * GiB, "B", "peak pinned")
    return RunResult(
        scenario="toy",
        variant=variant,
        profile="6.16",
        seed=7,
        duration=1.0,
        config={"scenario": {"name": "toy"}, "claim": {"statement": claim, "camp": camp}},
        metrics=metrics,
        recorder=rec,
    )


def _axes(fig: Figure) -> list[Axes]:
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def _texts(fig: Figure) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


def _legend_labels(fig: Figure) -> list[str]:
    return plots.legend_labels(fig)


# -- files ---------------------------------------------------------------------------------------


def test_save_figure_writes_svg_and_png_on_request_atomically(tmp_path: Path) -> None:
    fig = plots.memory_over_time(make_result())
    (svg,) = plots.save_figure(fig, tmp_path / "plots" / "memory")
    assert svg.name == "memory.svg"
    text = svg.read_text()
    assert text.startswith("<?xml") and "<svg" in text
    svg, png = plots.save_figure(fig, tmp_path / "plots" / "memory", png=True)
    assert png.name == "memory.png" and png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    # nothing but the two files: the temporary files were renamed away
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["memory.png", "memory.svg"]


def test_save_figure_keeps_dots_in_the_name(tmp_path: Path) -> None:
    svg, png = plots.save_figure(
        plots.denials_over_time(make_result()), tmp_path / "dmem.max", png=True
    )
    assert (svg.name, png.name) == ("dmem.max.svg", "dmem.max.png")


@pytest.mark.parametrize("stem", sorted(plots.FIGURES))
def test_same_run_gives_byte_identical_svg_and_png(stem: str, tmp_path: Path) -> None:
    fn = plots.FIGURES[stem][1]
    a = plots.save_figure(fn(make_result()), tmp_path / "a", png=True)
    b = plots.save_figure(fn(make_result()), tmp_path / "b", png=True)
    assert a[0].read_bytes() == b[0].read_bytes()
    assert a[1].read_bytes() == b[1].read_bytes()
    svg = a[0].read_text()
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg  # no date, no version string


def _other_run() -> RunResult:
    """A run unlike make_result(): more tenants, devices and denials, no fault, 3 s."""
    result = make_result(tenants=tuple(f"t{i}" for i in range(10)), devices=8, rate=3e8)
    result.duration = 3.0
    result.recorder.events = [e for e in result.recorder.events if e[1] != "fault"]
    for k in range(40):
        result.recorder.sample("tenant.t1.denials", 1.0 + k / 20, float(4 + k))
    return result


def test_report_svgs_are_the_charts_whatever_was_drawn_before() -> None:
    """The reports write each figure's chart as SVG (run_figure_svgs, variant_bars_svg), with
    no state kept between figures: a run's SVG is the same alone or in a suite, in any order."""
    from pinlab.report.chart import chart_svg

    runs = [make_result(), _other_run(), make_result(byte_series=False, denial_series=False)]
    new = [{stem: chart_svg(fn(r)) for stem, fn in plots.CHARTS.items()} for r in runs]
    for order in ([0, 1, 2, 0], [2, 1, 0, 2]):
        for i in order:
            assert plots.run_figure_svgs(runs[i]) == new[i]
    pairs = [runs[:2], runs[1:]]
    expected = [chart_svg(plots.variant_bars_chart(rs, "tenant.*.throughput")) for rs in pairs]
    for rs, svg in [*zip(pairs, expected, strict=True), (pairs[0], expected[0])]:
        assert plots.variant_bars_svg(rs, "tenant.*.throughput") == svg


def test_text_measured_once_for_all_figures_gives_the_same_svg() -> None:
    """Issue 12, item 4: while pinlab draws, each distinct text is measured once for all
    figures (not once per SVG renderer); the SVG is byte-identical to matplotlib's own
    measurement, and the measurement is matplotlib's again afterwards."""
    import io

    import matplotlib
    from matplotlib.textpath import TextToPath

    from pinlab.report import figure

    measure = TextToPath.get_text_width_height_descent
    runs = [make_result(), _other_run()]
    for r in runs:  # warm the kept measurements with every text of both runs
        for _, fn in plots.FIGURES.values():
            plots.figure_svg(fn(r))
    assert figure._MEASURED
    for r in runs:
        for stem, (_, fn) in plots.FIGURES.items():
            fig = fn(r)
            own = io.StringIO()
            with matplotlib.rc_context(figure._RC):  # the style, matplotlib's measurement
                fig.savefig(own, format="svg", metadata=figure._SVG_METADATA)
            assert plots.figure_svg(fig) == own.getvalue(), stem
    assert TextToPath.get_text_width_height_descent is measure


def test_thin_steps_keeps_extremes_and_column_edges() -> None:
    """Issue 12, item 4: a step series is thinned to the first, lowest, highest and last
    point of each pixel column, in time order; a short series is left alone."""
    rng = np.random.default_rng(7)
    t = np.sort(rng.uniform(0.0, 10.0, 20_000))
    v = rng.normal(0.0, 1.0, t.size).cumsum()
    tt, vv = plots.thin_steps(t, v, 10.0, columns=100)
    assert len(tt) <= 4 * 100 and np.all(np.diff(tt) >= 0)
    assert set(zip(tt, vv, strict=True)) <= set(zip(t, v, strict=True))  # only real points
    column = np.minimum((t * 10).astype(int), 99)
    kept = np.minimum((tt * 10).astype(int), 99)
    for c in range(100):
        mine, theirs = vv[kept == c], v[column == c]
        assert mine.min() == theirs.min() and mine.max() == theirs.max()
        assert mine[0] == theirs[0] and mine[-1] == theirs[-1]  # exact at the column's edges
    short_t, short_v = t[:300], v[:300]
    thinned_t, thinned_v = plots.thin_steps(short_t, short_v, 10.0, columns=100)
    assert thinned_t is short_t and thinned_v is short_v


def test_a_long_series_is_drawn_thinned() -> None:
    result = make_result()
    for k in range(50_000):
        result.recorder.sample("device.node/gpu0.vram.used", 1.0 * k / 50_000, float(k % 977))
    vram = plots.memory_over_time(result).axes[1]
    used = next(line for line in vram.get_lines() if line.get_label() == "used")
    assert len(used.get_xdata()) <= 4 * plots.COLUMNS


def test_importing_the_report_does_not_import_matplotlib() -> None:
    """Issue 12, item 4: matplotlib loads with the first figure, not with the run path."""
    code = (
        "import sys, pinlab.cli.run, pinlab.report.html, pinlab.report.plots, "
        "pinlab.report.output; print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_run_without_report_does_not_import_matplotlib(tmp_path: Path) -> None:
    """Issue 12, item 4: ``pinlab run --no-report`` simulates and writes its data files
    without loading matplotlib (in a fresh interpreter, so no other test has loaded it)."""
    code = (
        "import sys; from pinlab.cli import main; "
        f"rc = main(['run', 'efa-gaudi', '--variant', 'staged', '--out', {str(tmp_path)!r}, "
        "'--no-report', '--quiet']); "
        "print(rc, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "False"]
    assert (tmp_path / "efa-gaudi" / "staged" / "summary.json").is_file()  # it did run


def test_variant_bars_svg_is_deterministic() -> None:
    results = [make_result(variant=v) for v in ("a", "b")]
    one = plots.figure_svg(plots.variant_bars(results, "tenant.*.throughput"))
    two = plots.figure_svg(plots.variant_bars(results, "tenant.*.throughput"))
    assert one == two


# -- throughput -----------------------------------------------------------------------------------


def test_throughput_is_the_derivative_of_the_byte_series() -> None:
    fig = plots.throughput_over_time(make_result(rate=10 * GB))
    (ax,) = _axes(fig)
    steps = [p for p in ax.patches if isinstance(p, StepPatch)]
    # sorted by name, each with its mean rate over its data phase
    assert [s.get_label() for s in steps] == ["hog 5 GB/s", "trainer 10 GB/s"]
    hog, trainer = (s.get_data().values for s in steps)
    # 10 GB/s and 5 GB/s, shown in GB/s; every bin lies inside the transfer phase
    assert np.allclose(trainer, 10.0) and np.allclose(hog, 5.0)
    assert "GB/s" in ax.get_ylabel()
    assert (
        ax.get_xlabel() == "simulated time (s): each tenant's data phase, binned; dotted: its mean"
    )
    assert "fault injected" in _legend_labels(fig)


def test_long_tenant_names_keep_their_distinct_ends_in_the_legend() -> None:
    """A cut legend label keeps its start and its end: a tenant on every node of a cluster
    (``trainer-job@node07``) had every entry cut to the same ``trainer-j…`` before."""
    from pinlab.report.figure import fit_label

    tenants = tuple(f"trainer-job@node{k:02d}" for k in range(4))
    labels = _legend_labels(plots.throughput_over_time(make_result(tenants=tenants)))
    cut = [lab for lab in labels if lab.startswith("t") and "…" in lab]
    assert len(cut) == 4 and len(set(cut)) == 4  # four distinct entries
    # each keeps its whole node, however much of the name its rate leaves room for
    assert all(lab.split("…")[1].split()[0] == f"@node{k:02d}" for k, lab in enumerate(cut))
    assert fit_label("trainer@node07", 10) == "t…@node07" and fit_label("short", 9) == "short"
    assert fit_label("trainer@node07", 11) == "tr…@node07"
    assert fit_label("trainer@node07", 9) == "trai…de07"  # '@' counts two: no room for it
    assert fit_label("trainer@node1234", 8) == "trai…234"  # no room for the node: the middle
    assert fit_label("pressure-12", 7) == "pre…-12" and fit_label("@node0007", 6) == "@no…07"
    assert [fit_label("abcd", n) for n in (0, 1, 2, 3, 4)] == ["", "a", "a…", "a…d", "abcd"]


def _setup_then_transfers(rate: float) -> RunResult:
    """One tenant set up for 3.95 s, then eight 2.4 GB transfers 50 ms apart (efa-gaudi's
    pin-in-place shape), in a 5 s run; the table's throughput is over the data phase."""
    result = make_result(tenants=("trainer",))
    rec = result.recorder
    series = rec.series["tenant.trainer.bytes"]
    series.points.clear()
    rec.sample("tenant.trainer.bytes", 0.0, 0.0)
    chunk = 2.4e9
    for k in range(1, 9):
        rec.sample("tenant.trainer.bytes", 3.95 + 0.05 * k, chunk * k)
    total = 8 * chunk
    result.duration = 5.0
    result.metrics["tenant.trainer.bytes"] = Metric(total, "B", "bytes moved")
    result.metrics["tenant.trainer.throughput"] = Metric(rate, "B/s", "over the data phase")
    return result


def _mean_over_bins(step: StepPatch) -> float:
    """The time-weighted mean of a drawn throughput line, in its axis unit."""
    values, edges = step.get_data().values, step.get_data().edges
    return float(np.sum(values * np.diff(edges)) / (edges[-1] - edges[0]))


@pytest.mark.parametrize("rate", [48e9, 20e9])
def test_throughput_is_binned_to_the_data_phase_and_averages_to_the_table(rate: float) -> None:
    """Issue 13, item 7: binned over the whole run, 19.2 GB moved in 0.4 s after a 3.95 s
    setup drew a few spikes whose mean is a quarter of the table's rate. The line spans the
    data phase (bytes / table throughput, ending at the last byte) and averages to the rate."""
    result = _setup_then_transfers(rate)
    (ax,) = _axes(plots.throughput_over_time(result))
    (step,) = [p for p in ax.patches if isinstance(p, StepPatch)]
    assert "GB/s" in ax.get_ylabel()
    assert _mean_over_bins(step) == pytest.approx(rate / GB, rel=1e-9)
    edges = step.get_data().edges
    assert edges[-1] == pytest.approx(4.35) and edges[0] == pytest.approx(4.35 - 19.2e9 / rate)
    assert ax.get_xlim() == pytest.approx((edges[0], edges[-1]))  # the data phase, not 0..5 s
    assert step.get_label() == f"trainer {fmt_rate(rate)}"
    (mean,) = ax.collections  # the dotted mean over the phase
    assert mean.get_segments()[0][0][1] == pytest.approx(rate / GB)


def test_efa_gaudi_throughput_plot_agrees_with_its_table() -> None:
    """Issue 13, item 7: the efa-gaudi report's throughput plot must not contradict its
    table: the plotted mean over the data phase is each variant's throughput metric."""
    from pinlab.scenarios.config import load_scenario
    from pinlab.scenarios.runner import run_variant

    cfg = load_scenario("efa-gaudi")
    for variant in ("pin-in-place", "staged"):
        result = run_variant(cfg, variant)
        (ax,) = _axes(plots.throughput_over_time(result))
        (step,) = [p for p in ax.patches if isinstance(p, StepPatch)]
        table = float(result.metrics["tenant.trainer.throughput"].value)
        unit = ax.get_ylabel().split("(")[1].rstrip(")")
        scale = {"GB/s": GB, "MB/s": 1e6, "TB/s": 1e12}[unit]
        assert _mean_over_bins(step) * scale == pytest.approx(table, rel=1e-9), variant


def test_throughput_of_tenants_that_moved_nothing_says_so() -> None:
    result = make_result(rate=0.0)
    text = _texts(plots.throughput_over_time(result))
    assert "no tenant moved any bytes" in text


def test_throughput_axis_scales_to_the_data() -> None:
    fig = plots.throughput_over_time(make_result(rate=50e6))
    (ax,) = _axes(fig)
    assert "MB/s" in ax.get_ylabel()


def test_throughput_without_byte_series_says_so() -> None:
    fig = plots.throughput_over_time(make_result(byte_series=False, throughput=2e9))
    text = _texts(fig)
    assert "no per-tenant byte series" in text
    assert "trainer 2 GB/s" in text  # the data-phase metric instead


def test_many_tenants_fold_into_one_line() -> None:
    names = tuple(f"t{i:02d}" for i in range(12))
    fig = plots.throughput_over_time(make_result(tenants=names))
    (ax,) = _axes(fig)
    labels = [p.get_label() for p in ax.patches if isinstance(p, StepPatch)]
    assert len(labels) == plots.MAX_LINES
    assert labels[-1] == "5 other tenants"
    assert "t00 10 GB/s" in labels  # the busiest tenants keep their own line


def test_tenants_that_grow_together_fold_into_a_line_as_steady_as_theirs() -> None:
    """The tenants of a synchronous job (cluster-128: every trainer's bytes grow at the same
    ticks) were binned by their steps counted one tenant at a time: bins finer than the sum's
    steps, most holding none, so the folded line fell to zero between bursts that no tenant
    had. Bins follow the times at which the sum grows."""
    names = tuple(f"t{i:02d}" for i in range(12))
    fig = plots.throughput_over_time(make_result(tenants=names))
    (ax,) = _axes(fig)
    steps = {p.get_label(): p for p in ax.patches if isinstance(p, StepPatch)}
    folded = steps["5 other tenants"].get_data().values
    rates = [10 / (i + 1) for i in range(7, 12)]  # GB/s of the five smallest tenants
    assert folded.min() > 0
    assert folded == pytest.approx(np.full_like(folded, sum(rates)))


# -- memory ---------------------------------------------------------------------------------------


def test_memory_has_a_panel_per_region_with_pinned_used_free() -> None:
    fig = plots.memory_over_time(make_result())
    axes = _axes(fig)
    assert [ax.get_title(loc="left") for ax in axes] == ["node/gpu0 gtt", "node/gpu0 vram"]
    vram = axes[1]
    lines = {line.get_label(): line for line in vram.get_lines()}
    assert {"pinned", "used", "free"} <= set(lines)
    assert vram.get_ylabel() == "GiB"
    # pinned peaks at 8 GiB and the step line runs to the end of the run
    x, y = lines["pinned"].get_data()
    assert max(y) == pytest.approx(8.0) and max(x) == pytest.approx(1.0)
    assert _legend_labels(fig) == ["pinned", "used", "free", "fault injected"]


def test_the_pinned_line_shows_above_the_fill_and_where_used_equals_pinned() -> None:
    """Issue 13, item 7: where everything used is pinned (efa-gaudi's pin-in-place) the used
    line hid the pinned one. The pinned line is drawn thick above the fill, the axes and the
    grid, with the thin used line inside it."""
    result = make_result()
    result.recorder.series["device.node/gpu0.vram.used"].points.clear()
    for k in range(11):  # everything used is pinned
        result.recorder.sample("device.node/gpu0.vram.used", k / 10, min(k, 8) * GiB)
    vram = _axes(plots.memory_over_time(result))[1]
    lines = {line.get_label(): line for line in vram.get_lines()}
    pinned, used = lines["pinned"], lines["used"]
    (fill,) = vram.collections
    assert np.array_equal(pinned.get_ydata(), used.get_ydata())
    assert pinned.get_zorder() > max(fill.get_zorder(), vram.spines["bottom"].get_zorder())
    assert pinned.get_linewidth() >= 2 * used.get_linewidth()
    assert used.get_zorder() > pinned.get_zorder()  # thin, inside the thick pinned line
    assert not pinned.get_clip_on()  # at 0 it shows whole, over the x axis


def test_the_pinned_line_is_in_the_legend_when_nothing_was_pinned() -> None:
    """Issue 13, item 7: a region with no pinned series still draws (and lists) pinned at 0."""
    result = make_result()
    del result.recorder.series["device.node/gpu0.gtt.pinned"]
    fig = plots.memory_over_time(result)
    gtt = _axes(fig)[0]
    assert gtt.get_title(loc="left") == "node/gpu0 gtt"
    pinned = next(line for line in gtt.get_lines() if line.get_label() == "pinned")
    assert set(pinned.get_ydata()) == {0.0}
    assert _legend_labels(fig)[0] == "pinned"


def test_memory_regions_that_held_nothing_are_left_out() -> None:
    result = make_result()
    for kind in ("used", "pinned", "free"):
        del result.recorder.series[f"device.node/gpu0.gtt.{kind}"]
    result.recorder.sample("device.node/gpu0.gtt.used", 0.0, 0.0)
    result.recorder.sample("device.node/gpu0.gtt.free", 0.0, 32 * GiB)
    fig = plots.memory_over_time(result)
    assert [ax.get_title(loc="left") for ax in _axes(fig)] == ["node/gpu0 vram"]


def test_memory_of_many_devices_is_summed_per_region() -> None:
    fig = plots.memory_over_time(make_result(devices=10))
    axes = _axes(fig)
    assert [ax.get_title(loc="left") for ax in axes] == [
        "gtt, summed over 10 devices",
        "vram, summed over 10 devices",
    ]
    pinned = next(line for line in axes[1].get_lines() if line.get_label() == "pinned")
    assert max(pinned.get_ydata()) == pytest.approx(80.0)  # 10 x 8 GiB, in GiB
    assert axes[1].get_ylabel() == "GiB"


def test_memory_without_device_series_says_so() -> None:
    result = make_result()
    result.recorder.series = {
        k: v for k, v in result.recorder.series.items() if not k.startswith("device.")
    }
    assert "no device memory series" in _texts(plots.memory_over_time(result))


def test_memory_regions_all_empty_are_not_said_missing() -> None:
    """cluster-128's default-memlock starts no job: its 128 VRAM regions are recorded, all
    empty. The note said no series was recorded."""
    result = make_result(devices=2)
    for key, series in result.recorder.series.items():
        if key.startswith("device.") and key.endswith((".pinned", ".used")):
            series.points[:] = [(t, 0.0) for t, _ in series.points]
    text = _texts(plots.memory_over_time(result))
    assert "no device memory was used or pinned: all 4 memory regions stayed empty" in text
    assert "no device memory series" not in text


# -- denials --------------------------------------------------------------------------------------


@pytest.mark.parametrize("series", [True, False], ids=["from-series", "from-events"])
def test_denials_are_cumulative_per_tenant(series: bool) -> None:
    fig = plots.denials_over_time(make_result(denial_series=series))
    (ax,) = _axes(fig)
    lines = [line for line in ax.get_lines() if line.get_label() == "hog (3)"]
    assert len(lines) == 1
    x, y = lines[0].get_data()
    assert list(y) == [0.0, 1.0, 2.0, 3.0, 3.0]  # from 0, a step per denial, held to the end
    assert list(x) == pytest.approx([0.0, 0.2, 0.4, 0.8, 1.0])
    assert ax.get_ylabel() == "denials"


def test_no_denials_is_said_not_drawn() -> None:
    result = make_result(denial_series=False)
    result.recorder.events = [e for e in result.recorder.events if e[1] != "denial"]
    fig = plots.denials_over_time(result)
    assert "no denials" in _texts(fig)
    (ax,) = _axes(fig)
    # only the note: no axes, ticks or fault lines to draw (issue 12, item 4: the cost)
    assert not ax.axison and ax.get_lines() == []
    assert plots.legend_labels(fig) == []


# -- variant bars ---------------------------------------------------------------------------------


def _bars(fig: Figure) -> list[Rectangle]:
    (ax,) = _axes(fig)
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() != 0]


def test_variant_bars_compare_a_pattern_across_variants() -> None:
    results = [
        make_result(variant="pin-in-place", rate=12 * GB),
        make_result(variant="migrate-on-pin", rate=4 * GB),
        make_result(variant="staged", rate=6 * GB),
    ]
    fig = plots.variant_bars(results, "tenant.*.throughput")
    (ax,) = _axes(fig)
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "pin-in-place",
        "migrate-on-pin",
        "staged",
    ]
    heights = sorted(round(b.get_height(), 6) for b in _bars(fig))
    assert heights == [2.0, 3.0, 4.0, 6.0, 6.0, 12.0]  # GB/s: trainer and hog per variant
    assert _legend_labels(fig) == ["hog", "trainer"]
    assert ax.get_ylabel().endswith("(GB/s)")


def test_variant_bars_of_one_metric_and_missing_values() -> None:
    a, b = make_result(variant="a"), make_result(variant="b")
    del b.metrics["device.node/gpu0.vram.pinned_peak"]
    fig = plots.variant_bars([a, b], "device.node/gpu0.vram.pinned_peak")
    bars = _bars(fig)
    assert [round(x.get_height(), 6) for x in bars] == [8.0]  # GiB; b has no bar
    assert _legend_labels(fig) == []


def test_variant_bars_with_many_metrics_show_min_mean_max() -> None:
    names = tuple(f"t{i:02d}" for i in range(10))
    fig = plots.variant_bars([make_result(tenants=names)], "tenant.*.throughput")
    assert _legend_labels(fig) == ["min of 10", "mean of 10", "max of 10"]
    assert len(_bars(fig)) == 3


def test_variant_bars_label_a_compared_profile() -> None:
    a, b = make_result(variant="odp"), make_result(variant="odp")
    b.profile = "5.16"
    fig = plots.variant_bars([a, b], "global.denials")
    (ax,) = _axes(fig)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["odp@6.16", "odp@5.16"]


def test_counts_get_whole_number_ticks() -> None:
    """Issue 13, item 7: a count axis ticks at whole numbers (no "0.5 denials")."""
    results = [make_result(variant=v) for v in ("a", "b")]
    for r, n in zip(results, (1, 2), strict=True):
        r.metrics["global.denials"] = Metric(n, "count", "calls refused")
    (ax,) = _axes(plots.variant_bars(results, "global.denials"))
    ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)


def test_sweep_plots_of_counts_get_whole_number_ticks() -> None:
    import re

    from pinlab.report.sweep import sweep_figure_svg

    records = [
        {
            "factor": "n",
            "metric": "global.denials",
            "variant": "v",
            "value": x,
            "label": str(x),
            "mean": m,
            "spread": 0.0,
            "unit": "count",
        }
        for x, m in ((1, 0.5), (2, 1.0), (3, 2.0))
    ]
    svg = sweep_figure_svg(records, "n", "global.denials", "count")
    labels = re.findall(r'<g id="(xtick|ytick)_\d+">.*?<text[^>]*>([^<]*)</text>', svg, re.S)
    assert {axis for axis, _ in labels} == {"xtick", "ytick"}
    assert all(text.strip().lstrip("−-").isdigit() for _, text in labels), labels


def test_variant_bars_without_a_match_says_so() -> None:
    fig = plots.variant_bars([make_result()], "tenant.*.nothing")
    assert "no metric matches" in _texts(fig)


# -- text is text ---------------------------------------------------------------------------------


def test_dollar_signs_and_markup_in_names_are_plain_text() -> None:
    """A tenant named like mathtext or markup is drawn as written, and the SVG escapes it."""
    result = make_result(tenants=("$x^2$", "<b>&hog"))
    svg = plots.figure_svg(plots.throughput_over_time(result))
    assert "$x^2$" in svg
    assert "&lt;b&gt;&amp;hog" in svg and "<b>" not in svg


def test_value_scale_picks_units() -> None:
    assert plots.value_scale("B", 3 * GiB) == (float(GiB), "GiB")
    assert plots.value_scale("B/s", 25e9) == (1e9, "GB/s")
    assert plots.value_scale("s", 0.002) == (1e-3, "ms")
    assert plots.value_scale("count", 5) == (1.0, "count")
    assert plots.value_scale("B", 0) == (1.0, "B")
