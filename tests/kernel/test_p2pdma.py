"""PCI tree and P2PDMA distance (kernel-semantics.md §8; K-55 … K-58, K-83 … K-85,
K-132 … K-135)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.kernel import p2pdma as p2pdma_mod
from pinlab.kernel.device import Device
from pinlab.kernel.p2pdma import (
    PCI_P2PDMA_MAP_BUS_ADDR,
    PCI_P2PDMA_MAP_NOT_SUPPORTED,
    PCI_P2PDMA_MAP_THRU_HOST_BRIDGE,
    PCI_P2PDMA_MAP_UNKNOWN,
    PciP2pdmaMapType,
    calc_map_type_and_dist,
    cpu_supports_p2pdma,
    host_bridge_whitelist,
    map_types_idx,
    pci_p2pdma_distance,
    pci_p2pdma_distance_many,
    pci_p2pdma_map_type,
    pci_p2pdma_setup,
)
from pinlab.kernel.pci import (
    PciDev,
    find_parent_pci_dev,
    pci_upstream_bridge,
)
from pinlab.kernel.pci_ids import (
    PCI_ANY_ID,
    PCI_P2PDMA_WHITELIST_V5_17,
    PCI_P2PDMA_WHITELIST_V5_18,
    PCI_P2PDMA_WHITELIST_V7_1,
    PCI_P2PDMA_WHITELIST_V7_2,
    PCI_VENDOR_ID_GOOGLE,
    PCI_VENDOR_ID_INTEL,
    X86_VENDOR_AMD,
    X86_VENDOR_INTEL,
    P2pdmaWhitelistEntry,
    P2pdmaWhitelistFlag,
    P2pdmaWhitelistRelease,
    p2pdma_whitelist_release,
    pci_p2pdma_whitelist,
    pci_p2pdma_whitelist_lookup,
)
from pinlab.kernel.pci_regs import PciAcs, PciExpType
from pinlab.kernel.pci_topology import PciTopology

SKYLAKE_E = 0x2020  # whitelisted, no flag
SKYLAKE_E_2 = 0x2030  # whitelisted, no flag
XEON_E5 = 0x3C00  # whitelisted, REQ_SAME_HOST_BRIDGE
XEON_E5_V3 = 0x2F00  # whitelisted, REQ_SAME_HOST_BRIDGE
INTEL_CLIENT = 0x4660  # an Intel desktop host bridge that no release's list holds
REDIR_BITS = (PciAcs.RR, PciAcs.CR, PciAcs.EC)


@dataclass
class Box:
    """One host bridge with a switch (two endpoints, one of them two-function) and a lone NIC.

    ::

        hb (00:00.0) ─ rp0 ─ sw ─ dsp0 ─ gpu (fn 0, fn 1)
                           │    └ dsp1 ─ nic
                           └ rp1 ─ nic2
    """

    topo: PciTopology
    rp0: PciDev
    sw: PciDev
    gpu: PciDev
    nic: PciDev
    rp1: PciDev
    nic2: PciDev


def make_box(
    *,
    hb_device: int = INTEL_CLIENT,
    cpu_vendor: str = X86_VENDOR_INTEL,
    cpu_family: int = 6,
    p2pdma_enabled: bool = True,
) -> Box:
    topo = PciTopology(cpu_vendor=cpu_vendor, cpu_family=cpu_family, p2pdma_enabled=p2pdma_enabled)
    hb = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, hb_device, label="hb0")
    rp0 = hb.add_root_port(label="rp0")
    sw = rp0.add_switch(2, label="sw")
    gpu = sw.downstream_ports[0].add_endpoint(functions=2, label="gpu")
    nic = sw.downstream_ports[1].add_endpoint(label="nic")
    rp1 = hb.add_root_port(label="rp1")
    nic2 = rp1.add_endpoint(label="nic2")
    return Box(topo, rp0, sw, gpu, nic, rp1, nic2)


def two_host_bridges(
    dev_a: int, dev_b: int, *, cpu_vendor: str = X86_VENDOR_INTEL, cpu_family: int = 6
) -> tuple[PciTopology, PciDev, PciDev]:
    """One endpoint below each of two host bridges (a two-socket server)."""
    topo = PciTopology(cpu_vendor=cpu_vendor, cpu_family=cpu_family)
    a = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, dev_a).add_root_port().add_endpoint()
    b = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, dev_b).add_root_port().add_endpoint()
    return topo, a, b


# --------------------------------------------------------------------------------------------
# The PCI tree itself
# --------------------------------------------------------------------------------------------


def test_pci_tree_names_follow_bdf_and_are_deterministic() -> None:
    box = make_box()
    names = [d.name for d in box.topo]
    assert names == [
        "0000:00:00.0",  # host bridge function
        "0000:00:01.0",  # rp0
        "0000:01:00.0",  # switch upstream port
        "0000:02:00.0",  # dsp0
        "0000:02:01.0",  # dsp1
        "0000:03:00.0",  # gpu fn 0
        "0000:03:00.1",  # gpu fn 1
        "0000:04:00.0",  # nic
        "0000:00:02.0",  # rp1
        "0000:05:00.0",  # nic2
    ]
    assert names == [d.name for d in make_box().topo]
    assert box.gpu.bdf == (0, 3, 0, 0) and box.gpu.function(1).bdf == (0, 3, 0, 1)
    assert box.gpu.functions == (box.gpu, box.gpu.function(1))
    assert box.topo["gpu.1"] is box.gpu.function(1)
    assert box.topo["0000:04:00.0"] is box.nic
    assert box.topo.pci_get_domain_bus_and_slot(0, 4, 0) is box.nic
    assert box.sw.pcie_type is PciExpType.UPSTREAM
    assert [p.pcie_type for p in box.sw.downstream_ports] == [PciExpType.DOWNSTREAM] * 2


def test_pci_tree_parents_and_upstream_bridges() -> None:
    box = make_box()
    dsp0 = box.sw.downstream_ports[0]
    assert box.gpu.parent is dsp0 and pci_upstream_bridge(box.gpu) is dsp0
    assert pci_upstream_bridge(dsp0) is box.sw
    assert pci_upstream_bridge(box.sw) is box.rp0
    assert pci_upstream_bridge(box.rp0) is None  # root bus
    assert box.rp0.parent is box.topo.host_bridges[0]
    assert box.gpu.host_bridge is box.topo.host_bridges[0]
    assert box.topo.host_bridges[0].name == "pci0000:00"


def test_a_bus_hands_out_the_lowest_free_device_number_up_to_31() -> None:
    """Device numbers of a bus: the lowest free one unless a slot is named (K-132 places a
    root port at a later one), each once, 0 to 31."""
    hb = PciTopology().add_host_bridge(None)
    added = [hb.add_root_port(slot=s).devfn >> 3 for s in (3, None, None, None, None)]
    assert added == [3, 0, 1, 2, 4]
    assert [d.devfn >> 3 for d in hb.bus.devices] == [0, 1, 2, 3, 4]  # devfn order
    with pytest.raises(ValueError, match="already has a device 01"):
        hb.add_root_port(slot=1)
    assert [hb.add_root_port().devfn >> 3 for _ in range(27)] == list(range(5, 32))
    with pytest.raises(ValueError, match="no free device number left"):
        hb.add_root_port()
    with pytest.raises(ValueError, match="a PCI device number is 0 to 31, not 32"):
        PciTopology().add_host_bridge(None).add_root_port(slot=32)


def test_pci_link_takes_one_device_and_functions_are_bounded() -> None:
    box = make_box()
    with pytest.raises(ValueError, match="already has a device"):
        box.rp1.add_endpoint()
    with pytest.raises(ValueError, match="root or downstream port"):
        box.nic.add_endpoint()
    with pytest.raises(ValueError, match="functions"):
        box.topo.host_bridges[0].add_root_port().add_endpoint(functions=9)
    with pytest.raises(ValueError, match="upstream port"):
        box.rp0.add_downstream_port()


def test_pci_domains_and_second_host_bridge_numbering() -> None:
    topo = PciTopology()
    hb0 = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, SKYLAKE_E)
    hb0.add_root_port().add_endpoint()
    hb1 = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, SKYLAKE_E)
    hb9 = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, SKYLAKE_E, domain=9)
    assert hb1.name == "pci0000:02" and hb1.bus.number == 2
    ep = hb9.add_root_port().add_endpoint()
    assert ep.name == "0009:01:00.0"
    assert map_types_idx(ep) == (9 << 16) | (1 << 8) | 0


def test_find_parent_pci_dev_walks_device_parents() -> None:
    box = make_box()
    ib_port = Device("mlx5_0", parent=box.nic)
    netdev = Device("ib0", parent=ib_port)
    assert find_parent_pci_dev(netdev) is box.nic
    assert find_parent_pci_dev(box.nic) is box.nic
    assert find_parent_pci_dev(Device("virtual")) is None
    # A device hanging below the host bridge but below no function is not a PCI client.
    assert find_parent_pci_dev(Device("acpi", parent=box.topo.host_bridges[0])) is None


# --------------------------------------------------------------------------------------------
# K-56: distances
# --------------------------------------------------------------------------------------------


def test_k56_distance_same_function_is_0() -> None:
    box = make_box()
    assert pci_p2pdma_distance(box.gpu, box.gpu) == 0
    assert pci_p2pdma_map_type(box.gpu, box.gpu) is PCI_P2PDMA_MAP_BUS_ADDR


def test_k56_distance_two_functions_of_one_device_is_2() -> None:
    box = make_box()
    assert pci_p2pdma_distance(box.gpu, box.gpu.function(1)) == 2
    assert pci_p2pdma_map_type(box.gpu, box.gpu.function(1)) is PCI_P2PDMA_MAP_BUS_ADDR


def test_k56_distance_two_endpoints_below_one_switch_is_4() -> None:
    box = make_box()
    assert pci_p2pdma_distance(box.gpu, box.nic) == 4
    assert pci_p2pdma_distance(box.nic, box.gpu) == 4
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_BUS_ADDR


def test_k56_distance_is_hops_to_common_upstream_bridge() -> None:
    """K-56: nested switches; a port as client; a child device resolved to its function."""
    topo = PciTopology()
    rp = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, INTEL_CLIENT).add_root_port()
    outer = rp.add_switch(2)
    a = outer.downstream_ports[0].add_endpoint()
    inner = outer.downstream_ports[1].add_switch(2)
    b = inner.downstream_ports[1].add_endpoint()
    # a -> dsp -> outer usp (2 hops); b -> dsp -> inner usp -> dsp -> outer usp (4 hops).
    assert pci_p2pdma_distance(a, b) == 6
    assert pci_p2pdma_distance(a, outer) == 2
    assert pci_p2pdma_distance(a, rp) == 3
    assert pci_p2pdma_distance(a, Device("rdma0", parent=b)) == 6
    assert pci_p2pdma_map_type(a, b) is PCI_P2PDMA_MAP_BUS_ADDR


def test_k56_no_common_bridge_distance_counts_both_chains_to_the_host_bridge() -> None:
    """K-56 / §8.2 step 4 [inferred] in the spec, read from the source: chains are summed.

    gpu's chain is gpu, dsp0, usp, rp0 (4 functions); nic2's is nic2, rp1 (2): distance 6.
    """
    box = make_box(hb_device=SKYLAKE_E)
    assert pci_p2pdma_distance(box.gpu, box.nic2) == 6
    assert pci_p2pdma_map_type(box.gpu, box.nic2) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    # Two endpoints on two root ports: 2 + 2.
    rp2 = box.topo.host_bridges[0].add_root_port()
    assert pci_p2pdma_distance(box.nic2, rp2.add_endpoint()) == 4


def test_k56_rcie_endpoints_share_no_upstream_bridge() -> None:
    """Root Complex Integrated Endpoints (an APU iGPU) have no upstream bridge at all."""
    topo = PciTopology(cpu_vendor=X86_VENDOR_AMD, cpu_family=0x19)
    hb = topo.add_host_bridge(0x1022, 0x14D8)
    igpu = hb.add_endpoint(functions=2, label="igpu")
    nic = hb.add_root_port().add_endpoint()
    assert pci_upstream_bridge(igpu) is None and igpu.pcie_type is PciExpType.RC_END
    assert pci_p2pdma_distance(igpu, igpu) == 0
    assert pci_p2pdma_distance(igpu, igpu.function(1)) == 2
    assert pci_p2pdma_map_type(igpu, igpu.function(1)) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    assert pci_p2pdma_distance(igpu, nic) == 3


# --------------------------------------------------------------------------------------------
# K-55: -1 cases
# --------------------------------------------------------------------------------------------


def test_k55_client_without_pci_parent_is_minus_1_and_logged_when_verbose() -> None:
    box = make_box()
    virt = Device("vgem")
    assert pci_p2pdma_distance(box.gpu, virt) == -1
    assert box.topo.log == []
    assert pci_p2pdma_distance(box.gpu, virt, verbose=True) == -1
    assert box.topo.log == ["vgem: cannot be used for peer-to-peer DMA as it is not a PCI device"]
    assert pci_p2pdma_map_type(box.gpu, virt) is PCI_P2PDMA_MAP_NOT_SUPPORTED


def test_k55_p2pdma_disabled_is_minus_1() -> None:
    box = make_box(p2pdma_enabled=False)
    assert pci_p2pdma_distance(box.gpu, box.gpu) == -1
    assert pci_p2pdma_distance(box.gpu, box.nic, verbose=True) == -1
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_NOT_SUPPORTED
    assert box.topo.log == [] and box.gpu.p2pdma is None
    box.topo.p2pdma_enabled = True
    assert pci_p2pdma_distance(box.gpu, box.nic) == 4


def test_k55_host_bridge_path_refused_on_unlisted_intel_is_minus_1() -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    assert pci_p2pdma_distance(box.gpu, box.nic2) == -1
    assert pci_p2pdma_map_type(box.gpu, box.nic2) is PCI_P2PDMA_MAP_NOT_SUPPORTED
    # The no-common-bridge path never prints the whitelist line (warn = acs_redirects = false).
    assert box.topo.log == []
    assert pci_p2pdma_distance(box.gpu, box.nic2, verbose=True) == -1
    assert box.topo.log == [
        "pci 0000:05:00.0: cannot be used for peer-to-peer DMA as the client and provider "
        "(0000:03:00.0) do not share an upstream bridge or whitelisted host bridge"
    ]


def test_k55_provider_must_be_a_pci_function() -> None:
    box = make_box()
    with pytest.raises(TypeError):
        pci_p2pdma_distance(Device("vgem"), box.gpu)  # type: ignore[arg-type]
    other = make_box()
    with pytest.raises(ValueError, match="different PCI topologies"):
        pci_p2pdma_distance(box.gpu, other.nic)


# --------------------------------------------------------------------------------------------
# K-57: ACS redirect
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bit", REDIR_BITS, ids=lambda b: b.name)
def test_k57_acs_redirect_on_path_refused_without_host_bridge_permission(bit: PciAcs) -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    box.sw.downstream_ports[1].acs = bit
    assert pci_p2pdma_distance(box.gpu, box.nic) == -1
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_NOT_SUPPORTED
    # ACS-forced host-bridge path: the whitelist line is printed even without verbose.
    assert box.topo.log == ["pci 0000:00:00.0: Host bridge not in P2PDMA whitelist: 8086:4660"]


@pytest.mark.parametrize("bit", REDIR_BITS, ids=lambda b: b.name)
def test_k57_acs_redirect_allowed_through_whitelisted_host_bridge(bit: PciAcs) -> None:
    box = make_box(hb_device=SKYLAKE_E)
    box.sw.downstream_ports[0].acs = bit
    assert pci_p2pdma_distance(box.gpu, box.nic) == 4  # distance unchanged, map type changes
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    assert box.topo.log == []


def test_k57_acs_redirect_allowed_on_amd_zen() -> None:
    box = make_box(hb_device=INTEL_CLIENT, cpu_vendor=X86_VENDOR_AMD, cpu_family=0x17)
    box.nic.acs = PciAcs.RR | PciAcs.CR
    assert pci_p2pdma_distance(box.gpu, box.nic) == 4
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE


def test_k57_non_redirect_acs_bits_do_not_matter() -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    for port in box.sw.downstream_ports:
        port.acs = PciAcs.SV | PciAcs.TB | PciAcs.UF | PciAcs.DT
    assert pci_p2pdma_distance(box.gpu, box.nic) == 4
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_BUS_ADDR


def test_k57_acs_above_the_common_bridge_is_off_path_but_the_common_bridge_counts() -> None:
    """K-57: ACS is checked up to the common upstream bridge, inclusive on the provider side."""
    box = make_box(hb_device=INTEL_CLIENT)
    box.rp0.acs = PciAcs.REDIR  # above the switch: not on the gpu <-> nic path
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_BUS_ADDR
    box.sw.acs = PciAcs.EC  # the switch upstream port is the common bridge: counted
    assert pci_p2pdma_distance(box.gpu, box.nic) == -1
    assert pci_p2pdma_distance(box.nic, box.gpu) == -1


def test_k57_verbose_lists_the_acs_culprits() -> None:
    box = make_box(hb_device=SKYLAKE_E)
    box.sw.downstream_ports[0].acs = PciAcs.RR
    box.sw.downstream_ports[1].acs = PciAcs.CR
    assert pci_p2pdma_distance(box.gpu, box.nic, verbose=True) == 4
    assert box.topo.log == [
        "pci 0000:04:00.0: ACS redirect is set between the client and provider (0000:03:00.0)",
        "pci 0000:04:00.0: to disable ACS redirect for this path, add the kernel parameter: "
        "pci=disable_acs_redir=0000:02:00.0;0000:02:01.0",
    ]


def test_k57_acs_on_a_multifunction_device_functions() -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    box.gpu.function(1).acs = PciAcs.RR
    assert pci_p2pdma_distance(box.gpu, box.gpu.function(1)) == -1
    assert pci_p2pdma_distance(box.gpu, box.nic) == 4


# --------------------------------------------------------------------------------------------
# K-83: host-bridge rules
# --------------------------------------------------------------------------------------------


def test_k83_whitelisted_vs_unlisted_intel_host_bridge() -> None:
    listed = make_box(hb_device=SKYLAKE_E)
    unlisted = make_box(hb_device=INTEL_CLIENT)
    assert pci_p2pdma_distance(listed.gpu, listed.nic2) == 6
    assert pci_p2pdma_distance(unlisted.gpu, unlisted.nic2) == -1
    assert host_bridge_whitelist(listed.gpu, listed.nic2)
    assert not host_bridge_whitelist(unlisted.gpu, unlisted.nic2)
    assert unlisted.topo.log == []  # warn defaults to off
    assert not host_bridge_whitelist(unlisted.gpu, unlisted.nic2, warn=True)
    assert unlisted.topo.log == ["pci 0000:00:00.0: Host bridge not in P2PDMA whitelist: 8086:4660"]


@pytest.mark.parametrize("family", [0x17, 0x19, 0x1A])
def test_k83_amd_zen_allows_host_bridge_p2p_regardless_of_list(family: int) -> None:
    box = make_box(hb_device=INTEL_CLIENT, cpu_vendor=X86_VENDOR_AMD, cpu_family=family)
    assert cpu_supports_p2pdma(box.topo)
    assert pci_p2pdma_distance(box.gpu, box.nic2) == 6
    assert pci_p2pdma_map_type(box.gpu, box.nic2) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE


@pytest.mark.parametrize(
    ("vendor", "family"), [(X86_VENDOR_AMD, 0x15), (X86_VENDOR_AMD, 0x16), ("HygonGenuine", 0x18)]
)
def test_k83_pre_zen_amd_and_other_vendors_need_the_list(vendor: str, family: int) -> None:
    box = make_box(hb_device=INTEL_CLIENT, cpu_vendor=vendor, cpu_family=family)
    assert not cpu_supports_p2pdma(box.topo)
    assert pci_p2pdma_distance(box.gpu, box.nic2) == -1


def test_k83_different_host_bridges_both_listed_without_flag_allowed() -> None:
    _, a, b = two_host_bridges(SKYLAKE_E, SKYLAKE_E_2)
    assert pci_p2pdma_distance(a, b) == 4
    assert pci_p2pdma_map_type(a, b) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE


@pytest.mark.parametrize(("dev_a", "dev_b"), [(XEON_E5, XEON_E5), (XEON_E5_V3, SKYLAKE_E)])
def test_k83_req_same_host_bridge_refuses_cross_bridge_paths(dev_a: int, dev_b: int) -> None:
    _, a, b = two_host_bridges(dev_a, dev_b)
    assert pci_p2pdma_distance(a, b) == -1
    assert pci_p2pdma_distance(b, a) == -1


def test_k83_req_same_host_bridge_allows_paths_below_that_bridge() -> None:
    box = make_box(hb_device=XEON_E5)
    assert pci_p2pdma_distance(box.gpu, box.nic2) == 6


def test_k83_different_host_bridges_one_unlisted_refused() -> None:
    _, a, b = two_host_bridges(SKYLAKE_E, INTEL_CLIENT)
    assert pci_p2pdma_distance(a, b) == -1
    _, a, b = two_host_bridges(SKYLAKE_E, INTEL_CLIENT, cpu_vendor=X86_VENDOR_AMD, cpu_family=0x19)
    assert pci_p2pdma_distance(a, b) == 4


def test_k83_whitelist_is_a_platform_parameter() -> None:
    assert [(e.device, bool(e.flags)) for e in PCI_P2PDMA_WHITELIST_V5_17] == [
        (0x3C00, True),
        (0x3C01, True),
        (0x2F00, True),
        (0x2F01, True),
        (0x2030, False),
        (0x2031, False),
        (0x2032, False),
        (0x2033, False),
        (0x2020, False),
    ]
    box = make_box(hb_device=0x09A2)
    box.topo.whitelist = PCI_P2PDMA_WHITELIST_V5_17
    assert pci_p2pdma_distance(box.gpu, box.nic2) == -1
    box.topo.whitelist = [*PCI_P2PDMA_WHITELIST_V5_17, P2pdmaWhitelistEntry(0x8086, 0x09A2)]
    assert pci_p2pdma_distance(box.gpu, box.nic2) == 6
    box.topo.whitelist = [P2pdmaWhitelistEntry(0x8086, PCI_ANY_ID)]
    assert pci_p2pdma_distance(box.gpu, box.nic2) == -1  # before v7.1: no wildcard (K-134)
    box.topo.whitelist_any_device = True
    assert pci_p2pdma_distance(box.gpu, box.nic2) == 6
    box.topo.whitelist = [
        P2pdmaWhitelistEntry(0x8086, 0x09A2, P2pdmaWhitelistFlag.REQ_SAME_HOST_BRIDGE)
    ]
    assert pci_p2pdma_distance(box.gpu, box.nic2) == 6  # same host bridge


def test_k83_host_bridge_without_00_0_function_is_never_listed() -> None:
    topo = PciTopology()
    hb = topo.add_host_bridge(None)
    a = hb.add_root_port(vendor=0x8086, device=0x1901).add_endpoint()
    b = hb.add_root_port().add_endpoint()
    assert hb.vendor == 0x8086  # pci_host_bridge_dev() sees the root port at 00.0
    assert pci_p2pdma_distance(a, b) == -1
    topo.whitelist = [P2pdmaWhitelistEntry(0x8086, 0x1901)]
    assert pci_p2pdma_distance(a, b) == 4


def test_k83_root_bus_without_any_function_is_never_listed() -> None:
    """K-83: ``pci_host_bridge_dev()`` finds nothing, so no whitelist entry can match."""
    topo = PciTopology()
    empty = topo.add_host_bridge(None)
    assert empty.pci_host_bridge_dev() is None
    topo.whitelist = [P2pdmaWhitelistEntry(PCI_VENDOR_ID_INTEL, PCI_ANY_ID)]
    assert not p2pdma_mod._host_bridge_listed(empty, True, True)
    assert not p2pdma_mod._host_bridge_listed(empty, False, True)
    assert topo.log == []  # no function to name in a warning


# --------------------------------------------------------------------------------------------
# K-132: which root-bus function the whitelist sees (v5.19: a Root Port at any devfn)
# --------------------------------------------------------------------------------------------

SKYLAKE_E_RP_B = 0x2031  # Skylake-E Root Port B: whitelisted, no flag
SKYLAKE_E_RP_C = 0x2032


def skylake_root_bus(*, whitelist_root_port: bool) -> tuple[PciTopology, PciDev, PciDev, PciDev]:
    """A Skylake-E root bus with no host bridge function and Root Port A absent: the first
    function is Root Port B at 00:01.0, Root Port C is at 00:02.0, one endpoint below each."""
    topo = PciTopology(whitelist_root_port=whitelist_root_port)
    hb = topo.add_host_bridge(None)
    rp_b = hb.add_root_port(vendor=PCI_VENDOR_ID_INTEL, device=SKYLAKE_E_RP_B, slot=1)
    rp_c = hb.add_root_port(vendor=PCI_VENDOR_ID_INTEL, device=SKYLAKE_E_RP_C, slot=2)
    return topo, rp_b, rp_b.add_endpoint(), rp_c.add_endpoint()


def test_k132_v5_19_identifies_a_first_root_port_at_any_devfn() -> None:
    """K-132 (v5.19 on): the root bus's first function is a Root Port at devfn 01.0, so the
    whitelist sees its IDs; 0x2031 is listed, and the two endpoints on different root ports
    talk through the host bridge (distance 4, THRU_HOST_BRIDGE)."""
    topo, rp_b, a, b = skylake_root_bus(whitelist_root_port=True)
    host = rp_b.bus.host_bridge
    assert rp_b.name == "0000:00:01.0" and host.bus.devices[0] is rp_b
    assert host.pci_host_bridge_dev() is rp_b
    assert (host.vendor, host.device) == (PCI_VENDOR_ID_INTEL, SKYLAKE_E_RP_B)
    assert pci_p2pdma_distance(a, b) == 4
    assert pci_p2pdma_map_type(a, b) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    assert topo.log == []


def test_k132_before_v5_19_only_devfn_00_0_is_looked_at() -> None:
    """K-132 (before v5.19, preset 5.16): the same root bus has no function at 00.0, so
    ``pci_host_bridge_dev`` finds nothing, no entry can match (and nothing is logged even
    verbosely: there is no function to name), and the pair is refused (K-55)."""
    topo, rp_b, a, b = skylake_root_bus(whitelist_root_port=False)
    host = rp_b.bus.host_bridge
    assert host.pci_host_bridge_dev() is None and host.vendor is None
    assert pci_p2pdma_distance(a, b) == -1
    assert pci_p2pdma_map_type(a, b) is PCI_P2PDMA_MAP_NOT_SUPPORTED
    assert pci_p2pdma_distance(a, b, verbose=True) == -1
    assert not any("not in P2PDMA whitelist" in line for line in topo.log)
    assert repr(host) == "<PciHostBridge pci0000:00 no whitelist fn>"


@pytest.mark.parametrize("whitelist_root_port", [False, True])
def test_k132_a_first_function_at_00_0_is_used_by_both_rules(whitelist_root_port: bool) -> None:
    """K-132, K-83: the first function in devfn order, not in creation order: an RCiEP added
    after a root port at slot 3 takes the free slot 0 and becomes the function the whitelist
    sees under either rule."""
    topo = PciTopology(whitelist_root_port=whitelist_root_port)
    hb = topo.add_host_bridge(None)
    rp = hb.add_root_port(vendor=PCI_VENDOR_ID_INTEL, device=SKYLAKE_E_RP_B, slot=3)
    rciep = hb.add_endpoint(vendor=PCI_VENDOR_ID_INTEL, device=INTEL_CLIENT)
    assert rciep.name == "0000:00:00.0" and hb.bus.devices == [rciep, rp]
    assert hb.pci_host_bridge_dev() is rciep
    assert (hb.vendor, hb.device) == (PCI_VENDOR_ID_INTEL, INTEL_CLIENT)


def test_k132_switching_the_rule_invalidates_cached_map_types() -> None:
    """K-132, K-84: the lookup rule is a fact the cached answers depend on; changing it bumps
    the topology generation and the next query recalculates."""
    topo, _, a, b = skylake_root_bus(whitelist_root_port=False)
    assert pci_p2pdma_distance(a, b) == -1
    before = topo.generation
    topo.whitelist_root_port = True
    assert topo.generation == before + 1
    assert pci_p2pdma_distance(a, b) == 4


def test_k132_root_port_slots_are_checked() -> None:
    """An explicit device number must be free and within 0..31."""
    topo = PciTopology()
    hb = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, SKYLAKE_E)
    with pytest.raises(ValueError, match="already has a device 00"):
        hb.add_root_port(slot=0)
    with pytest.raises(ValueError, match="0 to 31"):
        hb.add_root_port(slot=32)
    assert hb.add_root_port(slot=5).name == "0000:00:05.0"
    assert hb.add_root_port().name == "0000:00:01.0"


# --------------------------------------------------------------------------------------------
# K-133 … K-135: the whitelist each release compiles in
# --------------------------------------------------------------------------------------------

ICX_ROOT = 0x09A2  # first root-bus device of every Xeon since Ice Lake-SP
GOOGLE_SOC = 0x0050  # some Google root-bus device: only the vendor matters from v7.1
XEON_ACCELERATORS = (0x0B25, 0x0CFE, 0x11FB, 0x1212, 0x1216, 0x4940, 0x4942, 0x4944, 0x4946, 0x4948)
"""DSA/IAX (SPR), DSA (GNR-D), DSA/IAA (DMR), QAT 4xxx/401xx/402xx/420xx/6xxx."""


def _ids(table: tuple[P2pdmaWhitelistEntry, ...]) -> set[tuple[int, int, bool]]:
    return {(e.vendor, e.device, bool(e.flags)) for e in table}


def test_k133_k135_each_release_names_its_table() -> None:
    """K-133, K-134, K-135: the profile's ``P2pdmaWhitelistRelease`` picks the table; each one
    extends the one before it, so only the added entries change an answer."""
    assert [pci_p2pdma_whitelist(r) for r in P2pdmaWhitelistRelease] == [
        PCI_P2PDMA_WHITELIST_V5_17,
        PCI_P2PDMA_WHITELIST_V5_18,
        PCI_P2PDMA_WHITELIST_V7_1,
        PCI_P2PDMA_WHITELIST_V7_2,
    ]
    assert _ids(PCI_P2PDMA_WHITELIST_V5_18) - _ids(PCI_P2PDMA_WHITELIST_V5_17) == {
        (PCI_VENDOR_ID_INTEL, ICX_ROOT, False)
    }
    assert _ids(PCI_P2PDMA_WHITELIST_V7_1) - _ids(PCI_P2PDMA_WHITELIST_V5_18) == {
        (PCI_VENDOR_ID_GOOGLE, PCI_ANY_ID, False)
    }
    assert _ids(PCI_P2PDMA_WHITELIST_V7_2) - _ids(PCI_P2PDMA_WHITELIST_V7_1) == {
        (PCI_VENDOR_ID_INTEL, device, False) for device in XEON_ACCELERATORS
    }
    for older, newer in zip(
        list(P2pdmaWhitelistRelease), list(P2pdmaWhitelistRelease)[1:], strict=False
    ):
        assert _ids(pci_p2pdma_whitelist(older)) < _ids(pci_p2pdma_whitelist(newer))
    assert PciTopology().whitelist == PCI_P2PDMA_WHITELIST_V5_18


@pytest.mark.parametrize(
    ("version", "release"),
    [
        ((5, 17, 15), "5.17"),
        ((5, 18, 0), "5.18"),
        ((6, 8, 0), "5.18"),
        ((7, 0, 9), "5.18"),
        ((7, 1, 0), "7.1"),
        ((7, 1, 2), "7.1"),
        ((7, 1, 3), "7.2"),  # the stable backport of K-135
        ((7, 2, 0), "7.2"),
        ((8, 0, 0), "7.2"),
    ],
)
def test_k133_k135_a_release_number_names_its_table(
    version: tuple[int, int, int], release: str
) -> None:
    assert p2pdma_whitelist_release(version) is P2pdmaWhitelistRelease(release)


def test_k83_the_first_matching_entry_decides() -> None:
    """K-83: ``__host_bridge_whitelist`` stops at the first entry with the bridge's IDs; a
    wildcard entry (K-134) matches any device of its vendor; an unlisted bridge has none."""
    same = P2pdmaWhitelistEntry(0x8086, 0x2030, P2pdmaWhitelistFlag.REQ_SAME_HOST_BRIDGE)
    table = (same, P2pdmaWhitelistEntry(0x8086, 0x2030), P2pdmaWhitelistEntry(0x1AE0, PCI_ANY_ID))
    for any_device in (True, False):
        assert pci_p2pdma_whitelist_lookup(table, 0x8086, 0x2030, any_device=any_device) is same
        assert pci_p2pdma_whitelist_lookup(table, 0x8086, 0x2031, any_device=any_device) is None
    assert pci_p2pdma_whitelist_lookup(table, 0x1AE0, 0x1234, any_device=True) is table[2]


def test_k134_a_wildcard_device_is_every_device_only_from_v7_1() -> None:
    """K-134: "PCI/P2PDMA: Allow wildcard Device IDs in host bridge list" came in v7.1; before
    it the lookup compares device IDs as they are, so a ``PCI_ANY_ID`` entry (a platform's own
    list) matches no real device. The release says which (``any_device``), the machine built
    from a profile gets it, and a Google host bridge under a wildcard entry is listed only
    then."""
    google = P2pdmaWhitelistEntry(PCI_VENDOR_ID_GOOGLE, PCI_ANY_ID)
    table = (google,)
    assert pci_p2pdma_whitelist_lookup(table, PCI_VENDOR_ID_GOOGLE, 0x1234, any_device=True)
    assert not pci_p2pdma_whitelist_lookup(table, PCI_VENDOR_ID_GOOGLE, 0x1234, any_device=False)
    assert pci_p2pdma_whitelist_lookup(table, PCI_VENDOR_ID_GOOGLE, PCI_ANY_ID, any_device=False)
    assert [r.any_device for r in P2pdmaWhitelistRelease] == [False, False, True, True]
    for wildcard in (False, True):
        topo = PciTopology(whitelist=table, whitelist_any_device=wildcard)
        a = topo.add_host_bridge(PCI_VENDOR_ID_GOOGLE, 0x1234)
        b = topo.add_host_bridge(PCI_VENDOR_ID_GOOGLE, 0x1234)
        gpu = a.add_root_port().add_endpoint(vendor=0x10DE, device=0x2330)
        nic = b.add_root_port().add_endpoint(vendor=0x15B3, device=0x1021)
        assert (pci_p2pdma_distance(gpu, nic) >= 0) is wildcard


def test_k133_ice_lake_root_is_listed_from_v5_18() -> None:
    """K-133: a Xeon whose root bus starts with 0x09a2 (Ice Lake-SP and every Xeon since):
    before v5.18 the pair on two root ports is refused (verbosely: "cannot be used ...");
    from v5.18 it goes through the host bridge (distance 6, THRU_HOST_BRIDGE), also across
    two such host bridges since the entry carries no REQ_SAME_HOST_BRIDGE."""
    box = make_box(hb_device=ICX_ROOT)
    box.topo.whitelist = PCI_P2PDMA_WHITELIST_V5_17
    assert pci_p2pdma_distance(box.gpu, box.nic2, verbose=True) == -1
    assert any("cannot be used for peer-to-peer DMA" in line for line in box.topo.log)
    assert pci_p2pdma_map_type(box.gpu, box.nic2) is PCI_P2PDMA_MAP_NOT_SUPPORTED
    box.topo.whitelist = PCI_P2PDMA_WHITELIST_V5_18
    assert pci_p2pdma_distance(box.gpu, box.nic2) == 6
    assert pci_p2pdma_map_type(box.gpu, box.nic2) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    # below one switch the whitelist is never asked
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_BUS_ADDR
    topo, a, b = two_host_bridges(ICX_ROOT, ICX_ROOT)
    topo.whitelist = PCI_P2PDMA_WHITELIST_V5_17
    assert pci_p2pdma_distance(a, b) == -1
    topo.whitelist = PCI_P2PDMA_WHITELIST_V5_18
    assert pci_p2pdma_distance(a, b) == 4


@pytest.mark.parametrize("device", [GOOGLE_SOC, 0x0001, 0xFFFE])
def test_k134_google_any_device_is_listed_from_v7_1(device: int) -> None:
    """K-134: v7.1's entry matches every device of vendor 0x1ae0 (``PCI_ANY_ID``): refused with
    the v5.18 table, allowed with v7.1's, within one host bridge and across two."""
    topo = PciTopology()
    hb = topo.add_host_bridge(PCI_VENDOR_ID_GOOGLE, device)
    a = hb.add_root_port().add_endpoint()
    b = hb.add_root_port().add_endpoint()
    other = topo.add_host_bridge(PCI_VENDOR_ID_GOOGLE, device ^ 1).add_root_port().add_endpoint()
    topo.whitelist = PCI_P2PDMA_WHITELIST_V5_18
    assert pci_p2pdma_distance(a, b) == -1
    assert pci_p2pdma_distance(a, other) == -1
    topo.whitelist = PCI_P2PDMA_WHITELIST_V7_1
    assert pci_p2pdma_distance(a, b) == -1  # v7.1's table on an older lookup: no wildcard
    topo.whitelist_any_device = True  # and v7.1's lookup
    assert pci_p2pdma_distance(a, b) == 4
    assert pci_p2pdma_map_type(a, b) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    assert pci_p2pdma_distance(a, other) == 4
    # the wildcard is for Google's vendor ID only
    assert pci_p2pdma_distance(*two_host_bridges(INTEL_CLIENT, INTEL_CLIENT)[1:]) == -1


