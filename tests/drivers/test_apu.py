"""AMD APU exporter: amdgpu whose dma-buf pin always migrates to GTT (``seed-brief.md`` pillar
1, driver autonomy), in contrast with a discrete amdgpu that pins in VRAM from 6.16 (K-49)."""

from __future__ import annotations

import pytest

from pinlab.drivers.amdgpu import AmdgpuDevice, AmdgpuDomain
from pinlab.drivers.apu import AmdgpuApuDevice
from pinlab.drivers.base import EXPORTERS
from pinlab.kernel.dma_buf import (
    DmaDataDirection,
    dma_buf_attach,
    dma_buf_detach,
    dma_buf_dynamic_attach,
    dma_buf_map_attachment,
    dma_buf_pin,
    dma_buf_put,
    dma_buf_unmap_attachment,
)
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.umem import ib_umem_dmabuf_release
from tests.drivers.machine import GiB, MiB, Recorder, make_machine, profile_mn

PROFILES_MN = [
    ("5.16", False),
    ("6.12", True),
    ("6.14", True),
    ("6.16", False),
    ("6.16", True),
    ("7.1", True),
]


def test_registered_as_apu_and_an_amdgpu() -> None:
    assert EXPORTERS["apu"] is AmdgpuApuDevice
    m = make_machine()
    apu = AmdgpuApuDevice(m.kernel, m.gpu)
    assert isinstance(apu, AmdgpuDevice) and apu.driver_name == "apu"
    assert apu.regions()[0].name == "vram" and apu.regions()[0].size == 2 * GiB  # carve-out
    bo = apu.create_buffer(4 * MiB)
    dmabuf = apu.export(bo)
    assert dmabuf.exp_name == "amdgpu" and apu.pin_domains(dmabuf) is AmdgpuDomain.GTT
    dma_buf_put(dmabuf)


@pytest.mark.parametrize(("profile", "mn"), PROFILES_MN)
def test_p2p_pin_always_migrates_to_gtt(profile: str, mn: bool) -> None:
    """Whatever the profile and however P2P-capable the pinner, the APU pins in GTT; a discrete
    amdgpu on the same machine pins in VRAM where K-49 allows it (6.16 with MN, 7.1)."""
    m = make_machine(profile_mn(profile, mn))
    apu = AmdgpuApuDevice(m.kernel, m.gpu, vram_size=256 * MiB)
    bo = apu.create_buffer(16 * MiB)
    umem = m.pinned_umem(m.nic, m.fd(apu.export(bo)), bo.size)
    assert umem.attach is not None and umem.attach.peer2peer
    assert bo.location == "gtt" and bo.pinned and apu.gart_pin_size == bo.size
    assert umem.sgt is not None and not umem.sgt.page_less
    ib_umem_dmabuf_release(umem)
    assert not bo.pinned and apu.gart_pin_size == 0

    dgpu = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB, name="dgpu")
    dbo = dgpu.create_buffer(16 * MiB)
    dumem = m.pinned_umem(m.nic, m.fd(dgpu.export(dbo)), dbo.size)
    vram_allowed = profile == "7.1" or (profile == "6.16" and mn)
    assert dbo.location == ("vram" if vram_allowed else "gtt")
    ib_umem_dmabuf_release(dumem)


@pytest.mark.parametrize("profile", ["6.12", "6.16"])
def test_static_importer_pins_in_gtt(profile: str) -> None:
    """A display-like static importer: the core pins (attach ≤6.15, map ≥6.16); GTT."""
    m = make_machine(profile)
    apu = AmdgpuApuDevice(m.kernel, m.gpu)
    bo = apu.create_buffer(8 * MiB)
    dmabuf = apu.export(bo)
    attach = dma_buf_attach(dmabuf, m.nic)
    with dmabuf.resv:
        sgt = dma_buf_map_attachment(attach)
        assert bo.location == "gtt" and bo.pinned and sgt.memory == "gtt"
        dma_buf_unmap_attachment(attach, sgt, DmaDataDirection.BIDIRECTIONAL)
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)
    assert not bo.pinned


def test_unpinned_p2p_mapping_may_stay_in_the_carve_out() -> None:
    """Only pin is overridden: amdgpu's map (K-51) still lets a dynamic P2P importer map the
    carve-out while nothing is pinned."""
    m = make_machine("7.1")
    apu = AmdgpuApuDevice(m.kernel, m.gpu)
    bo = apu.create_buffer(8 * MiB)
    dmabuf = apu.export(bo)
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    with dmabuf.resv:
        sgt = dma_buf_map_attachment(attach)
        assert bo.location == "vram" and sgt.page_less and not bo.pinned
        dma_buf_unmap_attachment(attach, sgt, DmaDataDirection.BIDIRECTIONAL)
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)


def test_bo_pinned_in_the_carve_out_by_the_driver_cannot_be_dma_buf_pinned() -> None:
    """K-50 through the APU policy: a BO the driver pinned in VRAM (a scanout) is not in GTT,
    so the dma-buf pin fails with -EINVAL and nothing moves."""
    m = make_machine("7.1")
    apu = AmdgpuApuDevice(m.kernel, m.gpu)
    bo = apu.create_buffer(8 * MiB)
    dmabuf = apu.export(bo)
    attach = dma_buf_dynamic_attach(dmabuf, m.nic, Recorder().ops)
    with dmabuf.resv:
        apu.amdgpu_bo_pin(bo, AmdgpuDomain.VRAM)
        with pytest.raises(KernelError) as e:
            dma_buf_pin(attach)
        assert e.value.errno is Errno.EINVAL and bo.location == "vram" and bo.tbo.pin_count == 1
        apu.amdgpu_bo_unpin(bo)
    dma_buf_detach(dmabuf, attach)
    dma_buf_put(dmabuf)
