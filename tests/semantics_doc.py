"""The project's semantics documents (``docs/semantics/kernel.md``, ``policy.md``) as data.

One place for what the checklist-coverage tests and ``tests/test_semantics_docs.py`` need:

* :func:`load_entries` parses the checklist entries of a document. An entry starts with a
  line ``- <ID>. <rule>`` in the checklist section (or a later section) and carries indented
  fields ``  - Source: …``, ``  - Profiles: …``, ``  - Implementation: …``, ``  - Tests: …``
  (or ``  - Not modelled: …`` for an item of the numbering pinlab does not implement);
* :func:`cited_items` greps files for citations of an item kind, the way the coverage tests
  always have (``K-<n>``/``P-<n>`` in text, ``k<n>_``/``p<n>_`` in a test name);
* :func:`render_switch_tables` renders the kernel profiles' switch tables from
  :mod:`pinlab.kernel.profile`; the block between the ``generated: switch-tables`` markers in
  ``kernel.md`` must equal it. Rewrite the block after changing a profile with
  ``.venv/bin/python -m tests.semantics_doc --write``.

Item ids are never written literally in this module (only built from numbers), so it cites
nothing itself.
"""

from __future__ import annotations

import argparse
import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path

from pinlab.kernel.profile import CONFIG_SWITCHES, PRESETS, KernelProfile

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "semantics"
KERNEL_DOC = DOCS / "kernel.md"
POLICY_DOC = DOCS / "policy.md"

# The section where each document's numbered entries start; everything after it may hold
# entries too (kernel.md's "Added after the 2026 specification", policy.md's "not modelled").
CHECKLIST_HEADINGS = {
    "K": "## 12. Modelling checklist",
    "P": "## 6. Modelling checklist",
}
ADDED_AFTER_HEADING = "## 13. Added after the 2026 specification"

FIELD_NAMES = ("Source", "Profiles", "Implementation", "Tests", "Not modelled")


@dataclass
class Entry:
    """One checklist entry: its id, the rule text and its fields (name → text)."""

    kind: str
    number: int
    rule: str
    section: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def ident(self) -> str:
        return f"{self.kind}-{self.number}"


def _entry_start(kind: str) -> re.Pattern[str]:
    return re.compile(rf"^- {kind}-(\d+)\. (.*)$")


_FIELD = re.compile(r"^  - (" + "|".join(FIELD_NAMES) + r"): ?(.*)$")
_CONTINUATION = re.compile(r"^ {2,}\S")


def load_entries(kind: str, path: Path | None = None) -> list[Entry]:
    """The entries of the ``kind`` ("K" or "P") document, in document order.

    Raises ``AssertionError`` (a test failure) when the checklist heading is missing.
    """
    path = path or (KERNEL_DOC if kind == "K" else POLICY_DOC)
    text = path.read_text(encoding="utf-8")
    heading = CHECKLIST_HEADINGS[kind]
    lines = text.splitlines()
    try:
        first = lines.index(heading)
    except ValueError:
        raise AssertionError(f"{path.name} has no {heading!r} section") from None
    start = _entry_start(kind)
    entries: list[Entry] = []
    section = heading
    current: Entry | None = None
    last_field: str | None = None
    for number, line in enumerate(lines[first:], start=first + 1):
        if line.startswith("## "):
            section, current = line, None
            continue
        m = start.match(line)
        if m:
            current = Entry(kind, int(m.group(1)), m.group(2).strip(), section, number)
            entries.append(current)
            last_field = None
            continue
        if current is None:
            continue
        f = _FIELD.match(line)
        if f:
            last_field = f.group(1)
            current.fields[last_field] = f.group(2).strip()
        elif _CONTINUATION.match(line):
            if last_field is None:
                current.rule += " " + line.strip()
            else:
                current.fields[last_field] += " " + line.strip()
        elif line.strip():
            current, last_field = None, None  # unindented text ends the entry
    return entries


def item_numbers(kind: str, path: Path | None = None) -> set[int]:
    """Every item number the ``kind`` document defines (modelled or not)."""
    return {e.number for e in load_entries(kind, path)}


