"""Kernel profiles: presets, the §1.3 switch table and ``with_`` overrides (§1.2-§1.5).

Also checks that the profile switches actually steer the dma-buf core the way the checklist
tags say (K-3, K-13, K-26, K-34, K-69), parametrized across presets and MN on/off.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pinlab.kernel.dma_buf import dma_buf_attach_revocable
from pinlab.kernel.errno import NotInProfile
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci_ids import P2pdmaWhitelistRelease
from pinlab.kernel.profile import (
    DEFAULT_PROFILE,
    NEXT_SOURCES,
    PRESETS,
    CoreFamily,
    FenceFormat,
    FenceModel,
    KernelProfile,
    ProfileStatus,
    VfioDmabuf,
    VramPinRule,
    get_profile,
)
from tests.kernel.test_dma_buf_core import (
    ALL,
    CACHING,
    PIN_AT_MAP,
    REVOKE,
    Rig,
    map_locked,
    unmap_locked,
)

# §1.3, one row per switch: preset -> value (presets in ALL's order:
# 5.16, 6.12, 6.14, 6.16, 6.19, 7.1, next)


def _row(*values: Any) -> dict[str, Any]:
    return dict(zip(ALL, values, strict=True))


NO, YES = False, True
SWITCH_TABLE: dict[str, dict[str, Any]] = {
    "status": {
        **dict.fromkeys(ALL[:-1], ProfileStatus.RELEASED),
        "next": ProfileStatus.QUEUED,
    },
    "family": {
        **dict.fromkeys(CACHING, CoreFamily.CACHING),
        "6.16": CoreFamily.PIN_AT_MAP,
        "6.19": CoreFamily.PIN_AT_MAP,
        "7.1": CoreFamily.REVOKE,
        "next": CoreFamily.REVOKE,
    },
    "cache_sgt_at_attach": _row(YES, YES, YES, NO, NO, NO, NO),
    "cache_sgt_mapping_flag": _row(YES, YES, YES, NO, NO, NO, NO),
    "common_locking": _row(NO, YES, YES, YES, YES, YES, YES),
    "unlocked_variants": _row(NO, YES, YES, YES, YES, YES, YES),
    "attachment_has_sgt": _row(YES, YES, YES, NO, NO, NO, NO),
    "fence_model": {
        "5.16": FenceModel.EXCLUSIVE_SHARED,
        **dict.fromkeys(ALL[1:], FenceModel.USAGES),
    },
    "bufinfo_fence_format": {
        "5.16": FenceFormat.EXCLUSIVE_SHARED,
        **dict.fromkeys(("6.12", "6.14", "6.16", "6.19"), FenceFormat.CLASSIC),
        **dict.fromkeys(REVOKE, FenceFormat.CONTEXT_FIRST),
    },
    "move_notify": _row(NO, NO, NO, NO, NO, YES, YES),
    "move_notify_is_option": _row(YES, YES, YES, YES, YES, NO, NO),
    "invalidate_mappings": _row(NO, NO, NO, NO, NO, YES, YES),
    "attach_revocable": _row(NO, NO, NO, NO, NO, YES, YES),
    "umem_pinned_warn_callback": _row(YES, YES, YES, YES, YES, NO, NO),
    "umem_revocable_pinned_ops": _row(NO, NO, NO, NO, NO, YES, YES),
    "amdgpu_vram_pin": {
        **dict.fromkeys(CACHING, VramPinRule.NEVER),
        "6.16": VramPinRule.IF_P2P_AND_MN,
        "6.19": VramPinRule.IF_P2P_AND_MN,
        **dict.fromkeys(REVOKE, VramPinRule.IF_P2P),
    },
    "amdgpu_p2p_requires_runtime_pm": _row(NO, NO, NO, NO, NO, YES, YES),
    "xe_available": _row(NO, YES, YES, YES, YES, YES, YES),
    "xe_vram_pin": {  # §1.6: df636bf28366 is in 6.19 (MN condition), 7.1 drops the condition
        **dict.fromkeys(("5.16", "6.12", "6.14", "6.16"), VramPinRule.NEVER),
        "6.19": VramPinRule.IF_P2P_AND_MN,
        **dict.fromkeys(REVOKE, VramPinRule.IF_P2P),
    },
    "ttm_desired_fallback": _row(NO, YES, YES, YES, YES, YES, YES),
    "ttm_propagate_enospc_available": _row(NO, NO, NO, NO, NO, YES, YES),
    "p2pdma_whitelist_root_port": _row(NO, YES, YES, YES, YES, YES, YES),  # K-132 (v5.19)
    "p2pdma_whitelist": {  # K-133 (v5.18), K-134 (v7.1), K-135 (v7.2, so only next)
        "5.16": P2pdmaWhitelistRelease.V5_17,
        **dict.fromkeys(("6.12", "6.14", "6.16", "6.19"), P2pdmaWhitelistRelease.V5_18),
        "7.1": P2pdmaWhitelistRelease.V7_1,
        "next": P2pdmaWhitelistRelease.V7_2,
    },
    "dmem": _row(NO, NO, YES, YES, YES, YES, YES),
    # kernel.md §13
    "vfio_dmabuf": {
        **dict.fromkeys(("5.16", "6.12", "6.14", "6.16"), VfioDmabuf.ABSENT),
        "6.19": VfioDmabuf.PIN_REFUSED,
        **dict.fromkeys(REVOKE, VfioDmabuf.REVOCABLE_ONLY),
    },
    "iommufd_dmabuf": _row(NO, NO, NO, NO, YES, YES, YES),
    "iommufd_dmabuf_pin": _row(NO, NO, NO, NO, NO, YES, YES),
    "rdma_dmabuf_export": _row(NO, NO, NO, NO, NO, YES, YES),
    "dmem_pool_refcount": _row(NO, NO, NO, NO, YES, YES, YES),
    "dmem_peak": _row(NO, NO, NO, NO, NO, NO, YES),
    "dmem_protected_alloc": _row(NO, NO, NO, NO, NO, NO, YES),
    "vfio_dmabuf_revoke_ioctl": _row(NO, NO, NO, NO, NO, NO, YES),
    # §1.5: preset-independent configuration switches default off (P2PDMA on)
    "dmabuf_debug": dict.fromkeys(ALL, False),
    "dma_api_debug": dict.fromkeys(ALL, False),
    "pci_p2pdma": dict.fromkeys(ALL, True),
    "umem_pinned_double_unpin": dict.fromkeys(ALL, False),
}


def test_presets_and_default() -> None:
    """§1.2: seven presets; 6.16 is the default; each preset carries its own name/version;
    only ``next`` is not a release (queued work and an open RFC)."""
    assert tuple(PRESETS) == ALL
    assert DEFAULT_PROFILE == "6.16"
    assert get_profile() is PRESETS["6.16"]
    for name in ALL:
        profile = get_profile(name)
        assert profile is PRESETS[name]
        assert profile.name == name
        assert profile.released is (name != "next")
        if profile.released:
            assert ".".join(map(str, profile.version)) == name
    assert PRESETS["next"].version > PRESETS["7.1"].version
    assert Kernel().profile.name == "6.16"
    assert Kernel("7.1").profile is PRESETS["7.1"]
    custom = get_profile("6.12", dmabuf_debug=True)
    assert Kernel(custom).profile is custom


def test_next_differs_from_7_1_only_where_a_source_is_named() -> None:
    """``next`` is not a release: every switch in which it differs from 7.1 names the series
    merged after 7.1, queued, or an open RFC it comes from -- the 7.2 P2PDMA whitelist (K-135),
    dmem.peak (K-125), protection-aware eviction (K-126), the VFIO revoke ioctl RFC (K-104) --
    and nothing else."""
    differs = {
        f.name
        for f in dataclasses.fields(KernelProfile)
        if f.name not in ("name", "version", "status")
        and getattr(PRESETS["next"], f.name) != getattr(PRESETS["7.1"], f.name)
    }
    assert differs == set(NEXT_SOURCES)
    for source in NEXT_SOURCES.values():
        assert source.startswith(("merged for 7.2:", "queued for 7.3:", "RFC under review:"))
        assert '"' in source and "20" in source  # a quoted subject and a date


@pytest.mark.parametrize("name", ["6.15", "5.10", "", "latest", "7.0"])
def test_unknown_preset_lists_the_presets(name: str) -> None:
    """§1.2: an unknown name is a ValueError naming the valid presets."""
    with pytest.raises(ValueError, match="unknown kernel profile") as exc:
        get_profile(name)
    for preset in ALL:
        assert preset in str(exc.value)


@pytest.mark.parametrize("switch", list(SWITCH_TABLE))
def test_switch_table(switch: str) -> None:
    """§1.3/§1.5: every preset's switch values."""
    for name, expected in SWITCH_TABLE[switch].items():
        assert getattr(get_profile(name), switch) == expected, (name, switch)


