"""``pinlab doctor`` (``pinlab.inspect.doctor``): every answer is what the model returned when the
registration ran through ``pinlab.uapi``; fixes are kept only when re-running the steps with
the change resolves a finding (P-1, P-12, P-17, K-45, K-49)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinlab.cli import main
from pinlab.inspect import inspect_host
from pinlab.inspect.doctor import _refusal_reason, closest_profile, diagnose
from pinlab.inspect.doctor_run import Inputs
from pinlab.inspect.snapshot import Snapshot, snapshot_from_report, write_snapshot
from pinlab.kernel.kernel import RLIM_INFINITY
from pinlab.kernel.profile import get_profile
from pinlab.platform import build, dl1
from pinlab.platform.spec import PlatformSpec
from pinlab.units import GiB
from tests.inspect.fakehost import bare_host, workstation

MN_ON = "CONFIG_DMABUF_MOVE_NOTIFY=y\nCONFIG_PCI_P2PDMA=y\nCONFIG_CGROUP_DMEM=y\n"


def _snap(root: Path, *, memlock: str = "8388608", config: str | None = MN_ON) -> Snapshot:
    h = workstation(root)
    h.proc(memlock=(memlock, memlock))
    if config is not None:
        h.write("/boot/config-6.16.3-arch1-1", config)
    return snapshot_from_report(inspect_host(root))


def test_this_machine_runs_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """Done-when: on this machine (no accelerator) the doctor runs and says so cleanly."""
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code in (0, 1) and "Traceback" not in out
    if "nothing to diagnose" in out:
        assert code == 0 and "verdict: healthy" in out


def test_host_without_accelerator_is_healthy_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare_host(tmp_path)
    assert main(["doctor", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "nothing to diagnose: this host has no accelerator and no RDMA NIC" in out


def test_healthy_workstation(tmp_path: Path) -> None:
    d = diagnose(_snap(tmp_path, memlock="unlimited"))
    assert d.exit_code == 0
    (pair,) = d.pairs
    assert pair.switches["move_notify"] is True
    pinned = pair.registrations["pinned"]
    assert pinned.ok and pinned.location == "vram" and "K-45" in pinned.items
    assert pair.rates.path == "root_complex"
    assert pair.with_proposal is not None and pair.with_proposal.ok  # unlimited memlock


def test_default_memlock_blocks_the_staging_buffer_and_the_proposal(tmp_path: Path) -> None:
    """P-12: a dma-buf pin is not charged to RLIMIT_MEMLOCK; P-1: a host MR over it is; with
    the memlock-dmabuf-pins proposal the pin would be."""
    (pair,) = diagnose(_snap(tmp_path)).pairs
    assert pair.registrations["pinned"].ok
    assert not pair.host_mr.ok and pair.host_mr.errno == "-ENOMEM"
    assert pair.host_mr.function == "ib_umem_get" and "P-1" in pair.host_mr.items
    assert pair.with_proposal is not None and not pair.with_proposal.ok
    assert [f.key for f in pair.findings] == ["host-mr-fails"]
    assert "RLIMIT_MEMLOCK" in pair.fixes[0].text


def test_a_memlock_the_snapshot_lacks_is_said_assumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot of pasted output has no RLIMIT_MEMLOCK unless `ulimit` was pasted. The
    doctor took Linux's default without a word and reported the staging buffer's -ENOMEM as a
    finding of the host (P-1); the assumption is said where the finding is, and in the JSON."""
    known = _snap(tmp_path / "known")
    blind = known.model_copy(
        update={"limits": known.limits.model_copy(update={"memlock_known": False})}
    )
    d = diagnose(blind)
    (pair,) = d.pairs
    assert pair.memlock_assumed and pair.memlock == (8 << 20, 8 << 20)
    assert any(n.startswith("RLIMIT_MEMLOCK unknown (not in the snapshot") for n in d.notes)
    assert not diagnose(known).pairs[0].memlock_assumed
    assert not any("RLIMIT_MEMLOCK unknown" in n for n in diagnose(known).notes)
    path = write_snapshot(blind, tmp_path / "blind.toml")
    main(["doctor", str(path)])
    assert "soft 8 MiB, hard 8 MiB (assumed: not in the snapshot)" in capsys.readouterr().out
    main(["doctor", str(path), "--json"])
    (shown,) = json.loads(capsys.readouterr().out)["pairs"]
    assert shown["memlock"]["assumed"] is True


def test_without_move_notify_amdgpu_pins_in_gtt(tmp_path: Path) -> None:
    """K-49: 6.16 amdgpu pins in VRAM only with MN on; the fix is confirmed by a re-run."""
    snap = _snap(tmp_path, memlock="unlimited", config="# CONFIG_DMABUF_MOVE_NOTIFY is not set\n")
    profile, uverbs, _ = closest_profile(snap)
    assert (profile.name, profile.move_notify, uverbs) == ("6.16", False, True)
    (pair,) = diagnose(snap).pairs
    assert pair.registrations["pinned"].location == "gtt"
    assert [f.key for f in pair.findings] == ["staged"]
    assert pair.findings[0].items == ("K-48", "K-49")  # amdgpu's declared attach and pin rules
    assert pair.fixes[0].text.startswith("a kernel with CONFIG_DMABUF_MOVE_NOTIFY=y")


