"""The stale-DMA detector's skipped re-checks (``drivers/dma_check.py``, "Re-checks skipped
while nothing changed"): an access through a mapping found clean passes without the fence walk
while the buffer's backing epoch and its resv's ``seq`` stand -- and every access that could be
stale or unfenced is still checked in full and reported:

* right after a move (the backing epoch changed) an importer that kept its old mapping is
  ``stale``, at the first access and at every later one;
* right after a KERNEL fence was added (``seq`` changed) an access that did not wait is
  ``unfenced``; once it signalled the next access is clean again;
* every access of the stale-DMA matrix (every exporter x importer x profile, the broken
  importer too) gets the verdict of the full check, access by access, and the run gives the
  same incidents and access count with the skip turned off.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from pinlab.drivers import dma_check
from pinlab.drivers.base import DeviceBuffer
from pinlab.drivers.dma_check import DmaIncident, StaleDmaDetector
from pinlab.kernel.dma_buf import DmaBuf, SgTable
from pinlab.kernel.fence import DmaFence
from pinlab.kernel.resv import DmaResvUsage
from pinlab.report.matrix import BUFFER_SIZE, EFA, GPU, MatrixMachine, build_machine
from pinlab.scenarios.config import load_scenario
from pinlab.scenarios.runner import run_scenario
from pinlab.uapi.process import Process
from tests.drivers.test_stale_dma import ACCESS, CASES, PRESSURE, PROFILES, drive, start


@dataclasses.dataclass
class Audit:
    """Every check: whether the full check was skipped, and the full check's verdict."""

    full: int = 0
    skipped: int = 0
    disagreements: list[str] = dataclasses.field(default_factory=list)


@pytest.fixture
def audit(monkeypatch: pytest.MonkeyPatch) -> Iterator[Audit]:
    """Run the full check beside every check (without recording anything) and compare."""
    seen = Audit()
    real_check = StaleDmaDetector.check
    real_verdict = StaleDmaDetector._verdict

    def verdict(self: StaleDmaDetector, *args: object) -> DmaIncident | None:
        seen.full += 1
        return real_verdict(self, *args)  # type: ignore[arg-type]

    def check(
        self: StaleDmaDetector,
        device: str,
        dmabuf: DmaBuf,
        sgt: SgTable | None,
        *args: Any,
        **kwargs: Any,
    ) -> DmaIncident | None:
        pid, waited = (args[0] if args else kwargs.get("pid")), kwargs.get("waited", False)
        buf = dmabuf.priv
        epoch = buf.epoch if isinstance(buf, DeviceBuffer) else 0
        reference = real_verdict(self, device, dmabuf, sgt, epoch, pid, waited)
        full = seen.full
        got = real_check(self, device, dmabuf, sgt, *args, **kwargs)
        if seen.full == full:
            seen.skipped += 1
        if (got is None) != (reference is None) or (
            got is not None and reference is not None and got.kind != reference.kind
        ):
            seen.disagreements.append(f"{device}: {got} vs the full check's {reference}")
        return got

    monkeypatch.setattr(StaleDmaDetector, "_verdict", verdict)
    monkeypatch.setattr(StaleDmaDetector, "check", check)
    yield seen


def _efa_import() -> tuple[MatrixMachine, Process, DmaBuf]:
    """A pinned EFA MR on an amdgpu buffer (6.16), its copies done: the machine, the process
    and the dma-buf."""
    m = build_machine("amdgpu", PROFILES["6.16"])
    proc = m.system.spawn("app")
    fd = proc.prime_handle_to_fd(proc.gem_create(GPU, BUFFER_SIZE, "vram"))
    m.settle(proc)
    mr = proc.ibv_reg_dmabuf_mr(EFA, fd, 0, BUFFER_SIZE, ACCESS)
    m.settle(proc)
    return m, proc, mr.dmabuf


def test_unchanged_mapping_skips_the_walk(audit: Audit) -> None:
    """The first access is checked in full and found clean; the next ones, through the same
    table with nothing changed, pass without the walk and are still counted."""
    m, proc, _dmabuf = _efa_import()
    mr = next(iter(proc.mrs.values()))
    for _ in range(3):
        assert proc.nic_dma(mr).incident is None
    detector = m.system.detector
    assert detector.accesses == 3 and detector.incidents == []
    assert (audit.full, audit.skipped) == (1, 2) and audit.disagreements == []


@pytest.mark.parametrize("exporter", ["amdgpu", "apu", "nvidia-compute", "xe"])
@pytest.mark.parametrize("profile", ["6.16+MN", "7.1"])
def test_move_after_a_clean_access_is_stale_at_once(
    audit: Audit, exporter: str, profile: str
) -> None:
    """An importer that ignores ``move_notify`` (the broken mlx5): its accesses were clean
    and skipped, then the buffer moves (VRAM pressure evicts it) -- the very next access is
    ``stale``, and so is every access after it (an incident is never noted as clean)."""
    m = build_machine(exporter, PROFILES[profile], broken_mlx5=True)
    proc = m.system.spawn("app")
    fd = proc.prime_handle_to_fd(proc.gem_create(GPU, BUFFER_SIZE, m.exporter.shareable_domain))
    m.settle(proc)
    access = start(m, "mlx5-odp", proc, fd)
    m.settle(proc)
    access()
    access()
    detector = m.system.detector
    assert detector.incidents == [] and audit.skipped >= 1
    hog = m.system.spawn("hog")
    hog.gem_create(GPU, PRESSURE, "vram")
    m.settle(proc, hog)
    skipped = audit.skipped
    access()
    assert [i.kind for i in detector.incidents] == ["stale"]
    access()
    assert [i.kind for i in detector.incidents] == ["stale", "stale"]
    assert audit.skipped == skipped and audit.disagreements == []
    hog.exit()
    proc.exit()


