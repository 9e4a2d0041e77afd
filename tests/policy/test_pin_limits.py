"""The pin limits proposed after 2025 and the ``dmem.peak`` reading, as opt-in policies.

P-61 ``pin-vram-percent`` (xe's out-of-tree ``pin_vram_percent``), P-62 ``dmem-pinning``
(Maarten Lankhorst's RFC: pins charged to dmem, refused above ``dmem.min``), P-63 ``dmem-peak``
and K-125 (``dmem.peak`` itself, in preset ``next``). The pins are EFA-like pinned imports
(``ib_umem_dmabuf_get_pinned``) by a NIC under the GPU's switch, so amdgpu and xe pin in VRAM.
"""

from __future__ import annotations

import pytest

from pinlab.drivers.amdgpu import AmdgpuDevice
from pinlab.drivers.base import DeviceBuffer, ExporterDriver
from pinlab.drivers.xe import XeDevice
from pinlab.errors import ConfigError
from pinlab.kernel.dma_buf import DmaBuf
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import Task
from pinlab.kernel.umem import IbUmemDmabuf, ib_umem_dmabuf_release
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.config import apply_policy, parse_policy
from pinlab.policy.dmem import DmemCgroupController
from pinlab.policy.dmem import install as install_dmem
from pinlab.policy.proposals import PROPOSALS, dmem_peak, dmem_pinning, pin_vram_percent
from tests.drivers.machine import GiB, Machine, MiB, make_machine, profile_mn

REGION = "drm/0000:03:00.0/vram"
XE_REGION = "drm/0000:03:00.0/vram0"
BUF = 16 * MiB


class Rig:
    """A machine with one GPU (``amdgpu`` or ``xe``, 256 MiB of VRAM), a NIC under its switch,
    a cgroup tree with the dmem controller (6.14 on)."""

    def __init__(self, profile: str = "6.16", gpu: str = "amdgpu", *, mn: bool = True) -> None:
        self.m: Machine = make_machine(profile_mn(profile, mn))
        self.kernel = self.m.kernel
        cls = AmdgpuDevice if gpu == "amdgpu" else XeDevice
        self.gpu: ExporterDriver = cls(
            self.kernel, self.m.gpu, vram_size=256 * MiB, gtt_size=GiB, system_size=GiB
        )
        self.tree = CgroupTree()
        self.dmem: DmemCgroupController | None = None
        if self.kernel.profile.dmem:
            self.dmem = install_dmem(self.kernel, self.tree)
            assert self.gpu.bdev is not None
            self.dmem.register_device(self.gpu.bdev)
        self._pid = 100
        self.buffers: dict[DmaBuf, DeviceBuffer] = {}

    def task(self, path: str) -> Task:
        parts = [x for x in path.split("/") if x]
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            if not self.tree.exists(sub):
                self.tree.mkdir(sub)
        self._pid += 1
        t = Task(self._pid, f"t{self._pid}")
        self.tree.attach(t, path)
        return t

    def buffer(self, task: Task | None = None, size: int = BUF) -> tuple[DmaBuf, int]:
        self.kernel.current = task
        try:
            buf = self.gpu.create_buffer(size, self.gpu.shareable_domain)
            dmabuf = self.gpu.export(buf)
        finally:
            self.kernel.current = None
        self.buffers[dmabuf] = buf
        return dmabuf, self.m.fd(dmabuf)

    def free(self, fd: int) -> None:
        """Close the fd (the dma-buf goes) and free the GEM object."""
        dmabuf = self.m.files.lookup(fd)
        assert dmabuf is not None and isinstance(dmabuf.private_data, DmaBuf)
        buf = self.buffers.pop(dmabuf.private_data)
        self.m.files.close(fd)
        self.gpu.free_buffer(buf)

    def pin(self, fd: int, size: int = BUF) -> IbUmemDmabuf:
        return self.m.pinned_umem(self.m.nic, fd, size)


def test_the_new_proposals_are_registered() -> None:
    for name in ("pin-vram-percent", "dmem-pinning", "dmem-peak"):
        assert name in PROPOSALS


# -- P-61: pin-vram-percent ------------------------------------------------------------------


def test_p61_dmabuf_pins_in_vram_are_budgeted_per_device() -> None:
    rig = Rig("6.19", gpu="xe")  # 6.19 + MN: xe keeps a P2P-only pin in VRAM (K-131)
    policy = pin_vram_percent.install(rig.kernel, 15)  # 15 % of 256 MiB = 38.4 MiB
    first, second, third = (rig.buffer()[1] for _ in range(3))
    a = rig.pin(first)
    again = rig.pin(first)  # a second pin of the same buffer is free
    b = rig.pin(second)
    with pytest.raises(KernelError) as e:
        rig.pin(third)
    assert e.value.errno is Errno.ENOSPC and e.value.policy == "pin-vram-percent"
    (usage,) = policy.usage()
    assert usage.pin_dmabuf_used == 2 * BUF
    assert usage.pin_dmabuf_limit == 256 * MiB * 15 // 100
    assert policy.denials == {str(Errno.ENOSPC): 1}
    for umem in (a, again, b):
        ib_umem_dmabuf_release(umem)
    assert policy.usage()[0].pin_dmabuf_used == 0
    rig.pin(third)  # the budget is free again


def test_p61_only_listed_drivers_in_vram_count_and_0_means_no_limit() -> None:
    rig = Rig("6.16")  # amdgpu, MN on: pins in VRAM
    policy = pin_vram_percent.install(rig.kernel, 1)
    rig.pin(rig.buffer()[1])  # amdgpu is not xe: not counted
    assert policy.usage() == []
    rig = Rig("6.16", gpu="xe")  # 6.16: xe always pins into TT -- not device memory
    policy = pin_vram_percent.install(rig.kernel, 1)
    rig.pin(rig.buffer()[1])
    assert policy.usage() == []
    rig = Rig("7.1", gpu="xe")
    policy = pin_vram_percent.install(rig.kernel, 0)
    for _ in range(4):
        rig.pin(rig.buffer()[1])
    assert policy.usage()[0].pin_dmabuf_limit is None
    with pytest.raises(ValueError, match=r"0\.\.100"):
        pin_vram_percent.PinVramPercent(101)


