"""From the host's PCI tree to a platform file that ``pinlab run --platform`` accepts: the
mapping, the fallbacks, and the round trip through ``load_platform`` and ``build``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlab.inspect.cpu import CpuInfo
from pinlab.inspect.host import inspect_host
from pinlab.inspect.pci import PciInfo
from pinlab.inspect.platform import (
    DEFAULT_DRAM_BANDWIDTH,
    plan_platform,
    platform_text,
    write_platform,
)
from pinlab.inspect.proc import MemInfo, SystemInfo
from pinlab.inspect.release import suggest_kernel
from pinlab.inspect.source import OK
from pinlab.inspect.summary import check_platform, plan_host
from pinlab.kernel.pci_ids import P2pdmaWhitelistRelease, pci_p2pdma_whitelist
from pinlab.platform import PlatformSpec, build
from pinlab.platform.presets import load_platform
from pinlab.units import parse_line_rate
from tests.inspect.fakehost import WORKSTATION_VRAM, bare_host, dl1_host, workstation

GiB = 1 << 30
MiB = 1 << 20


def _round_trip(spec: PlatformSpec, tmp_path: Path, text: str) -> PlatformSpec:
    """Write ``text`` as ``pinlab inspect`` does; it must load back equal and build."""
    path = tmp_path / "host.toml"
    write_platform(text, path)
    back = load_platform(path)
    assert back == spec
    assert isinstance(back, PlatformSpec)
    build(back, "6.16")
    return back


def test_workstation_amd_gpu_and_mlx5(tmp_path: Path) -> None:
    """K-55 on a real-looking desktop: a Zen CPU, so the GPU ↔ NIC pair may go through the
    root complex; the dGPU gets its dmem VRAM size (P-31 region name) and its small BAR."""
    root = tmp_path / "root"
    workstation(root)
    r = inspect_host(root)
    plan = plan_host(r)
    spec = plan.spec
    assert spec.cpu.vendor == "amd" and spec.cpu.family == 0x19 and spec.cpu.sockets == 1
    assert spec.dram.size == 64 * GiB and spec.dram.bandwidth == DEFAULT_DRAM_BANDWIDTH
    assert spec.kernel == "6.16"
    (hb,) = spec.host_bridges
    assert (hb.name, hb.vendor, hb.device, hb.socket) == ("rc0", 0x1022, 0x14D8, 0)
    assert spec.switches == ()
    (gpu,) = spec.devices
    assert (gpu.name, gpu.driver, gpu.parent) == ("gpu0", "amdgpu", "rc0")
    assert gpu.memory == WORKSTATION_VRAM and gpu.bar == 256 * MiB
    assert (gpu.gen, gpu.width, gpu.vendor, gpu.device) == (4, 16, 0x1002, 0x744C)
    assert (gpu.gtt, gpu.system, gpu.rciep) == (32 * GiB, 64 * GiB, False)
    (nic,) = spec.nics
    assert (nic.name, nic.driver, nic.parent, nic.odp) == ("mlx5_0", "mlx5", "rc0", True)
    assert nic.line_rate == parse_line_rate("100Gbps")
    assert (nic.gen, nic.width) == (3, 16)  # the lower end: the NIC's Gen3
    assert [(d.name, d.device) for d in spec.displays] == [("display0", "gpu0")]
    assert any(m.address == "0000:03:00.0" and "dmem.capacity" in m.what for m in plan.mapped)

    back = _round_trip(spec, tmp_path, platform_text(plan, source="test"))
    machine = build(back, "6.16")
    assert machine.p2p_path_class("gpu0", "mlx5_0") == "root_complex"


def test_gpu_memory_without_dmem_comes_from_sysfs(tmp_path: Path) -> None:
    workstation(tmp_path)
    (tmp_path / "sys/fs/cgroup/dmem.capacity").unlink()
    r = inspect_host(tmp_path)
    (gpu,) = plan_host(r).spec.devices
    assert gpu.memory == WORKSTATION_VRAM  # amdgpu's mem_info_vram_total
    (tmp_path / "sys/devices/pci0000:00/0000:00:01.1/0000:03:00.0/mem_info_vram_total").unlink()
    (gpu,) = plan_host(inspect_host(tmp_path)).spec.devices
    assert gpu.memory == 256 * MiB and gpu.bar is None  # the largest BAR


def test_dl1_like_habana_behind_switches(tmp_path: Path) -> None:
    """The 2021 target platform (kernel-semantics §10.3): Gaudis in pairs below PLX switches,
    EFAs on their own root ports, two sockets. K-56: a pair below one switch is bus-address
    P2P; K-57: ACS redirect on a switch forces its pair through the (whitelisted) root."""
    root = tmp_path / "root"
    dl1_host(root)
    plan = plan_host(inspect_host(root))
    spec = plan.spec
    assert spec.cpu.vendor == "intel" and spec.cpu.sockets == 2
    assert spec.dram.size == 384 * GiB
    assert spec.kernel is None  # 5.15 is older than every profile
    assert any("older than every pinlab profile" in n for n in plan.notes)
    assert [(h.name, h.socket, h.device) for h in spec.host_bridges] == [
        ("rc0", 0, 0x2020),
        ("rc1", 1, 0x2020),
    ]
    assert [(s.name, s.parent, s.acs_redirect, s.gen) for s in spec.switches] == [
        ("sw0", "rc0", False, 3),
        ("sw1", "rc0", True, 3),
        ("sw2", "rc1", False, 3),
        ("sw3", "rc1", False, 3),
    ]
    assert [(d.name, d.driver, d.parent) for d in spec.devices] == [
        (f"accel{i}", "habanalabs", f"sw{i // 2}") for i in range(8)
    ]
    assert all(d.memory == 32 * GiB and d.bar is None for d in spec.devices)
    assert [(n.name, n.driver, n.parent, n.odp) for n in spec.nics] == [
        ("rdmap0s0", "efa", "rc0", False),
        ("rdmap1s0", "efa", "rc1", False),
    ]
    assert any("1a03:2000" in s and "no pinlab exporter" in s for s in plan.skipped)

    back = _round_trip(spec, tmp_path, platform_text(plan))
    m = build(back, "6.16")
    assert m.p2p_path_class("accel0", "rdmap0s0") == "root_complex"  # whitelisted 0x2020
    assert m.p2p_path_class("accel0", "rdmap1s0") == "cross_socket"
    assert m.p2p_path_class("accel0", "accel1") == "switch"  # below sw0
    assert m.p2p_path_class("accel2", "accel3") == "root_complex"  # sw1: ACS redirect


@pytest.mark.parametrize("config", [True, False])
def test_a_root_bus_without_00_0_is_known_by_its_first_root_port(
    tmp_path: Path, config: bool
) -> None:
    """K-132: with no 00.0 function, each root bus's first function is Skylake-E Root Port
    0x2030 at 01.0 (a root port read from config space, or inferred from the tree). The file
    says so (``root_port_slot``), and the platform built from it is whitelisted through that
    port from v5.19 (profile 6.12 on) and not at all under 5.16, as the kernel would be."""
    root = tmp_path / "root"
    dl1_host(root, config=config, host_function=False)
    plan = plan_host(inspect_host(root))
    spec = plan.spec
    assert [(h.vendor, h.device, h.root_port_slot, h.socket) for h in spec.host_bridges] == [
        (0x8086, 0x2030, 1, 0),
        (0x8086, 0x2030, 1, 1),
    ]
    (rc0,) = [m.what for m in plan.mapped if m.name == "rc0"]
    assert "root port 0000:00:01.0 (8086:2030)" in rc0 and "from Linux 5.19" in rc0
    back = _round_trip(spec, tmp_path, platform_text(plan))
    assert "root_port_slot = 1" in (tmp_path / "host.toml").read_text()
    new, old = build(back, "6.12"), build(back, "5.16")
    assert new.p2p_path_class("accel0", "rdmap0s0") == "root_complex"
    assert old.p2p_path_class("accel0", "rdmap0s0") is None
    assert new.p2p_path_class("accel0", "accel1") == "switch"  # below sw0: no host bridge
    assert old.p2p_path_class("accel0", "accel1") == "switch"


def test_a_first_function_that_is_no_root_port_gives_no_ids(tmp_path: Path) -> None:
    """K-132: a root bus whose first function is neither at 00.0 nor a Root Port identifies
    its host bridge under no release: IDs 0/0, no ``root_port_slot``."""
    root = tmp_path / "root"
    h = dl1_host(root, host_function=False)
    h.pci("0000:00:00.4", vendor=0x8086, device=0x2024, cls=0x088000, numa=0)  # not 00.0
    (rc0, rc1) = plan_host(inspect_host(root)).spec.host_bridges
    assert (rc0.vendor, rc0.device, rc0.root_port_slot) == (0, 0, None)
    assert (rc1.vendor, rc1.device, rc1.root_port_slot) == (0x8086, 0x2030, 1)


@pytest.mark.parametrize(
    ("release", "device", "profile", "carried"),
    [
        ("6.8.0-45-generic", 0x09A2, "5.16", "5.18"),  # Sapphire Rapids on Ubuntu 24.04
        ("6.8.0-45-generic", 0x2020, "5.16", None),  # both tables list Skylake-E's 0x2020
        ("6.16.3", 0x09A2, "6.16", None),  # the profile's table is the host's
        ("7.1.2", 0x0B25, "7.1", None),  # a DSA root bus before 7.1.3: the profile's table
        ("7.1.3", 0x0B25, "7.1", "7.2"),  # the 7.1.3 stable backport of K-135
    ],
)
def test_the_hosts_whitelist_is_carried_when_the_profiles_judges_its_bridges_otherwise(
    tmp_path: Path, release: str, device: int, profile: str, carried: str | None
) -> None:
    """K-133, K-135: the suggested profile is the newest not above the host's release, and its
    whitelist may lack an entry the host's kernel has; the file then carries the host's table,
    so that P2P through that bridge is what the host does under the suggested profile."""
    root = tmp_path / "root"
    dl1_host(root, release=release, host_bridge_device=device)
    plan = plan_host(inspect_host(root))
    spec = plan.spec
    assert spec.kernel == profile
    notes = [n for n in plan.notes if "P2PDMA whitelist" in n]
    if carried is None:
        assert spec.p2pdma_whitelist is None and not notes
        return
    release_table = pci_p2pdma_whitelist(P2pdmaWhitelistRelease(carried))
    assert spec.p2pdma_whitelist is not None
    assert tuple(e.entry() for e in spec.p2pdma_whitelist) == release_table
    (note,) = notes
    assert f"whitelist of {carried} and later, profile {profile}" in note and "rc0, rc1" in note
    back = _round_trip(spec, tmp_path, platform_text(plan))
    m = build(back, profile)
    assert m.p2p_path_class("accel0", "rdmap0s0") == "root_complex"
    assert (
        build(back.model_copy(update={"p2pdma_whitelist": None}), profile).p2p_path_class(
            "accel0", "rdmap0s0"
        )
        is None
    )


@pytest.mark.parametrize(("release", "carried"), [("6.8.0-45-generic", True), ("5.17.1", None)])
def test_a_root_port_identified_bridge_keeps_the_hosts_lookup_rule(
    tmp_path: Path, release: str, carried: bool | None
) -> None:
    """K-132: a 6.8 host finds its bridges by their first Root Port, its suggested profile 5.16
    would not: the file carries the host's rule and a note says so, so that P2P through them
    is allowed under 5.16 as on the host. A 5.17 host has 5.16's rule: nothing to carry."""
    root = tmp_path / "root"
    dl1_host(root, release=release, host_function=False)
    plan = plan_host(inspect_host(root))
    spec = plan.spec
    assert spec.kernel == "5.16" and spec.p2pdma_root_port_lookup is carried
    notes = [n for n in plan.notes if "first Root Port" in n]
    back = _round_trip(spec, tmp_path, platform_text(plan))
    path = build(back, "5.16").p2p_path_class("accel0", "rdmap0s0")
    if carried:
        (note,) = notes
        assert "finds rc0, rc1 by a first Root Port (v5.19 on), unlike profile 5.16" in note
        assert path == "root_complex"
    else:
        assert not notes and path is None


