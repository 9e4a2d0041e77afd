"""Build hook: compile ``pinlab.sim.flows`` with mypyc, best effort (``docs/architecture.md``,
"The compiled flow solver").

``src/pinlab/sim/flows.py`` stays the one source: the build compiles a copy of it that differs
only by one appended constant, ``_SOURCE_SHA256``, the hash of the source it was compiled from;
``pinlab.sim.native`` compares it with the ``flows.py`` beside it at import and uses the pure
Python module when they differ. mypyc emits a shim extension named ``flows`` and a library
``flows__mypyc``; the shim is built into ``pinlab/sim/_ext/`` -- off the import path, so that it
never shadows ``flows.py`` -- and only ``pinlab.sim.native`` loads it, under its real name.

Compiling is optional: when mypyc or the C compiler fails, the build says why and installs the
pure-Python package (the install does not fail). ``PINLAB_PURE_PYTHON=1`` is read at import,
not here (``pinlab.sim.native``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
SOURCE = ROOT / "src" / "pinlab" / "sim" / "flows.py"
SHIM = "pinlab.sim._ext.flows"  # the extension mypyc names ``pinlab.sim.flows``, moved aside


def _warn(exc: BaseException) -> None:
    print(
        f"pinlab: WARNING: compiling pinlab.sim.flows failed ({exc!r}); the flow solver runs "
        "as pure Python (same results, about 2x slower on large networks)",
        file=sys.stderr,
    )


@functools.cache  # setuptools sets ``build_ext`` up more than once per build
def _mypyc_extensions() -> list[Extension]:
    """mypyc's extensions for a copy of ``flows.py`` with its hash appended, in ``build/``."""
    from mypyc.build import mypycify

    work = Path("build", "mypyc")  # relative: setuptools wants relative paths in a manifest
    tree = work / "src" / "pinlab" / "sim"
    tree.mkdir(parents=True, exist_ok=True)
    for package in (tree.parent, tree):
        (package / "__init__.py").write_text("", encoding="utf-8")
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    copy = tree / "flows.py"
    copy.write_bytes(source + f'\n_SOURCE_SHA256 = "{digest}"\n'.encode())
    extensions = mypycify(
        [
            # the same types whatever the build env holds: numpy and simpy are Any, always
            "--no-site-packages",
            "--ignore-missing-imports",
            f"--cache-dir={work / 'cache'}",
            str(copy),
        ],
        target_dir=str(work / "c"),
    )
    for ext in extensions:
        if ext.name == "pinlab.sim.flows":
            ext.name = SHIM  # its init function stays ``PyInit_flows``
        if os.name != "nt":  # no fused multiply-add: rates bit-identical to pure Python
            ext.extra_compile_args = [*ext.extra_compile_args, "-ffp-contract=off"]
    return extensions


class BuildFlows(build_ext):
    """``build_ext`` that compiles ``flows.py`` with mypyc, and on any failure builds nothing
    (so the install goes on, pure Python)."""

    def finalize_options(self) -> None:
        # Here, not at module level: pip runs ``setup.py`` for metadata too, and mypyc takes
        # seconds. With no extension left, the wheel is a pure-Python one.
        try:
            self.distribution.ext_modules = _mypyc_extensions()
        except (Exception, SystemExit) as exc:  # mypy exits on a type error
            self.distribution.ext_modules = []
            _warn(exc)
        super().finalize_options()

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no C compiler, or it failed
            self._discard()
            _warn(exc)

    def _discard(self) -> None:
        """Remove what a failed build left, so that no half of the pair is installed."""
        for ext in self.extensions:
            for path in (self.get_ext_fullpath(ext.name), self._inplace_path(ext.name)):
                if path is not None and os.path.exists(path):
                    os.remove(path)

    def copy_extensions_to_source(self) -> None:
        for ext in self.extensions:  # ``_ext/`` is not in the checkout
            os.makedirs(os.path.dirname(self._source_path(ext.name)), exist_ok=True)
        super().copy_extensions_to_source()

    def _inplace_path(self, name: str) -> str | None:
        if not self.inplace and not getattr(self, "editable_mode", False):
            return None
        return self._source_path(name)

    def _source_path(self, name: str) -> str:
        package, _, leaf = name.rpartition(".")
        build_py = self.get_finalized_command("build_py")
        return os.path.join(build_py.get_package_dir(package), self.get_ext_filename(leaf))


setup(
    # a placeholder, replaced by mypyc's extensions when ``build_ext`` is set up (or by none)
    ext_modules=[Extension(SHIM, sources=[])],
    cmdclass={"build_ext": BuildFlows},
)
