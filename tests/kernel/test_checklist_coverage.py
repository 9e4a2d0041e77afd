"""Checklist coverage: the K- items of docs/semantics/kernel.md that tests must cite.

Takes the item numbers from the project's own semantics document (the entries of its §12
modelling checklist and of §13, items added after the 2026 specification; parsed by
``tests/semantics_doc.py``), greps every file under ``tests/`` for citations -- ``K-<n>`` in a
docstring or comment, or ``k<n>_`` in a test name -- and requires that at least 90 % of the items
of each section below are cited, and every item by some test. Ranges such as "K-18..K-23" only
cite their two ends: every item should be cited where it is tested.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.semantics_doc import citation_pattern, cited_items, item_numbers

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
THRESHOLD = 0.9

SECTIONS: dict[str, tuple[int, ...]] = {
    "core": (
        *range(1, 37),
        *range(65, 76),
        89,
        91,
        *range(94, 98),
    ),
    "TTM": (*range(59, 65), *range(86, 89)),
    "P2PDMA": (*range(55, 59), *range(83, 86)),
    "umem": (*range(43, 48), 90, 93),
}

_CITATION = citation_pattern("K")


@pytest.fixture(scope="module")
def items() -> set[int]:
    return item_numbers("K")


@pytest.fixture(scope="module")
def cited() -> set[int]:
    return cited_items("K", TESTS, exclude=[Path(__file__)])


def test_citation_pattern() -> None:
    """The grep matches K-<n> and k<n>_ without prefix/suffix confusion."""
    text = "K-1. K-13 test_k2_x K-4..K-5 kk7_ K-800x xK-9 k10_"
    found = {int(a or b) for a, b in _CITATION.findall(text)}
    assert found == {1, 13, 2, 4, 5, 800, 10}


def test_sections_exist_in_checklist(items: set[int]) -> None:
    """Every item the sections name is defined in the checklist (the numbering is stable)."""
    assert items >= {1, 97}
    missing = sorted(n for numbers in SECTIONS.values() for n in numbers if n not in items)
    assert not missing, f"sections name items that the checklist does not define: {missing}"


@pytest.mark.parametrize("section", list(SECTIONS))
def test_checklist_section_is_cited(section: str, items: set[int], cited: set[int]) -> None:
    """At least 90 % of the section's items are cited somewhere under tests/."""
    numbers = [n for n in SECTIONS[section] if n in items]
    uncited = [n for n in numbers if n not in cited]
    needed = math.ceil(THRESHOLD * len(numbers))
    have = len(numbers) - len(uncited)
    assert have >= needed, (
        f"{section}: {have}/{len(numbers)} checklist items cited, need {needed} "
        f"({THRESHOLD:.0%}); uncited: {', '.join(f'K-{n}' for n in uncited)}"
    )


def test_every_checklist_item_is_cited(items: set[int], cited: set[int]) -> None:
    """Beyond the 90 % floor per section: every K- item of the document -- the exporter and
    importer items (K-37..K-54, K-76..K-82, K-92) and any added after the 2026 specification
    included -- is cited by some test."""
    uncited = sorted(items - cited)
    assert not uncited, "uncited: " + ", ".join(f"K-{n}" for n in uncited)
