"""The ``pinlab`` command line.

Subcommands:

* ``pinlab demo [--profile P]`` -- the dma-buf pin/move walkthrough;
* ``pinlab profiles`` -- the kernel profiles and the switches where they differ;
* ``pinlab bufinfo FILE`` -- parse a real (or pinlab-written) debugfs ``dma_buf/bufinfo``;
* ``pinlab matrix [--profile P] [--move-notify] [--json]`` -- every exporter × importer pair:
  where import + pin + map puts the memory, whether the path is P2P, which K- items decide;
* ``pinlab policy show FILE`` / ``pinlab policy check FILE`` -- an administrator policy file
  (cgroup tree with dmem limits, users' RLIMIT_MEMLOCK, proposals on): rendered / validated;
* ``pinlab run [NAME|FILE] [--variant V] [--profile P] [--set key=value] [--seed N]
  [--out DIR] [--compare-profile P2] [--quiet]`` -- run one scenario (or, with no argument,
  the whole debate suite), write each run's directory (``config.toml``, ``summary.json``,
  ``series.csv``) and print one verdict table per scenario; exit 1 when a claim failed;
* ``pinlab scenarios`` -- the built-in scenarios: name, camp and claim;
* ``pinlab sweep SWEEP.toml [--out DIR] [--jobs N] [--dask local|ADDRESS] [--max-points N]
  [--dry-run] [--quiet]`` -- a parameter sweep into ``DIR/results.{parquet,csv}``, resumable;
* ``pinlab bench [--platform PRESET|FILE] [--param k=v] [--set k=v] [--seed N] [--nodes N]
  [--json] TOOL ARGS...`` -- a microbenchmark users run (``perftest ib_write_bw -a ...``) on a
  modelled machine, printed as the tool prints it (:mod:`pinlab.bench`).

User errors (a missing file, a malformed dump, an unknown profile) print one line naming what
was expected and what was found, and exit with status 2 -- never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from pinlab import __version__
from pinlab.kernel.profile import DEFAULT_PROFILE, PRESETS

if TYPE_CHECKING:
    from pinlab.scenarios.result import RunResult, Verdict
    from pinlab.scenarios.runner import ScenarioConfig


class UserError(Exception):
    """A mistake in the user's input: reported in one line, exit status 2."""


def _cmd_demo(args: argparse.Namespace, console: Console) -> int:
    from pinlab.demo import walkthrough

    return walkthrough(args.profile, not args.no_move_notify, Console(soft_wrap=True))


def _cmd_profiles(args: argparse.Namespace, console: Console) -> int:
    table = Table(title="kernel profiles (default " + DEFAULT_PROFILE + ")", title_justify="left")
    table.add_column("switch")
    for name in PRESETS:
        table.add_column(name)
    fields = [f.name for f in dataclasses.fields(next(iter(PRESETS.values())))]
    for field in fields:
        if field in ("name",):
            continue
        values = []
        for profile in PRESETS.values():
            value = getattr(profile, field)
            values.append(getattr(value, "value", value))
        table.add_row(field, *(str(v) for v in values))
    console.print(table)
    return 0


def _cmd_bufinfo(args: argparse.Namespace, console: Console) -> int:
    from pinlab.kernel.bufinfo import BufinfoParseError, parse_bufinfo_file

    try:
        dump = parse_bufinfo_file(args.file)
    except FileNotFoundError:
        raise UserError(f"{args.file}: no such file (expected a dma_buf/bufinfo dump)") from None
    except (BufinfoParseError, OSError, UnicodeDecodeError) as e:
        raise UserError(str(e)) from None
    table = Table(title=f"{args.file}: {len(dump.objects)} dma-buf objects", title_justify="left")
    for col in ("ino", "exporter", "name", "size", "count", "fences", "attached devices"):
        table.add_column(col)
    for rec in dump.objects:
        table.add_row(
            str(rec.ino),
            rec.exp_name,
            rec.name or "<none>",
            str(rec.size),
            str(rec.count),
            str(len(rec.fences)),
            ", ".join(rec.attached_devices) or "-",
        )
    console.print(table)
    return 0


