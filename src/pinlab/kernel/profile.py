"""``KernelProfile``: the switches where Linux's behaviour changed between releases.

Presets ``5.16``, ``6.12``, ``6.14``, ``6.16`` (default), ``6.19`` and ``7.1`` are releases and
follow the switch table of ``docs/semantics/kernel.md`` §1.3; ``next`` is **not a release**: it
is 7.1 plus the work merged or queued after it (a 7.2 P2PDMA whitelist change, the 7.3 dmem
series) and open RFCs, labelled by
:attr:`KernelProfile.status` and listed per switch in :data:`NEXT_SOURCES`. Configuration
switches that are independent of the preset (§1.5:
``CONFIG_DMABUF_MOVE_NOTIFY``, ``CONFIG_DMABUF_DEBUG``, ``CONFIG_DMA_API_DEBUG``,
``CONFIG_PCI_P2PDMA``, the umem double-unpin reproduction) can be overridden per run with
:meth:`KernelProfile.with_`.

Everything here is data: the code in ``pinlab.kernel`` and ``pinlab.drivers`` reads these
fields instead of comparing version numbers, so every behavioural fork is named once. The
preset table itself is ``profiles.toml`` next to this module, read into :data:`PRESETS`.
"""

from __future__ import annotations

import dataclasses
import enum
import tomllib
import typing
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pinlab.kernel.pci_ids import P2pdmaWhitelistRelease


class CoreFamily(enum.Enum):
    """The three dma-buf core behaviour families (``kernel-semantics.md`` §1.2)."""

    CACHING = "caching"  # 5.7-6.15: map (and pin) at attach, cached sg_table
    PIN_AT_MAP = "pin-at-map"  # 6.16: no caching, one pin per live mapping
    REVOKE = "revoke"  # 2026 series (7.1): invalidate_mappings, MN always on


class FenceModel(enum.Enum):
    """How a ``dma_resv`` holds fences (§3)."""

    EXCLUSIVE_SHARED = "exclusive-shared"  # before 5.19
    USAGES = "usages"  # KERNEL < WRITE < READ < BOOKKEEP, since 5.19


class FenceFormat(enum.Enum):
    """The bufinfo fence-line format (§4.2, K-94)."""

    EXCLUSIVE_SHARED = "exclusive-shared"  # 5.16: "Exclusive"/"Shared" labels
    CLASSIC = "classic"  # 5.19 .. ~6.17: "%s %s seq %llu %ssignalled"
    CONTEXT_FIRST = "context-first"  # late 2025: "%llu %s %s seq %llu %ssignalled"


class ProfileStatus(enum.Enum):
    """Whether a preset models a kernel that was released."""

    RELEASED = "released"
    QUEUED = "queued+rfc"  # not a release: merged for a later cycle, or an open RFC


class VfioDmabuf(enum.Enum):
    """vfio-pci's dma-buf exporter (``VFIO_DEVICE_FEATURE_DMA_BUF``, kernel.md §13, K-98..)."""

    ABSENT = "absent"  # before 6.19
    PIN_REFUSED = "pin-refused"  # 6.19 final, 7.0: a pin op that returns -EOPNOTSUPP
    REVOCABLE_ONLY = "revocable-only"  # 7.1: no pin op; attach needs a revocable importer;
    # revoke waits for the resv fences and for every importer's unmap


class VramPinRule(enum.Enum):
    """Where an exporter's ``dma_buf_pin`` may place an exported BO (K-49, §7.1, §7.3)."""

    NEVER = "never"  # always GTT/TT
    IF_P2P_AND_MN = "if-p2p-and-mn"  # 6.16 amdgpu: MN on and every attachment peer2peer
    IF_P2P = "if-p2p"  # 7.1: every attachment peer2peer