def test_kernel_suggestion() -> None:
    def sysinfo(release: str) -> SystemInfo:
        return SystemInfo(OK, "", release)

    assert suggest_kernel(sysinfo("6.18.44-fc")) == "6.16"
    assert suggest_kernel(sysinfo("6.13.0")) == "6.12"
    assert suggest_kernel(sysinfo("7.3.0")) == "7.1"
    assert suggest_kernel(sysinfo("5.10.0-android")) is None
    assert suggest_kernel(sysinfo("weird")) is None
    assert suggest_kernel(None) is None


def test_dl1_without_config_space(tmp_path: Path) -> None:
    """Unprivileged: switches found from the tree; ACS unknown is said, not guessed."""
    dl1_host(tmp_path, config=False)
    plan = plan_host(inspect_host(tmp_path))
    assert len(plan.spec.switches) == 4
    assert not any(s.acs_redirect for s in plan.spec.switches)
    assert any("ACS" in n and "not readable" in n for n in plan.notes)


def test_bare_host_has_zero_devices_and_is_valid(tmp_path: Path) -> None:
    """A CI VM: no GPU, accelerator or RDMA NIC -- host bridge, CPU and DRAM only, and the
    summary says why; no placeholder device."""
    root = tmp_path / "root"
    bare_host(root)
    plan = plan_host(inspect_host(root))
    spec = plan.spec
    assert spec.devices == () and spec.nics == () and spec.switches == ()
    assert [(h.vendor, h.device) for h in spec.host_bridges] == [(0x8086, 0x0D57)]
    assert any("zero devices" in n for n in plan.notes)
    assert any("1af4:1041" in s and "not an RDMA NIC" in s for s in plan.skipped)
    _round_trip(spec, tmp_path, platform_text(plan))


