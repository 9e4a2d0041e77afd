"""The metric catalog's lookups give what a regex of each entry and fnmatch over the whole
expansion give, without building either."""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Sequence

import pytest

from pinlab.scenarios.catalog import Catalog, MetricName
from pinlab.scenarios.config import load_scenario
from pinlab.scenarios.runner import build_simulation

_PLACEHOLDER = re.compile(r"<([A-Za-z]+)>")


def regex_lookup(catalog: Catalog, name: str) -> MetricName | None:
    """The definition: each entry as a regex (pieces escaped, a placeholder the alternation of
    its values, or any non-whitespace run when they are not known), first full match wins."""
    for entry in catalog.entries:
        out, pos = [], 0
        for m in _PLACEHOLDER.finditer(entry.name):
            out.append(re.escape(entry.name[pos : m.start()]))
            values = catalog.domains.get(m.group(1))
            out.append("(?:" + "|".join(map(re.escape, values)) + ")" if values else r"[^\s]+")
            pos = m.end()
        out.append(re.escape(entry.name[pos:]))
        if re.fullmatch("".join(out), name):
            return entry
    return None


def glob_matching(
    catalog: Catalog, pattern: str, links: Sequence[str] = ()
) -> list[tuple[str, MetricName]]:
    """The definition: fnmatch over every expanded name; a name with a placeholder known only
    after a run (a link key) matches when one of its fillings does -- each placeholder one to
    four characters of the pattern's own, "x" or "/", with a "/" and without "." or whitespace
    (Catalog.matching), or one of ``links``, which is enough to witness these patterns."""
    alphabet = sorted({c for c in pattern if c not in "*?[]!." and not c.isspace()} | {"x", "/"})
    fillings = [
        text
        for k in (1, 2, 3, 4)
        for p in itertools.product(alphabet, repeat=k)
        if "/" in (text := "".join(p))
    ] + list(links)
    out = []
    for n, e in catalog.expanded():
        parts = _PLACEHOLDER.split(n)  # pieces, then placeholder names, alternately
        free = [h for h in parts[1::2] if not catalog.domains.get(h)]
        if not free:
            if fnmatch.fnmatchcase(n, pattern):
                out.append((n, e))
            continue
        for combo in itertools.product(fillings, repeat=len(free)):
            filled = iter(combo)
            text = "".join(p if k % 2 == 0 else next(filled) for k, p in enumerate(parts))
            if fnmatch.fnmatchcase(text, pattern):
                out.append((n, e))
                break
    return out


def entry(name: str) -> MetricName:
    return MetricName(name, "count", "", "always")


SYNTHETIC = Catalog(
    (
        entry("a.<x><x>.z"),  # adjacent placeholders whose values share prefixes
        entry("a.<x>.<free>"),
        entry("b.<empty>.q"),  # no known values: free
        entry("c.<dot>.<x>"),  # values with regex specials
        entry("<x>"),
        entry("plain.name"),
    ),
    {"x": ("p", "pq", "pqr", ""), "free": None, "empty": (), "dot": ("1.5", "a|b", "(")},
)

NAMES = [
    "a.pqpq.z",
    "a.pqr.z",
    "a.ppqr.z",
    "a..z",
    "a.pqrs.z",
    "a.p.zz",
    "a.p.anything",
    "a.pq.x y",
    "a..q",
    "b.x.q",
    "b..q",
    "b.x y.q",
    "c.1.5.pq",
    "c.1x5.pq",
    "c.a|b.",
    "c.(.pqr",
    "c.a.p",
    "pq",
    "",
    "plain.name",
    "plain.names",
]


@pytest.mark.parametrize("name", NAMES)
def test_lookup_is_the_regex_of_each_entry(name: str) -> None:
    assert SYNTHETIC.lookup(name) == regex_lookup(SYNTHETIC, name)


@pytest.mark.parametrize(
    "pattern",
    ["a.*", "*.z", "a.p*.z", "*", "c.?.*", "[ab].*q", "plain.name", "a.p.?x", "b.[!q]*.q",
     "b.x.y.q", "a.pq.x/?", "b.*/*.q", "a.p.[xy]", "a.*.* *", "a.p.x[/]y", "b.?/?.q"],
)  # fmt: skip
def test_matching_is_fnmatch_over_the_expansion(pattern: str) -> None:
    assert SYNTHETIC.matching(pattern) == glob_matching(SYNTHETIC, pattern)


def test_a_cluster_catalog_agrees_with_the_definitions() -> None:
    cfg = load_scenario("cluster-128", sets=["platform.params.nodes=3"])
    catalog = cfg.catalog("no-limits")
    resolved = cfg.resolve("no-limits")
    sim, _ = build_simulation(resolved, cfg.platform_spec("no-limits"), cfg.source, None)
    links = list(sim.net.links)  # the keys a run reports its links under
    names = [n for n, _ in catalog.expanded()]
    probes = names + [n + "x" for n in names[::7]] + [n.replace("node", "node9") for n in names]
    probes += ["link.node0/nic0/out.bytes", "link.a b.bytes", "global.denials", "tenant.*"]
    assert [catalog.lookup(n) for n in probes] == [regex_lookup(catalog, n) for n in probes]
    for pattern in ["tenant.*.throughput", "device.*.vram.pinned_peak", "*.denied.*", "nic.*",
                    "link.node*/net:efa0/tx.utilisation", "link.*net:efa0*"]:  # fmt: skip
        found = catalog.matching(pattern)
        assert found, pattern
        assert found == glob_matching(catalog, pattern, links)


def test_a_name_with_its_words_in_another_order_is_suggested_first() -> None:
    """``frame_misses`` for ``missed_frames``: difflib alone ranks names that share letters
    (``frames``, ``framebuffers``) above it; the same words, reordered or inflected, come
    first, then difflib's."""
    catalog = load_scenario("desktop-pin-hog").catalog("none")
    message = catalog.unknown("tenant.compositor.frame_misses", "of variant none")
    assert "did you mean tenant.compositor.missed_frames or " in message
    message = catalog.unknown("tenant.compositor.byte", "of variant none")
    assert "did you mean tenant.compositor.bytes" in message
