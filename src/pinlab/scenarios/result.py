"""What a scenario run produces: headline metrics with units, time series, and a verdict.

This is the contract between the scenario runner (``pinlab.scenarios.runner``) and everything
that shows results (``pinlab run``, reports, sweeps). :meth:`RunResult.summary` is exactly what
``summary.json`` holds: deterministic (sorted keys, no wall-clock values), every number with
its unit. :class:`~pinlab.sim.metrics.Metric` (value, unit, description) is declared with the
simulator's recorder, where the metrics are recorded, and re-exported here for the outputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pinlab.sim.metrics import Metric, Recorder

__all__ = ["Metric", "RunResult", "Verdict"]


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

    def metric(self, name: str) -> float | int:
        """The value of ``name``; ``KeyError`` naming the known metrics when absent."""
        try:
            return self.metrics[name].value
        except KeyError:
            known = ", ".join(sorted(self.metrics))
            raise KeyError(
                f"no metric {name!r} in {self.scenario}/{self.variant}: {known}"
            ) from None

    def summary(self) -> dict[str, Any]:
        """The ``summary.json`` document."""
        return {
            "scenario": self.scenario,
            "variant": self.variant,
            "profile": self.profile,
            "seed": self.seed,
            "duration": {"value": self.duration, "unit": "s"},
            "metrics": {k: self.metrics[k].to_json() for k in sorted(self.metrics)},
        }

    def summary_json(self) -> str:
        """``summary.json``'s bytes: sorted keys, two-space indent, trailing newline."""
        return json.dumps(self.summary(), indent=2, sort_keys=True) + "\n"

    def series_csv(self) -> str:
        """Every time series as CSV (``series,time_s,value``)."""
        return self.recorder.series_csv()


@dataclass(slots=True)
class Verdict:
    """Whether a scenario's claim held, shown as one table row per variant.

    ``columns`` name the table's columns (the first is ``variant``); ``rows`` hold the cell
    text per column; ``held`` is the verdict; ``explanation`` one or two sentences with the
    decisive numbers. ``judged`` is False when the variants the claim compares were not all
    run (``pinlab run --variant``): such a verdict is neither held nor failed.
    """

    scenario: str
    claim: str
    held: bool
    columns: list[str]
    rows: list[dict[str, str]] = field(default_factory=list)
    explanation: str = ""
    judged: bool = True
