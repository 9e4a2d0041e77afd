"""trace.json: Chrome trace-event JSON of a run (pinlab.report.trace)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pinlab.cli import main
from pinlab.report.trace import CATEGORIES, parse_categories, trace_json
from pinlab.scenarios.result import RunResult
from pinlab.sim.metrics import Recorder

SCENARIO = "desktop-pin-hog"


def _run(out: Path, *extra: str) -> Path:
    rc = main(["run", SCENARIO, "--variant", "none", "--out", str(out), "--no-report", "--quiet",
               *extra])  # fmt: skip
    assert rc in (0, 1)
    return out / SCENARIO / "none"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("trace"))


def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((path / "trace.json").read_text(encoding="utf-8"))
    return doc


def _check_nesting(events: list[dict[str, Any]]) -> None:
    """On every (pid, tid), X slices sorted by start nest or are disjoint."""
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            assert e["dur"] >= 0
            by_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    eps = 1e-6
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[float] = []
        for start, end in spans:
            while stack and stack[-1] <= start + eps:
                stack.pop()
            if stack:
                assert end <= stack[-1] + eps, "partial overlap on one thread"
            stack.append(end)


def test_run_writes_loadable_trace(run_dir: Path) -> None:
    doc = _load(run_dir)
    assert doc["displayTimeUnit"] == "ms"
    events = doc["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert "gpu0" in names  # a device
    assert "mlx5_0" in names  # a NIC
    assert any(n.startswith("link ") for n in names)  # links
    phases = {e["ph"] for e in events}
    assert {"M", "X", "C", "i"} <= phases
    instants = {e["name"] for e in events if e["ph"] == "i"}
    assert "denial" in instants  # the compositor's -ENOMEM without limits
    assert "eviction" in instants and "move_notify" in instants
    counters = {(e["name"], k) for e in events if e["ph"] == "C" for k in e["args"]}
    assert ("vram bytes", "pinned") in counters
    assert ("vram bytes", "free") in counters
    assert any(name == "utilisation" for name, _ in counters)
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert "copy engine" in threads
    _check_nesting(events)
    assert doc["metadata"]["pinlab"]["dropped"] == []


def test_every_event_is_well_formed(run_dir: Path) -> None:
    for e in _load(run_dir)["traceEvents"]:
        assert isinstance(e["pid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], float) and e["ts"] >= 0
            assert e["cat"] in CATEGORIES
        if e["ph"] == "i":
            assert e["s"] in ("t", "p")


def test_category_filter(tmp_path: Path) -> None:
    doc = _load(_run(tmp_path, "--trace-filter", "copy,instant"))
    cats = {e["cat"] for e in doc["traceEvents"] if e["ph"] != "M"}
    assert cats == {"copy", "instant"}
    assert doc["metadata"]["pinlab"]["categories"] == ["copy", "instant"]


def test_bad_category_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", SCENARIO, "--trace-filter", "copy,bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--trace-filter: expected trace categories of copy, transfer, odp" in err
    assert err.rstrip().endswith("found 'bogus' (see pinlab run --help)"), err
    with pytest.raises(ValueError, match=r"found none$"):
        parse_categories("")


def test_size_cap_keeps_the_file_valid(tmp_path: Path) -> None:
    doc = _load(_run(tmp_path, "--trace-max-events", "500"))
    events = doc["traceEvents"]
    body = [e for e in events if e["ph"] != "M"]
    assert len(body) <= 500
    meta = doc["metadata"]["pinlab"]
    assert meta["dropped"] and meta["events"] == len(body)
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert {"gpu0", "mlx5_0"} <= names
    _check_nesting(events)
    # every tid used by an event is named
    named = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    for e in body:
        if e["ph"] in "Xstf" or (e["ph"] == "i" and e["s"] == "t"):
            assert (e["pid"], e["tid"]) in named


def test_tiny_cap(run_dir: Path) -> None:
    """Even a cap of a handful of events writes a complete file."""
    from pinlab.scenarios.config import load_scenario
    from pinlab.scenarios.runner import run_variant

    result: RunResult = run_variant(load_scenario(SCENARIO, sets=["scenario.duration=20s"]), "none")
    doc = json.loads(trace_json(result, max_events=3))
    assert len([e for e in doc["traceEvents"] if e["ph"] != "M"]) <= 3
    assert doc["metadata"]["pinlab"]["dropped"]
    assert trace_json(result) == trace_json(result)  # deterministic


def test_tracing_does_not_change_results(
    tmp_path: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Recorder, "tracing", False)
    off = _run(tmp_path / "off")
    for name in ("summary.json", "series.csv"):
        assert (off / name).read_bytes() == (run_dir / name).read_bytes()
    assert not [e for e in _load(off)["traceEvents"] if e["ph"] == "X"]
    again = _run(tmp_path / "again")
    monkeypatch.undo()
    assert (again / "summary.json").read_bytes() == (run_dir / "summary.json").read_bytes()


def test_trace_is_deterministic(tmp_path: Path, run_dir: Path) -> None:
    again = _run(tmp_path)
    assert (again / "trace.json").read_bytes() == (run_dir / "trace.json").read_bytes()


def test_staged_pipeline_stages_are_joined_by_flows() -> None:
    """Each chunk of an explicit staging pipeline: a copy slice on the Gaudi's DMA lane and a
    NIC slice on the tenant's queue pair, joined by one flow (s on the first, f with bp=e)."""
    from pinlab.kernel import get_profile
    from pinlab.platform.presets import PRESETS
    from pinlab.sim.engine import Simulation
    from pinlab.sim.workloads import KvTransferParams, spawn

    spec = PRESETS["dl1"](efa_behind_switch=True)
    cost: dict[str, object] = {"stage.mode": "pipeline"}
    sim = Simulation(spec, get_profile("5.16", pci_p2pdma=False), cost_overrides=cost, seed=1)
    params = KvTransferParams(
        device="gaudi0", buffer=64 << 20, block=16 << 20, produce=False, requests=1
    )
    spawn(sim, "kv", params, process_args={"memlock": 1 << 30})
    rec = sim.run(1.0)
    result = RunResult("t", "staged", "5.16", 1, 1.0, {}, {}, rec)
    doc = json.loads(trace_json(result))
    events = doc["traceEvents"]
    _check_nesting(events)
    pname = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    chunks = (16 << 20) // sim.node().machine.cost.stage.chunk
    assert len(starts) == len(ends) == chunks
    for fid, s in starts.items():
        f = ends[fid]
        assert f["bp"] == "e" and f["ts"] >= s["ts"]
        assert pname[s["pid"]] == "gaudi0" and pname[f["pid"]].startswith("efa")
    assert not [e for e in json.loads(trace_json(result, categories=["copy", "transfer"]))[
        "traceEvents"] if e["ph"] in "stf"]  # fmt: skip


