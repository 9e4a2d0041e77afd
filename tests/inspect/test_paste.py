# ruff: noqa: E501  (the pasted outputs are as wide as lspci prints them)
"""Parsers of pasted command output (``pinlab.inspect.paste``, ``pinlab.inspect.topo``) on
real-looking text (``field-cases.md`` Part B), and their one-line errors."""

from __future__ import annotations

import pytest

from pinlab.errors import ConfigError
from pinlab.inspect.kernelinfo import parse_modules
from pinlab.inspect.paste import (
    parse_lspci_tree,
    parse_lspci_verbose,
    parse_ulimit,
    parse_uname,
    snapshot_from_pastes,
)
from pinlab.inspect.topo import parse_topo_matrix, topo_functions
from pinlab.platform import build
from pinlab.units import KiB

TREE = """\
-+-[0000:c0]-+-00.0  Advanced Micro Devices, Inc. [AMD] Starship/Matisse Root Complex
 |           \\-01.1-[c1]----00.0  NVIDIA Corporation GA100 [A100 PCIe 40GB]
 \\-[0000:00]-+-00.0  Advanced Micro Devices, Inc. [AMD] Starship/Matisse Root Complex
             +-01.1-[01-04]----00.0-[02-04]--+-00.0-[03]----00.0  NVIDIA Corporation GA100 [A100 PCIe 40GB]
             |                               \\-04.0-[04]--+-00.0  Mellanox Technologies MT28908 Family [ConnectX-6]
             |                                            \\-00.1  Mellanox Technologies MT28908 Family [ConnectX-6]
             \\-14.0  Advanced Micro Devices, Inc. [AMD] FCH SMBus Controller
"""

VERBOSE = """\
0000:02:04.0 PCI bridge [0604]: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch [10b5:8747] (rev ca)
	Physical Slot: 5
	Bus: primary=02, secondary=04, subordinate=04, sec-latency=0
	Capabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00
		LnkCap:	Port #4, Speed 8GT/s, Width x16, ASPM L1, Exit Latency L1 <4us
		LnkSta:	Speed 8GT/s, Width x8 (downgraded)
	Capabilities: [200 v1] Access Control Services
		ACSCap:	SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+
		ACSCtl:	SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
	Kernel driver in use: pcieport

0000:04:00.0 Ethernet controller [0200]: Mellanox Technologies MT28908 Family [ConnectX-6] [15b3:101b]
	NUMA node: 0
	IOMMU group: 31
	Region 0: Memory at 38000000000 (64-bit, prefetchable) [size=32M]
	Capabilities: [60] Express (v2) Endpoint, MSI 00
		LnkCap:	Port #0, Speed 16GT/s, Width x16, ASPM not supported
		LnkSta:	Speed 16GT/s (ok), Width x16 (ok)
	Kernel driver in use: mlx5_core
	Kernel modules: mlx5_core
"""

TOPO = """\
\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tSYS\tPXB\tSYS\t0-15,32-47\t0\t\tN/A
GPU1\tSYS\t X \tSYS\tPIX\t16-31,48-63\t1\t\tN/A
NIC0\tPXB\tSYS\t X \tSYS
NIC1\tSYS\tPIX\tSYS\t X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
"""


def test_lspci_tree_gives_every_function_its_parent() -> None:
    entries = {e.address: e for e in parse_lspci_tree(TREE)}
    assert entries["0000:c1:00.0"].parent == "0000:c0:01.1"
    assert entries["0000:c1:00.0"].root_bus == "0000:c0"
    assert entries["0000:03:00.0"].parent == "0000:02:00.0"
    assert entries["0000:02:04.0"].parent == "0000:01:00.0"
    assert entries["0000:04:00.1"].parent == "0000:02:04.0"
    assert entries["0000:00:14.0"].parent is None and not entries["0000:00:14.0"].bridge
    assert entries["0000:01:00.0"].bridge


def test_tree_snapshot_plans_a_switch_with_gpu_and_nic() -> None:
    spec = snapshot_from_pastes({"lspci-tv": TREE}).plan().spec
    assert [(d.name, d.driver) for d in spec.devices] == [
        ("gpu0", "nvidia-compute"),
        ("gpu1", "nvidia-compute"),
    ]
    machine = build(spec, "6.16")
    assert machine.p2p_path_class("gpu0", spec.nics[0].name) == "switch"


