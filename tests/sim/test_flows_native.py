"""The compiled flow solver (``pinlab.sim.native``): bit-identical to ``flows.py``, never stale,
and optional at install."""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
import simpy

from pinlab.sim import native

PACKAGE = Path(native.__file__).resolve().parents[1]  # .../pinlab
ROOT = PACKAGE.parents[1]  # the checkout, for an editable install


def compiled_flows() -> ModuleType:
    """The imported ``pinlab.sim.flows`` if compiled; skips when it is pure Python for a reason
    that is the environment's (forced, stale), fails when the install should have compiled it."""
    implementation = native.implementation()
    if implementation.startswith("compiled"):
        return sys.modules[native.FLOWS]
    if not native.extension_path().exists() and not native.pure_forced():
        compiler = shutil.which(os.environ.get("CC", "cc"))
        if compiler and importlib.util.find_spec("mypyc") is not None:
            pytest.fail(
                "flows.py is not compiled although a C compiler and mypyc are here: "
                f"see the build output of `pip install -v -e .` ({implementation})"
            )
    pytest.skip(implementation)


Trace = tuple[list[tuple[object, ...]], tuple[int, int, int, int]]


def trace(flows: ModuleType, seed: int, links: int, transfers: int) -> Trace:
    """Everything observable of a random run, floats as hex: the rates after every batch of
    starts, every completion (time and duration), each link's accounting; and the counters."""
    rng = random.Random(seed)
    env = simpy.Environment()
    net = flows.FlowNetwork(env)
    names = [f"l{i}" for i in range(links)]
    for name in names:  # whole capacities make ties between links and between shares
        capacity = float(rng.randint(1, 6)) if rng.random() < 0.4 else rng.uniform(0.5, 50.0)
        net.add_link(name, capacity)
    out: list[tuple[object, ...]] = []

    def record(label: str) -> object:
        return lambda ev: out.append(("done", label, env.now.hex(), float(ev.value).hex()))

    batches: dict[float, list[tuple[float, list[str], float | None, str]]] = {}
    together: dict[float, bool] = {}  # started with one transfer_many, or one by one
    for k in range(transfers):
        at = float(rng.randint(0, 6)) if rng.random() < 0.5 else rng.uniform(0.0, 6.0)
        path = [rng.choice(names) for _ in range(rng.randint(0, 4))]  # repeats allowed
        cap = rng.uniform(0.2, 20.0) if not path or rng.random() < 0.3 else None
        nbytes = 0.0 if rng.random() < 0.03 else rng.uniform(0.1, 60.0)
        batches.setdefault(at, []).append((nbytes, path, cap, f"t{k}"))
        together.setdefault(at, rng.random() < 0.5)

    def start(at: float, specs: list[tuple[float, list[str], float | None, str]]):  # type: ignore[no-untyped-def]
        yield env.timeout(at)
        if together[at]:
            events = net.transfer_many(specs)
        else:
            events = [net.transfer(n, p, cap=c, label=lab) for n, p, c, lab in specs]
        for ev, (_, _, _, label) in zip(events, specs, strict=True):
            ev.callbacks.append(record(label))
        out.append(("rates", env.now.hex(), [(t.label, t.rate.hex()) for t in net.active]))

    for at, specs in sorted(batches.items()):
        env.process(start(at, specs))
    env.run()
    net.advance()
    for name in names:
        link = net.links[name]
        out.append((name, link.bytes_carried.hex(), link.busy_time.hex()))
    return out, (net.recomputes, net.resolved, net.widened, net.completed)


@pytest.mark.parametrize("seed", range(60))
def test_compiled_and_pure_solvers_agree_to_the_bit(seed: int) -> None:
    compiled = compiled_flows()
    pure = native.load_pure()
    assert pure.FlowNetwork is not compiled.FlowNetwork
    links, transfers = (40, 400) if seed % 10 == 0 else (random.Random(seed).randint(1, 12), 40)
    assert trace(compiled, seed, links, transfers) == trace(pure, seed, links, transfers)


