"""``CostModel``: every number of ``cost-model.md`` §2–§8, with its unit, sweep range and source.

The model is a frozen pydantic tree whose leaves are the doc's rows. Keys follow the doc's
dotted names (``pcie.efficiency``, ``nic.cx6.qp_msg_cost``, ``odp.fault``), spelled as
valid Python (``pcie.gen3.raw`` → ``cost.pcie.gen3.raw``). Each leaf's ``Field`` carries the
doc row as metadata: ``description``, and ``json_schema_extra`` with ``unit`` (a unit string
:mod:`pinlab.units` parses, used to show the value as the doc does), ``section``
(``"§2.1"``), ``source``, ``sweep`` (``[low, high]`` in that unit, absent for fixed facts),
``choices`` (discrete sweep values), ``marker`` (``derived``/``assumption``/``unverified``) and
``confidence`` (``high``/``medium``/``low``: :data:`Confidence`; ``pinlab run --robust`` varies
the low ones over their sweep).
:func:`parameters` lists them all (``pinlab params``; docs).

Values are stored in base units: bytes, bytes/s, seconds, seconds per byte, plain floats.

Keys pinlab adds (marked ``[pinlab]`` in their source): ``pcie.rate_model`` (which of the two
§2.1 ways to turn a PCIe generation into a rate), ``pcie.large_buffer_min`` (the "≥ 10 GiB" of
the ``pcie.large_buffer_factor`` row), ``stage.mode`` (the two modes of §1 item 5) and
``pin.gpu_cost_per_byte`` (the "+ linear" of ``pin.gpu_cost``). Rows with no single number are
not keys: ``restore.h2d.genN`` and ``swap.model`` are the methods :meth:`CostModel.restore_h2d`
and :meth:`CostModel.swap_time`; ``uvm.oversubscription_spread`` is a remark; the two
``pin.bar1_bytes`` rows are a device fact (``DeviceSpec.bar`` in :mod:`pinlab.platform.spec`;
the consumer default is ``pin.bar1_consumer``); ``p2p.host_bridge_whitelist`` and
``cpu.vendor``/``cpu.family`` (§3.2) are platform facts (``PlatformSpec.cpu``,
``PlatformSpec.p2pdma_whitelist``).

:meth:`CostModel.with_overrides` applies ``{"pcie.efficiency": "0.75", "odp.fault": "2ms"}``
(the CLI's ``--set``) with one-line errors naming the key.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from pinlab.errors import ConfigError, config_error
from pinlab.platform import pcie_model
from pinlab.units import (
    STRICT_UNITS,
    Duration,
    Factor,
    Fraction,
    LineRate,
    Rate,
    Size,
    TimePerByte,
    parse_line_rate,
    parse_rate,
    parse_size,
    parse_time,
    parse_time_per_byte,
)

__all__ = [
    "Confidence",
    "CostModel",
    "LinkLayer",
    "NicModel",
    "NicModelName",
    "P2pPathClass",
    "ParamInfo",
    "PcieGen",
    "RcClass",
    "RegModelName",
    "parameters",
]

P2pPathClass = Literal["local", "switch", "root_complex", "cross_socket"]
"""How a P2P transfer travels (``cost-model.md`` §3.1); ``local`` is a device and itself."""

PcieGen = Literal[3, 4, 5]
"""PCIe generations with rates in ``cost-model.md`` §2.1."""

Confidence = Literal["high", "medium", "low"]
"""How far a parameter can be trusted: ``high`` = read in a tool's, kernel's or vendor's source
or a spec; ``medium`` = one measurement with a stated setup, or derived from such; ``low`` = an
assumption, a secondary source or a partial setup (``pinlab run --robust`` varies these)."""

_CONFIDENCE_OF_MARKER: dict[str | None, Confidence] = {
    "assumption": "low",
    "unverified": "low",
    "derived": "medium",
}

NicModelName = Literal["cx5", "cx6", "cx7", "efa"]
"""The NIC models of the ``nic`` table (``nic.<model>.*``)."""

LinkLayer = Literal["ib", "roce", "srd"]
"""How a NIC frames packets: InfiniBand, RoCEv2 over Ethernet, or EFA's SRD over Ethernet."""

RegModelName = Literal["efa", "mlx5"]
"""The dma-buf registration models of ``reg.*`` (an RDMA driver declares its own)."""

RcClass = Literal["intel_client", "intel_server", "amd_zen"]
"""The host-bridge classes whose P2P forwarding ``pcie.rc.*`` describes."""

_NVBW42 = "`NVIDIA/nvbandwidth` #42"
_GEARSHIFFT = "`mpicbg-scicomp/gearshifft` PR #82"
_MOONCAKE855 = "`kvcache-ai/Mooncake` PR #855"
_MOONCAKE3210 = "`kvcache-ai/Mooncake` PR #3210"
_NPRDMA = "NP-RDMA, arXiv 2310.11062"


def _p(
    default: Any,
    *,
    unit: str,
    section: str,
    source: str,
    desc: str,
    sweep: tuple[Any, Any] | None = None,
    choices: tuple[Any, ...] | None = None,
    marker: str | None = None,
    confidence: Confidence | None = None,
) -> Any:
    """A cost-model row as a pydantic ``Field`` (default written in the doc's units).

    ``confidence`` defaults from the marker: ``assumption``/``unverified`` rows are ``low``,
    ``derived`` ones ``medium``, the rest (read in a source) ``high``."""
    extra: dict[str, Any] = {"unit": unit, "section": section, "source": source}
    if sweep is not None:
        extra["sweep"] = list(sweep)
    if choices is not None:
        extra["choices"] = list(choices)
    if marker is not None:
        extra["marker"] = marker
    if confidence is None:
        confidence = _CONFIDENCE_OF_MARKER.get(marker, "high")
    extra["confidence"] = confidence
    return Field(default=default, description=desc, json_schema_extra=extra)


def _group(cls: type[BaseModel], desc: str) -> Any:
    return Field(default_factory=cls, description=desc)


class _Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


# -- §2 PCIe -----------------------------------------------------------------------------------

_PCIE_MODEL = "`pcie-bench/pcie-model` model/pcie.py"
_PCIE_BENCH = "`pcie-bench/data` nfp6000-1.2GHz_*/lat_dma_sizes.txt (LAT_DMA_RD, median)"


class PcieGen3(_Group):
    """PCIe Gen3 x16 per direction (``cost-model.md`` §2.1)."""

    raw: Rate = _p(
        "15.7538GB/s",
        unit="GB/s",
        section="§2.1",
        desc="raw link rate per direction, x16: 8 GT/s × 16 lanes × 128b/130b",
        source=f"{_PCIE_MODEL} (GTs, Gbs); hpc-notes.pages.dev/reference/pcie",
    )
    eff: Rate = _p(
        "12GB/s",
        unit="GB/s",
        section="§2.1",
        sweep=("11.8GB/s", "12.9GB/s"),
        desc="fallback: measured rate per direction, x16 (only with pcie.rate_model = "
        "'measured'; built-in presets use the mechanism, pcie.rate_model = 'mechanism')",
        source=f"Tesla P100-PCIe bandwidthTest H2D 12.15, D2H 12.89 GB/s ({_GEARSHIFFT}); "
        "typical 12.1 (Microway)",
    )


class PcieGen4(_Group):
    """PCIe Gen4 x16 per direction (``cost-model.md`` §2.1)."""

    raw: Rate = _p(
        "31.5077GB/s",
        unit="GB/s",
        section="§2.1",
        desc="raw link rate per direction, x16: 16 GT/s × 16 lanes × 128b/130b",
        source=f"{_PCIE_MODEL} (GTs, Gbs); hpc-notes.pages.dev/reference/pcie",
    )
    eff: Rate = _p(
        "25GB/s",
        unit="GB/s",
        section="§2.1",
        sweep=("24GB/s", "26.2GB/s"),
        desc="fallback: measured rate per direction, x16 (only with pcie.rate_model = 'measured')",
        source=f"A100 host_to_device_memcpy_sm 25.13 GB/s ({_NVBW42}); DGX-A100 ≈ 24 GB/s "
        "(`openucx/ucx` #6206); BaM Gen4 peak 25 GB/s (`ZaidQureshi/bam` #54)",
    )


class PcieGen5(_Group):
    """PCIe Gen5 x16 per direction (``cost-model.md`` §2.1)."""

    raw: Rate = _p(
        "63.0154GB/s",
        unit="GB/s",
        section="§2.1",
        desc="raw link rate per direction, x16: 32 GT/s × 16 lanes × 128b/130b",
        source=f"{_PCIE_MODEL} (GTs, Gbs); hpc-notes.pages.dev/reference/pcie",
    )
    eff: Rate = _p(
        "50GB/s",
        unit="GB/s",
        section="§2.1",
        sweep=("35GB/s", "53GB/s"),
        desc="fallback: measured rate per direction, x16 (only with pcie.rate_model = "
        "'measured'; D2H; H2D is pcie.gen5.h2d)",
        source="H100 device_to_host_memcpy_sm ≈ 52.8 GB/s (`NVIDIA/nvbandwidth` #24)",
    )
    h2d: Rate = _p(
        "50GB/s",
        unit="GB/s",
        section="§2.1",
        sweep=("35GB/s", "50GB/s"),
        desc="fallback: host-to-device rate, x16 (only with pcie.rate_model = 'measured')",
        source="H100 host_to_device_memcpy_sm ≈ 35.2 GB/s (`NVIDIA/nvbandwidth` #24): the GPU "
        "reads host memory, which the read mechanism (pcie.lat.*, outstanding reads) models",
    )


class PcieTlp(_Group):
    """PCIe transaction- and link-layer byte costs (``platform/pcie_model.py``; the ACK and
    flow-control DLLP intervals per width and MPS are the spec's tables in that module)."""

    mwr_overhead: Size = _p(
        24,
        unit="B",
        section="§2.3",
        desc="bytes a 64-bit memory-write TLP adds to its payload: 8 (framing, sequence number, "
        "LCRC) + 4 (TLP header) + 12 (address, requester)",
        source=f"{_PCIE_MODEL} (DLLP_Hdr, TLP_Hdr, TLP_MWr_64_Hdr); Intel AN 829 'Protocol "
        "overhead' (5–7 dwords of overhead, 3- or 4-dword headers)",
    )
    mrd_overhead: Size = _p(
        24,
        unit="B",
        section="§2.3",
        desc="bytes of one 64-bit memory-read request TLP (no payload), sent the other way",
        source=f"{_PCIE_MODEL} (TLP_MRd_64_Hdr)",
    )
    cpld_overhead: Size = _p(
        20,
        unit="B",
        section="§2.3",
        desc="bytes a completion-with-data TLP adds to its payload: 8 + 4 + 8",
        source=f"{_PCIE_MODEL} (TLP_CplD_Hdr)",
    )
    dllp: Size = _p(
        8,
        unit="B",
        section="§2.3",
        desc="one ACK or UpdateFC DLLP on the wire (2 B framing + 4 B DLLP + 2 B CRC)",
        source=f"{_PCIE_MODEL} (Ack_Size, FC_Size)",
    )
    skp_length: Size = _p(
        4,
        unit="B",
        section="§2.3",
        desc="SKP ordered set (clock compensation) per pcie.tlp.skp_interval bytes",
        source=f"{_PCIE_MODEL} (SKIP_Length)",
    )
    skp_interval: Size = _p(
        1538,
        unit="B",
        section="§2.3",
        desc="bytes between SKP ordered sets",
        source=f"{_PCIE_MODEL} (SKIP_Interval)",
    )
    host_completion: Size = _p(
        256,
        unit="B",
        section="§2.3",
        sweep=(64, 256),
        marker="assumption",
        desc="largest completion a root complex returns for a read of host memory (capped at "
        "the MPS; some root complexes split at the 64 or 128 B read completion boundary)",
        source="RCB 64 or 128 B for root complexes (Intel AN 855 'Throughput for reads'); "
        "[assumption] MPS-sized completions, which the CX-7 host plateau of "
        "`validation-tables.md` A4 (381 Gb/s > the 346 Gb/s of 64 B completions) requires",
    )


