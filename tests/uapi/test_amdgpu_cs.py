"""``Process.amdgpu_cs``: a GPU job moves its evicted buffer back into VRAM through the driver's
``amdgpu_cs_ioctl``, under the per-device move throttle that accrues with the machine's clock
(K-37, K-38, K-61, K-62, K-64)."""

from __future__ import annotations

import pytest

from pinlab.drivers.amdgpu import (
    AMDGPU_CS_MOVE_WINDOW,
    AmdgpuBo,
    AmdgpuDevice,
    AmdgpuDomain,
    AmdgpuMoveStats,
)
from pinlab.platform import Machine, build
from pinlab.platform.presets import PRESETS

MiB = 1 << 20
GiB = 1 << 30


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def machine(clock: Clock) -> tuple[Machine, AmdgpuDevice]:
    spec = PRESETS["workstation"](vram=2 * GiB, resizable_bar=True, nic=False)
    m = build(spec, "6.16", clock=clock)
    gpu = m.exporters["gpu0"]
    assert isinstance(gpu, AmdgpuDevice)
    return m, gpu


def evict_all(m: Machine, gpu: AmdgpuDevice) -> None:
    """A VRAM-only allocation as large as VRAM evicts every unpinned BO to GTT."""
    hog = m.system.spawn("hog")
    handle = hog.gem_create("gpu0", 2 * GiB)
    gpu.bdev.run_copies()
    hog.gem_close(handle)


def test_an_evicted_buffer_moves_back_and_the_job_waits_for_the_move() -> None:
    m, gpu = machine(Clock())
    app = m.system.spawn("app")
    handle = app.gem_create("gpu0", 256 * MiB)
    app.take_waits()
    evict_all(m, gpu)
    assert app.buffer(handle).location == "gtt"
    notifies = gpu.move_notifies
    assert app.amdgpu_cs(handle) == "vram"  # no throttle: it moves back at once
    waits = app.take_waits()
    assert waits and not any(f.signaled for f in waits)  # the copy job's KERNEL fence (K-64)
    assert gpu.move_notifies == notifies  # the BO is not exported: nobody to notify
    gpu.bdev.run_copies()
    assert app.amdgpu_cs(handle) == "vram" and app.take_waits() == []


def test_the_move_throttle_accrues_with_the_machine_clock() -> None:
    """2 GiB/s banks at most 0.2 s = 409.6 MiB: the first 256 MiB BO moves back, the second
    must wait until 0.1 s more have accrued (and a BO larger than the bank never moves)."""
    clock = Clock()
    m, gpu = machine(clock)
    rate = 2.0 * GiB
    gpu.set_move_throttle(rate)  # the simulator's hook (evict.moveback_throttle)
    assert isinstance(gpu.mm_stats, AmdgpuMoveStats)
    app = m.system.spawn("app")
    a, b = (app.gem_create("gpu0", 256 * MiB) for _ in range(2))
    evict_all(m, gpu)
    assert app.amdgpu_cs(a) == "vram"
    assert gpu.mm_stats.accum == pytest.approx(rate * AMDGPU_CS_MOVE_WINDOW - 256 * MiB)
    assert app.amdgpu_cs(b) == "gtt"  # the allowance left does not cover it
    clock.t = 0.1
    assert app.amdgpu_cs(b) == "vram"
    gpu.bdev.run_copies()
    big = app.gem_create("gpu0", 512 * MiB)
    evict_all(m, gpu)
    clock.t = 10.0
    assert app.amdgpu_cs(big) == "gtt"  # 512 MiB > 0.2 s x 2 GiB/s, however long it waits


def test_a_pinned_buffer_never_moves_and_other_drivers_run_in_place() -> None:
    m, gpu = machine(Clock())
    app = m.system.spawn("app")
    handle = app.gem_create("gpu0", 64 * MiB)
    evict_all(m, gpu)
    bo = app.buffer(handle)
    assert isinstance(bo, AmdgpuBo) and bo.location == "gtt"
    with bo.tbo.resv:
        gpu.amdgpu_bo_pin(bo, AmdgpuDomain.GTT)
    assert app.amdgpu_cs(handle) == "gtt"  # pinned where it was evicted to: it stays (K-61)
    dl1 = build(PRESETS["dl1"](), "5.16")
    trainer = dl1.system.spawn("trainer")
    h = trainer.gem_create("gaudi0", 64 * MiB)
    trainer.take_waits()
    assert trainer.amdgpu_cs(h) == "vram" and trainer.take_waits() == []
