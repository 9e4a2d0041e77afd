"""The dmem cgroup controller (6.14): charging, interface files, eviction eligibility, TTM.

policy-semantics.md §2 and checklist items P-16 … P-36 and P-46; the page_counter items it
relies on (P-37 …) are in test_page_counter.py. The integration tests at the end drive an
amdgpu-like device under preset 6.14 through TTM (``amdgpu_bo_create`` → ``ttm_bo_validate``
→ ``ttm_resource_alloc`` / ``ttm_bo_evict_alloc``) with tasks in two cgroups.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuDevice, AmdgpuDomain
from pinlab.drivers.xe import XeDevice
from pinlab.kernel.dmem import DmemChargeError, DmemRegion
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import Kernel, Task
from pinlab.kernel.ttm import TtmMemType
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.dmem import DmemCgroupController, DmemPool, install
from pinlab.policy.dmem_limits import dmemcg_parse_limit, memparse
from pinlab.policy.page_counter import PAGE_COUNTER_MAX
from tests.drivers.machine import GiB, MiB, make_machine

REGION = "drm/0000:03:00.0/vram0"
OTHER = "drm/0000:04:00.0/vram0"


def setup_ctl(*paths: str) -> tuple[CgroupTree, DmemCgroupController, DmemRegion]:
    tree = CgroupTree()
    dmem = DmemCgroupController(tree)
    region = dmem.dmem_cgroup_register_region(8 * GiB, REGION)
    assert region is not None
    for path in paths:
        tree.mkdir(path)
    return tree, dmem, region


_pids = iter(range(100, 1_000_000))


def task_in(tree: CgroupTree, path: str) -> Task:
    task = Task(next(_pids), f"t-{path.strip('/').replace('/', '-') or 'root'}")
    tree.attach(task, path)
    return task


def pool(dmem: DmemCgroupController, path: str, region: DmemRegion) -> DmemPool:
    p = dmem.find_pool(path, region)
    assert p is not None, f"no pool for {path}"
    return p


def current(tree: CgroupTree, path: str) -> str:
    return tree.read(path, "dmem.current")


# -- charging (P-16 … P-18, P-23) ------------------------------------------------------------


def test_p16_charge_goes_to_the_current_tasks_cgroup_and_every_ancestor() -> None:
    """P-16: the pool of the allocating task's cgroup is charged, and every ancestor pool of
    the same region; siblings are untouched. A task without a cgroup, and kernel context,
    charge the root."""
    tree, dmem, region = setup_ctl("/a", "/a/b", "/c")
    charged = dmem.try_charge(region, 3 * MiB, task_in(tree, "/a/b"))
    assert charged is pool(dmem, "/a/b", region)
    for path in ("/a/b", "/a", "/"):
        assert current(tree, path) == f"{REGION} {3 * MiB}\n"
    assert current(tree, "/c") == f"{REGION} 0\n"  # no pool: reads 0
    assert dmem.find_pool("/c", region) is None
    dmem.try_charge(region, MiB, Task(1, "loose"))  # not attached anywhere
    dmem.try_charge(region, MiB, None)  # kernel context
    assert pool(dmem, "/", region).cnt.usage == 5 * MiB
    assert pool(dmem, "/a", region).cnt.usage == 3 * MiB


def test_p17_limit_refuses_at_the_lowest_ancestor_with_eagain_and_changes_nothing() -> None:
    """P-17: -EAGAIN at the lowest ancestor where usage + size > max; usage unchanged
    everywhere, that pool's failcnt + 1, and it is the limit pool."""
    tree, dmem, region = setup_ctl("/a", "/a/b")
    tree.write("/a", "dmem.max", f"{REGION} 10M")
    tree.write("/a/b", "dmem.max", f"{REGION} 20M")
    task = task_in(tree, "/a/b")
    dmem.try_charge(region, 6 * MiB, task)
    with pytest.raises(DmemChargeError) as ei:
        dmem.try_charge(region, 5 * MiB, task)
    err = ei.value
    assert err.errno is Errno.EAGAIN and err.value == -11
    assert err.limit_pool is pool(dmem, "/a", region)
    assert [pool(dmem, p, region).cnt.usage for p in ("/a/b", "/a", "/")] == [6 * MiB] * 3
    assert [pool(dmem, p, region).cnt.failcnt for p in ("/a/b", "/a", "/")] == [0, 1, 0]
    assert dmem.limit_hits == 1
    tree.write("/a/b", "dmem.max", f"{REGION} 8M")  # now the lower level refuses first
    with pytest.raises(DmemChargeError) as ei:
        dmem.try_charge(region, 5 * MiB, task)
    assert ei.value.limit_pool is pool(dmem, "/a/b", region)


def test_p17_every_refusal_counts_as_a_limit_hit() -> None:
    """P-17: each -EAGAIN is one more limit hit (the count a syscall compares before and after
    to tell a dmem refusal from other ENOMEM), whichever pool refused."""
    tree, dmem, region = setup_ctl("/a", "/b")
    tree.write("/a", "dmem.max", f"{REGION} 1M")
    tree.write("/b", "dmem.max", f"{REGION} 1M")
    for path in ("/a", "/b", "/a"):
        with pytest.raises(DmemChargeError):
            dmem.try_charge(region, 2 * MiB, task_in(tree, path))
    assert dmem.limit_hits == 3
    assert [pool(dmem, p, region).cnt.failcnt for p in ("/a", "/b")] == [2, 1]


def test_pools_of_one_cgroup_by_path_or_cgroup() -> None:
    """A cgroup's pools (one per region it was charged or limited in), named by path or
    cgroup object."""
    tree, dmem, region = setup_ctl("/a", "/b")
    dmem.try_charge(region, MiB, task_in(tree, "/a"))
    a = pool(dmem, "/a", region)
    assert dmem.pools("/a") == dmem.pools(tree.lookup("/a")) == [a]
    assert dmem.pools("/b") == []


def test_p18_usage_plus_size_equal_to_max_succeeds() -> None:
    """P-18: reaching max exactly is allowed; one byte more is not."""
    tree, dmem, region = setup_ctl("/a")
    tree.write("/a", "dmem.max", f"{REGION} 1000")
    task = task_in(tree, "/a")
    dmem.try_charge(region, 600, task)
    dmem.try_charge(region, 400, task)
    assert current(tree, "/a") == f"{REGION} 1000\n"
    with pytest.raises(DmemChargeError):
        dmem.try_charge(region, 1, task)


