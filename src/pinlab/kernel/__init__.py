"""``pinlab.kernel``: the mechanism layer -- an executable model of the Linux kernel parts that
decide who may pin device memory, where, and what happens when it moves.

Modules, each named after the kernel code it models:

* :mod:`~pinlab.kernel.errno` -- ``KernelError`` (``-ENOMEM``), ``LockingError`` (lockdep),
  ``KernelBug`` (BUG), ``NotInProfile``;
* :mod:`~pinlab.kernel.warn` -- the WARN / WARN_ON_ONCE log;
* :mod:`~pinlab.kernel.limits` -- ``U64_MAX``, ``ULONG_MAX`` (include/linux/limits.h);
* :mod:`~pinlab.kernel.profile` -- ``KernelProfile`` presets 5.16, 6.12, 6.14, 6.16, 7.1;
* :mod:`~pinlab.kernel.kernel` -- the ``Kernel`` instance, ``Task``, fence waiters;
* :mod:`~pinlab.kernel.fence`, :mod:`~pinlab.kernel.resv` -- ``dma_fence``, ``dma_resv``;
* :mod:`~pinlab.kernel.file`, :mod:`~pinlab.kernel.device` -- files, fd tables, devices;
* :mod:`~pinlab.kernel.dma_buf` -- the dma-buf core (drivers/dma-buf/dma-buf.c);
* :mod:`~pinlab.kernel.range_alloc`, :mod:`~pinlab.kernel.ttm` -- TTM and its allocator;
* :mod:`~pinlab.kernel.dmem` -- the interface TTM uses to charge the dmem cgroup controller;
* :mod:`~pinlab.kernel.pci`, :mod:`~pinlab.kernel.pci_regs`, :mod:`~pinlab.kernel.p2pdma` --
  the PCI tree, its register-level definitions and P2PDMA distance;
* :mod:`~pinlab.kernel.umem` -- RDMA dma-buf umems (pinned and dynamic);
* :mod:`~pinlab.kernel.bufinfo` -- debugfs ``dma_buf/bufinfo``, rendered and parsed.

The layer knows nothing of policy or time and imports no other pinlab layer (enforced by
import-linter, see ``pyproject.toml``).
"""

from pinlab.kernel.errno import Errno, KernelBug, KernelError, LockingError, NotInProfile
from pinlab.kernel.kernel import DeferredWaiter, FenceWaiter, Kernel, Task
from pinlab.kernel.profile import DEFAULT_PROFILE, PRESETS, KernelProfile, get_profile

__all__ = [
    "DEFAULT_PROFILE",
    "PRESETS",
    "DeferredWaiter",
    "Errno",
    "FenceWaiter",
    "Kernel",
    "KernelBug",
    "KernelError",
    "KernelProfile",
    "LockingError",
    "NotInProfile",
    "Task",
    "get_profile",
]
