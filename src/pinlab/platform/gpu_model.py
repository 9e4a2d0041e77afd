"""GPU mechanisms: NVLink rates, copy engines versus copy kernels, CPU access to a GPU BAR
(``docs/cost-model/gpu.md``).

Pure functions of the cost model (:class:`~pinlab.platform.cost.CostModel`) and a description
of what is moved -- no time, no SimPy. The simulator's GPU workloads
(:mod:`pinlab.sim.workloads.nvbandwidth`, ``nccl``, ``gdrcopy``) and the builder's NVLink
links use them.

* **NVLink** (§G1): a GPU's NVLinks carry packets of up to a payload of data behind a header
  (``nvlink.genN.packet_overhead``); one direction of ``links`` links moves
  ``links × link_rate × link_efficiency × payload / (payload + overhead)`` bytes of data per
  second. Copy engines write 256-byte payloads, copy kernels 128-byte ones
  (``gpucopy.ce_payload``, ``gpucopy.sm_payload``), so an SM copy over the same links is
  slower than a CE copy.
* **Reads over PCIe** (§G2): a GPU that *reads* across PCIe -- a host-to-device copy, a peer
  read -- has ``gpucopy.ce_read_inflight`` or ``gpucopy.sm_read_inflight`` bytes outstanding;
  :func:`read_window` is that window, which the PCIe model turns into a rate bound
  (outstanding bytes / read latency). Writes are posted and need no window.
* **Small copies** (§G2): a copy costs the GPU ``gpucopy.launch_gpu`` and the CPU
  ``gpucopy.enqueue_cpu`` to enqueue; without P2P the driver stages a peer copy through host
  memory in chunks of ``gpucopy.staged_chunk``, each waiting ``gpucopy.staged_handoff``
  between its two halves (:func:`staged_rate`).
* **CPU access to a BAR** (§G4, gdrcopy): stores go into write-combining buffers that drain as
  posted writes of ``cpu.wc_flush`` bytes, at most ``cpu.wc_store_max`` per core
  (:func:`bar_store_time`); loads are uncached: each ``cpu.bar_line`` costs a read round trip
  ``cpu.bar_load_latency``, ``cpu.bar_lines_inflight`` at a time (:func:`bar_load_time`).
* **GPU models**: :data:`GPU_MODELS` -- the facts a preset needs about a GPU (memory, memory
  bandwidth, PCIe generation, NVLink, compute capability for NCCL's decisions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pinlab.platform.cost import CostModel, NvlinkGen3, NvlinkGen4
from pinlab.platform.preset_parts import AMD_GPU, NVIDIA
from pinlab.units import GiB

__all__ = [
    "GPU_MODELS",
    "CopyEngine",
    "GpuModel",
    "NvlinkGen",
    "bar_load_time",
    "bar_store_rate",
    "bar_store_time",
    "copy_payload",
    "gpu_model",
    "nvlink_efficiency",
    "nvlink_params",
    "nvlink_rate",
    "read_window",
    "staged_rate",
]

NvlinkGen = Literal[3, 4]
"""NVLink generations with parameters (``nvlink.gen3``: A100, ``nvlink.gen4``: H100)."""

CopyEngine = Literal["ce", "sm"]
"""Who copies: a copy engine (``cudaMemcpy``, nvbandwidth ``*_ce``) or a copy kernel on the SMs
(nvbandwidth ``*_sm``, NCCL)."""


# -- NVLink (§G1) -------------------------------------------------------------------------------


def nvlink_params(cost: CostModel, gen: int) -> NvlinkGen3 | NvlinkGen4:
    """The ``nvlink.gen<gen>`` parameters (``ValueError`` for a generation without them)."""
    if gen == 3:
        return cost.nvlink.gen3
    if gen == 4:
        return cost.nvlink.gen4
    raise ValueError(f"NVLink generation must be 3 or 4 (docs/cost-model/gpu.md §G1), not {gen!r}")


def copy_payload(cost: CostModel, engine: CopyEngine) -> int:
    """Bytes per write packet of ``engine`` (``gpucopy.ce_payload`` / ``gpucopy.sm_payload``)."""
    return cost.gpucopy.ce_payload if engine == "ce" else cost.gpucopy.sm_payload


def nvlink_efficiency(cost: CostModel, gen: int, payload: int) -> float:
    """Data share of an NVLink direction for packets of ``payload`` bytes:
    ``link_efficiency × payload / (payload + packet_overhead)``."""
    p = nvlink_params(cost, gen)
    if payload <= 0:
        raise ValueError(f"payload must be positive, not {payload}")
    return p.link_efficiency * payload / (payload + p.packet_overhead)


def nvlink_rate(
    cost: CostModel, gen: int, links: int | None = None, *, engine: CopyEngine = "ce"
) -> float:
    """Data rate of ``links`` NVLinks of generation ``gen`` in one direction, bytes/s, for
    copies by ``engine`` (default: a GPU's full set, ``nvlink.genN.links``; copy-engine
    payloads). A100, 12 links, CE: 300 GB/s × 0.972 × 256/272 = 274.5 GB/s."""
    p = nvlink_params(cost, gen)
    n = p.links if links is None else links
    if n <= 0:
        raise ValueError(f"links must be positive, not {n}")
    return n * p.link_rate * nvlink_efficiency(cost, gen, copy_payload(cost, engine))


# -- copies over PCIe and staging (§G2) ----------------------------------------------------------


def read_window(cost: CostModel, engine: CopyEngine) -> int:
    """Bytes of reads ``engine`` keeps outstanding across PCIe (``gpucopy.*_read_inflight``):
    with a read latency L the reads cannot go faster than window / L."""
    return cost.gpucopy.ce_read_inflight if engine == "ce" else cost.gpucopy.sm_read_inflight


def staged_rate(cost: CostModel, d2h: float, h2d: float) -> float:
    """Rate of a peer copy the driver stages through pinned host memory (P2P disabled): chunks
    of ``gpucopy.staged_chunk`` go device → host at ``d2h`` then host → device at ``h2d``,
    double-buffered, each chunk waiting ``gpucopy.staged_handoff`` between its halves; the
    slower half paces the pipeline: chunk / (chunk / min(d2h, h2d) + handoff)."""
    if d2h <= 0 or h2d <= 0:
        raise ValueError("stage rates must be positive")
    chunk = cost.gpucopy.staged_chunk
    return chunk / (chunk / min(d2h, h2d) + cost.gpucopy.staged_handoff)


# -- CPU access to a GPU BAR (§G4) ---------------------------------------------------------------


def bar_store_rate(cost: CostModel, link_write_rate: float) -> float:
    """Streaming rate of CPU stores into a write-combining BAR mapping, bytes/s: the path's rate
    for posted writes of ``cpu.wc_flush`` bytes (``link_write_rate``, from the PCIe model),
    at most one core's ``cpu.wc_store_max``."""
    return min(link_write_rate, cost.cpu.wc_store_max)


