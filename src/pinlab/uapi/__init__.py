"""``pinlab.uapi``: userspace -- processes, their fds, and the calls a workload makes.

A :class:`~pinlab.uapi.system.System` is one booted machine (kernel, drivers, importers, the
stale-DMA detector); a :class:`~pinlab.uapi.process.Process` is a task with credentials,
rlimits, an mm and an fd table whose methods are the syscalls and library calls workloads use
(GEM create/export/import, ``ibv_reg_dmabuf_mr``, ``setrlimit``, ``close``, ``exit`` ...).
"""

from pinlab.uapi.process import GemHandle, Process
from pinlab.uapi.system import System

__all__ = ["GemHandle", "Process", "System"]
