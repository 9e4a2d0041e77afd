"""Presets build into machines whose PCI tree, drivers and link graph match ``cost-model.md``
§9; P2P path classes come from the kernel's P2PDMA rules (K-55, K-56, K-57, K-83, K-132,
K-133, K-134, K-135)."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from pinlab.drivers.amdgpu import AmdgpuDevice
from pinlab.drivers.efa import EfaDevice
from pinlab.drivers.habanalabs import HabanalabsDevice
from pinlab.drivers.mlx5 import Mlx5Device
from pinlab.drivers.nvidia_compute import NvidiaComputeDevice
from pinlab.errors import ConfigError
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.p2pdma import PciP2pdmaMapType, pci_p2pdma_distance, pci_p2pdma_map_type
from pinlab.kernel.pci_ids import PCI_ANY_ID, P2pdmaWhitelistEntry, pci_p2pdma_whitelist
from pinlab.kernel.profile import get_profile
from pinlab.platform import (
    CostModel,
    HostBridgeSpec,
    LinkUse,
    Machine,
    PlatformSpec,
    apu_laptop,
    build,
    build_cluster,
    cluster,
    dl1,
    p4d,
    pcie_model,
    workstation,
)
from pinlab.units import GiB, MiB

PROFILES = ["5.16", "6.12", "6.16", "7.1"]

COST = CostModel()
GEN3 = pcie_model.write_rate(COST, 3, 16, 256)  # 12.99 GB/s: the mechanism, MPS 256
GEN4 = pcie_model.write_rate(COST, 4, 16, 256)  # 25.99 GB/s
EFA_WIRE = 12.5e9 * 8192 / (8192 + 82)  # 100 Gbps at MTU 8192, Ethernet-framed SRD


def region(machine: Machine, device: str, name: str) -> int:
    return next(r.size for r in machine.exporters[device].regions() if r.name == name)


# -- every preset builds under every profile -------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_dl1_builds(profile: str) -> None:
    m = build(dl1(), profile)
    assert m.kernel.profile.name == profile
    assert len(m.exporters) == 8
    assert all(isinstance(d, HabanalabsDevice) for d in m.exporters.values())
    assert len(m.nics) == 4
    assert all(isinstance(n, EfaDevice) for n in m.nics.values())
    assert region(m, "gaudi5", "vram") == 32 * GiB
    assert m.spec.host_memory == 768 * GiB
    assert m.pci.p2pdma_enabled is True
    assert m.system.displays == {} and m.system.gpu_importers == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_p4d_builds(profile: str) -> None:
    m = build(p4d(), profile)
    assert len(m.exporters) == 8 and len(m.nics) == 4
    gpu = m.exporters["gpu3"]
    assert isinstance(gpu, NvidiaComputeDevice)
    assert region(m, "gpu3", "vram") == 40 * GiB
    assert gpu.bar1_size == 40 * GiB  # BAR1 = HBM size (§9.2, §6.3)
    assert m.links["pcie:gpu3"].capacity["up"] == pytest.approx(GEN4)  # Gen4 x16 (§9.2)
    assert m.links["mem:gpu3"].capacity["rw"] == pytest.approx(1555e9 * 0.85)
    assert m.spec.host_memory == 1152 * GiB
    assert m.p2p_path_class("gpu0", "efa0") == "switch"  # paired behind one switch
    assert m.p2p_path_class("gpu2", "efa0") == "root_complex"


@pytest.mark.parametrize("profile", PROFILES)
def test_workstation_builds(profile: str) -> None:
    m = build(workstation(), profile)
    gpu = m.exporters["gpu0"]
    assert isinstance(gpu, AmdgpuDevice)
    assert region(m, "gpu0", "vram") == 16 * GiB
    assert m.spec.device("gpu0").bar_size == 256 * MiB  # §9.3, pin.bar1_consumer
    nic = m.nics["mlx5_0"]
    assert isinstance(nic, Mlx5Device) and nic.odp
    assert set(m.system.displays) == {"display0"}
    assert set(m.system.gpu_importers) == {"gpu0:import"}
    assert m.links["pcie:gpu0"].capacity["down"] == pytest.approx(GEN4)
    assert m.links["dram:0"].capacity["rw"] == pytest.approx(89.6e9 * 0.84)
    # no cost override: the root complex's effect on P2P is the PCIe mechanism's
    assert m.spec.cost_overrides == {}
    assert m.nic_port_model("mlx5_0").model_name == "cx5"
    assert workstation(resizable_bar=True).device("gpu0").bar_size == 16 * GiB


@pytest.mark.parametrize("profile", PROFILES)
def test_apu_laptop_builds(profile: str) -> None:
    m = build(apu_laptop(), profile)
    assert region(m, "apu0", "vram") == 2 * GiB
    assert set(m.system.displays) == {"display0"}
    assert m.nics == {}
    assert m.links["dram:0"].capacity["rw"] == pytest.approx(76.8e9 * 0.84)
    # the iGPU is a root-complex integrated endpoint: no PCIe link of its own
    assert "pcie:apu0" not in m.links
    assert build(apu_laptop(carve_out=512 * MiB)).spec.device("apu0").memory == 512 * MiB


def _xe_platform() -> PlatformSpec:
    return PlatformSpec.model_validate(
        {
            "name": "xe-box",
            "dram": {"size": "32GiB", "bandwidth": "89.6GB/s"},
            "host_bridges": [{"name": "rc0", "vendor": "0x8086", "device": "0xa700"}],
            "devices": [{"name": "gpu0", "driver": "xe", "parent": "rc0", "memory": "16GiB"}],
        }
    )


def test_xe_exists_only_from_6_12() -> None:
    """xe entered mainline in ≈6.8: absent from the 5.16 profile, present from 6.12."""
    with pytest.raises(ConfigError) as exc:
        build(_xe_platform(), "5.16")
    assert str(exc.value).startswith("platform xe-box: devices[0] (gpu0): ")
    assert "xe driver does not exist in kernel 5.16" in str(exc.value)
    for profile in ("6.12", "6.16", "7.1"):
        m = build(_xe_platform(), profile)
        assert region(m, "gpu0", "vram") == 16 * GiB


# -- links and paths ------------------------------------------------------------------------------


def test_dl1_gaudi_pair_host_link_is_12_GBps() -> None:
    """§9.1: pairs of Gaudis share one PCIe Gen3 x16 link → ≈ 13 GB/s per pair (posted writes
    at MPS 256, the PCIe mechanism)."""
    m = build(dl1())
    for sw in ("sw0", "sw1", "sw2", "sw3"):
        link = m.links[f"pcie:{sw}"]
        assert link.capacity == {"up": pytest.approx(GEN3), "down": pytest.approx(GEN3)}
        assert (link.gen, link.width) == (3, 16)
    assert pytest.approx(12.99e9, rel=1e-3) == GEN3
    assert m.links["net:efa0"].capacity["tx"] == pytest.approx(EFA_WIRE)
    assert m.links["dram:0"].capacity["rw"] == pytest.approx(140.8e9 * 0.84)
    # both Gaudis of a pair share the switch uplink toward the host
    up0 = m.path("gaudi0", "host:0")
    up1 = m.path("gaudi1", "host:0")
    assert LinkUse("pcie:sw0", "up") in up0 and LinkUse("pcie:sw0", "up") in up1
    assert m.bottleneck(up0) == pytest.approx(GEN3)


def test_dl1_paths() -> None:
    m = build(dl1())
    assert m.path("gaudi0", "host:0") == [
        LinkUse("mem:gaudi0", "rw"),
        LinkUse("pcie:gaudi0", "up"),
        LinkUse("pcie:sw0", "up"),
        LinkUse("dram:0", "rw"),
    ]
    assert m.path("host:0", "efa0") == [LinkUse("dram:0", "rw"), LinkUse("pcie:efa0", "down")]
    # P2P below one switch stays below it
    assert m.path("gaudi0", "gaudi1") == [
        LinkUse("mem:gaudi0", "rw"),
        LinkUse("pcie:gaudi0", "up"),
        LinkUse("pcie:gaudi1", "down"),
        LinkUse("mem:gaudi1", "rw"),
    ]
    # Gaudi -> EFA on the same socket: up to the root complex and down
    assert m.path("gaudi0", "efa0") == [
        LinkUse("mem:gaudi0", "rw"),
        LinkUse("pcie:gaudi0", "up"),
        LinkUse("pcie:sw0", "up"),
        LinkUse("pcie:efa0", "down"),
    ]
    # ... and across the inter-socket link to the other socket
    assert LinkUse("upi:0-1", "0->1") in m.path("gaudi0", "efa2")
    assert LinkUse("upi:0-1", "1->0") in m.path("efa2", "gaudi0")
    assert m.path("gaudi6", "host:0")[-2:] == [LinkUse("upi:0-1", "1->0"), LinkUse("dram:0", "rw")]
    assert m.socket_of("gaudi6") == 1 and m.host_of("efa1") == "host:0"


def test_staged_transfer_crosses_dram_twice() -> None:
    """cost-model §1 item 5: D2H into a bounce buffer, then the NIC reads it: DRAM / 2."""
    m = build(dl1())
    staged = m.path("gaudi0", "host:0") + m.path("host:0", "efa0")
    assert staged.count(LinkUse("dram:0", "rw")) == 2
    small_dram = build(dl1(), cost=None, overrides={"dram.efficiency": "0.05"})
    staged2 = small_dram.path("gaudi0", "host:0") + small_dram.path("host:0", "efa0")
    assert small_dram.bottleneck(staged2) == pytest.approx(140.8e9 * 0.05 / 2)


def test_apu_migration_is_dram_to_dram() -> None:
    """§9.4: VRAM ↔ GTT on an APU is a DRAM-to-DRAM copy, at most DRAM / 2."""
    m = build(apu_laptop())
    path = m.path("apu0", "host:0")
    assert path == [LinkUse("dram:0", "rw"), LinkUse("dram:0", "rw")]
    assert m.bottleneck(path) == pytest.approx(76.8e9 * 0.84 / 2)


def test_display_and_importer_endpoints() -> None:
    m = build(workstation())
    assert m.path("host:0", "display0") == [LinkUse("dram:0", "rw"), LinkUse("pcie:gpu0", "down")]
    assert m.path("gpu0", "display0") == []  # scanout from VRAM stays on the GPU
    assert m.path("gpu0", "mlx5_0") == [LinkUse("pcie:gpu0", "up"), LinkUse("pcie:mlx5_0", "down")]
    with pytest.raises(KeyError):
        m.path("gpu0", "gpu9")
    with pytest.raises(KeyError):
        m.path("gpu0", "host:1")


def test_directed_capacities_name_each_direction() -> None:
    caps = build(dl1()).directed_capacities()
    assert caps["pcie:sw0/up"] == pytest.approx(GEN3)
    assert caps["upi:0-1/0->1"] == 41.6e9
    assert caps["dram:1/rw"] == pytest.approx(140.8e9 * 0.84)


def test_link_overrides() -> None:
    spec = dl1()
    data = spec.model_dump()
    data["switches"][0]["link"] = {"up": "10GB/s", "latency": "500ns"}
    m = build(PlatformSpec.model_validate(data))
    assert m.links["pcie:sw0"].capacity == {"up": 10e9, "down": pytest.approx(GEN3)}
    assert m.latency(m.path("gaudi0", "host:0")) == pytest.approx(5e-7)


# -- P2P path classes (kernel P2PDMA) ------------------------------------------------------------


def test_dl1_gaudi_efa_crosses_whitelisted_root_complex() -> None:
    """§9.1: Gaudi ↔ EFA goes through the root complex, allowed because the Skylake-E host
    bridge is whitelisted (K-83); the same pair is THRU_HOST_BRIDGE in the kernel model."""
    m = build(dl1(), "5.16")
    assert m.p2p_path_class("gaudi0", "efa0") == "root_complex"
    path = m.pcie_path("efa0", "gaudi0")
    assert [hb.rc_class for hb in path.host_bridges] == ["intel_server"]
    assert path.p2p_bridge is not None and path.switches == 1
    provider = m.pdevs["gaudi0"]
    client = m.nics["efa0"].dev
    assert pci_p2pdma_distance(provider, client) == 6  # 3 hops up + the EFA's root port chain
    assert pci_p2pdma_map_type(provider, client) is PciP2pdmaMapType.THRU_HOST_BRIDGE
    # the other socket's host bridge is listed too, without the same-bridge flag
    assert m.p2p_path_class("gaudi0", "efa3") == "cross_socket"
    assert m.pcie_path("efa3", "gaudi0").sockets == 1
    # Gaudi ↔ Gaudi below one switch: bus-address P2P at distance 4 (K-56)
    assert m.p2p_path_class("gaudi0", "gaudi1") == "switch"
    assert pci_p2pdma_distance(provider, m.pdevs["gaudi1"]) == 4


@pytest.mark.parametrize("profile", PROFILES)
def test_k132_machine_takes_the_whitelist_lookup_rule_from_the_profile(profile: str) -> None:
    """K-132: the release decides whether ``pci_host_bridge_dev`` accepts a Root Port at any
    devfn (v5.19 on); 5.16 is the one preset before it. dl1's host bridges have a 00.0
    function, so its paths are the same under both rules."""
    m = build(dl1(), profile)
    assert m.pci.whitelist_root_port is (profile != "5.16")
    assert m.pci.whitelist_root_port is get_profile(profile).p2pdma_whitelist_root_port
    assert m.p2p_path_class("gaudi0", "efa0") == "root_complex"


def test_k132_a_root_port_first_at_a_later_devfn_identifies_the_bridge_from_5_19() -> None:
    """K-132: ``root_port_slot`` builds a root bus without a 00.0 function whose first function
    is the Root Port carrying the IDs, at that device number; the children's root ports come
    after it, so it stays first. Whitelisted through it from 5.19 (6.12 on), not under 5.16."""
    spec = dl1()
    bridges = tuple(hb.model_copy(update={"root_port_slot": 2}) for hb in spec.host_bridges)
    spec = spec.model_copy(update={"host_bridges": bridges})
    new, old = build(spec, "6.12"), build(spec, "5.16")
    bus = new.pci.host_bridges[0].bus
    assert [d.devfn >> 3 for d in bus.devices][:2] == [2, 3]
    hb = spec.host_bridges[0]
    assert (bus.devices[0].vendor, bus.devices[0].device) == (hb.vendor, hb.device)
    assert new.pci.host_bridges[0].pci_host_bridge_dev() is bus.devices[0]
    assert old.pci.host_bridges[0].pci_host_bridge_dev() is None
    assert new.p2p_path_class("gaudi0", "efa0") == "root_complex"
    assert old.p2p_path_class("gaudi0", "efa0") is None


@pytest.mark.parametrize("slot", [-1, 32])
def test_k132_root_port_slot_is_a_device_number(slot: int) -> None:
    with pytest.raises(ValidationError, match="root_port_slot"):
        HostBridgeSpec(name="rc0", root_port_slot=slot)


INTEL_CLIENT_HB = 0x4660
"""An Intel desktop host bridge ID that no release's P2PDMA whitelist holds (K-133 … K-135)."""


