"""Capture (``pinlab.inspect.kernelinfo``, the additions to the PCI and proc readers), the
snapshot file (versioned, validated on load with one-line errors) and the host policy file."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from pinlab.cli import main
from pinlab.errors import ConfigError
from pinlab.inspect import inspect_host
from pinlab.inspect.hostpolicy import host_policy, host_policy_text
from pinlab.inspect.kernelinfo import parse_kallsyms, parse_kernel_config
from pinlab.inspect.snapshot import (
    dump_snapshot,
    load_snapshot,
    parse_snapshot,
    snapshot_from_report,
)
from pinlab.policy.config import parse_policy
from tests.inspect.fakehost import FakeHost, workstation

CONFIG = """\
#
# Automatically generated file; DO NOT EDIT.
CONFIG_DMA_SHARED_BUFFER=y
# CONFIG_DMABUF_MOVE_NOTIFY is not set
CONFIG_PCI_P2PDMA=y
CONFIG_CGROUP_DMEM=y
CONFIG_INFINIBAND=m
CONFIG_LOCALVERSION=""
"""
KALLSYMS = """\
0000000000000000 T dma_buf_move_notify
0000000000000000 T pci_p2pdma_distance_many
0000000000000000 T dma_buf_pin_x
0000000000000000 T ib_umem_dmabuf_get_pinned\t[ib_uverbs]
0000000000000000 t mlx5_ib_reg_user_mr_dmabuf\t[mlx5_ib]
"""
MODULES = """\
mlx5_ib 466944 0 - Live 0x0000000000000000
ib_uverbs 200704 1 mlx5_ib, Live 0x0000000000000000
amdgpu 12345678 3 - Live 0x0000000000000000 (OE)
"""


def _kernel_files(h: FakeHost, *, where: str = "boot") -> None:
    if where == "boot":
        h.write("/boot/config-6.16.3-arch1-1", CONFIG)
    else:
        h.write("/proc/config.gz", gzip.compress(CONFIG.encode()))
    h.write("/proc/kallsyms", KALLSYMS)
    h.write("/proc/modules", MODULES)
    h.write("/sys/kernel/mm/memory_peers/nv_mem/version", "1.3\n")


def test_parsers() -> None:
    cfg = parse_kernel_config(CONFIG)
    assert cfg["CONFIG_DMABUF_MOVE_NOTIFY"] == "n" and cfg["CONFIG_INFINIBAND"] == "m"
    assert cfg["CONFIG_LOCALVERSION"] == ""
    assert parse_kallsyms(KALLSYMS) == (
        "dma_buf_move_notify",
        "pci_p2pdma_distance_many",
        "ib_umem_dmabuf_get_pinned",
    )  # whole names only: dma_buf_pin_x is not dma_buf_pin
    with pytest.raises(ValueError, match="no CONFIG_ line"):
        parse_kernel_config("hello\n")


@pytest.mark.parametrize("where", ["boot", "config.gz"])
def test_capture_kernel_modules_symbols_iommu_memcg(tmp_path: Path, where: str) -> None:
    h = workstation(tmp_path)
    _kernel_files(h, where=where)
    gpu = h.path("/sys/bus/pci/devices/0000:03:00.0").resolve()
    (h.path("/sys/kernel/iommu_groups/17")).mkdir(parents=True)
    os.symlink(os.path.relpath(h.path("/sys/kernel/iommu_groups/17"), gpu), gpu / "iommu_group")
    h.write("/sys/fs/cgroup/user.slice/memory.max", "17179869184\n")
    h.write("/sys/fs/cgroup/user.slice/user-1000.slice/memory.max", "max\n")
    report = inspect_host(tmp_path)
    k = report.kernel
    assert (
        k.status == "ok"
        and k.config_source is not None
        and k.config_source.endswith("config-6.16.3-arch1-1" if where == "boot" else "config.gz")
    )
    assert k.config["CONFIG_DMABUF_MOVE_NOTIFY"] == "n"
    assert k.modules == ("amdgpu", "ib_uverbs", "mlx5_ib")
    assert k.memory_peers == ("nv_mem",)
    fn = report.pci.by_address()["0000:03:00.0"]
    assert fn.iommu_group == 17 and fn.drm_cards == ("card1",)
    assert report.memcg.limit == 16 << 30
    snap = snapshot_from_report(report)
    assert snap.kernel.option("DMABUF_MOVE_NOTIFY") is False
    assert snap.kernel.option("PCI_P2PDMA") is True
    assert snap.kernel.has_symbol("ib_umem_dmabuf_get_pinned") is True
    assert snap.limits.memory_max == 16 << 30 and snap.limits.uid == 1000
    assert parse_snapshot(dump_snapshot(snap)) == snap


def test_unreadable_sources_are_statuses_not_crashes(tmp_path: Path) -> None:
    h = workstation(tmp_path)
    h.write("/proc/config.gz", b"not gzip at all")
    report = inspect_host(tmp_path)
    assert report.kernel.config_source is None and "not a gzip config" in report.kernel.detail
    snap = snapshot_from_report(report)
    assert snap.kernel.option("DMABUF_MOVE_NOTIFY") is None  # unknown, not "off"


PCI = (
    "pinlab_snapshot = 1\n[[pci]]\naddress = '0000:03:00.0'\nroot_bus = '0000:00'\n"
    "vendor = '0x10de'\ndevice = '0'\nclass_code = '0'\n"
)


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("source = 'x'\n", "pinlab_snapshot", "expected snapshot format 1"),
        ("pinlab_snapshot = 2\n", "pinlab_snapshot", "found 2"),
        ("pinlab_snapshot = 1\nbogus = 1\n", "bogus", "pinlab_snapshot"),
        (
            "pinlab_snapshot = 1\n[limits]\nmemlock_soft = 'lots'\n",
            "limits.memlock_soft",
            "lots",
        ),
        # do_prlimit (kernel/sys.c) refuses soft > hard: named at the snapshot's field
        (
            "pinlab_snapshot = 1\n[limits]\nmemlock_known = true\nmemlock_soft = '1GiB'\n"
            "memlock_hard = '8MiB'\n",
            "limits.memlock_soft",
            "expected at most the hard limit (memlock_hard = 8MiB), found 1GiB",
        ),
        (
            "pinlab_snapshot = 1\n[limits]\nmemlock_known = true\nmemlock_soft = 'unlimited'\n"
            "memlock_hard = '8MiB'\n",
            "limits.memlock_soft",
            "found unlimited",
        ),
        (
            "pinlab_snapshot = 1\n[[pci]]\naddress = '0000:03:00.0'\nroot_bus = '0000:00'\n"
            "vendor = 'xyz'\ndevice = '0'\nclass_code = '0'\n",
            "pci[0].vendor",
            "hexadecimal",
        ),
        # the fields the platform and doctor read a PCI tree by are checked, not trusted
        (PCI.replace("0000:03:00.0", "a"), "pci[0].address", 'like "0000:03:00.0", found "a"'),
        (PCI.replace("'0000:00'", "'00'"), "pci[0].root_bus", 'like "0000:00", found "00"'),
        (PCI + "parent = '3'\n", "pci[0].parent", 'expected a PCI address like "0000:03:00.0"'),
        (PCI + "port_type = 'sideways'\n", "pci[0].port_type", 'found "sideways"'),
        (PCI + "port_type_source = 'guess'\n", "pci[0].port_type_source", 'found "guess"'),
        # a sign or a width no PCI register has: int() would take them
        (PCI.replace("class_code = '0'", "class_code = '-0xc0500'"), "pci[0].class_code", "-0xc"),
        (PCI.replace("device = '0'", "device = 4294967296"), "pci[0].device", "4294967296"),
        (PCI.replace("device = '0'", "device = true"), "pci[0].device", "hexadecimal"),
    ],
)
def test_bad_snapshot_is_one_line(text: str, where: str, message: str) -> None:
    """The snapshot file (a user's edit of it too) is validated up front, one line per
    problem naming the field."""
    parse_snapshot(PCI, "s.toml")  # the base of the PCI cases is itself good
    with pytest.raises(ConfigError) as e:
        parse_snapshot(text, "s.toml")
    line = str(e.value)
    assert line.startswith("s.toml") and where in line and message in line and "\n" not in line


def test_doctor_names_the_snapshot_field_of_a_soft_limit_above_the_hard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        "pinlab_snapshot = 1\n[limits]\nmemlock_known = true\nmemlock_soft = '1GiB'\n"
        "memlock_hard = '8MiB'\n"
    )
    assert main(["doctor", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"pinlab: error: {bad}: limits.memlock_soft: expected at most the hard limit "
        "(memlock_hard = 8MiB), found 1GiB\n"
    )


def test_load_snapshot_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.toml"):
        load_snapshot(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("pinlab_snapshot = [\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: expected valid TOML"):
        load_snapshot(bad)


def test_host_policy_has_the_hosts_limits(tmp_path: Path) -> None:
    snap = snapshot_from_report(inspect_host(workstation(tmp_path).root))
    doc = host_policy(snap)
    user = doc["users"]["host"]
    assert user == {
        "uid": 1000,
        "memlock": {"soft": "8MiB", "hard": "8MiB"},
        "capabilities": [],
        "cgroup": "user.slice/user-1000.slice/session-2.scope",
    }
    assert doc["cgroups"]["user.slice"]["dmem.max"] == "drm/{gpu0}/vram 8GiB"
    assert doc["cgroups"]["user.slice/user-1000.slice"]["dmem.low"] == "drm/{gpu0}/vram 256MiB"
    parse_policy(host_policy_text(snap).replace("{gpu0}", "0000:03:00.0"), "host-policy.toml")


def test_inspect_writes_snapshot_and_policy_and_run_accepts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pinlab inspect --snapshot --policy``: the doctor reads the snapshot; ``pinlab run
    --platform --policy`` takes the platform and the policy file."""
    workstation(tmp_path / "root")
    host, snap, policy = (tmp_path / n for n in ("host.toml", "snap.toml", "policy.toml"))
    argv = ["inspect", "--root", str(tmp_path / "root"), "--out", str(host)]
    assert main([*argv, "--snapshot", str(snap), "--policy", str(policy)]) == 0
    assert load_snapshot(snap).hostname == "box"
    capsys.readouterr()
    run = ["run", "odp-vs-pin", "--platform", str(host), "--policy", str(policy)]
    short = ["--set", "scenario.duration=2s", "--no-report", "--quiet", "--out", str(tmp_path)]
    assert main([*run, *short]) in (0, 1)
    config = (tmp_path / "odp-vs-pin" / "pinned" / "config.toml").read_text()
    assert "[policy.users.host]" in config
