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
* limits (policy files): :func:`parse_limit` takes a word for "no limit" (``"unlimited"`` for
  an rlimit, ``"max"`` for a cgroup file) and the kernel's ``memparse`` suffixes, a bare
  ``K``/``M``/``G``/``T``/``P`` (binary), which :func:`parse_size` takes with ``memparse=True``.

Every number is range-checked before it is used, with the bound named in the message: sizes
are at most :data:`SIZE_MAX` (2^64-1, a ``u64``), rates at most :data:`RATE_MAX`, times at most
:data:`TIME_MAX`, factors at most :data:`FACTOR_MAX`; ``inf``, ``nan`` and exponents beyond
``1e±400`` are refused before any exact arithmetic (``"1e999999999B"`` never builds its
integer); booleans are not numbers.

Each kind has a pydantic-ready annotated type (:data:`Size`, :data:`Rate`, :data:`LineRate`,
:data:`Duration`, :data:`SignedDuration`, :data:`TimePerByte`, :data:`Fraction`,
:data:`Factor`, :data:`PciId`; :func:`unit_validator` makes more). Their validation errors say
what was expected and what was found, the value as TOML writes it (``expected a size like
"32GiB", found "lots"``); they serialise back to exact unit strings (:func:`exact_size`,
:func:`exact_rate`, ...), so ``model_validate(model_dump())`` and a TOML round trip give equal
values. Python callers may pass plain numbers in base units (bytes, bytes/s, seconds); a
loader that reads user files passes the validation context ``{"units": "strict"}``
(:data:`STRICT_UNITS`), in which a bare number for a rate or a time is refused, because
``fault = 1`` in a file is far more likely to mean 1 ms than 1 s.

:func:`fmt_size`, :func:`fmt_rate` and :func:`fmt_time` format values for people (three
significant digits, a space before the unit). :func:`compact_size` writes a size short but exact
(``"1.5GiB"``), as policy files and ``pinlab policy show`` do.

The package: :mod:`~pinlab.units.parse` (parsing and the bounds),
:mod:`~pinlab.units.text` (exact and human formatting), :mod:`~pinlab.units.fields` (the
pydantic types); everything is imported from ``pinlab.units``.
"""

from __future__ import annotations

from pinlab.units.fields import (
    Duration,
    Factor,
    Fraction,
    LineRate,
    PciId,
    Rate,
    SignedDuration,
    Size,
    TimePerByte,
    unit_validator,
)
from pinlab.units.parse import (
    FACTOR_MAX,
    GB,
    KB,
    MB,
    RATE_MAX,
    SIZE_MAX,
    STRICT_UNITS,
    TB,
    TIME_MAX,
    GiB,
    KiB,
    MiB,
    TiB,
    UnitError,
    parse_factor,
    parse_fraction,
    parse_limit,
    parse_line_rate,
    parse_rate,
    parse_size,
    parse_time,
    parse_time_per_byte,
)
from pinlab.units.text import (
    compact_size,
    exact_line_rate,
    exact_rate,
    exact_size,
    exact_time,
    exact_time_per_byte,
    fmt_rate,
    fmt_size,
    fmt_time,
)

__all__ = [
    "FACTOR_MAX",
    "GB",
    "KB",
    "MB",
    "RATE_MAX",
    "SIZE_MAX",
    "STRICT_UNITS",
    "TB",
    "TIME_MAX",
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
    "compact_size",
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
    "parse_limit",
    "parse_line_rate",
    "parse_rate",
    "parse_size",
    "parse_time",
    "parse_time_per_byte",
    "unit_validator",
]
