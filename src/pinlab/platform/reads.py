"""Which cost-model parameters a computation reads: :func:`recording_reads`.

``pinlab run --robust`` varies only the parameters a scenario's runs actually use. Rather
than a hand-kept list per workload (which would rot as parameters are added), the reads are
observed: while :func:`recording_reads` is active, every read of a leaf field of a
:class:`~pinlab.platform.cost.CostModel` group (``cost.odp.fault``) adds its dotted key to
the recording. The groups are found by walking the model's field tree, so a parameter added
to :mod:`pinlab.platform.cost` is recorded with no change here.

The hook is installed on the group classes only for the duration of the recording (and
removed afterwards), so runs that do not record pay nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel

from pinlab.platform.cost import CostModel

__all__ = ["recording_reads"]

_Leaves = dict[type, dict[str, tuple[str, ...]]]


def _leaves() -> _Leaves:
    """Group class -> leaf field name -> the dotted keys it stands for (a class used at two
    places of the tree stands for both: a read of it records both, which over-approximates
    and so never misses a parameter)."""
    out: dict[type, dict[str, list[str]]] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            else:
                out.setdefault(model, {}).setdefault(name, []).append(f"{prefix}{name}")

    walk(CostModel, "")
    return {cls: {n: tuple(keys) for n, keys in names.items()} for cls, names in out.items()}


_LEAVES: _Leaves | None = None
_ACTIVE: list[set[str]] = []


def _recording_getattribute(self: Any, name: str) -> Any:
    value = object.__getattribute__(self, name)
    assert _LEAVES is not None
    keys = _LEAVES.get(type(self), {}).get(name)
    if keys is not None:
        for recording in _ACTIVE:
            recording.update(keys)
    return value


@contextmanager
def recording_reads() -> Iterator[set[str]]:
    """A set that collects the dotted key of every cost-model parameter read inside the
    ``with`` block (by any :class:`CostModel` instance). Recordings may nest."""
    global _LEAVES
    if _LEAVES is None:
        _LEAVES = _leaves()
    recording: set[str] = set()
    first = not _ACTIVE
    _ACTIVE.append(recording)
    patched: list[type] = []
    try:
        if first:
            for cls in _LEAVES:
                if "__getattribute__" not in cls.__dict__:
                    type.__setattr__(cls, "__getattribute__", _recording_getattribute)
                    patched.append(cls)
        yield recording
    finally:
        _ACTIVE.remove(recording)
        for cls in patched:
            type.__delattr__(cls, "__getattribute__")
