"""Field cases (``tests/fixtures/field``): each host reconstructed from a public thread, run
through ``pinlab doctor``; the doctor must reach the diagnosis the maintainers gave there
(``case.toml`` cites the thread and states the diagnosis and what is checked)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pinlab.cli import main
from pinlab.inspect.doctor import diagnose
from pinlab.inspect.paste import snapshot_from_pastes
from pinlab.inspect.snapshot import Snapshot

FIELD = Path(__file__).resolve().parents[1] / "fixtures" / "field"
CASES = sorted(p.name for p in FIELD.iterdir() if (p / "case.toml").is_file())


def _case(name: str) -> tuple[dict[str, Any], Snapshot]:
    case = tomllib.loads((FIELD / name / "case.toml").read_text())
    pastes = {p.stem: p.read_text() for p in sorted((FIELD / name).glob("*.txt"))}
    return case, snapshot_from_pastes(pastes, source=name)


def test_every_case_cites_its_thread() -> None:
    assert len(CASES) == 7
    for name in CASES:
        case, _ = _case(name)
        assert case["thread"] and case["url"].startswith("https://"), name
        assert len(case["diagnosis"]) > 100, name


@pytest.mark.parametrize("name", CASES)
def test_doctor_reproduces_the_threads_diagnosis(name: str) -> None:
    case, snap = _case(name)
    args = case.get("doctor", {})
    diagnosis = diagnose(snap, **args)
    assert diagnosis.exit_code == 1
    pair = diagnosis.pairs[0]
    expect = case["expect"]
    assert sorted(f.key for f in pair.findings) == sorted(expect["findings"])
    text = " ".join(f"{f.text} {' '.join(f.items)}" for f in pair.findings)
    for part in expect.get("text", []):
        assert part in text, (part, text)
    assert pair.fixes, "a finding without a fix the model confirms"
    assert expect["first_fix"] in pair.fixes[0].text, [f.text for f in pair.fixes]
    for part in expect.get("fixes", []):
        assert any(part in f.text for f in pair.fixes), part
    if "path" in expect:
        assert pair.rates.path == expect["path"]
    if expect.get("p2p_slower_than_host"):
        assert min(pair.rates.p2p_read, pair.rates.p2p_write) < pair.rates.host_read
    if expect.get("p2p_read_zero"):
        assert pair.rates.p2p_read == 0 < pair.rates.p2p_write
    if expect.get("pinned_ok"):
        assert pair.registrations["pinned"].ok
    # every fix, applied, really resolves what it claims: re-run the doctor on the changed input
    assert all(f.resolves for f in pair.fixes)


def test_field_case_through_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pinlab inspect --paste ... --snapshot`` then ``pinlab doctor SNAPSHOT --json``."""
    case_dir = FIELD / "container-memlock-8mib"
    pastes = [f"--paste={p.stem}={p}" for p in sorted(case_dir.glob("*.txt"))]
    snap = tmp_path / "snap.toml"
    argv = ["inspect", *pastes, "--out", str(tmp_path / "p.toml"), "--snapshot", str(snap)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["doctor", str(snap), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["exit_code"] == 1
    assert out["pairs"][0]["host_mr"]["errno"] == "-ENOMEM"
    assert main(["doctor", str(snap)]) == 1
    text = capsys.readouterr().out
    assert "fix 1: raise RLIMIT_MEMLOCK" in text and "verdict: findings" in text
