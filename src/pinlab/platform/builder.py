"""Building a :class:`~pinlab.platform.topology.Machine` from a
:class:`~pinlab.platform.spec.PlatformSpec`.

:func:`build` walks the description in a fixed order -- host bridges, switches (parents first),
devices, NICs, displays, then host memory and the inter-socket links -- so the PCI numbering,
the dmem regions and the link order (hence the simulator's flow network) are the same on every
run. Drivers come from the registries and are constructed with what they declare: an
exporter's :meth:`~pinlab.drivers.base.ExporterDriver.from_spec`, an RDMA driver's
:meth:`~pinlab.drivers.rdma.RdmaDevice.from_spec`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from pinlab.drivers import EXPORTERS
from pinlab.drivers.display import DisplayEngine
from pinlab.drivers.gpu_import import GpuImporter
from pinlab.errors import ConfigError
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pci import PciDev, PciHostBridge
from pinlab.kernel.pci_ids import pci_p2pdma_whitelist
from pinlab.kernel.pci_regs import PciAcs
from pinlab.kernel.pci_topology import PciTopology
from pinlab.kernel.profile import KernelProfile
from pinlab.platform import rdma_model
from pinlab.platform.cost import CostModel
from pinlab.platform.gpu_model import nvlink_params, nvlink_rate
from pinlab.platform.spec import DeviceSpec, LinkSpec, NicSpec, PlatformSpec, SwitchSpec, nic_driver
from pinlab.platform.topology import Machine, PlatformLink, TreeNode, nic_port
from pinlab.uapi.system import System

__all__ = ["build", "make_kernel"]


def make_kernel(
    kernel: Kernel | KernelProfile | str | None, spec: PlatformSpec | None = None
) -> Kernel:
    """A :class:`Kernel` from an instance, a profile, a preset name, or None (the spec's
    suggested ``kernel``, else the default preset)."""
    if isinstance(kernel, Kernel):
        return kernel
    if kernel is None and spec is not None and spec.kernel is not None:
        return Kernel(spec.kernel)
    return Kernel(kernel)


def build(
    spec: PlatformSpec,
    kernel: Kernel | KernelProfile | str | None = None,
    cost: CostModel | None = None,
    *,
    overrides: Mapping[str, object] | None = None,
    clock: Callable[[], float] | None = None,
) -> Machine:
    """Build the machine ``spec`` describes (:mod:`pinlab.platform.topology`).

    ``kernel``: a :class:`Kernel` (used as is), a profile or preset name (a new kernel), or None
    (``spec.kernel``, else the default preset). The effective cost model is ``cost`` (default
    :class:`CostModel()`) with ``spec.cost_overrides`` applied, then ``overrides`` -- pass the
    user's ``--set`` cost keys there so they win over the platform's. ``clock`` stamps stale-DMA
    incidents (the simulator passes ``env.now``).

    Raises :class:`ConfigError` naming the platform and field when a driver refuses the kernel
    (``xe`` before 6.8) or its options.
    """
    k = make_kernel(kernel, spec)
    base = CostModel() if cost is None else cost
    merged = {**spec.cost_overrides, **(overrides or {})}
    eff = base.with_overrides(merged, source=f"platform {spec.name}") if merged else base
    builder = _MachineBuilder(spec, k, eff, clock)
    builder.add_host_bridges()
    for sw in spec.switches:
        builder.add_switch(sw)
    for i, dev in enumerate(spec.devices):
        builder.add_device(i, dev)
    for i, nic in enumerate(spec.nics):
        builder.add_nic(i, nic)
    builder.add_displays()
    builder.add_host_links()
    builder.add_nvlinks()
    return builder.machine()


class _MachineBuilder:
    """The parts of one machine while :func:`build` adds them, and the steps that add them."""

    def __init__(
        self,
        spec: PlatformSpec,
        kernel: Kernel,
        cost: CostModel,
        clock: Callable[[], float] | None,
    ) -> None:
        self.spec = spec
        self.kernel = kernel
        self.cost = cost
        self.pci = PciTopology(
            cpu_vendor=spec.cpu.x86_vendor,
            cpu_family=spec.cpu.family,
            whitelist=spec.whitelist(pci_p2pdma_whitelist(kernel.profile.p2pdma_whitelist)),
            p2pdma_enabled=kernel.profile.pci_p2pdma,
            whitelist_root_port=spec.root_port_lookup(kernel.profile.p2pdma_whitelist_root_port),
            whitelist_any_device=kernel.profile.p2pdma_whitelist.any_device,
        )
        self.system = System(kernel, clock=clock)
        self.links: dict[str, PlatformLink] = {}
        self.pdevs: dict[str, PciDev] = {}
        self.nodes: dict[str, TreeNode] = {}
        self.bridges: dict[str, PciHostBridge] = {}
        # per host bridge with a ``root_port_slot``: the device number of its next root port
        self._next_root_slot: dict[str, int] = {}
        self.switch_specs = {sw.name: sw for sw in spec.switches}

    def machine(self) -> Machine:
        return Machine(
            self.spec,
            self.kernel,
            self.cost,
            self.pci,
            self.system,
            self.links,
            self.pdevs,
            self.nodes,
        )

    def _fail(self, where: str, message: str) -> ConfigError:
        return ConfigError(f"platform {self.spec.name}", where, message)

    # -- the PCIe tree ---------------------------------------------------------------------

    def add_host_bridges(self) -> None:
        for hb in self.spec.host_bridges:
            if hb.root_port_slot is None:
                bridge = self.pci.add_host_bridge(hb.vendor, hb.device, label=hb.name)
            else:  # the root port first in devfn order; the children's ports come after it
                bridge = self.pci.add_host_bridge(None, label=hb.name)
                bridge.add_root_port(
                    vendor=hb.vendor,
                    device=hb.device,
                    label=f"{hb.name}.rp",
                    slot=hb.root_port_slot,
                )
                self._next_root_slot[hb.name] = hb.root_port_slot + 1
            self.bridges[hb.name] = bridge
            root = bridge.pci_host_bridge_dev()
            if root is not None:
                self.pdevs[hb.name] = root
            mps = self.cost.pcie.mps if hb.mps is None else hb.mps
            self.nodes[hb.name] = TreeNode(
                hb.name, "host_bridge", None, hb.socket, None, mps=mps, mrrs=self.cost.pcie.mrrs
            )

    def _port(self, parent: str, child: str) -> PciDev:
        """A new root port of host bridge ``parent``, or downstream port of switch ``parent``."""
        try:
            if parent in self.bridges:
                slot = self._next_root_slot.get(parent)
                if slot is not None:
                    self._next_root_slot[parent] = slot + 1
                return self.bridges[parent].add_root_port(label=f"{child}.port", slot=slot)
            sw = self.switch_specs[parent]
            acs = PciAcs.REDIR if sw.acs_redirect else PciAcs.NONE
            return self.pdevs[parent].add_downstream_port(acs=acs, label=f"{child}.port")
        except ValueError as e:  # out of PCI bus or device numbers
            raise self._fail(
                child, f"expected room for a port below {parent!r}, found: {e}"
            ) from None

    def _mps(self, parent: str, own: int | None) -> int:
        """The MPS a new link below ``parent`` runs at: the smaller of both ends' (Linux's
        default ``pcie_bus_config`` makes a child's MPS no larger than its parent's)."""
        mine = self.cost.pcie.mps if own is None else own
        return min(mine, self.nodes[parent].mps)

    def _pcie_link(
        self,
        name: str,
        parent: str,
        gen: int,
        width: int,
        mps: int,
        override: LinkSpec | None,
    ) -> str:
        """Add ``pcie:<name>``, the link of ``name`` to its parent port; returns its name.
        Its capacity per direction is the posted-write payload rate at ``mps``
        (``cost.pcie_rate``, the PCIe mechanism)."""
        if parent in self.switch_specs:
            psw = self.switch_specs[parent]
            gen, width = min(gen, psw.gen), min(width, psw.width)
        up = self.cost.pcie_rate(gen, width, "up", mps)
        down = self.cost.pcie_rate(gen, width, "down", mps)
        latency = 0.0
        if override is not None:
            up = override.up if override.up is not None else up
            down = override.down if override.down is not None else down
            latency = override.latency if override.latency is not None else 0.0
        link = PlatformLink(
            f"pcie:{name}",
            "pcie",
            MappingProxyType({"up": up, "down": down}),
            latency,
            (name, parent),
            gen,
            width,
        )
        self.links[link.name] = link
        return link.name

    def _node(
        self,
        name: str,
        kind: str,
        parent: str,
        uplink: str | None,
        acs: bool = False,
        *,
        mps: int,
        mrrs: int | None = None,
    ) -> None:
        pnode = self.nodes[parent]
        self.nodes[name] = TreeNode(
            name,
            kind,
            pnode,
            pnode.socket,
            uplink,
            acs,
            pnode.depth + 1,
            mps,
            self.cost.pcie.mrrs if mrrs is None else mrrs,
        )

    def add_switch(self, sw: SwitchSpec) -> None:
        """Add switch ``sw`` (its parent switches first) with its upstream port and link."""
        if sw.name in self.nodes:
            return
        if sw.parent in self.switch_specs:
            self.add_switch(self.switch_specs[sw.parent])
        port = self._port(sw.parent, sw.name)
        usp = port.add_switch(0, vendor=sw.vendor, device=sw.device, label=sw.name)
        self.pdevs[sw.name] = usp
        mps = self._mps(sw.parent, sw.mps)
        uplink = self._pcie_link(sw.name, sw.parent, sw.gen, sw.width, mps, sw.link)
        self._node(sw.name, "switch", sw.parent, uplink, sw.acs_redirect, mps=mps)

    # -- drivers ---------------------------------------------------------------------------

    def add_device(self, i: int, dev: DeviceSpec) -> None:
        """Add device ``i``: its PCI function and link, its exporter driver, its GPU importer
        (when it wants one) and its memory link."""
        uplink: str | None
        if dev.rciep:
            pdev = self.bridges[dev.parent].add_endpoint(
                vendor=dev.vendor, device=dev.device, label=dev.name
            )
            uplink = None
        else:
            pdev = self._port(dev.parent, dev.name).add_endpoint(
                vendor=dev.vendor, device=dev.device, label=dev.name
            )
        mps = self._mps(dev.parent, dev.mps)
        if not dev.rciep:
            uplink = self._pcie_link(dev.name, dev.parent, dev.gen, dev.width, mps, dev.link)
        self.pdevs[dev.name] = pdev
        self._node(dev.name, "device", dev.parent, uplink, mps=mps, mrrs=dev.mrrs)
        where = f"devices[{i}] ({dev.name})"
        try:
            driver = EXPORTERS[dev.driver].from_spec(self.kernel, pdev, dev)
        except (ValueError, TypeError) as e:
            raise self._fail(where, str(e)) from None
        self.system.add_exporter(dev.name, driver)
        if dev.wants_gpu_import:
            if not driver.imports_dmabufs:
                raise self._fail(
                    f"devices[{i}].gpu_import",
                    f"expected false for driver {dev.driver!r} (it imports no dma-bufs), "
                    "found true",
                )
            self.system.add_gpu_importer(f"{dev.name}:import", GpuImporter.on(driver))
        if dev.memory_bandwidth is not None and not dev.is_carve_out:
            self.links[f"mem:{dev.name}"] = PlatformLink(
                f"mem:{dev.name}",
                "mem",
                MappingProxyType({"rw": dev.memory_bandwidth * self.cost.hbm.copy_efficiency}),
                0.0,
                (dev.name,),
            )

    def add_nic(self, i: int, nic: NicSpec) -> None:
        """Add NIC ``i``: its PCI function and link, its RDMA driver and its network port."""
        pdev = self._port(nic.parent, nic.name).add_endpoint(
            vendor=nic.vendor, device=nic.device, label=nic.name
        )
        self.pdevs[nic.name] = pdev
        mps = self._mps(nic.parent, nic.mps)
        uplink = self._pcie_link(nic.name, nic.parent, nic.gen, nic.width, mps, nic.link)
        self._node(nic.name, "nic", nic.parent, uplink, mps=mps, mrrs=nic.mrrs)
        try:
            rdma = nic_driver(nic.driver).from_spec(self.kernel, pdev, nic)
        except (ValueError, TypeError) as e:
            raise self._fail(f"nics[{i}] ({nic.name})", str(e)) from None
        self.system.add_nic(nic.name, rdma)
        rate = rdma_model.wire_rate(self.cost, nic_port(self.cost, nic))
        self.links[f"net:{nic.name}"] = PlatformLink(
            f"net:{nic.name}", "net", MappingProxyType({"tx": rate, "rx": rate}), 0.0, (nic.name,)
        )

    def add_displays(self) -> None:
        for disp in self.spec.displays:
            engine = DisplayEngine(self.kernel, self.pdevs[disp.device], name=disp.name)
            self.system.add_display(disp.name, engine)

    # -- host memory and sockets -----------------------------------------------------------

    def add_host_links(self) -> None:
        """``dram:<s>`` for every socket, then ``upi:<a>-<b>`` for every pair of sockets."""
        spec = self.spec
        dram = self.cost.dram_rate(spec.dram.bandwidth)
        for s in range(spec.cpu.sockets):
            self.links[f"dram:{s}"] = PlatformLink(
                f"dram:{s}", "dram", MappingProxyType({"rw": dram}), 0.0, (f"socket{s}",)
            )
        bw = spec.inter_socket.bandwidth
        for a in range(spec.cpu.sockets):
            for b in range(a + 1, spec.cpu.sockets):
                self.links[f"upi:{a}-{b}"] = PlatformLink(
                    f"upi:{a}-{b}",
                    "socket",
                    MappingProxyType({f"{a}->{b}": bw, f"{b}->{a}": bw}),
                    spec.inter_socket.latency,
                    (f"socket{a}", f"socket{b}"),
                )

    # -- NVLink ----------------------------------------------------------------------------

    def add_nvlinks(self) -> None:
        """``nvlink:<dev>`` (``tx``/``rx``) for every GPU of an NVSwitch domain -- its links to
        the switches, which join any two GPUs at the rate of their ports -- and
        ``nvlink:<a>-<b>`` (``a->b``/``b->a``) for a direct pair; per direction the
        copy-engine data rate of the links (:func:`~pinlab.platform.gpu_model.nvlink_rate`)."""
        for nv in self.spec.nvlink:
            links = nvlink_params(self.cost, nv.gen).links if nv.links is None else nv.links
            rate = nvlink_rate(self.cost, nv.gen, links)
            if nv.switches:
                for dev in nv.devices:
                    name = f"nvlink:{dev}"
                    self.links[name] = PlatformLink(
                        name,
                        "nvlink",
                        MappingProxyType({"tx": rate, "rx": rate}),
                        0.0,
                        (dev, nv.name),
                        nv.gen,
                        links,
                    )
            else:
                a, b = nv.devices
                name = f"nvlink:{a}-{b}"
                self.links[name] = PlatformLink(
                    name,
                    "nvlink",
                    MappingProxyType({f"{a}->{b}": rate, f"{b}->{a}": rate}),
                    0.0,
                    (a, b),
                    nv.gen,
                    links,
                )
