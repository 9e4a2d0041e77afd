"""``pinlab explore`` (issue 15, items 3 and 4): the search finds what it must, within a
bounded number of sequences (never a wall-clock bound), deterministically; every finding's
reproducer reproduces it; and a small CI-sized exploration finds no new model defect.

Known findings (``src/pinlab/explore/known_findings.toml``, ``docs/findings.md``): X-1, the
revocable pinned import that revokes itself inside its own ``dma_buf_pin`` (K-90, K-115,
K-117); X-2, the deliberately broken ``ignore_move_notify`` importer (K-39, K-41); X-3, the
same importer blocking a 7.1 revoke of vfio-pci's or the RDMA exporter's buffer for good (K-120).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pinlab.cli import main
from pinlab.drivers import EXPORTERS, IMPORTERS
from pinlab.drivers.rdma import RdmaDevice
from pinlab.explore import POLICIES, KnownFindings, Target, explore, importer_kinds, targets
from pinlab.explore.findings import CONTROL, KERNEL, MODEL, UNREVIEWED, classify
from pinlab.explore.invariants import Violation
from pinlab.explore.ops import Op
from pinlab.explore.render import as_dict
from pinlab.explore.run import Runner, shrink
from pinlab.explore.search import TIER_GROWTH, _lags
from pinlab.explore.target import exporter_kinds
from pinlab.kernel.profile import PRESETS
from tests.test_plugins import install, pinlab

SELF_REVOKE = "leak:dma_buf_detach:N unbalanced dma_buf_pin of <attachment efa1 (dynamic) on <obj>>"
REPRODUCERS = Path(__file__).parent / "reproducers"

# the bounds the search must stay within (sequences explored, not seconds): measured values
# are in docs/findings.md; the bounds leave room for changes of the alphabet
SELF_REVOKE_BOUND = 2000
CONTROL_BOUND = 1000
DEFAULT_CONTROL_STATES = 1600
"""Distinct states the default search (every exporter, importer, profile and policy; 1 571
targets) may explore before it meets the broken importer (measured: 1 254, at sequence 3 030)."""


def _run_script(source: str) -> tuple[int, str]:
    """Run a reproducer in-process: its exit status and what it printed."""
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(source, "<reproducer>", "exec"), {"__name__": "__main__"})
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def profile_71() -> object:
    """``pinlab explore --profiles 7.1`` (every exporter, importer and policy), bounded by
    sequences."""
    ok, skipped = targets(list(exporter_kinds()), list(importer_kinds()), ["7.1"], list(POLICIES))
    return explore(ok, budget=None, max_sequences=SELF_REVOKE_BOUND, skipped=skipped)


def test_self_revocation_found_unaided_under_7_1(profile_71: object) -> None:
    """Item 4: with no hint but the profile, the search meets the self-revocation leak (K-117)
    on amdgpu and shrinks it to create → evict → register: the eviction leaves the BO in GTT,
    the revocable pinned import's dma_buf_pin moves it back to VRAM, the move's invalidation
    reaches the import itself before ``pinned`` is set, map_pages fails with -EINVAL and the
    release path never unpins."""
    report = profile_71
    found = {(f.target.exporter, f.target.importer): f for f in report.findings}  # type: ignore[attr-defined]
    f = found[("amdgpu", "efa-revocable")]
    assert f.signature.startswith(SELF_REVOKE)
    assert f.found_at_sequence <= SELF_REVOKE_BOUND
    assert [str(op) for op in f.ops] == ["create(0)", "evict", "attach(0, 0)"]
    assert f.errors[-1] == "-EINVAL (ib_umem_dmabuf_map_pages)"
    assert f.classification == KERNEL and not f.blocking
    assert {"K-90", "K-117"} <= set(f.items)
    called = [c.kernel_function for c in f.calls]
    for fn in ("dma_buf_pin", "amdgpu_bo_pin", "ttm_bo_validate", "ib_umem_dmabuf_revoke_locked"):
        assert fn in called
    assert called.index("ib_umem_dmabuf_revoke_locked") > called.index("dma_buf_pin")


def test_every_finding_of_the_71_run_is_reviewed_and_reproduces(profile_71: object) -> None:
    """Every finding the 7.1 exploration makes is in the reviewed list, and its generated
    reproducer, run as a script, exits 1 printing the same violation."""
    for f in profile_71.findings:  # type: ignore[attr-defined]
        assert f.classification in (KERNEL, CONTROL), f.signature
        code, printed = _run_script(f.reproducer())
        assert code == 1, f.signature
        assert str(f.violations[0]) in printed


def test_broken_importer_control_found_within_a_few_hundred_sequences() -> None:
    """Item 4: the deliberately broken importer (mlx5 ``ignore_move_notify``, K-41 not done) is
    found: register (ODP faults the MR in), evict, NIC DMA through the stale translation."""
    ok, _ = targets(list(exporter_kinds()), ["mlx5-broken"], ["7.1"], ["none"])
    report = explore(ok, budget=None, max_sequences=CONTROL_BOUND)
    controls = [f for f in report.findings if f.target.exporter == "amdgpu"]
    assert controls, [f.signature for f in report.findings]
    f = controls[0]
    assert f.signature.startswith("stale-dma:mlx5_2:stale")
    assert f.found_at_sequence <= CONTROL_BOUND
    assert [str(op) for op in f.ops] == ["create(0)", "attach(0, 0)", "evict", "use(0, 0)"]
    assert f.classification == CONTROL and not f.blocking


def test_default_search_reaches_the_broken_importer_within_bounded_states() -> None:
    """Item 4, without any hint: the default selection -- every exporter × importer × profile
    × policy -- meets the broken-importer control (K-39, K-41 not done) within
    ``DEFAULT_CONTROL_STATES`` distinct states, because the dovetailed order takes the first
    tier (the first exporter against every importer, newest released kernel, no policy) deep
    while every other target still gets its short sequences first."""
    ok, skipped = targets(
        list(exporter_kinds()), list(importer_kinds()), list(PRESETS), list(POLICIES)
    )
    report = explore(ok, budget=None, max_sequences=4000, skipped=skipped)
    controls = [f for f in report.findings if f.target.importer == "mlx5-broken"]
    assert controls, [f.signature for f in report.findings]
    f = controls[0]
    assert f.classification == CONTROL
    assert f.found_at_states <= DEFAULT_CONTROL_STATES
    assert [str(op) for op in f.ops] == ["create(0)", "attach(0, 0)", "evict", "use(0, 0)"]
    assert not any(f.blocking for f in report.findings)


def test_order_upstream_newest_first_and_tiers_grow() -> None:
    """The exploration order (``targets``): no policy before the policies, the newest released
    kernel first and queued work after every release; tiers growing by ``TIER_GROWTH``, the
    first one the first exporter against every importer, each trailing the one before by a
    level, so that every target is begun within a handful of rounds."""
    ok, _ = targets(list(exporter_kinds()), list(importer_kinds()), list(PRESETS), list(POLICIES))
    released = [p for p, prof in PRESETS.items() if prof.released]
    newest = max(released, key=lambda p: PRESETS[p].version)
    first = ok[: len(importer_kinds())]
    assert {t.importer for t in first} == set(importer_kinds())
    assert {(t.exporter, t.profile, t.policy) for t in first} == {
        (next(iter(exporter_kinds())), newest, "none")
    }
    policies = [t.policy != "none" for t in ok]
    assert policies == sorted(policies)
    upstream = [t.profile for t in ok if t.policy == "none"]
    assert upstream.index(newest) == 0 and upstream[-1] != newest
    queued = [p for p in PRESETS if not PRESETS[p].released]
    assert all(upstream.index(q) > upstream.index(p) for q in queued for p in released)
    lags = _lags(ok)
    tier = len(importer_kinds())
    g = TIER_GROWTH
    head = [0] * tier + [1] * g * tier + [2] * g * g * tier
    assert [lags[t] for t in ok[: len(head)]] == head
    assert max(lags.values()) <= 5  # every target begun within a handful of rounds


def test_ci_budget_finds_no_new_model_defect() -> None:
    """The CI exploration: a few seconds' worth of sequences over every exporter × importer ×
    profile without policy and every policy under 7.1. Any finding that is a model defect or
    not in the reviewed list fails the suite (review it, fix pinlab or list it in
    known_findings.toml and docs/findings.md)."""
    upstream, skipped = targets(
        list(exporter_kinds()), list(importer_kinds()), ["6.12", "6.16", "7.1"], ["none"]
    )
    report = explore(upstream, depth=3, budget=None, max_sequences=1500, skipped=skipped)
    blocking = [f.signature for f in report.findings if f.blocking]
    assert not blocking, blocking
    assert report.stats.sequences == 1500


@pytest.mark.parametrize("script", sorted(REPRODUCERS.glob("*.py")), ids=lambda p: p.stem)
def test_checked_in_reproducers_still_reproduce(script: Path) -> None:
    """Every reviewed finding's reproducer (``tests/explore/reproducers``, written by
    ``pinlab explore --out``) still shows its violation, run as a separate Python process."""
    known = KnownFindings.load()
    ids = {k.id for k in known.entries}
    assert script.stem.split("-")[0].upper().replace("_", "-") in ids
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert any(f"{kind} in" in proc.stdout for kind in ("leak", "stale-dma", "hang"))


def test_findings_page_lists_every_checked_in_reproducer() -> None:
    """docs/findings.md names each finding's reproducer; the names are exactly the files the
    test above re-runs (nothing listed that is not run, nothing run that is not listed)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text("utf-8")
    listed = set(re.findall(r"tests/explore/reproducers/([\w.-]+\.py)", page))
    assert listed == {p.name for p in REPRODUCERS.glob("*.py")}


