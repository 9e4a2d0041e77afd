"""What a scenario run produces: headline metrics with units, time series, and a verdict.

This is the contract between the scenario runner (``pinlab.scenarios.runner``) and everything
that shows results (``pinlab run``, reports, sweeps, the Python API). :meth:`RunResult.summary`
is exactly what ``summary.json`` holds: deterministic (sorted keys, no wall-clock values),
every number with its unit. :class:`~pinlab.sim.metrics.Metric` (value, unit, description) is
declared with the simulator's recorder, where the metrics are recorded, and re-exported here
for the outputs. :meth:`RunResult.metrics_table` and :meth:`RunResult.series_table` give the
same numbers as pyarrow tables (``.to_pandas()`` where pandas is installed).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from pinlab import provenance
from pinlab.errors import found_value, str_argument
from pinlab.sim.metrics import Metric, Recorder, series_unit
from pinlab.sim.workloads import WORKLOADS
from pinlab.units import UnitError, parse_time

__all__ = ["Metric", "Outcome", "RunResult", "Verdict"]

_RUN_COLUMNS = [("scenario", pa.string()), ("variant", pa.string())]
"""The columns that name the run a row of either table belongs to."""

METRICS_SCHEMA = pa.schema(
    [
        *_RUN_COLUMNS,
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("unit", pa.string()),
        ("description", pa.string()),
    ]
)
"""The columns of :meth:`RunResult.metrics_table`: one row per metric."""

SERIES_SCHEMA = pa.schema(
    [
        *_RUN_COLUMNS,
        ("series", pa.string()),
        ("time_s", pa.float64()),
        ("value", pa.float64()),
        ("unit", pa.string()),
    ]
)
"""The columns of :meth:`RunResult.series_table`: one row per point (as ``series.csv``)."""


@dataclass(slots=True)
class RunResult:
    """One variant of one scenario, run once.

    ``config`` is the fully resolved configuration (TOML-serialisable: what ``config.toml``
    holds); ``metrics`` maps dotted names (``"tenant.trainer.throughput"``,
    ``"device.node/gpu0.vram.pinned_peak"``, ``"global.stale_dma_incidents"``) to
    :class:`Metric`; ``recorder`` has the time series.
    """

    scenario: str
    variant: str
    profile: str
    seed: int
    duration: float
    config: dict[str, Any]
    metrics: dict[str, Metric]
    recorder: Recorder
    stale_incidents: int = 0
    random_sources: list[str] = field(default_factory=list)
    """The stochastic sources that drew (``"<tenant>/<source>"``); empty: deterministic."""

    @property
    def deterministic(self) -> bool:
        """No stochastic source drew: every seed gives this same run."""
        return not self.random_sources

    def metric(self, name: str) -> float | int:
        """The value of ``name``; ``KeyError`` when this run has no such metric, naming the
        closest names (a cluster has thousands: :attr:`metrics` holds them all), and
        :class:`~pinlab.errors.ConfigError` when ``name`` is not a string."""
        str_argument("name", name, "a metric's name")
        try:
            return self.metrics[name].value
        except KeyError:
            close = difflib.get_close_matches(name, list(self.metrics), n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise KeyError(
                f"no metric {found_value(name)} in {self.scenario}/{self.variant} "
                f"({len(self.metrics)} metrics{hint})"
            ) from None

    def summary(self) -> dict[str, Any]:
        """The ``summary.json`` document."""
        return {
            "pinlab_version": provenance.version(),
            "scenario": self.scenario,
            "variant": self.variant,
            "profile": self.profile,
            "seed": self.seed,
            "duration": {"value": self.duration, "unit": "s"},
            "randomness": {
                "deterministic": self.deterministic,
                "sources": list(self.random_sources),
            },
            "metrics": {k: self.metrics[k].to_json() for k in sorted(self.metrics)},
        }

    def summary_json(self) -> str:
        """``summary.json``'s bytes: sorted keys, two-space indent, trailing newline."""
        return json.dumps(self.summary(), indent=2, sort_keys=True) + "\n"

    def series_csv(self) -> str:
        """Every time series as CSV (``series,time_s,value,unit``)."""
        return self.recorder.series_csv()

    def metrics_table(self) -> pa.Table:
        """Every metric as a pyarrow table (:data:`METRICS_SCHEMA`), sorted by name."""
        names = sorted(self.metrics)
        return pa.table(
            {
                "scenario": [self.scenario] * len(names),
                "variant": [self.variant] * len(names),
                "metric": names,
                "value": [float(self.metrics[n].value) for n in names],
                "unit": [self.metrics[n].unit for n in names],
                "description": [self.metrics[n].description for n in names],
            },
            schema=METRICS_SCHEMA,
        )

    def series_table(self) -> pa.Table:
        """Every time series point as a pyarrow table (:data:`SERIES_SCHEMA`), sorted by
        series then time, each with its unit."""
        cols: dict[str, list[Any]] = {name: [] for name in SERIES_SCHEMA.names}
        for key in sorted(self.recorder.series):
            unit = series_unit(key)
            for t, v in self.recorder.series[key].points:
                cols["series"].append(key)
                cols["time_s"].append(round(float(t), 9))
                cols["value"].append(float(v))
                cols["unit"].append(unit)
        n = len(cols["series"])
        cols["scenario"] = [self.scenario] * n
        cols["variant"] = [self.variant] * n
        return pa.table(cols, schema=SERIES_SCHEMA)

    def tenant_state(self, tenant: str) -> str | None:
        """How tenant ``tenant`` (``"trainer"``, ``"trainer@node03"``) was left at the end of
        the run when it never reached its data phase: ``"not started"`` (it starts after the
        run ends), ``"failed"`` (an error ended it), ``"setup"`` (its workload reports a setup
        time and had none yet), ``"killed"``; None when it ran normally or is unknown."""
        name = str_argument("tenant", tenant, "a tenant's name").partition("@")[0]
        spec = next(
            (
                t
                for t in self.config.get("tenants", [])
                if isinstance(t, dict) and t.get("name") == name
            ),
            None,
        )
        if spec is None:
            return None
        try:
            start = parse_time(spec.get("start", 0))
        except UnitError:
            start = 0.0
        if start >= self.duration:
            return "not started"
        base = f"tenant.{tenant}"
        if self._value(f"{base}.failed"):
            return "failed"
        wd = WORKLOADS.get(str(spec.get("workload")))
        declares_setup = wd is not None and any(m.name == "setup_time" for m in wd.metrics())
        if declares_setup and f"{base}.setup_time" not in self.metrics:
            return "setup"
        if self._value(f"{base}.killed"):
            return "killed"
        return None

    def _value(self, name: str) -> float:
        m = self.metrics.get(name)
        return float(m.value) if m is not None else 0.0


