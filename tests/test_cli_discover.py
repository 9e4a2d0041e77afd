"""``pinlab scenarios [show]``, ``workloads``, ``params`` and ``metrics``, each with ``--json``:
what a scenario file can use, machine-readable and consistent with what pinlab runs."""

from __future__ import annotations

import json
import tomllib

import pytest

from pinlab.cli import main
from pinlab.platform.cost import parameters
from pinlab.scenarios.config import BUILTIN, load_scenario
from pinlab.sim.workloads import WORKLOADS
from pinlab.units import parse_time


def listing(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_scenarios_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    names = [s["name"] for s in listing(capsys, "scenarios")]  # type: ignore[union-attr]
    assert names == list(BUILTIN)
    shown = listing(capsys, "scenarios", "show", "odp-vs-pin")
    assert isinstance(shown, dict) and shown["name"] == "odp-vs-pin"
    # the TOML to copy is the scenario: it parses to the document, which loads
    assert tomllib.loads(shown["toml"]) == shown["document"]
    assert load_scenario("odp-vs-pin").variants == list(shown["document"]["variants"])


def test_workloads_with_parameters_and_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    every = listing(capsys, "workloads")
    assert [w["name"] for w in every] == list(WORKLOADS)  # type: ignore[union-attr]
    types = {p["type"] for w in every for p in w["params"]}  # type: ignore[union-attr]
    assert "list of str | all" in types and not any("Union" in t for t in types), types
    kv = listing(capsys, "workloads", "kv-transfer")
    assert isinstance(kv, dict)
    params = {p["name"]: p for p in kv["params"]}
    assert params["buffer"]["unit"] == "B" and params["buffer"]["default"] == "1GiB"
    assert set(params) == set(WORKLOADS["kv-transfer"].params.model_fields) - {"workload"}
    assert {"name": "setup_time", "unit": "s"}.items() <= kv["metrics"][0].items()


def test_params_values_carry_their_unit(capsys: pytest.CaptureFixture[str]) -> None:
    rows = listing(capsys, "params", "odp.*")
    assert isinstance(rows, list) and rows
    assert all(r["key"].startswith("odp.") for r in rows)
    fault = next(r for r in rows if r["key"] == "odp.fault")
    assert fault["value_unit"] == "s" and fault["value"] == parse_time(fault["text"])
    assert {"sweep", "confidence", "source", "description"} <= set(fault)
    assert len(listing(capsys, "params")) == len(parameters())  # type: ignore[arg-type]


def test_a_dotted_prefix_lists_its_subtree(capsys: pytest.CaptureFixture[str]) -> None:
    """`pinlab params nic.efa` was refused (no key is `nic.efa`; fnmatch wanted `nic.efa.*`),
    though the error's own list of families reads like prefixes. Without a wildcard a pattern
    is a key or the keys below it; with one, fnmatch as before."""
    rows = listing(capsys, "params", "nic.efa")
    keys = {r["key"] for r in rows}  # type: ignore[index]
    assert keys and keys == {p.key for p in parameters() if p.key.startswith("nic.efa.")}
    assert [r["key"] for r in listing(capsys, "params", "odp.fault")] == ["odp.fault"]  # type: ignore[index]
    assert main(["params", "nic.ef", "--json"]) == 2  # a prefix is whole segments
    assert "found 'nic.ef'" in capsys.readouterr().err


def test_metrics_of_a_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    data = listing(capsys, "metrics", "odp-vs-pin")
    assert isinstance(data, dict) and data["scenario"] == "odp-vs-pin"
    assert data["variants"] == load_scenario("odp-vs-pin").variants
    text = json.dumps(data["metrics"])
    assert "tenant.rdma.throughput" in text and "global.stale_dma_incidents" in text
    assert {f["name"] for f in data["functions"]} >= {"sum", "ratio"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["workloads", "nope"], "workloads: expected a workload (allreduce, "),
        (["params", "zzz*"], "params: expected a pattern matching cost parameters ("),
        (["scenarios", "show", "nope"], "nope"),
        (["metrics", "nope.toml"], "nope.toml"),
    ],
)
def test_unknown_names_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pinlab: error: ") and expected in err and "\n" not in err
