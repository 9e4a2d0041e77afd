"""PCI P2PDMA distance: may a client device DMA straight into a provider's BAR, and how far is it?

Models ``pci_p2pdma_distance_many()``, ``pci_p2pdma_distance()`` and their helpers in
drivers/pci/p2pdma.c and include/linux/pci-p2pdma.h (``kernel-semantics.md`` §8; checklist items
K-55, K-56, K-57, K-58, K-83, K-84, K-85, K-132; the whitelist each release compiles in, which
:attr:`PciTopology.whitelist <pinlab.kernel.pci_topology.PciTopology>` holds, is K-133 … K-135).
Exporters call it at attach time and clear ``attach->peer2peer`` on a negative answer (§8.4);
the simulator uses :func:`pci_p2pdma_map_type` to pick the path class (switch-local bus address
vs. through the root complex).

Facts carried over from the pre-v5.18 source (``P2P`` snapshot in §0.3; the distance logic is
unchanged in the later texts read), where the spec leaves room:

* The provider-side walk checks ACS on every function from the provider up to *and including*
  the common upstream bridge; the client-side walk checks the functions strictly below it. So
  ACS redirect bits on a switch upstream port break P2P between two of its downstream endpoints,
  while bits on the root port above that switch do not.
* With no common upstream bridge, the distance is the number of functions on the provider's
  chain (provider … root port, or just the RCiEP) plus the number on the client's: the hops to
  the host bridge and back down. Two endpoints on different root ports are at distance 4.
* ``host_bridge_whitelist()`` is told to warn ("Host bridge not in P2PDMA whitelist") only when
  the host-bridge path was forced by ACS redirect, whatever ``verbose`` says; the
  no-common-bridge path never prints that line. ``verbose`` adds the ACS lines and the
  "cannot be used for peer-to-peer DMA …" line.
* A client with no PCI function above it makes ``pci_p2pdma_distance_many`` return -1 at once,
  even with ``verbose`` (the loop continues past NOT_SUPPORTED clients only).

Where pinlab differs from the kernel, for the simulator's sake (K-84):

* Every provider gets a ``struct pci_p2pdma`` on its first query (:func:`pci_p2pdma_setup`). In
  the kernel only devices that registered P2P memory have one, and only they cache map types.
* The kernel recomputes on every distance call and only *stores* the map type;
  ``pci_p2pdma_map_type`` reads it back when mapping. pinlab caches the map type and the distance
  and answers repeated non-verbose queries from the cache. The answer is the same because any
  change that could alter it (a function's ACS bits, the CPU, the whitelist, the release's
  whitelist lookup, ``CONFIG_PCI_P2PDMA``) bumps
  :attr:`PciTopology.generation <pinlab.kernel.pci_topology.PciTopology>`, which empties the cache.
  Verbose queries always recompute, so that every problem is logged again; a cache hit does
  not repeat the non-verbose whitelist warning.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from pinlab.kernel.device import Device
from pinlab.kernel.pci import (
    PciDev,
    PciHostBridge,
    find_parent_pci_dev,
    pci_find_host_bridge,
    pci_upstream_bridge,
)
from pinlab.kernel.pci_ids import (
    X86_VENDOR_AMD,
    P2pdmaWhitelistFlag,
    pci_p2pdma_whitelist_lookup,
)
from pinlab.kernel.pci_regs import PciAcs
from pinlab.kernel.pci_topology import PciTopology

__all__ = [
    "PCI_P2PDMA_MAP_BUS_ADDR",
    "PCI_P2PDMA_MAP_NOT_SUPPORTED",
    "PCI_P2PDMA_MAP_THRU_HOST_BRIDGE",
    "PCI_P2PDMA_MAP_UNKNOWN",
    "PciP2pdma",
    "PciP2pdmaMapType",
    "calc_map_type_and_dist",
    "cpu_supports_p2pdma",
    "host_bridge_whitelist",
    "map_types_idx",
    "pci_bridge_has_acs_redir",
    "pci_p2pdma_distance",
    "pci_p2pdma_distance_many",
    "pci_p2pdma_map_type",
    "pci_p2pdma_setup",
]

AMD_ZEN_FAMILY = 0x17
"""First AMD family (Zen) for which ``cpu_supports_p2pdma`` is true."""


class PciP2pdmaMapType(enum.IntEnum):
    """``enum pci_p2pdma_map_type``: how a client reaches a provider's memory."""

    UNKNOWN = 0
    """Not calculated yet (what the kernel's cache lookup yields for an unknown client)."""
    NOT_SUPPORTED = 1
    """No P2P: the path needs the host bridge and neither the CPU nor the whitelist allows it."""
    BUS_ADDR = 2
    """Direct P2P below a common upstream bridge, using PCI bus addresses; no IOMMU mapping."""
    THRU_HOST_BRIDGE = 3
    """P2P routed through the root complex (ACS redirect, or no common upstream bridge)."""


