"""``pinlab bench perftest``: linux-rdma perftest (``ib_send_lat`` … ``ib_read_bw``) on a
modelled pair of hosts.

The arguments are perftest's (flag names, defaults and refusals from perftest's
``perftest_parameters.c``: ``-a``, ``-s``, ``-n``, ``-t``, ``-r``, ``-q``, ``-Q``, ``-m``,
``-I``, ``-o``, ``-d``, ``-F``, ``-x``, ``--report_gbits``, ``--use_cuda=<id>`` with
``--use_cuda_dmabuf``, ``--use_rocm=<id>`` with ``--use_rocm_dmabuf``, and pinlab's
``--use_dmabuf --device DEV`` for any exporting device), the output is what the client side
prints: the header block (``ctx_print_test_info``), the address lines, the column header and
one line per size in perftest's number formats, MB/sec meaning MiB/s (2^20 B/s) and Gb/sec
10^9 bit/s. The run is the ``perftest`` workload (:mod:`pinlab.sim.workloads.perftest`): a
server on the second node and the client on the first of a two-node cluster of the platform
(a node platform is doubled; ``cx-pair`` is already a pair).
"""

from __future__ import annotations

import argparse
import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from pydantic import ValidationError

from pinlab import __version__
from pinlab.bench import BenchSetup, BenchTable, register_tool
from pinlab.errors import ConfigError, config_error
from pinlab.kernel.errno import KernelError
from pinlab.platform.cluster import ClusterSpec
from pinlab.platform.presets import PRESETS, resolve_platform
from pinlab.platform.spec import PlatformSpec
from pinlab.sim.engine import Simulation
from pinlab.sim.workloads import spawn
from pinlab.sim.workloads.base import MAX_EVENTS
from pinlab.sim.workloads.perftest import (
    ALL_SIZES,
    BwRow,
    LatRow,
    PerftestParams,
    PerftestResult,
)
from pinlab.units import parse_size

__all__ = ["TESTS", "TOOL", "parse_args"]

TESTS: dict[str, tuple[str, str]] = {
    f"ib_{verb}_{kind}": (verb, kind)
    for verb in ("send", "write", "read")
    for kind in ("lat", "bw")
}
"""The six tools, ``ib_<verb>_<kind>``: name → (verb, kind), in perftest's order (``ib_send_lat``
first)."""

RESULT_LINE = "-" * 87
_VERB = {"send": "Send", "write": "RDMA_Write", "read": "RDMA_Read"}
_SOURCE = "perftest"

# perftest_parameters.h
DEF_ITERS = 1000
DEF_ITERS_WB = 5000
DEF_TX_BW = 128
DEF_TX_LAT = 1
DEF_RX_SEND = 512
DEF_CQ_MOD = 100
DEF_SIZE_BW = 65536
DEF_SIZE_LAT = 2
MIN_ITER = 5
MAX_TX = 15000
MSG_SIZE_CQ_MOD_LIMIT = 8192
PEAK_ITERS_LIMIT = 20000
CQE_POLL_BATCH = 16
MTUS = (256, 512, 1024, 2048, 4096)
# default inline sizes of RC latency tests (DEF_INLINE_WRITE, DEF_INLINE_SEND_RC_UC) and the
# per-device ones perftest sets (EFA 32 B)
_INLINE = {"write": 220, "send": 236}
_INLINE_EFA = 32

