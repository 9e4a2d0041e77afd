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

* matplotlib is imported by the first figure, never by importing this module, so a run that
  writes no report (``pinlab run --no-report``) never loads it;
* the layout is fixed, computed from constant margins in inches (:data:`LAYOUT`): no layout
  engine measures text on every figure, and each figure is drawn once, into its SVG; the
  legend is keys and labels placed in a fixed column (:func:`legend_labels` reads it back);
* the report renderers (:func:`run_figure_svgs`, :func:`variant_bars_svg`) draw on kept
  figures, emptied to the state of new ones, and return only SVG; the figure functions
  (:func:`throughput_over_time` ...) return new figures;
* a series is thinned to the pixels the plot can show (:func:`thin_steps`: the first, lowest,
  highest and last point of every pixel column), so a long run costs what a short one does;
* matplotlib's figure classes are used directly, never pyplot: no display, no global figure
  registry, nothing to close.

The figures live by concern -- :mod:`pinlab.report.figure` (the canvas: style, layout,
legend, units, output), :mod:`pinlab.report.timeplots` (the time plots of one run) and
:mod:`pinlab.report.bars` (variant comparisons) -- and this module is their one public entry.

SVG is the one output (the HTML report inlines it); :func:`figure_png` renders PNG on request.
Output is deterministic -- a fixed SVG hash salt and no dates or version strings in the
metadata -- so the same run gives byte-identical SVG (and PNG) bytes. :func:`save_figure`
writes the files atomically (temporary file + :func:`os.replace`).
"""

from pinlab.report.bars import MAX_BARS, variant_bars, variant_bars_svg
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
    FIGURES,
    MAX_LINES,
    MAX_PANELS,
    denials_over_time,
    memory_over_time,
    run_figure_svgs,
    run_figures,
    thin_steps,
    throughput_over_time,
)

__all__ = [
    "COLUMNS",
    "FIGURES",
    "LAYOUT",
    "MAX_BARS",
    "MAX_LINES",
    "MAX_PANELS",
    "PALETTE",
    "WIDTH_IN",
    "denials_over_time",
    "figure_png",
    "figure_svg",
    "legend_labels",
    "memory_over_time",
    "run_figure_svgs",
    "run_figures",
    "save_figure",
    "style",
    "thin_steps",
    "throughput_over_time",
    "value_scale",
    "variant_bars",
    "variant_bars_svg",
    "write_atomic",
]