def test_new_kernel_fence_after_a_clean_access_is_unfenced(audit: Audit) -> None:
    """A KERNEL fence added to the buffer's resv after a clean (and then skipped) access
    changes ``seq``: the very next access that did not wait is ``unfenced``, as is the one
    after while the fence is pending; once it signalled the next access is checked in full
    and clean, and the one after is skipped again."""
    m, proc, dmabuf = _efa_import()
    mr = next(iter(proc.mrs.values()))
    proc.nic_dma(mr)
    proc.nic_dma(mr)
    assert audit.skipped == 1
    kernel = m.kernel
    fence = DmaFence(kernel.dma_fence_context_alloc(), 1, "test", "clear")
    with dmabuf.resv:
        dmabuf.resv.add_fence(fence, DmaResvUsage.KERNEL)
    first, second = proc.nic_dma(mr).incident, proc.nic_dma(mr).incident
    assert first is not None and second is not None
    assert (first.kind, second.kind) == ("unfenced", "unfenced")
    fence.signal()
    full = audit.full
    assert proc.nic_dma(mr).incident is None
    assert audit.full == full + 1
    assert proc.nic_dma(mr).incident is None
    assert audit.full == full + 1 and audit.disagreements == []
    proc.exit()


def test_a_waited_access_does_not_vouch_for_the_fences(audit: Audit) -> None:
    """An access that waited (a fault handler's) looks at no fence, so its clean verdict
    lets only waited accesses skip: the next access that did not wait walks the fences --
    and finds the one still pending."""
    m, proc, dmabuf = _efa_import()
    mr = next(iter(proc.mrs.values()))
    detector = m.system.detector
    kernel = m.kernel
    fence = DmaFence(kernel.dma_fence_context_alloc(), 1, "test", "clear")
    with dmabuf.resv:
        dmabuf.resv.add_fence(fence, DmaResvUsage.KERNEL)
    sgt = mr.umem.sgt
    assert detector.check("efa0", dmabuf, sgt, waited=True) is None
    assert detector.check("efa0", dmabuf, sgt, waited=True) is None
    assert audit.skipped == 1
    incident = detector.check("efa0", dmabuf, sgt)
    assert incident is not None and incident.kind == "unfenced"
    assert audit.disagreements == []
    fence.signal()
    proc.exit()


def test_an_access_without_a_mapping_is_always_checked(audit: Audit) -> None:
    """No table, no note: every access without a mapping is a ``stale`` incident."""
    m, proc, dmabuf = _efa_import()
    detector = m.system.detector
    for _ in range(2):
        incident = detector.check("efa0", dmabuf, None)
        assert incident is not None and incident.kind == "stale"
    assert audit.skipped == 0 and len(detector.incidents) == 2
    proc.exit()


def _incidents(exporter: str, importer: str, profile: str, broken: bool) -> tuple[object, ...]:
    ticks = itertools.count(1)
    m = build_machine(exporter, PROFILES[profile], broken_mlx5=broken, clock=lambda: next(ticks))
    drive(m, importer)
    detector = m.system.detector
    # buffer names carry process-global BO serials: everything else of each incident
    incidents = tuple(
        dataclasses.replace(i, buffer=i.buffer.rstrip("0123456789")) for i in detector.incidents
    )
    return detector.accesses, incidents


BROKEN = [
    pytest.param(e, "mlx5-odp", p, True, id=f"{e}-broken-mlx5-{p}")
    for e in ("amdgpu", "apu", "nvidia-compute", "xe")
    for p in PROFILES
    if not (e == "xe" and p == "5.16")
]
MATRIX = [pytest.param(*case.values, False, id=case.id) for case in CASES] + BROKEN


@pytest.mark.parametrize(("exporter", "importer", "profile", "broken"), MATRIX)
def test_every_access_gets_the_full_checks_verdict(
    audit: Audit,
    monkeypatch: pytest.MonkeyPatch,
    exporter: str,
    importer: str,
    profile: str,
    broken: bool,
) -> None:
    """The stale-DMA matrix, access by access: a skipped access is one the full check finds
    clean, and the run's incidents (time stamps included) and access count are those of the
    same run with the skip turned off; the skip did skip (a correct importer re-accesses an
    unchanged mapping)."""
    with_skip = _incidents(exporter, importer, profile, broken)
    assert audit.disagreements == []
    monkeypatch.setattr(dma_check, "_SKIP", False)
    skipped = audit.skipped
    without = _incidents(exporter, importer, profile, broken)
    assert audit.skipped == skipped  # the reference run checks every access in full
    assert with_skip == without
    assert skipped > 0 or broken or with_skip[0] == 0


@pytest.mark.parametrize("name", ["odp-vs-pin", "apu-display"])
def test_builtin_runs_are_the_same_without_the_skip(
    audit: Audit, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Two built-in scenarios (ODP faults and evictions; scanout frames): with the skip every
    access gets the full check's verdict, most accesses skip the walk, and every variant's
    ``summary.json`` and ``series.csv`` are byte for byte those of the run without it."""
    cfg = load_scenario(name)
    with_skip = [(r.summary_json(), r.series_csv()) for r in run_scenario(cfg)[0]]
    assert audit.disagreements == [] and audit.skipped > audit.full
    monkeypatch.setattr(dma_check, "_SKIP", False)
    assert [(r.summary_json(), r.series_csv()) for r in run_scenario(cfg)[0]] == with_skip
