"""docs/cost-model.md (issue 11 'Done when'): the index documents every mechanism page and every
cost parameter with its default, unit, range, confidence and source."""

from __future__ import annotations

import re
from pathlib import Path

from pinlab.platform.cost import parameters

DOCS = Path(__file__).resolve().parents[2] / "docs"
INDEX = (DOCS / "cost-model.md").read_text()


def _row(key: str) -> list[str]:
    for line in INDEX.splitlines():
        if line.startswith(f"| `{key}` |"):
            return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
    raise AssertionError(f"docs/cost-model.md has no row for {key} (regenerate the table)")


def test_every_parameter_has_a_row_with_its_default_and_source() -> None:
    for p in parameters():
        cells = _row(p.key)
        default = (
            ("true" if p.default else "false")
            if isinstance(p.default, bool)
            else ("none" if p.default is None else p.default_text)
        )
        assert cells[1] == default, p.key
        assert cells[2] == p.unit, p.key
        assert cells[4] == p.confidence, p.key
        assert cells[6], p.key  # a source


def test_no_row_for_a_parameter_that_does_not_exist() -> None:
    keys = {p.key for p in parameters()}
    for found in re.findall(r"^\| `([a-z0-9_.]+)` \|", INDEX, flags=re.M):
        assert found in keys, found


def test_the_index_links_every_mechanism_page() -> None:
    for page in sorted((DOCS / "cost-model").glob("*.md")):
        assert f"(cost-model/{page.name})" in INDEX, page.name
    assert "p2p.factor" not in {p.key.rsplit(".", 1)[0] for p in parameters()}