@pytest.mark.parametrize("accelerator", XEON_ACCELERATORS)
def test_k135_xeon_accelerator_root_buses_are_listed_from_v7_2(accelerator: int) -> None:
    """K-135: a Xeon accelerator (QAT, DSA, IAA) heads a root bus of its own; a device below
    that host bridge and a GPU below the 0x09a2-headed one talk through both host bridges, so
    both must be listed: refused with v7.1's table, allowed (distance 4) with v7.2's."""
    topo, gpu, dev = two_host_bridges(ICX_ROOT, accelerator)
    topo.whitelist = PCI_P2PDMA_WHITELIST_V7_1
    assert pci_p2pdma_distance(gpu, dev) == -1
    assert pci_p2pdma_distance(dev, gpu) == -1
    topo.whitelist = PCI_P2PDMA_WHITELIST_V7_2
    assert pci_p2pdma_distance(gpu, dev) == 4
    assert pci_p2pdma_map_type(dev, gpu) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE


# --------------------------------------------------------------------------------------------
# K-58, K-85: many clients
# --------------------------------------------------------------------------------------------


def test_k58_distance_many_is_the_sum() -> None:
    box = make_box(hb_device=SKYLAKE_E)
    clients = [box.gpu, box.gpu.function(1), box.nic, box.nic2]
    assert pci_p2pdma_distance_many(box.gpu, clients) == 0 + 2 + 4 + 6