def test_the_random_cases_reach_the_widened_re_solve() -> None:
    """The cases above cover the solver's rarest path, a re-solve widened after fact 3's check."""
    pure = native.load_pure()
    assert sum(trace(pure, seed, 40, 400)[1][2] for seed in range(0, 60, 10)) > 0


def package_copy(tmp_path: Path) -> Path:
    """A copy of the installed package, with its compiled module, to break on purpose."""
    compiled_flows()
    shutil.copytree(PACKAGE, tmp_path / "pinlab", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "pinlab"


def imported(tree: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Import ``pinlab.sim.flows`` from ``tree`` in a fresh interpreter; prints its file and
    what :func:`pinlab.sim.native.implementation` says."""
    code = (
        "import pinlab.sim.flows as f, pinlab.sim.native as n; "
        "print(f.__file__); print(n.implementation()); "
        "net = f.FlowNetwork(__import__('simpy').Environment()); "
        "print(net.rate_of(net.transfer(1.0, [net.add_link('l', 2.0)])))"
    )
    environ = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    environ.update(env, PYTHONPATH=str(tree.parent), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True
    )


def test_a_fresh_build_is_used(tmp_path: Path) -> None:
    tree = package_copy(tmp_path)
    run = imported(tree)
    file, implementation, rate = run.stdout.splitlines()
    assert Path(file).parent == tree / "sim" / "_ext"
    assert implementation == "compiled (mypyc)"
    assert rate == "2.0"
    assert "RuntimeWarning" not in run.stderr


def test_an_edited_flows_py_is_used_instead_of_the_stale_build(tmp_path: Path) -> None:
    tree = package_copy(tmp_path)
    source = tree / "sim" / "flows.py"
    source.write_text(source.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    run = imported(tree)
    file, implementation, _ = run.stdout.splitlines()
    assert Path(file) == source
    assert implementation.startswith("pure Python (the compiled module is stale")
    assert "stale" in run.stderr and "pip install -e" in run.stderr  # says how to rebuild


def test_pinlab_pure_python_forces_the_pure_module(tmp_path: Path) -> None:
    tree = package_copy(tmp_path)
    run = imported(tree, PINLAB_PURE_PYTHON="1")
    file, implementation, rate = run.stdout.splitlines()
    assert Path(file) == tree / "sim" / "flows.py"
    assert implementation == "pure Python (PINLAB_PURE_PYTHON is set)"
    assert rate == "2.0"
    assert imported(tree, PINLAB_PURE_PYTHON="0").stdout.splitlines()[1] == "compiled (mypyc)"


def test_no_build_or_a_broken_one_means_pure_python(tmp_path: Path) -> None:
    tree = package_copy(tmp_path)
    extension = native.extension_path(tree / "sim")
    extension.write_bytes(b"not an ELF file")
    run = imported(tree)
    assert run.stdout.splitlines()[0] == str(tree / "sim" / "flows.py")
    assert "does not load" in run.stderr
    extension.unlink()
    run = imported(tree)
    assert run.stdout.splitlines()[1].startswith("pure Python (not compiled")
    assert "RuntimeWarning" not in run.stderr  # no compiler at install is not an error


@pytest.mark.slow
def test_the_install_falls_back_to_pure_python_without_a_compiler(tmp_path: Path) -> None:
    """With a C compiler that fails, building the wheel still succeeds: it has ``flows.py``
    and no extension."""
    if not (ROOT / "setup.py").exists():
        pytest.skip("not an editable install: no checkout to build")
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(
        ROOT / "src",
        project / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "_ext", "*.egg-info"),
    )
    environ = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    environ["CC"] = "false"
    pip = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation"]
    build = subprocess.run(
        [*pip, "--wheel-dir", str(tmp_path / "dist"), str(project)],
        env=environ,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "compiling pinlab.sim.flows failed" in build.stdout + build.stderr
    (wheel,) = (tmp_path / "dist").glob("pinlab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pinlab/sim/flows.py" in names
    assert not [name for name in names if name.endswith(".so")]
