"""The host's kernel configuration on its platform file: ``pinlab inspect`` writes the switches
the host's config settles (``[kernel_config]``, from the one derivation the doctor uses), and a
scenario run on the file starts from them (``kernel-semantics.md`` §1.5; K-48, K-49, K-55: a
kernel without CONFIG_PCI_P2PDMA refuses the GPU ↔ NIC pair, so amdgpu pins the export in GTT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinlab.cli import main
from pinlab.inspect.doctor import diagnose
from pinlab.inspect.snapshot import load_snapshot
from pinlab.platform.presets import load_platform
from pinlab.platform.spec import PlatformSpec
from tests.inspect.fakehost import workstation

NO_P2P = "CONFIG_DMABUF_MOVE_NOTIFY=y\n# CONFIG_PCI_P2PDMA is not set\nCONFIG_CGROUP_DMEM=y\n"


def _inspect(tmp_path: Path, config: str | None = NO_P2P) -> tuple[Path, Path]:
    root = tmp_path / "root"
    h = workstation(root)
    h.proc(memlock=("unlimited", "unlimited"))
    if config is not None:
        h.write("/boot/config-6.16.3-arch1-1", config)
    out, snap = tmp_path / "host.toml", tmp_path / "snap.toml"
    args = ["inspect", "--root", str(root), "--out", str(out), "--snapshot", str(snap)]
    assert main(args) == 0
    return out, snap


def _pinned(tmp_path: Path, platform: Path, *sets: str) -> dict[str, float]:
    out = tmp_path / "run"
    args = ["run", "odp-vs-pin", "--platform", str(platform), "--map", "gpu0=card1"]
    args += ["--variant", "pinned", "--set", "scenario.duration=2s", "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    assert main([*args, "--no-report", "--quiet"]) in (0, 1)
    data = json.loads((out / "odp-vs-pin" / "pinned" / "summary.json").read_text())
    return {k: v["value"] for k, v in data["metrics"].items()}


def test_the_platform_file_carries_the_hosts_kernel_config_as_the_doctor_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform, snap = _inspect(tmp_path)
    spec = load_platform(platform)
    assert isinstance(spec, PlatformSpec) and spec.kernel_config is not None
    assert spec.kernel_config.switches() == {
        "move_notify": True,
        "pci_p2pdma": False,
        "dmem": True,
    }
    assert "[kernel_config]\nmove_notify = true\npci_p2pdma = false\ndmem = true\n" in (
        platform.read_text()
    )
    assert "CONFIG_PCI_P2PDMA=n, unlike profile 6.16's default" in capsys.readouterr().out
    (pair,) = diagnose(load_snapshot(snap)).pairs
    assert pair.rates.path == "refused by P2PDMA"
    assert pair.switches["pci_p2pdma"] is False and pair.switches["move_notify"] is True


def test_a_run_on_the_inspected_platform_refuses_p2p_as_the_host_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform, _ = _inspect(tmp_path)
    m = _pinned(tmp_path, platform)
    assert m["device.node/gpu0.vram.pinned_peak"] == 0
    assert m["device.node/gpu0.gtt.pinned_peak"] > 0
    config = (tmp_path / "run" / "odp-vs-pin" / "pinned" / "config.toml").read_text()
    assert "pci_p2pdma = false" in config


def test_without_a_kernel_config_the_file_carries_none_and_the_profile_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform, _ = _inspect(tmp_path, config=None)
    spec = load_platform(platform)
    assert isinstance(spec, PlatformSpec) and spec.kernel_config is None
    assert "[kernel_config]" not in platform.read_text()
    assert _pinned(tmp_path, platform)["device.node/gpu0.vram.pinned_peak"] > 0


def test_a_scenario_setting_that_contradicts_the_hosts_kernel_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform, _ = _inspect(tmp_path)
    capsys.readouterr()
    args = ["run", "odp-vs-pin", "--platform", str(platform), "--map", "gpu0=card1"]
    assert main([*args, "--set", "kernel.pci_p2pdma=true", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (
        "kernel.pci_p2pdma: expected false, the host kernel's (CONFIG_PCI_P2PDMA=n: "
        f"kernel_config.pci_p2pdma of {platform.resolve()}), found true" in err
    )
    assert not (tmp_path / "r").exists()
    # agreeing with the host is allowed
    assert _pinned(tmp_path, platform, "kernel.pci_p2pdma=false")["tenant.rdma.path_rate"] > 0


def test_kernel_config_fields_are_checked(tmp_path: Path) -> None:
    from pinlab.errors import ConfigError

    platform, _ = _inspect(tmp_path)
    text = platform.read_text().replace("pci_p2pdma = false", "p2pdma = false")
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_platform(bad)
    assert e.value.where == "kernel_config.p2pdma"
    assert "move_notify" in e.value.message and "pci_p2pdma" in e.value.message


def test_the_hosts_move_notify_holds_where_the_profile_has_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """odp-vs-pin sets move_notify = true: refused on a kernel built without it under the
    file's 6.16; under --profile 7.1, where CONFIG_DMABUF_MOVE_NOTIFY was removed (always on),
    the host's switch does not apply and the scenario runs."""
    platform, _ = _inspect(tmp_path, config="# CONFIG_DMABUF_MOVE_NOTIFY is not set\n")
    root = tmp_path / "root"
    capsys.readouterr()
    assert main(["inspect", "--root", str(root), "--out", str(platform), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["platform"]["kernel_config"] == {
        "move_notify": False
    }
    args = ["run", "odp-vs-pin", "--platform", str(platform), "--map", "gpu0=card1"]
    args += ["--variant", "pinned", "--set", "scenario.duration=1s", "--no-report", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 2
    assert "kernel.move_notify: expected false" in capsys.readouterr().err
    assert main([*args, "--set", "kernel.profile=7.1", "--out", str(tmp_path / "b")]) in (0, 1)
    # --profile too: the variants are validated under the profile they will run under
    assert main([*args, "--profile", "7.1", "--out", str(tmp_path / "c")]) in (0, 1)
    assert (tmp_path / "c" / "odp-vs-pin" / "pinned" / "summary.json").is_file()


def test_a_host_kernel_without_the_dmem_controller_refuses_a_dmem_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CONFIG_CGROUP_DMEM=n on a 6.16 host: the platform file says so (kernel_config.dmem),
    the doctor's profile has no dmem (the one derivation), and a scenario whose policy writes
    dmem.max is refused naming the host's configuration, as on a release before 6.14 (P-17)."""
    config = "CONFIG_DMABUF_MOVE_NOTIFY=y\nCONFIG_PCI_P2PDMA=y\n# CONFIG_CGROUP_DMEM is not set\n"
    platform, snap = _inspect(tmp_path, config=config)
    spec = load_platform(platform)
    assert isinstance(spec, PlatformSpec) and spec.kernel_config is not None
    assert spec.kernel_config.switches()["dmem"] is False
    (pair,) = diagnose(load_snapshot(snap)).pairs
    assert pair.switches["dmem"] is False
    capsys.readouterr()
    args = ["run", "desktop-pin-hog", "--platform", str(platform), "--map", "gpu0=card1"]
    assert main([*args, "--variant", "dmem.max", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "expected a kernel with the cgroup v2 dmem controller" in err, err
    assert "built without it (CONFIG_CGROUP_DMEM=n" in err, err
    assert not (tmp_path / "r").exists()
