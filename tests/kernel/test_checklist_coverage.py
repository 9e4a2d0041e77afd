"""Checklist coverage: the kernel-semantics.md §12 items that tests must cite.

Parses the numbered items of the modelling checklist and greps every file under ``tests/``
for citations -- ``K-<n>`` in a docstring or comment, or ``k<n>_`` in a test name -- and
requires that at least 90 % of the items of each section below are cited. Ranges such as
"K-18..K-23" only cite their two ends: every item should be cited where it is tested.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO.parent / "shared/docs/kernel-semantics.md"
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

_ITEM = re.compile(r"^- K-(\d+)\.", re.MULTILINE)
_CITATION = re.compile(r"(?<![A-Za-z0-9])(?:K-(\d+)(?!\d)|k(\d+)_)")


def checklist_items(text: str) -> set[int]:
    """The item numbers defined in the §12 modelling checklist."""
    _, sep, checklist = text.partition("## 12. Modelling checklist")
    assert sep, "kernel-semantics.md has no '## 12. Modelling checklist' section"
    return {int(n) for n in _ITEM.findall(checklist)}


def cited_items(root: Path) -> set[int]:
    """Every item number cited by a file under ``root`` (this file excluded)."""
    cited: set[int] = set()
    this = Path(__file__).resolve()
    for path in root.rglob("*"):
        if not path.is_file() or "__pycache__" in path.parts or path.resolve() == this:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for upper, lower in _CITATION.findall(text):
            cited.add(int(upper or lower))
    return cited


@pytest.fixture(scope="module")
def spec_text() -> str:
    if not SPEC.is_file():
        pytest.skip(f"checklist source {SPEC} is missing (expected next to the repository)")
    return SPEC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def cited() -> set[int]:
    return cited_items(TESTS)


def test_citation_pattern() -> None:
    """The grep matches K-<n> and k<n>_ without prefix/suffix confusion."""
    text = "K-1. K-13 test_k2_x K-4..K-5 kk7_ K-800x xK-9 k10_"
    found = {int(a or b) for a, b in _CITATION.findall(text)}
    assert found == {1, 13, 2, 4, 5, 800, 10}


def test_sections_exist_in_checklist(spec_text: str) -> None:
    """Every item the sections name is defined in §12 (the numbering is stable)."""
    items = checklist_items(spec_text)
    assert items >= {1, 97}
    missing = sorted(n for numbers in SECTIONS.values() for n in numbers if n not in items)
    assert not missing, f"sections name items that §12 does not define: {missing}"


@pytest.mark.parametrize("section", list(SECTIONS))
def test_checklist_section_is_cited(section: str, spec_text: str, cited: set[int]) -> None:
    """At least 90 % of the section's items are cited somewhere under tests/."""
    items = [n for n in SECTIONS[section] if n in checklist_items(spec_text)]
    uncited = [n for n in items if n not in cited]
    needed = math.ceil(THRESHOLD * len(items))
    have = len(items) - len(uncited)
    assert have >= needed, (
        f"{section}: {have}/{len(items)} checklist items cited, need {needed} "
        f"({THRESHOLD:.0%}); uncited: {', '.join(f'K-{n}' for n in uncited)}"
    )


def test_every_checklist_item_is_cited(spec_text: str, cited: set[int]) -> None:
    """Beyond the 90 % floor per section: every K- item of §12 -- the exporter and importer
    items (K-37..K-54, K-76..K-82, K-92) included -- is cited by some test."""
    uncited = sorted(checklist_items(spec_text) - cited)
    assert not uncited, "uncited: " + ", ".join(f"K-{n}" for n in uncited)
