"""Bad arguments to the public API (``docs/api.md``) raise the one-line ``ConfigError`` that
names the argument, before any work -- never a ``ValueError``, ``TypeError`` or
``AttributeError`` from inside, never a value silently changed."""

from __future__ import annotations

from pathlib import Path

import pytest

import pinlab
from pinlab.errors import ConfigError

MINE = """
[scenario]
name = "mine"
duration = "100ms"

[claim]
statement = "A KV transfer moves data."

[[claim.expect]]
metric = "tenant.kv.throughput"
op = ">"
value = 0

[platform]
preset = "workstation"

[[tenants]]
name = "kv"
workload = "kv-transfer"
params = { buffer = "512MiB", block = "64MiB" }
"""

PROFILE = r"^profile: expected a kernel profile \(5\.16, .*\), found '9\.9'$"
SEED = r"^seed: expected an integer seed from 0 to 2\^63-1, found "


@pytest.fixture(scope="module")
def scenario() -> pinlab.Scenario:
    return pinlab.load_scenario("odp-vs-pin")


def test_an_unknown_profile_names_the_argument(scenario: pinlab.Scenario) -> None:
    with pytest.raises(ConfigError, match=PROFILE):
        pinlab.load_scenario("odp-vs-pin", profile="9.9")
    with pytest.raises(ConfigError, match=PROFILE):
        pinlab.run(scenario, profile="9.9")
    with pytest.raises(ConfigError, match=PROFILE):
        scenario.with_profile("9.9")
    with pytest.raises(ConfigError, match=PROFILE):
        pinlab.run_variant(scenario, "odp", profile="9.9")


@pytest.mark.parametrize("seed", [1.5, 1.0, True, -1, 2**63, "1"])
def test_a_seed_is_a_whole_number_in_range(scenario: pinlab.Scenario, seed: object) -> None:
    message = SEED + f"{seed!r}$".replace(".", r"\.").replace("*", r"\*")
    with pytest.raises(ConfigError, match=message):
        pinlab.load_scenario("odp-vs-pin", seed=seed)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=message):
        pinlab.run(scenario, seed=seed)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=message):
        scenario.with_seed(seed)  # type: ignore[arg-type]


def test_the_largest_seed_is_taken(scenario: pinlab.Scenario) -> None:
    assert scenario.with_seed(2**63 - 1).scenario.seed == 2**63 - 1
    assert scenario.with_seed(0).scenario.seed == 0


