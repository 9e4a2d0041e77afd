"""Self-contained HTML reports: one per run and one for the whole debate suite
(issue "Seeing and scaling", item 3; ``design.md``, "Outputs").

:func:`render_run_html` makes ``report.html`` for one run: the scenario's claim and camp, the
verdict (HELD or FAILED) with the verdict table of all variants (this run's row marked), the
headline metrics with units (global, per tenant, per device region, then every metric), the
plots of :mod:`pinlab.report.plots`, and relative links to the run's data files
(``summary.json``, ``series.csv``, ``config.toml``, and ``trace.json`` or plot files where the
caller says they exist). :func:`render_suite_html` makes one page for a list of scenarios:
an overview table of every claim and verdict, then per scenario its verdict table, bar charts
comparing the variants, and links to each run's own report.

Self-contained means: no network, no external files needed to show the page. Plots are inline
SVG (the XML prologue and metadata stripped, every ``id`` prefixed per plot because a figure's
ids -- its plot areas' clip paths, matplotlib's markers and ``line2d_1`` -- repeat across
figures), CSS is inline,
and a Content-Security-Policy ``<meta>`` forbids loading anything at all, so a stray external
reference shows up as a console error instead of a silent fetch. The one script (inline,
allowed by its SHA-256 hash) checks after loading that every plot rendered and records the
count in ``<body data-images-ok=N>``; the headless-browser test reads it. All text is
escaped: by jinja2's autoescaping, and in table bodies by
:func:`pinlab.report.tables.escape_text`, the same escaping applied where the rows are joined
in Python (:mod:`pinlab.report.tables` holds the run's metric tables). Output is
deterministic: the same run gives the same bytes.

:func:`write_report` writes a page atomically; :func:`write_run_report` and
:func:`write_suite_report` render and write into a run directory / the output root laid out
by :mod:`pinlab.report.output`.
"""

from __future__ import annotations

import base64
import fnmatch
import functools
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from pinlab import __version__, provenance
from pinlab.gcpolicy import frozen_heap
from pinlab.report import plots
from pinlab.report.inline import Plot, inline_svg
from pinlab.report.output import CONFIG_FILE, SERIES_FILE, SUMMARY_FILE, run_dir_name
from pinlab.report.tables import Table, all_metrics_table, run_tables, verdict_table
from pinlab.report.verdict import fmt_value
from pinlab.scenarios.result import RunResult, Verdict

if TYPE_CHECKING:  # jinja2 is loaded by the first page rendered
    import jinja2

__all__ = [
    "DEFAULT_LINKS",
    "REPORT_FILE",
    "TRACE_FILE",
    "Plot",
    "anchor_slug",
    "inline_svg",
    "render_page",
    "render_run_html",
    "render_suite_html",
    "run_path",
    "run_report_files",
    "suite_bar_metrics",
    "write_report",
    "write_run_report",
    "write_suite_report",
]

REPORT_FILE = "report.html"
TRACE_FILE = "trace.json"
BUFINFO_FILE = "bufinfo.txt"

DEFAULT_LINKS: tuple[str, ...] = (SUMMARY_FILE, SERIES_FILE, CONFIG_FILE)
"""The files every run directory has (``pinlab.report.output``)."""

FILE_DESCRIPTIONS: dict[str, str] = {
    SUMMARY_FILE: "every headline metric with its unit (JSON)",
    SERIES_FILE: "every time series: series, time_s, value, unit (CSV)",
    CONFIG_FILE: "the fully resolved configuration of this run (TOML)",
    TRACE_FILE: "timeline for Perfetto (ui.perfetto.dev) or chrome://tracing",
    BUFINFO_FILE: "the kernel's dma_buf bufinfo at the end of the run",
    REPORT_FILE: "this run's report",
}
_LINK_ORDER = (SUMMARY_FILE, SERIES_FILE, CONFIG_FILE, TRACE_FILE, BUFINFO_FILE)

