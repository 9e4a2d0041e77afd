"""``pinlab run`` and ``pinlab scenarios``.

The first group drives the command against a small fake runner (injected in place of
``pinlab.scenarios.runner``), so exit statuses, error lines, variant selection, progress
callbacks and the ``--compare-profile`` table are checked without simulating anything. The
second group runs the real built-in scenarios: the same seed gives a byte-identical
``summary.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import pinlab.scenarios
from pinlab import __version__
from pinlab.cli import main
from pinlab.errors import ConfigError
from pinlab.scenarios.result import Metric, RunResult, Verdict
from pinlab.sim.metrics import Recorder

# -- a fake runner -------------------------------------------------------------------------------


@dataclass
class FakeConfig:
    name: str
    claim: str
    variants: list[str]
    camp: str = "stability"
    held: bool = True
    sets: tuple[str, ...] = ()
    profile: str = "6.16"

    def with_profile(self, profile: str) -> FakeConfig:
        return dataclasses.replace(self, profile=profile)

    def resolve(self, variant: str) -> Any:
        return types.SimpleNamespace(kernel=types.SimpleNamespace(profile=self.profile))


@dataclass
class FakeRunner:
    """The runner's API (BUILTIN, list_scenarios, load_scenario, run_scenario), scripted."""

    scenarios: dict[str, FakeConfig]
    calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def BUILTIN(self) -> tuple[str, ...]:
        return tuple(self.scenarios)

    def list_scenarios(self) -> list[tuple[str, str]]:
        return [(c.name, c.claim) for c in self.scenarios.values()]

    def load_scenario(
        self, name_or_path: str, *, sets: Sequence[str] = (), profile: str | None = None
    ) -> FakeConfig:
        if name_or_path not in self.scenarios:
            raise ConfigError(
                name_or_path,
                "",
                f"expected a scenario file or a built-in name ({', '.join(self.scenarios)}), "
                "found no such file",
            )
        for item in sets:
            if "=" not in item:
                raise ConfigError(f"--set {item}", "", "expected key=value, found no '='")
            if item.split("=", 1)[0] not in ("duration", "seed"):
                raise ConfigError("--set", item.split("=", 1)[0], "unknown field")
        cfg = self.scenarios[name_or_path]
        return FakeConfig(cfg.name, cfg.claim, list(cfg.variants), cfg.camp, cfg.held, tuple(sets))

    def run_scenario(
        self,
        cfg: FakeConfig,
        *,
        variants: list[str] | None = None,
        profile: str | None = None,
        seed: int | None = None,
        progress: Callable[..., None] | None = None,
    ) -> tuple[list[RunResult], Verdict]:
        self.calls.append({"scenario": cfg.name, "variants": variants, "profile": profile})
        results = []
        for variant in variants or cfg.variants:
            if progress is not None:
                progress(variant)  # as the runner: called as each variant starts
            p = profile or "6.16"
            results.append(
                RunResult(
                    scenario=cfg.name,
                    variant=variant,
                    profile=p,
                    seed=seed or 0,
                    duration=1.0,
                    config={"scenario": {"name": cfg.name, "profile": p}},
                    metrics={
                        "tenant.a.throughput": Metric(
                            2e10 if p == "6.16" else 1e10, "B/s", "bytes per second"
                        ),
                        "global.stale_dma_incidents": Metric(0, "count"),
                    },
                    recorder=Recorder(),
                )
            )
        verdict = Verdict(
            scenario=cfg.name,
            claim=cfg.claim,
            held=cfg.held,
            columns=["variant", "throughput"],
            rows=[{"variant": r.variant, "throughput": "x GB/s"} for r in results],
            explanation="because of the numbers",
        )
        return results, verdict


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRunner]:
    runner = FakeRunner(
        {
            "alpha": FakeConfig("alpha", "pins are free", ["pin", "odp"]),
            "beta": FakeConfig("beta", "odp is slow", ["odp", "migrate"], camp="performance"),
        }
    )
    # loading (pinlab.scenarios.config) and running (pinlab.scenarios.runner) both faked
    for module_name, names in (
        ("config", ("BUILTIN", "list_scenarios", "load_scenario")),
        ("runner", ("run_scenario",)),
    ):
        module = types.ModuleType(f"pinlab.scenarios.{module_name}")
        for name in names:
            setattr(module, name, getattr(runner, name))
        monkeypatch.setitem(sys.modules, f"pinlab.scenarios.{module_name}", module)
        monkeypatch.setattr(pinlab.scenarios, module_name, module, raising=False)
    yield runner