class PcieLat(_Group):
    """Read and write latencies along a PCIe path (``platform/pcie_model.py``)."""

    host_read: Duration = _p(
        "0.55us",
        unit="us",
        section="§2.3",
        sweep=("0.5us", "0.65us"),
        desc="DMA read of host DRAM on the same socket by a device on a root port (request to "
        "last completion, 64 B)",
        source=f"546 ns median at 64 B on Xeon E5-2630v4/2620v3/2630, 600 ns on E5-2637v3 "
        f"({_PCIE_BENCH})",
    )
    remote_socket: Duration = _p(
        "0.11us",
        unit="us",
        section="§2.3",
        sweep=("0.1us", "0.3us"),
        desc="added when the memory (or the peer) is on the other socket",
        source=f"653–666 ns at 64 B with memory on the remote socket vs 546 local ({_PCIE_BENCH}, "
        "-s0-s1-s1 runs)",
    )
    switch: Duration = _p(
        "0.1us",
        unit="us",
        section="§2.3",
        sweep=("0.05us", "0.3us"),
        marker="assumption",
        desc="added to a read's round trip per PCIe switch on the path",
        source="[assumption] the lead's design note (issue 11): ≈ 0.1–0.15 µs per switch",
    )
    rc_p2p: Duration = _p(
        "0.15us",
        unit="us",
        section="§2.3",
        sweep=("0.05us", "0.5us"),
        marker="assumption",
        desc="added to a P2P read's round trip when the host bridge turns it around (root "
        "complex between two root ports)",
        source="[assumption] no measurement of a root-complex P2P read latency was found "
        "(tools-and-mechanisms.md 'Gaps')",
    )
    write: Duration = _p(
        "0.21us",
        unit="us",
        section="§2.3",
        sweep=("0.1us", "0.3us"),
        marker="derived",
        desc="posted write from a device until the data is visible in host DRAM",
        source=f"write-then-read 760 ns vs read 546 ns at 64 B ({_PCIE_BENCH}, LAT_DMA_WRRD)",
    )


_BAR_SRC = (
    "calibrated with the NIC's per-QP window (nic.<model>.p2p_read_tags × 512 B) so that the "
    "NIC-reads-GPU plateau of the validation run (its preset's NIC-to-GPU path) is the measured "
    "one"
)


class PcieBarRead(_Group):
    """Completer latency of a device BAR read by a peer, per device model (the device fetches
    from its memory and returns the completion): a device names its row
    (``DeviceSpec.bar_read``), others use ``default``."""

    default: Duration = _p(
        "0.58us",
        unit="us",
        section="§2.3",
        sweep=("0.4us", "1.2us"),
        marker="derived",
        confidence="low",
        desc="a device whose platform entry names no row",
        source="[derived] geometric mean of the A100 and H200 rows; CPU loads from a V100 BAR "
        "take 0.86–1.7 µs (`NVIDIA/gdrcopy` README copylat), an upper-bound proxy",
    )
    a100: Duration = _p(
        "0.71us",
        unit="us",
        section="§2.3",
        sweep=("0.45us", "1.2us"),
        marker="derived",
        confidence="medium",
        desc="NVIDIA A100",
        source=f"{_BAR_SRC}: A100-SXM4-80GB + ConnectX-6, --use_cuda, 2 QPs, 81 Gb/s = 2 × 10 × "
        "512 B / 1.01 µs, less three switch hops on dgx-a100 (A2's sysfs path also crosses two "
        "switch levels) (validation-tables.md A2)",
    )
    h200: Duration = _p(
        "0.48us",
        unit="us",
        section="§2.3",
        sweep=("0.3us", "0.8us"),
        marker="derived",
        confidence="medium",
        desc="NVIDIA H200 (and, [assumption], H100: the same Hopper die)",
        source=f"{_BAR_SRC}: H200 + ConnectX-7 RoCE, --use_cuda_dmabuf, 1 QP, 141 Gb/s = 20 × "
        "512 B / 0.58 µs, less one switch hop (validation-tables.md A3)",
    )

    def of(self, name: str | None) -> float:
        """The row ``name`` (None: ``default``); ``KeyError`` for an unknown row."""
        if name is None:
            return self.default
        if name not in type(self).model_fields:
            known = ", ".join(type(self).model_fields)
            raise KeyError(f"no pcie.bar_read row {name!r} (expected one of {known})")
        value: float = getattr(self, name)
        return value


def _rc_fields(
    reads: bool,
    writes: bool,
    read_limit: str | None,
    write_limit: str | None,
    *,
    source: str,
    confidence: Confidence,
    read_sweep: tuple[str, str] | None = None,
    write_sweep: tuple[str, str] | None = None,
) -> tuple[Any, Any, Any, Any]:
    """The four fields of a host-bridge class: forwards reads, forwards writes, and the cap on
    one forwarded read / write stream (None: no cap below the links)."""

    def row(default: Any, unit: str, desc: str, sweep: tuple[str, str] | None = None) -> Any:
        return _p(
            default,
            unit=unit,
            section="§3.1",
            sweep=sweep,
            choices=(True, False) if unit == "bool" else None,
            desc=desc,
            source=source,
            confidence=confidence,
        )

    return (
        row(reads, "bool", "the host bridge forwards P2P read requests between root ports"),
        row(writes, "bool", "the host bridge forwards P2P writes between root ports"),
        row(read_limit, "GB/s", "cap on one forwarded P2P read stream (None: none)", read_sweep),
        row(write_limit, "GB/s", "cap on one forwarded P2P write stream (None: none)", write_sweep),
    )


class PcieRcClass(_Group):
    """What one class of host bridge does with peer-to-peer requests between its root ports
    (subclasses give the values and their sources)."""

    p2p_reads: bool
    p2p_writes: bool
    read_limit: Rate | None
    write_limit: Rate | None


_ICLIENT = _rc_fields(
    False,
    True,
    None,
    None,
    source="Intel client root ports forward P2P writes only (`NVIDIA/open-gpu-kernel-modules` "
    "#1253, measurements.md)",
    confidence="medium",
)
_ISERVER = _rc_fields(
    True,
    True,
    "10GB/s",
    "10.26GB/s",
    read_sweep=("5GB/s", "20GB/s"),
    write_sweep=("7GB/s", "26GB/s"),
    source="writes: Xeon W-2123, two Vega WX 8100 on root ports, P2P 10.26 GB/s vs D2H 14.29 "
    "(`ROCm/ROCm` #787, validation-tables.md C6(b)); reads: 6 PCIe GPUs, P2P reads 9.64–10.46 "
    "GB/s vs 22 GB/s to DRAM (`NVIDIA/nccl` #814, CPU not visible, C5) -- 'P2P read bandwidth "
    "severely limited on some processor architectures' (NVIDIA GPUDirect RDMA doc, NVIDIA "
    "forum 55564)",
    confidence="low",
)
_ZEN = _rc_fields(
    True,
    True,
    None,
    None,
    read_sweep=("10GB/s", "64GB/s"),
    write_sweep=("10GB/s", "64GB/s"),
    source="Threadripper PRO 7965WX and 2× EPYC 9374F: GPU↔GPU P2P writes 26.32 GB/s = Gen4 x16, "
    "same and cross socket (`luigifcruz/stelline`, validation-tables.md C3, C4); reads "
    "[assumption] as writes; kernel P2PDMA allows Zen host bridges (kernel-semantics.md §8.3)",
    confidence="low",
)


class PcieRcIntelClient(PcieRcClass):
    """Intel client (Core) root ports: P2P writes only."""

    p2p_reads: bool = _ICLIENT[0]
    p2p_writes: bool = _ICLIENT[1]
    read_limit: Rate | None = _ICLIENT[2]
    write_limit: Rate | None = _ICLIENT[3]


class PcieRcIntelServer(PcieRcClass):
    """Intel Xeon host bridges: both forwarded, at limited rates."""

    p2p_reads: bool = _ISERVER[0]
    p2p_writes: bool = _ISERVER[1]
    read_limit: Rate | None = _ISERVER[2]
    write_limit: Rate | None = _ISERVER[3]


class PcieRcAmdZen(PcieRcClass):
    """AMD Zen host bridges (and Infinity Fabric between sockets): both forwarded."""

    p2p_reads: bool = _ZEN[0]
    p2p_writes: bool = _ZEN[1]
    read_limit: Rate | None = _ZEN[2]
    write_limit: Rate | None = _ZEN[3]


class PcieRc(_Group):
    """Peer-to-peer forwarding by host-bridge class (``platform/pcie_model.py``)."""

    intel_client: PcieRcIntelClient = _group(PcieRcIntelClient, "Intel client root ports")
    intel_server: PcieRcIntelServer = _group(PcieRcIntelServer, "Intel Xeon host bridges")
    amd_zen: PcieRcAmdZen = _group(PcieRcAmdZen, "AMD Zen host bridges")

    def of(self, rc: RcClass) -> PcieRcClass:
        """The forwarding rules of host-bridge class ``rc``."""
        value: PcieRcClass = getattr(self, rc)
        return value


class Pcie(_Group):
    """PCIe link rates, mechanisms and effects (``cost-model.md`` §2.1–§2.3)."""

    gen3: PcieGen3 = _group(PcieGen3, "PCIe Gen3 rates (§2.1)")
    gen4: PcieGen4 = _group(PcieGen4, "PCIe Gen4 rates (§2.1)")
    gen5: PcieGen5 = _group(PcieGen5, "PCIe Gen5 rates (§2.1)")
    tlp: PcieTlp = _group(PcieTlp, "TLP and DLLP byte costs (§2.3)")
    lat: PcieLat = _group(PcieLat, "read and write latencies (§2.3)")
    bar_read: PcieBarRead = _group(PcieBarRead, "device BAR read latency by device (§2.3)")
    rc: PcieRc = _group(PcieRc, "host-bridge P2P forwarding (§3.1)")
    mps: Size = _p(
        256,
        unit="B",
        section="§2.3",
        choices=(128, 256, 512),
        desc="Max_Payload_Size of a port whose platform entry gives none (the path uses the "
        "smallest along it)",
        source=f"x86 servers typically 256 B ({_PCIE_MODEL} MPSs; [unverified] typical value)",
        confidence="medium",
    )
    mrrs: Size = _p(
        512,
        unit="B",
        section="§2.3",
        choices=(128, 256, 512, 1024, 2048, 4096),
        marker="unverified",
        desc="Max_Read_Request_Size of a device whose platform entry gives none",
        source="512 B is the common firmware/OS default (tools-and-mechanisms.md B1, [unverified])",
    )
    efficiency: Fraction = _p(
        0.80,
        unit="fraction",
        section="§2.1",
        sweep=(0.75, 0.85),
        marker="derived",
        desc="fallback: effective rate as a fraction of raw (only with pcie.rate_model = "
        "'raw_x_efficiency')",
        source="Gen3 12.1/15.75 = 0.77, Gen4 26.2/31.5 = 0.83 (Microway); A100 25.13/31.5 = "
        f"0.80 ({_NVBW42}); H100 52.8/63 = 0.84 (`NVIDIA/nvbandwidth` #24)",
    )
    rate_model: Literal["mechanism", "measured", "raw_x_efficiency"] = _p(
        "mechanism",
        unit="choice",
        section="§2.1",
        choices=("mechanism", "measured", "raw_x_efficiency"),
        desc="how a link's rate is derived: 'mechanism' = raw × link-level (DLLP, SKP) "
        "efficiency × MPS / (MPS + TLP overhead) (platform/pcie_model.py: Gen3/4/5 x16 at MPS "
        "256 → 12.99 / 25.99 / 51.98 GB/s); the fallbacks 'measured' = pcie.genN.eff (Gen5 H2D: "
        "pcie.gen5.h2d) and 'raw_x_efficiency' = raw × pcie.efficiency, × width/16. Overriding "
        "pcie.efficiency alone selects 'raw_x_efficiency'",
        source="[pinlab] the §2.1 derivations of one rate",
    )
    bidir_h2d_factor: Fraction = _p(
        0.5,
        unit="fraction",
        section="§2.2",
        sweep=(0.45, 1.0),
        desc="multiplier on H2D while D2H is busy",
        source="both directions loaded: H2D fell to ≈ 11 GB/s while D2H stayed ≈ 25 GB/s "
        "(`NVIDIA/nvbandwidth` #53)",
    )
    large_buffer_factor: Fraction = _p(
        1.0,
        unit="fraction",
        section="§2.2",
        sweep=(0.65, 1.0),
        marker="derived",
        desc="multiplier for single copies ≥ pcie.large_buffer_min (1.0 = off)",
        source=f"A100 H2D 25.13 → 18.05 GB/s at 10 GiB (0.72), 16.50 at 20 GiB (0.66) ({_NVBW42})",
    )
    large_buffer_min: Size = _p(
        "10GiB",
        unit="GiB",
        section="§2.2",
        desc="size from which pcie.large_buffer_factor applies",
        source=f"[pinlab] the '≥ 10 GiB' of the pcie.large_buffer_factor row ({_NVBW42})",
    )


