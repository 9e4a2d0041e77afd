"""The cost model holds ``cost-model.md`` §2–§8 with units, sweeps and sources."""

from __future__ import annotations

import pytest

from pinlab.errors import ConfigError
from pinlab.platform.cost import CostModel, parameter_keys, parameters
from pinlab.units import GiB, KiB, MiB


@pytest.fixture(scope="module")
def cost() -> CostModel:
    return CostModel()


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("pcie.gen3.raw", 15.7538e9),  # §2.1: 8 GT/s × 16 × 128/130
        ("pcie.tlp.mwr_overhead", 24),  # §2.3, pcie-model
        ("pcie.tlp.cpld_overhead", 20),  # §2.3
        ("pcie.lat.host_read", 0.55e-6),  # §2.3, pcie-bench
        ("pcie.lat.remote_socket", 0.11e-6),  # §2.3
        ("pcie.mps", 256),  # §2.3
        ("pcie.gen3.eff", 12e9),  # §2.1
        ("pcie.gen4.eff", 25e9),  # §2.1
        ("pcie.gen5.h2d", 50e9),  # §2.1
        ("pcie.efficiency", 0.80),  # §2.1
        ("pcie.bidir_h2d_factor", 0.5),  # §2.2
        ("numa.remote_h2d_factor", 0.31),  # §2.2
        ("cpu.bar_write_floor", 0.088e-6),  # gpu.md §G4
        ("pcie.rc.intel_server.write_limit", 10.26e9),  # §3.1, ROCm #787
        ("nic.cx5.line_rate", 12.5e9),  # §4.1: EDR 100 Gbps
        ("nic.cx6.msg_rate", 215.0),  # §4.1: vendor manual
        ("nic.cx7.line_rate", 50e9),  # §4.1: NDR 400 Gbps
        ("nic.cx5.max_rd_atom", 16),  # §4.1
        ("rdma.hdr.bth", 12),  # §4.2: ib_pack.h
        ("rdma.hdr.reth", 16),  # §4.2
        ("stage.copy_launch", 6e-6),  # §5
        ("stage.chunk", 512 * KiB),  # §5
        ("stage.pipeline_eff", 0.70),  # §5
        ("dram.efficiency", 0.84),  # §5
        ("reg.host.fixed", 16e-6),  # §6.1
        ("reg.host.per_byte", 0.06e-9),  # §6.1
        ("reg.efa.fixed", 60.6e-3),  # §6.2: 70 ms for the first 2.79 MB = fixed + its bytes
        ("reg.efa.per_registered", 0.260 / GiB),  # §6.2
        ("reg.mlx5.fixed", 30e-6),  # §6.2 [assumption]
        ("pin.bar1_consumer", 256 * MiB),  # §6.3
        ("pin.alignment", 64 * KiB),  # §6.3
        ("odp.fault", 1e-3),  # §7
        ("odp.tail_multiplier", 1000.0),  # §7
        ("odp.rdma_prefetch_max", 4 * MiB),  # §7
        ("odp.implicit_chunk", 1 * GiB),  # §7
        ("swodp.minor_fault", 5e-6),  # §7
        ("evict.d2h.gen3", 12.9e9),  # §8
        ("evict.d2h.gen5", 52.8e9),  # §8
        ("hbm.copy_efficiency", 0.85),  # §8
    ],
)
def test_defaults_equal_the_doc(cost: CostModel, key: str, expected: float) -> None:
    info = {p.key: p for p in parameters(cost)}[key]
    assert info.value == pytest.approx(expected, rel=1e-12)
    assert info.source and info.section.startswith("§")


def test_every_row_has_unit_section_and_source() -> None:
    params = parameters()
    assert len(params) == len(parameter_keys()) >= 70
    for p in params:
        assert p.unit, p.key
        assert p.section.startswith("§"), p.key
        assert p.source, p.key
        assert p.description, p.key
    shown = {p.key: p.text for p in params}
    assert shown["pcie.gen3.eff"] == "12 GB/s"
    assert shown["nic.cx5.line_rate"] == "100 Gbps"
    assert shown["nic.cx6.qp_msg_cost"] == "0.27 µs"
    assert shown["reg.host.seq_rate"] == "98 ms/GB"
    assert shown["stage.chunk"] == "512 KiB"
    sweeps = {p.key: p.sweep for p in params}
    assert sweeps["pcie.efficiency"] == (0.75, 0.85)
    assert sweeps["odp.fault"] == ("0.05ms", "3ms")
    assert sweeps["pcie.gen3.raw"] is None  # a fixed fact


def test_every_row_has_a_confidence_and_the_low_ones_a_range() -> None:
    """issue 11: a confidence per parameter; ``--robust`` varies the low ones over a range."""
    params = parameters()
    assert {p.confidence for p in params} == {"high", "medium", "low"}
    by_key = {p.key: p for p in params}
    assert by_key["pcie.lat.host_read"].confidence == "high"  # measured (pcie-bench)
    assert by_key["pcie.lat.switch"].confidence == "low"  # [assumption]
    assert by_key["nic.cx6.qp_msg_cost"].confidence == "medium"  # calibrated on A1
    for p in params:
        if p.marker in ("assumption", "unverified"):
            assert p.confidence == "low", p.key
    assert "validation-tables.md A1" in by_key["nic.cx6.qp_msg_cost"].source
    assert "A3" in by_key["nic.cx7.p2p_read_tags"].source
    assert "pcie.read.bar_slots" not in by_key  # reads are windowed per stream, not per BAR