@pytest.mark.parametrize("profile", [*PROFILES, "next"])
def test_dl1_with_unlisted_host_bridge_refuses_p2p(profile: str) -> None:
    """K-83: an Intel host bridge not on the whitelist: P2PDMA distance -1 (K-55)."""
    m = build(dl1(host_bridge_device=INTEL_CLIENT_HB), profile)
    assert m.p2p_path_class("gaudi0", "efa0") is None
    assert m.p2p_capacity("gaudi0", "efa0") is None
    # below one switch no host bridge is involved
    assert m.p2p_path_class("gaudi0", "gaudi1") == "switch"


@pytest.mark.parametrize("profile", [*PROFILES, "6.14", "6.19", "next"])
def test_k133_machine_takes_the_whitelist_table_from_the_profile(profile: str) -> None:
    """K-133 … K-135: a platform without its own list gets its kernel release's table, read off
    the profile (``p2pdma_whitelist``); a platform's own list replaces it in every release."""
    m = build(dl1(), profile)
    assert m.pci.whitelist == pci_p2pdma_whitelist(get_profile(profile).p2pdma_whitelist)
    data = dl1().model_dump()
    data["p2pdma_whitelist"] = [{"vendor": 0x8086, "device": "any"}]
    own = build(PlatformSpec.model_validate(data), profile)
    assert own.pci.whitelist == (P2pdmaWhitelistEntry(0x8086, PCI_ANY_ID),)


