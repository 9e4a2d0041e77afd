"""The public API is listed twice on purpose: ``pinlab/__init__.py`` cannot import
``pinlab.api`` to read its ``__all__`` (the top package loads the API lazily, so that a lower
layer's ``import pinlab.kernel`` does not import the simulator), and ``__init__.pyi`` gives
type checkers the same names. These checks keep the three lists one list."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pinlab
import pinlab.api

PACKAGE = Path(pinlab.__file__).parent
NOT_API = {"__version__", "bench"}


def test_the_lazy_exports_are_the_api_modules_exports() -> None:
    assert set(pinlab.__all__) - NOT_API == set(pinlab.api.__all__)
    for name in pinlab.api.__all__:
        assert getattr(pinlab, name) is getattr(pinlab.api, name)


def test_the_stub_declares_every_export() -> None:
    stub = ast.parse((PACKAGE / "__init__.pyi").read_text())
    names = {
        a.asname or a.name for n in ast.walk(stub) if isinstance(n, ast.ImportFrom) for a in n.names
    }
    names |= {
        n.target.id
        for n in stub.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    assert set(pinlab.__all__) <= names


def test_importing_the_kernel_does_not_load_the_api() -> None:
    code = "import sys, pinlab.kernel; print('pinlab.api' in sys.modules, 'simpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