def test_k58_distance_many_is_minus_1_if_any_client_fails() -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    assert pci_p2pdma_distance_many(box.gpu, [box.nic, box.nic2]) == -1
    assert pci_p2pdma_distance_many(box.gpu, [box.nic, Device("virt")]) == -1


def test_k58_non_verbose_stops_at_first_failure_verbose_logs_every_failure() -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    nic3 = box.topo.host_bridges[0].add_root_port().add_endpoint()
    assert pci_p2pdma_distance_many(box.gpu, [box.nic2, nic3, box.nic]) == -1
    assert box.gpu.p2pdma is not None
    assert set(box.gpu.p2pdma.map_types) == {map_types_idx(box.nic2)}  # loop stopped
    assert box.topo.log == []
    assert pci_p2pdma_distance_many(box.gpu, [box.nic2, nic3, box.nic], verbose=True) == -1
    assert [line.split(":")[1] for line in box.topo.log] == ["05", "06"]
    assert all("cannot be used for peer-to-peer DMA" in line for line in box.topo.log)
    assert len(box.gpu.p2pdma.map_types) == 3


def test_k58_non_pci_client_returns_at_once_even_when_verbose() -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    assert pci_p2pdma_distance_many(box.gpu, [Device("virt"), box.nic2], verbose=True) == -1
    assert box.topo.log == ["virt: cannot be used for peer-to-peer DMA as it is not a PCI device"]