def test_p23_uncharge_lowers_the_pool_and_every_ancestor() -> None:
    """P-23: uncharging ``size`` lowers current by ``size`` in that pool and its ancestors."""
    tree, dmem, region = setup_ctl("/a", "/a/b")
    task = task_in(tree, "/a/b")
    p = dmem.try_charge(region, 5 * MiB, task)
    q = dmem.try_charge(region, 2 * MiB, task_in(tree, "/a"))
    dmem.uncharge(p, 4 * MiB)
    assert [pool(dmem, x, region).cnt.usage for x in ("/a/b", "/a", "/")] == [
        MiB,
        3 * MiB,
        3 * MiB,
    ]
    dmem.uncharge(p, MiB)
    dmem.uncharge(q, 2 * MiB)
    dmem.uncharge(None, 123)  # no pool: nothing to do
    assert all(x.cnt.usage == 0 for x in dmem.pools()) and not dmem.warnings


def test_uncharge_underflow_warns_on_the_kernel() -> None:
    """P-41 through dmem: more uncharged than charged WARNs once per site and clamps."""
    kernel = Kernel("6.14")
    tree, dmem, region = setup_ctl("/a")
    dmem.install(kernel)
    p = dmem.try_charge(region, 100, task_in(tree, "/a"))
    dmem.uncharge(p, 150)
    assert pool(dmem, "/a", region).cnt.usage == 0
    assert kernel.warnings.count("page_counter_cancel") == 2  # the pool and the root
    # page_counter_cancel's WARN_ONCE: one site, one backtrace however often it is hit
    sites = [(r.function, r.message, r.count, r.reported) for r in kernel.warnings.records()]
    assert sites == [("page_counter_cancel", "page_counter underflow", 2, 1)]
    assert any(line.startswith("WARNING: page_counter underflow") for line in kernel.dmesg)


def test_uncharge_underflow_without_a_kernel_is_kept_on_the_controller() -> None:
    """P-41 on a controller not plugged into a kernel: the WARNs stay on ``dmem.warnings``
    and usage is clamped; nothing fails."""
    tree, dmem, region = setup_ctl("/a")
    p = dmem.try_charge(region, 100, task_in(tree, "/a"))
    dmem.uncharge(p, 150)
    assert [x.cnt.usage for x in dmem.pools()] == [0, 0]
    assert len(dmem.warnings) == 2 and all("underflow" in w for w in dmem.warnings)


# -- interface files (P-19 … P-22, P-36) -------------------------------------------------------


def test_p19_values_are_bytes_without_rounding_and_take_suffixes() -> None:
    """P-19: ``<region> 1000`` stores 1000; K/M/G are powers of 1024."""
    tree, dmem, region = setup_ctl("/a")
    for text, expected in [
        ("1000", 1000),
        ("4097", 4097),
        ("1K", 1024),
        ("3m", 3 << 20),
        ("2G", 2 << 30),
        ("0", 0),
        ("0x10", 16),
    ]:
        tree.write("/a", "dmem.max", f"{REGION} {text}")
        assert tree.read("/a", "dmem.max") == f"{REGION} {expected}\n"
        assert pool(dmem, "/a", region).cnt.max == expected


def test_memparse_follows_simple_strtoull_base_rules() -> None:
    assert memparse("010") == (8, 3)  # leading 0: octal
    assert memparse("09") == (0, 1)  # '9' is not octal: parsing stops
    assert memparse("-5") == (0, 0)
    assert memparse("16E") == (0, 3)  # wraps at 64 bits
    assert dmemcg_parse_limit("max") == PAGE_COUNTER_MAX
    assert dmemcg_parse_limit("12 ") is None and dmemcg_parse_limit("1KB") is None


@pytest.mark.parametrize("bad", ["", "ten", "-1", "1KB", " 100", "1.5G", "MAX"])
def test_malformed_values_are_einval_naming_file_and_value(bad: str) -> None:
    tree, _, _ = setup_ctl("/a")
    with pytest.raises(KernelError) as ei:
        tree.write("/a", "dmem.max", f"{REGION} {bad}")
    assert ei.value.errno is Errno.EINVAL
    assert "/a/dmem.max" in ei.value.reason
    assert tree.read("/a", "dmem.max") == f"{REGION} max\n"


def test_p20_max_below_current_reports_success_and_changes_nothing() -> None:
    """P-20 (6.14 quirk): set_resource_max ignores page_counter_set_max's -EBUSY."""
    tree, dmem, region = setup_ctl("/a")
    dmem.try_charge(region, 5 * MiB, task_in(tree, "/a"))
    tree.write("/a", "dmem.max", f"{REGION} 6M")
    tree.write("/a", "dmem.max", f"{REGION} 4M")  # no exception
    assert tree.read("/a", "dmem.max") == f"{REGION} {6 * MiB}\n"
    assert dmem.max_writes_ignored == 1
    tree.write("/a", "dmem.max", f"{REGION} 3M")
    assert dmem.max_writes_ignored == 2
    assert pool(dmem, "/a", region).cnt.usage == 5 * MiB  # P-35: nothing reclaimed


def test_p21_unknown_region_is_einval_and_defaults_read_back() -> None:
    """P-21: EINVAL naming the unknown region; ``max`` reads back as ``max``; a new pool reads
    min 0, low 0, max max; a cgroup without a pool reads the same with current 0."""
    tree, dmem, region = setup_ctl("/a", "/b")
    with pytest.raises(KernelError) as ei:
        tree.write("/a", "dmem.max", "drm/0000:99:00.0/vram0 1G")
    assert ei.value.errno is Errno.EINVAL and "drm/0000:99:00.0/vram0" in ei.value.reason
    with pytest.raises(KernelError) as ei:
        tree.write("/a", "dmem.max", REGION)  # a region without a value
    assert ei.value.errno is Errno.EINVAL
    tree.write("/a", "dmem.max", f"{REGION} 1G")
    tree.write("/a", "dmem.max", f"{REGION} max")
    assert tree.read("/a", "dmem.max") == f"{REGION} max\n"
    assert pool(dmem, "/a", region).cnt.max == PAGE_COUNTER_MAX
    for path in ("/a", "/b"):  # /a has a pool (created by the write), /b has none
        assert tree.read(path, "dmem.min") == f"{REGION} 0\n"
        assert tree.read(path, "dmem.low") == f"{REGION} 0\n"
        assert tree.read(path, "dmem.current") == f"{REGION} 0\n"
    assert tree.read("/b", "dmem.max") == f"{REGION} max\n"
    assert dmem.find_pool("/b", region) is None
    tree.write("/a", "dmem.min", f"{REGION} max")  # any limit file prints max the same way
    assert tree.read("/a", "dmem.min") == f"{REGION} max\n"


