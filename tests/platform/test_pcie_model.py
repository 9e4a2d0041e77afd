"""The PCIe mechanisms (``platform/pcie_model.py``): link and TLP efficiency by MPS, read
completions, reads bounded by outstanding requests over the read latency, host-bridge P2P
forwarding per CPU class, both directions of a link shared (tools-and-mechanisms.md B1)."""

from __future__ import annotations

import math

import pytest

from pinlab.platform import CostModel, build, cx_pair, dl1, workstation, workstation_amd
from pinlab.platform import pcie_model as pm
from pinlab.platform.pcie_model import HostBridgeCrossing, LinkDemand, PcieLink, PciePath

COST = CostModel()


@pytest.mark.parametrize(
    ("gen", "mps", "gbps"),
    [
        (3, 128, 11.76),
        (3, 256, 12.99),
        (3, 512, 13.69),
        (4, 128, 23.52),
        (4, 256, 25.99),
        (4, 512, 27.37),
        (5, 128, 47.03),
        (5, 256, 51.98),
        (5, 512, 54.75),
    ],
)
def test_posted_write_rate_by_generation_and_mps(gen: int, mps: int, gbps: float) -> None:
    """raw × (1 − 2·8/ack-interval − 4/1538) × MPS/(MPS + 24): the table of B1."""
    assert pm.write_rate(COST, gen, 16, mps) / 1e9 == pytest.approx(gbps, abs=0.01)


def test_link_efficiency_is_the_spec_dllp_and_skp_budget() -> None:
    assert pm.link_efficiency(COST, 16, 128) == pytest.approx(0.886, abs=5e-4)
    assert pm.link_efficiency(COST, 16, 256) == pytest.approx(1 - 16 / 168 - 4 / 1538)
    assert pm.link_efficiency(COST, 16, 512) == pytest.approx(0.910, abs=1e-3)
    assert pm.write_efficiency(COST, 256) == pytest.approx(256 / 280)
    with pytest.raises(ValueError, match="MPS must be one of"):
        pm.link_efficiency(COST, 16, 300)


def test_read_completions_carry_20_bytes_each() -> None:
    """Gen4 x16: MPS-sized completions 26.37 GB/s; a root complex splitting at 64 B 21.66."""
    assert pm.completion_rate(COST, 4, 16, 256, 256) / 1e9 == pytest.approx(26.37, abs=0.01)
    assert pm.completion_rate(COST, 4, 16, 256, 64) / 1e9 == pytest.approx(21.66, abs=0.01)


def _path(target: str = "device", **kw: object) -> PciePath:
    base: dict[str, object] = {
        "initiator": "nic",
        "target": "gpu" if target == "device" else "host:0",
        "links": (PcieLink("pcie:nic", 4, 16, 256, "up"), PcieLink("pcie:gpu", 4, 16, 256, "down")),
        "switches": 1,
        "host_bridges": (),
        "sockets": 0,
        "socket_link": None,
        "target_kind": target,
        "completer_latency": None,
        "mps": 256,
        "mrrs": 512,
    }
    base.update(kw)
    return PciePath(**base)  # type: ignore[arg-type]


def test_read_rate_is_window_over_latency_until_the_link_binds() -> None:
    """BW_read = min(link completions, requester tags × MRRS / latency): the window is the
    requester stream's own, a device BAR does not cap it."""
    lat = COST.pcie.lat
    p = _path(completer_latency=1.0e-6)
    latency = 1.0e-6 + lat.switch
    assert pm.read_latency(COST, p) == pytest.approx(latency)
    assert pm.read_window(p, 20) == 20 * 512
    assert pm.read_rate(COST, p, 20) == pytest.approx(20 * 512 / latency)
    assert pm.read_rate(COST, p, 4) == pytest.approx(4 * 512 / latency)
    # a large window: the completions' link rate binds, not the BAR
    assert pm.read_rate(COST, p, 256) == pytest.approx(
        pm.completion_rate(COST, 4, 16, 256, 256), rel=1e-9
    )
    # host memory: no completer limit, the link binds; completions at host_completion bytes
    host = _path("host")
    assert pm.read_latency(COST, host) == pytest.approx(lat.host_read + lat.switch)
    assert pm.read_rate(COST, host, 256) == pytest.approx(
        pm.completion_rate(COST, 4, 16, 256, COST.pcie.tlp.host_completion)
    )
    # a read of n bytes on an idle path: the latency, then the bytes at the rate
    rate = pm.read_rate(COST, p, 256)
    assert pm.read_time(COST, p, 4096, 256) == pytest.approx(latency + 4096 / rate)


