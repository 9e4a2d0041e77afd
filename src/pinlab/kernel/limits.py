"""The integer limits of a 64-bit kernel (include/linux/limits.h, include/vdso/limits.h).

Overflow checks on user-supplied offsets and lengths compare against these, as the C code
does (``check_add_overflow`` results, ``offset + size > U64_MAX``).
"""

from __future__ import annotations

U64_MAX = (1 << 64) - 1
"""``U64_MAX``: ``((u64)~0ULL)`` (include/linux/limits.h)."""

ULONG_MAX = U64_MAX
"""``ULONG_MAX``: ``(~0UL)`` (include/vdso/limits.h); ``unsigned long`` is 64 bits wide on
every architecture pinlab models."""
