"""``python -m pinlab.demo``: a walkthrough of the dma-buf pin/move mechanism.

It builds one machine -- an AMD Zen host, a PCIe switch with an amdgpu-like GPU and two RDMA
NICs below it -- and walks through what the 2021 debate was about:

1. the GPU exports a VRAM buffer; an ODP-capable NIC (mlx5-like) imports it *dynamically*;
2. VRAM pressure evicts the buffer: the exporter calls ``dma_buf_move_notify`` first, the NIC
   drops its mapping and re-faults onto the new location after the move fence;
3. a pinned importer (EFA-like, ``ib_umem_dmabuf_get_pinned``) pins a second buffer, in VRAM
   because every attachment can do P2P;
4. more pressure: TTM skips the pinned buffer, and an explicit move of it is refused
   (``ttm_bo_validate`` → ``-EINVAL``);
5. debugfs ``bufinfo`` as the kernel would print it, and a clean teardown.

Userspace enters the model only through the uapi: two processes (``trainer``, ``game``) make
the calls -- GEM create, export, ``ibv_reg_dmabuf_mr``, a NIC access, exit -- and the
walkthrough reads the kernel's state in between; the one direct kernel call is the explicit
``ttm_bo_validate`` of step 4, to show what TTM answers a driver that tries to move a pinned
buffer. The copy engine is ``TtmDevice.run_copies()``: there is no clock here.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuDevice
from pinlab.drivers.efa import EfaDevice
from pinlab.drivers.mlx5 import Mlx5Device
from pinlab.kernel.bufinfo import render_bufinfo
from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci_topology import PciTopology
from pinlab.kernel.profile import PRESETS, get_profile
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_validate
from pinlab.kernel.umem import IB_ACCESS_LOCAL_WRITE, IB_ACCESS_ON_DEMAND, IB_ACCESS_REMOTE_READ
from pinlab.uapi import Process, System

MiB = 1 << 20
GiB = 1 << 30
ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ


def _buffers(gpu: AmdgpuDevice, procs: list[Process]) -> Table:
    table = Table(title=f"{gpu.name} buffers", title_justify="left")
    for col in ("BO", "size", "placement", "pin_count", "epoch"):
        table.add_column(col)
    for proc in procs:
        for gem in proc.handles.values():
            bo = gem.buffer
            assert isinstance(bo, AmdgpuBo)
            table.add_row(
                bo.name,
                f"{bo.size // MiB} MiB",
                str(bo.location),
                str(bo.tbo.pin_count),
                str(bo.tbo.epoch),
            )
    vram = gpu.bdev.managers[TtmMemType.VRAM]
    table.caption = (
        f"VRAM used {vram.used // MiB} / {vram.size // MiB} MiB, "
        f"pinned {vram.pinned_bytes // MiB} MiB"
    )
    return table


def _machine(kernel: Kernel) -> tuple[System, AmdgpuDevice]:
    """An AMD Zen host; one PCIe switch with the GPU (4 GiB VRAM), an mlx5 with ODP and an
    EFA below it."""
    topo = PciTopology(cpu_vendor="AuthenticAMD", cpu_family=0x19)
    switch = topo.add_host_bridge(vendor=0x1022, device=0x1480).add_root_port().add_switch(3)
    gpu_pdev = switch.downstream_ports[0].add_endpoint(vendor=0x1002, device=0x744C, label="gpu0")
    mlx5_pdev = switch.downstream_ports[1].add_endpoint(vendor=0x15B3, device=0x1021, label="mlx5")
    efa_pdev = switch.downstream_ports[2].add_endpoint(vendor=0x1D0F, device=0xEFA1, label="efa")
    system = System(kernel)
    gpu = AmdgpuDevice(kernel, gpu_pdev, vram_size=4 * GiB, gtt_size=8 * GiB, name="gpu0")
    system.add_exporter("gpu0", gpu)
    system.add_nic("mlx5_0", Mlx5Device(kernel, mlx5_pdev, name="mlx5_0"))
    system.add_nic("efa_0", EfaDevice(kernel, efa_pdev, name="efa_0"))
    return system, gpu


def walkthrough(profile_name: str, move_notify: bool, console: Console) -> int:
    switches = (
        {"move_notify": True} if move_notify and PRESETS[profile_name].move_notify_is_option else {}
    )
    profile = get_profile(profile_name, **switches)
    kernel = Kernel(profile)
    mn = "y" if profile.move_notify else "n"
    console.rule(
        f"[bold]pinlab walkthrough -- kernel {profile.name}, CONFIG_DMABUF_MOVE_NOTIFY={mn}"
    )
    system, gpu = _machine(kernel)
    mlx5 = system.nic("mlx5_0")
    console.print(
        f"GPU {gpu.pdev.name}, NICs {mlx5.pdev.name} (mlx5_0, ODP) and "
        f"{system.nic('efa_0').pdev.name} (efa_0, pinned) below one PCIe switch; 4 GiB VRAM."
    )
    trainer = system.spawn("trainer")
    game = system.spawn("game")
    procs = [trainer, game]

    console.rule("1. export a VRAM buffer, import it dynamically (ODP NIC)")
    a = trainer.gem_create("gpu0", 512 * MiB, "vram", name="kv-cache")
    fd_a = trainer.prime_handle_to_fd(a)
    odp = trainer.ibv_reg_dmabuf_mr("mlx5_0", fd_a, 0, 512 * MiB, ACCESS | IB_ACCESS_ON_DEMAND)
    kv = trainer.buffer(a)
    assert isinstance(kv, AmdgpuBo) and odp.umem.sgt is not None
    console.print(
        f"mlx5_0 mapped fd {fd_a} (ibv_reg_dmabuf_mr, ON_DEMAND): {odp.umem.sgt.memory} "
        f"(page-less P2P: {odp.umem.sgt.page_less}); pin_count {kv.tbo.pin_count}"
    )
    console.print(_buffers(gpu, procs))

    console.rule("2. VRAM pressure evicts it; the exporter notifies first")
    console.print("(its KERNEL fences: the clear from creation and now the eviction copy)")
    zapped = odp.invalidations
    hog: int | None = None
    try:
        hog = game.gem_create("gpu0", 3712 * MiB, "vram", name="game")
    except KernelError as e:
        console.print(f"[red]allocation failed: {e}")
    if odp.invalidations > zapped:
        console.print(
            "[yellow]move_notify -> mlx5_0 zaps MTTs and unmaps "
            f"(mlx5_ib_dmabuf_invalidate_cb; mapping now {odp.umem.sgt})"
        )
    console.print(
        f"kv-cache now in {kv.location}; copy jobs queued on the copy engine: "
        f"{len(gpu.bdev.copy_queue)}"
    )
    access = trainer.nic_dma(odp, 4096)  # the NIC's next access faults and re-maps
    waits = trainer.take_waits()
    console.print(
        f"mlx5_0 page fault: re-mapped to {access.memory}, waiting on {len(waits)} "
        "KERNEL fence(s) "
        f"({', '.join(repr(f) for f in waits) or 'none'}) before DMA"
    )
    gpu.bdev.run_copies()
    console.print(_buffers(gpu, procs))

    console.rule("3. a pinned importer (EFA-like) pins a second buffer")
    if hog is not None:
        game.gem_close(hog)
        console.print("(the game exits: its 3712 MiB are freed)")
    b = trainer.gem_create("gpu0", 1 * GiB, "vram", name="weights")
    fd_b = trainer.prime_handle_to_fd(b)
    efa = trainer.ibv_reg_dmabuf_mr("efa_0", fd_b, 0, 1 * GiB, ACCESS)
    weights = trainer.buffer(b)
    assert isinstance(weights, AmdgpuBo) and efa.umem.sgt is not None
    console.print(
        f"efa_0 pinned fd {fd_b} via ib_umem_dmabuf_get_pinned: {weights.location} "
        f"({'P2P in place' if efa.umem.sgt.p2p else 'migrated to system memory'}); "
        f"pin_count {weights.tbo.pin_count}"
    )
    console.print(_buffers(gpu, procs))

    console.rule("4. more pressure: the pinned buffer does not move")
    try:
        big = game.gem_create("gpu0", 3584 * MiB, "vram", name="pressure")
        console.print(f"3.5 GiB allocation landed in {game.buffer(big).location}")
    except KernelError as e:
        console.print(
            f"3.5 GiB VRAM-only allocation: [bold red]{e}[/] -- the eviction walk found only "
            "the pinned buffer, which TTM never evicts (the stability camp's -ENOMEM)"
        )
    target = TtmMemType.TT if weights.tbo.mem_type is TtmMemType.VRAM else TtmMemType.VRAM
    with weights.tbo.resv:
        try:
            ttm_bo_validate(weights.tbo, (TtmPlace(target),))
            console.print("[red]pinned buffer moved (this must never happen)")
        except KernelError as e:
            console.print(f"explicit move of the pinned weights to {target} refused: [bold]{e}")
    console.print(f"weights still in {weights.location}, pin_count {weights.tbo.pin_count}")
    console.print(_buffers(gpu, procs))
    gpu.bdev.run_copies()

    console.rule("5. /sys/kernel/debug/dma_buf/bufinfo")
    console.file.write(render_bufinfo(kernel))  # verbatim: tabs and all

    console.rule("6. teardown")
    for proc in procs:
        proc.exit()
    used = {str(m): man.used for m, man in gpu.bdev.managers.items()}
    console.print(
        f"after teardown (every process exited): allocator usage {used}, "
        f"live dma-bufs {len(list(kernel.dma_bufs()))}, leaks {kernel.leaks or 'none'}"
    )
    console.print(
        f"kernel log: {kernel.dmesg or 'empty'}; "
        f"WARNs: {[(w.function, w.message) for w in kernel.warnings.records()] or 'none'}"
    )
    return 0 if not kernel.leaks and all(v == 0 for v in used.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pinlab.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--profile", default="6.16", choices=list(PRESETS), help="kernel profile")
    parser.add_argument(
        "--no-move-notify",
        action="store_true",
        help="leave CONFIG_DMABUF_MOVE_NOTIFY at its default (n)",
    )
    args = parser.parse_args(argv)
    return walkthrough(args.profile, not args.no_move_notify, Console(soft_wrap=True))


if __name__ == "__main__":
    sys.exit(main())
