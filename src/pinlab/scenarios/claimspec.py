"""The ``[claim]`` table of a scenario file: what is claimed, and the expectations that decide it.

::

    [claim]
    statement = "P2P moves at least 1.5x the bytes of a migrate-on-pin exporter."
    camp = "performance"                  # stability | performance | mechanism | ai | settlement
    show = ["tenant.trainer.setup_time"]  # more columns for the verdict table (optional)

    [[claim.expect]]                      # every expectation must hold (all of them)
    variant = "pin-in-place"              # a variant, a list of variants, or "*" (every one)
    metric = "tenant.trainer.throughput"  # a name of `pinlab metrics SCENARIO`
    op = ">="                             # <  <=  ==  >=  >  !=
    than = { variant = "migrate-on-pin", times = 1.5 }   # or: value = "10GB/s"
    because = "pinning in place keeps the P2P path"

    [[claim.expect]]
    fn = "sum"                            # a claim function (pinlab.scenarios.claimfns)
    metric = "tenant.*.throughput"        # its metrics: fnmatch patterns
    op = ">"
    value = "0"

    [[claim.expect]]
    any = [ { ... }, { ... } ]            # a group: any of / all of (``all = [...]``)

``value`` is written in the unit of what it is compared with (``"1.5GB/s"``, ``"4GiB"``,
``"2ms"``, ``"90%"`` for a ratio, a number for a count; ``"0"`` in any unit); ``than``
compares with a metric of another variant (``variant``, default the same one; ``metric`` and
``fn``, default the same) times ``times``. ``==`` and ``!=`` compare within ``tolerance`` (a
ratio of the larger value, default 1e-9: equal to the digits a summary keeps). ``context =
true`` makes an expectation informative: its numbers are shown, it never decides the claim,
and it is skipped when its variants were not run. ``label`` names the verdict table's column.

The models here check the table's shape; :func:`pinlab.scenarios.claims.bind_claim` checks
what it names (variants, metrics, functions, units) against the scenario.

**The string form** (:func:`parse_expectation`; ``pinlab advise --protect``) writes one
comparison on a line, the same language::

    tenant.compositor.denied.ENOMEM == 0
    ratio(tenant.trainer.throughput, tenant.trainer.path_rate) >= 90%
    tenant.trainer.throughput >= 90% of no-policy            # the same metric, another variant
    tenant.trainer.throughput >= 0.9 x no-policy:tenant.analytics.throughput
    settled:tenant.hog.pinned_bytes == 0                      # the left side in one variant

``[VARIANT:]TERM OP RIGHT`` where ``TERM`` is a metric or ``fn(metric, ...)`` and ``RIGHT`` is
a value with its unit, or ``[FACTOR (x|*|of)] [VARIANT:][TERM]`` (``than``: a factor like
``1.5``, ``"150%"``; a bare word without a dot is a variant). It makes a :class:`Comparison`,
checked like any other by ``bind_claim``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)

from pinlab.errors import exactly_one
from pinlab.units import Factor, Fraction

__all__ = [
    "CAMPS",
    "OPS",
    "ClaimSpec",
    "Comparison",
    "Group",
    "Operand",
    "Than",
    "parse_expectation",
]

OPS = ("<", "<=", "==", ">=", ">", "!=")
"""The comparisons an expectation may make."""

Op = Literal["<", "<=", "==", ">=", ">", "!="]
Metrics = str | list[str]
Camp = Literal["stability", "performance", "mechanism", "ai", "settlement"]
CAMPS: tuple[str, ...] = get_args(Camp)
"""The debate's camps (``seed-brief.md``) plus the settlement."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Operand(_Model):
    """A number read from a run: a metric, or a claim function of metrics (``fn``)."""

    metric: Metrics = Field(description="a metric name; with fn, fnmatch patterns")
    fn: str | None = Field(default=None, description="a claim function (sum, max, ratio ...)")
    label: str | None = Field(default=None, description="the verdict table's column name")


class Than(_Model):
    """``than``: the right-hand side read from a variant's run, times a factor."""

    variant: str | None = Field(default=None, description="default: the same variant")
    metric: Metrics | None = Field(default=None, description="default: the left side's")
    fn: str | None = None
    times: Factor = Field(default=1.0, description="a factor: 1.5, '1.5x' or '150%'")


class Comparison(_Model):
    """One expectation: ``<operand> <op> <value | than>`` in each of its variants."""

    variant: str | list[str] = Field(default="*", description="variant(s), or '*' for every")
    metric: Metrics
    fn: str | None = None
    label: str | None = None
    op: Op
    value: int | float | str | None = Field(default=None, description="a value with its unit")
    than: Than | None = None
    tolerance: Fraction = Field(default=1e-9, description="relative tolerance of == and !=")
    because: str = ""
    context: bool = False

    @model_validator(mode="after")
    def _one_right_side(self) -> Comparison:
        exactly_one("value or than", self.value, self.than)
        if isinstance(self.value, bool):
            raise ValueError(f"expected a number or a value with a unit, found {self.value}")
        return self

    @property
    def operand(self) -> Operand:
        return Operand(metric=self.metric, fn=self.fn, label=self.label)