def test_p21_one_line_per_registered_region_in_registration_order() -> None:
    tree, dmem, _ = setup_ctl("/a")
    other = dmem.dmem_cgroup_register_region(GiB, OTHER)
    assert other is not None
    tree.write("/a", "dmem.low", f"{OTHER} 5K")
    assert tree.read("/a", "dmem.low") == f"{REGION} 0\n{OTHER} 5120\n"
    assert tree.read("/", "dmem.capacity") == f"{REGION} {8 * GiB}\n{OTHER} {GiB}\n"


def test_p22_file_placement() -> None:
    """P-22: dmem.capacity only at the root; dmem.current everywhere (the code, not the admin
    guide); min/low/max only on non-root cgroups."""
    tree, _, _ = setup_ctl("/a", "/a/b")
    dmem_files = {"dmem.capacity", "dmem.current", "dmem.low", "dmem.max", "dmem.min"}
    assert dmem_files & set(tree.files("/")) == {"dmem.capacity", "dmem.current"}
    for path in ("/a", "/a/b"):
        assert dmem_files & set(tree.files(path)) == dmem_files - {"dmem.capacity"}
    for name in ("dmem.min", "dmem.low", "dmem.max"):
        with pytest.raises(KernelError) as ei:
            tree.read("/", name)
        assert ei.value.errno is Errno.ENOENT
        with pytest.raises(KernelError):
            tree.write("/", name, f"{REGION} 1")
    with pytest.raises(KernelError) as ei:
        tree.read("/a", "dmem.capacity")
    assert ei.value.errno is Errno.ENOENT
    with pytest.raises(KernelError) as ei:
        tree.write("/a", "dmem.current", f"{REGION} 1")
    assert ei.value.errno is Errno.EINVAL  # read-only


@pytest.mark.parametrize("profile", ["6.14", "6.16", "6.19", "7.1", "next"])
def test_p22_no_failcnt_or_other_extra_file_on_any_dmem_release(profile: str) -> None:
    """P-22: the dmem files are capacity/current/min/low/max (and ``dmem.peak`` on ``next``,
    K-125) and nothing else: no release shows a failcnt, so refusals are counted nowhere
    userspace can read."""
    kernel = Kernel(profile)
    tree = CgroupTree()
    install(kernel, tree)
    tree.mkdir("/a")
    extra = {"dmem.peak"} if profile == "next" else set()
    dmem_files = {"dmem.capacity", "dmem.current", "dmem.low", "dmem.max", "dmem.min"} | extra
    seen = set()
    for path in ("/", "/a"):
        names = set(tree.files(path))
        assert not any("failcnt" in name for name in names)
        seen |= {n for n in names if n.startswith("dmem.")}
    assert seen == dmem_files


def test_p36_multi_line_write_applies_lines_in_order_until_a_bad_one() -> None:
    """P-36 (6.14): lines apply in order; an unknown region on a later line returns EINVAL
    after the earlier lines took effect; blank lines and surrounding blanks are ignored."""
    tree, dmem, region = setup_ctl("/a")
    other = dmem.dmem_cgroup_register_region(GiB, OTHER)
    assert other is not None
    with pytest.raises(KernelError) as ei:
        tree.write("/a", "dmem.max", f"{REGION} 1M\n\n  {OTHER} 2M  \nbogus 3M\n{REGION} 9M")
    assert ei.value.errno is Errno.EINVAL and "bogus" in ei.value.reason
    assert tree.read("/a", "dmem.max") == f"{REGION} {MiB}\n{OTHER} {2 * MiB}\n"
    tree.write("/a", "dmem.max", f"{REGION}\t7M\n{REGION} 8M\n")  # tab separates too
    assert pool(dmem, "/a", region).cnt.max == 8 * MiB


# -- regions (P-29 … P-31) ---------------------------------------------------------------------


def test_p30_region_of_size_zero_is_no_region() -> None:
    """P-30: registering size 0 yields no region: no accounting, not listed."""
    tree, dmem, _ = setup_ctl("/a")
    assert dmem.dmem_cgroup_register_region(0, "drm/0000:05:00.0/vram0") is None
    empty = DmemRegion("drm/0000:06:00.0/vram0", 0)
    assert dmem.register_region(empty) is None
    assert dmem.try_charge(empty, MiB, task_in(tree, "/a")) is None  # nothing charged
    assert "0000:05" not in tree.read("/", "dmem.capacity")
    assert "0000:06" not in tree.read("/", "dmem.capacity")
    assert all(p.cnt.usage == 0 for p in dmem.pools())


def test_p30_any_non_zero_size_is_a_region() -> None:
    """P-30: only size 0 yields no region; a one-byte region is registered and accounted."""
    tree, dmem, _ = setup_ctl("/a")
    tiny = dmem.dmem_cgroup_register_region(1, "drm/0000:05:00.0/vram0")
    built = DmemRegion("drm/0000:06:00.0/vram0", 1)
    assert tiny is not None and dmem.register_region(built) is built
    assert dmem.regions[-2:] == (tiny, built)
    assert dmem.try_charge(built, 1, task_in(tree, "/a")) is pool(dmem, "/a", built)


def test_unregistered_region_is_enodev_and_leaves_the_files() -> None:
    """``dmem_cgroup_unregister_region``: later charges get -ENODEV; outstanding charges can
    still be uncharged through their pool."""
    tree, dmem, region = setup_ctl("/a")
    task = task_in(tree, "/a")
    charged = dmem.try_charge(region, MiB, task)
    dmem.unregister_region(region)
    with pytest.raises(KernelError) as ei:
        dmem.try_charge(region, MiB, task)
    assert ei.value.errno is Errno.ENODEV
    assert tree.read("/a", "dmem.current") == ""
    with pytest.raises(KernelError):
        tree.write("/a", "dmem.max", f"{REGION} 1M")
    dmem.uncharge(charged, MiB)
    assert tree.lookup("/a").refs == 0