def test_k85_zero_clients_is_minus_1() -> None:
    box = make_box()
    assert pci_p2pdma_distance_many(box.gpu, []) == -1
    assert pci_p2pdma_distance_many(box.gpu, [], verbose=True) == -1
    assert pci_p2pdma_distance_many(make_box(p2pdma_enabled=False).gpu, []) == -1


# --------------------------------------------------------------------------------------------
# K-84: the per-provider cache
# --------------------------------------------------------------------------------------------


def test_k84_map_types_are_the_kernel_enum() -> None:
    """K-84: the cached values are ``enum pci_p2pdma_map_type`` of the P2P snapshot (pre-v5.18)."""
    assert [(t.name, t.value) for t in PciP2pdmaMapType] == [
        ("UNKNOWN", 0),
        ("NOT_SUPPORTED", 1),
        ("BUS_ADDR", 2),
        ("THRU_HOST_BRIDGE", 3),
    ]
    assert PCI_P2PDMA_MAP_UNKNOWN is PciP2pdmaMapType.UNKNOWN
    assert PCI_P2PDMA_MAP_NOT_SUPPORTED is PciP2pdmaMapType.NOT_SUPPORTED
    assert PCI_P2PDMA_MAP_BUS_ADDR is PciP2pdmaMapType.BUS_ADDR
    assert PCI_P2PDMA_MAP_THRU_HOST_BRIDGE is PciP2pdmaMapType.THRU_HOST_BRIDGE


