"""``pinlab advise`` end to end on ``settlement`` (a short run and a small budget: the example
of docs/advise.md, run as written), its determinism, the infeasible case and the one-line
errors that write nothing."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
from pathlib import Path

import pytest

from pinlab.cli import main
from pinlab.scenarios.config import load_scenario

SHORT = ["--set", "scenario.duration=10s"]
PROTECT = [
    "--protect",
    "tenant.compositor.denied.ENOMEM == 0",
    "--protect",
    "ratio(tenant.trainer.throughput, tenant.trainer.path_rate) >= 90%",
]
MAXIMISE = ["--maximise", "tenant.analytics.throughput"]


DOC = Path(__file__).resolve().parents[2] / "docs" / "advise.md"


def _advise(out: Path, *extra: str, budget: int = 24) -> int:
    argv = ["advise", "settlement", *PROTECT, *MAXIMISE, "--budget", str(budget), *SHORT]
    return main([*argv, *extra, "--out", str(out), "--quiet"])


def _example() -> tuple[list[tuple[list[str], list[str]]], str]:
    """docs/advise.md's example: each ``$ pinlab ...`` command with the lines shown after it,
    and the policy file shown (a ```toml block)."""
    text = DOC.read_text().split("## Example", 1)[1]
    console = text.split("```console\n", 1)[1].split("```", 1)[0]
    commands: list[tuple[list[str], list[str]]] = []
    for line in console.splitlines():
        if line.startswith("$ pinlab "):
            commands.append((shlex.split(line[len("$ pinlab ") :]), []))
        else:
            commands[-1][1].append(line)
    policy = text.split("```toml\n", 1)[1].split("```", 1)[0]
    return commands, policy


@pytest.fixture(scope="module")
def advised(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/advise.md's example, run in a directory of its own; its output as shown."""
    cwd = tmp_path_factory.mktemp("advise")
    commands, policy = _example()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        for argv, shown in commands:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                assert main(argv) == 0, argv
            assert buf.getvalue().splitlines() == shown
    finally:
        os.chdir(old)
    out = cwd / "advice"
    written = (out / "policy.toml").read_text()
    assert "".join(line for line in written.splitlines(True) if not line.startswith("#")) == policy
    return out


def test_writes_a_policy_that_rerun_meets_every_protect(advised: Path, tmp_path: Path) -> None:
    for name in ("policy.toml", "points.csv", "pareto.svg", "advise.html", "advise.json"):
        assert (advised / name).is_file(), name
    assert (advised / "verification" / "summary.json").is_file()
    doc = json.loads((advised / "advise.json").read_text())
    assert doc["met"] is True
    assert [c["held"] for c in doc["verification"]] == [True, True]
    # the file, re-run by `pinlab run --policy`, meets both protections again
    runs = tmp_path / "runs"
    policy = str(advised / "policy.toml")
    argv = ["run", "settlement", "--variant", "settled", *SHORT, "--policy", policy]
    main([*argv, "--out", str(runs), "--quiet", "--no-report"])
    summary = json.loads((runs / "settlement" / "settled" / "summary.json").read_text())
    metrics = {k: v["value"] for k, v in summary["metrics"].items()}
    assert metrics.get("tenant.compositor.denied.ENOMEM", 0) == 0
    rate = metrics["tenant.trainer.throughput"] / metrics["tenant.trainer.path_rate"]
    assert rate >= 0.9
    assert summary == json.loads((advised / "verification" / "summary.json").read_text())
    assert main(["policy", "check", policy]) == 0  # a policy file on its own
    page = (advised / "advise.html").read_text()
    assert "<svg" in page and "Pareto front" in page and "meets every --protect" in page
    rows = (advised / "points.csv").read_text().splitlines()
    assert len(rows) == 1 + doc["evaluated"] and doc["evaluated"] <= 24


def test_the_page_is_a_pinlab_page_and_says_what_was_maximised(advised: Path) -> None:
    """advise.html had a style of its own and did not say what the maximised metric reached;
    it is built like the run reports now (self-contained, ids unique, the check script) and
    its footer names the advice's own command, so --jobs and --out change no byte."""
    from tests.report.test_html import assert_ids_unique_and_resolved, assert_self_contained

    page = (advised / "advise.html").read_text()
    assert_self_contained(page)
    assert_ids_unique_and_resolved(page)
    doc = json.loads((advised / "advise.json").read_text())
    assert "Maximised: <code>tenant.analytics.throughput</code>, 6.65 GB/s at point 21." in page
    assert doc["objective"] == pytest.approx(6.65e9, rel=1e-3)
    footer = page[page.index("<footer>") :]
    assert "pinlab advise settlement --variant settled --protect" in footer
    assert "--out" not in footer and "--jobs" not in footer


def test_the_recommendation_is_no_looser_than_the_scenario_policy(advised: Path) -> None:
    """The search starts from the variant's own policy and only tightens it."""
    doc = json.loads((advised / "advise.json").read_text())
    knobs = doc["knobs"]
    assert knobs["proposals.pins"] == "memlock-dmabuf-pins"
    assert knobs['cgroups."user.slice/user-1002.slice"."dmem.max".drm/{gpu0}/vram'] != "max"


def test_same_seed_same_files_whatever_the_jobs(
    advised: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run with the same ``--out advice`` (in another directory): the policy file's comment
    names the file by the path advise was given, so only that may differ between outs."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "advice"
    assert _advise(Path("advice"), "--jobs", "2") == 0
    for name in ("policy.toml", "points.csv", "pareto.svg", "advise.html", "advise.json"):
        assert (out / name).read_bytes() == (advised / name).read_bytes(), name


def test_no_point_meets_exit_1_with_the_closest(tmp_path: Path, capsys) -> None:
    out = tmp_path / "impossible"
    argv = ["advise", "settlement", "--protect", "tenant.hog.throughput >= 1TB/s"]
    code = main([*argv, "--budget", "3", *SHORT, "--out", str(out), "--jobs", "1"])
    assert code == 1
    text = capsys.readouterr().out
    assert "no evaluated policy meets every --protect; closest: point" in text
    assert "maximised:" not in text  # no --maximise here; with one, see below
    assert not (out / "policy.toml").exists()
    assert "NOT meet" in (out / "closest-policy.toml").read_text()
    assert json.loads((out / "advise.json").read_text())["met"] is False


def test_what_the_closest_point_reached_is_not_called_maximised(tmp_path: Path, capsys) -> None:
    """With no point meeting every --protect there is no maximum under the protections; the
    terminal says what the closest point reached, not "maximised"."""
    out = tmp_path / "impossible"
    argv = ["advise", "settlement", "--protect", "tenant.hog.throughput >= 1TB/s", *MAXIMISE]
    assert main([*argv, "--budget", "3", *SHORT, "--out", str(out), "--jobs", "1"]) == 1
    text = capsys.readouterr().out
    assert "  at the closest: tenant.analytics.throughput: " in text
    assert "maximised:" not in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protect", "tenant.compositor.denied.ENOMEM"], "expected one comparison"),
        (["--protect", "tenant.compositer.denials == 0"], "did you mean"),
        (["--protect", "tenant.trainer.throughput >= 5 apples"], "--protect"),
        (["--protect", "no-policy:tenant.trainer.denials == 0"], "advised variant settled"),
        (["--protect", "tenant.trainer.denials == 0", "--maximise", "tenant.x.speed"], "known"),
        (["--protect", "tenant.trainer.denials == 0", "--variant", "nope"], "--variant"),
        (["--protect", "tenant.trainer.denials == 0", "--budget", "0"], "--budget"),
        (
            ["--protect", "tenant.trainer.denials == 0", "--budget", str(2**63)],
            "--budget: expected a number from 1 to 100000 (the policies run are one sweep's points",
        ),
        ([], "--protect"),
        (
            ["--protect", "tenant.compositor.denied.ENOMEM === 0"],
            "--protect 'tenant.compositor.denied.ENOMEM === 0': expected a comparison operator "
            "(< <= == >= > !=), found '===' (did you mean ==?)",
        ),
        (["--protect", "tenant.trainer.denials => 0"], "found '=>' (did you mean >=?)"),
        (["--protect", "tenant.trainer.denials = 0"], "found '=' (did you mean ==?)"),
        # a bound given to --maximise is named as such, not as the '>= 0' it is bound with
        (
            [
                "--protect",
                "tenant.trainer.denials == 0",
                "--maximise",
                "tenant.trainer.throughput > 5",
            ],
            "--maximise 'tenant.trainer.throughput > 5': expected a metric (or fn(metric, ...)) "
            "to maximise, found a comparison ('>'): a bound to hold is a --protect",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(
    tmp_path: Path, capsys, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    assert main(["advise", "settlement", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pinlab: error:") and message in err
    assert len(err.splitlines()) == 1
    assert not out.exists()


def test_unknown_metric_names_the_known_ones(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    main(["advise", "settlement", "--protect", "tenant.trainer.speed > 0", "--out", str(out)])
    err = capsys.readouterr().err
    assert "tenant.trainer.throughput" in err and "pinlab metrics" in err


def test_run_policy_is_every_variants_policy(tmp_path: Path) -> None:
    """``pinlab run --policy``: the file is merged over the scenario's ``[policy]`` (its
    declarations stay, the file's values win) and replaces the variants' policy changes, so
    every variant runs under the same administrator's policy."""
    own = load_scenario("settlement")
    assert len({str(own.resolve(v).policy) for v in own.variants}) > 1  # the variants differ
    policy = tmp_path / "p.toml"
    policy.write_text('[users.hpc]\nuid = 1001\nmemlock = "3GiB"\n')
    cfg = load_scenario("settlement", policy=policy)
    docs = [cfg.resolve(v).policy for v in cfg.variants]
    assert all(d == docs[0] for d in docs)
    assert docs[0]["users"]["hpc"]["memlock"] == "3GiB"  # the file's value
    assert docs[0]["users"]["hpc"]["cgroup"] == "hpc.slice"  # the scenario's declaration
    with pytest.raises(Exception, match="expected a policy file"):
        load_scenario("settlement", policy=tmp_path / "missing.toml")


def _run_line(policy_file: Path) -> list[str]:
    """The ``pinlab run ...`` command the policy file's comment says runs it."""
    lines = [ln for ln in policy_file.read_text().splitlines() if ln.startswith("#")]
    (line,) = [ln for ln in lines if "pinlab run " in ln]
    return shlex.split(line.split("pinlab run ", 1)[1])


def test_the_written_run_command_works_from_where_advise_ran(advised: Path, tmp_path: Path) -> None:
    """docs/advise.md "What it writes": the comment's command names DIR/policy.toml (the
    docs' example ran advise with --out advice, so advice/policy.toml), not a bare
    policy.toml that exists only inside DIR."""
    argv = _run_line(advised / "policy.toml")
    assert argv[argv.index("--policy") + 1] == "advice/policy.toml"
    old = os.getcwd()
    os.chdir(advised.parent)
    try:
        out = str(tmp_path / "runs")
        assert main(["run", *argv, "--out", out, "--quiet", "--no-report"]) == 0
    finally:
        os.chdir(old)


def test_the_closest_policys_run_command_names_the_closest_file(tmp_path: Path) -> None:
    out = tmp_path / "impossible"
    argv = ["advise", "settlement", "--protect", "tenant.hog.throughput >= 1TB/s"]
    assert main([*argv, "--budget", "3", *SHORT, "--out", str(out), "--jobs", "1"]) == 1
    run = _run_line(out / "closest-policy.toml")
    assert run[run.index("--policy") + 1] == str(out / "closest-policy.toml")
