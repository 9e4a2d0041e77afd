"""K-126: protection-aware TTM allocation and eviction (queued for 7.3, preset ``next``).

"[PATCH v6 0/6] cgroup/dmem,drm/ttm: Improve protection in contended cases" (Natalie Vock,
2026-03-13): ``dmem_cgroup_below_min``/``below_low`` and ``dmem_cgroup_get_common_ancestor``
(patches 1, 2), the charge taken once per place and kept while evicting (4), an allocation
within its effective min/low evicting instead of falling back to the next place (5), and the
common ancestor of evictor and victim as the reference pool at device-level pressure (6).
Each TTM scenario runs under ``next`` and, for contrast, under ``7.1`` (no K-126).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.drivers.amdgpu import AmdgpuBo
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import Task
from pinlab.kernel.profile import PRESETS
from pinlab.kernel.ttm import TtmMemType
from tests.drivers.machine import MiB
from tests.policy.test_dmem import (
    PATHS,
    TTM_STEP,
    BoSteps,
    Gpu,
    charged_tree,
    pool,
    setup_ctl,
    task_in,
)

REGION = "drm/0000:03:00.0/vram0"
BO = 8 * MiB

GTT, VRAM = TtmMemType.TT, TtmMemType.VRAM


def test_k126_switch_is_on_in_next_only() -> None:
    assert [n for n, p in PRESETS.items() if p.dmem_protected_alloc] == ["next"]


# -- the controller's queries (patches 1 and 2) ---------------------------------------------------


def test_k126_below_min_and_low_use_global_protection() -> None:
    """``dmem_cgroup_below_min/low(NULL, pool)``: usage ≤ emin/elow computed from the region's
    root pool; a nested setting counts only as far as the ancestors are protected too."""
    tree, dmem, _, p = charged_tree()  # /L 41M in all: /L 1, /L/t 10 + /L/t/g 10, /L/u 10
    tree.write("/L/u", "dmem.min", f"{REGION} 10M")
    tree.write("/L/u", "dmem.low", f"{REGION} 10M")
    assert not dmem.below_min(None, p["/L/u"])  # /L has no min: /L/u's emin is 0
    assert not dmem.below_low(None, p["/L/u"])
    tree.write("/L", "dmem.min", f"{REGION} 41M")
    tree.write("/L", "dmem.low", f"{REGION} 41M")
    assert dmem.below_min(None, p["/L/u"]) and dmem.below_low(None, p["/L/u"])
    assert p["/L/u"].cnt.emin >= 10 * MiB  # the query computed the effective values
    tree.write("/L/u", "dmem.min", f"{REGION} 9M")  # usage 10M is above a 9M share ...
    tree.write("/L", "dmem.min", f"{REGION} 9M")  # ... once /L leaves nothing to share out
    assert not dmem.below_min(None, p["/L/u"]) and dmem.below_low(None, p["/L/u"])
    # a child of the root gets its own settings: usage 41M > min 9M, ≤ low 41M
    assert not dmem.below_min(None, p["/L"]) and dmem.below_low(None, p["/L"])
    assert dmem.below_low(p["/L"], p["/L/u"])  # an explicit root: /L/u's own low
    tree.write("/o", "dmem.low", f"{REGION} 9M")
    assert not dmem.below_low(None, p["/o"])  # /o uses 10M


def test_k126_queries_are_false_for_the_root_pool_itself_and_none() -> None:
    tree, dmem, _, p = charged_tree()
    tree.write("/L", "dmem.min", f"{REGION} 1G")
    assert dmem.below_min(None, p["/L"])
    assert not dmem.below_min(p["/L"], p["/L"])  # root is test
    assert not dmem.below_min(None, p["/"]) and not dmem.below_low(None, p["/"])
    assert not dmem.below_min(None, None) and not dmem.below_low(None, None)


def test_k126_common_ancestor_is_the_pool_of_the_nearest_shared_cgroup() -> None:
    """``dmem_cgroup_get_common_ancestor``: ``cgroup_common_ancestor`` includes each cgroup
    itself, so a pool and its descendant's pool share the ancestor's; unrelated top-level
    cgroups share the root's; None in, None out."""
    _, dmem, _, p = charged_tree()
    assert dmem.common_ancestor(p["/L/t/g"], p["/L/u"]) is p["/L"]
    assert dmem.common_ancestor(p["/L/t/g"], p["/L/t"]) is p["/L/t"]
    assert dmem.common_ancestor(p["/L"], p["/L/t/g"]) is p["/L"]
    assert dmem.common_ancestor(p["/L/u"], p["/L/u"]) is p["/L/u"]
    assert dmem.common_ancestor(p["/o"], p["/L/u"]) is p["/"]
    assert dmem.common_ancestor(None, p["/o"]) is None
    assert dmem.common_ancestor(p["/o"], None) is None


