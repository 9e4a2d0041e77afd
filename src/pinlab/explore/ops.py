"""The alphabet of the exploration: userspace calls and device events, as Python source.

Every operation is a few lines of Python on :mod:`pinlab.uapi` (``Process`` and ``System``
calls -- the only way in), run inside :meth:`~pinlab.explore.invariants.Checker.call`. The
exploration executes exactly the lines a reproducer prints: :meth:`Op.source` is compiled once
and ``exec``'d in the sequence's namespace, so a finding's script is its sequence.

A buffer is created and exported in one step (``create``), the way its exporter is reached
(:class:`~pinlab.explore.target.ExporterKind`): a GEM driver's ``gem_create`` then
``prime_handle_to_fd``, as every sharing program does; a range of vfio-pci's memory BAR
(``vfio_dma_buf``: ``VFIO_DEVICE_FEATURE_DMA_BUF``, K-98); or RDMA device memory
(``ibv_alloc_dm`` then ``ibv_export_dmabuf``: ``UVERBS_METHOD_DMABUF_ALLOC``, K-121).
``export`` exports a GEM buffer again after its fd was closed. Objects are named by slot, not
by number: ``b0``/``b1`` are ``p0``'s GEM handles of buffer 0 and 1 on ``gpu0``, ``dm0``/``dm1``
its device-memory allocations; ``f0_1`` is process ``p0``'s dma-buf fd of buffer 1; ``a1_0``
is process ``p1``'s import of buffer 0 into the target's importer (an MR, a GPU import handle,
a scanout or an IOVA of its iommufd IOAS). Buffer 1 is only created after buffer 0 (the two
are interchangeable: symmetry).

Device events: ``evict`` (a GEM exporter only: the ``pressure`` process allocates nearly all
of ``gpu0``'s device memory and frees it again: everything unpinned is evicted, K-36, K-37);
vfio-pci's revoke points (``vfio(memory-off)``, ``vfio(memory-on)``, ``vfio(reset)``: a
config write of ``PCI_COMMAND`` and ``VFIO_DEVICE_RESET``, K-104); the RDMA exporter's NIC
reset (``exporter_reset``: its ucontexts' dma-bufs are destroyed, K-123); ``kill``
(``kill -9``); ``nic_reset`` (the importing NIC's fatal error and recovery: every MR on it is
destroyed); ``unplug`` (surprise removal of the exporting or the importing PCI device).
Userspace revokes too: ``vfio_close`` (the device fd's close revokes every buffer for good),
``revoke`` (the ``next`` RFC ioctl ``VFIO_DEVICE_PCI_DMABUF_REVOKE``), ``free_dm``
(``ibv_free_dm`` removes the mmap entry, which revokes its dma-bufs, K-123). ``use`` is the
importing device's own access through its import: NIC DMA, a GPU job, a display's vblank
read, a DMA at an IOVA.

Each operation declares its *footprint*: the objects it may read or change (a buffer, a
process, the importer's device, the exporter's memory ``mem``). Two operations with disjoint
footprints commute (:meth:`Op.independent`); the search explores only one order of adjacent
independent operations (:mod:`pinlab.explore.search`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from types import CodeType
from typing import Any

from pinlab.drivers.base import ImportEntry
from pinlab.explore.target import GPU, Target
from pinlab.kernel.profile import get_profile

BUFFERS = (0, 1)
PROCS = (0, 1)

# The script lines that use and detach import ``a{p}_{i}`` of process ``p``, by how the
# importer is reached (:attr:`~pinlab.explore.target.ImporterKind.via`).
_USE = {
    ImportEntry.REG_MR: "p{p}.nic_dma(a{p}_{i})",
    ImportEntry.IOAS_MAP: "p{p}.iommufd_dma(a{p}_{i})",
    ImportEntry.PRIME_IMPORT: "p{p}.gpu_access(a{p}_{i})",
    ImportEntry.SCANOUT: 'system.display("{device}").scan_frame(a{p}_{i})',
}
_DETACH = {
    ImportEntry.REG_MR: "p{p}.ibv_dereg_mr(a{p}_{i})",
    ImportEntry.IOAS_MAP: "p{p}.iommufd_unmap(a{p}_{i})",
    ImportEntry.PRIME_IMPORT: "p{p}.gem_close(a{p}_{i})",
    ImportEntry.SCANOUT: "p{p}.clear_scanout(a{p}_{i})",
}


@dataclass(frozen=True, slots=True, order=True)
class Op:
    """One operation: its ``kind`` and slot arguments (module docstring)."""

    kind: str
    args: tuple[Any, ...] = ()

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(map(str, self.args))})" if self.args else self.kind


@dataclass(frozen=True, slots=True)
class Step:
    """An operation bound to a target: its Python source and footprint."""

    op: Op
    lines: tuple[str, ...]
    footprint: frozenset[str]

    @property
    def label(self) -> str:
        return str(self.op)

    def source(self) -> str:
        """The step as it runs (and as a reproducer prints it)."""
        body = "\n".join(f"    {line}" for line in self.lines)
        return f'with check.call("{self.label}"):\n{body}\n'

    def independent(self, other: Step) -> bool:
        return not (self.footprint & other.footprint)


class Alphabet:
    """The operations of one target and the rules for when each is enabled."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.kind = target.kind
        self.source = target.source
        self._steps: dict[Op, Step] = {}
        self._code: dict[Op, CodeType] = {}

    # -- the operations ------------------------------------------------------------------------
    def step(self, op: Op) -> Step:
        step = self._steps.get(op)
        if step is None:
            step = self._steps[op] = self._make(op)
        return step

    def code(self, op: Op) -> CodeType:
        code = self._code.get(op)
        if code is None:
            code = self._code[op] = compile(self.step(op).source(), f"<{op}>", "exec")
        return code

    def _make(self, op: Op) -> Step:
        k, a = op.kind, op.args
        dev = self.kind.device
        if k == "create":
            (i,) = a
            return Step(op, self._create(i), frozenset({f"b{i}", "mem"}))
        if k == "export":
            (i,) = a
            return Step(op, (f"f0_{i} = p0.prime_handle_to_fd(b{i})",), frozenset({f"b{i}"}))
        if k == "send":
            (i,) = a
            return Step(op, (f"f1_{i} = p0.send_fd(f0_{i}, p1)",), frozenset({f"b{i}"}))
        if k == "close":
            p, i = a
            lines = (f"p{p}.close(f{p}_{i})", f"del f{p}_{i}")
            return Step(op, lines, frozenset({f"b{i}", "mem"}))
        if k == "gem_close":
            (i,) = a
            return Step(op, (f"p0.gem_close(b{i})", f"del b{i}"), frozenset({f"b{i}", "mem"}))
        if k == "attach":
            p, i = a
            return Step(op, (f"a{p}_{i} = {self._attach(p, i)}",), frozenset({f"b{i}", "mem", dev}))
        if k == "use":
            p, i = a
            return Step(op, (self._use(p, i),), frozenset({f"b{i}", "mem", dev}))
        if k == "detach":
            p, i = a
            lines = (self._detach(p, i), f"del a{p}_{i}")
            return Step(op, lines, frozenset({f"b{i}", "mem", dev}))
        everything = frozenset({"b0", "b1", "mem", dev, "p0", "p1"})
        if k == "evict":
            lines = (
                f'h = pressure.gem_create("{GPU}", PRESSURE_SIZE, "vram")',
                "pressure.gem_close(h)",
            )
            return Step(op, lines, everything)
        if k == "kill":
            (p,) = a
            return Step(op, (f"p{p}.kill()",), everything)
        if k == "nic_reset":
            return Step(op, (f'system.reset_nic("{dev}")',), everything)
        if k == "unplug":
            (what,) = a
            name = self.source.device if what == "exporter" else dev
            return Step(op, (f'system.hot_unplug("{name}")',), everything)
        if k == "vfio":
            (event,) = a
            return Step(op, (f'system.vfio_event("{GPU}", "{event}")',), everything)
        if k == "vfio_close":
            return Step(op, (f'p0.vfio_close("{GPU}")',), everything)
        if k == "revoke":
            (i,) = a
            line = f'p0.vfio_dmabuf_revoke("{GPU}", f0_{i})'
            return Step(op, (line,), frozenset({f"b{i}", "mem", dev}))
        if k == "free_dm":
            (i,) = a
            lines = (f'p0.ibv_free_dm("{self.source.device}", dm{i})', f"del dm{i}")
            return Step(op, lines, frozenset({f"b{i}", "mem", dev}))
        if k == "exporter_reset":
            return Step(op, (f'system.reset_nic("{self.source.device}")',), everything)
        raise ValueError(f"unknown operation {op}")

    def _create(self, i: int) -> tuple[str, ...]:
        """Make buffer ``i`` and its fd ``f0_i`` the way the exporter is reached (its
        ``source``) and track the buffer behind it."""
        src = self.source
        if src.source == "gem":
            return (
                f'b{i} = p0.gem_create("{GPU}", BUFFER_SIZE, "{self.target.domain}")',
                f'check.track("b{i}", p0.buffer(b{i}))',
                f"f0_{i} = p0.prime_handle_to_fd(b{i})",
            )
        if src.source == "vfio":
            bar = f'system.vfio("{GPU}").memory_bar'
            first: tuple[str, ...] = (
                f'f0_{i} = p0.vfio_dma_buf("{GPU}", {bar}, {i} * BUFFER_SIZE, BUFFER_SIZE)',
            )
        else:
            first = (
                f'dm{i} = p0.ibv_alloc_dm("{src.device}", DM_SIZE)',
                f'f0_{i} = p0.ibv_export_dmabuf("{src.device}", dm{i}.pgoff)',
            )
        return (*first, f'check.track("b{i}", p0.dmabuf(f0_{i}).priv)')

    def _attach(self, p: int, i: int) -> str:
        kind = self.kind
        if kind.via is ImportEntry.REG_MR:
            access = "ACCESS | IB_ACCESS_ON_DEMAND" if kind.odp else "ACCESS"
            size = self.source.size_name
            return f'p{p}.ibv_reg_dmabuf_mr("{kind.device}", f{p}_{i}, 0, {size}, {access})'
        if kind.via is ImportEntry.IOAS_MAP:
            return f"p{p}.iommufd_map(f{p}_{i}, length={self.source.size_name})"
        if kind.via is ImportEntry.PRIME_IMPORT:
            return f'p{p}.prime_fd_to_handle("{kind.device}", f{p}_{i})'
        return f'p{p}.set_scanout("{kind.device}", f{p}_{i})'

    def _use(self, p: int, i: int) -> str:
        return _USE[self.kind.via].format(p=p, i=i, device=self.kind.device)

    def _detach(self, p: int, i: int) -> str:
        return _DETACH[self.kind.via].format(p=p, i=i, device=self.kind.device)

    # -- when each is enabled ------------------------------------------------------------------
    @cached_property
    def _events(self) -> tuple[Op, ...]:
        """The device events of this target: eviction where memory can move (a GEM
        exporter), the exporter's own revoke points (vfio-pci's memory decoding and reset,
        an RDMA exporter's NIC reset), kills, the importing NIC's reset, unplugs of the
        exporting and the importing PCI device (iommufd is none)."""
        src = self.source.source
        ev = [Op("evict")] if src == "gem" else []
        if src == "vfio":
            ev += [Op("vfio", ("memory-off",)), Op("vfio", ("memory-on",)), Op("vfio", ("reset",))]
        if src == "rdma-dm":
            ev.append(Op("exporter_reset"))
        ev += [Op("kill", (0,)), Op("kill", (1,))]
        if self.kind.via is ImportEntry.REG_MR:
            ev.append(Op("nic_reset"))
        ev.append(Op("unplug", ("exporter",)))
        if self.kind.via is not ImportEntry.IOAS_MAP:
            ev.append(Op("unplug", ("importer",)))
        return tuple(ev)

    @cached_property
    def _revoke_ioctl(self) -> bool:
        return (
            self.source.source == "vfio"
            and get_profile(self.target.profile).vfio_dmabuf_revoke_ioctl
        )

    def enabled(self, ns: dict[str, Any], created: frozenset[int]) -> Iterator[Op]:
        """The operations that make sense in this state, in canonical order: their objects
        exist, their process lives. ``created`` are the buffers ever created (each slot is
        created once; buffer 1 only after buffer 0)."""

        def alive(p: int) -> bool:
            return bool(ns[f"p{p}"].alive)

        for i in BUFFERS:
            if i not in created and (i == 0 or 0 in created) and alive(0):
                yield Op("create", (i,))
        for i in BUFFERS:
            if f"b{i}" in ns and alive(0):
                if f"f0_{i}" not in ns:
                    yield Op("export", (i,))
                yield Op("gem_close", (i,))
            if f"dm{i}" in ns and alive(0):
                yield Op("free_dm", (i,))
            if self._revoke_ioctl and f"f0_{i}" in ns and alive(0):
                yield Op("revoke", (i,))
            if f"f0_{i}" in ns and f"f1_{i}" not in ns and alive(0) and alive(1):
                yield Op("send", (i,))
            for p in PROCS:
                if not alive(p):
                    continue
                if f"f{p}_{i}" in ns:
                    if f"a{p}_{i}" not in ns:
                        yield Op("attach", (p, i))
                    yield Op("close", (p, i))
                if f"a{p}_{i}" in ns:
                    yield Op("use", (p, i))
                    yield Op("detach", (p, i))
        # an event acts on what exists: nothing before the first buffer; a kill needs the
        # process to hold something, a NIC reset an attachment (acting on nothing would only
        # add states where the next calls fail)
        if not created:
            return
        holds = {p: any(f"{v}{p}_{i}" in ns for v in "fa" for i in BUFFERS) for p in PROCS}
        holds[0] = holds[0] or any(f"{v}{i}" in ns for v in ("b", "dm") for i in BUFFERS)
        attached = any(f"a{p}_{i}" in ns for p in PROCS for i in BUFFERS)
        if self.source.source == "vfio" and alive(0) and GPU in ns["p0"].vfio:
            yield Op("vfio_close")
        for op in self._events:
            if op.kind == "kill" and not (alive(op.args[0]) and holds[op.args[0]]):
                continue
            if op.kind == "nic_reset" and not attached:
                continue
            yield op

    def is_enabled(self, op: Op, ns: dict[str, Any], created: frozenset[int]) -> bool:
        return op in set(self.enabled(ns, created))


