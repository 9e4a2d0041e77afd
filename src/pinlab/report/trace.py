"""``trace.json``: a run as Chrome trace-event JSON that ui.perfetto.dev loads (``cost-model.md``
§10, ``design.md`` "Outputs").

Tracks: one *process* per device, per NIC and per link (plus ``tenants`` for denials), with
*threads* per copy engine (``copy engine``), queue pair (``qp <tenant>``), DMA lane
(``dma <tenant>``) and ``odp faults``. Events:

* ``X`` complete slices from the recorder's trace log (:attr:`Recorder.slices`): copy jobs
  (category ``copy``), transfers (``transfer``) and ODP faults (``odp``). Slices of one thread
  that overlap without nesting go to extra lanes ``"<thread> #2"``, ``#3`` ... (interval
  colouring), so slices on one thread always nest or are disjoint (§10.3);
* ``C`` counters (``counter``): device pinned / used / free bytes per memory region, link
  utilisation per direction, from the recorder's series;
* ``i`` instants (``instant``): move_notify, evictions, denials (thread or process scope) and
  injected faults;
* ``s``/``t``/``f`` flow events (``flow``) joining the stages of one staged message;
* ``M`` metadata naming and ordering processes and threads (always kept).

Timestamps are integer nanoseconds of simulated time printed as microseconds. The output is
deterministic: ids follow sorted names, events are sorted, keys are sorted.

Size cap: when more than ``max_events`` events (metadata aside) would be written, a cluster
keeps every event of fewer nodes rather than coarse ones of all: as many nodes as fit beside
the run's own tracks, evenly spaced with the first and the last (at least those two), listed
in ``metadata.pinlab.nodes``; the other nodes' processes are left out, metadata included (at
4 096 nodes the names alone were ~600 000 events, and one point per track of every node left
nothing to read). Then, if still over, the finest-grained go first -- flow arrows, then
transfer slices (merged per thread into coarser slices carrying ``count`` and ``bytes``), ODP
faults, counters (decimated), copy slices, and finally instants (truncated) -- and
``metadata.pinlab.dropped`` says what was dropped. The result is always a complete, loadable
file.

A cluster's process names start with the node (:func:`~pinlab.sim.metrics.track_name`):
``node3/gpu0``, and ``link node3/pcie:gpu0`` for a link, whose slices and counters share it.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from pinlab import provenance
from pinlab.scenarios.result import RunResult
from pinlab.sim.metrics import (
    LINK_TRACK,
    Recorder,
    TraceSlice,
    split_name,
    track_name,
    track_node,
)

__all__ = ["CATEGORIES", "DEFAULT_MAX_EVENTS", "TRACE_FILE", "parse_categories", "trace_json"]

TRACE_FILE = "trace.json"
CATEGORIES = ("copy", "transfer", "odp", "counter", "instant", "flow")
DEFAULT_MAX_EVENTS = 200_000
MIN_NODES = 2
"""The fewest nodes a capped cluster trace keeps: its first and its last (size cap)."""

_KIND_ORDER = {"device": 0, "nic": 1, "link": 2, "tenants": 3}
_DEVICE_METRICS = ("pinned", "used", "free")
_NS = 1e9


def parse_categories(text: str) -> frozenset[str]:
    """``"copy,transfer"`` as a set of categories; ``ValueError`` naming the valid ones."""
    cats = {c.strip() for c in text.split(",") if c.strip()}
    bad = sorted(cats - set(CATEGORIES))
    if bad or not cats:
        what = ", ".join(repr(c) for c in bad) if bad else "none"
        raise ValueError(f"expected trace categories of {', '.join(CATEGORIES)}, found {what}")
    return frozenset(cats)


@dataclass(slots=True)
class _Slice:
    """A slice in integer nanoseconds, on its final lane."""

    process: str
    thread: str
    name: str
    cat: str
    start: int
    end: int
    args: dict[str, Any]
    flow: int | None


def _ns(t: float) -> int:
    return round(t * _NS)


def _us(ns: int) -> float:
    return ns / 1000.0


def _lanes(slices: Iterable[TraceSlice]) -> list[_Slice]:
    """Every slice on a lane of its thread on which it overlaps no other (greedy interval
    colouring in start order: the fewest lanes)."""
    by_thread: dict[tuple[str, str], list[_Slice]] = defaultdict(list)
    for r in slices:
        start = _ns(r.start)
        end = max(start, _ns(r.start + r.dur))
        by_thread[(r.process, r.thread)].append(
            _Slice(r.process, r.thread, r.name, r.cat, start, end, dict(r.args or {}), r.flow)
        )
    out: list[_Slice] = []
    for (_, thread), group in sorted(by_thread.items()):
        group.sort(key=lambda x: (x.start, -x.end, x.name))
        ends: list[int] = []
        for s in group:
            for k, end in enumerate(ends):
                if end <= s.start:
                    ends[k] = s.end
                    break
            else:
                k = len(ends)
                ends.append(s.end)
            if k:
                s.thread = f"{thread} #{k + 1}"
            out.append(s)
    return out


def _coarsen(slices: list[_Slice], cat: str, factor: int) -> list[_Slice]:
    """Merge every ``factor`` consecutive slices of category ``cat`` on one thread into one
    (``count`` and summed ``bytes`` in its args; flows dropped). Slices of a lane are
    disjoint, so the merged ones are too."""
    if factor <= 1:
        return slices
    keep = [s for s in slices if s.cat != cat]
    by_thread: dict[tuple[str, str], list[_Slice]] = defaultdict(list)
    for s in slices:
        if s.cat == cat:
            by_thread[(s.process, s.thread)].append(s)
    for (process, thread), group in sorted(by_thread.items()):
        group.sort(key=lambda x: (x.start, -x.end))
        for i in range(0, len(group), factor):
            part = group[i : i + factor]
            nbytes = sum(float(p.args.get("bytes", 0)) for p in part)
            names = sorted({p.name for p in part})
            name = names[0] if len(names) == 1 else f"{cat} x{len(part)}"
            keep.append(
                _Slice(
                    process,
                    thread,
                    name,
                    cat,
                    part[0].start,
                    max(p.end for p in part),
                    {"count": len(part), "bytes": nbytes, "aggregated": 1},
                    None,
                )
            )
    return keep


def _counters(rec: Recorder) -> list[tuple[str, str, str, int, float]]:
    """(process, counter name, arg key, t_ns, value) for every device region's pinned / used /
    free bytes (series ``device.<node>/<dev>.<region>.<quantity>``) and every link
    direction's utilisation (``link.<key>.utilisation``)."""
    out: list[tuple[str, str, str, int, float]] = []
    for key in sorted(rec.series):
        scope, entity, quantity = split_name(key)
        region, _, metric = quantity.rpartition(".")
        if scope == "device" and region and "." not in region and metric in _DEVICE_METRICS:
            node, _, dev = entity.partition("/")
            process, name, arg = track_name(node, dev), f"{region} bytes", metric
        elif scope == "link" and quantity == "utilisation" and "/" in entity:
            *link, direction = entity.split("/")
            if len(link) == 2:  # <node>/<link>
                process = track_name(link[0], f"{LINK_TRACK}{link[1]}")
            else:
                process = f"{LINK_TRACK}{'/'.join(link)}"
            name, arg = "utilisation", direction
        else:
            continue
        for t, v in rec.series[key].points:
            out.append((process, name, arg, _ns(t), float(v)))
    return out


