"""The opt-in pin proposals: each denies what it should and nothing else.

* ``memlock-dmabuf-pins`` (Jason Gunthorpe, 2021): dma-buf pins charged to ``pinned_vm``
  against RLIMIT_MEMLOCK like ``ib_umem_get``;
* ``device-pin-cap`` (ROCm/amdgpu PR #212): a per-device cap on pinned VRAM, ``-ENOSPC``;
* ``revocable-pins`` (2026 revoke series, preset 7.1): under VRAM pressure a revocable pinned
  import is revoked and the BO evicted.
"""

from __future__ import annotations

import pytest

from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.umem import IB_ACCESS_ON_DEMAND
from pinlab.policy.proposals import (
    PROPOSALS,
    device_pin_cap,
    memlock_dmabuf_pins,
    revocable_pins,
    summary,
)
from pinlab.uapi import Process
from tests.policy.machine import ACCESS, PAGE, GiB, MiB, Workstation, counters, make_workstation

CHUNK = 256 * MiB
CHUNK_PAGES = CHUNK // PAGE


def pin_chunks(ws: Workstation, proc: Process, n: int) -> tuple[list[object], list[Errno]]:
    """Try to pin ``n`` VRAM buffers of 256 MiB through EFA; returns (MRs, errnos)."""
    mrs: list[object] = []
    errors: list[Errno] = []
    for i in range(n):
        handle = proc.gem_create("gpu0", CHUNK, "vram", name=f"chunk{i}")
        fd = proc.prime_handle_to_fd(handle)
        try:
            mrs.append(proc.ibv_reg_dmabuf_mr("efa0", fd, 0, CHUNK, ACCESS))
        except KernelError as e:
            errors.append(e.errno)
            proc.close(fd)
            proc.gem_close(handle)
    return mrs, errors


def test_registry_names_every_proposal() -> None:
    assert {"memlock-dmabuf-pins", "device-pin-cap", "revocable-pins"} <= set(PROPOSALS)
    assert "dmem-pin-max" in PROPOSALS
    for name, module in PROPOSALS.items():
        assert callable(module.install), name
        assert "proposed" in (module.__doc__ or "").lower() or "propos" in (module.__doc__ or "")
        assert summary(name)
    assert memlock_dmabuf_pins.MemlockDmabufPins().name == "memlock-dmabuf-pins"
    assert device_pin_cap.DevicePinCap().name == "device-pin-cap"
    assert revocable_pins.RevocablePins().name == "revocable-pins"


# -- memlock-dmabuf-pins --------------------------------------------------------------------------


@pytest.mark.parametrize("enabled", [True, False], ids=["memlock-dmabuf-pins", "upstream"])
def test_memlock_dmabuf_pins_denies_vram_pins_after_the_limit(enabled: bool) -> None:
    """With memlock-dmabuf-pins on and RLIMIT_MEMLOCK of 1 GiB, a process that tries to pin
    2 GiB of VRAM through dma-buf (EFA registrations of 256 MiB chunks, amdgpu under
    6.16 + MOVE_NOTIFY so the pins land in VRAM) is denied after 1 GiB; with it off
    (upstream), it is not (P-12)."""
    ws = make_workstation("6.16", move_notify=True)
    policy = memlock_dmabuf_pins.install(ws.kernel) if enabled else None
    p = ws.system.spawn("trainer", memlock=GiB)
    mrs, errors = pin_chunks(ws, p, 8)
    pinned_vram = sum(m.dmabuf.size for m in mrs if m.umem.sgt.memory == "vram")  # type: ignore[attr-defined]
    if enabled:
        assert policy is not None
        assert len(mrs) == 4 and errors == [Errno.ENOMEM] * 4
        assert pinned_vram == GiB
        assert p.mm.pinned_vm == GiB // PAGE  # exactly L: the comparison is strict
        assert policy.denials == {"-ENOMEM": 4} and policy.charged_pages == GiB // PAGE
        assert p.stats.denials.get("-ENOMEM") == 4
        assert ws.gpu.bdev.managers[next(iter(ws.gpu.bdev.managers))].pinned_bytes == GiB
    else:
        assert len(mrs) == 8 and not errors
        assert pinned_vram == 2 * GiB
        assert counters(p) == (0, 0, 0)
    p.exit()
    assert counters(p) == (0, 0, 0)
    if policy is not None:
        assert policy.charged_pages == 0
    assert not ws.kernel.leaks