def test_switch_table_covers_every_switch() -> None:
    """Every KernelProfile field except name/version is in the table above."""
    fields = {f.name for f in dataclasses.fields(KernelProfile)} - {"name", "version"}
    assert fields == set(SWITCH_TABLE)


@pytest.mark.parametrize("name", ALL)
def test_derived_properties(name: str) -> None:
    """K-36/K-69: pin_at_map is the ≥6.16 families; the notification's name is 7.1's
    dma_buf_invalidate_mappings or the older dma_buf_move_notify."""
    profile = get_profile(name)
    assert profile.pin_at_map is (name in PIN_AT_MAP)
    expected = "dma_buf_invalidate_mappings" if name in REVOKE else "dma_buf_move_notify"
    assert profile.move_notify_name == expected


@pytest.mark.parametrize("name", ("5.16", "6.12", "6.14", "6.16", "6.19"))
def test_mn_override_before_7_1(name: str) -> None:
    """§1.5: MN is an option (default n) before 7.1; overriding returns a new profile and
    leaves the preset untouched."""
    on = get_profile(name, move_notify=True)
    assert on.move_notify is True
    assert on.name == name and on.family is PRESETS[name].family
    assert PRESETS[name].move_notify is False
    assert get_profile(name, move_notify=False) == PRESETS[name]
    assert PRESETS[name].with_(move_notify=True) == on


