"""The error measures of pinlab validate (validation/README.md, "Errors") on hand-made
cases: the signed point error, the geometric-mean table error (symmetric in over- and
under-estimation), the overall error over points against the mean of table errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pinlab.validate import stats
from pinlab.validate.runner import PointResult, Summary, TableResult
from tests.validate.tables import table


def test_point_error_is_signed_relative() -> None:
    assert stats.point_error(11.0, 10.0) == pytest.approx(0.1)
    assert stats.point_error(9.0, 10.0) == pytest.approx(-0.1)
    assert stats.point_error(10.0, 10.0) == 0.0


@pytest.mark.parametrize("simulated", [0.0, -1.0, math.nan, math.inf])
def test_nothing_usable_simulated_is_an_infinite_error(simulated: float) -> None:
    assert stats.point_error(simulated, 10.0) == math.inf
    assert stats.abs_log_ratio(simulated, 10.0) == math.inf
    assert stats.geomean_error([(simulated, 10.0), (10.0, 10.0)]) == math.inf


@pytest.mark.parametrize("measured", [0.0, -2.0, math.nan])
def test_measured_must_be_positive(measured: float) -> None:
    with pytest.raises(ValueError, match="positive measured"):
        stats.point_error(1.0, measured)


def test_geomean_error_counts_over_and_under_alike() -> None:
    # twice too much and half too little are the same miss: a factor of 2
    assert stats.geomean_error([(2.0, 1.0)]) == pytest.approx(1.0)
    assert stats.geomean_error([(0.5, 1.0)]) == pytest.approx(1.0)
    assert stats.geomean_error([(2.0, 1.0), (0.5, 1.0)]) == pytest.approx(1.0)
    # and they do not cancel, as a signed mean would
    assert stats.geomean_error([(1.1, 1.0), (1 / 1.1, 1.0)]) == pytest.approx(0.1)


def test_geomean_error_is_the_geometric_mean_of_the_factors() -> None:
    # factors 1.1 and 1.0 -> sqrt(1.1) - 1
    assert stats.geomean_error([(1.1, 1.0), (5.0, 5.0)]) == pytest.approx(math.sqrt(1.1) - 1)
    # independent of the unit: the same table in other units has the same error
    pairs = [(3.0, 2.0), (7.0, 8.0), (1.0, 1.5)]
    scaled = [(s * 1e6, m * 1e6) for s, m in pairs]
    assert stats.geomean_error(pairs) == pytest.approx(stats.geomean_error(scaled))
    # and of which way the column points (a time is the inverse of a rate)
    inverse = [(1 / s, 1 / m) for s, m in pairs]
    assert stats.geomean_error(pairs) == pytest.approx(stats.geomean_error(inverse))
    assert stats.geomean_error([(4.0, 4.0)]) == 0.0


def test_empty_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        stats.geomean_error([])
    with pytest.raises(ValueError, match="at least one"):
        stats.mean_error([])


def test_mean_error() -> None:
    assert stats.mean_error([0.1, 0.3]) == pytest.approx(0.2)
    assert stats.mean_error([0.1, math.inf]) == math.inf


def _result(tmp_path: Path, name: str, pairs: list[tuple[float, float]]) -> TableResult:
    t = table(tmp_path, name)
    points = tuple(
        PointResult(x=i, series=None, measured=m, simulated=s) for i, (s, m) in enumerate(pairs)
    )
    return TableResult(table=t, points=points, outputs=())


def test_overall_weighs_points_and_mean_weighs_tables(tmp_path: Path) -> None:
    one_bad = _result(tmp_path, "one-bad", [(2.0, 1.0)])  # one point, factor 2
    three_good = _result(tmp_path, "three-good", [(1.0, 1.0)] * 3)
    summary = Summary.of([one_bad, three_good])
    assert summary is not None
    assert (summary.tables, summary.points, summary.passed) == (2, 4, 1)
    assert summary.error == pytest.approx(2 ** (1 / 4) - 1)  # over 4 points
    assert summary.mean_table_error == pytest.approx(0.5)  # (1.0 + 0.0) / 2
    assert Summary.of([]) is None


def test_a_table_passes_at_its_tolerance_and_fails_above(tmp_path: Path) -> None:
    tolerance = 0.10  # tests.validate.tables.PERFTEST
    at = _result(tmp_path, "at", [(1.0 + tolerance / 2, 1.0)])
    above = _result(tmp_path, "above", [(1.0 + tolerance * 1.01, 1.0)])
    assert at.passed and at.error == pytest.approx(0.05)
    assert not above.passed