def test_memlock_dmabuf_pins_rules_are_ib_umem_get_rules() -> None:
    """EPERM at a zero limit without CAP_IPC_LOCK, CAP_IPC_LOCK bypasses but still counts,
    and dma-buf pins share the pinned_vm budget with host-memory ibv_reg_mr."""
    ws = make_workstation("6.16", move_notify=True)
    policy = memlock_dmabuf_pins.install(ws.kernel)
    zero = ws.system.spawn("zero", memlock=0)
    assert pin_chunks(ws, zero, 1)[1] == [Errno.EPERM]
    assert zero.mm.pinned_vm == 0
    admin = ws.system.spawn("admin", memlock=0, cap_ipc_lock=True)
    mrs, errors = pin_chunks(ws, admin, 4)
    assert not errors and admin.mm.pinned_vm == 4 * CHUNK_PAGES
    shared = ws.system.spawn("shared", memlock=GiB)
    shared.ibv_reg_mr(3 * CHUNK, ACCESS)  # host memory: 768 MiB of the same budget
    mrs, errors = pin_chunks(ws, shared, 2)
    assert len(mrs) == 1 and errors == [Errno.ENOMEM]
    assert shared.mm.pinned_vm == GiB // PAGE
    assert policy.denials == {"-EPERM": 1, "-ENOMEM": 1}
    for p in (zero, admin, shared):
        p.exit()
        assert counters(p) == (0, 0, 0)


def test_memlock_dmabuf_pins_charges_the_whole_buffer_per_pin() -> None:
    """The exporter pins the whole buffer: a 2 GiB buffer registered in 256 MiB chunks is
    charged 2 GiB at the first chunk -- over a 1 GiB limit at once. A second pin of one
    buffer is charged again, as ib_umem_get charges a second registration."""
    ws = make_workstation("6.16", move_notify=True)
    memlock_dmabuf_pins.install(ws.kernel)
    p = ws.system.spawn("big", memlock=GiB)
    fd = p.prime_handle_to_fd(p.gem_create("gpu0", 2 * GiB, "vram"))
    with pytest.raises(KernelError) as info:
        p.ibv_reg_dmabuf_mr("efa0", fd, 0, CHUNK, ACCESS)
    assert info.value.errno is Errno.ENOMEM and p.mm.pinned_vm == 0
    assert not p.dmabuf(fd).attachments  # the failed registration left nothing behind
    q = ws.system.spawn("twice", memlock=GiB)
    fd2 = q.prime_handle_to_fd(q.gem_create("gpu0", CHUNK, "vram"))
    first = q.ibv_reg_dmabuf_mr("efa0", fd2, 0, CHUNK, ACCESS)
    q.ibv_reg_dmabuf_mr("efa0", fd2, 0, CHUNK, ACCESS)
    assert q.mm.pinned_vm == 2 * CHUNK_PAGES
    q.ibv_dereg_mr(first)
    assert q.mm.pinned_vm == CHUNK_PAGES
    q.exit()
    assert q.mm.pinned_vm == 0


def test_memlock_dmabuf_pins_leaves_everything_else_alone() -> None:
    """Nothing but dma_buf_pin is charged: mlock and io_uring keep their own counters, an ODP
    dma-buf MR (dynamic import, no pin) of 2 GiB passes a 1 GiB limit, and pins in kernel
    context are not charged to anyone. Uninstalling stops new charges; old pins still
    uncharge exactly."""
    ws = make_workstation("6.16", move_notify=True)
    policy = memlock_dmabuf_pins.install(ws.kernel)
    with pytest.raises(ValueError, match="already installed"):
        policy.install(ws.kernel)
    p = ws.system.spawn("mixed", memlock=GiB)
    p.mlock(GiB)
    p.io_uring_register_buffers(GiB)
    fd = p.prime_handle_to_fd(p.gem_create("gpu0", 2 * GiB, "vram"))
    odp = p.ibv_reg_dmabuf_mr("mlx5_0", fd, 0, 2 * GiB, ACCESS | IB_ACCESS_ON_DEMAND)
    assert odp.odp and p.mm.pinned_vm == GiB // PAGE  # io_uring's pages only
    assert p.mm.locked_vm == GiB // PAGE and not policy.denials
    mrs, _ = pin_chunks(ws, p, 1)  # pinned_vm already at L from io_uring: refused
    assert not mrs and policy.denials == {"-ENOMEM": 1}
    p.io_uring_unregister_buffers()
    pin_chunks(ws, p, 1)  # room again: one 256 MiB chunk, charged
    policy.uninstall()
    assert not policy.installed and policy not in ws.kernel.pin_hooks
    free, errors = pin_chunks(ws, p, 5)  # upstream again: not charged
    assert len(free) == 5 and not errors and p.mm.pinned_vm == CHUNK_PAGES
    p.exit()
    assert counters(p) == (0, 0, 0) and policy.charged_pages == 0


