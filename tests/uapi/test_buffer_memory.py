"""What a live exported buffer costs (issue 12, item 5): at most 1.5 KiB per buffer created
with ``gem_create`` + ``prime_handle_to_fd`` (tracemalloc; ``benchmarks/bench_alloc.py``
measures 1e6 of them), no per-buffer ``__dict__`` and no per-buffer closure, and the
location policies read still the exporter's answer."""

from __future__ import annotations

import gc
import tracemalloc
import types

import pytest

from pinlab.drivers.base import ExporterDriver
from pinlab.kernel.dma_buf import DmaBuf
from pinlab.kernel.profile import get_profile
from pinlab.platform import presets
from pinlab.platform.builder import build
from pinlab.platform.topology import Machine
from pinlab.uapi import Process

GiB = 1 << 30
BUFFER = {"amdgpu": 4096, "habanalabs": 2 << 20}
COUNT = 2000


def machine(exporter: str) -> tuple[Machine, Process]:
    spec = presets.matrix(exporter=exporter, memory=(COUNT + 64) * BUFFER[exporter] * 2)
    m = build(spec, get_profile("6.16"))
    return m, m.system.spawn("bench", memlock=1 << 50)


def export(m: Machine, proc: Process, exporter: str, count: int) -> list[tuple[int, int]]:
    out = []
    for _ in range(count):
        handle = proc.gem_create("gpu0", BUFFER[exporter])
        out.append((handle, proc.prime_handle_to_fd(handle)))
    for bdev in m.ttm_devices():
        bdev.run_copies()  # the clears' fences signal, and stay in the buffers' resvs
    proc.take_waits()
    m.kernel.take_waits()
    return out


@pytest.mark.parametrize("exporter", sorted(BUFFER))
def test_a_live_exported_buffer_costs_at_most_1_5_kib(exporter: str) -> None:
    m, proc = machine(exporter)
    export(m, proc, exporter, 16)  # the drivers' one-time state
    handles = [0] * COUNT  # what this test keeps, allocated before tracing
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, (handle, _fd) in enumerate(export(m, proc, exporter, COUNT)):
            handles[i] = handle
        gc.collect()
        per_buffer = (tracemalloc.get_traced_memory()[0] - before) / COUNT
    finally:
        tracemalloc.stop()
    # the list of (handle, fd) pairs export() returned is gone; the handles are small ints
    assert per_buffer <= 1536, f"{per_buffer:.0f} bytes per live exported {exporter} buffer"


@pytest.mark.parametrize("exporter", sorted(BUFFER))
def test_the_objects_of_a_buffer_have_no_dict_and_no_closure(exporter: str) -> None:
    m, proc = machine(exporter)
    ((handle, fd),) = export(m, proc, exporter, 1)
    gem = proc.handles[handle]
    file = proc.files.lookup(fd)
    assert file is not None and isinstance(file.private_data, DmaBuf)
    dmabuf = file.private_data
    objects: list[object] = [gem, gem.buffer, dmabuf, file, dmabuf.resv]
    tbo = getattr(gem.buffer, "tbo", None)
    if tbo is not None:  # TTM: the BO, its resource and allocation, the clear's fence
        objects += [tbo, tbo.resource, tbo.resource.allocation, *tbo.resv.fences(3)]
    else:
        objects.append(gem.buffer.allocation)
    for obj in objects:
        assert not hasattr(obj, "__dict__"), type(obj).__name__
    functions = [r for obj in objects for r in gc.get_referents(obj) if callable(r)]
    local = [f for f in functions if "<locals>" in getattr(f, "__qualname__", "")]
    assert not local, local  # shared functions only (the file's release), nothing per buffer
    assert not [f for f in functions if isinstance(f, types.MethodType)]


@pytest.mark.parametrize("exporter", sorted(BUFFER))
def test_the_exporter_locates_its_buffers(exporter: str) -> None:
    """``DmaBuf.locate()`` asks the exporter (``DmaBuf.locator``) where the bytes are now;
    without a locator there is no location (an exporter that publishes none)."""
    m, proc = machine(exporter)
    ((_, fd),) = export(m, proc, exporter, 1)
    file = proc.files.lookup(fd)
    assert file is not None and isinstance(file.private_data, DmaBuf)
    dmabuf = file.private_data
    driver = m.system.exporter("gpu0")
    assert isinstance(driver, ExporterDriver) and dmabuf.locator is driver
    where = dmabuf.locate()
    assert where is not None
    assert (where.device, where.memory, where.region) == (driver.name, "vram", driver.vram_region)
    dmabuf.locator = None
    assert dmabuf.locate() is None