def citation_pattern(kind: str) -> re.Pattern[str]:
    """``<K>-<n>`` anywhere (not inside a longer word or number) or ``<k><n>_`` (test names)."""
    upper, lower = kind.upper(), kind.lower()
    return re.compile(rf"(?<![A-Za-z0-9])(?:{upper}-(\d+)(?!\d)|{lower}(\d+)_)")


def citations_in(kind: str, text: str) -> set[int]:
    return {int(a or b) for a, b in citation_pattern(kind).findall(text)}


def cited_items(
    kind: str, root: Path, *, glob: str = "*", exclude: Iterable[Path] = ()
) -> set[int]:
    """Every ``kind`` item number cited by a file matching ``glob`` under ``root``.

    Skips ``__pycache__``, the ``exclude`` files and files that are not UTF-8 text.
    """
    skip = {p.resolve() for p in exclude}
    cited: set[int] = set()
    for path in root.rglob(glob):
        if not path.is_file() or "__pycache__" in path.parts or path.resolve() in skip:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        cited |= citations_in(kind, text)
    return cited


# -- switch tables ------------------------------------------------------------------------

# What each KernelProfile field means, in the words of the switch table. Every field except
# ``name`` must have a label: a new field without one fails tests/test_semantics_docs.py.
SWITCH_LABELS: dict[str, str] = {
    "version": "release",
    "status": "released kernel, or queued work and RFCs (`next`)",
    "family": "dma-buf core family (§1.2)",
    "cache_sgt_at_attach": "attach maps and caches the sg_table when A and E differ in dynamicness",
    "cache_sgt_mapping_flag": "exporter flag `cache_sgt_mapping` exists and is honoured",
    "common_locking": "resv required for every map/unmap (v6.2 locking convention)",
    "unlocked_variants": "`*_unlocked` map/unmap/vmap variants exist",
    "attachment_has_sgt": "attachment fields `sgt` and `dir` exist",
    "fence_model": "dma_resv fence model",
    "bufinfo_fence_format": "bufinfo fence-line format",
    "move_notify": "`CONFIG_DMABUF_MOVE_NOTIFY` default (MN)",
    "move_notify_is_option": "MN is a Kconfig option (can be switched)",
    "invalidate_mappings": "importer callback is the optional `invalidate_mappings`",
    "attach_revocable": "`dma_buf_attach_revocable()` exists",
    "umem_pinned_warn_callback": "pinned umem has the warn-only notification callback",
    "umem_revocable_pinned_ops": "revocable pinned umem ops exist",
    "amdgpu_vram_pin": "amdgpu: where `dma_buf_pin` may put VRAM",
    "amdgpu_p2p_requires_runtime_pm": "amdgpu: P2P also needs the exporter runtime-PM active",
    "xe_available": "xe driver exists",
    "xe_vram_pin": "xe: where `dma_buf_pin` may put VRAM",
    "ttm_desired_fallback": "TTM placement flags DESIRED/FALLBACK (else busy placements)",
    "ttm_propagate_enospc_available": "TTM device flag `TTM_ALLOCATION_PROPAGATE_ENOSPC` exists",
    "p2pdma_whitelist_root_port": "P2PDMA whitelist also checks a first Root Port at any devfn",
    "p2pdma_whitelist": "P2PDMA host-bridge whitelist table (first release with it)",
    "dmem": "dmem cgroup controller exists",
    "vfio_dmabuf": "vfio-pci dma-buf exporter (`VFIO_DEVICE_FEATURE_DMA_BUF`)",
    "iommufd_dmabuf": "iommufd maps VFIO dma-bufs (`IOMMU_IOAS_MAP_FILE`)",
    "iommufd_dmabuf_pin": "iommufd calls `dma_buf_pin` before the VFIO check",
    "rdma_dmabuf_export": "RDMA exports dma-bufs (`UVERBS_OBJECT_DMABUF`)",
    "dmem_pool_refcount": "dmem pools refcounted (region unregister with charges is safe)",
    "dmem_peak": "`dmem.peak` file exists",
    "dmem_protected_alloc": "protection-aware TTM allocation and eviction (dmem min/low)",
    "vfio_dmabuf_revoke_ioctl": "`VFIO_DEVICE_PCI_DMABUF_REVOKE` ioctl (RFC under review)",
    "dmabuf_debug": "`CONFIG_DMABUF_DEBUG` default",
    "dma_api_debug": "`CONFIG_DMA_API_DEBUG` default",
    "pci_p2pdma": "`CONFIG_PCI_P2PDMA` default",
    "umem_pinned_double_unpin": "pre-Feb-2026 double unpin in `ib_umem_dmabuf_get_pinned`",
}

