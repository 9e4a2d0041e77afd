"""``pinlab run SCENARIO --platform host.toml --map NAME=HOST`` (``pinlab.inspect.fit``): every
built-in scenario runs on an inspected workstation-like host, or is refused in one line naming
what it needs and what the host has."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlab.cli import main
from pinlab.inspect.fit import parse_maps, read_aliases, resolve_maps
from pinlab.scenarios.config import BUILTIN
from tests.inspect.fakehost import workstation

REFUSED = {
    "apu-display": "it needs device apu0 (apu)",
    "cluster-128": "expected no node on a single-node platform",
    "efa-gaudi": "it changes the platform itself",
    "settlement": "it needs device acc0 (habanalabs)",
}


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("host")
    workstation(tmp / "root")
    out = tmp / "host.toml"
    assert main(["inspect", "--root", str(tmp / "root"), "--out", str(out)]) == 0
    return out


def test_aliases_in_the_platform_file(host: Path) -> None:
    aliases = read_aliases(host)
    assert aliases["card1"] == "gpu0" and aliases["0000:05:00.0"] == "mlx5_0"
    assert resolve_maps(parse_maps(["gpu0=card1", "mlx5_0=mlx5_0"]), host) == {
        "gpu0": "gpu0",
        "mlx5_0": "mlx5_0",
    }


@pytest.mark.parametrize("scenario", list(BUILTIN))
def test_every_builtin_runs_on_the_host_or_is_refused_in_one_line(
    scenario: str, host: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    argv = ["run", scenario, "--platform", str(host), "--map", "gpu0=card1"]
    argv += ["--map", "mlx5_0=mlx5_0", "--set", "scenario.duration=2s"]
    code = main([*argv, "--no-report", "--quiet", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    if scenario in REFUSED:
        assert code == 2
        assert err.count("\n") == 1 and "Traceback" not in err
        assert REFUSED[scenario] in err
        assert "the host has devices gpu0 (amdgpu); NICs mlx5_0 (mlx5)" in err
    else:
        assert code in (0, 1), err  # the claim may or may not hold on this host
        assert any((tmp_path / scenario).glob("*/summary.json"))


def test_map_errors_are_one_line(
    host: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (["--platform", str(host), "--map", "gpu0=card9"], "expected a name of platform"),
        (["--platform", str(host), "--map", "gpu0"], "expected SCENARIO_NAME=HOST_NAME"),
        (["--map", "gpu0=card1"], "--map: expected --platform"),
        # a scenario-side name the scenario's platform lacks would rename nothing
        (
            ["--platform", str(host), "--map", "foo=gpu0"],
            "--map foo=gpu0: expected a device, NIC or display name of odp-vs-pin's own "
            "platform (display0, gpu0, mlx5_0), found 'foo'",
        ),
    ]
    for extra, message in cases:
        assert main(["run", "odp-vs-pin", *extra, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
        assert not any(tmp_path.iterdir())


def test_map_renames_the_scenarios_references(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host whose GPU the planner calls gpu0 is still reachable by its card name; a scenario
    device name mapped onto it is renamed everywhere (tenants, policy placeholders)."""
    workstation(tmp_path / "root")
    out = tmp_path / "host.toml"
    assert main(["inspect", "--root", str(tmp_path / "root"), "--out", str(out)]) == 0
    text = out.read_text().replace('"gpu0"', '"card1"')  # the host's own name for its GPU
    renamed = tmp_path / "renamed.toml"
    renamed.write_text(text)
    capsys.readouterr()
    argv = ["run", "odp-vs-pin", "--platform", str(renamed), "--map", "gpu0=card1"]
    argv += ["--set", "scenario.duration=2s", "--no-report", "--quiet", "--out", str(tmp_path)]
    assert main(argv) in (0, 1), capsys.readouterr().err
    config = (tmp_path / "odp-vs-pin" / "pinned" / "config.toml").read_text()
    assert 'device = "card1"' in config