def test_derived_rates(cost: CostModel) -> None:
    """§2.1 link rates by gen × width from the mechanism (Gen3/4/5 x16, MPS 256: 12.99 /
    25.99 / 51.98 GB/s); the measured constants are fallbacks; §8 restore = link rate."""
    assert cost.pcie_rate(3, 16) == pytest.approx(12.99e9, rel=1e-3)
    assert cost.pcie_rate(4, 16) == pytest.approx(25.99e9, rel=1e-3)
    assert cost.pcie_rate(5, 16, "up") == pytest.approx(51.98e9, rel=1e-3)
    # x8 has its own DLLP intervals (PCIe 5.0 tables: one per 203 B at MPS 256), not half x16's
    x8 = 31.5077e9 / 2 * (1 - 2 * 8 / 203 - 4 / 1538) * 256 / 280
    assert cost.pcie_rate(4, 8) == pytest.approx(x8, rel=1e-9)
    assert cost.restore_h2d(4) == cost.pcie_rate(4, 16)
    assert cost.evict_d2h(4) == 24e9
    measured = cost.with_overrides({"pcie.rate_model": "measured"})
    assert measured.pcie_rate(3, 16) == 12e9
    assert measured.pcie_rate(5, 16, "down") == 50e9
    assert cost.swap_time(25 * 10**9, 4) == pytest.approx(50e9 / cost.pcie_rate(4))
    assert cost.dram_rate(100e9) == pytest.approx(84e9)
    with pytest.raises(ValueError, match="3, 4 or 5"):
        cost.pcie_rate(2)


def test_overrides(cost: CostModel) -> None:
    c2 = cost.with_overrides({"pcie.efficiency": "0.75", "odp.fault": "2ms"})
    assert c2.pcie.efficiency == 0.75
    assert c2.odp.fault == 2e-3
    # overriding the efficiency switches the rate model, so it changes something
    assert c2.pcie.rate_model == "raw_x_efficiency"
    assert c2.pcie_rate(3) == pytest.approx(15.7538e9 * 0.75)
    # the original is untouched (frozen)
    assert cost.odp.fault == 1e-3
    assert cost.with_overrides({}) is cost
    c3 = cost.with_overrides({"pcie.lat": {"switch": "0.2us"}, "nic.cx5.line_rate": "200Gbps"})
    assert c3.pcie.lat.switch == pytest.approx(0.2e-6)
    assert c3.nic.cx5.line_rate == 25e9
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        cost.odp.fault = 2.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"pcie.eficiency": "0.7"},
            "--set: pcie.eficiency: expected a cost-model parameter (did you mean "
            "'pcie.efficiency'?), found 'pcie.eficiency'",
        ),
        (
            {"odp.fault": "2"},
            '--set: odp.fault: expected a time like "1.75us", "6ms" or "2s", found "2" '
            "(a unit is required)",
        ),
        ({"pcie.efficiency": "1.5"}, "--set: pcie.efficiency: expected a fraction"),
        ({"nic.cx6.line_rate": "fast"}, "--set: nic.cx6.line_rate: expected a rate like"),
        ({"odp.fault": 1}, "write the unit explicitly"),
    ],
)
def test_override_errors_name_the_key(
    cost: CostModel, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        cost.with_overrides(overrides, source="--set")
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_dump_round_trip(cost: CostModel) -> None:
    c2 = cost.with_overrides({"reg.host.per_byte": "0.098ns/B", "odp.fault": "250us"})
    assert CostModel.load(c2.model_dump(mode="json")) == c2
    assert CostModel.model_validate(c2.model_dump()) == c2


def test_pcie_and_nic_parameters_are_documented() -> None:
    """docs/cost-model/pcie-and-nic.md lists every PCIe, NIC, RDMA and per-driver
    registration parameter with its source (issue 11)."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs/cost-model/pcie-and-nic.md").read_text(
        encoding="utf-8"
    )
    owned = ("pcie.tlp.", "pcie.lat.", "pcie.read.", "pcie.bar_read.", "pcie.rc.", "nic.", "rdma.")
    for p in parameters():
        if p.key.startswith(owned) or p.key.startswith(("reg.efa.", "reg.mlx5.")):
            assert f"`{p.key}`" in doc, p.key


def test_low_confidence_pcie_and_nic_parameters_have_a_range() -> None:
    """--robust varies every low-confidence parameter over its range: the ones issue 11 adds
    all have one."""
    owned = ("pcie.", "nic.", "rdma.", "reg.efa.", "reg.mlx5.", "stage.")
    for p in parameters():
        if p.key.startswith(owned) and p.confidence == "low":
            assert p.sweep or p.choices, p.key
