"""Shell completion of ``pinlab`` (argcomplete): the completions argcomplete's protocol gives
back for a command line, in-process and through the bash function ``register-python-argcomplete
pinlab`` defines (what the README tells a user to ``eval``)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import argcomplete
import pytest
from argcomplete import io as argcomplete_io

from pinlab.cli import build_parser
from pinlab.cli.common import subcommands
from pinlab.cli.completion import COMPLETERS, attach
from pinlab.scenarios.config import BUILTIN
from pinlab.scenarios.paths import parse_path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


class _Done(Exception):
    pass


class _Finder(argcomplete.CompletionFinder):
    """argcomplete's finder with its debug output kept in memory: the default opens fd 9,
    which under pytest is one of pytest's own descriptors (argcomplete documents the
    override for this case)."""

    def _init_debug_stream(self) -> None:
        argcomplete_io.debug_stream = io.StringIO()


def _exit(code: int = 0) -> None:
    raise _Done(code)


def complete(line: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What argcomplete answers the shell for ``line`` with the cursor at its end: the
    environment protocol of the shell function (``_ARGCOMPLETE``, ``COMP_LINE``,
    ``COMP_POINT``), the answer read from the stream fd 8 would be."""
    parser = build_parser()
    attach(parser)
    monkeypatch.setenv("_ARGCOMPLETE", "1")
    monkeypatch.setenv("_ARGCOMPLETE_IFS", "\n")
    monkeypatch.setenv("COMP_LINE", line)
    monkeypatch.setenv("COMP_POINT", str(len(line)))
    out = io.StringIO()
    with pytest.raises(_Done):
        _Finder()(parser, output_stream=out, exit_method=_exit)
    return [c.strip() for c in out.getvalue().split("\n") if c.strip()]