@dataclass(slots=True)
class Outcome:
    """One expectation of a claim, judged: ``held`` (None: not decided, the variants it
    compares were not all run -- ``missing``), ``text`` (its numbers, for the explanation),
    ``context`` (informative only) and, for a comparison, one row per variant (``variant``,
    ``value``, ``expected``, ``held``, ``why``)."""

    where: str
    held: bool | None
    text: str
    context: bool = False
    missing: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Verdict:
    """Whether a scenario's claim held, shown as one table row per variant.

    ``columns`` name the table's columns (the first is ``variant``); ``rows`` hold the cell
    text per column; ``held`` is the verdict; ``explanation`` one or two sentences with the
    decisive numbers. ``judged`` is False when the scenario states no expectations, or the
    variants the claim compares were not all run (``pinlab run --variant``): such a verdict is
    neither held nor failed. ``outcomes`` holds each expectation's judgement
    (:class:`Outcome`).
    """

    scenario: str
    claim: str
    held: bool
    columns: list[str]
    rows: list[dict[str, str]] = field(default_factory=list)
    explanation: str = ""
    judged: bool = True
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def word(self) -> str:
        """``HELD``, ``FAILED`` or ``NOT JUDGED``."""
        if not self.judged:
            return "NOT JUDGED"
        return "HELD" if self.held else "FAILED"

    def to_json(self) -> dict[str, Any]:
        """The verdict as data: claim, verdict word, explanation, table, outcomes."""
        return {
            "scenario": self.scenario,
            "claim": self.claim,
            "verdict": self.word,
            "held": self.held,
            "judged": self.judged,
            "explanation": self.explanation,
            "columns": list(self.columns),
            "rows": [dict(r) for r in self.rows],
            "outcomes": [o.to_json() for o in self.outcomes],
        }
