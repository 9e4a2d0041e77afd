"""The pydantic field types of :mod:`pinlab.units`: validate a unit string, serialise it back
exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError

from pinlab.errors import show_value
from pinlab.units.parse import (
    _RATE_EXPECTED,
    _TIME_EXPECTED,
    _TPB_EXPECTED,
    UnitError,
    _is_number,
    _number_or_strict,
    _parse_pci_id,
    parse_factor,
    parse_fraction,
    parse_line_rate,
    parse_rate,
    parse_size,
    parse_time,
    parse_time_per_byte,
)
from pinlab.units.text import (
    _exact_pci_id,
    exact_line_rate,
    exact_rate,
    exact_size,
    exact_time,
    exact_time_per_byte,
)

# -- pydantic types ----------------------------------------------------------------------------


def unit_validator(
    parse: Callable[[object], Any], *, strict_numbers: bool = False
) -> Callable[[object, ValidationInfo], Any]:
    """A ``BeforeValidator`` function from ``parse``: a :class:`UnitError` becomes the pydantic
    error ``pinlab_unit``, whose message is already ``expected ..., found ...`` (what
    :func:`pinlab.errors.config_error` shows). With ``strict_numbers`` a bare number is refused
    under :data:`STRICT_UNITS`."""

    def validate(value: object, info: ValidationInfo) -> Any:
        try:
            if strict_numbers and _is_number(value):
                _number_or_strict(value, _expected_of(parse), info)
            return parse(value)
        except UnitError as e:
            raise PydanticCustomError(
                "pinlab_unit",
                "expected {expected}, found {found}{detail}",
                {
                    "expected": e.expected,
                    "found": show_value(e.found),
                    "detail": f" ({e.detail})" if e.detail else "",
                },
            ) from None

    return validate


def _expected_of(parse: Callable[[object], Any]) -> str:
    table: dict[Callable[[object], Any], str] = {
        parse_rate: _RATE_EXPECTED,
        parse_line_rate: _RATE_EXPECTED,
        parse_time: _TIME_EXPECTED,
        parse_time_per_byte: _TPB_EXPECTED,
        _signed_time: _TIME_EXPECTED,
    }
    return table.get(parse, "a value with a unit")


def _signed_time(value: object) -> float:
    return parse_time(value, signed=True)


_UNIT_SCHEMA = {"anyOf": [{"type": "string"}, {"type": "number"}]}

Size = Annotated[
    int,
    BeforeValidator(unit_validator(parse_size)),
    PlainSerializer(exact_size, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["32GiB", "512KiB", "4096"]}),
]
"""Bytes (exact ``int``); written ``"32GiB"``, ``"1.5GB"`` or a number of bytes."""

Rate = Annotated[
    float,
    BeforeValidator(unit_validator(parse_rate, strict_numbers=True)),
    PlainSerializer(exact_rate, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["25GB/s", "12.5GiB/s", "100Gbps"]}),
]
"""Bytes per second (``float`` > 0); written ``"25GB/s"`` or ``"100Gbps"``."""

LineRate = Annotated[
    float,
    BeforeValidator(unit_validator(parse_line_rate, strict_numbers=True)),
    PlainSerializer(exact_line_rate, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["100Gbps", "400Gbps"]}),
]
"""A NIC line rate in bytes per second, serialised in bits per second (``"100Gbps"``)."""

Duration = Annotated[
    float,
    BeforeValidator(unit_validator(parse_time, strict_numbers=True)),
    PlainSerializer(exact_time, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["1.75us", "6ms", "2s"]}),
]
"""Seconds (``float`` >= 0); written ``"1.75us"``, ``"1.75µs"``, ``"6 ms"``."""

SignedDuration = Annotated[
    float,
    BeforeValidator(unit_validator(_signed_time, strict_numbers=True)),
    PlainSerializer(exact_time, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["-0.5us", "0.5us"]}),
]
"""Seconds, may be negative (a signed delta of a time)."""

TimePerByte = Annotated[
    float,
    BeforeValidator(unit_validator(parse_time_per_byte, strict_numbers=True)),
    PlainSerializer(exact_time_per_byte, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["0.06ns/B", "98ms/GB"]}),
]
"""Seconds per byte; written ``"0.06ns/B"`` or ``"260ms/GiB"``."""

Fraction = Annotated[
    float,
    BeforeValidator(unit_validator(parse_fraction)),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": [0.8, "80%"]}),
]
"""A number in [0, 1]; written ``0.8`` or ``"80%"``."""

Factor = Annotated[
    float,
    BeforeValidator(unit_validator(parse_factor)),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": [7, "7x"]}),
]
"""A non-negative multiplier; written ``7`` or ``"7x"``."""

PciId = Annotated[
    int,
    BeforeValidator(unit_validator(_parse_pci_id)),
    PlainSerializer(_exact_pci_id, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["0x8086", "0x2030"]}),
]
"""A 16-bit PCI vendor or device ID; written ``0x8086`` (TOML hex) or ``"0x8086"``."""
