"""What the pin proposals share: a name, install bookkeeping, denial counters, the charge
held once per pinned buffer, and the machine a policy file switches them on for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pinlab.kernel.dma_buf import DmaBuf, DmaBufAttachment
from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import Kernel, Task
from pinlab.kernel.pin_hooks import BufferLocation, PinHook

if TYPE_CHECKING:
    from pinlab.kernel.ttm import TtmDevice
    from pinlab.policy.cgroup import CgroupTree
    from pinlab.policy.dmem import DmemCgroupController


@dataclass(frozen=True, slots=True)
class ProposalSite:
    """Where a policy file switches a proposal on (``pinlab.policy.config.apply_policy``): the
    kernel, the cgroup tree, its dmem controller (None on a kernel without one) and the GPUs'
    TTM devices. Each proposal module's ``from_policy(settings, site)`` takes what its
    ``install`` needs from here; ``settings`` is its ``[proposals.<id>]`` table, validated."""

    kernel: Kernel
    tree: CgroupTree
    dmem: DmemCgroupController | None
    devices: Sequence[TtmDevice] = ()


class PinHookPolicy:
    """A proposal that plugs into ``kernel.pin_hooks`` (:mod:`pinlab.kernel.pin_hooks`).

    ``denials`` counts refused pins by errno (``"-ENOMEM": 3``), the same keys a process's
    ``stats.denials`` uses. Uninstalling stops new charges; pins charged while installed are
    still returned exactly, because the core hands every token back to the hook that issued it.
    """

    name = ""

    def __init__(self) -> None:
        self.kernel: Kernel | None = None
        self.denials: dict[str, int] = {}

    def install(self, kernel: Kernel) -> None:
        """Append this policy to ``kernel.pin_hooks`` (``ValueError`` if already installed
        somewhere, or if another policy of the same name is)."""
        if self.kernel is not None:
            raise ValueError(f"{self.name} is already installed on {self.kernel!r}")
        if any(getattr(h, "name", None) == self.name for h in kernel.pin_hooks):
            raise ValueError(f"another {self.name} policy is already installed")
        kernel.pin_hooks.append(cast(PinHook, self))
        self.kernel = kernel

    def uninstall(self) -> None:
        """Remove the hook; outstanding pins keep their tokens and are uncharged on unpin."""
        if self.kernel is None:
            return
        hook = cast(PinHook, self)
        if hook in self.kernel.pin_hooks:
            self.kernel.pin_hooks.remove(hook)
        self.kernel = None

    @property
    def installed(self) -> bool:
        return self.kernel is not None

    @staticmethod
    def _location(dmabuf: DmaBuf) -> BufferLocation | None:
        """Where the exporter says the pinned buffer is (``locate``, pin_hooks.py); None when
        it publishes no location."""
        return dmabuf.locate()

    def _deny(self, e: KernelError) -> KernelError:
        e.policy = self.name  # lets reports count denials by policy
        key = str(e.errno)
        self.denials[key] = self.denials.get(key, 0) + 1
        return e


@dataclass(slots=True)
class _Held:
    device: str
    size: int
    pins: int


class DevicePinBudget(PinHookPolicy):
    """A per-device budget of pinned device memory, counted once per buffer: the first hooked
    pin of a buffer that :meth:`counts` charges its size to its device (after :meth:`check`
    allowed it), further pins of the same buffer are free, and the last unpin returns it, so
    ``pinned[device]`` is the device memory actually held pinned. Subclasses say which pins
    count and refuse over their limit (``device-pin-cap``, ``pin-vram-percent``)."""

    def __init__(self) -> None:
        super().__init__()
        self.pinned: dict[str, int] = {}
        self._held: dict[DmaBuf, _Held] = {}

    def counts(self, loc: BufferLocation) -> bool:
        """Whether a pin that left the buffer at ``loc`` is charged (default: device memory)."""
        return loc.device_memory

    def check(self, loc: BufferLocation, used: int, size: int) -> None:
        """Raise the denial (through :meth:`_deny`) if ``used + size`` is over the limit."""

    def pin(self, attach: DmaBufAttachment, task: Task | None) -> object:
        dmabuf = attach.dmabuf
        held = self._held.get(dmabuf)
        if held is not None:
            held.pins += 1
            return dmabuf
        loc = self._location(dmabuf)
        if loc is None or not self.counts(loc):
            return None
        used = self.pinned.get(loc.device, 0)
        self.check(loc, used, dmabuf.size)
        self.pinned[loc.device] = used + dmabuf.size
        self._held[dmabuf] = _Held(loc.device, dmabuf.size, 1)
        return dmabuf

    def unpin(self, attach: DmaBufAttachment, token: object) -> None:
        if not isinstance(token, DmaBuf):
            return
        held = self._held.get(token)
        if held is None:
            return
        held.pins -= 1
        if held.pins == 0:
            del self._held[token]
            self.pinned[held.device] -= held.size


P = TypeVar("P")


@dataclass(eq=False, slots=True)
class BufferCharge(Generic[P]):
    """What one buffer's hooked pins charged, and where: the token a per-buffer policy returns
    for every pin of that buffer; the last unpin returns ``size`` to ``pool``."""

    dmabuf: DmaBuf
    pool: P
    size: int
    pins: int = field(default=1, init=False)


C = TypeVar("C", bound=BufferCharge[Any])


class BufferCharges(Generic[C]):
    """The charges a per-buffer policy holds, by buffer: a buffer is charged once, on its first
    hooked pin (:meth:`add`); its further pins count on the same token (:meth:`repin`); its
    last unpin hands the charge back to be returned (:meth:`release`)."""

    __slots__ = ("_held", "_kind", "_policy")

    def __init__(self, policy: str, kind: type[C]) -> None:
        self._policy = policy
        self._kind = kind
        self._held: dict[DmaBuf, C] = {}

    def __len__(self) -> int:
        return len(self._held)

    def repin(self, dmabuf: DmaBuf) -> C | None:
        """The charge of a buffer already held, with one pin more; None for a new buffer."""
        held = self._held.get(dmabuf)
        if held is not None:
            held.pins += 1
        return held

    def add(self, charge: C) -> C:
        """Hold a new buffer's charge (its first pin)."""
        self._held[charge.dmabuf] = charge
        return charge

    def release(self, token: object) -> C | None:
        """One pin fewer on ``token``: the charge when that was its buffer's last pin (the
        caller returns it), else None (also for no token, or one already spent).
        ``TypeError`` for a token this policy did not issue."""
        if token is None:
            return None
        if not isinstance(token, self._kind):
            raise TypeError(f"{self._policy}: foreign pin token {token!r}")
        if token.pins <= 0:
            return None
        token.pins -= 1
        if token.pins:
            return None
        if self._held.get(token.dmabuf) is token:
            del self._held[token.dmabuf]
        return token
