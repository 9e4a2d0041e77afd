"""Every class of bad input gets one clear line, exit status 2, no traceback, and nothing
written (issue "Hardening", item 1). One parametrised case per class; each case writes its
file into an empty working directory, runs the CLI in-process there and checks that the
directory afterwards holds exactly the input files.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pinlab.cli import main
from pinlab.platform.presets import dump_platform, resolve_platform
from pinlab.scenarios.config import builtin_path

SCENARIO = builtin_path("desktop-pin-hog").read_text(encoding="utf-8")
POLICY = (Path(__file__).parents[1] / "examples/policy/desktop.toml").read_text(encoding="utf-8")
HOST_SMOKE = (Path(__file__).parents[1] / "examples/scenarios/host-smoke.toml").read_text(
    encoding="utf-8"
)
SWEEP = (Path(__file__).parents[1] / "examples/sweeps/pin-cap.toml").read_text(encoding="utf-8")
KV = builtin_path("odp-vs-pin").read_text(encoding="utf-8")
TABLE = (
    Path(__file__).parents[1] / "src/pinlab/validate/tables/gdrcopy-copylat-p100-pcie-write.toml"
).read_text(encoding="utf-8")
BAD_KERNEL = 'kernel = "9.9"\n' + dump_platform(
    resolve_platform("workstation").model_copy(update={"kernel": None})
)


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


@dataclass
class Case:
    """``files`` are written before the run (bytes or text); ``argv`` may name them."""

    argv: list[str]
    message: str  # a regex the one line must match
    files: dict[str, str | bytes] = field(default_factory=dict)


def scenario(old: str, new: str, *extra: str) -> Case:
    return Case(
        ["run", "s.toml", "--no-report", "--quiet", *extra],
        "",
        {"s.toml": edit(SCENARIO, old, new)},
    )


def kv_scenario(old: str, new: str) -> Case:
    return Case(["run", "s.toml", "--no-report", "--quiet"], "", {"s.toml": edit(KV, old, new)})


def policy(old: str, new: str) -> Case:
    return Case(["policy", "check", "p.toml"], "", {"p.toml": edit(POLICY, old, new)})


def sweep(old: str, new: str, *extra: str) -> Case:
    return Case(["sweep", "w.toml", "--dry-run", *extra], "", {"w.toml": edit(SWEEP, old, new)})


def expect(case: Case, message: str) -> Case:
    case.message = message
    return case


CASES: dict[str, Case] = {
    # -- files that cannot be read as text --------------------------------------------------
    "binary scenario": Case(
        ["run", "b.toml"],
        r"b\.toml: expected a scenario file in UTF-8",
        {"b.toml": b"\x7fELF\x02\x01\x01\x00\xff"},
    ),
    "utf-16 scenario": Case(
        ["run", "u.toml"],
        r"u\.toml: expected a scenario file in UTF-8, found UTF-16",
        {"u.toml": SCENARIO.encode("utf-16")},
    ),
    "utf-16 policy": Case(
        ["policy", "check", "u.toml"], r"found UTF-16 text", {"u.toml": POLICY.encode("utf-16")}
    ),
    "binary sweep": Case(
        ["sweep", "b.toml", "--dry-run"],
        r"b\.toml: expected a sweep file",
        {"b.toml": b"\x00\x01\x02"},
    ),
    "binary platform": Case(
        ["run", "desktop-pin-hog", "--platform", "b.toml"],
        r"b\.toml: expected a platform file",
        {"b.toml": b"\xff\xfe\xfd"},
    ),
    "NUL in a path": Case(["run", "a\x00b.toml"], r"NUL byte in the path"),
    "directory as a scenario": Case(["run", "d"], r"found a directory", {"d/x": "x"}),
    "directory as a policy": Case(["policy", "check", "d"], r"found a directory", {"d/x": "x"}),
    "path through a file": Case(["run", "f/x.toml"], r"f/x\.toml: expected", {"f": "x"}),
    "nesting thousands deep": Case(
        ["run", "n.toml"],
        r"nested at most 64 deep, found 5000",
        {"n.toml": "x = " + "[" * 5000 + "]" * 5000},
    ),
    "a TOML date where a time is expected": expect(
        scenario('duration = "120s"', "duration = 1979-05-27T07:32:00Z"),
        r"scenario\.duration: .*found the TOML date/time",
    ),
    "a TOML syntax error": expect(
        scenario("[scenario]", "[scenario"), r"s\.toml: line 4, column \d+: expected valid TOML"
    ),
    # -- numbers out of range ------------------------------------------------------------------
    "a size of 1e400": expect(
        scenario('framebuffer = "32MiB"', 'framebuffer = "1e400B"'), r"framebuffer: expected a size"
    ),
    "an exponent building a huge integer": expect(
        scenario('framebuffer = "32MiB"', 'framebuffer = "1e999999999B"'),
        r"framebuffer: expected a size",
    ),
    "a size above 2^64": expect(
        scenario('working_set = "3GiB"', 'working_set = "20EiB"'), r"working_set: expected a size"
    ),
    "a time of 1e400": expect(
        scenario('duration = "120s"', 'duration = "1e400s"'), r"scenario\.duration: expected a time"
    ),
    "a dmem.max of 2^64": expect(
        policy(
            '"dmem.max" = "drm/0000:03:00.0/vram 15GiB"',
            '"dmem.max" = "drm/0000:03:00.0/vram 18446744073709551616"',
        ),
        r"dmem\.max.*2\^64",
    ),
    "a memlock above RLIM_INFINITY": expect(
        policy('memlock = "64MiB"', "memlock = 18446744073709551616"), r"memlock: expected"
    ),
    "a negative seed in the file": expect(
        scenario("seed = 1", "seed = -1"),
        r"scenario\.seed: expected an integer seed from 0 to 2\^63-1, found -1$",
    ),
    "a sample interval longer than the run": expect(
        scenario("seed = 1", "seed = 1", "--set", "scenario.sample_interval=1h"),
        r"--set scenario\.sample_interval=1h: scenario\.sample_interval: expected at most the "
        r"duration \(.*\), found \"1h\"$",
    ),
    "a seed above 2^63-1 in the file": expect(
        scenario("seed = 1", "seed = 9223372036854775808"), r"scenario\.seed: expected"
    ),
    "a seed above 2^63-1 by --set": expect(
        scenario("seed = 1", "seed = 1", "--set", "scenario.seed=9223372036854775808"),
        r"scenario\.seed",
    ),
    "a seed out of range by --seed": expect(
        scenario("seed = 1", "seed = 1", "--seed", "-5"),
        r"^pinlab: error: run: --seed: expected a seed",
    ),
    "a seed out of range in a sweep": expect(
        sweep("seeds = [1, 2]", "seeds = [1, -2]"), r"sweep\.seeds"
    ),
    # -- type coercion -------------------------------------------------------------------------
    '"yes" for a boolean': expect(
        scenario("move_notify = true", 'move_notify = "yes"'),
        r"kernel\.move_notify: expected true or false",
    ),
    "a zero size": expect(
        scenario('framebuffer = "32MiB"', 'framebuffer = "0B"'),
        r"^pinlab: error: s\.toml: tenants\.compositor\.params\.framebuffer: expected a size "
        r'above 0, found "0B"$',
    ),
    "a negative size": expect(
        scenario('working_set = "3GiB"', 'working_set = "-3GiB"'), r"working_set: expected a size"
    ),
    "a zero period": expect(
        scenario('realloc_every = "500ms"', 'realloc_every = "0s"'),
        r"^pinlab: error: s\.toml: tenants\.compositor\.params\.realloc_every: expected a "
        r'time above 0, found "0s"$',
    ),
    "a zero message size": expect(
        kv_scenario('block = "64MiB"', 'block = "0B"'),
        r'params\.block: expected a size above 0, found "0B"$',
    ),
    "a message size that can never finish": expect(
        kv_scenario('block = "64MiB"', 'block = "1B"'),
        r"expected at most 1e\+07 workload iterations",
    ),
    "a zero frame rate": expect(scenario("fps = 60", "fps = 0"), r"fps: expected a number > 0"),
    # -- references ------------------------------------------------------------------------------
    "an unknown device": expect(
        scenario('working_set = "3GiB" }', 'working_set = "3GiB", device = "gpu7" }'),
        r"tenants\.app1\.params\.device: expected an exporting device of platform "
        r".*\(gpu0\), found \"gpu7\"",
    ),
    "an unknown NIC": expect(
        scenario('retry = "1s" }', 'retry = "1s", nic = "mlx5_9" }'),
        r"tenants\.hog\.params\.nic: expected an RDMA NIC",
    ),
    "an unknown NIC of a KV transfer": expect(
        kv_scenario('nic = "mlx5_0"', 'nic = "mlx5_7"'), r"params\.nic: expected an RDMA NIC"
    ),
    "an unknown display": expect(
        scenario("fps = 60,", 'fps = 60, display = "hdmi9",'),
        r"tenants\.compositor\.params\.display: expected a display engine",
    ),
    "an unknown domain": expect(
        scenario('working_set = "3GiB" }', 'working_set = "3GiB", domain = "lmem" }'),
        r"tenants\.app1\.params\.domain: expected a GEM domain of gpu0",
    ),
    "an unknown fault target": expect(
        scenario(
            "[variants.none]",
            '[[faults]]\nat = "1s"\nkind = "hot-unplug"\ntarget = "gpu9"\n\n[variants.none]',
        ),
        r"faults\[0\]\.target: expected a device",
    ),
    "a cgroup name with a newline": expect(
        policy('[cgroups."system.slice"]', '[cgroups."system\\nslice"]'), r"cgroups"
    ),
    "a raw newline in a --set value": expect(
        scenario(
            "seed = 1",
            "seed = 1",
            "--set",
            'scenario.name="a\nb"',
        ),
        r"--set scenario\.name=\"a\\nb\"",
    ),
    "a cgroup named like an interface file": expect(
        policy('[cgroups."system.slice"]', '[cgroups."cgroup.procs"]'), r"cgroups"
    ),
    # -- names that become paths ---------------------------------------------------------------
    "a scenario name with ..": expect(
        scenario('name = "desktop-pin-hog"', 'name = "../escape"'),
        r"scenario\.name: expected a name",
    ),
    "a scenario name with /": expect(
        scenario('name = "desktop-pin-hog"', 'name = "a/b"'), r"scenario\.name: expected a name"
    ),
    "an empty scenario name": expect(
        scenario('name = "desktop-pin-hog"', 'name = ""'), r"scenario\.name: expected a name"
    ),
    "a reserved scenario name": expect(
        scenario('name = "desktop-pin-hog"', 'name = "report.html"'),
        r"scenario\.name: expected a name that is not one of a run directory's files",
    ),
    "a variant name with ..": expect(
        scenario("[variants.none]", '[variants."../x"]'), r'variants\."\.\./x": expected a name'
    ),
    "a sweep name with /": expect(sweep('name = "pin-cap"', 'name = "../pin-cap"'), r"sweep\.name"),
    # -- work that can never finish -------------------------------------------------------------
    "a nanosecond sample interval": expect(
        scenario('sample_interval = "500ms"', 'sample_interval = "1ns"'),
        r"^pinlab: error: s\.toml: scenario\.sample_interval: expected at most 1000000 samples "
        r'per series \(duration / sample_interval\), found "120s" / "1ns" = 1\.2e\+11$',
    ),
    "a duration of 10^8 s": expect(
        scenario('duration = "120s"', 'duration = "100000000s"'), r"expected at most"
    ),
    "perftest iterations that can never finish": Case(
        ["bench", "perftest", "ib_write_bw", "-s", "65536", "-n", "99999999999999"],
        r"perftest: -n: expected at most 1e\+07 workload iterations in a run",
    ),
    # -- the command line -------------------------------------------------------------------------
    "an unknown option": Case(
        ["run", "--bogus"],
        r"^pinlab: error: run: expected the command's flags and arguments, found --bogus "
        r"\(see pinlab run --help\)$",
    ),
    "an unknown option of a nested subcommand": Case(
        ["scenarios", "show", "odp-vs-pin", "--bogus"],
        r"^pinlab: error: scenarios show: expected the command's flags and arguments, "
        r"found --bogus \(see pinlab scenarios show --help\)$",
    ),
    "an unknown subcommand": Case(
        ["frobnicate"], r"^pinlab: error: COMMAND: expected one of 'demo', .*, found 'frobnicate'"
    ),
    "--compare-profile equal to --profile": Case(
        ["run", "desktop-pin-hog", "--profile", "6.16", "--compare-profile", "6.16"],
        r"--compare-profile 6\.16: expected a profile other than",
    ),
    "--compare-profile without dmem": Case(
        ["run", "desktop-pin-hog", "--compare-profile", "5.16"],
        r"--compare-profile 5\.16: .*expected a kernel with the cgroup v2 dmem controller",
    ),
    "an unknown profile": Case(
        ["run", "desktop-pin-hog", "--profile", "9.9"], r"--profile: expected a kernel profile"
    ),
    "a --set without =": Case(["run", "desktop-pin-hog", "--set", "duration"], r"--set duration"),
    # a --set claim.* is named, not the scenario file it changes
    **{
        f"a --set {expr} of the claim": Case(["run", "odp-vs-pin", "--set", expr], message)
        for expr, message in (
            ("claim.bogus=1", r"^pinlab: error: --set claim\.bogus=1: claim\.bogus: unknown field"),
            (
                "claim.statement=3",
                r": --set claim\.statement=3: claim\.statement: expected a string",
            ),
            (
                "claim.expect=3",
                r": --set claim\.expect=3: claim\.expect: expected an array, found 3$",
            ),
            ("claim.show=[1]", r"\]: claim\.show\[0\]: expected a string or a table, found 1$"),
        )
    },
    "a platform file's unknown kernel, by --platform": Case(
        ["run", "examples/host-smoke.toml", "--platform", "p.toml", "--quiet", "--no-report"],
        r"^pinlab: error: \S*p\.toml: kernel: expected a kernel profile \(5\.16, .*found \"9\.9\"$",
        {"p.toml": BAD_KERNEL, "examples/host-smoke.toml": HOST_SMOKE},
    ),
    "a platform file's unknown kernel, by [platform] file": Case(
        ["run", "s.toml", "--quiet", "--no-report"],
        r"^pinlab: error: \S*p\.toml: kernel: expected a kernel profile",
        {
            "p.toml": BAD_KERNEL,
            "s.toml": edit(
                edit(KV, 'preset = "workstation"', 'file = "p.toml"#'),
                "params = { resizable_bar = true }",
                "",
            ),
        },
    ),
    # an --out that cannot be a directory is refused before any work (nothing made)
    "an empty --out": Case(
        ["run", "desktop-pin-hog", "--out", ""],
        r"^pinlab: error: --out: expected a directory, found an empty path$",
    ),
    "an --out through a file": Case(
        ["run", "desktop-pin-hog", "--out", "f.txt/run"],
        r"^pinlab: error: --out f\.txt/run: expected a directory, found a file at f\.txt$",
        {"f.txt": "x"},
    ),
    "an explore --out that is a file": Case(
        ["explore", "--out", "f.txt"],
        r"^pinlab: error: --out f\.txt: expected a directory, found a file$",
        {"f.txt": "x"},
    ),
    "an empty sweep --out": Case(
        ["sweep", "w.toml", "--out", ""],
        r"^pinlab: error: --out: expected a directory, found an empty path$",
        {"w.toml": SWEEP},
    ),
    "an advise --out that is a file": Case(
        ["advise", "desktop-pin-hog", "--protect", "x", "--out", "f.txt"],
        r"^pinlab: error: --out f\.txt: expected a directory, found a file$",
        {"f.txt": "x"},
    ),
    "a validate --out through a file": Case(
        ["validate", "--out", "f.txt/v"],
        r"^pinlab: error: --out f\.txt/v: expected a directory, found a file at f\.txt$",
        {"f.txt": "x"},
    ),
    "an --out with a NUL byte": Case(
        ["run", "desktop-pin-hog", "--out", "a\x00b"],
        r"^pinlab: error: --out a\\0b: expected a directory, found a NUL byte in the path$",
    ),
    "a scenario named robust, with --robust": Case(
        ["run", "s.toml", "--robust", "--out", "o", "--quiet"],
        r'^pinlab: error: --robust: s\.toml: scenario\.name: expected a name other than "robust" '
        r'\(the reruns are written to o/robust/\), found "robust"$',
        {"s.toml": edit(SCENARIO, 'name = "desktop-pin-hog"', 'name = "robust"')},
    ),
    "a bufinfo dump that is a directory": Case(
        ["bufinfo", "d"],
        r"^pinlab: error: d: expected a dma_buf/bufinfo dump, found a directory$",
        {"d/x": "x"},
    ),
    "a bufinfo dump that is no file": Case(
        ["bufinfo", "nothing.txt"],
        r"^pinlab: error: nothing\.txt: expected a dma_buf/bufinfo dump, found no such file$",
    ),
    "a --paste of a directory": Case(
        ["inspect", "--out", "o.toml", "--paste", "ulimit-l=d"],
        r"^pinlab: error: --paste ulimit-l=d: expected the output of ulimit -l, found a directory$",
        {"d/x": "x"},
    ),
    "a --paste of an empty path": Case(
        ["inspect", "--out", "o.toml", "--paste", "lsmod="],
        r"^pinlab: error: --paste lsmod=: expected the output of lsmod, found an empty path$",
    ),
    "a duration of 0": Case(
        ["run", "desktop-pin-hog", "--set", "duration=0s"],
        r"^pinlab: error: --set duration=0s: scenario\.duration: expected a time above 0, "
        r'found "0s"$',
    ),
    # an unknown field of a device patch or added device lists the device's fields
    **{
        f"an unknown field of {what}": Case(
            ["run", "cluster-128", "--set", f"platform.{key}"],
            rf"^pinlab: error: --set platform\.{re.escape(key)}: platform\.{where}\.bogus: "
            r"unknown field \(expected one of name, driver, parent, memory, .*\)",
        )
        for what, key, where in (
            ("a device patch", "devices.gaudi0.bogus=1", r"devices\.gaudi0"),
            ("the '*' device patch", 'devices."*".bogus=1', r'devices\."\*"'),
            (
                "an added device",
                'add_devices=[{name="x",driver="amdgpu",parent="rc0",memory="1GiB",bogus=1}]',
                r"add_devices\[0\]",
            ),
        )
    },
    # a size parameter's bound is worded as scenario.duration's, the value as written
    "a size parameter of zero by --set": Case(
        ["run", "cluster-128", "--set", 'tenants.trainer.params.size="0B"'],
        r'^pinlab: error: --set tenants\.trainer\.params\.size="0B": '
        r'tenants\.trainer\.params\.size: expected a size above 0, found "0B"$',
    ),
    # an error a --set causes is blamed on it: one in a table whose defining key it set, one
    # at a tenant it addressed by index or renamed
    **{
        f"a --set {what}": Case(["run", scenario_name, "--set", expr], message)
        for what, scenario_name, expr, message in (
            (
                "of a tenant's workload",
                "cluster-128",
                'tenants.trainer.workload="perftest"',
                r'^pinlab: error: --set tenants\.trainer\.workload="perftest": '
                r"tenants\.trainer\.params\.iterations: expected a number >= 5, found 3",
            ),
            (
                "of the platform preset",
                "desktop-pin-hog",
                'platform.preset="dl1"',
                r'^pinlab: error: --set platform\.preset="dl1": platform\.params\.resizable_bar: ',
            ),
            (
                "of a table with the platform preset",
                "desktop-pin-hog",
                'platform={preset="dl1"}',
                r'^pinlab: error: --set platform=\{preset="dl1"\}: '
                r"platform\.params\.resizable_bar: expected a parameter of preset 'dl1' ",
            ),
            (
                "that renames a tenant onto another's name",
                "desktop-pin-hog",
                'tenants.app1.name="app2"',
                r'^pinlab: error: --set tenants\.app1\.name="app2": tenants\.app2\.name: '
                r"expected a unique name, found 'app2' twice$",
            ),
            (
                "of a tenant by index",
                "desktop-pin-hog",
                'tenants.3.params.chunk="0B"',
                r'^pinlab: error: --set tenants\.3\.params\.chunk="0B": '
                r'tenants\.hog\.params\.chunk: expected a size above 0, found "0B"$',
            ),
        )
    },
    # a check that compares fields is blamed on a --set that changed any of them, the values
    # as written; of --sets that reach the field, the last (its value is the one there)
    **{
        f"a --set {what}": Case(["run", "desktop-pin-hog", "--no-report", *sets], message)
        for what, sets, message in (
            (
                "of a duration too long for the file's sample interval",
                ["--set", 'scenario.duration="100000h"'],
                r'^pinlab: error: --set scenario\.duration="100000h": scenario\.sample_interval: '
                r"expected at most 1000000 samples per series \(duration / sample_interval\), "
                r'found "100000h" / "500ms" = 7\.2e\+08$',
            ),
            (
                "of a duration whose workload iterations can never finish",
                ["--set", "duration=1000h", "--set", "sample_interval=1h"],
                r"^pinlab: error: --set duration=1000h: tenants\.compositor\.params: expected at "
                r"most 1e\+07 workload iterations in a run, found 2\.23e\+08 "
                r'\(compositor over "1000h"\)$',
            ),
            (
                "of a kernel profile without the dmem controller a variant's policy needs",
                ["--set", "kernel.profile=5.16"],
                r"^pinlab: error: --set kernel\.profile=5\.16: "
                r'policy\.cgroups\."user\.slice/user-1002\.slice"\."dmem\.max": expected a kernel '
                r"with the cgroup v2 dmem controller \(profiles 6\.14 and later\), found profile "
                r"5\.16, which has none$",
            ),
            (
                "of a fault's target after one of its faults table",
                [
                    "--set",
                    'faults=[{at="1s",kind="kill",target="x"}]',
                    "--set",
                    "faults.0.target=y",
                ],
                r"^pinlab: error: --set faults\.0\.target=y: faults\[0\]\.target: expected a "
                r"tenant \(app1, app2, compositor, hog\), found 'y'$",
            ),
            (
                "of a tenant's parameter after a table merged around it",
                ["--set", 'tenants.hog={start="3s"}', "--set", 'tenants.hog.params.chunk="0B"'],
                r'^pinlab: error: --set tenants\.hog\.params\.chunk="0B": '
                r'tenants\.hog\.params\.chunk: expected a size above 0, found "0B"$',
            ),
        )
    },
    "a sample_interval of 0 in the file": expect(
        scenario('sample_interval = "500ms"', 'sample_interval = "0ms"'),
        r"^pinlab: error: s\.toml: scenario\.sample_interval: expected a time above 0, "
        r'found "0s"$',
    ),
    # a point's scenario error is blamed on the sweep file's key that set the value
    "a fixed value the scenario refuses": expect(
        sweep('"scenario.duration" = "20s"', '"scenario.duration" = "0s"'),
        r'^pinlab: error: w\.toml: fixed\."scenario\.duration": scenario\.duration: expected '
        r'a time above 0, found "0s"$',
    ),
    "a factor value the scenario refuses": expect(
        sweep("[factors]\n", '[factors]\n"tenants.hog.params.chunk" = ["lots", "512MiB"]\n'),
        r'^pinlab: error: w\.toml: factors\."tenants\.hog\.params\.chunk": '
        r"tenants\.hog\.params\.chunk: expected a size .*\(at the point "
        r'tenants\.hog\.params\.chunk = "lots", variants\..*\)$',
    ),
    # inspect's three output files are checked before anything is written
    **{
        f"inspect {' '.join(flags)}": Case(
            ["inspect", "--paste", "uname-r=u.txt", *flags],
            message,
            {"u.txt": "6.8.0-40-generic\n", "f.txt": "x", "d/x": "x"},
        )
        for flags, message in (
            (["--out", ""], r"^pinlab: error: --out: expected a file, found an empty path$"),
            (["--out", "d"], r"^pinlab: error: --out d: expected a file, found a directory$"),
            (
                ["--out", "p.toml", "--snapshot", "f.txt/s.toml"],
                r"^pinlab: error: --snapshot f\.txt/s\.toml: expected a file in a directory, "
                r"found a file at f\.txt$",
            ),
            (
                ["--out", "p.toml", "--policy", "nodir/q.toml"],
                r"^pinlab: error: --policy nodir/q\.toml: expected a file in a directory, "
                r"found no such directory at nodir$",
            ),
            (
                ["--out", "p.toml", "--snapshot", "./p.toml"],
                r"^pinlab: error: --snapshot \./p\.toml: expected a file other than --out's, "
                r"found the same$",
            ),
            (
                ["--out", "p.toml", "--snapshot", ""],
                r"^pinlab: error: --snapshot: expected a file, found an empty path$",
            ),
        )
    },
    "an empty scenario argument to run": Case(
        ["run", "", "--out", "o"],
        r"^pinlab: error: \(empty path\): expected a built-in scenario \(.*\) or a scenario "
        r"file, found an empty name$",
    ),
    # an empty path is refused, never read as the current directory
    **{
        f"an empty path to {' '.join(a for a in argv[:2] if a)}": Case(argv, message)
        for argv, message in (
            (["sweep", ""], r"^pinlab: error: \(empty path\): expected a sweep file, found an "),
            (["doctor", ""], r"^pinlab: error: \(empty path\): expected a snapshot file, found "),
            (
                ["inspect", "--root", "", "--out", "x.toml"],
                r"^pinlab: error: --root: expected a directory \(a host's /\), found an empty "
                r"path$",
            ),
            (["doctor", "--root", ""], r"^pinlab: error: --root: expected a directory"),
            (
                ["run", "desktop-pin-hog", "--platform", ""],
                r"^pinlab: error: --platform: expected a platform file, found an empty path$",
            ),
            (
                ["run", "desktop-pin-hog", "--policy", ""],
                r"^pinlab: error: --policy: expected a policy file, found an empty path$",
            ),
            (
                ["validate", "--dir", ""],
                r"^pinlab: error: \(empty path\): expected a directory of validation tables, "
                r"found an empty path$",
            ),
        )
    },
    "a --policy that is a directory": Case(
        ["run", "desktop-pin-hog", "--policy", "d"],
        r"^pinlab: error: --policy d: expected a policy file, found a directory$",
        {"d/x": "x"},
    ),
    "a bench option after the tool": Case(
        ["bench", "perftest", "--platform", "cx-pair", "ib_write_bw"],
        r"^pinlab: error: bench: --platform: expected pinlab bench's options before TOOL "
        r"\(pinlab bench --platform \.\.\. perftest \.\.\.\), found it after$",
    ),
    "a bench option=value after the tool": Case(
        ["bench", "perftest", "--seed=3", "ib_write_bw"], r"^pinlab: error: bench: --seed: "
    ),
    "a matrix --proposal that is none": Case(
        ["matrix", "--proposal", "bogus"],
        r"^pinlab: error: --proposal: expected one of memlock-dmabuf-pins, .*, found 'bogus'$",
    ),
    "a matrix --profile that is none": Case(
        ["matrix", "--profile", "9.9"],
        r"^pinlab: error: --profile: expected a kernel profile \(5\.16, .*\), found '9\.9'$",
    ),
    "a claim column that is a number": expect(
        scenario("show = [\n", "show = [\n  1,\n"),
        r"^pinlab: error: s\.toml: claim\.show\[0\]: expected a string or a table, found 1$",
    ),
    # a [policy] whose cgroups or regions is no table is named, inline or by --policy
    "a [policy] cgroups that is a string": expect(
        kv_scenario("[[tenants]]", '[policy]\ncgroups = "x"\n\n[[tenants]]'),
        r'^pinlab: error: s\.toml: policy: cgroups: expected a table, found "x"$',
    ),
    "a [policy] regions that is a number": expect(
        kv_scenario("[[tenants]]", "[policy]\nregions = 5\n\n[[tenants]]"),
        r"^pinlab: error: s\.toml: policy: regions: expected a table, found 5$",
    ),
    # an error in a --policy file's field is blamed on it, not on the scenario it is merged into
    **{
        f"a --policy file whose {what}": Case(
            ["run", "desktop-pin-hog", "--policy", "p.toml", "--no-report", "--quiet"],
            message,
            {"p.toml": text},
        )
        for what, text, message in (
            (
                "cgroups is a list",
                "cgroups = [1]\n",
                r"^pinlab: error: --policy p\.toml: cgroups: expected a table, found \[1\]$",
            ),
            (
                "user's uid is a string",
                '[users.a]\nuid = "x"\n',
                r'^pinlab: error: --policy p\.toml: users\.a\.uid: expected an integer, found "x"$',
            ),
            (
                "memlock of the scenario's user is no size",
                '[users.mallory]\nuid = 1002\nmemlock = "lots"\n',
                r"^pinlab: error: --policy p\.toml: users\.mallory\.memlock: expected a size ",
            ),
            (
                "region is not on the machine",
                '[regions]\n"drm/0000:03:00.0/vram" = "16GiB"\n',
                r'^pinlab: error: --policy p\.toml: regions\."drm/0000:03:00\.0/vram": expected a '
                r"region registered on this machine \(drm/0000:01:00\.0/vram\), found ",
            ),
        )
    },
    # a driver option the driver's constructor does not take, or of the wrong type, is named
    # at its field: not a TypeError of the build naming only the preset, not "false" as true
    "an unknown driver option by --set": Case(
        ["run", "efa-gaudi", "--set", "platform.devices.gaudi0.driver_options={bogus=3}"],
        r"^pinlab: error: --set platform\.devices\.gaudi0\.driver_options=\{bogus=3\}: "
        r"platform\.devices\.gaudi0\.driver_options: expected an option of driver 'habanalabs' "
        r"\(dram_page_size, hbm_size\), found 'bogus'$",
    ),
    'a driver option "false" for a boolean': Case(
        ["run", "efa-gaudi", "--set", 'platform.nics.efa0.driver_options={rdma_write="false"}'],
        r"platform\.nics\.efa0\.driver_options\.rdma_write: expected true or false, "
        r"found 'false'$",
    ),
    "a driver option no file can give": Case(
        [
            "run",
            "desktop-pin-hog",
            "--set",
            "platform.devices.gpu0.driver_options={gfx_version=11}",
        ],
        r"platform\.devices\.gpu0\.driver_options: expected an option of driver 'amdgpu' "
        r"\(gtt_size, system_size, vram_size\), found 'gfx_version'$",
    ),
    "a negative driver option size": Case(
        ["run", "desktop-pin-hog", "--set", "platform.devices.gpu0.driver_options={vram_size=-5}"],
        r"platform\.devices\.gpu0\.driver_options\.vram_size: expected a whole number >= 0, "
        r"found -5$",
    ),
    "an unknown driver option in a platform file": Case(
        ["run", "examples/host-smoke.toml", "--platform", "p.toml", "--quiet", "--no-report"],
        r"^pinlab: error: \S*p\.toml: devices\[0\]\.driver_options: expected an option of "
        r"driver 'amdgpu' \(gtt_size, system_size, vram_size\), found 'strict_p2p'$",
        {
            "p.toml": edit(
                dump_platform(resolve_platform("workstation")),
                "[devices.driver_options]\n",
                "[devices.driver_options]\nstrict_p2p = true\n",
            ),
            "examples/host-smoke.toml": HOST_SMOKE,
        },
    ),
    # a count compared with inf held within any tolerance (0 == inf: HELD); nan never compares
    **{
        f"a claim value of {value} for a count": Case(
            ["run", "s.toml", "--no-report", "--quiet"],
            r"^pinlab: error: s\.toml: claim\.expect\[0\]\.value: global\.kernel_warnings is in "
            rf"count: expected a number \(a count\), found {re.escape(value)} \(not a finite "
            r"number\)$",
            {"s.toml": edit(HOST_SMOKE, "value = 0", f"value = {value}")},
        )
        for value in ("inf", "nan", '"1e400"')
    },
    # a claim field whose check has its own error type is named at the file's key, without
    # the union member's tag pydantic puts in its location (comparison)
    "a claim factor of inf": expect(
        kv_scenario('than = { variant = "pinned" }', 'than = { variant = "pinned", times = inf }'),
        r"^pinlab: error: s\.toml: claim\.expect\[4\]\.than\.times: expected a non-negative "
        r"factor like 7 or \"7x\", found inf \(not a finite number\)$",
    ),
    # a validation table's value of no scalar type is one error at its key, not one per
    # member of a union under pydantic's tags (compare.where.Test.str ... (and 3 more))
    "a validation table's where value that is a table": Case(
        ["validate", "--dir", "d", "--out", "o"],
        r"^pinlab: error: d/t\.toml: compare\.where\.Test: expected a string, a number or a "
        r"boolean, found \{\}$",
        {
            "d/t.toml": edit(
                TABLE, 'where = { Test = "gdr_copy_to_mapping" }', "where = { Test = {} }"
            )
        },
    ),
    # a size a driver refuses when the machine is built is named after the input that gave
    # it, not after the preset ("platform workstation: devices[0] (gpu0): ...")
    "a GTT size that is no multiple of the page, by --set": Case(
        ["run", "desktop-pin-hog", "--set", "platform.devices.gpu0.gtt=1e3", "--no-report"],
        r"^pinlab: error: --set platform\.devices\.gpu0\.gtt=1e3: platform\.devices\.gpu0: size "
        r"1000 is not a multiple of the granule 4096$",
    ),
    "a GTT size that is no multiple of the page, in a platform file": Case(
        ["run", "examples/host-smoke.toml", "--platform", "p.toml", "--quiet", "--no-report"],
        r"^pinlab: error: \S*p\.toml: devices\[0\] \(gpu0\): size 1000 is not a multiple of the "
        r"granule 4096$",
        {
            "p.toml": edit(
                dump_platform(resolve_platform("workstation")), 'gtt = "32GiB"', "gtt = 1000"
            ),
            "examples/host-smoke.toml": HOST_SMOKE,
        },
    ),
    # -- pasted command output (inspect --paste) ----------------------------------------------
    "a cpuinfo paste whose cpu family is not a number": Case(
        ["inspect", "--out", "o.toml", "--paste", "cpuinfo=c.txt"],
        r"^pinlab: error: c\.txt: cpuinfo: line 3: cpu family: expected a decimal CPU family "
        r'number 0 to 255 \(like 6 or 25\), found "abc"$',
        {"c.txt": "processor : 0\nvendor_id : GenuineIntel\ncpu family : abc\nmodel name : X\n"},
    ),
    "a cpuinfo paste whose cpu family is negative": Case(
        ["inspect", "--out", "o.toml", "--paste", "cpuinfo=c.txt"],
        r'c\.txt: cpuinfo: line 1: cpu family: expected .*, found "-25"$',
        {"c.txt": "cpu family : -25\n"},
    ),
    "a binary ulimit -l paste": Case(
        ["inspect", "--out", "o.toml", "--paste", "ulimit-l=b.bin"],
        r"^pinlab: error: b\.bin: ulimit -l: line 1: expected a number of KiB or 'unlimited', "
        r'found "[^\x00-\x1f\x7f]{1,200}" \(300 characters\)$',
        {"b.bin": bytes(range(1, 256)) + bytes(range(1, 46))},
    ),
    "a paste with C1 controls and line separators": Case(
        ["inspect", "--out", "o.toml", "--paste", "uname-r=u.txt"],
        r'u\.txt: uname -r: line 1: .*, found "x\\x9b\[31my\\u2028z"$',
        {"u.txt": "x\x9b[31my\u2028z\n".encode()},
    ),
}


def _snapshot(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    monkeypatch.chdir(tmp_path)
    for rel, data in case.files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data, encoding="utf-8")
    before = _snapshot(tmp_path)
    try:
        status = main(case.argv)
    except SystemExit as e:  # argparse errors leave through sys.exit
        status = int(e.code or 0)
    captured = capsys.readouterr()
    err = captured.err
    assert status == 2, (status, err, captured.out[-500:])
    assert err.count("\n") == 1, err
    assert "Traceback" not in err and "Traceback" not in captured.out
    assert err.startswith("pinlab: error: "), err
    assert re.search(case.message, err), err
    assert _snapshot(tmp_path) == before, "a bad input wrote something"


def test_every_class_of_the_issue_has_a_case() -> None:
    """The classes of issue "Hardening" item 1, each with at least one case above."""
    classes: dict[str, Callable[[str], bool]] = {
        "not UTF-8": lambda n: "binary" in n or "utf-16" in n,
        "NUL in a path": lambda n: "NUL" in n,
        "directory as a file": lambda n: "directory" in n,
        "nesting": lambda n: "nesting" in n,
        "dates": lambda n: "date" in n,
        "1e400": lambda n: "1e400" in n,
        "huge exponent": lambda n: "exponent" in n,
        "above 2^64": lambda n: "2^64" in n,
        "RLIMIT above RLIM_INFINITY": lambda n: "RLIM_INFINITY" in n,
        "seeds": lambda n: "seed" in n,
        "yes is not a boolean": lambda n: '"yes"' in n,
        "zero or negative": lambda n: "zero" in n or "negative" in n,
        "references": lambda n: "unknown device" in n or "unknown NIC" in n,
        "cgroup names": lambda n: "cgroup" in n,
        "names that become paths": lambda n: "name" in n,
        "unbounded work": lambda n: "sample" in n or "10^8" in n,
        "CLI": lambda n: "--compare-profile" in n or "option" in n,
    }
    for cls, matches in classes.items():
        assert any(matches(n) for n in CASES), cls


def test_a_broken_pipe_ends_quietly() -> None:
    """``pinlab matrix --json | head``: no traceback, status 0."""
    proc = subprocess.run(
        f"{sys.executable} -m pinlab.cli matrix --json | head -c 20",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.stdout and "Traceback" not in proc.stderr and proc.stderr == ""


def test_an_out_this_process_cannot_write_is_refused_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The nearest existing directory of --out must be writable (``access(2)``, which reports
    a read-only file system too); the test runs as root, so ``os.access`` stands in for it."""
    real = os.access
    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p).resolve() != ro and real(p, mode))
    monkeypatch.chdir(tmp_path)
    for out, found in (("ro", "found one this"), ("ro/new/run", "found ro, which this")):
        assert main(["run", "desktop-pin-hog", "--out", out]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"pinlab: error: --out {out}: expected a writable directory, {found} process "
            "cannot write\n"
        ), err
    assert list(ro.iterdir()) == []