def test_ci_budget_on_the_newer_exporters_and_importers() -> None:
    """The CI exploration of the 6.19-and-later devices: vfio-pci's BAR exporter and the RDMA
    device-memory exporter against every importer, and every exporter into iommufd, under
    6.19, 7.1 and next without policy. The only findings are reviewed ones (the broken
    importer blocking a revoke for good, X-3: a negative control); a model defect or an
    unreviewed finding fails the suite."""
    kinds = exporter_kinds()
    newer = [n for n, k in kinds.items() if k.source != "gem"]
    ok, _ = targets(list(kinds), list(importer_kinds()), ["6.19", "7.1", "next"], ["none"])
    ok = [t for t in ok if t.exporter in newer or t.importer == "iommufd"]
    report = explore(ok, depth=4, budget=None, max_sequences=1500)
    blocking = [f.signature for f in report.findings if f.blocking]
    assert not blocking, blocking
    assert {f.known.id for f in report.findings if f.known is not None} <= {"X-3"}
    assert report.stats.sequences == 1500


def test_targets_come_from_the_driver_registries() -> None:
    """Every registered exporter driver is an exporter of the exploration, and so is every
    RDMA driver that declares device memory it exports (``<driver>-dm``); vfio-pci's buffers
    are BAR ranges, not GEM objects. Every registered importer is an importer of it."""
    kinds = exporter_kinds()
    assert set(EXPORTERS) <= set(kinds)
    rdma = {
        f"{n}-dm"
        for n, c in IMPORTERS.items()
        if issubclass(c, RdmaDevice) and c.exports_device_memory
    }
    assert rdma and set(kinds) == set(EXPORTERS) | rdma
    assert {k.source for n, k in kinds.items() if n in rdma} == {"rdma-dm"}
    sources = {n: k.source for n, k in kinds.items() if n in EXPORTERS}
    assert "vfio" in sources.values() and "gem" in sources.values()
    # every registered importer is reached: an RDMA driver through MRs on NICs of its own
    # (pinned, and ODP where the driver has it), the others as the matrix machine has them
    imps = importer_kinds()
    for name, cls in IMPORTERS.items():
        mine = [k for k in imps.values() if (k.nic.driver if k.nic else k.name) == name]
        assert mine, name
        if issubclass(cls, RdmaDevice):
            assert {k.odp for k in mine} >= {False} | ({True} if cls.supports_odp else set())
            assert len({k.device for k in mine}) == len(mine)