PCI_P2PDMA_MAP_UNKNOWN = PciP2pdmaMapType.UNKNOWN
PCI_P2PDMA_MAP_NOT_SUPPORTED = PciP2pdmaMapType.NOT_SUPPORTED
PCI_P2PDMA_MAP_BUS_ADDR = PciP2pdmaMapType.BUS_ADDR
PCI_P2PDMA_MAP_THRU_HOST_BRIDGE = PciP2pdmaMapType.THRU_HOST_BRIDGE


class PciP2pdma:
    """``struct pci_p2pdma`` of a provider: its map-type cache (K-84).

    ``map_types`` is the kernel's ``map_types`` xarray, keyed by :func:`map_types_idx` of the
    client function. ``distances`` (pinlab) holds the distance computed with it, so that a cached
    answer is complete. ``calcs`` counts calculations stored here, ``hits`` queries answered from
    the cache; ``generation`` is the :attr:`PciTopology.generation` the entries are valid for.
    """

    __slots__ = ("calcs", "distances", "generation", "hits", "map_types")

    def __init__(self, generation: int) -> None:
        self.map_types: dict[int, PciP2pdmaMapType] = {}
        self.distances: dict[int, int] = {}
        self.generation = generation
        self.calcs = 0
        self.hits = 0

    def __repr__(self) -> str:
        return f"<PciP2pdma {len(self.map_types)} cached, {self.calcs} calcs, {self.hits} hits>"


def pci_p2pdma_setup(pdev: PciDev) -> PciP2pdma:
    """``pci_p2pdma_setup()``: give ``pdev`` its ``struct pci_p2pdma`` (idempotent).

    Also drops cached entries made stale by a topology change (see the module docstring).
    """
    topo = pdev.topology
    p2pdma = pdev.p2pdma
    if p2pdma is None:
        p2pdma = pdev.p2pdma = PciP2pdma(topo.generation)
    elif p2pdma.generation != topo.generation:
        p2pdma.map_types.clear()
        p2pdma.distances.clear()
        p2pdma.generation = topo.generation
    return p2pdma


def map_types_idx(client: PciDev) -> int:
    """``map_types_idx()``: the cache key of a client, ``domain << 16 | bus << 8 | devfn``."""
    return (client.domain << 16) | (client.bus.number << 8) | client.devfn


def cpu_supports_p2pdma(topo: PciTopology) -> bool:
    """``cpu_supports_p2pdma()``: an AMD CPU of family 0x17 (Zen) or later (K-83).

    Such CPUs route P2P through the host bridge whatever the whitelist says; earlier AMD parts
    handled P2P writes only. Intel and every other vendor answer False.
    """
    return topo.cpu_vendor == X86_VENDOR_AMD and topo.cpu_family >= AMD_ZEN_FAMILY


def pci_bridge_has_acs_redir(pdev: PciDev) -> bool:
    """``pci_bridge_has_acs_redir()``: request/completion redirect or egress control set (K-57)."""
    return bool(pdev.acs & PciAcs.REDIR)


def _host_bridge_listed(host: PciHostBridge, same_host_bridge: bool, warn: bool) -> bool:
    """``__host_bridge_whitelist()``: is ``host`` on the whitelist for this kind of path?

    Looks up ``pci_host_bridge_dev(host)`` (none: False, K-132). The first entry with its
    vendor/device decides; an entry flagged REQ_SAME_HOST_BRIDGE refuses a cross-bridge path.
    An unlisted bridge logs "Host bridge not in P2PDMA whitelist: vvvv:dddd" when ``warn``.
    """
    root = host.pci_host_bridge_dev()
    if root is None:
        return False
    topo = host.topology
    entry = pci_p2pdma_whitelist_lookup(
        topo.whitelist, root.vendor, root.device, any_device=topo.whitelist_any_device
    )
    if entry is not None:
        same_only = bool(entry.flags & P2pdmaWhitelistFlag.REQ_SAME_HOST_BRIDGE)
        return same_host_bridge or not same_only
    if warn:
        topo.dev_warn(
            root, f"Host bridge not in P2PDMA whitelist: {root.vendor:04x}:{root.device:04x}"
        )
    return False


