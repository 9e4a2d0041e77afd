"""The kernel presets (``kernel-semantics.md`` §1.3) are exactly the recorded values.

``data/profile_presets.json`` records every field of every preset, enums by class and member
name, so a change to the preset table -- or to how it is read -- shows here field by field.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pinlab.kernel.profile import (
    DEFAULT_PROFILE,
    PRESETS,
    PRESETS_FILE,
    KernelProfile,
    get_profile,
    load_presets,
)

SNAPSHOT = Path(__file__).parent / "data" / "profile_presets.json"
PRESETS_TEXT = resources.files("pinlab.kernel").joinpath(PRESETS_FILE).read_text(encoding="utf-8")


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


def test_the_preset_table_is_read_with_templates_and_typed_fields() -> None:
    """§1.3 table semantics: a preset overrides its template; enums by name, version a pair."""
    text = PRESETS_TEXT.replace('[preset."6.12"]\nextends = "caching"\nversion = [6, 12]', "")
    loaded = load_presets(text + '\n[preset.x]\nextends = "pin-at-map"\nversion = [9, 9]\n')
    assert "6.12" not in loaded
    assert loaded["x"] == dataclasses.replace(PRESETS["6.16"], name="x", version=(9, 9))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("extends = 'revoke'\nversion = [9, 9]\nbogus = true", "unknown field 'bogus'"),
        (
            "extends = 'revoke'\nversion = [9, 9]\nfamily = 'caching'",
            "family expects one of CACHING",
        ),
        ("extends = 'revoke'\nversion = [9]", "version expects [major, minor], found [9]"),
        ("extends = 'revoke'\nversion = [9, 9]\ndmem = 1", "dmem expects bool, found 1"),
        ("extends = 'nope'\nversion = [9, 9]", "extends unknown template 'nope'"),
    ],
)
def test_a_bad_preset_table_names_the_table_and_field(body: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f'{PRESETS_FILE} [preset."x"]: {message}')):
        load_presets(f"{PRESETS_TEXT}\n[preset.x]\n{body}\n")


def test_a_preset_without_a_template_lists_the_fields_it_leaves_unset() -> None:
    with pytest.raises(ValueError, match=r'\[preset\."x"\]: version, status, family, .* not set'):
        load_presets("[preset.x]\ndmem = true\n")
