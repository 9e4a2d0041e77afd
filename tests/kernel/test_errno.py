"""``KernelError``: the text a kernel log would print, and a value that survives pickling.

The text is built when read (a refused placement raises errors its caller catches and never
prints), so these check that what is read is exactly what the error says (kernel-semantics
§0.1: an errno returned to the caller, printed as the kernel prints it).
"""

from __future__ import annotations

import pickle

import pytest

from pinlab.kernel.dmem import DmemChargeError
from pinlab.kernel.errno import Errno, KernelError, err


def test_text_is_the_kernel_log_form() -> None:
    assert str(err(Errno.ENOSPC, "ttm_bo_alloc_resource", "no place has room")) == (
        "-ENOSPC from ttm_bo_alloc_resource: no place has room"
    )
    assert str(KernelError(Errno.EINVAL)) == "-EINVAL"
    assert str(KernelError(Errno.EBUSY, reason="pinned")) == "-EBUSY: pinned"
    assert err(Errno.ENOMEM).value == -12


def test_a_bare_number_becomes_the_errno() -> None:
    e = KernelError(16, "dma_buf_pin")  # type: ignore[arg-type]
    assert e.errno is Errno.EBUSY
    assert str(e) == "-EBUSY from dma_buf_pin"
    with pytest.raises(ValueError):
        KernelError(7777)  # type: ignore[arg-type]


def test_a_raised_error_prints_its_text() -> None:
    with pytest.raises(KernelError, match=r"^-EAGAIN from f: r$"):
        raise err(Errno.EAGAIN, "f", "r")


def test_pickling_keeps_every_field() -> None:
    e = err(Errno.ENOSPC, "ttm_resource_alloc", "vram has no room")
    e.policy = "device-pin-cap"
    back = pickle.loads(pickle.dumps(e))
    assert (back.errno, back.function, back.reason, back.policy) == (
        Errno.ENOSPC,
        "ttm_resource_alloc",
        "vram has no room",
        "device-pin-cap",
    )
    assert str(back) == str(e)


def test_pickling_a_subclass_keeps_its_own_fields() -> None:
    e = DmemChargeError("pool", "dmem.max")
    back = pickle.loads(pickle.dumps(e))
    assert isinstance(back, DmemChargeError)
    assert back.limit_pool == "pool"
    assert str(back) == "-EAGAIN from dmem_cgroup_try_charge: dmem.max"
