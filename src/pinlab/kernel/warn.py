"""WARN / WARN_ON_ONCE model: warnings recorded on the kernel instance, never raised.

The kernel prints a WARN with a backtrace and carries on; pinlab records it per call site
(function + message) with a hit count, so tests and reports can show exactly what a real
kernel would have logged (``kernel-semantics.md`` §0.1).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class WarnRecord:
    """One WARN call site: the function, the message and how often it was hit."""

    function: str
    message: str
    count: int = 0
    once: bool = False

    @property
    def reported(self) -> int:
        """How many backtraces the kernel log would show (1 for WARN_ON_ONCE sites)."""
        return min(self.count, 1) if self.once else self.count


class WarnLog:
    """Per-kernel record of WARN hits, keyed by (function, message)."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], WarnRecord] = {}

    def warn(self, function: str, message: str, *, once: bool = False) -> None:
        """Record a WARN (or, with ``once``, a WARN_ON_ONCE) hit at ``function``."""
        key = (function, message)
        rec = self._records.get(key)
        if rec is None:
            rec = WarnRecord(function, message, 0, once)
            self._records[key] = rec
        rec.count += 1

    def records(self) -> list[WarnRecord]:
        """All call sites hit so far, in first-hit order."""
        return list(self._records.values())

    def count(self, function: str | None = None, message: str | None = None) -> int:
        """Total hits, optionally restricted to a function and/or a message substring."""
        total = 0
        for rec in self._records.values():
            if function is not None and rec.function != function:
                continue
            if message is not None and message not in rec.message:
                continue
            total += rec.count
        return total

    def __len__(self) -> int:
        return sum(rec.count for rec in self._records.values())

    def clear(self) -> None:
        self._records.clear()
