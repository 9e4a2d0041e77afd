"""Every P- item of policy-semantics.md §6 for RLIMIT_MEMLOCK (P-1..P-15), the dmem controller
(P-16..P-36), page_counter (P-37..P-46) and the presets' history (P-60) is cited by a test, and
no test cites an item that does not exist.

The host-memory ODP items (P-47..P-52, P-55..P-59: ``ib_umem_odp``, implicit ODP, HMM faults,
``ibv_advise_mr`` flags) describe ODP of *host* memory, which pinlab does not model beyond "it
charges nothing" (P-11); the dma-buf ODP items it does model (P-53, P-54) are cited by the
mlx5 and EFA tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO.parent / "shared/docs/policy-semantics.md"
_ITEM = re.compile(r"^- P-(\d+)\.", re.MULTILINE)
_CITATION = re.compile(r"(?<![A-Za-z0-9])(?:P-(\d+)(?!\d)|p(\d+)_)")


def _items() -> set[int]:
    if not SPEC.is_file():
        pytest.skip(f"checklist source {SPEC} is missing (expected next to the repository)")
    _, sep, checklist = SPEC.read_text(encoding="utf-8").partition("## 6. Modelling checklist")
    assert sep, "policy-semantics.md has no '## 6. Modelling checklist' section"
    return {int(n) for n in _ITEM.findall(checklist)}


def _cited() -> set[int]:
    this = Path(__file__).resolve()
    cited: set[int] = set()
    for path in (REPO / "tests").rglob("*.py"):
        if path.resolve() == this:
            continue
        for upper, lower in _CITATION.findall(path.read_text(encoding="utf-8")):
            cited.add(int(upper or lower))
    return cited


REQUIRED = {*range(1, 47), 53, 54, 60}


def test_every_p_item_is_cited() -> None:
    items = _items()
    assert items >= REQUIRED
    uncited = sorted(REQUIRED - _cited())
    assert not uncited, "uncited: " + ", ".join(f"P-{n}" for n in uncited)


def test_no_citation_of_an_undefined_item() -> None:
    unknown = sorted(_cited() - _items())
    assert not unknown, "tests cite items §6 does not define: " + ", ".join(
        f"P-{n}" for n in unknown
    )