def test_unknown_region_object_is_registered_at_first_charge() -> None:
    """A driver-built region reaching try_charge is registered then (its existence means the
    kernel's registration returned it)."""
    tree, dmem, _ = setup_ctl("/a")
    late = DmemRegion(OTHER, GiB)
    dmem.try_charge(late, MiB, task_in(tree, "/a"))
    assert dmem.is_registered(late)
    assert tree.read("/a", "dmem.current").splitlines()[1] == f"{OTHER} {MiB}"


def test_p31_drm_region_names() -> None:
    """P-31: ``drm/<device unique>/<region>``: amdgpu registers ``vram``, xe ``vram0``; no
    region before 6.14."""
    m = make_machine("6.14")
    amd = AmdgpuDevice(m.kernel, m.gpu, vram_size=64 * MiB)
    xe = XeDevice(m.kernel, m.gpu, vram_size=64 * MiB)
    assert amd.vram_region is not None and amd.vram_region.name == "drm/0000:03:00.0/vram"
    assert xe.vram_region is not None and xe.vram_region.name == "drm/0000:03:00.0/vram0"
    tree = CgroupTree()
    dmem = DmemCgroupController(tree)
    assert dmem.register_device(amd.bdev) == [amd.vram_region]  # GTT/system: no region
    old = make_machine("6.12")
    assert AmdgpuDevice(old.kernel, old.gpu, vram_size=64 * MiB).vram_region is None


# -- rmdir (P-32) ------------------------------------------------------------------------------


def test_p32_offline_cgroup_returns_to_defaults_and_stays_dying_while_charged() -> None:
    """P-32: rmdir resets the cgroup's min/low/max to 0/0/max; a removed cgroup whose pool is
    still charged lives on (dying) until the charge is returned."""
    tree, dmem, region = setup_ctl("/a", "/a/b")
    tree.write("/a/b", "dmem.min", f"{REGION} 5M")
    tree.write("/a/b", "dmem.low", f"{REGION} 6M")
    tree.write("/a/b", "dmem.max", f"{REGION} 7M")
    task = task_in(tree, "/a/b")
    charged = dmem.try_charge(region, 4 * MiB, task)
    parent = pool(dmem, "/a", region)
    assert (parent.cnt.children_min_usage, parent.cnt.children_low_usage) == (4 * MiB, 4 * MiB)
    with pytest.raises(KernelError) as ei:
        tree.rmdir("/a/b")
    assert ei.value.errno is Errno.EBUSY  # it has a process
    tree.attach(task, "/")
    with pytest.raises(KernelError) as ei:
        tree.rmdir("/a")
    assert ei.value.errno is Errno.EBUSY  # it has a child
    tree.rmdir("/a/b")
    assert not tree.exists("/a/b")
    assert isinstance(charged, DmemPool)
    assert (charged.cnt.min, charged.cnt.low, charged.cnt.max) == (0, 0, PAGE_COUNTER_MAX)
    assert (parent.cnt.children_min_usage, parent.cnt.children_low_usage) == (0, 0)
    assert parent.cnt.usage == 4 * MiB  # the dying cgroup's charge still counts
    assert [s.cgroup for s in dmem.stats() if s.dying] == ["/a/b"]
    assert [c.path for c in tree.walk_css(tree.root)] == ["/", "/a", "/a/b"]
    tree.rmdir("/a")  # only a dying child left: allowed
    dmem.uncharge(charged, 4 * MiB)
    assert [c.path for c in tree.walk_css(tree.root)] == ["/"]
    assert [s.cgroup for s in dmem.stats()] == ["/"]
    tree.mkdir("/a")  # the name is free again, with fresh defaults
    assert tree.read("/a", "dmem.max") == f"{REGION} max\n"


# -- eviction eligibility (P-24 … P-26, P-33, P-34, P-46) --------------------------------------


def charged_tree() -> tuple[CgroupTree, DmemCgroupController, DmemRegion, dict[str, DmemPool]]:
    """/L (the limit pool) with children /L/t, /L/u and grandchild /L/t/g; /o outside."""
    tree, dmem, region = setup_ctl("/L", "/L/t", "/L/t/g", "/L/u", "/o")
    pools: dict[str, DmemPool] = {}
    for path, size in [("/L", 1), ("/L/t", 10), ("/L/t/g", 10), ("/L/u", 10), ("/o", 10)]:
        p = dmem.try_charge(region, size * MiB, task_in(tree, path))
        assert isinstance(p, DmemPool)
        pools[path] = p
    pools["/"] = pool(dmem, "/", region)
    return tree, dmem, region, pools


def verdicts(dmem: DmemCgroupController, limit: DmemPool | None, victim: DmemPool | None) -> str:
    """``"Y"``/``"N"``/``"low"`` for pass 1, then the verdict of the ignore_low pass."""
    ok1, low = dmem.evict_valuable(limit, victim, False)
    ok2, _ = dmem.evict_valuable(limit, victim, True)
    first = "Y" if ok1 else ("low" if low else "N")
    return f"{first}/{'Y' if ok2 else 'N'}"


def test_p24_eligibility_rules() -> None:
    """P-24: the limit pool itself → evictable; outside its subtree → never; used ≤ emin →
    never; used > elow → pass 1; emin < used ≤ elow → skipped in pass 1 (hit_low), taken in
    the low pass."""
    tree, dmem, _, p = charged_tree()
    tree.write("/L", "dmem.min", f"{REGION} 5M")  # the limit pool's own protection is moot
    tree.write("/L/t", "dmem.min", f"{REGION} 20M")  # used 20 (incl. /L/t/g) ≤ emin 20
    tree.write("/L/u", "dmem.min", f"{REGION} 4M")
    tree.write("/L/u", "dmem.low", f"{REGION} 10M")  # 4 < used 10 ≤ elow 10
    L = p["/L"]
    assert verdicts(dmem, L, L) == "Y/Y"
    assert verdicts(dmem, L, p["/o"]) == "N/N"
    assert verdicts(dmem, L, None) == "N/N"  # no pool: not in any subtree
    assert verdicts(dmem, L, p["/L/t"]) == "N/N"
    assert verdicts(dmem, L, p["/L/u"]) == "low/Y"
    tree.write("/L/u", "dmem.low", f"{REGION} 9M")
    assert verdicts(dmem, L, p["/L/u"]) == "Y/Y"
    u = p["/L/u"]
    assert (u.evict_allowed, u.evict_denied, u.evict_low_skipped) == (3, 0, 1)


