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
:func:`parameters` lists them all (``pinlab params``; docs). The rows themselves are data,
:data:`TABLE_FILE` next to this module: the classes here declare each field's type, the table its
default and metadata, read once at import (:func:`_rows`).

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
import inspect
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, create_model

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


TABLE_FILE = "cost.toml"
"""The rows themselves, next to this module: one TOML table per key (``[pcie.gen3.raw]``) with
``default`` (in the doc's unit; absent for none), ``unit``, ``section``, ``desc``, ``source``
and, where the row has them, ``sweep``, ``choices``, ``marker`` and ``confidence``."""

_ROW_KEYS = frozenset(inspect.signature(_p).parameters) - {"default"}
_TABLE: dict[str, Any] = tomllib.loads(
    resources.files(__package__).joinpath(TABLE_FILE).read_text(encoding="utf-8")
)
_CLAIMED: set[str] = set()

_G = TypeVar("_G", bound=_Group)


def _row_field(key: str, row: Mapping[str, Any]) -> Any:
    unknown = set(row) - _ROW_KEYS - {"default"}
    if unknown:
        raise ValueError(f"{TABLE_FILE} [{key}]: unknown entry {sorted(unknown)[0]!r}")
    args: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}
    try:
        return _p(args.pop("default", None), **args)
    except TypeError:
        missing = sorted(_ROW_KEYS - set(row) - {"sweep", "choices", "marker", "confidence"})
        raise ValueError(f"{TABLE_FILE} [{key}]: {', '.join(missing)} not set") from None


def _rows(key: str) -> Callable[[type[_G]], type[_G]]:
    """Give the fields of a group class at ``key`` their rows of :data:`TABLE_FILE`: the class
    declares the fields' types (its own or its base's annotations) and the table each field's
    default and metadata, as :func:`_p` takes them. Returns the class with those defaults (a
    subclass of the same name)."""

    def attach(cls: type[_G]) -> type[_G]:
        table: Any = _TABLE
        for part in key.split("."):
            table = table.get(part, {})
        fields: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            if not field.is_required():
                continue  # a group (``_group``): its class reads its own rows
            if name not in table:
                raise ValueError(f"{TABLE_FILE}: no row [{key}.{name}]")
            fields[name] = (field.rebuild_annotation(), _row_field(f"{key}.{name}", table[name]))
            _CLAIMED.add(f"{key}.{name}")
        return create_model(
            cls.__name__, __base__=cls, __module__=cls.__module__, __doc__=cls.__doc__, **fields
        )

    return attach


# -- §2 PCIe -----------------------------------------------------------------------------------


@_rows("pcie.gen3")
class PcieGen3(_Group):
    """PCIe Gen3 x16 per direction (``cost-model.md`` §2.1)."""

    raw: Rate
    eff: Rate


@_rows("pcie.gen4")
class PcieGen4(_Group):
    """PCIe Gen4 x16 per direction (``cost-model.md`` §2.1)."""

    raw: Rate
    eff: Rate


@_rows("pcie.gen5")
class PcieGen5(_Group):
    """PCIe Gen5 x16 per direction (``cost-model.md`` §2.1)."""

    raw: Rate
    eff: Rate
    h2d: Rate


@_rows("pcie.tlp")
class PcieTlp(_Group):
    """PCIe transaction- and link-layer byte costs (``platform/pcie_model.py``; the ACK and
    flow-control DLLP intervals per width and MPS are the spec's tables in that module)."""

    mwr_overhead: Size
    mrd_overhead: Size
    cpld_overhead: Size
    dllp: Size
    skp_length: Size
    skp_interval: Size
    host_completion: Size


@_rows("pcie.lat")
class PcieLat(_Group):
    """Read and write latencies along a PCIe path (``platform/pcie_model.py``)."""

    host_read: Duration
    remote_socket: Duration
    switch: Duration
    rc_p2p: Duration
    write: Duration


