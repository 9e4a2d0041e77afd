"""``pinlab advise``: a policy that meets the ``--protect`` expressions, searched, verified."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from rich.console import Console

from pinlab.cli.common import (
    UserError,
    add_command,
    add_out_flag,
    add_quiet_flag,
    add_scenario_arg,
    add_seed_flag,
    add_set_flag,
    add_workers,
    as_user_error,
    out_dir,
)
from pinlab.cli.run import run_points


def _positive(option: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UserError(f"{option}: expected a number >= 1, found {value}")


def _cmd_advise(args: argparse.Namespace, console: Console) -> int:
    """search the policy space for limits that meet --protect expressions

    Search RLIMIT_MEMLOCK per user, dmem.max/min/low per cgroup and the pin proposals with their
    caps for a policy under which every --protect expression holds on SCENARIO's variant (maximising
    --maximise); write DIR/policy.toml (run it with pinlab run SCENARIO --policy DIR/policy.toml),
    the evidence (points.csv, pareto.svg, advise.html) and a verification run of the policy. Exit
    status: 0 when the re-run policy meets every --protect, 1 when no point does (the closest is
    written), 2 for a user error (nothing written). See docs/advise.md."""
    from pinlab.advise import advise, prepare
    from pinlab.advise.output import maximised_text
    from pinlab.sweep import PointError
    from pinlab.sweep.spec import MAX_POINTS

    if not 1 <= args.budget <= MAX_POINTS:
        raise UserError(
            f"--budget: expected a number from 1 to {MAX_POINTS} (the policies run are one "
            f"sweep's points, and a sweep has at most {MAX_POINTS}), found {args.budget}"
        )
    _positive("--jobs", args.jobs)
    out = out_dir(args.out)
    with as_user_error():
        plan = prepare(
            args.scenario,
            args.protect or [],
            maximise=args.maximise,
            variant=args.variant,
            sets=args.set or [],
        )
    stderr = Console(stderr=True)
    search = partial(advise, plan, out, budget=args.budget, seed=args.seed)
    try:
        outcome = run_points(args, stderr, f"advise {plan.cfg.name}", args.budget, out, search)
    except PointError as e:
        stderr.print(f"pinlab: advise: a point failed: {e}", markup=False, highlight=False)
        return 1
    if not args.quiet:
        console.print(outcome.summary(), markup=False, highlight=False, soft_wrap=True)
        if outcome.verification is not None:
            _, verdict = outcome.verification
            for text, o in zip(plan.protections.texts, verdict.outcomes, strict=True):
                word = "held" if o.held else "FAILED"
                console.print(
                    f"  {word}: {text}: {o.text}", markup=False, highlight=False, soft_wrap=True
                )
        chosen = outcome.advice.recommended or outcome.advice.closest
        reached = maximised_text(plan.protections, chosen)
        if reached:
            term = plan.protections.objective
            assert term is not None
            what = "maximised" if outcome.advice.recommended is not None else "at the closest"
            console.print(
                f"  {what}: {term.text}: {reached}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        for b in outcome.advice.boundaries:
            console.print(f"  boundary {b.text()}", markup=False, highlight=False, soft_wrap=True)
        console.print(
            f"  evidence: {out / 'advise.html'}", markup=False, highlight=False, soft_wrap=True
        )
    return 0 if outcome.met else 1


def add_parsers(sub: Any) -> None:
    p = add_command(sub, "advise", _cmd_advise)
    add_scenario_arg(p)
    p.add_argument(
        "--protect",
        action="append",
        metavar="EXPR",
        help='an expectation that must hold, e.g. "tenant.compositor.denied.ENOMEM == 0" '
        "(repeatable; the string form of a [[claim.expect]], docs/advise.md)",
    )
    p.add_argument(
        "--maximise",
        metavar="METRIC",
        help="a metric (or fn(metric, ...)) to maximise among the policies that protect",
    )
    p.add_argument(
        "--variant", metavar="V", help="the variant whose policy is advised (default: the first)"
    )
    p.add_argument(
        "--budget", type=int, default=40, metavar="N", help="at most N policies run (default 40)"
    )
    add_seed_flag(p, "the optimiser's seed (default 1): same seed, same files", default=1)
    add_workers(p, dask="run the points on Dask distributed")
    add_set_flag(p, "override a scenario field for every point, e.g. --set scenario.duration=20s")
    add_out_flag(p, "where to write the advice", required=True)
    add_quiet_flag(p)
