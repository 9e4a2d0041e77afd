"""The field types of a platform description and the checks behind them: names, CPU
families, PCIe values, registered driver names, and the ``driver_options`` a driver's
constructor takes (read off its signature, never a table kept by hand). The models that
use them are :mod:`pinlab.platform.spec`'s."""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, cast

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer
from pydantic_core import InitErrorDetails, PydanticCustomError

from pinlab.drivers import EXPORTERS, IMPORTERS
from pinlab.drivers.rdma import RdmaDevice
from pinlab.errors import show_value
from pinlab.kernel.profile import PRESETS as KERNEL_PRESETS
from pinlab.platform.cost import PcieBarRead

__all__ = [
    "BarReadRow",
    "CpuFamily",
    "ExporterName",
    "KernelName",
    "Mtu",
    "Name",
    "PciDeviceNumber",
    "PcieGen",
    "PcieMps",
    "PcieWidth",
    "RdmaDriverName",
    "nic_driver",
    "option_errors",
    "ref_error",
]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]*$")


def _check_name(value: object) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise PydanticCustomError(
            "pinlab_name",
            "expected a name of letters, digits, '_', '.', '+' or '-' starting with a letter, "
            "found {found}",
            {"found": repr(value)},
        )
    return value


Name = Annotated[str, BeforeValidator(_check_name)]
"""A device/switch/bridge name: used in link names (``pcie:<name>``) and on the command line."""


def _cpu_family(value: object) -> int:
    try:
        n = int(value, 0) if isinstance(value, str) else value
    except ValueError:
        n = None
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 0xFF:
        raise PydanticCustomError(
            "pinlab_family",
            'expected a CPU family number like 6 or "0x19", found {found}',
            {"found": repr(value)},
        )
    return n


CpuFamily = Annotated[
    int, BeforeValidator(_cpu_family), PlainSerializer(lambda n: f"0x{n:x}", return_type=str)
]

PciDeviceNumber = Annotated[int, Field(ge=0, le=31)]
"""A device (slot) number on a PCI bus, the ``SS`` of ``BB:SS.F``."""

PcieGen = Literal[3, 4, 5]
PcieWidth = Literal[1, 2, 4, 8, 16]
PcieMps = Literal[128, 256, 512, 1024, 2048, 4096]
"""Max_Payload_Size / Max_Read_Request_Size values (bytes); None in a spec: ``pcie.mps`` /
``pcie.mrrs``."""
Mtu = Literal[256, 512, 1024, 2048, 4096, 8192]


def nic_driver(name: str) -> type[RdmaDevice]:
    """The RDMA driver registered as ``name`` (``KeyError`` for any other name)."""
    cls = IMPORTERS.get(name)
    if cls is None or not issubclass(cls, RdmaDevice):
        raise KeyError(name)
    return cls


def _registered(value: str, names: Iterable[str], kind: str) -> str:
    known = sorted(names)
    if value not in known:
        raise PydanticCustomError(
            "pinlab_driver",
            "expected {kind} ({expected}), found {found}",
            {"kind": kind, "expected": ", ".join(known), "found": repr(value)},
        )
    return value


def _exporter_driver(value: str) -> str:
    return _registered(value, EXPORTERS, "an exporter driver")


def _rdma_driver(value: str) -> str:
    rdma = (name for name, cls in IMPORTERS.items() if issubclass(cls, RdmaDevice))
    return _registered(value, rdma, "an RDMA driver")


def _bar_row(value: str) -> str:
    return _registered(value, PcieBarRead.model_fields, "a pcie.bar_read row")


BarReadRow = Annotated[str, AfterValidator(_bar_row)]
"""A row of the cost model's ``pcie.bar_read`` table (a device's BAR read latency)."""


def _kernel_profile(value: str | None) -> str | None:
    # checked where the platform is read, whoever reads it: a scenario's [kernel] profile
    # may override it, but a bad one is the platform file's error, not the scenario's
    if value is not None and value not in KERNEL_PRESETS:
        raise PydanticCustomError(
            "pinlab_kernel",
            "expected a kernel profile ({expected}), found {found}",
            {"expected": ", ".join(KERNEL_PRESETS), "found": show_value(value)},
        )
    return value