@dataclass(frozen=True, slots=True)
class KernelProfile:
    """One kernel release as pinlab models it.

    Field names say what changes; the docstring of each module that reads a field cites the
    checklist item. Build one with :func:`get_profile`.
    """

    name: str
    version: tuple[int, int]
    status: ProfileStatus
    family: CoreFamily
    # dma-buf core (§1.3, §2)
    cache_sgt_at_attach: bool
    cache_sgt_mapping_flag: bool
    common_locking: bool  # v6.2: the resv is required for every map/unmap
    unlocked_variants: bool
    attachment_has_sgt: bool
    fence_model: FenceModel
    bufinfo_fence_format: FenceFormat
    # move notification / revoke (§1.4)
    move_notify: bool  # CONFIG_DMABUF_MOVE_NOTIFY
    move_notify_is_option: bool
    invalidate_mappings: bool  # callback named invalidate_mappings and optional
    attach_revocable: bool
    umem_pinned_warn_callback: bool
    umem_revocable_pinned_ops: bool
    # drivers (§7)
    amdgpu_vram_pin: VramPinRule
    amdgpu_p2p_requires_runtime_pm: bool
    xe_available: bool
    xe_vram_pin: VramPinRule
    # TTM (§9)
    ttm_desired_fallback: bool
    ttm_propagate_enospc_available: bool
    # PCI P2PDMA (§8)
    p2pdma_whitelist_root_port: bool  # v5.19: the whitelist also sees a Root Port at any devfn
    p2pdma_whitelist: P2pdmaWhitelistRelease  # the release's host-bridge table (K-133..K-135)
    # cgroup
    dmem: bool
    # after the 2026 specification (kernel.md §13)
    vfio_dmabuf: VfioDmabuf
    iommufd_dmabuf: bool  # IOMMU_IOAS_MAP_FILE takes VFIO dma-bufs (6.19)
    iommufd_dmabuf_pin: bool  # iommufd calls dma_buf_pin before the VFIO check (7.1)
    rdma_dmabuf_export: bool  # UVERBS_OBJECT_DMABUF: RDMA exports its mmap entries (7.0)
    dmem_pool_refcount: bool  # 6.19-rc8: pools refcounted, unregister with charges is safe
    dmem_peak: bool  # dmem.peak (queued for 7.3)
    dmem_protected_alloc: bool  # protection-aware TTM allocation and eviction (queued, 7.3)
    vfio_dmabuf_revoke_ioctl: bool  # VFIO_DEVICE_PCI_DMABUF_REVOKE (RFC under review)
    # configuration switches independent of the preset (§1.5)
    dmabuf_debug: bool = False
    dma_api_debug: bool = False
    pci_p2pdma: bool = True
    umem_pinned_double_unpin: bool = False

    @property
    def pin_at_map(self) -> bool:
        """True for the families without sg_table caching (6.16 and 7.1)."""
        return self.family is not CoreFamily.CACHING

    @property
    def released(self) -> bool:
        """False for ``next``: queued work and RFCs, not a kernel anyone runs."""
        return self.status is ProfileStatus.RELEASED

    @property
    def move_notify_name(self) -> str:
        """The exporter's notification function in this release."""
        return "dma_buf_invalidate_mappings" if self.invalidate_mappings else "dma_buf_move_notify"

    def with_(self, **changes: Any) -> KernelProfile:
        """Return a copy with configuration switches (:data:`CONFIG_SWITCHES`) changed.

        Raises ``ValueError`` naming the switch for unknown switches, fields that are release
        facts rather than configuration (``family``, ``version`` ...), wrong types, or a switch
        the release does not have (``move_notify=False`` in 7.1, where the option was removed).
        """
        for key, value in changes.items():
            if key not in CONFIG_SWITCHES:
                raise ValueError(
                    f"kernel profile {self.name}: unknown switch {key!r}; "
                    f"configuration switches are {', '.join(CONFIG_SWITCHES)}"
                )
            current = getattr(self, key)
            if type(value) is not type(current):
                raise ValueError(
                    f"kernel profile {self.name}: switch {key!r} expects "
                    f"{type(current).__name__}, found {value!r}"
                )
        if (
            "move_notify" in changes
            and not self.move_notify_is_option
            and changes["move_notify"] is not True
        ):
            raise ValueError(
                f"kernel profile {self.name}: CONFIG_DMABUF_MOVE_NOTIFY was removed and is "
                "always on; move_notify=False is not possible"
            )
        if changes.get("dmem") is True and not self.dmem:
            raise ValueError(
                f"kernel profile {self.name}: the release has no cgroup dmem controller "
                "(CONFIG_CGROUP_DMEM came in 6.14); dmem=True is not possible"
            )
        return dataclasses.replace(self, **changes)


CONFIG_SWITCHES = (
    "move_notify",
    "dmem",
    "dmabuf_debug",
    "dma_api_debug",
    "pci_p2pdma",
    "umem_pinned_double_unpin",
)
"""Switches a user may change on top of a preset (``kernel-semantics.md`` §1.5)."""

PRESETS_FILE = "profiles.toml"
"""The preset table, next to this module: data, read once at import by :func:`load_presets`."""