def test_a_plugin_rdma_driver_is_explored_as_importer_and_exporter(tmp_path: Path) -> None:
    """An installed plugin RDMA driver (an mlx5-like NIC under another name) gets its importer
    kinds and, since it exports device memory, its exporter, with no change to explore."""
    site = tmp_path / "site"
    install(
        site,
        "pinlab-clone",
        {"pinlab.importers": {"cx-clone": "pinlab_clone:Clone"}},
        "from pinlab.drivers.mlx5 import Mlx5Device\n\n\n"
        "class Clone(Mlx5Device):\n    'An mlx5-like NIC under another name.'\n",
    )
    argv = ["explore", "--exporters", "amdgpu,cx-clone-dm", "--importers"]
    argv += ["cx-clone-odp,cx-clone-pinned", "--profiles", "7.1", "--policies", "none"]
    done = pinlab(site, *argv, "--max-sequences", "300", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["targets"]) == 4 and data["stats"]["sequences"] == 300


def _outcome(target: Target, steps: list[str]) -> tuple[list[str | None], list[str], list[str]]:
    runner = Runner(target)
    ops = [_op(text) for text in steps]
    out = runner.run(ops)
    return out.errors, [str(v) for v in out.violations], [str(op) for op in out.enabled]


def _op(text: str) -> Op:
    kind, _, rest = text.partition("(")
    parts = [a.strip() for a in rest.rstrip(")").split(",") if a.strip()]
    return Op(kind, tuple(int(a) if a.isdigit() else a for a in parts))


