"""What the pin proposals share: a name, install bookkeeping and denial counters."""

from __future__ import annotations

from typing import cast

from pinlab.kernel.dma_buf import DmaBuf
from pinlab.kernel.errno import KernelError
from pinlab.kernel.kernel import Kernel
from pinlab.kernel.pin_hooks import BufferLocation, PinHook


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
        return dmabuf.locate() if dmabuf.locate is not None else None

    def _deny(self, e: KernelError) -> KernelError:
        e.policy = self.name  # lets reports count denials by policy
        key = str(e.errno)
        self.denials[key] = self.denials.get(key, 0) + 1
        return e