def _cmd_matrix(args: argparse.Namespace, console: Console) -> int:
    import json

    from pinlab.report.matrix import (
        build_matrix,
        build_matrix_pair,
        matrix_profile,
        render_matrix,
    )

    try:
        profile = matrix_profile(args.profile, bool(args.move_notify))
    except ValueError as e:
        raise UserError(str(e)) from None
    alt = None
    if args.move_notify is None:  # neither flag: both settings where the option exists
        matrix, alt = build_matrix_pair(args.profile)
    else:
        matrix = build_matrix(profile)
    if args.json:
        data = matrix.to_json()
        if alt is not None:
            data["with_move_notify"] = alt.to_json()
        print(json.dumps(data, indent=2))
        return 0
    if not console.is_terminal:  # piped or captured: full rows instead of 80-column wrapping
        console = Console(width=max(console.width, 160))
    render_matrix(matrix, console, alt)
    return 0


def _cmd_policy_show(args: argparse.Namespace, console: Console) -> int:
    from pinlab.policy.config import PolicyError, load_policy, preview_policy
    from pinlab.policy.render import render_policy

    try:
        config = load_policy(args.file)
        applied = preview_policy(config, args.file)
    except PolicyError as e:
        raise UserError(str(e)) from None
    if not console.is_terminal:  # piped or captured: full rows instead of 80 columns
        console = Console(width=max(console.width, 140))
    if config.description:
        console.print(f"[bold]{args.file}[/bold]: {config.description}", highlight=False)
    notes = {
        "/" + "/".join(p for p in key.split("/") if p): spec.description
        for key, spec in config.cgroups.items()
        if spec.description
    }
    console.print(
        render_policy(
            applied.tree,
            applied.dmem,
            config.proposals.enabled(),
            usage=False,
            users=config.users,
            title=f"cgroup tree of {args.file}",
            notes=notes,
        )
    )
    return 0


def _cmd_policy_check(args: argparse.Namespace, console: Console) -> int:
    from pinlab.policy.config import PolicyError, load_policy, preview_policy

    try:
        config = load_policy(args.file)
        preview_policy(config, args.file)
    except PolicyError as e:
        raise UserError(str(e)) from None
    on = ", ".join(config.proposals.enabled()) or "none"
    print(
        f"{args.file}: ok -- {len(config.cgroup_paths())} cgroups, {len(config.users)} users, "
        f"proposals: {on}"
    )
    return 0


def _cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    import json
    from pathlib import Path

    from pinlab.inspect import (
        check_platform,
        inspect_host,
        plan_host,
        platform_text,
        render_summary,
        summary_json,
        write_platform,
    )

    root = Path(args.root)
    if not root.is_dir():
        raise UserError(f"--root {args.root}: expected a directory (a host's /), found none")
    report = inspect_host(root)
    plan = plan_host(report)
    out = Path(args.out)
    host = report.system.hostname or "this host"
    try:
        write_platform(platform_text(plan, source=f"{host} (root {root})"), out)
    except OSError as e:
        raise UserError(
            f"--out {args.out}: expected a writable file in an existing directory, "
            f"found: {e.strerror or e}"
        ) from None
    check = check_platform(out, plan.spec)
    if args.json:
        print(json.dumps(summary_json(report, plan, out, check), indent=2))
        return 0
    if not console.is_terminal:  # piped or captured: full lines instead of 80 columns
        console = Console(width=max(console.width, 120))
    render_summary(report, plan, out, check, console)
    return 0


# -- pinlab run / pinlab scenarios ---------------------------------------------------------------

DEFAULT_OUT = "pinlab-out"


def _check_profile(option: str, profile: str | None) -> None:
    if profile is not None and profile not in PRESETS:
        raise UserError(
            f"{option}: expected a kernel profile ({', '.join(PRESETS)}), found {profile!r}"
        )


def _load_configs(
    names: Sequence[str], sets: tuple[str, ...], platform: str | None = None
) -> list[ScenarioConfig]:
    """Each named (or file) scenario, validated, with ``--set`` applied and, with
    ``--platform``, the platform replaced by that file. The runner's
    :class:`ConfigError` (an unknown name lists the built-in ones; a bad ``--set`` names it)
    becomes the one-line user error."""
    from pinlab.errors import ConfigError
    from pinlab.scenarios import runner

    configs = []
    for name in names:
        try:
            if platform is None:  # the fake runners of the tests take no platform
                configs.append(runner.load_scenario(name, sets=sets))
            else:
                configs.append(runner.load_scenario(name, sets=sets, platform=platform))
        except ConfigError as e:
            raise UserError(str(e)) from None
        except OSError as e:
            raise UserError(f"{name}: {e.strerror or e} (expected a scenario file)") from None
    return configs


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
) -> tuple[list[RunResult], Verdict]:
    """``runner.run_scenario``, its configuration errors as one-line user errors."""
    from pinlab.errors import ConfigError
    from pinlab.scenarios import runner

    try:
        return runner.run_scenario(
            cfg, variants=variants, profile=profile, seed=seed, progress=tick
        )
    except ConfigError as e:
        raise UserError(str(e)) from None


