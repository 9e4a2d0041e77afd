"""Reader of debugfs: ``dma_buf/bufinfo``, the kernel's list of live dma-bufs.

:func:`read_bufinfo` parses ``/sys/kernel/debug/dma_buf/bufinfo`` with
:func:`pinlab.kernel.bufinfo.parse_bufinfo` (``kernel-semantics.md`` §4.1) and, when it is
absent, says why (debugfs not mounted, no ``CONFIG_DMA_SHARED_BUFFER``, root only).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinlab.inspect.cgroup import read_mounts
from pinlab.inspect.source import (
    MISSING,
    OK,
    ROOT,
    SourceRecord,
    read_text,
    under,
    unreadable,
    why,
)
from pinlab.kernel.bufinfo import BufinfoDump, BufinfoParseError, parse_bufinfo

__all__ = ["BUFINFO", "DEBUGFS", "BufinfoInfo", "read_bufinfo"]

DEBUGFS = "/sys/kernel/debug"
BUFINFO = f"{DEBUGFS}/dma_buf/bufinfo"


@dataclass(frozen=True, slots=True)
class BufinfoInfo(SourceRecord):
    """debugfs ``dma_buf/bufinfo``, parsed (``kernel-semantics.md`` §4.1)."""

    dump: BufinfoDump | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "source": self.source, "detail": self.detail}
        if self.dump is not None:
            exporters: dict[str, int] = {}
            for rec in self.dump.objects:
                exporters[rec.exp_name] = exporters.get(rec.exp_name, 0) + 1
            out["objects"] = len(self.dump.objects)
            out["bytes"] = sum(rec.size for rec in self.dump.objects)
            out["attachments"] = sum(len(rec.attached_devices) for rec in self.dump.objects)
            out["exporters"] = exporters
            out["problems"] = self.dump.problems()
        return out


def read_bufinfo(root: Path = ROOT) -> BufinfoInfo:
    """debugfs ``dma_buf/bufinfo``, parsed; permission errors and a missing debugfs reported."""
    path = under(root, BUFINFO)
    try:
        text = read_text(path)
    except FileNotFoundError:
        return BufinfoInfo(MISSING, str(path), detail=_bufinfo_missing(root))
    except PermissionError as e:
        return BufinfoInfo(
            unreadable(why(e)),
            str(path),
            detail="debugfs is readable by root only (and not at all under kernel lockdown)",
        )
    except OSError as e:
        return BufinfoInfo(unreadable(why(e)), str(path))
    try:
        dump = parse_bufinfo(text)
    except BufinfoParseError as e:
        return BufinfoInfo(unreadable(f"malformed bufinfo: {e}"), str(path))
    detail = "; ".join(dump.problems())
    return BufinfoInfo(OK, str(path), dump, detail)


def _bufinfo_missing(root: Path) -> str:
    if under(root, f"{DEBUGFS}/dma_buf").is_dir():
        return "dma_buf/ exists in debugfs but has no bufinfo"
    _, mounts, _ = read_mounts(root)
    mounted = mounts is not None and any(
        m.fstype == "debugfs" and m.point == DEBUGFS for m in mounts
    )
    if mounted:
        return "debugfs is mounted but has no dma_buf/ (kernel without CONFIG_DMA_SHARED_BUFFER?)"
    return f"debugfs is not mounted at {DEBUGFS} (mount -t debugfs none {DEBUGFS})"
