"""Platform files: TOML round trips and one-line errors naming file and field
(``design.md`` "Scenario files")."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w

from pinlab.errors import ConfigError
from pinlab.platform import (
    PRESETS,
    ClusterSpec,
    PlatformSpec,
    build,
    dl1,
    dump_platform,
    load_platform,
    resolve_platform,
)
from pinlab.units import GiB


@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_toml_round_trip(name: str, tmp_path: Path) -> None:
    spec = PRESETS[name]()
    path = tmp_path / f"{name}.toml"
    path.write_text(dump_platform(spec), encoding="utf-8")
    back = load_platform(path)
    assert back == spec
    assert type(back) is type(spec)
    # and again through tomli-w on the plain dump
    assert (
        load_platform_text(tomli_w.dumps(spec.model_dump(mode="json", exclude_none=True))) == spec
    )


def load_platform_text(text: str) -> PlatformSpec | ClusterSpec:
    from pinlab.platform import platform_from_dict

    return platform_from_dict(tomllib.loads(text), "inline")


def test_dump_uses_unit_strings() -> None:
    text = dump_platform(dl1())
    assert 'memory = "32GiB"' in text
    assert 'line_rate = "100Gbps"' in text
    assert 'bandwidth = "140.8GB/s"' in text
    assert 'device = "0x2030"' in text


def test_preset_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('preset = "dl1"\n[params]\nefa_behind_switch = true\nhbm = "16GiB"\n')
    spec = load_platform(path)
    assert isinstance(spec, PlatformSpec)
    assert spec == dl1(efa_behind_switch=True, hbm=16 * GiB)
    assert resolve_platform("cluster", nodes=2).accelerators == 16  # type: ignore[union-attr]
    assert resolve_platform(path) == spec


def test_hand_written_file_with_toml_hex_ids(tmp_path: Path) -> None:
    path = tmp_path / "box.toml"
    path.write_text(
        """