def test_log_shares_equal_thread_names_and_args(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorder.log keeps one object per distinct thread name and argument set: equal ones
    are the first one logged, arguments of other types (4096 and 4096.0) stay apart, and
    past SHARED_ARGS distinct sets an entry keeps its own; trace.json is the same."""
    from pinlab.sim import metrics
    from pinlab.sim.metrics import TraceSlice

    def entry(thread_of: str, nbytes: float, location: str = "vram") -> TraceSlice:
        thread = "".join(["dma ", thread_of])  # a fresh string each time, as f-strings make
        args = {"bytes": nbytes, "location": location}
        return TraceSlice("gpu0", thread, "read", "transfer", 0, 1, args)

    rec = Recorder()
    made = [entry("a", 4096), entry("a", 4096), entry("a", 4096.0), entry("b", 4096, "gtt")]
    made += [entry("a", 0.0), entry("a", -0.0), entry("a", 0.0), entry("a", 1), entry("a", True)]
    fresh = [s.thread for s in made]
    assert fresh[0] is not fresh[1]
    for s in made:
        rec.log(s)
    first, second, as_float, other, zero, negative, zero_again, one, true = rec.slices
    assert zero_again.args is zero.args and negative.args is not zero.args
    assert true.args is not one.args  # 1 == True, but trace.json prints 1 and true
    assert second.thread is first.thread and second.args is first.args
    assert as_float.args is not first.args and as_float.args == {
        "bytes": 4096.0,
        "location": "vram",
    }
    assert first.args is not None and as_float.args is not None
    assert isinstance(as_float.args["bytes"], float) and isinstance(first.args["bytes"], int)
    assert other.thread == "dma b" and other.args == {"bytes": 4096, "location": "gtt"}

    monkeypatch.setattr(metrics, "SHARED_ARGS", 3)
    capped = Recorder()
    for n in (1, 2, 3, 4, 4, 1):
        capped.log(entry("a", n))
    args = [s.args for s in capped.slices]
    assert args[5] is args[0]  # shared
    assert args[4] is not args[3] and args[4] == args[3]  # the 4th set came after the cap

    # the trace written from shared entries is the one written from copies of them
    copies = Recorder()
    for s in rec.slices:
        copies.slices.append(TraceSlice(s.process, str(s.thread), s.name, s.cat, s.start, s.dur,
                                        dict(s.args or {})))  # fmt: skip

    def written(r: Recorder) -> str:
        return trace_json(RunResult("t", "shared", "5.16", 1, 1.0, {}, {}, r))

    assert written(rec) == written(copies)
    args = [e["args"] for e in json.loads(written(rec))["traceEvents"] if e["ph"] == "X"]
    printed = sorted(repr(a["bytes"]) for a in args)  # trace.json orders slices by track
    assert printed == sorted(["4096", "4096", "4096.0", "4096", "0.0", "-0.0", "0.0", "1", "True"])
    assert '"bytes":-0.0' in written(rec)


@given(
    st.lists(st.integers(1, 40), min_size=1, max_size=30),
    st.integers(2, 64),
    st.integers(1, 2000),
)
@example([4, 4], 2, 2)  # the first factor leaves exactly as many as may stay: it is the one
def test_the_cap_picks_its_factor_from_the_sizes_alone(
    lengths: list[int], factor: int, excess: int
) -> None:
    """The size cap's search for a decimation / merge factor counts what a factor would leave
    from the track and thread sizes (_decimated_count, _merged_count) instead of building each
    candidate: the counts are exactly what _decimate and _coarsen leave, and the factor found
    is the one doubling and building would have found."""
    from pinlab.report import trace as tr

    counters = [(f"p{k}", "c", "a", t, 0.0) for k, n in enumerate(lengths) for t in range(n)]
    slices = [
        tr._Slice(f"p{k}", "t", "x", "transfer", 2 * i, 2 * i + 1, {"bytes": 1}, None)
        for k, n in enumerate(lengths)
        for i in range(n)
    ]
    sizes = Counter(lengths)
    assert tr._decimated_count(sizes, factor) == len(tr._decimate(counters, factor))
    assert tr._merged_count(sizes, factor) == len(tr._coarsen(slices, "transfer", factor))

    total = len(counters)
    excess = min(excess, total)
    f = first = tr._factor(total, excess)
    built = tr._decimate(counters, f)
    while len(built) > total - excess and f < total:  # the search as it was: build each one
        f = min(total, f * 2)
        built = tr._decimate(counters, f)
    count = partial(tr._decimated_count, sizes)
    assert tr._smallest_factor(count, first, total, total - excess) == f


# -- clusters: process names and the size cap's node selection (cost-model.md §10) ----------


def test_a_cluster_links_slices_and_counters_share_one_process() -> None:
    """On a cluster node, ``Ctx.transfer``'s slice on a link and the link's utilisation
    counters are one trace process, ``link <node>/<link>`` (track_name), as on one node."""
    from pinlab.platform.presets import PRESETS
    from pinlab.platform.topology import LinkUse
    from pinlab.sim.engine import Ctx, Simulation
    from pinlab.sim.metrics import SINGLE_NODE, track_name, track_node

    sim = Simulation(PRESETS["cluster"](nodes=2), "6.16", seed=1, sample_interval=0.01)

    def move(ctx: Ctx) -> Any:
        yield from ctx.transfer(64 << 20, [LinkUse("pcie:gaudi0", "up")], label="push")

    sim.spawn("t", move, node="node1")
    result = RunResult("t", "cluster", "6.16", 1, 0.1, {}, {}, sim.run(0.1))
    events = json.loads(trace_json(result))["traceEvents"]
    pname = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    (push,) = [e for e in events if e["ph"] == "X" and e["name"] == "push"]
    assert pname[push["pid"]] == "link node1/pcie:gaudi0"
    up = [e["args"].get("up", 0) for e in events if e["ph"] == "C" and e["pid"] == push["pid"]]
    assert max(up) > 0  # the link's own utilisation, on the same track
    assert not [n for n in pname.values() if "/link " in n]
    for node, name, process in [
        ("node1", "link pcie:gaudi0", "link node1/pcie:gaudi0"),
        ("node1", "gaudi0", "node1/gaudi0"),
        (SINGLE_NODE, "link pcie:gpu0", "link pcie:gpu0"),
        (SINGLE_NODE, "gpu0", "gpu0"),
    ]:
        assert track_name(node, name) == process
        assert track_node(process) == (None if node == SINGLE_NODE else node)
    assert track_node("tenants") is None


@pytest.fixture(scope="module")
def cluster() -> RunResult:
    from pinlab.scenarios.config import load_scenario
    from pinlab.scenarios.runner import run_variant

    cfg = load_scenario("cluster-128", sets=["platform.params.nodes=8"])
    return run_variant(cfg, "no-limits")


def _by_node(doc: dict[str, Any]) -> dict[str | None, Counter[str]]:
    """Each node's non-metadata events (their JSON without pid and tid, as a multiset)."""
    from pinlab.sim.metrics import track_node

    events = doc["traceEvents"]
    pname = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    out: dict[str | None, Counter[str]] = defaultdict(Counter)
    for e in events:
        if e["ph"] != "M":
            rest = {k: v for k, v in e.items() if k not in ("pid", "tid")}
            rest["track"] = [pname[e["pid"]], tname.get((e["pid"], e.get("tid", 0)))]
            out[track_node(pname[e["pid"]])][json.dumps(rest, sort_keys=True)] += 1
    return out


def test_a_capped_cluster_trace_keeps_every_event_of_evenly_spaced_nodes(
    cluster: RunResult,
) -> None:
    """Over the cap, a cluster's trace keeps as many nodes as fit, evenly spaced with the
    first and the last, each with every event it has uncapped, and drops the other nodes'
    processes, metadata included; metadata.pinlab says which nodes and how many events."""
    full = json.loads(trace_json(cluster))
    assert full["metadata"]["pinlab"]["dropped"] == [] and "nodes" not in full["metadata"]["pinlab"]
    nodes = _by_node(full)
    assert sorted(n for n in nodes if n is not None) == [f"node{k}" for k in range(8)]
    per_node = max(sum(c.values()) for n, c in nodes.items() if n is not None)
    shared = sum(nodes.get(None, Counter()).values())
    budget = shared + 3 * per_node + per_node // 2  # room for three nodes, not four
    capped = json.loads(trace_json(cluster, max_events=budget))
    meta = capped["metadata"]["pinlab"]
    assert meta["nodes"] == ["node0", "node4", "node7"]
    assert len(meta["dropped"]) == 1 and "of 5 nodes (3 of 8 kept" in meta["dropped"][0]
    kept = _by_node(capped)
    assert set(kept) <= {"node0", "node4", "node7", None}
    for node in meta["nodes"]:
        assert kept[node] == nodes[node]  # every event, nothing coarsened
    assert meta["events"] == sum(sum(c.values()) for c in kept.values()) <= budget
    left_out = sum(sum(c.values()) for n, c in nodes.items() if n not in kept)
    assert meta["dropped"][0].startswith(f"{left_out} events of 5 nodes")
    names = [e["args"]["name"] for e in capped["traceEvents"] if e["name"] == "process_name"]
    assert {n.removeprefix("link ").partition("/")[0] for n in names} <= set(meta["nodes"])
    _check_nesting(capped["traceEvents"])


def test_a_cluster_trace_too_large_for_two_nodes_keeps_the_first_and_last(
    cluster: RunResult,
) -> None:
    """Below two nodes' worth the cap keeps the first and the last node and coarsens them."""
    doc = json.loads(trace_json(cluster, max_events=300))
    meta = doc["metadata"]["pinlab"]
    assert meta["nodes"] == ["node0", "node7"] and len(meta["dropped"]) > 1
    assert meta["events"] <= 300
    assert trace_json(cluster, max_events=300) == trace_json(cluster, max_events=300)


@given(st.integers(1, 300), st.data())
def test_node_selections_are_spread_over_the_nodes(count: int, data: st.DataObject) -> None:
    """_spread orders every node once, first and last first, each prefix spread over the range;
    _evenly picks k nodes with the first and the last and gaps within one of each other."""
    from pinlab.report import trace as tr

    order = tr._spread(count)
    assert sorted(order) == list(range(count)) and order[:2] == [0, count - 1][: min(count, 2)]
    if count > 2:
        k = data.draw(st.integers(2, count))
        picks = tr._evenly(count, k)
        gaps = [b - a for a, b in pairwise(picks)]
        assert len(picks) == k and picks[0] == 0 and picks[-1] == count - 1
        assert min(gaps) >= 1 and max(gaps) - min(gaps) <= 1
        # a prefix holding 2^L + 1 nodes holds the first L halvings: no gap over (n - 1) / 2^L
        prefix = sorted(order[:k])
        halvings = (k - 1).bit_length() - 1
        assert max(b - a for a, b in pairwise(prefix)) <= -(-(count - 1) >> halvings)
    assert tr._node_key("node2") < tr._node_key("node10") < tr._node_key("nodf1")
