"""Unit strings (``design.md`` "Scenario files"; ``cost-model.md`` §0 conventions)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from pinlab.errors import config_error
from pinlab.units import (
    SIZE_MAX,
    STRICT_UNITS,
    Duration,
    Fraction,
    GiB,
    KiB,
    LineRate,
    MiB,
    PciId,
    Rate,
    SignedDuration,
    Size,
    TimePerByte,
    UnitError,
    compact_size,
    exact_line_rate,
    exact_rate,
    exact_size,
    exact_time,
    exact_time_per_byte,
    fmt_rate,
    fmt_size,
    fmt_time,
    parse_factor,
    parse_fraction,
    parse_limit,
    parse_rate,
    parse_size,
    parse_time,
    parse_time_per_byte,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("32GiB", 32 * GiB),
        ("512KiB", 512 * KiB),
        ("4096", 4096),
        ("1.5GB", 1_500_000_000),
        ("1.5GiB", 1_610_612_736),
        ("256 MiB", 256 * MiB),
        ("64kB", 64_000),
        ("2gib", 2 * GiB),
        ("0", 0),
        ("1e3B", 1000),
        (4096, 4096),
        (4096.0, 4096),
    ],
)
def test_parse_size(text: object, expected: int) -> None:
    value = parse_size(text)
    assert value == expected
    assert isinstance(value, int)


def test_sizes_are_exact_integers_for_binary_units() -> None:
    """No float rounding: 1.1 TiB is computed with rationals."""
    assert parse_size("1.5TiB") == 3 << 39
    with pytest.raises(UnitError, match="not a whole number of bytes"):
        parse_size("1.1TiB")  # 1209462790553.6 bytes: refused, not rounded
    assert parse_size("0.5KiB") == 512
    assert parse_size("1.25GiB") == 5 * GiB // 4
    assert parse_size("3.75MiB") == 3 * MiB + 3 * MiB // 4


SIZE = 'expected a size like "32GiB", "512KiB", "1.5GB" or a whole number of bytes'


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("lots", f'{SIZE}, found "lots"'),
        ("1.3B", f'{SIZE}, found "1.3B" (not a whole number of bytes)'),
        ("-1GiB", f'{SIZE}, found "-1GiB" (negative)'),
        ("3Gb", f'{SIZE}, found "3Gb" (unknown size unit "Gb")'),
        ("12 furlongs", f'{SIZE}, found "12 furlongs" (unknown size unit "furlongs")'),
        ("64M", f'{SIZE}, found "64M" (unknown size unit "M")'),  # memparse only in policy
        (1.5, f"{SIZE}, found 1.5 (not a whole number of bytes)"),
        (True, f"{SIZE}, found true"),
        (None, f"{SIZE}, found nothing"),
    ],
)
def test_parse_size_errors(text: object, line: str) -> None:
    with pytest.raises(UnitError) as exc:
        parse_size(text)
    assert str(exc.value) == line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("25GB/s", 25e9),
        ("100Gbps", 12.5e9),
        ("100Gb/s", 12.5e9),
        ("100Gbit/s", 12.5e9),
        ("12.5 GiB/s", 12.5 * GiB),
        ("400 Mbps", 50e6),
        ("0.7GB/s", 0.7e9),
        (1e9, 1e9),
    ],
)
def test_parse_rate(text: object, expected: float) -> None:
    assert parse_rate(text) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("text", ["25", "25 GB", "fast", "0GB/s", "-1GB/s", "1.5 widgets/s"])
def test_parse_rate_errors(text: str) -> None:
    with pytest.raises(UnitError, match=r'^expected a rate like "25GB/s"'):
        parse_rate(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.75us", 1.75e-6),
        ("1.75µs", 1.75e-6),  # micro sign
        ("1.75μs", 1.75e-6),  # Greek mu
        ("6 ms", 6e-3),
        ("2s", 2.0),
        ("500ns", 5e-7),
        ("0", 0.0),
        ("1min", 60.0),
        (0.5, 0.5),
    ],
)
def test_parse_time(text: object, expected: float) -> None:
    assert parse_time(text) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("text", ["2", "1 fortnight", "-1ms", "soon"])
def test_parse_time_errors(text: str) -> None:
    with pytest.raises(UnitError, match=r'^expected a time like "1.75us"'):
        parse_time(text)


def test_signed_time() -> None:
    assert parse_time("-0.5us", signed=True) == -0.5e-6


def test_time_per_byte() -> None:
    """Registration costs of ``cost-model.md`` §6 in their doc units."""
    assert parse_time_per_byte("0.06ns/B") == pytest.approx(6e-11)
    assert parse_time_per_byte("98ms/GB") == pytest.approx(9.8e-11)
    assert parse_time_per_byte("260ms/GiB") == pytest.approx(0.26 / GiB)
    assert parse_time_per_byte("0") == 0.0
    with pytest.raises(UnitError):
        parse_time_per_byte("98ms")
    with pytest.raises(UnitError):
        parse_time_per_byte("98ms/furlong")


def test_fractions_and_factors() -> None:
    assert parse_fraction("80%") == pytest.approx(0.8)
    assert parse_fraction("0.75") == 0.75
    assert parse_fraction(1) == 1.0
    with pytest.raises(UnitError, match="must be <= 1"):
        parse_fraction(1.5)
    with pytest.raises(UnitError):
        parse_fraction("most")
    assert parse_factor("7x") == 7.0
    assert parse_factor("7×") == 7.0
    assert parse_factor(1000) == 1000.0
    with pytest.raises(UnitError):
        parse_factor(-1)


def test_exact_formatting() -> None:
    assert exact_size(32 * GiB) == "32GiB"
    assert exact_size(1_500_000_000) == "1500MB"
    assert exact_size(4097) == "4097B"
    assert exact_size(0) == "0B"
    assert exact_rate(25e9) == "25GB/s"
    assert exact_line_rate(12.5e9) == "100Gbps"
    assert exact_time(1.75e-6) == "1.75us"
    assert exact_time(5e-7) == "500ns"
    assert exact_time(0) == "0s"
    assert exact_time_per_byte(0.26 / GiB) == "260ms/GiB"


@given(st.integers(min_value=0, max_value=1 << 60))
def test_size_round_trip(n: int) -> None:
    assert parse_size(exact_size(n)) == n


@given(st.floats(min_value=1e-3, max_value=1e15, allow_nan=False, allow_infinity=False))
def test_rate_round_trip(x: float) -> None:
    assert parse_rate(exact_rate(x)) == x
    assert parse_rate(exact_line_rate(x)) == x


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False))
def test_time_round_trip(t: float) -> None:
    assert parse_time(exact_time(t)) == t
    assert parse_time_per_byte(exact_time_per_byte(t * 1e-9)) == t * 1e-9


def test_human_formatting() -> None:
    assert fmt_size(32 * GiB) == "32 GiB"
    assert fmt_size(1536 * MiB) == "1.5 GiB"
    assert fmt_size(100) == "100 B"
    assert fmt_size(1.5e9, binary=False) == "1.5 GB"
    assert fmt_rate(25e9) == "25 GB/s"
    assert fmt_rate(12.5e9, bits=True) == "100 Gbps"
    assert fmt_rate(1.5e12) == "1.5 TB/s"
    assert fmt_time(1.75e-6) == "1.75 µs"
    assert fmt_time(6e-3) == "6 ms"
    assert fmt_time(2.0) == "2 s"
    assert fmt_time(5e-7) == "500 ns"
    assert fmt_time(0) == "0 s"
    assert parse_rate(fmt_rate(25e9).replace(" ", "")) == 25e9


class _Model(BaseModel):
    size: Size = 0
    rate: Rate = 1.0
    line: LineRate = 1.0
    time: Duration = 0.0
    delta: SignedDuration = 0.0
    per_byte: TimePerByte = 0.0
    frac: Fraction = 0.0
    pci: PciId = 0


def test_pydantic_types_validate_and_serialise() -> None:
    m = _Model.model_validate(
        {
            "size": "32GiB",
            "rate": "25GB/s",
            "line": "100Gbps",
            "time": "1.75us",
            "delta": "-0.5us",
            "per_byte": "98ms/GB",
            "frac": "80%",
            "pci": "0x8086",
        }
    )
    assert (m.size, m.rate, m.line, m.time) == (32 * GiB, 25e9, 12.5e9, 1.75e-6)
    assert m.pci == 0x8086
    dumped = m.model_dump(mode="json")
    assert dumped["size"] == "32GiB"
    assert dumped["line"] == "100Gbps"
    assert dumped["time"] == "1.75us"
    assert dumped["pci"] == "0x8086"
    assert _Model.model_validate(dumped) == m
    assert _Model.model_validate(m.model_dump()) == m


def test_pydantic_error_says_expected_and_found() -> None:
    with pytest.raises(ValidationError) as exc:
        _Model.model_validate({"size": "lots"})
    line = str(config_error(exc.value, "f.toml"))
    assert line == f'f.toml: size: {SIZE}, found "lots"'


def test_strict_context_requires_units_for_rates_and_times() -> None:
    """A file's bare number for a time is refused; Python callers may pass seconds."""
    assert _Model(time=0.001).time == 0.001
    with pytest.raises(ValidationError) as exc:
        _Model.model_validate({"time": 1}, context=STRICT_UNITS)
    assert "write the unit explicitly" in str(config_error(exc.value))
    with pytest.raises(ValidationError):
        _Model.model_validate({"rate": 25}, context=STRICT_UNITS)
    # sizes stay unambiguous as bare byte counts
    assert _Model.model_validate({"size": 4096}, context=STRICT_UNITS).size == 4096


