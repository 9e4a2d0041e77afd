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


def _unit_field(
    parse: Callable[[object], Any],
    examples: list[object],
    *,
    exact: Callable[[Any], str] | None = None,
    strict_numbers: bool = False,
) -> tuple[object, ...]:
    """The ``Annotated`` metadata of a unit field: validate with ``parse`` (see
    :func:`unit_validator`), serialise with ``exact`` (none: the value as it is) and show a
    string-or-number JSON schema with ``examples``. The tuple is unpacked into the
    ``Annotated`` form itself, so pydantic sees plain metadata -- in models, under
    ``validate_call`` and beneath further constraints such as ``Field(gt=0)``."""
    validator = BeforeValidator(unit_validator(parse, strict_numbers=strict_numbers))
    schema = WithJsonSchema({**_UNIT_SCHEMA, "examples": examples})
    if exact is None:
        return (validator, schema)
    return (validator, PlainSerializer(exact, return_type=str), schema)


Size = Annotated[int, *_unit_field(parse_size, ["32GiB", "512KiB", "4096"], exact=exact_size)]
"""Bytes (exact ``int``); written ``"32GiB"``, ``"1.5GB"`` or a number of bytes."""

Rate = Annotated[
    float,
    *_unit_field(
        parse_rate, ["25GB/s", "12.5GiB/s", "100Gbps"], exact=exact_rate, strict_numbers=True
    ),
]
"""Bytes per second (``float`` > 0); written ``"25GB/s"`` or ``"100Gbps"``."""

LineRate = Annotated[
    float,
    *_unit_field(
        parse_line_rate, ["100Gbps", "400Gbps"], exact=exact_line_rate, strict_numbers=True
    ),
]
"""A NIC line rate in bytes per second, serialised in bits per second (``"100Gbps"``)."""

Duration = Annotated[
    float,
    *_unit_field(parse_time, ["1.75us", "6ms", "2s"], exact=exact_time, strict_numbers=True),
]
"""Seconds (``float`` >= 0); written ``"1.75us"``, ``"1.75µs"``, ``"6 ms"``."""

SignedDuration = Annotated[
    float,
    *_unit_field(_signed_time, ["-0.5us", "0.5us"], exact=exact_time, strict_numbers=True),
]
"""Seconds, may be negative (a signed delta of a time)."""

TimePerByte = Annotated[
    float,
    *_unit_field(
        parse_time_per_byte,
        ["0.06ns/B", "98ms/GB"],
        exact=exact_time_per_byte,
        strict_numbers=True,
    ),
]
"""Seconds per byte; written ``"0.06ns/B"`` or ``"260ms/GiB"``."""

Fraction = Annotated[float, *_unit_field(parse_fraction, [0.8, "80%"])]
"""A number in [0, 1]; written ``0.8`` or ``"80%"``."""

Factor = Annotated[float, *_unit_field(parse_factor, [7, "7x"])]
"""A non-negative multiplier; written ``7`` or ``"7x"``."""

PciId = Annotated[int, *_unit_field(_parse_pci_id, ["0x8086", "0x2030"], exact=_exact_pci_id)]
"""A 16-bit PCI vendor or device ID; written ``0x8086`` (TOML hex) or ``"0x8086"``."""
