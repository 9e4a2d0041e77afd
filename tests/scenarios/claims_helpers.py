"""Small readers of run results shared by the claim tests."""

from __future__ import annotations

from pinlab.scenarios.result import RunResult


def hog_denials(r: RunResult) -> int:
    """Refusals of the hog by any policy."""
    return sum(int(m.value) for k, m in r.metrics.items() if k.startswith("tenant.hog.denied_by."))
