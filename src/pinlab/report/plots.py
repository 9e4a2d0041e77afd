"""Plots of a run and of a scenario's variants (issue "Seeing and scaling", item 2).

Every function takes :class:`~pinlab.scenarios.result.RunResult` objects and returns a
:class:`matplotlib.figure.Figure`:

* :func:`throughput_over_time` -- each tenant's transfer rate over time, the derivative of the
  cumulative ``tenant.<name>.bytes`` series (mean rate per time bin). Without that series the
  figure says so and draws each tenant's mean rate from its
  :class:`~pinlab.sim.metrics.TenantStats` instead;
* :func:`memory_over_time` -- pinned, used and free bytes of every device memory region
  (``device.<node>/<dev>.<region>.{pinned,used,free}``), one panel per region; with many
  devices (a 128-accelerator cluster) regions of the same name are summed over the devices;
* :func:`denials_over_time` -- cumulative denials per tenant, from ``tenant.<name>.denials``
  or, where that series is absent, from the recorder's ``denial`` events;
* :func:`variant_bars` -- one metric (or a ``*`` pattern of metrics, e.g.
  ``tenant.*.throughput``) compared across the variants of a scenario.

Injected faults (the recorder's ``fault`` events) are drawn as dotted vertical lines on the
time plots. Axes carry units: sizes in binary units (GiB), rates in decimal units (GB/s),
times in s/ms/µs, chosen from the data's magnitude.

Rendering is built for a report of many runs:

* each figure is first computed as a :class:`~pinlab.report.chart.Chart` -- panels, limits,
  labels and marks in data coordinates (``throughput_chart`` ...); the report writes the
  chart's SVG directly (:func:`~pinlab.report.chart.chart_svg`: positions from the fixed
  layout, text placed by its anchor, nothing measured), so ``pinlab run`` never imports
  matplotlib; the figure functions (:func:`throughput_over_time` ...) draw the same chart as a
  matplotlib Figure (:func:`~pinlab.report.figure.chart_figure`) for the Python API and PNG;
* matplotlib is imported by the first Figure, never by importing this module;
* the layout is fixed, computed from constant margins in inches (:data:`LAYOUT`): no layout
  engine measures text; the legend is keys and labels placed in a fixed column
  (:func:`legend_labels` reads a Figure's back);
* a series is thinned to the pixels the plot can show (:func:`thin_steps`: the first, lowest,
  highest and last point of every pixel column), so a long run costs what a short one does;
* matplotlib's figure classes are used directly, never pyplot: no display, no global figure
  registry, nothing to close.

The figures live by concern -- :mod:`pinlab.report.chart` (a figure as data, and its SVG),
:mod:`pinlab.report.figure` (the matplotlib canvas: style, layout, legend, units, output),
:mod:`pinlab.report.timeplots` (the time plots of one run) and
:mod:`pinlab.report.bars` (variant comparisons) -- and this module is their one public entry.

SVG is the one output (the HTML report inlines it); :func:`figure_png` renders PNG on request.
Output is deterministic -- the chart's SVG is a pure function of the chart, and a Figure's has
a fixed hash salt and no dates or version strings in the metadata -- so the same run gives
byte-identical SVG (and PNG) bytes. :func:`save_figure`
writes the files atomically (temporary file + :func:`os.replace`).
"""

from pinlab.report.bars import MAX_BARS, variant_bars, variant_bars_chart, variant_bars_svg
from pinlab.report.chart import Chart, chart_svg
from pinlab.report.figure import (
    COLUMNS,
    LAYOUT,
    PALETTE,
    WIDTH_IN,
    figure_png,
    figure_svg,
    legend_labels,
    save_figure,
    style,
    value_scale,
    write_atomic,
)
from pinlab.report.timeplots import (
    CHARTS,
    FIGURES,
    MAX_LINES,
    MAX_PANELS,
    denials_chart,
    denials_over_time,
    memory_chart,
    memory_over_time,
    run_figure_svgs,
    run_figures,
    thin_steps,
    throughput_chart,
    throughput_over_time,
)

__all__ = [
    "CHARTS",
    "COLUMNS",
    "FIGURES",
    "LAYOUT",
    "MAX_BARS",
    "MAX_LINES",
    "MAX_PANELS",
    "PALETTE",
    "WIDTH_IN",
    "Chart",
    "chart_svg",
    "denials_chart",
    "denials_over_time",
    "figure_png",
    "figure_svg",
    "legend_labels",
    "memory_chart",
    "memory_over_time",
    "run_figure_svgs",
    "run_figures",
    "save_figure",
    "style",
    "thin_steps",
    "throughput_chart",
    "throughput_over_time",
    "value_scale",
    "variant_bars",
    "variant_bars_chart",
    "variant_bars_svg",
    "write_atomic",
]
