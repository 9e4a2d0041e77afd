"""The host readers of ``pinlab inspect``: each source read from fake procfs/sysfs trees, and
every missing, unreadable or malformed source reported by status, never raised."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlab.inspect import host, source
from pinlab.inspect.cgroup import read_cgroup, read_dmem
from pinlab.inspect.cpu import read_cpu
from pinlab.inspect.debugfs import read_bufinfo
from pinlab.inspect.host import inspect_host
from pinlab.inspect.pci import parse_config_space, read_pci
from pinlab.inspect.proc import read_capabilities, read_meminfo, read_memlock, read_system
from pinlab.inspect.source import MISSING, NOT_APPLICABLE, OK
from tests.inspect.fakehost import (
    ACS_CR,
    ACS_RR,
    DOWNSTREAM,
    ROOT_PORT,
    WORKSTATION_VRAM,
    FakeHost,
    bare_host,
    dl1_host,
    pcie_config,
    workstation,
)

GiB = 1 << 30
MiB = 1 << 20


def _valid(status: str) -> bool:
    return status in (OK, MISSING, NOT_APPLICABLE) or status.startswith("unreadable: ")


# -- RLIMIT_MEMLOCK and capabilities (policy-semantics.md §1.1, §1.2) ------------------------------


def test_memlock_from_limits_and_mm_counters(tmp_path: Path) -> None:
    """policy-semantics §1.1: the limit and the two per-mm counters each compared with it on its
    own, ``mm->locked_vm`` (VmLck) and ``mm->pinned_vm`` (VmPin)."""
    h = FakeHost(tmp_path)
    h.proc(memlock=("65536", "unlimited"), vmlck_kb=8, vmpin_kb=1024)
    m = read_memlock(tmp_path)
    assert m.status == OK
    assert (m.soft, m.hard) == (65536, None)  # RLIM_INFINITY shown as unlimited
    assert (m.locked_vm, m.pinned_vm) == (8 * 1024, 1024 * 1024)


def test_memlock_on_the_real_root_uses_getrlimit() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    m = read_memlock()
    assert m.status == OK and "getrlimit" in m.source
    assert m.soft == (None if soft == resource.RLIM_INFINITY else soft)
    assert m.hard == (None if hard == resource.RLIM_INFINITY else hard)


@pytest.mark.parametrize(
    ("capeff", "ipc_lock", "sys_resource"),
    [
        ("0000000000000000", False, False),
        ("0000000000004000", True, False),  # bit 14 only
        ("0000000001000000", False, True),  # bit 24 only
        ("000001fffeffffff", True, False),  # a container without CAP_SYS_RESOURCE
        ("000001ffffffffff", True, True),
    ],
)
def test_capabilities_cap_ipc_lock_bit_14(
    tmp_path: Path, capeff: str, ipc_lock: bool, sys_resource: bool
) -> None:
    """P-3/P-4: CAP_IPC_LOCK (bit 14) bypasses the limit and decides ``can_do_mlock`` at a zero
    limit; CAP_SYS_RESOURCE is bit 24."""
    FakeHost(tmp_path).proc(capeff=capeff)
    caps = read_capabilities(tmp_path)
    assert caps.status == OK
    assert caps.cap_ipc_lock is ipc_lock
    assert caps.cap_sys_resource is sys_resource
    assert caps.to_json()["cap_ipc_lock"] is ipc_lock


def test_status_file_that_is_a_directory_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "proc/self/status").mkdir(parents=True)
    caps = read_capabilities(tmp_path)
    assert caps.status.startswith("unreadable: ") and "directory" in caps.status
    assert caps.cap_ipc_lock is None
    m = read_memlock(tmp_path)  # no limits file either
    assert m.status == MISSING and m.locked_vm is None


def test_limits_without_memlock_line_is_malformed(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.write("/proc/self/limits", "Limit Soft Hard Units\n")
    m = read_memlock(tmp_path)
    assert m.status.startswith("unreadable: malformed limits")


# -- cgroup v2 -------------------------------------------------------------------------------------


def test_cgroup_unified_with_callers_cgroup(tmp_path: Path) -> None:
    workstation(tmp_path)
    cg = read_cgroup(tmp_path)
    assert cg.status == OK
    assert cg.mount == "/sys/fs/cgroup" and cg.mode == "unified"
    assert cg.path == "/user.slice/user-1000.slice/session-2.scope"
    assert cg.directory == tmp_path / "sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"
    assert cg.controllers == ("cpu", "memory", "pids")
    assert "dmem" in cg.root_controllers


def test_cgroup_hybrid_layout(tmp_path: Path) -> None:
    """systemd's hybrid mode: v2 at /sys/fs/cgroup/unified, v1 hierarchies beside it."""
    bare_host(tmp_path)
    cg = read_cgroup(tmp_path)
    assert cg.status == OK
    assert cg.mount == "/sys/fs/cgroup/unified" and cg.mode == "hybrid"
    assert cg.v1_controllers == ("memory",)
    assert cg.path == "/" and cg.directory == tmp_path / "sys/fs/cgroup/unified"
    assert cg.controllers == ("hugetlb",)