def test_run_all_prints_one_verdict_per_scenario(
    fake: FakeRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "alpha: pins are free" in out and "beta: odp is slow" in out
    assert out.count("claim HELD: because of the numbers") == 2
    assert "2 scenarios: 2 claims held, 0 failed; 4 run directories" in out
    for scenario, variant in [("alpha", "pin"), ("alpha", "odp"), ("beta", "migrate")]:
        run_dir = tmp_path / scenario / variant
        names = {p.name for p in run_dir.iterdir()}
        assert {"config.toml", "series.csv", "summary.json", "report.html"} <= names
        assert {"plot-throughput.svg", "plot-memory.svg"} <= names
    assert (tmp_path / "report.html").is_file()  # the suite page
    assert [c["variants"] for c in fake.calls] == [["pin", "odp"], ["odp", "migrate"]]


def test_run_no_report_writes_only_the_data_files(
    fake: FakeRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--out", str(tmp_path), "--no-report", "--quiet"]) == 0
    run_dir = tmp_path / "alpha" / "pin"
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "config.toml",
        "series.csv",
        "summary.json",
        "trace.json",
    ]
    assert not (tmp_path / "report.html").exists()


def test_run_failed_claim_exits_1_and_names_it(
    fake: FakeRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.scenarios["beta"].held = False
    assert main(["run", "--out", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "claim FAILED: because of the numbers" in captured.out
    assert "pinlab: claim FAILED: beta: odp is slow (because of the numbers)" in captured.err
    assert "alpha" not in captured.err


def test_quiet_prints_nothing_but_writes(
    fake: FakeRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "alpha", "--quiet", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out == ""
    assert (tmp_path / "alpha" / "pin" / "summary.json").exists()


def test_variant_selection_and_options_reach_the_runner(
    fake: FakeRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--variant", "odp", "--profile", "6.12", "--seed", "42"]
    assert main([*args, "--set", "duration=1s", "--out", str(tmp_path)]) == 0
    assert fake.calls == [
        {"scenario": "alpha", "variants": ["odp"], "profile": "6.12"},
        {"scenario": "beta", "variants": ["odp"], "profile": "6.12"},
    ]
    summary = json.loads((tmp_path / "beta" / "odp" / "summary.json").read_text())
    assert summary["seed"] == 42 and summary["profile"] == "6.12"
    assert not (tmp_path / "alpha" / "pin").exists()


def test_variant_only_in_some_scenarios_runs_those(
    fake: FakeRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--variant", "migrate", "--out", str(tmp_path)]) == 0
    assert fake.calls == [{"scenario": "beta", "variants": ["migrate"], "profile": None}]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", "gamma"],
            "gamma: expected a scenario file or a built-in name (alpha, beta), found no such",
        ),
        (["run", "alpha", "--variant", "nope"], "expected a variant of alpha (odp, pin)"),
        (["run", "--variant", "nope"], "expected a variant of any scenario (migrate, odp, pin)"),
        (["run", "--profile", "4.19"], "--profile: expected a kernel profile (5.16, 6.12"),
        (["run", "--compare-profile", "x"], "--compare-profile: expected a kernel profile"),
        (["run", "--set", "duration"], "--set duration: expected key=value, found no '='"),
        (["run", "--set", "bogus=1"], "--set: bogus: unknown field"),
    ],
)
def test_user_errors_are_one_line_exit_2(
    fake: FakeRunner,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinlab: error: ")
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert fake.calls == []  # nothing ran


def test_unwritable_out_is_a_user_error(
    fake: FakeRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert main(["run", "alpha", "--out", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert err == f"pinlab: error: --out {blocker}: expected a directory, found a file\n"
    assert fake.calls == []  # refused before anything ran


def test_bad_seed_is_rejected_by_argparse(
    fake: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    for bad in ("-1", str(2**63), "x"):
        with pytest.raises(SystemExit) as exc:
            main(["run", "--seed", bad])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("pinlab: error: run: --seed: expected")
        assert err.count("\n") == 1


def test_compare_profile_prints_the_difference(
    fake: FakeRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "alpha", "--compare-profile", "5.16", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "under profile 5.16: claim HELD" in out
    assert "alpha/pin: profile 6.16 -> 5.16" in out and "alpha/odp: profile 6.16 -> 5.16" in out
    assert "tenant.a.throughput" in out and "-10 GB/s (-50%)" in out
    assert "1 of 2 metrics unchanged" in out
    assert (tmp_path / "alpha" / "pin@5.16" / "summary.json").exists()
    assert [c["profile"] for c in fake.calls] == [None, "5.16"]


def test_progress_bar_runs_on_a_terminal(
    fake: FakeRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On a terminal the transient progress bar is live on stderr while tables go to stdout
    (the bar is paused for them); the runner's progress callback advances it per variant."""
    import rich.console

    monkeypatch.setattr(rich.console.Console, "is_terminal", property(lambda self: True))
    assert main(["run", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "alpha: pins are free" in captured.out
    assert "claim HELD" not in captured.err


def test_scenarios_lists_name_camp_claim(
    fake: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "name" in line)
    assert header.index("name") < header.index("camp") < header.index("claim")
    assert "alpha" in out and "stability" in out and "pins are free" in out
    assert "beta" in out and "performance" in out


def test_ticker_advances_as_variants_finish() -> None:
    """The runner calls ``progress(variant)`` as each variant starts: the bar counts a
    variant done when the next one starts, and the rest when the scenario returns."""
    from rich.progress import Progress

    from pinlab.cli.run import _Ticker

    progress = Progress(disable=True)
    task = progress.add_task("x", total=5)
    tick = _Ticker(progress, task)
    tick.begin("alpha")
    completed = []
    for variant in ("pin", "odp", "staged"):
        tick(variant)
        completed.append(progress.tasks[0].completed)
    assert completed == [0, 1, 2]
    assert progress.tasks[0].description == "alpha: staged"
    tick.end(3)
    assert progress.tasks[0].completed == 3
    tick.begin("beta")
    tick("odp")
    tick("pin")
    assert progress.tasks[0].completed == 4
    tick.end(2)
    assert progress.tasks[0].completed == 5


# -- the real runner -----------------------------------------------------------------------------

REAL = "efa-gaudi"  # a short built-in scenario


def test_same_seed_gives_byte_identical_summary(tmp_path: Path) -> None:
    """design.md, "Scenario files": the same scenario and seed give byte-identical results --
    every run directory's summary.json, series.csv, trace.json and plot files match byte for
    byte, config.toml below its provenance header, and report.html but for the output
    directory its footer's command line names."""
    for out in ("a", "b"):
        argv = ["run", REAL, "--seed", "11", "--quiet", "--out", str(tmp_path / out)]
        assert main(argv) in (0, 1)  # the claim's verdict is not this test's business
    runs = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a" / REAL).iterdir())
    assert len(runs) >= 2
    for run in runs:
        for name in ("summary.json", "series.csv", "trace.json"):
            a = (tmp_path / "a" / run / name).read_bytes()
            b = (tmp_path / "b" / run / name).read_bytes()
            assert a == b, f"{run}/{name} differs between two runs with seed 11"
        plots = sorted(p.name for p in (tmp_path / "a" / run).glob("plot-*.svg"))
        assert plots, run
        for name in plots:
            a = (tmp_path / "a" / run / name).read_bytes()
            assert a == (tmp_path / "b" / run / name).read_bytes(), f"{run}/{name} differs"
        pages = [
            (tmp_path / o / run / "report.html").read_text().replace(str(tmp_path / o), "OUT")
            for o in "ab"
        ]
        assert pages[0] == pages[1], f"{run}/report.html differs between two runs with seed 11"
        # config.toml: identical below the header naming the version and the command line
        configs = [(tmp_path / o / run / "config.toml").read_text().splitlines() for o in "ab"]
        assert configs[0][0] == f"# written by pinlab {__version__}"
        assert configs[0][1].startswith("# command: pinlab run efa-gaudi --seed 11")
        assert configs[0][2:] == configs[1][2:]
        summary = json.loads((tmp_path / "a" / run / "summary.json").read_text())
        assert summary["seed"] == 11
        assert all("unit" in m and "value" in m for m in summary["metrics"].values())
        assert str(tmp_path) not in (tmp_path / "a" / run / "summary.json").read_text()


def test_results_do_not_depend_on_the_string_hash_seed(tmp_path: Path) -> None:
    """design.md, "Scenario files": the same scenario and seed give byte-identical results in
    any process. CPython salts ``str`` hashes per process (``PYTHONHASHSEED``), so a set or
    dict ordered by hash would order a run's output differently in a sweep worker or the next
    command. Two processes with different salts, the same command line and the same relative
    ``--out``: every file of the run, report and config.toml included, matches byte for byte.
    ``settlement`` goes through the policy layer (cgroups, dmem, memlock), named everywhere by
    strings."""
    import subprocess

    outputs = []
    for salt in ("1", "2"):
        cwd = tmp_path / f"salt{salt}"
        cwd.mkdir()
        env = {**os.environ, "PYTHONHASHSEED": salt}
        argv = [str(Path(sys.executable).parent / "pinlab"), "run", "settlement", "--seed", "5"]
        done = subprocess.run(
            [*argv, "--quiet", "--out", "out"], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert done.returncode in (0, 1), done.stderr
        files = {p.relative_to(cwd): p.read_bytes() for p in sorted(cwd.rglob("*")) if p.is_file()}
        assert any(p.name == "report.html" for p in files)
        outputs.append(files)
    assert outputs[0].keys() == outputs[1].keys()
    differ = [str(p) for p in outputs[0] if outputs[0][p] != outputs[1][p]]
    assert not differ, f"these differ between PYTHONHASHSEED=1 and =2: {differ}"


def test_real_runner_user_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pinlab.scenarios.config import BUILTIN

    cases = [
        (["run", "no-such-scenario"], "expected a scenario file or a built-in name"),
        (["run", REAL, "--variant", "nope"], "--variant: expected a variant of efa-gaudi"),
        (["run", REAL, "--set", "scenario.duration"], "--set scenario.duration"),
        (["run", REAL, "--set", "scenario.duration=lots"], "--set scenario.duration=lots"),
        (["run", REAL, "--profile", "4.19"], "--profile: expected a kernel profile"),
    ]
    for argv, message in cases:
        assert main([*argv, "--out", str(tmp_path)]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("pinlab: error: ") and message in err, err
        assert err.count("\n") == 1 and "Traceback" not in err
    main(["run", "no-such-scenario"])
    err = capsys.readouterr().err
    assert all(name in err for name in BUILTIN)  # the valid names
    bad = tmp_path / "bad.toml"
    bad.write_text("[scenario\nname = 1\n")
    assert main(["run", str(bad), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "expected valid TOML" in err and err.count("\n") == 1
    assert not (tmp_path / REAL).exists()


def test_scenarios_lists_the_six_builtins(capsys: pytest.CaptureFixture[str]) -> None:
    from pinlab.scenarios.config import BUILTIN, list_scenarios

    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    assert len(BUILTIN) == 6
    for name, _claim in list_scenarios():
        assert name in out
    assert "camp" in out and "claim" in out


@pytest.mark.slow
def test_run_all_is_the_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``make demo`` is ``pinlab run``: six verdict tables, every claim held, exit 0, and a
    directory per scenario and variant."""
    from pinlab.scenarios.config import BUILTIN, list_scenarios

    assert main(["run", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name, claim in list_scenarios():
        assert f"{name}: {claim.split()[0]}" in out
    assert sum(line.startswith("claim HELD") for line in out.splitlines()) == len(BUILTIN)
    assert f"{len(BUILTIN)} scenarios: {len(BUILTIN)} claims held, 0 failed" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*BUILTIN, "report.html"])
    for scenario in BUILTIN:
        for run in (tmp_path / scenario).iterdir():
            assert (run / "summary.json").is_file() and (run / "config.toml").is_file()
            assert (run / "report.html").is_file()


def test_a_runs_config_toml_reruns_to_the_same_metrics(tmp_path: Path) -> None:
    """config.toml is fully resolved: run as a scenario file it reproduces the metrics."""
    argv = ["run", REAL, "--variant", "pin-in-place", "--quiet", "--out", str(tmp_path / "a")]
    main(argv)
    first = tmp_path / "a" / REAL / "pin-in-place"
    main(["run", str(first / "config.toml"), "--quiet", "--out", str(tmp_path / "b")])
    (again,) = (tmp_path / "b" / REAL).iterdir()
    metrics = [json.loads((d / "summary.json").read_text())["metrics"] for d in (first, again)]
    assert metrics[0] == metrics[1]


def test_a_subset_of_variants_is_not_judged_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--variant runs only part of a comparison: the claim is reported NOT JUDGED (neither
    held nor failed), the exit status is 0, and no meaningless ratio is printed."""
    argv = ["run", REAL, "--variant", "staged", "--no-report", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "claim NOT JUDGED: variant(s) pin-in-place, migrate-on-pin not run" in out
    assert "1 not judged" in out
    assert "inf" not in out.split("claim NOT JUDGED")[1]


HOST_SMOKE = str(Path(__file__).resolve().parents[1] / "examples/scenarios/host-smoke.toml")


def test_inspect_platform_file_runs_through_pinlab_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Done-when of the inspect item: ``pinlab inspect`` on this machine writes a platform
    file, and ``pinlab run --platform`` runs a scenario on it (the host-smoke check: no WARN,
    no leak, no stale DMA)."""
    host = tmp_path / "host.toml"
    assert main(["inspect", "--out", str(host)]) == 0
    capsys.readouterr()
    argv = ["run", HOST_SMOKE, "--platform", str(host), "--no-report", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "claim HELD" in out
    assert (tmp_path / "host-smoke" / "base" / "summary.json").is_file()


def test_platform_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", HOST_SMOKE, "--platform", str(tmp_path / "nope.toml")]) == 2
    err = capsys.readouterr().err
    assert "--platform" in err and "expected a platform file" in err and "Traceback" not in err
    host = tmp_path / "host.toml"
    assert main(["inspect", "--out", str(host)]) == 0
    capsys.readouterr()
    # a scenario whose tenants need devices the host lacks cannot take its platform file
    assert main(["run", "efa-gaudi", "--platform", str(host), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("variants." in err or "params.devices" in err)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_out_the_system_refuses_is_an_expected_found_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--out /proc/...`` passes ``access(2)`` for root, then ``mkdir`` fails (``ENOENT``):
    the error is in the README's expected/found form, like every other bad ``--out``."""
    assert main(["run", "desktop-pin-hog", "--out", "/proc/pinlab-test", "--no-report"]) == 2
    assert capsys.readouterr().err == (
        "pinlab: error: --out /proc/pinlab-test: expected a directory pinlab can write, found "
        "one the system refuses to write (No such file or directory)\n"
    )
