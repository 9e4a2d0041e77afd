"""Plugins through entry points (``pinlab.plugins``): each group's object lands in its registry
and is usable from a scenario, ``--set`` and the listings; a broken plugin is one line naming
the entry point, exit status 2, no traceback.

The plugins here are real installed distributions: a ``*.dist-info`` with ``entry_points.txt``
in a directory on ``PYTHONPATH``, found by ``importlib.metadata`` in a fresh ``pinlab``
process, as ``pip install`` would leave them. The example package of ``examples/plugin/`` is
installed with pip itself by the driver engineer's tutorial (``tests/test_docs.py``).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pinlab.plugins import GROUPS, PluginError, load_plugins

PLUGIN_MODULE = '''
"""A test plugin: a claim function, a platform preset and a workload."""
from dataclasses import dataclass
from typing import Literal

from pinlab.platform.presets import workstation
from pinlab.scenarios.claimfns import ClaimFunction
from pinlab.sim.metrics import TenantResult, metric
from pinlab.sim.workloads.base import WorkloadParams, param
from pinlab.sim.workloads.registry import WorkloadDef
from pinlab.units import Duration

TWICE = ClaimFunction(
    "twice", "twice the largest value", None, lambda units: units[0],
    lambda values: 2 * max(v for arg in values for v in arg),
)


def small_workstation(vram="2GiB"):
    return workstation(vram=vram)


class TickerParams(WorkloadParams):
    workload: Literal["ticker"] = "ticker"
    period: Duration = param("100ms", "time between ticks", unit="s", gt=0)


@dataclass(slots=True)
class TickerResult(TenantResult):
    ticks: int = metric("count", "ticks so far", default=0)


def ticker(ctx, p, r):
    while True:
        yield ctx.sleep(p.period)
        r.ticks += 1


TICKER = WorkloadDef(TickerParams, TickerResult, ticker, "counts ticks")
NOT_A_DRIVER = 42
'''

SCENARIO = """
[scenario]
name = "plugged"
duration = "1s"

[claim]
statement = "the plugin's workload ticks on the plugin's preset"

[[claim.expect]]
metric = "tenant.t.ticks"
op = ">="
value = 9

[[claim.expect]]
fn = "twice"
metric = "tenant.t.ticks"
op = ">="
value = 18

[platform]
preset = "small-workstation"

[[tenants]]
name = "t"
workload = "ticker"
"""

PLAIN = """
[scenario]
name = "plain"
duration = "100ms"

[[claim.expect]]
fn = "sum"
metric = "tenant.*.bytes"
op = ">="
value = 0

[platform]
preset = "workstation"

