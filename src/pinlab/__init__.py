"""pinlab: an executable, kernel-faithful model of dma-buf P2P pinning.

Layers (see ``docs/architecture.md``): ``pinlab.kernel`` is the mechanism (dma-buf core,
fences, TTM, P2PDMA, RDMA umem), knows nothing of policy or time and imports no other pinlab
layer.

The public Python API (``docs/api.md``) is exported from here: :func:`load_scenario`,
:func:`run`, :func:`run_variant`, :func:`judge`, :class:`Run`, :class:`RunResult`,
:class:`Verdict`, :class:`Scenario`, :data:`BUILTIN`, and the subpackage ``pinlab.bench``
(:func:`pinlab.bench.run_bench`). They load on first use, so that ``import pinlab.kernel``
(or anything of a lower layer) does not import the simulator and the reports with it;
``__init__.pyi`` gives type checkers their types.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "BUILTIN",
    "Run",
    "RunResult",
    "Scenario",
    "Verdict",
    "__version__",
    "bench",
    "judge",
    "load_scenario",
    "run",
    "run_variant",
]

_API = frozenset(__all__) - {"__version__", "bench"}


def __getattr__(name: str) -> Any:
    # the API module is the top layer: imported by name on first use, never by a lower layer
    if name in _API:
        return getattr(importlib.import_module("pinlab.api"), name)
    if name == "bench":
        return importlib.import_module("pinlab.bench")
    raise AttributeError(f"module 'pinlab' has no attribute {name!r}")