def test_cgroup_falls_back_to_proc_mounts_and_unescapes(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.write("/proc/mounts", "cgroup2 /sys/fs/my\\040cgroup cgroup2 rw,nosuid 0 0\n")
    h.write("/proc/self/cgroup", "0::/a\n")
    h.cgroup_dir("/a", mount="/sys/fs/my cgroup", controllers="memory")
    cg = read_cgroup(tmp_path)
    assert cg.status == OK and cg.mount == "/sys/fs/my cgroup"
    assert cg.controllers == ("memory",)


def test_cgroup_outside_the_mount(tmp_path: Path) -> None:
    """A container without a cgroup namespace: the mount's root is the container's cgroup."""
    h = FakeHost(tmp_path)
    h.write(
        "/proc/self/mountinfo",
        "30 1 0:26 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n",
    )
    h.write("/proc/self/cgroup", "0::/system.slice/other\n")
    cg = read_cgroup(tmp_path)
    assert cg.status == OK and cg.directory is None
    assert "outside the mount" in cg.detail
    h.write("/proc/self/cgroup", "0::/docker/abc/inner\n")
    assert read_cgroup(tmp_path).directory == tmp_path / "sys/fs/cgroup/inner"


def test_cgroup_v1_only_and_no_proc(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.mounts(["/sys/fs/cgroup/memory cgroup rw,memory"])
    cg = read_cgroup(tmp_path)
    assert cg.status == MISSING and "no cgroup2 mount" in cg.detail
    assert read_dmem(tmp_path).status == NOT_APPLICABLE
    empty = tmp_path / "empty"
    empty.mkdir()
    assert read_cgroup(empty).status == MISSING


# -- dmem (policy-semantics.md §2.2-§2.4) --------------------------------------------------------


def test_dmem_capacity_and_the_callers_chain(tmp_path: Path) -> None:
    """P-21/P-22: one ``<region> <value>`` line per region, ``max`` for no limit; capacity at
    the root only, current everywhere, min/low/max on non-root cgroups."""
    workstation(tmp_path)
    d = read_dmem(tmp_path)
    assert d.status == OK
    assert d.capacity == {"drm/0000:03:00.0/vram": WORKSTATION_VRAM}
    assert d.vram_by_pci_address() == {"0000:03:00.0": WORKSTATION_VRAM}
    files = {(f.cgroup, f.name): f for f in d.files}
    # the caller's scope has no dmem files (dmem not enabled in its parent's subtree_control)
    scope = "/user.slice/user-1000.slice/session-2.scope"
    assert files[(scope, "dmem.max")].status == MISSING
    assert files[("/user.slice", "dmem.max")].values == {"drm/0000:03:00.0/vram": 8 * GiB}
    assert files[("/user.slice/user-1000.slice", "dmem.max")].values == {
        "drm/0000:03:00.0/vram": None  # max
    }
    assert files[("/user.slice/user-1000.slice", "dmem.low")].values == {
        "drm/0000:03:00.0/vram": 256 * MiB
    }
    assert files[("/", "dmem.current")].values == {"drm/0000:03:00.0/vram": GiB}
    assert ("/", "dmem.max") not in files  # the root has none
    assert d.files[0].cgroup == scope  # nearest first


def test_dmem_missing_controller(tmp_path: Path) -> None:
    bare_host(tmp_path)
    d = read_dmem(tmp_path)
    assert d.status == MISSING and "6.14" in d.detail


def test_dmem_malformed_file_is_reported_not_raised(tmp_path: Path) -> None:
    workstation(tmp_path)
    (tmp_path / "sys/fs/cgroup/user.slice/dmem.max").write_text("drm/0000:03:00.0/vram lots\n")
    d = read_dmem(tmp_path)
    assert d.status == OK
    bad = next(f for f in d.files if f.cgroup == "/user.slice" and f.name == "dmem.max")
    assert bad.status.startswith("unreadable: malformed dmem.max: line 1")
    (tmp_path / "sys/fs/cgroup/dmem.capacity").write_text("no-value-here\n")
    assert read_dmem(tmp_path).status.startswith("unreadable: malformed dmem.capacity")


def test_dmem_empty_capacity_no_regions(tmp_path: Path) -> None:
    workstation(tmp_path)
    (tmp_path / "sys/fs/cgroup/dmem.capacity").write_text("")
    d = read_dmem(tmp_path)
    assert d.status == OK and d.capacity == {} and "no region" in d.detail


def test_dmem_memparse_suffixes(tmp_path: Path) -> None:
    """The model's parser (``dmemcg_parse_limit``) reads what the kernel prints."""
    workstation(tmp_path)
    (tmp_path / "sys/fs/cgroup/dmem.capacity").write_text("drm/0000:03:00.0/vram 8G\n")
    assert read_dmem(tmp_path).capacity == {"drm/0000:03:00.0/vram": 8 * GiB}


# -- bufinfo (kernel-semantics.md §4.1) ----------------------------------------------------------


def test_bufinfo_parsed_through_the_bufinfo_parser(tmp_path: Path) -> None:
    """K-67: the real dump is read with ``parse_bufinfo``."""
    workstation(tmp_path)
    b = read_bufinfo(tmp_path)
    assert b.status == OK and b.dump is not None
    assert len(b.dump.objects) >= 2
    js = b.to_json()
    assert js["objects"] == len(b.dump.objects) and "drm" in js["exporters"]


def test_bufinfo_malformed(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.write("/sys/kernel/debug/dma_buf/bufinfo", "\nDma-buf Objects:\nnot a header\n")
    b = read_bufinfo(tmp_path)
    assert b.status.startswith("unreadable: malformed bufinfo: line 3: expected the column")
    assert b.dump is None


def test_bufinfo_debugfs_not_mounted(tmp_path: Path) -> None:
    bare_host(tmp_path)
    b = read_bufinfo(tmp_path)
    assert b.status == MISSING and "not mounted" in b.detail


def test_bufinfo_debugfs_mounted_without_dma_buf(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.mounts(["/sys/kernel/debug debugfs rw"])
    (tmp_path / "sys/kernel/debug").mkdir(parents=True)
    assert "no dma_buf/" in read_bufinfo(tmp_path).detail
    (tmp_path / "sys/kernel/debug/dma_buf").mkdir()
    assert "no bufinfo" in read_bufinfo(tmp_path).detail


def test_bufinfo_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as root, so permission bits do not block: make ``open`` refuse instead."""
    workstation(tmp_path)
    real = source._open

    def deny(path: Path) -> bytes:
        if path.name == "bufinfo":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(source, "_open", deny)
    b = read_bufinfo(tmp_path)
    assert b.status == "unreadable: permission denied"
    assert "root only" in b.detail


def test_bufinfo_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "sys/kernel/debug/dma_buf/bufinfo").mkdir(parents=True)
    assert read_bufinfo(tmp_path).status == "unreadable: is a directory"


# -- PCI (kernel-semantics.md §8) ----------------------------------------------------------------


def test_parse_config_space_port_type_and_acs() -> None:
    assert parse_config_space(pcie_config(ROOT_PORT)) == ("root_port", None)
    assert parse_config_space(pcie_config(DOWNSTREAM, ACS_RR | ACS_CR)) == (
        "downstream",
        ACS_RR | ACS_CR,
    )
    # an unprivileged read: the first 64 bytes only -- nothing known
    assert parse_config_space(pcie_config(ROOT_PORT)[:64]) == (None, None)
    assert parse_config_space(b"") == (None, None)
    assert parse_config_space(bytes(256)) == ("conventional", None)  # PCI, not PCIe
    # a capability list that loops must not hang
    cfg = bytearray(pcie_config(None, size=256))
    cfg[0x06], cfg[0x34], cfg[0x40], cfg[0x41] = 0x10, 0x40, 0x05, 0x40
    assert parse_config_space(bytes(cfg)) == ("conventional", None)


def test_pci_tree_of_the_workstation(tmp_path: Path) -> None:
    workstation(tmp_path)
    pci = read_pci(tmp_path)
    assert pci.status == OK and not pci.problems
    fns = pci.by_address()
    gpu = fns["0000:03:00.0"]
    assert gpu.parent == "0000:00:01.1" and gpu.root_bus == "0000:00"
    assert gpu.is_display and gpu.driver == "amdgpu"
    assert gpu.bars == (256 * MiB, 2 * MiB) and gpu.largest_bar == 256 * MiB
    assert gpu.vram_total == WORKSTATION_VRAM
    assert (gpu.link_speed, gpu.link_width) == (16.0, 16)
    assert gpu.drm_connectors == ("card1-DP-1", "card1-HDMI-A-1")
    nic = fns["0000:05:00.0"]
    assert nic.is_network and nic.ib_devices == ("mlx5_0",)
    assert nic.ib_rate_gbps == 100.0 and nic.net_speed_mbps == 100000
    rp = fns["0000:00:01.1"]
    assert rp.is_bridge and rp.parent is None
    assert (rp.port_type, rp.port_type_source) == ("root_port", "config")
    assert fns["0000:00:00.0"].class_subclass == 0x0600


def test_pci_port_types_inferred_without_config(tmp_path: Path) -> None:
    """Unprivileged: no config space beyond 64 bytes, so switch ports come from the tree."""
    dl1_host(tmp_path, config=False)
    fns = read_pci(tmp_path).by_address()
    assert (fns["0000:00:01.0"].port_type, fns["0000:00:01.0"].port_type_source) == (
        "root_port",
        "tree",
    )
    assert fns["0000:10:00.0"].port_type == "upstream"
    assert fns["0000:11:00.0"].port_type == "downstream"
    assert fns["0000:12:00.0"].port_type == "endpoint"
    assert fns["0000:11:00.0"].acs_redirect is None


def test_pci_acs_from_config(tmp_path: Path) -> None:
    dl1_host(tmp_path)
    fns = read_pci(tmp_path).by_address()
    assert fns["0000:11:00.0"].acs_redirect is False  # sw0
    assert fns["0000:21:00.0"].acs_redirect is True  # sw1
    assert fns["0000:90:00.0"].numa_node == 1


def test_pci_missing_and_broken_entries(tmp_path: Path) -> None:
    assert read_pci(tmp_path).status == MISSING
    h = FakeHost(tmp_path)
    h.pci("0000:00:00.0", vendor=0x8086, device=0x1234, cls=0x060000)
    d = h.pci("0000:00:02.0", vendor=0x8086, device=0x1234, cls=0x030000)
    (d / "class").unlink()
    (d / "class").mkdir()  # a directory where a file is expected
    devices = tmp_path / "sys/bus/pci/devices"
    (devices / "junk").mkdir()
    (devices / "0000:00:09.0").mkdir()  # not a link into /sys/devices
    pci = read_pci(tmp_path)
    assert pci.status == OK
    assert [f.address for f in pci.functions] == ["0000:00:00.0"]
    assert len(pci.problems) == 3
    assert any("0000:00:02.0" in p and "directory" in p for p in pci.problems)


# -- CPU, memory, kernel ---------------------------------------------------------------------------


def test_cpu_sockets_and_numa(tmp_path: Path) -> None:
    dl1_host(tmp_path)
    cpu = read_cpu(tmp_path)
    assert (cpu.status, cpu.vendor, cpu.family, cpu.sockets) == (OK, "intel", 6, 2)
    assert dict(cpu.node_socket) == {0: 0, 1: 1}
    assert not cpu.supports_p2pdma


def test_cpu_amd_zen_supports_p2pdma(tmp_path: Path) -> None:
    """K-55 (kernel-semantics §8.3): ``cpu_supports_p2pdma`` is AMD family >= 0x17."""
    workstation(tmp_path)
    cpu = read_cpu(tmp_path)
    assert (cpu.vendor, cpu.family) == ("amd", 0x19) and cpu.supports_p2pdma


def test_cpu_hygon_and_arm_are_other(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.proc(cpu_vendor="HygonGenuine", cpu_family=0x18)
    assert read_cpu(tmp_path).vendor == "other"
    h.write("/proc/cpuinfo", "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n")
    cpu = read_cpu(tmp_path)
    assert (cpu.status, cpu.vendor, cpu.family, cpu.sockets) == (OK, "other", 0, 1)


@pytest.mark.parametrize("family", ["300", "-25", "abc"])
def test_a_cpu_family_that_is_not_one_is_malformed_not_fatal(tmp_path: Path, family: str) -> None:
    workstation(tmp_path)
    text = (tmp_path / "proc/cpuinfo").read_text()
    (tmp_path / "proc/cpuinfo").write_text(
        text.replace("cpu family\t: 25", f"cpu family\t: {family}")
    )
    cpu = read_cpu(tmp_path)
    assert cpu.status == (
        "unreadable: malformed cpuinfo: line 3: cpu family: expected a decimal CPU family "
        f'number 0 to 255 (like 6 or 25), found "{family}"'
    )
    assert inspect_host(tmp_path).cpu == cpu


def test_meminfo_and_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workstation(tmp_path)
    assert read_meminfo(tmp_path).total == 64 * GiB
    s = read_system(tmp_path)
    assert (s.release, s.hostname, s.version) == ("6.16.3-arch1-1", "box", (6, 16))
    real = source._open

    def deny(path: Path) -> bytes:
        if path.name == "meminfo":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(source, "_open", deny)
    m = read_meminfo(tmp_path)
    assert m.status == "unreadable: permission denied" and m.total is None


# -- all sources ---------------------------------------------------------------------------------


def test_nothing_at_all_never_raises(tmp_path: Path) -> None:
    r = inspect_host(tmp_path)
    for name, record in r.sources().items():
        assert _valid(record.status), (name, record.status)
    assert r.pci.status == MISSING and r.dmem.status == NOT_APPLICABLE


def test_an_unexpected_bug_becomes_a_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(root: Path) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(host, "read_pci", boom)
    r = inspect_host(tmp_path)
    assert r.pci.status == "unreadable: unexpected RuntimeError reading pci: bug"


def test_the_real_machine() -> None:
    """This machine's ``/``: every source has a status and nothing raises."""
    r = inspect_host(Path("/"))
    for name, record in r.sources().items():
        assert _valid(record.status), (name, record.status)
        assert isinstance(record.to_json(), dict)
    assert r.memlock.status == OK  # getrlimit always answers
