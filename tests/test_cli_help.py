"""``pinlab --help`` and every subcommand's: a one-line summary in its parent's list, a
description paragraph of its own, and argparse errors in one line with exit status 2."""

from __future__ import annotations

import argparse

import pytest

from pinlab.cli import build_parser, main
from pinlab.cli.common import subcommands

COMMANDS = [(path, child, summary) for path, child, summary in subcommands(build_parser())]
IDS = [" ".join(path) for path, _, _ in COMMANDS]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_walk_finds_the_whole_tree() -> None:
    """The walk below reaches nested subcommands too (it would pass vacuously otherwise)."""
    assert ("run",) in [path for path, _, _ in COMMANDS]
    assert ("policy", "show") in [path for path, _, _ in COMMANDS]
    assert ("scenarios", "show") in [path for path, _, _ in COMMANDS]
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize(("path", "parser", "summary"), COMMANDS, ids=IDS)
def test_every_subcommand_has_a_summary_and_a_description(
    path: tuple[str, ...], parser: argparse.ArgumentParser, summary: str | None
) -> None:
    name = " ".join(path)
    assert summary and summary.strip(), f"pinlab {name}: no help= (its line in the parent's list)"
    assert "\n" not in summary, f"pinlab {name}: the summary is more than one line"
    description = parser.description or ""
    assert len(description.split()) >= 8, f"pinlab {name}: no description= paragraph"
    assert _words(description) != _words(summary), f"pinlab {name}: description repeats help"


def test_top_level_help_lists_every_command_with_its_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = _words(capsys.readouterr().out)
    for path, _, summary in COMMANDS:
        if len(path) == 1:
            assert f"{path[0]} {_words(summary or '')[:30]}" in out, path[0]
    assert 'eval "$(register-python-argcomplete pinlab)"' in out


@pytest.mark.parametrize(("path", "parser", "summary"), COMMANDS, ids=IDS)
def test_each_help_prints_its_description(
    path: tuple[str, ...],
    parser: argparse.ArgumentParser,
    summary: str | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code == 0
    out = _words(capsys.readouterr().out)
    assert out.startswith(f"usage: pinlab {' '.join(path)}")
    assert _words(parser.description or "")[:60] in out


@pytest.mark.parametrize(
    "argv",
    [
        ["no-such-command"],
        ["platforms", "--no-such-flag"],
        ["scenarios", "show"],
        ["bench", "--nodes", "many"],
        ["sweep"],
    ],
    ids=" ".join,
)
def test_argparse_errors_are_one_line_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pinlab: error: "), captured.err
    assert "usage:" not in captured.err and "Traceback" not in captured.err