def _merged_count(sizes: Counter[int], factor: int) -> int:
    """How many slices :func:`_coarsen` leaves of groups of these ``sizes`` (size -> how many
    groups): one per ``factor`` consecutive slices of a group."""
    return sum(count * -(-size // factor) for size, count in sizes.items())


def _decimated_count(lengths: Counter[int], factor: int) -> int:
    """How many points :func:`_decimate` keeps of tracks of these ``lengths`` (length -> how
    many tracks): every ``factor``-th point from the first, and the last when not among them."""
    return sum(
        count * (-(-n // factor) + (1 if (n - 1) % factor else 0)) for n, count in lengths.items()
    )


def _smallest_factor(count: Callable[[int], int], factor: int, limit: int, most: int) -> int:
    """The first of ``factor``, ``2 factor``, ``4 factor`` ... (capped at ``limit``) for which
    ``count(factor) <= most``, or ``limit``. The sizes alone decide how many a factor leaves, so
    the search builds nothing: a large cluster's counters (10^6 points on 10^5 tracks of a few
    points each) cannot come below a point or two per track, and building each candidate
    doubled the factor all the way to ``limit``, ~20 passes over every point."""
    while count(factor) > most and factor < limit:
        factor = min(limit, factor * 2)
    return factor


def _decimate(
    counters: list[tuple[str, str, str, int, float]], factor: int
) -> list[tuple[str, str, str, int, float]]:
    """Keep every ``factor``-th point of each counter track, and its last point."""
    if factor <= 1:
        return counters
    by_track: dict[tuple[str, str, str], list[tuple[str, str, str, int, float]]] = defaultdict(list)
    for c in counters:
        by_track[c[:3]].append(c)
    out: list[tuple[str, str, str, int, float]] = []
    for track in sorted(by_track):
        pts = by_track[track]
        kept = pts[::factor]
        if kept[-1] is not pts[-1]:
            kept.append(pts[-1])
        out.extend(kept)
    return out


def _instants(rec: Recorder) -> list[tuple[int, str, str | None, str, str]]:
    """(t_ns, process, thread, name, detail): the trace log's instants and injected faults."""
    out = [(_ns(i.t), i.process, i.thread, i.name, i.detail) for i in rec.instants]
    for t, kind, detail in rec.events:
        if kind == "fault":
            out.append((_ns(t), "tenants", None, "fault", detail))
    out.sort(key=lambda x: (x[0], x[1], x[2] or "", x[3], x[4]))
    return out


def _factor(n: int, excess: int) -> int:
    """The merge factor that takes ``n`` items down by about ``excess``."""
    target = max(1, n - excess)
    return max(2, math.ceil(n / target))


def _node_key(name: str) -> tuple[str | int, ...]:
    """Natural order of node names: ``node2`` before ``node10``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _spread(count: int) -> list[int]:
    """``0 .. count - 1`` in an order whose every prefix is spread over the range: the first
    and the last, then the midpoint of each gap, breadth first (:func:`_kept_nodes` counts
    how many nodes fit along it)."""
    if count <= 2:
        return list(range(count))
    order = [0, count - 1]
    gaps = deque([(0, count - 1)])
    while gaps:
        low, high = gaps.popleft()
        if high - low > 1:
            middle = (low + high) // 2
            order.append(middle)
            gaps.extend(((low, middle), (middle, high)))
    return order


def _evenly(count: int, k: int) -> list[int]:
    """``k`` of ``0 .. count - 1`` evenly spaced, the first and the last among them (exact
    integer rounding: the same picks on every machine)."""
    return [(i * (count - 1) + (k - 1) // 2) // (k - 1) for i in range(k)]


_RETRIES = 8  # evenly spaced selections tried below the estimate before the spread one


def _kept_nodes(per_process: Counter[str], budget: int) -> list[str] | None:
    """The nodes, in node order, a trace of ``per_process`` events (process -> count) keeps to
    fit in ``budget`` with the run's own tracks; None when it keeps them all.

    How many fit is counted along :func:`_spread` (a prefix sum: one pass). The nodes kept are
    then that many evenly spaced (every 4th, say), or one fewer ... when the nodes differ in
    size and those do not fit, at most :data:`_RETRIES` times, else the spread prefix itself.
    At least :data:`MIN_NODES` are kept, over the budget if need be (the size cap's later steps
    then coarsen them)."""
    per_node: Counter[str] = Counter()
    shared = 0
    for process, count in per_process.items():
        node = track_node(process)
        if node is None:
            shared += count
        else:
            per_node[node] += count
    names = sorted(per_node, key=_node_key)
    if len(names) <= MIN_NODES:
        return None
    total = shared
    prefix: list[int] = []
    for i in _spread(len(names)):
        size = per_node[names[i]]
        if len(prefix) >= MIN_NODES and total + size > budget:
            break
        total += size
        prefix.append(i)
    if len(prefix) == len(names):
        return None
    fits = len(prefix)
    for k in range(fits, max(MIN_NODES, fits - _RETRIES) - 1, -1):
        chosen = _evenly(len(names), k)
        if k == MIN_NODES or shared + sum(per_node[names[i]] for i in chosen) <= budget:
            return [names[i] for i in chosen]
    return [names[i] for i in sorted(prefix)]


def trace_json(
    result: RunResult,
    *,
    categories: Iterable[str] | None = None,
    max_events: int = DEFAULT_MAX_EVENTS,
) -> str:
    """``result``'s timeline as Chrome trace-event JSON (module docstring).

    ``categories`` limits the events to those categories (default: all of
    :data:`CATEGORIES`; metadata is always written); ``max_events`` caps the number of
    non-metadata events (the size cap).
    """
    cats = frozenset(CATEGORIES if categories is None else categories)
    unknown = sorted(cats - set(CATEGORIES))
    if unknown:
        raise ValueError(f"unknown trace category {', '.join(unknown)}")
    rec = result.recorder
    slices = _lanes(s for s in rec.slices if s.cat in cats)
    counters = _counters(rec) if "counter" in cats else []
    instants = _instants(rec) if "instant" in cats else []
    flows_on = "flow" in cats

    def n_flows() -> int:
        return sum(1 for s in slices if s.flow is not None) if flows_on else 0

    def total() -> int:
        return len(slices) + len(counters) + len(instants) + n_flows()

    dropped: list[str] = []
    budget = max(0, int(max_events))
    kept_nodes: list[str] | None = None
    if total() > budget:  # a cluster: every event of fewer nodes before coarser ones of all
        per_process = Counter(s.process for s in slices)
        if flows_on:
            per_process.update(s.process for s in slices if s.flow is not None)
        per_process.update(c[0] for c in counters)
        per_process.update(i[1] for i in instants)
        kept_nodes = _kept_nodes(per_process, budget)
    shown: Callable[[str], bool] = lambda _process: True  # noqa: E731
    if kept_nodes is not None:
        wanted = {*kept_nodes, None}
        visible = {p: track_node(p) in wanted for p in (*rec.processes, *per_process)}
        shown = visible.__getitem__
        before = total()
        slices = [s for s in slices if visible[s.process]]
        counters = [c for c in counters if visible[c[0]]]
        instants = [i for i in instants if visible[i[1]]]
        nodes = len({track_node(p) for p in visible} - {None})
        dropped.append(
            f"{before - total()} events of {nodes - len(kept_nodes)} nodes ({len(kept_nodes)} "
            f"of {nodes} kept, evenly spaced: metadata.pinlab.nodes)"
        )
    if total() > budget and n_flows():
        dropped.append(f"{n_flows()} flow events")
        flows_on = False
    for step in ("transfer", "odp", "counter", "copy"):
        excess = total() - budget
        if excess <= 0:
            break
        if step == "counter":
            if counters:
                before = len(counters)
                lengths = Counter(Counter(c[:3] for c in counters).values())
                f = _smallest_factor(
                    partial(_decimated_count, lengths),
                    _factor(before, excess),
                    before,
                    before - excess,
                )
                counters = _decimate(counters, f)
                dropped.append(f"counters decimated 1 in {f} ({before} -> {len(counters)})")
            continue
        groups = Counter((s.process, s.thread) for s in slices if s.cat == step)
        n = sum(groups.values())
        if not n:
            continue
        sizes = Counter(groups.values())  # the other slices stay: n - excess merged at most
        f = _smallest_factor(partial(_merged_count, sizes), _factor(n, excess), n, n - excess)
        coarse = _coarsen(slices, step, f)
        dropped.append(
            f"{step} slices merged per thread, {f} per slice "
            f"({n} -> {n - (len(slices) - len(coarse))})"
        )
        slices = coarse
    excess = total() - budget
    if excess > 0 and instants:
        keep = max(0, len(instants) - excess)
        dropped.append(f"instants truncated to the first {keep} of {len(instants)}")
        instants = instants[:keep]
    excess = total() - budget
    if excess > 0:  # one merged slice per thread and track still too many: drop the latest
        slices.sort(key=lambda s: (s.start, s.process, s.thread))
        keep = max(0, len(slices) - excess)
        dropped.append(f"slices truncated to the first {keep} of {len(slices)}")
        slices = slices[:keep]
        excess = total() - budget
        if excess > 0:
            keep = max(0, len(counters) - excess)
            dropped.append(f"counters truncated to {keep} of {len(counters)}")
            counters = sorted(counters, key=lambda c: c[3])[:keep]

    # -- ids ---------------------------------------------------------------------------------
    kinds: dict[str, str] = {p: kind for p, kind in rec.processes.items() if shown(p)}
    for s in slices:
        kinds.setdefault(s.process, "link" if s.process.startswith(LINK_TRACK) else "other")
    for c in counters:
        kinds.setdefault(c[0], "link" if c[0].startswith(LINK_TRACK) else "other")
    for i in instants:
        kinds.setdefault(i[1], "tenants" if i[1].endswith("tenants") else "other")
    order = sorted(kinds, key=lambda p: (_KIND_ORDER.get(kinds[p], 9), p))
    pid = {p: k + 1 for k, p in enumerate(order)}
    threads: dict[str, set[str]] = defaultdict(set)
    for s in slices:
        threads[s.process].add(s.thread)
    for i in instants:
        if i[2] is not None:
            threads[i[1]].add(i[2])
    tid: dict[tuple[str, str], int] = {}
    events: list[dict[str, Any]] = []
    for p in order:
        events.append({"ph": "M", "name": "process_name", "pid": pid[p], "args": {"name": p}})
        events.append(
            {"ph": "M", "name": "process_sort_index", "pid": pid[p], "args": {"sort_index": pid[p]}}
        )
        events.append(
            {"ph": "M", "name": "process_labels", "pid": pid[p], "args": {"labels": kinds[p]}}
        )
        for k, th in enumerate(sorted(threads.get(p, ())), start=1):
            tid[(p, th)] = k
            events.append(
                {"ph": "M", "name": "thread_name", "pid": pid[p], "tid": k, "args": {"name": th}}
            )
            events.append(
                {
                    "ph": "M",
                    "name": "thread_sort_index",
                    "pid": pid[p],
                    "tid": k,
                    "args": {"sort_index": k},
                }
            )

    body: list[dict[str, Any]] = []
    flow_members: dict[int, list[_Slice]] = defaultdict(list)
    for s in slices:
        body.append(
            {
                "ph": "X",
                "name": s.name,
                "cat": s.cat,
                "pid": pid[s.process],
                "tid": tid[(s.process, s.thread)],
                "ts": _us(s.start),
                "dur": _us(s.end - s.start),
                "args": s.args,
            }
        )
        if flows_on and s.flow is not None:
            flow_members[s.flow].append(s)
    for fid in sorted(flow_members):
        members = sorted(flow_members[fid], key=lambda s: (s.start, s.end))
        if len(members) < 2:
            continue
        for k, s in enumerate(members):
            ev: dict[str, Any] = {
                "ph": "s" if k == 0 else ("f" if k == len(members) - 1 else "t"),
                "name": "staged msg",
                "cat": "flow",
                "id": fid,
                "pid": pid[s.process],
                "tid": tid[(s.process, s.thread)],
                "ts": _us(s.start),
            }
            if k == len(members) - 1:
                ev["bp"] = "e"
            body.append(ev)
    for process, name, arg, t, v in counters:
        body.append(
            {"ph": "C", "name": name, "cat": "counter", "pid": pid[process], "ts": _us(t),
             "args": {arg: v}}
        )  # fmt: skip
    for t, process, thread, name, detail in instants:
        ev = {"ph": "i", "name": name, "cat": "instant", "pid": pid[process], "ts": _us(t)}
        if thread is None:
            ev.update(s="p", tid=0)
        else:
            ev.update(s="t", tid=tid[(process, thread)])
        if detail:
            ev["args"] = {"detail": detail}
        body.append(ev)
    phase = {"X": 0, "s": 1, "t": 2, "f": 3, "C": 4, "i": 5}
    body.sort(
        key=lambda e: (e["ts"], e["pid"], e.get("tid", 0), phase[e["ph"]], -e.get("dur", 0),
                       e["name"], json.dumps(e.get("args", {}), sort_keys=True))
    )  # fmt: skip
    events.extend(body)
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "metadata": {
            "pinlab": {
                "version": provenance.version(),
                "scenario": result.scenario,
                "variant": result.variant,
                "profile": result.profile,
                "seed": result.seed,
                "duration_s": result.duration,
                "categories": sorted(cats),
                "max_events": budget,
                "events": len(body),
                "dropped": dropped,
                **({} if kept_nodes is None else {"nodes": kept_nodes}),
            }
        },
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
