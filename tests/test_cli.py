"""The user-facing entry points: ``pinlab demo``, ``pinlab profiles``, ``pinlab bufinfo``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlab.cli import main


def test_demo_walkthrough_runs_clean(capsys: pytest.CaptureFixture[str]) -> None:
    """The walkthrough shows move_notify, the refused move (-EINVAL), the pinned -ENOMEM and
    bufinfo, and tears down to zero (K-36, K-37, K-61, K-62, K-67)."""
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "move_notify -> mlx5_0" in out
    assert "-EINVAL" in out
    assert "-ENOMEM" in out
    assert "Dma-buf Objects:" in out
    assert "Attached Devices:" in out
    assert "leaks none" in out
    # the game's buffer, in step 2's table, is gone from step 3's: the walkthrough says why
    step3 = out[out.index("3. a pinned importer") :]
    assert step3.index("the game exits") < step3.index("gpu0 buffers")


@pytest.mark.parametrize("profile", ["5.16", "6.12", "7.1"])
def test_demo_under_other_profiles(profile: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Under the caching presets amdgpu pins in GTT (K-49): the pinned import migrates."""
    assert main(["demo", "--profile", profile]) == 0
    out = capsys.readouterr().out
    if profile in ("5.16", "6.12"):
        assert "migrated to system memory" in out
    else:
        assert "P2P in place" in out


def test_profiles_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    for name in ("5.16", "6.12", "6.14", "6.16", "7.1"):
        assert name in out


def test_bufinfo_missing_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    assert main(["bufinfo", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "no such file" in err
    assert "Traceback" not in err


def test_bufinfo_malformed_file_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bufinfo"
    bad.write_text("\nDma-buf Objects:\nthis is not a header\n")
    assert main(["bufinfo", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "line" in err
    assert "Traceback" not in err


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "usage" in capsys.readouterr().out


def test_the_executable_freezes_the_heap_for_its_exit_after_the_command() -> None:
    """``pinlab`` (``console_main``) runs the command, then freezes the heap for the
    interpreter's exit: the child's exit status is the command's, and its collector holds
    the heap frozen once the command returned (``gcpolicy.freeze_for_exit``)."""
    import subprocess
    import sys

    code = (
        "import gc, sys; import pinlab.cli as cli; sys.argv = ['pinlab', 'profiles', '--json'];"
        "before = gc.get_freeze_count(); status = cli.console_main();"
        "print(before, gc.get_freeze_count() > 0, status, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.split() == ["0", "True", "0"]
    assert done.stdout.startswith(("[", "{"))  # the command's own output came first