class C2cGh200(_Group):
    """NVLink-C2C on GH200 (``cost-model.md`` §2.1)."""

    h2d: Rate = _p(
        "346GB/s",
        unit="GB/s",
        section="§2.1",
        sweep=("342GB/s", "346GB/s"),
        desc="host-to-device rate over NVLink-C2C (presets with a coherent CPU link)",
        source="H2D copy engine ≈ 346, SM ≈ 342 GB/s (`NVIDIA/nvbandwidth` #23)",
    )


class C2c(_Group):
    """Coherent CPU–GPU links (``cost-model.md`` §2.1)."""

    gh200: C2cGh200 = _group(C2cGh200, "GH200 NVLink-C2C (§2.1)")


class Numa(_Group):
    """Remote-socket host memory (``cost-model.md`` §2.2)."""

    remote_h2d_factor: Fraction = _p(
        0.31,
        unit="fraction",
        section="§2.2",
        sweep=(0.2, 1.0),
        marker="derived",
        desc="multiplier on H2D when the host memory is on the remote socket",
        source=f"P100 pinned H2D 12.15 → 3.78 GB/s with memory on the other socket ({_GEARSHIFFT})",
    )
    remote_d2h_factor: Fraction = _p(
        0.20,
        unit="fraction",
        section="§2.2",
        sweep=(0.2, 1.0),
        marker="derived",
        desc="multiplier on D2H when the host memory is on the remote socket",
        source=f"same source: 12.89 → 2.54 GB/s ({_GEARSHIFFT})",
    )


class Cpu(_Group):
    """The CPU's loads and stores through a BAR mapping of device memory (gdrcopy;
    ``docs/cost-model/gpu.md`` §G4). The rates are not parameters: stores drain as posted
    writes of ``cpu.wc_flush`` bytes (PCIe payload efficiency), capped at ``cpu.wc_store_max``;
    loads are uncached reads of ``cpu.bar_line`` lines, ``cpu.bar_lines_inflight`` at a time,
    each a read round trip of ``cpu.bar_load_latency`` (:mod:`pinlab.platform.gpu_model`)."""

    wc_flush: Size = _p(
        "64B",
        unit="B",
        section="§G4",
        confidence="high",
        desc="bytes per write-combining buffer flush: one posted write TLP per cache line",
        source="Intel SDM vol. 3A §11.3 (WC buffers hold one 64-byte line); gdrcopy maps the "
        "BAR write-combining (`info.wc_mapping: 1`, `NVIDIA/gdrcopy` README.md)",
    )
    wc_store_max: Rate = _p(
        "18.75GB/s",
        unit="GB/s",
        section="§G4",
        sweep=("10GB/s", "25GB/s"),
        marker="derived",
        confidence="low",
        desc="one core's write-combining store ceiling (CPU-bound above Gen4 links)",
        source="H800 (Gen5) gdrcopy_copybw write 17884.9 MiB/s = 18.75 GB/s while Gen5 x16 "
        "would carry ~41 GB/s of 64-byte writes (`sgl-project/sglang` #6193, D3)",
    )
    bar_write_floor: Duration = _p(
        "0.088us",
        unit="us",
        section="§G4",
        sweep=("0.05us", "0.2us"),
        marker="derived",
        confidence="medium",
        desc="CPU time of a gdr_copy_to_mapping of one store (issue only, nothing waits)",
        source="V100-SXM2 copylat gdr_copy_to_mapping 0.0884–0.0905 µs at 1–16 B "
        "(`NVIDIA/gdrcopy` README.md at fcec3ce, D1)",
    )
    bar_load_width: Size = _p(
        "16B",
        unit="B",
        section="§G4",
        confidence="high",
        desc="bytes per uncached load instruction (SSE4.1 MOVNTDQA)",
        source="`NVIDIA/gdrcopy` src/memcpy_sse41.c memcpy_uncached_load_sse41 (16-byte "
        "_mm_stream_load_si128)",
    )
    bar_line: Size = _p(
        "64B",
        unit="B",
        section="§G4",
        confidence="medium",
        desc="bytes one uncached read fetches (a streaming-load line)",
        source="MOVNTDQA from WC memory fills a 64-byte streaming load buffer (Intel SDM vol. 2 "
        "MOVNTDQA)",
    )
    bar_load_latency: Duration = _p(
        "0.86us",
        unit="us",
        section="§G4",
        sweep=("0.6us", "1.8us"),
        marker="derived",
        confidence="medium",
        desc="round trip of one uncached CPU load from a GPU BAR",
        source="V100-SXM2 copylat gdr_copy_from_mapping 0.8601 µs at 16 B (one load), 0.9069 µs "
        "at 1 B (`NVIDIA/gdrcopy` README.md, D1)",
    )
    bar_lines_inflight: int = _p(
        7,
        unit="count",
        section="§G4",
        sweep=(1, 12),
        marker="derived",
        confidence="low",
        desc="uncached line reads one core keeps in flight (streaming load buffers)",
        source="D1 streaming rate: 16 MiB in 36 759 µs = 0.46 GB/s, 1 MiB in 1971 µs = 0.53 GB/s; "
        "0.5 GB/s × 0.86 µs / 64 B ≈ 7 (`NVIDIA/gdrcopy` README.md)",
    )


# -- §4 NIC models and the RDMA transport (platform/rdma_model.py) ------------------------------

_SPIN = "Hoefler et al., sPIN slides (ConnectX-5: '1 msg / 5 ns')"
_CX6_MANUAL = "NVIDIA ConnectX-6 EN user manual, Introduction (215 million messages/s)"
_A1 = "validation-tables.md A1 (`acaneru/installation` network-operator.md)"
_A2 = "validation-tables.md A2 (same file, GPUDirect section)"
_A34 = "validation-tables.md A3/A4 (`kubernetes-sigs/dranet` demo_gke_rdma README)"
_IB_PACK = "Linux include/rdma/ib_pack.h"


class NicModel(_Group):
    """One RDMA NIC model (``nic.<model>.*``): what ``platform/rdma_model.py`` needs of it.
    Subclasses give each model's values and sources."""

    line_rate: LineRate
    link_layer: LinkLayer
    mtu: Size
    msg_rate: float
    qp_msg_cost: Duration
    max_rd_atom: int
    qp_read_slots: int
    read_tags: int
    p2p_read_tags: int
    tx_latency: Duration
    rx_latency: Duration
    blueflame: bool


_NIC_DESC = {
    "line_rate": ("Gbps", "port line rate (data rate after line coding)"),
    "link_layer": ("choice", "default link layer (a platform's NIC entry may choose another)"),
    "mtu": ("B", "default active MTU (RDMA payload per packet)"),
    "msg_rate": ("Mpps", "message-rate ceiling of the whole NIC (all QPs), million messages/s"),
    "qp_msg_cost": (
        "us",
        "per-message (per-WQE) processing of one QP: the NIC serves a QP's WQEs one after the "
        "other, so one QP sends at most 1 / this messages per second",
    ),
    "max_rd_atom": ("count", "RDMA READs outstanding per QP (max_qp_rd_atom)"),
    "qp_read_slots": (
        "count",
        "messages of one QP whose payload the NIC is reading from memory at once (a message "
        "holds its slot from its first PCIe read request until its last completion)",
    ),
    "read_tags": ("count", "PCIe read requests the NIC keeps outstanding to host memory"),
    "p2p_read_tags": (
        "count",
        "PCIe read requests one QP keeps outstanding to a peer's BAR (each QP is its own read "
        "stream; the NIC's read_tags bound them all)",
    ),
    "tx_latency": (
        "us",
        "NIC send pipeline: doorbell or WQE in the NIC to the first packet on the wire",
    ),
    "rx_latency": (
        "us",
        "NIC receive pipeline: last packet in to the PCIe write (or read request) issued",
    ),
    "blueflame": (
        "bool",
        "the CPU writes small WQEs straight into the NIC (BlueFlame), saving the WQE fetch (a "
        "DMA read of host memory) of an idle queue",
    ),
}
_NIC_CHOICES: dict[str, tuple[Any, ...]] = {
    "link_layer": ("ib", "roce", "srd"),
    "mtu": (256, 512, 1024, 2048, 4096, 8192),
    "blueflame": (True, False),
}


def _nic(
    field: str,
    default: Any,
    source: str,
    confidence: Confidence = "high",
    sweep: tuple[Any, Any] | None = None,
) -> Any:
    """One row of a NIC model (unit and meaning by ``field``, :data:`_NIC_DESC`)."""
    unit, desc = _NIC_DESC[field]
    return _p(
        default,
        unit=unit,
        section="§4.1",
        desc=desc,
        source=source,
        choices=_NIC_CHOICES.get(field),
        sweep=sweep,
        confidence=confidence,
    )


_CX_LATENCY = (
    "[assumption] split so that ib_write_lat ≈ 1.0 µs, ib_send_lat ≈ 1.1 µs and ib_read_lat "
    "≈ 2.1 µs back to back, as expected for ConnectX (tools-and-mechanisms.md B2.3: CX-4 EDR "
    "ib_send_lat 32 B 0.83 µs, Potter 2018; CX-6 'sub-600 ns', NVIDIA manual)"
)
_CX_TAGS = "[assumption] 8-bit extended tags (256)"
_P2P_TAGS_CX7 = (
    "calibrated: one QP of a ConnectX-7 reading H200 memory (RoCE, --use_cuda_dmabuf) levels at "
    "141 Gb/s = 17.6 GB/s = this × 512 B / 0.58 µs (pcie.bar_read.h200 + one switch) "
    f"({_A34}, A3); NCCL's several channels over the same NIC reach 258 Gb/s (B3), so the "
    "window is per QP, not per NIC or per BAR"
)
_P2P_TAGS_CX6 = (
    "calibrated: 2 QPs of a ConnectX-6 reading A100 memory (--use_cuda) level at 81 Gb/s = "
    "10.1 GB/s = 2 × this × 512 B / ≈ 1 µs; the knee (67.5 Gb/s at 2 KiB with 2 QPs × "
    f"nic.cx6.qp_read_slots) needs a read latency near 1 µs, which fixes the split ({_A2})"
)
_RD_ATOM = "mlx5 reports 16 (perftest 'Outstand reads : 16'; tools-and-mechanisms.md B2.2)"
_MTU = (
    "perftest uses the port's active MTU (set_mtu, 256…4096); RoCE 4096 needs a netdev MTU ≥ "
    "4192 (Linux include/rdma/ib_addr.h iboe_get_mtu)"
)
_BF = "`linux-rdma/rdma-core` providers/mlx5/qp.c (mlx5_bf_copy)"
_LAT_SWEEP = ("0.05us", "0.5us")
_SLOT_SWEEP = (1, 8)
_TAG_SWEEP = (32, 768)
_P2P_TAG_SWEEP = (8, 64)
_QP_SWEEP = ("0.15us", "0.45us")


class NicCx5(NicModel):
    """NVIDIA (Mellanox) ConnectX-5, EDR 100G."""

    line_rate: LineRate = _nic(
        "line_rate", "100Gbps", "EDR: 4 lanes × 25.78125 Gb/s, 64b/66b (ConnectX-5 user manual)"
    )
    link_layer: LinkLayer = _nic("link_layer", "ib", "ConnectX-5 VPI: InfiniBand or Ethernet")
    mtu: Size = _nic("mtu", 4096, _MTU, "medium")
    msg_rate: float = _nic("msg_rate", 200.0, _SPIN, "medium")
    qp_msg_cost: Duration = _nic(
        "qp_msg_cost", "0.27us", f"[assumption] as ConnectX-6 ({_A1})", "low", _QP_SWEEP
    )
    max_rd_atom: int = _nic("max_rd_atom", 16, _RD_ATOM)
    qp_read_slots: int = _nic("qp_read_slots", 3, "[assumption] as ConnectX-6", "low", _SLOT_SWEEP)
    read_tags: int = _nic("read_tags", 256, _CX_TAGS, "low", _TAG_SWEEP)
    p2p_read_tags: int = _nic(
        "p2p_read_tags", 10, "[assumption] as ConnectX-6", "low", _P2P_TAG_SWEEP
    )
    tx_latency: Duration = _nic("tx_latency", "0.3us", _CX_LATENCY, "low", _LAT_SWEEP)
    rx_latency: Duration = _nic("rx_latency", "0.15us", _CX_LATENCY, "low", _LAT_SWEEP)
    blueflame: bool = _nic("blueflame", True, _BF)


