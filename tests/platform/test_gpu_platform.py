"""GPU platforms: NVLink domains in the spec, the builder's NVLink links, PCIe distance classes,
the GPU presets' topologies as their sources describe them (``docs/cost-model/gpu.md`` §G1,
§G6) and the mechanism functions of ``platform/gpu_model.py``."""

from __future__ import annotations

import pytest

from pinlab.errors import ConfigError
from pinlab.platform import build
from pinlab.platform.cost import CostModel
from pinlab.platform.gpu_model import (
    bar_load_time,
    bar_store_time,
    nvlink_efficiency,
    nvlink_rate,
    staged_rate,
)
from pinlab.platform.presets import PRESETS, p4d, platform_from_dict
from pinlab.units import GiB, MiB

COST = CostModel()


# -- mechanisms -------------------------------------------------------------------------------


def test_nvlink_rate_is_links_times_rate_times_payload_efficiency() -> None:
    g = COST.nvlink.gen3
    expected = 12 * g.link_rate * g.link_efficiency * 256 / (256 + g.packet_overhead)
    assert nvlink_rate(COST, 3) == pytest.approx(expected)
    assert nvlink_rate(COST, 3) == pytest.approx(274.45e9, rel=1e-3)  # C1: 274.5 GB/s
    # copy kernels write 128-byte payloads: the same links carry less data
    assert nvlink_rate(COST, 3, engine="sm") < nvlink_rate(COST, 3, engine="ce")
    assert nvlink_efficiency(COST, 4, 128) < nvlink_efficiency(COST, 4, 256)
    assert nvlink_rate(COST, 4) == pytest.approx(376e9, rel=0.01)  # C2: 376 GB/s
    assert nvlink_rate(COST, 3, 4) == pytest.approx(nvlink_rate(COST, 3) / 3)
    with pytest.raises(ValueError, match="generation"):
        nvlink_rate(COST, 2)


def test_staging_pipeline_rate_is_below_its_slower_half() -> None:
    rate = staged_rate(COST, 26e9, 27e9)
    chunk = COST.gpucopy.staged_chunk
    assert rate == pytest.approx(chunk / (chunk / 26e9 + COST.gpucopy.staged_handoff))
    assert rate < 26e9
    slower = COST.with_overrides({"gpucopy.staged_handoff": "20us"})
    assert staged_rate(slower, 26e9, 27e9) < rate


def test_bar_stores_are_posted_and_loads_wait_per_load_then_stream() -> None:
    link = 10.3e9
    assert bar_store_time(COST, 1, link) == pytest.approx(COST.cpu.bar_write_floor + 1 / link)
    assert bar_store_time(COST, 16 * MiB, link) == pytest.approx(
        COST.cpu.bar_write_floor + 16 * MiB / link
    )
    # a Gen5 link is faster than one core's write-combining ceiling
    assert bar_store_time(COST, MiB, 41e9) == pytest.approx(
        COST.cpu.bar_write_floor + MiB / COST.cpu.wc_store_max
    )
    lat = COST.cpu.bar_load_latency
    assert bar_load_time(COST, 16) == pytest.approx(lat)  # one 16-byte load
    # below the unrolled loop every load waits for the previous one; memcpy reads a 2-15 byte
    # tail with two loads (D1: 1 B 0.91 µs, 2-8 B 1.72 µs, 16 B 0.86 µs, 32 B 1.70 µs)
    assert bar_load_time(COST, 1) == pytest.approx(lat)
    assert bar_load_time(COST, 8) == pytest.approx(2 * lat)
    assert bar_load_time(COST, 32) == pytest.approx(2 * lat)
    assert bar_load_time(COST, 64) == pytest.approx(4 * lat)
    assert bar_load_time(COST, 128) == pytest.approx(lat + lat / COST.cpu.bar_lines_inflight)
    big = bar_load_time(COST, 16 * MiB)
    rate = 16 * MiB / big
    assert rate == pytest.approx(COST.cpu.bar_lines_inflight * COST.cpu.bar_line / lat, rel=1e-3)
    assert bar_load_time(COST, 16 * MiB) > 10 * bar_store_time(COST, 16 * MiB, link)


