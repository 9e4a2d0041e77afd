"""The metric names a claim can use: every metric one variant of a scenario can report, known
before it runs (``pinlab metrics``, claim validation).

A :class:`Catalog` is made from a variant's resolved configuration and platform
(:func:`variant_catalog`): its tenants with their workloads' declared results, its devices,
NICs and nodes, and the run-wide counts -- all read from the declarations
(:data:`~pinlab.sim.metrics.TENANT_METRICS`, the workloads' ``metric()`` fields,
:mod:`pinlab.sim.collectors`, :data:`~pinlab.scenarios.metrics.GLOBAL_METRICS`). Names follow
``docs/metrics.md``. Where a part of a name is one of a known set, the catalog writes a
placeholder and knows the set: ``<node>`` (a cluster's nodes), ``<region>``
(:data:`~pinlab.sim.collectors.REGIONS`), ``<ERRNO>`` (the errnos the kernel model returns),
``<policy>`` (the policies that can refuse); ``<link>`` is the one part known only after a run
(a link is named by the topology and reported once it carried bytes).

A :class:`MetricName` says when it is reported (``reported``) and what an unreported one means
(``absent``: 0 for a count of something that never happened, None for "not known", e.g. a
setup time while the tenant is still in setup).
"""

from __future__ import annotations

import difflib
import fnmatch
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields

from pinlab.errors import str_argument
from pinlab.kernel.errno import Errno
from pinlab.platform.cluster import ClusterSpec
from pinlab.platform.presets import AnySpec
from pinlab.policy.proposals import PROPOSALS
from pinlab.scenarios.metrics import GLOBAL_METRICS
from pinlab.scenarios.schema import ResolvedScenario
from pinlab.sim.collectors import DEVICE_METRICS, LINK_METRICS, NIC_METRICS, REGION_METRICS, REGIONS
from pinlab.sim.metrics import SINGLE_NODE, TENANT_METRICS, MetricSpec
from pinlab.sim.workloads import WORKLOADS

__all__ = ["Catalog", "MetricName", "variant_catalog"]

_REFUSING_POLICIES = (*sorted(PROPOSALS), "dmem.max")
"""What ``denied_by.<policy>`` can name: a pin proposal, or the dmem controller's ``dmem.max``
(``pinlab.uapi.process`` names its refusals so)."""

_PLACEHOLDER = re.compile(r"<([A-Za-z]+)>")


@dataclass(frozen=True, slots=True)
class MetricName:
    """One metric (or family of metrics, with placeholders) a variant can report."""

    name: str
    unit: str
    description: str
    reported: str
    absent: float | None = None

    @property
    def scope(self) -> str:
        return self.name.partition(".")[0]

    def to_json(self) -> dict[str, object]:
        return asdict(self)


class _Shape:
    """An entry's name cut at its placeholders: the literal pieces and, between them, each
    placeholder's values (None: any run of non-whitespace characters, a placeholder whose
    values are known only after a run).

    It answers what a regex of the name would -- the pieces escaped, a placeholder as the
    alternation of its values -- without building one: such a regex holds every node name
    of a cluster, and compiling one per entry cost more than the simulation it was for (a
    regex per entry, each an alternation of 16 384 node names at 131 072 accelerators). A
    placeholder is matched by looking up the name's substrings of its values' lengths in the
    set of values, trying each that fits as the alternation would.
    """

    __slots__ = ("holes", "pieces")

    def __init__(self, name: str, domains: Mapping[str, _Values | None]) -> None:
        pieces, holes, pos = [], [], 0
        for m in _PLACEHOLDER.finditer(name):
            pieces.append(name[pos : m.start()])
            holes.append(domains.get(m.group(1)))
            pos = m.end()
        pieces.append(name[pos:])
        self.pieces: tuple[str, ...] = tuple(pieces)
        self.holes: tuple[_Values | None, ...] = tuple(holes)

    def fullmatch(self, name: str) -> bool:
        return self._fits(name, 0, 0)

    def _fits(self, name: str, i: int, pos: int) -> bool:
        piece = self.pieces[i]
        if not name.startswith(piece, pos):
            return False
        pos += len(piece)
        if i == len(self.holes):
            return pos == len(name)
        hole = self.holes[i]
        if hole is None:  # one or more non-whitespace characters (``[^\s]+``)
            end = pos
            while end < len(name) and not name[end].isspace():
                end += 1
            return any(self._fits(name, i + 1, e) for e in range(pos + 1, end + 1))
        return any(
            name[pos : pos + k] in hole.values and self._fits(name, i + 1, pos + k)
            for k in hole.lengths
        )

    def may_match(self, prefix: str, suffix: str) -> bool:
        """Whether some name of this shape can start with ``prefix`` and end with ``suffix``:
        every name starts with the first piece, followed by one of the first placeholder's
        values when they are known, and ends likewise with a value of the last one and the
        last piece."""
        first, last = self.pieces[0], self.pieces[-1]
        if not (prefix.startswith(first) or first.startswith(prefix)):
            return False
        if not (suffix.endswith(last) or last.endswith(suffix)):
            return False
        if not self.holes:
            return True
        head, tail = self.holes[0], self.holes[-1]
        if (
            head is not None
            and len(prefix) > len(first)
            and not any(_fit(prefix, first + v) for v in head.values)
        ):
            return False
        if tail is not None and len(suffix) > len(last):
            return any(_fit(suffix[::-1], (v + last)[::-1]) for v in tail.values)
        return True


