"""The GPU workloads (``docs/cost-model/gpu.md``): copies over NVLink, PCIe P2P and host
staging, NCCL's all-reduce, gdrcopy's BAR accesses -- their orderings come from the mechanisms,
their results are deterministic per seed and differ between seeds."""

from __future__ import annotations

from typing import Any

import pytest

from pinlab.platform.presets import PRESETS, cluster
from pinlab.sim.engine import Simulation
from pinlab.sim.workloads import WORKLOADS, spawn
from pinlab.sim.workloads.gpu_copy import copy_flow
from pinlab.sim.workloads.nccl import bus_bandwidth
from pinlab.units import MiB


def run(spec: Any, workload: str, *, seed: int = 1, per_node: bool = False, **params: Any) -> Any:
    sim = Simulation(spec, seed=seed, sample_interval=1e9)
    nodes = list(sim.nodes) if per_node else [next(iter(sim.nodes))]
    tenants = [spawn(sim, f"t{n}", WORKLOADS[workload].params(**params), node=n) for n in nodes]
    sim.run(1e9)
    for t in tenants:
        assert t.error is None
    return tenants[0].result


def test_nvlink_beats_pcie_p2p_beats_staging_from_the_mechanisms() -> None:
    box = PRESETS["gpu-box"](gpus=4, gpu="a100-sxm4-40gb", nvlink_pairs=True)
    r = run(box, "p2p", elements=4_000_000, repeat=2, latency_repeat=4)
    writes, staged = r.matrices["uni_writes"], r.matrices["uni_disabled"]
    nvlink, pcie = writes[(0, 1)], writes[(1, 2)]  # bridged pair; same root complex
    assert nvlink > 3 * pcie  # 4 NVLink 3 links vs one Gen4 x16 link
    assert pcie > staged[(1, 2)]  # the driver's staging pipeline loses its handoffs
    assert staged[(0, 1)] == pytest.approx(staged[(1, 2)], rel=0.01)  # staging ignores NVLink
    lat = r.matrices["lat_writes_gpu"], r.matrices["lat_disabled_gpu"]
    assert lat[1][(1, 2)] > 5 * lat[0][(1, 2)]  # two copies + the handoff vs one copy
    assert r.p2p_bandwidth_min == pytest.approx(min(writes[k] for k in writes if k[0] != k[1]))


def test_copy_engines_write_bigger_nvlink_packets_than_copy_kernels() -> None:
    dgx = PRESETS["dgx-a100"]()
    ce = run(
        dgx,
        "nvbandwidth",
        testcase="device_to_device_memcpy_write_ce",
        buffer=64 * MiB,
        samples=1,
        loop_count=2,
        devices=["gpu0", "gpu1"],
    )
    sm = run(
        dgx,
        "nvbandwidth",
        testcase="device_to_device_memcpy_write_sm",
        buffer=64 * MiB,
        samples=1,
        loop_count=2,
        devices=["gpu0", "gpu1"],
    )
    assert ce.matrices[0].cells[(0, 1)] > sm.matrices[0].cells[(0, 1)] * 1.03
    assert (0, 0) not in ce.matrices[0].cells  # the diagonal is N/A
    assert ce.sum_bandwidth == pytest.approx(sum(ce.matrices[0].cells.values()))


def test_bidirectional_and_all_gpu_cases_measure_with_interference() -> None:
    dgx = PRESETS["dgx-a100"]()
    small = dict(buffer=32 * MiB, samples=1, loop_count=2)
    alone = run(dgx, "nvbandwidth", testcase="device_to_host_memcpy_ce", **small)
    crowd = run(dgx, "nvbandwidth", testcase="all_to_host_memcpy_ce", **small)
    # GPU pairs share their complex's uplink: with every GPU copying, each gets less
    assert crowd.matrices[0].cells[(0, 0)] < 0.75 * alone.matrices[0].cells[(0, 0)]
    fan = run(dgx, "nvbandwidth", testcase="all_to_one_write_ce", **small)
    assert fan.matrices[0].rows == 1 and len(fan.matrices[0].cells) == 8
    bidir = run(
        dgx,
        "nvbandwidth",
        testcase="device_to_device_bidirectional_memcpy_read_ce",
        devices=["gpu0", "gpu1"],
        **small,
    )
    read1, read2, total = (m.cells[(0, 1)] for m in bidir.matrices)
    assert total == pytest.approx(read1 + read2)


def test_copy_flow_classifies_how_the_bytes_travel() -> None:
    sim = Simulation(PRESETS["gpu-box"](gpus=2), seed=0)
    m = sim.node().machine
    assert copy_flow(m, "gpu0", "gpu0", initiator="gpu0").via == "local"
    assert copy_flow(m, "gpu0", "gpu1", initiator="gpu0").via == "pcie"
    assert copy_flow(m, "gpu0", "gpu1", initiator="gpu0", p2p=False).via == "staged"
    assert copy_flow(m, "host:0", "gpu1", initiator="gpu1").via == "pcie"
    intel = Simulation(PRESETS["gpu-box"](gpus=2, cpu="core-i7-6900k"), seed=0).node().machine
    # an unlisted Intel host bridge refuses P2P: the driver stages
    assert copy_flow(intel, "gpu0", "gpu1", initiator="gpu0").via == "staged"