# -- the spec ------------------------------------------------------------------------------


def _box(**nvlink: object) -> dict[str, object]:
    data = PRESETS["gpu-box"](gpus=3).model_dump(mode="json", exclude_none=True)
    data["nvlink"] = [{"name": "nv", "gen": 3, **nvlink}]
    return data


@pytest.mark.parametrize(
    ("nvlink", "where", "expected"),
    [
        ({"devices": ["gpu0", "gpu9"]}, "nvlink[0].devices[1]", "expected a device"),
        ({"devices": ["gpu0", "gpu1", "gpu2"]}, "nvlink[0].devices", "expected two devices"),
        ({"devices": ["gpu0"], "switches": 2}, "nvlink[0].devices", "at least two devices"),
        ({"devices": ["gpu0", "gpu1"], "gen": 5}, "nvlink[0].gen", "3 or 4"),
    ],
)
def test_nvlink_domains_are_checked_in_one_line(
    nvlink: dict[str, object], where: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as e:
        platform_from_dict(_box(**nvlink), "box.toml")
    assert "\n" not in str(e.value)
    assert where in str(e.value) and expected in str(e.value)


def test_a_gpu_belongs_to_one_nvlink_domain() -> None:
    data = _box(devices=["gpu0", "gpu1"])
    data["nvlink"].append({"name": "nv2", "gen": 3, "devices": ["gpu1", "gpu2"]})  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"nvlink\[1\]\.devices\[0\].*no other NVLink domain"):
        platform_from_dict(data, "box.toml")


# -- presets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dgx-a100", "dgx-h100", "p5", "gpu-box", "p4d"])
def test_the_gpu_presets_build(name: str) -> None:
    m = build(PRESETS[name]())
    assert m.exporters
    for d in m.spec.devices:
        assert d.model and d.compute_capability


def test_dgx_a100_pairs_two_gpus_and_two_nics_per_switch_complex() -> None:
    m = build(PRESETS["dgx-a100"]())
    spec = m.spec
    assert len(spec.devices) == 8 and len(spec.nics) == 8
    assert spec.cpu.model.startswith("AMD EPYC 7742") and spec.cpu.sockets == 2
    assert m.links["dram:0"].capacity["rw"] == pytest.approx(204.8e9 * COST.dram.efficiency)
    for k in range(4):
        gpus, nics = (f"gpu{2 * k}", f"gpu{2 * k + 1}"), (f"mlx5_{2 * k}", f"mlx5_{2 * k + 1}")
        for g in gpus:
            for n in nics:
                assert m.pci_distance(g, n) == "PXB"  # nvidia-smi topo -m (NVIDIA/nccl #1505)
            # the complex's uplink to its root complex is shared by its GPUs and NICs
            assert f"pcie:plx{k}" in {u.link for u in m.path(g, "host:0" if k < 2 else "host:1")}
        for n in nics:
            assert f"pcie:plx{k}" in {u.link for u in m.path(n, m.host_of(n))}
        assert m.socket_of(gpus[0]) == k // 2
    assert m.pci_distance("gpu0", "mlx5_7") == "SYS"
    assert m.pci_distance("gpu0", "mlx5_2") in ("NODE", "SYS")
    assert spec.nics[0].model == "cx6"  # HDR 200 Gb/s
    assert m.nic_port_model("mlx5_0").line_rate == pytest.approx(25e9)
    # NVSwitch: every pair at the 12-link rate, one port per GPU each way
    assert m.bottleneck(m.nvlink_path("gpu0", "gpu7") or []) == pytest.approx(nvlink_rate(COST, 3))
    assert spec.nvlink[0].switches == 6


def test_dgx_h100_and_p5_put_each_gpus_nics_on_its_switch() -> None:
    h = build(PRESETS["dgx-h100"]())
    for i in range(8):
        assert h.pci_distance(f"gpu{i}", f"mlx5_{i}") == "PIX"
    assert h.nic_port_model("mlx5_0").line_rate == pytest.approx(50e9)  # NDR 400 Gb/s
    assert build(PRESETS["dgx-h100"](link="roce")).nic_port_model("mlx5_0").link_layer == "roce"
    assert h.spec.nvlink[0].links == 18 and h.spec.dram.bandwidth == pytest.approx(307.2e9)
    p = build(PRESETS["p5"]())
    assert len(p.spec.nics) == 32
    for j in range(32):
        assert p.pci_distance(f"gpu{j // 4}", f"efa{j}") == "PIX"
    assert build(PRESETS["p5"](cpu="milan")).spec.cpu.vendor == "amd"