GENERATED_BEGIN = "<!-- generated: switch-tables (python -m tests.semantics_doc --write) -->"
GENERATED_END = "<!-- end generated: switch-tables -->"


def profile_fields() -> list[str]:
    """The KernelProfile fields a switch table shows (all but ``name``), in class order."""
    return [f.name for f in fields(KernelProfile) if f.name != "name"]


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, enum.Enum):
        return f"`{value.value}`"
    if isinstance(value, tuple):
        return ".".join(str(v) for v in value)
    return str(value)


def _presets_in_order() -> list[KernelProfile]:
    return sorted(PRESETS.values(), key=lambda p: p.version)


def render_switch_tables() -> str:
    """The switch table, the per-preset changes and the configuration switches, as Markdown."""
    presets = _presets_in_order()
    out = [
        "| Switch (`KernelProfile` field) | " + " | ".join(p.name for p in presets) + " |",
        "|---|" + "---|" * len(presets),
    ]
    for name in profile_fields():
        if name == "version":
            continue
        label = SWITCH_LABELS[name]
        switch = " (configuration switch)" if name in CONFIG_SWITCHES else ""
        cells = " | ".join(_cell(getattr(p, name)) for p in presets)
        out.append(f"| {label}{switch} (`{name}`) | {cells} |")
    out += ["", "What each preset changes relative to the one before it:", ""]
    previous: KernelProfile | None = None
    for p in presets:
        if previous is None:
            out.append(f"- `{p.name}`: the oldest preset; the baseline of the table.")
        else:
            changes = [
                f"{SWITCH_LABELS[n]} {_cell(getattr(previous, n))} → {_cell(getattr(p, n))}"
                for n in profile_fields()
                if n != "version" and getattr(previous, n) != getattr(p, n)
            ]
            listed = "; ".join(changes) if changes else "nothing"
            out.append(f"- `{p.name}` (from `{previous.name}`): {listed}.")
        previous = p
    out += [
        "",
        "Configuration switches a run may override on top of any preset "
        "(`KernelProfile.with_`; a scenario's `[kernel]` table):",
        "",
        "| Switch | " + " | ".join(p.name for p in presets) + " |",
        "|---|" + "---|" * len(presets),
    ]
    for name in CONFIG_SWITCHES:
        cells = []
        for p in presets:
            fixed = name == "move_notify" and not p.move_notify_is_option
            cells.append(_cell(getattr(p, name)) + (" (fixed)" if fixed else ""))
        out.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(out)


def generated_block(text: str) -> str:
    """The text between the switch-table markers of ``text`` (without the markers)."""
    _, sep, rest = text.partition(GENERATED_BEGIN)
    assert sep, f"kernel.md has no {GENERATED_BEGIN!r} marker"
    block, sep, _ = rest.partition(GENERATED_END)
    assert sep, f"kernel.md has no {GENERATED_END!r} marker"
    return block.strip("\n")


def write_switch_tables(path: Path = KERNEL_DOC) -> None:
    """Replace the generated block of ``path`` with a fresh rendering."""
    text = path.read_text(encoding="utf-8")
    before, _, rest = text.partition(GENERATED_BEGIN)
    _, _, after = rest.partition(GENERATED_END)
    body = render_switch_tables()
    path.write_text(f"{before}{GENERATED_BEGIN}\n{body}\n{GENERATED_END}{after}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite kernel.md's tables")
    args = parser.parse_args()
    if args.write:
        write_switch_tables()
    else:
        print(render_switch_tables())


if __name__ == "__main__":
    main()
