"""The claim language (``[claim]``, ``docs/scenarios.md``): parsing, units, comparisons,
``than``, claim functions, all/any groups, context, the errors naming what is known, not
judged, and the verdict table's tenant states.

One small scenario runs once per module; each test judges its own claim on those results (a
claim never changes what runs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pinlab.errors import ConfigError
from pinlab.scenarios.claimfns import CLAIM_FUNCTIONS, ClaimFunction, register_claim_function
from pinlab.scenarios.claims import judge, show_value
from pinlab.scenarios.config import load_scenario
from pinlab.scenarios.result import RunResult
from pinlab.scenarios.runner import run_scenario, run_variant

BASE = """
[scenario]
name = "tiny"
duration = "1s"
seed = 3

[platform]
preset = "workstation"

[kernel]
profile = "6.16"
move_notify = true

[[tenants]]
name = "kv"
workload = "kv-transfer"
params = { buffer = "256MiB", block = "64MiB" }

[[tenants]]
name = "late"
workload = "pressure"
start = "5s"

[variants.big]
[variants.small]
"tenants.kv.params.block" = "16MiB"
"""


def scenario(tmp_path: Path, claim: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(BASE + "\n" + claim, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[RunResult]:
    cfg = load_scenario(scenario(tmp_path_factory.mktemp("run"), ""))
    return [run_variant(cfg, v) for v in cfg.variants]


@pytest.fixture
def claim(tmp_path: Path, results: list[RunResult]) -> Iterator[object]:
    def verdict(text: str, ran: list[str] | None = None) -> object:
        cfg = load_scenario(scenario(tmp_path, text))
        return judge(cfg, [r for r in results if ran is None or r.variant in ran])

    yield verdict


def rate(results: list[RunResult], variant: str) -> float:
    return float(next(r for r in results if r.variant == variant).metric("tenant.kv.throughput"))


# -- comparisons, units, than ------------------------------------------------------------------


def test_a_value_with_units_held_and_failed(claim, results: list[RunResult]) -> None:  # type: ignore[no-untyped-def]
    big = rate(results, "big")
    below = f"{big / 2e9:.3f}GB/s"
    above = f"{big * 2 / 1e9:.3f}GB/s"
    head = '[[claim.expect]]\nvariant = "big"\nmetric = "tenant.kv.throughput"\nop = ">"\n'
    ok = claim(f'{head}value = "{below}"')
    assert ok.judged and ok.held and ok.word == "HELD"
    bad = claim(f'{head}value = "{above}"')
    assert bad.judged and not bad.held and bad.word == "FAILED"
    assert bad.explanation.startswith("Failed: big: tenant.kv.throughput")
    assert show_value(big, "B/s") in bad.explanation


@pytest.mark.parametrize(
    ("op", "value", "held"),
    [
        ("<", 1, True),
        ("<=", 0, True),
        ("==", 0, True),
        (">=", 1, False),
        (">", 0, False),
        ("!=", 0, False),
    ],
)
def test_every_operator(claim, op: str, value: int, held: bool) -> None:  # type: ignore[no-untyped-def]
    v = claim(
        f'[[claim.expect]]\nmetric = "global.stale_dma_incidents"\nop = "{op}"\nvalue = {value}'
    )
    assert v.held is held


def test_than_another_variant_times_a_factor(claim, results: list[RunResult]) -> None:  # type: ignore[no-untyped-def]
    ratio = rate(results, "big") / rate(results, "small")
    lo, hi = ratio * 0.9, ratio * 1.1
    v = claim(
        "[[claim.expect]]\n"
        f'variant = "big"\nmetric = "tenant.kv.throughput"\nop = ">="\n'
        f'than = {{ variant = "small", times = "{lo:.4f}x" }}\n'
        'because = "bigger blocks move faster"\n'
        "[[claim.expect]]\n"
        f'variant = "big"\nmetric = "tenant.kv.throughput"\nop = "<"\n'
        f'than = {{ variant = "small", times = {hi:.4f} }}\n'
    )
    assert v.held, v.explanation
    assert v.explanation.startswith("Bigger blocks move faster (big: tenant.kv.throughput")
    assert f"({ratio:.2f}x)" in v.explanation


def test_equal_within_tolerance(claim, results: list[RunResult]) -> None:  # type: ignore[no-untyped-def]
    big = rate(results, "big")
    exact = claim(
        f'[[claim.expect]]\nvariant = "big"\nmetric = "tenant.kv.throughput"\nop = "=="\n'
        f"value = {big * 1.001}"
    )
    assert not exact.held
    loose = claim(
        f'[[claim.expect]]\nvariant = "big"\nmetric = "tenant.kv.throughput"\nop = "=="\n'
        f'value = {big * 1.001}\ntolerance = "1%"'
    )
    assert loose.held


def test_values_parse_in_the_metrics_unit(claim) -> None:  # type: ignore[no-untyped-def]
    for metric, value in [
        ("tenant.kv.bytes", '"1KiB"'),
        ("tenant.kv.latency_p99", '"1ns"'),
        ("tenant.kv.throughput", '"8Gbps"'),
        ("tenant.kv.transfers", "1"),
        ("tenant.kv.bytes", '"0"'),
    ]:
        v = claim(
            f'[[claim.expect]]\nvariant = "big"\nmetric = "{metric}"\nop = ">="\nvalue = {value}'
        )
        assert v.held, (metric, v.explanation)


# -- claim functions ----------------------------------------------------------------------------


def test_sum_ratio_count_and_a_registered_function(claim, results: list[RunResult]) -> None:  # type: ignore[no-untyped-def]
    v = claim(
        '[[claim.expect]]\nvariant = "big"\nfn = "sum"\nmetric = "tenant.*.throughput"\n'
        f'op = "=="\nvalue = {rate(results, "big")}\n'
        '[[claim.expect]]\nvariant = "big"\nfn = "ratio"\n'
        'metric = ["tenant.kv.throughput", "tenant.kv.path_rate"]\nop = "<="\nvalue = "100%"\n'
        '[[claim.expect]]\nfn = "count"\nmetric = "tenant.*.failed"\nop = "=="\nvalue = 2\n'
    )
    assert v.held, v.explanation
    name = "test-twice-max"
    if name not in CLAIM_FUNCTIONS:
        register_claim_function(
            ClaimFunction(
                name,
                "twice the largest value",
                None,
                lambda units: units[0],
                lambda values: 2 * max(x for arg in values for x in arg),
            )
        )
    doubled = claim(
        f'[[claim.expect]]\nvariant = "big"\nfn = "{name}"\nmetric = "tenant.kv.throughput"\n'
        f'op = "=="\nvalue = {2 * rate(results, "big")}'
    )
    assert doubled.held, doubled.explanation
    with pytest.raises(ValueError, match="already registered"):
        register_claim_function(CLAIM_FUNCTIONS["sum"])


def test_an_unreported_counter_is_zero_and_an_unknown_metric_fails_saying_why(claim) -> None:  # type: ignore[no-untyped-def]
    zero = claim('[[claim.expect]]\nmetric = "tenant.kv.denied.ENOMEM"\nop = "=="\nvalue = 0')
    assert zero.held
    unknown = claim('[[claim.expect]]\nmetric = "tenant.late.bursts"\nop = ">="\nvalue = 0')
    assert not unknown.held and unknown.judged
    assert "tenant.late.bursts was not reported" in unknown.explanation
    assert "late had not started by the end of the run" in unknown.explanation


def test_a_tenant_that_never_reached_its_data_phase_observed_nothing(claim) -> None:  # type: ignore[no-untyped-def]
    """A rate of 0 from a tenant that had not started is no observation: ``>= 0`` and a
    comparison with another variant's equally idle tenant do not hold, and say why."""
    v = claim(
        '[[claim.expect]]\nvariant = "big"\nmetric = "tenant.late.throughput"\nop = ">="\n'
        'than = { variant = "small" }\n'
    )
    assert v.judged and not v.held
    assert "late had not started by the end of the run" in v.explanation
    plain = claim('[[claim.expect]]\nmetric = "tenant.late.throughput"\nop = ">="\nvalue = 0')
    assert not plain.held