class NicCx6(NicModel):
    """NVIDIA ConnectX-6, HDR 200G (HDR100 ports run at 100G: set the NIC's line rate)."""

    line_rate: LineRate = _nic(
        "line_rate",
        "200Gbps",
        "HDR 4 × 50 Gb/s (ConnectX-6 VPI user manual); HDR100 2 × 53.125 Gb/s PAM4 → 100 Gb/s",
    )
    link_layer: LinkLayer = _nic("link_layer", "ib", "ConnectX-6 VPI: InfiniBand or Ethernet")
    mtu: Size = _nic("mtu", 4096, _MTU, "medium")
    msg_rate: float = _nic("msg_rate", 215.0, _CX6_MANUAL)
    qp_msg_cost: Duration = _nic(
        "qp_msg_cost",
        "0.27us",
        f"calibrated: 1 QP, tx 128: 2.9–3.9 Mpps, mean 3.6, at 2–1024 B ({_A1}); with 2 QPs "
        f"the post cost (rdma.post_cost) binds at ≈ 4.0 Mpps ({_A2})",
        "medium",
        _QP_SWEEP,
    )
    max_rd_atom: int = _nic("max_rd_atom", 16, _RD_ATOM)
    qp_read_slots: int = _nic(
        "qp_read_slots",
        3,
        f"calibrated: the fewest that keep one QP at its 3.7 Mpps up to 1 KiB with a 0.65 µs "
        f"host read ({_A1})",
        "low",
        _SLOT_SWEEP,
    )
    read_tags: int = _nic("read_tags", 256, _CX_TAGS, "low", _TAG_SWEEP)
    p2p_read_tags: int = _nic("p2p_read_tags", 10, _P2P_TAGS_CX6, "low", _P2P_TAG_SWEEP)
    tx_latency: Duration = _nic("tx_latency", "0.3us", _CX_LATENCY, "low", _LAT_SWEEP)
    rx_latency: Duration = _nic("rx_latency", "0.15us", _CX_LATENCY, "low", _LAT_SWEEP)
    blueflame: bool = _nic("blueflame", True, _BF)


class NicCx7(NicModel):
    """NVIDIA ConnectX-7, NDR 400G (or 400GbE RoCE), PCIe Gen5."""

    line_rate: LineRate = _nic(
        "line_rate", "400Gbps", "NDR 4 × 100 Gb/s; 400GbE [unverified PAM4/FEC details]", "medium"
    )
    link_layer: LinkLayer = _nic("link_layer", "ib", "ConnectX-7 VPI: InfiniBand or Ethernet")
    mtu: Size = _nic("mtu", 4096, _MTU, "medium")
    msg_rate: float = _nic(
        "msg_rate",
        330.0,
        "[unverified] 330–370 Mpps, not found in a primary source",
        "low",
        (215.0, 370.0),
    )
    qp_msg_cost: Duration = _nic(
        "qp_msg_cost",
        "0.28us",
        f"calibrated: 1 QP, tx 128, 2–1024 B of GPU memory: 3.39–3.63 Mpps ({_A34}, A3; the "
        "host-memory run A4 is bound by nic.cx7.qp_read_slots instead)",
        "medium",
        _QP_SWEEP,
    )
    max_rd_atom: int = _nic("max_rd_atom", 16, _RD_ATOM)
    qp_read_slots: int = _nic(
        "qp_read_slots",
        2,
        f"calibrated: host memory, 1 QP: 3.05–3.27 Mpps up to 1 KiB and 2.46 / 2.49 / 2.14 "
        f"Mpps at 4 / 8 / 16 KiB = 2 messages per 0.65 µs read + size / 52.7 GB/s ({_A34}, A4)",
        "medium",
        _SLOT_SWEEP,
    )
    read_tags: int = _nic(
        "read_tags", 768, "[assumption] 10-bit tags (PCIe Gen5): 768 usable", "low", _TAG_SWEEP
    )
    p2p_read_tags: int = _nic("p2p_read_tags", 20, _P2P_TAGS_CX7, "low", _P2P_TAG_SWEEP)
    tx_latency: Duration = _nic("tx_latency", "0.3us", _CX_LATENCY, "low", _LAT_SWEEP)
    rx_latency: Duration = _nic("rx_latency", "0.15us", _CX_LATENCY, "low", _LAT_SWEEP)
    blueflame: bool = _nic("blueflame", True, _BF)


_EFA_LATENCY = (
    "[derived] osu_latency 1 B = 9.87 µs one way on hpc6a, placement group, Intel MPI over "
    "libfabric (`aws/aws-parallelcluster` #6449), less the host side (post, PCIe, poll), split "
    "evenly between send and receive; includes the AWS fabric and the provider's software"
)


class NicEfa(NicModel):
    """AWS Elastic Fabric Adapter (one 100G interface), SRD transport."""

    line_rate: LineRate = _nic(
        "line_rate",
        "100Gbps",
        "100 Gb/s per EFA interface; p4d 4 × 100, p5.48xlarge 32 × 100 (AWS; cost-model.md §9.5)",
    )
    link_layer: LinkLayer = _nic("link_layer", "srd", "EFA's Scalable Reliable Datagram (AWS)")
    mtu: Size = _nic("mtu", 8192, "[assumption] EFA runs with 9001-byte jumbo frames (AWS)", "low")
    msg_rate: float = _nic(
        "msg_rate",
        50.0,
        "[assumption] no public EFA message-rate ceiling; one endpoint is bound by "
        "nic.efa.qp_msg_cost long before",
        "low",
        (10.0, 100.0),
    )
    qp_msg_cost: Duration = _nic(
        "qp_msg_cost",
        "1.5us",
        "libfabric fi_rdm_tagged_bw 64 B: 1.50 µs per transfer, pipelined, one endpoint on c5n "
        "(`ofiwg/libfabric` #5694)",
        "medium",
        ("1us", "3us"),
    )
    max_rd_atom: int = _nic("max_rd_atom", 16, "[assumption] as mlx5", "low", (1, 16))
    qp_read_slots: int = _nic("qp_read_slots", 3, "[assumption] as ConnectX-6", "low", _SLOT_SWEEP)
    read_tags: int = _nic("read_tags", 256, "[assumption] as ConnectX", "low", _TAG_SWEEP)
    p2p_read_tags: int = _nic(
        "p2p_read_tags", 20, "[assumption] as ConnectX-7", "low", _P2P_TAG_SWEEP
    )
    tx_latency: Duration = _nic("tx_latency", "4.5us", _EFA_LATENCY, "low", ("2us", "6us"))
    rx_latency: Duration = _nic("rx_latency", "4.5us", _EFA_LATENCY, "low", ("2us", "6us"))
    blueflame: bool = _nic("blueflame", False, "[assumption] EFA rings a doorbell", "low")


class Nic(_Group):
    """The NIC models (``nic.<model>.*``, ``platform/rdma_model.py``); a platform's NIC entry
    names its model (``NicSpec.model``; default: what its driver declares)."""

    cx5: NicCx5 = _group(NicCx5, "ConnectX-5 EDR 100G (§4.1)")
    cx6: NicCx6 = _group(NicCx6, "ConnectX-6 HDR 200G (§4.1)")
    cx7: NicCx7 = _group(NicCx7, "ConnectX-7 NDR 400G (§4.1)")
    efa: NicEfa = _group(NicEfa, "AWS EFA 100G SRD (§4.1)")

    def model(self, name: str) -> NicModel:
        """NIC model ``name`` (:data:`NicModelName`); ``KeyError`` for any other name."""
        if name not in type(self).model_fields:
            known = ", ".join(type(self).model_fields)
            raise KeyError(f"no NIC model {name!r} (expected one of {known})")
        value: NicModel = getattr(self, name)
        return value


def _hdr(size: int, desc: str, source: str) -> Any:
    return _p(size, unit="B", section="§4.2", desc=desc, source=source)


class RdmaHeaders(_Group):
    """Packet header bytes (``platform/rdma_model.py``: wire bytes per packet and message)."""

    lrh: Size = _hdr(8, "IB local route header", f"{_IB_PACK} IB_LRH_BYTES")
    grh: Size = _hdr(40, "IB global route header (IPv6-shaped)", f"{_IB_PACK} IB_GRH_BYTES")
    bth: Size = _hdr(12, "base transport header", f"{_IB_PACK} IB_BTH_BYTES")
    reth: Size = _hdr(
        16,
        "RDMA extended header: first packet of a WRITE, a READ request",
        "rxe rxe_hdr.h struct rxe_reth (va 8, rkey 4, len 4)",
    )
    aeth: Size = _hdr(
        4, "ACK extended header: read response first/last/only", "rxe rxe_hdr.h struct rxe_aeth"
    )
    icrc: Size = _hdr(4, "invariant CRC", f"{_IB_PACK} IB_ICRC_BYTES")
    vcrc: Size = _hdr(2, "variant CRC (IB link)", "Wireshark packet-infiniband.c")
    eth: Size = _hdr(14, "Ethernet header", f"{_IB_PACK} IB_ETH_BYTES")
    fcs: Size = _hdr(4, "Ethernet frame check sequence", "IEEE 802.3")
    preamble: Size = _hdr(8, "Ethernet preamble + start-of-frame delimiter", "IEEE 802.3")
    ifg: Size = _hdr(12, "minimum inter-frame gap", "IEEE 802.3")
    ipv4: Size = _hdr(20, "IPv4 header", f"{_IB_PACK} IB_IP4_BYTES")
    ipv6: Size = _hdr(40, "IPv6 header", "RFC 8200")
    udp: Size = _hdr(8, "UDP header", f"{_IB_PACK} IB_UDP_BYTES")


class Rdma(_Group):
    """The host side and transport of an RDMA message (``platform/rdma_model.py``)."""

    hdr: RdmaHeaders = _group(RdmaHeaders, "packet headers (§4.2)")
    post_cost: Duration = _p(
        "0.25us",
        unit="us",
        section="§4.2",
        sweep=("0.15us", "0.4us"),
        desc="CPU time one posting thread spends per WQE (build it, ring the doorbell or copy "
        "it by BlueFlame, poll completions); perftest posts every QP from one thread",
        source=f"calibrated: 2 QPs, tx 128, 2–1024 B: 3.71–4.03 Mpps ({_A2}) -- twice the QPs "
        f"but only ≈ 1.1× the 1-QP rate of {_A1}, so a per-thread cost binds",
        confidence="medium",
    )
    post_latency: Duration = _p(
        "0.1us",
        unit="us",
        section="§4.2",
        sweep=("0.05us", "0.3us"),
        marker="assumption",
        desc="CPU time of one ibv_post_send (or post_recv) on an otherwise idle thread, as a "
        "latency test sees it (rdma.post_cost is the per-WQE occupancy of a busy loop)",
        source="[assumption] with the NIC pipelines, ib_write_lat ≈ 1 µs and ib_read_lat ≈ 2 µs "
        "back to back (tools-and-mechanisms.md B2.3, [unverified] expectations)",
    )
    mmio_latency: Duration = _p(
        "0.1us",
        unit="us",
        section="§4.2",
        sweep=("0.05us", "0.3us"),
        marker="assumption",
        desc="a CPU store (doorbell, BlueFlame WQE) until it reaches the NIC",
        source="[assumption] a posted write down the PCIe path, about half a read round trip",
    )
    poll_latency: Duration = _p(
        "0.05us",
        unit="us",
        section="§4.2",
        sweep=("0.02us", "0.2us"),
        marker="assumption",
        desc="a spinning CPU sees a write the NIC placed (cache-line transfer)",
        source="[assumption]",
    )
    ib_link_eff: Fraction = _p(
        0.99,
        unit="fraction",
        section="§4.2",
        sweep=(0.985, 1.0),
        marker="derived",
        desc="share of an InfiniBand link's data rate left after link-level traffic (flow-"
        "control credit packets, SKIP ordered sets, idles)",
        source=f"calibrated: 100G IB ib_write_bw plateau 98.38 Gb/s ({_A1}) against 99.37 of "
        "headers alone at MTU 4096; 98.39 Gb/s on another 100G IB pair (`linux-rdma/perftest` "
        "#225)",
    )
    grh: bool = _p(
        False,
        unit="bool",
        section="§4.2",
        choices=(False, True),
        desc="InfiniBand packets carry a GRH (global routing); LID-routed back to back they do not",
        source="IBTA: GRH only for routed or GID-addressed traffic",
        confidence="medium",
    )
    roce_ip: Literal["ipv4", "ipv6"] = _p(
        "ipv4",
        unit="choice",
        section="§4.2",
        choices=("ipv4", "ipv6"),
        marker="assumption",
        desc="RoCEv2 GIDs: IPv4-mapped (perftest's GID index 3) or IPv6",
        source="perftest on RoCE uses an IPv4-mapped GID (`-x 3`, validation-tables.md A3)",
    )
    jitter: Fraction = _p(
        0.05,
        unit="fraction",
        section="§4.2",
        sweep=(0.0, 0.3),
        marker="assumption",
        desc="coefficient of variation of every per-message service time and latency "
        "component (log-normal, drawn from the tenant's seeded generator)",
        source="[assumption] perftest's message rates vary ±15 % between sizes of one run "
        f"({_A1}); 0 makes runs deterministic",
    )
    tail_prob: Fraction = _p(
        0.002,
        unit="probability",
        section="§4.2",
        sweep=(0.0, 0.01),
        marker="assumption",
        desc="probability that one latency sample is hit by a host interruption",
        source="[assumption] ib_*_lat 99.9 % percentiles lie 1–3 µs above the median "
        "(tools-and-mechanisms.md A1.5: 'the first value measured is the maximum')",
    )
    tail_time: Duration = _p(
        "2us",
        unit="us",
        section="§4.2",
        sweep=("0.5us", "10us"),
        marker="assumption",
        desc="mean extra time (exponential) of such an interruption",
        source="[assumption]",
    )
    flow_window: int = _p(
        128,
        unit="count",
        section="§4.2",
        desc="messages a flow-level transfer keeps outstanding (perftest's default tx depth)",
        source="perftest DEF_TX_BW (tools-and-mechanisms.md A1.1)",
    )


