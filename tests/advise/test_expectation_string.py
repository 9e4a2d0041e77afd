"""The string form of an expectation (``claimspec.parse_expectation``, ``--protect``): the
same :class:`Comparison` a ``[[claim.expect]]`` table makes, bound and judged the same way."""

from __future__ import annotations

import pytest

from pinlab.scenarios.claimspec import Comparison, parse_expectation


def test_value_comparisons() -> None:
    c = parse_expectation("tenant.compositor.denied.ENOMEM == 0", variant="settled")
    assert c == Comparison(
        variant="settled", metric="tenant.compositor.denied.ENOMEM", op="==", value="0"
    )
    c = parse_expectation("ratio(tenant.trainer.throughput, tenant.trainer.path_rate) >= 90%")
    assert c.fn == "ratio"
    assert c.metric == ["tenant.trainer.throughput", "tenant.trainer.path_rate"]
    assert (c.op, c.value, c.variant) == (">=", "90%", "*")
    assert parse_expectation("tenant.a.throughput > 1.5GB/s").value == "1.5GB/s"
    assert parse_expectation("ratio(a.b, c.d) >= 1.5x").value == "1.5x"


def test_another_variant_times_a_factor() -> None:
    c = parse_expectation("tenant.trainer.throughput >= 90% of no-policy", variant="settled")
    assert c.than is not None
    assert (c.than.variant, c.than.metric, c.than.times) == ("no-policy", None, 0.9)
    c = parse_expectation("tenant.t.throughput >= 0.5 x staged:tenant.u.throughput")
    assert c.than is not None
    assert (c.than.variant, c.than.metric, c.than.times) == ("staged", "tenant.u.throughput", 0.5)
    c = parse_expectation("a.b <= 2 * c.d")
    assert c.than is not None
    assert (c.than.variant, c.than.metric, c.than.times) == (None, "c.d", 2.0)


def test_left_side_variant() -> None:
    c = parse_expectation("settled:tenant.hog.pinned_bytes == 0", variant="*")
    assert c.variant == "settled"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tenant.a.throughput", "expected one comparison"),
        ("a.b >= c.d <= e.f", "found 2"),
        ("a.b >=", "expected a left and a right side"),
        ("f(a.b, ) > 1", "expected metrics between the parentheses"),
        ("a.b >= 2 x", "expected"),
    ],
)
def test_malformed(text: str, message: str) -> None:
    try:
        c = parse_expectation(text)
    except ValueError as e:
        assert message in str(e)
        assert "\n" not in str(e)
    else:  # "2 x" alone is a value: the unit check happens when it is bound
        assert text == "a.b >= 2 x" and c.value == "2 x"
