"""pinlab explore finding X-2: the deliberately broken mlx5 importer (ignore_move_notify) DMAs
through a stale mapping after an eviction.

Target: amdgpu → mlx5-broken @ 7.1 [none]. Classification: negative control.
Signature: stale-dma:mlx5_2:stale: mapping of epoch N, buffer now at epoch N (gtt) | amdgpu →
mlx5-broken
Exit status 1 while it reproduces (the violations are printed).
"""

from pinlab.explore.invariants import Checker
from pinlab.explore.target import BUFFER_SIZE, PRESSURE_SIZE, Target
from pinlab.kernel.umem import (
    IB_ACCESS_LOCAL_WRITE,
    IB_ACCESS_ON_DEMAND,
    IB_ACCESS_REMOTE_READ,
    IB_ACCESS_REMOTE_WRITE,
)

ACCESS = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE

booted = Target("amdgpu", "mlx5-broken", "7.1", "none").boot()
system = booted.system
p0, p1 = booted.procs
pressure = booted.pressure
check = Checker(booted, "none", exact_epochs=False)

# 1. create(0)
with check.call("create(0)"):
    b0 = p0.gem_create("gpu0", BUFFER_SIZE, "vram")
    check.track("b0", p0.buffer(b0))
    f0_0 = p0.prime_handle_to_fd(b0)

# 2. attach(0, 0)
with check.call("attach(0, 0)"):
    a0_0 = p0.ibv_reg_dmabuf_mr("mlx5_2", f0_0, 0, BUFFER_SIZE, ACCESS | IB_ACCESS_ON_DEMAND)

# 3. evict
with check.call("evict"):
    h = pressure.gem_create("gpu0", PRESSURE_SIZE, "vram")
    pressure.gem_close(h)

# 4. use(0, 0)
with check.call("use(0, 0)"):
    p0.nic_dma(a0_0)

check.teardown()
raise SystemExit(check.exit_status())
