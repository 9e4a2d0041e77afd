"""The public Python API (``docs/api.md``): load a scenario, override it, run it, read the
results as tables, judge its claim, write the run directories.

Everything here is exported from ``pinlab`` itself (``pinlab.load_scenario``, ``pinlab.run``
...); these names are stable. The API codes against the same functions as ``pinlab run``
(:mod:`pinlab.scenarios.runner`, :mod:`pinlab.scenarios.claims`, :mod:`pinlab.report`), so a
notebook and the command line give the same numbers and verdicts for the same scenario and
seed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from pinlab.errors import ConfigError, found_value, str_argument
from pinlab.fsutil import output_dir, refused_write
from pinlab.scenarios.claims import judge as _judge
from pinlab.scenarios.config import BUILTIN, ScenarioConfig, check_profile, check_seed, check_sets
from pinlab.scenarios.config import load_scenario as _load
from pinlab.scenarios.result import METRICS_SCHEMA, SERIES_SCHEMA, RunResult, Verdict
from pinlab.scenarios.runner import run_variant as _run_variant

__all__ = [
    "BUILTIN",
    "Run",
    "RunResult",
    "Scenario",
    "Verdict",
    "judge",
    "load_scenario",
    "run",
    "run_variant",
]

Scenario = ScenarioConfig
"""A loaded, validated scenario (:class:`~pinlab.scenarios.config.ScenarioConfig`)."""


def load_scenario(
    name_or_path: str | Path,
    *,
    sets: Sequence[str] = (),
    platform: str | Path | None = None,
    profile: str | None = None,
    seed: int | None = None,
) -> Scenario:
    """A built-in scenario by name (:data:`BUILTIN`) or a scenario file, validated (its claim
    too); ``sets`` are ``key=value`` overrides as ``pinlab run --set`` takes them,
    ``platform`` a platform file replacing ``[platform]``, ``profile`` and ``seed`` override
    the kernel profile and the seed of every variant. :class:`~pinlab.errors.ConfigError`
    (one line) on the first problem."""
    if not isinstance(name_or_path, str | os.PathLike):
        raise ConfigError(
            "name_or_path",
            "",
            f"expected a built-in scenario ({', '.join(BUILTIN)}) or a scenario file's path, "
            f"found {found_value(name_or_path)}",
        )
    if platform is not None and not isinstance(platform, str | os.PathLike):
        raise ConfigError(
            "platform", "", f"expected a platform file's path, found {found_value(platform)}"
        )
    _check_overrides(sets, profile, seed)
    cfg = _load(name_or_path, sets=sets, platform=platform, profile=profile)
    if seed is not None:
        cfg = cfg.with_seed(seed)
    return cfg


def _check_overrides(sets: object, profile: object, seed: object) -> None:
    """The arguments of :func:`load_scenario` and :func:`run`, checked before any work."""
    check_sets(sets)
    if profile is not None:
        check_profile(profile)
    if seed is not None:
        check_seed(seed)


def _check_scenario(scenario: object) -> ScenarioConfig:
    if not isinstance(scenario, ScenarioConfig):
        raise ConfigError(
            "scenario",
            "",
            f"expected a Scenario (pinlab.load_scenario), found {found_value(scenario)}",
        )
    return scenario


def judge(scenario: Scenario, results: Sequence[RunResult]) -> Verdict:
    """The verdict on ``scenario``'s claim from ``results`` (variants in run order): at least
    one result, each of a different variant of ``scenario`` -- a verdict over no run would
    hold vacuously (an expectation on every variant holds in each of none)."""
    cfg = _check_scenario(scenario)
    if isinstance(results, str | bytes) or not isinstance(results, Sequence):
        raise ConfigError(
            "results",
            "",
            f"expected a list of RunResult (pinlab.run_variant), found {found_value(results)}",
        )
    if not results:
        raise ConfigError(
            "results",
            "",
            f"expected at least one RunResult of {cfg.name} ({', '.join(cfg.variants)}), "
            "found none",
        )
    seen: set[str] = set()
    for i, r in enumerate(results):
        if not isinstance(r, RunResult):
            raise ConfigError(f"results[{i}]", "", f"expected a RunResult, found {found_value(r)}")
        if r.variant not in cfg.variants:
            raise ConfigError(
                f"results[{i}]",
                "",
                f"expected a result of a variant of {cfg.name} ({', '.join(cfg.variants)}), "
                f"found one of variant {r.variant!r}",
            )
        if r.variant in seen:
            raise ConfigError(
                f"results[{i}]",
                "",
                f"expected one result per variant, found a second of {r.variant!r}",
            )
        seen.add(r.variant)
    return _judge(cfg, list(results))


@dataclass(frozen=True, slots=True)
class Run:
    """What :func:`run` gives: the scenario, each variant's :class:`RunResult` (in run order,
    also ``run["variant"]``) and the :class:`Verdict` on the claim."""

    scenario: Scenario
    results: tuple[RunResult, ...]
    verdict: Verdict

    def __getitem__(self, variant: str) -> RunResult:
        str_argument("variant", variant, "a variant's name")
        for r in self.results:
            if r.variant == variant:
                return r
        ran = ", ".join(r.variant for r in self.results)
        raise KeyError(f"variant {found_value(variant)} was not run (ran: {ran})")

    def __iter__(self) -> Iterator[RunResult]:
        return iter(self.results)

    @property
    def variants(self) -> list[str]:
        return [r.variant for r in self.results]

    def metrics(self) -> pa.Table:
        """Every metric of every variant: scenario, variant, metric, value, unit, description
        (``.to_pandas()`` for a DataFrame)."""
        tables = [r.metrics_table() for r in self.results]
        return pa.concat_tables(tables) if tables else METRICS_SCHEMA.empty_table()

    def series(self) -> pa.Table:
        """Every time-series point of every variant: scenario, variant, series, time_s,
        value, unit."""
        tables = [r.series_table() for r in self.results]
        return pa.concat_tables(tables) if tables else SERIES_SCHEMA.empty_table()

    def verdict_table(self) -> pa.Table:
        """The verdict table (as ``pinlab run`` prints it): one row per variant, its cells as
        text."""
        columns = self.verdict.columns
        return pa.table(
            {c: [str(row.get(c, "")) for row in self.verdict.rows] for c in columns},
            schema=pa.schema([(c, pa.string()) for c in columns]),
        )

    def write(self, out: str | Path, *, report: bool = False, trace: bool = True) -> list[Path]:
        """Write each variant's run directory under ``out`` (``<out>/<scenario>/<variant>/``:
        ``config.toml``, ``summary.json``, ``series.csv``, ``trace.json``), as ``pinlab run``
        does; with ``report`` also each run's ``report.html`` and plots. Returns the
        directories. ``out`` is checked first (:func:`pinlab.fsutil.output_dir`): an empty
        path, a file on the way or a place this process cannot write is a
        :class:`ConfigError`, and nothing is written; a directory the system then refuses
        to make or write (``/proc``, ``/sys``, a full disk) is a :class:`ConfigError` too."""
        from pinlab.report.html import write_run_report
        from pinlab.report.output import write_run

        shown = out
        out = output_dir(out, "out")
        paths = []
        try:
            for result in self.results:
                path = write_run(result, out, trace=trace)
                if report:
                    write_run_report(path, result, self.verdict)
                paths.append(path)
        except OSError as e:
            raise refused_write(f"out {os.fspath(shown)}", e) from None
        return paths


def run(
    scenario: Scenario | str | Path,
    variants: Sequence[str] | str | None = None,
    *,
    sets: Sequence[str] = (),
    profile: str | None = None,
    seed: int | None = None,
) -> Run:
    """Run ``scenario`` (a :class:`Scenario`, a built-in name or a file) -- every variant, or
    those named -- and judge its claim. ``sets``, ``profile`` and ``seed`` override as in
    :func:`load_scenario`."""
    _check_overrides(sets, profile, seed)
    cfg = _scenario_arg(scenario)
    if sets:
        cfg = cfg.with_set(*sets)
    if profile is not None:
        cfg = cfg.with_profile(profile)
    if seed is not None:
        cfg = cfg.with_seed(seed)
    names = _variant_names(cfg, variants)
    results = tuple(_run_variant(cfg, name) for name in names)
    return Run(cfg, results, _judge(cfg, list(results)))


def run_variant(
    scenario: Scenario | str | Path,
    variant: str,
    *,
    profile: str | None = None,
    seed: int | None = None,
) -> RunResult:
    """Run one ``variant`` of ``scenario`` (a :class:`Scenario`, a built-in name or a file),
    optionally under another kernel ``profile`` or ``seed``: its :class:`RunResult`."""
    _check_overrides((), profile, seed)
    cfg = _scenario_arg(scenario)
    if not isinstance(variant, str):
        raise ConfigError(
            "variant",
            "",
            f"expected a variant of {cfg.name} ({', '.join(cfg.variants)}), "
            f"found {found_value(variant)}",
        )
    (name,) = _variant_names(cfg, variant, "variant")
    return _run_variant(cfg, name, profile=profile, seed=seed)


def _scenario_arg(scenario: object) -> ScenarioConfig:
    """``scenario`` as a :class:`Scenario`: itself, or loaded from a built-in name or a path."""
    if isinstance(scenario, ScenarioConfig):
        return scenario
    if not isinstance(scenario, str | os.PathLike):
        raise ConfigError(
            "scenario",
            "",
            f"expected a Scenario, a built-in scenario ({', '.join(BUILTIN)}) or a scenario "
            f"file's path, found {found_value(scenario)}",
        )
    return load_scenario(scenario if isinstance(scenario, str) else Path(scenario))


def _variant_names(cfg: ScenarioConfig, variants: object, source: str = "variants") -> list[str]:
    """The variants to run: every one of ``cfg`` for None, else those named (a name or a list
    of names), each a variant of ``cfg`` and named once."""
    if variants is None:
        return list(cfg.variants)
    names = [variants] if isinstance(variants, str) else variants
    if not isinstance(names, Sequence) or not names:
        raise ConfigError(
            source, "", f"expected a variant name or a list of them, found {found_value(variants)}"
        )
    out: list[str] = []
    for i, name in enumerate(names):
        where = source if isinstance(variants, str) else f"{source}[{i}]"
        if not isinstance(name, str) or name not in cfg.variants:
            raise ConfigError(
                where,
                "",
                f"expected a variant of {cfg.name} ({', '.join(cfg.variants)}), "
                f"found {found_value(name)}",
            )
        if name in out:
            raise ConfigError(
                where, "", f"expected each variant once, found {found_value(name)} again"
            )
        out.append(name)
    return out