# -- groups, context, not judged ----------------------------------------------------------------

HELD = '{ metric = "global.stale_dma_incidents", op = "==", value = 0 }'
FAILS = '{ metric = "global.stale_dma_incidents", op = ">", value = 0 }'


@pytest.mark.parametrize(
    ("group", "held"),
    [
        (f"all = [{HELD}, {HELD}]", True),
        (f"all = [{HELD}, {FAILS}]", False),
        (f"any = [{FAILS}, {HELD}]", True),
        (f"any = [{FAILS}, {FAILS}]", False),
        (f"any = [{FAILS}, {{ all = [{HELD}, {HELD}] }}]", True),
    ],
)
def test_all_and_any_groups(claim, group: str, held: bool) -> None:  # type: ignore[no-untyped-def]
    v = claim(f"[[claim.expect]]\n{group}\n")
    assert v.judged and v.held is held


def test_context_expectations_never_decide(claim) -> None:  # type: ignore[no-untyped-def]
    v = claim(
        f"[[claim.expect]]\n{HELD.strip('{} ').replace(', ', chr(10))}\n"
        "[[claim.expect]]\n"
        'metric = "global.stale_dma_incidents"\nop = ">"\nvalue = 0\ncontext = true\n'
        'because = "a note"\n'
    )
    assert v.held and "A note" in v.explanation


