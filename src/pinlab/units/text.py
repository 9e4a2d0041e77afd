"""Writing quantities (:mod:`pinlab.units`): exact unit strings that parse back equal, and
short forms for people."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

from pinlab.units.parse import (
    GB,
    KB,
    MB,
    TB,
    GiB,
    KiB,
    MiB,
    TiB,
    parse_rate,
    parse_time,
    parse_time_per_byte,
)

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


def compact_size(n: int | None, *, unlimited: str = "unlimited") -> str:
    """A size short and still exact, as policy files write it: ``64MiB``, ``1.5GiB``,
    ``4096B``; None (no limit) is ``unlimited``.

    The largest binary unit up to TiB of which ``n`` is a whole number of sixteenths, shown
    with up to four decimals (a sixteenth is 0.0625), all in integer arithmetic; else bytes.
    """
    if n is None:
        return unlimited
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale and n % (scale // 16) == 0:
            whole, rest = divmod(n, scale)
            decimals = f"{rest * 10**4 // scale:04d}".rstrip("0")
            return f"{whole}.{decimals}{unit}" if decimals else f"{whole}{unit}"
    return f"{n}B"
