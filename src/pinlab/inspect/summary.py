"""What ``pinlab inspect`` prints: one section per source with its status, then the platform.

:func:`plan_host` maps a :class:`~pinlab.inspect.host.HostReport` to a platform;
:func:`check_platform` proves the written file loads with
:func:`~pinlab.platform.presets.load_platform` and builds with
:func:`~pinlab.platform.builder.build` (what ``pinlab run --platform`` does);
:func:`render_summary` prints the rich summary and :func:`summary_json` the same as JSON.
The interpretation lines quote the kernel rules they rest on (``policy-semantics.md`` §1.2 for
RLIMIT_MEMLOCK and CAP_IPC_LOCK, §2 for dmem, ``kernel-semantics.md`` §8.3 for the CPU rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pinlab.errors import ConfigError
from pinlab.inspect.host import HostReport
from pinlab.inspect.pci import PciFunction
from pinlab.inspect.platform import NAMED_MODULES, PlatformPlan, plan_platform, use_it
from pinlab.inspect.snapshot import kernel_facts
from pinlab.inspect.source import MISSING, NOT_APPLICABLE, OK
from pinlab.kernel.profile import DEFAULT_PROFILE, get_profile
from pinlab.platform import PlatformSpec, build
from pinlab.platform.presets import load_platform
from pinlab.units import fmt_size

__all__ = ["PlatformCheck", "check_platform", "plan_host", "render_summary", "summary_json"]

_TITLES = {
    "memlock": "RLIMIT_MEMLOCK",
    "capabilities": "capabilities",
    "cgroup": "cgroup v2",
    "dmem": "dmem controller",
    "bufinfo": "dma-buf bufinfo (debugfs)",
    "pci": "PCI tree",
    "cpu": "CPU",
    "memory": "host memory",
    "system": "kernel",
    "kernel": "kernel build and modules",
    "memcg": "memory cgroup",
}


def plan_host(report: HostReport, name: str | None = None) -> PlatformPlan:
    """The platform of ``report`` (:func:`~pinlab.inspect.platform.plan_platform`)."""
    return plan_platform(
        report.pci,
        report.cpu,
        report.memory,
        dmem=report.dmem,
        system=report.system,
        name=name,
        kernel_config=kernel_facts(report).config_switches(),
    )


@dataclass(frozen=True, slots=True)
class PlatformCheck:
    """Whether the written file loads back equal and builds under ``profile``."""

    ok: bool
    profile: str
    message: str


def check_platform(
    path: str | Path, spec: PlatformSpec, profile: str | None = None
) -> PlatformCheck:
    """Load ``path`` (as ``pinlab run --platform`` does) and build it under ``profile``
    (default: the profile the file names, else the default one, with the file's
    ``[kernel_config]`` switches, as a run on it starts)."""
    profile = profile or spec.kernel or DEFAULT_PROFILE
    base = get_profile(profile)
    switches = {} if spec.kernel_config is None else spec.kernel_config.for_profile(base)
    under = f"kernel profile {profile}" + "".join(
        f", {k} = {'true' if v else 'false'}" for k, v in switches.items()
    )
    try:
        loaded = load_platform(path)
    except ConfigError as e:
        return PlatformCheck(False, profile, f"does not load: {e}")
    if loaded != spec:
        return PlatformCheck(False, profile, "loads, but differs from what was written")
    assert isinstance(loaded, PlatformSpec)
    try:
        machine = build(loaded, base.with_(**switches))
    except (ConfigError, ValueError) as e:
        return PlatformCheck(False, profile, f"loads, but does not build under {under}: {e}")
    return PlatformCheck(True, profile, f"loads and builds under {under}: {machine!r}")


# -- text -----------------------------------------------------------------------------------------


def _style(status: str) -> str:
    if status == OK:
        return "green"
    if status == MISSING:
        return "yellow"
    if status == NOT_APPLICABLE:
        return "dim"
    return "red"


def _size(n: int | None) -> str:
    return "unlimited" if n is None else fmt_size(n)


def _n(count: int, word: str) -> str:
    """``1 host bridge``, ``2 host bridges``."""
    return f"{count} {word}" + ("" if count == 1 else ("es" if word.endswith(("ch", "s")) else "s"))


def _yes(flag: bool | None) -> str:
    return "unknown" if flag is None else ("yes" if flag else "no")


def _lines(report: HostReport, key: str) -> list[str]:
    r = report
    out: list[str] = []
    if key == "memlock" and r.memlock.status == OK:
        m = r.memlock
        out.append(f"soft {_size(m.soft)}, hard {_size(m.hard)}")
        if m.locked_vm is not None or m.pinned_vm is not None:
            out.append(
                f"this process: VmLck (mm->locked_vm) {_size(m.locked_vm or 0)}, "
                f"VmPin (mm->pinned_vm) {_size(m.pinned_vm or 0)}"
            )
        cap = r.capabilities.cap_ipc_lock
        if cap:
            out.append(
                "CAP_IPC_LOCK: the limit is not enforced for this process (pages still counted)"
            )
        elif m.soft == 0:
            out.append(
                "a zero limit without CAP_IPC_LOCK: mlock and ib_umem_get fail with EPERM "
                "(can_do_mlock)"
            )
        else:
            out.append(
                f"mlock and ib_umem_get may each lock/pin up to {_size(m.soft)} per mm "
                "(ENOMEM beyond); dma-buf pins are not charged upstream"
            )
    elif key == "capabilities" and r.capabilities.status == OK:
        caps = r.capabilities
        out.append(
            f"CapEff 0x{caps.effective or 0:016x}: CAP_IPC_LOCK {_yes(caps.cap_ipc_lock)}, "
            f"CAP_SYS_RESOURCE {_yes(caps.cap_sys_resource)}"
        )
    elif key == "cgroup" and r.cgroup.mount is not None:
        g = r.cgroup
        mode = g.mode or "?"
        if g.v1_controllers:
            mode += f": v1 hierarchies for {', '.join(g.v1_controllers)}"
        out.append(f"cgroup2 at {g.mount} ({mode})")
        out.append(f"caller's cgroup: {g.path or 'unknown'}")
        out.append(
            f"controllers here: {' '.join(g.controllers) or 'none'}; "
            f"at the root: {' '.join(g.root_controllers) or 'none'}"
        )
    elif key == "dmem" and r.dmem.status == OK:
        d = r.dmem
        for region, size in d.capacity.items():
            out.append(f"dmem.capacity {region} {fmt_size(size)}")
        for f in d.files:
            if f.status != OK:
                out.append(f"{f.cgroup} {f.name}: {f.status}")
            for region, value in f.values.items():
                out.append(
                    f"{f.cgroup} {f.name} {region} {_size(value).replace('unlimited', 'max')}"
                )
    elif key == "bufinfo" and r.bufinfo.dump is not None:
        dump = r.bufinfo.dump
        exporters: dict[str, int] = {}
        for rec in dump.objects:
            exporters[rec.exp_name] = exporters.get(rec.exp_name, 0) + 1
        out.append(
            f"{len(dump.objects)} buffers, {fmt_size(sum(o.size for o in dump.objects))}, "
            f"{sum(len(o.attached_devices) for o in dump.objects)} attachments"
        )
        if exporters:
            out.append("exporters: " + ", ".join(f"{k} × {v}" for k, v in exporters.items()))
    elif key == "pci" and r.pci.status == OK:
        fns = r.pci.functions
        buses = sorted({f.root_bus for f in fns})
        bridges = [f for f in fns if f.is_bridge]
        types = [f.port_type for f in bridges]
        out.append(
            f"{_n(len(fns), 'function')} on {_n(len(buses), 'root bus')}; bridges: "
            f"{_n(types.count('root_port'), 'root port')}, "
            f"{_n(types.count('upstream'), 'switch upstream port')}, "
            f"{_n(types.count('downstream'), 'downstream port')}; "
            f"{sum(f.is_display for f in fns)} display, {sum(f.is_network for f in fns)} "
            f"network, {sum(f.is_accelerator for f in fns)} accelerator functions"
        )
        out.extend(f"skipped {p}" for p in r.pci.problems)
    elif key == "kernel" and r.kernel.status == OK:
        k = r.kernel
        if k.config_source is not None:
            out.append(
                "config: "
                + (
                    ", ".join(f"{n}={v}" for n, v in k.config.items())
                    or "none of the dma-buf options"
                )
            )
        if k.modules is not None:
            shown = [m for m in k.modules if m in NAMED_MODULES]
            out.append(
                f"{len(k.modules)} modules loaded; of interest: {', '.join(shown) or 'none'}"
            )
        if k.symbols is not None:
            out.append(f"kallsyms: {', '.join(k.symbols) or 'no dma-buf/umem symbol'}")
    elif key == "memcg" and r.memcg.status == OK:
        for path, value in r.memcg.limits:
            out.append(f"{path} memory.max {_size(value).replace('unlimited', 'max')}")
    elif key == "cpu" and r.cpu.status == OK:
        c = r.cpu
        out.append(
            f"{c.vendor_id or 'unknown vendor'} family 0x{c.family:x} ({c.model or '?'}), "
            f"{c.sockets} socket{'s' if c.sockets != 1 else ''}"
        )
        if c.supports_p2pdma:
            out.append(
                "cpu_supports_p2pdma(): yes (AMD Zen or later): P2P through a host bridge is "
                "allowed whatever the whitelist says"
            )
        else:
            out.append(
                "cpu_supports_p2pdma(): no: P2P through a host bridge needs whitelisted bridges"
            )
    elif key == "memory" and r.memory.total is not None:
        out.append(f"MemTotal {fmt_size(r.memory.total)}")
    elif key == "system" and r.system.status == OK:
        out.append(f"Linux {r.system.release} on {r.system.hostname or '?'}")
    return out


def _pci_table(report: HostReport, plan: PlatformPlan) -> Table | None:
    """The functions that matter to the platform: host bridge functions, bridges, display /
    network / accelerator functions (other classes are counted, not listed)."""
    if report.pci.status != OK or not report.pci.functions:
        return None
    names = {m.address: m.name for m in plan.mapped}
    table = Table(title_justify="left", show_edge=False, pad_edge=False)
    for col in ("address", "id", "class", "port type", "parent", "driver", "pinlab"):
        table.add_column(col)
    shown = 0

    def relevant(f: PciFunction) -> bool:
        return (
            f.is_bridge
            or f.is_display
            or f.is_network
            or f.is_accelerator
            or (f.address.endswith(":00.0") and f.parent is None and f.class_subclass == 0x0600)
        )

    for f in report.pci.functions:
        if not relevant(f):
            continue
        shown += 1
        pinlab = names.get(f.address, "")
        if not pinlab and f.address.endswith(":00.0") and f.parent is None:
            pinlab = names.get(f"pci{f.root_bus}", "")
        table.add_row(
            f.address,
            f"{f.vendor:04x}:{f.device:04x}",
            f.kind,
            f"{f.port_type or '?'} ({f.port_type_source})" if f.port_type else "?",
            f.parent or f"pci{f.root_bus}",
            f.driver or "-",
            pinlab or "-",
        )
    others = len(report.pci.functions) - shown
    table.caption = f"{others} other functions (storage, USB, ...) not listed" if others else None
    return table if shown else None


def render_summary(
    report: HostReport,
    plan: PlatformPlan,
    out: Path,
    check: PlatformCheck,
    console: Console,
) -> None:
    """Print the summary: each source with its status and what it means, then the platform."""
    for key, record in report.sources().items():
        status: str = record.status
        console.rule(
            Text.assemble((_TITLES[key], "bold"), "  ", (status, _style(status))),
            align="left",
        )
        source = getattr(record, "source", "")
        if source:
            console.print(Text(f"source: {source}", style="dim"))
        detail = getattr(record, "detail", "")
        if detail:
            console.print(Text(detail))
        for line in _lines(report, key):
            console.print(Text(line))
        if key == "pci":
            table = _pci_table(report, plan)
            if table is not None:
                console.print(table)
    spec = plan.spec
    console.rule(Text.assemble(("platform file", "bold"), "  ", (str(out), "cyan")), align="left")
    console.print(
        Text(
            f"{spec.name}: {_n(len(spec.host_bridges), 'host bridge')}, "
            f"{_n(len(spec.switches), 'switch')}, {_n(len(spec.devices), 'device')}, "
            f"{_n(len(spec.nics), 'RDMA NIC')}, {_n(len(spec.displays), 'display')}; "
            f"CPU {spec.cpu.vendor} 0x{spec.cpu.family:x}, {_n(spec.cpu.sockets, 'socket')} "
            f"× {fmt_size(spec.dram.size)} DRAM; suggested kernel profile "
            f"{spec.kernel or 'none'}"
        )
    )
    for m in plan.mapped:
        console.print(Text(f"  {m.name} = {m.address}: {m.kind}, {m.what}"))
    for s in plan.skipped:
        console.print(Text(f"  not mapped: {s}", style="dim"))
    for n in plan.notes:
        console.print(Text(f"  note: {n}", style="yellow"))
    console.print(
        Text.assemble(
            ("  check: ", "bold"),
            ("ok" if check.ok else "FAILED", "green" if check.ok else "red"),
            f" -- {check.message}",
        )
    )
    console.print(Text(f"  use it: {use_it(out)}", style="bold"))


def summary_json(
    report: HostReport, plan: PlatformPlan, out: Path, check: PlatformCheck
) -> dict[str, Any]:
    """Everything :func:`render_summary` shows, as plain JSON types."""
    data: dict[str, Any] = {"root": str(report.root)}
    for key, record in report.sources().items():
        data[key] = record.to_json()
    data["platform"] = {
        "path": str(out),
        "name": plan.spec.name,
        "kernel": plan.spec.kernel,
        "kernel_config": {}
        if plan.spec.kernel_config is None
        else plan.spec.kernel_config.switches(),
        "host_bridges": len(plan.spec.host_bridges),
        "switches": len(plan.spec.switches),
        "devices": len(plan.spec.devices),
        "nics": len(plan.spec.nics),
        "displays": len(plan.spec.displays),
        "mapped": [m.to_json() for m in plan.mapped],
        "skipped": list(plan.skipped),
        "notes": list(plan.notes),
        "check": {"ok": check.ok, "profile": check.profile, "message": check.message},
    }
    return data