# -- device-pin-cap -------------------------------------------------------------------------------


def test_device_pin_cap_refuses_vram_pins_over_the_cap_with_enospc() -> None:
    """A 1 GiB cap on gpu0: four 256 MiB VRAM pins fit (usage == cap is allowed), the fifth
    gets ENOSPC and leaves nothing pinned; unpinning makes room again."""
    ws = make_workstation("6.16", move_notify=True)
    cap = device_pin_cap.install(ws.kernel, GiB)
    p = ws.system.spawn("hog", memlock=64 * GiB)
    mrs, errors = pin_chunks(ws, p, 6)
    assert len(mrs) == 4 and errors == [Errno.ENOSPC, Errno.ENOSPC]
    assert cap.pinned == {"gpu0": GiB} and cap.denials == {"-ENOSPC": 2}
    vram = ws.gpu.bdev.managers[next(iter(ws.gpu.bdev.managers))]
    assert vram.pinned_bytes == GiB
    p.ibv_dereg_mr(mrs[0])  # type: ignore[arg-type]
    assert cap.pinned == {"gpu0": 3 * CHUNK}
    more, errors = pin_chunks(ws, p, 1)
    assert len(more) == 1 and not errors
    assert counters(p) == (0, 0, 0)  # the cap charges no rlimit counter
    p.exit()
    assert cap.pinned == {"gpu0": 0}


def test_device_pin_cap_counts_device_memory_once_per_buffer_and_per_device() -> None:
    """Two pins of one buffer count once; per-device overrides win; pins that landed in GTT
    (6.16 without MOVE_NOTIFY: amdgpu migrates on pin) are not device memory and pass."""
    ws = make_workstation("6.16", move_notify=True)
    cap = device_pin_cap.install(ws.kernel, None, {"gpu0": 512 * MiB})
    assert cap.cap_for("gpu0") == 512 * MiB and cap.cap_for("gpu1") is None
    p = ws.system.spawn("p", memlock=64 * GiB)
    fd = p.prime_handle_to_fd(p.gem_create("gpu0", 512 * MiB, "vram"))
    a = p.ibv_reg_dmabuf_mr("efa0", fd, 0, 512 * MiB, ACCESS)
    b = p.ibv_reg_dmabuf_mr("efa0", fd, 0, 256 * MiB, ACCESS)
    assert cap.pinned == {"gpu0": 512 * MiB} and not cap.denials
    p.ibv_dereg_mr(a)
    assert cap.pinned == {"gpu0": 512 * MiB}
    p.ibv_dereg_mr(b)
    assert cap.pinned == {"gpu0": 0}
    p.exit()

    gtt = make_workstation("6.16", move_notify=False)
    cap2 = device_pin_cap.install(gtt.kernel, 0)  # no device-memory pins at all
    q = gtt.system.spawn("q", memlock=64 * GiB)
    mrs, errors = pin_chunks(gtt, q, 4)
    assert len(mrs) == 4 and not errors
    assert all(m.umem.sgt.memory == "gtt" for m in mrs)  # type: ignore[attr-defined]
    assert not cap2.pinned and not cap2.denials
    with pytest.raises(ValueError):
        device_pin_cap.DevicePinCap(-1)
    q.exit()


# -- revocable-pins -------------------------------------------------------------------------------


def _pressure(ws: Workstation) -> tuple[Process, object, int, Process]:
    """A trainer pins a 3 GiB VRAM buffer through EFA on a 4 GiB GPU; a second process then
    allocates 2 GiB of VRAM only."""
    trainer = ws.system.spawn("trainer", memlock=64 * GiB)
    fd, mr = ws.pin_vram(trainer, 3 * GiB, name="weights")
    assert mr.umem.sgt.memory == "vram"  # type: ignore[attr-defined]
    desktop = ws.system.spawn("desktop")
    return trainer, mr, fd, desktop


