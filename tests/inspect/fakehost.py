"""Fake procfs/sysfs trees for ``pinlab.inspect`` tests.

:class:`FakeHost` writes, below a temporary root, the files the readers look at, laid out as
the kernel lays them out: ``/sys/devices/pci<domain>:<bus>/<port>/<function>`` directories
with ``class``/``vendor``/``device``/``resource``/... attributes, relative symlinks from
``/sys/bus/pci/devices/<address>``, ``/proc/self/{status,limits,mountinfo,cgroup}``,
``/proc/cpuinfo``, cgroup directories with dmem files, debugfs ``dma_buf/bufinfo``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

GiB = 1 << 30
MiB = 1 << 20

# PCIe Device/Port Types (PCI_EXP_TYPE_*)
ENDPOINT = 0x0
ROOT_PORT = 0x4
UPSTREAM = 0x5
DOWNSTREAM = 0x6
RCIEP = 0x9

ACS_RR = 0x0004
ACS_CR = 0x0008


def pcie_config(port_type: int | None, acs_ctrl: int | None = None, size: int = 4096) -> bytes:
    """A config space with a PCI Express capability at 0x40 (``port_type``) and, optionally,
    an ACS extended capability at 0x100 whose control register is ``acs_ctrl``."""
    cfg = bytearray(size)
    if port_type is not None:
        cfg[0x06] = 0x10  # PCI_STATUS_CAP_LIST
        cfg[0x34] = 0x40
        cfg[0x40] = 0x10  # PCI_CAP_ID_EXP
        cfg[0x41] = 0x00  # last capability
        cfg[0x42:0x44] = ((port_type << 4) | 0x2).to_bytes(2, "little")
    if acs_ctrl is not None and size > 0x108:
        cfg[0x100:0x104] = (0x000D | 1 << 16).to_bytes(4, "little")  # ACS, version 1, last
        cfg[0x104:0x106] = (0x5F).to_bytes(2, "little")  # capability register
        cfg[0x106:0x108] = acs_ctrl.to_bytes(2, "little")
    return bytes(cfg)


class FakeHost:
    """A fake host root below ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dirs: dict[str, Path] = {}

    # -- files ------------------------------------------------------------------------------

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def write(self, rel: str, text: str | bytes) -> Path:
        p = self.path(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return p

    # -- procfs -----------------------------------------------------------------------------

    def proc(
        self,
        *,
        memlock: tuple[str, str] = ("8388608", "8388608"),
        capeff: str = "0000000000000000",
        vmlck_kb: int = 0,
        vmpin_kb: int = 0,
        cgroup: str = "0::/user.slice/user-1000.slice/session-2.scope\n",
        cpu_vendor: str = "AuthenticAMD",
        cpu_family: int = 25,
        cpu_model: str = "AMD Ryzen 9 7950X",
        packages: Iterable[int] = (0,),
        mem_kb: int = 64 * 1024 * 1024,
        release: str = "6.16.3-arch1-1",
        hostname: str = "box",
        uid: int = 1000,
    ) -> None:
        self.write(
            "/proc/self/status",
            f"Name:\tpython\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
            f"VmLck:\t{vmlck_kb:8d} kB\nVmPin:\t{vmpin_kb:8d} kB\n"
            f"CapInh:\t0000000000000000\nCapPrm:\t{capeff}\nCapEff:\t{capeff}\n",
        )
        self.write(
            "/proc/self/limits",
            "Limit                     Soft Limit           Hard Limit           Units     \n"
            "Max stack size            8388608              unlimited            bytes     \n"
            f"Max locked memory         {memlock[0]:<20} {memlock[1]:<20} bytes     \n",
        )
        self.write("/proc/self/cgroup", cgroup)
        cpus = []
        for i, pkg in enumerate(packages):
            cpus.append(
                f"processor\t: {i}\nvendor_id\t: {cpu_vendor}\ncpu family\t: {cpu_family}\n"
                f"model name\t: {cpu_model}\nphysical id\t: {pkg}\n"
            )
        self.write("/proc/cpuinfo", "\n".join(cpus))
        self.write(
            "/proc/meminfo", f"MemTotal:       {mem_kb} kB\nMemFree:        {mem_kb // 2} kB\n"
        )
        self.write("/proc/sys/kernel/osrelease", release + "\n")
        self.write("/proc/sys/kernel/hostname", hostname + "\n")

    def numa(self, nodes: Mapping[int, tuple[int, int]]) -> None:
        """NUMA nodes: node → (first CPU, package id)."""
        for node, (cpu, pkg) in nodes.items():
            self.write(f"/sys/devices/system/node/node{node}/cpulist", f"{cpu}-{cpu + 7}\n")
            self.write(f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id", f"{pkg}\n")

    def mounts(self, lines: Iterable[str]) -> None:
        """``/proc/self/mountinfo`` from ``point fstype superopts`` triples."""
        out = []
        for i, line in enumerate(lines):
            point, fstype, opts = line.split()
            out.append(f"{30 + i} 1 0:{20 + i} / {point} rw,relatime - {fstype} {fstype} {opts}")
        self.write("/proc/self/mountinfo", "\n".join(out) + "\n")

    # -- cgroup v2 --------------------------------------------------------------------------

    def cgroup_dir(
        self,
        path: str,
        *,
        mount: str = "/sys/fs/cgroup",
        controllers: str = "cpu memory pids dmem",
        files: Mapping[str, str] | None = None,
    ) -> Path:
        d = self.path(mount) / path.strip("/") if path.strip("/") else self.path(mount)
        d.mkdir(parents=True, exist_ok=True)
        (d / "cgroup.controllers").write_text(controllers + "\n")
        for name, text in (files or {}).items():
            (d / name).write_text(text)
        return d

    # -- PCI --------------------------------------------------------------------------------

    def pci(
        self,
        address: str,
        *,
        vendor: int,
        device: int,
        cls: int,
        parent: str | None = None,
        driver: str | None = None,
        bars: Iterable[int] = (),
        speed: str | None = None,
        width: int | None = None,
        numa: int = 0,
        config: bytes | None = None,
        attrs: Mapping[str, str] | None = None,
    ) -> Path:
        """One function below ``parent`` (an address added before), or on its root bus."""
        if parent is None:
            domain_bus = address.rsplit(":", 1)[0]
            d = self.path(f"/sys/devices/pci{domain_bus}") / address
        else:
            d = self._dirs[parent] / address
        d.mkdir(parents=True, exist_ok=True)
        self._dirs[address] = d
        (d / "class").write_text(f"0x{cls:06x}\n")
        (d / "vendor").write_text(f"0x{vendor:04x}\n")
        (d / "device").write_text(f"0x{device:04x}\n")
        (d / "numa_node").write_text(f"{numa}\n")
        lines = []
        start = 0xF000000000
        for size in bars:
            lines.append(f"0x{start:016x} 0x{start + size - 1:016x} 0x000000000014220c")
            start += size
        lines += ["0x0000000000000000 0x0000000000000000 0x0000000000000000"] * (13 - len(lines))
        (d / "resource").write_text("\n".join(lines) + "\n")
        if speed is not None:
            (d / "max_link_speed").write_text(speed + "\n")
        if width is not None:
            (d / "max_link_width").write_text(f"{width}\n")
        if config is not None:
            (d / "config").write_bytes(config)
        if driver is not None:
            os.symlink(f"../../../../bus/pci/drivers/{driver}", d / "driver")
        for rel, text in (attrs or {}).items():
            f = d / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
        link = self.path("/sys/bus/pci/devices") / address
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(d, link.parent), link)
        return d


# -- the hosts the tests use ---------------------------------------------------------------------

WORKSTATION_VRAM = 24 * GiB
BUFINFO_DUMP = Path(__file__).parent.parent / "kernel" / "data" / "bufinfo" / "p2p-classic-crlf.txt"


def workstation(root: Path, *, config: bool = True) -> FakeHost:
    """A desktop: AMD Zen 4, one root complex; an AMD dGPU (24 GiB VRAM, 256 MiB BAR, two
    connectors) behind a Gen4 x16 root port; a ConnectX-5 (mlx5_0, 100 Gb/s) behind another;
    cgroup v2 with dmem (amdgpu's ``vram`` region) and a limit on user.slice; debugfs with a
    bufinfo dump."""
    h = FakeHost(root)
    h.proc(capeff="0000000000000000")
    h.mounts(["/sys/fs/cgroup cgroup2 rw,nsdelegate", "/sys/kernel/debug debugfs rw"])
    region = "drm/0000:03:00.0/vram"
    h.cgroup_dir(
        "/",
        files={
            "dmem.capacity": f"{region} {WORKSTATION_VRAM}\n",
            "dmem.current": f"{region} 1073741824\n",
        },
    )
    h.cgroup_dir(
        "/user.slice",
        files={
            "dmem.current": f"{region} 536870912\n",
            "dmem.min": f"{region} 0\n",
            "dmem.low": f"{region} 0\n",
            "dmem.max": f"{region} 8589934592\n",
        },
    )
    h.cgroup_dir(
        "/user.slice/user-1000.slice",
        files={
            "dmem.current": f"{region} 536870912\n",
            "dmem.min": f"{region} 0\n",
            "dmem.low": f"{region} 268435456\n",
            "dmem.max": f"{region} max\n",
        },
    )
    h.cgroup_dir("/user.slice/user-1000.slice/session-2.scope", controllers="cpu memory pids")
    h.write("/sys/kernel/debug/dma_buf/bufinfo", BUFINFO_DUMP.read_bytes())

    def cfg(t: int) -> bytes | None:
        return pcie_config(t) if config else None

    h.pci("0000:00:00.0", vendor=0x1022, device=0x14D8, cls=0x060000)
    h.pci(
        "0000:00:01.1",
        vendor=0x1022,
        device=0x14DB,
        cls=0x060400,
        speed="16.0 GT/s PCIe",
        width=16,
        config=cfg(ROOT_PORT),
    )
    h.pci(
        "0000:03:00.0",
        parent="0000:00:01.1",
        vendor=0x1002,
        device=0x744C,
        cls=0x030000,
        driver="amdgpu",
        bars=(256 * MiB, 2 * MiB),
        speed="16.0 GT/s PCIe",
        width=16,
        config=cfg(ENDPOINT),
        attrs={
            "mem_info_vram_total": f"{WORKSTATION_VRAM}\n",
            "drm/card1/card1-DP-1/status": "connected\n",
            "drm/card1/card1-HDMI-A-1/status": "disconnected\n",
        },
    )
    h.pci(
        "0000:03:00.1",
        parent="0000:00:01.1",
        vendor=0x1002,
        device=0xAB30,
        cls=0x040300,
        driver="snd_hda_intel",
    )
    h.pci(
        "0000:00:01.2",
        vendor=0x1022,
        device=0x14DB,
        cls=0x060400,
        speed="16.0 GT/s PCIe",
        width=16,
        config=cfg(ROOT_PORT),
    )
    h.pci(
        "0000:05:00.0",
        parent="0000:00:01.2",
        vendor=0x15B3,
        device=0x1017,
        cls=0x020000,
        driver="mlx5_core",
        bars=(32 * MiB,),
        speed="8.0 GT/s PCIe",
        width=16,
        config=cfg(ENDPOINT),
        attrs={
            "infiniband/mlx5_0/ports/1/rate": "100 Gb/sec (4X EDR)\n",
            "net/enp5s0f0np0/speed": "100000\n",
        },
    )
    h.pci("0000:00:14.0", vendor=0x1022, device=0x790B, cls=0x0C0500)  # SMBus: not listed
    return h


def dl1_host(
    root: Path,
    *,
    config: bool = True,
    host_function: bool = True,
    release: str = "5.15.0-1019-aws",
    host_bridge_device: int = 0x2020,
) -> FakeHost:
    """A DL1-like node: 2 × Xeon (Cascade Lake), a root complex per socket (0x2020), two PLX
    switches per socket with two Gaudis each; ACS redirect on sw1's downstream ports; an EFA
    per socket on its own root port. ``host_function=False``: no 00.0 function on either root
    bus, whose first function is then the Skylake-E Root Port (0x2030) at 01.0 (K-132);
    ``host_bridge_device``: the 00.0 function's device ID; ``release``: the running kernel."""
    h = FakeHost(root)
    h.proc(
        cpu_vendor="GenuineIntel",
        cpu_family=6,
        cpu_model="Intel Xeon Platinum 8275CL",
        packages=(0, 1),
        mem_kb=768 * 1024 * 1024,
        release=release,
        hostname="ip-10-0-0-1",
        capeff="000001ffffffffff",
        memlock=("unlimited", "unlimited"),
    )
    h.numa({0: (0, 0), 1: (48, 1)})
    h.mounts(["/sys/fs/cgroup cgroup2 rw"])
    h.cgroup_dir("/", controllers="cpu memory pids")
    h.cgroup_dir("/user.slice/user-1000.slice/session-2.scope", controllers="cpu memory pids")

    def cfg(t: int, acs: int | None = None) -> bytes | None:
        return pcie_config(t, acs) if config else None

    gaudi = 0
    for sock, bus0 in ((0, 0x00), (1, 0x80)):
        rb = f"0000:{bus0:02x}"
        if host_function:
            h.pci(f"{rb}:00.0", vendor=0x8086, device=host_bridge_device, cls=0x060000, numa=sock)
        for k in range(2):
            sw = 2 * sock + k
            b = bus0 + 0x10 * (k + 1)
            rp = f"{rb}:{k + 1:02x}.0"
            h.pci(
                rp,
                vendor=0x8086,
                device=0x2030,
                cls=0x060400,
                speed="8.0 GT/s PCIe",
                width=16,
                numa=sock,
                config=cfg(ROOT_PORT),
            )
            up = f"0000:{b:02x}:00.0"
            h.pci(
                up,
                parent=rp,
                vendor=0x10B5,
                device=0x9797,
                cls=0x060400,
                speed="16.0 GT/s PCIe",
                width=16,
                numa=sock,
                config=cfg(UPSTREAM),
            )
            for d in range(2):
                dp = f"0000:{b + 1:02x}:{d:02x}.0"
                acs = ACS_RR | ACS_CR if sw == 1 else 0
                h.pci(
                    dp,
                    parent=up,
                    vendor=0x10B5,
                    device=0x9797,
                    cls=0x060400,
                    speed="16.0 GT/s PCIe",
                    width=16,
                    numa=sock,
                    config=cfg(DOWNSTREAM, acs),
                )
                ep = f"0000:{b + 2 + d:02x}:00.0"
                h.pci(
                    ep,
                    parent=dp,
                    vendor=0x1DA3,
                    device=0x1000,
                    cls=0x120000,
                    driver="habanalabs",
                    bars=(256 * MiB, 32 * GiB),
                    speed="8.0 GT/s PCIe",
                    width=16,
                    numa=sock,
                    config=cfg(ENDPOINT),
                )
                gaudi += 1
        rp = f"{rb}:05.0"
        h.pci(
            rp,
            vendor=0x8086,
            device=0x2030,
            cls=0x060400,
            speed="8.0 GT/s PCIe",
            width=16,
            numa=sock,
            config=cfg(ROOT_PORT),
        )
        h.pci(
            f"0000:{bus0 + 0x50:02x}:00.0",
            parent=rp,
            vendor=0x1D0F,
            device=0xEFA0,
            cls=0x020000,
            driver="efa",
            bars=(64 * 1024,),
            speed="8.0 GT/s PCIe",
            width=16,
            numa=sock,
            config=cfg(ENDPOINT),
            attrs={f"infiniband/rdmap{sock}s0/ports/1/rate": "100 Gb/sec (4X EDR)\n"},
        )
    # an ASPEED BMC VGA on the first root bus: a display controller no exporter models
    h.pci("0000:00:1f.0", vendor=0x1A03, device=0x2000, cls=0x030000, driver="ast")
    return h


def bare_host(root: Path) -> FakeHost:
    """A CI-like VM: one root complex, virtio functions, no GPU/NIC pinlab models; hybrid
    cgroups without dmem; debugfs not mounted."""
    h = FakeHost(root)
    h.proc(capeff="000001fffeffffff", cgroup="4:memory:/x\n0::/\n")
    h.mounts(
        [
            "/sys/fs/cgroup tmpfs rw",
            "/sys/fs/cgroup/memory cgroup rw,memory",
            "/sys/fs/cgroup/unified cgroup2 rw",
        ]
    )
    h.cgroup_dir("/", mount="/sys/fs/cgroup/unified", controllers="hugetlb")
    h.pci("0000:00:00.0", vendor=0x8086, device=0x0D57, cls=0x060000)
    h.pci("0000:00:03.0", vendor=0x1AF4, device=0x1041, cls=0x020000, driver="virtio-pci")
    h.pci("0000:00:02.0", vendor=0x1AF4, device=0x1042, cls=0x018000, driver="virtio-pci")
    return h
