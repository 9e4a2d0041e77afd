"""habanalabs-like static exporter (``kernel-semantics.md`` §7.2, §10.3): K-52, K-75, K-82,
K-93 and the always-resident HBM model."""

from __future__ import annotations

from typing import Any

import pytest

from pinlab.drivers.base import EXPORTERS
from pinlab.drivers.habanalabs import HabanalabsDevice
from pinlab.kernel.dma_buf import (
    DmaDataDirection,
    dma_buf_attach,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_is_dynamic,
    dma_buf_map_attachment,
    dma_buf_pin,
    dma_buf_put,
    dma_buf_unmap_attachment,
    dma_buf_unpin,
    get_dma_buf,
)
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.umem import (
    ib_umem_dmabuf_get,
    ib_umem_dmabuf_map_pages,
    ib_umem_dmabuf_release,
)
from tests.drivers.machine import (
    ACCESS,
    ALL_PRESETS,
    CACHING,
    PIN_AT_MAP,
    GiB,
    Machine,
    MiB,
    Recorder,
    make_machine,
)

EPERM_LINE = "Failed to map dmabuf because p2p is disabled"


def setup(profile: str = "6.16", **kw: Any) -> tuple[Machine, HabanalabsDevice]:
    m = make_machine(profile, **kw)
    return m, HabanalabsDevice(m.kernel, m.gpu, hbm_size=1 * GiB)


def test_registered_as_habanalabs_and_static() -> None:
    assert EXPORTERS["habanalabs"] is HabanalabsDevice
    _m, hl = setup()
    mem = hl.create_buffer(8 * MiB)
    dmabuf = hl.export(mem)
    assert not dma_buf_is_dynamic(dmabuf)
    assert hl.dynamic is False and "resident" in hl.pin_policy
    assert dmabuf.exp_name == "habanalabs"
    assert hl.buffer_of(dmabuf) is mem
    dma_buf_put(dmabuf)


def test_hbm_is_always_resident_and_reported() -> None:
    """Device memory comes from the HBM range allocator, is 'pinned' from birth and never
    moves: location vram, epoch 0, regions() counts every used byte as pinned."""
    _m, hl = setup()
    a = hl.create_buffer(3 * MiB, "hbm", name="weights")  # rounded up to 2 MiB pages
    b = hl.create_buffer(8 * MiB, contiguous=True)
    assert (a.location, a.pinned, a.size, a.epoch) == ("vram", True, 4 * MiB, 0)
    assert b.allocation.contiguous and a.handle != b.handle
    (region,) = hl.regions()
    assert (region.name, region.size, region.used, region.pinned) == (
        "vram",
        1 * GiB,
        12 * MiB,
        12 * MiB,
    )
    dmabuf = hl.export(a)
    assert hl.backing_epoch(dmabuf) == 0
    dma_buf_put(dmabuf)
    hl.free_buffer(a)
    hl.free_buffer(b)
    assert hl.regions()[0].used == 0 and a.location is None and not a.pinned


def test_create_buffer_rejects_non_device_domains_and_runs_out_with_enomem() -> None:
    _m, hl = setup()
    with pytest.raises(KernelError, match=r"-EINVAL .*habanalabs domain 'gtt'"):
        hl.create_buffer(MiB, "gtt")
    hl.create_buffer(1 * GiB)
    with pytest.raises(KernelError) as e:
        hl.create_buffer(2 * MiB)
    assert e.value.errno is Errno.ENOMEM


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k52_attach_always_succeeds_and_clears_peer2peer_for_unreachable(profile: str) -> None:
    """K-52: hl_dmabuf_attach clears peer2peer when pci_p2pdma_distance < 0 and returns 0; a
    static importer (peer2peer always False) attaches as well."""
    m, hl = setup(profile, cpu="intel")
    dmabuf = hl.export(hl.create_buffer(4 * MiB))
    near = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    assert near.peer2peer  # same switch: BUS_ADDR
    static = dma_buf_attach(dmabuf, m.far_nic)
    assert not static.peer2peer and static in dmabuf.attachments
    # the query is verbose: the unlisted Intel host bridge is named in the log
    assert any("whitelist" in line for line in m.topo.log)
    dma_buf_detach(dmabuf, static)
    dma_buf_detach(dmabuf, near)
    dma_buf_put(dmabuf)


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k52_dynamic_attach_of_unreachable_importer_succeeds_from_6_16(profile: str) -> None:
    """K-52: in the pin-at-map family nothing is mapped at attach, so the exporter's attach
    decides alone: it clears peer2peer and succeeds."""
    m, hl = setup(profile, cpu="intel")
    dmabuf = hl.export(hl.create_buffer(4 * MiB))
    for dev in (m.far_nic, m.virt):
        attach = dma_buf_dynamic_attach(dmabuf, dev, Recorder().ops)
        assert not attach.peer2peer
        dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k52_map_without_peer2peer_is_eperm_and_logged(profile: str) -> None:
    """K-52: a static importer can attach but never map: -EPERM and the log line."""
    m, hl = setup(profile)
    dmabuf = hl.export(hl.create_buffer(4 * MiB))
    attach = dma_buf_attach(dmabuf, m.nic)
    with dmabuf.resv, pytest.raises(KernelError) as e:
        dma_buf_map_attachment(attach)
    assert e.value.errno is Errno.EPERM
    assert any(EPERM_LINE in line for line in m.kernel.dmesg)
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k52_p2p_map_is_a_pageless_bar_table(profile: str) -> None:
    m, hl = setup(profile)
    mem = hl.create_buffer(6 * MiB)
    dmabuf = hl.export(mem)
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    with dmabuf.resv:
        sgt = dma_buf_map_attachment(attach)
        assert sgt.page_less and sgt.p2p and sgt.memory == "vram"
        assert sgt.nbytes == mem.size and sgt.segments == mem.allocation.segments
        assert hl.mapping_current(dmabuf, sgt)
        dma_buf_unmap_attachment(attach, sgt, DmaDataDirection.BIDIRECTIONAL)
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)
    assert not m.kernel.leaks


