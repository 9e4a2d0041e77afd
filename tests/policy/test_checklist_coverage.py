"""Every P- item of docs/semantics/policy.md for RLIMIT_MEMLOCK (P-1..P-15), the dmem controller
(P-16..P-36), page_counter (P-37..P-46) and the presets' history (P-60) is cited by a test, and
no test cites an item the document does not define.

The host-memory ODP items (``ib_umem_odp``, implicit ODP, HMM faults, ``ibv_advise_mr`` flags)
describe ODP of *host* memory, which pinlab does not model beyond "it charges nothing" (P-11);
policy.md lists them in §7 as not modelled. The dma-buf ODP items it does model (P-53, P-54)
are cited by the mlx5 and EFA tests."""

from __future__ import annotations

from pathlib import Path

from tests.semantics_doc import cited_items, item_numbers

REPO = Path(__file__).resolve().parents[2]


def _items() -> set[int]:
    return item_numbers("P")


def _cited() -> set[int]:
    return cited_items("P", REPO / "tests", glob="*.py", exclude=[Path(__file__)])


REQUIRED = {*range(1, 47), 53, 54, 60}


def test_every_p_item_is_cited() -> None:
    items = _items()
    assert items >= REQUIRED
    uncited = sorted(REQUIRED - _cited())
    assert not uncited, "uncited: " + ", ".join(f"P-{n}" for n in uncited)


def test_no_citation_of_an_undefined_item() -> None:
    unknown = sorted(_cited() - _items())
    assert not unknown, "tests cite items policy.md does not define: " + ", ".join(
        f"P-{n}" for n in unknown
    )
