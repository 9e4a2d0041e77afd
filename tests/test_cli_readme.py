"""The README's first steps: the two ``make`` commands come first, then how to put ``pinlab``
on PATH and enable completion -- and those lines work as written (run here in bash)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pinlab import __version__
from pinlab.cli import EPILOG

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```sh\n(.*?)^```", README, re.M | re.S)
VENV = ROOT / ".venv"


def _line(start: str) -> str:
    """The README shell line starting with ``start``, its trailing comment removed."""
    for block in BLOCKS:
        for line in block.splitlines():
            if line.startswith(start):
                return line.partition("  #")[0].strip()
    raise AssertionError(f"README: no shell line starting {start!r}")


def _bash(script: str, home: Path) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash is not None
    env = {"HOME": str(home), "PATH": f"{home}/.local/bin:/usr/bin:/bin"}
    return subprocess.run(
        [bash, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_two_commands_come_first() -> None:
    assert BLOCKS[0].splitlines()[:2] == [
        "make demo   # creates .venv, installs pinlab, runs the six debate scenarios (pinlab run)",
        "make test   # same setup, then ruff, mypy, import-linter and pytest",
    ]
    assert README.index("```sh") < README.index("\n## ")


def test_the_readme_and_help_enable_completion_alike() -> None:
    line = _line("eval ")
    assert line == 'eval "$(register-python-argcomplete pinlab)"'
    assert line in EPILOG


needs_make_venv = pytest.mark.skipif(
    Path(sys.executable).parent != VENV / "bin",
    reason="the README's lines name the .venv `make demo` creates; this run uses another",
)


@needs_make_venv
def test_activate_puts_pinlab_on_path(tmp_path: Path) -> None:
    done = _bash(
        f"{_line('. .venv/bin/activate')} && command -v pinlab && pinlab --version", tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(VENV / "bin/pinlab"), f"pinlab {__version__}"]


@needs_make_venv
def test_the_link_into_local_bin_puts_pinlab_on_path(tmp_path: Path) -> None:
    (tmp_path / ".local/bin").mkdir(parents=True)
    done = _bash(f"{_line('ln -s ')} && pinlab --version", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"pinlab {__version__}"
    assert os.readlink(tmp_path / ".local/bin/pinlab") == str(VENV / "bin/pinlab")