def test_k126_common_ancestor_stays_in_the_first_pools_region() -> None:
    tree, dmem, region = setup_ctl("/a", "/b")
    other = dmem.dmem_cgroup_register_region(1 << 30, "drm/0000:04:00.0/vram0")
    assert other is not None
    pa = dmem.try_charge(region, MiB, task_in(tree, "/a"))
    pb = dmem.try_charge(other, MiB, task_in(tree, "/b"))
    ancestor = dmem.common_ancestor(pa, pb)
    assert ancestor is pool(dmem, "/", region)


# -- through TTM: an amdgpu-like GPU with 32 MiB of VRAM ------------------------------------------


def gpu(profile: str) -> Gpu:
    return Gpu(vram=32 * MiB, profile=profile)


def tasks(g: Gpu, *paths: str) -> list[Task]:
    for path in paths:
        for i in range(1, path.count("/") + 1):
            prefix = "/".join(path.split("/")[: i + 1])
            if not g.tree.exists(prefix):
                g.tree.mkdir(prefix)
    return [task_in(g.tree, path) for path in paths]


def where(*bos: AmdgpuBo) -> list[TtmMemType | None]:
    return [bo.tbo.mem_type for bo in bos]


@pytest.mark.parametrize(("profile", "lands_in"), [("next", VRAM), ("7.1", GTT)])
def test_k126_min_protected_allocation_evicts_instead_of_falling_back(
    profile: str, lands_in: TtmMemType
) -> None:
    """Patch 5: VRAM is full of an unprotected tenant's BOs; a VRAM-or-GTT allocation of a
    cgroup within its dmem.min evicts the tenant's oldest BO already in the idle pass (next),
    where 7.1 places it in GTT without evicting anything."""
    g = gpu(profile)
    g.write("/a", "min", "16M")
    ta, tb = tasks(g, "/a", "/b")
    b_bos = [g.alloc(tb, BO) for _ in range(4)]
    new = g.alloc(ta, BO, "vram|gtt")
    assert where(new) == [lands_in]
    evicted = [GTT, VRAM, VRAM, VRAM] if lands_in is VRAM else [VRAM] * 4
    assert where(*b_bos) == evicted
    assert g.usage("/a") == (BO if lands_in is VRAM else 0)


@pytest.mark.parametrize("profile", ["next", "7.1"])
def test_k126_an_allocation_that_takes_the_cgroup_past_its_min_is_not_protected(
    profile: str,
) -> None:
    """Patch 4: the charge comes first, so below_min sees the usage *with* the new BO: a 16M
    BO of a cgroup with min 8M and nothing charged yet is not protected and goes to GTT."""
    g = gpu(profile)
    g.write("/a", "min", "8M")
    ta, tb = tasks(g, "/a", "/b")
    b_bos = [g.alloc(tb, BO) for _ in range(4)]
    new = g.alloc(ta, 2 * BO, "vram|gtt")
    assert where(new) == [GTT] and where(*b_bos) == [VRAM] * 4
    assert g.usage("/a") == 0  # the VRAM charge kept for the attempt was returned


