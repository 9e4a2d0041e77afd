"""``KernelProfile``: the switches where Linux's behaviour changed between releases.

Presets ``5.16``, ``6.12``, ``6.14``, ``6.16`` (default), ``6.19`` and ``7.1`` are releases and
follow the switch table of ``docs/semantics/kernel.md`` §1.3; ``next`` is **not a release**: it
is 7.1 plus the work queued after it (the 7.3 dmem series) and open RFCs, labelled by
:attr:`KernelProfile.status` and listed per switch in :data:`NEXT_SOURCES`. Configuration
switches that are independent of the preset (§1.5:
``CONFIG_DMABUF_MOVE_NOTIFY``, ``CONFIG_DMABUF_DEBUG``, ``CONFIG_DMA_API_DEBUG``,
``CONFIG_PCI_P2PDMA``, the umem double-unpin reproduction) can be overridden per run with
:meth:`KernelProfile.with_`.

Everything here is data: the code in ``pinlab.kernel`` and ``pinlab.drivers`` reads these
fields instead of comparing version numbers, so every behavioural fork is named once.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any


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
        return dataclasses.replace(self, **changes)


CONFIG_SWITCHES = (
    "move_notify",
    "dmabuf_debug",
    "dma_api_debug",
    "pci_p2pdma",
    "umem_pinned_double_unpin",
)
"""Switches a user may change on top of a preset (``kernel-semantics.md`` §1.5)."""

_CACHING: dict[str, Any] = dict(
    status=ProfileStatus.RELEASED,
    family=CoreFamily.CACHING,
    cache_sgt_at_attach=True,
    cache_sgt_mapping_flag=True,
    unlocked_variants=True,
    common_locking=True,
    attachment_has_sgt=True,
    fence_model=FenceModel.USAGES,
    bufinfo_fence_format=FenceFormat.CLASSIC,
    move_notify=False,
    move_notify_is_option=True,
    invalidate_mappings=False,
    attach_revocable=False,
    umem_pinned_warn_callback=True,
    umem_revocable_pinned_ops=False,
    amdgpu_vram_pin=VramPinRule.NEVER,
    amdgpu_p2p_requires_runtime_pm=False,
    xe_available=True,
    xe_vram_pin=VramPinRule.NEVER,
    ttm_desired_fallback=True,
    ttm_propagate_enospc_available=False,
    dmem=False,
    vfio_dmabuf=VfioDmabuf.ABSENT,
    iommufd_dmabuf=False,
    iommufd_dmabuf_pin=False,
    rdma_dmabuf_export=False,
    dmem_pool_refcount=False,
    dmem_peak=False,
    dmem_protected_alloc=False,
    vfio_dmabuf_revoke_ioctl=False,
)

_PIN_AT_MAP: dict[str, Any] = {
    **_CACHING,
    "family": CoreFamily.PIN_AT_MAP,
    "cache_sgt_at_attach": False,
    "cache_sgt_mapping_flag": False,
    "attachment_has_sgt": False,
    "amdgpu_vram_pin": VramPinRule.IF_P2P_AND_MN,
    "dmem": True,
}

_REVOKE: dict[str, Any] = {
    **_PIN_AT_MAP,
    "family": CoreFamily.REVOKE,
    "bufinfo_fence_format": FenceFormat.CONTEXT_FIRST,
    "move_notify": True,
    "move_notify_is_option": False,
    "invalidate_mappings": True,
    "attach_revocable": True,
    "umem_pinned_warn_callback": False,
    "umem_revocable_pinned_ops": True,
    "amdgpu_vram_pin": VramPinRule.IF_P2P,
    "amdgpu_p2p_requires_runtime_pm": True,
    "xe_vram_pin": VramPinRule.IF_P2P,
    "ttm_propagate_enospc_available": True,
    "vfio_dmabuf": VfioDmabuf.REVOCABLE_ONLY,
    "iommufd_dmabuf": True,
    "iommufd_dmabuf_pin": True,
    "rdma_dmabuf_export": True,
    "dmem_pool_refcount": True,
}

PRESETS: dict[str, KernelProfile] = {
    "5.16": KernelProfile(
        name="5.16",
        version=(5, 16),
        **{
            **_CACHING,
            "common_locking": False,
            "unlocked_variants": False,
            "fence_model": FenceModel.EXCLUSIVE_SHARED,
            "bufinfo_fence_format": FenceFormat.EXCLUSIVE_SHARED,
            "xe_available": False,
            "ttm_desired_fallback": False,
        },
    ),
    "6.12": KernelProfile(name="6.12", version=(6, 12), **_CACHING),
    "6.14": KernelProfile(name="6.14", version=(6, 14), **{**_CACHING, "dmem": True}),
    "6.16": KernelProfile(name="6.16", version=(6, 16), **_PIN_AT_MAP),
    "6.19": KernelProfile(
        name="6.19",
        version=(6, 19),
        **{
            **_PIN_AT_MAP,
            "xe_vram_pin": VramPinRule.IF_P2P_AND_MN,
            "vfio_dmabuf": VfioDmabuf.PIN_REFUSED,
            "iommufd_dmabuf": True,
            "dmem_pool_refcount": True,
        },
    ),
    "7.1": KernelProfile(name="7.1", version=(7, 1), **_REVOKE),
    "next": KernelProfile(
        name="next",
        version=(7, 3),
        **{
            **_REVOKE,
            "status": ProfileStatus.QUEUED,
            "dmem_peak": True,
            "dmem_protected_alloc": True,
            "vfio_dmabuf_revoke_ioctl": True,
        },
    ),
}

DEFAULT_PROFILE = "6.16"

NEXT_SOURCES: dict[str, str] = {
    "dmem_peak": 'queued for 7.3: "[PATCH v3] cgroup/dmem: introduce a peak file" '
    "(Thadeu Lima de Souza Cascardo, 2026-05-14), drm-misc-next for 7.3",
    "dmem_protected_alloc": 'queued for 7.3: "[PATCH v6 0/6] cgroup/dmem,drm/ttm: Improve '
    'protection in contended cases" (Natalie Vock, 2026-03-13)',
    "vfio_dmabuf_revoke_ioctl": 'RFC under review: "[PATCH v2 0/9] vfio/pci: Add mmap() for '
    'DMABUFs" (Matt Evans, 2026-05-27), VFIO_DEVICE_PCI_DMABUF_REVOKE',
}
"""Why ``next`` differs from ``7.1``, switch by switch: queued work or an open RFC, never a
release. (The pin-limit RFCs are opt-in policies instead, ``pinlab.policy.proposals``.)"""


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