def test_k84_second_query_is_served_from_the_provider_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    box = make_box(hb_device=SKYLAKE_E)
    assert box.gpu.p2pdma is None
    assert pci_p2pdma_distance(box.gpu, box.nic2) == 6
    cache = box.gpu.p2pdma
    assert cache is not None
    idx = map_types_idx(box.nic2)
    assert cache.map_types == {idx: PCI_P2PDMA_MAP_THRU_HOST_BRIDGE}
    assert cache.distances == {idx: 6}
    assert (cache.calcs, cache.hits) == (1, 0)

    def no_calc(*args: object, **kwargs: object) -> tuple[PciP2pdmaMapType, int]:
        raise AssertionError("calc_map_type_and_dist called for a cached pair")

    monkeypatch.setattr(p2pdma_mod, "calc_map_type_and_dist", no_calc)
    assert pci_p2pdma_distance(box.gpu, box.nic2) == 6
    # A child device of the same function hits the same entry (keyed by the PCI client).
    assert pci_p2pdma_distance(box.gpu, Device("rdma", parent=box.nic2)) == 6
    assert pci_p2pdma_map_type(box.gpu, box.nic2) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    assert (cache.calcs, cache.hits) == (1, 3)


def test_k84_cache_is_per_provider_and_keyed_by_client() -> None:
    box = make_box(hb_device=SKYLAKE_E)
    pci_p2pdma_distance_many(box.gpu, [box.nic, box.nic2])
    pci_p2pdma_distance(box.nic, box.gpu)
    assert box.gpu.p2pdma is not None and box.nic.p2pdma is not None
    assert set(box.gpu.p2pdma.map_types) == {map_types_idx(box.nic), map_types_idx(box.nic2)}
    assert set(box.nic.p2pdma.map_types) == {map_types_idx(box.gpu)}