def test_lspci_verbose_reads_acs_port_type_iommu_group_and_bars() -> None:
    bridge, nic = (e.function for e in parse_lspci_verbose(VERBOSE))
    assert (bridge.vendor, bridge.device, bridge.class_code) == (0x10B5, 0x8747, 0x060400)
    assert bridge.port_type == "downstream" and bridge.acs_redirect is True
    assert bridge.acs_ctrl == 0b0011101  # SrcValid ReqRedir CmpltRedir UpstreamFwd
    assert (bridge.link_speed, bridge.link_width) == (8.0, 16)
    assert (nic.vendor, nic.device, nic.driver, nic.iommu_group) == (
        0x15B3,
        0x101B,
        "mlx5_core",
        31,
    )
    assert nic.bars == (32 << 20,) and nic.port_type == "endpoint"


def test_lspci_verbose_alone_gives_the_tree_from_secondary_buses() -> None:
    snap = snapshot_from_pastes({"lspci-vvv": VERBOSE})
    nic = next(p for p in snap.pci if p.address == "0000:04:00.0")
    assert nic.parent == "0000:02:04.0"


def test_topo_matrix_and_the_tree_drawn_from_it() -> None:
    topo = parse_topo_matrix(TOPO)
    assert topo.names == ("GPU0", "GPU1", "NIC0", "NIC1")
    assert topo.link("GPU0", "NIC0") == "PXB" and topo.nic_names["NIC1"] == "mlx5_1"
    _, notes, sockets = topo_functions(topo)
    assert sockets == 2 and notes
    spec = snapshot_from_pastes({"nvidia-smi-topo": TOPO}).plan().spec
    machine = build(spec, "6.16")
    assert machine.p2p_path_class("gpu0", "mlx5_0") == "switch"  # PXB
    assert machine.p2p_path_class("gpu1", "mlx5_1") == "switch"  # PIX
    assert machine.socket_of("gpu0") != machine.socket_of("mlx5_1")  # SYS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8192\n", 8192 * KiB),
        ("unlimited\n", None),
        ("64", 64 * KiB),
        ("max locked memory           (kbytes, -l) 8192\n", 8192 * KiB),
    ],
)
def test_ulimit(text: str, expected: int | None) -> None:
    assert parse_ulimit(text) == expected


