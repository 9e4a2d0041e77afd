"""``pinlab inspect``: the summary, the platform file, ``--json``, and one-line user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinlab.cli import main
from pinlab.platform import PlatformSpec, build
from pinlab.platform.presets import load_platform
from tests.inspect.fakehost import bare_host, workstation


def test_inspect_workstation_summary_and_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    workstation(root)
    out = tmp_path / "ws.toml"
    assert main(["inspect", "--root", str(root), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for title in ("RLIMIT_MEMLOCK", "capabilities", "cgroup v2", "dmem controller", "PCI tree"):
        assert title in text
    assert "CAP_IPC_LOCK no" in text
    assert "dmem.capacity drm/0000:03:00.0/vram 24 GiB" in text
    assert "gpu0 = 0000:03:00.0" in text and "mlx5_0 = 0000:05:00.0" in text
    assert "check: ok" in text
    spec = load_platform(out)
    assert isinstance(spec, PlatformSpec)
    assert [d.driver for d in spec.devices] == ["amdgpu"]
    build(spec, "6.16")
    header = out.read_text().splitlines()[0]
    assert header.startswith("# pinlab platform file written by `pinlab inspect` from box")


def test_inspect_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    bare_host(root)
    out = tmp_path / "bare.toml"
    assert main(["inspect", "--root", str(root), "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dmem"]["status"] == "missing"
    assert data["bufinfo"]["status"] == "missing"
    assert data["cgroup"]["mode"] == "hybrid"
    assert data["capabilities"]["cap_ipc_lock"] is True
    assert data["pci"]["functions"][0]["vendor"] == "0x8086"
    assert data["platform"]["devices"] == 0 and data["platform"]["check"]["ok"] is True
    assert load_platform(out) is not None


def test_inspect_empty_root_never_crashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.toml"
    (tmp_path / "root").mkdir()
    assert main(["inspect", "--root", str(tmp_path / "root"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "missing" in text and "no PCI tree was read" in text
    spec = load_platform(out)
    assert isinstance(spec, PlatformSpec)
    build(spec, "6.16")


@pytest.mark.parametrize("bad", ["no-such-dir/p.toml", "afile/p.toml", "."])
def test_inspect_unwritable_out_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    """Tests run as root, where permission bits do not stop writes: a missing directory, a
    file where a directory should be, and a directory as the target stand in."""
    (tmp_path / "afile").write_text("x")
    root = tmp_path / "root"
    bare_host(root)
    out = tmp_path / bad
    assert main(["inspect", "--root", str(root), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinlab: error: --out ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_inspect_missing_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--root", str(tmp_path / "nope")]) == 2
    assert "--root" in capsys.readouterr().err


def test_inspect_this_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Done-when: ``pinlab inspect`` runs here and its file loads and builds (what
    ``pinlab run --platform`` does)."""
    out = tmp_path / "pinlab-host.toml"
    assert main(["inspect", "--out", str(out)]) == 0
    assert "check: ok" in capsys.readouterr().out
    spec = load_platform(out)
    assert isinstance(spec, PlatformSpec)
    build(spec, "6.16")


def test_the_printed_command_runs_a_scenario_on_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pinlab run --platform FILE`` alone runs the built-in suite on its own platforms (and
    is refused on a host's): the summary and the file's header name the scenario to give."""
    root = tmp_path / "root"
    workstation(root)
    out = tmp_path / "ws.toml"
    assert main(["inspect", "--root", str(root), "--out", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())  # rich wraps the long line
    assert f"use it: pinlab run SCENARIO --platform {out} (SCENARIO: a scenario file" in text
    assert "# Use it with: pinlab run SCENARIO --platform <this file>" in out.read_text()
    smoke = Path(__file__).parents[2] / "examples" / "scenarios" / "host-smoke.toml"
    args = ["run", str(smoke), "--platform", str(out), "--out", str(tmp_path / "run")]
    assert main([*args, "--no-report", "--quiet"]) == 0


def test_a_paste_summary_names_the_profile_the_file_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 6.8 host's file suggests profile 5.16: the check builds under it and says so."""
    uname = tmp_path / "uname.txt"
    uname.write_text("6.8.0-52-generic\n")
    out = tmp_path / "p.toml"
    assert main(["inspect", "--paste", f"uname-r={uname}", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert 'kernel = "5.16"' in out.read_text()
    assert "loads and builds under kernel profile 5.16:" in text and "6.16" not in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--paste", "uname-r=U"], "--paste uname-r=U: expected each kind once, found uname-r"),
        (["--root", "R"], "--root R: expected --root or --paste"),
    ],
)
def test_paste_refuses_a_second_paste_of_a_kind_and_a_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    uname = tmp_path / "uname.txt"
    uname.write_text("6.16.3\n")
    (tmp_path / "root").mkdir()
    extra = [a.replace("U", str(uname)).replace("R", str(tmp_path / "root")) for a in extra]
    message = message.replace("U", str(uname)).replace("R", str(tmp_path / "root"))
    out = tmp_path / "p.toml"
    args = ["inspect", "--paste", f"uname-r={uname}", *extra, "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pinlab: error: {message}") and err.count("\n") == 1
    assert not out.exists()
