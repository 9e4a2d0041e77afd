"""docs/semantics/kernel.md and policy.md: every entry is complete and its references exist.

For each checklist entry (format in kernel.md §0.4): a rule; a Source naming a kernel file, a
commit or a patch series; Profiles that are ``all`` or pinlab presets; every Implementation
reference ``pinlab.<module>:<qualified name>`` importable and resolvable; every Tests file
present and citing the entry's item. Entries of kernel.md §13 (added after the 2026
specification) also name the patch's subject, author and date. Items pinlab does not model
(``Not modelled:``) carry a reason and are cited by no test. The generated switch tables in
kernel.md match :mod:`pinlab.kernel.profile`.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from pinlab.kernel.profile import PRESETS
from tests.semantics_doc import (
    ADDED_AFTER_HEADING,
    KERNEL_DOC,
    REPO,
    SWITCH_LABELS,
    Entry,
    citations_in,
    cited_items,
    generated_block,
    load_entries,
    profile_fields,
    render_switch_tables,
)

ENTRIES = [*load_entries("K"), *load_entries("P")]
MODELLED = [e for e in ENTRIES if "Not modelled" not in e.fields]
NOT_MODELLED = [e for e in ENTRIES if "Not modelled" in e.fields]

_REF = re.compile(r"`(pinlab(?:\.\w+)+):([\w.]+)`")
_TEST_FILE = re.compile(r"`(tests/[\w/]+\.py)`")
# A Source names a kernel file (… .c / .h / .rst), a commit id, a patch or series, or a man page.
_SOURCE = re.compile(
    r"[\w./-]+\.(?:c|h|rst)\b|\b[0-9a-f]{12,40}\b|\bseries\b|PATCH|\bpatch\b|\(\d\)|\"[^\"]+\""
)
_ADDED_SOURCE = re.compile(r"\"[^\"]+\", [^,]+, \d{4}-\d{2}-\d{2}")


def _id(entry: Entry) -> str:
    return entry.ident


def test_the_documents_define_their_items_once() -> None:
    for kind in ("K", "P"):
        numbers = [e.number for e in ENTRIES if e.kind == kind]
        duplicates = sorted({n for n in numbers if numbers.count(n) > 1})
        assert not duplicates, f"{kind} items defined twice: {duplicates}"
    kernel = sorted(e.number for e in ENTRIES if e.kind == "K")
    assert kernel[:97] == list(range(1, 98)), "kernel.md §12 must define the items 1 … 97"


@pytest.mark.parametrize("entry", ENTRIES, ids=_id)
def test_entry_has_a_rule_and_a_source(entry: Entry) -> None:
    assert len(entry.rule) > 20, f"{entry.ident}: the rule is missing or too short"
    source = entry.fields.get("Source", "")
    assert _SOURCE.search(source), (
        f"{entry.ident}: Source must name a kernel file, commit, patch series or man page; "
        f"found {source!r}"
    )


@pytest.mark.parametrize("entry", MODELLED, ids=_id)
def test_modelled_entry_names_profiles_implementation_and_tests(entry: Entry) -> None:
    missing = [f for f in ("Profiles", "Implementation", "Tests") if not entry.fields.get(f)]
    assert not missing, f"{entry.ident}: missing field(s) {', '.join(missing)}"
    profiles = re.sub(r"\([^)]*\)", "", entry.fields["Profiles"])
    names = [p.strip() for p in profiles.split(",") if p.strip()]
    unknown = [p for p in names if p != "all" and p not in PRESETS]
    assert names and not unknown, (
        f"{entry.ident}: Profiles must be 'all' or presets ({', '.join(PRESETS)}); "
        f"found {entry.fields['Profiles']!r}"
    )


@pytest.mark.parametrize("entry", MODELLED, ids=_id)
def test_implementation_references_resolve(entry: Entry) -> None:
    refs = _REF.findall(entry.fields.get("Implementation", ""))
    assert refs, f"{entry.ident}: no `pinlab.module:name` reference in Implementation"
    for module_name, qualname in refs:
        obj: object = importlib.import_module(module_name)
        for part in qualname.split("."):
            assert hasattr(obj, part), f"{entry.ident}: {module_name}:{qualname} does not exist"
            obj = getattr(obj, part)


@pytest.mark.parametrize("entry", MODELLED, ids=_id)
def test_named_test_files_exist_and_cite_the_item(entry: Entry) -> None:
    files = _TEST_FILE.findall(entry.fields.get("Tests", ""))
    assert files, f"{entry.ident}: no `tests/….py` file in Tests"
    for name in files:
        path = REPO / name
        assert path.is_file(), f"{entry.ident}: {name} does not exist"
        cited = citations_in(entry.kind, path.read_text(encoding="utf-8"))
        assert entry.number in cited, f"{entry.ident}: {name} does not cite it"


def test_added_items_name_subject_author_and_date() -> None:
    """kernel.md keeps its §13 for items after the 2026 specification; each names its patch."""
    assert ADDED_AFTER_HEADING in KERNEL_DOC.read_text(encoding="utf-8").splitlines()
    for entry in (e for e in ENTRIES if e.section == ADDED_AFTER_HEADING):
        source = entry.fields.get("Source", "")
        assert _ADDED_SOURCE.search(source), (
            f'{entry.ident}: Source must start with "<subject>", <author>, <YYYY-MM-DD>; '
            f"found {source!r}"
        )
    assert _ADDED_SOURCE.search(
        '"dma-buf: Add dma_buf_attach_revocable()", Leon Romanovsky, 2026-01-31'
    )


def test_items_not_modelled_give_a_reason_and_are_not_cited() -> None:
    tests_dir = REPO / "tests"
    cited = cited_items("P", tests_dir, glob="*.py", exclude=[Path(__file__)])
    for entry in NOT_MODELLED:
        assert len(entry.fields["Not modelled"]) > 10, f"{entry.ident}: give the reason"
        assert "Implementation" not in entry.fields, f"{entry.ident}: not modelled, yet implemented"
        assert entry.number not in cited, (
            f"{entry.ident} is cited by a test but marked 'Not modelled': add its entry to §6"
        )


def test_every_profile_field_has_a_switch_label() -> None:
    """A new KernelProfile field needs a row label (tests/semantics_doc.py SWITCH_LABELS)."""
    fields = set(profile_fields())
    assert fields - set(SWITCH_LABELS) == set(), "fields without a label"
    assert set(SWITCH_LABELS) - fields == set(), "labels of fields that no longer exist"


def test_switch_tables_match_the_profiles() -> None:
    """kernel.md §1.3 is the rendering of PRESETS (regenerate: python -m tests.semantics_doc
    --write)."""
    text = KERNEL_DOC.read_text(encoding="utf-8")
    assert generated_block(text) == render_switch_tables(), (
        "kernel.md's switch tables are stale: run .venv/bin/python -m tests.semantics_doc --write"
    )


def test_switch_table_rows_show_the_profile_values() -> None:
    """The renderer itself: one row per field, one column per preset, values as in the code."""
    table = render_switch_tables()
    row = next(line for line in table.splitlines() if "(`dmem`)" in line)
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    presets = sorted(PRESETS.values(), key=lambda p: p.version)
    assert cells == ["yes" if p.dmem else "no" for p in presets]
    header = table.splitlines()[0]
    assert all(f" {p.name} " in header for p in presets)