@pytest.mark.parametrize("profile", [*PROFILES, "next"])
def test_k133_ice_lake_xeon_root_complex_p2p_from_v5_18(profile: str) -> None:
    """K-133: dl1 with the 0x09a2 root-bus device of Xeons since Ice Lake-SP: Gaudi ↔ EFA through
    the root complex is refused by 5.16 (before v5.18) and allowed by every later preset."""
    m = build(dl1(host_bridge_device=0x09A2), profile)
    expected = None if profile == "5.16" else "root_complex"
    assert m.p2p_path_class("gaudi0", "efa0") == expected
    assert m.p2p_path_class("gaudi0", "gaudi1") == "switch"


def test_dl1_efa_behind_switch_is_bus_address_p2p() -> None:
    """§9.1 variant: one EFA behind each Gaudi-pair switch (distance 4, K-56)."""
    m = build(dl1(efa_behind_switch=True))
    assert m.p2p_path_class("gaudi0", "efa0") == "switch"
    assert pci_p2pdma_distance(m.pdevs["gaudi0"], m.nics["efa0"].dev) == 4
    assert m.path("gaudi0", "efa0") == [
        LinkUse("mem:gaudi0", "rw"),
        LinkUse("pcie:gaudi0", "up"),
        LinkUse("pcie:efa0", "down"),
    ]
    assert m.p2p_path_class("gaudi2", "efa0") == "root_complex"


