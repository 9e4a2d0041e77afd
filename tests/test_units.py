"""Unit strings (``design.md`` "Scenario files"; ``cost-model.md`` §0 conventions)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from pinlab.errors import format_validation_error
from pinlab.units import (
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


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("lots", ""),
        ("1.3B", "not a whole number of bytes"),
        ("-1GiB", "negative"),
        ("3Gb", "unknown size unit 'Gb'"),
        ("12 furlongs", "unknown size unit"),
        (1.5, "not a whole number"),
        (True, ""),
        (None, ""),
    ],
)
def test_parse_size_errors(text: object, detail: str) -> None:
    with pytest.raises(UnitError) as exc:
        parse_size(text)
    msg = str(exc.value)
    assert msg.startswith('expected a size like "32GiB"')
    assert f"found {text!r}" in msg
    assert detail in msg


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
    line = format_validation_error(exc.value, "f.toml")
    assert line.startswith('f.toml: size: expected a size like "32GiB"')
    assert line.endswith("found 'lots'")
    assert "\n" not in line


def test_strict_context_requires_units_for_rates_and_times() -> None:
    """A file's bare number for a time is refused; Python callers may pass seconds."""
    assert _Model(time=0.001).time == 0.001
    with pytest.raises(ValidationError) as exc:
        _Model.model_validate({"time": 1}, context=STRICT_UNITS)
    assert "write the unit explicitly" in format_validation_error(exc.value)
    with pytest.raises(ValidationError):
        _Model.model_validate({"rate": 25}, context=STRICT_UNITS)
    # sizes stay unambiguous as bare byte counts
    assert _Model.model_validate({"size": 4096}, context=STRICT_UNITS).size == 4096