def test_not_judged_without_expectations_or_with_variants_not_run(claim) -> None:  # type: ignore[no-untyped-def]
    bare = claim("")
    assert not bare.judged and bare.word == "NOT JUDGED" and "no expectations" in bare.explanation
    assert bare.columns[:2] == ["variant", "kv (kv-transfer)"]  # one column per tenant
    part = claim(
        '[[claim.expect]]\nvariant = "big"\nmetric = "tenant.kv.throughput"\nop = ">"\n'
        'than = { variant = "small" }\n',
        ran=["big"],
    )
    assert not part.judged and "variant(s) small not run" in part.explanation


def test_table_states(tmp_path: Path) -> None:
    """A tenant still in setup at the end of the run, or not started, reads so instead of 0."""
    text = BASE.replace('duration = "1s"', 'duration = "2ms"').replace(
        'buffer = "256MiB"', 'buffer = "4GiB"'
    )
    text += (
        '[claim]\nshow = ["tenant.late.throughput"]\n'
        '[[claim.expect]]\nmetric = "tenant.kv.throughput"\nop = ">"\nvalue = 0\n'
    )
    path = tmp_path / "setup.toml"
    path.write_text(text, encoding="utf-8")
    results, verdict = run_scenario(load_scenario(path))
    assert results[0].tenant_state("kv") == "setup"
    assert results[0].tenant_state("late") == "not started"
    row = verdict.rows[0]
    assert row["tenant.kv.throughput"] == "setup"
    assert row["tenant.late.throughput"] == "not started"
    assert not verdict.held and "kv still in setup at the end of the run" in verdict.explanation


def test_the_generic_table_keeps_each_tenants_bytes_apart(tmp_path: Path) -> None:
    """Without expectations a kv-transfer (NIC bytes) and a pressure tenant (touches of device
    memory) get a column each; their rates are never summed into one."""
    text = BASE.replace('start = "5s"', 'start = "0s"')
    path = tmp_path / "two.toml"
    path.write_text(text, encoding="utf-8")
    cfg = load_scenario(path)
    result = run_variant(cfg, "big")
    verdict = judge(cfg, [result])
    assert verdict.columns == [
        "variant",
        "kv (kv-transfer)",
        "late (pressure)",
        "denials",
        "stale DMA",
    ]
    row = verdict.rows[0]
    assert row["kv (kv-transfer)"] == show_value(result.metric("tenant.kv.throughput"), "B/s")
    assert row["late (pressure)"] == show_value(result.metric("tenant.late.throughput"), "B/s")


