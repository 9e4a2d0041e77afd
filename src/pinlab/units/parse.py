"""Parsing unit strings exactly (:mod:`pinlab.units`): sizes, rates, times, fractions,
limits, each range-checked with its bound named."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction as _Q

from pydantic import ValidationInfo

from pinlab.errors import show_value

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
        super().__init__(f"expected {expected}, found {show_value(found)}{extra}")


# -- parsing ---------------------------------------------------------------------------------

_NUMBER = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[^\s\d].*)?$", re.DOTALL
)
"""A number and an optional unit, matched against the *stripped* text (so that nothing can
backtrack over a long run of blanks)."""

_MAX_DIGITS = 1000
"""Most characters the number of a unit string may have (an exact rendering of the smallest
float in picoseconds needs about 330): a longer one is refused before any arithmetic."""
_MAX_ORDER = 400
"""Decimal orders of magnitude a number may span either side of 1 (``1e-400`` …
``1e400``). Checked on the :class:`~decimal.Decimal` before any exact arithmetic, so
``"1e999999999B"`` is refused at once instead of building a billion-digit integer; every
kind's own bound lies far inside it, and no float is closer to zero."""

SIZE_MAX = 2**64 - 1
"""The largest size: a ``u64`` (``RLIM_INFINITY``; what ``memparse`` reads before it wraps)."""
RATE_MAX = 10**18
"""The largest rate, 1 EB/s: a sanity bound far above any link, keeping rates finite floats."""
TIME_MAX = 10**9
"""The longest time, 10^9 s (about 32 years): a sanity bound far above any simulated run."""
FACTOR_MAX = 10**6
"""The largest factor (``"7x"``): a sanity bound far above any cost-model multiplier."""

_SIZE_BOUND = "2^64-1 bytes, the largest size"
_RATE_BOUND = "1EB/s, the largest rate"
_TIME_BOUND = "1e9s, the longest time"
_FACTOR_BOUND = "1e6, the largest factor"

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
_NOT_FINITE = "not a finite number"


def _split(value: str, expected: str, bound: str) -> tuple[_Q, str]:
    """The exact number and the unit of a unit string; ``bound`` names the kind's largest
    value for a number whose exponent alone puts it beyond every bound."""
    text = value.strip()
    m = _NUMBER.match(text)
    if m is None:
        word = text.lstrip("+-").lower()
        finite = not word.startswith(("inf", "nan"))
        raise UnitError(expected, value, "" if finite else _NOT_FINITE)
    digits = m.group("num")
    if len(digits) > _MAX_DIGITS:
        raise UnitError(expected, value, f"a number of more than {_MAX_DIGITS} characters")
    num = Decimal(digits)
    if num and num.adjusted() > _MAX_ORDER:
        raise UnitError(expected, value, f"above {bound}")
    if num and num.adjusted() < -_MAX_ORDER:
        raise UnitError(expected, value, f"closer to zero than 1e-{_MAX_ORDER}")
    return _Q(num), (m.group("unit") or "").strip()