def test_read_latency_adds_switches_sockets_and_host_bridge_turnaround() -> None:
    lat = COST.pcie.lat
    hb = HostBridgeCrossing("rc0", 0, "amd_zen", p2p=True)
    p = _path(switches=2, sockets=1, host_bridges=(hb,), socket_link=41.6e9)
    expected = COST.pcie.bar_read.default + lat.rc_p2p + 2 * lat.switch + lat.remote_socket
    assert pm.read_latency(COST, p) == pytest.approx(expected)
    assert pm.write_latency(COST, p) == pytest.approx(
        lat.write + 0.5 * (2 * lat.switch + lat.remote_socket)
    )


def test_host_bridges_forward_p2p_by_cpu_class() -> None:
    """Intel client root ports: writes only; Intel Xeon: both, at limited rates; AMD Zen:
    both at link rate; an unknown class forwards nothing."""

    def via(rc: str | None) -> PciePath:
        return _path(host_bridges=(HostBridgeCrossing("rc0", 0, rc, p2p=True),))  # type: ignore[arg-type]

    client = via("intel_client")
    assert pm.read_rate(COST, client, 256) == 0.0
    assert pm.path_write_rate(COST, client) == pytest.approx(pm.write_rate(COST, 4, 16, 256))
    assert math.isinf(pm.read_time(COST, client, 4096, 256))
    server = via("intel_server")
    rc = COST.pcie.rc.intel_server
    assert pm.read_rate(COST, server, 256) <= rc.read_limit
    assert pm.path_write_rate(COST, server) == pytest.approx(rc.write_limit)
    zen = via("amd_zen")
    assert pm.path_write_rate(COST, zen) == pytest.approx(pm.write_rate(COST, 4, 16, 256))
    assert pm.read_rate(COST, via(None), 256) == 0.0
    # a host bridge that passes requests to host memory (not P2P) is not a forwarding limit
    to_host = _path("host", host_bridges=(HostBridgeCrossing("rc0", 0, "intel_client", False),))
    assert pm.read_rate(COST, to_host, 256) > 0


def test_both_directions_share_a_link() -> None:
    """A write stream alone gets the posted-write rate; with a read whose data comes the
    other way, each direction carries its own data plus the other's requests or nothing,
    and no direction exceeds its wire capacity."""
    alone = pm.share_link(COST, 4, 16, 256, 512, LinkDemand(write_up=math.inf))
    assert alone.write_up == pytest.approx(pm.write_rate(COST, 4, 16, 256))
    both = pm.share_link(COST, 4, 16, 256, 512, LinkDemand(write_up=math.inf, read_down=math.inf))
    assert 0 < both.write_up < alone.write_up
    cap = COST.raw_rate(4, 16) * pm.link_efficiency(COST, 16, 256)
    up = both.write_up * (1 + 24 / 256) + both.read_down * 24 / 512
    down = both.read_down * (1 + 20 / 256)
    assert max(up, down) == pytest.approx(cap, rel=1e-9)
    # a demand below the fair share is served in full; the other stream takes the rest
    small = pm.share_link(COST, 4, 16, 256, 512, LinkDemand(write_up=1e9, read_up=math.inf))
    assert small.write_up == pytest.approx(1e9)
    assert small.read_up > both.write_up


def test_machine_paths_feed_the_mechanism() -> None:
    """Machine.pcie_path on the presets: the GPU distance of cx-pair, the MPS along a path,
    the host bridge's class (Intel Xeon, AMD Zen, Intel client)."""
    lat = COST.pcie.lat
    for distance, switches, bridges, sockets in (
        ("switch", 1, 0, 0),
        ("root_complex", 1, 1, 0),
        ("cross_socket", 1, 2, 1),
    ):
        m = build(cx_pair(gpu="a100", gpu_distance=distance).node)
        p = m.pcie_path("mlx5_0", "gpu0")
        assert (p.switches, len(p.host_bridges), p.sockets) == (switches, bridges, sockets)
        assert p.completer_latency == COST.pcie.bar_read.a100
        extra = lat.rc_p2p if bridges else 0.0
        assert pm.read_latency(m.cost, p) == pytest.approx(
            COST.pcie.bar_read.a100 + extra + lat.switch + sockets * lat.remote_socket
        )
    data = dl1().model_dump()
    data["switches"][0]["mps"] = 128
    from pinlab.platform import PlatformSpec

    m = build(PlatformSpec.model_validate(data))
    assert m.pcie_path("gaudi0", "host:0").mps == 128
    assert m.links["pcie:gaudi0"].capacity["up"] == pytest.approx(pm.write_rate(COST, 3, 16, 128))
    assert build(workstation(cpu="intel")).spec.cpu.rc_class == "intel_client"
    assert build(workstation_amd()).spec.cpu.rc_class == "amd_zen"
    assert build(workstation_amd(cpu="intel")).spec.cpu.rc_class == "intel_server"