name = "box"
[cpu]
vendor = "amd"
family = 0x19
[dram]
size = "64GiB"
bandwidth = "89.6GB/s"
[[host_bridges]]
name = "rc0"
vendor = 0x1022
device = 0x14d8
[[switches]]
name = "sw0"
parent = "rc0"
[[devices]]
name = "gpu0"
driver = "amdgpu"
parent = "sw0"
memory = "24GiB"
[[nics]]
name = "nic0"
driver = "mlx5"
parent = "sw0"
line_rate = "200Gbps"
odp = true
[[displays]]
name = "hdmi0"
device = "gpu0"
""",
        encoding="utf-8",
    )
    spec = load_platform(path)
    assert isinstance(spec, PlatformSpec)
    assert spec.cpu.family == 0x19 and spec.host_bridges[0].device == 0x14D8
    m = build(spec)
    assert m.p2p_path_class("gpu0", "nic0") == "switch"
    # 200 Gbps IB at the model's MTU 4096: headers 26 B per packet, link-level rdma.ib_link_eff
    wire = 25e9 * m.cost.rdma.ib_link_eff * 4096 / (4096 + 26)
    assert m.links["net:nic0"].capacity["tx"] == pytest.approx(wire)


BASE = """name = "x"
[dram]
size = "16GiB"
bandwidth = "100GB/s"
[[host_bridges]]
name = "rc0"
"""

NODE = BASE.replace("[dram]", "[node.dram]").replace("[[host_bridges]]", "[[node.host_bridges]]")


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        (
            BASE.replace('"16GiB"', '"lots"'),
            "dram.size",
            'expected a size like "32GiB", "512KiB", "1.5GB" or a whole number of bytes, '
            'found "lots"',
        ),
        (BASE.replace('"100GB/s"', "100"), "dram.bandwidth", "write the unit explicitly"),
        (
            BASE + '[[devices]]\nname = "g"\ndriver = "nouveau"\nparent = "rc0"\nmemory = "8GiB"\n',
            "devices[0].driver",
            "expected an exporter driver (amdgpu, apu, habanalabs, i915, nvidia-compute, "
            "vfio-pci, xe), "
            "found 'nouveau'",
        ),
        (
            BASE + '[[devices]]\nname = "g"\ndriver = "amdgpu"\nparent = "sw9"\nmemory = "8GiB"\n',
            "devices[0].parent",
            "expected the name of a host bridge or switch, found 'sw9'",
        ),
        (
            BASE + '[[devices]]\nname = "g"\ndriver = "amdgpu"\nparent = "rc0"\nmemory = "1"\n'
            'colour = "red"\n',
            "devices[0].colour",
            "unknown field (expected one of name, driver, parent, memory,",
        ),
        (
            BASE + '[[nics]]\nname = "e"\ndriver = "efa"\nparent = "rc0"\nodp = true\n',
            "nics[0].odp",
            "expected false for driver 'efa' (it has no ODP support), found true",
        ),
        (
            BASE + '[[nics]]\nname = "e"\ndriver = "cx7"\nparent = "rc0"\n',
            "nics[0].driver",
            "expected an RDMA driver (efa, mlx5), found 'cx7'",
        ),
        (
            BASE + '[[nics]]\nname = "e"\ndriver = "display"\nparent = "rc0"\n',
            "nics[0].driver",
            "expected an RDMA driver (efa, mlx5), found 'display'",
        ),
        (
            BASE + '[[displays]]\nname = "d"\ndevice = "gpu7"\n',
            "displays[0].device",
            "expected the name of a device, found 'gpu7'",
        ),
        (
            BASE + '[[switches]]\nname = "rc0"\nparent = "rc0"\n',
            "switches[0].name",
            "expected a unique name (also host_bridges[0]), found 'rc0'",
        ),
        (
            BASE.replace('name = "rc0"', 'name = "rc0"\nsocket = 2'),
            "host_bridges[0].socket",
            "expected a socket below cpu.sockets = 1, found 2",
        ),
        (
            BASE + '[cost_overrides]\n"odp.fault" = "2"\n',
            'cost_overrides."odp.fault"',
            'found "2" (a unit is required)',
        ),
        (
            BASE + '[cost_overrides]\n"odp.faults" = "2ms"\n',
            'cost_overrides."odp.faults"',
            "expected a cost-model parameter (did you mean 'odp.fault'?)",
        ),
        (BASE.replace('name = "x"', ""), "name", "expected a value, found nothing"),
        ('kind = "rack"\n' + BASE, "kind", "expected 'node' or 'cluster', found 'rack'"),
        ('preset = "dl2"\n', "preset", "expected one of dl1, p4d, workstation"),
        (
            'preset = "dl1"\n[params]\nefa_behind_swtch = true\n',
            "params.efa_behind_swtch",
            "expected a parameter of preset 'dl1'",
        ),
        ('preset = "dl1"\n[params]\nhbm = "big"\n', "params.hbm", 'found "big"'),
        # a value of the right type that the machine's build refuses names the parameter
        (
            'preset = "workstation"\n[params]\nvram = 8\n',
            "params.vram",
            "expected a value preset 'workstation' builds with, found 8 (devices[0] (gpu0): "
            "size 8 is not a multiple of the granule 4096)",
        ),
        (
            'kind = "cluster"\nname = "c"\nnodes = 0\n[node]\n' + NODE,
            "nodes",
            "expected a number >= 1, found 0",
        ),
        (
            'kind = "cluster"\nname = "c"\nnodes = 2\n[node]\n' + NODE.replace("16GiB", '16 GiB"'),
            "line 7, column 16",
            "expected valid TOML, found Expected newline",
        ),
        (
            'kind = "cluster"\nname = "c"\nnodes = 2\n[node]\n'
            + NODE.replace('name = "rc0"', 'name = "rc0"\nsocket = 1'),
            "node.host_bridges[0].socket",
            "expected a socket below cpu.sockets = 1, found 1",
        ),
    ],
)
def test_bad_files_give_one_line_errors(
    text: str, where: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_platform(path)
    line = str(exc.value)
    assert "\n" not in line
    assert "Traceback" not in line
    assert line.startswith(f"{path}: {where + ': ' if where else ''}"), line
    assert message in line, line


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"nope\.toml: expected a platform file, found no such file"
    ):
        load_platform(tmp_path / "nope.toml")