def test_p24_an_evictable_verdict_never_reports_hit_low() -> None:
    """§2.7 / P-24: ``hit_low`` is set only for a victim skipped in pass 1 with
    emin < used ≤ elow; every "evictable" answer -- the limit pool itself, a root limit pool,
    device-level pressure, used > elow, the low pass -- comes with hit_low false."""
    tree, dmem, _, p = charged_tree()
    tree.write("/L/u", "dmem.low", f"{REGION} 10M")  # 0 < used 10 ≤ elow 10
    L, u, o = p["/L"], p["/L/u"], p["/o"]
    for ignore_low in (False, True):
        assert dmem.evict_valuable(L, L, ignore_low) == (True, False)
        assert dmem.evict_valuable(None, None, ignore_low) == (True, False)
        assert dmem.evict_valuable(p["/"], u, ignore_low) == (True, False)
        assert dmem.evict_valuable(None, o, ignore_low) == (True, False)
        assert dmem.evict_valuable(L, p["/L/t"], ignore_low) == (True, False)
    assert dmem.evict_valuable(L, u, False) == (False, True)
    assert dmem.evict_valuable(L, u, True) == (True, False)


def test_p24_verdict_counts_add_up_per_victim_pool() -> None:
    """§2.7: each call counts one verdict on the victim's pool -- allowed, denied or skipped
    for low -- whichever rule decided it (limit pool itself, root limit, outside the subtree,
    used ≤ emin, used > elow)."""
    tree, dmem, _, p = charged_tree()
    tree.write("/L/u", "dmem.min", f"{REGION} 10M")
    L, t, u, o = p["/L"], p["/L/t"], p["/L/u"], p["/o"]
    for _ in range(2):
        dmem.evict_valuable(L, L, False)  # the limit pool itself
        dmem.evict_valuable(p["/"], t, False)  # root limit pool
        dmem.evict_valuable(L, o, False)  # outside the subtree
        dmem.evict_valuable(L, u, False)  # used ≤ emin
        dmem.evict_valuable(L, t, True)  # unprotected, low pass
    counts = {k: (x.evict_allowed, x.evict_denied, x.evict_low_skipped) for k, x in p.items()}
    assert counts["/L"] == (2, 0, 0)
    assert counts["/L/t"] == (4, 0, 0)
    assert counts["/o"] == (0, 2, 0)
    assert counts["/L/u"] == (0, 2, 0)
    stats = {s.cgroup: (s.evict_allowed, s.evict_denied, s.evict_low_skipped) for s in dmem.stats()}
    assert stats == {k: counts[k] for k in stats}


def test_p45_a_cgroup_without_a_pool_does_not_end_the_protection_walk() -> None:
    """§2.7 / P-45: the pre-order walk skips a descendant without a pool for the region and
    goes on to the victim, so the victim's protection is computed (here it is min-protected)."""
    tree, dmem, region = setup_ctl("/L", "/L/x", "/L/y")  # /L/x: never charged, no pool
    y = dmem.try_charge(region, 10 * MiB, task_in(tree, "/L/y"))
    assert isinstance(y, DmemPool) and dmem.find_pool("/L/x", region) is None
    tree.write("/L/y", "dmem.min", f"{REGION} 10M")
    assert verdicts(dmem, pool(dmem, "/L", region), y) == "N/N"
    assert y.cnt.emin == 10 * MiB


def test_p45_protection_walk_stops_after_the_victim() -> None:
    """§2.7: ``dmem_cgroup_calculate_protection`` stops once the victim's pool is processed;
    pools later in pre-order keep the effective values they had (as the report shows)."""
    tree, dmem, region = setup_ctl("/L", "/L/a", "/L/b")
    for path in ("/L/a", "/L/b"):
        dmem.try_charge(region, 10 * MiB, task_in(tree, path))
        tree.write(path, "dmem.min", f"{REGION} 5M")
    L = pool(dmem, "/L", region)
    dmem.evict_valuable(L, pool(dmem, "/L/a", region), False)
    emin = {s.cgroup: s.emin for s in dmem.stats()}
    assert (emin["/L/a"], emin["/L/b"]) == (5 * MiB, 0)
    dmem.evict_valuable(L, pool(dmem, "/L/b", region), False)
    assert pool(dmem, "/L/b", region).cnt.emin == 5 * MiB


def test_p25_direct_child_of_the_limit_pool_gets_its_settings_uncapped() -> None:
    """P-25: for a direct child T of Lp, emin(T) = min(T) and elow(T) = low(T), even above
    T's usage and above Lp's own (zero) min."""
    tree, dmem, _, p = charged_tree()
    tree.write("/L/u", "dmem.min", f"{REGION} 1G")
    tree.write("/L/u", "dmem.low", f"{REGION} 2G")
    assert verdicts(dmem, p["/L"], p["/L/u"]) == "N/N"
    assert (p["/L/u"].cnt.emin, p["/L/u"].cnt.elow) == (GiB, 2 * GiB)
    assert p["/L"].cnt.min == 0


def test_p26_protection_is_recursive_without_any_mount_option() -> None:
    """P-26: a grandchild with min 0 is protected by its parent's unclaimed protection
    (memcg would need ``memory_recursiveprot``)."""
    tree, dmem, _, p = charged_tree()
    tree.write("/L/t", "dmem.min", f"{REGION} 20M")  # /L/t: own 10M + /L/t/g 10M
    g = p["/L/t/g"]
    assert g.cnt.min == 0
    assert verdicts(dmem, p["/L"], g) == "N/N"
    # π(g) = 0, Σ = 0: e(g) = (20M − 0)·(10M − 0)/(20M − 0) = 10M = used(g)
    assert g.cnt.emin == 10 * MiB


def test_p33_device_level_pressure_uses_the_top_most_pool() -> None:
    """P-33: without a limit pool protection is computed from the region's root pool; only
    then is a victim without a pool evictable."""
    tree, dmem, _, p = charged_tree()
    tree.write("/L", "dmem.min", f"{REGION} 31M")  # /L uses 31M in total
    tree.write("/L/u", "dmem.min", f"{REGION} 10M")
    assert verdicts(dmem, None, p["/L/u"]) == "N/N"  # nested protection holds
    assert verdicts(dmem, None, p["/o"]) == "Y/Y"
    assert verdicts(dmem, None, None) == "Y/Y"
    tree.write("/L", "dmem.min", f"{REGION} 0")  # a protected child of an unprotected parent
    assert verdicts(dmem, None, p["/L/u"]) == "Y/Y"  # overcommit share of 0 is 0


