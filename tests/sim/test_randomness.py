"""Real randomness (issue 11 item 6): every stochastic source draws from its own seeded
stream, seeds give replications that differ, the same seed the same bytes, and a run with no
stochastic source says it is deterministic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pinlab.scenarios.config import load_scenario
from pinlab.scenarios.runner import run_variant
from pinlab.sim.randomness import Streams

SCENARIO = """
[scenario]
name = "tiny-random"
duration = "2s"
seed = 1
sample_interval = "100ms"

[platform]
preset = "workstation"

[[tenants]]
name = "kv"
workload = "kv-transfer"
params = { device = "gpu0", nic = "mlx5_0", buffer = "256MiB", block = "16MiB", rate = 40.0 }

[[tenants]]
name = "app"
workload = "app"
params = { working_set = "512MiB", period = "50ms", arrivals = "poisson" }

[variants.poisson]

[variants.fixed]
"tenants.kv.params.rate" = 0.0
"tenants.app.params.arrivals" = "periodic"
"""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("random") / "tiny.toml"
    path.write_text(SCENARIO, encoding="utf-8")
    return path


def test_streams_are_seeded_per_component_and_independent() -> None:
    a = Streams(7).generator("kv/arrivals").random(4)
    assert np.array_equal(a, Streams(7).generator("kv/arrivals").random(4))  # same seed
    assert not np.array_equal(a, Streams(8).generator("kv/arrivals").random(4))  # seeds differ
    other = Streams(7)
    other.generator("app/arrivals").random(1000)  # another component, created and used first
    assert np.array_equal(a, other.generator("kv/arrivals").random(4))  # does not shift kv's
    assert other.sources == ["app/arrivals", "kv/arrivals"]
    assert Streams(7).sources == []


def _values(path: Path, variant: str, seed: int) -> tuple[dict[str, float], list[str], str]:
    result = run_variant(load_scenario(path), variant, seed=seed)
    values = {k: float(m.value) for k, m in result.metrics.items()}
    return values, result.random_sources, result.summary_json()


def test_poisson_arrivals_differ_across_seeds_and_repeat_per_seed(scenario: Path) -> None:
    a, sources, text = _values(scenario, "poisson", 1)
    b, _, text_b = _values(scenario, "poisson", 2)
    _, _, text_again = _values(scenario, "poisson", 1)
    # the Poisson workload and the desktop app's arrival process both drew from their streams
    assert sources == ["app/arrivals", "kv/arrivals"]
    assert a != b  # replications differ
    assert text != text_b
    assert text == text_again  # byte for byte per seed
    assert '"deterministic": false' in text and '"kv/arrivals"' in text


def test_a_run_without_stochastic_sources_says_deterministic(scenario: Path) -> None:
    a, sources, text = _values(scenario, "fixed", 1)
    b, _, _ = _values(scenario, "fixed", 2)
    assert sources == []
    assert a == b  # a seed changes nothing
    assert '"deterministic": true' in text