PLOT_PREFIX = "plot-"
"""Plot files in a run directory: ``plot-<stem>.svg`` (and ``plot-<stem>.png`` on request)."""

CAMPS: dict[str, str] = {
    "stability": "Stability first (König, Airlie)",
    "performance": "Performance first (Hubbard)",
    "mechanism": "Mechanism, not policy (Gunthorpe)",
    "ai": "AI chips are not GPUs (Gabbay)",
    "settlement": "The settlement",
}
"""Camp keys of ``seed-brief.md`` (and scenario files) with their display names."""

# -- the page check script (its hash goes into the Content-Security-Policy) --------------------

CHECK_SCRIPT = """
(function () {
  "use strict";
  function check() {
    var body = document.body;
    var ok = 0;
    var bad = [];
    var imgs = document.querySelectorAll("img");
    var svgs = document.querySelectorAll("svg.plot");
    imgs.forEach(function (img) {
      if (img.complete && img.naturalWidth > 0) { ok += 1; }
      else { bad.push(img.getAttribute("alt") || "img"); }
    });
    svgs.forEach(function (svg) {
      var box = svg.getBBox();
      var rect = svg.getBoundingClientRect();
      if (box.width > 0 && box.height > 0 && rect.width > 0 && rect.height > 0 &&
          svg.querySelector("text") !== null) { ok += 1; }
      else { bad.push(svg.getAttribute("aria-label") || "svg"); }
    });
    body.setAttribute("data-images-ok", String(ok));
    body.setAttribute("data-images-total", String(imgs.length + svgs.length));
    if (bad.length > 0) {
      body.setAttribute("data-images-failed", bad.join("; "));
      console.error("pinlab report: not rendered: " + bad.join("; "));
    }
  }
  window.addEventListener("load", check);
})();
""".strip()


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(CHECK_SCRIPT.encode("utf-8")).digest()).decode()
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


# -- view models ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Link:
    href: str
    label: str
    description: str


def _camp_of(result: RunResult | None, camp: str | None) -> str:
    if camp:
        return camp
    if result is None:
        return ""
    meta = result.config.get("claim")
    value = meta.get("camp") if isinstance(meta, Mapping) else None
    return str(value) if value else ""


def _claim_of(result: RunResult | None, verdict: Verdict | None) -> str:
    if verdict is not None and verdict.claim:
        return verdict.claim
    if result is None:
        return ""
    meta = result.config.get("claim")
    value = meta.get("statement") if isinstance(meta, Mapping) else None
    return str(value) if value else ""


def _camp_label(camp: str) -> str:
    return CAMPS.get(camp, camp)


def _links(names: Iterable[str]) -> list[_Link]:
    """Links to the run directory's data files: the known ones in a fixed order, then any
    others by name. Plot files are linked from their figure captions instead."""
    present = [n for n in dict.fromkeys(names) if not n.startswith(PLOT_PREFIX)]
    ordered = [n for n in _LINK_ORDER if n in present]
    ordered += sorted(n for n in present if n not in ordered and n != REPORT_FILE)
    return [_Link(name, name, FILE_DESCRIPTIONS.get(name, "")) for name in ordered]


