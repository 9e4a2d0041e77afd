"""``nvidia-smi topo -m``: the matrix, and a PCI tree drawn with the same path types.

:func:`parse_topo_matrix` reads the matrix (tab- or space-separated; cells ``X SYS NODE PHB PXB
PIX NV#``; the ``NIC Legend``; ``field-cases.md`` B.3) and raises a one-line
:class:`~pinlab.errors.ConfigError` naming the line for anything else; :func:`topo_functions`
draws PCI functions whose path types are the matrix's, for
:func:`~pinlab.inspect.platform.plan_platform`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pinlab.errors import ConfigError, show_value
from pinlab.inspect.pci import PciFunction

__all__ = ["TopoMatrix", "parse_topo_matrix", "topo_functions"]


def _fail(source: str, where: str, message: str) -> ConfigError:
    return ConfigError(source, where, message)


_TOPO_CELLS = frozenset({"X", "SYS", "NODE", "PHB", "PXB", "PIX"})


@dataclass(frozen=True, slots=True)
class TopoMatrix:
    """``nvidia-smi topo -m``: device names in order, path types, NUMA affinity, NIC legend."""

    names: tuple[str, ...]
    cells: Mapping[tuple[str, str], str]
    numa: Mapping[str, int]
    nic_names: Mapping[str, str]

    def link(self, a: str, b: str) -> str:
        return self.cells[(a, b)]


def parse_topo_matrix(text: str, source: str = "nvidia-smi topo -m") -> TopoMatrix:
    """The matrix: a header of device columns, one row per device, ``X`` on the diagonal;
    cells ``SYS NODE PHB PXB PIX`` or ``NV#``; the ``NIC Legend``."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    rows = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip()]
    if not rows:
        raise _fail(source, "line 1", "expected an nvidia-smi topo -m matrix, found nothing")
    header_no, header = rows[0]
    columns = [c for c in re.split(r"\t+|\s{2,}", header.strip()) if c]
    devices = [c for c in columns if re.fullmatch(r"(GPU|NIC)\d+|[a-z][a-z0-9_]*\d", c)]
    if not devices:
        raise _fail(
            source,
            f"line {header_no}",
            f"expected columns GPU0 ... NIC0 ..., found {show_value(header)}",
        )
    cells: dict[tuple[str, str], str] = {}
    numa: dict[str, int] = {}
    legend: dict[str, str] = {}
    in_legend = False
    seen: list[str] = []
    for lineno, line in rows[1:]:
        stripped = line.strip()
        if stripped.startswith("Legend:"):
            in_legend = True
            continue
        m = re.fullmatch(r"(NIC\d+):\s*(\S+)", stripped)
        if m:
            legend[m[1]] = m[2]
            continue
        if in_legend or stripped.startswith("NIC Legend"):
            continue
        parts = [p for p in re.split(r"\s+", stripped) if p]
        name = parts[0]
        if name not in devices:
            raise _fail(
                source,
                f"line {lineno}",
                f"expected a row of {', '.join(devices)}, found {show_value(name)}",
            )
        values = parts[1 : 1 + len(devices)]
        if len(values) < len(devices):
            raise _fail(
                source,
                f"line {lineno}",
                f"expected {len(devices)} cells in row {name}, found {len(values)}",
            )
        for col, value in zip(devices, values, strict=True):
            if value not in _TOPO_CELLS and not re.fullmatch(r"NV\d+", value):
                raise _fail(
                    source,
                    f"line {lineno}",
                    f"expected X, SYS, NODE, PHB, PXB, PIX or NV# in row {name} column {col}, "
                    f"found {show_value(value)}",
                )
            cells[(name, col)] = value
        rest = parts[1 + len(devices) :]
        # CPU Affinity, NUMA Affinity, GPU NUMA ID: the NUMA node is the first bare integer
        nodes = [p for p in rest[1:] if p.isdigit()]
        if nodes:
            numa[name] = int(nodes[0])
        seen.append(name)
    missing = [d for d in devices if d not in seen]
    if missing:
        raise _fail(source, "rows", f"expected a row for every column, found none for {missing}")
    return TopoMatrix(tuple(devices), cells, numa, legend)


