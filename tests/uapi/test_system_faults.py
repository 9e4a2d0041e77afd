"""``System.hot_unplug`` and ``System.reset_nic``: the kernel paths a device's removal and a NIC's
fatal-error recovery stand for, as userspace sees them (K-47 for the MR teardown)."""

from __future__ import annotations

import pytest

from pinlab.kernel.errno import KernelError
from pinlab.kernel.umem import IB_ACCESS_LOCAL_WRITE, IB_ACCESS_REMOTE_READ
from pinlab.platform import Machine, build
from pinlab.platform.presets import PRESETS
from pinlab.uapi import Process

MiB = 1 << 20
ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ


def workstation() -> Machine:
    spec = PRESETS["workstation"](resizable_bar=True)
    return build(spec, "6.16")


def registered(m: Machine, comm: str, n: int = 1) -> tuple[Process, list[int]]:
    """A process with ``n`` pinned dma-buf MRs on mlx5_0 over gpu0 buffers."""
    proc = m.system.spawn(comm)
    fds = []
    for _ in range(n):
        handle = proc.gem_create("gpu0", 64 * MiB)
        fd = proc.prime_handle_to_fd(handle)
        proc.ibv_reg_dmabuf_mr("mlx5_0", fd, 0, 64 * MiB, ACCESS)
        fds.append(fd)
    return proc, fds


def test_hot_unplug_of_a_nic_kills_its_users_and_removes_it() -> None:
    m = workstation()
    nic_user, _ = registered(m, "kv")
    gpu_user = m.system.spawn("app")
    gpu_user.gem_create("gpu0", 64 * MiB)
    exited: list[str] = []
    m.system.on_exit.append(lambda p: exited.append(p.comm))
    gone = m.system.hot_unplug("mlx5_0")
    assert gone.exporter is None and gone.killed == (nic_user,) and exited == ["kv"]
    assert not nic_user.alive and nic_user.exit_code == 137 and gpu_user.alive
    with pytest.raises(KernelError, match="ENODEV"):
        m.system.nic("mlx5_0")
    vram = next(r for r in m.exporters["gpu0"].regions() if r.name == "vram")
    assert vram.pinned == 0 and vram.used == 64 * MiB  # the MR's pin went, app's buffer stays


def test_hot_unplug_of_a_gpu_takes_its_display_and_importer_along() -> None:
    m = workstation()
    app = m.system.spawn("app")
    app.gem_create("gpu0", 64 * MiB)
    gone = m.system.hot_unplug("gpu0")
    assert gone.killed == (app,) and gone.exporter is not None
    assert "gpu0" not in m.system.exporters and not m.system.displays
    assert not m.system.gpu_importers
    assert all(r.used == 0 for r in gone.exporter.regions())  # the kill freed its buffer


def test_nic_reset_drops_every_mr_and_the_owner_lives_on() -> None:
    m = workstation()
    a, _ = registered(m, "a", 2)
    b, _ = registered(m, "b", 1)
    old = next(iter(a.mrs.values()))
    assert m.system.reset_nic("mlx5_0") == 3
    assert a.alive and b.alive and not a.mrs and not b.mrs
    assert not m.system.nic("mlx5_0").mrs
    with pytest.raises(KernelError, match="EINVAL"):
        a.nic_dma(old, 4096)
    vram = next(r for r in m.exporters["gpu0"].regions() if r.name == "vram")
    assert vram.pinned == 0  # every pin went with its MR
