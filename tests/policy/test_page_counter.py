"""page_counter: charging, limits, protected usage and effective protection.

policy-semantics.md §3 (mm/page_counter.c), checklist items P-37 … P-45. Counters hold bytes
(the dmem unit), so the numbers below are plain integers.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.kernel.errno import Errno, KernelError
from pinlab.policy.page_counter import (
    PAGE_COUNTER_MAX,
    PageCounter,
    calculate_subtree_protection,
    effective_protection,
    page_counter_calculate_protection,
    walk_pre_order,
)


def chain(*maxes: int) -> list[PageCounter]:
    """Counters root → ... → leaf with the given max values (root first)."""
    out: list[PageCounter] = []
    parent: PageCounter | None = None
    for i, m in enumerate(maxes):
        c = PageCounter(parent, name=f"c{i}")
        c.max = m
        out.append(c)
        parent = c
    return out


def sums_ok(root: PageCounter) -> bool:
    for c in walk_pre_order(root):
        if c.children_min_usage != sum(min(k.usage, k.min) for k in c.children):
            return False
        if c.children_low_usage != sum(min(k.usage, k.low) for k in c.children):
            return False
    return True


# -- charging and limits ---------------------------------------------------------------------


def test_new_counter_is_unlimited_and_empty() -> None:
    c = PageCounter()
    assert (c.usage, c.max, c.min, c.low, c.failcnt) == (0, PAGE_COUNTER_MAX, 0, 0, 0)
    assert PAGE_COUNTER_MAX == (2**63 - 1) // 4096


def test_p39_try_charge_fails_at_the_lowest_level_strictly_above_max_and_keeps_nothing() -> None:
    """P-39: the failing level is the first (lowest) whose new usage > max; it is returned,
    its failcnt grows by 1, and no level keeps any part of the charge."""
    root, mid, leaf = chain(PAGE_COUNTER_MAX, 100, 80)
    root.max = 90
    leaf.charge(10)
    assert leaf.try_charge(75) is leaf  # 85 > 80 at the leaf
    assert (leaf.usage, mid.usage, root.usage) == (10, 10, 10)
    assert (leaf.failcnt, mid.failcnt, root.failcnt) == (1, 0, 0)
    leaf.max = PAGE_COUNTER_MAX
    assert leaf.try_charge(95) is mid  # 105 > 100 at mid: leaf's part is cancelled too
    assert (leaf.usage, mid.usage, root.usage) == (10, 10, 10)
    assert (leaf.failcnt, mid.failcnt, root.failcnt) == (1, 1, 0)
    mid.max = PAGE_COUNTER_MAX
    assert leaf.try_charge(81) is root  # 91 > 90 at the root
    assert (leaf.usage, mid.usage, root.usage) == (10, 10, 10)
    assert root.failcnt == 1


def test_p39_reaching_max_exactly_succeeds_and_moves_the_watermark() -> None:
    """P-39: the comparison is strict -- usage + n == max is allowed."""
    root, leaf = chain(100, 100)
    assert leaf.try_charge(100) is None
    assert (leaf.usage, root.usage, leaf.watermark) == (100, 100, 100)
    assert leaf.try_charge(1) is leaf
    leaf.uncharge(60)
    assert (leaf.usage, leaf.watermark) == (40, 100)


def test_charge_ignores_limits() -> None:
    """``page_counter_charge`` is the forced variant: no max is consulted."""
    root, leaf = chain(10, 10)
    leaf.charge(50)
    assert (leaf.usage, root.usage, leaf.failcnt) == (50, 50, 0)


def test_p40_set_max_below_usage_is_ebusy_and_keeps_the_old_max() -> None:
    """P-40: ``page_counter_set_max`` returns -EBUSY when usage exceeds the new value."""
    c = PageCounter()
    c.charge(100)
    with pytest.raises(KernelError) as ei:
        c.set_max(99)
    assert ei.value.errno is Errno.EBUSY and ei.value.value == -16
    assert c.max == PAGE_COUNTER_MAX
    c.set_max(100)  # equal to usage is fine
    assert c.max == 100


def test_p41_uncharging_more_than_the_usage_warns_and_clamps_to_zero() -> None:
    """P-41: an underflow WARNs (page_counter_cancel) at every level it hits and clamps."""
    root, leaf = chain(PAGE_COUNTER_MAX, PAGE_COUNTER_MAX)
    root.charge(5)  # root has 5 of its own
    leaf.charge(10)
    leaf.uncharge(12)
    assert leaf.usage == 0 and root.usage == 3
    assert len(leaf.warnings) == 1 and "underflow" in leaf.warnings[0]
    assert root.warnings is leaf.warnings  # one list for the hierarchy
    leaf.uncharge(4)
    assert (leaf.usage, root.usage) == (0, 0)
    assert len(root.warnings) == 3  # leaf again, and now the root as well


def test_new_counter_has_no_effective_protection_and_no_peak() -> None:
    """§3.1: ``page_counter_init`` starts every field at 0 but max; emin/elow stay 0 until a
    calculation writes them (P-38), so a pool never looked at reports no protection."""
    c = PageCounter(PageCounter())
    assert (c.emin, c.elow, c.watermark) == (0, 0, 0)
    assert (c.min_usage, c.low_usage, c.children_min_usage, c.children_low_usage) == (0,) * 4
    c.charge(10)
    assert (c.emin, c.elow) == (0, 0)


def test_p41_underflow_warning_has_the_kernels_text() -> None:
    """P-41: the WARN is page_counter_cancel's ``page_counter underflow: <new> nr_pages=<n>``;
    a named counter (a dmem pool) is identified in parentheses before the colon."""
    root = PageCounter()
    root.charge(10)
    root.uncharge(12)
    named = PageCounter(name="dmem /a vram0", warnings=[])
    named.charge(1)
    named.uncharge(3)
    assert root.warnings == ["page_counter underflow: -2 nr_pages=12"]
    assert named.warnings == ["page_counter underflow (dmem /a vram0): -2 nr_pages=3"]


def test_negative_amounts_are_a_caller_bug() -> None:
    with pytest.raises(ValueError):
        PageCounter().try_charge(-1)


# -- protected usage (P-37) ------------------------------------------------------------------


def test_p37_children_sums_follow_charge_uncharge_set_min_and_set_low() -> None:
    """P-37: children_min_usage(P) == Σ min(usage, min) over the children, likewise low."""
    p = PageCounter()
    a, b = PageCounter(p), PageCounter(p)
    a.set_min(100)
    b.set_low(50)
    assert (p.children_min_usage, p.children_low_usage) == (0, 0)  # no usage yet
    a.charge(70)
    b.charge(80)
    assert (p.children_min_usage, p.children_low_usage) == (70, 50)
    a.charge(60)  # 130 > min 100
    assert p.children_min_usage == 100
    a.uncharge(100)
    assert p.children_min_usage == 30
    a.set_min(10)
    b.set_low(200)
    assert (p.children_min_usage, p.children_low_usage) == (10, 80)
    assert sums_ok(p)


def test_p37_root_has_no_protected_usage_and_grandchildren_feed_only_their_parent() -> None:
    root = PageCounter()
    mid = PageCounter(root)
    leaf = PageCounter(mid)
    leaf.set_min(10)
    mid.set_min(4)
    leaf.charge(8)
    assert (mid.children_min_usage, root.children_min_usage) == (8, 4)
    assert root.min_usage == 0  # propagate_protected_usage does nothing for the root
    assert sums_ok(root)


def test_p37_detaching_a_child_takes_its_protected_usage_out_of_the_parents_sums() -> None:
    """P-37 for the children that remain when one is freed (its cgroup released): the
    parent's sums equal the remaining children's protected usage; the detached counter no
    longer contributes anything."""
    p = PageCounter()
    a, b = PageCounter(p), PageCounter(p)
    a.set_min(100)
    a.set_low(40)
    b.set_min(30)
    b.set_low(10)
    a.charge(50)
    b.charge(20)
    assert (p.children_min_usage, p.children_low_usage) == (70, 50)
    a.detach()
    assert p.children == [b]
    assert (p.children_min_usage, p.children_low_usage) == (20, 10)
    assert sums_ok(p)
    assert (a.min_usage, a.low_usage) == (0, 0)
    p.detach()  # a top-level counter has no parent to leave: nothing happens
    assert (p.children_min_usage, p.children_low_usage) == (20, 10)


# -- effective protection ----------------------------------------------------------------------


def test_p38_calculation_is_a_no_op_on_the_root_and_on_empty_counters() -> None:
    """P-38: the calculation root and counters with usage 0 keep their stored values."""
    root = PageCounter()
    child = PageCounter(root)
    root.set_min(10)
    root.emin, root.elow = 7, 7
    page_counter_calculate_protection(root, root, True)
    assert (root.emin, root.elow) == (7, 7)
    child.set_min(50)
    child.emin, child.elow = 3, 4  # stale values from an earlier calculation
    page_counter_calculate_protection(root, child, True)
    assert (child.emin, child.elow) == (3, 4)  # usage 0: untouched
    child.charge(1)
    page_counter_calculate_protection(root, child, True)
    assert (child.emin, child.elow) == (50, 0)


def test_p25_first_level_gets_its_configured_values_uncapped() -> None:
    """Rule 1 / P-25: directly below the calculation root e = setting, even above the usage
    and above the root's own setting."""
    root = PageCounter()
    root.set_min(5)
    c = PageCounter(root)
    c.set_min(1000)
    c.set_low(2000)
    c.charge(10)
    page_counter_calculate_protection(root, c, False)
    assert (c.emin, c.elow) == (1000, 2000)