def test_k69_mn_cannot_be_turned_off_in_7_1() -> None:
    """K-69/§1.4: the Kconfig option is gone in 7.1; move_notify=False is refused and
    move_notify=True is accepted (it is the only value)."""
    with pytest.raises(ValueError, match="always on"):
        get_profile("7.1", move_notify=False)
    with pytest.raises(ValueError, match="always on"):
        PRESETS["7.1"].with_(move_notify=False)
    assert get_profile("7.1", move_notify=True) == PRESETS["7.1"]


@pytest.mark.parametrize("name", ALL)
def test_with_unknown_switch(name: str) -> None:
    """An unknown switch is a ValueError naming it and listing the valid ones."""
    with pytest.raises(ValueError, match="unknown switch 'move_notfy'") as exc:
        get_profile(name, move_notfy=True)
    assert "move_notify" in str(exc.value)


@pytest.mark.parametrize(
    ("switch", "value"),
    [
        ("move_notify", 1),
        ("move_notify", "yes"),
        ("dmabuf_debug", None),
        ("pci_p2pdma", 0),
        ("umem_pinned_double_unpin", "true"),
    ],
)
def test_with_wrong_type(switch: str, value: object) -> None:
    """A value of the wrong type is a ValueError naming the switch and the expected type."""
    with pytest.raises(ValueError, match=f"switch '{switch}' expects"):
        get_profile("6.16", **{switch: value})


def test_profiles_are_frozen_and_hashable() -> None:
    """Profiles are immutable data; overrides never leak into the presets."""
    profile = get_profile("6.16")
    with pytest.raises(dataclasses.FrozenInstanceError):
        profile.move_notify = True  # type: ignore[misc]
    debug = profile.with_(dmabuf_debug=True, dma_api_debug=True, pci_p2pdma=False)
    assert (debug.dmabuf_debug, debug.dma_api_debug, debug.pci_p2pdma) == (True, True, False)
    assert {profile, debug, get_profile("6.16")} == {profile, debug}


# -- the switches steer the core -------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_k13_k12_static_importer_pin_lifetime_by_family(name: str) -> None:
    """K-13 (≤6.15) one pin from attach to detach; K-12/K-30 (≥6.16) one pin per live
    mapping, none at attach."""
    rig = Rig(name)
    attach = rig.static_attach()
    at_attach = rig.bo.pin_count
    sgts = [map_locked(attach) for _ in range(2)]
    during = rig.bo.pin_count
    for sgt in sgts:
        unmap_locked(attach, sgt)
    after = rig.bo.pin_count
    if name in CACHING:
        assert (at_attach, during, after) == (1, 1, 1)
        assert sgts[0] is sgts[1] is attach.sgt
    else:
        assert (at_attach, during, after) == (0, 2, 0)
        assert sgts[0] is not sgts[1]


@pytest.mark.parametrize(
    ("name", "mn"),
    [(name, mn) for name in ALL for mn in (False, True) if mn or name not in REVOKE],
)
def test_k26_k34_dynamic_importer_pins_per_map_iff_mn_off(name: str, mn: bool) -> None:
    """K-26/K-34: a dynamic importer of a dynamic exporter is pinned per map exactly when MN
    is off; 7.1 has MN forced on (K-69), so it never is."""
    rig = Rig(get_profile(name, move_notify=mn))
    attach = rig.dynamic_attach()
    map_locked(attach)
    assert rig.bo.pin_count == (0 if mn else 1)


@pytest.mark.parametrize("name", ALL)
def test_k69_revocable_helper_only_in_7_1(name: str) -> None:
    """K-69: dma_buf_attach_revocable follows the attach_revocable switch."""
    rig = Rig(name)
    attach = rig.dynamic_attach()
    if get_profile(name).attach_revocable:
        assert dma_buf_attach_revocable(attach)
    else:
        with pytest.raises(NotInProfile):
            dma_buf_attach_revocable(attach)


@pytest.mark.parametrize("field", ["family", "version", "cache_sgt_at_attach", "amdgpu_vram_pin"])
def test_with_refuses_release_facts(field: str) -> None:
    """Only configuration switches (kernel-semantics §1.5) can be overridden; release facts
    such as the core family cannot, so no inconsistent profile can be built."""
    with pytest.raises(ValueError, match=f"unknown switch '{field}'"):
        PRESETS["6.16"].with_(**{field: getattr(PRESETS["6.16"], field)})
