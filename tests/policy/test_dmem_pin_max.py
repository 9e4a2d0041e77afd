"""The unmerged "dmem-pin-max" proposal: a per-cgroup cap on pinned device memory.

policy-semantics.md §1.11 (Christian König / Daniel Vetter 2021, Alistair Popple's 2023
pinned-memory cgroup series). Upstream ``dma_buf_pin`` charges nothing (P-12, P-60); the proposal
charges device-memory pins to the pinning task's cgroup and its ancestors the way dmem charges
allocations (P-16, P-17), shown in ``dmem.pin.current`` and capped by ``dmem.pin.max`` (files in
the dmem syntax, P-19, P-21, P-22; reset on rmdir as P-32). The pins come from EFA-like pinned
RDMA imports (``ib_umem_dmabuf_get_pinned``) of amdgpu-like VRAM buffers under preset 6.16
with CONFIG_DMABUF_MOVE_NOTIFY=y, where amdgpu pins in VRAM for P2P importers (K-49).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuDevice
from pinlab.drivers.habanalabs import HabanalabsDevice
from pinlab.kernel.dma_buf import DmaBuf
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import Task
from pinlab.kernel.ttm import TtmMemType
from pinlab.kernel.umem import IbUmemDmabuf, ib_umem_dmabuf_release
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.dmem import DmemCgroupController
from pinlab.policy.dmem import install as install_dmem
from pinlab.policy.page_counter import PAGE_COUNTER_MAX
from pinlab.policy.proposals import dmem_pin_max
from pinlab.policy.proposals.dmem_pin_max import DENIAL_ERRNO, DmemPinMax
from tests.drivers.machine import GiB, Machine, MiB, make_machine, profile_mn

REGION = "drm/0000:03:00.0/vram"


class Rig:
    """A 6.16 (MN on) machine: amdgpu-like GPU, an RDMA NIC under the same switch, a cgroup
    tree with the dmem controller, and (unless ``policy=False``) dmem-pin-max installed."""

    def __init__(self, profile: str = "6.16", *, policy: bool = True, dmem: bool = True) -> None:
        self.m: Machine = make_machine(profile_mn(profile, True))
        self.kernel = self.m.kernel
        self.gpu = AmdgpuDevice(
            self.kernel, self.m.gpu, vram_size=256 * MiB, gtt_size=GiB, system_size=GiB
        )
        self.tree = CgroupTree()
        self.dmem: DmemCgroupController | None = None
        if dmem:
            self.dmem = install_dmem(self.kernel, self.tree)
            self.dmem.register_device(self.gpu.bdev)
        self.policy: DmemPinMax | None = (
            dmem_pin_max.install(self.kernel, self.tree) if policy else None
        )
        self._pid = 100

    def task(self, path: str) -> Task:
        parts = [x for x in path.split("/") if x]
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            if not self.tree.exists(sub):
                self.tree.mkdir(sub)
        self._pid += 1
        t = Task(self._pid, f"rank{self._pid}")
        self.tree.attach(t, path)
        return t

    def buffer(self, size: int = 16 * MiB, domain: str = "vram") -> tuple[AmdgpuBo, DmaBuf, int]:
        bo = self.gpu.create_buffer(size, domain)
        dmabuf = self.gpu.export(bo)
        return bo, dmabuf, self.m.fd(dmabuf)

    def pin(self, task: Task | None, fd: int, size: int) -> IbUmemDmabuf:
        self.kernel.current = task
        try:
            return self.m.pinned_umem(self.m.nic, fd, size)
        finally:
            self.kernel.current = None

    def cap(self, path: str, value: str, region: str = REGION) -> None:
        self.tree.write(path, "dmem.pin.max", f"{region} {value}")

    def pinned(self, path: str, region: str = REGION) -> int:
        for line in self.tree.read(path, "dmem.pin.current").splitlines():
            name, value = line.split()
            if name == region:
                return int(value)
        raise AssertionError(f"{region} not listed in {path}/dmem.pin.current")


def test_p12_upstream_pins_charge_nothing_and_the_files_do_not_exist() -> None:
    """P-12 / P-60: without the proposal a VRAM pin changes no dmem counter and there is no
    dmem.pin.* file."""
    rig = Rig(policy=False)
    t = rig.task("/job")
    bo, _, fd = rig.buffer()
    before = rig.tree.read("/", "dmem.current")
    umem = rig.pin(t, fd, bo.size)
    assert bo.tbo.mem_type is TtmMemType.VRAM and bo.tbo.pin_count == 1
    assert rig.tree.read("/", "dmem.current") == before
    assert not [f for f in rig.tree.files("/job") if f.startswith("dmem.pin")]
    assert rig.kernel.pin_hooks == []
    ib_umem_dmabuf_release(umem)


def test_files_follow_the_dmem_placement_and_syntax() -> None:
    """The proposal's files: dmem.pin.current everywhere, dmem.pin.max off the root (as
    dmem.current / dmem.max, P-22); ``<region> <value>`` lines, ``max`` by default (P-21)."""
    rig = Rig()
    rig.tree.mkdir("/job")
    assert "dmem.pin.current" in rig.tree.files("/")
    assert "dmem.pin.max" not in rig.tree.files("/")
    assert {"dmem.pin.current", "dmem.pin.max"} <= set(rig.tree.files("/job"))
    assert rig.tree.read("/job", "dmem.pin.max") == f"{REGION} max\n"
    assert rig.tree.read("/job", "dmem.pin.current") == f"{REGION} 0\n"
    rig.cap("/job", "64M")
    assert rig.tree.read("/job", "dmem.pin.max") == f"{REGION} {64 * MiB}\n"
    with pytest.raises(KernelError) as ei:
        rig.cap("/job", "64M", region="drm/0000:99:00.0/vram")
    assert ei.value.errno is Errno.EINVAL and "0000:99" in ei.value.reason
    with pytest.raises(KernelError) as ei:
        rig.tree.write("/", "dmem.pin.max", f"{REGION} 1M")
    assert ei.value.errno is Errno.ENOENT
    assert "dmem-pin-max" in rig.tree.read("/", "cgroup.controllers")


def test_vram_pin_charges_the_pinning_tasks_cgroup_and_ancestors_and_unpin_returns_it() -> None:
    """P-16 applied to pins: the pinning task's cgroup and every ancestor are charged the
    buffer size; the release (unpin) returns exactly that. The dmem allocation charge is
    separate: it went to whoever allocated (here the kernel context → root)."""
    rig = Rig()
    t = rig.task("/team/job")
    bo, _, fd = rig.buffer(24 * MiB)
    umem = rig.pin(t, fd, bo.size)
    assert bo.tbo.mem_type is TtmMemType.VRAM
    assert [rig.pinned(p) for p in ("/team/job", "/team", "/")] == [24 * MiB] * 3
    assert rig.tree.read("/team/job", "dmem.current") == f"{REGION} 0\n"
    ib_umem_dmabuf_release(umem)
    assert [rig.pinned(p) for p in ("/team/job", "/team", "/")] == [0, 0, 0]
    assert rig.tree.lookup("/team/job").refs == 0
    assert rig.policy is not None and rig.policy.held == 0


def test_over_the_cap_is_enomem_counted_and_leaves_nothing_charged_or_pinned() -> None:
    """The denial: -ENOMEM (the errno of Popple's ``vm_account_pinned``), counted per policy
    and as failcnt of the refusing level; no level keeps a charge (P-17 for pins); the core
    undid the exporter pin. ``current + size == cap`` is allowed (P-18)."""
    rig = Rig()
    assert DENIAL_ERRNO is Errno.ENOMEM
    t = rig.task("/job")
    rig.cap("/job", "32M")
    a, _, fa = rig.buffer(16 * MiB)
    b, _, fb = rig.buffer(16 * MiB)
    c, _, fc = rig.buffer(4 * MiB)
    umems = [rig.pin(t, fa, a.size), rig.pin(t, fb, b.size)]  # exactly at the cap
    assert rig.pinned("/job") == 32 * MiB
    with pytest.raises(KernelError) as ei:
        rig.pin(t, fc, c.size)
    assert ei.value.errno is Errno.ENOMEM and ei.value.function == "dma_buf_pin"
    assert "/job dmem.pin.max" in ei.value.reason and REGION in ei.value.reason
    assert c.tbo.pin_count == 0  # the core undid the exporter pin
    assert rig.pinned("/job") == rig.pinned("/") == 32 * MiB
    policy = rig.policy
    assert policy is not None and policy.denials == {"-ENOMEM": 1}
    stats = {(s.cgroup, s.region): s for s in policy.stats()}
    assert stats[("/job", REGION)].failcnt == 1 and stats[("/", REGION)].failcnt == 0
    for umem in umems:
        ib_umem_dmabuf_release(umem)
    assert rig.pinned("/") == 0


def test_cap_on_an_ancestor_binds_every_descendant() -> None:
    """Hierarchical like dmem.max: the lowest refusing ancestor decides (P-17)."""
    rig = Rig()
    rig.task("/team")
    rig.cap("/team", "40M")
    t1, t2 = rig.task("/team/a"), rig.task("/team/b")
    x, _, fx = rig.buffer(24 * MiB)
    y, _, fy = rig.buffer(24 * MiB)
    u = rig.pin(t1, fx, x.size)
    with pytest.raises(KernelError) as ei:
        rig.pin(t2, fy, y.size)
    assert ei.value.errno is Errno.ENOMEM and "/team dmem.pin.max" in ei.value.reason
    outside = rig.task("/other")
    v = rig.pin(outside, fy, y.size)  # another subtree is not bound by /team's cap
    assert (rig.pinned("/team"), rig.pinned("/other"), rig.pinned("/")) == (
        24 * MiB,
        24 * MiB,
        48 * MiB,
    )
    for umem in (u, v):
        ib_umem_dmabuf_release(umem)


def test_pins_that_migrate_out_of_vram_charge_nothing() -> None:
    """6.14 amdgpu pins exported VRAM in GTT (K-49): no device memory held pinned, no charge
    even with a cap of 0."""
    rig = Rig("6.14")
    t = rig.task("/job")
    rig.cap("/job", "0")
    bo, _, fd = rig.buffer(16 * MiB)
    umem = rig.pin(t, fd, bo.size)
    assert bo.tbo.mem_type is TtmMemType.TT
    assert rig.pinned("/job") == 0
    ib_umem_dmabuf_release(umem)


def test_a_buffer_is_charged_once_however_often_it_is_pinned() -> None:
    """Pinned device *bytes*: a second pin of an already pinned buffer is free (even from
    another cgroup); the charge stays with the first pinner until the last unpin."""
    rig = Rig()
    t1, t2 = rig.task("/a"), rig.task("/b")
    rig.cap("/b", "0")
    bo, _, fd = rig.buffer(16 * MiB)
    first = rig.pin(t1, fd, bo.size)
    second = rig.pin(t2, fd, bo.size)  # /b's cap of 0 does not matter: nothing new is pinned
    assert bo.tbo.pin_count == 2
    assert (rig.pinned("/a"), rig.pinned("/b")) == (16 * MiB, 0)
    ib_umem_dmabuf_release(first)
    assert rig.pinned("/a") == 16 * MiB  # still held pinned through the second import
    ib_umem_dmabuf_release(second)
    assert rig.pinned("/a") == 0 and bo.tbo.pin_count == 0


def test_unpin_returns_the_charge_to_the_cgroup_that_paid() -> None:
    """Moving the task after pinning does not move the charge (as with dmem, §2.5)."""
    rig = Rig()
    t = rig.task("/a")
    rig.tree.mkdir("/b")
    bo, _, fd = rig.buffer(8 * MiB)
    umem = rig.pin(t, fd, bo.size)
    rig.tree.attach(t, "/b")
    assert (rig.pinned("/a"), rig.pinned("/b")) == (8 * MiB, 0)
    ib_umem_dmabuf_release(umem)
    assert (rig.pinned("/a"), rig.pinned("/b")) == (0, 0)


def test_lowering_the_cap_binds_new_pins_only() -> None:
    """Like Popple's ``pins.max`` a cap below the current total is stored; nothing is revoked
    (contrast dmem.max in 6.14, P-20, which is silently not applied)."""
    rig = Rig()
    t = rig.task("/job")
    a, _, fa = rig.buffer(16 * MiB)
    b, _, fb = rig.buffer(8 * MiB)
    umem = rig.pin(t, fa, a.size)
    rig.cap("/job", "8M")
    assert rig.tree.read("/job", "dmem.pin.max") == f"{REGION} {8 * MiB}\n"
    assert a.tbo.pin_count == 1 and rig.pinned("/job") == 16 * MiB
    with pytest.raises(KernelError):
        rig.pin(t, fb, b.size)
    ib_umem_dmabuf_release(umem)
    ok = rig.pin(t, fb, b.size)
    ib_umem_dmabuf_release(ok)


def test_p32_rmdir_resets_the_cap_and_the_dying_cgroup_keeps_its_charge() -> None:
    """P-32 for the proposal: offline resets dmem.pin.max to max; the removed cgroup's pins
    keep it dying until they are released."""
    rig = Rig()
    t = rig.task("/job")
    rig.cap("/job", "16M")
    bo, _, fd = rig.buffer(16 * MiB)
    umem = rig.pin(t, fd, bo.size)
    rig.tree.attach(t, "/")
    rig.tree.rmdir("/job")
    policy = rig.policy
    assert policy is not None
    [job] = [s for s in policy.stats() if s.cgroup == "/job"]
    assert job.max == PAGE_COUNTER_MAX and job.current == 16 * MiB
    assert rig.pinned("/") == 16 * MiB
    ib_umem_dmabuf_release(umem)
    assert [s.cgroup for s in policy.stats()] == ["/"]
    assert [c.path for c in rig.tree.walk_css(rig.tree.root)] == ["/"]


def test_exporter_without_a_dmem_region_is_keyed_by_device() -> None:
    """habanalabs registers no dmem region (and 5.16 has no dmem at all): the counter is keyed
    ``<device>/vram`` and can be capped by that name once it is known."""
    m = make_machine("5.16")
    hl = HabanalabsDevice(m.kernel, m.gpu, hbm_size=GiB)
    tree = CgroupTree()
    policy = dmem_pin_max.install(m.kernel, tree)
    tree.mkdir("/job")
    t = Task(7, "trainer")
    tree.attach(t, "/job")
    bufs = [hl.create_buffer(64 * MiB) for _ in range(2)]
    fds = [m.fd(hl.export(b)) for b in bufs]
    m.kernel.current = t
    first = m.pinned_umem(m.nic, fds[0], 64 * MiB)
    name = f"{hl.name}/vram"
    assert tree.read("/job", "dmem.pin.current") == f"{name} {64 * MiB}\n"
    tree.write("/job", "dmem.pin.max", f"{name} 100M")
    with pytest.raises(KernelError) as ei:
        m.pinned_umem(m.nic, fds[1], 64 * MiB)
    assert ei.value.errno is Errno.ENOMEM
    m.kernel.current = None
    ib_umem_dmabuf_release(first)
    assert policy.denials == {"-ENOMEM": 1} and policy.held == 0


def test_buffers_without_a_location_are_not_charged() -> None:
    """``dmabuf.locate()`` is None (an exporter that publishes no location): the pin goes
    through uncharged."""
    rig = Rig()
    t = rig.task("/job")
    rig.cap("/job", "0")
    bo, dmabuf, fd = rig.buffer(8 * MiB)
    dmabuf.locator = None
    umem = rig.pin(t, fd, bo.size)
    assert bo.tbo.pin_count == 1 and rig.pinned("/job") == 0
    ib_umem_dmabuf_release(umem)


def test_install_twice_is_refused_and_uninstall_keeps_tokens_valid() -> None:
    rig = Rig()
    policy = rig.policy
    assert policy is not None
    with pytest.raises(ValueError):
        dmem_pin_max.install(rig.kernel, CgroupTree())
    t = rig.task("/job")
    bo, _, fd = rig.buffer(8 * MiB)
    umem = rig.pin(t, fd, bo.size)
    policy.uninstall()
    assert policy not in rig.kernel.pin_hooks
    ib_umem_dmabuf_release(umem)  # the outstanding token is still returned
    assert rig.pinned("/job") == 0


def test_works_without_a_dmem_controller() -> None:
    """The proposal needs no dmem controller in the tree: it learns regions from pins."""
    rig = Rig(dmem=False)
    t = rig.task("/job")
    bo, _, fd = rig.buffer(8 * MiB)
    umem = rig.pin(t, fd, bo.size)
    assert rig.tree.read("/job", "dmem.pin.current") == f"{REGION} {8 * MiB}\n"
    ib_umem_dmabuf_release(umem)


# -- hypothesis ------------------------------------------------------------------------------------

PATHS = ["/", "/a", "/a/x", "/b"]
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("pin"), st.sampled_from(PATHS), st.integers(0, 3)),
        st.tuples(st.just("release"), st.sampled_from(PATHS), st.integers(0, 7)),
        st.tuples(st.just("cap"), st.sampled_from(PATHS[1:]), st.integers(0, 80)),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_pin_accounting_invariants(ops: list[tuple[str, str, int]]) -> None:
    """Any sequence of pins, releases and cap writes: a successful pin never takes a level
    over its cap; every level's dmem.pin.current is the size of the distinct buffers charged
    in its subtree; a denial leaves the buffer unpinned by that import; after releasing
    everything all counters and cgroup references are back to zero."""
    rig = Rig()
    policy = rig.policy
    assert policy is not None
    tasks = {path: rig.task(path) for path in PATHS}
    bufs = [rig.buffer(size * MiB) for size in (8, 16, 24, 32)]
    live: list[tuple[str, int, IbUmemDmabuf]] = []
    payer: dict[int, str] = {}  # buffer index → the cgroup its first (live) pin charged
    for op, path, n in ops:
        if op == "cap":
            rig.cap(path, f"{n}M")
        elif op == "release":
            if live:
                _, idx, umem = live.pop(n % len(live))
                ib_umem_dmabuf_release(umem)
                if all(i != idx for _, i, _ in live):
                    del payer[idx]
        else:
            bo, _, fd = bufs[n]
            before = {p: rig.pinned(p) for p in PATHS}
            try:
                umem = rig.pin(tasks[path], fd, bo.size)
            except KernelError as e:
                assert e.errno is Errno.ENOMEM
                assert {p: rig.pinned(p) for p in PATHS} == before
            else:
                live.append((path, n, umem))
                if n not in payer:  # newly charged: within every cap up the tree
                    payer[n] = path
                    for cgrp in rig.tree.lookup(path).ancestors():
                        stats = [s for s in policy.stats() if s.cgroup == cgrp.path]
                        assert all(s.current <= s.max for s in stats)
        for p in PATHS:
            expected = sum(
                bufs[i][0].size
                for i, who in payer.items()
                if rig.tree.lookup(who).is_descendant_of(rig.tree.lookup(p))
            )
            assert rig.pinned(p) == expected
    for _, _, umem in live:
        ib_umem_dmabuf_release(umem)
    assert all(rig.pinned(p) == 0 for p in PATHS)
    # the root's references are the dmem charges of the buffers (allocated in kernel context)
    assert all(c.refs == 0 for c in rig.tree.walk_css(rig.tree.root) if not c.is_root)
    assert rig.tree.root.refs == len(bufs)
    assert policy.held == 0 and not policy.warnings
    assert all(bo.tbo.pin_count == 0 for bo, _, _ in bufs)
