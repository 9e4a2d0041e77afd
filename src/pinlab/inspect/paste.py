"""Snapshots from what users paste into bug reports.

:func:`snapshot_from_pastes` builds a :class:`~pinlab.inspect.snapshot.Snapshot` from any of

* ``lspci-tv`` -- ``lspci -tv`` (or ``-tvnn``): the tree, hence every function's parent
  (:func:`parse_lspci_tree`);
* ``lspci-vvv`` -- ``lspci -vvv`` (best with ``-nn`` and ``-D``): class, IDs, driver, NUMA node,
  IOMMU group, port type, ``LnkCap``, ``ACSCtl``, BAR sizes; the bridges' ``Bus: secondary=``
  give the tree when no ``-tv`` was pasted (:func:`parse_lspci_verbose`);
* ``nvidia-smi-topo`` -- ``nvidia-smi topo -m``: GPUs and NICs and their path types, from which
  a tree with the same path types is drawn (:mod:`pinlab.inspect.topo`);
* ``ulimit-l`` -- ``ulimit -l`` (KiB or ``unlimited``), or the ``max locked memory`` line of
  ``ulimit -a``; ``uname-r``; ``lsmod``; ``config`` (a kernel config); ``kallsyms``; ``cpuinfo``.

What surrounds the output in a bug report is dropped first, the same way for every kind
(:func:`pinlab.inspect.undecorate.undecorated`): Markdown code fences, the shell prompt line
that ran the command, ``...`` where the reporter cut lines, a ``> `` quote or an indent on every
line, and the title lines above the output; a prompt line that shows the output filtered
(``lsmod | grep nvidia``) is refused where an absent line would read as an absent module or
device. Every parser raises :class:`~pinlab.errors.ConfigError` for text it cannot read, one
line naming the paste, the line of the file as pasted and what was expected. Formats:
``field-cases.md`` Part B. Vendor and class are taken from ``[vvvv:dddd]`` / ``[cccc]`` when
``-nn`` was given, else from the vendor's name (:data:`VENDOR_NAMES`) -- a guess the snapshot's
notes record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pinlab.errors import ConfigError, show_value
from pinlab.inspect.cpu import _parse_cpuinfo, parse_lscpu
from pinlab.inspect.kernelinfo import (
    CONFIG_OPTIONS,
    KALLSYMS_ANCHORS,
    kallsyms_is_whole,
    parse_kallsyms,
    parse_kernel_config,
    parse_modules,
)
from pinlab.inspect.pci import PciFunction, _structural_types
from pinlab.inspect.snapshot import (
    SNAPSHOT_VERSION,
    CpuFacts,
    KernelFacts,
    LimitFacts,
    Snapshot,
)
from pinlab.inspect.topo import parse_topo_matrix, topo_functions
from pinlab.inspect.undecorate import Command, parse_undecorated
from pinlab.units import KiB

__all__ = [
    "PASTE_KINDS",
    "VENDOR_NAMES",
    "parse_cpu_paste",
    "parse_lsmod_paste",
    "parse_lspci_tree",
    "parse_lspci_verbose",
    "parse_ulimit",
    "parse_uname",
    "snapshot_from_pastes",
]

PASTE_KINDS = {
    "lspci-tv": "lspci -tv",
    "lspci-vvv": "lspci -vvv",
    "nvidia-smi-topo": "nvidia-smi topo -m",
    "ulimit-l": "ulimit -l",
    "uname-r": "uname -r",
    "lsmod": "lsmod",
    "config": "config",
    "kallsyms": "kallsyms",
    "cpuinfo": "cpuinfo",
}
"""The kinds of paste ``--paste KIND=FILE`` takes, each with how an error names it (the
command that printed it)."""

VENDOR_NAMES = (
    ("[AMD/ATI]", 0x1002),
    ("Advanced Micro Devices", 0x1022),
    ("NVIDIA", 0x10DE),
    ("Mellanox", 0x15B3),
    ("Intel", 0x8086),
    ("Habana", 0x1DA3),
    ("Amazon", 0x1D0F),
    ("Broadcom / LSI", 0x1000),
    ("PLX", 0x10B5),
    ("Broadcom", 0x14E4),
)
"""Vendor names as ``lspci`` prints them (pci.ids) → vendor ID, most specific first."""

_CLASS_NAMES = {
    "host bridge": 0x060000,
    "pci bridge": 0x060400,
    "vga compatible controller": 0x030000,
    "3d controller": 0x030200,
    "display controller": 0x038000,
    "ethernet controller": 0x020000,
    "infiniband controller": 0x020700,
    "network controller": 0x028000,
    "processing accelerators": 0x120000,
    "audio device": 0x040300,
    "usb controller": 0x0C0330,
    "non-volatile memory controller": 0x010802,
}
_PORT_TYPES = {
    "root port": "root_port",
    "upstream port": "upstream",
    "downstream port": "downstream",
    "endpoint": "endpoint",
    "legacy endpoint": "legacy_endpoint",
    "root complex integrated endpoint": "rciep",
}
_ACS_BITS = (
    "SrcValid",
    "TransBlk",
    "ReqRedir",
    "CmpltRedir",
    "UpstreamFwd",
    "EgressCtrl",
    "DirectTrans",
)


def _fail(source: str, where: str, message: str) -> ConfigError:
    return ConfigError(source, where, message)


def _vendor(name: str) -> int:
    for word, vid in VENDOR_NAMES:
        if word.lower() in name.lower():
            return vid
    return 0


def _ids(name: str) -> tuple[int, int] | None:
    m = re.search(r"\[([0-9a-f]{4}):([0-9a-f]{4})\](?!.*\[[0-9a-f]{4}:[0-9a-f]{4}\])", name)
    return (int(m[1], 16), int(m[2], 16)) if m else None


def _class_of_name(name: str, vendor: int, bridge: bool, on_root: bool) -> int:
    """A class guessed from an ``lspci -tv`` name (the tree prints no class)."""
    low = name.lower()
    if bridge:
        return 0x060400
    if on_root and ("root complex" in low or "host bridge" in low):
        return 0x060000
    if "audio" in low or "usb" in low or "smbus" in low or "sata" in low:
        return 0x0C0500
    if "nvme" in low or "ssd" in low:
        return 0x010802
    if vendor in (0x15B3, 0x1D0F) or "ethernet" in low or "connectx" in low:
        return 0x020000
    if vendor == 0x1DA3:
        return 0x120000
    if vendor in (0x10DE, 0x1002) or "graphics" in low or "gpu" in low:
        return 0x030200
    return 0x088000


# -- what surrounds a paste (pinlab.inspect.undecorate) ---------------------------------------

_PROMPTS = {
    "lspci-tv": r"lspci",
    "lspci-vvv": r"lspci",
    "nvidia-smi-topo": r"nvidia-smi",
    "lsmod": r"lsmod|cat\s+/proc/modules",
    "uname-r": r"uname",
    "ulimit-l": r"ulimit",
    "config": r"(?:z?cat|z?grep|less|head)\s+.*config",
    "kallsyms": r"(?:cat|z?grep|less|head)\s+.*kallsyms",
    "cpuinfo": r"lscpu|(?:cat|grep|less|head)\s+.*cpuinfo",
}
"""The command that printed each kind, as a reporter's prompt line shows it (a regex)."""

