"""Tenant parameters that name things on the platform, checked before anything runs.

A workload parameter declared with ``ref=`` (:func:`pinlab.sim.workloads.base.param`) names an
exporting device, an RDMA NIC, a display engine or a GEM domain. A name the platform does not
have would otherwise surface as a ``KeyError`` or ``-ENODEV`` in the middle of a run -- or, worse,
as a run that "holds" because the tenant never did anything -- so :func:`check_references`
refuses it with the one-line :class:`~pinlab.errors.ConfigError` of every other bad input,
naming the names the platform does have. A default (``None``, ``"auto"``, ``"all"``) means the
workload picks one itself; then the platform must have at least one -- unless the parameter is
declared ``ref_optional``, whose None names nothing (perftest's ``device``: host memory). A
domain is checked by the device's driver (:meth:`~pinlab.drivers.base.ExporterDriver.domain_error`),
on the device the tenant names, else its display's device, else the node's first device.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pinlab.drivers import EXPORTERS
from pinlab.errors import ConfigError, show_value
from pinlab.platform.spec import PlatformSpec
from pinlab.sim.workloads.base import Ref, WorkloadParams, param_ref, param_ref_optional

__all__ = ["check_references", "rename_references"]

_DEFAULTS = (None, "auto", "all")
_WHAT = {"device": "an exporting device", "nic": "an RDMA NIC", "display": "a display engine"}


def _names(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [] if value in _DEFAULTS else [str(value)]


_PLACEHOLDER = re.compile(r"\{([A-Za-z][A-Za-z0-9_.+-]*)\}")


def rename_references(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` (a scenario's ``tenants``/``policy`` table, or a variant's changes) with every
    string equal to a key of ``names`` -- a device, NIC or display name -- and every ``{key}``
    placeholder replaced by its value (``pinlab run --map gpu0=gpu1``)."""
    if isinstance(value, str):
        if value in names:
            return names[value]
        return _PLACEHOLDER.sub(lambda m: "{" + names.get(m[1], m[1]) + "}", value)
    if isinstance(value, dict):
        return {k: rename_references(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [rename_references(v, names) for v in value]
    return value


def check_references(params: WorkloadParams, node: PlatformSpec, source: str, where: str) -> None:
    """Refuse a reference in ``params`` to something ``node`` lacks (``where`` is the tenant's
    key path, e.g. ``tenants.kv``)."""
    model = type(params)
    tables: Mapping[Ref, Sequence[str]] = {
        "device": [d.name for d in node.devices],
        "nic": [n.name for n in node.nics],
        "display": [d.name for d in node.displays],
    }
    devices: list[str] = []
    display_devices: list[str] = []
    domains: list[tuple[str, str]] = []
    for name in model.model_fields:
        ref = param_ref(model, name)
        if ref is None:
            continue
        value = getattr(params, name)
        if value is None and param_ref_optional(model, name):
            continue  # names nothing: the workload needs no such thing on the platform
        field = f"{where}.params.{name}"
        if ref == "domain":
            domains.append((field, str(value)))
            continue
        known = tables[ref]
        if not known:
            raise ConfigError(
                source, field, f"expected {_WHAT[ref]} on platform {node.name}, found none there"
            )
        for item in _names(value):
            if item not in known:
                raise ConfigError(
                    source,
                    field,
                    f"expected {_WHAT[ref]} of platform {node.name} ({', '.join(known)}), "
                    f"found {show_value(item)}",
                )
            if ref == "device":
                devices.append(item)
            elif ref == "display":
                display_devices += [d.device for d in node.displays if d.name == item]
    if not domains:
        return
    targets = devices or display_devices or [d.name for d in node.devices[:1]]
    drivers = {d.name: d.driver for d in node.devices}
    for field, domain in domains:
        for device in targets:
            problem = EXPORTERS[drivers[device]].domain_error(domain)
            if problem is not None:
                raise ConfigError(
                    source,
                    field,
                    f"expected a GEM domain of {device} ({drivers[device]}): {problem}, "
                    f"found {show_value(domain)}",
                )
