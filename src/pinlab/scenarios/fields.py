"""The field types of a scenario file: names that become directories of a run, seeds, kernel
profile and workload names, and the bound on samples per series -- each refusing a bad value
with the one line :mod:`pinlab.scenarios.schema`'s models report (``docs/scenarios.md``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

from pinlab.errors import ConfigError, show_value
from pinlab.kernel.profile import PRESETS as KERNEL_PRESETS
from pinlab.sim.workloads import WORKLOADS

__all__ = [
    "MAX_SAMPLES",
    "NAME_MAX",
    "RESERVED_NAMES",
    "SEED_MAX",
    "Name",
    "ProfileName",
    "Seed",
    "TenantName",
    "WorkloadName",
    "check_name",
]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]*$")
_TENANT = re.compile(r"^[A-Za-z][A-Za-z0-9_+-]*$")


RESERVED_NAMES = frozenset(
    {"report.html", "summary.json", "series.csv", "config.toml", "trace.json", "points"}
)
"""Names of files a run directory holds: a scenario or variant named so would collide with one
(every name becomes a directory below ``--out``)."""

NAME_MAX = 100
"""The longest scenario, variant or tenant name (a path component stays well below 255)."""


def _checker(pattern: re.Pattern[str], expected: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        if not isinstance(value, str) or not pattern.match(value):
            raise ValueError(f"expected {expected}, found {value!r}")
        if len(value) > NAME_MAX:
            raise ValueError(f"expected at most {NAME_MAX} characters, found {len(value)}")
        if value.lower() in RESERVED_NAMES or value.lower().startswith("plot-"):
            raise ValueError(
                f"expected a name that is not one of a run directory's files "
                f"({', '.join(sorted(RESERVED_NAMES))}, plot-*), found {value!r}"
            )
        return value

    return check


def _matching(pattern: re.Pattern[str], expected: str) -> BeforeValidator:
    return BeforeValidator(_checker(pattern, expected))


def check_name(name: str, source: str, where: str) -> None:
    """:class:`ConfigError` unless ``name`` may become a directory of a run (:data:`Name`)."""
    try:
        _NAME_CHECK(name)
    except ValueError as e:
        raise ConfigError(source, where, str(e)) from None


SEED_MAX = 2**63 - 1
"""Seeds are 0 … 2⁶³−1: what TOML's 64-bit integers hold, so ``config.toml`` stays valid."""


def _seed_in_range(value: int) -> int:
    if not 0 <= value <= SEED_MAX:
        raise PydanticCustomError(
            "pinlab_seed",
            "expected an integer seed from 0 to 2^63-1, found {found}",
            {"found": value},
        )
    return value


Seed = Annotated[int, AfterValidator(_seed_in_range)]
"""A seed: an integer 0 … :data:`SEED_MAX`, refused with that range named (``[scenario] seed``,
a sweep's ``seeds`` and ``seed``)."""

MAX_SAMPLES = 1_000_000
"""The most points a run samples per series (``duration / sample_interval``)."""


def _profile(value: object) -> object:
    """Profiles may be written 6.12 (a TOML float, as ``--set kernel.profile=6.12`` gives)."""
    if isinstance(value, float):
        value = repr(value)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if value is not None and (not isinstance(value, str) or value not in KERNEL_PRESETS):
        raise ValueError(
            f"expected a kernel profile ({', '.join(KERNEL_PRESETS)}), found {show_value(value)}"
        )
    return value


def _workload(value: object) -> object:
    if not isinstance(value, str) or value not in WORKLOADS:
        raise PydanticCustomError(
            "pinlab_workload",
            "expected one of {expected}, found {found}",
            {"expected": ", ".join(WORKLOADS), "found": repr(value)},
        )
    return value


_NAME_CHECK = _checker(
    _NAME, "a name of letters, digits, '_', '.', '+' or '-' starting with a letter"
)
Name = Annotated[str, BeforeValidator(_NAME_CHECK)]
TenantName = Annotated[
    str,
    _matching(
        _TENANT,
        "a tenant name of letters, digits, '_', '+' or '-' starting with a letter "
        "(no '.' or '@': they build metric names)",
    ),
]
ProfileName = Annotated[str | None, BeforeValidator(_profile)]
WorkloadName = Annotated[str, BeforeValidator(_workload)]