def names(line: str, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The completions of ``line`` that are not options."""
    return {c for c in complete(line, monkeypatch) if not c.startswith("-")}


def _variants(name: str) -> list[str]:
    import pinlab

    return list(pinlab.load_scenario(name).variants)


def _presets() -> list[str]:
    from pinlab.platform import PRESETS

    return list(PRESETS)


def _profiles() -> list[str]:
    from pinlab.kernel.profile import PRESETS

    return list(PRESETS)


def _workloads() -> list[str]:
    from pinlab.sim.workloads import WORKLOADS

    return list(WORKLOADS)


def _tools() -> list[str]:
    from pinlab.bench import tool_names

    return tool_names()


def _proposals() -> list[str]:
    from pinlab.policy.proposals import PROPOSALS

    return list(PROPOSALS)


def _importer_kinds() -> list[str]:
    from pinlab.explore import importer_kinds

    return list(importer_kinds())


def _exporter_kinds() -> list[str]:
    from pinlab.explore import exporter_kinds

    return list(exporter_kinds())


EXACT: list[tuple[str, Callable[[], list[str]]]] = [
    ("pinlab scenarios show ", lambda: list(BUILTIN)),
    ("pinlab run efa-gaudi --variant ", lambda: _variants("efa-gaudi")),
    ("pinlab run desktop-pin-hog --variant ", lambda: _variants("desktop-pin-hog")),
    ("pinlab run --profile ", _profiles),
    ("pinlab matrix --profile ", _profiles),
    ("pinlab demo --profile ", _profiles),
    ("pinlab workloads ", _workloads),
    ("pinlab platforms ", _presets),
    ("pinlab bench ", _tools),
    ("pinlab matrix --proposal ", _proposals),
    ("pinlab explore --importers ", _importer_kinds),
    ("pinlab explore --exporters ", _exporter_kinds),
    ("pinlab bench --platform dgx", lambda: [p for p in _presets() if p.startswith("dgx")]),
]
"""Command lines whose completions are exactly a registry's names."""


@pytest.mark.parametrize(("line", "expected"), EXACT, ids=[line for line, _ in EXACT])
def test_completes_the_names_a_registry_holds(
    line: str, expected: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    want = set(expected())
    assert want, line
    assert names(line, monkeypatch) == want


def test_run_completes_builtin_scenarios_and_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "mine.toml").write_text("", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    got = names("pinlab run ", monkeypatch)
    assert set(BUILTIN) <= got
    assert "mine.toml" in got and "notes.txt" not in got
    assert names("pinlab run e", monkeypatch) == {"efa-gaudi"}
    assert names("pinlab metrics odp", monkeypatch) == {"odp-vs-pin"}


def test_top_level_completes_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    top = {path[0] for path, _, _ in subcommands(build_parser()) if len(path) == 1}
    assert names("pinlab ", monkeypatch) == top
    assert names("pinlab sc", monkeypatch) == {"scenarios"}


def test_options_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"--json", "--help"} <= set(complete("pinlab platforms --", monkeypatch))
    assert set(complete("pinlab run --comp", monkeypatch)) == {"--compare-profile"}


def test_cost_keys_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    got = names("pinlab params odp.f", monkeypatch)
    assert "odp.fault" in got and all(k.startswith("odp.f") for k in got)


def test_comma_lists_complete_the_next_item(monkeypatch: pytest.MonkeyPatch) -> None:
    got = names("pinlab explore --exporters amdgpu,", monkeypatch)
    assert got == {f"amdgpu,{e}" for e in _exporter_kinds() if e != "amdgpu"}
    assert "amdgpu,vfio-pci" in got
    assert names("pinlab explore --profiles 5.16,7.", monkeypatch) == {"5.16,7.1"}


def test_bench_param_completes_the_presets_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    import inspect

    from pinlab.platform import PRESETS

    cx_pair = {f"{k}=" for k in inspect.signature(PRESETS["cx-pair"]).parameters}
    assert names("pinlab bench --param ", monkeypatch) == cx_pair  # the default --platform
    assert names("pinlab bench --param nic=", monkeypatch) == {"nic=cx5", "nic=cx6", "nic=cx7"}
    assert names("pinlab bench --platform dl1 --param nic=e", monkeypatch) == {"nic=efa"}
    assert names("pinlab bench --platform dl1 --param sockets=", monkeypatch) == {
        "sockets=1",
        "sockets=2",
    }
    assert names("pinlab bench --param nic_name=", monkeypatch) == set()  # a free string
    assert "odp.fault=" in names("pinlab bench --set odp.f", monkeypatch)


def test_validate_completes_table_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    got = names("pinlab validate gdrcopy-copylat-p100", monkeypatch)
    assert got == {"gdrcopy-copylat-p100-pcie-read", "gdrcopy-copylat-p100-pcie-write"}


def _value_at(doc: Any, path: list[str]) -> Any:
    for seg in path:
        if isinstance(doc, list):
            doc = next(e for e in doc if isinstance(e, dict) and e.get("name") == seg)
        else:
            doc = doc[seg]
    return doc


@pytest.mark.parametrize("scenario", BUILTIN)
def test_set_completions_are_keys_set_accepts(
    scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ``--set KEY=`` offered for a scenario's own values addresses a value: setting it
    to the value it has loads (a wrong path would be refused or would create a new key)."""
    import pinlab
    from pinlab.scenarios.config import builtin_path
    from pinlab.tomlfile import read_toml

    offered = [c.removesuffix("=") for c in names(f"pinlab run {scenario} --set ", monkeypatch)]
    assert "cost.odp.fault" in offered
    own = [key for key in offered if not key.startswith("cost.")]
    assert "scenario.duration" in own
    doc = read_toml(builtin_path(scenario), what="a scenario file", source=scenario)
    for key in own:
        value = _value_at(doc, parse_path(key))
        assert not isinstance(value, dict)
        pinlab.load_scenario(scenario, sets=[f"{key}={json.dumps(value)}"])


def test_every_completer_is_attached() -> None:
    """Each entry of COMPLETERS names an argument that exists (a renamed option or command
    would silently lose its completion otherwise)."""
    parser = build_parser()
    parsers = {" ".join(path): child for path, child, _ in subcommands(parser)}
    attach(parser)
    for command, dest in COMPLETERS:
        actions = [a for a in parsers[command]._actions if a.dest == dest]
        assert actions, f"pinlab {command}: no argument {dest!r}"
        assert all(getattr(a, "completer", None) is COMPLETERS[command, dest] for a in actions)


def test_the_entry_point_module_carries_the_marker() -> None:
    """argcomplete's global completion completes a console script whose module holds
    PYTHON_ARGCOMPLETE_OK in its first 1024 bytes."""
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "pinlab"]
    spec = find_spec(script.value.partition(":")[0])
    assert spec is not None and spec.origin is not None
    assert "PYTHON_ARGCOMPLETE_OK" in Path(spec.origin).read_text(encoding="utf-8")[:1024]


def test_a_command_does_not_load_argcomplete() -> None:
    """Outside completion, argcomplete is not even imported: a command pays nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_ARGCOMPLETE", "COMP_"))}
    code = (
        "import sys; from pinlab.cli import main; main(['bench', '--json']); "
        "sys.stderr.write(str('argcomplete' in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stderr == "False", done.stderr


def test_the_registered_bash_function_completes() -> None:
    """``eval "$(register-python-argcomplete pinlab)"``, then what bash does on TAB after
    ``pinlab run --profile 6.``: the function runs pinlab with fd 8 as its answer."""
    bash = shutil.which("bash")
    assert bash is not None
    assert (BIN / "pinlab").exists() and (BIN / "register-python-argcomplete").exists()
    script = r"""
eval "$(register-python-argcomplete pinlab)"
complete_line() {
    COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
    read -ra COMP_WORDS <<< "$COMP_LINE"
    [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMPREPLY=()
    _python_argcomplete pinlab "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s\n' "${COMPREPLY[@]}"
    echo ---
}
complete_line "pinlab run --profile 6."
complete_line "pinlab run "
complete_line "pinlab bench --param nic="
"""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [bash, "-c", script], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    profiles, run, nic, _ = done.stdout.split("---\n")
    assert {p.strip() for p in profiles.split()} == {p for p in _profiles() if p.startswith("6.")}
    assert set(BUILTIN) <= {w.strip() for w in run.split()}
    # bash breaks words at "=": the answer is what follows it
    assert nic.split() == ["cx5", "cx6", "cx7"]


def test_inspect_paste_completes_its_kinds_then_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """README: completion covers "the names they take": ``--paste KIND=FILE`` takes the
    pasted commands' names first (it offered the directory's files), then a file."""
    from pinlab.inspect.paste import PASTE_KINDS

    (tmp_path / "tree.txt").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert names("pinlab inspect --paste ", monkeypatch) == {f"{k}=" for k in PASTE_KINDS}
    assert names("pinlab inspect --paste lspci-", monkeypatch) == {"lspci-tv=", "lspci-vvv="}
    assert names("pinlab inspect --paste lspci-tv=tr", monkeypatch) == {"lspci-tv=tree.txt"}
    assert names("pinlab inspect --paste nope=tr", monkeypatch) == set()


@pytest.mark.parametrize("option", ["--device", "--nic", "--size"])
def test_doctor_free_values_offer_no_file_names(
    option: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``pinlab doctor --device`` takes an accelerator's name (gpu0, a PCI address), not a
    file: no file names from the current directory."""
    (tmp_path / "gpu-notes.txt").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert names(f"pinlab doctor {option} ", monkeypatch) == set()
    assert names(f"pinlab doctor {option} g", monkeypatch) == set()