@_rows("pcie.bar_read")
class PcieBarRead(_Group):
    """Completer latency of a device BAR read by a peer, per device model (the device fetches
    from its memory and returns the completion): a device names its row
    (``DeviceSpec.bar_read``), others use ``default``."""

    default: Duration
    a100: Duration
    h200: Duration

    def of(self, name: str | None) -> float:
        """The row ``name`` (None: ``default``); ``KeyError`` for an unknown row."""
        if name is None:
            return self.default
        if name not in type(self).model_fields:
            known = ", ".join(type(self).model_fields)
            raise KeyError(f"no pcie.bar_read row {name!r} (expected one of {known})")
        value: float = getattr(self, name)
        return value


class PcieRcClass(_Group):
    """What one class of host bridge does with peer-to-peer requests between its root ports
    (subclasses give the values and their sources)."""

    p2p_reads: bool
    p2p_writes: bool
    read_limit: Rate | None
    write_limit: Rate | None


@_rows("pcie.rc.intel_client")
class PcieRcIntelClient(PcieRcClass):
    """Intel client (Core) root ports: P2P writes only."""


@_rows("pcie.rc.intel_server")
class PcieRcIntelServer(PcieRcClass):
    """Intel Xeon host bridges: both forwarded, at limited rates."""


@_rows("pcie.rc.amd_zen")
class PcieRcAmdZen(PcieRcClass):
    """AMD Zen host bridges (and Infinity Fabric between sockets): both forwarded."""


class PcieRc(_Group):
    """Peer-to-peer forwarding by host-bridge class (``platform/pcie_model.py``)."""

    intel_client: PcieRcIntelClient = _group(PcieRcIntelClient, "Intel client root ports")
    intel_server: PcieRcIntelServer = _group(PcieRcIntelServer, "Intel Xeon host bridges")
    amd_zen: PcieRcAmdZen = _group(PcieRcAmdZen, "AMD Zen host bridges")

    def of(self, rc: RcClass) -> PcieRcClass:
        """The forwarding rules of host-bridge class ``rc``."""
        value: PcieRcClass = getattr(self, rc)
        return value


@_rows("pcie")
class Pcie(_Group):
    """PCIe link rates, mechanisms and effects (``cost-model.md`` §2.1–§2.3)."""

    gen3: PcieGen3 = _group(PcieGen3, "PCIe Gen3 rates (§2.1)")
    gen4: PcieGen4 = _group(PcieGen4, "PCIe Gen4 rates (§2.1)")
    gen5: PcieGen5 = _group(PcieGen5, "PCIe Gen5 rates (§2.1)")
    tlp: PcieTlp = _group(PcieTlp, "TLP and DLLP byte costs (§2.3)")
    lat: PcieLat = _group(PcieLat, "read and write latencies (§2.3)")
    bar_read: PcieBarRead = _group(PcieBarRead, "device BAR read latency by device (§2.3)")
    rc: PcieRc = _group(PcieRc, "host-bridge P2P forwarding (§3.1)")
    mps: Size
    mrrs: Size
    efficiency: Fraction
    rate_model: Literal["mechanism", "measured", "raw_x_efficiency"]
    bidir_h2d_factor: Fraction
    large_buffer_factor: Fraction
    large_buffer_min: Size


@_rows("c2c.gh200")
class C2cGh200(_Group):
    """NVLink-C2C on GH200 (``cost-model.md`` §2.1)."""

    h2d: Rate


class C2c(_Group):
    """Coherent CPU–GPU links (``cost-model.md`` §2.1)."""

    gh200: C2cGh200 = _group(C2cGh200, "GH200 NVLink-C2C (§2.1)")


@_rows("numa")
class Numa(_Group):
    """Remote-socket host memory (``cost-model.md`` §2.2)."""

    remote_h2d_factor: Fraction
    remote_d2h_factor: Fraction