def test_nothing_readable_still_gives_a_valid_platform(tmp_path: Path) -> None:
    plan = plan_host(inspect_host(tmp_path))
    spec = plan.spec
    assert [(h.name, h.vendor, h.device) for h in spec.host_bridges] == [("rc0", 0, 0)]
    assert spec.cpu.vendor == "other" and spec.kernel is None and spec.name == "host"
    notes = " ".join(plan.notes)
    assert "no PCI tree" in notes and "CPU unknown" in notes and "host memory unknown" in notes
    _round_trip(spec, tmp_path, platform_text(plan))


def test_to_platform_signature_and_drivers(tmp_path: Path) -> None:
    """The vendor → driver guesses: Intel display → i915 (xe when bound to xe), NVIDIA →
    nvidia-compute, an AMD GPU on the root bus → apu (rciep); SR-IOV VFs, ConnectX-3 and an
    NVSwitch-like bridge-class function bound to nvidia are left out."""
    from tests.inspect.fakehost import FakeHost

    h = FakeHost(tmp_path)
    h.proc(release="6.12.1")
    h.pci("0000:00:00.0", vendor=0x1022, device=0x14E8, cls=0x060000)
    h.pci(
        "0000:00:08.0",
        vendor=0x1002,
        device=0x15BF,
        cls=0x030000,
        driver="amdgpu",
        bars=(512 * MiB,),
        attrs={"drm/card0/card0-eDP-1/status": "connected\n"},
    )
    for slot, (vendor, device, cls, driver) in enumerate(
        [
            (0x8086, 0x56A0, 0x030000, "i915"),
            (0x8086, 0xE20B, 0x030000, "xe"),
            (0x10DE, 0x20B0, 0x030200, "nvidia"),
            (0x10DE, 0x1AF1, 0x068000, "nvidia"),  # NVSwitch: bridge-class, not a GPU
            (0x15B3, 0x1003, 0x028000, "mlx4_core"),
            (0x1D0F, 0xEC20, 0x020000, "ena"),  # ENA: Ethernet, not EFA
            (0x1D0F, 0xEFA1, 0x020000, None),
        ],
        start=1,
    ):
        rp = f"0000:00:{slot:02x}.1"
        h.pci(rp, vendor=0x1022, device=0x14EE, cls=0x060400)
        h.pci(
            f"0000:{slot:02x}:00.0",
            parent=rp,
            vendor=vendor,
            device=device,
            cls=cls,
            driver=driver,
            speed="32.0 GT/s PCIe",
            width=32,
        )
    vf = h.pci("0000:08:00.1", parent="0000:00:07.1", vendor=0x1D0F, device=0xEFA1, cls=0x020000)
    (vf / "physfn").symlink_to("../0000:08:00.0")
    r = inspect_host(tmp_path)
    plan = plan_host(r)
    spec = plan_platform(r.pci, r.cpu, r.memory, dmem=r.dmem, system=r.system).spec
    assert spec == plan.spec
    assert [(d.name, d.driver, d.rciep) for d in spec.devices] == [
        ("gpu0", "apu", True),  # 0000:00:08.0 comes first
        ("gpu1", "i915", False),
        ("gpu2", "xe", False),
        ("gpu3", "nvidia-compute", False),
    ]
    assert [(n.name, n.driver) for n in spec.nics] == [("efa_0", "efa")]
    apu = spec.device("gpu0")
    assert apu.memory == 512 * MiB and apu.is_carve_out
    assert [(d.name, d.device) for d in spec.displays] == [("display0", "gpu0")]
    assert spec.device("gpu1").gen == 5 and spec.device("gpu1").width == 16  # clamped
    skipped = " ".join(plan.skipped)
    assert "mlx4" in skipped and "virtual function" in skipped
    assert "1d0f:ec20" in skipped
    assert "10de:1af1" not in skipped  # bridge-class functions are not candidates
    assert any("x32" in n for n in plan.notes)
    _round_trip(spec, tmp_path, platform_text(plan))
    build(spec, spec.kernel)  # 6.12 has xe