def test_vfio_revoke_points_reach_the_iommufd_importer() -> None:
    """K-104, K-110: a VFIO BAR range mapped into p1's IOAS; clearing memory decoding revokes
    it, and the device's next DMA at that IOVA faults -- no stale access, nothing left at
    teardown. The VFIO events are in the alphabet (and the RFC revoke ioctl only in next)."""
    errors, violations, enabled = _outcome(
        Target("vfio-pci", "iommufd", "7.1"),
        ["create(0)", "send(0)", "attach(1, 0)", "use(1, 0)", "vfio(memory-off)", "use(1, 0)"],
    )
    assert errors[:5] == [None] * 5 and errors[5] == "-EFAULT (iommu_fault)"
    assert not violations
    assert {"vfio(memory-off)", "vfio(memory-on)", "vfio(reset)", "vfio_close"} <= set(enabled)
    assert "revoke(0)" not in enabled and "evict" not in enabled
    errors, violations, enabled = _outcome(
        Target("vfio-pci", "mlx5-odp", "next"),
        ["create(0)", "attach(0, 0)", "use(0, 0)", "revoke(0)", "use(0, 0)"],
    )
    assert errors[:4] == [None] * 4 and errors[4] == "-ENODEV (vfio_pci_dma_buf_map)"
    assert not violations


def test_rdma_exporter_revokes_on_mmap_entry_removal() -> None:
    """K-121, K-123: mlx5 device memory exported as a dma-buf and registered as an ODP MR on
    another NIC; ``ibv_free_dm`` removes the mmap entry, which revokes the dma-buf: the MR's
    next DMA cannot map it again (-ENODEV), and teardown finds the entry and MR gone."""
    errors, violations, enabled = _outcome(
        Target("mlx5-dm", "mlx5-odp", "7.1"),
        ["create(0)", "attach(0, 0)", "use(0, 0)", "free_dm(0)", "use(0, 0)"],
    )
    assert errors[:4] == [None] * 4 and errors[4] == "-ENODEV (uverbs_dmabuf_map)"
    assert not violations
    assert "exporter_reset" in enabled and "evict" not in enabled