def _field_value(where: str, key: str, hint: Any, value: object) -> object:
    """``value`` of field ``key`` as ``KernelProfile`` types it: enums by member name,
    ``version`` a pair of ints, switches ``bool``."""
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        if isinstance(value, str) and value in hint.__members__:
            return hint[value]
        expected = f"one of {', '.join(hint.__members__)}"
    elif hint == tuple[int, int]:
        if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
            return (value[0], value[1])
        expected = "[major, minor]"
    elif isinstance(hint, type) and type(value) is hint:
        return value
    else:
        expected = getattr(hint, "__name__", str(hint))
    raise ValueError(f"{PRESETS_FILE} {where}: {key} expects {expected}, found {value!r}")


def load_presets(text: str) -> dict[str, KernelProfile]:
    """Read the preset table (the text of :data:`PRESETS_FILE`) into profiles, in file order.

    A table's ``extends`` names the ``[template.*]`` it builds on; what it sets replaces the
    template's value. Raises ``ValueError`` naming the table and field for an unknown field, a
    value of the wrong type, an unknown template or a field left unset.
    """
    data = tomllib.loads(text)
    templates: dict[str, dict[str, Any]] = data.get("template", {})
    hints = typing.get_type_hints(KernelProfile)

    def resolved(where: str, table: dict[str, Any], seen: tuple[str, ...] = ()) -> dict[str, Any]:
        own = {k: v for k, v in table.items() if k != "extends"}
        base = table.get("extends")
        if base is None:
            return own
        if base not in templates or base in seen:
            raise ValueError(f"{PRESETS_FILE} {where}: extends unknown template {base!r}")
        return {**resolved(f"[template.{base}]", templates[base], (*seen, base)), **own}

    presets: dict[str, KernelProfile] = {}
    for name, table in data.get("preset", {}).items():
        where = f'[preset."{name}"]'
        fields: dict[str, Any] = {"name": name}
        for key, value in resolved(where, table).items():
            if key not in hints or key == "name":
                raise ValueError(f"{PRESETS_FILE} {where}: unknown field {key!r}")
            fields[key] = _field_value(where, key, hints[key], value)
        missing = [f.name for f in dataclasses.fields(KernelProfile) if f.name not in fields]
        required = [m for m in missing if m not in CONFIG_SWITCHES]
        if required:
            raise ValueError(f"{PRESETS_FILE} {where}: {', '.join(required)} not set")
        presets[name] = KernelProfile(**fields)
    return presets


PRESETS: dict[str, KernelProfile] = load_presets(
    resources.files("pinlab.kernel").joinpath(PRESETS_FILE).read_text(encoding="utf-8")
)
"""The presets of ``kernel-semantics.md`` §1.3 by name, as :data:`PRESETS_FILE` lists them."""

DEFAULT_PROFILE = "6.16"

NEXT_SOURCES: dict[str, str] = {
    "p2pdma_whitelist": 'merged for 7.2: "PCI/P2PDMA: Add Intel QAT, DSA, IAA devices to '
    'whitelist" (Lukas Wunner, 2026-06-04), 0ba76b19fd4c; also in 7.1.3',
    "dmem_peak": 'queued for 7.3: "[PATCH v3] cgroup/dmem: introduce a peak file" '
    "(Thadeu Lima de Souza Cascardo, 2026-05-14), drm-misc-next for 7.3",
    "dmem_protected_alloc": 'queued for 7.3: "[PATCH v6 0/6] cgroup/dmem,drm/ttm: Improve '
    'protection in contended cases" (Natalie Vock, 2026-03-13)',
    "vfio_dmabuf_revoke_ioctl": 'RFC under review: "[PATCH v2 0/9] vfio/pci: Add mmap() for '
    'DMABUFs" (Matt Evans, 2026-05-27), VFIO_DEVICE_PCI_DMABUF_REVOKE',
}
"""Why ``next`` differs from ``7.1``, switch by switch: work merged after 7.1, queued work or an
open RFC, never a release. (The pin-limit RFCs are opt-in policies instead,
``pinlab.policy.proposals``.)"""


def get_profile(name: str = DEFAULT_PROFILE, **switches: Any) -> KernelProfile:
    """Return preset ``name`` with optional configuration ``switches`` applied.

    Raises ``ValueError`` with the list of presets for an unknown name.
    """
    try:
        base = PRESETS[str(name)]
    except KeyError:
        raise ValueError(
            f"unknown kernel profile {name!r} (expected one of {', '.join(PRESETS)})"
        ) from None
    return base.with_(**switches) if switches else base