KernelName = Annotated[str | None, AfterValidator(_kernel_profile)]
"""A kernel profile preset's name (:data:`pinlab.kernel.profile.PRESETS`), or None."""

ExporterName = Annotated[str, AfterValidator(_exporter_driver)]
"""The name of a registered exporter driver (:data:`pinlab.drivers.EXPORTERS`)."""
RdmaDriverName = Annotated[str, AfterValidator(_rdma_driver)]
"""The name of a registered RDMA driver (an :class:`RdmaDevice` in ``IMPORTERS``)."""


def ref_error(loc: tuple[str | int, ...], expected: str, found: object) -> InitErrorDetails:
    """One pydantic error at ``loc``: "expected ``expected``, found ``found``" -- a name
    quoted as the spec's other errors quote names, any other value as TOML writes it
    (``true``, not Python's ``True``)."""
    shown = repr(found) if isinstance(found, str) else show_value(found)
    return InitErrorDetails(
        type=PydanticCustomError(
            "pinlab_ref",
            "expected {expected}, found {found}",
            {"expected": expected, "found": shown},
        ),
        loc=loc,
        input=found,
    )


_OPTION_TYPES: dict[object, tuple[type, str]] = {
    bool: (bool, "true or false"),
    bool | None: (bool, "true or false"),
    int: (int, "a whole number >= 0"),
    int | None: (int, "a whole number >= 0"),
    str: (str, "a string"),
    str | None: (str, "a string"),
}
"""The constructor argument types a ``driver_options`` value can give (TOML's booleans,
integers and strings; the integers are sizes, counts and indices), with how a message words
them."""

_NOT_OPTIONS = frozenset({"kernel", "pdev", "detector", "name"})
"""Constructor arguments a file cannot set: the machine's objects, and the name ``from_spec``
passes itself."""


@functools.cache
def _driver_options(cls: type) -> Mapping[str, tuple[type, str]] | None:
    """The ``driver_options`` a driver class takes: each keyword argument of its constructor
    (those of a ``**options: Unpack[TypedDict]`` too) of a type in :data:`_OPTION_TYPES`,
    with that type. None when the annotations cannot be read: the constructor is left to
    refuse them."""
    try:
        params = inspect.signature(cls).parameters.values()
        hints = typing.get_type_hints(cast(Any, cls).__init__, include_extras=True)
    except (TypeError, ValueError, NameError):
        return None
    found: dict[str, object] = {}
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            unpacked = typing.get_args(hints.get(p.name))
            if not unpacked or not typing.is_typeddict(unpacked[0]):
                return None
            found.update(typing.get_type_hints(unpacked[0]))
        elif p.kind is not p.VAR_POSITIONAL:
            found[p.name] = hints.get(p.name)
    return types.MappingProxyType(
        {
            name: _OPTION_TYPES[hint]
            for name, hint in found.items()
            if name not in _NOT_OPTIONS and hint in _OPTION_TYPES
        }
    )


def option_errors(
    loc: tuple[str | int, ...], driver: str, cls: type, options: Mapping[str, object]
) -> list[InitErrorDetails]:
    """A device's or NIC's ``driver_options`` that its driver's constructor does not take,
    or of a type it does not take (checked here, where the file and field are known)."""
    known = _driver_options(cls)
    if known is None:
        return []
    errors: list[InitErrorDetails] = []
    for key, value in options.items():
        if key not in known:
            expected = f"an option of driver {driver!r} ({', '.join(sorted(known)) or 'none'})"
            errors.append(ref_error((*loc, "driver_options"), expected, key))
            continue
        kind, words = known[key]
        wrong = not isinstance(value, kind) or (kind is int and isinstance(value, bool))
        if wrong or (kind is int and cast(int, value) < 0):
            errors.append(ref_error((*loc, "driver_options", key), words, value))
    return errors