def test_k84_map_type_calculates_on_a_miss_and_caches() -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    assert pci_p2pdma_map_type(box.gpu, box.nic2) is PCI_P2PDMA_MAP_NOT_SUPPORTED
    assert box.gpu.p2pdma is not None and box.gpu.p2pdma.calcs == 1
    assert pci_p2pdma_distance(box.gpu, box.nic2) == -1
    assert box.gpu.p2pdma.calcs == 1 and box.gpu.p2pdma.hits == 1


def test_k84_verbose_queries_recompute_so_problems_are_logged_again() -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    for _ in range(2):
        assert pci_p2pdma_distance(box.gpu, box.nic2, verbose=True) == -1
    assert len(box.topo.log) == 2
    assert box.gpu.p2pdma is not None and box.gpu.p2pdma.calcs == 2


def test_k84_topology_changes_invalidate_the_cache() -> None:
    box = make_box(hb_device=INTEL_CLIENT)
    assert pci_p2pdma_distance(box.gpu, box.nic) == 4
    box.sw.downstream_ports[1].acs = PciAcs.RR
    assert pci_p2pdma_distance(box.gpu, box.nic) == -1
    box.topo.cpu_vendor = X86_VENDOR_AMD
    box.topo.cpu_family = 0x19
    assert pci_p2pdma_distance(box.gpu, box.nic) == 4
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    box.sw.downstream_ports[1].acs = PciAcs.NONE
    assert pci_p2pdma_map_type(box.gpu, box.nic) is PCI_P2PDMA_MAP_BUS_ADDR
    # The refilled cache is valid for the new generation: the next query is a hit.
    cache = box.gpu.p2pdma
    assert cache is not None and cache.generation == box.topo.generation
    hits = cache.hits
    assert pci_p2pdma_distance(box.gpu, box.nic) == 4
    assert cache.hits == hits + 1