class Efa(_Group):
    """EFA-specific numbers (``cost-model.md`` §4)."""

    effective_fraction: Fraction = _p(
        0.85,
        unit="fraction",
        section="§4",
        sweep=(0.8, 0.95),
        marker="derived",
        desc="fraction of aggregate EFA bandwidth in collectives",
        source="p4d ≈ 340 of 400 Gbps in all-reduce (`stas00/ml-engineering` network/README.md)",
    )


# -- §5 staging ----------------------------------------------------------------------------------


class Stage(_Group):
    """Host staging through bounce buffers (``cost-model.md`` §5, §1 item 5)."""

    copy_launch: Duration = _p(
        "6us",
        unit="us",
        section="§5",
        sweep=("5us", "7us"),
        desc="per copy submission",
        source="cudaMemcpyAsync overhead 5–7 µs (DualPath, arXiv 2602.21548); cudaMemcpy 6–7 µs "
        "(`NVIDIA/gdrcopy` README.md)",
    )
    chunk: Size = _p(
        "512KiB",
        unit="KiB",
        section="§5",
        sweep=("8KiB", "4MiB"),
        desc="bounce-buffer chunk (pipeline fragment)",
        source="UCX_RNDV_FRAG_SIZE default 512 KB; try 256 KB and 1 MB (`openucx/ucx` #6327)",
    )
    pipeline_eff: Fraction = _p(
        0.70,
        unit="fraction",
        section="§5",
        sweep=(0.6, 0.95),
        marker="derived",
        desc="fallback: fraction of the bottleneck stage (only with stage.mode = 'aggregate'; "
        "the built-in model is the explicit chunk pipeline)",
        source="2× DGX-A100 host-staged peak ≈ 0.70 of 24 GB/s (`openucx/ucx` #6206)",
    )
    dram_crossings: int = _p(
        2,
        unit="count",
        section="§5",
        desc="host-DRAM crossings per staged byte per host (a DMA write and a DMA read)",
        source="one DMA write into the bounce buffer, one DMA read out of it",
    )
    bounce_pinned: StrictBool = _p(
        True,
        unit="bool",
        section="§5",
        choices=(True, False),
        desc="bounce buffers are pinned host memory",
        source="pageable 8 KB bounce pipeline collapsed throughput (`openucx/ucx` #6206)",
    )
    mode: Literal["pipeline", "aggregate"] = _p(
        "pipeline",
        unit="choice",
        section="§1",
        choices=("pipeline", "aggregate"),
        desc="staging model: 'pipeline' = the explicit chunk pipeline (per chunk "
        "stage.copy_launch + the copy, then the NIC from host memory; host DRAM crossed twice); "
        "'aggregate' = the fallback pipeline_eff × the slowest stage",
        source="[pinlab] the two modes of cost-model.md §1 item 5",
    )


class Dram(_Group):
    """Host DRAM (``cost-model.md`` §5)."""

    efficiency: Fraction = _p(
        0.84,
        unit="fraction",
        section="§5",
        sweep=(0.70, 0.90),
        marker="derived",
        desc="typical / theoretical DRAM bandwidth",
        source="171.5 / 204.8 GB/s (DDR4-3200 × 8, Microway)",
    )


class Policy(_Group):
    """Hybrid data-placement policy threshold (``cost-model.md`` §5 notes)."""

    hybrid_threshold: Size | None = _p(
        None,
        unit="KiB",
        section="§5",
        sweep=("8KiB", "4MiB"),
        marker="assumption",
        desc="messages up to this size go P2P, larger ones are staged (None: pure policies)",
        source="MVAPICH2-GDR sends small messages over GDR and stages large ones",
    )


# -- §6 registration and pinning --------------------------------------------------------------


class RegHost(_Group):
    """Host-memory registration (``cost-model.md`` §6.1)."""

    fixed: Duration = _p(
        "16us",
        unit="us",
        section="§6.1",
        sweep=("10us", "100us"),
        desc="per registration",
        source="UCX's built-in estimate MEM_REG_OVERHEAD (`openucx/ucx` src/uct/ib/base/"
        "ib_md.c, marked 'TODO take default from device'), not a measurement",
    )
    per_byte: TimePerByte = _p(
        "0.06ns/B",
        unit="ns/B",
        section="§6.1",
        sweep=("0.023ns/B", "0.1ns/B"),
        desc="per byte (≈ 64 ms/GiB); 0.098 ns/B sequential or 0.023 ns/B parallel calibrations",
        source="UCX MEM_REG_GROWTH (`openucx/ucx` ib_md.c); range from the rows below",
    )
    rcache_lookup: Duration = _p(
        "90ns",
        unit="ns",
        section="§6.1",
        desc="per registration-cache hit",
        source="UCX RCACHE_OVERHEAD (`openucx/ucx` ib_md.c)",
    )
    seq_rate: TimePerByte = _p(
        "98ms/GB",
        unit="ms/GB",
        section="§6.1",
        sweep=("78ms/GB", "100ms/GB"),
        marker="derived",
        desc="sequential registration of pre-allocated memory",
        source=f"Mooncake 500 GB of DRAM ({_MOONCAKE855}); fi_mr_reg 256 GB > 20 s ≈ 78 ms/GB "
        "(`ofiwg/libfabric` #4738)",
    )
    parallel_rate: TimePerByte = _p(
        "23ms/GB",
        unit="ms/GB",
        section="§6.1",
        sweep=("20ms/GB", "30ms/GB"),
        marker="derived",
        desc="parallel registration",
        source=f"same PR ({_MOONCAKE855})",
    )


class RegEfa(_Group):
    """dma-buf MR registration on EFA (``cost-model.md`` §6.2): ``efa_reg_user_mr_dmabuf`` pins
    the umem and issues a synchronous admin-queue command (``EFA_ADMIN_REG_MR``) per MR."""

    fixed: Duration = _p(
        "60.6ms",
        unit="ms",
        section="§6.2",
        sweep=("30ms", "120ms"),
        desc="one registration before its own bytes count (the admin command's round trip)",
        source=f"EFA on p5.48xlarge, GPU memory, serial registration ({_MOONCAKE3210}): a "
        "2.79 MB buffer registered first 70 ms, a 391 MB one 1382 ms, so 70 − 2.79 × "
        "reg.efa.per_own_byte; validation-tables.md F1",
        confidence="medium",
    )
    per_registered: TimePerByte = _p(
        "260ms/GiB",
        unit="ms/GiB",
        section="§6.2",
        sweep=("130ms/GiB", "390ms/GiB"),
        desc="per GiB of device memory already registered on the same domain (order matters)",
        source=f"{_MOONCAKE3210}: linear in previously registered bytes, flat over 0–19 GiB; "
        "2505 ms after 9.17 GiB (validation-tables.md F1)",
        confidence="medium",
    )
    per_own_byte: TimePerByte = _p(
        "3.38ms/MB",
        unit="ms/MB",
        section="§6.2",
        sweep=("1.7ms/MB", "5ms/MB"),
        marker="derived",
        confidence="low",
        desc="per MB of the buffer itself (the physical buffer list and its pages)",
        source=f"{_MOONCAKE3210}: a 391 MB buffer registered first took 1382 ms, a 2.79 MB one "
        "70 ms: (1382 − 70) / (391 − 2.79)",
    )

    def dmabuf(self, length: int, registered_before: int, *, odp: bool) -> float:
        """Seconds one dma-buf MR registration takes (EFA has no ODP: ``odp`` is refused before
        it costs anything, so it is not priced here)."""
        return self.fixed + self.per_own_byte * length + self.per_registered * registered_before