def _fit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` agree as far as the shorter goes."""
    return a.startswith(b) or b.startswith(a)


class _Values:
    """A placeholder's values as a set, with their distinct lengths."""

    __slots__ = ("lengths", "values")

    def __init__(self, values: Sequence[str]) -> None:
        self.values = frozenset(values)
        self.lengths = tuple(sorted({len(v) for v in values}))


def _glob_ends(pattern: str) -> tuple[str, str]:
    """The literal text an fnmatch ``pattern`` starts and ends with: before its first and
    after its last special character (``*``, ``?``, ``[``, ``]``; all of it if none)."""
    specials = [i for i, c in enumerate(pattern) if c in "*?[]"]
    if not specials:
        return pattern, pattern
    return pattern[: specials[0]], pattern[specials[-1] + 1 :]


_STAR = "*"
_HOLE_CHARS = [chr(c) for c in range(33, 127) if chr(c) not in "./"]
"""What a link key holds besides its ``/``: no whitespace, no ``.`` (a metric's entity is one
dotted part, ``docs/metrics.md``)."""


def _glob_tokens(pattern: str) -> list[str | re.Pattern[str]]:
    """An fnmatch pattern as tokens: ``"*"``, or a one-character matcher (a compiled regex of
    ``?``, a ``[...]`` class or an escaped literal), split the way :func:`fnmatch.translate`
    reads it (a ``[`` without its ``]`` is a literal)."""
    tokens: list[str | re.Pattern[str]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if not tokens or tokens[-1] != _STAR:
                tokens.append(_STAR)
            i += 1
            continue
        end = i + 1
        if c == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "!":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            j = pattern.find("]", j)
            end = i + 1 if j < 0 else j + 1
        tokens.append(re.compile(fnmatch.translate(pattern[i:end])[4:-3], re.DOTALL))
        i = end
    return tokens


def _glob_meets(tokens: list[str | re.Pattern[str]], name: str) -> bool:
    """Whether some name of ``name``'s shape matches the fnmatch pattern of ``tokens``. Its
    placeholders are the one known only after a run, ``<link>``: a link key, ``<link>/<dir>``
    or ``<node>/<link>/<dir>`` -- :data:`_HOLE_CHARS` and at least one ``/`` -- so that
    ``link.node*/net:efa0/tx.utilisation`` meets ``link.<link>.utilisation`` and ``*.denied.*``
    does not. An intersection of two patterns, searched over (pattern token, name position,
    placeholder state: 0 outside, 1 inside before a ``/``, 2 after one)."""
    parts: list[str | None] = []  # the name's characters; None: a placeholder
    pos = 0
    for m in _PLACEHOLDER.finditer(name):
        parts.extend(name[pos : m.start()])
        parts.append(None)
        pos = m.end()
    parts.extend(name[pos:])
    seen: set[tuple[int, int, int]] = set()
    todo = [(0, 0, 0)]
    while todo:
        state = todo.pop()
        if state in seen:
            continue
        seen.add(state)
        i, j, hole = state
        if i == len(tokens) and j == len(parts) and not hole:
            return True
        if hole == 2:
            todo.append((i, j + 1, 0))  # the placeholder ends here
        if i < len(tokens) and tokens[i] == _STAR:
            todo.append((i + 1, j, hole))  # the star matches nothing more
            if j < len(parts) and parts[j] is None:  # it takes placeholder characters
                todo += [(i, j, max(hole, 1)), (i, j, 2)]
            elif j < len(parts) and not hole:
                todo.append((i, j + 1, 0))
        elif i < len(tokens) and j < len(parts):
            one = tokens[i]
            assert not isinstance(one, str)
            part = parts[j]
            if part is None:
                if one.fullmatch("/"):
                    todo.append((i + 1, j, 2))
                if any(one.fullmatch(c) for c in _HOLE_CHARS):
                    todo.append((i + 1, j, max(hole, 1)))
            elif not hole and one.fullmatch(part):
                todo.append((i + 1, j + 1, 0))
    return False


@dataclass(slots=True)
class Catalog:
    """The metric names of one variant; ``domains`` gives each placeholder's values (None:
    known only after a run).

    A cluster's catalog is large -- ``<node>`` takes every node's name -- so nothing here
    is linear in the whole expansion when it need not be: :meth:`lookup` matches each entry's
    :class:`_Shape`, :meth:`matching` expands only the entries whose literal start and end
    fit the pattern's, and :meth:`expanded` is built once, when asked for."""

    entries: tuple[MetricName, ...]
    domains: Mapping[str, tuple[str, ...] | None]
    _shapes: list[_Shape] = field(default_factory=list)
    _expanded: list[tuple[str, MetricName]] = field(default_factory=list)

    def _shaped(self) -> list[_Shape]:
        if not self._shapes:
            values = {k: _Values(v) if v else None for k, v in self.domains.items()}
            self._shapes = [_Shape(entry.name, values) for entry in self.entries]
        return self._shapes

    def lookup(self, name: str) -> MetricName | None:
        """The entry a concrete metric name belongs to, None if the variant cannot report it."""
        str_argument("name", name, "a metric's name")
        for shape, entry in zip(self._shaped(), self.entries, strict=True):
            if shape.fullmatch(name):
                return entry
        return None

    def _names(self, entry: MetricName) -> Iterator[str]:
        """The entry's name with its placeholders replaced by each combination of their
        known values (a placeholder known only after a run stays as written)."""
        holes = _PLACEHOLDER.findall(entry.name)
        choices = [self.domains.get(h) or (f"<{h}>",) for h in holes]
        for combo in itertools.product(*choices):
            name = entry.name
            for hole, value in zip(holes, combo, strict=True):
                name = name.replace(f"<{hole}>", value, 1)
            yield name

    def expanded(self) -> list[tuple[str, MetricName]]:
        """Every name with its placeholders replaced by each of their known values (a
        placeholder known only after a run stays as written)."""
        if not self._expanded:
            for entry in self.entries:
                self._expanded.extend((name, entry) for name in self._names(entry))
        return self._expanded

    def matching(self, pattern: str) -> list[tuple[str, MetricName]]:
        """The (expanded) names an fnmatch ``pattern`` matches (``tenant.*.throughput``), in
        :meth:`expanded`'s order. A name whose placeholder is known only after a run
        (``link.<link>.utilisation``) matches when some value of it would
        (``link.node*/net:efa0/tx.utilisation`` does): :func:`_glob_meets`."""
        str_argument("pattern", pattern, "an fnmatch pattern")
        match = re.compile(fnmatch.translate(pattern)).match  # what fnmatchcase compiles
        prefix, suffix = _glob_ends(pattern)
        tokens = _glob_tokens(pattern)
        out: list[tuple[str, MetricName]] = []
        for shape, entry in zip(self._shaped(), self.entries, strict=True):
            if not shape.may_match(prefix, suffix):
                continue
            if None in shape.holes:
                out.extend((n, entry) for n in self._names(entry) if _glob_meets(tokens, n))
            else:
                out.extend((n, entry) for n in self._names(entry) if match(n))
        return out

    def unknown(self, name: str, context: str) -> str:
        """The message for a name this catalog does not hold, naming what it does: close
        matches, then the quantities of the same entity, or the entities of the same scope."""
        names = [n for n, _ in self.expanded()]
        close = [*_same_words(name, names), *difflib.get_close_matches(name, names, cutoff=0.75)]
        close = list(dict.fromkeys(close))[:3]
        scope, _, rest = name.partition(".")
        entity = rest.partition(".")[0]
        prefix = f"{scope}.{entity}."
        same_entity = sorted(
            {prefix + e.name.split(".", 2)[-1] for n, e in self.expanded() if n.startswith(prefix)}
            if entity
            else set()
        )
        if same_entity and scope != "global":
            known = same_entity
        else:
            heads = {_head(e.name) for e in self.entries}
            known = sorted(h for h in heads if h.startswith(scope + ".")) or sorted(heads)
        text = f"expected a metric {context} ("
        if close:
            text += "did you mean " + " or ".join(close) + "? "
        shown = known[:40]
        text += "known: " + ", ".join(shown)
        if len(known) > len(shown):
            text += f", ... {len(known) - len(shown)} more"
        return text + f"; `pinlab metrics` lists them all), found {name!r}"


def _words(quantity: str) -> list[str]:
    """The words of a quantity's name, crudely stemmed and sorted, so that ``frame_misses``
    and ``missed_frames`` give the same list (``fram``, ``miss``)."""
    stems = []
    for word in quantity.split("_"):
        for suffix in ("es", "ed", "s"):  # one inflection, then a silent e: frames, frame
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        stems.append(word.removesuffix("e") if len(word) > 3 else word)
    return sorted(stems)


def _same_words(name: str, names: list[str]) -> list[str]:
    """The names that differ from ``name`` only in its last part's word order or endings
    (``tenant.compositor.frame_misses`` → ``tenant.compositor.missed_frames``), which
    ``difflib`` ranks below names that merely share letters."""
    head, _, quantity = name.rpartition(".")
    words = _words(quantity)
    return [
        n
        for n in names
        if n != name and n.rpartition(".")[0] == head and _words(n.rpartition(".")[2]) == words
    ][:3]


def _head(name: str) -> str:
    """``tenant.kv`` of ``tenant.kv.throughput``; ``global.leaks`` of itself."""
    scope, _, rest = name.partition(".")
    if scope == "global":
        return name
    return f"{scope}.{rest.partition('.')[0]}.*"


def _entries(prefix: str, specs: Iterable[MetricSpec], reported: str) -> list[MetricName]:
    return [
        MetricName(
            f"{prefix}.{s.name}",
            s.unit,
            s.description,
            "once it happened" if "<" in s.name else reported,
            s.absent,
        )
        for s in specs
    ]


def _workload_entries(prefix: str, workload: str) -> list[MetricName]:
    """A workload's result fields: known from its start (a default value) or once known (a
    default of None, e.g. a setup time)."""
    wd = WORKLOADS[workload]
    once = {f.name for f in fields(wd.result) if f.default is None}
    return [
        MetricName(
            f"{prefix}.{s.name}",
            s.unit,
            s.description,
            "once known" if s.name in once else "once the tenant started",
        )
        for s in wd.metrics()
    ]


def variant_catalog(cfg: ResolvedScenario, spec: AnySpec) -> Catalog:
    """Every metric variant ``cfg`` (on platform ``spec``) can report."""
    cluster = isinstance(spec, ClusterSpec)
    node_spec = spec.node if isinstance(spec, ClusterSpec) else spec
    nodes: tuple[str, ...] = spec.node_names() if isinstance(spec, ClusterSpec) else ()
    where = "<node>" if cluster else SINGLE_NODE
    out: list[MetricName] = []
    for t in cfg.active_tenants():
        name = f"{t.name}@<node>" if t.node == "*" else t.name
        prefix = f"tenant.{name}"
        out += _entries(prefix, TENANT_METRICS.values(), "always")
        out += _workload_entries(prefix, t.workload)
    for d in node_spec.devices:
        base = f"device.{where}/{d.name}"
        held = "if the device held memory"
        out += _entries(f"{base}.<region>", REGION_METRICS.values(), held)
        out += _entries(base, DEVICE_METRICS.values(), held)
    for n in node_spec.nics:
        out += _entries(
            f"nic.{where}/{n.name}", NIC_METRICS.values(), "if the NIC faulted or was reset"
        )
    out += _entries("link.<link>", LINK_METRICS.values(), "if the link carried bytes")
    out += _entries("global", GLOBAL_METRICS.values(), "always")
    domains: dict[str, tuple[str, ...] | None] = {
        "region": REGIONS,
        "ERRNO": tuple(e.name for e in Errno),
        "policy": _REFUSING_POLICIES,
        "link": None,
    }
    if cluster:
        domains["node"] = nodes
    return Catalog(tuple(out), domains)


def merged(catalogs: Mapping[str, Catalog]) -> list[tuple[MetricName, tuple[str, ...]]]:
    """Every entry of the variants' catalogs once, with the variants that have it (file
    order), for ``pinlab metrics``."""
    seen: dict[str, tuple[MetricName, list[str]]] = {}
    for variant, catalog in catalogs.items():
        for entry in catalog.entries:
            if entry.name not in seen:
                seen[entry.name] = (entry, [])
            seen[entry.name][1].append(variant)
    return [(entry, tuple(variants)) for entry, variants in seen.values()]


def tenant_of(name: str) -> str | None:
    """The tenant a ``tenant.<t>.*`` name is about (``trainer@node00``), None otherwise."""
    scope, _, rest = name.partition(".")
    return rest.partition(".")[0] if scope == "tenant" else None


def domain_text(domains: Mapping[str, Sequence[str] | None]) -> dict[str, str]:
    """Each placeholder's values as a short text (``node00..node15``)."""
    out = {}
    for key, values in domains.items():
        if values is None:
            out[key] = "known after a run"
        elif len(values) > 30:
            out[key] = f"{values[0]}..{values[-1]} ({len(values)})"
        else:
            out[key] = ", ".join(values)
    return out