def test_k84_setup_is_idempotent_and_stamps_the_current_generation() -> None:
    box = make_box()
    cache = pci_p2pdma_setup(box.gpu)
    assert cache.generation == box.topo.generation
    assert pci_p2pdma_setup(box.gpu) is cache


def test_k84_calc_map_type_and_dist_stores_its_answer() -> None:
    box = make_box(hb_device=SKYLAKE_E)
    assert calc_map_type_and_dist(box.gpu, box.nic) == (PCI_P2PDMA_MAP_BUS_ADDR, 4)
    assert box.gpu.p2pdma is not None
    assert box.gpu.p2pdma.map_types[map_types_idx(box.nic)] is PCI_P2PDMA_MAP_BUS_ADDR
    # Not verbose unless asked: a refused pair logs nothing.
    unlisted = make_box(hb_device=INTEL_CLIENT)
    assert calc_map_type_and_dist(unlisted.gpu, unlisted.nic2) == (PCI_P2PDMA_MAP_NOT_SUPPORTED, 6)
    assert unlisted.topo.log == []


# --------------------------------------------------------------------------------------------
# Properties on random trees (K-55, K-56, K-57, K-58, K-83)
# --------------------------------------------------------------------------------------------

ACS_CHOICES = [PciAcs.NONE] * 4 + [PciAcs.RR, PciAcs.CR, PciAcs.EC, PciAcs.SV | PciAcs.UF]
CPU_CHOICES = [
    (X86_VENDOR_INTEL, 6),
    (X86_VENDOR_AMD, 0x15),
    (X86_VENDOR_AMD, 0x17),
    (X86_VENDOR_AMD, 0x19),
]
HB_CHOICES = [SKYLAKE_E, SKYLAKE_E_2, XEON_E5, INTEL_CLIENT]
LISTED = {SKYLAKE_E: False, SKYLAKE_E_2: False, XEON_E5: True}  # device -> same-bridge only