def test_reproducer_directory_covers_every_reviewed_finding() -> None:
    stems = {p.stem.split("-")[0].upper().replace("_", "-") for p in REPRODUCERS.glob("*.py")}
    assert {k.id for k in KnownFindings.load().entries} <= stems


# -- the search itself ---------------------------------------------------------------------------


def test_same_seed_same_result_and_budget_only_cuts_the_order() -> None:
    """Determinism: the same seed and sequence budget give the same report; a larger budget
    explores a longer prefix of the same order, so what the smaller one found is found the same
    way (same sequence number, same shrunk steps)."""
    ok, _ = targets(["amdgpu", "apu"], ["efa-revocable", "mlx5-broken"], ["7.1"], ["none"])
    small = explore(ok, budget=None, max_sequences=250)
    again = explore(ok, budget=None, max_sequences=250)
    large = explore(ok, budget=None, max_sequences=600)
    assert as_dict(small, timing=False) == as_dict(again, timing=False)
    assert small.findings
    for a, b in zip(small.findings, large.findings, strict=False):
        assert (a.signature, a.found_at_sequence, a.ops) == (
            b.signature,
            b.found_at_sequence,
            b.ops,
        )
    assert len(large.findings) >= len(small.findings)
    shuffled = explore(ok, budget=None, max_sequences=600, seed=7)
    assert [str(t) for t in shuffled.targets] != [str(t) for t in large.targets]


def test_exhaustive_small_search_prunes_and_ends() -> None:
    """A depth-3 search of one target ends by itself (every state explored), and the state
    hashing and the commuting-order rule both pruned something."""
    report = explore([Target("habanalabs", "display", "7.1")], depth=3, budget=None)
    assert report.stats.depth_done == 3
    assert report.stats.revisits > 0 and report.stats.por_skipped > 0
    assert report.stats.sequences < 400


def test_commuting_operations() -> None:
    """Footprints: operations on different buffers' fds commute; anything that may move memory
    (create, register, evict) does not commute with another such operation."""
    alphabet = Runner(Target("amdgpu", "efa", "7.1")).alphabet
    send0, send1 = alphabet.step(Op("send", (0,))), alphabet.step(Op("send", (1,)))
    create1 = alphabet.step(Op("create", (1,)))
    attach0, evict = alphabet.step(Op("attach", (0, 0))), alphabet.step(Op("evict"))
    assert send0.independent(send1) and send0.independent(create1)
    assert not attach0.independent(create1) and not evict.independent(send0)


def test_shrinking_removes_what_does_not_matter() -> None:
    """ddmin: a padded self-revocation sequence shrinks to the three steps that matter."""
    runner = Runner(Target("amdgpu", "efa-revocable", "7.1"))
    padded = [
        Op("create", (0,)),
        Op("create", (1,)),
        Op("send", (1,)),
        Op("evict"),
        Op("close", (0, 1)),
        Op("attach", (0, 0)),
    ]
    out = runner.run(padded)
    assert out.signature is not None and out.signature.startswith(SELF_REVOKE)
    small = shrink(runner, padded, out.signature)
    assert [str(op) for op in small] == ["create(0)", "evict", "attach(0, 0)"]


def test_escaping_exception_is_a_model_defect() -> None:
    """A Python exception other than KernelError escaping a call is the model's fault: it is
    recorded as an ``escape`` violation and classified model defect without review."""
    runner = Runner(Target("amdgpu", "efa", "7.1"))
    ns = runner.namespace()
    check = ns["check"]
    with check.call("bad"):
        raise KeyError("no such thing")
    assert check.dead
    v = check.violations[0]
    assert v.kind == "escape" and "KeyError" in v.what
    assert classify(None, v) == MODEL
    assert classify(None, Violation("leak", "f", "x", 1)) == UNREVIEWED


