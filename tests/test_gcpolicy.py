"""The garbage-collector settings of a simulation and of writing its results out: confined to
their blocks, and invisible in results."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
import simpy

from pinlab import gcpolicy
from pinlab.gcpolicy import YOUNG_THRESHOLD, frozen_heap, retune, tuned_collector
from pinlab.platform.presets import PRESETS
from pinlab.scenarios import runner
from pinlab.scenarios.config import load_scenario
from pinlab.scenarios.result import RunResult
from pinlab.scenarios.runner import run_variant
from pinlab.sim import engine
from pinlab.sim.engine import Ctx, Simulation


@pytest.fixture(autouse=True)
def collector_state() -> Iterator[tuple[int, int, int]]:
    """Each test starts from the interpreter's settings and gets them back, whatever it did."""
    saved = gc.get_threshold()
    enabled = gc.isenabled()
    assert gc.get_freeze_count() == 0
    try:
        yield saved
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()
        if enabled:
            gc.enable()


def test_block_freezes_and_raises_the_young_threshold(collector_state: tuple[int, ...]) -> None:
    with tuned_collector():
        young, *older = gc.get_threshold()
        assert older == list(collector_state[1:])
        assert young >= max(collector_state[0], YOUNG_THRESHOLD)
        # about the frozen count at entry (gcpolicy._heap_size: an estimate within a small factor)
        assert young <= max(YOUNG_THRESHOLD, 3 * gc.get_freeze_count())
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == collector_state
    assert gc.get_freeze_count() == 0


def test_the_young_threshold_grows_with_the_frozen_heap() -> None:
    heap = [[i] for i in range(3 * YOUNG_THRESHOLD)]  # tracked containers
    with tuned_collector():
        assert gc.get_freeze_count() > len(heap)
        assert 3 * gc.get_threshold()[0] >= gc.get_freeze_count()


def test_retune_keeps_the_threshold_in_step_inside_a_block_only(
    collector_state: tuple[int, ...],
) -> None:
    retune()  # no block: nothing to do
    assert gc.get_threshold() == collector_state
    assert gc.get_freeze_count() == 0
    with tuned_collector():
        frozen = gc.get_freeze_count()
        built = [[i] for i in range(2 * frozen + YOUNG_THRESHOLD)]
        retune()
        assert gc.get_freeze_count() >= frozen + len(built)
        assert 3 * gc.get_threshold()[0] >= frozen + len(built)
    assert gc.get_threshold() == collector_state
    assert gc.get_freeze_count() == 0


def test_the_heap_estimate_is_within_a_small_factor_of_the_tracked_objects() -> None:
    heap = [{"k": [i, str(i)]} for i in range(200_000)]  # dicts, lists, ints and strings
    gc.freeze()
    tracked = gc.get_freeze_count()
    assert tracked > 2 * len(heap)
    assert tracked / 3 <= gcpolicy._heap_size() <= 3 * tracked


def test_settings_restored_after_an_exception(collector_state: tuple[int, ...]) -> None:
    with pytest.raises(RuntimeError, match="boom"), tuned_collector():
        raise RuntimeError("boom")
    assert gc.get_threshold() == collector_state
    assert gc.get_freeze_count() == 0


def test_a_nested_block_freezes_what_was_built_since(collector_state: tuple[int, ...]) -> None:
    with tuned_collector():
        tuned = gc.get_threshold()
        frozen = gc.get_freeze_count()
        built = [[i] for i in range(2 * frozen + YOUNG_THRESHOLD)]
        with tuned_collector():
            assert gc.get_freeze_count() >= frozen + len(built)
            assert 3 * gc.get_threshold()[0] >= frozen + len(built)
        # the outer block goes on in step with the heap: what the inner one built stays frozen,
        # the young threshold as high as the heap (never lower than the outer's own), the
        # older generations' thresholds the outer's
        more = [[i] for i in range(gc.get_freeze_count() + YOUNG_THRESHOLD)]
        with tuned_collector():
            pass
        young, *older = gc.get_threshold()
        assert older == list(tuned[1:])
        assert young >= tuned[0]
        assert gc.get_freeze_count() >= frozen + len(built) + len(more)
        assert 3 * young >= gc.get_freeze_count()
    assert gc.get_threshold() == collector_state
    assert gc.get_freeze_count() == 0


