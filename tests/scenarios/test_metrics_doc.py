"""``docs/metrics.md`` names every metric and series a run produces, with the unit the code
declares; the names follow one scheme (``<scope>.<entity>.<quantity>``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pinlab.scenarios.config import BUILTIN
from pinlab.sim.metrics import SCOPES, UNITS, split_name
from pinlab.sim.workloads import WORKLOADS
from tests.scenarios.conftest import ScenarioRun

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
ROW = re.compile(r"^\| `([^`]+)` \| ([^ |]+) \|", re.MULTILINE)


def documented() -> dict[str, str]:
    """``{quantity or series pattern: unit}`` of every table row of the document."""
    return dict(ROW.findall(DOC.read_text(encoding="utf-8")))


def pattern(name: str) -> str:
    """A concrete metric or series name as the document writes it: entities, regions, errnos
    and policies become placeholders."""
    scope, _entity, quantity = split_name(name)
    if scope == "device" and quantity.count(".") == 1:
        quantity = "<region>." + quantity.split(".")[1]
    for key in ("denied", "denied_by"):
        if quantity.startswith(key + "."):
            quantity = {"denied": "denied.<ERRNO>", "denied_by": "denied_by.<policy>"}[key]
    return quantity


def test_every_declared_workload_metric_is_documented_with_its_unit() -> None:
    rows = documented()
    for wd in WORKLOADS.values():
        for spec in wd.metrics():
            assert rows.get(spec.name) == spec.unit, f"{wd.name}: {spec.name} ({spec.unit})"


@pytest.mark.parametrize("name", BUILTIN)
def test_every_metric_of_the_builtin_runs_is_documented(scenario: ScenarioRun, name: str) -> None:
    rows = documented()
    results, _ = scenario(name)
    for r in results.values():
        for metric_name, m in r.metrics.items():
            scope, entity, _ = split_name(metric_name)
            assert scope in SCOPES and (entity or scope == "global"), metric_name
            assert m.unit in UNITS and m.description, metric_name
            assert rows.get(pattern(metric_name)) == m.unit, metric_name
        for series in r.recorder.series:
            scope, entity, quantity = split_name(series)
            assert scope in SCOPES and entity, series
            shown = {
                "device": f"device.<node>/<dev>.<region>.{quantity.rpartition('.')[2]}",
                "tenant": f"tenant.<t>.{quantity}",
                "link": f"link.<link-key>.{quantity}",
                "node": f"node.<node>.{quantity}",
            }[scope]
            assert shown in rows, series