def _exact_number(value: object, expected: str) -> _Q | None:
    """A Python ``int``/``float`` as an exact rational (None: not a number; ``bool`` is not
    one); infinities and NaN are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        raise UnitError(expected, value, _NOT_FINITE)
    return _Q(value)


def _size_unit(unit: str, memparse: bool = False) -> int | None:
    """Bytes per ``unit`` (``""``, ``B``, ``GB``, ``GiB`` ...), None if it is not a size unit.

    Binary prefixes are case-insensitive (``gib`` = ``GiB``). A decimal unit must end in an
    upper-case ``B``, since ``Gb`` conventionally means gigabits. With ``memparse``, a bare
    ``K``/``M``/``G``/``T``/``P`` (either case) is binary, as the kernel's ``memparse``
    (``lib/cmdline.c``) reads it in cgroup files and on the command line.
    """
    if unit in ("", "B") or unit.lower() in ("byte", "bytes"):
        return 1
    low = unit.lower()
    if memparse and len(low) == 1:
        return _PREFIX_BIN.get(low)
    if len(low) == 3 and low.endswith("ib"):
        return _PREFIX_BIN.get(low[0])
    if len(unit) == 2 and unit[1] == "B":
        return _PREFIX_DEC.get(low[0])
    return None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _size(value: object, expected: str, memparse: bool, bound: str) -> int:
    exact = _exact_number(value, expected)
    if exact is None:
        if not isinstance(value, str):
            raise UnitError(expected, value)
        num, unit = _split(value, expected, bound)
        scale = _size_unit(unit, memparse)
        if scale is None:
            raise UnitError(expected, value, f"unknown size unit {show_value(unit)}")
        exact = num * scale
    if exact.denominator != 1:
        raise UnitError(expected, value, "not a whole number of bytes")
    if exact < 0:
        raise UnitError(expected, value, "negative")
    if exact > SIZE_MAX:
        raise UnitError(expected, value, f"above {bound}")
    return int(exact)


def parse_size(value: object, *, memparse: bool = False, bound: str = _SIZE_BOUND) -> int:
    """Bytes in ``value``: an ``int``, an integral ``float`` or a size string (exact).

    ``parse_size("1.5GiB") == 1610612736``; ``parse_size("4096") == 4096``; with ``memparse``
    also ``parse_size("64M", memparse=True) == 64 * MiB``. Raises :class:`UnitError` for
    negative values, unknown units, fractional byte counts, infinities and values above
    :data:`SIZE_MAX` (``bound`` is how that maximum is named in the message).
    """
    return _size(value, _SIZE_EXPECTED, memparse, bound)


def parse_limit(
    value: object, *, unlimited: str, memparse: bool = True, bound: str = _SIZE_BOUND
) -> int | None:
    """A size limit that may be unlimited: the word ``unlimited`` (any case; ``"unlimited"``
    for an rlimit, ``"max"`` for a cgroup file) is None, anything else :func:`parse_size` (with
    the kernel's ``memparse`` suffixes unless ``memparse`` is false)."""
    if isinstance(value, str) and value.strip().lower() == unlimited:
        return None
    return _size(value, f'a size like "64MiB" or "{unlimited}"', memparse, bound)


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
    ``parse_rate("1GiB/s") == 2**30``. At most :data:`RATE_MAX`.
    """
    rate = _exact_number(value, _RATE_EXPECTED)
    if rate is None:
        if not isinstance(value, str):
            raise UnitError(_RATE_EXPECTED, value)
        num, unit = _split(value, _RATE_EXPECTED, _RATE_BOUND)
        scale = _rate_scale(unit)
        if scale is None:
            detail = "a unit is required" if unit == "" else f"unknown rate unit {show_value(unit)}"
            raise UnitError(_RATE_EXPECTED, value, detail)
        rate = num * scale
    if rate > RATE_MAX:
        raise UnitError(_RATE_EXPECTED, value, f"above {_RATE_BOUND}")
    if not rate > 0 or float(rate) == 0:
        raise UnitError(_RATE_EXPECTED, value, "must be positive")
    return float(rate)


def parse_line_rate(value: object) -> float:
    """A NIC line rate (:func:`parse_rate`; serialised in Gbps)."""
    return parse_rate(value)


def _parse_time(value: object, expected: str, signed: bool) -> float:
    t = _exact_number(value, expected)
    if t is None:
        if not isinstance(value, str):
            raise UnitError(expected, value)
        num, unit = _split(value, expected, _TIME_BOUND)
        if unit == "" and num == 0:
            return 0.0
        scale = _TIME_UNITS.get(unit)
        if scale is None:
            detail = "a unit is required" if unit == "" else f"unknown time unit {show_value(unit)}"
            raise UnitError(expected, value, detail)
        t = num * scale
    if t < 0 and not signed:
        raise UnitError(expected, value, "must be >= 0")
    if abs(t) > TIME_MAX:
        raise UnitError(expected, value, f"above {_TIME_BOUND}")
    return float(t)


def parse_time(value: object, *, signed: bool = False) -> float:
    """Seconds in ``value``: a number of seconds or a time string (``"1.75us"`` → 1.75e-6).

    Negative times are refused unless ``signed``; ``|t|`` is at most :data:`TIME_MAX`. A bare
    ``"0"`` is zero seconds.
    """
    return _parse_time(value, _TIME_EXPECTED, signed)


def parse_time_per_byte(value: object) -> float:
    """Seconds per byte: ``"0.06ns/B"`` → 6e-11, ``"98ms/GB"`` → 9.8e-11, or a number."""
    if isinstance(value, str) and "/" in value:
        head, _, tail = value.rpartition("/")
        try:
            t = _parse_time(head, _TPB_EXPECTED, False)
        except UnitError as e:
            raise UnitError(_TPB_EXPECTED, value, e.detail) from None
        scale = _size_unit(tail.strip())
        if scale is None or tail.strip() == "":
            raise UnitError(_TPB_EXPECTED, value, f"unknown size unit {show_value(tail.strip())}")
        return t / scale
    if isinstance(value, str):
        num, unit = _split(value, _TPB_EXPECTED, _TIME_BOUND)
        if unit == "" and num == 0:
            return 0.0
        raise UnitError(_TPB_EXPECTED, value, "write it as time/size")
    return _parse_time(value, _TPB_EXPECTED, False)


def _parse_ratio(value: object, expected: str, suffixes: tuple[str, ...], bound: str) -> _Q:
    x = _exact_number(value, expected)
    if x is None:
        if not isinstance(value, str):
            raise UnitError(expected, value)
        num, unit = _split(value, expected, bound)
        if unit == "%":
            x = num / 100
        elif unit == "" or unit in suffixes:
            x = num
        else:
            raise UnitError(expected, value)
    if x < 0:
        raise UnitError(expected, value, "must be >= 0")
    return x


def parse_fraction(value: object) -> float:
    """A number in [0, 1]: ``0.8``, ``"0.8"`` or ``"80%"``."""
    x = _parse_ratio(value, _FRACTION_EXPECTED, (), "1")
    if x > 1:
        raise UnitError(_FRACTION_EXPECTED, value, "must be <= 1")
    return float(x)


def parse_factor(value: object) -> float:
    """A non-negative multiplier: ``7``, ``"7x"``, ``"7×"`` or ``"700%"``; at most
    :data:`FACTOR_MAX`."""
    x = _parse_ratio(value, _FACTOR_EXPECTED, ("x", "×"), _FACTOR_BOUND)
    if x > FACTOR_MAX:
        raise UnitError(_FACTOR_EXPECTED, value, f"above {_FACTOR_BOUND}")
    return float(x)


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
