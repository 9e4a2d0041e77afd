"""A run's ``config.toml`` is a scenario file that reproduces the run (issue "Your own
question", item 7): rerun, it keeps the variant's name and gives byte-identical outputs."""

from __future__ import annotations

from pathlib import Path

from pinlab.report.output import write_run
from pinlab.scenarios.config import load_scenario
from pinlab.scenarios.runner import run_scenario


def test_rerunning_config_toml_keeps_the_variant_and_reproduces_the_run(tmp_path: Path) -> None:
    cfg = load_scenario("desktop-pin-hog", sets=["scenario.duration=3s"])
    first = run_scenario(cfg, variants=["dmem.max"])[0][0]
    run_dir = write_run(first, tmp_path / "a", trace=False)
    again_cfg = load_scenario(run_dir / "config.toml")
    assert again_cfg.variants == ["dmem.max"]
    again = run_scenario(again_cfg)[0][0]
    assert again.variant == "dmem.max"
    again_dir = write_run(again, tmp_path / "b", trace=False)
    assert again_dir.name == "dmem.max"
    for name in ("config.toml", "summary.json", "series.csv"):
        assert (again_dir / name).read_bytes() == (run_dir / name).read_bytes(), name
