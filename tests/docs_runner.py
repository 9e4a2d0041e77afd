"""Run a Markdown document of ``docs/`` as a reader would, so that it cannot rot.

A document is read top to bottom; its fenced blocks run in one fresh working directory:

* a block preceded by ``<!-- file: NAME -->`` is written to ``NAME`` (a scenario, a sweep);
* a ``console`` block runs each line starting with ``$ `` in ``bash`` (``pinlab`` is the
  one under test); the command must exit 0, or with the status a trailing ``# exit status N``
  names. The lines that follow a command, up to the next one, are output it must print:
  each, with whitespace ignored, must appear in its stdout and stderr, the parts of a line
  split by ``...`` in that order (a line that is only ``...`` checks nothing); the lines
  after an ``ls`` with no ``...`` among them are the whole listing, every name it prints;
* a ``python`` block runs in one namespace shared by the document's blocks (its asserts
  check what it computed);
* a block preceded by ``<!-- not run -->`` is shown only.

``pip install DIR`` installs like a user's pip, into a directory of the working directory
(``--target``, without dependencies or build isolation: pinlab and setuptools are already
installed) that later commands get on ``PYTHONPATH`` -- so a plugin's entry points are found
through its installed ``*.dist-info``, as on a user's machine. ``examples/`` of the repository
is copied into the working directory first, so a document's ``./examples/plugin`` is the
repository's, and building it leaves nothing behind in the checkout.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

_FENCE = re.compile(r"^```(\w*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*(file:\s*(?P<file>\S+)|(?P<skip>not run))\s*-->\s*$")
_EXIT = re.compile(r"\s+#\s*exit status (\d+)\s*$")


@dataclass
class Block:
    lang: str
    text: str
    line: int
    file: str | None = None
    skip: bool = False


@dataclass
class Command:
    line: int
    command: str
    status: int
    expected: list[str] = field(default_factory=list)
    elided: bool = False
    """A line ``...`` followed the command: what it shows is not all it prints."""


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` with the directive (if any) on the line before each."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        block = Block(m.group(1), "\n".join(body) + "\n", start + 1)
        directive = _DIRECTIVE.match(lines[start - 1]) if start else None
        if directive:
            block.file = directive.group("file")
            block.skip = bool(directive.group("skip"))
        out.append(block)
        i += 1
    return out


def commands(block: Block) -> list[Command]:
    out: list[Command] = []
    for offset, line in enumerate(block.text.splitlines()):
        if line.startswith("$ "):
            text = line[2:]
            status = 0
            m = _EXIT.search(text)
            if m:
                status = int(m.group(1))
                text = text[: m.start()]
            out.append(Command(block.line + 1 + offset, text, status))
        elif out and line.strip() == "...":
            out[-1].elided = True
        elif out and line.strip():
            out[-1].expected.append(line)
    return out


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


class DocRunner:
    """Runs one document in ``workdir``."""

    def __init__(self, doc: Path, workdir: Path) -> None:
        self.doc = doc.resolve()
        self.workdir = workdir
        self.site = workdir / ".site"
        self.namespace: dict[str, object] = {"__name__": "__doc__"}
        self.ran = {"file": 0, "console": 0, "python": 0}

    def where(self, line: int) -> str:
        return f"{self.doc.relative_to(REPO)}:{line}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["COLUMNS"] = "200"
        env.pop("PYTHONPATH", None)
        if self.site.is_dir():
            env["PYTHONPATH"] = str(self.site)
        return env

    def run(self) -> dict[str, int]:
        examples = REPO / "examples"
        if examples.is_dir():
            shutil.copytree(examples, self.workdir / "examples", dirs_exist_ok=True)
        for block in blocks(self.doc):
            if block.skip:
                continue
            if block.file is not None:
                target = self.workdir / block.file
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text, encoding="utf-8")
                self.ran["file"] += 1
            elif block.lang == "console":
                for command in commands(block):
                    self.shell(command)
                self.ran["console"] += 1
            elif block.lang == "python":
                self.python(block)
                self.ran["python"] += 1
        return self.ran

    def shell(self, command: Command) -> None:
        text = command.command
        if text.startswith("pip install "):
            text = (
                f"{sys.executable} -m pip install --quiet --no-deps --no-build-isolation "
                f"--disable-pip-version-check --target {self.site} {text[len('pip install ') :]}"
            )
        done = subprocess.run(
            ["bash", "-c", text],
            cwd=self.workdir,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        output = done.stdout + done.stderr
        where = self.where(command.line)
        assert done.returncode == command.status, (
            f"{where}: `{command.command}` exited {done.returncode}, the document says "
            f"{command.status}:\n{output}"
        )
        if (
            text.startswith("ls ")
            and not command.elided
            and not any("..." in line for line in command.expected)
        ):
            listed = [line.strip() for line in command.expected]
            assert sorted(output.split()) == sorted(listed), (
                f"{where}: `{command.command}` lists {output.split()}, the document {listed}"
            )
        squashed = _squash(output)
        for line in command.expected:
            position = 0
            for part in (p for p in line.split("...") if p.strip()):
                found = squashed.find(_squash(part), position)
                assert found >= 0, f"{where}: `{command.command}` did not print {part!r}:\n{output}"
                position = found + len(_squash(part))

    def python(self, block: Block) -> None:
        code = compile(block.text, self.where(block.line), "exec")
        with contextlib.chdir(self.workdir):
            exec(code, self.namespace)  # the document's own example, as a reader runs it
