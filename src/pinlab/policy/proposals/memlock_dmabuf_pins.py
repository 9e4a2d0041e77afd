"""``memlock-dmabuf-pins``: charge ``dma_buf_pin`` to the pinner's RLIMIT_MEMLOCK.

Who proposed it: Jason Gunthorpe (RDMA maintainer) in the August 2021 EFA/habanalabs thread
(``policy-semantics.md`` §5.2, lore ``20210820143248.GX543798@ziepe.ca``,
``20210825121832.GA1162709@nvidia.com``): pinned device memory is no different from pinned CPU
memory -- *account it like mlock* and leave the limit to userspace policy (``ulimit -l``). It
was never merged: upstream ``dma_buf_pin`` is charged to nothing (§1.9, P-12, P-60).

What it changes: every ``dma_buf_pin`` (the hooked pins of dynamic importers -- EFA's
``ib_umem_dmabuf_get_pinned``, amdgpu's pin of an import -- not the pins the core takes for
static importers) charges the **whole dma-buf**, in 4 KiB pages, to the pinning task's
``mm->pinned_vm`` with exactly ``ib_umem_get``'s rules
(:func:`pinlab.policy.rlimit.charge_pinned_vm`):

* RLIMIT_MEMLOCK of 0 without ``CAP_IPC_LOCK`` → **EPERM** (``can_do_mlock``);
* ``pinned_vm + pages > L`` without ``CAP_IPC_LOCK`` → **ENOMEM**, nothing charged;
* with ``CAP_IPC_LOCK`` the pin always succeeds and is still counted.

The whole buffer is charged because the exporter pins the whole buffer, whatever range the
importer registered; two pins of one buffer are charged twice, as two ``ib_umem_get`` of one
range are. ``dma_buf_unpin`` returns exactly the pages charged, to the mm that paid, whoever
unpins (an exporter's revoke, another process's close). A pin in kernel context (no
``current``) is not charged. ``device_memory_only=True`` charges only pins the exporter placed
in device memory (``BufferLocation.device_memory``); the default also charges pins that
migrated to GTT/system memory, which are pinned host pages just the same.

Because ``pinned_vm`` is the counter ``ib_umem_get`` checks, host-memory RDMA registrations and
dma-buf pins of one process share one budget of L pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pinlab.kernel.dma_buf import DmaBufAttachment
from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import Kernel, MmStruct, Task
from pinlab.policy.proposals._base import PinHookPolicy, ProposalSite
from pinlab.policy.rlimit import charge_pinned_vm, npages, uncharge_pinned_vm

NAME = "memlock-dmabuf-pins"


@dataclass(frozen=True, slots=True)
class _Charge:
    mm: MmStruct
    pages: int


class MemlockDmabufPins(PinHookPolicy):
    """The ``memlock-dmabuf-pins`` pin hook.

    Counters: ``charged_pages`` (outstanding), ``pins`` (charged pins so far) and ``denials``.
    """

    name = NAME

    def __init__(self, *, device_memory_only: bool = False) -> None:
        super().__init__()
        self.device_memory_only = device_memory_only
        self.charged_pages = 0
        self.pins = 0

    def pin(self, attach: DmaBufAttachment, task: Task | None) -> object:
        """Charge the pin like ``ib_umem_get`` (EPERM / ENOMEM); return the charge token."""
        if task is None:
            return None
        dmabuf = attach.dmabuf
        if self.device_memory_only:
            loc = self._location(dmabuf)
            if loc is None or not loc.device_memory:
                return None
        pages = npages(0, dmabuf.size)
        try:
            charge_pinned_vm(task, pages, "dma_buf_pin")
        except KernelError as e:
            raise self._deny(e) from None
        self.charged_pages += pages
        self.pins += 1
        return _Charge(task.mm, pages)

    def unpin(self, attach: DmaBufAttachment, token: object) -> None:
        """Return exactly what :meth:`pin` charged, to the mm that paid."""
        if not isinstance(token, _Charge):
            return
        uncharge_pinned_vm(token.mm, token.pages, "dma_buf_unpin", kernel=self.kernel)
        self.charged_pages -= token.pages


def install(kernel: Kernel, *, device_memory_only: bool = False) -> MemlockDmabufPins:
    """Switch the proposal on for ``kernel``; returns the policy (``.uninstall()`` to stop)."""
    policy = MemlockDmabufPins(device_memory_only=device_memory_only)
    policy.install(kernel)
    return policy


def from_policy(settings: Any, site: ProposalSite) -> MemlockDmabufPins:
    """``[proposals.memlock-dmabuf-pins]`` of a policy file (``device_memory_only``)."""
    return install(site.kernel, device_memory_only=settings.device_memory_only)