def test_acs_redirect_forces_the_root_complex() -> None:
    """K-57: ACS redirect on the switch's downstream ports routes peer traffic up to the host
    bridge (still allowed: whitelisted), and the path goes through the switch uplink."""
    data = dl1(efa_behind_switch=True).model_dump()
    data["switches"][0]["acs_redirect"] = True
    m = build(PlatformSpec.model_validate(data))
    assert m.p2p_path_class("gaudi0", "efa0") == "root_complex"
    assert LinkUse("pcie:sw0", "up") in m.path("gaudi0", "efa0")
    assert LinkUse("pcie:sw0", "down") in m.path("gaudi0", "efa0")


def test_p2p_capacity_dl1() -> None:
    """§1 item 3 from mechanisms: through the Cascade Lake root complex the EFA's reads of
    Gaudi memory are capped by the host bridge's P2P read forwarding (pcie.rc.intel_server),
    its writes by the P2P write forwarding; behind one switch only the EFA's port binds."""
    m = build(dl1())
    rc = m.cost.pcie.rc.intel_server
    assert m.p2p_capacity("gaudi0", "efa0", nic_reads=True) == pytest.approx(rc.read_limit)
    assert m.p2p_capacity("gaudi0", "efa0") == pytest.approx(min(rc.write_limit, EFA_WIRE))
    m2 = build(dl1(efa_behind_switch=True))
    assert m2.p2p_capacity("gaudi0", "efa0") == pytest.approx(EFA_WIRE)
    assert m2.p2p_capacity("gaudi0", "efa0", nic_reads=True) == pytest.approx(EFA_WIRE)
    # a tighter forwarding limit moves the root-port capacity, the switch path not at all
    m3 = build(dl1(), overrides={"pcie.rc.intel_server.read_limit": "5GB/s"})
    assert m3.p2p_capacity("gaudi0", "efa0", nic_reads=True) == pytest.approx(5e9)