# -- memparse suffixes, limits and the policy's compact sizes -----------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("64M", 64 * MiB), ("64m", 64 * MiB), ("2G", 2 * GiB), ("1.5K", 1536), ("3T", 3 << 40)],
)
def test_memparse_suffixes_are_binary(text: str, expected: int) -> None:
    """``memparse`` (lib/cmdline.c): K/M/G/T/P are powers of 1024, in either case (P-19)."""
    assert parse_size(text, memparse=True) == expected


def test_limits_may_be_unlimited() -> None:
    assert parse_limit("unlimited", unlimited="unlimited") is None
    assert parse_limit(" Max ", unlimited="max") is None
    assert parse_limit("8M", unlimited="unlimited") == 8 * MiB
    with pytest.raises(UnitError) as exc:
        parse_limit("max", unlimited="unlimited")
    assert str(exc.value) == 'expected a size like "64MiB" or "unlimited", found "max"'


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (64 * MiB, "64MiB"),
        (3 * GiB // 2, "1.5GiB"),
        (GiB + GiB // 16, "1.0625GiB"),
        (4096, "4KiB"),
        (4097, "4097B"),
        (0, "0B"),
        (5 << 40, "5TiB"),
        (None, "unlimited"),
    ],
)
def test_compact_size(n: int | None, text: str) -> None:
    assert compact_size(n) == text


