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
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from pinlab.units import Factor, Fraction

__all__ = ["CAMPS", "OPS", "ClaimSpec", "Comparison", "Group", "Operand", "Than"]

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
        if (self.value is None) == (self.than is None):
            raise ValueError(
                "expected exactly one of value or than, found "
                + ("both" if self.value is not None else "neither")
            )
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
