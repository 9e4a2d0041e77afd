"""Which input an error is blamed on (:mod:`pinlab.scenarios.blame`): the ``--set`` or the
variant whose value stands at the field, else one that changed another field the check
compared, else one that set the key defining the field's table; the file otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlab.errors import ConfigError
from pinlab.scenarios.blame import culprit, reaches
from pinlab.scenarios.config import load_scenario

from .test_runner import SMALL, write


@pytest.mark.parametrize(
    ("where", "key", "value", "expected"),
    [
        ("faults.0.target", "faults.0.target", "x", True),
        ("tenants.kv.params", "tenants.kv.params.block", "1GiB", True),  # a key inside it
        ("faults.0.target", "faults", [{"target": "x"}], True),  # an array replaces all
        ("tenants.kv.params.block", "tenants.kv", {"params": {"block": "1GiB"}}, True),
        ("tenants.kv.params.block", "tenants.kv", {"start": "1s"}, False),  # merged around it
        ("tenants.kv.start", "tenants.kv", 3, True),  # a value replaces the table
        ("policy.cgroups.user.slice/a.dmem.max", "policy", {"cgroups": {"user.slice/a": {}}}, False),  # noqa: E501
        ("policy.cgroups.user.slice/a", "policy", {"cgroups": {"user.slice/a": {}}}, True),
        ("scenario.duration", "scenario.sample_interval", "1s", False),
    ],
)  # fmt: skip
def test_a_change_reaches_the_fields_its_value_sets(
    where: str, key: str, value: object, expected: bool
) -> None:
    assert reaches(where, key, value) is expected


def test_the_last_change_at_the_field_then_of_a_compared_field_then_of_its_defining_key() -> None:
    at = ("faults.target", "faults.0.target")
    kind = ({"faults.0.kind"}, "hot-unplug")
    target = ({"faults.0.target"}, "x")
    whole = ({"faults"}, [{"target": "y", "kind": "kill"}])
    assert culprit(at, (), [whole, target, kind]) == 1  # the value that stands there
    assert culprit(at, (), [target, whole, kind]) == 1  # the array replaced it
    assert culprit(at, (), [kind]) == 0  # only the key that decides what it may hold
    assert culprit(at, (), [({"faults.0"}, {"at": "2s"}), target]) == 1
    assert culprit(at, (), [target, ({"faults.0"}, {"at": "2s"})]) == 0  # merged: not it
    # a defining key inside a table value
    params = ("platform.params.resizable_bar", "platform.params.resizable_bar")
    assert culprit(params, (), [({"platform"}, {"preset": "dl1"})]) == 0
    assert culprit(params, (), [({"platform"}, {"devices": {}})]) is None
    duration = ({"scenario.duration"}, "1000h")
    interval = ("scenario.sample_interval", "scenario.sample_interval")
    assert culprit(interval, ("scenario.duration",), [duration]) == 0
    assert culprit(interval, (), [duration]) is None
    assert culprit(interval, ("scenario.duration",), [({"scenario.seed"}, 1)]) is None


def test_a_sample_interval_too_fine_for_a_duration_a_set_lengthened_is_the_sets(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, SMALL.replace("seed = 7", 'seed = 7\nsample_interval = "1ms"'))
    message = (
        r"^--set duration=100000h: scenario\.sample_interval: expected at most 1000000 samples "
        r'per series \(duration / sample_interval\), found "100000h" / "1ms" = 3\.6e\+11$'
    )
    with pytest.raises(ConfigError, match=message):
        load_scenario(path, sets=["duration=100000h"])
    with pytest.raises(
        ConfigError, match=r'^--set scenario\.sample_interval="1us": .*"2s" / "1us"'
    ):
        load_scenario(path, sets=["scenario.seed=3", 'scenario.sample_interval="1us"'])
    # both times the file's: the file's error, as written
    path = write(
        tmp_path,
        SMALL.replace('"2s"', '"100000h"').replace("seed = 7", 'seed = 7\nsample_interval = "1ms"'),
    )
    with pytest.raises(
        ConfigError, match=rf'^{tmp_path}/s\.toml: scenario\.sample_interval: .*"100000h" / "1ms"'
    ):
        load_scenario(path, sets=["scenario.seed=3"])


def test_a_variant_that_lengthened_the_duration_is_blamed(tmp_path: Path) -> None:
    text = SMALL.replace("seed = 7", 'seed = 7\nsample_interval = "1ms"')
    path = write(tmp_path, text + '"scenario.duration" = "100000h"\n')
    with pytest.raises(
        ConfigError,
        match=r'^.*s\.toml: variants\.b: scenario\.sample_interval: .*found "100000h" / "1ms"',
    ):
        load_scenario(path)


def test_work_that_can_never_finish_names_the_set_and_the_times_as_written(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        SMALL.replace('workload = "kv-transfer"', 'workload = "kv-transfer"\nstart = "1.5s"'),
    )
    with pytest.raises(
        ConfigError,
        match=(
            r"^--set scenario\.duration=100000h: tenants\.kv\.params: expected at most 1e\+07 "
            r"workload iterations in a run, found 3\.6e\+10 "
            r'\(kv-transfer from "1\.5s" to "100000h"\)$'
        ),
    ):
        load_scenario(path, sets=["scenario.duration=100000h"])
    # from its start the file's tenant fits; a --set that starts it earlier does not
    path = write(
        tmp_path,
        SMALL.replace('"2s"', '"100001s"').replace(
            'workload = "kv-transfer"', 'workload = "kv-transfer"\nstart = "1.5s"'
        ),
    )
    load_scenario(path)
    with pytest.raises(
        ConfigError,
        match=r'^--set tenants\.kv\.start="0s": tenants\.kv\.params: .*, found 1e\+07 '
        r'\(kv-transfer over "100001s"\)$',
    ):
        load_scenario(path, sets=['tenants.kv.start="0s"'])


@pytest.mark.parametrize(
    ("sets", "blamed"),
    [
        # the later --set's value is the one at the field
        (['faults=[{at="1s",kind="kill",target="nosuch"}]', "faults.0.target=nosuch2"], 1),
        # a table merged around the field leaves it as the earlier --set wrote it
        (['faults=[{at="1s",kind="kill",target="nosuch"}]', 'faults.0={at="2s"}'], 0),
        # the --set that wrote the target, not the later one that chose what it must name
        (['faults=[{at="1s",kind="kill",target="nosuch"}]', "faults.0.kind=hot-unplug"], 0),
        (['tenants.kv={start="1s"}', 'tenants.kv.params.block="0B"'], 1),
        # the workload a table set decides what the file's params may hold
        (['tenants.kv.start="1s"', 'tenants.kv={workload="app"}'], 1),
    ],
)
def test_of_sets_that_reach_a_field_the_last_is_blamed(
    tmp_path: Path, sets: list[str], blamed: int
) -> None:
    with pytest.raises(ConfigError) as info:
        load_scenario(write(tmp_path, SMALL), sets=sets)
    assert info.value.source == f"--set {sets[blamed]}"


def test_a_kill_of_a_tenant_a_set_renamed_is_the_sets(tmp_path: Path) -> None:
    text = SMALL.replace(
        "[variants.a]", '[[faults]]\nat = "1s"\nkind = "kill"\ntarget = "kv"\n\n[variants.a]'
    )
    load_scenario(write(tmp_path, text))
    with pytest.raises(
        ConfigError,
        match=r'^--set tenants\.kv\.name="kv2": faults\[0\]\.target: expected a tenant \(kv2\)',
    ):
        load_scenario(write(tmp_path, text), sets=['tenants.kv.name="kv2"'])