_WHOLE_OUTPUT = {
    "lspci-tv": "a device it leaves out would read as absent",
    "lspci-vvv": "a device it leaves out would read as absent",
    "nvidia-smi-topo": "a device it leaves out would read as absent",
    "lsmod": "a module it leaves out would read as not loaded",
}
"""Kinds whose every absent line means something, and what: a filtered paste of them is
refused, not read as the whole."""

_SELECTS = {
    "lspci-tv": r"(?<!\S)-[A-Za-z]*[sd]",
    "lspci-vvv": r"(?<!\S)-[A-Za-z]*[sd]",
}
"""The options of a kind's command that print part of its output, as a prompt line shows them:
lspci's ``-s [[dom:]bus:][slot][.func]`` and ``-d [vendor]:[device]``, alone or in a cluster
(``-vvvs 04:00.0``; no other lspci option has a lower-case s or d)."""

_Parsed = TypeVar("_Parsed")


# -- lspci -tv -------------------------------------------------------------------------------------

_TREE_ROOT = re.compile(r"\[([0-9a-f]{4}):([0-9a-f]{2})\]")
_TREE_FN = re.compile(r"([0-9a-f]{2}\.[0-7])(?:-\[([0-9a-f]{2})(?:-([0-9a-f]{2}))?\])?")


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One function of ``lspci -tv``: its address, its parent bridge and its name."""

    address: str
    parent: str | None
    root_bus: str
    name: str
    bridge: bool


def parse_lspci_tree(text: str, source: str = "lspci -tv") -> list[TreeEntry]:
    """The functions of an ``lspci -tv`` tree: each entry's bus is that of the nearest bus
    context (a root ``[DDDD:BB]`` or a bridge's ``[SS-UU]``) to its left."""
    contexts: dict[int, tuple[str, str, str | None]] = {}  # column -> (domain, bus, bridge)
    out: list[TreeEntry] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cut = re.search(r"[0-9a-f]{2}\.[0-7]  ", line)
        structure = line if cut is None else line[: cut.end() - 2]
        name = "" if cut is None else line[cut.end() :].strip()
        pos = 0
        found = False
        while pos < len(structure):
            root = _TREE_ROOT.match(structure, pos)
            fn = _TREE_FN.match(structure, pos) if root is None else None
            if root is not None:
                for col in [c for c in contexts if c >= root.start()]:
                    del contexts[col]
                contexts[root.end()] = (root[1], root[2], None)
                pos, found = root.end(), True
                continue
            if fn is not None and pos > 0 and structure[pos - 1] == "-":
                for col in [c for c in contexts if c > fn.start()]:
                    del contexts[col]
                owners = [c for c in contexts if c <= fn.start()]
                if not owners:
                    raise _fail(
                        source,
                        f"line {lineno}",
                        f"expected a root bus [DDDD:BB] first, found {fn[1]}",
                    )
                domain, bus, bridge = contexts[max(owners)]
                address = f"{domain}:{bus}:{fn[1]}"
                root_bus = _root_of(contexts)
                is_bridge = fn[2] is not None
                last = fn.end() >= len(structure.rstrip())
                out.append(TreeEntry(address, bridge, root_bus, name if last else "", is_bridge))
                if is_bridge:
                    contexts[fn.end()] = (domain, fn[2], address)
                pos, found = fn.end(), True
                continue
            pos += 1
        if not found:
            raise _fail(
                source,
                f"line {lineno}",
                "expected a tree line like '+-01.0-[01]----00.0  name', "
                f"found {show_value(line.strip())}",
            )
    if not out:
        raise _fail(source, "line 1", "expected an lspci -tv tree, found no function")
    return out


def _root_of(contexts: Mapping[int, tuple[str, str, str | None]]) -> str:
    """The root bus of the live contexts (the tree's root entry, always the leftmost)."""
    roots = [f"{d}:{b}" for _, (d, b, p) in sorted(contexts.items()) if p is None]
    return roots[-1]


# -- lspci -vvv ------------------------------------------------------------------------------------

_HEADER = re.compile(
    r"^(?:([0-9a-f]{4}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7]) (.+?)(?: \[([0-9a-f]{4})\])?: (.*)$"
)
_SIZE = re.compile(r"\[size=(\d+)([KMGT]?)\]")
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True, slots=True)
class VerboseEntry:
    """One device block of ``lspci -vvv``."""

    function: PciFunction
    secondary: int | None
    vendor_guessed: bool