@given(st.integers(min_value=1 << 53, max_value=SIZE_MAX))
def test_compact_size_is_exact_for_large_values(n: int) -> None:
    """Integer arithmetic: no float rounding of sizes above 2^53 bytes."""
    text = compact_size(n)
    assert parse_size(text) == n


def test_large_sizes_parse_exactly() -> None:
    assert parse_size("18446744073709551615") == SIZE_MAX
    assert parse_size(f"{SIZE_MAX}B") == SIZE_MAX
    assert parse_size("18446744073.709551615GB") == SIZE_MAX


# -- out-of-range numbers (issue 10): one clear error naming the bound, never a hang ------------


@pytest.mark.parametrize(
    ("parse", "value", "detail"),
    [
        (parse_size, "1e400", "above 2^64-1 bytes, the largest size"),
        (parse_size, "1e999999999B", "above 2^64-1 bytes, the largest size"),
        (parse_size, "18446744073709551616", "above 2^64-1 bytes, the largest size"),
        (parse_size, "16384PiB", "above 2^64-1 bytes, the largest size"),
        (parse_size, 2**64, "above 2^64-1 bytes, the largest size"),
        (parse_size, "inf", "not a finite number"),
        (parse_size, "-inf", "not a finite number"),
        (parse_size, "nan", "not a finite number"),
        (parse_size, math.inf, "not a finite number"),
        (parse_size, math.nan, "not a finite number"),
        (parse_size, "1e-999999999B", "closer to zero than 1e-400"),
        (parse_time, "1e-401s", "closer to zero than 1e-400"),
        (parse_size, "1" * 1001, "a number of more than 1000 characters"),
        (parse_rate, "1e400GB/s", "above 1EB/s, the largest rate"),
        (parse_rate, "2000PB/s", "above 1EB/s, the largest rate"),
        (parse_rate, 1e300, "above 1EB/s, the largest rate"),
        (parse_rate, math.inf, "not a finite number"),
        (parse_rate, "nan GB/s", "not a finite number"),
        (parse_time, "1e400s", "above 1e9s, the longest time"),
        (parse_time, "1e999999999ms", "above 1e9s, the longest time"),
        (parse_time, 1e10, "above 1e9s, the longest time"),
        (parse_time, "inf", "not a finite number"),
        (parse_time, math.nan, "not a finite number"),
        (parse_time_per_byte, "1e400s/B", "above 1e9s, the longest time"),
        (parse_factor, "1e400x", "above 1e6, the largest factor"),
        (parse_factor, math.inf, "not a finite number"),
        (parse_fraction, "1e400", "must be <= 1"),
    ],
)
def test_out_of_range_numbers_name_the_bound(
    parse: Callable[[object], object], value: object, detail: str
) -> None:
    start = time.perf_counter()
    with pytest.raises(UnitError) as exc:
        parse(value)
    assert time.perf_counter() - start < 0.5  # refused before any big-number arithmetic
    assert str(exc.value).endswith(f"({detail})"), str(exc.value)
    assert "\n" not in str(exc.value)


def test_rlimit_and_dmem_bounds() -> None:
    """An RLIMIT above RLIM_INFINITY, or a dmem value memparse would wrap to 0, is refused
    with the bound named by the caller."""
    assert parse_limit(str(SIZE_MAX), unlimited="unlimited") == SIZE_MAX  # RLIM_INFINITY
    with pytest.raises(UnitError) as exc:
        parse_limit("16384P", unlimited="unlimited", bound="RLIM_INFINITY (2^64-1)")
    assert str(exc.value) == (
        'expected a size like "64MiB" or "unlimited", found "16384P" (above RLIM_INFINITY (2^64-1))'
    )


def test_long_blank_runs_parse_in_linear_time() -> None:
    """The unit regex runs on stripped text: no quadratic backtracking over blanks."""
    text = "1B" + " " * 200_000 + "x"
    start = time.perf_counter()
    with pytest.raises(UnitError) as exc:
        parse_size(text)
    assert time.perf_counter() - start < 0.5
    assert "(200003 characters)" in str(exc.value)


def test_booleans_are_not_numbers() -> None:
    for parse in (parse_size, parse_rate, parse_time, parse_factor, parse_fraction):
        with pytest.raises(UnitError):
            parse(True)