def test_p34_root_limit_pool_makes_everything_evictable() -> None:
    """P-34: a limit pool of the root cgroup means no protection applies."""
    tree, dmem, _, p = charged_tree()
    tree.write("/L", "dmem.min", f"{REGION} 1G")
    tree.write("/L/u", "dmem.min", f"{REGION} 1G")
    for victim in ("/L", "/L/u", "/o"):
        assert verdicts(dmem, p["/"], p[victim]) == "Y/Y"


def test_p46_dmem_protects_cgroups_without_processes() -> None:
    """P-46, the dmem side: memcg is recursive only with ``memory_recursiveprot`` and ignores
    the memory.min of a cgroup without processes; dmem has neither condition -- a cgroup
    whose tasks all exited keeps its protection (and P-26 covers recursion)."""
    tree, dmem, _, p = charged_tree()
    tree.write("/L/u", "dmem.min", f"{REGION} 10M")
    for task in list(tree.lookup("/L/u").tasks):
        tree.exit(task)
    assert not tree.lookup("/L/u").populated
    assert verdicts(dmem, p["/L"], p["/L/u"]) == "N/N"


def test_evict_valuable_rejects_foreign_pool_objects() -> None:
    _, dmem, _ = setup_ctl()
    with pytest.raises(TypeError):
        dmem.evict_valuable(object(), None, False)


# -- through TTM: an amdgpu-like GPU under 6.14 -------------------------------------------------


class Gpu:
    """An amdgpu-like device with 64 MiB of VRAM, a dmem controller and a cgroup tree."""

    def __init__(self, vram: int = 64 * MiB, profile: str = "6.14") -> None:
        m = make_machine(profile)
        self.kernel = m.kernel
        self.dev = AmdgpuDevice(
            m.kernel, m.gpu, vram_size=vram, gtt_size=512 * MiB, system_size=GiB
        )
        self.tree = CgroupTree()
        self.dmem = install(self.kernel, self.tree)
        self.dmem.register_device(self.dev.bdev)
        region = self.dev.vram_region
        assert region is not None
        self.region = region

    def write(self, path: str, name: str, value: str) -> None:
        if not self.tree.exists(path):
            self.tree.mkdir(path)
        self.tree.write(path, f"dmem.{name}", f"{self.region.name} {value}")

    def alloc(self, task: Task | None, size: int = 8 * MiB, domain: str = "vram") -> AmdgpuBo:
        self.kernel.current = task
        try:
            return self.dev.create_buffer(size, domain)
        finally:
            self.kernel.current = None

    def usage(self, path: str) -> int:
        line = self.tree.read(path, "dmem.current").split()
        return int(line[1])

    def in_vram(self, *bos: AmdgpuBo) -> list[bool]:
        return [bo.tbo.mem_type is TtmMemType.VRAM for bo in bos]

    def pin(self, bo: AmdgpuBo) -> None:
        with bo.tbo.resv:
            self.dev.amdgpu_bo_pin(bo, AmdgpuDomain.VRAM)

    def unpin(self, bo: AmdgpuBo) -> None:
        with bo.tbo.resv:
            self.dev.amdgpu_bo_unpin(bo)


def test_p28_limit_reaches_userspace_as_enomem() -> None:
    """P-28: dmem refuses with -EAGAIN inside TTM; when every placement fails after eviction
    the allocating process sees ENOMEM (ttm_bo_validate), never EAGAIN."""
    g = Gpu()
    g.write("/a", "max", "16M")
    t = task_in(g.tree, "/a")
    first = g.alloc(t)
    with pytest.raises(KernelError) as ei:
        g.alloc(t, 17 * MiB)  # can never fit under 16M
    assert ei.value.errno is Errno.ENOMEM
    assert pool(g.dmem, "/a", g.region).cnt.failcnt >= 2
    # the walk evicted /a's own BO (the limit pool is always evictable) -- in vain
    assert g.in_vram(first) == [False] and g.usage("/a") == 0


def test_p29_whole_bo_size_charged_for_registered_managers_only() -> None:
    """P-29: the charge is the whole BO size in bytes -- a 5000-byte GEM create is an
    8 KiB BO (amdgpu_bo_create page-aligns), so the charge is exactly the VRAM it takes --
    only VRAM has a region (GTT is free of dmem), freeing uncharges."""
    g = Gpu()
    g.tree.mkdir("/a")
    t = task_in(g.tree, "/a")
    odd = g.alloc(t, 5000)
    gtt = g.alloc(t, 8 * MiB, "gtt")
    assert g.in_vram(odd, gtt) == [True, False]
    assert g.usage("/a") == 8192 and g.usage("/") == 8192
    assert g.dev.regions()[0].used == 8192
    g.dev.free_buffer(odd)
    g.dev.free_buffer(gtt)
    assert g.usage("/") == 0
    assert g.tree.lookup("/a").refs == 0


def test_p29_manager_failure_after_the_charge_uncharges_it() -> None:
    """P-29: VRAM full of pinned BOs: the dmem charge succeeds, the manager has no room, and
    the charge is returned before the allocation fails."""
    g = Gpu(vram=16 * MiB)
    g.tree.mkdir("/a")
    t = task_in(g.tree, "/a")
    bos = [g.alloc(None), g.alloc(None)]  # root fills the device
    for bo in bos:
        g.pin(bo)
    with pytest.raises(KernelError) as ei:
        g.alloc(t)
    assert ei.value.errno is Errno.ENOMEM
    assert g.usage("/a") == 0 and g.usage("/") == 16 * MiB


def test_eviction_stays_inside_the_limiting_subtree() -> None:
    """P-24 through TTM: /a at its dmem.max evicts only /a's BOs, although /b's are older on
    the LRU; the victim moves to GTT and its charge leaves /a."""
    g = Gpu()
    g.write("/a", "max", "24M")
    g.tree.mkdir("/b")
    ta, tb = task_in(g.tree, "/a"), task_in(g.tree, "/b")
    b_bos = [g.alloc(tb), g.alloc(tb)]
    a_bos = [g.alloc(ta) for _ in range(3)]
    new = g.alloc(ta)
    assert g.in_vram(*b_bos) == [True, True]
    assert g.in_vram(*a_bos, new) == [False, True, True, True]
    assert a_bos[0].tbo.mem_type is TtmMemType.TT
    assert (g.usage("/a"), g.usage("/b"), g.usage("/")) == (24 * MiB, 16 * MiB, 40 * MiB)
    assert g.dmem.find_pool("/b", g.region) is not None
    assert pool(g.dmem, "/b", g.region).evict_denied >= 2