def _speed(text: str) -> float | None:
    m = re.search(r"Speed ([0-9.]+)GT/s", text)
    return float(m[1]) if m else None


def _width(text: str) -> int | None:
    m = re.search(r"Width x(\d+)", text)
    return int(m[1]) if m else None


def parse_lspci_verbose(text: str, source: str = "lspci -vvv") -> list[VerboseEntry]:
    """Each device block: header ``[DDDD:]BB:DD.F Class [cccc]: Name [vvvv:dddd]`` and the
    lines listed in the module docstring."""
    out: list[VerboseEntry] = []
    block: list[tuple[int, str]] = []

    def flush() -> None:
        if not block:
            return
        lineno, header = block[0]
        m = _HEADER.match(header)
        if m is None:
            raise _fail(
                source,
                f"line {lineno}",
                "expected a device line like '0000:03:00.0 3D controller: ...', "
                f"found {show_value(header)}",
            )
        domain = m[1] or "0000"
        address = f"{domain}:{m[2]}:{m[3]}.{m[4]}"
        cls_name, name = m[5].strip(), m[7]
        if m[6]:
            class_code = int(m[6], 16) << 8
        elif cls_name.lower() in _CLASS_NAMES:
            class_code = _CLASS_NAMES[cls_name.lower()]
        else:
            class_code = 0xFF0000
        ids = _ids(name)
        vendor, device = ids if ids else (_vendor(name), 0)
        fields: dict[str, object] = {}
        secondary = None
        bars: list[int] = []
        for _, raw in block[1:]:
            line = raw.strip()
            key, _, value = line.partition(":")
            value = value.strip()
            if key == "Kernel driver in use":
                fields["driver"] = value
            elif key == "NUMA node" and value.isdigit():
                fields["numa_node"] = int(value)
            elif key == "IOMMU group" and value.isdigit():
                fields["iommu_group"] = int(value)
            elif key == "Bus":
                sec = re.search(r"secondary=([0-9a-f]{2})", value)
                secondary = int(sec[1], 16) if sec else None
            elif key == "LnkCap":
                fields["link_speed"] = _speed(value)
                fields["link_width"] = _width(value)
            elif key == "ACSCtl":
                ctrl = 0
                for bit, token in enumerate(_ACS_BITS):
                    if f"{token}+" in value:
                        ctrl |= 1 << bit
                fields["acs_ctrl"] = ctrl
            elif key.startswith("Region") and "Memory at" in value and "disabled" not in value:
                size = _SIZE.search(value)
                if size:
                    bars.append(int(size[1]) * _SCALE[size[2]])
            elif key.startswith("Capabilities") and "Express" in value:
                low = value.lower()
                for word, kind in sorted(_PORT_TYPES.items(), key=lambda kv: -len(kv[0])):
                    if word in low:
                        fields["port_type"] = kind
                        fields["port_type_source"] = "config"
                        break
        fn = PciFunction(
            address=address,
            root_bus=f"{domain}:{m[2]}",
            parent=None,
            vendor=vendor,
            device=device,
            class_code=class_code,
            bars=tuple(bars),
            **fields,  # type: ignore[arg-type]
        )
        out.append(VerboseEntry(fn, secondary, ids is None))
        block.clear()

    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            flush()
            continue
        if not raw[0].isspace() and block:
            flush()
        block.append((lineno, raw.rstrip()))
    flush()
    if not out:
        raise _fail(source, "line 1", "expected lspci -vvv device blocks, found none")
    return out


