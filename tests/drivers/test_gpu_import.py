"""GPU import, the dynamic GPU importer (``kernel-semantics.md`` §7.1 importer side): K-80 (a
notified import is gutted and re-mapped at next use), K-39 (the re-map lands at the new place and
waits for the move's KERNEL fence), K-77 (MN off: the first map pins in GTT) and K-79."""

from __future__ import annotations

import pytest

from pinlab.drivers import IMPORTERS
from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuDevice, AmdgpuDomain
from pinlab.drivers.gpu_import import GpuImporter
from pinlab.drivers.habanalabs import HabanalabsDevice
from pinlab.kernel.dma_buf import DmaBuf, DmaBufAttachment
from pinlab.kernel.pci import PciDev
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_validate
from tests.drivers.machine import GiB, Machine, MiB, make_machine, profile_mn

SIZE = 8 * MiB


def setup(
    profile: str = "6.16", mn: bool = True
) -> tuple[Machine, AmdgpuDevice, AmdgpuDevice, GpuImporter]:
    """The exporting GPU on the switch; the importing GPU is the NIC's function (a peer)."""
    m = make_machine(profile_mn(profile, mn))
    gpu = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB, gtt_size=512 * MiB, system_size=GiB)
    peer = AmdgpuDevice(m.kernel, peer_fn(m), vram_size=256 * MiB, gtt_size=512 * MiB, name="gpu1")
    return m, gpu, peer, GpuImporter(peer)


def peer_fn(m: Machine) -> PciDev:
    """The PCI function next to the exporter on the switch (the NIC's, here a second GPU)."""
    pdev = m.nic.parent
    assert isinstance(pdev, PciDev)
    return pdev


def exported(m: Machine, gpu: AmdgpuDevice) -> tuple[AmdgpuBo, DmaBuf, int]:
    bo = gpu.create_buffer(SIZE, "vram")
    dmabuf = gpu.export(bo)
    fd = m.fd(dmabuf)
    gpu.bdev.run_copies()
    m.kernel.take_waits()
    return bo, dmabuf, fd


def test_registered_as_gpu_import() -> None:
    assert IMPORTERS["gpu-import"] is GpuImporter


@pytest.mark.parametrize(("profile", "mn"), [("6.12", True), ("6.16", True), ("7.1", True)])
def test_k80_k39_notified_import_is_gutted_and_remapped_at_the_new_place(
    profile: str, mn: bool
) -> None:
    """K-80: the importing GPU attaches dynamically with allow_peer2peer; an exporter move
    calls its move_notify, which validates the import BO with an empty placement (gutting,
    K-86) and drops the mapping. K-39: the next GPU job maps again -- now from GTT -- and
    syncs to the move's KERNEL fence; no access is stale."""
    m, gpu, peer, importer = setup(profile, mn)
    bo, dmabuf, fd = exported(m, gpu)
    abo = importer.import_fd(fd, files=m.files)
    assert abo.is_import and importer.imports == [abo] and dmabuf.refcount == 2
    attach = abo.tbo.import_attach
    assert isinstance(attach, DmaBufAttachment) and attach.peer2peer
    first = importer.access(abo)
    assert first.remapped and (first.memory, first.p2p) == ("vram", True) and not bo.pinned
    assert not importer.access(abo).remapped
    with dmabuf.resv:
        ttm_bo_validate(bo.tbo, (TtmPlace(TtmMemType.TT),))
    assert abo.tbo.resource is None and abo.import_sgt is None and peer.bdev.gutted == 1
    moved = importer.access(abo)
    assert moved.remapped and (moved.memory, moved.p2p) == ("gtt", False)
    assert len(moved.wait) == 1 and moved.incident is None
    gpu.bdev.run_copies()
    assert importer.access(abo).wait == ()
    importer.release(abo)
    assert not importer.imports and not dmabuf.attachments and dmabuf.refcount == 1
    assert not importer.detector.incidents and not m.kernel.leaks


@pytest.mark.parametrize("profile", ["5.16", "6.12", "6.14", "6.16"])
def test_k77_mn_off_the_import_map_pins_in_gtt(profile: str) -> None:
    """K-77 (K-34, K-26): with MOVE_NOTIFY off every map of the dynamic import pins, and
    amdgpu then pins in GTT: the buffer migrates out of VRAM and never notifies the import."""
    m, gpu, _peer, importer = setup(profile, False)
    bo, _dmabuf, fd = exported(m, gpu)
    abo = importer.import_fd(fd, files=m.files)
    result = importer.access(abo)
    assert (result.memory, result.p2p) == ("gtt", False) and bo.pinned and bo.location == "gtt"
    assert len(result.wait) == 1  # the VRAM -> GTT migration
    assert gpu.move_notifies == 1  # sent before the migration, to nobody that could care
    importer.release(abo)
    assert not bo.pinned and not m.kernel.leaks


def test_k79_pinning_the_import_forwards_dma_buf_pin() -> None:
    """K-79: the importing GPU pins its import only in GTT and forwards ``dma_buf_pin`` to the
    exporter (which pins too); closing the import drops both."""
    m, gpu, peer, importer = setup("6.16", True)
    bo, dmabuf, fd = exported(m, gpu)
    abo = importer.import_fd(fd, files=m.files)
    with dmabuf.resv:
        peer.amdgpu_bo_pin(abo, AmdgpuDomain.GTT)
    assert abo.tbo.pin_count == 1 and bo.pinned
    importer.release(abo)
    assert not bo.pinned and not dmabuf.attachments and not m.kernel.leaks


def test_own_export_comes_back_as_the_same_bo() -> None:
    """Importing a GPU's own export returns its BO (K-79): local memory, nothing to map."""
    m = make_machine("6.16")
    gpu = AmdgpuDevice(m.kernel, m.gpu, vram_size=256 * MiB)
    importer = GpuImporter(gpu)
    bo = gpu.create_buffer(SIZE, "vram")
    dmabuf = gpu.export(bo)
    fd = m.fd(dmabuf)
    assert importer.import_fd(fd, files=m.files) is bo and not importer.imports
    result = importer.access(bo)
    assert (result.remapped, result.memory, result.p2p) == (False, "vram", False)


def test_habanalabs_buffer_is_imported_peer_to_peer() -> None:
    """A dynamic GPU import of the static habanalabs exporter maps the HBM BAR (K-52)."""
    m = make_machine("6.16")
    hl = HabanalabsDevice(m.kernel, m.gpu, hbm_size=GiB)
    peer = AmdgpuDevice(m.kernel, peer_fn(m), vram_size=256 * MiB, name="gpu1")
    importer = GpuImporter(peer)
    mem = hl.create_buffer(SIZE)
    fd = m.fd(hl.export(mem))
    abo = importer.import_fd(fd, files=m.files)
    result = importer.access(abo)
    assert (result.memory, result.p2p, result.incident) == ("vram", True, None)
    importer.release(abo)