def test_pcie_path_describes_the_route() -> None:
    """Machine.pcie_path: links in order with gen/width/MPS/direction, switches, host bridges
    and their CPU class, socket crossings, the initiator's MRRS."""
    m = build(dl1(efa_behind_switch=True))
    p = m.pcie_path("efa0", "gaudi0")
    assert [(x.name, x.direction) for x in p.links] == [
        ("pcie:efa0", "up"),
        ("pcie:gaudi0", "down"),
    ]
    assert (p.switches, p.host_bridges, p.sockets, p.target_kind) == (1, (), 0, "device")
    assert (p.mps, p.mrrs) == (256, 512)
    host = m.pcie_path("efa0", "host:0")
    assert host.target_kind == "host" and host.switches == 1
    assert [x.name for x in host.links] == ["pcie:efa0", "pcie:sw0"]
    assert host.host_bridges[0].p2p is False
    far = m.pcie_path("efa0", "host:1")
    assert far.sockets == 1 and far.socket_link == pytest.approx(41.6e9)
    lat = m.cost.pcie.lat
    assert pcie_model.read_latency(m.cost, far) == pytest.approx(
        lat.host_read + lat.switch + lat.remote_socket
    )
    with pytest.raises(KeyError):
        m.pcie_path("host:0", "gaudi0")