def test_min_protected_pool_is_never_evicted() -> None:
    """P-24/P-25 through TTM: with the limit at /a, a child at or below its dmem.min is not
    evicted in either pass -- not even for its own allocation -- so the process gets ENOMEM;
    without the min the same allocation evicts."""
    g = Gpu()
    g.write("/a", "max", "24M")
    g.write("/a/x", "min", "24M")
    g.tree.mkdir("/a/y")
    tx, ty = task_in(g.tree, "/a/x"), task_in(g.tree, "/a/y")
    x_bos = [g.alloc(tx) for _ in range(3)]
    for task in (ty, tx):
        with pytest.raises(KernelError) as ei:
            g.alloc(task)
        assert ei.value.errno is Errno.ENOMEM
    assert g.in_vram(*x_bos) == [True, True, True]
    assert pool(g.dmem, "/a/x", g.region).evict_low_skipped == 0
    g.write("/a/x", "min", "0")
    g.alloc(ty)
    assert g.in_vram(*x_bos) == [False, True, True]


def test_min_protection_holds_under_device_level_pressure() -> None:
    """P-33 through TTM: the device is full (no cgroup limit hit); protection is computed
    from the root pool, so a nested min protects only if its ancestors are protected too."""
    g = Gpu(vram=32 * MiB)
    g.write("/a", "min", "16M")
    g.write("/a/x", "min", "16M")
    tx = task_in(g.tree, "/a/x")
    x_bos = [g.alloc(tx), g.alloc(tx)]
    root_bos = [g.alloc(None), g.alloc(None)]
    g.alloc(None)  # device full: evicts a root BO, never /a/x's
    assert g.in_vram(*x_bos) == [True, True]
    assert g.in_vram(*root_bos) == [False, True]
    g.write("/a", "min", "0")  # /a/x's min alone no longer shields it
    g.alloc(None)
    assert g.in_vram(*x_bos).count(False) == 1


def test_low_protected_pool_is_evicted_only_in_the_second_pass() -> None:
    """P-24 through TTM: a pool within its dmem.low is skipped by the first walk (hit_low)
    and evicted by the second, which ignores low."""
    g = Gpu()
    g.write("/a", "max", "24M")
    g.write("/a/x", "low", "24M")
    g.tree.mkdir("/a/y")
    tx, ty = task_in(g.tree, "/a/x"), task_in(g.tree, "/a/y")
    x_bos = [g.alloc(tx) for _ in range(3)]
    y_bo = g.alloc(ty)
    assert g.in_vram(*x_bos, y_bo) == [False, True, True, True]
    x = pool(g.dmem, "/a/x", g.region)
    assert x.evict_low_skipped == 3  # the first walk saw all three and skipped them
    assert x.evict_allowed == 1


def test_low_pass_prefers_unprotected_victims() -> None:
    """P-24: with an unprotected sibling on the LRU, the first pass takes it and the
    low-protected pool keeps everything."""
    g = Gpu()
    g.write("/a", "max", "24M")
    g.write("/a/x", "low", "16M")
    g.tree.mkdir("/a/y")
    tx, ty = task_in(g.tree, "/a/x"), task_in(g.tree, "/a/y")
    x_bos = [g.alloc(tx), g.alloc(tx)]
    y_old = g.alloc(ty)
    g.alloc(ty)
    assert g.in_vram(*x_bos, y_old) == [True, True, False]


def test_p27_pinned_bos_are_never_evicted() -> None:
    """P-27: even in the limit pool itself (always evictable by dmem) a pinned BO is skipped;
    once unpinned it is the victim."""
    g = Gpu()
    g.write("/a", "max", "16M")
    t = task_in(g.tree, "/a")
    bos = [g.alloc(t), g.alloc(t)]
    for bo in bos:
        g.pin(bo)
    with pytest.raises(KernelError) as ei:
        g.alloc(t)
    assert ei.value.errno is Errno.ENOMEM
    assert g.in_vram(*bos) == [True, True]
    # pinned BOs are not even on the LRU (K-60): the walk never asks dmem about them
    assert pool(g.dmem, "/a", g.region).evict_allowed == 0
    g.unpin(bos[1])
    g.alloc(t)
    assert g.in_vram(*bos) == [True, False]


def test_p35_lowering_max_evicts_nothing() -> None:
    """P-35: writing a smaller dmem.max moves no BO (and, below current, is not applied)."""
    g = Gpu()
    g.tree.mkdir("/a")
    t = task_in(g.tree, "/a")
    bos = [g.alloc(t) for _ in range(3)]
    g.write("/a", "max", "8M")
    g.write("/a", "max", "24M")
    assert g.in_vram(*bos) == [True, True, True]
    assert g.tree.read("/a", "dmem.max") == f"{g.region.name} {24 * MiB}\n"


def test_dmem_absent_before_6_14_even_when_installed() -> None:
    """Preset 6.12 has no dmem: TTM never consults an installed controller (P-60's dmem part)."""
    m = make_machine("6.12")
    dev = AmdgpuDevice(m.kernel, m.gpu, vram_size=64 * MiB)
    tree = CgroupTree()
    dmem = install(m.kernel, tree)
    m.kernel.current = task_in(tree, "/")
    dev.create_buffer(8 * MiB, "vram")
    assert dmem.pools() == [] and dmem.regions == ()


# -- hypothesis ------------------------------------------------------------------------------------

PATHS = ["/", "/a", "/a/x", "/a/y", "/b"]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("charge"), st.sampled_from(PATHS), st.integers(1, 64)),
        st.tuples(st.just("uncharge"), st.integers(0, 30), st.integers(0, 0)),
        st.tuples(
            st.sampled_from(["max", "min", "low"]),
            st.sampled_from(PATHS[1:]),
            st.integers(0, 200),
        ),
    ),
    max_size=50,
)


def walk_pools(dmem: DmemCgroupController) -> Iterator[DmemPool]:
    yield from dmem.pools()