def test_plan_with_unreadable_pci(tmp_path: Path) -> None:
    pci = PciInfo("unreadable: permission denied", "/sys/bus/pci/devices")
    cpu = CpuInfo(OK, "", "amd", "AuthenticAMD", 0x19, "x", 2, {0: 0, 1: 1})
    spec = plan_platform(pci, cpu, MemInfo(OK, "", 128 * GiB)).spec
    assert spec.cpu.sockets == 2 and spec.dram.size == 64 * GiB
    assert len(spec.host_bridges) == 1


def test_write_platform_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "p.toml"
    target.write_text("old")
    write_platform("new", target)
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]  # no temp file left
    with pytest.raises(OSError):
        write_platform("x", tmp_path / "no-such-dir" / "p.toml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


def test_check_platform_reports_a_bad_file(tmp_path: Path) -> None:
    bare_host(tmp_path / "root")
    plan = plan_host(inspect_host(tmp_path / "root"))
    path = tmp_path / "host.toml"
    path.write_text("name = 3\n")
    check = check_platform(path, plan.spec)
    assert not check.ok and "does not load" in check.message
    write_platform(platform_text(plan), path)
    check = check_platform(path, plan.spec)
    assert check.ok and check.profile == "6.16"


def test_a_plugin_exporter_gets_what_it_declares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a function is identified as a model, what the mapping gives it is the model's
    declaration, not its name: a plugin exporter (an amdgpu-like driver with a GTT domain but
    no SYSTEM one, no KMS, and no kernel profile it exists in) gets GTT only, no display
    engine despite its connectors, and a note for the profile; the same function as amdgpu
    gets GTT, SYSTEM and a display."""
    from pinlab.drivers import EXPORTERS
    from pinlab.drivers.amdgpu import AmdgpuDevice
    from pinlab.drivers.gem_ttm import domain_sizes
    from pinlab.inspect import platform
    from pinlab.kernel.profile import KernelProfile
    from tests.inspect.fakehost import FakeHost

    class Radeon(AmdgpuDevice):
        driver_name = "radeon"
        has_display = False
        default_sizes = domain_sizes(vram=4 * GiB, gtt=4 * GiB)

        @classmethod
        def exists_in(cls, profile: KernelProfile) -> bool:
            return False

    monkeypatch.setitem(EXPORTERS, "radeon", Radeon)
    monkeypatch.setitem(platform._BOUND_EXPORTERS, "radeon", "radeon")  # identification
    h = FakeHost(tmp_path)
    h.proc(release="6.16.1", mem_kb=64 * 1024 * 1024)
    h.pci("0000:00:00.0", vendor=0x1022, device=0x14E8, cls=0x060000)
    for slot, driver in enumerate(("radeon", "amdgpu"), start=1):
        h.pci(f"0000:00:{slot:02x}.1", vendor=0x1022, device=0x14EE, cls=0x060400)
        h.pci(
            f"0000:{slot:02x}:00.0",
            parent=f"0000:00:{slot:02x}.1",
            vendor=0x1002,
            device=0x73BF,
            cls=0x030000,
            driver=driver,
            bars=(256 * MiB,),
            attrs={f"drm/card{slot}/card{slot}-DP-1/status": "connected\n"},
        )
    plan = plan_host(inspect_host(tmp_path))
    radeon, amdgpu = plan.spec.devices
    assert (radeon.driver, radeon.gtt, radeon.system) == ("radeon", 32 * GiB, None)
    assert (amdgpu.driver, amdgpu.gtt, amdgpu.system) == ("amdgpu", 32 * GiB, 64 * GiB)
    assert [d.device for d in plan.spec.displays] == [amdgpu.name]
    assert "radeon exists in no released kernel profile pinlab models" in plan.notes
    assert not any(n.startswith("amdgpu") for n in plan.notes)


def test_an_exporter_absent_from_the_suggested_profile_is_noted(tmp_path: Path) -> None:
    """xe does not exist in the 5.16 profile (``XeDevice.exists_in``): a 6.1 host with an
    xe-bound GPU gets the 5.16 profile and a note naming the oldest profile that has xe."""
    from tests.inspect.fakehost import FakeHost

    h = FakeHost(tmp_path)
    h.proc(release="6.1.0")
    h.pci("0000:00:00.0", vendor=0x8086, device=0x4660, cls=0x060000)
    h.pci("0000:00:01.0", vendor=0x8086, device=0x460D, cls=0x060400)
    h.pci(
        "0000:01:00.0",
        parent="0000:00:01.0",
        vendor=0x8086,
        device=0xE20B,
        cls=0x030000,
        driver="xe",
    )
    plan = plan_host(inspect_host(tmp_path))
    assert plan.spec.kernel == "5.16" and plan.spec.devices[0].driver == "xe"
    assert "xe needs a kernel profile with xe (6.12 or later), not 5.16" in plan.notes
