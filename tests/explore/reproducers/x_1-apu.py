"""pinlab explore finding X-1: a revocable pinned import revokes itself inside its own dma_buf_pin;
the exporter pin leaks.

Target: apu → efa-revocable @ 7.1 [none]. Classification: kernel behaviour.
Signature: leak:dma_buf_detach:N unbalanced dma_buf_pin of <attachment efa1 (dynamic) on <obj>>
| apu → efa-revocable
Exit status 1 while it reproduces (the violations are printed).
"""

from pinlab.explore.invariants import Checker
from pinlab.explore.target import BUFFER_SIZE, Target
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
)

ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE

booted = Target("apu", "efa-revocable", "7.1", "none").boot()
system = booted.system
p0, p1 = booted.procs
pressure = booted.pressure
check = Checker(booted, "none", exact_epochs=False)

# 1. create(0)
with check.call("create(0)"):
    b0 = p0.gem_create("gpu0", BUFFER_SIZE, "vram")
    check.track("b0", p0.buffer(b0))
    f0_0 = p0.prime_handle_to_fd(b0)

# 2. attach(0, 0) -- fails with -EINVAL (ib_umem_dmabuf_map_pages)
with check.call("attach(0, 0)"):
    a0_0 = p0.ibv_reg_dmabuf_mr("efa1", f0_0, 0, BUFFER_SIZE, ACCESS)

check.teardown()
raise SystemExit(check.exit_status())
