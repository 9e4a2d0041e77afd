"""Structural mutants of a valid file of each kind keep the rule of
``test_malformed_inputs.py``: a run that is accepted writes only below ``--out``; a refusal is
exit status 2, one line naming the file (or the flag) that holds the bad value, no traceback,
nothing written.

A fixed list, not a random one: each key of the file down to ``DEPTH`` levels is deleted,
and given a string and an array where it held something else (a policy's ``cgroups = "x"``
must be named, not read as a table deep inside). The files are small and quick to run
(host-smoke, one second of simulated time) so that the few hundred mutants take seconds.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from pinlab.cli import main
from pinlab.platform.presets import dump_platform, resolve_platform

ROOT = Path(__file__).parents[1]
HOST_SMOKE = (ROOT / "examples/scenarios/host-smoke.toml").read_text(encoding="utf-8")
RUN = ["--out", "o", "--no-report", "--quiet"]
DEPTH = 3


@dataclass(frozen=True)
class Kind:
    """A file kind: a valid file (``name`` in the working directory), the command that reads
    it and the other files it needs."""

    name: str
    text: str
    argv: tuple[str, ...]
    out: str | None = "o"
    others: tuple[tuple[str, str], ...] = (("h.toml", HOST_SMOKE),)


KINDS = {
    "scenario": Kind("s.toml", HOST_SMOKE, ("run", "s.toml", *RUN)),
    "policy": Kind(
        "p.toml",
        (ROOT / "examples/policy/cluster.toml").read_text(encoding="utf-8"),
        ("run", "h.toml", "--policy", "p.toml", *RUN),
    ),
    "platform": Kind(
        "p.toml",
        dump_platform(resolve_platform("apu-laptop")),
        ("run", "h.toml", "--platform", "p.toml", *RUN),
    ),
    "validation table": Kind(
        "d/t.toml",
        (ROOT / "src/pinlab/validate/tables/gdrcopy-copylat-p100-pcie-write.toml").read_text(
            encoding="utf-8"
        ),
        ("validate", "--dir", "d", "--out", "o"),
        others=(),
    ),
    "sweep": Kind(
        "w.toml",
        (ROOT / "examples/sweeps/pin-cap.toml").read_text(encoding="utf-8"),
        ("sweep", "w.toml", "--dry-run"),
        out=None,
    ),
}


def _paths(node: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    if len(prefix) >= DEPTH:
        return
    items = node.items() if isinstance(node, dict) else enumerate(node[:2])
    for key, value in items:
        yield (*prefix, key)
        if isinstance(value, dict | list):
            yield from _paths(value, (*prefix, key))


def _mutants() -> Iterator[tuple[str, str, str]]:
    """(kind, mutant's id, its text) for every kind."""
    for kind, spec in KINDS.items():
        doc = tomllib.loads(spec.text)
        for path in _paths(doc):
            for op in ("delete", "string", "array"):
                mutant = copy.deepcopy(doc)
                parent = mutant
                for part in path[:-1]:
                    parent = parent[part]
                old = parent[path[-1]]
                if op == "delete":
                    if isinstance(parent, list):
                        continue
                    del parent[path[-1]]
                elif op == "string" and not isinstance(old, str):
                    parent[path[-1]] = "x"
                elif op == "array" and not isinstance(old, list):
                    parent[path[-1]] = [1]
                else:
                    continue
                where = ".".join(str(p) for p in path)
                yield kind, f"{kind}:{where}:{op}", tomli_w.dumps(mutant)


MUTANTS = {ident: (kind, text) for kind, ident, text in _mutants()}


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("ident", list(MUTANTS))
def test_a_mutant_is_run_or_refused_in_one_line(
    ident: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kind, text = MUTANTS[ident]
    spec = KINDS[kind]
    monkeypatch.chdir(tmp_path)
    for name, other in (*spec.others, (spec.name, text)):
        Path(name).parent.mkdir(exist_ok=True)
        Path(name).write_text(other, encoding="utf-8")
    before = _tree(tmp_path)
    try:
        status = main(list(spec.argv))
    except SystemExit as e:
        status = int(e.code or 0)
    captured = capsys.readouterr()
    made = _tree(tmp_path) - before
    assert "Traceback" not in captured.err + captured.out
    if status == 2:
        assert captured.err.count("\n") == 1, captured.err
        assert captured.err.startswith("pinlab: error: "), captured.err
        assert spec.name in captured.err or "pinlab: error: --" in captured.err, captured.err
        assert not made, made
    else:
        assert status in (0, 1), (status, captured.err)
        assert all(p == spec.out or p.startswith(f"{spec.out}{os.sep}") for p in made), made