def test_workstation_p2p_amd_allowed_intel_refused() -> None:
    """§9.3 / K-83: on an AMD Zen host, host-bridge P2P is allowed (cpu_supports_p2pdma) and
    forwarded (pcie.rc.amd_zen); on an Intel client host bridge (not whitelisted) P2PDMA
    refuses → migrate-to-host, and its root ports would not forward the NIC's reads anyway."""
    amd = build(workstation(cpu="amd"))
    assert amd.p2p_path_class("gpu0", "mlx5_0") == "root_complex"
    path = amd.pcie_path("mlx5_0", "gpu0")
    assert path.p2p_bridge is not None and path.p2p_bridge.rc_class == "amd_zen"
    assert pcie_model.p2p_reads_forwarded(amd.cost, path)
    assert amd.p2p_path_class("gpu0", "display0") == "local"
    intel = build(workstation(cpu="intel"))
    assert intel.p2p_path_class("gpu0", "mlx5_0") is None
    ipath = intel.pcie_path("mlx5_0", "gpu0")
    assert ipath.p2p_bridge is not None and ipath.p2p_bridge.rc_class == "intel_client"
    assert not pcie_model.p2p_reads_forwarded(intel.cost, ipath)
    assert pcie_model.p2p_writes_forwarded(intel.cost, ipath)
    assert pcie_model.read_rate(intel.cost, ipath, 256) == 0.0


def test_p2pdma_switch_follows_the_kernel_profile() -> None:
    """K-55: without CONFIG_PCI_P2PDMA every distance is -1."""
    kernel = Kernel(get_profile("6.16", pci_p2pdma=False))
    m = build(dl1(efa_behind_switch=True), kernel)
    assert m.kernel is kernel
    assert m.pci.p2pdma_enabled is False
    assert m.p2p_path_class("gaudi0", "efa0") is None


def test_build_cost_precedence() -> None:
    """Platform cost overrides beat the base cost; ``overrides`` (the user's) beat both."""
    base = CostModel().with_overrides({"pcie.lat.switch": "0.2us"})
    data = workstation().model_dump()
    data["cost_overrides"] = {"pcie.lat.switch": "0.3us"}
    spec = PlatformSpec.model_validate(data)
    assert build(spec, cost=base).cost.pcie.lat.switch == pytest.approx(0.3e-6)
    m = build(spec, cost=base, overrides={"pcie.lat.switch": "0.4us"})
    assert m.cost.pcie.lat.switch == pytest.approx(0.4e-6)
    assert build(dl1(), cost=base).cost.pcie.lat.switch == pytest.approx(0.2e-6)


# -- cluster --------------------------------------------------------------------------------------


def test_cluster_16_has_128_accelerators() -> None:
    """The debate's 128-chip cluster: 16 DL1-like nodes, one kernel per node."""
    spec = cluster(nodes=16)
    assert spec.accelerators == 128
    assert spec.device_memory == 128 * 32 * GiB
    start = time.perf_counter()
    c = build_cluster(spec, "6.16")
    assert c.built == 0  # lazy
    machines = dict(c.machines())
    elapsed = time.perf_counter() - start
    assert len(machines) == 16 and c.built == 16
    assert sum(len(m.exporters) for m in machines.values()) == 128
    kernels = {id(m.kernel) for m in machines.values()}
    assert len(kernels) == 16
    assert {m.kernel.profile.name for m in machines.values()} == {"6.16"}
    assert elapsed < 5  # generous; the real cost is a few ms (benchmarks are elsewhere)