def _progress_bar(stderr: Console, quiet: bool) -> Progress:
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
    from pinlab.report.html import write_run_report
    from pinlab.report.output import write_run
    from pinlab.report.trace import DEFAULT_MAX_EVENTS

    categories = trace_filter
    max_events = DEFAULT_MAX_EVENTS if trace_max_events is None else trace_max_events
    try:
        for result in results:
            path = write_run(
                result,
                out,
                compare_profile=compare,
                trace_categories=categories,
                trace_max_events=max_events,
            )
            if report:
                write_run_report(path, result, verdict)
    except OSError as e:
        raise UserError(f"--out {out}: cannot write the run directory: {e.strerror or e}") from None
    return len(results)


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    from pinlab.report.verdict import claim_line, compare_table, verdict_table
    from pinlab.scenarios import runner

    sets = tuple(args.set or ())
    _check_profile("--profile", args.profile)
    _check_profile("--compare-profile", args.compare_profile)
    names = [args.scenario] if args.scenario else list(runner.BUILTIN)
    plan = _plan(_load_configs(names, sets, args.platform), args.variant)
    out = Path(args.out)
    if not console.is_terminal:  # piped or captured: full rows instead of 80 columns
        console = Console(width=max(console.width, 160))
    stderr = Console(stderr=True)
    runs_per_variant = 2 if args.compare_profile else 1
    failed: list[Verdict] = []
    suite: list[tuple[list[RunResult], Verdict]] = []
    written = 0
    progress = _progress_bar(stderr, args.quiet)
    reporter = _Reporter(console, progress, args.quiet)
    total = sum(len(variants) for _, variants in plan) * runs_per_variant
    with progress:
        task = progress.add_task("pinlab run", total=total)
        tick = _Ticker(progress, task)
        for cfg, variants in plan:
            tick.begin(cfg.name)
            results, verdict = _run_scenario(cfg, variants, args.profile, args.seed, tick)
            tick.end(len(variants))
            written += _save(
                results,
                out,
                compare=False,
                verdict=verdict,
                report=not args.no_report,
                trace_filter=args.trace_filter,
                trace_max_events=args.trace_max_events,
            )
            suite.append((results, verdict))
            if verdict.judged and not verdict.held:
                failed.append(verdict)
            reporter.print(verdict_table(verdict), claim_line(verdict), "")
            if args.compare_profile:
                tick.begin(f"{cfg.name} @ {args.compare_profile}")
                other, verdict_b = _run_scenario(
                    cfg, variants, args.compare_profile, args.seed, tick
                )
                tick.end(len(variants))
                written += _save(
                    other,
                    out,
                    compare=True,
                    verdict=verdict_b,
                    report=not args.no_report,
                    trace_filter=args.trace_filter,
                    trace_max_events=args.trace_max_events,
                )
                by_variant = {r.variant: r for r in other}
                tables: list[RenderableType] = [
                    claim_line(verdict_b, prefix=f"under profile {args.compare_profile}: "),
                    "",
                ]
                for result in results:
                    if result.variant in by_variant:
                        tables += [compare_table(result, by_variant[result.variant]), ""]
                reporter.print(*tables)
    if not args.no_report and len(suite) > 1:
        from pinlab.report.html import write_suite_report

        try:
            page = write_suite_report(out, suite)
        except OSError as e:
            raise UserError(f"--out {out}: cannot write the report: {e.strerror or e}") from None
        if not args.quiet:
            console.print(f"report: {page}", markup=False, highlight=False)
    for verdict in failed:
        stderr.print(
            f"pinlab: claim FAILED: {verdict.scenario}: {verdict.claim}"
            + (f" ({verdict.explanation})" if verdict.explanation else ""),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if not args.quiet:
        unjudged = sum(1 for _, v in suite if not v.judged)
        held = len(plan) - len(failed) - unjudged
        console.print(
            f"{len(plan)} scenario{'s' if len(plan) != 1 else ''}: {held} claim"
            f"{'s' if held != 1 else ''} held, {len(failed)} failed"
            + (f", {unjudged} not judged (variants not run)" if unjudged else "")
            + "; "
            f"{written} run director{'ies' if written != 1 else 'y'} in {out}/",
            markup=False,
            highlight=False,
        )
    return 1 if failed else 0


def _cmd_scenarios(args: argparse.Namespace, console: Console) -> int:
    from pinlab.errors import ConfigError
    from pinlab.scenarios import runner

    rows = []
    for name, claim in runner.list_scenarios():
        try:
            camp = str(getattr(runner.load_scenario(name), "camp", "") or "")
        except ConfigError:  # a broken built-in still shows up in the list
            camp = ""
        rows.append((name, camp, claim))
    if not console.is_terminal:
        console = Console(width=max(console.width, 160))
    table = Table(title="built-in scenarios (pinlab run NAME)", title_justify="left")
    table.add_column("name", no_wrap=True)
    with_camp = any(camp for _, camp, _ in rows)
    if with_camp:
        table.add_column("camp")
    table.add_column("claim")
    for name, camp, claim in rows:
        table.add_row(name, *((camp,) if with_camp else ()), claim)
    console.print(table)
    return 0


def _param_value(text: str) -> object:
    """A ``--param`` value: a TOML scalar (``2``, ``true``, ``"x"``) or, failing that, the
    text itself (``cx7``, ``100Gbps``)."""
    import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _cmd_bench(args: argparse.Namespace, console: Console) -> int:
    import dataclasses as dc
    import json

    from pinlab.bench import run_bench
    from pinlab.errors import ConfigError

    params: dict[str, object] = {}
    for item in args.param or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--param {item}: expected key=value, found no '='")
        params[key.strip()] = _param_value(value.strip())
    try:
        table = run_bench(
            args.tool,
            list(args.args),
            platform=args.platform,
            platform_params=params,
            nodes=args.nodes,
            sets=tuple(args.set or ()),
            seed=args.seed,
        )
    except ConfigError as e:
        raise UserError(str(e)) from None
    if args.json:
        data = dc.asdict(table)
        data["meta"] = dict(table.meta)
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        sys.stdout.write(table.text)
    return 0


def _add_bench_parser(sub: Any) -> None:
    bench = sub.add_parser(
        "bench",
        help="run a microbenchmark users run (perftest ...) on a modelled machine",
        description="Run TOOL with the real tool's arguments on a modelled machine and print "
        "what the tool prints (e.g. pinlab bench perftest ib_write_bw -a --report_gbits).",
    )
    bench.add_argument(
        "--platform",
        default="cx-pair",
        metavar="PRESET|FILE",
        help="a preset or platform file (default cx-pair: two ConnectX hosts back to back)",
    )
    bench.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="a preset parameter (repeatable), e.g. --param nic=cx7 --param gpu=h200",
    )
    bench.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="a cost-model override (repeatable), e.g. --set nic.cx6.qp_msg_cost=0us",
    )
    bench.add_argument("--seed", type=_seed_arg, default=0, help="seed of every random draw")
    bench.add_argument("--nodes", type=int, default=None, help="nodes the tool spans (perftest: 2)")
    bench.add_argument("--json", action="store_true", help="the table as JSON")
    bench.add_argument("tool", help="the tool: perftest (nvbandwidth, p2p, nccl-tests, gdrcopy)")
    bench.add_argument(
        "args", nargs=argparse.REMAINDER, help="the tool's own arguments (test name first)"
    )
    bench.set_defaults(func=_cmd_bench)


