"""The dmem controller's limit files as text: ``memparse`` and ``dmemcg_parse_limit`` (what a
write accepts), ``dmemcg_limit_show`` and ``dmemcg_limit_write`` (kernel/cgroup/dmem.c, 6.14;
P-19 … P-21, P-36).

Shared by the dmem controller (:mod:`pinlab.policy.dmem`), the opt-in proposals that add
limit files of the same format (``dmem-pin-max``, ``dmem.peak``) and the host reader
(``pinlab.inspect``), which parses a real host's files with the kernel's own rules.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable

from pinlab.kernel.dmem import DmemRegion
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.limits import U64_MAX
from pinlab.policy.cgroup import Cgroup
from pinlab.policy.page_counter import PAGE_COUNTER_MAX

_SHIFTS = {"k": 10, "m": 20, "g": 30, "t": 40, "p": 50, "e": 60}
_SPACE = " \t\n\r\v\f"


def memparse(text: str) -> tuple[int, int]:
    """``memparse`` (lib/cmdline.c): a number with an optional K/M/G/T/P/E suffix.

    Returns the value and the index where parsing stopped. Like ``simple_strtoull(.., 0)`` the
    base comes from the prefix (``0x`` hex, a leading ``0`` octal, else decimal), no sign or
    leading blank is accepted (nothing is consumed then), and the value wraps at 64 bits.
    """
    i = 0
    base = 10
    if text.startswith("0"):
        if len(text) > 2 and text[1] in "xX" and text[2] in string.hexdigits:
            base, i = 16, 2
        else:
            base = 8
    value = 0
    while i < len(text):
        ch = text[i]
        digit = int(ch, 16) if ch in string.hexdigits else base
        if digit >= base:
            break
        value = (value * base + digit) & U64_MAX
        i += 1
    if i < len(text) and text[i].lower() in _SHIFTS:
        value = (value << _SHIFTS[text[i].lower()]) & U64_MAX
        i += 1
    return value, i


def dmemcg_parse_limit(options: str) -> int | None:
    """``dmemcg_parse_limit``: ``max`` → ``PAGE_COUNTER_MAX``, else bytes via :func:`memparse`
    with nothing left over (no rounding, P-19); None when the value is malformed."""
    if options == "max":
        return PAGE_COUNTER_MAX
    value, end = memparse(options)
    if end != len(options):
        return None
    return value


def format_limit(value: int) -> str:
    """A limit as ``dmemcg_limit_show`` prints it: ``max`` from ``PAGE_COUNTER_MAX`` on."""
    return "max" if value >= PAGE_COUNTER_MAX else str(value)


def dmemcg_limit_show(regions: Iterable[DmemRegion], value: Callable[[DmemRegion], int]) -> str:
    """``dmemcg_limit_show``: one ``<region> <value>`` line per registered region (P-21)."""
    return "".join(f"{r.name} {format_limit(value(r))}\n" for r in regions)


def dmemcg_limit_write(
    cgrp: Cgroup,
    filename: str,
    text: str,
    find_region: Callable[[str], DmemRegion | None],
    apply: Callable[[DmemRegion, int], None],
) -> None:
    """``dmemcg_limit_write`` (6.14): apply ``<region> <value>`` lines in order (P-36).

    Each line is stripped; blank lines are skipped; the region name ends at the first blank
    or tab and the rest is the value (a second blank makes the value malformed, as in the
    kernel). A line without a value, an unknown region or a malformed value is ``-EINVAL``
    -- after the earlier lines took effect.
    """
    where = cgrp.path.rstrip("/") + "/" + filename
    for raw in text.split("\n"):
        options = raw.strip(_SPACE)
        if not options:
            continue
        cut = min((i for i in (options.find(" "), options.find("\t")) if i >= 0), default=-1)
        region_name = options if cut < 0 else options[:cut]
        rest = "" if cut < 0 else options[cut + 1 :]
        if not rest:
            raise KernelError(
                Errno.EINVAL, "dmemcg_limit_write", f"{where}: no value for {region_name!r}"
            )
        region = find_region(region_name)
        if region is None:
            raise KernelError(
                Errno.EINVAL, "dmemcg_limit_write", f"{where}: unknown region {region_name!r}"
            )
        value = dmemcg_parse_limit(rest)
        if value is None:
            raise KernelError(
                Errno.EINVAL,
                "dmemcg_limit_write",
                f"{where}: malformed value {rest!r} for {region_name} (bytes, K/M/G, or max)",
            )
        apply(region, value)
