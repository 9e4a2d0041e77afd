"""The kernel call path of a step: which modelled kernel and driver functions ran, with the
K- items their docstrings cite and the upstream source file they model.

:func:`call_path` re-runs a sequence with a profiler hook (:func:`sys.setprofile`) active for
one step only and keeps the calls into ``pinlab.kernel``, ``pinlab.drivers`` and
``pinlab.policy`` -- the code that models the kernel. Each pinlab function is named after the
kernel function it models (the house rule), so the path reads as a kernel backtrace; the
upstream file is the first kernel source path (``drivers/…/*.c``, ``include/…/*.h``) the
function's docstring names, else its module's.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import Any

_LAYERS = ("pinlab.kernel.", "pinlab.drivers.", "pinlab.policy.")
_K_ITEM = re.compile(r"\b([KP]-\d+)\b")
_SOURCE = re.compile(r"\b((?:drivers|kernel|include|mm|lib|io_uring)/[\w/.-]+\.[ch])\b")
_SKIP = {
    "__init__",
    "__repr__",
    "__enter__",
    "__exit__",
    "__post_init__",
    "<lambda>",
    "<listcomp>",
    "current_owner",
}
_PLUMBING = ("pinlab.kernel.resv", "pinlab.kernel.range_alloc", "pinlab.kernel.pci")
"""Locking, allocator and PCI-topology plumbing: shown only where a docstring cites an item."""
MAX_CALLS = 400


@dataclass(frozen=True, slots=True)
class Call:
    """One call on the path: nesting ``depth``, the pinlab function (module:qualname), the
    kernel function it models, the upstream file and the K-/P- items it cites."""

    depth: int
    function: str
    kernel_function: str
    source: str | None
    items: tuple[str, ...]

    def __str__(self) -> str:
        src = f"  [{self.source}]" if self.source else ""
        items = f"  {', '.join(self.items)}" if self.items else ""
        return f"{'  ' * self.depth}{self.kernel_function}{src}{items}"


def _resolve(module: ModuleType | None, qualname: str) -> Any:
    obj: Any = module
    for part in qualname.split("."):
        if part == "<locals>":
            return None
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _describe(frame: FrameType, depth: int) -> Call | None:
    module_name = frame.f_globals.get("__name__", "")
    if not module_name.startswith(_LAYERS):
        return None
    code = frame.f_code
    name = code.co_name
    if name in _SKIP:
        return None
    module = sys.modules.get(module_name)
    func = _resolve(module, code.co_qualname)
    doc = (getattr(func, "__doc__", None) or "") if func is not None else ""
    items = tuple(dict.fromkeys(_K_ITEM.findall(doc)))
    if not items and ("_" not in name.strip("_") or module_name.startswith(_PLUMBING)):
        return None  # an accessor or plumbing, not a kernel function
    src = _SOURCE.search(doc) or _SOURCE.search(getattr(module, "__doc__", None) or "")
    return Call(
        depth, f"{module_name}:{code.co_qualname}", name, src.group(1) if src else None, items
    )


class _Tracer:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.stack: list[bool] = []  # per Python frame: whether it was recorded

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            depth = sum(self.stack)
            call = _describe(frame, depth) if len(self.calls) < MAX_CALLS else None
            if call is not None:
                self.calls.append(call)
            self.stack.append(call is not None)
        elif event == "return" and self.stack:
            self.stack.pop()


@contextmanager
def tracing(into: list[Call]) -> Iterator[None]:
    """Record the modelled kernel calls made inside the block into ``into``."""
    tracer = _Tracer()
    previous = sys.getprofile()
    sys.setprofile(tracer)
    try:
        yield
    finally:
        sys.setprofile(previous)
        into.extend(tracer.calls)


def items_of(calls: list[Call]) -> list[str]:
    """Every K-/P- item on the path, in first-seen order."""
    return list(dict.fromkeys(i for c in calls for i in c.items))


def sources_of(calls: list[Call]) -> list[tuple[str, str]]:
    """(upstream file, kernel function) of every call that cites an item and has a known
    file, in first-seen order."""
    return list(dict.fromkeys((c.source, c.kernel_function) for c in calls if c.source and c.items))
