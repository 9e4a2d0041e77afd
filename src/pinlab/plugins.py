"""Plugins: what other installed packages add to pinlab's registries, through entry points.

A package declares its additions in its own ``pyproject.toml``::

    [project.entry-points."pinlab.exporters"]
    radeon = "pinlab_radeon:RadeonDevice"

Once it is installed (its ``*.dist-info`` on ``sys.path``), each registry (a
:class:`PluginRegistry`) loads the entry points of its group the first time it is read -- in
name order, after its built-in entries -- and registers each object under the entry point's
name; from then on it is usable wherever a built-in one is (scenario and platform files,
``--set``, ``pinlab matrix``, the Python API). Loading on first read, not when the registry's
module is imported, lets one plugin module provide objects of several groups and import the
pinlab modules they need without a circular import.

======================== ========================================== ==========================
group                    the object                                 registry
======================== ========================================== ==========================
pinlab.exporters         an ``ExporterDriver`` subclass             ``pinlab.drivers.EXPORTERS``
pinlab.importers         an ``Importer`` subclass                   ``pinlab.drivers.IMPORTERS``
pinlab.workloads         a ``WorkloadDef`` (entry point name =      ``pinlab.sim.workloads``
                         its ``workload`` literal)                  ``.WORKLOADS``
pinlab.presets           a function of keyword parameters giving a  ``pinlab.platform.PRESETS``
                         platform spec
pinlab.claim_functions   a ``ClaimFunction`` (entry point name =    ``pinlab.scenarios``
                         its ``name``)                              ``.claimfns.CLAIM_FUNCTIONS``
======================== ========================================== ==========================

A plugin that fails to import, names the wrong kind of object or reuses a registered name
raises :class:`PluginError` from every read of its registry: one line naming the entry point
and its distribution (``pinlab`` prints it and exits with status 2). A broken plugin stops
pinlab until it is fixed or uninstalled -- never silently skipped, so a scenario that names it
cannot run against a different model than its author meant.

This module is of the ground floor: it knows entry points, not what the registries hold; each
registry passes the function that checks and registers one object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values

__all__ = ["GROUPS", "PluginError", "PluginRegistry", "describe", "load_plugins"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

GROUPS = (
    "pinlab.exporters",
    "pinlab.importers",
    "pinlab.workloads",
    "pinlab.presets",
    "pinlab.claim_functions",
)
"""The entry-point groups pinlab reads."""


class PluginError(Exception):
    """A plugin pinlab could not register, in one line: the entry point, then what was expected
    and found. Not a ``ValueError``: a registry read inside a validator (a platform file's
    ``driver``) must not turn it into that field's validation error."""

    def __init__(self, origin: str, message: str) -> None:
        self.origin = origin
        self.message = message
        super().__init__(f"{origin}: {message}")


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    where = f" (from {dist.name} {dist.version})" if dist is not None else ""
    return f"entry point {ep.group}:{ep.name} = {ep.value}{where}"


def load_plugins(group: str, register: Callable[[str, object], None]) -> list[str]:
    """Load every entry point of ``group`` (in name order) and pass its name and object to
    ``register``, which raises ``TypeError`` or ``ValueError`` saying what it expected.
    Returns the names registered; :class:`PluginError` for the first that fails."""
    if group not in GROUPS:
        raise ValueError(f"unknown plugin group {group!r} (expected one of {', '.join(GROUPS)})")
    loaded = []
    for ep in sorted(entry_points(group=group), key=lambda e: (e.name, e.value)):
        try:
            obj = ep.load()
        except Exception as e:
            raise _error(ep, f"import failed: {type(e).__name__}: {e}") from e
        try:
            register(ep.name, obj)
        except (TypeError, ValueError) as e:
            raise _error(ep, str(e)) from e
        loaded.append(ep.name)
    return loaded


def _error(ep: EntryPoint, message: str) -> PluginError:
    return PluginError(_origin(ep), " ".join(message.split()))


def describe(obj: object) -> str:
    """What ``obj`` is, for an ``expected ..., found ...`` message."""
    if isinstance(obj, type):
        return f"class {obj.__module__}.{obj.__qualname__}"
    return f"{type(obj).__name__} {obj!r}"[:120]


class PluginRegistry(dict[K, V]):
    """A registry (a dict of built-in entries) that loads its group's plugins on first read.

    :meth:`plugins` names the group and the function that checks and registers one object
    (it may read the registry: reads during the load see what is registered so far). Every
    read -- ``[]``, ``in``, iteration, ``len``, ``get``, ``keys``, ``values``, ``items`` --
    loads first; a failed load raises its :class:`PluginError` from every later read too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._group: str | None = None
        self._register: Callable[[str, object], None] | None = None
        self._loaded = False
        self._error: PluginError | None = None

    def plugins(self, group: str, register: Callable[[str, object], None]) -> None:
        """Load ``group``'s entry points through ``register`` on the first read."""
        if group not in GROUPS:
            raise ValueError(f"unknown plugin group {group!r}")
        self._group, self._register = group, register

    def _load(self) -> None:
        if self._loaded:
            if self._error is not None:
                raise self._error
            return
        if self._group is None or self._register is None:
            return
        self._loaded = True
        try:
            load_plugins(self._group, self._register)
        except PluginError as e:
            self._error = e
            raise

    def __getitem__(self, key: K) -> V:
        self._load()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._load()
        return super().__contains__(key)

    def __iter__(self) -> Iterator[K]:
        self._load()
        return super().__iter__()

    def __len__(self) -> int:
        self._load()
        return super().__len__()

    @overload
    def get(self, key: K, default: None = None, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V | T, /) -> V | T: ...
    def get(self, key: K, default: object = None, /) -> object:
        self._load()
        return super().get(key, default)

    def keys(self) -> dict_keys[K, V]:
        self._load()
        return super().keys()

    def values(self) -> dict_values[K, V]:
        self._load()
        return super().values()

    def items(self) -> dict_items[K, V]:
        self._load()
        return super().items()

    def __repr__(self) -> str:
        self._load()
        return super().__repr__()
