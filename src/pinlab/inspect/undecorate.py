"""A pasted command's output without what a bug report puts around it.

Users paste ``lspci -tv`` or ``nvidia-smi topo -m`` into issues inside Markdown code fences,
under the prompt line that ran it, with ``...`` where they cut lines, quoted, indented, or under
a heading. :func:`undecorated` takes that off the same way for every kind of paste
(:mod:`pinlab.inspect.paste` says, per kind, which command a prompt line runs and whether a
filtered output may stand for the whole), keeping each remaining line's number in the file as
pasted; :func:`parse_undecorated` runs a parser on the result, so that its errors name the
line the user sees in the file.

The rules are precise on purpose: a line is dropped only when it is one of the forms below, so
text that is not the command's output still reaches the parser and is refused there, naming
its line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pinlab.errors import ConfigError, show_value

__all__ = ["Command", "Undecorated", "parse_undecorated", "undecorated"]

_FILTER = re.compile(r"\|\s*(?:grep|egrep|fgrep|rg|head|tail|awk|sed|cut)\b")
"""A pipe into a filter: what the reporter pasted is part of the output."""

_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})\s*(?:[\w.+-]+(?=\s*$))?\s*")
"""A Markdown code fence, with the language word of an opening one."""

_ELLIPSIS = re.compile(r"^\s*(?:\.{3,}|…|\[(?:\.{3}|…)\]|<snip(?:ped)?>|\[snip(?:ped)?\])\s*$")
"""A line that only says lines were cut here."""

_BARE_PROMPT = re.compile(
    r"^\s*(?:\([^)]*\)\s*)?(?:\[[^\]]*\]|[\w.-]+@[\w.-]+(?::\S*)?|[\w.-]+:\S*)?\s*[$#%]\s*$"
)
"""A prompt and nothing after it (``[root@gpu3 ~]#``): the end of a reporter's session."""

_PROMPT_PREFIX = re.compile(r"^(?:.{0,120}?[$#%>]\s+|#+\s+|\s*)$")
"""What may stand before a command on its prompt line (``(base) [u@h ~]$ ``, ``# ``, none)."""

_TITLE = re.compile(r"^(?:#{1,6}\s(?!CONFIG_).*|[=\-*_~]{3,}|[_*].*[_*]|[^:]{1,80}:)$")
"""What may stand above the output: a Markdown heading (not a kernel config's ``# CONFIG_X is
not set``), a rule, a line in emphasis (``_Note: ..._``) or a label (``The lspci log:``)."""


@dataclass(frozen=True, slots=True)
class Command:
    """The command that printed a kind of paste, as :func:`undecorated` needs it: ``pattern``
    (a regex) as a prompt line runs it, ``shown`` as errors name it, ``absent`` (None: nothing)
    what a line left out of its output would be taken to mean, and ``selects`` (a regex, or
    None) the options that print part of that output."""

    pattern: str
    shown: str
    absent: str | None = None
    selects: str | None = None


@dataclass(frozen=True, slots=True)
class Undecorated:
    """A paste's output without what surrounded it: ``text``, and for each of its lines the
    line of the file as pasted (``lines[i]`` for line ``i + 1``)."""

    text: str
    lines: tuple[int, ...]

    def original(self, line: int) -> int:
        """The line of the file as pasted that line ``line`` of :attr:`text` came from."""
        if not self.lines:
            return 1
        return self.lines[min(max(line, 1), len(self.lines)) - 1]


def _command_line(line: str, command: str) -> re.Match[str] | None:
    """``command`` (a regex) run on a prompt line (``$ sudo lspci -tv``, ``[u@h ~]$ lsmod``,
    ``# lspci -t``, ``lspci -vvvnn for those cards:``), or None."""
    m = re.search(rf"(?:sudo\s+(?:-\S+\s+)*)?(?:{command})(?=[\s|]|$)", line)
    if m is None or not _PROMPT_PREFIX.match(line[: m.start()]):
        return None
    return m


def _common_indent(lines: list[str]) -> str:
    """The leading spaces and tabs every one of ``lines`` starts with."""
    indents = [line[: len(line) - len(line.lstrip(" \t"))] for line in lines]
    if not indents:
        return ""
    first, last = min(indents), max(indents)
    n = 0
    while n < len(first) and first[n] == last[n]:
        n += 1
    return first[:n]


def undecorated(text: str, source: str, command: Command) -> Undecorated:
    """``text`` as the command printed it, without what a bug report puts around it, keeping
    each line's number in the file as pasted (:class:`Undecorated`).

    Dropped anywhere: Markdown code fences (```` ``` ````, ```` ```bash ````; text after a
    fence on its line is kept), a prompt line running ``command`` (``sudo`` allowed)
    or a bare prompt, and a line that is only ``...`` (or ``…``, ``[...]``, ``<snip>``).
    Dropped above the output only: blank lines and title lines (:data:`_TITLE`). Then a ``> ``
    quote on every line, and the indent every line shares, are taken off; every other byte
    (line breaks included) is kept. When a line left out of the output means something
    (``command.absent``), a prompt line piping the command into ``grep``, ``head`` ..., or
    giving it an option that ``selects`` part of its output, is a :class:`ConfigError`."""
    kept: list[tuple[int, str, str]] = []  # (line as pasted, its text, its line break)
    for lineno, raw in enumerate(text.splitlines(keepends=True), 1):
        parts = raw.splitlines()
        body = parts[0] if parts else ""
        line, end = body.rstrip(), raw[len(body) :]
        fence = _FENCE.match(line)
        if fence is not None:
            body = line = line[fence.end() :]
            if not line:
                continue
        run = _command_line(line, command.pattern)
        if run is not None:
            options = line[run.end() :].split("|", 1)[0]
            if command.absent is not None and (
                _FILTER.search(line, run.end())
                or (command.selects is not None and re.search(command.selects, options))
            ):
                raise ConfigError(
                    source,
                    f"line {lineno}",
                    f"expected the whole output of {command.shown}, found it filtered "
                    f"({show_value(line.strip())}): {command.absent}",
                )
            continue
        if _ELLIPSIS.match(line) or _BARE_PROMPT.match(line):
            continue
        if not kept and (not line.strip() or _TITLE.match(line.strip())):
            continue
        kept.append((lineno, body, end))
    bodies = [body for _, body, _ in kept]
    if any(b.strip() for b in bodies) and all(
        b.lstrip().startswith(">") for b in bodies if b.strip()
    ):
        bodies = [re.sub(r"^\s*> ?", "", b) for b in bodies]
    indent = _common_indent([b for b in bodies if b.strip()])
    bodies = [b[len(indent) :] if b.startswith(indent) else b.lstrip() for b in bodies]
    return Undecorated(
        "".join(b + end for b, (_, _, end) in zip(bodies, kept, strict=True)),
        tuple(n for n, _, _ in kept),
    )


_Parsed = TypeVar("_Parsed")
_LINE = re.compile(r"^line (\d+)\b")


def parse_undecorated(
    parse: Callable[[str], _Parsed], text: str, source: str, command: Command
) -> _Parsed:
    """``parse`` on :func:`undecorated` ``text``, its errors naming the line of the file as
    pasted: a :class:`ConfigError` whose ``where`` is ``line N``, or a ``ValueError`` whose
    message starts ``line N`` (which becomes a :class:`ConfigError` of ``source``)."""
    clean = undecorated(text, source, command)
    try:
        return parse(clean.text)
    except ConfigError as e:
        m = _LINE.match(e.where)
        if m is None:
            raise
        raise ConfigError(e.source, f"line {clean.original(int(m[1]))}", e.message) from None
    except ValueError as e:
        message = str(e)
        m = _LINE.match(message)
        if m is not None:
            message = f"line {clean.original(int(m[1]))}{message[m.end() :]}"
        raise ConfigError(source, "", message) from None