@pytest.mark.parametrize(
    "release",
    ["6.8.0-52-generic", "5.10.0-31-cloud-amd64", "6.16.1-0_fbk1_npi_rc0", "4.18.0-513.el8.x86_64"],
)
def test_uname(release: str) -> None:
    assert parse_uname(release + "\n") == release


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("ulimit-l", "lots\n", "expected a number of KiB or 'unlimited'"),
        ("uname-r", "Linux\n", "expected a release like"),
        ("lspci-tv", "hello world\n", "expected a tree line"),
        ("lspci-vvv", "not a device\n", "expected a device line"),
        ("nvidia-smi-topo", TOPO.replace("PIX", "PXQ", 1), 'found "PXQ"'),
        ("lsmod", "Module Size Used by\nnvidia lots 0\n", "line 2: expected '<module> <size> ...'"),
        ("config", "hello\n", "expected a kernel config of CONFIG_ lines, found no CONFIG_ line"),
        ("bogus", "", "expected one of lspci-tv"),
    ],
)
def test_bad_pastes_are_one_line_errors(kind: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes({kind: text})
    assert message in str(e.value) and "\n" not in str(e.value)


CPUINFO = (
    "processor : 0\nvendor_id : GenuineIntel\ncpu family : {}\nmodel name : X\nphysical id : 0\n"
)


@pytest.mark.parametrize("family", ["abc", "-25", "300", "99999999999999999999", "0x19", ""])
def test_a_bad_cpu_family_is_one_line_naming_the_file(family: str) -> None:
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes({"cpuinfo": CPUINFO.format(family)}, files={"cpuinfo": "c.txt"})
    assert str(e.value) == (
        "c.txt: cpuinfo: line 3: cpu family: expected a decimal CPU family number 0 to 255 "
        f'(like 6 or 25), found "{family}"'
    )


@pytest.mark.parametrize("family", ["0", "6", "25", "255"])
def test_a_cpu_family_of_0_to_255_is_read(family: str) -> None:
    cpu = snapshot_from_pastes({"cpuinfo": CPUINFO.format(family)}).cpu
    assert cpu is not None and cpu.family == int(family)


@pytest.mark.parametrize(
    ("kind", "source"),
    [
        ("lspci-tv", "lspci -tv"),
        ("lspci-vvv", "lspci -vvv"),
        ("nvidia-smi-topo", "nvidia-smi topo -m"),
        ("ulimit-l", "ulimit -l"),
        ("uname-r", "uname -r"),
        ("lsmod", "lsmod"),
        ("config", "config"),
    ],
)
def test_a_bad_paste_names_its_file_and_shows_what_was_found_short(kind: str, source: str) -> None:
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes({kind: "hi\n"}, files={kind: "afile"})
    assert str(e.value).startswith(f"afile: {source}: line 1: expected "), str(e.value)
    long = "\x01\ufffd" * 500
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes({kind: long}, files={kind: "afile"})
    text = str(e.value)
    assert len(text) < 350 and "\x01" not in text and "\n" not in text, text


# -- what surrounds a paste in a bug report (paste.undecorated) -----------------------------------

LSMOD = "Module                  Size  Used by\nmlx5_ib               466944  0\nib_uverbs             184320  2 mlx5_ib\n"


def _snapshot(kind: str, text: str) -> dict[str, object]:
    """The snapshot of one paste, without the line that names where it came from."""
    data = snapshot_from_pastes({kind: text}).model_dump()
    data.pop("source")
    return data


@pytest.mark.parametrize(
    ("kind", "output", "prompt"),
    [
        ("lspci-tv", TREE, "$ sudo lspci -tv"),
        ("lspci-vvv", VERBOSE, "[user@node1 ~]$ lspci -vvv -nn -D"),
        ("nvidia-smi-topo", TOPO, "(base) user@dgx:~$ nvidia-smi topo -m"),
        ("lsmod", LSMOD, "# lsmod"),
    ],
)
@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("```\n{prompt}\n", "```\n"),
        ("```bash\n{prompt}\n", "```\n"),
        ("``` {prompt}\n", "```\n"),
        ("### {prompt}\n\n```text\n", "```\n\n[user@node1 ~]$\n"),
        ("The output:\n=========\n{prompt}\n", ""),
        ("_Note: ran as root._\n\n{prompt}\n", "[user@node1 ~]$\n"),
    ],
    ids=["fence", "fence-lang", "fence-prompt", "heading", "label-rule", "note"],
)
def test_fences_prompts_and_titles_around_the_output_are_dropped(
    kind: str, output: str, prompt: str, before: str, after: str
) -> None:
    """A paste as bug reports hold it reads as the bare output: the same snapshot."""
    decorated = before.format(prompt=prompt) + output + after
    assert _snapshot(kind, decorated) == _snapshot(kind, output)


def test_an_ellipsis_where_the_reporter_cut_lines_is_dropped() -> None:
    cut = VERBOSE.replace("\tPhysical Slot: 5\n", "\t...\n").replace("\tNUMA node: 0\n", "...\n")
    bare = VERBOSE.replace("\tPhysical Slot: 5\n", "").replace("\tNUMA node: 0\n", "")
    assert _snapshot("lspci-vvv", cut) == _snapshot("lspci-vvv", bare)


def test_a_quote_or_an_indent_on_every_line_is_taken_off() -> None:
    quoted = "".join(f"> {line}\n" if line else ">\n" for line in VERBOSE.splitlines())
    indented = "".join(f"    {line}\n" for line in TOPO.splitlines())
    assert _snapshot("lspci-vvv", quoted) == _snapshot("lspci-vvv", VERBOSE)
    assert _snapshot("nvidia-smi-topo", indented) == _snapshot("nvidia-smi-topo", TOPO)


def test_an_error_names_the_line_of_the_file_as_pasted() -> None:
    """Dropped lines do not shift the line an error names."""
    text = "```\n$ lsmod\n" + LSMOD + "nvidia lots 0\n```\n"
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes({"lsmod": text}, files={"lsmod": "m.txt"})
    assert str(e.value) == (
        "m.txt: lsmod: line 6: expected '<module> <size> ...', found \"nvidia lots 0\""
    )
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes({"lspci-tv": "```\n$ lspci -tv\n...\nhello world\n```\n"})
    assert str(e.value).startswith("lspci -tv: line 4: expected a tree line like")