_ACCESS_FLAGS = (
    "IB_ACCESS_LOCAL_WRITE",
    "IB_ACCESS_ON_DEMAND",
    "IB_ACCESS_REMOTE_READ",
    "IB_ACCESS_REMOTE_WRITE",
)
_ACCESS = "ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE\n"

PRELUDE = (
    "from pinlab.explore.invariants import Checker\n"
    "from pinlab.explore.target import BUFFER_SIZE, DM_SIZE, PRESSURE_SIZE, Target\n"
    f"from pinlab.kernel.umem import {', '.join(_ACCESS_FLAGS)}\n\n{_ACCESS}"
)
"""The imports and constants a sequence's namespace starts with."""


def prelude_for(body: str) -> str:
    """The part of :data:`PRELUDE` a script with steps ``body`` uses (a reproducer's header:
    no unused import)."""
    lines = ["from pinlab.explore.invariants import Checker"]
    consts = [n for n in ("BUFFER_SIZE", "DM_SIZE", "PRESSURE_SIZE") if n in body]
    lines.append(f"from pinlab.explore.target import {', '.join([*consts, 'Target'])}")
    if "ACCESS" in body:
        flags = [f for f in _ACCESS_FLAGS if f != "IB_ACCESS_ON_DEMAND" or f in body]
        lines.append("from pinlab.kernel.umem import (")
        lines += [f"    {f}," for f in flags]
        lines += [")", "", _ACCESS.rstrip()]
    return "\n".join(lines) + "\n"


def boot_source(target: Target) -> str:
    """The lines that boot ``target`` and bind ``system``, ``p0``, ``p1``, ``pressure`` and
    ``check``."""
    t = target
    # where the fingerprint cannot see an importer's mapping (a GPU import, an IOAS area) or
    # a buffer is revoked rather than moved, its move count stays in the state
    unseen = (ImportEntry.PRIME_IMPORT, ImportEntry.IOAS_MAP)
    exact = t.kind.via in unseen or t.source.source != "gem"
    return (
        f'booted = Target("{t.exporter}", "{t.importer}", "{t.profile}", "{t.policy}").boot()\n'
        "system = booted.system\n"
        "p0, p1 = booted.procs\n"
        "pressure = booted.pressure\n"
        f'check = Checker(booted, "{t.policy}", exact_epochs={exact})\n'
    )