@pytest.mark.parametrize(("profile", "result"), [("next", VRAM), ("7.1", None)])
def test_k126_protected_cgroup_evicts_its_unprotected_sibling(
    profile: str, result: TtmMemType | None
) -> None:
    """Patches 5 and 6, the brief's case: /g (min 64M) shares its protection between /g/a
    (min 16M) and /g/b (no min), which filled VRAM, so computed from the root /g/b holds all
    of /g's unclaimed protection -- also with /g/a's new 8M charge counted (patch 4). /g/a's
    VRAM-only allocation fits its charge; under 7.1 the device-level walk (reference: the
    root) finds /g/b protected and the allocation fails with ENOMEM; under next the
    reference is /g, the common ancestor, where /g/b's own settings (none) apply, and /g/b's
    oldest BO is evicted."""
    g = gpu(profile)
    g.write("/g", "min", "64M")
    ta, tb = tasks(g, "/g/a", "/g/b")
    g.write("/g/a", "min", "16M")
    b_bos = [g.alloc(tb, BO) for _ in range(4)]
    if result is None:
        with pytest.raises(KernelError) as ei:
            g.alloc(ta, BO)
        assert ei.value.errno is Errno.ENOMEM
        assert where(*b_bos) == [VRAM] * 4 and g.usage("/g/a") == 0
        return
    new = g.alloc(ta, BO)
    assert where(new) == [VRAM] and where(*b_bos) == [GTT, VRAM, VRAM, VRAM]
    assert (g.usage("/g/a"), g.usage("/g/b")) == (BO, 3 * BO)


def test_k126_low_protected_allocation_does_not_evict_a_low_protected_victim() -> None:
    """Patches 5 and 6: /g/a is within its dmem.low but not its min (``may_try_low`` False):
    its walk evicts only victims above their effective low -- computed from /g, the common
    ancestor, where /g/c's own 32M low covers all its BOs -- and never runs the low pass, so
    the new BO goes to GTT. The same allocation within a min (``may_try_low``) takes /g/c's
    BO in the low pass."""
    g = gpu("next")
    g.write("/g", "low", "64M")
    ta, tc = tasks(g, "/g/a", "/g/c")
    g.write("/g/a", "low", "16M")
    g.write("/g/c", "low", "32M")
    c_bos = [g.alloc(tc, BO) for _ in range(4)]
    new = g.alloc(ta, BO, "vram|gtt")
    assert where(new) == [GTT] and where(*c_bos) == [VRAM] * 4
    c = pool(g.dmem, "/g/c", g.region)
    assert c.evict_low_skipped == 4 and c.evict_allowed == 0
    assert g.usage("/g/a") == 0

    g.write("/g", "min", "64M")
    g.write("/g/a", "min", "16M")
    second = g.alloc(ta, BO, "vram|gtt")
    assert where(second) == [VRAM] and where(*c_bos) == [GTT, VRAM, VRAM, VRAM]
    assert c.evict_allowed == 1


def test_k126_low_protected_allocation_skips_its_own_pool() -> None:
    """Patch 6's first hunk: ``evict_valuable`` always lets a pool lose its own BOs, so a walk
    for a low-only protected allocation skips the evictor's pool explicitly; a min-protected
    allocation evicts its own oldest BO instead of going to GTT."""
    g = gpu("next")
    g.write("/a", "low", "40M")
    (ta,) = tasks(g, "/a")
    a_bos = [g.alloc(ta, BO) for _ in range(4)]
    new = g.alloc(ta, BO, "vram|gtt")
    assert where(new) == [GTT] and where(*a_bos) == [VRAM] * 4
    a = pool(g.dmem, "/a", g.region)
    assert a.evict_allowed == a.evict_denied == a.evict_low_skipped == 0  # never asked
    g.write("/a", "min", "40M")
    again = g.alloc(ta, BO, "vram|gtt")
    assert where(again) == [VRAM] and where(*a_bos) == [GTT, VRAM, VRAM, VRAM]


@pytest.mark.parametrize(("profile", "a_keeps"), [("next", False), ("7.1", True)])
def test_k126_root_common_ancestor_lifts_min_protection(profile: str, a_keeps: bool) -> None:
    """Patch 6 with 6.14's ``dmem_cgroup_state_evict_valuable``: when evictor and victim
    share no cgroup below the root, their common ancestor is the root's pool, and a root
    limit pool makes every victim evictable (P-34). So under next an unprotected top-level
    cgroup at device-level pressure evicts BOs of another top-level cgroup that is within its
    dmem.min -- which 7.1 (reference: the root, protection computed) refuses, evicting the
    allocator's own BO instead. By code reading this is upstream behaviour of the queued
    series, not a pinlab choice (kernel.md K-126)."""
    g = gpu(profile)
    g.write("/a", "min", "16M")
    ta, tb = tasks(g, "/a", "/b")
    a_bos = [g.alloc(ta, BO) for _ in range(2)]
    b_bos = [g.alloc(tb, BO) for _ in range(2)]
    new = g.alloc(tb, BO)
    assert where(new) == [VRAM]
    if a_keeps:
        assert where(*a_bos, *b_bos) == [VRAM, VRAM, GTT, VRAM]
    else:
        assert where(*a_bos, *b_bos) == [GTT, VRAM, VRAM, VRAM]
    assert g.usage("/a") == (2 * BO if a_keeps else BO)


