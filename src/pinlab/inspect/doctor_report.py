"""What ``pinlab doctor`` prints: :func:`render_diagnosis` (text) and :func:`diagnosis_json`.

Per pair: the profile and its switches, each registration (the steps; a failure with its errno,
function and items), where the buffer sits, the path and its expected rates, the memlock and dmem
headroom (with the ``memlock-dmabuf-pins`` proposal: whether the pin would still fit), the
findings and the fixes in the order :mod:`pinlab.inspect.doctor` ranked them.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from pinlab.inspect.doctor import Diagnosis, PairReport
from pinlab.inspect.doctor_run import Registration, Step
from pinlab.kernel.kernel import RLIM_INFINITY
from pinlab.units import fmt_rate, fmt_size

__all__ = ["diagnosis_json", "render_diagnosis"]


def _limit(n: int) -> str:
    return "unlimited" if n == RLIM_INFINITY else fmt_size(n)


def _registration(reg: Registration) -> str:
    step = reg.failed
    if step is not None:
        return f"fails: {step.text()}"
    where = reg.location or "?"
    kind = "device memory: peer to peer" if where == "vram" else f"{where}: staged through host"
    return f"succeeds; the buffer is in {kind} [{', '.join(reg.items)}]"


def _pair_lines(p: PairReport) -> list[str]:
    sw = ", ".join(f"{k}={'y' if v else 'n'}" for k, v in p.switches.items())
    r = p.rates
    out = [
        f"kernel profile {p.profile} ({sw})",
        f"ibv_reg_dmabuf_mr pinned: {_registration(p.registrations['pinned'])}",
        f"ibv_reg_dmabuf_mr ODP: {_registration(p.registrations['odp'])}",
        f"path: {r.path}; on {r.qps} QPs the NIC writes device memory {fmt_rate(r.p2p_write)}, "
        f"reads it {fmt_rate(r.p2p_read)}; host memory {fmt_rate(r.host_write)} / "
        f"{fmt_rate(r.host_read)}",
        f"RLIMIT_MEMLOCK soft {_limit(p.memlock[0])}, hard {_limit(p.memlock[1])}"
        + (" (assumed: not in the snapshot)" if p.memlock_assumed else "")
        + ": dma-buf pins are not charged (P-12); "
        + p.host_mr.text(),
    ]
    if p.with_proposal is not None:
        verdict = "fits" if p.with_proposal.ok else _registration(p.with_proposal)
        out.append(f"with the memlock-dmabuf-pins proposal the pinned MR {verdict}")
    out.append(p.dmem)
    return out


def render_diagnosis(d: Diagnosis, console: Console) -> None:
    """The diagnosis as text."""
    console.print(Text(f"pinlab doctor: {d.source}; registration size {fmt_size(d.size)}"))
    for note in d.notes:
        console.print(Text(f"note: {note}", style="dim"))
    for f in d.host_findings:
        console.print(Text(f"finding: {f.text}", style="yellow"))
    for p in d.pairs:
        console.rule(Text(f"{p.device} × {p.nic}", style="bold"), align="left")
        for line in _pair_lines(p):
            console.print(Text(line))
        if not p.findings:
            console.print(Text("healthy", style="green"))
        for f in p.findings:
            cite = f" [{', '.join(f.items)}]" if f.items else ""
            console.print(Text(f"finding: {f.text}{cite}", style="yellow"))
        for i, fix in enumerate(p.fixes, 1):
            console.print(Text(f"fix {i}: {fix.text} (resolves {', '.join(fix.resolves)})"))
    verdict = {0: "healthy", 1: "findings"}[d.exit_code]
    console.print(Text(f"verdict: {verdict}", style="bold"))


def _step(s: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"call": s.call, "ok": s.ok}
    if not s.ok:
        out.update(errno=s.errno, function=s.function, reason=s.reason, items=list(s.items))
    return out


def _reg(r: Registration) -> dict[str, Any]:
    return {
        "ok": r.ok,
        "location": r.location,
        "items": list(r.items),
        "steps": [_step(s) for s in r.steps],
    }


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    """The diagnosis as plain JSON."""
    pairs = []
    for p in d.pairs:
        pairs.append(
            {
                "device": p.device,
                "nic": p.nic,
                "profile": p.profile,
                "switches": p.switches,
                "mode": p.mode,
                "registrations": {m: _reg(r) for m, r in p.registrations.items()},
                "with_memlock_dmabuf_pins": None
                if p.with_proposal is None
                else _reg(p.with_proposal),
                "host_mr": _step(p.host_mr),
                "rates": {
                    "path": p.rates.path,
                    "p2p_write": p.rates.p2p_write,
                    "p2p_read": p.rates.p2p_read,
                    "host_write": p.rates.host_write,
                    "host_read": p.rates.host_read,
                    "qps": p.rates.qps,
                },
                "memlock": {
                    "soft": _limit(p.memlock[0]),
                    "hard": _limit(p.memlock[1]),
                    "assumed": p.memlock_assumed,
                },
                "dmem": p.dmem,
                "findings": [
                    {"key": f.key, "text": f.text, "items": list(f.items)} for f in p.findings
                ],
                "fixes": [{"text": f.text, "resolves": list(f.resolves)} for f in p.fixes],
            }
        )
    return {
        "source": d.source,
        "size": d.size,
        "exit_code": d.exit_code,
        "notes": list(d.notes),
        "host_findings": [{"key": f.key, "text": f.text} for f in d.host_findings],
        "pairs": pairs,
    }