def anchor_slug(text: str) -> str:
    """``text`` as an HTML id (a scenario's section is ``#scenario-<slug>``)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


# -- rendering -----------------------------------------------------------------------------------


@functools.cache
def _env(packages: tuple[str, ...] = ()) -> jinja2.Environment:
    """The templates of ``packages`` (each with a ``templates/`` directory), then report's own
    (``base.html.j2``, ``macros.html.j2``, the run and suite pages). jinja2 is imported here,
    by the first page rendered, not by ``import pinlab``."""
    import jinja2

    loaders = [jinja2.PackageLoader(p, "templates") for p in (*packages, "pinlab.report")]
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["keep_errnos"] = keep_errnos
    return env


_ERRNO = re.compile(r"(?<![\w-])(-E[A-Z0-9]+)")


def keep_errnos(text: object) -> Markup:
    """``text`` escaped, each errno (``-ENOMEM``) kept on one line: a narrow column header
    broke ``pressure -ENOMEM`` after the minus sign, leaving ``-`` above ``ENOMEM``."""
    escaped = str(Markup.escape(text))
    return Markup(_ERRNO.sub(r'<span class="nowrap">\1</span>', escaped))


def render_page(template: str, *, packages: Sequence[str] = (), **context: Any) -> str:
    """Render a pinlab page: ``template`` from ``packages``' templates or report's, with the
    Content-Security-Policy, the check script and the version every page carries. Another
    package's page extends ``base.html.j2`` the same way the run and suite pages do. The
    footer's ``command`` is the command line being run unless the context gives its own."""
    context.setdefault("command", provenance.command())
    return (
        _env(tuple(packages))
        .get_template(template)
        .render(csp=_csp(), script=Markup(CHECK_SCRIPT), version=__version__, **context)
    )


def _run_plots(
    result: RunResult,
    figures: Mapping[str, Any] | None,
    files: Iterable[str],
    id_prefix: str = "",
) -> list[Plot]:
    if figures is None:
        figures = plots.run_figure_svgs(result)
    present = set(files)
    out = []
    for i, (stem, fig) in enumerate(figures.items()):
        caption = plots.FIGURES[stem][0] if stem in plots.FIGURES else stem
        svg = fig if isinstance(fig, str) else plots.figure_svg(fig)
        pid = f"{id_prefix}p{i}-"
        linked = [
            f"{PLOT_PREFIX}{stem}.{ext}"
            for ext in ("png", "svg")
            if f"{PLOT_PREFIX}{stem}.{ext}" in present
        ]
        out.append(Plot.inline(f"plot-{stem}", caption, svg, pid, linked))
    return out


def render_run_html(
    result: RunResult,
    verdict: Verdict | None = None,
    links: Iterable[str] = DEFAULT_LINKS,
    *,
    camp: str | None = None,
    figures: Mapping[str, Any] | None = None,
) -> str:
    """``report.html`` of one run.

    ``verdict`` is the scenario's verdict over all its variants (this run's row is marked);
    without it the page shows no verdict. ``links`` names the files that exist in the run
    directory (relative names: ``summary.json``, ``trace.json``, ``plot-memory.png`` ...):
    only those are linked. ``camp`` defaults to the run's ``config["claim"]["camp"]``.
    ``figures`` maps a plot stem to a matplotlib Figure or ready SVG text (default:
    :func:`pinlab.report.plots.run_figure_svgs`).
    """
    links = list(links)
    camp_key = _camp_of(result, camp)
    run_plots = _run_plots(result, figures, links)
    return render_page(
        "run.html.j2",
        title=f"{result.scenario} / {result.variant}",
        result=result,
        claim=_claim_of(result, verdict),
        camp=camp_key,
        camp_label=_camp_label(camp_key),
        verdict=verdict,
        verdict_table=verdict_table(verdict, result.variant) if verdict else None,
        duration_text=fmt_value(result.duration, "s"),
        tables=run_tables(result),
        all_metrics=all_metrics_table(result),
        plots=run_plots,
        expected_images=len(run_plots),
        links=_links(links),
    )


def run_path(result: RunResult, *, compare_profile: bool = False) -> str:
    """The run directory of ``result`` relative to the output root (``pinlab.report.output``
    layout): ``<scenario>/<variant>`` or ``<scenario>/<variant>@<profile>``."""
    profile = result.profile if compare_profile else None
    return f"{result.scenario}/{run_dir_name(result.variant, profile)}"


SUITE_BAR_PATTERNS: tuple[tuple[str, str], ...] = (
    ("tenant.*.throughput", "Throughput per tenant"),
    ("tenant.*.denials", "Denials per tenant"),
    ("global.stale_dma_incidents", "Stale-DMA incidents"),
    ("global.leaked_bytes", "Device memory leaked after exit"),
)
"""Metrics the suite report compares across variants, where they are not all zero."""


