"""The kernel presets (``kernel-semantics.md`` §1.3) are exactly the recorded values.

``data/profile_presets.json`` records every field of every preset, enums by class and member
name, so a change to the preset table -- or to how it is read -- shows here field by field.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

from pinlab.kernel.profile import DEFAULT_PROFILE, PRESETS, KernelProfile, get_profile

SNAPSHOT = Path(__file__).parent / "data" / "profile_presets.json"


def encode(value: object) -> Any:
    if isinstance(value, enum.Enum):
        return {"enum": type(value).__name__, "name": value.name}
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    assert type(value) in (bool, int, str), f"unexpected field value {value!r}"
    return value


def test_presets_are_the_recorded_values_field_by_field() -> None:
    recorded = json.loads(SNAPSHOT.read_text())
    assert list(PRESETS) == list(recorded)  # the same presets, in the same order
    for name, profile in PRESETS.items():
        assert isinstance(profile, KernelProfile)
        fields = {f.name: encode(getattr(profile, f.name)) for f in dataclasses.fields(profile)}
        assert fields == recorded[name], name


def test_default_preset_is_6_16_and_get_profile_returns_the_preset_itself() -> None:
    assert DEFAULT_PROFILE == "6.16"
    assert get_profile() is PRESETS["6.16"]
    assert all(get_profile(name) is p for name, p in PRESETS.items())