[[tenants]]
name = "t"
workload = "app"
"""


def install(site: Path, name: str, entry_points: dict[str, dict[str, str]], module: str) -> None:
    """A distribution ``name`` installed in ``site``: its module and its dist-info."""
    site.mkdir(parents=True, exist_ok=True)
    package = name.replace("-", "_")
    (site / f"{package}.py").write_text(module, encoding="utf-8")
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = []
    for group, eps in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{ep} = {target}" for ep, target in eps.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def pinlab(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "pinlab.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def plugged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    install(
        site,
        "pinlab-test-plugin",
        {
            "pinlab.claim_functions": {"twice": "pinlab_test_plugin:TWICE"},
            "pinlab.presets": {"small-workstation": "pinlab_test_plugin:small_workstation"},
            "pinlab.workloads": {"ticker": "pinlab_test_plugin:TICKER"},
        },
        PLUGIN_MODULE,
    )
    return site


def test_every_group_is_usable_from_a_scenario(plugged: Path, tmp_path: Path) -> None:
    (tmp_path / "plugged.toml").write_text(SCENARIO, encoding="utf-8")
    done = pinlab(plugged, "run", "plugged.toml", "--out", "out", "--no-report", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "claim HELD" in done.stdout
    summary = json.loads((tmp_path / "out/plugged/base/summary.json").read_text())
    assert summary["metrics"]["tenant.t.ticks"]["value"] >= 9
    # --set reaches a plugin preset's parameter and a plugin workload's
    done = pinlab(
        plugged,
        "run",
        "plugged.toml",
        "--set",
        "platform.params.vram=1GiB",
        "--set",
        "tenants.t.params.period=1s",
        "--out",
        "out2",
        "--no-report",
        cwd=tmp_path,
    )
    assert done.returncode == 1 and "claim FAILED" in done.stdout, done.stdout + done.stderr
    listing = pinlab(plugged, "workloads", "ticker", "--json", cwd=tmp_path)
    assert listing.returncode == 0 and "time between ticks" in listing.stdout


def test_a_plugin_rdma_importer_is_a_matrix_column(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(
        site,
        "pinlab-clone",
        {"pinlab.importers": {"cx-clone": "pinlab_clone:Clone"}},
        "from pinlab.drivers.mlx5 import Mlx5Device\n\n\n"
        "class Clone(Mlx5Device):\n    'An mlx5-like NIC under another name.'\n",
    )
    done = pinlab(site, "matrix", "--json", "--no-move-notify", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    matrix = json.loads(done.stdout)
    cells = [c for c in matrix["cells"] if c["importer"].startswith("cx-clone")]
    assert {c["exporter"] for c in cells} == set(matrix["exporters"])
    mlx5 = {c["exporter"]: c["outcome"] for c in matrix["cells"] if c["importer"] == "mlx5-no-odp"}
    assert {c["exporter"]: c["outcome"] for c in cells} == mlx5


@pytest.mark.parametrize(
    ("group", "target", "expected"),
    [
        (
            "pinlab.exporters",
            "pinlab_broken:NOT_A_DRIVER",
            r"entry point pinlab.exporters:broken = pinlab_broken:NOT_A_DRIVER \(from "
            r"pinlab-broken 0.1\): expected a ExporterDriver subclass, found int 42",
        ),
        (
            "pinlab.importers",
            "pinlab_broken:missing",
            r"entry point pinlab.importers:broken = pinlab_broken:missing \(from pinlab-broken "
            r"0.1\): import failed: AttributeError: ",
        ),
        (
            "pinlab.workloads",
            "pinlab_nowhere:THING",
            r"entry point pinlab.workloads:broken = pinlab_nowhere:THING .*import failed: "
            r"ModuleNotFoundError: No module named 'pinlab_nowhere'",
        ),
        (
            "pinlab.claim_functions",
            "pinlab_broken:NOT_A_DRIVER",
            r"pinlab.claim_functions:broken .*expected a pinlab.scenarios.claimfns.ClaimFunction",
        ),
    ],
)
def test_a_broken_plugin_is_one_line_naming_the_entry_point(
    tmp_path: Path, group: str, target: str, expected: str
) -> None:
    site = tmp_path / "site"
    install(site, "pinlab-broken", {group: {"broken": target}}, "NOT_A_DRIVER = 42\n")
    (tmp_path / "s.toml").write_text(PLAIN, encoding="utf-8")
    command = ["matrix"] if group.endswith("porters") else ["run", "s.toml", "--no-report"]
    done = pinlab(site, *command, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("pinlab: error: entry point ")
    assert re.search(expected, lines[0]), lines[0]


def test_a_plugin_may_not_take_a_builtin_name(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(
        site,
        "pinlab-clash",
        {"pinlab.exporters": {"amdgpu": "pinlab.drivers.xe:XeDevice"}},
        "",
    )
    done = pinlab(site, "matrix", cwd=tmp_path)
    assert done.returncode == 2
    assert "expected a new driver name, found 'amdgpu' (already AmdgpuDevice)" in done.stderr


def test_load_plugins_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader itself: name order, the registering function's errors wrapped."""
    site = tmp_path / "site"
    install(
        site,
        "pinlab-inproc",
        {"pinlab.presets": {"b": "pinlab_inproc:B", "a": "pinlab_inproc:A"}},
        "A = 1\nB = 2\n",
    )
    monkeypatch.syspath_prepend(str(site))
    seen: list[tuple[str, object]] = []
    assert load_plugins("pinlab.presets", lambda n, o: seen.append((n, o))) == ["a", "b"]
    assert seen == [("a", 1), ("b", 2)]

    def refuse(name: str, obj: object) -> None:
        raise TypeError(f"expected something else,\n found {obj!r}")

    with pytest.raises(
        PluginError, match=r"pinlab.presets:a .*: expected something else, found 1$"
    ):
        load_plugins("pinlab.presets", refuse)
    with pytest.raises(ValueError, match="unknown plugin group"):
        load_plugins("pinlab.nothing", refuse)
    assert set(GROUPS) == {
        "pinlab.exporters",
        "pinlab.importers",
        "pinlab.workloads",
        "pinlab.presets",
        "pinlab.claim_functions",
    }


def test_no_list_of_driver_names_outside_the_drivers() -> None:
    """The drivers are known through the registries: no collection literal (list, tuple, set,
    dict) of two or more driver names outside ``drivers/``. Not checked: the presets (each
    names the drivers of the machine it builds), the inspector's map of the kernel's sysfs
    driver names to models (``inspect/platform.py``) and the cost model, whose registration
    tables (``reg.efa.*``, ``reg.mlx5.*``) are parameter groups an RDMA driver declares it
    uses, not a list of drivers."""
    src = Path(__file__).resolve().parents[1] / "src" / "pinlab"
    skipped = {"platform/presets.py", "inspect/platform.py", "platform/cost.py"}
    names = {"amdgpu", "apu", "habanalabs", "nvidia-compute", "xe", "i915", "efa", "mlx5"}
    offenders = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.startswith("drivers/") or rel in skipped:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.List | ast.Tuple | ast.Set):
                items = node.elts
            elif isinstance(node, ast.Dict):
                items = [k for k in node.keys if k is not None]
            else:
                continue
            found = {i.value for i in items if isinstance(i, ast.Constant)} & names
            if len(found) >= 2:
                offenders.append(f"{rel}:{node.lineno}: {sorted(found)}")
    assert not offenders, "\n".join(offenders)