def test_nccl_rows_follow_the_busbw_formula_and_pick_protocols_by_size() -> None:
    r = run(
        PRESETS["dgx-a100"](),
        "nccl",
        minbytes=8192,
        maxbytes=256 * MiB,
        stepfactor=8,
        iters=3,
        gpus_per_thread=8,
    )
    assert r.world_ranks == 8 and r.transports == ["P2P/NVL"]
    for row in r.rows:
        assert row.algbw == pytest.approx(row.size / row.time)
        assert row.busbw == pytest.approx(row.algbw * 2 * 7 / 8)
        assert row.busbw == pytest.approx(bus_bandwidth(row.algbw, 8))
    assert r.rows[0].proto == "LL" and r.rows[-1].proto == "Simple"
    busbw = [row.busbw for row in r.rows]
    assert busbw == sorted(busbw)
    # the plateau is bounded by NVLink at copy-kernel payloads
    g = Simulation(PRESETS["dgx-a100"]()).node().machine.cost
    from pinlab.platform.gpu_model import nvlink_rate

    assert busbw[-1] < nvlink_rate(g, 3, engine="sm")
    assert r.avg_busbw == pytest.approx(
        sum(row.busbw + row.busbw_ip for row in r.rows) / (2 * len(r.rows))
    )


def test_nccl_follows_ncclTopoCheckGdr_across_nodes() -> None:
    two = cluster(nodes=2, node=PRESETS["dgx-a100"]())
    gdr = run(two, "nccl", per_node=True, minbytes=MiB, maxbytes=MiB, iters=1, world=2)
    assert "NET/GDRDMA" in gdr.transports and gdr.world_ranks == 16
    # GPU and NIC are PXB apart: NCCL_NET_GDR_LEVEL=PIX makes NCCL stage through host memory
    host = run(
        two,
        "nccl",
        per_node=True,
        minbytes=MiB,
        maxbytes=MiB,
        iters=1,
        world=2,
        net_gdr_level="PIX",
    )
    assert "NET/host" in host.transports and "NET/GDRDMA" not in host.transports
    assert host.rows[0].time > gdr.rows[0].time
    # NCCL_P2P_LEVEL on a PCIe box: peer copies up to PHB, else shared memory
    box = PRESETS["gpu-box"](gpus=2)
    assert run(box, "nccl", iters=1).transports == ["SHM"]  # PHB > PXB by default
    assert run(box, "nccl", iters=1, p2p_level="PHB").transports == ["P2P/PCI"]


def test_nccl_keeps_to_simple_over_a_transport_that_reorders_without_rdma_write() -> None:
    """aws-ofi-nccl's NCCL_PROTO=simple: the NIC declares its delivery order and access
    (``RdmaDevice.ordered_delivery``, ``supported_access``); the simulator asks nothing else."""
    sizes = {"minbytes": 8192, "maxbytes": 8192, "iters": 1, "world": 2, "per_node": True}
    p4d = run(cluster(nodes=2, node=PRESETS["p4d"]()), "nccl", **sizes)
    assert {row.proto for row in p4d.rows} == {"Simple"}  # first-generation EFA: no RDMA write
    p5 = run(cluster(nodes=2, node=PRESETS["p5"]()), "nccl", **sizes)
    assert {row.proto for row in p5.rows} != {"Simple"}  # EFA with RDMA write: LL allowed


def test_nccl_is_deterministic_per_seed_and_seeds_replicate() -> None:
    dgx = PRESETS["dgx-a100"]()
    a = run(dgx, "nccl", seed=3, minbytes=8192, maxbytes=8192, iters=4)
    b = run(dgx, "nccl", seed=3, minbytes=8192, maxbytes=8192, iters=4)
    c = run(dgx, "nccl", seed=4, minbytes=8192, maxbytes=8192, iters=4)
    assert a.rows == b.rows
    assert a.rows[0].time != c.rows[0].time
    assert a.rows[0].time == pytest.approx(c.rows[0].time, rel=0.05)


def test_gdrcopy_stores_are_cheap_and_loads_wait() -> None:
    box = PRESETS["gpu-box"](gpus=1, gpu="v100-sxm2-32gb", cpu="xeon-e5-2698v4")
    r = run(box, "gdrcopy", size=MiB, write_iters=200, read_iters=20)
    writes = {row.size: row for row in r.rows if row.test == "gdr_copy_to_mapping"}
    reads = {row.size: row for row in r.rows if row.test == "gdr_copy_from_mapping"}
    assert sorted(writes) == [1 << k for k in range(21)]
    assert reads[1].median > 5 * writes[1].median
    assert reads[MiB].median > 10 * writes[MiB].median
    assert all(row.minimum <= row.median for row in r.rows)
    assert r.store_floor == writes[1].median and r.load_bandwidth == MiB / reads[MiB].median
    legacy = run(
        box, "gdrcopy", size=4096, write_iters=50, read_iters=5, legacy=True, readback=True
    )
    back = {row.size: row for row in legacy.rows if row.test == "gdr_copy_to_mapping"}
    # the 2020 copylat read 4 bytes back after every write: each write waits for a load
    assert back[1].median > reads[1].median


def test_the_gpu_workloads_reject_bad_parameters() -> None:
    with pytest.raises(ValueError):
        WORKLOADS["nvbandwidth"].params(testcase="host_to_device_memcpy_xx")
    with pytest.raises(ValueError):
        WORKLOADS["nccl"].params(stepfactor=0)
    with pytest.raises(ValueError, match="expected stepbytes >= 1 beside stepfactor 1"):
        WORKLOADS["nccl"].params(stepfactor=1, stepbytes=0)
    with pytest.raises(ValueError):
        WORKLOADS["gdrcopy"].params(write_iters=0)
