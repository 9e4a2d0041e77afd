"""``pinlab sweep``: sweep files, the local pool and Dask, resume exactly once.

Every sweep here runs ``desktop-pin-hog`` for a few simulated seconds, so the real runner is
used throughout (each point takes milliseconds); the interrupted sweep is simulated with a
``run`` that raises after k points and with ``--max-points``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pinlab.cli import main
from pinlab.errors import ConfigError
from pinlab.sweep import PointError, execute, load_sweep, pool, run_point, run_sweep

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "sweeps" / "pin-cap.toml"
CAP = 'variants.dmem-pin-max.policy.cgroups."user.slice/user-1002.slice"."dmem.pin.max"'

SWEEP = f"""
[sweep]
name = "tiny"
scenario = "desktop-pin-hog"
variants = ["dmem-pin-max"]
replications = 2
seed = 5
metrics = ["tenant.hog.pinned_bytes", "global.*"]

[fixed]
"scenario.duration" = "6s"
# a stochastic source, so that the seeds replicate (a deterministic point runs once)
"tenants.app1.params.arrivals" = "poisson"

[factors]
'{CAP}' = ["drm/{{gpu0}}/vram 1GiB", "drm/{{gpu0}}/vram 2GiB"]
"scenario.sample_interval" = ["500ms", "1s"]
"""


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(SWEEP, encoding="utf-8")
    return path


def _rows(out: Path) -> list[str]:
    return (out / "results.csv").read_text(encoding="utf-8").splitlines()


def test_expansion_cartesian_seeds_and_stable_ids(sweep_file: Path) -> None:
    sweep = load_sweep(sweep_file)
    assert len(sweep.points) == 2 * 2 * 2
    assert [p.index for p in sweep.points] == list(range(8))
    assert {p.seed for p in sweep.points} == {5, 6}
    assert len({p.id for p in sweep.points}) == 8
    assert [p.id for p in load_sweep(sweep_file).points] == [p.id for p in sweep.points]
    assert sweep.factor_names == (CAP, "scenario.sample_interval")


def test_zip_mode_pairs_the_factors(tmp_path: Path) -> None:
    path = tmp_path / "z.toml"
    path.write_text(SWEEP.replace("seed = 5", 'seed = 5\nmode = "zip"'), encoding="utf-8")
    sweep = load_sweep(path)
    assert len(sweep.points) == 2 * 2
    assert [p.factors["scenario.sample_interval"] for p in sweep.points[::2]] == ["500ms", "1s"]


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (("mode = ", 'mode = "diagonal"\n#'), "sweep.mode"),
        (("replications = 2", "replications = 2\nseeds = [1]"), "sweep"),
        (('variants = ["dmem-pin-max"]', 'variants = ["nope"]'), "sweep.variants"),
        (('variants = ["dmem-pin-max"]', "variants = []"), "sweep.variants: expected one or more"),
        (('variants = ["dmem-pin-max"]', 'variants = ["none", "none"]'), "sweep.variants"),
        (("[fixed]", "[fixed]\nbogus = 1\n[other]"), "other"),
        (('"scenario.duration" = "6s"', '"scenario.duration" = "soon"'), "scenario.duration"),
        (('scenario = "desktop-pin-hog"', 'scenario = "missing.toml"'), "sweep.scenario"),
        # a key both fixed and varied: the factor would always replace the fixed value
        (
            (
                '"scenario.duration" = "6s"',
                '"scenario.duration" = "6s"\nscenario.sample_interval = "1s"',
            ),
            "fixed.scenario.sample_interval: expected a key that is not also a factor, found it in "
            "[factors] as 'scenario.sample_interval'",
        ),
    ],
)
def test_validation_errors_are_one_line(
    tmp_path: Path, edit: tuple[str, str], where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = edit
    text = SWEEP if old != "mode = " else SWEEP.replace("seed = 5", "seed = 5\nmode = 1")
    text = text.replace(old if old != "mode = " else "mode = 1", new, 1)
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_sweep(path)
    assert "\n" not in str(exc.value)
    assert str(path) in str(exc.value)
    assert where in str(exc.value)
    assert main(["sweep", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pinlab: error: ") and "\n" not in err


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        (
            ("seed = 5", "seed = -1"),
            "sweep.seed: expected an integer seed from 0 to 2^63-1, found -1",
        ),
        (
            ("seed = 5", 'seed = "5"'),
            'sweep.seed: expected an integer, found "5"',
        ),
        (
            ("seed = 5", "seed = 9223372036854775807"),
            "sweep: expected seeds up to 9223372036854775807 (seed + replications - 1), "
            "found 9223372036854775808",
        ),
        (
            ("seed = 5", "seed = 9223372036854775808"),
            "sweep.seed: expected an integer within TOML's 64-bit range (-2^63 to 2^63-1), "
            "found 9223372036854775808",
        ),
        (
            ("replications = 2\nseed = 5", "seeds = [1, 1]"),
            "sweep.seeds: expected one or more distinct seeds, found [1, 1]",
        ),
        (
            ("replications = 2\nseed = 5", "seeds = []"),
            "sweep.seeds: expected one or more distinct seeds, found []",
        ),
        (
            ("replications = 2", "replications = 1000000000000"),
            "sweep.replications: expected a number <= 100000, found 1000000000000",
        ),
        (
            ("replications = 2", "replicatons = 2"),
            "sweep.replicatons: unknown field (expected one of name, scenario, variants, "
            "profile, seeds, replications, seed, mode, metrics)",
        ),
        (
            ('"scenario.sample_interval" = ["500ms", "1s"]', '"scenario.sample_interval" = []'),
            'factors."scenario.sample_interval": expected at least one value, found []',
        ),
        (
            (
                '"scenario.sample_interval" = ["500ms", "1s"]',
                '"a.b" = '
                + str(list(range(50)))
                + '\n"c.d" = '
                + str(list(range(50)))
                + '\n"e.f" = '
                + str(list(range(50))),
            ),
            "factors: expected at most 100000 points, found 500000 (250000 factor combinations"
            " x 1 variants x 2 seeds)",
        ),
    ],
)
def test_seeds_and_sizes_are_bounded(tmp_path: Path, edit: tuple[str, str], line: str) -> None:
    """Issue 10: seeds within 0 ... 2^63-1 (valid TOML when written back), no bool/str for an
    integer, and a sweep too large to expand refused before it is expanded."""
    path = tmp_path / "bad.toml"
    assert edit[0] in SWEEP
    path.write_text(SWEEP.replace(*edit), encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_sweep(path)
    assert str(exc.value) == f"{path}: {line}"


def test_run_point_row_has_config_seed_and_selected_metrics(sweep_file: Path) -> None:
    point = load_sweep(sweep_file).points[0]
    result = run_point(point.spec())
    row = result["row"]
    assert row["point_id"] == point.id and row["seed"] == 5 and row["variant"] == "dmem-pin-max"
    assert row[CAP] == "drm/{gpu0}/vram 1GiB"
    assert row["tenant.hog.pinned_bytes"] == 1 << 30
    assert "global.denials" in row and "tenant.app1.bytes" not in row
    assert result["units"]["tenant.hog.pinned_bytes"] == "B"


def test_local_pool_writes_parquet_and_csv_with_factor_columns(
    sweep_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "WORKER_START_SECONDS", 0.0)  # a pool even for tiny points
    out = tmp_path / "out"
    assert main(["sweep", str(sweep_file), "--out", str(out), "--jobs", "2", "--quiet"]) == 0
    table = pq.read_table(out / "results.parquet")
    assert table.num_rows == 8
    for col in ("point", "point_id", "variant", "seed", CAP, "scenario.sample_interval"):
        assert col in table.column_names
    assert "tenant.hog.pinned_bytes" in table.column_names
    units = json.loads(table.schema.metadata[b"pinlab.units"])
    assert units["tenant.hog.pinned_bytes"] == "B"
    rows = _rows(out)
    assert len(rows) == 9 and CAP.replace('"', '""') in rows[0]
    assert table.column("point").to_pylist() == list(range(8))
    # the same sweep, serially: byte-identical CSV
    again = tmp_path / "again"
    assert main(["sweep", str(sweep_file), "--out", str(again), "--jobs", "1", "--quiet"]) == 0
    assert (again / "results.csv").read_bytes() == (out / "results.csv").read_bytes()


def test_interrupted_sweep_resumes_each_point_exactly_once(
    sweep_file: Path, tmp_path: Path
) -> None:
    sweep = load_sweep(sweep_file)
    clean = tmp_path / "clean"
    run_sweep(sweep, clean, jobs=1)

    out = tmp_path / "out"
    calls: list[int] = []

    def dying(spec: dict[str, Any]) -> dict[str, Any]:
        if len(calls) == 3:
            raise KeyboardInterrupt  # killed halfway
        calls.append(spec["index"])
        return run_point(spec)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, out, jobs=1, run=dying)
    assert len(list((out / "points").glob("*.json"))) == 3
    assert len(_rows(out)) == 1 + 3  # the partial table, marked as such
    assert (out / "INCOMPLETE").read_text(encoding="utf-8").startswith("3 of 8 points")

    rerun: list[int] = []

    def counting(spec: dict[str, Any]) -> dict[str, Any]:
        rerun.append(spec["index"])
        return run_point(spec)

    outcome = run_sweep(sweep, out, jobs=1, run=counting)
    assert outcome.skipped == 3 and outcome.ran == 5 and outcome.complete
    assert sorted(calls + rerun) == list(range(8))
    ids = [row.split(",")[1] for row in _rows(out)[1:]]
    assert sorted(ids) == sorted(p.id for p in sweep.points)
    assert (out / "results.csv").read_bytes() == (clean / "results.csv").read_bytes()
    assert not (out / "INCOMPLETE").exists()
    # a third run has nothing to do
    assert run_sweep(sweep, out, jobs=1, run=counting).ran == 0


def test_a_sweep_that_fails_before_any_point_leaves_nothing(
    sweep_file: Path, tmp_path: Path
) -> None:
    """A first point that fails (or a scheduler that cannot be reached) in a new --out: no
    results.csv, no points/, no directory (issue "Hardening", item 2)."""
    sweep = load_sweep(sweep_file)
    out = tmp_path / "new"

    def failing(spec: dict[str, Any]) -> dict[str, Any]:
        raise PointError("point 0: made to fail")

    with pytest.raises(PointError):
        run_sweep(sweep, out, jobs=1, run=failing)
    assert not out.exists()
    with pytest.raises(ConfigError, match=r"expected Dask|expected a reachable Dask"):
        run_sweep(sweep, out, dask="not-a-scheme://")
    assert not out.exists()


def test_max_points_then_rerun_and_stray_files(
    sweep_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["sweep", str(sweep_file), "--out", str(out), "--max-points", "5"]) == 1
    assert "5/8 points" in capsys.readouterr().out
    assert (out / "INCOMPLETE").read_text(encoding="utf-8").startswith("5 of 8 points; 3 missing")
    # a half-written temp file and a torn point file (never left by pinlab) are not results
    (out / "points" / ".junk.json.tmp-0000").write_text("{", encoding="utf-8")
    torn = next(iter(sorted((out / "points").glob("*.json"))))
    torn.write_text('{"row": ', encoding="utf-8")
    assert main(["sweep", str(sweep_file), "--out", str(out), "--jobs", "2"]) == 0
    assert "8/8 points (4 run now, 4 already done; complete)" in capsys.readouterr().out
    assert not (out / "INCOMPLETE").exists()
    ids = [row.split(",")[1] for row in _rows(out)[1:]]
    assert len(ids) == len(set(ids)) == 8


@pytest.mark.parametrize("n", ["0", "-1"])
def test_max_points_below_one_is_refused(
    n: str, sweep_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--max-points 0`` would run nothing: refused up front, not an "incomplete" sweep
    naming a table it never wrote."""
    out = tmp_path / "out"
    assert main(["sweep", str(sweep_file), "--out", str(out), "--max-points", n]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"pinlab: error: --max-points: expected at least 1, found {n}\n"
    assert captured.out == "" and not out.exists()


def test_a_tiny_sweep_starts_no_worker(
    sweep_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12, item 4: with less work left after the first point than starting a worker
    costs, --jobs 2 runs every point in this process."""

    def no_workers(*args: object, **kwargs: object) -> None:
        raise AssertionError("a worker was started")

    monkeypatch.setattr("multiprocessing.get_context", no_workers)
    monkeypatch.setattr(pool, "WORKER_START_SECONDS", 3600.0)
    outcome = run_sweep(load_sweep(sweep_file), tmp_path / "out", jobs=2)
    assert outcome.ran == 8 and outcome.complete


def test_workers_start_while_the_first_point_runs(
    sweep_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12, item 4: once the first point has run long enough to show the work left is
    worth a worker, the worker starts (and imports pinlab) while that point still runs, not
    after it: its start is off the sweep's critical path."""
    events: list[str] = []
    start, run_one = pool._Pool.start, pool.run_one

    def starting(pool: Any) -> None:
        events.append("worker start")
        start(pool)

    def running(*args: Any) -> dict[str, Any]:
        result = run_one(*args)
        events.append("point done")
        return result

    monkeypatch.setattr(pool._Pool, "start", starting)
    monkeypatch.setattr(pool, "run_one", running)
    monkeypatch.setattr(pool, "WORKER_START_SECONDS", 0.0)  # worth it from the start
    outcome = run_sweep(load_sweep(sweep_file), tmp_path / "out", jobs=2)
    assert outcome.ran == 8 and outcome.complete
    assert events.index("worker start") < events.index("point done")


def test_one_pool_serves_every_batch_of_the_sweep(
    sweep_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12, item 4: the first seeds of the replication groups and then the other
    replications are two batches; the workers start once, while the sweep's first point runs,
    and serve both -- the second batch starts on every process at once instead of timing a
    point alone again while a new worker imports pinlab."""
    spawned: list[int] = []
    start, run_one = pool._Pool.start, pool.run_one
    here: list[int] = []

    def starting(pool: Any) -> None:
        if not pool.started:
            spawned.append(len(here))
        start(pool)

    def running(*args: Any) -> dict[str, Any]:
        here.append(1)
        return run_one(*args)

    monkeypatch.setattr(pool._Pool, "start", starting)
    monkeypatch.setattr(pool, "run_one", running)
    monkeypatch.setattr(pool, "WORKER_START_SECONDS", 0.0)  # a pool even for tiny points
    outcome = run_sweep(load_sweep(sweep_file), tmp_path / "out", jobs=2)
    assert outcome.ran == 8 and outcome.complete and outcome.unreplicated == 0
    assert spawned == [0]  # one start, before this process had finished a point
    assert len(_rows(tmp_path / "out")) == 1 + 8


def test_chunks_carry_about_a_second_of_points_and_shrink_to_the_end() -> None:
    sizes = pool.chunk_sizes(1000, 0.01, 2)
    assert sum(sizes) == 1000 and sizes[0] == round(pool.TASK_SECONDS / 0.01)
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 1
    assert pool.chunk_sizes(40, 0.01, 2)[0] == 10  # a quarter of what is left
    assert pool.chunk_sizes(5, 30.0, 2) == [1] * 5  # long points: one per task


def test_a_chunk_returns_the_points_before_a_failure(sweep_file: Path) -> None:
    """A task runs its points in order; a failing point ends it, and the points already
    run still come back (and are recorded)."""
    points = load_sweep(sweep_file).points
    bad = points[1].spec()
    bad["variant"] = "nope"
    specs = [
        (points[0].spec(), pool.NO_GATE),
        (bad, pool.NO_GATE),
        (points[2].spec(), pool.NO_GATE),
    ]
    done, error = pool._run_chunk(run_point, specs, {})
    assert [result["row"]["point"] for result in done] == [0]
    assert isinstance(error, PointError) and error.user and "point 1" in str(error)


def failing_at_5(spec: dict[str, Any]) -> dict[str, Any]:
    """A point runner (picklable, for the workers) whose point 5 fails."""
    if spec["index"] == 5:
        raise PointError("point 5: made to fail")
    return run_point(spec)


def test_a_failure_on_a_worker_stops_the_sweep_and_keeps_the_rest(
    sweep_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "WORKER_START_SECONDS", 0.0)  # workers even for tiny points
    sweep = load_sweep(sweep_file)
    out = tmp_path / "out"
    with pytest.raises(PointError, match="point 5: made to fail"):
        run_sweep(sweep, out, jobs=2, run=failing_at_5)
    recorded = len(list((out / "points").glob("*.json")))
    assert 1 <= recorded <= 7 and len(_rows(out)) == 1 + recorded
    outcome = run_sweep(sweep, out, jobs=2)
    assert outcome.skipped == recorded and outcome.ran == 8 - recorded and outcome.complete


def test_a_value_only_the_machines_build_refuses_is_found_before_any_point_runs(
    tmp_path: Path,
) -> None:
    """A factor value that validates but that the machine's build refuses (a GTT size off the
    4 KiB granule) is found when the sweep loads, as every problem of a sweep file is: on the
    sweep file's ``[factors]`` key, with the point's values, before any point runs and with
    nothing written (README "Bad input is one line")."""
    path = tmp_path / "gtt.toml"
    path.write_text(
        """[sweep]
name = "gtt"
scenario = "desktop-pin-hog"
variants = ["none"]

[fixed]
"scenario.duration" = "1s"

[factors]
"platform.devices.gpu0.gtt" = ["1GiB", "1000B"]
""",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as e:
        load_sweep(path)
    assert str(e.value) == (
        f'{path}: factors."platform.devices.gpu0.gtt": platform.devices.gpu0: size '
        "1000 is not a multiple of the granule 4096 (at the point "
        'platform.devices.gpu0.gtt = "1000B")'
    )


def test_points_sharing_a_configuration_load_it_once(
    sweep_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12, item 4: no per-point loading (and validation of every variant) of the
    scenario -- points with the same factor values share one configuration."""
    from pinlab.scenarios import config

    loads: list[tuple[str, ...]] = []
    real = config.load_scenario

    def counting(ref: str, *, sets: tuple[str, ...] = ()) -> Any:
        loads.append(tuple(sets))
        return real(ref, sets=sets)

    monkeypatch.setattr(config, "load_scenario", counting)
    sweep = load_sweep(sweep_file)
    loads.clear()
    configs: execute.Configs = {}
    rows = [run_point(p.spec(), configs=configs)["row"] for p in sweep.points]
    assert len(loads) == 4 == len({tuple(p.sets()) for p in sweep.points})  # 4 factor combos
    alone = [run_point(p.spec())["row"] for p in sweep.points]
    assert rows == alone


@pytest.mark.slow  # a Dask LocalCluster takes a few seconds to start
def test_dask_local_cluster(sweep_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    out = tmp_path / "dask"
    assert main(["sweep", str(sweep_file), "--out", str(out), "--dask", "local", "--quiet"]) == 0
    local = tmp_path / "local"
    run_sweep(load_sweep(sweep_file), local, jobs=1)
    assert (out / "results.csv").read_bytes() == (local / "results.csv").read_bytes()


def test_example_loads_and_dry_run_lists_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = load_sweep(EXAMPLE)
    assert sweep.name == "pin-cap" and len(sweep.points) == 8
    assert len(sweep.factor_names) == 1 and "dmem.pin.max" in sweep.factor_names[0]
    copy = tmp_path / "pin-cap.toml"
    shutil.copy(EXAMPLE, copy)
    assert main(["sweep", str(copy), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "8 points" in out and "drm/{gpu0}/vram 8GiB" in out
    assert not (tmp_path / "pinlab-sweeps").exists()


def test_dry_run_of_a_large_sweep_lists_without_validating_every_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue "Hardening" item 1: a ``--dry-run`` of a huge sweep lists its points without
    loading each point's scenario first; the run itself still refuses the bad point."""
    durations = ", ".join(f'"{n}s"' for n in range(1, 2001))
    path = tmp_path / "big.toml"
    path.write_text(
        '[sweep]\nscenario = "desktop-pin-hog"\nvariants = ["none"]\n'
        f'[factors]\n"scenario.duration" = [{durations}, "-1s"]\n',
        encoding="utf-8",
    )
    assert main(["sweep", str(path), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("big: 2001 points")
    assert lines[1].split("\t")[:4] == ["point", "id", "variant", "seed"]
    assert len(lines) == 2 + 2001 and lines[-1].split("\t")[-1] == "-1s"
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "scenario.duration" in err and "\n" not in err
    assert not out.exists()
