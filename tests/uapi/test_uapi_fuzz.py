"""The whole userspace API with every input allowed (issue "Hardening", item 4).

A hypothesis state machine drives several processes on the matrix machine (every exporter,
EFA, mlx5 with and without ODP, a display, a second GPU importing) under a dmem limit, a
RLIMIT_MEMLOCK and the memlock-dmabuf-pins proposal, with any argument: unknown devices and
domains, odd, zero and huge sizes, MR ranges outside the buffer, fds and handles that are not
open, self-imports, processes killed at any moment, setrlimit of any value, VRAM pressure.

Invariants after every step: nothing but :class:`KernelError` escapes a call (a
``ValueError``/``KeyError`` is a model bug); no dmem pool holds more than its ``dmem.max``
(P-27); no process without CAP_IPC_LOCK holds more pinned memory than its RLIMIT_MEMLOCK
under the proposal (P-12's counterfactual); no DMA is stale or unfenced once copies have run.
After every process has exited: every allocator, pin count, dma-buf, attachment, MR, scanout,
import, locked_vm and dmem charge is back where it started, and the kernel reports no leak
(K-4, K-5, K-47, K-82, P-29).

``FUZZ_SEQUENCES`` (environment) sets how many sequences run (default 10 000, the issue's
bound; each is short, so the suite stays within CI time).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import CAP_IPC_LOCK, RLIM_INFINITY, RLIMIT_MEMLOCK
from pinlab.kernel.profile import get_profile
from pinlab.kernel.umem import IB_ACCESS_LOCAL_WRITE, IB_ACCESS_ON_DEMAND, IB_ACCESS_REMOTE_READ
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.dmem import install as install_dmem
from pinlab.policy.proposals import memlock_dmabuf_pins
from pinlab.report.matrix import DEVICE_MEMORY, build_machine
from pinlab.uapi import Process
from pinlab.units import MiB

SEQUENCES = int(os.environ.get("FUZZ_SEQUENCES", "10000"))
EXPORTERS = ("amdgpu", "apu", "xe", "i915", "nvidia-compute", "habanalabs")
PROFILES = ("6.12", "6.16+MN", "7.1")
# valid values are listed several times: most calls should get far enough to change state
DEVICES = ("gpu0", "gpu0", "gpu1", "gpu1", "gpu9")
IMPORTERS = ("gpu1:import", "gpu1:import", "gpu1:import", "gpu0:import", "nope:import")
NICS = ("efa0", "efa0", "mlx5_0", "mlx5_0", "mlx5_1", "nic9")
DOMAINS = ("vram", "vram", "vram", "gtt", "system", "vram|system", "lmem", "", "bogus")
SIZES = st.sampled_from(
    [0, -4096, 1, 5000, MiB, MiB, 4 * MiB, 4 * MiB, 16 * MiB, DEVICE_MEMORY, 2**40]
)
LIMIT = 24 * MiB
MEMLOCKS = st.sampled_from([0, 8 * MiB, 32 * MiB, RLIM_INFINITY])
ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ
SMALL = st.integers(0, 7)


def _profile(name: str) -> Any:
    return get_profile("6.16", move_notify=True) if name == "6.16+MN" else get_profile(name)


class Uapi(RuleBasedStateMachine):
    @initialize(exporter=st.sampled_from(EXPORTERS), profile=st.sampled_from(PROFILES))
    def boot(self, exporter: str, profile: str) -> None:
        prof = _profile(profile)
        self.m = build_machine(exporter, prof)
        self.kernel = self.m.kernel
        self.tree = CgroupTree()
        self.dmem = install_dmem(self.kernel, self.tree) if prof.dmem else None
        if self.dmem is not None:
            for bdev in self.m.ttm_devices():
                self.dmem.register_device(bdev)
        self.memlock = memlock_dmabuf_pins.install(self.kernel)
        self.tree.mkdir("/limited")
        self.limited: list[str] = []
        if self.dmem is not None:
            for driver in self.m.system.exporters.values():
                region = driver.vram_region
                if region is not None:
                    self.tree.write("/limited", "dmem.max", f"{region.name} {LIMIT}")
                    self.limited.append(region.name)
        self.before = self.snapshot()
        self.procs: list[Process] = []
        self.fds: dict[int, list[int]] = {}
        self.handles: dict[int, list[int]] = {}
        self.mrs: dict[int, list[Any]] = {}
        self.scanouts: dict[int, list[Any]] = {}
        self.grandfathered: dict[int, int] = {}
        for _ in range(2):
            self.spawn(memlock=8 * MiB, cap=False, limited=True)

    # -- bookkeeping ------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        k = self.kernel
        snap: dict[str, Any] = {}
        for name, drv in sorted(self.m.system.exporters.items()):
            snap[name] = [(r.name, r.used, r.pinned) for r in drv.regions()]
            snap[f"{name}.module"] = drv.module.refcnt
        snap["dma_bufs"] = len(list(k.dma_bufs()))
        snap["mrs"] = {n: len(nic.mrs) for n, nic in self.m.system.nics.items()}
        snap["scanouts"] = {n: len(d.scanouts) for n, d in self.m.system.displays.items()}
        snap["imports"] = {n: len(g.imports) for n, g in self.m.system.gpu_importers.items()}
        snap["locked_vm"] = sum(u.locked_vm for u in k.users.values())
        snap["leaks"] = list(k.leaks)
        if self.dmem is not None:
            snap["dmem"] = self.tree.read("/", "dmem.current")
        return snap

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a uapi call: only a KernelError may come out."""
        try:
            return fn(*args, **kwargs)
        except KernelError:
            return None

    def pick(self, i: int) -> Process | None:
        live = [p for p in self.procs if p.alive]
        return live[i % len(live)] if live else None

    # -- processes ---------------------------------------------------------------------------
    @precondition(lambda self: len(self.procs) < 5)
    @rule(memlock=MEMLOCKS, cap=st.booleans(), limited=st.booleans())
    def spawn(self, memlock: int, cap: bool, limited: bool) -> None:
        proc = self.m.system.spawn(
            f"p{len(self.procs)}", memlock=memlock, caps={CAP_IPC_LOCK} if cap else ()
        )
        if limited:
            self.tree.attach(proc, "/limited")
        self.procs.append(proc)
        for table in (self.fds, self.handles, self.mrs, self.scanouts):
            table[proc.pid] = []

    @rule(i=SMALL, soft=MEMLOCKS, hard=MEMLOCKS)
    def setrlimit(self, i: int, soft: int, hard: int) -> None:
        if (p := self.pick(i)) is not None:
            self.call(p.setrlimit, RLIMIT_MEMLOCK, soft, hard)
            # a lower limit leaves what is already pinned alone (setrlimit checks nothing
            # against usage); only new pins are refused
            self.grandfathered[p.pid] = max(self.grandfathered.get(p.pid, 0), p.mm.pinned_vm)

    @rule(i=SMALL, kill=st.booleans())
    def end(self, i: int, kill: bool) -> None:
        if (p := self.pick(i)) is not None:
            self.call(p.kill if kill else p.exit)

    # -- buffers and fds ----------------------------------------------------------------------
    @rule(i=SMALL, device=st.sampled_from(DEVICES), size=SIZES, domain=st.sampled_from(DOMAINS))
    def gem_create(self, i: int, device: str, size: int, domain: str) -> None:
        if (p := self.pick(i)) is not None and (h := self.call(p.gem_create, device, size, domain)):
            self.handles[p.pid].append(h)

    @rule(i=SMALL, device=st.sampled_from(DEVICES), size=SIZES, domain=st.sampled_from(DOMAINS))
    def create_and_export(self, i: int, device: str, size: int, domain: str) -> None:
        """GEM create and PRIME export in one step, as most programs do."""
        if (p := self.pick(i)) is None:
            return
        if (h := self.call(p.gem_create, device, size, domain)) is not None:
            self.handles[p.pid].append(h)
            if (fd := self.call(p.prime_handle_to_fd, h)) is not None:
                self.fds[p.pid].append(fd)

    @rule(i=SMALL, j=SMALL, bogus=st.booleans())
    def export(self, i: int, j: int, bogus: bool) -> None:
        if (p := self.pick(i)) is None:
            return
        hs = self.handles[p.pid]
        handle = 10**9 if bogus or not hs else hs[j % len(hs)]
        if (fd := self.call(p.prime_handle_to_fd, handle)) is not None:
            self.fds[p.pid].append(fd)

    @rule(i=SMALL, j=SMALL)
    def gem_close(self, i: int, j: int) -> None:
        if (p := self.pick(i)) is not None and (hs := self.handles[p.pid]):
            self.call(p.gem_close, hs.pop(j % len(hs)))

    @rule(i=SMALL, j=SMALL, op=st.sampled_from(["dup", "close", "close-bogus"]))
    def fd_op(self, i: int, j: int, op: str) -> None:
        if (p := self.pick(i)) is None:
            return
        fds = self.fds[p.pid]
        if op == "close-bogus" or not fds:
            self.call(p.close, 999_999)
        elif op == "dup":
            if (fd := self.call(p.dup, fds[j % len(fds)])) is not None:
                fds.append(fd)
        else:
            self.call(p.close, fds.pop(j % len(fds)))

    @rule(i=SMALL, j=SMALL, k=SMALL)
    def send_fd(self, i: int, j: int, k: int) -> None:
        if (p := self.pick(i)) is None or not (fds := self.fds[p.pid]) or not self.procs:
            return
        to = self.procs[k % len(self.procs)]  # may be dead: -EPIPE
        if (fd := self.call(p.send_fd, fds[j % len(fds)], to)) is not None:
            self.fds[to.pid].append(fd)

    # -- importers ------------------------------------------------------------------------------
    @rule(
        i=SMALL,
        j=SMALL,
        nic=st.sampled_from(NICS),
        odp=st.booleans(),
        offset=st.sampled_from([0, 4096, 5, 16 * MiB]),
        length=SIZES,
    )
    def reg_mr(self, i: int, j: int, nic: str, odp: bool, offset: int, length: int) -> None:
        if (p := self.pick(i)) is None or not (fds := self.fds[p.pid]):
            return
        access = ACCESS | (IB_ACCESS_ON_DEMAND if odp else 0)
        mr = self.call(p.ibv_reg_dmabuf_mr, nic, fds[j % len(fds)], offset, length, access)
        if mr is not None:
            self.mrs[p.pid].append(mr)

    @rule(i=SMALL, j=SMALL, op=st.sampled_from(["dma", "write", "advise", "dereg"]))
    def mr_op(self, i: int, j: int, op: str) -> None:
        if (p := self.pick(i)) is None or not (mrs := self.mrs[p.pid]):
            return
        mr = mrs[j % len(mrs)]
        if op == "dereg":
            mrs.remove(mr)
            self.call(p.ibv_dereg_mr, mr)
            return
        self.m.settle(*self.procs)
        if op == "advise":
            self.call(p.ibv_advise_mr, mr)
        else:
            self.call(p.nic_dma, mr, write=op == "write")

    @rule(i=SMALL, j=SMALL, importer=st.sampled_from(IMPORTERS))
    def prime_import(self, i: int, j: int, importer: str) -> None:
        if (p := self.pick(i)) is None or not (fds := self.fds[p.pid]):
            return
        if (h := self.call(p.prime_fd_to_handle, importer, fds[j % len(fds)])) is not None:
            self.handles[p.pid].append(h)

    @rule(i=SMALL, j=SMALL, op=st.sampled_from(["gpu", "cs"]))
    def gpu_job(self, i: int, j: int, op: str) -> None:
        if (p := self.pick(i)) is None or not (hs := self.handles[p.pid]):
            return
        self.m.settle(*self.procs)
        self.call(p.gpu_access if op == "gpu" else p.amdgpu_cs, hs[j % len(hs)])

    @rule(i=SMALL, j=SMALL, op=st.sampled_from(["set", "frame", "clear"]))
    def scanout(self, i: int, j: int, op: str) -> None:
        if (p := self.pick(i)) is None:
            return
        outs = self.scanouts[p.pid]
        if op == "set" and (fds := self.fds[p.pid]):
            if (s := self.call(p.set_scanout, "display0", fds[j % len(fds)])) is not None:
                outs.append(s)
        elif op == "frame" and outs:
            self.m.settle(*self.procs)
            self.call(self.m.system.display("display0").scan_frame, outs[j % len(outs)])
        elif op == "clear" and outs:
            self.call(p.clear_scanout, outs.pop(j % len(outs)))

    # -- host memory and pressure -----------------------------------------------------------------
    @rule(i=SMALL, length=SIZES, op=st.sampled_from(["mlock", "munlock", "reg_mr"]))
    def host_memory(self, i: int, length: int, op: str) -> None:
        if (p := self.pick(i)) is None:
            return
        if op == "reg_mr":
            if (mr := self.call(p.ibv_reg_mr, length, ACCESS, nic="mlx5_0")) is not None:
                self.mrs[p.pid].append(mr)
        else:
            self.call(p.mlock if op == "mlock" else p.munlock, length)

    @rule(i=SMALL, device=st.sampled_from(("gpu0", "gpu1")))
    def pressure(self, i: int, device: str) -> None:
        """Allocate and free most of a device's memory, to evict what is not pinned."""
        if (p := self.pick(i)) is not None:
            h = self.call(p.gem_create, device, DEVICE_MEMORY - 4 * MiB, "vram")
            if h is not None:
                self.call(p.gem_close, h)

    # -- invariants ------------------------------------------------------------------------------
    @invariant()
    def quotas_hold(self) -> None:
        if getattr(self, "dmem", None) is None:
            return
        for line in self.tree.read("/limited", "dmem.current").splitlines():
            region, value = line.split()
            if region in self.limited:
                assert int(value) <= LIMIT, f"/limited holds {value} B of {region}"
        for p in self.procs:
            if not p.alive or CAP_IPC_LOCK in p.caps:
                continue
            pinned = p.mm.pinned_vm
            floor = self.grandfathered[p.pid] = min(self.grandfathered.get(p.pid, 0), pinned)
            limit = p.getrlimit(RLIMIT_MEMLOCK).cur
            if limit != RLIM_INFINITY:
                assert pinned <= max(limit // 4096, floor), (p, pinned, limit, floor)

    def teardown(self) -> None:
        if not hasattr(self, "m"):
            return
        for p in self.procs:
            p.exit()
        self.m.settle()
        self.m.system.reap()
        assert self.m.system.detector.incidents == []
        assert self.snapshot() == self.before


TestUapiFuzz = Uapi.TestCase
TestUapiFuzz.settings = settings(
    max_examples=SEQUENCES,
    stateful_step_count=20,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