class RegMlx5(_Group):
    """dma-buf MR registration on mlx5 (``mlx5_ib_reg_user_mr_dmabuf``): an mkey from the mkey
    cache (no firmware command on a hit) and the page list written by UMR work requests on a
    kernel QP (``mlx5r_umr_update_mr_pas``)."""

    fixed: Duration = _p(
        "30us",
        unit="us",
        section="§6.2",
        sweep=("10us", "1.4ms"),
        marker="assumption",
        desc="one registration with an mkey-cache hit: dma-buf attach and map, one UMR post "
        "and its completion",
        source="[assumption] tens of µs from the code path (no firmware command on a cache "
        "hit); range up to 1.4 ms, a GPU MR through nv_peer_mem on ConnectX-3 (`ut-osa/gpunet` "
        "#1). UCX's '16000 + 0.060 · N ns' (`openucx/ucx` #10929) is UCX's built-in default "
        "(MEM_REG_OVERHEAD, MEM_REG_GROWTH), not a measurement",
    )
    per_page: Duration = _p(
        "0ns",
        unit="ns",
        section="§6.2",
        sweep=("0ns", "100ns"),
        marker="assumption",
        desc="per 4 KiB page of the MR whose translation (MTT entry) the UMR writes",
        source="[assumption] no public timing of ibv_reg_dmabuf_mr on mlx5",
    )

    def dmabuf(self, length: int, registered_before: int, *, odp: bool) -> float:
        """Seconds one dma-buf MR registration takes; an ODP MR writes no page list up front
        (its translation is filled in by the first fault)."""
        pages = 0 if odp else -(-length // 4096)
        return self.fixed + self.per_page * pages


class Reg(_Group):
    """Registration costs (``cost-model.md`` §6.1, §6.2)."""

    host: RegHost = _group(RegHost, "host-memory registration (§6.1)")
    efa: RegEfa = _group(RegEfa, "dma-buf MR registration on EFA (§6.2)")
    mlx5: RegMlx5 = _group(RegMlx5, "dma-buf MR registration on mlx5 (§6.2)")
    host_mmap_flat: Duration = _p(
        "600ms",
        unit="ms",
        section="§6.2",
        desc="a 391 MB host mmap buffer, independent of registration order",
        source=f"{_MOONCAKE3210} (host buffers do not show the growth)",
    )
    multi_nic_factor: Factor = _p(
        7.0,
        unit="factor",
        section="§6.2",
        sweep=(1, 7),
        desc="× time when registering each buffer on all 32 NICs instead of the GPU's rail",
        source="`kvcache-ai/Mooncake` #3217 (p5.48xlarge)",
    )
    dmabuf_vs_peermem: Factor = _p(
        1.0,
        unit="factor",
        section="§6.2",
        desc="dma-buf vs peer-memory registration time ratio",
        source="no difference per an NCCL maintainer (`NVIDIA/nccl` #908); UCX, libfabric try "
        "dma-buf first (`openucx/ucx` PR #11002; `ofiwg/libfabric` PR #11804)",
    )

    def model(self, name: str) -> RegEfa | RegMlx5:
        """The dma-buf registration model ``name`` (:data:`RegModelName`, what an RDMA driver
        declares); ``KeyError`` for any other name."""
        if name == "efa":
            return self.efa
        if name == "mlx5":
            return self.mlx5
        raise KeyError(f"no registration model {name!r} (expected efa or mlx5)")


class DeregHost(_Group):
    """Host-memory deregistration (``cost-model.md`` §6.1)."""

    seq_rate: TimePerByte = _p(
        "23.5ms/GB",
        unit="ms/GB",
        section="§6.1",
        marker="derived",
        desc="sequential unregistration",
        source=f"{_MOONCAKE855}",
    )
    parallel_rate: TimePerByte = _p(
        "2.9ms/GB",
        unit="ms/GB",
        section="§6.1",
        marker="derived",
        desc="parallel unregistration",
        source=f"{_MOONCAKE855}",
    )


class Dereg(_Group):
    """Deregistration costs (``cost-model.md`` §6.1)."""

    host: DeregHost = _group(DeregHost, "host-memory deregistration (§6.1)")


class AllocHost(_Group):
    """Host allocation (``cost-model.md`` §6.1)."""

    rate: TimePerByte = _p(
        "7.4ms/GB",
        unit="ms/GB",
        section="§6.1",
        marker="derived",
        desc="allocation of the region",
        source=f"{_MOONCAKE855} (3.6–3.8 s per 500 GB)",
    )


class Alloc(_Group):
    """Allocation costs (``cost-model.md`` §6.1)."""

    host: AllocHost = _group(AllocHost, "host allocation (§6.1)")


class Pin(_Group):
    """Pinning device memory and its capacity (``cost-model.md`` §6.3)."""

    gpu_cost: Duration = _p(
        "10us",
        unit="us",
        section="§6.3",
        sweep=("10us", "1ms"),
        desc="fixed cost of pinning device memory (the '10 µs' of '10 µs + linear')",
        source="gdr_pin_buffer (`NVIDIA/gdrcopy` README.md)",
    )
    gpu_cost_per_byte: TimePerByte = _p(
        "0s/B",
        unit="ns/B",
        section="§6.3",
        marker="assumption",
        desc="linear part of pin.gpu_cost; the doc gives no slope, only 10 µs – 1 ms by size",
        source="[pinlab] the '+ linear' of the pin.gpu_cost row (`NVIDIA/gdrcopy` README.md)",
    )
    bar1_consumer: Size = _p(
        "256MiB",
        unit="MiB",
        section="§6.3",
        sweep=("128MiB", "256MiB"),
        desc="BAR window of a consumer part (a datacenter part's BAR = its device memory)",
        source="T4 BAR1 256 MB (`Mellanox/nv_peer_memory` #101); RTX A4000 ~220 MB "
        "(`NVIDIA/gdrcopy` #301); RTX 3080 (`openucx/ucx` #8049)",
    )
    alignment: Size = _p(
        "64KiB",
        unit="KiB",
        section="§6.3",
        desc="BAR pin alignment",
        source="`enfiskutensykkel/ssd-gpu-dma` #26",
    )
    max_per_device: Size | None = _p(
        None,
        unit="GiB",
        section="§6.3",
        desc="cap on RDMA-pinned device memory per device (None: unlimited, as upstream)",
        source="AMD dmabuf_pin_max_mb proposal (`ROCm/amdgpu` PR #212); upstream has no cap",
    )


# -- §7 ODP ---------------------------------------------------------------------------------------


class Odp(_Group):
    """Hardware ODP fault costs (``cost-model.md`` §7)."""

    fault: Duration = _p(
        "1ms",
        unit="ms",
        section="§7",
        sweep=("0.05ms", "3ms"),
        marker="assumption",
        desc="per NIC page fault (hardware ODP)",
        source="no primary measurement of common-case mlx5 fault latency",
    )
    fault_implied: tuple[Duration, Duration] = _p(
        ("1.75ms", "2.85ms"),
        unit="ms",
        section="§7",
        marker="derived",
        desc="implied fault cost range (low, high); reference only",
        source=f"NP-RDMA minor fault 3.5–5.7 µs × '500× faster than ODP' ({_NPRDMA})",
    )
    tail_multiplier: Factor = _p(
        1000,
        unit="factor",
        section="§7",
        sweep=(1000, 10000),
        desc="× odp.fault for a fault with packet loss and retransmission",
        source="Fukuoka, Sato, Taura, 'Pitfalls of InfiniBand with On-Demand Paging' (ISPASS 2021)",
    )
    tail_prob: Fraction = _p(
        0.0,
        unit="probability",
        section="§7",
        sweep=(0.0, 0.01),
        marker="assumption",
        desc="probability per fault of the tail cost",
        source="[assumption]",
    )
    fault_granularity: Size = _p(
        "4KiB",
        unit="KiB",
        section="§7",
        choices=("4KiB", "64KiB"),
        desc="bytes per NIC fault without prefetch",
        source="out-of-order NIC DMA splits work into 4 KB / 64 KB chunks "
        "(`meta-pytorch/monarch` PR #4923)",
    )
    prefetch: StrictBool = _p(
        False,
        unit="bool",
        section="§7",
        choices=(False, True),
        desc="ibv_advise_mr prefetch before first use",
        source="`meta-pytorch/monarch` PR #4923; `linux-rdma/rdma-core` PR #830, #1605",
    )
    rdma_prefetch_max: Size = _p(
        "4MiB",
        unit="MiB",
        section="§7",
        desc="prefetched after an RDMA responder fault of unknown length",
        source="kernel MAX_PREFETCH_LEN (mlx5 odp.c)",
    )
    implicit_chunk: Size = _p(
        "1GiB",
        unit="GiB",
        section="§7",
        desc="per implicit-ODP child MR",
        source="MLX5_IMR_MTT_SIZE (mlx5 odp.c)",
    )
    hmm_busy_timeout: Duration = _p(
        "1000ms",
        unit="ms",
        section="§7",
        desc="before a busy fault gives up",
        source="HMM_RANGE_DEFAULT_TIMEOUT (umem_odp.c)",
    )
    mtt_update_per_page: Duration = _p(
        "0ns",
        unit="ns",
        section="§7",
        sweep=("0ns", "100ns"),
        marker="assumption",
        desc="per page rewritten by a UMR (dma-buf ODP MRs rewrite every MTT on re-fault)",
        source="[assumption] no source",
    )


class SwOdp(_Group):
    """Software ODP scheme (``cost-model.md`` §7)."""

    no_fault: Duration = _p(
        "0.1us",
        unit="us",
        section="§7",
        sweep=("0.1us", "2us"),
        desc="added per access when no fault occurs",
        source=_NPRDMA,
    )
    minor_fault: Duration = _p(
        "5us",
        unit="us",
        section="§7",
        sweep=("3.5us", "5.7us"),
        desc="minor fault",
        source=_NPRDMA,
    )
    major_fault: Duration = _p("60us", unit="us", section="§7", desc="major fault", source=_NPRDMA)


class Uvm(_Group):
    """GPU UVM, for comparison (``cost-model.md`` §7)."""

    far_fault: Duration = _p(
        "45us",
        unit="us",
        section="§7",
        sweep=("20us", "60us"),
        marker="derived",
        desc="per GPU UVM far fault",
        source="UVMSmart page_fault_latency 66,645 cycles at ≈ 1.48 GHz "
        "(`DebashisGanguly/gpgpu-sim_UVMSmart` README.md)",
    )


# -- §8 eviction ----------------------------------------------------------------------------------


class EvictD2h(_Group):
    """VRAM → host copy-engine rates (``cost-model.md`` §8)."""

    gen3: Rate = _p(
        "12.9GB/s",
        unit="GB/s",
        section="§8",
        sweep=("11.8GB/s", "12.9GB/s"),
        desc="PCIe Gen3 x16",
        source=f"P100 D2H 12.89 GB/s ({_GEARSHIFFT})",
    )
    gen4: Rate = _p(
        "24GB/s",
        unit="GB/s",
        section="§8",
        sweep=("24GB/s", "25GB/s"),
        desc="PCIe Gen4 x16",
        source=f"DGX-A100 ≈ 24 GB/s (`openucx/ucx` #6206); A100 ≈ 25 GB/s ({_NVBW42})",
    )
    gen5: Rate = _p(
        "52.8GB/s",
        unit="GB/s",
        section="§8",
        sweep=("50GB/s", "53GB/s"),
        desc="PCIe Gen5 x16",
        source="H100 (`NVIDIA/nvbandwidth` #24)",
    )


class Evict(_Group):
    """Eviction and migration (``cost-model.md`` §8)."""

    d2h: EvictD2h = _group(EvictD2h, "eviction copy rate by PCIe generation (§8)")
    moveback_throttle: StrictBool = _p(
        True,
        unit="bool",
        section="§8",
        choices=(True, False),
        desc="moves back to VRAM are rate-limited (the rate itself is an open assumption)",
        source="amdgpu throttles moves back to VRAM (`GpuZelenograd/memtest_vulkan` #10)",
    )


class Hbm(_Group):
    """On-device memory (``cost-model.md`` §8)."""

    copy_efficiency: Fraction = _p(
        0.85,
        unit="fraction",
        section="§8",
        sweep=(0.75, 0.87),
        marker="derived",
        desc="fraction of spec HBM bandwidth for on-device copies",
        source="A100 40 GB memcpy 1355/1555 ≈ 0.87 (`PTsolvers/gpu-workshop-JuliaCon23` #7); "
        "GTX 1080 Ti ≈ 0.74 (NVIDIA forum)",
    )


# -- §G GPU links, copy engines, NCCL (docs/cost-model/gpu.md) ----------------------------------

_MLE = "`stas00/ml-engineering` network/README.md"
_NCCL_TUNING = "`NVIDIA/nccl` src/graph/tuning.cc (ncclTunerConstantsDefaults, ncclTopoTuneModel)"


class NvlinkGen3(_Group):
    """NVLink 3 (A100): per-link rate, links per GPU, packet overhead, link-layer efficiency
    (``docs/cost-model/gpu.md`` §G1)."""

    link_rate: Rate = _p(
        "25GB/s",
        unit="GB/s",
        section="§G1",
        confidence="high",
        desc="signalling rate of one link, per direction",
        source="`NVIDIA/nccl-tests` #149 (NCCL maintainer: 25 GB/s per link, 12 links); "
        "`nvidia-smi nvlink -s` 'Link n: 25 GB/s' (`NVIDIA/nccl-tests` #228)",
    )
    links: int = _p(
        12,
        unit="count",
        section="§G1",
        confidence="high",
        desc="NVLinks of one A100 SXM (to the NVSwitches or its peers)",
        source="`NVIDIA/nccl-tests` #149, #228 (12 × 25 = 300 GB/s per direction)",
    )
    packet_overhead: Size = _p(
        "16B",
        unit="B",
        section="§G1",
        sweep=("8B", "32B"),
        marker="assumption",
        confidence="low",
        desc="bytes of header per NVLink packet (one 128-bit header flit)",
        source="[assumption] NVLink moves 16-byte flits, one header flit per request packet; "
        "consistent with SM (128 B) copies ≈ 0.8 of the link and CE (256 B) ≈ 0.9 "
        "(`NVIDIA/nccl-tests` #149)",
    )
    link_efficiency: Fraction = _p(
        0.972,
        unit="fraction",
        section="§G1",
        sweep=(0.9, 1.0),
        marker="derived",
        confidence="medium",
        desc="payload-independent link-layer efficiency (CRC, flow control, replay)",
        source=f"calibrated on C1 (A100 P2P writes, CE 256 B packets: mean 274.5 GB/s of 300 × "
        f"256/272; {_MLE}); C11 (nvbandwidth README write CE 276.3) gives 0.979",
    )


class NvlinkGen4(_Group):
    """NVLink 4 (H100 SXM) (``docs/cost-model/gpu.md`` §G1)."""

    link_rate: Rate = _p(
        "25GB/s",
        unit="GB/s",
        section="§G1",
        confidence="high",
        desc="signalling rate of one link, per direction",
        source="18 links × 25 GB/s = 450 GB/s per direction, '900GB/s' bidirectional "
        "(`open-mpi/hwloc` #574; mlcommons DGX-H100 system JSON '18x 4th Gen NVLink')",
    )
    links: int = _p(
        18,
        unit="count",
        section="§G1",
        confidence="high",
        desc="NVLinks of one H100 SXM",
        source="`open-mpi/hwloc` #574; mlcommons inference_results_v4.1 DGX-H100 JSON",
    )
    packet_overhead: Size = _p(
        "16B",
        unit="B",
        section="§G1",
        sweep=("8B", "32B"),
        marker="assumption",
        confidence="low",
        desc="bytes of header per NVLink packet (one 128-bit header flit)",
        source="[assumption] as nvlink.gen3.packet_overhead",
    )
    link_efficiency: Fraction = _p(
        0.888,
        unit="fraction",
        section="§G1",
        sweep=(0.8, 1.0),
        marker="derived",
        confidence="medium",
        desc="payload-independent link-layer efficiency",
        source=f"calibrated on C2 (H100 P2P writes, CE 256 B packets: median 376.1 GB/s of 450 × "
        f"256/272; {_MLE}). Not from `NVIDIA/nccl` #1264 (holdout)",
    )


class Nvlink(_Group):
    """NVLink generations (``docs/cost-model/gpu.md`` §G1)."""

    gen3: NvlinkGen3 = _group(NvlinkGen3, "NVLink 3, A100 (§G1)")
    gen4: NvlinkGen4 = _group(NvlinkGen4, "NVLink 4, H100 (§G1)")


class CopyEngines(_Group):
    """GPU copies: copy engines (CE) versus copy kernels (SM), launch and staging costs
    (``docs/cost-model/gpu.md`` §G2)."""

    ce_payload: Size = _p(
        "256B",
        unit="B",
        section="§G2",
        confidence="high",
        desc="bytes per write a copy engine sends over NVLink",
        source="`NVIDIA/nccl-tests` #149 (copy engines use 256 B payloads)",
    )
    sm_payload: Size = _p(
        "128B",
        unit="B",
        section="§G2",
        confidence="high",
        desc="bytes per store of a copy kernel (SM copies, NCCL's kernels)",
        source="`NVIDIA/nccl-tests` #149 (SM copies are limited to 128 B payloads)",
    )
    ce_read_inflight: Size = _p(
        "22.5KiB",
        unit="KiB",
        section="§G2",
        sweep=("16KiB", "64KiB"),
        marker="derived",
        confidence="low",
        desc="bytes of reads one copy engine keeps outstanding over PCIe (its own window: two "
        "engines reading one BAR each have theirs)",
        source="45 requests of 512 B, as the copy kernel's (gpucopy.sm_read_inflight, "
        "calibrated on C8); C10 (`NVIDIA/nvbandwidth` #50, RTX A6000 CE peer reads: 26.3 GB/s "
        "= the Gen4 completion rate within a group, 21.8–22.7 GB/s across) agrees with it when "
        "the two groups are two sockets with a PCIe switch each (1.04 µs read latency across; "
        "the source does not show the topology). Against it: busGrind's 56 GB/s H2D on Gen5 "
        "(`NVIDIA/cuda-samples` #357, C14, excerpt only) would need ≥ 36 KiB",
    )
    sm_read_inflight: Size = _p(
        "22.5KiB",
        unit="KiB",
        section="§G2",
        sweep=("16KiB", "32KiB"),
        marker="derived",
        confidence="medium",
        desc="bytes of reads a copy kernel keeps outstanding over PCIe (H2D SM copies)",
        source="calibrated on C8: H100 host_to_device_memcpy_sm 35.2 GB/s while "
        "device_to_host_memcpy_sm gets 52.8 (`NVIDIA/nvbandwidth` #24) = 35.2 GB/s × the "
        "host read latency of the dgx-h100 path (pcie.lat.host_read 0.55 µs + one switch "
        "0.1 µs), rounded to whole 512-byte requests (45)",
    )
    launch_gpu: Duration = _p(
        "1.1us",
        unit="us",
        section="§G2",
        sweep=("0.8us", "2.5us"),
        marker="derived",
        confidence="medium",
        desc="GPU time per small copy (copy-engine setup and completion)",
        source="p2pBandwidthLatencyTest P2P=Enabled GPU latency 1.12–1.14 µs (RTX 6000 Ada, C3), "
        "1.21–1.44 µs (C4) (`luigifcruz/stelline` hardware notes)",
    )
    enqueue_cpu: Duration = _p(
        "1.4us",
        unit="us",
        section="§G2",
        sweep=("1.3us", "9.6us"),
        marker="derived",
        confidence="medium",
        desc="CPU time to enqueue one cudaMemcpyAsync",
        source="p2pBandwidthLatencyTest P2P=Enabled CPU latency 1.32 µs (C3), 1.41–1.46 µs (C4); "
        "6.6–9.6 µs on an HGX A100 with an older driver (`NVIDIA/nccl-tests` #100)",
    )
    staged_chunk: Size = _p(
        "1MiB",
        unit="MiB",
        section="§G2",
        sweep=("256KiB", "4MiB"),
        marker="derived",
        confidence="low",
        desc="chunk of the driver's staging pipeline for peer copies without P2P",
        source="C3: staged 22.23 GB/s against 26.32 with P2P = one chunk's handoff "
        "(gpucopy.staged_handoff) per chunk / 26.3 GB/s (`luigifcruz/stelline`)",
    )
    staged_handoff: Duration = _p(
        "8us",
        unit="us",
        section="§G2",
        sweep=("5us", "12us"),
        marker="derived",
        confidence="low",
        desc="per staged chunk: the driver's wait between the device-to-host and host-to-device "
        "halves",
        source="C3 P2P=Disabled GPU latency 10.46–10.90 µs − 2 × gpucopy.launch_gpu "
        "(`luigifcruz/stelline`)",
    )
    staged_enqueue_cpu: Duration = _p(
        "4.8us",
        unit="us",
        section="§G2",
        sweep=("4.7us", "6.5us"),
        marker="derived",
        confidence="low",
        desc="CPU time to enqueue one peer copy that the driver stages",
        source="C3 P2P=Disabled CPU latency 4.74–4.86 µs; C4 5.2–6.5 µs (`luigifcruz/stelline`)",
    )

    jitter: Fraction = _p(
        0.02,
        unit="fraction",
        section="§G2",
        sweep=(0.0, 0.1),
        marker="assumption",
        confidence="low",
        desc="spread (lognormal shape) of a GPU operation's latency from run to run: copy "
        "launches, enqueues, collective steps",
        source="[assumption] published matrices vary by ≈ 1–3 % between cells of one run "
        "(C3, C4: 1.12–1.14 µs, 26.32–26.33 GB/s)",
    )


class Nccl(_Group):
    """NCCL's collectives: protocols, per-step latencies, launch cost
    (``docs/cost-model/gpu.md`` §G5). The latencies are NCCL's own tuner constants (what its
    developers measured); the bandwidths come from the links."""

    launch: Duration = _p(
        "3.6us",
        unit="us",
        section="§G5",
        sweep=("2us", "6us"),
        marker="derived",
        confidence="low",
        desc="CPU time of one collective kernel launch (one thread launches its -g GPUs in turn)",
        source="calibrated on B4 (A100 8 GPUs, -g 8): 43.8 µs at 32 KiB − the LL ring latency "
        f"6.6 + 14 × 0.6 µs (nccl.ring_base, nccl.ring_nvlink), over 8 launches ({_MLE})",
    )
    ring_base: tuple[Duration, Duration, Duration] = _p(
        ("6.6us", "14us", "8.4us"),
        unit="us",
        section="§G5",
        confidence="medium",
        desc="ring base latency (LL, LL128, Simple)",
        source=_NCCL_TUNING,
    )
    ring_nvlink: tuple[Duration, Duration, Duration] = _p(
        ("0.6us", "1.9us", "3.4us"),
        unit="us",
        section="§G5",
        confidence="medium",
        desc="per ring step over NVLink (LL, LL128, Simple)",
        source=_NCCL_TUNING,
    )
    ring_pci: tuple[Duration, Duration, Duration] = _p(
        ("1us", "2.5us", "5.7us"),
        unit="us",
        section="§G5",
        confidence="medium",
        desc="per ring step over PCIe (LL, LL128, Simple)",
        source=_NCCL_TUNING,
    )
    ring_net: tuple[Duration, Duration, Duration] = _p(
        ("2.7us", "4us", "14us"),
        unit="us",
        section="§G5",
        confidence="medium",
        desc="per ring step across the network (LL, LL128, Simple), beyond the NIC's latency",
        source=_NCCL_TUNING,
    )
    tree_base: tuple[Duration, Duration, Duration] = _p(
        ("6.8us", "14us", "8.4us"),
        unit="us",
        section="§G5",
        confidence="medium",
        desc="tree base latency (LL, LL128, Simple)",
        source=_NCCL_TUNING,
    )
    tree_nvlink: tuple[Duration, Duration, Duration] = _p(
        ("0.6us", "1.25us", "4us"),
        unit="us",
        section="§G5",
        confidence="medium",
        desc="per tree level inside a node over NVLink (LL, LL128, Simple)",
        source=_NCCL_TUNING,
    )
    net_overhead_intel: Duration = _p(
        "1us",
        unit="us",
        section="§G5",
        confidence="medium",
        desc="per intra-node step of a multi-node ring: the proxy's network post overhead on an "
        "Intel host (× 3 with Simple)",
        source=f"{_NCCL_TUNING} (getNetOverhead)",
    )
    net_overhead_amd: Duration = _p(
        "2us",
        unit="us",
        section="§G5",
        confidence="medium",
        desc="the same on an AMD host",
        source=f"{_NCCL_TUNING} (getNetOverhead)",
    )
    tree_net: tuple[Duration, Duration, Duration] = _p(
        ("5us", "8.5us", "14us"),
        unit="us",
        section="§G5",
        confidence="medium",
        desc="per tree level across the network (LL, LL128, Simple)",
        source=_NCCL_TUNING,
    )
    ll_efficiency: Fraction = _p(
        0.5,
        unit="fraction",
        section="§G5",
        confidence="high",
        desc="payload share of LL lines (4 bytes of data per 8-byte store with its flag)",
        source=f"{_NCCL_TUNING}: ring LL busBw × 0.5",
    )
    ll128_efficiency: Fraction = _p(
        0.9375,
        unit="fraction",
        section="§G5",
        confidence="high",
        desc="payload share of LL128 lines (120 of 128 bytes)",
        source=f"{_NCCL_TUNING}: '120.0/128.0'",
    )
    simple_efficiency: Fraction = _p(
        0.907,
        unit="fraction",
        section="§G5",
        sweep=(0.85, 1.0),
        marker="derived",
        confidence="medium",
        desc="share of the links NCCL's Simple protocol keeps busy (chunk flags, reductions)",
        source="calibrated on B4's plateau: busbw 234.9 GB/s over NVLink 3 at SM payloads "
        f"(300 × 128/144 × 0.972 = 259.2) ({_MLE})",
    )
    nvls_efficiency: Fraction = _p(
        0.85,
        unit="fraction",
        section="§G5",
        sweep=(0.7, 1.0),
        confidence="medium",
        desc="share of a GPU's NVLink ports an NVLS (NVSwitch in-switch reduction) all-reduce "
        "keeps busy (Hopper)",
        source=f"{_NCCL_TUNING}: nvlsEfficiency Hopper 0.85",
    )
    nvls_latency: Duration = _p(
        "25us",
        unit="us",
        section="§G5",
        confidence="medium",
        desc="latency of an NVLS call inside a node (Simple)",
        source=f"{_NCCL_TUNING}: hwLatencies NVLINK NVLS Simple",
    )
    nvls_tree_net: Duration = _p(
        "20.9us",
        unit="us",
        section="§G5",
        confidence="medium",
        desc="per network tree level of an NVLS-tree call (Simple), beyond the NIC's latency",
        source=f"{_NCCL_TUNING}: hwLatencies NET NVLSTree Simple",
    )
    ll_channel_max: Rate = _p(
        "11GB/s",
        unit="GB/s",
        section="§G5",
        sweep=("5GB/s", "20GB/s"),
        marker="derived",
        confidence="low",
        desc="LL bandwidth of one channel",
        source=f"{_NCCL_TUNING}: llMaxBws Ampere single node 87.7 GB/s over 8 channels",
    )
    ll128_channel_max: Rate = _p(
        "20GB/s",
        unit="GB/s",
        section="§G5",
        sweep=("15GB/s", "40GB/s"),
        confidence="medium",
        desc="LL128 bandwidth of one ring channel (Ampere; Hopper 36.7)",
        source=f"{_NCCL_TUNING}: perChMaxRingLL128Bws",
    )
    buffsize: Size = _p(
        "4MiB",
        unit="MiB",
        section="§G5",
        confidence="high",
        desc="NCCL_BUFFSIZE: a channel's Simple buffer; a network message is one of its 8 steps "
        "(NCCL_STEPS), 512 KiB by default",
        source="`NVIDIA/nccl` src/include/device.h (NCCL_STEPS 8), docs (NCCL_BUFFSIZE 4 MiB)",
    )
    channels: int = _p(
        8,
        unit="count",
        section="§G5",
        sweep=(2, 32),
        marker="assumption",
        confidence="low",
        desc="channels (parallel rings) NCCL runs",
        source="[assumption] NCCL's default for 8 NVSwitch GPUs on one node; NCCL_MIN_NCHANNELS / "
        "NCCL_MAX_NCHANNELS change it",
    )
    channels_one_gpu: int = _p(
        2,
        unit="count",
        section="§G5",
        sweep=(1, 4),
        confidence="medium",
        desc="channels NCCL runs when every node has one rank (one GPU and its NIC): each is a "
        "connection of its own, a QP per channel on IB",
        source="NCCL 2.21 INFO logs of 2-node runs with one GPU per node, IB with GDRDMA and EFA: "
        "'nRanks 2 nNodes 2 localRanks 1', 'Channel 00/02', 'Channel 01/02', '2 coll channels' "
        "(public logs found by content search; the ring search finds one channel through the "
        "NIC and duplicates it)",
    )


# -- the model ----------------------------------------------------------------------------------


class CostModel(_Group):
    """Every parameter of ``cost-model.md`` §2–§8 (frozen; see the module docstring).

    ``CostModel()`` holds the doc's defaults. Derived quantities follow ``cost-model.md`` §1:
    :meth:`pcie_rate` (link rates, by the PCIe mechanism of :mod:`pinlab.platform.pcie_model`),
    :meth:`raw_rate`, :meth:`evict_d2h`, :meth:`restore_h2d`, :meth:`swap_time`,
    :meth:`dram_rate`; the NIC and RDMA mechanisms are :mod:`pinlab.platform.rdma_model`.
    """

    pcie: Pcie = _group(Pcie, "PCIe links (§2)")
    c2c: C2c = _group(C2c, "coherent CPU links (§2.1)")
    numa: Numa = _group(Numa, "remote-socket host memory (§2.2)")
    cpu: Cpu = _group(Cpu, "CPU access to BARs (§2.2)")
    nic: Nic = _group(Nic, "NIC models (§4.1)")
    rdma: Rdma = _group(Rdma, "RDMA host side and transport (§4.2)")
    efa: Efa = _group(Efa, "EFA (§4)")
    stage: Stage = _group(Stage, "host staging (§5)")
    dram: Dram = _group(Dram, "host DRAM (§5)")
    policy: Policy = _group(Policy, "hybrid policy (§5)")
    reg: Reg = _group(Reg, "registration (§6.1, §6.2)")
    dereg: Dereg = _group(Dereg, "deregistration (§6.1)")
    alloc: Alloc = _group(Alloc, "allocation (§6.1)")
    pin: Pin = _group(Pin, "pinning (§6.3)")
    odp: Odp = _group(Odp, "hardware ODP (§7)")
    swodp: SwOdp = _group(SwOdp, "software ODP (§7)")
    uvm: Uvm = _group(Uvm, "GPU UVM (§7)")
    evict: Evict = _group(Evict, "eviction (§8)")
    hbm: Hbm = _group(Hbm, "device memory (§8)")
    nvlink: Nvlink = _group(Nvlink, "NVLink generations (§G1)")
    gpucopy: CopyEngines = _group(CopyEngines, "GPU copy engines and copy kernels (§G2)")
    nccl: Nccl = _group(Nccl, "NCCL collectives (§G5)")

    # -- derived quantities (cost-model.md §1) ----------------------------------------------

    def _gen(self, gen: int) -> PcieGen3 | PcieGen4 | PcieGen5:
        if gen == 3:
            return self.pcie.gen3
        if gen == 4:
            return self.pcie.gen4
        if gen == 5:
            return self.pcie.gen5
        raise ValueError(f"PCIe generation must be 3, 4 or 5 (cost-model.md §2.1), not {gen!r}")

    def pcie_rate(
        self, gen: int, width: int = 16, direction: str = "up", mps: int | None = None
    ) -> float:
        """Payload rate of a PCIe link in bytes/s, one direction (``cost-model.md`` §2.1).

        ``direction`` is ``"up"`` (device → host, D2H) or ``"down"`` (H2D). With
        ``pcie.rate_model = "mechanism"`` (the default): posted writes of ``mps`` bytes
        (default ``pcie.mps``) through :func:`pinlab.platform.pcie_model.write_rate` -- raw ×
        link-level efficiency × MPS / (MPS + TLP overhead), the same both ways (Gen3/4/5 x16,
        MPS 256: 12.99 / 25.99 / 51.98 GB/s). The fallbacks: ``"measured"`` =
        ``pcie.genN.eff`` (Gen5 H2D: ``pcie.gen5.h2d``), ``"raw_x_efficiency"`` =
        ``pcie.genN.raw × pcie.efficiency``, both × ``width / 16``.
        """
        if direction not in ("up", "down"):
            raise ValueError(f"direction must be 'up' or 'down', not {direction!r}")
        g = self._gen(gen)
        if self.pcie.rate_model == "mechanism":
            return pcie_model.write_rate(self, gen, width, self.pcie.mps if mps is None else mps)
        if self.pcie.rate_model == "raw_x_efficiency":
            rate = g.raw * self.pcie.efficiency
        elif direction == "down" and isinstance(g, PcieGen5):
            rate = g.h2d
        else:
            rate = g.eff
        return rate * width / 16

    def raw_rate(self, gen: int, width: int = 16) -> float:
        """Raw (line-coded) rate of a PCIe link, one direction, bytes/s: ``pcie.genN.raw`` ×
        ``width / 16``."""
        return self._gen(gen).raw * width / 16

    def evict_d2h(self, gen: int) -> float:
        """VRAM → host copy rate for a PCIe generation, bytes/s (``evict.d2h.genN``, §8)."""
        self._gen(gen)
        rate: float = getattr(self.evict.d2h, f"gen{gen}")
        return rate

    def restore_h2d(self, gen: int) -> float:
        """Host → VRAM copy rate: ``restore.h2d.genN`` = the x16 link rate of
        :meth:`pcie_rate` (``cost-model.md`` §8)."""
        return self.pcie_rate(gen, 16, "down")

    def swap_time(self, working_set: int, gen: int) -> float:
        """``swap.model``: 2 × working set / PCIe rate, seconds (``cost-model.md`` §8)."""
        return 2 * working_set / self.pcie_rate(gen, 16, "up")

    def dram_rate(self, theoretical: float) -> float:
        """Usable DRAM bandwidth: theoretical × ``dram.efficiency`` (``cost-model.md`` §5)."""
        return theoretical * self.dram.efficiency

    # -- overrides ---------------------------------------------------------------------------

    def with_overrides(self, overrides: Mapping[str, object], source: str = "") -> CostModel:
        """A copy with dotted keys replaced: ``{"pcie.efficiency": "0.75", "odp.fault": "2ms"}``.

        Values are validated like a file's (units required for rates and times). Overriding
        ``pcie.efficiency`` without ``pcie.rate_model`` selects ``raw_x_efficiency``, since
        otherwise the override would change nothing. Raises :class:`ConfigError` whose message
        names ``source`` (default ``"cost model"``) and the key: an unknown key (with the
        nearest valid one), or ``expected ..., found ...``.
        """
        source = source or "cost model"
        if not overrides:
            return self
        data = self.model_dump()
        changes = dict(overrides)
        if "pcie.efficiency" in changes and "pcie.rate_model" not in changes:
            changes["pcie.rate_model"] = "raw_x_efficiency"
        keys = set(parameter_keys())
        groups = _group_keys()
        for key, value in changes.items():
            if key not in keys and not (key in groups and isinstance(value, Mapping)):
                near = difflib.get_close_matches(key, sorted(keys), n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise ConfigError(
                    source, key, f"expected a cost-model parameter{hint}, found {key!r}"
                )
            *path, leaf = key.split(".")
            node = data
            for part in path:
                node = node[part]
            if isinstance(value, Mapping):
                node[leaf] = {**node[leaf], **value}
            else:
                node[leaf] = value
        try:
            return CostModel.model_validate(data, context=STRICT_UNITS)
        except ValidationError as e:
            raise config_error(e, source) from None

    @classmethod
    def load(cls, data: Mapping[str, Any], source: str = "") -> CostModel:
        """Validate a nested mapping (a file's ``[cost]`` table) with one-line errors."""
        try:
            return cls.model_validate(dict(data), context=STRICT_UNITS)
        except ValidationError as e:
            raise config_error(e, source or "cost model") from None


# -- parameter listing ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParamInfo:
    """One cost-model row: its key, value (base units), how the doc shows it, and provenance."""

    key: str
    value: Any
    default: Any
    unit: str
    section: str
    description: str
    source: str
    sweep: tuple[Any, ...] | None
    choices: tuple[Any, ...] | None
    marker: str | None
    confidence: Confidence = "high"

    @property
    def text(self) -> str:
        """The value in the doc's unit: ``"12 GB/s"``, ``"1.75 µs"``, ``"0.8"``."""
        return _in_unit(self.value, self.unit)

    @property
    def default_text(self) -> str:
        """The default in the doc's unit."""
        return _in_unit(self.default, self.unit)

    @property
    def changed(self) -> bool:
        """Whether the value differs from the doc's default."""
        return bool(self.value != self.default)


_SCALE_PARSERS = (
    ("rate", parse_rate),
    ("time_per_byte", parse_time_per_byte),
    ("time", parse_time),
    ("size", parse_size),
)


def _unit_scale(unit: str) -> float | None:
    if unit == "Gbps":
        return parse_line_rate("1Gbps")
    for _, parse in _SCALE_PARSERS:
        try:
            return float(parse("1" + unit))
        except ValueError:
            continue
    return None


def _in_unit(value: Any, unit: str) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return "–".join(_in_unit(v, unit) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value
    scale = _unit_scale(unit)
    if scale is None:
        return _short(float(value))
    shown = "µs" if unit == "us" else unit
    return f"{_short(float(value) / scale)} {shown}"


def _short(x: float) -> str:
    if x == 0:
        return "0"
    text = f"{x:.6g}"
    if "e" in text:
        return text
    return text.rstrip("0").rstrip(".") if "." in text else text


def _walk(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _walk(ann, key + ".")
        else:
            yield key, field


def parameter_keys() -> list[str]:
    """Every leaf key, dotted, in document order (``pcie.gen3.raw`` ... ``hbm.copy_efficiency``)."""
    return [key for key, _ in _walk(CostModel)]


def _group_keys() -> set[str]:
    out: set[str] = set()
    for key in parameter_keys():
        parts = key.split(".")
        for i in range(1, len(parts)):
            out.add(".".join(parts[:i]))
    return out


def _get(model: BaseModel, key: str) -> Any:
    node: Any = model
    for part in key.split("."):
        node = getattr(node, part)
    return node


_DEFAULT: CostModel | None = None


def parameters(cost: CostModel | None = None) -> list[ParamInfo]:
    """All cost-model rows with their values in ``cost`` (default: the doc's defaults).

    For ``pinlab params`` and the docs: each :class:`ParamInfo` has the key, the value (base
    units), the doc's unit, section, description, source, sweep range or choices and marker.
    """
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = CostModel()
    base = _DEFAULT
    cost = base if cost is None else cost
    out: list[ParamInfo] = []
    for key, field in _walk(CostModel):
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        sweep = extra.get("sweep")
        choices = extra.get("choices")
        out.append(
            ParamInfo(
                key=key,
                value=_get(cost, key),
                default=_get(base, key),
                unit=str(extra.get("unit", "")),
                section=str(extra.get("section", "")),
                description=field.description or "",
                source=str(extra.get("source", "")),
                sweep=tuple(sweep) if isinstance(sweep, list) else None,
                choices=tuple(choices) if isinstance(choices, list) else None,
                marker=str(extra["marker"]) if "marker" in extra else None,
                confidence=extra.get("confidence", "high"),
            )
        )
    return out