def bar_store_time(cost: CostModel, size: int, link_write_rate: float) -> float:
    """CPU time of ``gdr_copy_to_mapping`` of ``size`` bytes: ``cpu.bar_write_floor`` + the
    bytes at :func:`bar_store_rate` (the stores are posted: the CPU waits for nothing else)."""
    if size < 0:
        raise ValueError(f"size must be >= 0, not {size}")
    return cost.cpu.bar_write_floor + size / bar_store_rate(cost, link_write_rate)


def bar_load_time(cost: CostModel, size: int, latency: float | None = None) -> float:
    """CPU time of ``gdr_copy_from_mapping`` of ``size`` bytes (gdrcopy's SSE4.1 copy,
    ``src/memcpy_sse41.c``, from an aligned mapping). Every uncached load is a read round trip
    of ``latency`` (default ``cpu.bar_load_latency``):

    * below its 8× unrolled loop (``8 × cpu.bar_load_width`` = 128 B) the copy issues one
      16-byte MOVNTDQA at a time and hands the sub-16-byte tail to ``memcpy``, which reads one
      byte with one load and 2–15 bytes with two overlapping loads (glibc's small-size copy):
      the loads wait for each other, so 1 B costs one round trip, 2–8 B two, 16 B one, 32 B two;
    * from 128 B the unrolled loop streams: the first ``cpu.bar_line`` costs a round trip, then
      one line per latency / ``cpu.bar_lines_inflight``. 16 MiB: ≈ 31 ms (0.52 GB/s)."""
    if size <= 0:
        return 0.0
    c = cost.cpu
    lat = c.bar_load_latency if latency is None else latency
    width = c.bar_load_width
    if size < 8 * width:
        tail = size % width
        loads = size // width + (0 if tail == 0 else (1 if tail == 1 else 2))
        return loads * lat
    lines = math.ceil(size / c.bar_line)
    return lat + (lines - 1) * lat / c.bar_lines_inflight


