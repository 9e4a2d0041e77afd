"""Parameter sweeps (``pinlab sweep SWEEP.toml``).

A sweep file (:mod:`pinlab.sweep.spec`) names a scenario and the ``--set`` paths to vary, in
a cartesian product or zipped, with seeds or replications; :func:`load_sweep` expands it into
points, each with a stable id. :func:`run_sweep` (:mod:`pinlab.sweep.execute`) runs the
points not yet finished on a local process pool or a Dask cluster, records each the moment it
finishes, and rebuilds one table (Parquet and CSV) with the configuration as columns -- so a
killed sweep, run again, completes with every point exactly once.
"""

from __future__ import annotations

from pinlab.sweep.execute import PointError, SweepOutcome, run_point, run_sweep
from pinlab.sweep.spec import Point, Sweep, load_sweep

__all__ = ["Point", "PointError", "Sweep", "SweepOutcome", "load_sweep", "run_point", "run_sweep"]
