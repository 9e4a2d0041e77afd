"""What ``pinlab doctor`` (:mod:`pinlab.inspect.doctor`) runs: its :class:`Inputs` read from
a host's snapshot (the closest kernel profile, RLIMIT_MEMLOCK, the NICs' ODP) and each step an
application takes, through :mod:`pinlab.uapi` on a machine built with the host's policy, kept
as a :class:`Step` -- success, or the errno, the kernel function and the items that decide it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pinlab.drivers.base import placed_by_pin
from pinlab.inspect.hostpolicy import HOST_USER
from pinlab.inspect.snapshot import Snapshot
from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import RLIM_INFINITY, Kernel
from pinlab.kernel.profile import PRESETS, KernelProfile
from pinlab.kernel.umem import IB_ACCESS_LOCAL_WRITE, IB_ACCESS_ON_DEMAND, IB_ACCESS_REMOTE_READ
from pinlab.platform import build
from pinlab.platform.spec import KernelConfigSpec, PlatformSpec
from pinlab.platform.topology import Machine
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.config import apply_policy
from pinlab.policy.dmem import DmemCgroupController
from pinlab.scenarios.policy import policy_document, validate_policy
from pinlab.units import fmt_size

__all__ = [
    "ACCESS",
    "STEP_ITEMS",
    "Inputs",
    "Mode",
    "Registration",
    "Step",
    "closest_profile",
    "run_host_mr",
    "run_registration",
    "snapshot_memlock",
    "snapshot_nic_odp",
]

ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ
Mode = Literal["pinned", "odp"]

STEP_ITEMS: dict[str, tuple[str, ...]] = {
    "ib_umem_get": ("P-1", "P-4"),
    "ib_umem_dmabuf_get": ("K-43",),
    "ib_umem_dmabuf_get_pinned": ("K-45",),
    "ib_reg_user_mr_dmabuf": ("§6",),
    "mlx5_ib_reg_user_mr_dmabuf": ("§6",),
    "efa_reg_user_mr_dmabuf": ("§5", "efa_verbs.c access check"),
    "ib_uverbs_ioctl": ("§5", "UVERBS_METHOD_REG_DMABUF_MR, Linux 5.12 bfe0cc6eb249"),
    "hl_map_dmabuf": ("K-52",),
    "amdgpu_dma_buf_pin": ("K-49",),
    "amdgpu_bo_pin": ("K-50",),
    "dmem_cgroup_try_charge": ("P-17",),
    "ttm_bo_validate": ("P-28",),
    "memlock_dmabuf_pins": ("P-12",),
}
"""The checklist item that decides a refusal, by the kernel function that returned the errno
(``kernel-semantics.md`` K-items and §6, ``policy-semantics.md`` P-items): citations of the
rule, not answers -- the errno and the function come from running the model."""

_MN_OPTION = "DMABUF_MOVE_NOTIFY"


# -- the inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """Everything a run of the steps depends on; a fix is a changed copy."""

    spec: PlatformSpec
    profile: KernelProfile
    uverbs_dmabuf: bool
    memlock: tuple[int, int]
    caps: frozenset[int]
    policy: dict[str, Any]
    mode: Mode
    size: int


def closest_profile(snap: Snapshot) -> tuple[KernelProfile, bool, list[str]]:
    """(the profile, whether uverbs has the dma-buf MR method, notes). The preset is the newest
    not above the running release (the oldest when the release is older than every preset);
    ``move_notify`` and ``pci_p2pdma`` follow the config file (``pci_p2pdma`` also kallsyms:
    :meth:`~pinlab.inspect.snapshot.KernelFacts.config_switches`, as the platform file's
    ``[kernel_config]``), and so does ``dmem`` (``CONFIG_CGROUP_DMEM``); the uverbs dma-buf
    method needs Linux 5.12 (``UVERBS_METHOD_REG_DMABUF_MR``, bfe0cc6eb249) and, when kallsyms
    shows a loaded
    ``ib_uverbs``, its ``ib_umem_dmabuf_get``."""
    k = snap.kernel
    notes: list[str] = []
    version = k.version
    presets = sorted(PRESETS.values(), key=lambda p: p.version)
    fitting = [p for p in presets if version is not None and p.version <= version[:2]]
    base = fitting[-1] if fitting else presets[0]
    if version is None:
        notes.append(f"kernel release unknown: profile {base.name} assumed")
    elif not fitting:
        notes.append(
            f"kernel {k.release} is older than every pinlab profile: the oldest, {base.name}, "
            "stands in for it"
        )
    switches = KernelConfigSpec(**k.config_switches())
    profile = base.with_(**switches.for_profile(base))
    uverbs = version is None or version[:2] >= (5, 12)
    if uverbs and k.has_module("ib_uverbs") and k.has_symbol("ib_umem_dmabuf_get") is False:
        uverbs = False
        notes.append("ib_uverbs is loaded but kallsyms has no ib_umem_dmabuf_get")
    if switches.move_notify is None and profile.move_notify_is_option:
        notes.append(
            f"CONFIG_{_MN_OPTION} unknown (no kernel config in the snapshot; kallsyms cannot "
            f"tell): the profile's default, {'y' if profile.move_notify else 'n'}, assumed"
        )
    return profile, uverbs, notes


def snapshot_memlock(snap: Snapshot) -> tuple[int, int]:
    from pinlab.kernel.kernel import DEFAULT_MEMLOCK

    limits = snap.limits
    if not limits.memlock_known:
        return DEFAULT_MEMLOCK, DEFAULT_MEMLOCK
    soft = RLIM_INFINITY if limits.memlock_soft is None else limits.memlock_soft
    hard = RLIM_INFINITY if limits.memlock_hard is None else limits.memlock_hard
    return soft, hard


def snapshot_nic_odp(snap: Snapshot, spec: PlatformSpec) -> PlatformSpec:
    """NICs without ODP where the kernel was built without it or ``ibv_devinfo`` says so."""
    off = snap.kernel.option("INFINIBAND_ON_DEMAND_PAGING") is False
    nics = tuple(
        n.model_copy(update={"odp": snap.nic_odp.get(n.name, n.odp and not off)}) for n in spec.nics
    )
    return spec.model_copy(update={"nics": nics})


# -- running the steps ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """One call: ``ok``, else the errno, the kernel function and its reason, and the items."""

    call: str
    ok: bool
    errno: str = ""
    function: str = ""
    reason: str = ""
    items: tuple[str, ...] = ()

    def text(self, *, cite: bool = True) -> str:
        if self.ok:
            return f"{self.call}: ok"
        where = f" in {self.function}" if self.function else ""
        cited = f" [{', '.join(self.items)}]" if self.items and cite else ""
        return f"{self.call}: {self.errno}{where}: {self.reason}{cited}"


@dataclass(frozen=True, slots=True)
class Registration:
    """A dma-buf MR attempt: its steps, and where the buffer sits after it (None: failed)."""

    mode: Mode
    steps: tuple[Step, ...]
    location: str | None
    items: tuple[str, ...]
    placed_by: tuple[str, ...] = ()
    """The exporter's items that place the buffer for this MR's import path, as the exporter
    declares them (:meth:`~pinlab.drivers.base.ExporterDriver.checklist_items`); empty where
    the NIC refuses the access flags before the core."""

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps)

    @property
    def failed(self) -> Step | None:
        return next((s for s in self.steps if not s.ok), None)


@contextmanager
def _call(steps: list[Step], call: str) -> Iterator[None]:
    try:
        yield
        steps.append(Step(call, True))
    except KernelError as e:
        items = STEP_ITEMS.get(e.function, ())
        if e.policy:
            items = (*items, f"proposal {e.policy}")
        steps.append(Step(call, False, f"-{e.errno.name}", e.function, e.reason, items))
        raise


def _machine(inputs: Inputs, proposals: Sequence[str] = ()) -> tuple[Machine, Any]:
    """The machine with the host's policy applied; returns it and the host user's process."""
    machine = build(inputs.spec, Kernel(inputs.profile))
    machine.system.uverbs_reg_dmabuf_mr = inputs.uverbs_dmabuf
    kernel = machine.kernel
    tree = CgroupTree()
    dmem = DmemCgroupController(tree).install(kernel) if kernel.profile.dmem else None
    regions = {r.name: r.size for r in kernel.dmem_regions} if dmem is not None else {}
    doc = dict(inputs.policy)
    if proposals:
        doc["proposals"] = {name: {} for name in proposals}
    doc = policy_document(doc, {n: p.name for n, p in machine.pdevs.items()}, regions)
    if dmem is None:
        doc.pop("regions", None)
        doc["cgroups"] = {k: {} for k in doc.get("cgroups", {})}
    config = validate_policy(doc, "host policy")
    ttm = [b for d in machine.exporters.values() if (b := d.bdev) is not None]
    applied = apply_policy(config, kernel, tree, dmem, ttm_devices=ttm, source="host policy")
    args = applied.spawn_args(HOST_USER)
    args["memlock"] = inputs.memlock
    args["caps"] = inputs.caps
    proc = machine.system.spawn("doctor", **args)
    applied.tree.attach(proc, args["cgroup"])
    return machine, proc


def run_registration(
    inputs: Inputs, device: str, nic: str, mode: Mode, filler: int, proposals: Sequence[str] = ()
) -> Registration:
    machine, proc = _machine(inputs, proposals)
    steps: list[Step] = []
    exporter = machine.exporters[device]
    access = ACCESS | (IB_ACCESS_ON_DEMAND if mode == "odp" else 0)
    rdma = machine.nics[nic]
    items = rdma.mr_checklist_items(access, exporter.dynamic)
    path = rdma.mr_path(access)
    placed_by: tuple[str, ...] = ()
    if path is not None:
        by_pin = placed_by_pin(path, exporter.dynamic, machine.kernel.profile)
        placed_by = exporter.checklist_items(path, by_pin=by_pin, refused=False)
    location = None
    try:
        if filler:
            with _call(steps, f"gem_create({device}, {fmt_size(filler)}) [the cgroup's usage]"):
                proc.gem_create(device, filler, exporter.shareable_domain, name="in use")
        with _call(steps, f"gem_create({device}, {fmt_size(inputs.size)})"):
            handle = proc.gem_create(device, inputs.size, exporter.shareable_domain)
        with _call(steps, "prime_handle_to_fd"):
            fd = proc.prime_handle_to_fd(handle)
        flags = "IB_ACCESS_ON_DEMAND" if mode == "odp" else "pinned"
        with _call(steps, f"ibv_reg_dmabuf_mr({nic}, {fmt_size(inputs.size)}, {flags})"):
            proc.ibv_reg_dmabuf_mr(nic, fd, 0, inputs.size, access)
        location = proc.buffer(handle).location
    except KernelError:
        pass
    return Registration(mode, tuple(steps), location, items, placed_by)


def run_host_mr(inputs: Inputs, nic: str) -> Step:
    _, proc = _machine(inputs)
    steps: list[Step] = []
    try:
        with _call(steps, f"ibv_reg_mr({nic}, {fmt_size(inputs.size)} of host memory)"):
            proc.ibv_reg_mr(inputs.size, ACCESS, nic=nic)
    except KernelError:
        pass
    return steps[0]