# -- the rest ------------------------------------------------------------------------------------


def parse_ulimit(text: str, source: str = "ulimit -l") -> int | None:
    """RLIMIT_MEMLOCK in bytes (None: unlimited) from ``ulimit -l`` (KiB) or an ``ulimit -a``
    line ``max locked memory (kbytes, -l) 8192`` (zsh: ``-l: locked-in-memory size (kbytes)``).
    In ``ulimit -a`` only that line counts: the other limits print ``unlimited`` too."""
    lines = [line.strip().lower() for line in text.splitlines() if line.strip()]
    locked = [line for line in lines if re.search(r"locked[- ](?:in-)?memory", line)]
    for line in locked or lines:
        word = line.split()[-1]
        if locked or word == line:
            if word == "unlimited":
                return None
            if word.isdigit():
                return int(word) * KiB
    raise _fail(
        source,
        "line 1",
        f"expected a number of KiB or 'unlimited', found {show_value(text.strip())}",
    )


def parse_uname(text: str, source: str = "uname -r") -> str:
    """The release (``6.8.0-52-generic``): the first word that starts ``MAJOR.MINOR``."""
    for word in text.split():
        if re.match(r"^\d+\.\d+", word):
            return word
    raise _fail(
        source,
        "line 1",
        f"expected a release like '6.8.0-52-generic', found {show_value(text.strip())}",
    )


