"""``pinlab bench registration reg_mr``: one registration's time through the kernel model, as
the EFA registration model prices it (cost-model.md §6.2, validation-tables.md F1)."""

from __future__ import annotations

import pytest

from pinlab.bench import run_bench
from pinlab.bench.registration import parse_amount
from pinlab.errors import ConfigError
from pinlab.platform.cost import CostModel
from pinlab.units import GiB

COST = CostModel()


def test_amounts_are_decimal_or_binary_and_rounded_up() -> None:
    assert parse_amount("2.79MB") == 2_790_000
    assert parse_amount("1GiB") == GiB
    assert parse_amount("9.17GiB") == -(-917 * GiB // 100)
    assert parse_amount("4096") == 4096
    assert parse_amount("lots") is None


def test_efa_registration_grows_with_the_device_memory_registered_before() -> None:
    t = run_bench(
        "registration",
        ["reg_mr", "--size", "2MiB", "--registered", "0,4GiB"],
        platform="p5",
    )
    assert t.columns == ("#bytes", "registered[GiB]", "t_reg[ms]")
    first, later = (float(v) for v in t.column("t_reg[ms]"))
    efa = COST.reg.efa
    own = efa.fixed + efa.per_own_byte * 2 * 2**20
    assert first == pytest.approx(own * 1e3 * COST.reg.dmabuf_vs_peermem, rel=1e-3)
    assert later - first == pytest.approx(
        efa.per_registered * 4 * GiB * 1e3 * COST.reg.dmabuf_vs_peermem, rel=1e-3
    )


def test_bad_flags_are_one_line() -> None:
    with pytest.raises(ConfigError, match="--size"):
        run_bench("registration", ["reg_mr", "--size", "-1"], platform="p5")
    with pytest.raises(ConfigError, match="reg_mr"):
        run_bench("registration", ["ib_write_bw"], platform="p5")