def test_cluster_paths() -> None:
    c = build_cluster(cluster(nodes=4), "5.16")
    assert c.names == ("node0", "node1", "node2", "node3")
    path = c.path("node0", "efa1", "node3", "efa2")
    assert path == [LinkUse("node0/net:efa1", "tx"), LinkUse("node3/net:efa2", "rx")]
    assert c.link("node3/net:efa2").capacity["rx"] == pytest.approx(EFA_WIRE)
    local = c.path("node1", "gaudi0", "node1", "efa0")
    assert local[0] == LinkUse("node1/mem:gaudi0", "rw")
    assert c.built == 3
    shared = build_cluster(cluster(nodes=2, core_bandwidth=100e9))
    assert LinkUse("fabric:core", "xfer") in shared.path("node0", "efa0", "node1", "efa0")
    assert shared.profile.name == "5.16"  # the DL1 preset's suggested kernel
    with pytest.raises(TypeError):
        build_cluster(cluster(nodes=2), Kernel("6.16"))  # type: ignore[arg-type]


def test_cluster_nodes_by_name_or_index_and_unknown_names() -> None:
    c = build_cluster(cluster(nodes=12), "6.16")
    assert c.names[3] == "node03"
    assert c.machine(3) is c.machine("node03")
    assert c.built == 1
    with pytest.raises(KeyError, match="no node named 'node3' in cluster"):
        c.machine("node3")  # the names are zero-padded
    with pytest.raises(KeyError, match="no node named 'node12'"):
        c.machine("node12")
    assert c.built == 1


def test_cluster_nodes_share_links_and_routes_a_lone_machine_computes_alike() -> None:
    """A cluster's nodes are built alike, so one node's links, PCIe tree, routes and NIC-end
    rates serve all (Machine.share_with); each is what a machine built alone has."""
    c = build_cluster(cluster(nodes=3), "6.16")
    node0, node1, node2 = (c.machine(i) for i in range(3))
    alone = build(c.spec.node, Kernel(c.profile), c.base_cost, overrides=c.overrides)
    nic = node0.spec.nics[0].name
    for dev in [d.name for d in node0.spec.devices]:
        for machine in (node2, node0, node1):  # the first to ask computes, the others reuse
            assert machine.path(dev, nic) == alone.path(dev, nic)
            assert machine.path(machine.host_of(nic), dev) == alone.path(alone.host_of(nic), dev)
            assert machine.pcie_path(nic, dev) == alone.pcie_path(nic, dev)
            end = machine.nic_end(nic, dev, 1 << 20, write=False)
            assert end == alone.nic_end(nic, dev, 1 << 20, write=False)
        assert node1.pcie_path(nic, dev) is node2.pcie_path(nic, dev)
    assert alone.pcie_path(nic, "host:0") is not node0.pcie_path(nic, "host:0")
    # one link graph and tree for the cluster, equal to a lone machine's; kernels their own
    assert node1.links is node0.links and node2.links is node0.links
    assert {n: repr(link) for n, link in node2.links.items()} == {
        n: repr(link) for n, link in alone.links.items()
    }
    assert node2.links is not alone.links
    assert node2._nodes is node0._nodes

    def tree(m: Machine) -> dict[str, tuple[object, ...]]:
        return {
            n: (t.kind, t.socket, t.uplink, t.depth, t.mps, t.mrrs) for n, t in m._nodes.items()
        }

    assert tree(node2) == tree(alone)
    assert node1.kernel is not node0.kernel and node1.pdevs[nic] is not node0.pdevs[nic]


def test_driver_options_reach_the_drivers() -> None:
    """NIC and device options pass through; a driver's refusal is a one-line ConfigError."""
    data = dl1().model_dump()
    data["nics"][0]["driver_options"] = {"revocable": True}
    spec = PlatformSpec.model_validate(data)
    assert build(spec, "7.1").nics["efa0"] is not None
    with pytest.raises(ConfigError, match=r"^platform dl1: nics\[0\] \(efa0\): revocable"):
        build(spec, "6.16")