@_rows("cpu")
class Cpu(_Group):
    """The CPU's loads and stores through a BAR mapping of device memory (gdrcopy;
    ``docs/cost-model/gpu.md`` §G4). The rates are not parameters: stores drain as posted
    writes of ``cpu.wc_flush`` bytes (PCIe payload efficiency), capped at ``cpu.wc_store_max``;
    loads are uncached reads of ``cpu.bar_line`` lines, ``cpu.bar_lines_inflight`` at a time,
    each a read round trip of ``cpu.bar_load_latency`` (:mod:`pinlab.platform.gpu_model`)."""

    wc_flush: Size
    wc_store_max: Rate
    bar_write_floor: Duration
    bar_load_width: Size
    bar_line: Size
    bar_load_latency: Duration
    bar_lines_inflight: int


# -- §4 NIC models and the RDMA transport (platform/rdma_model.py) ------------------------------


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


@_rows("nic.cx5")
class NicCx5(NicModel):
    """NVIDIA (Mellanox) ConnectX-5, EDR 100G."""


@_rows("nic.cx6")
class NicCx6(NicModel):
    """NVIDIA ConnectX-6, HDR 200G (HDR100 ports run at 100G: set the NIC's line rate)."""


@_rows("nic.cx7")
class NicCx7(NicModel):
    """NVIDIA ConnectX-7, NDR 400G (or 400GbE RoCE), PCIe Gen5."""


@_rows("nic.efa")
class NicEfa(NicModel):
    """AWS Elastic Fabric Adapter (one 100G interface), SRD transport."""


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


@_rows("rdma.hdr")
class RdmaHeaders(_Group):
    """Packet header bytes (``platform/rdma_model.py``: wire bytes per packet and message)."""

    lrh: Size
    grh: Size
    bth: Size
    reth: Size
    aeth: Size
    icrc: Size
    vcrc: Size
    eth: Size
    fcs: Size
    preamble: Size
    ifg: Size
    ipv4: Size
    ipv6: Size
    udp: Size


@_rows("rdma")
class Rdma(_Group):
    """The host side and transport of an RDMA message (``platform/rdma_model.py``)."""

    hdr: RdmaHeaders = _group(RdmaHeaders, "packet headers (§4.2)")
    post_cost: Duration
    post_latency: Duration
    mmio_latency: Duration
    poll_latency: Duration
    ib_link_eff: Fraction
    grh: bool
    roce_ip: Literal["ipv4", "ipv6"]
    jitter: Fraction
    tail_prob: Fraction
    tail_time: Duration
    flow_window: int


@_rows("efa")
class Efa(_Group):
    """EFA-specific numbers (``cost-model.md`` §4)."""

    effective_fraction: Fraction


# -- §5 staging ----------------------------------------------------------------------------------


@_rows("stage")
class Stage(_Group):
    """Host staging through bounce buffers (``cost-model.md`` §5, §1 item 5)."""

    copy_launch: Duration
    chunk: Size
    pipeline_eff: Fraction
    dram_crossings: int
    bounce_pinned: StrictBool
    mode: Literal["pipeline", "aggregate"]


@_rows("dram")
class Dram(_Group):
    """Host DRAM (``cost-model.md`` §5)."""

    efficiency: Fraction


@_rows("policy")
class Policy(_Group):
    """Hybrid data-placement policy threshold (``cost-model.md`` §5 notes)."""

    hybrid_threshold: Size | None


# -- §6 registration and pinning --------------------------------------------------------------


@_rows("reg.host")
class RegHost(_Group):
    """Host-memory registration (``cost-model.md`` §6.1)."""

    fixed: Duration
    per_byte: TimePerByte
    rcache_lookup: Duration
    seq_rate: TimePerByte
    parallel_rate: TimePerByte


@_rows("reg.efa")
class RegEfa(_Group):
    """dma-buf MR registration on EFA (``cost-model.md`` §6.2): ``efa_reg_user_mr_dmabuf`` pins
    the umem and issues a synchronous admin-queue command (``EFA_ADMIN_REG_MR``) per MR."""

    fixed: Duration
    per_registered: TimePerByte
    per_own_byte: TimePerByte

    def dmabuf(self, length: int, registered_before: int, *, odp: bool) -> float:
        """Seconds one dma-buf MR registration takes (EFA has no ODP: ``odp`` is refused before
        it costs anything, so it is not priced here)."""
        return self.fixed + self.per_own_byte * length + self.per_registered * registered_before


