"""What every workload module shares: the parameter base model, field helpers, idling."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import simpy
from pydantic import BaseModel, ConfigDict, Field

from pinlab.sim.engine import Ctx
from pinlab.units import exact_size

Gen = Generator[simpy.Event, Any, Any]
"""A workload's (or helper's) SimPy generator."""


class WorkloadParams(BaseModel):
    """The parameters of one workload, validated once from the scenario file.

    Each workload's model names it in ``workload`` (a ``Literal``, the discriminator of the
    scenario schema's union of all workloads' models); every other field has a default, a
    unit where it has one (written as a scenario file writes it, ``"1GiB"``, ``"500ms"``, and
    parsed by :mod:`pinlab.units`) and a description."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, strict=True)

    workload: str

    def events(self, duration: float) -> float:
        """An upper estimate of the simulator events this workload makes in ``duration``
        seconds (its iterations: frames, touches, bursts, messages), so that work that can
        never finish is refused before it starts (:data:`MAX_EVENTS`). Workloads whose work
        is bounded by their parameters alone return 0."""
        return 0.0


FASTEST_PATH = 1e12
"""Bytes per second no path pinlab models exceeds (NVLink 4 moves 900 GB/s per GPU): a
workload that sends back to back makes at most ``duration * FASTEST_PATH / message`` messages,
its events' upper estimate."""

MAX_EVENTS = 10_000_000
"""The most workload iterations one tenant may plan in a run (``events``); a scenario above it
is a config error naming the bound (10⁷ iterations is minutes of wall time)."""


Ref = Literal["device", "nic", "display", "domain"]
"""What a parameter names on the platform: an exporting device, an RDMA NIC, a display engine,
or a GEM domain of the workload's device. The scenario schema checks every reference against
the platform before anything runs (a name that does not exist is a config error)."""


def param(
    default: Any,
    description: str,
    *,
    unit: str = "",
    ref: Ref | None = None,
    ref_optional: bool = False,
    **constraints: Any,
) -> Any:
    """A parameter field: its default (a size or time written as a scenario file writes it,
    ``"1GiB"``, so it is validated and shown like a user's value), its unit (``B``, ``s``,
    ``B/s``, ``1/s``, ``ratio``; none for names, counts and switches, kept in the field's
    JSON schema as ``unit``), what it names on the platform (``ref``, :data:`Ref`; a None or
    ``"auto"``/``"all"`` value means the workload's default choice, which must exist too --
    unless ``ref_optional``: then None names nothing and the workload needs none, as
    perftest's ``device`` None is host memory) and what it means; ``constraints`` are
    pydantic's (``ge=0``)."""
    extra: dict[str, Any] = {}
    if unit:
        extra["unit"] = unit
    if ref:
        extra["ref"] = ref
    if ref_optional:
        extra["ref_optional"] = True
    return Field(
        default=default, description=description, json_schema_extra=extra or None, **constraints
    )


def param_ref(model: type[BaseModel], name: str) -> Ref | None:
    """What parameter ``name`` of ``model`` names on the platform (None: nothing)."""
    extra = model.model_fields[name].json_schema_extra
    ref = extra.get("ref") if isinstance(extra, dict) else None
    return ref if ref in ("device", "nic", "display", "domain") else None  # type: ignore[return-value]


def param_ref_optional(model: type[BaseModel], name: str) -> bool:
    """Whether parameter ``name`` of ``model`` left at None names nothing on the platform
    (:func:`param`'s ``ref_optional``)."""
    extra = model.model_fields[name].json_schema_extra
    return isinstance(extra, dict) and extra.get("ref_optional") is True


def param_unit(model: type[BaseModel], name: str) -> str:
    """The unit of parameter ``name`` of ``model`` ('' for none)."""
    extra = model.model_fields[name].json_schema_extra
    return str(extra.get("unit", "")) if isinstance(extra, dict) else ""


def at_most(inner: str, inner_size: int, outer: str, outer_size: int) -> None:
    """``ValueError`` when parameter ``inner`` (a size in bytes) exceeds ``outer``."""
    if inner_size > outer_size:
        raise ValueError(
            f"expected {inner} <= {outer} ({exact_size(outer_size)}), "
            f"found {inner} = {exact_size(inner_size)}"
        )


Fallback = Literal["auto", "none"]
"""``auto``: an ODP registration refused (``-EOPNOTSUPP``) retries pinned, a pinned one refused
(habanalabs ``-EPERM`` without P2P, ``-EOPNOTSUPP``) stages through host memory; ``none``:
the refusal ends the workload."""


def fallback() -> Any:
    """The ``fallback`` parameter of a workload that registers buffers (:data:`Fallback`)."""
    return param(
        "auto",
        "auto: a refused ODP registration retries pinned, a refused pinned one stages through "
        "host memory; none: the refusal ends the workload",
    )


Row = TypeVar("Row")


@dataclass
class ToolTable(Generic[Row]):
    """The part of a result that a workload modelling a benchmark tool shares (gdrcopy's
    copylat, nccl-tests, perftest): ``rows``, one per line the tool prints, in its order.
    Rows are not metrics -- ``pinlab bench`` prints them as the tool would; the result's
    headline numbers, declared with :func:`~pinlab.sim.metrics.metric`, are read off them.

    A mixin of a :class:`~pinlab.sim.metrics.TenantResult` subclass, which holds ``rows`` in
    its own slots (so it has none here: a result may also be an ``RdmaResult``)."""

    __slots__ = ()

    rows: list[Row] = field(default_factory=list)


def idle(ctx: Ctx) -> Gen:
    """Hold the process (and everything it owns) until the run ends."""
    yield ctx.env.event()


def undo_export(ctx: Ctx, handle: int | None, fd: int | None) -> Gen:
    """Undo a half-made export after a refusal: close the dma-buf ``fd`` and then the GEM
    ``handle``, whichever of them the process got."""
    if fd is not None:
        yield from ctx.call(ctx.proc.close, fd)
    if handle is not None:
        yield from ctx.call(ctx.proc.gem_close, handle)