@pytest.mark.parametrize(
    ("group", "options", "message"),
    [
        (
            "nics",
            {"colour": "red"},
            r"nics\.0\.driver_options\n.*expected an option of driver 'efa' \(rdma_write, "
            r"revocable\), found 'colour'",
        ),
        (
            "nics",
            {"rdma_write": "false"},
            r"nics\.0\.driver_options\.rdma_write\n.*expected true or false, found 'false'",
        ),
        (
            "devices",
            {"dram_page_size": True},
            r"devices\.0\.driver_options\.dram_page_size\n"
            r".*expected a whole number >= 0, found true",
        ),
    ],
)
def test_driver_options_are_checked_against_the_drivers_constructor(
    group: str, options: dict[str, object], message: str
) -> None:
    """An option the driver's constructor does not take, or of another type, is the spec's
    error at its field -- not a TypeError of the build, nor a string read as true."""
    data = dl1().model_dump()
    data[group][0]["driver_options"] = options
    with pytest.raises(ValidationError, match=message):
        PlatformSpec.model_validate(data)
    data = p4d().model_dump()
    data["devices"][0]["driver_options"] = {"strict_p2p": True}
    gpu = build(PlatformSpec.model_validate(data)).exporters["gpu0"]
    assert isinstance(gpu, NvidiaComputeDevice) and gpu.strict_p2p


# -- NIC models on presets; the perftest machines ----------------------------------------------


def test_a_nic_model_is_selectable_on_the_presets() -> None:
    """issue 11: a ConnectX family selectable on any preset (NicSpec.model)."""
    from pinlab.drivers.mlx5 import Mlx5Device

    m = build(dl1(nic="cx7"))
    assert set(m.nics) == {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}
    assert all(isinstance(n, Mlx5Device) for n in m.nics.values())
    port = m.nic_port_model("mlx5_0")
    assert (port.model_name, port.line_rate, port.link_layer) == ("cx7", 50e9, "ib")
    assert build(p4d()).nic_port_model("efa0").model_name == "efa"  # the driver's default
    assert build(p4d(nic="cx6")).nic_port_model("mlx5_2").model_name == "cx6"
    assert build(workstation(nic_model="cx6")).nic_port_model("mlx5_0").line_rate == 25e9
    assert cluster(nodes=2, nic="cx5").node.nics[0].model == "cx5"
    # a platform entry's line rate, link layer and MTU win over the model's
    data = workstation().model_dump()
    data["nics"][0].update(line_rate="25Gbps", link_layer="roce", mtu=1024)
    port = build(PlatformSpec.model_validate(data)).nic_port_model("mlx5_0")
    assert (port.line_rate, port.link_layer, port.mtu) == (25e9 / 8, "roce", 1024)


def test_cx_pair_and_workstation_amd() -> None:
    from pinlab.platform import cx_pair, workstation_amd

    pair = cx_pair(nic="cx7", link="roce", gpu="h200", nic_name="mlx5_3")
    assert pair.nodes == 2 and pair.fabric.latency == pytest.approx(10e-9)
    m = build(pair.node)
    assert m.nic_port_model("mlx5_3").link_layer == "roce"
    assert m.links["pcie:mlx5_3"].gen == 5
    assert m.spec.device("gpu0").bar_read == "h200"
    assert m.p2p_path_class("gpu0", "mlx5_3") == "switch"
    far = build(cx_pair(gpu="a100", gpu_distance="cross_socket").node)
    assert far.p2p_path_class("gpu0", "mlx5_0") == "cross_socket"
    amd = build(workstation_amd())
    assert amd.p2p_path_class("gpu0", "mlx5_0") == "root_complex"
    assert build(workstation_amd(slots="switch")).p2p_path_class("gpu0", "mlx5_0") == "switch"
    assert build(workstation_amd(cpu="intel-client")).p2p_path_class("gpu0", "mlx5_0") is None
    data = cx_pair(gpu="a100").node.model_dump()
    data["devices"][0]["bar_read"] = "v100"
    with pytest.raises(ValidationError, match=r"expected a pcie\.bar_read row"):
        PlatformSpec.model_validate(data)