@settings(max_examples=120, deadline=None)
@given(STEPS)
def test_invariants_under_random_charges_uncharges_and_limit_writes(
    steps: list[tuple[str, object, int]],
) -> None:
    """In any interleaving: no pool exceeds its max (charges refuse, P-17; lower limits are
    not applied, P-20); P-37's children sums match; a pool's current equals the charges made
    in its subtree; every eviction verdict is consistent with P-24; everything returns to zero
    (and every cgroup reference is dropped) after uncharging."""
    tree, dmem, region = setup_ctl("/a", "/a/x", "/a/y", "/b")
    tasks = {path: task_in(tree, path) for path in PATHS}
    live: list[tuple[str, DmemPool, int]] = []
    for op, where, n in steps:
        if op == "charge":
            assert isinstance(where, str)
            try:
                p = dmem.try_charge(region, n * MiB, tasks[where])
            except DmemChargeError as e:
                assert isinstance(e.limit_pool, DmemPool)
                assert tree.lookup(where).is_descendant_of(e.limit_pool.cgroup)
                assert e.limit_pool.cnt.usage + n * MiB > e.limit_pool.cnt.max
            else:
                assert isinstance(p, DmemPool) and p.cgroup.path == where
                live.append((where, p, n * MiB))
        elif op == "uncharge":
            assert isinstance(where, int)
            if live:
                _, p, size = live.pop(where % len(live))
                dmem.uncharge(p, size)
        else:
            assert isinstance(where, str)
            tree.write(where, f"dmem.{op}", f"{region.name} {n}M")
        pools = list(walk_pools(dmem))
        for p in pools:
            assert p.cnt.usage <= p.cnt.max
            below = [s for w, _, s in live if tree.lookup(w).is_descendant_of(p.cgroup)]
            assert p.cnt.usage == sum(below)
            kids = [q for q in pools if q.parent is p]
            assert p.cnt.children_min_usage == sum(min(q.cnt.usage, q.cnt.min) for q in kids)
            assert p.cnt.children_low_usage == sum(min(q.cnt.usage, q.cnt.low) for q in kids)
        limit = pool(dmem, "/a", region) if dmem.find_pool("/a", region) else None
        for p in pools:
            ok, _ = dmem.evict_valuable(limit, p, True)
            if limit is not None and p is not limit and not p.is_descendant_of(limit):
                assert not ok
            if ok and p is not limit and limit is not None:
                assert p.cnt.usage > p.cnt.emin
    for _, p, size in live:
        dmem.uncharge(p, size)
    assert all(p.cnt.usage == 0 for p in dmem.pools())
    assert all(c.refs == 0 for c in tree.walk_css(tree.root))
    assert not dmem.warnings


TTM_STEP = st.one_of(
    st.tuples(st.just("alloc"), st.sampled_from(PATHS), st.sampled_from([4, 8, 12])),
    st.tuples(st.just("free"), st.integers(0, 20), st.just(0)),
    st.tuples(st.just("pin"), st.integers(0, 20), st.just(0)),
    st.tuples(st.just("unpin"), st.integers(0, 20), st.just(0)),
    st.tuples(
        st.sampled_from(["max", "min", "low"]),
        st.sampled_from(PATHS[1:]),
        st.integers(0, 64),
    ),
)
TTM_STEPS = st.lists(TTM_STEP, max_size=30)


@settings(max_examples=150, deadline=None)
@given(TTM_STEPS)
def test_ttm_invariants_under_random_allocations_pins_and_limit_writes(
    steps: list[tuple[str, object, int]],
) -> None:
    """Through TTM, in any interleaving: dmem.current of the root is exactly the bytes of BOs
    resident in VRAM (P-29); no pool exceeds its max; allocation failures are ENOMEM (P-28);
    a pinned BO never moves (P-27); freeing everything returns every pool and every cgroup
    reference to zero."""
    run = BoSteps(Gpu())
    for op, where, n in steps:
        run.step(op, where, n)
    run.free_all()


class BoSteps:
    """Random TTM steps on a :class:`Gpu` over the cgroups of ``PATHS``, with the invariants
    checked after each: the root's dmem.current is exactly the bytes of BOs resident in VRAM
    (P-29), no pool exceeds its max, allocation failures are ENOMEM (P-28), a pinned BO
    never moves (P-27); :meth:`free_all` then expects every pool and cgroup reference at 0."""

    def __init__(self, g: Gpu) -> None:
        self.g = g
        for path in PATHS[1:]:
            g.tree.mkdir(path)
        self.tasks = {path: task_in(g.tree, path) for path in PATHS}
        self.bos: list[AmdgpuBo] = []
        self.pinned: dict[int, int] = {}  # id(bo) → VRAM offset at pin time

    def step(self, op: str, where: object, n: int, domain: str = "vram") -> None:
        g, bos, pinned = self.g, self.bos, self.pinned
        if op == "alloc":
            assert isinstance(where, str)
            try:
                bos.append(g.alloc(self.tasks[where], n * MiB, domain))
            except KernelError as e:
                assert e.errno is Errno.ENOMEM
        elif op in ("free", "pin", "unpin"):
            assert isinstance(where, int)
            if bos:
                self._bo_op(op, bos[where % len(bos)])
        else:
            assert isinstance(where, str)
            g.write(where, op, f"{n}M")
        vram = [bo for bo in bos if bo.tbo.mem_type is TtmMemType.VRAM]
        assert g.usage("/") == sum(bo.size for bo in vram)
        for p in g.dmem.pools():
            assert p.cnt.usage <= p.cnt.max
        for bo in bos:
            if id(bo) in pinned:
                res = bo.tbo.resource
                assert res is not None and res.mem_type is TtmMemType.VRAM
                assert res.start == pinned[id(bo)]

    def _bo_op(self, op: str, bo: AmdgpuBo) -> None:
        g, pinned = self.g, self.pinned
        if op == "free":
            self.bos.remove(bo)
            pinned.pop(id(bo), None)
            g.dev.free_buffer(bo)
        elif op == "pin" and bo.tbo.mem_type is TtmMemType.VRAM:
            g.pin(bo)
            res = bo.tbo.resource
            assert res is not None
            pinned.setdefault(id(bo), res.start)
        elif op == "unpin" and bo.tbo.pin_count:
            g.unpin(bo)
            if not bo.tbo.pin_count:
                del pinned[id(bo)]

    def free_all(self) -> None:
        g = self.g
        for bo in self.bos:
            g.dev.free_buffer(bo)
        assert all(p.cnt.usage == 0 for p in g.dmem.pools())
        assert all(c.refs == 0 for c in g.tree.walk_css(g.tree.root))
        assert not g.dmem.warnings and not g.kernel.warnings.records()