def _seed_arg(text: str) -> int:
    try:
        seed = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, found {text!r}") from None
    if seed < 0:
        raise argparse.ArgumentTypeError(f"expected a seed >= 0, found {text!r}")
    return seed


def _trace_filter_arg(text: str) -> frozenset[str]:
    from pinlab.report.trace import parse_categories

    try:
        return parse_categories(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _trace_max_arg(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, found {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 event, found {text!r}")
    return n


def _add_run_parsers(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run a scenario (default: the whole debate suite) and print its verdict",
        description=(
            "Run one scenario -- a built-in NAME or a scenario FILE -- or, with no argument, "
            "every built-in scenario; write each run to DIR/<scenario>/<variant>/ "
            "(config.toml, summary.json, series.csv, trace.json) and print one verdict table per "
            "scenario. Exit status: 0 when every claim held, 1 when a claim failed, "
            "2 for a user error."
        ),
    )
    run.add_argument(
        "scenario",
        nargs="?",
        metavar="NAME|FILE",
        help="a built-in scenario (see `pinlab scenarios`) or a scenario .toml file",
    )
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
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a scenario field, e.g. --set scenario.duration=30s (repeatable)",
    )
    run.add_argument("--seed", type=_seed_arg, metavar="N", help="the run seed")
    run.add_argument(
        "--platform",
        metavar="FILE",
        help="run on this platform file instead of the scenario's (e.g. from pinlab inspect)",
    )
    run.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output directory (default {DEFAULT_OUT})",
    )
    run.add_argument(
        "--compare-profile",
        metavar="P2",
        help="rerun every variant under kernel profile P2 and print the per-metric "
        "difference (written to DIR/<scenario>/<variant>@P2/; the exit status follows "
        "the first profile's claims)",
    )
    run.add_argument(
        "--quiet", action="store_true", help="no tables and no progress bar (files still written)"
    )
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
    run.set_defaults(func=_cmd_run)

    scenarios = sub.add_parser("scenarios", help="list the built-in scenarios and their claims")
    scenarios.set_defaults(func=_cmd_scenarios)


def _cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    """``pinlab sweep SWEEP.toml``: expand, run the unfinished points, write the table."""
    from pinlab.errors import ConfigError
    from pinlab.sweep import PointError, load_sweep, run_sweep

    try:
        sweep = load_sweep(args.file)
    except ConfigError as e:
        raise UserError(str(e)) from None
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs: expected a number of processes >= 1, found {args.jobs}")
    if args.max_points is not None and args.max_points < 0:
        raise UserError(f"--max-points: expected a number >= 0, found {args.max_points}")
    if args.dry_run:
        if not console.is_terminal:
            console = Console(width=max(console.width, 160))
        table = Table(
            title=f"{sweep.name}: {len(sweep.points)} points ({sweep.source})",
            title_justify="left",
        )
        for col in ("point", "id", "variant", "seed", *sweep.factor_names):
            table.add_column(col, overflow="fold")
        for p in sweep.points:
            seed = "scenario" if p.seed is None else str(p.seed)
            factors = [str(p.factors[n]) for n in sweep.factor_names]
            table.add_row(str(p.index), p.id[:12], p.variant, seed, *factors)
        console.print(table)
        return 0
    out = Path(args.out) if args.out else Path("pinlab-sweeps") / sweep.name
    stderr = Console(stderr=True)
    progress = _progress_bar(stderr, args.quiet)
    with progress:
        task = progress.add_task(f"sweep {sweep.name}", total=len(sweep.points))

        def tick(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            outcome = run_sweep(
                sweep,
                out,
                jobs=args.jobs,
                dask=args.dask,
                max_points=args.max_points,
                progress=tick,
            )
        except ConfigError as e:
            raise UserError(str(e)) from None
        except PointError as e:
            if e.user:
                raise UserError(str(e)) from None
            stderr.print(f"pinlab: sweep point failed: {e}", markup=False, highlight=False)
            return 1
        except OSError as e:
            raise UserError(f"--out {out}: cannot write the sweep: {e.strerror or e}") from None
    if not args.quiet:
        state = "complete" if outcome.complete else "incomplete; run again to finish"
        console.print(
            f"{sweep.name}: {outcome.rows}/{outcome.total} points ({outcome.ran} run now, "
            f"{outcome.skipped} already done; {state}) -> {out}/results.parquet, "
            f"{out}/results.csv",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return 0


def _add_sweep_parser(sub: Any) -> None:
    sweep = sub.add_parser(
        "sweep",
        help="run a parameter sweep (factors x variants x seeds) into one table",
        description=(
            "Run every point of a sweep file on a local process pool (or a Dask cluster) and "
            "write DIR/results.parquet and DIR/results.csv, one row per point with the "
            "configuration as columns. Finished points are kept in DIR/points/: run again "
            "after an interruption and only the missing points run."
        ),
    )
    sweep.add_argument(
        "file", metavar="SWEEP.toml", help="a sweep file, e.g. examples/sweeps/pin-cap.toml"
    )
    sweep.add_argument(
        "--out", metavar="DIR", help="results directory (default pinlab-sweeps/<name>)"
    )
    sweep.add_argument(
        "--jobs", type=int, metavar="N", help="local worker processes (default: CPU count)"
    )
    sweep.add_argument(
        "--dask",
        metavar="local|ADDRESS",
        help="run on Dask distributed: 'local' starts a LocalCluster, else a scheduler address",
    )
    sweep.add_argument(
        "--max-points", type=int, metavar="N", help="run at most N unfinished points, then stop"
    )
    sweep.add_argument("--dry-run", action="store_true", help="list the points and exit")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    sweep.set_defaults(func=_cmd_sweep)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinlab",
        description="Who may pin dma-buf device memory, where, how much, and at what cost.",
    )
    parser.add_argument("--version", action="version", version=f"pinlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="walk through export, attach, pin, eviction and bufinfo")
    demo.add_argument("--profile", default=DEFAULT_PROFILE, choices=list(PRESETS))
    demo.add_argument(
        "--no-move-notify",
        action="store_true",
        help="leave CONFIG_DMABUF_MOVE_NOTIFY at its default (n)",
    )
    demo.set_defaults(func=_cmd_demo)

    profiles = sub.add_parser("profiles", help="list kernel profiles and their switches")
    profiles.set_defaults(func=_cmd_profiles)

    bufinfo = sub.add_parser("bufinfo", help="parse a debugfs dma_buf/bufinfo dump")
    bufinfo.add_argument("file", help="path to a bufinfo dump")
    bufinfo.set_defaults(func=_cmd_bufinfo)

    matrix = sub.add_parser(
        "matrix", help="every exporter x importer: where the memory ends up, P2P, K- items"
    )
    matrix.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help=f"kernel profile: {', '.join(PRESETS)} (default {DEFAULT_PROFILE})",
    )
    mn = matrix.add_mutually_exclusive_group()
    mn.add_argument(
        "--move-notify",
        dest="move_notify",
        action="store_const",
        const=True,
        default=None,
        help="only CONFIG_DMABUF_MOVE_NOTIFY=y (always on in 7.1)",
    )
    mn.add_argument(
        "--no-move-notify",
        dest="move_notify",
        action="store_const",
        const=False,
        help="only the Kconfig default, CONFIG_DMABUF_MOVE_NOTIFY=n",
    )
    matrix.add_argument("--json", action="store_true", help="machine-readable output")
    matrix.set_defaults(func=_cmd_matrix)

    policy = sub.add_parser("policy", help="administrator policy files (cgroups, rlimits)")
    policy_sub = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    show = policy_sub.add_parser(
        "show", help="the cgroup tree with its dmem limits, the users and the proposals on"
    )
    show.add_argument("file", help="a policy file (TOML), e.g. examples/policy/desktop.toml")
    show.set_defaults(func=_cmd_policy_show)
    check = policy_sub.add_parser("check", help="validate a policy file")
    check.add_argument("file", help="a policy file (TOML)")
    check.set_defaults(func=_cmd_policy_check)

    def _policy_help(args: argparse.Namespace, console: Console) -> int:
        policy.print_help()
        return 0

    policy.set_defaults(func=_policy_help)

    inspect = sub.add_parser(
        "inspect",
        help="read this host (RLIMIT_MEMLOCK, CAP_IPC_LOCK, cgroups, dmem, bufinfo, PCI) "
        "and write a platform file",
    )
    inspect.add_argument(
        "--root", default="/", metavar="DIR", help="read the host below DIR (default /)"
    )
    inspect.add_argument(
        "--out",
        default="pinlab-host.toml",
        metavar="FILE",
        help="platform file to write (default pinlab-host.toml), for pinlab run --platform",
    )
    inspect.add_argument("--json", action="store_true", help="machine-readable summary")
    inspect.set_defaults(func=_cmd_inspect)
    _add_run_parsers(sub)
    _add_sweep_parser(sub)
    _add_bench_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    console = Console()
    try:
        result: int = args.func(args, console)
    except UserError as e:
        # soft_wrap: the one-line error stays one line on narrow or non-terminal stderr
        Console(stderr=True, soft_wrap=True).print(
            f"pinlab: error: {e}", markup=False, highlight=False
        )
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
