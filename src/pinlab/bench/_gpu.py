"""What the GPU tools (``nvbandwidth``, ``p2p``, ``nccl-tests``, ``gdrcopy``) share: argument
parsing whose errors are one :class:`~pinlab.errors.ConfigError` line, the simulation of a
platform with the user's cost overrides and seed, running workloads to completion, and the
devices' names and PCI addresses as the tools print them."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn, TypeVar

from pinlab.bench import BenchSetup
from pinlab.errors import ConfigError
from pinlab.platform.cluster import ClusterSpec, FabricSpec
from pinlab.platform.presets import resolve_platform
from pinlab.platform.spec import PlatformSpec
from pinlab.platform.topology import Machine
from pinlab.sim.engine import Simulation, Tenant
from pinlab.sim.metrics import TenantResult
from pinlab.sim.workloads import WORKLOADS, WorkloadParams, spawn

__all__ = [
    "ToolParser",
    "bus_id",
    "gpu_spec",
    "parse_sets",
    "run_one",
    "run_tenants",
    "simulation",
    "single_node",
]

R = TypeVar("R", bound=TenantResult)

_FOREVER = 1e9
"""Simulated seconds a tool runs for at most (the workloads finish long before; the sampler
ticks only once)."""


class ToolParser(argparse.ArgumentParser):
    """``argparse`` for a real tool's flags: a bad flag or value is one ``ConfigError`` naming
    the tool, the flag and what was expected (no usage dump, no exit)."""

    def __init__(self, tool: str, **kwargs: Any) -> None:
        super().__init__(prog=tool, add_help=False, allow_abbrev=False, **kwargs)
        self.tool = tool

    def error(self, message: str) -> NoReturn:
        raise ConfigError(self.tool, "arguments", message)

    def fail(self, flag: str, expected: str, found: object) -> NoReturn:
        """One line: ``<tool>: <flag>: expected <expected>, found <found>``."""
        raise ConfigError(self.tool, flag, f"expected {expected}, found {found!r}")


def parse_sets(sets: Sequence[str]) -> dict[str, str]:
    """``["key=value", ...]`` → cost overrides (validated later by the cost model)."""
    out: dict[str, str] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--set", item, "expected KEY=VALUE with a cost-model key")
        out[key.strip()] = value.strip()
    return out


def simulation(setup: BenchSetup, *, nodes: int | None = None) -> Simulation:
    """The simulation of ``setup``'s platform (a preset name or a platform file, with its
    parameters), as ``nodes`` identical nodes joined by a non-blocking fabric when ``nodes`` > 1,
    with its cost overrides and seed. ``ConfigError`` for a bad platform or key."""
    spec = resolve_platform(setup.platform, **dict(setup.platform_params))
    if nodes is not None and nodes > 1:
        if isinstance(spec, ClusterSpec):
            spec = spec.model_copy(update={"nodes": nodes})
        else:
            spec = ClusterSpec(
                name=f"{spec.name}x{nodes}", nodes=nodes, node=spec, fabric=FabricSpec()
            )
    return Simulation(
        spec, cost_overrides=dict(parse_sets(setup.sets)), seed=setup.seed, sample_interval=_FOREVER
    )


def single_node(parser: ToolParser, setup: BenchSetup, why: str) -> None:
    """Refuse a request for more than one node: ``why`` the tool runs on one."""
    if setup.nodes is not None and setup.nodes > 1:
        parser.fail("--nodes", f"1 ({why})", setup.nodes)


def node_spec(sim: Simulation) -> PlatformSpec:
    """The (first) node's description."""
    return sim.node().machine.spec


def gpu_spec(tool: str, sim: Simulation, platform: str) -> PlatformSpec:
    """The (first) node's description when it has a GPU for ``tool`` to run on (``platform``
    is the preset or file the user named); else the
    :class:`ConfigError` saying the platform has none and how to get one (``cx-pair``, the
    default, has a GPU only with ``--param gpu=...``) -- not a ``GPU id below 0``."""
    spec = node_spec(sim)
    if not spec.devices:
        raise ConfigError(
            tool,
            "--platform",
            f"expected a platform with a GPU, found {platform} (node {spec.name}), which has none "
            "(e.g. --platform workstation, or --param gpu=h100 on cx-pair)",
        )
    return spec


def run_tenants(sim: Simulation, params: WorkloadParams, *, per_node: bool = False) -> list[Tenant]:
    """Start workload ``params`` (one tenant, or one per node with ``per_node``) and run the
    simulation until they are done; ``ConfigError`` if one failed."""
    WORKLOADS[params.workload]  # the workload exists
    nodes = list(sim.nodes) if per_node else [next(iter(sim.nodes))]
    tenants = [spawn(sim, f"{params.workload}-{n}", params, node=n) for n in nodes]
    try:
        sim.run(_FOREVER)
    except (KeyError, ValueError) as e:
        raise ConfigError(params.workload, "run", str(e).strip("'\"")) from None
    for t in tenants:
        if t.error is not None:
            raise ConfigError(params.workload, t.name, f"the workload failed: {t.error}")
    return tenants


def run_one(sim: Simulation, params: WorkloadParams, result: type[R]) -> R:
    """Run workload ``params`` as the one tenant of the first node (:func:`run_tenants`) and
    return what it measured, a ``result``."""
    (tenant,) = run_tenants(sim, params)
    measured = tenant.result
    assert isinstance(measured, result)
    return measured


def bus_id(machine: Machine, device: str) -> tuple[int, int, int]:
    """(domain, bus, device) of a device's PCI function, as CUDA reports them."""
    domain, bus, slot, _fn = machine.pdevs[device].bdf
    return domain, bus, slot
