"""``pinlab doctor``: what a host's snapshot means for a dma-buf MR, computed by the model.

For each accelerator × RDMA NIC pair of the snapshot's platform (or the one asked for),
:func:`diagnose` builds the machine under the closest kernel profile (:func:`closest_profile`:
the preset not newer than the running release, with the configuration the snapshot shows),
applies the host's own limits (:func:`~pinlab.inspect.hostpolicy.host_policy`: RLIMIT_MEMLOCK,
capabilities, dmem) and then *runs* what an application does, through :mod:`pinlab.uapi`:
``gem_create`` of SIZE on the device (charged to the cgroup's dmem, with the cgroup's current
usage allocated first), ``prime_handle_to_fd``, ``ibv_reg_dmabuf_mr`` pinned and with
``IB_ACCESS_ON_DEMAND``, and ``ibv_reg_mr`` of a SIZE host buffer (the staging buffer, charged to
RLIMIT_MEMLOCK, P-1). Every answer -- success, or the errno and the kernel function that returned
it -- is what the model returned; the checklist items are those the importer cites for its path
(:meth:`~pinlab.drivers.rdma.RdmaDevice.mr_checklist_items`) plus the item of the refusing
function (:data:`STEP_ITEMS`). Where the buffer ended up after the pin (``vram`` or ``gtt``)
says whether the traffic is peer to peer or staged; a staged buffer cites the exporter's own
placement rule for the MR's path
(:meth:`~pinlab.drivers.base.ExporterDriver.checklist_items`: amdgpu K-48 and K-49, xe K-53,
i915 K-54, the APU and nvidia-compute models ``model``); the path class and the rates come from the
platform model (:meth:`~pinlab.platform.topology.Machine.p2p_path_class`,
:meth:`~pinlab.platform.topology.Machine.nic_end`, ``cost-model.md`` §3).

The findings are the failures and slow paths found; the fixes are changes to the inputs --
RLIMIT_MEMLOCK, CAP_IPC_LOCK, ODP, kernel options, a newer kernel, a card in another slot, a
dmem limit -- each re-run through the same steps and kept when it resolves a finding, most
findings resolved first (:func:`_fixes`). Exit status (:attr:`Diagnosis.exit_code`): 0
healthy, 1 findings; a bad snapshot or argument is a one-line error (status 2, by the CLI).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pinlab.inspect.doctor_run import (
    STEP_ITEMS,
    Inputs,
    Mode,
    Registration,
    Step,
    closest_profile,
    run_host_mr,
    run_registration,
    snapshot_memlock,
    snapshot_nic_odp,
)
from pinlab.inspect.hostpolicy import host_policy
from pinlab.inspect.snapshot import Snapshot
from pinlab.kernel.kernel import CAP_IPC_LOCK, DEFAULT_MEMLOCK, RLIM_INFINITY, Kernel
from pinlab.kernel.p2pdma import pci_p2pdma_distance
from pinlab.kernel.pci import find_parent_pci_dev
from pinlab.kernel.pci_ids import P2pdmaWhitelistFlag, pci_p2pdma_whitelist_lookup
from pinlab.platform import build, rdma_model
from pinlab.platform.spec import PlatformSpec, SwitchSpec, nic_driver
from pinlab.units import GiB, fmt_rate, fmt_size

__all__ = [
    "DEFAULT_SIZE",
    "STEP_ITEMS",
    "Diagnosis",
    "Finding",
    "Fix",
    "PairReport",
    "closest_profile",
    "diagnose",
]

DEFAULT_SIZE = GiB
"""The registration size when ``--size`` is not given (a typical NCCL/UCX buffer pool)."""

REFUSED = "refused by P2PDMA"
"""The path class when ``pci_p2pdma_distance`` < 0 (K-55)."""


# -- the report -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    """Something wrong with the pair: a key (what a fix resolves), the sentence, the items."""

    key: str
    text: str
    items: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Fix:
    """A change the model confirmed: what to do, and the findings it resolves."""

    text: str
    resolves: tuple[str, ...]


@dataclass(frozen=True)
class Rates:
    """Expected payload rates, bytes/s, NIC ↔ device memory (P2P) and NIC ↔ host memory, of a
    transfer on ``qps`` queue pairs."""

    path: str
    p2p_write: float
    p2p_read: float
    host_write: float
    host_read: float
    qps: int = 1


@dataclass(frozen=True)
class PairReport:
    """One device × NIC pair (module docstring)."""

    device: str
    nic: str
    profile: str
    switches: dict[str, bool]
    mode: Mode
    registrations: dict[str, Registration]
    with_proposal: Registration | None
    host_mr: Step
    rates: Rates
    memlock: tuple[int, int]
    dmem: str
    findings: tuple[Finding, ...]
    fixes: tuple[Fix, ...] = ()
    memlock_assumed: bool = False
    """The snapshot holds no RLIMIT_MEMLOCK (a paste without ``ulimit``): Linux's default is
    assumed, and every line that rests on it says so."""


@dataclass(frozen=True)
class Diagnosis:
    """The whole answer: the pairs, and what concerns the host as a whole."""

    source: str
    size: int
    pairs: tuple[PairReport, ...]
    host_findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def exit_code(self) -> int:
        return 1 if self.host_findings or any(p.findings for p in self.pairs) else 0


def _rates(inputs: Inputs, device: str, nic: str) -> Rates:
    machine = build(inputs.spec, Kernel(inputs.profile))
    path = machine.p2p_path_class(device, nic) or REFUSED
    port = machine.nic_port_model(nic)
    wire = rdma_model.wire_rate(machine.cost, port)
    host = f"host:{machine.socket_of(nic)}"

    # An application's transfer runs on several QPs, each its own read window into the BAR
    # (nic.<m>.p2p_read_tags): the doctor compares at the QPs of an NCCL job with one GPU
    # per node (nccl.channels_one_gpu channels, a QP each), not at perftest's single QP.
    qps = machine.cost.nccl.channels_one_gpu

    def rate(memory: str, write: bool) -> float:
        return min(machine.nic_end(nic, memory, inputs.size, write=write, qps=qps).rate, wire)

    return Rates(
        path, rate(device, True), rate(device, False), rate(host, True), rate(host, False), qps
    )


def _dmem_filler(snap: Snapshot, spec: PlatformSpec, device: str) -> tuple[int, str]:
    """(bytes the cgroup already uses of the device's region under its tightest dmem.max,
    a sentence on the headroom)."""
    address = next((a for a, n in snap.aliases().items() if n == device and ":" in a), None)
    limits = snap.limits
    for region in limits.dmem_capacity:
        if address is None or f"/{address}/" not in region:
            continue
        limit, cgroup = limits.dmem_limit(region)
        if limit is None:
            return 0, f"dmem {region}: no dmem.max up the cgroup chain"
        used = limits.dmem_current(region, cgroup) or 0
        room = max(limit - used, 0)
        return used, (
            f"dmem {region}: {cgroup} dmem.max {fmt_size(limit)}, current {fmt_size(used)}: "
            f"headroom {fmt_size(room)}"
        )
    return 0, "dmem: no region of this device in the snapshot"


def _evaluate(inputs: Inputs, snap: Snapshot, device: str, nic: str) -> PairReport:
    filler, dmem_text = _dmem_filler(snap, inputs.spec, device)
    regs = {m: run_registration(inputs, device, nic, m, filler) for m in ("pinned", "odp")}
    proposal = None
    if regs["pinned"].ok:
        proposal = run_registration(inputs, device, nic, "pinned", filler, ("memlock-dmabuf-pins",))
    host_mr = run_host_mr(inputs, nic)
    rates = _rates(inputs, device, nic)
    findings: list[Finding] = []
    reg = regs[inputs.mode]
    if not reg.ok:
        step = reg.failed
        assert step is not None
        findings.append(
            Finding(
                f"{inputs.mode}-fails",
                f"the {inputs.mode} registration fails: {step.text(cite=False)}",
                step.items,
            )
        )
    elif reg.location not in (None, "vram"):
        items = reg.placed_by
        why = ""
        if rates.path == REFUSED:
            why = f"; P2PDMA refuses the pair ({_refusal_reason(inputs, device, nic)})"
            items = (*items, "K-55", "K-83")
        findings.append(
            Finding(
                "staged",
                f"the {inputs.mode} MR succeeds but the buffer sits in {reg.location}, not device "
                f"memory: the NIC moves host memory, P2P is not used (staged){why}",
                items,
            )
        )
    p2p_used = reg.ok and reg.location == "vram"
    if rates.p2p_read == 0 and rates.p2p_write > 0:
        findings.append(
            Finding(
                "reads-fail",
                f"the host bridge between {device} and {nic} forwards peer-to-peer writes only: "
                f"NIC writes into {device}'s memory work ({fmt_rate(rates.p2p_write)}), NIC reads "
                "of it (a SEND or RDMA WRITE from it, an RDMA READ of it) fail"
                + ("" if p2p_used else " wherever the exporter lets P2P through"),
                ("pcie.rc.intel_client",),
            )
        )
    elif p2p_used:
        p2p = min(rates.p2p_read, rates.p2p_write)
        host = min(rates.host_read, rates.host_write)
        if p2p < host:
            findings.append(
                Finding(
                    "slow-path",
                    f"P2P path {rates.path}: {fmt_rate(p2p)} expected, below the "
                    f"{fmt_rate(host)} of host memory: staging through the host is as fast",
                    ("cost-model §3",),
                )
            )
    if not host_mr.ok:
        findings.append(
            Finding(
                "host-mr-fails",
                f"a host staging buffer cannot be registered: {host_mr.text(cite=False)}",
                host_mr.items,
            )
        )
    return PairReport(
        device=device,
        nic=nic,
        profile=inputs.profile.name,
        switches={
            "move_notify": inputs.profile.move_notify,
            "pci_p2pdma": inputs.profile.pci_p2pdma,
            "dmem": inputs.profile.dmem,
            "uverbs_reg_dmabuf_mr": inputs.uverbs_dmabuf,
            "nic_odp": next(n.odp for n in inputs.spec.nics if n.name == nic),
        },
        mode=inputs.mode,
        registrations=regs,
        with_proposal=proposal,
        host_mr=host_mr,
        rates=rates,
        memlock=inputs.memlock,
        dmem=dmem_text,
        findings=tuple(findings),
        memlock_assumed=not snap.limits.memlock_known,
    )


def _refusal_reason(inputs: Inputs, device: str, nic: str) -> str:
    """Why ``pci_p2pdma_distance`` is negative for ``device`` ↔ ``nic``, read off the kernel
    model (K-55, K-83, K-132): for each host bridge on the path, the function the whitelist
    identifies it by and the entry that decides; then the CPU, whose host bridges AMD Zen lets
    through whatever the list says; then what a verbose query logs, as the kernel would."""
    if not inputs.profile.pci_p2pdma:
        return "CONFIG_PCI_P2PDMA is off"
    machine = build(inputs.spec, Kernel(inputs.profile))
    topo = machine.pci
    provider, client = machine.pdevs[device], find_parent_pci_dev(machine.system.nics[nic].dev)
    ends = [provider] if client is None else [provider, client]
    bridges = list(dict.fromkeys(end.host_bridge for end in ends))
    reasons: list[str] = []
    for hb in bridges:
        name = hb.label or hb.name
        root = hb.pci_host_bridge_dev()
        if root is None:
            older = "" if topo.whitelist_root_port else ", nor (before v5.19) by a first Root Port"
            reasons.append(
                f"host bridge {name} has no function the whitelist knows it by "
                f"(none at 00.0{older})"
            )
            continue
        ids = f"{root.vendor:04x}:{root.device:04x}"
        entry = pci_p2pdma_whitelist_lookup(
            topo.whitelist, root.vendor, root.device, any_device=topo.whitelist_any_device
        )
        if entry is None:
            reasons.append(
                f"the path goes through host bridge {name} ({ids}), which is not whitelisted"
            )
        elif entry.flags & P2pdmaWhitelistFlag.REQ_SAME_HOST_BRIDGE and len(bridges) > 1:
            reasons.append(
                f"host bridge {name} ({ids}) is whitelisted for P2P below itself only, and the "
                "pair spans two host bridges"
            )
    spec = inputs.spec
    reasons.append(f"the CPU ({spec.cpu.vendor} family 0x{spec.cpu.family:x}) is not an AMD Zen")
    start = len(topo.log)
    pci_p2pdma_distance(provider, machine.system.nics[nic].dev, verbose=True)
    logged = "; ".join(topo.log[start:])
    return ", and ".join(reasons) + (f"; the kernel logs: {logged}" if logged else "")


# -- fixes ----------------------------------------------------------------------------------------


def _candidates(inputs: Inputs, device: str, nic: str) -> list[tuple[str, Callable[[], Inputs]]]:
    p = inputs.profile
    out: list[tuple[str, Callable[[], Inputs]]] = []
    if inputs.memlock[0] != RLIM_INFINITY:
        out.append(
            (
                "raise RLIMIT_MEMLOCK: `ulimit -l unlimited` (limits.conf `memlock unlimited`), "
                "systemd `LimitMEMLOCK=infinity`, docker `--ulimit memlock=-1:-1`, or containerd's "
                "LimitMEMLOCK for Kubernetes pods",
                lambda: replace(inputs, memlock=(RLIM_INFINITY, RLIM_INFINITY)),
            )
        )
    if CAP_IPC_LOCK not in inputs.caps:
        out.append(
            (
                "grant CAP_IPC_LOCK (docker `--cap-add=IPC_LOCK`; Kubernetes "
                "`securityContext.capabilities.add: [IPC_LOCK]`; it helps root processes only)",
                lambda: replace(inputs, caps=inputs.caps | {CAP_IPC_LOCK}),
            )
        )
    spec_nic = next(n for n in inputs.spec.nics if n.name == nic)
    if inputs.mode == "pinned" and spec_nic.odp:
        out.append(
            (
                f"register with IBV_ACCESS_ON_DEMAND (ODP: {nic} has it; nothing stays pinned)",
                lambda: replace(inputs, mode="odp"),
            )
        )
    if inputs.mode == "odp":
        out.append(
            (
                f"register pinned (drop IBV_ACCESS_ON_DEMAND: {nic} has no ODP here)",
                lambda: replace(inputs, mode="pinned"),
            )
        )
    if nic_driver(spec_nic.driver).supports_odp and not spec_nic.odp:
        nics = tuple(
            n.model_copy(update={"odp": True}) if n.name == nic else n for n in inputs.spec.nics
        )
        out.append(
            (
                f"a kernel with CONFIG_INFINIBAND_ON_DEMAND_PAGING=y ({spec_nic.driver} then "
                "offers ODP)",
                lambda: replace(inputs, spec=inputs.spec.model_copy(update={"nics": nics})),
            )
        )
    if p.move_notify_is_option and not p.move_notify:
        out.append(
            (
                "a kernel with CONFIG_DMABUF_MOVE_NOTIFY=y (exporters may then pin in VRAM, K-49)",
                lambda: replace(inputs, profile=p.with_(move_notify=True)),
            )
        )
    if not p.pci_p2pdma:
        out.append(
            (
                "a kernel with CONFIG_PCI_P2PDMA=y",
                lambda: replace(inputs, profile=p.with_(pci_p2pdma=True)),
            )
        )
    if not inputs.uverbs_dmabuf:
        out.append(
            (
                "a kernel with the uverbs dma-buf MR method (Linux 5.12 or later, or a backport); "
                "until then NCCL_DMABUF_ENABLE=0 and the peer-memory path (nvidia_peermem)",
                lambda: replace(inputs, uverbs_dmabuf=True),
            )
        )
    moved = _moved(inputs.spec, device, nic)
    if moved is not None:
        out.append(
            (
                f"move {nic} (or {device}) into a slot behind one PCIe switch with the other, "
                "ACS redirect off on its downstream ports",
                lambda: replace(inputs, spec=moved),
            )
        )
    if inputs.policy.get("cgroups"):
        doc = dict(inputs.policy)
        doc["cgroups"] = {
            k: {f: v for f, v in s.items() if f != "dmem.max"}
            for k, s in inputs.policy["cgroups"].items()
        }
        out.append(
            (
                "raise dmem.max of the cgroup chain for this device's region "
                "(`echo '<region> max' > .../dmem.max`)",
                lambda: replace(inputs, policy=doc),
            )
        )
    return out


def _moved(spec: PlatformSpec, device: str, nic: str) -> PlatformSpec | None:
    """The platform with ``nic`` and ``device`` behind one new switch (ACS off) on the device's
    host bridge, or None when they already share a switch."""
    dev = spec.device(device)
    n = next(x for x in spec.nics if x.name == nic)
    if dev.parent == n.parent and dev.parent in {s.name for s in spec.switches}:
        return None
    parent = dev.parent
    names = {s.name for s in spec.switches}
    while parent in names:
        parent = next(s.parent for s in spec.switches if s.name == parent)
    sw = SwitchSpec(name="sw_fix", parent=parent, gen=dev.gen, width=dev.width)
    devices = tuple(
        d.model_copy(update={"parent": "sw_fix"}) if d.name == device else d for d in spec.devices
    )
    nics = tuple(
        x.model_copy(update={"parent": "sw_fix"}) if x.name == nic else x for x in spec.nics
    )
    return spec.model_copy(
        update={"switches": (*spec.switches, sw), "devices": devices, "nics": nics}
    )


def _fixes(inputs: Inputs, snap: Snapshot, report: PairReport) -> tuple[Fix, ...]:
    """Each candidate re-run; kept when it resolves a finding; most resolved first."""
    if not report.findings:
        return ()
    keys = {f.key for f in report.findings}
    kept: list[tuple[int, int, Fix]] = []
    for order, (text, change) in enumerate(_candidates(inputs, report.device, report.nic)):
        after = _evaluate(change(), snap, report.device, report.nic)
        left = {f.key for f in after.findings}
        resolved = tuple(sorted(keys - left))
        if resolved and not (left - keys - {"slow-path"}):
            kept.append((-len(resolved), order, Fix(text, resolved)))
    return tuple(fix for _, _, fix in sorted(kept, key=lambda t: (t[0], t[1])))


# -- entry point ----------------------------------------------------------------------------------


def _host_findings(snap: Snapshot) -> list[Finding]:
    out = []
    for fn in snap.pci:
        if (
            fn.driver == "mlx5_core"
            and not fn.ib_devices
            and snap.kernel.has_module("mlx5_ib") is False
        ):
            out.append(
                Finding(
                    "no-rdma-device",
                    f"{fn.address}: bound to mlx5_core but mlx5_ib is not loaded: no RDMA device "
                    "(`modprobe mlx5_ib`)",
                )
            )
    return out


def diagnose(
    snap: Snapshot,
    *,
    device: str | None = None,
    nic: str | None = None,
    size: int = DEFAULT_SIZE,
    odp: bool = False,
) -> Diagnosis:
    """Diagnose every device × NIC pair of ``snap`` (or the one named). ``ValueError`` names
    a device or NIC the snapshot's platform does not have."""
    plan = snap.plan()
    spec = snapshot_nic_odp(snap, plan.spec)
    aliases = snap.aliases()
    device = aliases.get(device, device) if device is not None else None
    nic = aliases.get(nic, nic) if nic is not None else None
    names = [d.name for d in spec.devices]
    nics = [n.name for n in spec.nics]
    for asked, have, what in ((device, names, "device"), (nic, nics, "NIC")):
        if asked is not None and asked not in have:
            flag = f"--{what.lower()} {asked}" if asked else f"--{what.lower()}"
            found = "none of that name" if asked else "an empty name"
            raise ValueError(
                f"{flag}: expected a {what} of the snapshot ({', '.join(have) or 'none'}), "
                f"found {found}"
            )
    profile, uverbs, notes = closest_profile(snap)
    if not snap.limits.memlock_known:
        notes.append(
            "RLIMIT_MEMLOCK unknown (not in the snapshot; paste `ulimit -a`): Linux's default, "
            f"{fmt_size(DEFAULT_MEMLOCK)}, assumed"
        )
    if snap.limits.capabilities is None:
        notes.append("capabilities unknown (not in the snapshot): CAP_IPC_LOCK not assumed")
    notes += list(snap.notes)
    inputs = Inputs(
        spec,
        profile,
        uverbs,
        snapshot_memlock(snap),
        frozenset({CAP_IPC_LOCK} if snap.limits.has_cap("CAP_IPC_LOCK") else ()),
        host_policy(snap),
        "odp" if odp else "pinned",
        size,
    )
    pairs = []
    for d in [device] if device else names:
        for n in [nic] if nic else nics:
            report = _evaluate(inputs, snap, d, n)
            pairs.append(replace(report, fixes=_fixes(inputs, snap, report)))
    if not names or not nics:
        devs = ", ".join(f"{d.name} ({d.driver})" for d in spec.devices) or "no accelerator"
        have_nics = ", ".join(f"{n.name} ({n.driver})" for n in spec.nics) or "no RDMA NIC"
        notes.insert(
            0,
            f"nothing to diagnose: this host has {devs} and {have_nics} that "
            "pinlab models; a dma-buf MR needs both",
        )
    return Diagnosis(snap.source, size, tuple(pairs), tuple(_host_findings(snap)), tuple(notes))
