"""``--json`` on every command that lists things: each subcommand of ``pinlab`` is either a
listing, run here with ``--json`` and parsed, or named below as not a listing with the reason
-- a new subcommand fails the walk until it is one or the other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinlab.cli import build_parser, main
from pinlab.cli.common import subcommands
from pinlab.scenarios.config import BUILTIN
from tests.test_plugins import install, pinlab

ROOT = Path(__file__).resolve().parents[1]

LISTINGS: dict[tuple[str, ...], list[list[str]]] = {
    ("profiles",): [["profiles"]],
    ("bufinfo",): [["bufinfo", str(ROOT / "tests/kernel/data/bufinfo/p2p-classic-crlf.txt")]],
    ("matrix",): [["matrix"], ["matrix", "--profile", "5.16", "--no-move-notify"]],
    ("policy", "show"): [["policy", "show", str(ROOT / "examples/policy/desktop.toml")]],
    ("scenarios",): [["scenarios"]],
    ("scenarios", "show"): [["scenarios", "show", name] for name in BUILTIN],
    ("workloads",): [["workloads"], ["workloads", "allreduce"]],
    ("params",): [["params"], ["params", "odp.*"]],
    ("metrics",): [["metrics", "efa-gaudi"]],
    ("platforms",): [["platforms"], ["platforms", "cx-pair"]],
    ("plugins",): [["plugins"]],
    ("sweep",): [["sweep", str(ROOT / "examples/sweeps/pin-cap.toml"), "--dry-run"]],
    ("bench",): [["bench"]],
    ("validate",): [["validate", "--list"]],
}
"""Every listing command, with command lines that list (``--json`` is added)."""

NOT_LISTINGS: dict[tuple[str, ...], str] = {
    ("demo",): "a narrated walkthrough",
    ("policy",): "a group: its subcommands are walked",
    ("policy", "check"): "prints one verdict line",
    ("inspect",): "reads a host and writes files (its --json is the report of what it read)",
    ("doctor",): "a diagnosis (its --json is the findings)",
    ("run",): "runs scenarios (its --json is the robustness verdicts)",
    ("advise",): "a policy search",
    ("explore",): "a search for broken invariants (its --json is the findings)",
}
"""Subcommands that do not list, and why."""

COMMANDS = {path: child for path, child, _ in subcommands(build_parser())}


def test_every_subcommand_is_a_listing_or_says_why_not() -> None:
    assert not set(LISTINGS) & set(NOT_LISTINGS)
    unclassified = set(COMMANDS) - set(LISTINGS) - set(NOT_LISTINGS)
    assert not unclassified, f"say whether these list things: {sorted(unclassified)}"
    gone = (set(LISTINGS) | set(NOT_LISTINGS)) - set(COMMANDS)
    assert not gone, f"no such subcommands any more: {sorted(gone)}"


@pytest.mark.parametrize("path", list(LISTINGS), ids=" ".join)
def test_every_listing_takes_json(path: tuple[str, ...]) -> None:
    options = {opt for action in COMMANDS[path]._actions for opt in action.option_strings}
    assert "--json" in options


ARGVS = [argv for argvs in LISTINGS.values() for argv in argvs]


@pytest.mark.parametrize("argv", ARGVS, ids=lambda argv: " ".join(Path(a).name for a in argv))
def test_listing_json_is_one_json_document(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert isinstance(data, dict | list) and data, out[:200]


def test_json_of_a_listing_matches_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON is the table's content, not something else: same names in the same order."""
    assert main(["platforms", "--json"]) == 0
    names = [p["name"] for p in json.loads(capsys.readouterr().out)]
    from pinlab.platform import PRESETS

    assert names == list(PRESETS)
    assert main(["bench", "--json"]) == 0
    tools = [t["name"] for t in json.loads(capsys.readouterr().out)]
    assert "perftest" in tools and tools == sorted(tools)
    assert main(["platforms", "dl1", "--json"]) == 0
    dl1 = {p["name"]: p for p in json.loads(capsys.readouterr().out)["params"]}
    assert dl1["hbm"] == {"name": "hbm", "type": "size", "required": False, "default": "32GiB"}


def test_sweep_json_needs_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(ROOT / "examples/sweeps/pin-cap.toml"), "--json"]) == 2
    assert "--json: expected with --dry-run" in capsys.readouterr().err


def test_plugins_lists_an_installed_plugin(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(
        site,
        "pinlab-listed",
        {"pinlab.presets": {"tiny": "pinlab_listed:tiny"}},
        "from pinlab.platform import PRESETS\n\n\ndef tiny(*, vram='1GiB'):\n"
        "    'A tiny machine.'\n    return PRESETS['workstation'](vram=vram)\n",
    )
    done = pinlab(site, "plugins", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    presets = {g["group"]: g for g in json.loads(done.stdout)}["pinlab.presets"]
    assert presets["registry"] == "pinlab.platform.PRESETS"
    assert presets["plugins"] == [
        {
            "name": "tiny",
            "value": "pinlab_listed:tiny",
            "distribution": "pinlab-listed",
            "version": "0.1",
        }
    ]
    assert "tiny" not in presets["builtin"] and "dl1" in presets["builtin"]
    listed = pinlab(site, "platforms", "tiny", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["summary"] == "A tiny machine."


def test_a_broken_plugin_is_one_line_from_plugins(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(
        site,
        "pinlab-broken-listed",
        {"pinlab.workloads": {"nope": "pinlab_broken_listed:MISSING"}},
        "",
    )
    done = pinlab(site, "plugins", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "pinlab.workloads:nope" in done.stderr