BW_COLUMNS = ("#bytes", "#iterations", "BW peak[{u}]", "BW average[{u}]", "MsgRate[Mpps]")
LAT_COLUMNS = (
    "#bytes",
    "#iterations",
    "t_min[usec]",
    "t_max[usec]",
    "t_typical[usec]",
    "t_avg[usec]",
    "t_stdev[usec]",
    "99% percentile[usec]",
    "99.9% percentile[usec]",
)
_BW_HEAD = " #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]"
_LAT_HEAD = (
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
    "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
)
_BW_FMT = " %-7d    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f"
_BW_FMT_EXT = " %-7d    %d           %-7.6f            %-7.6f            %-7.6f"
_LAT_FMT = (
    " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f "
    "\t\t%-7.2f"
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one :class:`ConfigError` line, never exits."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(_SOURCE, self.prog, f"expected perftest's arguments: {message}")


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, found {text!r}") from None


def _size(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size in bytes, found {text!r}") from None


def _parser(test: str) -> _Parser:
    p = _Parser(prog=test, add_help=False, allow_abbrev=False)
    p.add_argument("server", nargs="?", help="the server's address (where the client connects)")
    p.add_argument("-a", "--all", action="store_true")
    p.add_argument("-s", "--size", type=_size)
    p.add_argument("-n", "--iters", type=_int)
    p.add_argument("-t", "--tx-depth", dest="tx_depth", type=_int)
    p.add_argument("-r", "--rx-depth", dest="rx_depth", type=_int)
    p.add_argument("-q", "--qp", dest="qps", type=_int)
    p.add_argument("-Q", "--cq-mod", dest="cq_mod", type=_int)
    p.add_argument("-m", "--mtu", type=_int)
    p.add_argument("-I", "--inline_size", type=_int)
    p.add_argument("-o", "--outs", type=_int)
    p.add_argument("-d", "--ib-dev", dest="device_name")
    p.add_argument("-i", "--ib-port", dest="ib_port", type=_int, default=1)
    p.add_argument("-x", "--gid-index", dest="gid_index", type=_int)
    p.add_argument("-c", "--connection", default="RC")
    p.add_argument("-F", "--CPU-freq", dest="cpu_freq", action="store_true")
    p.add_argument("-p", "--port", type=_int)
    p.add_argument("--report_gbits", action="store_true")
    p.add_argument("--use_cuda", type=_int)
    p.add_argument("--use_cuda_dmabuf", action="store_true")
    p.add_argument("--use_rocm", type=_int)
    p.add_argument("--use_rocm_dmabuf", action="store_true")
    p.add_argument("--use_dmabuf", action="store_true")
    p.add_argument("--device")
    return p


@dataclass(frozen=True, slots=True)
class Options:
    """A parsed perftest command line: the test's name, the workload's parameters it sets
    (``params``: verb, kind, sizes, iterations, depths, QPs, moderation, MTU, outstanding
    reads, the ``-d`` device or None for the node's first) and what only the command line
    says -- ``-a``, ``-I`` as given (None: perftest's default, which depends on the NIC and
    the memory), the GID index, the report unit and the memory flags."""

    test: str
    params: PerftestParams
    run_all: bool
    inline: int | None
    gid_index: int | None
    report_gbits: bool
    memory: str  # "host", "cuda", "rocm", "dmabuf"
    gpu_index: int | None
    device: str | None
    dmabuf: bool


def _bad(flag: str, message: str) -> ConfigError:
    return ConfigError(_SOURCE, flag, message)


def parse_args(argv: Sequence[str]) -> Options:
    """perftest's command line (test name first) as :class:`Options`, with perftest's
    defaults and refusals; :class:`ConfigError` naming the flag otherwise."""
    if not argv:
        raise _bad("test", f"expected one of {', '.join(TESTS)}, found nothing")
    test = argv[0]
    if test not in TESTS:
        raise _bad("test", f"expected one of {', '.join(TESTS)}, found {test!r}")
    verb, kind = TESTS[test]
    ns = _parser(test).parse_args(list(argv[1:]))
    if ns.connection != "RC":
        raise _bad(
            "-c", f"expected RC (the only connection type modelled), found {ns.connection!r}"
        )
    if ns.ib_port != 1:
        raise _bad("-i", f"expected port 1 (one port per NIC), found {ns.ib_port}")
    iters = (
        ns.iters
        if ns.iters is not None
        else (DEF_ITERS_WB if (verb, kind) == ("write", "bw") else DEF_ITERS)
    )
    if iters < MIN_ITER:
        raise _bad("-n", f"expected an iteration count of at least {MIN_ITER}, found {iters}")
    if ns.size is not None and not 1 <= ns.size <= 2**31 - 1:
        raise _bad("-s", f"expected a message size between 1 and {2**31 - 1}, found {ns.size}")
    if ns.mtu is not None and ns.mtu not in MTUS:
        raise _bad("-m", f"expected an MTU of {', '.join(map(str, MTUS))}, found {ns.mtu}")
    if ns.qps is not None and kind == "lat":
        raise _bad("-q", "expected no -q in a latency test (it is a BW option), found it")
    qps = ns.qps if ns.qps is not None else 1
    if not 1 <= qps <= 16384:
        raise _bad("-q", f"expected 1 to 16384 QPs, found {qps}")
    tx_depth = (
        ns.tx_depth if ns.tx_depth is not None else (DEF_TX_BW if kind == "bw" else DEF_TX_LAT)
    )
    if not 1 <= tx_depth <= MAX_TX:
        raise _bad("-t", f"expected a TX depth of 1 to {MAX_TX}, found {tx_depth}")
    tx_depth = min(tx_depth, iters)
    rx_depth = ns.rx_depth if ns.rx_depth is not None else DEF_RX_SEND
    if rx_depth < 1:
        raise _bad("-r", f"expected a positive RX depth, found {rx_depth}")
    rx_depth = min(rx_depth + rx_depth % 2, iters)
    memory, gpu_index, device, dmabuf = _memory(ns, verb, kind)
    if ns.all:
        sizes = ALL_SIZES
    else:
        sizes = (
            ns.size if ns.size is not None else (DEF_SIZE_BW if kind == "bw" else DEF_SIZE_LAT),
        )
    cq_mod = ns.cq_mod if ns.cq_mod is not None else DEF_CQ_MOD
    if cq_mod < 1:
        raise _bad("-Q", f"expected a positive CQ moderation, found {cq_mod}")
    if ns.cq_mod is None and not ns.all and sizes[0] > MSG_SIZE_CQ_MOD_LIMIT:
        cq_mod = 1  # force_dependecies: no moderation for large messages
    cq_mod = min(cq_mod, tx_depth)
    inline = ns.inline_size
    if inline is not None and inline < 0:
        raise _bad("-I", f"expected a non-negative inline size, found {inline}")
    if memory != "host" and inline is not None and min(sizes) <= inline:
        raise _bad(
            "-I",
            "expected no inline messages with device memory (Perftest doesn't support device "
            f"memory tests with inline messages), found -I {inline}",
        )
    if ns.outs is not None and verb != "read":
        raise _bad("-o", "expected -o only with RDMA READ tests, found it")
    if ns.outs is not None and ns.outs < 1:
        raise _bad("-o", f"expected a positive number of outstanding reads, found {ns.outs}")
    try:
        params = PerftestParams(
            test=verb,  # type: ignore[arg-type]
            kind=kind,  # type: ignore[arg-type]
            sizes=list(sizes),
            iterations=iters,
            tx_depth=tx_depth,
            rx_depth=rx_depth,
            qps=qps,
            cq_mod=cq_mod,
            mtu=ns.mtu,
            out_reads=ns.outs,
            nic=ns.device_name,
        )
    except ValidationError as e:
        raise config_error(e, _SOURCE) from None
    planned = params.events(0.0)
    if planned > MAX_EVENTS:
        # the bound a scenario's tenant has: every message is simulated one by one
        trips = " x 2 trips" if kind == "lat" else ""
        raise _bad(
            "-n",
            f"expected at most {MAX_EVENTS:.0e} workload iterations in a run, found "
            f"{int(planned)} ({iters} iterations x {len(sizes)} message size"
            f"{'s' if len(sizes) != 1 else ''} x {qps} QP{'s' if qps != 1 else ''}{trips})",
        )
    return Options(
        test=test,
        params=params,
        run_all=ns.all,
        inline=inline,
        gid_index=ns.gid_index,
        report_gbits=ns.report_gbits,
        memory=memory,
        gpu_index=gpu_index,
        device=device,
        dmabuf=dmabuf,
    )


def _memory(
    ns: argparse.Namespace, verb: str, kind: str
) -> tuple[str, int | None, str | None, bool]:
    """(memory type, GPU index, device name, dma-buf) from the GPU-memory flags."""
    chosen = [
        f
        for f, on in (
            ("--use_cuda", ns.use_cuda is not None),
            ("--use_rocm", ns.use_rocm is not None),
            ("--use_dmabuf", ns.use_dmabuf),
        )
        if on
    ]
    if len(chosen) > 1:
        raise _bad(chosen[1], f"expected one kind of device memory, found {' and '.join(chosen)}")
    if ns.use_cuda_dmabuf and ns.use_cuda is None:
        raise _bad("--use_cuda_dmabuf", "expected --use_cuda=<id> with it, found none")
    if ns.use_rocm_dmabuf and ns.use_rocm is None:
        raise _bad("--use_rocm_dmabuf", "expected --use_rocm=<id> with it, found none")
    if ns.device is not None and not ns.use_dmabuf:
        raise _bad("--device", "expected --use_dmabuf with it, found none")
    if ns.use_dmabuf and ns.device is None:
        raise _bad("--use_dmabuf", "expected --device DEV (an exporting device), found none")
    if ns.use_cuda is not None:
        if kind == "lat" and verb == "write":
            raise _bad(
                "--use_cuda",
                "expected host memory for ib_write_lat (Perftest doesn't support device memory "
                "latency test with write (without immediate) verb; use --write_with_imm), "
                "found CUDA memory",
            )
        return "cuda", ns.use_cuda, None, bool(ns.use_cuda_dmabuf)
    if ns.use_rocm is not None:
        return "rocm", ns.use_rocm, None, bool(ns.use_rocm_dmabuf)
    if ns.use_dmabuf:
        return "dmabuf", None, ns.device, True
    return "host", None, None, False


# -- the platform --------------------------------------------------------------------------------


def _pair(platform: str, params: Mapping[str, Any], nodes: int | None) -> ClusterSpec:
    """The two-node cluster the run needs: the platform itself if it is a cluster of two or
    more nodes, else two copies of the node."""
    if nodes is not None and nodes != 2:
        raise _bad("--nodes", f"expected 2 (perftest runs between two hosts), found {nodes}")
    try:
        spec = resolve_platform(platform, **params)
    except ConfigError:
        raise
    except (OSError, ValueError) as e:
        known = ", ".join(PRESETS)
        raise _bad(
            "--platform",
            f"expected a preset ({known}) or a platform file, found {platform!r} ({e})",
        ) from None
    if isinstance(spec, ClusterSpec):
        if spec.nodes < 2:
            raise _bad("--platform", f"expected at least two nodes, found {spec.nodes}")
        return spec
    assert isinstance(spec, PlatformSpec)
    return ClusterSpec(name=f"pair-{spec.name}", nodes=2, node=spec)


def _memory_device(opts: Options, node: PlatformSpec) -> str | None:
    """The exporting device whose memory holds the buffer (None: host memory)."""
    if opts.memory == "host":
        return None
    if opts.memory == "dmabuf":
        names = [d.name for d in node.devices]
        if opts.device not in names:
            raise _bad(
                "--device",
                f"expected a device of {node.name} ({', '.join(names) or 'none'}), "
                f"found {opts.device!r}",
            )
        return opts.device
    driver = "nvidia-compute" if opts.memory == "cuda" else "amdgpu"
    flag = "--use_cuda" if opts.memory == "cuda" else "--use_rocm"
    gpus = [d.name for d in node.devices if d.driver == driver]
    assert opts.gpu_index is not None
    if not 0 <= opts.gpu_index < len(gpus):
        raise _bad(
            flag,
            f"expected a {driver} device index below {len(gpus)} on {node.name}, "
            f"found {opts.gpu_index}",
        )
    return gpus[opts.gpu_index]


def _nic(opts: Options, node: PlatformSpec) -> str:
    names = [n.name for n in node.nics]
    if not names:
        raise _bad("-d", f"expected an RDMA NIC on {node.name}, found none")
    chosen = opts.params.nic
    if chosen is None:
        return names[0]
    if chosen not in names:
        raise _bad(
            "-d", f"expected an IB device of {node.name} ({', '.join(names)}), found {chosen!r}"
        )
    return chosen


def _overrides(sets: Sequence[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError("--set", item, "expected key=value, found no '='")
        out[key.strip()] = value.strip()
    return out


# -- running -------------------------------------------------------------------------------------


def _run(argv: Sequence[str], setup: BenchSetup) -> BenchTable:
    opts = parse_args(argv)
    p = opts.params
    pair = _pair(setup.platform, setup.platform_params, setup.nodes)
    node = pair.node
    nic = _nic(opts, node)
    device = _memory_device(opts, node)
    nic_spec = next(n for n in node.nics if n.name == nic)
    efa = nic_spec.model_name == "efa"
    if p.kind == "lat" and p.test == "write" and device is not None:
        drv = next(d.driver for d in node.devices if d.name == device)
        if drv == "nvidia-compute":
            raise _bad(
                "--use_dmabuf",
                "expected host memory for ib_write_lat (Perftest "
                "doesn't support device memory latency test with write (without "
                "immediate) verb), found CUDA memory",
            )
    overrides = _overrides(setup.sets)
    try:
        sim = Simulation(pair, cost_overrides=overrides, seed=setup.seed, sample_interval=1e9)
    except ConfigError:
        raise
    inline = opts.inline
    if inline is None:
        if p.kind == "bw" or p.test == "read" or device is not None:
            inline = 0  # BW tests never inline; device memory forces 0 (ctx_set_max_inline)
        else:
            inline = _INLINE_EFA if efa else _INLINE[p.test]
    if p.test == "read":
        inline = 0
    # what the platform decides: the NIC, the buffer's device and perftest's inline default
    params = p.model_copy(update={"nic": nic, "device": device, "inline_size": inline})
    root = {"uid": 0, "cap_ipc_lock": True}
    names = pair.node_names()
    server = spawn(
        sim,
        "server",
        params.model_copy(update={"role": "server"}),
        node=names[1],
        process_args=root,
    )
    client = spawn(sim, "client", params, node=names[0], process_args=root)
    sim.run(1e7)
    for tenant in (server, client):
        err = tenant.error
        if err is not None:
            what = "registration" if isinstance(err, KernelError) else "run"
            raise ConfigError(_SOURCE, tenant.name, f"expected the {what} to succeed, found: {err}")
    result = client.result
    assert isinstance(result, PerftestResult)
    if not result.rows:
        raise ConfigError(_SOURCE, "client", "expected results, found none (the run did not end)")
    text, columns, rows = _render(opts, result, nic_spec.name, efa, inline, setup.seed)
    meta = {
        "platform": pair.name,
        "node": node.name,
        "nic": nic,
        "nic_model": nic_spec.model_name,
        "link_layer": result.link_layer,
        "mtu": result.mtu,
        "memory": result.device,
        "p2p": bool(result.p2p),
        "seed": setup.seed,
        "pinlab": __version__,
        "sets": dict(overrides),
    }
    return BenchTable("perftest", opts.test, columns, rows, text, meta)


# -- output --------------------------------------------------------------------------------------


def _address(
    rng: random.Random,
    side: str,
    lid: int,
    ib: bool,
    read: bool,
    write: bool,
    out_reads: int,
    gid: tuple[int, ...] | None,
) -> list[str]:
    qpn = rng.randrange(0x100, 0x4000)
    psn = rng.randrange(0, 1 << 24)
    line = f" {side} address: LID {_hex(lid if ib else 0, 4)} QPN {_hex(qpn, 6)} PSN {_hex(psn, 6)}"
    if read:
        line += f" OUT {_hex(out_reads, 4)}"
    if read or write:
        rkey = rng.randrange(0x1000, 1 << 24)
        vaddr = 0x7F0000000000 + rng.randrange(0, 1 << 28) * 0x1000
        line += f" RKey {_hex(rkey, 8)} VAddr {_hex(vaddr, 16)}"
    out = [line]
    if gid is not None:
        out.append(f" GID: {':'.join(f'{b:02d}' for b in gid)}")
    return out


def _hex(value: int, width: int) -> str:
    """C's ``%#0<width>x``: ``0x`` counts in the width, zero padded (0 prints as 0...0)."""
    if value == 0:
        return "0" * width
    return format(value, f"#0{width}x")


def _render(
    opts: Options, r: PerftestResult, nic: str, efa: bool, inline: int, seed: int
) -> tuple[str, tuple[str, ...], tuple[tuple[float | int, ...], ...]]:
    p = opts.params
    ib = r.link_layer == "ib"
    lines: list[str] = []
    if opts.dmabuf and r.device and not r.device.startswith("host"):
        size = 2 * max(max(p.sizes), 4096) * p.qps
        lines.append(
            f"Calling ibv_reg_dmabuf_mr(offset=0, size={size}, addr=0x7f0000000000, fd=4) for QP #0"
        )
    title = f"{_VERB[p.test]} {'BW' if p.kind == 'bw' else 'Latency'} Test"
    link = "IB" if ib else ("Ethernet" if r.link_layer == "roce" else "Unknown")
    transport = "Unknown" if efa else "IB"
    conn = "SRD" if efa else "RC"
    lines += [
        RESULT_LINE,
        " " * 20 + title,
        f" Dual-port       : OFF\t\tDevice         : {nic}",
        f" Number of qps   : {p.qps}\t\tTransport type : {transport}",
        f" Connection type : {conn}\t\tUsing SRQ      : OFF",
        " PCIe relax order: ON\t\tLock-free      : OFF",
        " ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF",
        f" TX depth        : {p.tx_depth}",
    ]
    if p.kind == "bw":
        lines.append(f" CQ Moderation   : {p.cq_mod}")
        lines.append(f" CQE Poll Batch  : {CQE_POLL_BATCH}")
    lines.append(f" Mtu             : {r.mtu}[B]")
    lines.append(f" Link type       : {link}")
    gid_index = opts.gid_index if opts.gid_index is not None else (None if ib else 3)
    if gid_index is not None:
        lines.append(f" GID index       : {gid_index}")
    if p.test == "read":
        lines.append(f" Outstand reads  : {r.out_reads}")
    else:
        lines.append(f" Max inline data : {inline}[B]")
    lines += [" rdma_cm QPs\t : OFF", " Data ex. method : Ethernet", RESULT_LINE]
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{seed}:addr".encode()).digest()[:8], "big"))
    rdma = p.test in ("read", "write")
    for side, lid, host in (("local", 1, 1), ("remote", 2, 2)):
        gid = None if gid_index is None else (0,) * 10 + (255, 255, 192, 168, 1, host)
        for _ in range(p.qps):
            lines += _address(rng, side, lid, ib, p.test == "read", rdma, r.out_reads, gid)
    lines.append(RESULT_LINE)
    if p.kind == "bw":
        unit = "Gb/sec" if opts.report_gbits else "MiB/sec"
        lines.append(_BW_HEAD.format(u=unit))
        factor = 1.25e8 if opts.report_gbits else float(1 << 20)
        columns = tuple(c.format(u=unit) for c in BW_COLUMNS)
        rows: list[tuple[float | int, ...]] = []
        if any(isinstance(x, BwRow) and x.peak == 0 for x in r.rows):
            lines.insert(0, " WARNING: BW peak won't be measured in this run.")
        for row in r.rows:
            assert isinstance(row, BwRow)
            peak, avg = row.peak / factor, row.average / factor
            ext = opts.report_gbits and avg < 0.1
            fmt = _BW_FMT_EXT if ext else _BW_FMT
            lines.append(fmt % (row.size, row.iterations, peak, avg, row.msg_rate))
            rows.append((row.size, row.iterations, peak, avg, row.msg_rate))
    else:
        lines.append(_LAT_HEAD)
        columns = LAT_COLUMNS
        rows = []
        for lrow in r.rows:
            assert isinstance(lrow, LatRow)
            vals = (
                lrow.t_min,
                lrow.t_max,
                lrow.t_typical,
                lrow.t_avg,
                lrow.t_stdev,
                lrow.p99,
                lrow.p999,
            )
            lines.append(_LAT_FMT % (lrow.size, lrow.iterations, *vals))
            rows.append((lrow.size, lrow.iterations, *vals))
    lines.append(RESULT_LINE)
    return "\n".join(lines) + "\n", columns, tuple(rows)


TOOL = register_tool(
    "perftest", "linux-rdma perftest: ib_{send,write,read}_{lat,bw} between two hosts", _run
)
