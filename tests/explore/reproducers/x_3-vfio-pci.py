"""pinlab explore finding X-3: a revoke of a 7.1 MMIO exporter (vfio-pci, the RDMA dma-buf
exporter) waits for good on the broken importer that never unmaps.

Target: vfio-pci → mlx5-broken @ 7.1 [none]. Classification: negative control.
Signature: hang:vfio_pci_dma_buf_move:N importer mapping(s) of <obj> still mapped after
dma_buf_invalidate_mappings | vfio-pci → mlx5-broken
Exit status 1 while it reproduces (the violations are printed).
"""

from pinlab.explore.invariants import Checker
from pinlab.explore.target import BUFFER_SIZE, Target
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
)

ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE

booted = Target("vfio-pci", "mlx5-broken", "7.1", "none").boot()
system = booted.system
p0, p1 = booted.procs
pressure = booted.pressure
check = Checker(booted, "none", exact_epochs=True)

# 1. create(0)
with check.call("create(0)"):
    f0_0 = p0.vfio_dma_buf("gpu0", system.vfio("gpu0").memory_bar, 0 * BUFFER_SIZE, BUFFER_SIZE)
    check.track("b0", p0.dmabuf(f0_0).priv)

# 2. send(0)
with check.call("send(0)"):
    f1_0 = p0.send_fd(f0_0, p1)

# 3. attach(1, 0)
with check.call("attach(1, 0)"):
    a1_0 = p1.ibv_reg_dmabuf_mr("mlx5_2", f1_0, 0, BUFFER_SIZE, ACCESS | IB_ACCESS_ON_DEMAND)

check.teardown()
raise SystemExit(check.exit_status())