class _Groups:
    """Union-find over device names."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.parent = {n: n for n in names}

    def find(self, n: str) -> str:
        while self.parent[n] != n:
            n = self.parent[n]
        return n

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[list[str]]:
        out: dict[str, list[str]] = {}
        for n in self.parent:
            out.setdefault(self.find(n), []).append(n)
        return list(out.values())


def topo_functions(topo: TopoMatrix) -> tuple[list[PciFunction], list[str], int]:
    """A PCI tree with the matrix's path types (and notes on what it assumes): devices joined
    by PIX/PXB share a switch, by PHB a host bridge, by NODE a socket; SYS crosses sockets.
    GPUs are NVIDIA 3D controllers, ``mlx5_*`` NICs ConnectX-6 (15b3:101b), ``rdmap*`` EFAs.
    Returns the functions, the notes and the number of sockets (each function's NUMA node is
    its socket's index)."""
    names = topo.names
    sockets, bridges, switches = _Groups(names), _Groups(names), _Groups(names)
    for a in names:
        for b in names:
            cell = topo.link(a, b) if (a, b) in topo.cells else "X"
            if cell in ("NODE", "PHB", "PXB", "PIX") or cell.startswith("NV"):
                sockets.join(a, b)
            if cell in ("PHB", "PXB", "PIX"):
                bridges.join(a, b)
            if cell in ("PXB", "PIX"):
                switches.join(a, b)
    fns: list[PciFunction] = []
    notes = [
        "the PCI tree was drawn from nvidia-smi topo -m: path types kept, addresses invented, "
        "host bridge IDs unknown (0000:0000)"
    ]
    socket_ids = {n: i for i, g in enumerate(sorted(sockets.groups())) for n in g}
    bus = 0

    def add(
        addr: str,
        root: str,
        parent: str | None,
        vendor: int,
        dev: int,
        cls: int,
        port: str | None,
        numa: int,
        **extra: object,
    ) -> None:
        fns.append(
            PciFunction(
                address=addr,
                root_bus=root,
                parent=parent,
                vendor=vendor,
                device=dev,
                class_code=cls,
                numa_node=numa,
                port_type=port,
                port_type_source="tree",
                link_speed=16.0,
                link_width=16,
                **extra,  # type: ignore[arg-type]
            )
        )

    for group in sorted(bridges.groups()):
        root = f"0000:{bus:02x}"
        numa = socket_ids[group[0]]
        add(f"{root}:00.0", root, None, 0, 0, 0x060000, None, numa)
        bus += 1
        slot = 1
        for sw in sorted(switches.groups()):
            members = [n for n in sw if n in group]
            if not members:
                continue
            rp = f"{root}:{slot:02x}.0"
            slot += 1
            add(rp, root, None, 0x8086, 0, 0x060400, "root_port", numa)
            parent = rp
            if len(members) > 1:
                up = f"0000:{bus:02x}:00.0"
                bus += 1
                add(up, root, rp, 0x10B5, 0, 0x060400, "upstream", numa)
                parent = up
            for i, member in enumerate(sorted(members)):
                at = parent
                if len(members) > 1:
                    at = f"0000:{bus:02x}:{i:02x}.0"
                    add(at, root, parent, 0x10B5, 0, 0x060400, "downstream", numa)
                if len(members) > 1 and i == len(members) - 1:
                    bus += 1
                ep = f"0000:{bus + 1:02x}:00.0"
                bus += 1
                rdma = topo.nic_names.get(member, member)
                if member.startswith("GPU"):
                    add(ep, root, at, 0x10DE, 0, 0x030200, "endpoint", numa, driver="nvidia")
                elif rdma.startswith("rdmap"):
                    add(
                        ep,
                        root,
                        at,
                        0x1D0F,
                        0xEFA0,
                        0x020000,
                        "endpoint",
                        numa,
                        driver="efa",
                        ib_devices=(rdma,),
                    )
                else:
                    add(
                        ep,
                        root,
                        at,
                        0x15B3,
                        0x101B,
                        0x020700,
                        "endpoint",
                        numa,
                        driver="mlx5_core",
                        ib_devices=(rdma,),
                    )
            bus += 1
    return fns, notes, len(set(socket_ids.values()))
