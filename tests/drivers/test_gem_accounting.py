"""GEM objects as the real drivers make them: self-imports take a GEM reference, unknown
domains are -EINVAL, sizes are page-aligned so dmem accounting matches allocation byte for
byte (K-79, P-29). Each case was found by fuzzing the uapi (issue "Hardening")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.kernel.errno import Errno, KernelBug, KernelError
from pinlab.kernel.ttm import TtmBufferObject
from pinlab.platform import apu_laptop, build, workstation
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.dmem import install
from pinlab.units import MiB


@pytest.mark.parametrize("spec", [workstation, apu_laptop], ids=["gpu0", "apu0"])
@pytest.mark.parametrize("profile", ["6.12", "6.16", "7.1"])
def test_k79_self_import_releases_everything_at_exit(spec: object, profile: str) -> None:
    """Importing a GPU's own export back into it (``gpu0:import``) takes a GEM reference, not a
    dma-buf one: after exit no dma-buf, no VRAM and no leak remain."""
    m = build(spec(), profile)  # type: ignore[operator]
    dev = next(iter(m.system.exporters))
    proc = m.system.spawn("self-import")
    handle = proc.gem_create(dev, 16 * MiB, "vram")
    fd = proc.prime_handle_to_fd(handle)
    imported = proc.prime_fd_to_handle(f"{dev}:import", fd)
    assert proc.buffer(imported) is proc.buffer(handle)
    proc.exit(0)
    assert list(m.kernel.dma_bufs()) == []
    assert [r.used for r in m.system.exporter(dev).regions()] == [0, 0, 0]
    assert m.kernel.leaks == []


def test_self_import_handle_closed_before_the_creator_keeps_the_buffer() -> None:
    m = build(workstation(), "6.16")
    proc = m.system.spawn("p")
    handle = proc.gem_create("gpu0", 8 * MiB, "vram")
    fd = proc.prime_handle_to_fd(handle)
    imported = proc.prime_fd_to_handle("gpu0:import", fd)
    proc.gem_close(imported)
    proc.close(fd)
    assert m.system.exporter("gpu0").regions()[0].used == 8 * MiB  # the creator's handle
    proc.gem_close(handle)
    assert m.system.exporter("gpu0").regions()[0].used == 0


@pytest.mark.parametrize("domain", ["lmem", "", "vram|bogus", "gtt|"])
def test_unknown_gem_domain_is_einval(domain: str) -> None:
    m = build(workstation(), "6.16")
    proc = m.system.spawn("p")
    with pytest.raises(KernelError) as exc:
        proc.gem_create("gpu0", MiB, domain)
    assert exc.value.errno is Errno.EINVAL
    assert exc.value.function == "amdgpu_gem_create_ioctl"


def test_gem_sizes_are_page_aligned_and_unaligned_bos_are_a_bug() -> None:
    m = build(workstation(), "6.16")
    proc = m.system.spawn("p")
    handle = proc.gem_create("gpu0", 5000, "vram")
    assert proc.buffer(handle).size == 8192
    assert m.system.exporter("gpu0").regions()[0].used == 8192
    bdev = m.system.exporter("gpu0").bdev
    assert bdev is not None
    with pytest.raises(KernelBug, match="not page-aligned"):
        TtmBufferObject(bdev, 5000)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 3 * MiB), min_size=1, max_size=40))
def test_p29_dmem_max_bounds_what_a_cgroup_holds_byte_for_byte(sizes: list[int]) -> None:
    """Odd sizes cannot let a cgroup hold more VRAM than its ``dmem.max``: the charge is the
    page-aligned BO size, which is what VRAM allocates."""
    m = build(workstation(), "6.16")
    tree = CgroupTree()
    dmem = install(m.kernel, tree)
    bdev = m.system.exporter("gpu0").bdev
    assert bdev is not None
    dmem.register_device(bdev)
    region = m.system.exporter("gpu0").vram_region
    assert region is not None
    tree.mkdir("/a")
    limit = 8 * MiB
    tree.write("/a", "dmem.max", f"{region.name} {limit}")
    proc = m.system.spawn("p")
    tree.attach(proc, "/a")
    for size in sizes:
        try:
            proc.gem_create("gpu0", size, "vram")
        except KernelError as e:
            assert e.errno is Errno.ENOMEM
        used = m.system.exporter("gpu0").regions()[0].used
        charged = int(tree.read("/a", "dmem.current").split()[1])
        assert used == charged <= limit
    proc.exit(0)
    assert int(tree.read("/a", "dmem.current").split()[1]) == 0


def test_exporting_an_imported_handle_returns_the_original_dma_buf() -> None:
    """drm_gem_prime_handle_to_fd of an imported object re-exports the dma-buf it came from;
    importing that fd again is the same import, and teardown releases each object once."""
    from pinlab.report.matrix import build_machine

    m = build_machine("amdgpu", "6.12")
    proc = m.system.spawn("p")
    handle = proc.gem_create("gpu0", 4096, "vram")
    fd = proc.prime_handle_to_fd(handle)
    imported = proc.prime_fd_to_handle("gpu1:import", fd)
    again = proc.prime_handle_to_fd(imported)
    assert proc.dmabuf(again) is proc.dmabuf(fd)
    proc.prime_fd_to_handle("gpu1:import", again)
    proc.exit(0)
    assert list(m.kernel.dma_bufs()) == [] and m.kernel.leaks == []
