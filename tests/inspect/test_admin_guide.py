"""``docs/admin-guide.md`` is executed: every ``$ pinlab ...`` line of its console blocks runs on
a fake host (before or after the fix, as the block's ``<!-- host: ... -->`` marker says) with
the exit status the guide states, and its systemd and Kubernetes snippets set what the doctor
asks for -- the "after" host has exactly the RLIMIT_MEMLOCK the systemd drop-in sets."""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
from pathlib import Path

import pytest

from pinlab.cli import main
from tests.inspect.fakehost import workstation

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "admin-guide.md"
FIELD = Path(__file__).resolve().parents[1] / "fixtures" / "field" / "container-memlock-8mib"
CONFIG = "CONFIG_DMABUF_MOVE_NOTIFY=y\nCONFIG_PCI_P2PDMA=y\nCONFIG_CGROUP_DMEM=y\n"
_BLOCK = re.compile(r"(?:<!-- host: (\w+) -->\n)?```(\w+)\n(.*?)```", re.S)


def _blocks(kind: str) -> list[tuple[str, str]]:
    text = GUIDE.read_text()
    return [(m[1] or "before", m[3]) for m in _BLOCK.finditer(text) if m[2] == kind]


def _memlock_of_dropin() -> str:
    (_, ini), *_ = _blocks("ini")
    parser = configparser.ConfigParser()
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(ini)
    value = parser["Service"]["LimitMEMLOCK"]
    return "unlimited" if value == "infinity" else value


def _host(root: Path, state: str) -> Path:
    h = workstation(root)
    memlock = "8388608" if state == "before" else _memlock_of_dropin()
    h.proc(memlock=(memlock, memlock))
    h.write("/boot/config-6.16.3-arch1-1", CONFIG)
    return root


def _commands() -> list[tuple[str, list[str], set[int]]]:
    out = []
    for state, body in _blocks("console"):
        lines = body.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ pinlab "):
                continue
            status = re.match(r"# exit status (.*)", lines[i + 1])
            assert status, f"no '# exit status' after {line!r}"
            codes = {int(c) for c in re.findall(r"\d", status[1])}
            out.append((state, shlex.split(line[2:])[1:], codes))
    return out


def test_the_guide_has_commands_for_each_step() -> None:
    verbs = [argv[0] for _, argv, _ in _commands()]
    assert verbs.count("inspect") >= 3 and verbs.count("doctor") >= 2 and "run" in verbs


def test_every_command_of_the_guide_runs_as_stated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    roots = {s: _host(tmp_path / f"root-{s}", s) for s in ("before", "after")}
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(FIELD / "lspci-tv.txt", work / "lspci-tv.txt")
    shutil.copy(FIELD / "ulimit-l.txt", work / "ulimit.txt")
    shutil.copy(FIELD / "uname-r.txt", work / "uname.txt")
    monkeypatch.chdir(work)
    for state, argv, codes in _commands():
        if argv[0] == "inspect" and "--paste" not in " ".join(argv):
            argv = [*argv, "--root", str(roots[state])]
        code = main(argv)
        out = capsys.readouterr()
        assert code in codes, (argv, code, out.err)
        assert "Traceback" not in out.err
        if argv[0] == "doctor" and state == "before":
            assert "fix 1: raise RLIMIT_MEMLOCK" in out.out and "LimitMEMLOCK=infinity" in out.out
            assert "IPC_LOCK" in out.out
        if argv[0] == "run" and code == 2:
            assert out.err.count("\n") == 1 and "it needs" in out.err


def test_the_kubernetes_snippet_grants_what_the_doctor_names() -> None:
    yaml = pytest.importorskip("yaml")
    (_, body), *_ = _blocks("yaml")
    pod = yaml.safe_load(body)
    caps = pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"]
    assert caps == ["IPC_LOCK"]
    assert _memlock_of_dropin() == "unlimited"