class Group(_Model):
    """``all = [...]`` or ``any = [...]``: expectations that must all, or any one, hold."""

    all_of: list[Expectation] | None = Field(default=None, alias="all")
    any_of: list[Expectation] | None = Field(default=None, alias="any")
    because: str = ""
    context: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> Group:
        if (self.all_of is None) == (self.any_of is None):
            raise ValueError("expected exactly one of all or any in a group")
        members = self.members
        if not members:
            raise ValueError("expected at least one expectation in the group, found none")
        return self

    @property
    def mode(self) -> Literal["all", "any"]:
        return "all" if self.all_of is not None else "any"

    @property
    def members(self) -> list[Expectation]:
        return list(self.all_of if self.all_of is not None else self.any_of or [])


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "group" if ("all" in value or "any" in value) else "comparison"
    return "group" if isinstance(value, Group) else "comparison"


Expectation = Annotated[
    Annotated[Comparison, Tag("comparison")] | Annotated[Group, Tag("group")],
    Discriminator(_kind),
]
"""A comparison, or a group of expectations (``all``/``any``)."""

Group.model_rebuild()


class ClaimSpec(_Model):
    """``[claim]``: the statement, the debate's camp it belongs to, the expectations, and
    more columns for the verdict table (``show``)."""

    statement: str = Field(default="", description="the claim, in one sentence")
    camp: Camp | None = None
    expect: list[Expectation] = Field(default_factory=list)
    show: list[str | Operand] = Field(default_factory=list)

    def shown(self) -> list[Operand]:
        return [Operand(metric=s) if isinstance(s, str) else s for s in self.show]


# -- the string form -------------------------------------------------------------------------

_OP_RE = re.compile(r"<=|>=|==|!=|<|>")
_TERM_RE = re.compile(
    r"^(?:(?P<fn>[A-Za-z_][A-Za-z0-9_]*)\((?P<args>[^()]*)\)|(?P<metric>[^\s(),]+))$"
)
_THAN_RE = re.compile(r"^(?P<times>[^\s*×]+?)\s*(?:\bof\b|\*|×|x)\s*(?P<ref>\S.*)$")


def _term(text: str, what: str) -> tuple[str | list[str], str | None]:
    """``metric`` or ``fn(m1, m2, ...)`` → (metric or metrics, fn)."""
    m = _TERM_RE.match(text.strip())
    if m is None:
        raise ValueError(f"expected {what} (a metric or fn(metric, ...)), found {text.strip()!r}")
    if m.group("metric") is not None:
        return m.group("metric"), None
    args = [a.strip() for a in m.group("args").split(",")]
    if not all(args):
        raise ValueError(f"expected metrics between the parentheses, found {text.strip()!r}")
    return args, m.group("fn")


def _variant_and_rest(text: str) -> tuple[str | None, str]:
    """``variant:rest`` → (variant, rest); metric names hold no colon."""
    head, sep, rest = text.partition(":")
    if sep and head.strip() and "(" not in head:
        return head.strip(), rest.strip()
    return None, text.strip()


def parse_expectation(text: str, *, variant: str = "*") -> Comparison:
    """One comparison in the string form (module docstring) as a :class:`Comparison`;
    ``variant`` is the left side's when the text names none. ``ValueError`` (one line, what
    was expected and found) for text that is not one."""
    ops = list(_OP_RE.finditer(text))
    if len(ops) != 1:
        raise ValueError(
            f"expected one comparison LEFT OP RIGHT with OP one of {' '.join(OPS)}, found "
            f"{'none' if not ops else len(ops)} in {text.strip()!r}"
        )
    op = ops[0].group()
    left, right = text[: ops[0].start()].strip(), text[ops[0].end() :].strip()
    if not left or not right:
        raise ValueError(f"expected a left and a right side around {op}, found {text.strip()!r}")
    lhs_variant, left = _variant_and_rest(left)
    metric, fn = _term(left, "a left side")
    doc: dict[str, Any] = {"variant": lhs_variant or variant, "metric": metric, "op": op}
    if fn is not None:
        doc["fn"] = fn
    than = _THAN_RE.match(right)
    if right[0].isdigit() or right[0] in "+-.":
        if than is None:
            doc["value"] = right
        else:
            doc["than"] = _than(than.group("times"), than.group("ref"))
    else:
        doc["than"] = _than("1", right)
    try:
        return Comparison.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        raise ValueError(f"{first['msg']} in {text.strip()!r}") from None


def _than(times: str, ref: str) -> dict[str, Any]:
    """The right side read from a run: ``[variant:][term]``, or a bare variant name."""
    out: dict[str, Any] = {"times": times}
    ref = ref.strip()
    rhs_variant, rest = _variant_and_rest(ref)
    if rhs_variant is None and "." not in ref and "(" not in ref:
        rhs_variant, rest = ref, ""
    if rhs_variant is not None:
        out["variant"] = rhs_variant
    if rest:
        metric, fn = _term(rest, "a right side")
        out["metric"] = metric
        if fn is not None:
            out["fn"] = fn
    return out