@st.composite
def topologies(draw: st.DrawFn) -> PciTopology:
    vendor, family = draw(st.sampled_from(CPU_CHOICES))
    topo = PciTopology(cpu_vendor=vendor, cpu_family=family)
    acs = st.sampled_from(ACS_CHOICES)

    def populate(port: PciDev, depth: int) -> None:
        kind = draw(st.sampled_from(["empty", "endpoint", "switch"] if depth < 2 else ["endpoint"]))
        if kind == "endpoint":
            port.add_endpoint(functions=draw(st.integers(1, 3)), acs=draw(acs))
        elif kind == "switch":
            usp = port.add_switch(draw(st.integers(1, 3)), acs=draw(acs))
            for dsp in usp.downstream_ports:
                dsp.acs = draw(acs)
                populate(dsp, depth + 1)

    for _ in range(draw(st.integers(1, 2))):
        hb = topo.add_host_bridge(PCI_VENDOR_ID_INTEL, draw(st.sampled_from(HB_CHOICES)))
        if draw(st.booleans()):
            hb.add_endpoint(functions=draw(st.integers(1, 2)), acs=draw(acs))
        for _ in range(draw(st.integers(1, 3))):
            populate(hb.add_root_port(acs=draw(acs)), 0)
    return topo


def chain(dev: PciDev) -> list[PciDev]:
    """Device-model ancestors that are PCI functions (an independent route to the root)."""
    out = [dev]
    while isinstance(out[-1].parent, PciDev):
        out.append(out[-1].parent)
    return out


def expected(topo: PciTopology, p: PciDev, c: PciDev) -> tuple[PciP2pdmaMapType, int]:
    """Reference model of §8.2/§8.3, written from the spec, not from the implementation."""
    pc, cc = chain(p), chain(c)
    common = next((n for n in pc if n in cc), None)
    if common is None:
        dist, on_path = len(pc) + len(cc), []
    else:
        i, j = pc.index(common), cc.index(common)
        dist, on_path = i + j, pc[: i + 1] + cc[:j]
        if not any(n.acs & PciAcs.REDIR for n in on_path):
            return PCI_P2PDMA_MAP_BUS_ADDR, dist
    zen = topo.cpu_vendor == X86_VENDOR_AMD and topo.cpu_family >= 0x17
    ha, hb = p.host_bridge, c.host_bridge
    if ha is hb:
        listed = ha.device in LISTED
    else:
        listed = all(LISTED.get(h.device or 0) is False for h in (ha, hb))
    ok = zen or listed
    return (PCI_P2PDMA_MAP_THRU_HOST_BRIDGE if ok else PCI_P2PDMA_MAP_NOT_SUPPORTED), dist


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_property_distance_matches_reference_and_is_symmetric(data: st.DataObject) -> None:
    """K-55/K-56/K-57/K-83: distance = hops via the common bridge; -1 iff NOT_SUPPORTED."""
    topo = data.draw(topologies())
    funcs = list(topo)
    p = data.draw(st.sampled_from(funcs))
    c = data.draw(st.sampled_from(funcs))
    ref_type, ref_dist = expected(topo, p, c)
    assert pci_p2pdma_map_type(p, c) is ref_type
    assert pci_p2pdma_map_type(c, p) is ref_type
    dist = pci_p2pdma_distance(p, c)
    assert (dist == -1) == (ref_type is PCI_P2PDMA_MAP_NOT_SUPPORTED)
    assert dist == (-1 if ref_type is PCI_P2PDMA_MAP_NOT_SUPPORTED else ref_dist)
    assert pci_p2pdma_distance(c, p) == dist
    if ref_type is PCI_P2PDMA_MAP_BUS_ADDR:
        assert (dist == 0) == (p is c)
    # A verbose recomputation gives the same answer as the cached one.
    assert pci_p2pdma_distance(p, c, verbose=True) == dist


@settings(max_examples=75, deadline=None)
@given(data=st.data())
def test_property_distance_many_is_sum_or_minus_1(data: st.DataObject) -> None:
    """K-58/K-85: -1 if any client is NOT_SUPPORTED (or none given), otherwise the sum."""
    topo = data.draw(topologies())
    funcs = list(topo)
    p = data.draw(st.sampled_from(funcs))
    clients = data.draw(st.lists(st.sampled_from(funcs), max_size=5))
    verbose = data.draw(st.booleans())
    singles = [pci_p2pdma_distance(p, c) for c in clients]
    want = -1 if not clients or -1 in singles else sum(singles)
    assert pci_p2pdma_distance_many(p, clients, verbose=verbose) == want