def _tree_and_verbose(
    tree: list[TreeEntry] | None, verbose: list[VerboseEntry] | None
) -> tuple[list[PciFunction], list[str]]:
    notes: list[str] = []
    by_addr: dict[str, PciFunction] = {}
    if verbose:
        secondary = {
            (e.function.root_bus.split(":")[0], e.secondary): e.function.address
            for e in verbose
            if e.secondary is not None
        }
        for e in verbose:
            fn = e.function
            domain, bus = fn.address.split(":")[:2]
            parent = secondary.get((domain, int(bus, 16)))
            by_addr[fn.address] = fn.model_copy(update={"parent": parent})
            if e.vendor_guessed:
                notes.append(f"{fn.address}: vendor taken from its name (paste lspci -nn for IDs)")
    if tree:
        for t in tree:
            known = by_addr.get(t.address)
            if known is not None:
                fn = known
            else:
                vendor, device = _ids(t.name) or (_vendor(t.name), 0)
                on_root = t.parent is None
                fn = PciFunction(
                    address=t.address,
                    root_bus=t.root_bus,
                    parent=t.parent,
                    vendor=vendor,
                    device=device,
                    class_code=_class_of_name(t.name, vendor, t.bridge, on_root),
                )
                if not t.bridge:
                    notes.append(f"{t.address}: class guessed from its name {t.name!r}")
            by_addr[t.address] = fn.model_copy(update={"parent": t.parent, "root_bus": t.root_bus})
    if not tree and by_addr:
        # without -tv the root bus is the top of each parent chain
        for addr, fn in list(by_addr.items()):
            top = fn
            while top.parent in by_addr:
                top = by_addr[top.parent]
            by_addr[addr] = fn.model_copy(update={"root_bus": top.address.rsplit(":", 1)[0]})
    types = _structural_types(by_addr)
    fns = [
        fn
        if fn.port_type_source == "config"
        else fn.model_copy(update={"port_type": types[a], "port_type_source": "tree"})
        for a, fn in by_addr.items()
    ]
    return sorted(fns, key=lambda f: f.address), notes


_MODULE_STATES = ("Live", "Loading", "Unloading")


