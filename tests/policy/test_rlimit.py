"""RLIMIT_MEMLOCK accounting (``policy-semantics.md`` §1, P-1 .. P-15).

Policy-level tests call :mod:`pinlab.policy.rlimit` with a bare task; uapi-level tests go
through :class:`pinlab.uapi.Process` (``mlock``, ``ibv_reg_mr``, io_uring, exit).
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinlab.kernel.dma_buf import (
    DmaBufAttachOps,
    dma_buf_dynamic_attach,
    dma_buf_pin,
    dma_buf_unpin,
)
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import CAP_IPC_LOCK, Kernel, Rlimit, Task
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_MW_BIND,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_READ,
    ib_umem_dmabuf_get,
    ib_umem_dmabuf_get_pinned,
    ib_umem_dmabuf_release,
)
from pinlab.policy import iommufd, rlimit
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.dmem import DmemCgroupController
from pinlab.policy.iommufd import IoptPagesAccount
from pinlab.policy.rlimit import (
    VmLocked,
    __account_locked_vm,
    account_locked_vm,
    ib_umem_get,
    ib_umem_odp_get,
    ib_umem_release,
    npages,
)
from tests.policy.machine import ACCESS, GiB, MiB, counters, make_workstation

PAGE = 4096
L_BYTES = 64 * MiB
L = L_BYTES // PAGE


def task(
    *, memlock: int = L_BYTES, cap: bool = False, uid: int = 1000, kernel: Kernel | None = None
) -> Task:
    caps = frozenset({CAP_IPC_LOCK}) if cap else frozenset()
    user = kernel.get_user(uid) if kernel is not None else None
    return Task(1, "t", uid=uid, caps=caps, memlock=Rlimit(memlock, memlock), user=user)


def expect(errno: Errno, fn, *args, **kwargs) -> KernelError:
    with pytest.raises(KernelError) as info:
        fn(*args, **kwargs)
    assert info.value.errno is errno, str(info.value)
    return info.value


# -- ib_umem_get ----------------------------------------------------------------------------------


def test_p1_ib_umem_get_over_limit_is_enomem_and_changes_nothing() -> None:
    """P-1: pinned_vm + npages > L without cap → ENOMEM, pinned_vm unchanged."""
    t = task()
    ib_umem_get(t, 0, (L - 10) * PAGE, ACCESS)
    expect(Errno.ENOMEM, ib_umem_get, t, 1 << 30, 11 * PAGE, ACCESS)
    assert t.mm.pinned_vm == L - 10


def test_k43_pinned_host_umem_writable_is_ib_access_writable() -> None:
    """K-43's ``umem->writable`` for the pinned umem of host memory too: ``ib_umem_get``
    records ``ib_access_writable(access)`` as the dma-buf import does -- a window bind counts,
    a remote read alone does not."""
    t = task()
    bind = ib_umem_get(t, 0, PAGE, IB_ACCESS_REMOTE_READ | IB_ACCESS_MW_BIND)
    read = ib_umem_get(t, 1 << 30, PAGE, IB_ACCESS_REMOTE_READ)
    assert bind.writable and not read.writable
    assert ib_umem_get(t, 2 << 30, PAGE, ACCESS).writable
    assert t.mm.pinned_vm == 3


def test_p2_reaching_exactly_the_limit_succeeds() -> None:
    """P-2: pinned_vm + npages == L succeeds (strict comparison)."""
    t = task()
    ib_umem_get(t, 0, (L - 10) * PAGE, ACCESS)
    ib_umem_get(t, 1 << 30, 10 * PAGE, ACCESS)
    assert t.mm.pinned_vm == L
    expect(Errno.ENOMEM, ib_umem_get, t, 1 << 31, 1, ACCESS)


def test_p3_cap_ipc_lock_bypasses_the_check_but_still_counts() -> None:
    """P-3: with CAP_IPC_LOCK the registration succeeds and pinned_vm grows; dropping the
    capability later does not lower it (and the next registration is then refused)."""
    t = task(cap=True)
    ib_umem_get(t, 0, 2 * L * PAGE, ACCESS)
    assert t.mm.pinned_vm == 2 * L
    t.caps = frozenset()
    assert t.mm.pinned_vm == 2 * L
    expect(Errno.ENOMEM, ib_umem_get, t, 1 << 40, PAGE, ACCESS)
    assert t.mm.pinned_vm == 2 * L


def test_p4_zero_limit_without_cap_is_eperm_not_enomem() -> None:
    """P-4: RLIMIT_MEMLOCK = 0 and no cap → EPERM (can_do_mlock); with cap it works."""
    t = task(memlock=0)
    expect(Errno.EPERM, ib_umem_get, t, 0, PAGE, ACCESS)
    assert t.mm.pinned_vm == 0
    capped = task(memlock=0, cap=True)
    ib_umem_get(capped, 0, PAGE, ACCESS)
    assert capped.mm.pinned_vm == 1


def test_p4_limit_below_one_page_is_enomem() -> None:
    """A non-zero limit below one page passes can_do_mlock but L rounds down to 0: ENOMEM."""
    t = task(memlock=PAGE - 1)
    expect(Errno.ENOMEM, ib_umem_get, t, 0, 1, ACCESS)


def test_p5_pages_are_counted_from_the_page_boundary() -> None:
    """P-5: npages(0x1001, 4096) == 2; ib_umem_get and mlock charge that; 4 KiB pages even
    for a huge-page-backed 2 MiB range (512, not 1)."""
    assert npages(0x1001, 4096) == 2
    assert npages(0x1000, 4096) == 1
    assert npages(0x1FFF, 2) == 2
    assert npages(0x5000, 0) == 0
    t = task()
    umem = ib_umem_get(t, 0x1001, 4096, ACCESS)
    assert umem.npages == 2 and t.mm.pinned_vm == 2
    huge = ib_umem_get(t, 2 * MiB, 2 * MiB, ACCESS)  # a THP/hugetlb-backed 2 MiB range
    assert huge.npages == 512
    vm = VmLocked()
    rlimit.do_mlock(t, vm, 0x1001, 4096)
    assert t.mm.locked_vm == 2


def test_p6_release_returns_exactly_the_charge_to_the_registering_mm() -> None:
    """P-6: ib_umem_release subtracts exactly npages from the mm that registered, whoever
    releases it; a pin failure after the charge subtracts the full npages."""
    owner, other = task(), task()
    umem = ib_umem_get(owner, 0x1001, 3 * PAGE, ACCESS)
    assert umem.npages == 4
    other.mm.pinned_vm = 7  # unrelated mm, must not move
    ib_umem_release(umem)
    assert owner.mm.pinned_vm == 0 and other.mm.pinned_vm == 7
    ib_umem_release(None)  # NULL is a no-op
    kernel = Kernel()
    ib_umem_release(umem, kernel=kernel)  # a second release WARNs, changes nothing
    assert owner.mm.pinned_vm == 0
    assert kernel.warnings.count("ib_umem_release") == 1
    e = expect(Errno.EFAULT, ib_umem_get, owner, 0, 100 * PAGE, ACCESS, pin_fail_after=37)
    assert e.function == "pin_user_pages_fast"
    assert owner.mm.pinned_vm == 0


def test_p13_on_demand_is_eopnotsupp_and_zero_length_is_einval() -> None:
    """P-13: IB_ACCESS_ON_DEMAND → EOPNOTSUPP; a zero length → EINVAL; an overflowing range
    → EINVAL before the permission check."""
    t = task()
    expect(Errno.EOPNOTSUPP, ib_umem_get, t, 0, PAGE, ACCESS | IB_ACCESS_ON_DEMAND)
    expect(Errno.EINVAL, ib_umem_get, t, 0x1000, 0, ACCESS)
    expect(Errno.EINVAL, ib_umem_get, task(memlock=0), (1 << 64) - PAGE, 2 * PAGE, ACCESS)
    assert t.mm.pinned_vm == 0


# -- mlock and locked_vm --------------------------------------------------------------------------


def test_p7_locked_vm_and_pinned_vm_are_limited_independently() -> None:
    """P-7: in one process mlock of 0.6·L and an RDMA pin of 0.6·L both succeed; a second
    0.6·L of either is refused."""
    t = task()
    vm = VmLocked()
    six = int(0.6 * L)
    rlimit.do_mlock(t, vm, 0, six * PAGE)
    ib_umem_get(t, 1 << 32, six * PAGE, ACCESS)
    assert (t.mm.locked_vm, t.mm.pinned_vm) == (six, six)
    expect(Errno.ENOMEM, rlimit.do_mlock, t, vm, 1 << 33, six * PAGE)
    expect(Errno.ENOMEM, ib_umem_get, t, 1 << 34, six * PAGE, ACCESS)


def test_p7_mlock_uapi_limits_eperm_and_exit() -> None:
    """P-7 through pinlab.uapi: mlock counts from the offset's page boundary, re-locking is
    free, ENOMEM past the limit, EPERM at a zero limit without the capability, munlock and
    exit return everything."""
    ws = make_workstation()
    p = ws.system.spawn("app", memlock=L_BYTES)
    p.mlock(PAGE, offset=0x1001)
    assert p.mm.locked_vm == 2
    p.mlock(10 * PAGE)  # pages 0..9; pages 1 and 2 were partly locked already
    assert p.mm.locked_vm == 10
    p.mlock(10 * PAGE)  # all locked: costs nothing
    assert p.mm.locked_vm == 10
    p.mlock((L - 10) * PAGE, offset=10 * PAGE)  # exactly L
    assert p.mm.locked_vm == L
    with pytest.raises(KernelError) as info:
        p.mlock(1, offset=L * PAGE)
    assert info.value.errno is Errno.ENOMEM and p.mm.locked_vm == L
    assert p.stats.denials == {"-ENOMEM": 1}
    p.munlock(5 * PAGE, offset=0x800)  # pages 0..5 (0x800 + 5 pages touches 6)
    assert p.mm.locked_vm == L - 6
    zero = ws.system.spawn("nolimit", memlock=0)
    with pytest.raises(KernelError) as info:
        zero.mlock(PAGE)
    assert info.value.errno is Errno.EPERM
    capped = ws.system.spawn("cap", memlock=0, cap_ipc_lock=True)
    capped.mlock(3 * L * PAGE)
    assert capped.mm.locked_vm == 3 * L
    p.exit()
    capped.exit()
    assert p.mm.locked_vm == 0 and capped.mm.locked_vm == 0


def test_p7_mlock_over_the_limit_discounts_already_locked_pages() -> None:
    """count_mm_mlocked_page_nr: an mlock that overlaps locked pages is checked with only its
    new pages; one with too many new pages is refused."""
    t = task()
    vm = VmLocked()
    rlimit.do_mlock(t, vm, 0, L * PAGE)
    rlimit.do_mlock(t, vm, 0, L * PAGE)  # len + locked_vm = 2L > L, but nothing is new
    expect(Errno.ENOMEM, rlimit.do_mlock, t, vm, (L // 2) * PAGE, L * PAGE)
    assert t.mm.locked_vm == L
    t.rlimits[rlimit.RLIMIT_MEMLOCK] = Rlimit(L_BYTES // 2, L_BYTES)
    expect(Errno.ENOMEM, rlimit.do_mlock, t, vm, 0, 0)  # locked_vm alone is over the new L


def test_p10_account_locked_vm() -> None:
    """P-10: zero pages or no mm → 0 and nothing; an increment over L → ENOMEM, unchanged;
    with cap it succeeds and is added; a decrement always succeeds; an underflow WARNs."""
    kernel = Kernel()
    t = task()
    assert account_locked_vm(t.mm, 0, True, t) == 0
    assert account_locked_vm(None, 5, True, t) == 0
    assert t.mm.locked_vm == 0
    assert account_locked_vm(t.mm, L, True, t) == 0
    e = expect(Errno.ENOMEM, account_locked_vm, t.mm, 1, True, t)
    assert e.function == "__account_locked_vm" and t.mm.locked_vm == L
    capped = task(cap=True)
    capped.mm.locked_vm = L
    assert account_locked_vm(capped.mm, 5, True, capped) == 0
    assert capped.mm.locked_vm == L + 5
    assert account_locked_vm(t.mm, L - 1, False, t, kernel=kernel) == 0
    assert t.mm.locked_vm == 1
    assert account_locked_vm(t.mm, 3, False, t, kernel=kernel) == 0
    assert t.mm.locked_vm == 0
    assert kernel.warnings.count("__account_locked_vm") == 1
    # __account_locked_vm: the caller decides the bypass
    assert __account_locked_vm(t.mm, 2 * L, True, t, True) == 0
    assert t.mm.locked_vm == 2 * L
    expect(Errno.ENOMEM, __account_locked_vm, t.mm, 1, True, capped, False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        __account_locked_vm(t.mm, 3 * L, False, t, False)  # no kernel: a Python warning
    assert t.mm.locked_vm == 0 and caught


# -- per-mm versus per-user: io_uring -------------------------------------------------------------


def test_p8_per_mm_pins_versus_per_user_io_uring() -> None:
    """P-8: two processes of one uid can each ib_umem_get L pages (2L in all); through
    io_uring their combined user->locked_vm cannot exceed L -- the registration that would
    exceed it fails with ENOMEM."""
    ws = make_workstation()
    a = ws.system.spawn("a", uid=1000, memlock=L_BYTES)
    b = ws.system.spawn("b", uid=1000, memlock=L_BYTES)
    a.ibv_reg_mr(L * PAGE, ACCESS)
    b.ibv_reg_mr(L * PAGE, ACCESS)
    assert a.mm.pinned_vm + b.mm.pinned_vm == 2 * L
    assert a.user is b.user
    a.io_uring_register_buffers(16 * MiB, count=2)  # 32 MiB = L/2
    with pytest.raises(KernelError) as info:
        b.io_uring_register_buffers(16 * MiB, count=3)  # L/2 + 3L/4 > L
    assert info.value.errno is Errno.ENOMEM
    assert a.user.locked_vm == L // 2
    b.io_uring_register_buffers(16 * MiB, count=2)  # exactly L in all
    assert a.user.locked_vm == L
    other = ws.system.spawn("c", uid=1001, memlock=L_BYTES)  # another uid: its own budget
    other.io_uring_register_buffers(32 * MiB, count=2)
    assert other.user.locked_vm == L
    for p in (a, b, other):
        p.exit()
        assert p.mm.pinned_vm == 0
    assert a.user.locked_vm == 0 and other.user.locked_vm == 0


def test_p9_io_uring_with_cap_charges_no_user_locked_vm() -> None:
    """P-9: a ring created with CAP_IPC_LOCK leaves user->locked_vm alone; mm->pinned_vm
    grows by the pages, never limited."""
    ws = make_workstation()
    p = ws.system.spawn("cap", memlock=L_BYTES, cap_ipc_lock=True)
    p.io_uring_register_buffers(GiB, count=2)
    assert p.user.locked_vm == 0
    assert p.mm.pinned_vm == 2 * GiB // PAGE
    with pytest.raises(KernelError) as info:
        p.io_uring_register_buffers(PAGE)
    assert info.value.errno is Errno.EBUSY
    p.io_uring_unregister_buffers()
    assert p.mm.pinned_vm == 0
    with pytest.raises(KernelError) as info:
        p.io_uring_unregister_buffers()
    assert info.value.errno is Errno.ENXIO


def test_io_uring_buffer_size_and_rollback() -> None:
    """io_validate_user_buf_range: 0 bytes or more than 1 GiB → EFAULT; a failing buffer
    unregisters the ones this call already charged."""
    t = task(kernel=(k := Kernel()))
    ctx = rlimit.io_uring_setup(t)
    expect(Errno.EFAULT, rlimit.io_sqe_buffers_register, ctx, t, [(0, 0)])
    expect(Errno.EFAULT, rlimit.io_sqe_buffers_register, ctx, t, [(0, GiB + 1)])
    expect(Errno.ENOMEM, rlimit.io_sqe_buffers_register, ctx, t, [(0, L_BYTES), (1 << 40, PAGE)])
    assert (t.user.locked_vm, t.mm.pinned_vm) == (0, 0)
    assert not ctx.registered and k.warnings.count("__io_unaccount_mem") == 0


def test_p14_io_uring_charges_a_huge_page_once_at_full_size() -> None:
    """P-14: buffers backed by 2 MiB huge pages are charged per compound page, once, at its
    full size -- two buffers inside one huge page cost 512 pages, not 2 or 1024."""
    t = task()
    ctx = rlimit.io_uring_setup(t)
    hp = 2 * MiB
    bufs = rlimit.io_sqe_buffers_register(
        ctx, t, [(hp + 0x1000, PAGE), (hp + 0x5000, 2 * PAGE)], hpage_size=hp
    )
    assert [b.acct_pages for b in bufs] == [512, 0]
    assert t.user.locked_vm == 512 and t.mm.pinned_vm == 512
    rlimit.io_sqe_buffers_unregister(ctx)
    spans = rlimit.io_sqe_buffers_register(ctx, t, [(hp - PAGE, 2 * PAGE)], hpage_size=hp)
    assert spans[0].acct_pages == 1024  # touches two huge pages
    rlimit.io_ring_ctx_free(ctx)
    assert (t.user.locked_vm, t.mm.pinned_vm) == (0, 0)
    normal = rlimit.io_uring_setup(t)
    rlimit.io_sqe_buffers_register(normal, t, [(hp - PAGE, 2 * PAGE)])
    assert t.user.locked_vm == 2


# -- iommufd --------------------------------------------------------------------------------------


def test_p15_iommufd_user_mm_and_none_modes() -> None:
    """P-15: USER charges user->locked_vm against the source task's limit (ENOMEM over);
    MM charges mm->locked_vm through __account_locked_vm with no capability bypass; NONE
    (a CAP_IPC_LOCK caller) charges no limit counter. pinned_vm grows in every mode, as
    do_update_pinned does."""
    kernel = Kernel()
    t = task(kernel=kernel)
    user_mode = iommufd.iopt_alloc_pages(t, 0x1001, L * PAGE - 1)
    assert user_mode.account_mode is IoptPagesAccount.USER and user_mode.npages == L
    iommufd.iopt_pages_pin(user_mode)
    assert (t.user.locked_vm, t.mm.locked_vm, t.mm.pinned_vm) == (L, 0, L)
    sibling = task(kernel=kernel)  # same uid: shares user->locked_vm
    expect(Errno.ENOMEM, iommufd.iopt_pages_pin, iommufd.iopt_alloc_pages(sibling, 0, PAGE))
    iommufd.iopt_pages_unpin(user_mode)
    assert (t.user.locked_vm, t.mm.pinned_vm) == (0, 0)

    mm_mode = iommufd.iopt_alloc_pages(t, 0, (L + 1) * PAGE, IoptPagesAccount.MM)
    assert mm_mode.account_mode is IoptPagesAccount.MM
    t.caps = frozenset({CAP_IPC_LOCK})  # gained after allocation: MM mode has no bypass
    e = expect(Errno.ENOMEM, iommufd.iopt_pages_pin, mm_mode)
    assert e.function == "__account_locked_vm"
    assert (t.mm.locked_vm, t.mm.pinned_vm, t.user.locked_vm) == (0, 0, 0)
    t.caps = frozenset()
    fits = iommufd.iopt_alloc_pages(t, 0, L * PAGE, IoptPagesAccount.MM)
    iommufd.iopt_pages_pin(fits)
    assert (t.mm.locked_vm, t.user.locked_vm) == (L, 0)
    iommufd.iopt_pages_unpin(fits)

    capped = task(cap=True, kernel=kernel)
    none_mode = iommufd.iopt_alloc_pages(capped, 0, 10 * L * PAGE, IoptPagesAccount.MM)
    assert none_mode.account_mode is IoptPagesAccount.NONE
    iommufd.iopt_pages_pin(none_mode)
    assert (capped.mm.locked_vm, capped.user.locked_vm) == (0, 0)
    assert capped.mm.pinned_vm == 10 * L
    iommufd.iopt_pages_unpin(none_mode)
    assert capped.mm.pinned_vm == 0
    expect(Errno.EINVAL, iommufd.iopt_alloc_pages, t, 0, 0)
    assert not kernel.warnings.count("decr_user_locked_vm")


# -- what is not charged --------------------------------------------------------------------------


def test_p11_odp_registration_charges_nothing() -> None:
    """P-11: an ODP MR changes no counter, whatever its size -- even past the limit, even
    with a zero limit (ib_umem_odp_get has no can_do_mlock check)."""
    t = task(memlock=0)
    umem = ib_umem_odp_get(t, 0, 64 * GiB, ACCESS | IB_ACCESS_ON_DEMAND)
    assert (t.mm.locked_vm, t.mm.pinned_vm, t.user.locked_vm) == (0, 0, 0)
    rlimit.ib_umem_odp_release(umem)
    expect(Errno.EINVAL, ib_umem_odp_get, t, 0, PAGE, ACCESS)
    ws = make_workstation()
    p = ws.system.spawn("odp", memlock=L_BYTES)
    mr = p.ibv_reg_mr(16 * GiB, ACCESS | IB_ACCESS_ON_DEMAND, nic="mlx5_0")
    assert mr.odp and mr.pages == 0 and counters(p) == (0, 0, 0)
    with pytest.raises(KernelError) as info:  # the pinned path refuses ON_DEMAND
        p.ibv_reg_mr(PAGE, ACCESS | IB_ACCESS_ON_DEMAND)
    assert info.value.errno is Errno.EOPNOTSUPP
    p.ibv_dereg_mr(mr)
    assert not p.host_mrs


def test_p1_p4_p6_p13_ibv_reg_mr_through_uapi() -> None:
    """ibv_reg_mr takes the ib_umem_get path: ENOMEM over (P-1), EPERM at 0 (P-4), EINVAL
    for 0 bytes (P-13); dereg and exit return exactly the charge (P-6)."""
    ws = make_workstation()
    p = ws.system.spawn("rdma", memlock=L_BYTES)
    mr = p.ibv_reg_mr(PAGE, ACCESS, offset=0x1001)
    assert mr.pages == 2 and p.mm.pinned_vm == 2
    with pytest.raises(KernelError) as info:
        p.ibv_reg_mr(L * PAGE, ACCESS)
    assert info.value.errno is Errno.ENOMEM and p.mm.pinned_vm == 2
    with pytest.raises(KernelError) as info:
        p.ibv_reg_mr(0, ACCESS)
    assert info.value.errno is Errno.EINVAL
    p.ibv_dereg_mr(mr)
    assert p.mm.pinned_vm == 0
    with pytest.raises(KernelError) as info:
        p.ibv_dereg_mr(mr)
    assert info.value.errno is Errno.EINVAL
    p.ibv_reg_mr((L - 1) * PAGE, ACCESS)
    zero = ws.system.spawn("zero", memlock=0)
    with pytest.raises(KernelError) as info:
        zero.ibv_reg_mr(PAGE, ACCESS)
    assert info.value.errno is Errno.EPERM
    p.exit()
    assert p.mm.pinned_vm == 0
    assert zero.stats.denials == {"-EPERM": 1}


def test_p12_dma_buf_pins_charge_no_rlimit_and_no_dmem_counter() -> None:
    """P-12: dma_buf_pin, ib_umem_dmabuf_get and ib_umem_dmabuf_get_pinned of any size change
    no RLIMIT counter and no dmem counter (dmem charged the allocation, not the pin) -- even
    for a process whose RLIMIT_MEMLOCK is 0."""
    ws = make_workstation("6.16", move_notify=True)
    tree = CgroupTree()
    dmem = DmemCgroupController(tree).install(ws.kernel)
    dmem.register_device(ws.gpu.bdev)
    tree.mkdir("/job")
    p = ws.system.spawn("pinner", memlock=0)
    tree.attach(p, "/job")
    region = ws.gpu.vram_region
    assert region is not None
    handle = p.gem_create("gpu0", 3 * GiB, "vram")
    fd = p.prime_handle_to_fd(handle)
    allocated = tree.read("/job", "dmem.current")
    assert allocated == f"{region.name} {3 * GiB}\n"

    mr = p.ibv_reg_dmabuf_mr("efa0", fd, 0, 3 * GiB, ACCESS)  # ib_umem_dmabuf_get_pinned
    assert p.buffer(handle).location == "vram" and p.buffer(handle).pinned
    assert counters(p) == (0, 0, 0)
    assert tree.read("/job", "dmem.current") == allocated

    kernel = ws.kernel
    kernel.current = p
    dmabuf = p.dmabuf(fd)
    umem = ib_umem_dmabuf_get(
        kernel,
        ws.efa.dev,
        0,
        3 * GiB,
        fd,
        IB_ACCESS_LOCAL_WRITE,
        DmaBufAttachOps(allow_peer2peer=True, move_notify=lambda a: None),
        files=p.files,
    )
    pinned = ib_umem_dmabuf_get_pinned(
        kernel, ws.efa.dev, 0, GiB, fd, IB_ACCESS_LOCAL_WRITE, files=p.files
    )
    attach = dma_buf_dynamic_attach(
        dmabuf, ws.efa.dev, DmaBufAttachOps(allow_peer2peer=True, move_notify=lambda a: None)
    )
    with dmabuf.resv:
        dma_buf_pin(attach)
        assert counters(p) == (0, 0, 0)
        assert tree.read("/job", "dmem.current") == allocated
        dma_buf_unpin(attach)
    ib_umem_dmabuf_release(umem)
    ib_umem_dmabuf_release(pinned)
    kernel.current = None
    assert counters(p) == (0, 0, 0)
    assert tree.read("/job", "dmem.current") == allocated
    p.ibv_dereg_mr(mr)
    p.exit()
    assert tree.read("/job", "dmem.current") == f"{region.name} 0\n"


# -- any interleaving returns every counter to zero -----------------------------------------------

_op = st.one_of(
    st.tuples(st.just("mlock"), st.integers(0, 1), st.integers(0, 64), st.integers(0, 40)),
    st.tuples(st.just("munlock"), st.integers(0, 1), st.integers(0, 64), st.integers(0, 40)),
    st.tuples(st.just("reg"), st.integers(0, 1), st.integers(0, 64), st.integers(0, 40)),
    st.tuples(st.just("dereg"), st.integers(0, 1), st.integers(0, 8), st.just(0)),
    st.tuples(st.just("uring"), st.integers(0, 1), st.integers(0, 64), st.integers(1, 40)),
    st.tuples(st.just("unuring"), st.integers(0, 1), st.just(0), st.just(0)),
    st.tuples(st.just("setlimit"), st.integers(0, 1), st.integers(0, 64), st.just(0)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(_op, max_size=40),
    caps=st.tuples(st.booleans(), st.booleans()),
    exit_order=st.permutations([0, 1]),
)
def test_any_interleaving_returns_every_counter_to_zero(
    ops: list[tuple[str, int, int, int]], caps: tuple[bool, bool], exit_order: list[int]
) -> None:
    """Hypothesis (P-1..P-10, P-14): any interleaving of mlock / munlock / ib_umem_get /
    release / io_uring registration by two processes of one uid keeps the counters exact --
    locked_vm equals the locked pages, pinned_vm the live registrations, user->locked_vm the
    uid's rings -- never lets a process without CAP_IPC_LOCK grow a counter past L, and exit
    returns every counter to zero."""
    ws = make_workstation()
    limit = 48 * PAGE
    procs = [
        ws.system.spawn(f"p{i}", uid=1000, memlock=limit, cap_ipc_lock=caps[i]) for i in range(2)
    ]
    mrs: list[list[object]] = [[], []]
    for op, who, a, b in ops:
        p = procs[who]
        before = counters(p)
        try:
            if op == "mlock":
                p.mlock(b * PAGE, offset=a * PAGE + 0x10)
            elif op == "munlock":
                p.munlock(b * PAGE, offset=a * PAGE)
            elif op == "reg":
                mrs[who].append(p.ibv_reg_mr(b * PAGE + 1, ACCESS, offset=a * PAGE))
            elif op == "dereg":
                if mrs[who]:
                    p.ibv_dereg_mr(mrs[who].pop(a % len(mrs[who])))  # type: ignore[arg-type]
            elif op == "uring":
                p.io_uring_register_buffers(b * PAGE, offset=a * PAGE)
            elif op == "unuring":
                p.io_uring_unregister_buffers()
            else:
                p.setrlimit(rlimit.RLIMIT_MEMLOCK, a * PAGE, limit)
        except KernelError:
            assert counters(p) == before, (op, a, b)
        assert p.mm.locked_vm == p.vm_locked.pages
        assert p.mm.pinned_vm == sum(m.pages for m in mrs[who]) + sum(  # type: ignore[attr-defined]
            u.acct_pages for u in (p.io_ring.buffers if p.io_ring else [])
        )
        lim = p.rlimit(rlimit.RLIMIT_MEMLOCK) // PAGE
        if not caps[who] and op == "mlock" and p.mm.locked_vm > before[0]:
            assert p.mm.locked_vm <= lim
        if not caps[who] and op == "reg" and p.mm.pinned_vm > before[1]:
            assert p.mm.pinned_vm <= lim
    uring_pages = sum(
        u.acct_pages
        for q in procs
        if q.io_ring is not None and q.io_ring.user is not None
        for u in q.io_ring.buffers
    )
    assert procs[0].user.locked_vm == uring_pages
    for i in exit_order:
        procs[i].exit()
    for p in procs:
        assert counters(p) == (0, 0, 0)
    assert not ws.kernel.warnings.count("__io_unaccount_mem")