@_rows("reg.mlx5")
class RegMlx5(_Group):
    """dma-buf MR registration on mlx5 (``mlx5_ib_reg_user_mr_dmabuf``): an mkey from the mkey
    cache (no firmware command on a hit) and the page list written by UMR work requests on a
    kernel QP (``mlx5r_umr_update_mr_pas``)."""

    fixed: Duration
    per_page: Duration

    def dmabuf(self, length: int, registered_before: int, *, odp: bool) -> float:
        """Seconds one dma-buf MR registration takes; an ODP MR writes no page list up front
        (its translation is filled in by the first fault)."""
        pages = 0 if odp else -(-length // 4096)
        return self.fixed + self.per_page * pages


@_rows("reg")
class Reg(_Group):
    """Registration costs (``cost-model.md`` §6.1, §6.2)."""

    host: RegHost = _group(RegHost, "host-memory registration (§6.1)")
    efa: RegEfa = _group(RegEfa, "dma-buf MR registration on EFA (§6.2)")
    mlx5: RegMlx5 = _group(RegMlx5, "dma-buf MR registration on mlx5 (§6.2)")
    host_mmap_flat: Duration
    multi_nic_factor: Factor
    dmabuf_vs_peermem: Factor

    def model(self, name: str) -> RegEfa | RegMlx5:
        """The dma-buf registration model ``name`` (:data:`RegModelName`, what an RDMA driver
        declares); ``KeyError`` for any other name."""
        if name == "efa":
            return self.efa
        if name == "mlx5":
            return self.mlx5
        raise KeyError(f"no registration model {name!r} (expected efa or mlx5)")


@_rows("dereg.host")
class DeregHost(_Group):
    """Host-memory deregistration (``cost-model.md`` §6.1)."""

    seq_rate: TimePerByte
    parallel_rate: TimePerByte


class Dereg(_Group):
    """Deregistration costs (``cost-model.md`` §6.1)."""

    host: DeregHost = _group(DeregHost, "host-memory deregistration (§6.1)")


@_rows("alloc.host")
class AllocHost(_Group):
    """Host allocation (``cost-model.md`` §6.1)."""

    rate: TimePerByte


class Alloc(_Group):
    """Allocation costs (``cost-model.md`` §6.1)."""

    host: AllocHost = _group(AllocHost, "host allocation (§6.1)")


@_rows("pin")
class Pin(_Group):
    """Pinning device memory and its capacity (``cost-model.md`` §6.3)."""

    gpu_cost: Duration
    gpu_cost_per_byte: TimePerByte
    bar1_consumer: Size
    alignment: Size
    max_per_device: Size | None


# -- §7 ODP ---------------------------------------------------------------------------------------


@_rows("odp")
class Odp(_Group):
    """Hardware ODP fault costs (``cost-model.md`` §7)."""

    fault: Duration
    fault_implied: tuple[Duration, Duration]
    tail_multiplier: Factor
    tail_prob: Fraction
    fault_granularity: Size
    prefetch: StrictBool
    rdma_prefetch_max: Size
    implicit_chunk: Size
    hmm_busy_timeout: Duration
    mtt_update_per_page: Duration


@_rows("swodp")
class SwOdp(_Group):
    """Software ODP scheme (``cost-model.md`` §7)."""

    no_fault: Duration
    minor_fault: Duration
    major_fault: Duration


@_rows("uvm")
class Uvm(_Group):
    """GPU UVM, for comparison (``cost-model.md`` §7)."""

    far_fault: Duration


# -- §8 eviction ----------------------------------------------------------------------------------


@_rows("evict.d2h")
class EvictD2h(_Group):
    """VRAM → host copy-engine rates (``cost-model.md`` §8)."""

    gen3: Rate
    gen4: Rate
    gen5: Rate


@_rows("evict")
class Evict(_Group):
    """Eviction and migration (``cost-model.md`` §8)."""

    d2h: EvictD2h = _group(EvictD2h, "eviction copy rate by PCIe generation (§8)")
    moveback_throttle: StrictBool


@_rows("hbm")
class Hbm(_Group):
    """On-device memory (``cost-model.md`` §8)."""

    copy_efficiency: Fraction


# -- §G GPU links, copy engines, NCCL (docs/cost-model/gpu.md) ----------------------------------


@_rows("nvlink.gen3")
class NvlinkGen3(_Group):
    """NVLink 3 (A100): per-link rate, links per GPU, packet overhead, link-layer efficiency
    (``docs/cost-model/gpu.md`` §G1)."""

    link_rate: Rate
    links: int
    packet_overhead: Size
    link_efficiency: Fraction


@_rows("nvlink.gen4")
class NvlinkGen4(_Group):
    """NVLink 4 (H100 SXM) (``docs/cost-model/gpu.md`` §G1)."""

    link_rate: Rate
    links: int
    packet_overhead: Size
    link_efficiency: Fraction


class Nvlink(_Group):
    """NVLink generations (``docs/cost-model/gpu.md`` §G1)."""

    gen3: NvlinkGen3 = _group(NvlinkGen3, "NVLink 3, A100 (§G1)")
    gen4: NvlinkGen4 = _group(NvlinkGen4, "NVLink 4, H100 (§G1)")


@_rows("gpucopy")
class CopyEngines(_Group):
    """GPU copies: copy engines (CE) versus copy kernels (SM), launch and staging costs
    (``docs/cost-model/gpu.md`` §G2)."""

    ce_payload: Size
    sm_payload: Size
    ce_read_inflight: Size
    sm_read_inflight: Size
    launch_gpu: Duration
    enqueue_cpu: Duration
    staged_chunk: Size
    staged_handoff: Duration
    staged_enqueue_cpu: Duration

    jitter: Fraction


@_rows("nccl")
class Nccl(_Group):
    """NCCL's collectives: protocols, per-step latencies, launch cost
    (``docs/cost-model/gpu.md`` §G5). The latencies are NCCL's own tuner constants (what its
    developers measured); the bandwidths come from the links."""

    launch: Duration
    ring_base: tuple[Duration, Duration, Duration]
    ring_nvlink: tuple[Duration, Duration, Duration]
    ring_pci: tuple[Duration, Duration, Duration]
    ring_net: tuple[Duration, Duration, Duration]
    tree_base: tuple[Duration, Duration, Duration]
    tree_nvlink: tuple[Duration, Duration, Duration]
    net_overhead_intel: Duration
    net_overhead_amd: Duration
    tree_net: tuple[Duration, Duration, Duration]
    ll_efficiency: Fraction
    ll128_efficiency: Fraction
    simple_efficiency: Fraction
    nvls_efficiency: Fraction
    nvls_latency: Duration
    nvls_tree_net: Duration
    ll_channel_max: Rate
    ll128_channel_max: Rate
    buffsize: Size
    channels: int
    channels_one_gpu: int


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


def _table_keys(table: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for name, value in table.items():
        if isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()):
            yield from _table_keys(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def _check_table(table: Mapping[str, Any], read: set[str]) -> None:
    """Every row of ``table`` was ``read``, each by the class at its key; ``ValueError`` naming
    the row otherwise."""
    for key in _table_keys(table):
        if key not in read:
            raise ValueError(f"{TABLE_FILE} [{key}]: expected a cost-model parameter, found none")
    stray = read - set(parameter_keys())
    if stray:
        raise ValueError(f"{TABLE_FILE} [{sorted(stray)[0]}]: read by a class at another key")


_check_table(_TABLE, _CLAIMED)