def test_teardown_checks_everything_comes_back() -> None:
    """A clean sequence (create, register, use, kill) leaves nothing behind (K-47)."""
    runner = Runner(Target("amdgpu", "efa", "7.1", "device-pin-cap"))
    ops = [Op("create", (0,)), Op("attach", (0, 0)), Op("use", (0, 0)), Op("kill", (0,))]
    out = runner.run(ops)
    assert out.violations == [] and out.errors == [None, None, None, None]


# -- the command line ---------------------------------------------------------------------------


def test_cli_json_and_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explore", "--exporters", "amdgpu", "--importers", "efa-revocable", "--profiles"]
    argv += ["7.1", "--policies", "none", "--max-sequences", "150", "--json"]
    argv += ["--out", str(tmp_path)]
    assert main(argv) == 0  # the one finding is reviewed kernel behaviour: not blocking
    data = json.loads(capsys.readouterr().out)
    assert data["stats"]["sequences"] == 150
    assert [f["classification"] for f in data["findings"]] == [KERNEL]
    page = (tmp_path / "index.html").read_text()
    assert page.count("ib_umem_dmabuf_revoke_locked") >= 1
    # a pinlab page like the reports (it had a frame and style of its own)
    from tests.report.test_html import assert_ids_unique_and_resolved, assert_self_contained

    assert_self_contained(page)
    assert_ids_unique_and_resolved(page)
    code, printed = _run_script((tmp_path / "finding-1.py").read_text())
    assert code == 1 and "unbalanced dma_buf_pin" in printed


def test_cli_fails_on_a_finding_nobody_reviewed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What makes CI fail on a new finding: with the reviewed list empty, the self-revocation
    leak is unreviewed (treated as a model defect) and ``pinlab explore`` exits 1."""
    monkeypatch.setattr(KnownFindings, "load", classmethod(lambda cls, *a, **k: cls([])))
    argv = ["explore", "--exporters", "amdgpu", "--importers", "efa-revocable", "--profiles"]
    assert main([*argv, "7.1", "--policies", "none", "--max-sequences", "150", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [(f["classification"], f["blocking"]) for f in data["findings"]] == [(UNREVIEWED, True)]


def test_cli_text(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explore", "--exporters", "habanalabs", "--importers", "display", "--profiles"]
    assert main([*argv, "7.1", "--policies", "none", "--depth", "2"]) == 0
    out = capsys.readouterr().out
    assert "1 target(s)" in out and "no findings" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--importers", "nope"], "--importers: expected one of efa,"),
        (["--profiles", "9.9"], "--profiles: expected one of"),
        (["--budget", "0"], "expected a positive number of seconds"),
        (["--depth", "x"], "expected a positive integer"),
        (["--exporters", "xe", "--profiles", "5.16"], "no combination"),
    ],
)
def test_cli_bad_input_is_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["explore", *argv])
    except SystemExit as e:  # argparse's own errors
        code = int(e.code or 0)
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("seed", ["9223372036854775808", "99999999999999999999999", "-1"])
def test_a_seed_out_of_range_is_refused_as_run_and_bench_refuse_it(
    seed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """README "Guarantees": a seed is 0 … 2^63-1 wherever one can be given; explore took any
    integer (exit 0)."""
    with pytest.raises(SystemExit) as exited:  # argparse's own error
        main(["explore", "--seed", seed, "--max-sequences", "1", "--budget", "5"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        f"pinlab: error: explore: --seed: expected a seed from 0 to 2^63-1, found "
        f"'{seed}' (see pinlab explore --help)\n"
    )


def test_explore_checks_its_seed_as_the_api_does() -> None:
    from pinlab.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^seed: expected an integer seed from 0 to 2\^63-1"):
        explore([], seed=2**63)
    with pytest.raises(ConfigError, match=r"^seed: expected an integer seed"):
        explore([], seed=True)