@pytest.mark.parametrize("profile", ["next", "7.1"])
def test_k126_limit_pool_still_bounds_the_walk(profile: str) -> None:
    """With a dmem.max refusal the limit pool stays the reference (no common ancestor): /a at
    its max evicts only its own BOs in both profiles."""
    g = gpu(profile)
    g.write("/a", "max", "16M")
    ta, tb = tasks(g, "/a", "/b")
    b_bo = g.alloc(tb, BO)
    a_bos = [g.alloc(ta, BO) for _ in range(2)]
    new = g.alloc(ta, BO)
    assert where(new, b_bo, *a_bos) == [VRAM, VRAM, GTT, VRAM]
    assert g.usage("/a") == 2 * BO


@pytest.mark.parametrize(("profile", "lands_in"), [("next", None), ("7.1", VRAM)])
def test_k126_max_refused_allocation_never_runs_the_low_pass(
    profile: str, lands_in: TtmMemType | None
) -> None:
    """Patches 4 and 5: when the charge itself is refused (``dmem.max`` of /L), the series
    leaves ``may_try_low`` as ``ttm_bo_alloc_resource`` zeroed it -- only a charged
    allocation sets it -- so the walk for /L/c's forcing pass keeps to its first, low-
    respecting pass: /L/a's BOs, within /L/a's dmem.low seen from the limit pool /L, are
    skipped (``hit_low``) and the VRAM-only allocation fails with ENOMEM. 7.1's walk retries
    ignoring low and evicts /L/a's oldest BO, which lets the charge fit."""
    g = gpu(profile)
    g.write("/L", "max", "16M")
    ta, tc = tasks(g, "/L/a", "/L/c")
    g.write("/L/a", "low", "16M")
    a_bos = [g.alloc(ta, BO) for _ in range(2)]
    a = pool(g.dmem, "/L/a", g.region)
    if lands_in is None:
        with pytest.raises(KernelError) as ei:
            g.alloc(tc, BO)
        assert ei.value.errno is Errno.ENOMEM
        assert where(*a_bos) == [VRAM, VRAM]
        assert a.evict_low_skipped == 2 and a.evict_allowed == 0  # one pass, both skipped
        assert (g.usage("/L/a"), g.usage("/L/c")) == (2 * BO, 0)
        return
    new = g.alloc(tc, BO)
    assert where(new, *a_bos) == [VRAM, GTT, VRAM]
    assert (g.usage("/L/a"), g.usage("/L/c")) == (BO, BO)


PROTECTED_STEPS = st.lists(
    st.one_of(
        TTM_STEP,  # VRAM-only allocations, frees, pins, limit writes
        st.tuples(
            st.just("alloc"),
            st.sampled_from(PATHS),
            st.sampled_from([4, 8, 12]),
            st.just("vram|gtt"),
        ),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(PROTECTED_STEPS)
def test_k126_ttm_invariants_under_random_protected_allocations(
    steps: list[tuple[object, ...]],
) -> None:
    """Under next, in any interleaving of allocations (VRAM-only or VRAM-or-GTT), frees, pins
    and min/low/max writes, ``BoSteps``' invariants hold -- in particular the charge kept
    per place never leaks: the root's dmem.current stays the bytes resident in VRAM."""
    run = BoSteps(Gpu(profile="next"))
    for step in steps:
        op, where, n = step[0], step[1], step[2]
        assert isinstance(op, str) and isinstance(n, int)
        domain = step[3] if len(step) > 3 else "vram"
        assert isinstance(domain, str)
        run.step(op, where, n, domain)
    run.free_all()