def _family(
    parent_e: int, kids: list[tuple[int, int]], recursive: bool
) -> tuple[PageCounter, PageCounter, list[PageCounter]]:
    """root → p (emin fixed to ``parent_e``) → kids (usage, min)."""
    root = PageCounter()
    p = PageCounter(root)
    p.set_min(parent_e)
    out = []
    for usage, setting in kids:
        k = PageCounter(p)
        k.set_min(setting)
        k.charge(usage)
        out.append(k)
    calculate_subtree_protection(root, recursive)
    assert p.emin == parent_e
    return root, p, out


@pytest.mark.parametrize("recursive", [False, True])
def test_p42_overcommitted_parent_is_shared_in_proportion(recursive: bool) -> None:
    """P-42: Σ(p) > e(p) → e(c) = ⌊π(c)·e(p)/Σ(p)⌋; the values sum to at most e(p); both
    modes agree."""
    _, p, kids = _family(100, [(60, 80), (70, 50), (30, 0)], recursive)
    # π = 60, 50, 0; Σ = 110 > 100
    assert p.children_min_usage == 110
    assert [k.emin for k in kids] == [60 * 100 // 110, 50 * 100 // 110, 0]
    assert sum(k.emin for k in kids) <= p.emin


def test_p43_non_recursive_undercommit_gives_exactly_the_protected_usage() -> None:
    """P-43: not overcommitted, non-recursive → e(c) = π(c) = min(u(c), s(c))."""
    _, _, kids = _family(1000, [(60, 80), (70, 50), (30, 0)], False)
    assert [k.emin for k in kids] == [60, 50, 0]


def test_p44_recursive_undercommit_hands_out_the_unclaimed_remainder() -> None:
    """P-44: e(c) = π(c) + ⌊(e(p) − Σ(p))·(u(c) − π(c)) / (u(p) − Σ(p))⌋; a child with setting 0
    and positive usage receives protection."""
    _, p, kids = _family(200, [(60, 80), (70, 50), (30, 0)], True)
    sigma, up = 110, 160
    assert (p.children_min_usage, p.usage) == (sigma, up)
    expected = [
        pi + (200 - sigma) * (u - pi) // (up - sigma) for u, pi in [(60, 60), (70, 50), (30, 0)]
    ]
    assert [k.emin for k in kids] == expected == [60, 50 + 36, 0 + 54]
    assert kids[2].min == 0 and kids[2].emin > 0


def test_p44_no_remainder_when_the_parent_has_nothing_unclaimed() -> None:
    """P-44's conditions: e(p) > Σ(p), u(p) > Σ(p) and u(c) > π(c); otherwise π(c)."""
    assert effective_protection(50, 100, 50, 40, 40, True) == 50  # e(p) == Σ(p)
    assert effective_protection(30, 30, 40, 100, 30, True) == 30  # u(p) == Σ(p)
    assert effective_protection(30, 200, 40, 100, 30, True) == 30  # u(c) == π(c)


@pytest.mark.parametrize(
    ("usage", "parent_usage", "setting", "parent_e", "sigma"),
    [
        (50, 100, 40, 40, 40),  # e(p) == Σ(p); u(p) > Σ(p), u(c) > π(c)
        (30, 30, 20, 100, 30),  # u(p) == Σ(p); e(p) > Σ(p), u(c) > π(c)
        (30, 200, 40, 100, 30),  # u(c) == π(c); e(p) > Σ(p), u(p) > Σ(p)
    ],
)
def test_p44_each_condition_alone_withholds_the_remainder(
    usage: int, parent_usage: int, setting: int, parent_e: int, sigma: int
) -> None:
    """P-44: X(c) = 0 as soon as one of e(p) > Σ(p), u(p) > Σ(p), u(c) > π(c) fails, the
    other two holding; e(c) is then π(c)."""
    expected = min(usage, setting)
    assert effective_protection(usage, parent_usage, setting, parent_e, sigma, True) == expected


def test_p44_remainder_is_floored_exactly_at_byte_scale() -> None:
    """P-44: X(c) is the floor of the exact quotient, formed from integers even where the
    byte counts exceed a float's 53-bit mantissa."""
    _, p, kids = _family(200, [(60, 80), (70, 50), (31, 0)], True)
    sigma, up = 110, 161
    assert (p.children_min_usage, p.usage) == (sigma, up)
    assert [k.emin for k in kids] == [60, 50 + 90 * 20 // 51, 0 + 90 * 31 // 51] == [60, 85, 54]
    assert all(type(k.emin) is int for k in kids)
    gib = 1 << 30
    u_c, u_p, e_p, s_c = 7 * gib + 3, 96 * gib + 1, 48 * gib + 5, gib
    got = effective_protection(u_c, u_p, s_c, e_p, s_c, True)
    assert got == s_c + (e_p - s_c) * (u_c - s_c) // (u_p - s_c)
    assert type(got) is int


def test_p42_overcommit_share_is_exact_where_a_64_bit_product_wraps() -> None:
    """P-42 at dmem's byte scale (docs/findings.md H-2): e(p) = 48 GiB over two children
    protecting 32 GiB each gives each ⌊32 GiB · 48 GiB / 64 GiB⌋ = 24 GiB. The kernel forms
    that product in ``unsigned long`` (mm/page_counter.c ``effective_protection``), where
    2^35 · 3 · 2^34 wraps to 0, so its share is 0; the model keeps the exact value."""
    gib = 1 << 30
    root = PageCounter()
    p = PageCounter(root)
    kids = [PageCounter(p), PageCounter(p)]
    p.set_min(48 * gib)
    for k in kids:
        k.set_min(32 * gib)
        k.charge(32 * gib)
    calculate_subtree_protection(root, True)
    assert p.emin == 48 * gib and p.children_min_usage == 64 * gib
    assert [k.emin for k in kids] == [24 * gib, 24 * gib]
    kernel_product = (32 * gib * 48 * gib) % (1 << 64)
    assert kernel_product // (64 * gib) == 0


def test_p45_top_down_order_matters() -> None:
    """P-45: a child computed before its parent uses the parent's stale effective value; the
    pre-order subtree walk gives the right one."""
    root = PageCounter()
    p = PageCounter(root)
    c = PageCounter(p)
    p.set_min(100)
    c.set_min(100)
    c.charge(50)
    # child first: p.emin is still the initial 0 → overcommit share 50*0/50 = 0
    page_counter_calculate_protection(root, c, True)
    assert c.emin == 0
    calculate_subtree_protection(root, True)  # parent, then child
    assert (p.emin, c.emin) == (100, 50)


def test_p45_subtree_walk_is_pre_order_and_can_stop_at_a_counter() -> None:
    root = PageCounter(name="r")
    a = PageCounter(root, name="a")
    a1 = PageCounter(a, name="a1")
    b = PageCounter(root, name="b")
    assert [c.name for c in walk_pre_order(root)] == ["r", "a", "a1", "b"]
    for c in (a1, b):
        c.set_min(9)
        c.charge(5)
    a.set_min(100)
    calculate_subtree_protection(root, True, stop_at=a1)
    assert (a.emin, a1.emin, b.emin) == (100, 5, 0)  # b not reached


# -- hypothesis ------------------------------------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["charge", "try", "uncharge", "min", "low", "max"]),
        st.integers(0, 5),  # counter index
        st.integers(0, 300),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_p37_p39_invariants_under_random_operations(ops: list[tuple[str, int, int]]) -> None:
    """P-37 and P-39 under any sequence: sums match; a counter's usage is the sum of its own
    charges and its children's; try_charge never leaves anyone above max; everything returns
    to zero when all is uncharged."""
    root = PageCounter()
    a, b = PageCounter(root), PageCounter(root)
    nodes = [root, a, b, PageCounter(a), PageCounter(a), PageCounter(b)]
    own = [0] * len(nodes)
    for op, i, n in ops:
        c = nodes[i]
        if op == "charge":
            c.charge(n)
            own[i] += n
        elif op == "try":
            before = [x.usage for x in nodes]
            fail = c.try_charge(n)
            if fail is None:
                own[i] += n
                assert all(x.usage <= x.max for x in c.ancestors())
            else:
                assert [x.usage for x in nodes] == before
                assert fail.usage + n > fail.max
        elif op == "uncharge":
            n = min(n, own[i])
            c.uncharge(n)
            own[i] -= n
        elif op == "min":
            c.set_min(n)
        elif op == "low":
            c.set_low(n)
        else:
            try:
                c.set_max(n)
            except KernelError as e:
                assert e.errno is Errno.EBUSY and c.usage > n
        assert sums_ok(root)
        for idx, x in enumerate(nodes):
            kids = sum(k.usage for k in x.children)
            assert x.usage == own[idx] + kids
        calculate_subtree_protection(root, True)
        for x in walk_pre_order(root):
            if x.children and x is not root and x.children_min_usage > x.emin:
                assert sum(k.emin for k in x.children if k.usage) <= x.emin
    for i, c in enumerate(nodes):
        c.uncharge(own[i])
    assert all(x.usage == 0 for x in nodes) and not root.warnings
    assert root.children_min_usage == root.children_low_usage == 0
    assert sums_ok(root)