# -- errors name what is known -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[[claim.expect]]\nvariant = "huge"\nmetric = "global.leaks"\nop = "=="\nvalue = 0',
            r"claim\.expect\[0\]\.variant: expected a variant of tiny \(big, small\) or '\*', "
            r"found 'huge'",
        ),
        (
            '[[claim.expect]]\nmetric = "tenant.kv.thruput"\nop = "=="\nvalue = 0',
            r"claim\.expect\[0\]\.metric: expected a metric of variant big \(did you mean "
            r"tenant\.kv\.throughput[^?]*\? known: tenant\.kv\.bytes, "
            r".*found 'tenant\.kv\.thruput'",
        ),
        (
            '[[claim.expect]]\nmetric = "tenant.nobody.bytes"\nop = "=="\nvalue = 0',
            r"known: tenant\.kv\.\*, tenant\.late\.\*; ",
        ),
        (
            '[[claim.expect]]\nmetric = "tenant.*.bytes"\nop = "=="\nvalue = 0',
            r"expected one metric name \(patterns and lists need a claim function",
        ),
        (
            '[[claim.expect]]\nfn = "median"\nmetric = "tenant.*.bytes"\nop = "=="\nvalue = 0',
            r"claim\.expect\[0\]\.fn: expected a claim function \(sum, max, min, mean, count, "
            r"ratio.*found 'median'",
        ),
        (
            '[[claim.expect]]\nfn = "sum"\nmetric = "tenant.kv.*"\nop = ">"\nvalue = 0',
            r"claim\.expect\[0\]\.metric: expected metrics of one unit, found 'tenant\.kv\.\*' "
            r"matching B, B/s, count, s",
        ),
        (
            '[[claim.expect]]\nmetric = "tenant.kv.throughput"\nop = ">"\nvalue = "4GiB"',
            r"claim\.expect\[0\]\.value: tenant\.kv\.throughput is in B/s: expected a rate",
        ),
        (
            '[[claim.expect]]\nmetric = "tenant.kv.throughput"\nop = "~"\nvalue = 0',
            r"claim\.expect\[0\].*op",
        ),
        (
            '[[claim.expect]]\nmetric = "tenant.kv.throughput"\nop = ">"',
            r"expected exactly one of value or than, found neither",
        ),
        (
            '[[claim.expect]]\nmetric = "tenant.kv.throughput"\nop = ">"\n'
            'than = { metric = "tenant.kv.bytes" }',
            r"claim\.expect\[0\]\.than: expected a number in B/s",
        ),
        (
            "[[claim.expect]]\nany = []\n",
            r"expected at least one expectation in the group",
        ),
        ('[claim]\ncolour = "red"\n', r"claim\.colour"),
    ],
)
def test_errors_are_one_line_naming_what_is_known(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as info:
        load_scenario(scenario(tmp_path, text))
    assert "\n" not in str(info.value)


def test_a_variant_cannot_change_the_claim(tmp_path: Path) -> None:
    path = scenario(tmp_path, "").with_suffix(".toml")
    path.write_text(BASE + '"claim.statement" = "x"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"variants\.small\.claim\.statement: expected a change"):
        load_scenario(path)


def test_set_changes_the_claim(tmp_path: Path) -> None:
    path = scenario(tmp_path, '[[claim.expect]]\nmetric = "global.leaks"\nop = "=="\nvalue = 0\n')
    cfg = load_scenario(path, sets=["claim.statement=changed"])
    assert cfg.claim.statement == "changed"
    with pytest.raises(ConfigError, match="expected a variant"):
        load_scenario(path).with_set("claim.expect.0.variant=nope")