def test_p4d_has_cascade_lake_dram_and_an_nvswitch() -> None:
    m = build(p4d())
    assert m.spec.dram.bandwidth == pytest.approx(140.8e9)  # DDR4-2933 × 6 channels
    assert m.nvlink_path("gpu0", "gpu5") is not None
    de = p4d(gpu="a100-sxm4-80gb")
    assert de.name == "p4de" and de.devices[0].memory == 80 * GiB
    assert p4d(gpu_memory=16 * GiB).devices[0].memory == 16 * GiB


def test_gpu_box_layouts_give_the_distances_of_their_tables() -> None:
    c3 = build(PRESETS["gpu-box"](gpus=2, nics=1))  # Threadripper PRO: PHB, the NIC at NODE
    assert c3.pci_distance("gpu0", "gpu1") == "PHB"
    assert c3.pci_distance("gpu0", "mlx5_0") == "NODE"
    c4 = build(PRESETS["gpu-box"](gpus=4, cpu="epyc-9374f", layout="host-bridges", nics=2))
    assert c4.pci_distance("gpu0", "gpu1") == "NODE"
    assert c4.pci_distance("gpu0", "gpu2") == "SYS"
    assert c4.p2p_path_class("gpu0", "gpu2") == "cross_socket"  # Zen: P2P allowed
    sw = build(PRESETS["gpu-box"](gpus=4, layout="switch-pairs"))
    assert sw.pci_distance("gpu0", "gpu1") == "PIX" and sw.pci_distance("gpu0", "gpu2") == "PHB"
    bridged = build(PRESETS["gpu-box"](gpus=4, gpu="a100-sxm4-40gb", nvlink_pairs=True))
    assert bridged.nvlink_path("gpu0", "gpu1") is not None
    assert bridged.nvlink_path("gpu1", "gpu2") is None
    assert bridged.bottleneck(bridged.nvlink_path("gpu0", "gpu1") or []) == pytest.approx(
        nvlink_rate(COST, 3, 4)
    )
    rocm = PRESETS["gpu-box"](gpu="mi25", cpu="epyc-7261")
    assert rocm.devices[0].driver == "amdgpu" and rocm.devices[0].compute_capability is None


def test_gpu_box_refuses_an_unknown_cpu_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"box.toml: params.cpu: .*threadripper"):
        platform_from_dict({"preset": "gpu-box", "params": {"cpu": "pentium"}}, "box.toml")


def test_the_gpu_doc_lists_every_gpu_parameter_with_its_confidence() -> None:
    from pathlib import Path

    from pinlab.platform.cost import parameters

    doc = (Path(__file__).resolve().parents[2] / "docs" / "cost-model" / "gpu.md").read_text()
    for p in parameters():
        if p.section.startswith("§G"):
            assert f"`{p.key}`" in doc, p.key
            assert p.confidence in ("high", "medium", "low"), p.key
            assert p.source and p.unit, p.key


@pytest.mark.parametrize("profile", ["5.16", "6.12", "6.16", "7.1", "next"])
def test_k133_sapphire_rapids_root_complex_p2p_follows_the_release(profile: str) -> None:
    """K-133: dgx-h100's root buses start with Intel 0x09a2 (Sapphire Rapids, like every Xeon
    since Ice Lake-SP). A GPU and another switch's NIC meet in the root complex: refused before
    v5.18 (5.16), allowed from v5.18; across sockets likewise; one switch is never affected."""
    m = build(PRESETS["dgx-h100"](), profile)
    old = profile == "5.16"
    assert m.p2p_path_class("gpu0", "mlx5_0") == "switch"
    assert m.p2p_path_class("gpu0", "mlx5_1") == (None if old else "root_complex")
    assert m.p2p_path_class("gpu0", "mlx5_4") == (None if old else "cross_socket")