# -- P-62: dmem-pinning ------------------------------------------------------------------------


def test_p62_pins_are_charged_to_the_allocating_pool_and_refused_above_min() -> None:
    rig = Rig("6.16")
    assert rig.dmem is not None
    policy = dmem_pinning.install(rig.kernel, rig.tree, dmem=rig.dmem)
    owner = rig.task("/jobs/a")
    rig.tree.write("/jobs", "dmem.min", f"{REGION} 64M")
    rig.tree.write("/jobs/a", "dmem.min", f"{REGION} 40M")
    fds = [rig.buffer(owner)[1] for _ in range(3)]
    umems = [rig.pin(fds[0]), rig.pin(fds[1])]  # 32 MiB <= 40 MiB at /jobs/a, <= 64 at /jobs
    assert f"{REGION} {2 * BUF}" in rig.tree.read("/jobs/a", "dmem.pinned")
    assert f"{REGION} {2 * BUF}" in rig.tree.read("/", "dmem.pinned")  # on the root too
    with pytest.raises(KernelError) as e:  # 48 MiB > 40 MiB: refused at /jobs/a
        rig.pin(fds[2])
    assert e.value.errno is dmem_pinning.DENIAL_ERRNO is Errno.ENOSPC
    assert "/jobs/a" in str(e.value)
    pool = rig.dmem.find_pool("/jobs/a", rig.dmem.regions[0])
    assert pool is not None and policy.failcnt[pool] == 1
    assert f"{REGION} {2 * BUF}" in rig.tree.read("/jobs", "dmem.pinned")  # nothing left over
    ib_umem_dmabuf_release(umems.pop())
    rig.pin(fds[2])
    assert f"{REGION} {2 * BUF}" in rig.tree.read("/jobs/a", "dmem.pinned")


def test_p62_without_min_nothing_can_be_pinned_and_migrated_pins_do_not_count() -> None:
    rig = Rig("6.16")
    policy = dmem_pinning.install(rig.kernel, rig.tree, dmem=rig.dmem)
    with pytest.raises(KernelError):  # dmem.min defaults to 0 everywhere
        rig.pin(rig.buffer(rig.task("/b"))[1])
    assert policy.denials == {str(Errno.ENOSPC): 1}
    rig = Rig("6.16", mn=False)  # MN off: amdgpu pins into GTT, which the RFC does not charge
    policy = dmem_pinning.install(rig.kernel, rig.tree, dmem=rig.dmem)
    rig.pin(rig.buffer(rig.task("/b"))[1])
    assert policy.denials == {} and rig.tree.read("/b", "dmem.pinned") == f"{REGION} 0\n"
    with pytest.raises(ValueError, match="no dmem"):
        dmem_pinning.install(make_machine("6.12").kernel, CgroupTree(), dmem=None)


# -- P-63 / K-125: dmem.peak ----------------------------------------------------------------------


def test_k125_next_has_dmem_peak_and_it_keeps_the_highest_usage() -> None:
    rig = Rig("next")
    task = rig.task("/p/q")
    fds = [rig.buffer(task)[1] for _ in range(2)]
    for fd in fds:
        rig.free(fd)
    assert rig.tree.read("/p/q", "dmem.current") == f"{REGION} 0\n"
    assert rig.tree.read("/p/q", "dmem.peak") == f"{REGION} {2 * BUF}\n"
    assert rig.tree.read("/p", "dmem.peak") == f"{REGION} {2 * BUF}\n"  # descendants count
    with pytest.raises(KernelError):
        rig.tree.read("/", "dmem.peak")  # not on the root


def test_p63_the_peak_file_exists_only_in_next_or_with_the_policy() -> None:
    rig = Rig("7.1")
    with pytest.raises(KernelError):
        rig.tree.read("/", "dmem.peak")
    task = rig.task("/p")
    assert rig.dmem is not None
    peak = dmem_peak.install(rig.kernel, rig.tree, dmem=rig.dmem)
    assert dmem_peak.install(rig.kernel, rig.tree, dmem=rig.dmem) is peak
    rig.buffer(task)
    assert rig.tree.read("/p", "dmem.peak") == f"{REGION} {BUF}\n"
    rig.tree.mkdir("/fresh")
    assert rig.tree.read("/fresh", "dmem.peak") == f"{REGION} 0\n"  # no pool yet


def test_p61_p62_p63_switch_on_from_a_policy_file() -> None:
    config = parse_policy(
        f"""
        [regions]
        "{REGION}" = "256MiB"
        [cgroups.a]
        "dmem.min" = "{REGION} 32MiB"
        [proposals.pin-vram-percent]
        percent = 25
        [proposals.dmem-pinning]
        [proposals.dmem-peak]
        """,
        "test.toml",
    )
    rig = Rig("6.16")
    assert rig.dmem is not None
    applied = apply_policy(config, rig.kernel, rig.tree, rig.dmem, source="test.toml")
    assert list(applied.proposals) == ["pin-vram-percent", "dmem-pinning", "dmem-peak"]
    assert applied.proposals["pin-vram-percent"].percent == 25
    assert rig.tree.read("/a", "dmem.peak") == f"{REGION} 0\n"
    with pytest.raises(ConfigError, match="percent"):
        parse_policy("[proposals.pin-vram-percent]\npercent = 150\n", "bad.toml")
