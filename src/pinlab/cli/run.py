"""``pinlab run``: the debate's scenarios and the user's own (``pinlab scenarios``: discover)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from pinlab.kernel.profile import PRESETS

if TYPE_CHECKING:
    from pinlab.scenarios.config import ScenarioConfig
    from pinlab.scenarios.result import RunResult, Verdict


from pinlab.cli.common import (
    ArgType,
    UserError,
    add_command,
    add_json_flag,
    add_out_flag,
    add_quiet_flag,
    add_scenario_arg,
    add_seed_flag,
    add_set_flag,
    add_workers,
    as_user_error,
    check_profile,
    out_dir,
    point_errors,
    wide,
)

DEFAULT_OUT = "pinlab-out"

T = TypeVar("T")


def _check_profiles(
    plan: list[tuple[ScenarioConfig, list[str]]], profile: str | None, compare: str | None
) -> None:
    """Before the first run: every variant must be valid under ``--profile`` and, with
    ``--compare-profile``, under that one too, and the two must differ -- so a comparison that
    cannot be made is refused with its real reason, not after the first half has run."""
    from pinlab.errors import ConfigError

    for cfg, variants in plan:
        for option, name in (("--profile", profile), ("--compare-profile", compare)):
            if name is None:
                continue
            try:
                alt = cfg.with_profile(name)
                for variant in variants:
                    alt.resolve(variant)
            except ConfigError as e:
                raise UserError(f"{option} {name}: {e}") from None
        if compare is not None:
            for variant in variants:
                base = cfg.with_profile(profile).resolve(variant) if profile else None
                runs_under = (base or cfg.resolve(variant)).kernel.profile
                if runs_under == compare:
                    raise UserError(
                        f"--compare-profile {compare}: expected a profile other than the one "
                        f"{cfg.name} variant {variant} runs under ({runs_under}), found the same"
                    )


def _load_configs(
    names: Sequence[str],
    sets: tuple[str, ...],
    platform: str | None = None,
    maps: Sequence[str] = (),
    policy: str | None = None,
    profile: str | None = None,
) -> list[ScenarioConfig]:
    """Each named (or file) scenario, validated, with ``--set`` applied and, with
    ``--platform``, the platform replaced by that file (``--map`` renaming the scenario's
    devices onto the host's, :mod:`pinlab.inspect.fit`); with ``--policy`` every variant runs
    under that policy file merged over the scenario's ``[policy]``; with ``--profile`` every
    variant is validated under that profile, as it will run
    (:func:`~pinlab.scenarios.config.load_scenario`). The runner's :class:`ConfigError` (an
    unknown name lists the built-in ones; a bad ``--set`` names it) becomes the one-line user
    error; on a host platform, the refusal names what the scenario needs and what the host
    has."""
    from pinlab.errors import ConfigError
    from pinlab.scenarios import config

    extra: dict[str, Any] = {}
    if platform is not None:
        extra["platform"] = platform
    elif maps:
        raise UserError("--map: expected --platform (the host platform the names map onto)")
    if policy is not None:
        extra["policy"] = policy
    if profile is not None:  # validated under the profile the variants will run under
        extra["profile"] = profile
    parsed: dict[str, str] = {}
    if maps and platform is not None:
        from pinlab.inspect.fit import check_map_sources, parse_maps, resolve_maps

        with as_user_error():
            parsed = parse_maps(maps)
            extra["rename"] = resolve_maps(parsed, platform)
    configs = []
    for name in names:
        try:
            # the fake runners of the tests take no keyword beyond sets
            configs.append(config.load_scenario(name, sets=sets, **extra))
        except ConfigError as e:
            if platform is None or not Path(platform).is_file():
                raise UserError(str(e)) from None
            raise UserError(_refusal(name, sets, platform, e)) from None
        except OSError as e:
            raise UserError(f"{name}: {e.strerror or e} (expected a scenario file)") from None
    if parsed:  # after the refusals, which say more of what is missing
        with as_user_error():
            check_map_sources(parsed, _own_configs(names, sets))
    return configs


def _own_configs(names: Sequence[str], sets: tuple[str, ...]) -> list[ScenarioConfig]:
    """The scenarios on their own platforms (what ``--map``'s left-hand names name); one that
    does not load there is left out (its load on the host platform reports it)."""
    from pinlab.errors import ConfigError
    from pinlab.scenarios import config

    own = []
    for name in names:
        with suppress(ConfigError, OSError):
            own.append(config.load_scenario(name, sets=sets))
    return own


def _refusal(name: str, sets: tuple[str, ...], platform: str, error: Exception) -> str:
    """The one-line refusal of scenario ``name`` on the host platform (:func:`refusal`)."""
    from pinlab.errors import ConfigError
    from pinlab.inspect.fit import first_missing_reference, refusal
    from pinlab.platform.spec import PlatformSpec
    from pinlab.scenarios import config

    assert isinstance(error, ConfigError)
    own = None
    try:
        cfg = config.load_scenario(name, sets=sets)
        spec = cfg.platform_spec()
        own = spec if isinstance(spec, PlatformSpec) else spec.node
        error = first_missing_reference(cfg, platform) or error
    except (ConfigError, OSError):
        pass
    try:
        return refusal(name, platform, error, own)
    except ConfigError:
        return str(error)


def _plan(
    configs: list[ScenarioConfig], requested: Sequence[str] | None
) -> list[tuple[ScenarioConfig, list[str]]]:
    """The variants to run per scenario: all, or those of ``--variant`` it has (in the
    scenario's order). A requested variant that no scenario has is a user error."""
    if not requested:
        return [(cfg, list(cfg.variants)) for cfg in configs]
    wanted = list(dict.fromkeys(requested))
    for variant in wanted:
        if not any(variant in cfg.variants for cfg in configs):
            valid = sorted({v for cfg in configs for v in cfg.variants})
            scope = configs[0].name if len(configs) == 1 else "any scenario"
            raise UserError(
                f"--variant: expected a variant of {scope} ({', '.join(valid)}), found {variant!r}"
            )
    return [
        (cfg, [v for v in cfg.variants if v in wanted])
        for cfg in configs
        if any(v in cfg.variants for v in wanted)
    ]


class _Reporter:
    """Prints between runs without tearing the (transient, stderr) progress bar: the bar is
    taken down while a table is printed to stdout and put back afterwards."""

    def __init__(self, console: Console, progress: Progress, quiet: bool) -> None:
        self.console = console
        self.progress = progress
        self.quiet = quiet

    def print(self, *objects: RenderableType) -> None:
        if self.quiet:
            return
        live = self.progress.live.is_started
        if live:
            self.progress.stop()
        for obj in objects:
            self.console.print(obj)
        if live:
            self.progress.start()


class _Ticker:
    """The runner's ``progress`` callback: it is called with a variant's name as that variant
    starts; the bar advances as each variant finishes."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self.progress = progress
        self.task = task
        self.done = 0  # variants finished before the current scenario
        self.started = 0  # variants of the current scenario started so far
        self.label = ""

    def begin(self, label: str) -> None:
        self.label = label
        self.started = 0
        self.progress.update(self.task, description=label)

    def __call__(self, variant: str) -> None:
        self.progress.update(
            self.task,
            completed=self.done + self.started,
            description=f"{self.label}: {variant}",
        )
        self.started += 1

    def end(self, variants: int) -> None:
        self.done += variants
        self.progress.update(self.task, completed=self.done)


def _run_scenario(
    cfg: ScenarioConfig,
    variants: list[str],
    profile: str | None,
    seed: int | None,
    tick: Callable[[str], None],
    reads: dict[str, frozenset[str]] | None = None,
) -> tuple[list[RunResult], Verdict]:
    """``runner.run_scenario``, its configuration errors as one-line user errors. With
    ``reads`` (``--robust``), each variant's cost-parameter reads are recorded into it."""
    from pinlab.scenarios import runner

    with as_user_error():
        if reads is not None:
            from pinlab.sweep.robust import run_nominal

            results, verdict, recorded = run_nominal(
                cfg, variants, profile=profile, seed=seed, progress=tick
            )
            reads.update(recorded)
            return results, verdict
        return runner.run_scenario(
            cfg, variants=variants, profile=profile, seed=seed, progress=tick
        )


def _robustness(
    args: argparse.Namespace,
    plans: list[Any],
    out: Path,
    stderr: Console,
) -> list[Any]:
    """``--robust``: run every plan's cases as one sweep under ``out/robust``; the
    :class:`~pinlab.sweep.robust.Robustness` of each claim."""
    from pinlab.sweep import PointError
    from pinlab.sweep.robust import assess, count_runs, run_plans

    reruns = partial(run_plans, plans, out)
    try:
        done = run_points(args, stderr, "robustness", count_runs(plans), out, reruns, "the reruns")
    except PointError as e:
        raise UserError(f"--robust: a rerun failed: {e}") from None
    return [assess(p, done) for p in plans]


def robustness_lines(items: Sequence[Any]) -> list[str]:
    """The per-claim robustness lines ``pinlab run --robust`` prints."""
    lines = []
    for r in items:
        varied = f"{len(r.varied)} low-confidence parameters, {r.cases} re-judgements"
        lines.append(f"robustness {r.scenario} ({r.nominal}; {varied}): {r.summary()}")
        lines += [f"  {line}" for line in r.details()]
        if r.fixed:
            lines.append(f"  fixed by the scenario (not varied): {', '.join(r.fixed)}")
        if r.unranged:
            lines.append(f"  low confidence but no range to vary: {', '.join(r.unranged)}")
    return lines


def progress_bar(stderr: Console, quiet: bool) -> Progress:
    """The transient progress bar on stderr, off when quiet or not a terminal."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
        disable=quiet or not stderr.is_terminal,
    )


@contextmanager
def progress_ticks(
    stderr: Console, quiet: bool, label: str, total: int
) -> Iterator[Callable[..., None]]:
    """A :func:`progress_bar` of the one task ``label`` over ``total`` steps, shown while the
    block runs; yields ``tick(done, total=None)``, the progress callback that moves it (and
    sets a total known only once running, as a resumed sweep's)."""
    progress = progress_bar(stderr, quiet)
    with progress:
        task = progress.add_task(label, total=total)

        def tick(done: int, total: int | None = None) -> None:
            progress.update(task, completed=done, total=total)

        yield tick


def run_points(
    args: argparse.Namespace,
    stderr: Console,
    label: str,
    total: int,
    out: Path,
    run: Callable[..., T],
    writing: str = "",
) -> T:
    """Run a command's points (a sweep's, an advice's, ``--robust`` reruns):
    ``run(jobs=, dask=, progress=)`` with the command's ``--jobs`` and ``--dask``, under the
    :func:`progress_ticks` of ``label`` over ``total`` points (off with ``--quiet``), its
    errors shaped by :func:`point_errors`; a point that failed otherwise goes on as its
    ``PointError``, for the command to report."""
    with progress_ticks(stderr, args.quiet, label, total) as tick, point_errors(out, writing):
        return run(jobs=args.jobs, dask=args.dask, progress=tick)


def _save(
    results: list[RunResult],
    out: Path,
    *,
    compare: bool,
    verdict: Verdict | None = None,
    report: bool = True,
    trace_filter: frozenset[str] | None = None,
    trace_max_events: int | None = None,
) -> int:
    """Write each run's directory under ``out`` (and, with ``report``, its ``report.html``
    and plots); the number written. ``trace_filter`` limits the categories of
    ``trace.json`` (``--trace-filter``), ``trace_max_events`` caps its size."""
    from pinlab.fsutil import refused_write
    from pinlab.report.html import run_report_files
    from pinlab.report.output import write_run
    from pinlab.report.trace import DEFAULT_MAX_EVENTS

    categories = trace_filter
    max_events = DEFAULT_MAX_EVENTS if trace_max_events is None else trace_max_events
    try:
        for result in results:
            write_run(
                result,
                out,
                compare_profile=compare,
                trace_categories=categories,
                trace_max_events=max_events,
                extra=partial(run_report_files, result, verdict) if report else None,
            )
    except OSError as e:
        raise UserError(str(refused_write(f"--out {out}", e))) from None
    return len(results)


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    """run a scenario (default: the whole debate suite) and print its verdict

    Run one scenario -- a built-in NAME or a scenario FILE -- or, with no argument, every built-in
    scenario; write each run to DIR/<scenario>/<variant>/ (config.toml, summary.json, series.csv,
    trace.json) and print one verdict table per scenario. Exit status: 0 when every claim held, 1
    when a claim failed, 2 for a user error."""
    from pinlab.report.verdict import claim_line, compare_table, randomness_line, verdict_table
    from pinlab.scenarios import config

    sets = tuple(args.set or ())
    check_profile("--profile", args.profile)
    check_profile("--compare-profile", args.compare_profile)
    names = [args.scenario] if args.scenario is not None else list(config.BUILTIN)
    configs = _load_configs(names, sets, args.platform, args.map or (), args.policy, args.profile)
    plan = _plan(configs, args.variant)
    _check_profiles(plan, args.profile, args.compare_profile)
    robust = bool(args.robust)
    if not robust and (args.robust_samples is not None or args.jobs is not None or args.dask):
        raise UserError("--robust-samples, --jobs and --dask: expected with --robust")
    if robust and args.platform is not None:
        raise UserError("--robust: expected a scenario's own platform, found --platform")
    if robust:
        from pinlab.sweep.robust import ROBUST_DIR

        for cfg, _variants in plan:
            if cfg.name == ROBUST_DIR:  # its run directory would be the reruns' sweep
                raise UserError(
                    f"--robust: {cfg.source}: scenario.name: expected a name other than "
                    f'"{ROBUST_DIR}" (the reruns are written to {args.out}/{ROBUST_DIR}/), '
                    f'found "{cfg.name}"'
                )
    if args.robust_samples is not None:
        from pinlab.sweep.spec import MAX_POINTS

        if not 0 <= args.robust_samples <= MAX_POINTS:
            raise UserError(
                f"--robust-samples: expected a number from 0 to {MAX_POINTS} (the reruns are one "
                f"sweep, and a sweep has at most {MAX_POINTS} points), found {args.robust_samples}"
            )
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs: expected a number of processes >= 1, found {args.jobs}")
    if args.json and not robust:
        raise UserError("--json: expected with --robust (the robustness as JSON)")
    out = out_dir(args.out)
    plans: list[Any] = []
    quiet = args.quiet or args.json
    console = wide(console)
    stderr = Console(stderr=True)
    runs_per_variant = 2 if args.compare_profile else 1
    failed: list[Verdict] = []
    suite: list[tuple[list[RunResult], Verdict]] = []
    written = 0
    save = partial(
        _save,
        out=out,
        report=not args.no_report,
        trace_filter=args.trace_filter,
        trace_max_events=args.trace_max_events,
    )
    progress = progress_bar(stderr, quiet)
    reporter = _Reporter(console, progress, quiet)
    total = sum(len(variants) for _, variants in plan) * runs_per_variant
    with progress:
        task = progress.add_task("pinlab run", total=total)
        tick = _Ticker(progress, task)
        for cfg, variants in plan:
            tick.begin(cfg.name)
            reads: dict[str, frozenset[str]] | None = {} if robust else None
            results, verdict = _run_scenario(cfg, variants, args.profile, args.seed, tick, reads)
            tick.end(len(variants))
            if reads is not None:
                from pinlab.sweep.robust import DEFAULT_SAMPLES
                from pinlab.sweep.robust import plan as robust_plan

                samples = DEFAULT_SAMPLES if args.robust_samples is None else args.robust_samples
                plans.append(
                    robust_plan(
                        cfg,
                        results,
                        verdict,
                        reads,
                        samples=samples,
                        seed=args.seed if args.seed is not None else 0,
                        profile=args.profile,
                        run_seed=args.seed,
                        sets=sets,
                        ref=args.scenario or cfg.name,
                    )
                )
            written += save(results, compare=False, verdict=verdict)
            suite.append((results, verdict))
            if verdict.judged and not verdict.held:
                failed.append(verdict)
            reporter.print(
                verdict_table(verdict), claim_line(verdict), randomness_line(results), ""
            )
            if args.compare_profile:
                tick.begin(f"{cfg.name} @ {args.compare_profile}")
                other, verdict_b = _run_scenario(
                    cfg, variants, args.compare_profile, args.seed, tick
                )
                tick.end(len(variants))
                written += save(other, compare=True, verdict=verdict_b)
                by_variant = {r.variant: r for r in other}
                tables: list[RenderableType] = [
                    claim_line(verdict_b, prefix=f"under profile {args.compare_profile}: "),
                    "",
                ]
                for result in results:
                    if result.variant in by_variant:
                        tables += [compare_table(result, by_variant[result.variant]), ""]
                reporter.print(*tables)
    robustness = _robustness(args, plans, out, stderr) if robust else []
    if robustness:
        from pinlab.sweep.robust import write_robustness

        try:
            kept = write_robustness(out, robustness)
        except OSError as e:
            raise UserError(
                f"--out {out}: cannot write the robustness: {e.strerror or e}"
            ) from None
        if args.json:
            print(kept.read_text(encoding="utf-8"), end="")
        elif not args.quiet:
            for line in robustness_lines(robustness):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
            console.print(f"robustness: {kept}", markup=False, highlight=False)
    if not args.no_report and len(suite) > 1:
        from pinlab.report.html import write_suite_report

        try:
            page = write_suite_report(
                out, suite, robustness=[r.to_json() for r in robustness] if robust else None
            )
        except OSError as e:
            raise UserError(f"--out {out}: cannot write the report: {e.strerror or e}") from None
        if not quiet:
            console.print(f"report: {page}", markup=False, highlight=False)
    elif suite:
        from pinlab.report.stale import mark_stale

        try:
            stale = mark_stale(out, [verdict.scenario for _, verdict in suite])
        except OSError as e:
            raise UserError(
                f"--out {out}: cannot mark the report stale: {e.strerror or e}"
            ) from None
        if stale is not None and not quiet:
            console.print(
                f"report: {stale} marked stale (rebuild: pinlab run --out {out})",
                markup=False,
                highlight=False,
            )
    for verdict in failed:
        stderr.print(
            f"pinlab: claim FAILED: {verdict.scenario}: {verdict.claim}"
            + (f" ({verdict.explanation})" if verdict.explanation else ""),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if not quiet:
        unjudged = sum(1 for _, v in suite if not v.judged)
        held = len(plan) - len(failed) - unjudged
        console.print(
            f"{len(plan)} scenario{'s' if len(plan) != 1 else ''}: {held} claim"
            f"{'s' if held != 1 else ''} held, {len(failed)} failed"
            + (f", {unjudged} not judged" if unjudged else "")
            + "; "
            f"{written} run director{'ies' if written != 1 else 'y'} in {out}/",
            markup=False,
            highlight=False,
        )
    return 1 if failed else 0


def _trace_filter_arg(text: str) -> frozenset[str]:
    from pinlab.report.trace import parse_categories

    try:
        return parse_categories(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_trace_max_arg = ArgType(partial(int, base=0), "an integer", lambda n: n >= 1, "at least 1 event")


def add_parsers(sub: Any) -> None:
    run = add_command(sub, "run", _cmd_run)
    add_scenario_arg(run, optional=True)
    run.add_argument(
        "--variant",
        action="append",
        metavar="V",
        help="run only variant V (repeatable; default: every variant)",
    )
    run.add_argument(
        "--profile",
        metavar="P",
        help=f"kernel profile overriding the scenario's ({', '.join(PRESETS)})",
    )
    add_set_flag(run, "override a scenario field, e.g. --set scenario.duration=30s (repeatable)")
    add_seed_flag(run, "the run seed")
    run.add_argument(
        "--platform",
        metavar="FILE",
        help="run on this platform file instead of the scenario's (e.g. from pinlab inspect)",
    )
    run.add_argument(
        "--map",
        action="append",
        metavar="NAME=HOST",
        help="with --platform: the scenario's device/NIC NAME is the host's HOST (a platform "
        "name, PCI address, card1, mlx5_0); repeatable",
    )
    run.add_argument(
        "--policy",
        metavar="FILE",
        help="run every variant under this administrator policy file, merged over the "
        "scenario's [policy] (e.g. from pinlab inspect --policy or pinlab advise)",
    )
    add_out_flag(run, f"output directory (default {DEFAULT_OUT})", default=DEFAULT_OUT)
    run.add_argument(
        "--compare-profile",
        metavar="P2",
        help="rerun every variant under kernel profile P2 and print the per-metric "
        "difference (written to DIR/<scenario>/<variant>@P2/; the exit status follows "
        "the first profile's claims)",
    )
    add_quiet_flag(run, "no tables and no progress bar (files still written)")
    run.add_argument(
        "--no-report",
        action="store_true",
        help="skip report.html and the plots (config, summary and series are still written)",
    )
    run.add_argument(
        "--trace-filter",
        type=_trace_filter_arg,
        metavar="CATS",
        help="write only these trace.json categories, a comma list of "
        "copy, transfer, odp, counter, instant, flow (default: all)",
    )
    run.add_argument(
        "--trace-max-events",
        type=_trace_max_arg,
        metavar="N",
        help="cap trace.json at N events, coarsening the finest first (default 200000)",
    )
    robust = run.add_argument_group(
        "robustness",
        "re-judge each claim with every low-confidence cost parameter its runs read at both "
        "ends of its range, then at a Latin-hypercube sample of them together "
        "(reruns: a sweep in DIR/robust/)",
    )
    robust.add_argument(
        "--robust", action="store_true", help="re-judge each claim across the parameter ranges"
    )
    robust.add_argument(
        "--robust-samples",
        type=int,
        metavar="N",
        help="Latin-hypercube points per scenario (default 4; 0: range ends only; at most "
        "10^5, the points of one sweep, since the reruns are one)",
    )
    add_workers(
        robust,
        jobs="local worker processes for the reruns",
        dask="run the reruns on Dask distributed",
    )
    add_json_flag(robust, "print the robustness as JSON (no tables)")
