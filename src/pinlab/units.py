"""Explicit units for scenario and platform files: sizes, rates, times, fractions.

``design.md`` ("Scenario files") asks for values written as unit strings -- ``"32GiB"``,
``"25GB/s"``, ``"1.75us"`` -- and ``cost-model.md`` §0 fixes what the units mean:

* sizes: ``B``; decimal ``kB``/``KB``, ``MB``, ``GB``, ``TB``, ``PB`` (powers of 10); binary
  ``KiB``, ``MiB``, ``GiB``, ``TiB``, ``PiB`` (powers of 2). A bare number is bytes.
  Sizes are exact integers: ``"1.5GiB"`` is 1610612736, computed with rationals, and a value
  that is not a whole number of bytes (``"1.3B"``) is an error.
* rates: a size unit per second (``"25GB/s"``, ``"12.5 GiB/s"``), or bits per second
  (``"100Gbps"``, ``"100Gb/s"``, ``"100Gbit/s"``; Gbps = 10^9 bits/s). Stored as bytes/s.
* times: ``ns``, ``us`` / ``µs`` / ``μs``, ``ms``, ``s``, ``min``, ``h``. Stored as seconds.
* time per byte (registration costs, ``cost-model.md`` §6): ``"0.06ns/B"``, ``"98ms/GB"``.
* fractions and factors: plain numbers, or percentages (``"75%"``); factors may end in ``x``.

Each kind has a pydantic-ready annotated type (:data:`Size`, :data:`Rate`, :data:`LineRate`,
:data:`Duration`, :data:`SignedDuration`, :data:`TimePerByte`, :data:`Fraction`,
:data:`Factor`, :data:`PciId`). Their validation errors say what was expected and what was
found (``expected a size like "32GiB", found 'lots'``); they serialise back to exact unit strings
(:func:`exact_size`, :func:`exact_rate`, ...), so ``model_validate(model_dump())`` and a TOML
round trip give equal values. Python callers may pass plain numbers in base units (bytes,
bytes/s, seconds); a loader that reads user files passes the validation context
``{"units": "strict"}`` (:data:`STRICT_UNITS`), in which a bare number for a rate or a time is
refused, because ``fault = 1`` in a file is far more likely to mean 1 ms than 1 s.

:func:`fmt_size`, :func:`fmt_rate` and :func:`fmt_time` format values for people (three
significant digits, a space before the unit).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction as _Q
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError

__all__ = [
    "GB",
    "KB",
    "MB",
    "STRICT_UNITS",
    "TB",
    "Duration",
    "Factor",
    "Fraction",
    "GiB",
    "KiB",
    "LineRate",
    "MiB",
    "PciId",
    "Rate",
    "SignedDuration",
    "Size",
    "TiB",
    "TimePerByte",
    "UnitError",
    "exact_line_rate",
    "exact_rate",
    "exact_size",
    "exact_time",
    "exact_time_per_byte",
    "fmt_rate",
    "fmt_size",
    "fmt_time",
    "parse_factor",
    "parse_fraction",
    "parse_line_rate",
    "parse_rate",
    "parse_size",
    "parse_time",
    "parse_time_per_byte",
]

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12

STRICT_UNITS: dict[str, str] = {"units": "strict"}
"""Validation context for user files: rates and times must carry a unit."""


class UnitError(ValueError):
    """A value that does not parse as the expected kind of quantity.

    ``expected`` describes the kind (``'a size like "32GiB"'``); ``found`` is the offending
    value. ``str()`` is the one-line message ``expected ..., found ...``.
    """

    def __init__(self, expected: str, found: object, detail: str = "") -> None:
        self.expected = expected
        self.found = found
        self.detail = detail
        extra = f" ({detail})" if detail else ""
        super().__init__(f"expected {expected}, found {found!r}{extra}")


# -- parsing ---------------------------------------------------------------------------------

_NUMBER = re.compile(
    r"^\s*(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[^\s\d].*?)?\s*$"
)

_PREFIX_DEC: dict[str, int] = {"": 1, "k": KB, "m": MB, "g": GB, "t": TB, "p": 10**15}
_PREFIX_BIN: dict[str, int] = {"k": KiB, "m": MiB, "g": GiB, "t": TiB, "p": 1 << 50}

_TIME_UNITS: dict[str, _Q] = {
    "ps": _Q(1, 10**12),
    "ns": _Q(1, 10**9),
    "us": _Q(1, 10**6),
    "µs": _Q(1, 10**6),  # U+00B5 MICRO SIGN
    "μs": _Q(1, 10**6),  # U+03BC GREEK SMALL LETTER MU
    "ms": _Q(1, 10**3),
    "s": _Q(1),
    "sec": _Q(1),
    "min": _Q(60),
    "h": _Q(3600),
}

_SIZE_EXPECTED = 'a size like "32GiB", "512KiB", "1.5GB" or a whole number of bytes'
_RATE_EXPECTED = 'a rate like "25GB/s", "12.5GiB/s" or "100Gbps"'
_TIME_EXPECTED = 'a time like "1.75us", "6ms" or "2s"'
_TPB_EXPECTED = 'a time per byte like "0.06ns/B" or "98ms/GB"'
_FRACTION_EXPECTED = 'a fraction between 0 and 1 like 0.8 or "80%"'
_FACTOR_EXPECTED = 'a non-negative factor like 7 or "7x"'


def _split(text: str, expected: str) -> tuple[_Q, str]:
    m = _NUMBER.match(text)
    if m is None:
        raise UnitError(expected, text)
    return _Q(m.group("num")), (m.group("unit") or "").strip()


def _size_unit(unit: str) -> int | None:
    """Bytes per ``unit`` (``""``, ``B``, ``GB``, ``GiB`` ...), None if it is not a size unit.

    Binary prefixes are case-insensitive (``gib`` = ``GiB``). A decimal unit must end in an
    upper-case ``B``, since ``Gb`` conventionally means gigabits.
    """
    if unit in ("", "B") or unit.lower() in ("byte", "bytes"):
        return 1
    low = unit.lower()
    if len(low) == 3 and low.endswith("ib"):
        return _PREFIX_BIN.get(low[0])
    if len(unit) == 2 and unit[1] == "B":
        return _PREFIX_DEC.get(low[0])
    return None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_size(value: object) -> int:
    """Bytes in ``value``: an ``int``, an integral ``float`` or a size string (exact).

    ``parse_size("1.5GiB") == 1610612736``; ``parse_size("4096") == 4096``. Raises
    :class:`UnitError` for negative values, unknown units and fractional byte counts.
    """
    if _is_number(value):
        assert isinstance(value, int | float)
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise UnitError(_SIZE_EXPECTED, value, "not a whole number of bytes")
        n = int(value)
    elif isinstance(value, str):
        num, unit = _split(value, _SIZE_EXPECTED)
        scale = _size_unit(unit)
        if scale is None:
            raise UnitError(_SIZE_EXPECTED, value, f"unknown size unit {unit!r}")
        q = num * scale
        if q.denominator != 1:
            raise UnitError(_SIZE_EXPECTED, value, "not a whole number of bytes")
        n = int(q)
    else:
        raise UnitError(_SIZE_EXPECTED, value)
    if n < 0:
        raise UnitError(_SIZE_EXPECTED, value, "negative")
    return n


def _rate_scale(unit: str) -> _Q | None:
    """Bytes/s per ``unit``, None if ``unit`` is not a rate unit."""
    bits: str | None = None
    if unit.endswith("bps"):
        bits = unit[:-3]
    elif unit.endswith("/s"):
        base = unit[:-2]
        if base.endswith("bit"):
            bits = base[:-3]
        elif base.endswith("b") and not base.lower().endswith("ib"):
            bits = base[:-1]
        else:
            scale = _size_unit(base)
            return None if scale is None or base == "" else _Q(scale)
    if bits is None:
        return None
    prefix = _PREFIX_DEC.get(bits.lower()) if len(bits) <= 1 else None
    return None if prefix is None else _Q(prefix, 8)


def _number_or_strict(value: object, expected: str, info: ValidationInfo | None) -> None:
    context = info.context if info is not None else None
    if isinstance(context, dict) and context.get("units") == "strict":
        raise UnitError(expected, value, "write the unit explicitly")


def parse_rate(value: object) -> float:
    """Bytes per second in ``value``: a positive number (bytes/s) or a rate string.

    ``parse_rate("25GB/s") == 25e9``; ``parse_rate("100Gbps") == 12.5e9``;
    ``parse_rate("1GiB/s") == 2**30``.
    """
    if _is_number(value):
        assert isinstance(value, int | float)
        rate = float(value)
    elif isinstance(value, str):
        num, unit = _split(value, _RATE_EXPECTED)
        scale = _rate_scale(unit)
        if scale is None:
            detail = "a unit is required" if unit == "" else f"unknown rate unit {unit!r}"
            raise UnitError(_RATE_EXPECTED, value, detail)
        rate = float(num * scale)
    else:
        raise UnitError(_RATE_EXPECTED, value)
    if not (math.isfinite(rate) and rate > 0):
        raise UnitError(_RATE_EXPECTED, value, "must be positive")
    return rate


def parse_line_rate(value: object) -> float:
    """A NIC line rate (:func:`parse_rate`; serialised in Gbps)."""
    return parse_rate(value)


def _parse_time(value: object, expected: str, signed: bool) -> float:
    if _is_number(value):
        assert isinstance(value, int | float)
        t = float(value)
    elif isinstance(value, str):
        num, unit = _split(value, expected)
        if unit == "" and num == 0:
            return 0.0
        scale = _TIME_UNITS.get(unit)
        if scale is None:
            detail = "a unit is required" if unit == "" else f"unknown time unit {unit!r}"
            raise UnitError(expected, value, detail)
        t = float(num * scale)
    else:
        raise UnitError(expected, value)
    if not math.isfinite(t) or (t < 0 and not signed):
        raise UnitError(expected, value, "must be finite" if signed else "must be >= 0")
    return t


def parse_time(value: object, *, signed: bool = False) -> float:
    """Seconds in ``value``: a number of seconds or a time string (``"1.75us"`` → 1.75e-6).

    Negative times are refused unless ``signed``. A bare ``"0"`` is zero seconds.
    """
    return _parse_time(value, _TIME_EXPECTED, signed)


def parse_time_per_byte(value: object) -> float:
    """Seconds per byte: ``"0.06ns/B"`` → 6e-11, ``"98ms/GB"`` → 9.8e-11, or a number."""
    if isinstance(value, str) and "/" in value:
        head, _, tail = value.rpartition("/")
        try:
            t = _parse_time(head, _TPB_EXPECTED, False)
        except UnitError:
            raise UnitError(_TPB_EXPECTED, value) from None
        scale = _size_unit(tail.strip())
        if scale is None or tail.strip() == "":
            raise UnitError(_TPB_EXPECTED, value, f"unknown size unit {tail.strip()!r}")
        return t / scale
    if isinstance(value, str):
        num, unit = _split(value, _TPB_EXPECTED)
        if unit == "" and num == 0:
            return 0.0
        raise UnitError(_TPB_EXPECTED, value, "write it as time/size")
    return _parse_time(value, _TPB_EXPECTED, False)


def _parse_ratio(value: object, expected: str, suffixes: tuple[str, ...]) -> float:
    if _is_number(value):
        assert isinstance(value, int | float)
        x = float(value)
    elif isinstance(value, str):
        num, unit = _split(value, expected)
        if unit == "%":
            x = float(num / 100)
        elif unit == "" or unit in suffixes:
            x = float(num)
        else:
            raise UnitError(expected, value)
    else:
        raise UnitError(expected, value)
    if not math.isfinite(x) or x < 0:
        raise UnitError(expected, value, "must be >= 0")
    return x


def parse_fraction(value: object) -> float:
    """A number in [0, 1]: ``0.8``, ``"0.8"`` or ``"80%"``."""
    x = _parse_ratio(value, _FRACTION_EXPECTED, ())
    if x > 1:
        raise UnitError(_FRACTION_EXPECTED, value, "must be <= 1")
    return x


def parse_factor(value: object) -> float:
    """A non-negative multiplier: ``7``, ``"7x"``, ``"7×"`` or ``"700%"``."""
    return _parse_ratio(value, _FACTOR_EXPECTED, ("x", "×"))


def _parse_pci_id(value: object) -> int:
    expected = 'a 16-bit PCI ID like "0x8086"'
    if isinstance(value, str):
        try:
            n = int(value, 0)
        except ValueError:
            raise UnitError(expected, value) from None
    elif isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        raise UnitError(expected, value)
    if not 0 <= n <= 0xFFFF:
        raise UnitError(expected, value, "out of range")
    return n


# -- exact formatting (serialisation) ------------------------------------------------------


def _num(x: float | int) -> str:
    text = repr(x)
    return text[:-2] if text.endswith(".0") else text


def exact_size(n: int) -> str:
    """``n`` bytes as the shortest exact unit string: ``"32GiB"``, ``"1536MiB"``, ``"4097B"``."""
    if n == 0:
        return "0B"
    for unit, scale in (
        ("PiB", 1 << 50),
        ("TiB", TiB),
        ("GiB", GiB),
        ("MiB", MiB),
        ("KiB", KiB),
    ):
        if n % scale == 0:
            binary = f"{n // scale}{unit}"
            break
    else:
        binary = f"{n}B"
    for unit, scale in (("PB", 10**15), ("TB", TB), ("GB", GB), ("MB", MB), ("kB", KB)):
        if n % scale == 0:
            decimal = f"{n // scale}{unit}"
            return decimal if len(decimal) < len(binary) else binary
    return binary


def _exact(
    value: float,
    units: tuple[tuple[str, Decimal], ...],
    parse: Callable[[str], float],
    base_unit: str,
) -> str:
    """``value`` in the largest of ``units`` it reaches, rendered so it parses back exactly.

    The number is the shortest ``repr`` of ``value`` rescaled in decimal arithmetic (so 5e-07 s
    is ``"500ns"``, not ``"499.99999999999994ns"``); if that does not round-trip, ``repr(value)``
    in ``base_unit`` (scale 1) does.
    """
    exact = Decimal(repr(value))
    mag = abs(exact)
    for unit, scale in units:
        if mag >= scale or scale == units[-1][1]:
            text = f"{_dec(exact / scale)}{unit}"
            if parse(text) == value:
                return text
    return f"{_num(value)}{base_unit}"


def _dec(d: Decimal) -> str:
    return format(d.normalize(), "f")


_D = Decimal
_RATE_UNITS = (
    ("TB/s", _D(10) ** 12),
    ("GB/s", _D(10) ** 9),
    ("MB/s", _D(10) ** 6),
    ("kB/s", _D(10) ** 3),
    ("B/s", _D(1)),
)
_LINE_RATE_UNITS = (
    ("Tbps", _D(10) ** 12 / 8),
    ("Gbps", _D(10) ** 9 / 8),
    ("Mbps", _D(10) ** 6 / 8),
    ("bps", _D(1) / 8),
)
_TIME_FMT_UNITS = (
    ("s", _D(1)),
    ("ms", _D(10) ** -3),
    ("us", _D(10) ** -6),
    ("ns", _D(10) ** -9),
    ("ps", _D(10) ** -12),
)


def exact_rate(rate: float) -> str:
    """Bytes/s as a rate string that parses back exactly (``25e9`` → ``"25GB/s"``)."""
    return _exact(rate, _RATE_UNITS, parse_rate, "B/s")


def exact_line_rate(rate: float) -> str:
    """Bytes/s as bits per second, exact (``12.5e9`` → ``"100Gbps"``)."""
    return _exact(rate, _LINE_RATE_UNITS, parse_rate, "B/s")


def exact_time(t: float) -> str:
    """Seconds as a time string that parses back exactly (``1.75e-6`` → ``"1.75us"``)."""
    if t == 0:
        return "0s"
    return _exact(t, _TIME_FMT_UNITS, lambda s: parse_time(s, signed=True), "s")


def exact_time_per_byte(t: float) -> str:
    """Seconds per byte as the shortest exact ``"<time>/<size unit>"`` string.

    ``6e-11`` → ``"60ps/B"``; ``parse_time_per_byte("260ms/GiB")`` renders as ``"260ms/GiB"``.
    """
    if t == 0:
        return "0s/B"
    best = exact_time(t) + "/B"
    for unit, scale in (
        ("kB", KB),
        ("MB", MB),
        ("GB", GB),
        ("KiB", KiB),
        ("MiB", MiB),
        ("GiB", GiB),
    ):
        text = f"{exact_time(t * scale)}/{unit}"
        if len(text) < len(best) and parse_time_per_byte(text) == t:
            best = text
    return best


def _exact_pci_id(n: int) -> str:
    return f"0x{n:04x}"


# -- human formatting ----------------------------------------------------------------------


def _sig(x: float, digits: int) -> str:
    """``x`` with ``digits`` significant digits, no exponent, trailing zeros dropped."""
    if x == 0 or not math.isfinite(x):
        return _num(x) if not math.isfinite(x) else "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _scaled(x: float, units: tuple[tuple[str, float], ...], digits: int) -> str:
    mag = abs(x)
    for unit, scale in units:
        if mag >= scale:
            return f"{_sig(x / scale, digits)} {unit}"
    unit, scale = units[-1]
    return f"{_sig(x / scale, digits)} {unit}"


def fmt_size(n: int | float, *, binary: bool = True, digits: int = 3) -> str:
    """A size for people: ``fmt_size(32 * GiB) == "32 GiB"``; ``binary=False`` for GB."""
    units: tuple[tuple[str, float], ...] = (
        (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB), ("B", 1))
        if binary
        else (("TB", TB), ("GB", GB), ("MB", MB), ("kB", KB), ("B", 1))
    )
    return _scaled(float(n), units, digits)


def fmt_rate(rate: float, *, bits: bool = False, digits: int = 3) -> str:
    """A rate for people: ``"25 GB/s"``, or ``"100 Gbps"`` with ``bits``."""
    if bits:
        return _scaled(rate * 8, (("Tbps", 1e12), ("Gbps", 1e9), ("Mbps", 1e6), ("bps", 1)), digits)
    return _scaled(rate, (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("B/s", 1)), digits)


def fmt_time(t: float, *, digits: int = 3) -> str:
    """A duration for people: ``"1.75 µs"``, ``"6 ms"``, ``"2 s"``, ``"500 ns"``."""
    if t == 0:
        return "0 s"
    return _scaled(t, (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9), ("ps", 1e-12)), digits)


# -- pydantic types ----------------------------------------------------------------------------


def _pydantic(
    parse: Callable[[object], Any], *, strict_numbers: bool = False
) -> Callable[[object, ValidationInfo], Any]:
    """Wrap ``parse`` so that a :class:`UnitError` becomes a pydantic error with ctx."""

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
                    "found": repr(e.found),
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
    }
    return table.get(parse, "a value with a unit")


def _signed_time(value: object) -> float:
    return parse_time(value, signed=True)


_UNIT_SCHEMA = {"anyOf": [{"type": "string"}, {"type": "number"}]}

Size = Annotated[
    int,
    BeforeValidator(_pydantic(parse_size)),
    PlainSerializer(exact_size, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["32GiB", "512KiB", "4096"]}),
]
"""Bytes (exact ``int``); written ``"32GiB"``, ``"1.5GB"`` or a number of bytes."""

Rate = Annotated[
    float,
    BeforeValidator(_pydantic(parse_rate, strict_numbers=True)),
    PlainSerializer(exact_rate, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["25GB/s", "12.5GiB/s", "100Gbps"]}),
]
"""Bytes per second (``float`` > 0); written ``"25GB/s"`` or ``"100Gbps"``."""

LineRate = Annotated[
    float,
    BeforeValidator(_pydantic(parse_line_rate, strict_numbers=True)),
    PlainSerializer(exact_line_rate, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["100Gbps", "400Gbps"]}),
]
"""A NIC line rate in bytes per second, serialised in bits per second (``"100Gbps"``)."""

Duration = Annotated[
    float,
    BeforeValidator(_pydantic(parse_time, strict_numbers=True)),
    PlainSerializer(exact_time, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["1.75us", "6ms", "2s"]}),
]
"""Seconds (``float`` >= 0); written ``"1.75us"``, ``"1.75µs"``, ``"6 ms"``."""

SignedDuration = Annotated[
    float,
    BeforeValidator(_pydantic(_signed_time, strict_numbers=True)),
    PlainSerializer(exact_time, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["-0.5us", "0.5us"]}),
]
"""Seconds, may be negative (a signed delta of a time)."""

TimePerByte = Annotated[
    float,
    BeforeValidator(_pydantic(parse_time_per_byte, strict_numbers=True)),
    PlainSerializer(exact_time_per_byte, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["0.06ns/B", "98ms/GB"]}),
]
"""Seconds per byte; written ``"0.06ns/B"`` or ``"260ms/GiB"``."""

Fraction = Annotated[
    float,
    BeforeValidator(_pydantic(parse_fraction)),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": [0.8, "80%"]}),
]
"""A number in [0, 1]; written ``0.8`` or ``"80%"``."""

Factor = Annotated[
    float,
    BeforeValidator(_pydantic(parse_factor)),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": [7, "7x"]}),
]
"""A non-negative multiplier; written ``7`` or ``"7x"``."""

PciId = Annotated[
    int,
    BeforeValidator(_pydantic(_parse_pci_id)),
    PlainSerializer(_exact_pci_id, return_type=str),
    WithJsonSchema({**_UNIT_SCHEMA, "examples": ["0x8086", "0x2030"]}),
]
"""A 16-bit PCI vendor or device ID; written ``0x8086`` (TOML hex) or ``"0x8086"``."""