def parse_lsmod_paste(text: str) -> tuple[str, ...]:
    """Module names of pasted ``lsmod`` output or ``/proc/modules``. ``ValueError`` when the
    text starts with neither lsmod's ``Module  Size  Used by`` header nor a ``/proc/modules``
    line (``name size refs deps Live 0x...``): that is lsmod's output filtered (``| grep``
    without its prompt line) or cut, and a module left out of it would read as not loaded."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    lineno, first = lines[0] if lines else (1, "")
    parts = first.split() or [""]
    if parts[0] != "Module" and not (len(parts) >= 5 and parts[4] in _MODULE_STATES):
        raise ValueError(
            f"line {lineno}: expected lsmod from its header 'Module Size Used by', found "
            f"{show_value(first)}: {_WHOLE_OUTPUT['lsmod']}"
        )
    return parse_modules(text)


def parse_cpu_paste(text: str) -> tuple[str, int, str, int]:
    """(vendor_id, family, model name, sockets) from pasted ``/proc/cpuinfo`` or ``lscpu``
    output (told apart by lscpu's ``Architecture:`` line). ``ValueError`` when neither names
    the vendor (``vendor_id``, ``Vendor ID``, or ARM's ``CPU implementer``): read on, the CPU
    would be taken as no known vendor, without P2P through its host bridges."""
    keys = {line.partition(":")[0].strip() for line in text.splitlines() if ":" in line}
    if "Architecture" in keys:
        vendor_id, family, model, sockets = parse_lscpu(text)
    else:
        vendor_id, family, model, packages = _parse_cpuinfo(text)
        sockets = max(len(packages), 1)
    if not vendor_id and "CPU implementer" not in keys:
        raise ValueError(
            "expected /proc/cpuinfo or lscpu output naming the CPU's vendor (a vendor_id, "
            "Vendor ID or CPU implementer line), found none"
        )
    return vendor_id, family, model, sockets


def snapshot_from_pastes(
    pastes: Mapping[str, str],
    *,
    source: str = "pasted output",
    files: Mapping[str, str] | None = None,
) -> Snapshot:
    """A snapshot from pasted outputs by kind (:data:`PASTE_KINDS`); unknown kinds and
    unreadable text are one-line :class:`ConfigError`\\ s. ``files`` names the file each kind
    was read from, for the errors (``afile: ulimit -l: line 1: expected ...``)."""
    for kind in pastes:
        if kind not in PASTE_KINDS:
            raise _fail(
                source, kind, f"expected one of {', '.join(PASTE_KINDS)}, found {show_value(kind)}"
            )
    named = files or {}

    def src(kind: str) -> str:
        what = PASTE_KINDS[kind]
        return f"{named[kind]}: {what}" if kind in named else what

    def parsed(kind: str, parse: Callable[[str], _Parsed]) -> _Parsed:
        command = Command(
            _PROMPTS[kind], PASTE_KINDS[kind], _WHOLE_OUTPUT.get(kind), _SELECTS.get(kind)
        )
        return parse_undecorated(parse, pastes[kind], src(kind), command)

    notes: list[str] = []
    tree = (
        parsed("lspci-tv", lambda text: parse_lspci_tree(text, src("lspci-tv")))
        if "lspci-tv" in pastes
        else None
    )
    verbose = (
        parsed("lspci-vvv", lambda text: parse_lspci_verbose(text, src("lspci-vvv")))
        if "lspci-vvv" in pastes
        else None
    )
    fns, pci_notes = _tree_and_verbose(tree, verbose)
    notes += pci_notes
    topo_sockets = 0
    if not fns and "nvidia-smi-topo" in pastes:
        matrix = parsed(
            "nvidia-smi-topo", lambda text: parse_topo_matrix(text, src("nvidia-smi-topo"))
        )
        fns, topo_notes, topo_sockets = topo_functions(matrix)
        notes += topo_notes
    release = (
        parsed("uname-r", lambda text: parse_uname(text, src("uname-r")))
        if "uname-r" in pastes
        else ""
    )
    config: dict[str, str] = {}
    config_source = None
    if "config" in pastes:
        try:
            options = parsed("config", parse_kernel_config)
        except ConfigError as e:
            raise _fail(
                src("config"),
                "line 1",
                f"expected a kernel config of CONFIG_ lines, found {e.message}",
            ) from None
        config = {k: options[k] for k in CONFIG_OPTIONS if k in options}
        config_source = "pasted config"
    modules = list(parsed("lsmod", parse_lsmod_paste)) if "lsmod" in pastes else None
    symbols = list(parsed("kallsyms", parse_kallsyms)) if "kallsyms" in pastes else None
    excerpt = "kallsyms" in pastes and not parsed("kallsyms", kallsyms_is_whole)
    if excerpt:
        notes.append(
            f"kallsyms is an excerpt (no {' or '.join(KALLSYMS_ANCHORS)} line, as a grep of it "
            "shows): a symbol it does not show is unknown, not absent"
        )
    limits = LimitFacts()
    if "ulimit-l" in pastes:
        soft = parsed("ulimit-l", lambda text: parse_ulimit(text, src("ulimit-l")))
        limits = LimitFacts(memlock_soft=soft, memlock_hard=soft, memlock_known=True)
        notes.append("ulimit -l gives the soft limit; the hard limit is assumed equal")
    cpu = None
    if "cpuinfo" in pastes:
        vendor_id, family, model, sockets = parsed("cpuinfo", parse_cpu_paste)
        cpu = CpuFacts(vendor_id=vendor_id, family=family, model=model, sockets=sockets)
    if topo_sockets:
        base = cpu or CpuFacts()
        cpu = base.model_copy(
            update={
                "sockets": max(base.sockets, topo_sockets),
                "node_socket": {str(i): i for i in range(topo_sockets)},
            }
        )
    return Snapshot(
        pinlab_snapshot=SNAPSHOT_VERSION,
        source=f"{source}: {', '.join(pastes)}",
        kernel=KernelFacts(
            release=release,
            config_source=config_source,
            config=config,
            modules=modules,
            symbols=symbols,
            symbols_excerpt=excerpt,
        ),
        limits=limits,
        cpu=cpu,
        pci=list(fns),
        notes=notes,
    )