@pytest.mark.parametrize(
    ("kind", "prompt", "absent"),
    [
        (
            "lsmod",
            "(base) [u@h ~]$ lsmod | grep nvidia",
            "a module it leaves out would read as not loaded",
        ),
        (
            "lspci-vvv",
            "# lspci -vvv | grep -A20 Mellanox",
            "a device it leaves out would read as absent",
        ),
        ("lspci-tv", "$ sudo lspci -tv | head -40", "a device it leaves out would read as absent"),
    ],
)
def test_a_prompt_showing_the_output_filtered_is_refused(
    kind: str, prompt: str, absent: str
) -> None:
    """``lsmod | grep nvidia`` is not the module list: mlx5_ib missing from it would read as
    not loaded, and the doctor would say so."""
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes({kind: f"{prompt}\n{LSMOD}"}, files={kind: "p.txt"})
    assert str(e.value) == (
        f"p.txt: {kind.replace('-tv', ' -tv').replace('-vvv', ' -vvv')}: line 1: expected the "
        f"whole output of {kind.replace('-tv', ' -tv').replace('-vvv', ' -vvv')}, found it "
        f'filtered ("{prompt}"): {absent}'
    )


def test_a_config_whose_first_line_is_an_unset_option_keeps_it() -> None:
    """``# CONFIG_X is not set`` is an option, not a Markdown heading above the output."""
    snap = snapshot_from_pastes(
        {"config": "# CONFIG_PCI_P2PDMA is not set\nCONFIG_DMA_SHARED_BUFFER=y\n"}
    )
    assert snap.kernel.config == {"CONFIG_PCI_P2PDMA": "n", "CONFIG_DMA_SHARED_BUFFER": "y"}


LSCPU = """\
Architecture:            x86_64
  CPU op-mode(s):        32-bit, 64-bit
CPU(s):                  192
Vendor ID:               AuthenticAMD
  Model name:            AMD EPYC 9654 96-Core Processor
    CPU family:          25
    Socket(s):           2
"""


def test_lscpu_pasted_as_cpuinfo_is_read_as_lscpu() -> None:
    """lscpu names the vendor, family and sockets too; read as /proc/cpuinfo it gave vendor
    "" and family 0: a Zen host taken as one without P2P through its host bridges."""
    cpu = snapshot_from_pastes({"cpuinfo": "$ lscpu\n" + LSCPU}).cpu
    assert cpu is not None
    assert (cpu.vendor_id, cpu.family, cpu.model, cpu.sockets) == (
        "AuthenticAMD",
        25,
        "AMD EPYC 9654 96-Core Processor",
        2,
    )


def test_a_cpu_paste_that_names_no_vendor_is_refused() -> None:
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes(
            {"cpuinfo": "model name : AMD EPYC 7763\nflags : fpu vme\n"}, files={"cpuinfo": "c.txt"}
        )
    assert str(e.value) == (
        "c.txt: cpuinfo: expected /proc/cpuinfo or lscpu output naming the CPU's vendor (a "
        "vendor_id, Vendor ID or CPU implementer line), found none"
    )


def test_an_arm_cpuinfo_paste_names_its_vendor_by_implementer() -> None:
    """ARM's /proc/cpuinfo has no vendor_id; its CPU implementer says what it is: accepted,
    as no x86 vendor (``cpu_supports_p2pdma`` is x86-only)."""
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
    cpu = snapshot_from_pastes({"cpuinfo": arm}).cpu
    assert cpu is not None and (cpu.vendor_id, cpu.family) == ("", 0)


KALLSYMS_GREP = (
    "$ grep ib_umem /proc/kallsyms\n"
    "0000000000000000 T ib_umem_dmabuf_get_pinned\t[ib_uverbs]\n"
    "0000000000000000 T ib_umem_get\t[ib_uverbs]\n"
)
KALLSYMS_WHOLE = (
    "ffffffff81000000 T _stext\n"
    "ffffffff81000000 T _text\n"
    "ffffffff83a1c000 T start_kernel\n"
    "ffffffff81b2c0d0 T ib_umem_dmabuf_get_pinned\t[ib_uverbs]\n"
)


