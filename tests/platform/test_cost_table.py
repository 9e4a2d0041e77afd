"""The cost model's rows (``cost-model.md`` §2–§8) are exactly the recorded ones.

``data/cost_rows.json`` records every row: its key, field type (annotation and unit type), the
default as written (the doc's units), its value in base units and its metadata (unit, section,
description, source, sweep, choices, marker, confidence). A change to a row -- or to how the
table is read into ``CostModel`` -- shows here row by row.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pinlab import units
from pinlab.platform.cost import TABLE_FILE, CostModel, _check_table, _row_field, parameters

SNAPSHOT = Path(__file__).parent / "data" / "cost_rows.json"
ROW = {"unit": "us", "section": "§1", "desc": "d", "source": "s"}

_UNIT_TYPES: dict[int, str] = {}
for _name in dir(units):
    _t = getattr(units, _name)
    if typing.get_origin(_t) is typing.Annotated:
        for _m in _t.__metadata__:
            if getattr(_m, "func", None) is not None:
                _UNIT_TYPES.setdefault(id(_m.func), _name)


def encode(value: object) -> Any:
    if isinstance(value, tuple | list):
        return {type(value).__name__: [encode(v) for v in value]}
    assert value is None or type(value) in (bool, int, float, str), f"unexpected {value!r}"
    return value


def field_type(field: FieldInfo) -> str:
    """The field's annotation and the :mod:`pinlab.units` types of its validators."""
    names = [
        _UNIT_TYPES.get(id(getattr(m, "func", None)), type(m).__name__) for m in field.metadata
    ]
    return re.sub(r" at 0x[0-9a-f]+", "", repr(field.annotation)) + " " + ",".join(names)


def _fields(model: type[Any], prefix: str = "") -> dict[str, FieldInfo]:
    out: dict[str, FieldInfo] = {}
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.update(_fields(ann, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = field
    return out


def rows() -> list[dict[str, Any]]:
    fields = _fields(CostModel)
    return [
        {
            "key": p.key,
            "type": field_type(fields[p.key]),
            "written": encode(fields[p.key].default),
            "value": encode(p.value),
            "unit": p.unit,
            "section": p.section,
            "description": p.description,
            "source": p.source,
            "sweep": encode(p.sweep),
            "choices": encode(p.choices),
            "marker": p.marker,
            "confidence": p.confidence,
        }
        for p in parameters()
    ]


def test_every_cost_row_is_the_recorded_one() -> None:
    recorded = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    found = rows()
    assert [r["key"] for r in found] == [r["key"] for r in recorded]
    for got, want in zip(found, recorded, strict=True):
        assert got == want, got["key"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({**ROW, "bogus": 1}, "[x.y]: unknown entry 'bogus'"),
        ({"unit": "B", "section": "§1"}, "[x.y]: desc, source not set"),
    ],
)
def test_a_bad_row_names_the_row_and_entry(row: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{TABLE_FILE} {message}")):
        _row_field("x.y", row)


def test_a_row_no_class_reads_is_refused() -> None:
    read = {p.key for p in parameters()}
    _check_table({"pcie": {"gen3": {"raw": ROW}}}, read)
    with pytest.raises(ValueError, match=re.escape(f"{TABLE_FILE} [pcie.gen3.bogus]: expected")):
        _check_table({"pcie": {"gen3": {"raw": ROW, "bogus": ROW}}}, read)
    with pytest.raises(ValueError, match=re.escape(f"{TABLE_FILE} [x.y]: read by a class")):
        _check_table({}, read | {"x.y"})


def test_a_row_reads_as_a_field_with_its_metadata() -> None:
    field = _row_field(
        "x.y", {**ROW, "default": "2us", "sweep": ["1us", "3us"], "marker": "derived"}
    )
    assert field.default == "2us"
    assert field.json_schema_extra == {
        "unit": "us",
        "section": "§1",
        "source": "s",
        "sweep": ["1us", "3us"],
        "marker": "derived",
        "confidence": "medium",
    }