def test_a_caller_freeze_and_a_higher_threshold_are_kept(collector_state: tuple[int, ...]) -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    gc.set_threshold(YOUNG_THRESHOLD * 3, *collector_state[1:])
    with tuned_collector():
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD * 3
        assert gc.get_freeze_count() == frozen  # the caller's freeze: left as it is
    assert gc.get_freeze_count() == frozen  # not unfrozen
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD * 3


def test_disabled_collection_is_left_alone(collector_state: tuple[int, ...]) -> None:
    gc.disable()
    with tuned_collector():
        assert gc.get_threshold() == collector_state
        assert gc.get_freeze_count() == 0
        assert not gc.isenabled()
    assert gc.get_threshold() == collector_state


def test_simulation_run_restores_when_a_workload_raises(collector_state: tuple[int, ...]) -> None:
    def broken(ctx: Ctx) -> Generator[simpy.Event, Any, None]:
        yield ctx.sleep(0.01)
        raise RuntimeError("workload bug")

    sim = Simulation(PRESETS["workstation"](), "6.16")
    assert gc.get_threshold() == collector_state  # the build's setting ended with it
    sim.spawn("broken", broken)
    with pytest.raises(RuntimeError, match="workload bug"):
        sim.run(0.1)
    assert gc.get_threshold() == collector_state
    assert gc.get_freeze_count() == 0


def _summary(result: RunResult) -> tuple[object, ...]:
    series = {name: list(s.points) for name, s in result.recorder.series.items()}
    return result.metrics, series, result.recorder.events, result.stale_incidents


def test_results_do_not_depend_on_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run under the tuned collector and, with the setting made a no-op, under
    collections every few allocations: every metric, series point and event is the same."""
    cfg = load_scenario("odp-vs-pin", sets=["scenario.duration=5s"])
    tuned = _summary(run_variant(cfg, "odp"))
    monkeypatch.setattr(runner, "tuned_collector", contextlib.nullcontext)
    monkeypatch.setattr(engine, "tuned_collector", contextlib.nullcontext)
    gc.set_threshold(50, 2, 2)
    eager = _summary(run_variant(cfg, "odp"))
    assert gc.get_threshold() == (50, 2, 2)
    assert eager == tuned


def test_frozen_heap_freezes_for_its_block_only(collector_state: tuple[int, ...]) -> None:
    heap = [[i] for i in range(1_000)]
    with frozen_heap():
        assert gc.get_freeze_count() > len(heap)
        assert gc.get_threshold() == collector_state  # thresholds: CPython's own
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError, match="boom"), frozen_heap():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


def test_frozen_heap_inside_another_block_or_a_callers_freeze_changes_nothing(
    collector_state: tuple[int, ...],
) -> None:
    with tuned_collector():
        tuned, frozen = gc.get_threshold(), gc.get_freeze_count()
        with frozen_heap():
            assert gc.get_freeze_count() == frozen
        assert gc.get_threshold() == tuned
        assert gc.get_freeze_count() == frozen  # the outer block's freeze stands
    gc.freeze()
    frozen = gc.get_freeze_count()
    with frozen_heap():
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == frozen  # the caller's: not unfrozen
    gc.unfreeze()
    gc.disable()
    with frozen_heap():
        assert gc.get_freeze_count() == 0


def test_writing_a_run_out_freezes_its_result(tmp_path: Path) -> None:
    """``write_run`` and the report renderers run under :func:`frozen_heap`: inside them the
    result is frozen, after them nothing is."""
    from pinlab.report import html, output

    (result,), verdict = runner.run_scenario(load_scenario("efa-gaudi"), variants=["staged"])
    seen: list[int] = []
    real = output.write_run_dir

    def spy(target: Path, files: Any) -> Path:
        seen.append(gc.get_freeze_count())
        return real(target, files)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(output, "write_run_dir", spy)
        output.write_run(result, tmp_path)
    assert seen and seen[0] > 0
    assert gc.get_freeze_count() == 0
    files = html.run_report_files(result, verdict)
    assert files and gc.get_freeze_count() == 0