def suite_bar_metrics(results: Sequence[RunResult], limit: int = 2) -> list[tuple[str, str]]:
    """(metric pattern, title) of :data:`SUITE_BAR_PATTERNS` worth a bar chart for
    ``results``: matched by some run, and not zero everywhere; at most ``limit``."""
    chosen = []
    for pattern, title in SUITE_BAR_PATTERNS:
        values = [
            m.value
            for r in results
            for name, m in r.metrics.items()
            if fnmatch.fnmatchcase(name, pattern)
        ]
        if any(v != 0 for v in values):
            chosen.append((pattern, title))
        if len(chosen) == limit:
            break
    return chosen


@dataclass(slots=True)
class _RunRow:
    variant: str
    profile: str
    href: str
    links: list[_Link]


@dataclass(slots=True)
class _Scenario:
    anchor: str
    name: str
    claim: str
    camp: str
    camp_label: str
    verdict: Verdict
    table: Table
    plots: list[Plot]
    runs: list[_RunRow]


@frozen_heap()  # the results are long-lived: gcpolicy
def render_suite_html(
    entries: Sequence[tuple[Sequence[RunResult], Verdict]],
    *,
    camps: Mapping[str, str] | None = None,
    run_files: Mapping[str, Sequence[str]] | None = None,
    bar_metrics: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    title: str = "pinlab: the 2021 dma_buf_pin debate, replayed",
    robustness: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """One page for a suite of scenarios, to be written at the output root.

    ``entries`` holds each scenario's runs and verdict, in display order. ``camps`` maps a
    scenario to its camp (default: from the runs' configuration). ``run_files`` maps a run
    directory (:func:`run_path`) to the files present in it; a run with an entry is linked
    only to those files, one without is linked to ``report.html`` and :data:`DEFAULT_LINKS`.
    A second run of the same variant in one entry is taken to be a ``--compare-profile``
    rerun (``<variant>@<profile>``). ``bar_metrics`` overrides, per scenario, the
    (metric pattern, title) bar charts (default :func:`suite_bar_metrics`). ``robustness``
    holds ``pinlab run --robust``'s result per claim (``Robustness.to_json()`` of
    :mod:`pinlab.sweep.robust`) for the page's Robustness section; None: not run.
    """
    scenarios: list[_Scenario] = []
    for k, (results, verdict) in enumerate(entries):
        first = results[0] if results else None
        camp = _camp_of(first, (camps or {}).get(verdict.scenario))
        charts = (
            list(bar_metrics[verdict.scenario])
            if bar_metrics is not None and verdict.scenario in bar_metrics
            else suite_bar_metrics(results)
        )
        figs: dict[str, str] = {}
        for pattern, chart_title in charts:
            figs[chart_title] = plots.variant_bars_svg(
                results, pattern, title=f"{chart_title} ({pattern})"
            )
        scenario_plots = [
            Plot.inline(f"s{k}-bars{i}", name, svg, f"s{k}b{i}-")
            for i, (name, svg) in enumerate(figs.items())
        ]
        seen: set[str] = set()
        runs = []
        for r in results:
            compare = r.variant in seen
            seen.add(r.variant)
            path = run_path(r, compare_profile=compare)
            files = (
                list(run_files[path])
                if run_files is not None and path in run_files
                else [REPORT_FILE, *DEFAULT_LINKS]
            )
            report = f"{path}/{REPORT_FILE}" if REPORT_FILE in files else ""
            run_links = [
                _Link(f"{path}/{link.href}", link.label, link.description) for link in _links(files)
            ]
            runs.append(
                _RunRow(
                    run_dir_name(r.variant, r.profile if compare else None),
                    r.profile,
                    report,
                    run_links,
                )
            )
        scenarios.append(
            _Scenario(
                anchor=f"scenario-{anchor_slug(verdict.scenario)}",
                name=verdict.scenario,
                claim=_claim_of(first, verdict),
                camp=camp,
                camp_label=_camp_label(camp),
                verdict=verdict,
                table=verdict_table(verdict),
                plots=scenario_plots,
                runs=runs,
            )
        )
    held = sum(1 for s in scenarios if s.verdict.held)
    return render_page(
        "suite.html.j2",
        title=title,
        scenarios=scenarios,
        held=held,
        failed=len(scenarios) - held,
        expected_images=sum(len(s.plots) for s in scenarios),
        robustness=list(robustness) if robustness is not None else None,
    )


# -- writing -------------------------------------------------------------------------------------


def _dir_files(directory: Path) -> list[str]:
    """The (non-hidden) files in ``directory``, sorted."""
    return sorted(p.name for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def write_report(path: Path | str, html: str) -> Path:
    """Write ``html`` to ``path`` atomically (temporary sibling + :func:`os.replace`)."""
    return plots.write_atomic(path, html)


@frozen_heap()  # the results are long-lived: gcpolicy
def run_report_files(
    result: RunResult,
    verdict: Verdict | None = None,
    links: Iterable[str] = DEFAULT_LINKS,
    *,
    camp: str | None = None,
    png: bool = False,
) -> dict[str, str | bytes]:
    """The report files of one run, by name, for a run-directory writer: ``report.html``,
    ``plot-<stem>.svg`` (text) and, only with ``png``, ``plot-<stem>.png`` (bytes: an extra
    raster rendering the page does not use). ``links`` are the other files the directory will
    hold (the plot files are added to them). Each figure is drawn once into its SVG, which
    serves both its file and the inline copy."""
    svgs = plots.run_figure_svgs(result)
    files: dict[str, str | bytes] = {}
    for stem, svg in svgs.items():
        files[f"{PLOT_PREFIX}{stem}.svg"] = svg
    if png:
        for stem, fig in plots.run_figures(result).items():
            files[f"{PLOT_PREFIX}{stem}.png"] = plots.figure_png(fig)
    html = render_run_html(result, verdict, [*links, *files], camp=camp, figures=svgs)
    return {REPORT_FILE: html, **files}


def write_run_report(
    run_dir: Path | str,
    result: RunResult,
    verdict: Verdict | None = None,
    *,
    camp: str | None = None,
    png: bool = False,
) -> Path:
    """Render ``result``'s report into its existing run directory (as written by
    :func:`pinlab.report.output.write_run`): the plot files first (SVG; PNG too with
    ``png``), then ``report.html``, each atomically. Links go to the files present in the
    directory (``trace.json`` only if it is there). Returns the path of ``report.html``."""
    run_dir = Path(run_dir)
    files = run_report_files(result, verdict, _dir_files(run_dir), camp=camp, png=png)
    html = files.pop(REPORT_FILE)
    for name, data in files.items():
        plots.write_atomic(run_dir / name, data)
    return write_report(run_dir / REPORT_FILE, str(html))


def write_suite_report(
    out: Path | str,
    entries: Sequence[tuple[Sequence[RunResult], Verdict]],
    *,
    camps: Mapping[str, str] | None = None,
    robustness: Sequence[Mapping[str, Any]] | None = None,
) -> Path:
    """Render the suite page for ``entries`` into ``<out>/report.html`` (atomically), linking
    each run's files that exist under ``out`` (``robustness``: :func:`render_suite_html`).
    Returns the page's path."""
    out = Path(out)
    run_files: dict[str, list[str]] = {}
    for results, _ in entries:
        seen: set[str] = set()
        for r in results:
            path = run_path(r, compare_profile=r.variant in seen)
            seen.add(r.variant)
            if (out / path).is_dir():
                run_files[path] = _dir_files(out / path)
    html = render_suite_html(entries, camps=camps, run_files=run_files, robustness=robustness)
    return write_report(out / REPORT_FILE, html)