def test_revocable_pins_revokes_a_pinned_efa_mr_under_vram_pressure() -> None:
    """7.1: with revocable-pins on, a pinned revocable EFA MR is revoked when another process
    needs the VRAM: the MR reports revoked, NIC DMA through it fails, the BO is evicted and
    the allocation succeeds. With memlock-dmabuf-pins also on, the revoked pin is uncharged
    from the trainer's mm although the desktop's allocation triggered it."""
    ws = make_workstation("7.1", vram=4 * GiB, revocable_efa=True)
    memlock = memlock_dmabuf_pins.install(ws.kernel)
    policy = revocable_pins.install(ws.kernel, [ws.gpu.bdev])
    trainer, mr, fd, desktop = _pressure(ws)
    assert trainer.mm.pinned_vm == 3 * GiB // PAGE
    handle = desktop.gem_create("gpu0", 2 * GiB, "vram")
    assert desktop.buffer(handle).location == "vram"
    assert mr.revoked and not mr.mtt_valid  # type: ignore[attr-defined]
    assert mr.umem.revoked and mr.umem.sgt is None  # type: ignore[attr-defined]
    weights = ws.gpu.buffer_of(trainer.dmabuf(fd))
    assert weights.location == "gtt" and not weights.pinned
    assert policy.revocations == 1 and policy.revoked_bytes == 3 * GiB
    assert policy.revoked_attachments == 1 and not policy.denials
    assert trainer.mm.pinned_vm == 0 and memlock.charged_pages == 0
    with pytest.raises(KernelError) as info:
        trainer.nic_dma(mr)  # type: ignore[arg-type]
    assert info.value.errno is Errno.EFAULT
    trainer.exit()
    desktop.exit()
    assert not ws.kernel.leaks and counters(trainer) == (0, 0, 0)


def test_re_registering_a_revoked_buffer_races_with_the_pins_own_migration() -> None:
    """Found while writing revocable-pins (kernel model, not the policy): re-registering the
    revoked buffer pins it again; amdgpu pins a VRAM-preferring BO in VRAM, so the pin moves
    it out of GTT, and that move's ``invalidate_mappings`` reaches the new revocable import
    before it is marked pinned -- it is revoked mid-registration, ``map_pages`` fails with
    -EINVAL, and the release path skips the unpin because the umem is already revoked. The
    exporter pin leaks; pinlab reports it (``kernel.leaks``) instead of hiding it. (Upstream
    umem_dmabuf.c after 104016eb671e has the same sequence.)"""
    ws = make_workstation("7.1", vram=4 * GiB, revocable_efa=True)
    revocable_pins.install(ws.kernel, [ws.gpu.bdev])
    trainer, mr, fd, desktop = _pressure(ws)
    desktop.gem_create("gpu0", 2 * GiB, "vram")
    assert mr.revoked  # type: ignore[attr-defined]
    with pytest.raises(KernelError) as info:
        trainer.ibv_reg_dmabuf_mr("efa0", fd, 0, 3 * GiB, ACCESS)
    assert info.value.errno is Errno.EINVAL and info.value.function == "ib_umem_dmabuf_map_pages"
    assert ws.gpu.buffer_of(trainer.dmabuf(fd)).pinned
    assert any("unbalanced dma_buf_pin" in leak.what for leak in ws.kernel.leaks)


def test_no_revocation_upstream_or_for_non_revocable_pins() -> None:
    """Upstream 7.1 (no policy) never revokes: the allocation fails with ENOMEM and the MR
    keeps working. With the policy on, a default (non-revocable) pinned import is left alone
    too. Outside 7.1 the policy cannot be installed."""
    ws = make_workstation("7.1", vram=4 * GiB, revocable_efa=True)
    trainer, mr, _, desktop = _pressure(ws)
    with pytest.raises(KernelError) as info:
        desktop.gem_create("gpu0", 2 * GiB, "vram")
    assert info.value.errno is Errno.ENOMEM
    assert not mr.revoked and trainer.nic_dma(mr).memory == "vram"  # type: ignore[arg-type]

    plain = make_workstation("7.1", vram=4 * GiB, revocable_efa=False)
    policy = revocable_pins.install(plain.kernel, [plain.gpu.bdev])
    _, mr2, _, desktop2 = _pressure(plain)
    with pytest.raises(KernelError) as info:
        desktop2.gem_create("gpu0", 2 * GiB, "vram")
    assert info.value.errno is Errno.ENOMEM
    assert not mr2.revoked and policy.revocations == 0 and policy.refused >= 1  # type: ignore[attr-defined]
    policy.uninstall()
    assert plain.gpu.bdev.revoke_pinned is None

    for profile in ("5.16", "6.14", "6.16"):
        old = make_workstation(profile)
        with pytest.raises(ValueError, match=r"needs kernel profile 7\.1"):
            revocable_pins.install(old.kernel, [old.gpu.bdev])
        assert old.gpu.bdev.revoke_pinned is None
