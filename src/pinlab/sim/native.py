"""Which implementation of :mod:`pinlab.sim.flows` an import gets: mypyc-compiled or pure Python.

The install compiles ``flows.py`` with mypyc when it can (``setup.py``; ``docs/architecture.md``,
"The compiled flow solver"): the same code, about twice as fast on large networks, with the same
rates to the bit. The compiled module is an extension in ``_ext/`` beside this file, off the
import path, so that it never shadows ``flows.py``; :func:`install` (run by ``pinlab.sim``'s
``__init__``) puts a finder first on ``sys.meta_path`` that, when ``pinlab.sim.flows`` is
imported, loads the extension under that name, and keeps it only if it was compiled from the
``flows.py`` that is there now (the build bakes the source's SHA-256 into it). Otherwise -- no
extension (no compiler at install), a stale one (``flows.py`` edited after an editable install),
one that fails to load, or ``PINLAB_PURE_PYTHON=1`` in the environment -- the ordinary import
loads ``flows.py``; a stale or broken extension is reported with a ``RuntimeWarning`` saying how
to rebuild. :func:`implementation` says which one ran and why.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

FLOWS = "pinlab.sim.flows"
PURE_ENV = "PINLAB_PURE_PYTHON"
REBUILD = "pip install -e '.[dev]' in the checkout (make .venv/.pinlab-installed does it)"
_HERE = Path(__file__).resolve().parent

_why: dict[str, str] = {}  # module name -> why its import was pure Python (absent: not decided)


def pure_forced() -> bool:
    """True when ``PINLAB_PURE_PYTHON`` is set to anything but empty or ``0``."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def extension_path(package_dir: Path = _HERE) -> Path:
    """Where the build puts the compiled ``flows`` for this interpreter."""
    return package_dir / "_ext" / f"flows{importlib.machinery.EXTENSION_SUFFIXES[0]}"


def source_digest(package_dir: Path = _HERE) -> str:
    """The SHA-256 of ``flows.py``, as the build bakes it into the compiled module."""
    return hashlib.sha256((package_dir / "flows.py").read_bytes()).hexdigest()


def load_compiled(package_dir: Path = _HERE) -> tuple[ModuleType | None, str]:
    """The compiled ``flows`` if it is there, loads and matches ``flows.py``; else None and why.

    Loading runs the module's body (it defines classes, imports numpy and simpy) and registers
    it in ``sys.modules``; a rejected module is taken out again.
    """
    path = extension_path(package_dir)
    if not path.exists():
        return None, "not compiled: the install found no C compiler or no mypyc"
    try:
        spec = importlib.util.spec_from_file_location(FLOWS, path)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
    except Exception as exc:  # a broken or foreign build must not break the import
        sys.modules.pop(FLOWS, None)
        why = f"the compiled module {path} does not load ({exc!r}); rebuild: {REBUILD}"
        warnings.warn(f"pinlab: {why}; using pure Python", RuntimeWarning, stacklevel=2)
        return None, why
    built_from = getattr(module, "_SOURCE_SHA256", None)
    if built_from != source_digest(package_dir):
        sys.modules.pop(FLOWS, None)
        why = f"the compiled module is stale (flows.py changed since the build); rebuild: {REBUILD}"
        warnings.warn(f"pinlab: {why}; using pure Python", RuntimeWarning, stacklevel=2)
        return None, why
    return module, ""


def load_pure(name: str = "pinlab.sim._flows_pure", package_dir: Path = _HERE) -> ModuleType:
    """A fresh pure-Python ``flows`` under another name, beside whichever one is imported
    (to compare the two: tests, ``benchmarks/bench_flows.py --both``)."""
    spec = importlib.util.spec_from_file_location(name, package_dir / "flows.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the body runs
    spec.loader.exec_module(module)
    return module


def implementation(module_name: str = FLOWS) -> str:
    """``"compiled"`` or ``"pure Python (why)"`` for an imported module; imports it if needed."""
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    if (module.__file__ or "").endswith(".py"):
        return f"pure Python ({_why.get(module_name, 'not compiled')})"
    return "compiled (mypyc)"


class _Loader(importlib.abc.Loader):
    """Hands the import system a module that is already loaded and checked."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self._module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the extension ran its body when it loaded."""


class _CompiledFlows(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != FLOWS:
            return None
        if pure_forced():
            _why[FLOWS] = f"{PURE_ENV} is set"
            return None
        module, why = load_compiled()
        if module is None:
            _why[FLOWS] = why
            return None
        # the module is in ``sys.modules`` already, so the import system takes its ``__spec__``
        spec = importlib.machinery.ModuleSpec(FLOWS, _Loader(module), origin=str(extension_path()))
        spec.has_location = True
        module.__spec__ = spec
        module.__loader__ = spec.loader
        return spec


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _CompiledFlows) for finder in sys.meta_path):
        sys.meta_path.insert(0, _CompiledFlows())