def test_a_kallsyms_excerpt_knows_only_the_symbols_it_shows() -> None:
    """``grep ib_umem /proc/kallsyms`` does not show ``pci_p2pdma_distance_many``: that makes
    P2PDMA unknown (the profile's default), not off, as it made the doctor assume before."""
    from pinlab.inspect.doctor_run import closest_profile

    excerpt = snapshot_from_pastes({"kallsyms": KALLSYMS_GREP, "uname-r": "6.16.0\n"})
    assert excerpt.kernel.symbols_excerpt is True
    assert excerpt.kernel.has_symbol("ib_umem_dmabuf_get_pinned") is True
    assert excerpt.kernel.has_symbol("pci_p2pdma_distance_many") is None
    assert any("kallsyms is an excerpt" in note for note in excerpt.notes)
    profile, _, _ = closest_profile(excerpt)
    assert profile.pci_p2pdma is True  # 6.16's default, not the excerpt's silence

    whole = snapshot_from_pastes({"kallsyms": KALLSYMS_WHOLE, "uname-r": "6.16.0\n"})
    assert whole.kernel.symbols_excerpt is False
    assert whole.kernel.has_symbol("pci_p2pdma_distance_many") is False
    assert closest_profile(whole)[0].pci_p2pdma is False


def test_ulimit_a_is_read_at_its_locked_memory_line() -> None:
    """The other limits of ``ulimit -a`` print ``unlimited`` too: a memlock of 8 MiB is not
    unlimited because the data segment is."""
    bash = (
        "$ ulimit -a\ncore file size          (blocks, -c) 0\n"
        "data seg size           (kbytes, -d) unlimited\n"
        "max locked memory       (kbytes, -l) 8192\nopen files                      (-n) 1024\n"
    )
    zsh = "-t: cpu time (seconds)              unlimited\n-l: locked-in-memory size (kbytes)  64\n"
    assert parse_ulimit(bash) == 8192 * KiB
    assert parse_ulimit(zsh) == 64 * KiB
    with pytest.raises(ConfigError, match="expected a number of KiB or 'unlimited'"):
        parse_ulimit("data seg size           (kbytes, -d) unlimited\n")


@pytest.mark.parametrize(
    ("kind", "prompt"),
    [
        ("lspci-vvv", "$ sudo lspci -vvv -s 04:00.0"),
        ("lspci-vvv", "# lspci -nn -D -d 15b3: -vvv"),
        ("lspci-vvv", "$ lspci -vvvs 04:00.0"),
        ("lspci-tv", "$ lspci -tv -s 0000:c0:"),
    ],
)
def test_a_prompt_selecting_some_devices_is_refused(kind: str, prompt: str) -> None:
    """``lspci -s``/``-d`` prints the devices they select: the others would read as absent,
    as with ``| grep``."""
    output = TREE if kind == "lspci-tv" else VERBOSE
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes({kind: f"```\n{prompt}\n{output}```\n"}, files={kind: "p.txt"})
    shown = kind.replace("-tv", " -tv").replace("-vvv", " -vvv")
    assert str(e.value) == (
        f"p.txt: {shown}: line 2: expected the whole output of {shown}, found it filtered "
        f'("{prompt}"): a device it leaves out would read as absent'
    )


def test_lsmod_without_its_header_is_refused_as_filtered() -> None:
    """lsmod always prints ``Module  Size  Used by``; without it the paste is ``lsmod | grep``
    with its prompt line left out (or cut), and mlx5_ib missing from it would read as not
    loaded. /proc/modules has no header and is read whole."""
    with pytest.raises(ConfigError) as e:
        snapshot_from_pastes(
            {"lsmod": "```\nnvidia_peermem   16384  0\nnvidia  56598528  1 nvidia_peermem\n```\n"},
            files={"lsmod": "m.txt"},
        )
    assert str(e.value) == (
        "m.txt: lsmod: line 2: expected lsmod from its header 'Module Size Used by', found "
        '"nvidia_peermem   16384  0": a module it leaves out would read as not loaded'
    )
    with pytest.raises(ConfigError, match="lsmod: line 1: expected lsmod from its header"):
        snapshot_from_pastes({"lsmod": "\n"})
    proc = "mlx5_ib 466944 0 - Live 0xffffffffc0e00000\nib_uverbs 184320 1 mlx5_ib, Live 0x0\n"
    snap = snapshot_from_pastes({"lsmod": proc})
    assert snap.kernel.modules == ["ib_uverbs", "mlx5_ib"]


def test_the_live_module_list_needs_no_header() -> None:
    """The host's own /proc/modules is read as before: the header rule is the paste's."""
    assert parse_modules("nvidia_peermem 16384 0 - Live 0x0\n") == ("nvidia_peermem",)