def host_bridge_whitelist(a: PciDev, b: PciDev, warn: bool = False) -> bool:
    """``host_bridge_whitelist()``: may ``a`` and ``b`` talk through their host bridge(s)? (K-83)

    Same host bridge: it must be listed. Different host bridges: both must be listed and neither
    entry may carry REQ_SAME_HOST_BRIDGE (checked ``a``'s bridge first; a refusal there stops
    the check, so only one warning is logged).
    """
    host_a = pci_find_host_bridge(a.bus)
    host_b = pci_find_host_bridge(b.bus)
    if host_a is host_b:
        return _host_bridge_listed(host_a, True, warn)
    return _host_bridge_listed(host_a, False, warn) and _host_bridge_listed(host_b, False, warn)


def calc_map_type_and_dist(
    provider: PciDev, client: PciDev, verbose: bool = False
) -> tuple[PciP2pdmaMapType, int]:
    """``calc_map_type_and_dist()``: map type and distance for one provider/client pair.

    Contract (K-56, K-57, K-83):

    * The common upstream bridge is the first function on the provider's upward chain
      (``pci_upstream_bridge`` steps, starting at the provider itself) that is also on the
      client's chain. Distance = steps from the provider up to it + steps from the client up to
      it: 0 for the same function, 2 for two functions of one device, 4 for two endpoints below
      one switch.
    * ACS redirect checked on the provider's chain up to and including the common bridge, and
      on the client's chain below it. None set: BUS_ADDR, done.
    * ACS redirect set (``verbose`` logs the culprits), or no common bridge (distance = length of
      both chains, i.e. hops to the host bridge and back): THRU_HOST_BRIDGE if
      :func:`cpu_supports_p2pdma` or :func:`host_bridge_whitelist`, else NOT_SUPPORTED
      (``verbose`` logs why).
    * The map type (and, in pinlab, the distance) is stored in ``provider.p2pdma`` (K-84).

    Runs in O(depth of provider + depth of client): the client's chain is indexed once instead of
    being rewalked for every provider-side step.
    """
    topo = provider.topology
    if client.topology is not topo:
        raise ValueError(f"{provider.name} and {client.name} are in different PCI topologies")

    client_chain: list[PciDev] = []
    steps_from_client: dict[PciDev, int] = {}
    bb: PciDev | None = client
    while bb is not None:
        steps_from_client[bb] = len(client_chain)
        client_chain.append(bb)
        bb = pci_upstream_bridge(bb)

    acs_list: list[PciDev] = []
    dist_a = 0
    dist_b: int | None = None
    a: PciDev | None = provider
    while a is not None:
        if pci_bridge_has_acs_redir(a):
            acs_list.append(a)
        dist_b = steps_from_client.get(a)
        if dist_b is not None:
            break
        a = pci_upstream_bridge(a)
        dist_a += 1

    acs_redirects = False
    if dist_b is None:
        # No common upstream bridge: different root ports, host bridges, or an RCiEP.
        distance = dist_a + len(client_chain)
    else:
        distance = dist_a + dist_b
        acs_list.extend(bb for bb in client_chain[:dist_b] if pci_bridge_has_acs_redir(bb))
        if not acs_list:
            return _store(provider, client, PciP2pdmaMapType.BUS_ADDR, distance)
        if verbose:
            topo.dev_warn(
                client,
                f"ACS redirect is set between the client and provider ({provider.name})",
            )
            topo.dev_warn(
                client,
                "to disable ACS redirect for this path, add the kernel parameter: "
                f"pci=disable_acs_redir={';'.join(d.name for d in acs_list)}",
            )
        acs_redirects = True

    map_type = PciP2pdmaMapType.THRU_HOST_BRIDGE
    if not cpu_supports_p2pdma(topo) and not host_bridge_whitelist(provider, client, acs_redirects):
        if verbose:
            topo.dev_warn(
                client,
                "cannot be used for peer-to-peer DMA as the client and provider "
                f"({provider.name}) do not share an upstream bridge or whitelisted host bridge",
            )
        map_type = PciP2pdmaMapType.NOT_SUPPORTED
    return _store(provider, client, map_type, distance)