def test_dmem_max_refuses_the_allocation(tmp_path: Path) -> None:
    """P-17/P-28: user.slice's dmem.max (8 GiB) refuses a 9 GiB buffer with -ENOMEM; an 8 GiB
    one fits, because the 512 MiB already in use there can be evicted (P-24)."""
    snap = _snap(tmp_path, memlock="unlimited")
    (pair,) = diagnose(snap, size=9 * GiB).pairs
    failed = pair.registrations["pinned"].failed
    assert failed is not None and failed.call.startswith("gem_create(gpu0, 9 GiB)")
    assert failed.errno == "-ENOMEM" and "P-28" in failed.items
    assert diagnose(snap, size=8 * GiB).exit_code == 0
    assert "headroom 7.5 GiB" in pair.dmem
    assert any("dmem.max" in f.text for f in pair.fixes)


def test_aliases_and_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = _snap(tmp_path / "a")
    (pair,) = diagnose(snap, device="card1", nic="0000:05:00.0").pairs
    assert (pair.device, pair.nic) == ("gpu0", "mlx5_0")
    with pytest.raises(ValueError, match="expected a device of the snapshot"):
        diagnose(snap, device="gpu7")
    workstation(tmp_path / "b")
    root = ["doctor", "--root", str(tmp_path / "b")]
    for extra, message in (
        (["--device", "gpu7"], "--device gpu7: expected a device"),
        (["--size", "lots"], "--size lots"),
        (["--size", "0"], "expected a size above 0"),
        # an empty name selects nothing: refused, not read as "every device"
        (["--device", ""], "--device: expected a device of the snapshot (gpu0), found an empty"),
        (["--nic", ""], "--nic: expected a NIC of the snapshot (mlx5_0), found an empty name"),
    ):
        assert main([*root, *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert main(["doctor", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml" in capsys.readouterr().err


def test_json_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workstation(tmp_path)
    outs = []
    for _ in range(2):
        assert main(["doctor", "--root", str(tmp_path), "--json"]) == 1
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]
    assert json.loads(outs[0])["pairs"][0]["registrations"]["pinned"]["ok"] is True


def test_the_odp_kernel_fix_is_offered_where_the_nic_driver_declares_odp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "A kernel with ODP" is a fix for a NIC whose driver declares ODP support
    (``RdmaDevice.supports_odp``) and has none here -- read off the driver class, so a plugin
    NIC gets it from its declaration, whatever its name or base class."""
    from pinlab.drivers import IMPORTERS
    from pinlab.drivers.mlx5 import Mlx5Device
    from pinlab.inspect.doctor import _candidates
    from pinlab.inspect.doctor_run import Inputs, snapshot_memlock
    from pinlab.inspect.hostpolicy import host_policy

    class Clone(Mlx5Device):
        driver_name = "cx-clone"

    class NoOdp(Mlx5Device):
        driver_name = "cx-noodp"
        supports_odp = False

    monkeypatch.setitem(IMPORTERS, "cx-clone", Clone)
    monkeypatch.setitem(IMPORTERS, "cx-noodp", NoOdp)
    snap = _snap(tmp_path, config=MN_ON + "# CONFIG_INFINIBAND_ON_DEMAND_PAGING is not set\n")
    spec = snap.plan().spec
    (device,) = spec.devices
    (nic,) = spec.nics
    profile, uverbs, _ = closest_profile(snap)
    fixes = {}
    for driver in ("mlx5", "cx-clone", "cx-noodp"):
        nics = (nic.model_copy(update={"driver": driver, "odp": False}),)
        inputs = Inputs(
            spec.model_copy(update={"nics": nics}),
            profile,
            uverbs,
            snapshot_memlock(snap),
            frozenset(),
            host_policy(snap),
            "pinned",
            GiB,
        )
        texts = [text for text, _ in _candidates(inputs, device.name, nic.name)]
        fixes[driver] = [t for t in texts if "ON_DEMAND_PAGING" in t]
    assert fixes == {
        "mlx5": ["a kernel with CONFIG_INFINIBAND_ON_DEMAND_PAGING=y (mlx5 then offers ODP)"],
        "cx-clone": [
            "a kernel with CONFIG_INFINIBAND_ON_DEMAND_PAGING=y (cx-clone then offers ODP)"
        ],
        "cx-noodp": [],
    }


@pytest.mark.parametrize(
    ("driver", "location", "placed_by"),
    [
        ("amdgpu", "gtt", ("K-48", "K-49")),  # attach may clear peer2peer; 6.16 pins in GTT
        ("xe", "gtt", ("K-53",)),  # 6.16: xe pins in TT only
        ("i915", "system", ("K-54",)),  # attach migrates to SMEM and pins
    ],
)
def test_staged_cites_the_exporters_own_placement_rule(
    driver: str, location: str, placed_by: tuple[str, ...]
) -> None:
    """The items that say why a pinned MR's buffer sits in host memory are the ones its
    exporter declares (``checklist_items``), not the NIC's K-45 nor a table of driver names."""
    from dataclasses import replace

    from pinlab.inspect.doctor_run import Inputs, run_registration
    from pinlab.inspect.hostpolicy import HOST_USER
    from pinlab.kernel.kernel import RLIM_INFINITY
    from pinlab.kernel.profile import PRESETS
    from pinlab.platform.presets import resolve_platform

    spec = resolve_platform("workstation")
    assert isinstance(spec, PlatformSpec)
    gpu = spec.device("gpu0").model_copy(update={"driver": driver})
    spec = spec.model_copy(update={"devices": (gpu,), "displays": ()})
    profile = PRESETS["6.16"].with_(move_notify=False)
    policy = {"users": {HOST_USER: {"uid": 1000}}}
    inputs = Inputs(spec, profile, True, (RLIM_INFINITY,) * 2, frozenset(), policy, "pinned", GiB)
    reg = run_registration(inputs, "gpu0", "mlx5_0", "pinned", 0)
    assert reg.ok and reg.location == location
    assert reg.placed_by == placed_by and "K-45" in reg.items
    odp = run_registration(replace(inputs, mode="odp"), "gpu0", "mlx5_0", "odp", 0)
    assert odp.placed_by  # the exporter's rule for an ODP import, whatever the driver


def _inputs(spec: PlatformSpec, profile: str) -> Inputs:
    return Inputs(
        spec=spec,
        profile=get_profile(profile),
        uverbs_dmabuf=True,
        memlock=(RLIM_INFINITY, RLIM_INFINITY),
        caps=frozenset(),
        policy={},
        mode="pinned",
        size=GiB,
    )


def test_a_refusal_says_which_host_bridge_and_what_the_kernel_logs() -> None:
    """K-55, K-83, K-132: the reason is read off the kernel model -- for each host bridge on
    the path, the function the whitelist knows it by and the entry that decides -- and ends
    with what a verbose ``pci_p2pdma_distance`` logs."""
    unlisted = _refusal_reason(_inputs(dl1(host_bridge_device=0x4660), "6.16"), "gaudi0", "efa0")
    assert unlisted.startswith(
        "the path goes through host bridge rc0 (8086:4660), which is not whitelisted, and the "
        "CPU (intel family 0x6) is not an AMD Zen; the kernel logs: pci "
    )
    assert "do not share an upstream bridge or whitelisted host bridge" in unlisted

    spec = dl1()
    by_port = tuple(hb.model_copy(update={"root_port_slot": 2}) for hb in spec.host_bridges)
    spec = spec.model_copy(update={"host_bridges": by_port})
    old = _refusal_reason(_inputs(spec, "5.16"), "gaudi0", "efa0")
    assert old.startswith(
        "host bridge rc0 has no function the whitelist knows it by (none at 00.0, nor (before "
        "v5.19) by a first Root Port)"
    )
    carried = spec.model_copy(update={"p2pdma_root_port_lookup": True})
    assert build(carried, "5.16").p2p_path_class("gaudi0", "efa0") == "root_complex"

    e5 = _refusal_reason(_inputs(dl1(host_bridge_device=0x3C00), "6.16"), "gaudi0", "efa2")
    assert e5.startswith(
        "host bridge rc0 (8086:3c00) is whitelisted for P2P below itself only, and the pair "
        "spans two host bridges, and host bridge rc1 (8086:3c00) is whitelisted"
    )


@pytest.mark.parametrize(
    ("release", "path"), [("6.8.0-45-generic", "root_complex"), ("5.17.2", None)]
)
def test_a_sapphire_rapids_host_gets_its_kernels_p2p_answer(
    tmp_path: Path, release: str, path: str | None
) -> None:
    """K-133: a Xeon host bridge 0x09a2 on Linux 6.8 is whitelisted (5.18 on) although the
    closest profile is 5.16: the doctor diagnoses with the host's table, carried by the
    platform, so the dGPU ↔ NIC path goes through the root complex as on the host; on 5.17
    the kernel refuses it and the doctor says which bridge and quotes the kernel."""
    h = workstation(tmp_path)
    h.proc(
        memlock=("unlimited", "unlimited"),
        cpu_vendor="GenuineIntel",
        cpu_family=6,
        cpu_model="Intel(R) Xeon(R) Platinum 8480+",
        release=release,
    )
    host_function = "/sys/devices/pci0000:00/0000:00:00.0"
    h.write(f"{host_function}/vendor", "0x8086\n")
    h.write(f"{host_function}/device", "0x09a2\n")
    h.write(f"/boot/config-{release}", MN_ON)
    d = diagnose(snapshot_from_report(inspect_host(tmp_path)))
    (pair,) = d.pairs
    if path is not None:
        assert pair.rates.path == path
        assert not any("P2PDMA refuses" in f.text for f in pair.findings)
        return
    assert pair.rates.path == "refused by P2PDMA"
    (staged,) = [f for f in pair.findings if f.key == "staged"]
    assert "host bridge rc0 (8086:09a2), which is not whitelisted" in staged.text
    assert "the kernel logs: pci " in staged.text