def test_sets_is_a_list_of_strings(scenario: pinlab.Scenario) -> None:
    bare = r"^sets: expected a list of key=value strings, found the string 'duration=1s'"
    with pytest.raises(ConfigError, match=bare):
        pinlab.load_scenario("odp-vs-pin", sets="duration=1s")
    with pytest.raises(ConfigError, match=bare):
        pinlab.run(scenario, sets="duration=1s")
    with pytest.raises(ConfigError, match=r"^sets\[1\]: expected a key=value string, found 42$"):
        pinlab.load_scenario("odp-vs-pin", sets=["duration=1s", 42])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=r"^with_set\[0\]: expected a key=value string"):
        scenario.with_set(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^sets: expected a list of key=value strings"):
        pinlab.load_scenario("odp-vs-pin", sets=42)  # type: ignore[arg-type]


def test_an_override_is_named_as_on_the_command_line(scenario: pinlab.Scenario) -> None:
    # docs/api.md: one message for a script and the shell, whichever way the override came in
    message = r'^--set duration=4x: scenario\.duration: expected a time like .*, found "4x"'
    with pytest.raises(ConfigError, match=message):
        pinlab.load_scenario("odp-vs-pin", sets=["duration=4x"])
    with pytest.raises(ConfigError, match=message):
        scenario.with_set("duration=4x")
    with pytest.raises(ConfigError, match=message):
        pinlab.run(scenario, sets=["duration=4x"])
    with pytest.raises(ConfigError, match=r"^--set duration: expected key=value, found no '='$"):
        scenario.with_set("duration")


def test_a_scenario_is_a_name_or_a_path(scenario: pinlab.Scenario) -> None:
    with pytest.raises(ConfigError, match=r"^name_or_path: expected a built-in scenario"):
        pinlab.load_scenario(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^scenario: expected a Scenario, a built-in"):
        pinlab.run(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^platform: expected a platform file's path"):
        pinlab.load_scenario("odp-vs-pin", platform=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^scenario: expected a Scenario"):
        pinlab.judge(None, [])  # type: ignore[arg-type]


def test_judge_needs_results_of_the_scenario(scenario: pinlab.Scenario) -> None:
    with pytest.raises(ConfigError, match=r"^results: expected a list of RunResult"):
        pinlab.judge(scenario, None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^results\[0\]: expected a RunResult, found 1$"):
        pinlab.judge(scenario, [1, 2])  # type: ignore[list-item]


def test_judge_over_no_run_is_refused_not_held(tmp_path: Path) -> None:
    # every expectation of MINE is on every variant: over no results it would hold vacuously
    path = tmp_path / "mine.toml"
    path.write_text(MINE, encoding="utf-8")
    mine = pinlab.load_scenario(path)
    with pytest.raises(ConfigError, match=r"^results: expected at least one RunResult of mine"):
        pinlab.judge(mine, [])
    result = pinlab.run_variant(mine, "base")
    assert pinlab.judge(mine, [result]).held
    with pytest.raises(ConfigError, match=r"^results\[1\]: expected one result per variant"):
        pinlab.judge(mine, [result, result])
    other = pinlab.load_scenario("odp-vs-pin")
    with pytest.raises(ConfigError, match=r"^results\[0\]: expected a result of a variant of"):
        pinlab.judge(other, [result])


def test_run_variant_takes_a_name_or_a_path_as_run_does(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(MINE, encoding="utf-8")
    by_path = pinlab.run_variant(path, "base")
    by_scenario = pinlab.run_variant(pinlab.load_scenario(path), "base")
    assert by_path.metrics == by_scenario.metrics and by_path.variant == "base"


def test_variants_are_named_once_each_and_exist(scenario: pinlab.Scenario) -> None:
    known = r"expected a variant of odp-vs-pin \(pinned, odp, no-odp-nic\)"
    with pytest.raises(ConfigError, match=rf"^variant: {known}, found 'bogus'$"):
        pinlab.run_variant(scenario, "bogus")
    with pytest.raises(ConfigError, match=rf"^variant: {known}, found 3$"):
        pinlab.run_variant(scenario, 3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=rf"^variants\[1\]: {known}, found 'bogus'$"):
        pinlab.run(scenario, ["odp", "bogus"])
    with pytest.raises(ConfigError, match=r"^variants\[1\]: expected each variant once"):
        pinlab.run(scenario, ["odp", "odp"])
    for bad in (42, []):
        with pytest.raises(ConfigError, match=r"^variants: expected a variant name or a list"):
            pinlab.run(scenario, bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^scenario: expected a Scenario"):
        pinlab.run_variant(None, "odp")  # type: ignore[arg-type]


def test_write_checks_out_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(MINE, encoding="utf-8")
    run = pinlab.run(path)
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"^out: expected a directory, found an empty path$"):
        run.write("")
    with pytest.raises(ConfigError, match=r"^out \S*f\.txt/o: expected a directory, found a file"):
        run.write(tmp_path / "f.txt" / "o")
    with pytest.raises(ConfigError, match=r"^out: expected a directory's path, found 3$"):
        run.write(3)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt", "mine.toml"]
    (written,) = run.write(tmp_path / "o")
    assert (written / "summary.json").is_file()


def test_lookups_take_names_and_say_what_is_known(scenario: pinlab.Scenario) -> None:
    """``RunResult.metric``/``tenant_state``, ``Run[...]`` and the catalog's ``lookup``/
    ``matching`` given a non-string name the argument; an unknown metric's ``KeyError`` stays
    one short line (a cluster has thousands of metrics) with the closest names."""
    run = pinlab.run(scenario, ["odp"])
    result = run["odp"]
    catalog = scenario.catalog("odp")
    for call, argument in (
        (result.metric, "name"),
        (result.tenant_state, "tenant"),
        (run.__getitem__, "variant"),
        (catalog.lookup, "name"),
        (catalog.matching, "pattern"),
    ):
        for bad in (5, None, b"tenant.rdma.bytes"):
            with pytest.raises(ConfigError, match=rf"^{argument}: expected .* \(a string\), found"):
                call(bad)
    with pytest.raises(KeyError) as missing:
        result.metric("tenant.rdma.byte")
    message = missing.value.args[0]
    assert message.startswith("no metric 'tenant.rdma.byte' in odp-vs-pin/odp (")
    assert "did you mean tenant.rdma.bytes" in message
    assert len(message) < 200
    assert result.metric("tenant.rdma.bytes") > 0
    assert result.tenant_state("rdma") is None


def test_the_none_lookups_are_the_documented_ones(scenario: pinlab.Scenario) -> None:
    """docs/api.md: ``tenant_state`` is None for a tenant that ran normally and for a name that
    is no tenant of the run; ``catalog.lookup`` is None for a name the variant cannot report
    -- unlike ``metric``, whose ``KeyError`` names the closest metrics."""
    doc = " ".join((Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text().split())
    assert "for a name that is no tenant of the run" in doc
    assert "`catalog.lookup(name)` is `None` for a name the variant cannot report" in doc
    result = pinlab.run(scenario, ["odp"])["odp"]
    assert result.tenant_state("nobody") is None
    assert scenario.catalog("odp").lookup("nope.x") is None
    with pytest.raises(KeyError):
        result.metric("nope.x")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("place", ["/proc/pinlab-test", "/sys/pinlab-test"])
def test_write_where_the_system_refuses_is_a_config_error(tmp_path: Path, place: str) -> None:
    """``/proc`` and ``/sys`` pass ``access(2)`` for root but refuse ``mkdir`` (``ENOENT``,
    ``EPERM``): the promised ``ConfigError`` in the expected/found form, not an ``OSError``."""
    path = tmp_path / "mine.toml"
    path.write_text(MINE, encoding="utf-8")
    run = pinlab.run(path)
    with pytest.raises(ConfigError) as refused:
        run.write(place)
    assert str(refused.value).startswith(
        f"out {place}: expected a directory pinlab can write, found one the system refuses "
        "to write ("
    ), refused.value


def test_a_scenarios_own_lookups_name_their_argument(scenario: pinlab.Scenario) -> None:
    """``catalog(variant)`` and ``to_toml(variant)`` name the argument, not the scenario's
    file (a built-in was loaded by name); seeds, profiles and sets given as large objects are
    named by their type."""
    for call, message in (
        (lambda: scenario.catalog("zzz"), "variant: expected a variant of odp-vs-pin ("),
        (lambda: scenario.to_toml("zzz"), "variant: expected a variant of odp-vs-pin ("),
        (lambda: scenario.catalog(5), "variant: expected a variant of odp-vs-pin ("),
        (lambda: scenario.with_seed(list(range(5000))), "seed: expected an integer seed"),
        (lambda: scenario.with_profile(list(range(5000))), "profile: expected a kernel profile"),
        (lambda: scenario.with_set(*[list(range(5000))]), "with_set[0]: expected a key=value"),
    ):
        with pytest.raises(ConfigError) as bad:
            call()  # type: ignore[arg-type]
        text = str(bad.value)
        assert text.startswith(message) and len(text) < 250, text


def test_a_wrong_argument_is_named_by_its_type_not_dumped(tmp_path: Path) -> None:
    """One result where a list was expected (or any large object) is named by its type: the
    one-line error stays short instead of holding the object's repr (kilobytes)."""
    path = tmp_path / "mine.toml"
    path.write_text(MINE, encoding="utf-8")
    mine = pinlab.load_scenario(path)
    result = pinlab.run_variant(mine, "base")
    assert len(repr(result)) > 1000
    for call, message in (
        (lambda: pinlab.judge(mine, result), "results: expected a list of RunResult"),
        (lambda: pinlab.judge(result, [result]), "scenario: expected a Scenario"),
        (lambda: pinlab.judge(mine, [mine]), "results[0]: expected a RunResult"),
        (lambda: pinlab.load_scenario(result), "name_or_path: expected a built-in"),
        (lambda: pinlab.load_scenario(path, platform=result), "platform: expected"),
        (lambda: pinlab.run(result), "scenario: expected a Scenario, a built-in"),
        (lambda: pinlab.run(mine, result), "variants: expected a variant name"),
        (lambda: pinlab.run(mine, [result]), "variants[0]: expected a variant of mine"),
        (lambda: pinlab.run_variant(mine, result), "variant: expected a variant of mine"),
        (lambda: result.metric(result), "name: expected a metric's name"),
    ):
        with pytest.raises(ConfigError) as bad:
            call()  # type: ignore[arg-type]
        text = str(bad.value)
        assert text.startswith(message) and len(text) < 250, text
        assert text.endswith(("found a RunResult", "found a ScenarioConfig")), text
    with pytest.raises(ConfigError) as long_list:
        pinlab.judge(mine, list(range(5000)))  # type: ignore[arg-type]
    assert str(long_list.value) == "results[0]: expected a RunResult, found 0"
    with pytest.raises(ConfigError) as long_name:
        pinlab.run(mine, "v" * 300)
    assert len(str(long_name.value)) < 200 and str(long_name.value).endswith("vvv...")
