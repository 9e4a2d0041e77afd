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

It is the stand-in for ``pinlab run`` until the simulator exists.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from pinlab.drivers.amdgpu import AmdgpuBo, AmdgpuDevice
from pinlab.kernel.bufinfo import render_bufinfo
from pinlab.kernel.device import Device
from pinlab.kernel.dma_buf import DmaBufAttachment, DmaBufAttachOps, dma_buf_fd
from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import Kernel, Task
from pinlab.kernel.pci import PciTopology
from pinlab.kernel.profile import PRESETS, get_profile
from pinlab.kernel.ttm import TtmMemType, TtmPlace, ttm_bo_validate
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_REMOTE_READ,
    IbUmemDmabuf,
    ib_umem_dmabuf_get,
    ib_umem_dmabuf_get_pinned,
    ib_umem_dmabuf_map_pages,
    ib_umem_dmabuf_release,
    ib_umem_dmabuf_unmap_pages,
)

MiB = 1 << 20
GiB = 1 << 30


def _buffers(gpu: AmdgpuDevice, bos: list[AmdgpuBo]) -> Table:
    table = Table(title=f"{gpu.name} buffers", title_justify="left")
    for col in ("BO", "size", "placement", "pin_count", "epoch"):
        table.add_column(col)
    for bo in bos:
        if bo.tbo.deleted:
            continue
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

    topo = PciTopology(cpu_vendor="AuthenticAMD", cpu_family=0x19)
    switch = topo.add_host_bridge(vendor=0x1022, device=0x1480).add_root_port().add_switch(3)
    gpu_pdev = switch.downstream_ports[0].add_endpoint(vendor=0x1002, device=0x744C, label="gpu0")
    mlx5_pdev = switch.downstream_ports[1].add_endpoint(vendor=0x15B3, device=0x1021, label="mlx5")
    efa_pdev = switch.downstream_ports[2].add_endpoint(vendor=0x1D0F, device=0xEFA1, label="efa")
    mlx5_0 = Device("mlx5_0", mlx5_pdev)
    efa_0 = Device("efa_0", efa_pdev)
    gpu = AmdgpuDevice(kernel, gpu_pdev, vram_size=4 * GiB, gtt_size=8 * GiB, name="gpu0")
    console.print(
        f"GPU {gpu_pdev.name}, NICs {mlx5_pdev.name} (mlx5_0, ODP) and {efa_pdev.name} "
        "(efa_0, pinned) below one PCIe switch; 4 GiB VRAM."
    )
    trainer = Task(1000, "trainer")
    kernel.current = trainer
    bos: list[AmdgpuBo] = []

    console.rule("1. export a VRAM buffer, import it dynamically (ODP NIC)")
    a = gpu.create_buffer(512 * MiB, "vram", name="kv-cache")
    bos.append(a)
    fd_a = dma_buf_fd(gpu.export(a))
    zapped: list[str] = []

    def mlx5_invalidate(attach: DmaBufAttachment) -> None:
        umem = attach.importer_priv
        assert isinstance(umem, IbUmemDmabuf)
        zapped.append(
            f"move_notify -> mlx5_0 zaps MTTs and unmaps (sgt was {umem.sgt and umem.sgt.memory})"
        )
        ib_umem_dmabuf_unmap_pages(umem)

    odp = ib_umem_dmabuf_get(
        kernel,
        mlx5_0,
        0,
        a.size,
        fd_a,
        IB_ACCESS_LOCAL_WRITE,
        DmaBufAttachOps(allow_peer2peer=True, move_notify=mlx5_invalidate),
    )
    with a.tbo.resv:
        ib_umem_dmabuf_map_pages(odp)
    assert odp.sgt is not None
    console.print(
        f"mlx5_0 mapped fd {fd_a}: {odp.sgt.memory} (page-less P2P: {odp.sgt.page_less}); "
        f"pin_count {a.tbo.pin_count}"
    )
    console.print(_buffers(gpu, bos))

    console.rule("2. VRAM pressure evicts it; the exporter notifies first")
    console.print("(its KERNEL fences: the clear from creation and now the eviction copy)")
    try:
        hog = gpu.create_buffer(3712 * MiB, "vram", name="game")
        bos.append(hog)
    except KernelError as e:
        console.print(f"[red]allocation failed: {e}")
    for line in zapped:
        console.print(f"[yellow]{line}")
    console.print(
        f"kv-cache now in {a.location}; copy jobs queued on the copy engine: "
        f"{len(gpu.bdev.copy_queue)}"
    )
    with a.tbo.resv:
        ib_umem_dmabuf_map_pages(odp)  # the NIC's next access faults and re-maps
    waits = kernel.take_waits()
    assert odp.sgt is not None
    console.print(
        f"mlx5_0 page fault: re-mapped to {odp.sgt.memory}, waiting on {len(waits)} "
        "KERNEL fence(s) "
        f"({', '.join(repr(f) for f in waits) or 'none'}) before DMA"
    )
    gpu.bdev.run_copies()
    console.print(_buffers(gpu, bos))

    console.rule("3. a pinned importer (EFA-like) pins a second buffer")
    gpu.free_buffer(hog)
    b = gpu.create_buffer(1 * GiB, "vram", name="weights")
    bos.append(b)
    fd_b = dma_buf_fd(gpu.export(b))
    efa = ib_umem_dmabuf_get_pinned(
        kernel, efa_0, 0, b.size, fd_b, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ
    )
    assert efa.sgt is not None
    console.print(
        f"efa_0 pinned fd {fd_b} via ib_umem_dmabuf_get_pinned: {b.location} "
        f"({'P2P in place' if efa.sgt.p2p else 'migrated to system memory'}); "
        f"pin_count {b.tbo.pin_count}"
    )
    console.print(_buffers(gpu, bos))

    console.rule("4. more pressure: the pinned buffer does not move")
    zapped.clear()
    try:
        big = gpu.create_buffer(3584 * MiB, "vram", name="pressure")
        bos.append(big)
        console.print(f"3.5 GiB allocation landed in {big.location}")
    except KernelError as e:
        console.print(
            f"3.5 GiB VRAM-only allocation: [bold red]{e}[/] -- the eviction walk found only "
            "the pinned buffer, which TTM never evicts (the stability camp's -ENOMEM)"
        )
    for line in zapped:
        console.print(f"[yellow]{line}")
    target = TtmMemType.TT if b.tbo.mem_type is TtmMemType.VRAM else TtmMemType.VRAM
    with b.tbo.resv:
        try:
            ttm_bo_validate(b.tbo, (TtmPlace(target),))
            console.print("[red]pinned buffer moved (this must never happen)")
        except KernelError as e:
            console.print(f"explicit move of the pinned weights to {target} refused: [bold]{e}")
    console.print(f"weights still in {b.location}, pin_count {b.tbo.pin_count}")
    console.print(_buffers(gpu, bos))
    gpu.bdev.run_copies()

    console.rule("5. /sys/kernel/debug/dma_buf/bufinfo")
    console.file.write(render_bufinfo(kernel))  # verbatim: tabs and all

    console.rule("6. teardown")
    ib_umem_dmabuf_release(efa)
    ib_umem_dmabuf_release(odp)
    for fd in list(trainer.files):
        trainer.files.close(fd)
    for bo in bos:
        if not bo.tbo.deleted:
            gpu.free_buffer(bo)
    used = {str(m): man.used for m, man in gpu.bdev.managers.items()}
    console.print(
        f"after teardown: allocator usage {used}, "
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