# -- GPU models ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuModel:
    """What a preset needs to know about one GPU model: its marketing name (what the tools
    print), memory and spec memory bandwidth, PCIe generation, NVLink generation and links
    (None: PCIe only), CUDA compute capability (``None`` for AMD GPUs), exporter driver, PCI
    vendor ID and the ``pcie.bar_read`` row of its BAR's read latency (None:
    ``pcie.bar_read.default``)."""

    name: str
    memory: int
    memory_bandwidth: float
    pcie_gen: Literal[3, 4, 5]
    nvlink_gen: NvlinkGen | None
    nvlink_links: int
    compute_capability: int | None
    driver: str
    vendor: int
    bar_read: str | None = None


def _gpu(
    name: str,
    memory_gib: int,
    bandwidth_gbs: float,
    gen: Literal[3, 4, 5],
    cc: int | None,
    *,
    nvlink: NvlinkGen | None = None,
    links: int = 0,
    driver: str = "nvidia-compute",
    vendor: int = NVIDIA,
    bar_read: str | None = None,
) -> GpuModel:
    memory, bandwidth = memory_gib * GiB, bandwidth_gbs * 1e9
    return GpuModel(name, memory, bandwidth, gen, nvlink, links, cc, driver, vendor, bar_read)


GPU_MODELS: dict[str, GpuModel] = {
    # vendor datasheets: memory and its bandwidth, host link, NVLink (cost-model.md §9; [unverified]
    # where a figure was not checked against the datasheet itself)
    # bar_read: the pcie.bar_read row measured on that die (H100 [assumption]: the H200's)
    "a100-sxm4-40gb": _gpu(
        "NVIDIA A100-SXM4-40GB", 40, 1555, 4, 80, nvlink=3, links=12, bar_read="a100"
    ),
    "a100-sxm4-80gb": _gpu(
        "NVIDIA A100-SXM4-80GB", 80, 2039, 4, 80, nvlink=3, links=12, bar_read="a100"
    ),
    "a100-pcie-40gb": _gpu("NVIDIA A100-PCIE-40GB", 40, 1555, 4, 80, bar_read="a100"),
    "h100-sxm5-80gb": _gpu(
        "NVIDIA H100 80GB HBM3", 80, 3350, 5, 90, nvlink=4, links=18, bar_read="h200"
    ),
    "rtx6000-ada": _gpu("NVIDIA RTX 6000 Ada Generation", 48, 960, 4, 89),
    "rtx-a6000": _gpu("NVIDIA RTX A6000", 48, 768, 4, 86),
    "rtx4090": _gpu("NVIDIA GeForce RTX 4090", 24, 1008, 4, 89),
    "v100-sxm2-32gb": _gpu("Tesla V100-SXM2-32GB", 32, 900, 3, 70),
    "p100-pcie-16gb": _gpu("Tesla P100-PCIE-16GB", 16, 732, 3, 60),
    "radeon-pro-wx8100": _gpu(
        "Radeon Pro WX 8100", 8, 512, 3, None, driver="amdgpu", vendor=AMD_GPU
    ),
    "mi25": _gpu("Radeon Instinct MI25", 16, 484, 3, None, driver="amdgpu", vendor=AMD_GPU),
}
"""GPU models by preset key (``gpu-box(gpu="rtx6000-ada")``)."""


def gpu_model(key: str) -> GpuModel:
    """The GPU model ``key`` (``KeyError`` naming the known ones)."""
    try:
        return GPU_MODELS[key]
    except KeyError:
        raise KeyError(f"no GPU model {key!r} (expected one of {', '.join(GPU_MODELS)})") from None