def _store(
    provider: PciDev, client: PciDev, map_type: PciP2pdmaMapType, distance: int
) -> tuple[PciP2pdmaMapType, int]:
    p2pdma = pci_p2pdma_setup(provider)
    idx = map_types_idx(client)
    p2pdma.map_types[idx] = map_type
    p2pdma.distances[idx] = distance
    p2pdma.calcs += 1
    return map_type, distance


def _lookup(provider: PciDev, client: PciDev, verbose: bool) -> tuple[PciP2pdmaMapType, int]:
    """Map type and distance for one pair: from the cache unless ``verbose`` (K-84)."""
    if client.topology is not provider.topology:
        raise ValueError(f"{provider.name} and {client.name} are in different PCI topologies")
    if not verbose:
        p2pdma = pci_p2pdma_setup(provider)
        idx = map_types_idx(client)
        map_type = p2pdma.map_types.get(idx)
        if map_type is not None:
            p2pdma.hits += 1
            return map_type, p2pdma.distances[idx]
    return calc_map_type_and_dist(provider, client, verbose)


def _check_provider(provider: object) -> PciDev:
    if not isinstance(provider, PciDev):
        raise TypeError(f"a P2PDMA provider is a PCI function (struct pci_dev), not {provider!r}")
    return provider


def pci_p2pdma_distance_many(
    provider: PciDev, clients: Sequence[Device], verbose: bool = False
) -> int:
    """``pci_p2pdma_distance_many()``: summed distance from ``provider`` to every client.

    Returns -1 when P2PDMA is compiled out (K-55), when ``clients`` is empty (K-85), when a
    client has no PCI function above it (K-55; logged with ``verbose``, and returned at once),
    or when any client's map type is NOT_SUPPORTED (K-58; with ``verbose`` the loop goes on so
    that every such client is logged, without it the loop stops at the first). Otherwise the
    sum of the per-client distances (K-56), 0 when the only client is the provider itself.
    Each client is resolved with ``find_parent_pci_dev``; answers are cached per provider (K-84).
    """
    provider = _check_provider(provider)
    topo = provider.topology
    if not topo.p2pdma_enabled:
        return -1
    if not clients:
        return -1

    not_supported = False
    total_dist = 0
    for dev in clients:
        pci_client = find_parent_pci_dev(dev)
        if pci_client is None:
            if verbose:
                topo.dev_warn(dev, "cannot be used for peer-to-peer DMA as it is not a PCI device")
            return -1
        map_type, distance = _lookup(provider, pci_client, verbose)
        if map_type is PciP2pdmaMapType.NOT_SUPPORTED:
            not_supported = True
        if not_supported and not verbose:
            break
        total_dist += distance

    return -1 if not_supported else total_dist


def pci_p2pdma_distance(provider: PciDev, client: Device, verbose: bool = False) -> int:
    """``pci_p2pdma_distance()``: ``pci_p2pdma_distance_many(provider, [client], verbose)``.

    -1 when ``client`` is not below a PCI function, when the path needs the host bridge and
    neither an AMD Zen CPU nor the whitelist allows it, or when P2PDMA is disabled (K-55);
    otherwise the distance (K-56), e.g. 0 for the provider itself.
    """
    return pci_p2pdma_distance_many(provider, [client], verbose)


def pci_p2pdma_map_type(provider: PciDev, client: Device) -> PciP2pdmaMapType:
    """``pci_p2pdma_map_type()``: the (cached) map type of ``client`` against ``provider``.

    NOT_SUPPORTED when P2PDMA is disabled or ``client`` has no PCI function above it. The
    kernel's version only reads the cache filled by a distance query (and takes the client
    function itself); pinlab resolves ``client`` with ``find_parent_pci_dev`` and, on a cache
    miss, calculates (without logging) and caches, so it never returns UNKNOWN. K-84.
    """
    provider = _check_provider(provider)
    if not provider.topology.p2pdma_enabled:
        return PciP2pdmaMapType.NOT_SUPPORTED
    pci_client = find_parent_pci_dev(client)
    if pci_client is None:
        return PciP2pdmaMapType.NOT_SUPPORTED
    return _lookup(provider, pci_client, False)[0]