@pytest.mark.parametrize("profile", ALL_PRESETS)
def test_k52_k93_pinned_import_pin_is_a_noop_and_nothing_is_ever_notified(profile: str) -> None:
    """§10.3, the 2021 target: an EFA-like pinned import of HBM. dma_buf_pin returns 0 without
    effect (K-20, K-93), pinned is still set, the map is P2P in place, no move_notify ever."""
    m, hl = setup(profile)
    mem = hl.create_buffer(16 * MiB)
    fd = m.fd(hl.export(mem))
    umem = m.pinned_umem(m.nic, fd, mem.size)
    assert umem.pinned and umem.sgt is not None and umem.sgt.p2p and umem.sgt.page_less
    assert umem.attach is not None and umem.attach.importer_pins == 0  # nothing reached E
    dmabuf = umem.dmabuf
    with dmabuf.resv:
        dma_buf_pin(umem.attach)
        dma_buf_unpin(umem.attach)
    assert dmabuf.move_notify_count == 0 and mem.location == "vram"
    ib_umem_dmabuf_release(umem)
    assert not m.kernel.warnings.records() and not m.kernel.leaks


@pytest.mark.parametrize("profile", CACHING)
def test_k75_caching_family_attach_itself_fails_with_eperm(profile: str) -> None:
    """K-75 (≤6.15): the core maps a dynamic importer of a static exporter at attach; without
    P2P the map's -EPERM fails the attach and nothing stays listed."""
    m, hl = setup(profile)
    dmabuf = hl.export(hl.create_buffer(4 * MiB))
    with pytest.raises(KernelError) as e:
        dma_buf_dynamic_attach(dmabuf, m.virt, Recorder().ops)
    assert e.value.errno is Errno.EPERM and not dmabuf.attachments
    fd = m.fd(dmabuf)
    with pytest.raises(KernelError) as e:
        ib_umem_dmabuf_get(m.kernel, m.virt, 0, MiB, fd, ACCESS, Recorder().ops, files=m.files)
    assert e.value.errno is Errno.EPERM
    with pytest.raises(KernelError) as e:
        m.pinned_umem(m.virt, fd, MiB)
    assert e.value.errno is Errno.EPERM
    assert dmabuf.refcount == 1 and not dmabuf.attachments and not m.kernel.leaks


@pytest.mark.parametrize("profile", PIN_AT_MAP)
def test_k75_pin_at_map_family_attach_succeeds_and_first_map_fails(profile: str) -> None:
    """K-75 (≥6.16): the attach succeeds; the first map returns -EPERM."""
    m, hl = setup(profile)
    dmabuf = hl.export(hl.create_buffer(4 * MiB))
    fd = m.fd(dmabuf)
    umem = ib_umem_dmabuf_get(m.kernel, m.virt, 0, MiB, fd, ACCESS, Recorder().ops, files=m.files)
    assert umem.attach is not None and not umem.attach.peer2peer
    with dmabuf.resv, pytest.raises(KernelError) as e:
        ib_umem_dmabuf_map_pages(umem)
    assert e.value.errno is Errno.EPERM
    ib_umem_dmabuf_release(umem)
    with pytest.raises(KernelError) as e:  # the pinned import fails at its map step
        m.pinned_umem(m.virt, fd, MiB)
    assert e.value.errno is Errno.EPERM
    assert dmabuf.refcount == 1 and not dmabuf.attachments and not m.kernel.leaks


@pytest.mark.parametrize("profile", ["5.16", "6.16"])
def test_k82_free_while_exported_is_einval_until_every_dmabuf_is_released(profile: str) -> None:
    """K-82: free_device_memory refuses a handle with a live export ("handle %u is exported,
    cannot free"); each export counts; the free works once the last dma-buf is released."""
    m, hl = setup(profile)
    mem = hl.create_buffer(4 * MiB)
    first = hl.export(mem)
    second = hl.export(mem)
    assert first is not second and mem.exporting_cnt == 2
    extra = get_dma_buf(first)
    with pytest.raises(KernelError) as e:
        hl.free_buffer(mem)
    assert e.value.errno is Errno.EINVAL
    assert any(f"handle {mem.handle} is exported, cannot free" in ln for ln in m.kernel.dmesg)
    dma_buf_put(second)
    dma_buf_put(first)
    assert mem.exporting_cnt == 1  # `extra` still holds the first dma-buf
    with pytest.raises(KernelError):
        hl.free_buffer(mem)
    dma_buf_put(extra)
    assert mem.exporting_cnt == 0
    hl.free_buffer(mem)
    assert hl.regions()[0].used == 0


def test_free_of_unknown_handle_and_export_of_freed_memory_are_einval() -> None:
    m, hl = setup()
    mem = hl.create_buffer(2 * MiB)
    hl.free_buffer(mem)
    with pytest.raises(KernelError) as e:
        hl.free_buffer(mem)
    assert e.value.errno is Errno.EINVAL
    assert any("no match for handle" in line for line in m.kernel.dmesg)
    with pytest.raises(KernelError) as e:
        hl.export(mem)
    assert e.value.errno is Errno.EINVAL
