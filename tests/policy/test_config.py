"""Administrator policy files: validation (one-line errors), the examples, applying a policy to
a live machine, rendering, and ``pinlab policy show``."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from pinlab.cli import main
from pinlab.errors import ConfigError
from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import CAP_IPC_LOCK, CAP_SYS_RESOURCE, DEFAULT_MEMLOCK, RLIM_INFINITY
from pinlab.policy.cgroup import CgroupTree
from pinlab.policy.config import (
    PolicyConfig,
    PolicyError,
    apply_policy,
    load_policy,
    parse_policy,
    preview_policy,
)
from pinlab.policy.dmem import DmemCgroupController
from pinlab.policy.render import render_policy
from pinlab.units import compact_size, parse_limit, parse_size
from tests.policy.machine import ACCESS, GiB, MiB, make_workstation

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policy"
REGION = "drm/0000:03:00.0/vram"

VALID = f"""
description = "test"

[regions]
"{REGION}" = "16GiB"

[cgroups."user.slice"]
"dmem.max" = "{REGION} 8GiB"

[cgroups."user.slice/user-1000.slice"]
"dmem.min" = ["{REGION} 512M"]
"dmem.low" = "{REGION} 1073741824"
"dmem.pin.max" = "{REGION} max"

[users.alice]
uid = 1000
memlock = "64MiB"
cgroup = "user.slice/user-1000.slice"

[users.root]
uid = 0
memlock = {{ soft = "8MiB", hard = "unlimited" }}
capabilities = ["CAP_IPC_LOCK", "CAP_SYS_RESOURCE"]

[proposals.memlock-dmabuf-pins]
[proposals.device-pin-cap]
max_per_device = "4GiB"
per_device = {{ gpu0 = "2GiB", gpu1 = "unlimited" }}
[proposals.dmem-pin-max]
[proposals.revocable-pins]
enabled = false
"""


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_policy(text, "desktop.toml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("desktop.toml: "), message
    return message


# -- valid files -----------------------------------------------------------------------------------


def test_a_valid_file_parses_into_typed_settings() -> None:
    config = parse_policy(VALID, "valid.toml")
    assert config.regions == {REGION: 16 * GiB}
    assert config.cgroup_paths() == ["/user.slice", "/user.slice/user-1000.slice"]
    alice, root = config.users["alice"], config.users["root"]
    assert alice.memlock.as_rlimit() == (64 * MiB, 64 * MiB) and alice.caps == frozenset()
    assert root.memlock.as_rlimit() == (8 * MiB, RLIM_INFINITY)
    assert root.caps == {CAP_IPC_LOCK, CAP_SYS_RESOURCE} and root.cgroup == "/"
    leaf = config.cgroups["user.slice/user-1000.slice"]
    assert [(line.region, line.value) for line in leaf.dmem_min] == [(REGION, 512 * MiB)]
    assert leaf.dmem_low[0].value == GiB and leaf.dmem_pin_max[0].value is None
    assert leaf.dmem_pin_max[0].render() == f"{REGION} max"
    assert list(config.proposals.enabled()) == [
        "memlock-dmabuf-pins",
        "device-pin-cap",
        "dmem-pin-max",
    ]
    cap = config.proposals.device_pin_cap
    assert cap is not None and cap.max_per_device == 4 * GiB
    assert cap.per_device == {"gpu0": 2 * GiB, "gpu1": None}


def test_every_registered_proposal_has_a_table_and_every_table_a_proposal() -> None:
    """The registry (``PROPOSALS``) is the one list of proposals: each has its
    ``[proposals.<id>]`` table in the schema, in registry order, and a ``from_policy``."""
    from pinlab.policy.config import ProposalsSpec
    from pinlab.policy.proposals import PROPOSALS

    tables = [info.alias for info in ProposalsSpec.model_fields.values()]
    assert tables == list(PROPOSALS)
    assert all(callable(module.from_policy) for module in PROPOSALS.values())
    on = parse_policy("".join(f"[proposals.{name}]\n" for name in reversed(PROPOSALS)))
    assert list(on.proposals.enabled()) == list(PROPOSALS)


def test_defaults_and_an_empty_file() -> None:
    config = parse_policy("", "empty.toml")
    assert config == PolicyConfig()
    assert not config.proposals.enabled()
    user = parse_policy("[users.u]\nuid = 5\n").users["u"]
    assert user.memlock.as_rlimit() == (DEFAULT_MEMLOCK, DEFAULT_MEMLOCK)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("64MiB", 64 * MiB),
        ("64M", 64 * MiB),
        ("1.5GiB", 3 * GiB // 2),
        ("2GB", 2 * 10**9),
        ("4096", 4096),
        (4096, 4096),
        ("10 KiB", 10240),
        ("7B", 7),
    ],
)
def test_sizes(text: object, size: int) -> None:
    """Policy sizes are pinlab.units sizes plus memparse's K/M/G (P-19)."""
    assert parse_size(text, memparse=True) == size
    assert parse_limit("unlimited", unlimited="unlimited") is None
    assert compact_size(64 * MiB) == "64MiB" and compact_size(3 * GiB // 2) == "1.5GiB"
    assert compact_size(None) == "unlimited" and compact_size(4097) == "4097B"


def test_the_examples_load_and_apply() -> None:
    desktop = load_policy(EXAMPLES / "desktop.toml")
    assert desktop.users["mallory"].memlock.as_rlimit() == (8 * MiB, 64 * MiB)
    assert "memlock-dmabuf-pins" in desktop.proposals.enabled()
    assert "revocable-pins" not in desktop.proposals.enabled()
    compositor = desktop.cgroups["user.slice/user-1000.slice/session-2.scope/compositor"]
    assert compositor.dmem_min[0].value == GiB
    cluster = load_policy(EXAMPLES / "cluster.toml")
    assert not cluster.proposals.enabled()
    assert all(u.memlock.as_rlimit()[0] == RLIM_INFINITY for u in cluster.users.values())
    assert not any(spec.files() for spec in cluster.cgroups.values())
    for config in (desktop, cluster):
        preview = preview_policy(config)
        assert set(config.cgroup_paths()) <= {c.path for c in preview.tree.walk()}


# -- every kind of validation error is one line ----------------------------------------------------

SIZE_MSG = 'expected a size like "64MiB" or "unlimited", found "lots"'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[users.alice]\nuid = 1000\nmemlock = "lots"\n',
            f"desktop.toml: users.alice.memlock: {SIZE_MSG}",
        ),
        (
            '[users.alice]\nuid = 1000\nmemlock = { soft = "lots", hard = "1MiB" }\n',
            f"desktop.toml: users.alice.memlock.soft: {SIZE_MSG}",
        ),
        (
            '[users.alice]\nuid = 1000\nmemlok = "1MiB"\n',
            "desktop.toml: users.alice.memlok: unknown field "
            "(expected one of uid, memlock, capabilities, cgroup)",
        ),
        (
            "[users.alice]\n",
            "desktop.toml: users.alice.uid: expected a value, found nothing (the field is "
            "required)",
        ),
        (
            '[users.alice]\nuid = "1000"\n',
            'desktop.toml: users.alice.uid: expected an integer, found "1000"',
        ),
        (
            "[users.alice]\nuid = -1\n",
            "desktop.toml: users.alice.uid: expected a number >= 0, found -1",
        ),
        (
            '[users.alice]\nuid = 1\ncapabilities = ["CAP_SYS_ADMIN"]\n',
            'desktop.toml: users.alice.capabilities[0]: expected one of "CAP_IPC_LOCK" or '
            '"CAP_SYS_RESOURCE", found "CAP_SYS_ADMIN"',
        ),
        (
            '[users.alice]\nuid = 1\ncapabilities = "CAP_IPC_LOCK"\n',
            'desktop.toml: users.alice.capabilities: expected an array, found "CAP_IPC_LOCK"',
        ),
        ("users = 5\n", "desktop.toml: users: expected a table, found 5"),
        (
            "colour = 1\n",
            "desktop.toml: colour: unknown field (expected one of description, regions, "
            "cgroups, users, proposals)",
        ),
        (
            "[proposals.charge-everything]\n",
            "desktop.toml: proposals.charge-everything: unknown field (expected one of "
            "memlock-dmabuf-pins, device-pin-cap, revocable-pins, dmem-pin-max, "
            "pin-vram-percent, dmem-pinning, dmem-peak)",
        ),
        (
            '[proposals.revocable-pins]\nenabled = "yes"\n',
            'desktop.toml: proposals.revocable-pins.enabled: expected true or false, found "yes"',
        ),
        (
            '[proposals.device-pin-cap]\nper_device = { gpu0 = "lots" }\n',
            f"desktop.toml: proposals.device-pin-cap.per_device.gpu0: {SIZE_MSG}",
        ),
        (
            '[regions]\n"drm/x/vram" = "big"\n',
            'desktop.toml: regions."drm/x/vram": expected a size like "32GiB", "512KiB", '
            '"1.5GB" or a whole number of bytes, found "big"',
        ),
        (
            '[regions]\nr = "1GiB"\n[cgroups."a/b"]\n"dmem.max" = ["r 1GiB", "r"]\n',
            'desktop.toml: cgroups."a/b"."dmem.max"[1]: expected a line "<region> <bytes|max>" '
            'like "drm/0000:03:00.0/vram 2GiB", found "r"',
        ),
        (
            '[regions]\nr = "1GiB"\n[cgroups.a]\n"dmem.min" = "r lots"\n',
            'desktop.toml: cgroups.a."dmem.min"[0]: expected a value in bytes, K/M/G, '
            'KiB/MiB/GiB or "max" after r, found "lots"',
        ),
        (
            '[cgroups.a]\n"dmem.mx" = "r 1"\n',
            'desktop.toml: cgroups.a."dmem.mx": unknown field (expected one of dmem.min, '
            "dmem.low, dmem.max, dmem.pin.max, description)",
        ),
        (
            '[regions]\nr = "1GiB"\n[cgroups.a]\n"dmem.max" = "q 1G"\n',
            'desktop.toml: cgroups.a."dmem.max"[0]: expected a region declared in [regions] '
            '(r), found "q"',
        ),
        (
            '[regions]\nr = "1GiB"\n[cgroups.a]\n"dmem.pin.max" = "r 1G"\n',
            'desktop.toml: cgroups.a."dmem.pin.max"[0]: expected [proposals.dmem-pin-max] to '
            "be on (dmem.pin.max is its file), found it off",
        ),
        (
            '[cgroups."/"]\n',
            'desktop.toml: cgroups."/": expected a cgroup below the root (the root has no '
            'dmem.min/low/max), found "/"',
        ),
        (
            '[cgroups."a/../b"]\n',
            'desktop.toml: cgroups."a/../b": expected a path of cgroup names (no newline, not '
            '. or .., not the name of an interface file), found ".."',
        ),
        (
            '[cgroups.a]\n[cgroups."/a/"]\n',
            'desktop.toml: cgroups."/a/": expected each cgroup once, found it again '
            "(also cgroups.a)",
        ),
        (
            '[users.alice]\nuid = 1\ncgroup = "user.slice"\n',
            "desktop.toml: users.alice.cgroup: expected a cgroup of [cgroups] or one of its "
            'parents, found "user.slice"',
        ),
        (
            "[users.a]\nuid = 7\n[users.b]\nuid = 7\n",
            "desktop.toml: users.b.uid: expected a uid of its own, found 7 (also users.a.uid)",
        ),
        (
            '[users.a]\nuid = 7\nmemlock = { soft = "2MiB", hard = "1MiB" }\n',
            "desktop.toml: users.a.memlock: expected soft <= hard, found soft 2MiB > hard 1MiB",
        ),
        (
            "[regions]\nr = 0\n",
            "desktop.toml: regions.r: expected a capacity above 0 (a region of size 0 is no "
            "region), found 0",
        ),
        (
            "description = 1\n[users.alice]\nuid = 1\n",
            "desktop.toml: description: expected a string, found 1",
        ),
    ],
)
def test_validation_errors_are_one_line(text: str, expected: str) -> None:
    assert error_of(text) == expected


def test_toml_syntax_errors_name_the_line() -> None:
    assert error_of('[users.alice]\nuid = 1000\nmemlock = "64MiB\n') == (
        "desktop.toml: line 3, column 17: expected valid TOML, found Illegal character '\\n'"
    )
    assert error_of("[users]\n[users]\n") == (
        "desktop.toml: line 2, column 7: expected valid TOML, found Cannot declare ('users',) twice"
    )


def test_policy_rules_raise_policy_errors_a_kind_of_config_error() -> None:
    """One error type reaches the CLI: a policy's own rule is a PolicyError, a ConfigError."""
    with pytest.raises(PolicyError) as info:
        parse_policy("[users.a]\nuid = -1\n", "p.toml")
    assert isinstance(info.value, ConfigError)
    assert (info.value.source, info.value.where) == ("p.toml", "users.a.uid")


def test_several_errors_report_the_first_and_count_the_rest() -> None:
    message = error_of("[users.a]\nuid = -1\n[users.b]\nuid = -2\n")
    assert message.endswith("(and 1 more)")


def test_file_errors(tmp_path: Path) -> None:
    """Policies are read by pinlab.tomlfile.read_toml, like every other file."""
    expected = "expected a TOML policy file"
    with pytest.raises(ConfigError) as info:
        load_policy(tmp_path / "nope.toml")
    assert str(info.value) == f"{tmp_path / 'nope.toml'}: {expected}, found no such file"
    with pytest.raises(ConfigError) as info:
        load_policy(tmp_path)
    assert str(info.value) == f"{tmp_path}: {expected}, found a directory"
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError) as info:
        load_policy(binary)
    assert str(info.value) == f"{binary}: {expected} in UTF-8, found UTF-16 text"
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"[users.a]\nuid = \xff\n")
    with pytest.raises(ConfigError) as info:
        load_policy(bad)
    assert str(info.value) == f"{bad}: {expected} in UTF-8, found byte 0xff at offset 16"


# -- applying to a live machine --------------------------------------------------------------------


def _desktop_machine(profile: str = "6.16"):
    ws = make_workstation(profile, move_notify=True, vram=16 * GiB)
    tree = CgroupTree()
    dmem = DmemCgroupController(tree).install(ws.kernel)
    dmem.register_device(ws.gpu.bdev)
    return ws, tree, dmem


def test_apply_the_desktop_policy_to_a_workstation() -> None:
    """The cgroups exist with their limits, the proposals are live, users spawn with their
    uid, limits and cgroup -- and the limits bite: mallory's cgroup may allocate 4 GiB of
    VRAM, and dma-buf pins count against her 8 MiB RLIMIT_MEMLOCK."""
    ws, tree, dmem = _desktop_machine()
    config = load_policy(EXAMPLES / "desktop.toml")
    applied = apply_policy(config, ws.kernel, tree, dmem, ttm_devices=[ws.gpu.bdev])
    assert set(applied.proposals) == {"memlock-dmabuf-pins", "device-pin-cap", "dmem-pin-max"}
    assert len(ws.kernel.pin_hooks) == 3
    leaf = "/user.slice/user-1000.slice/session-2.scope/compositor"
    assert tree.read(leaf, "dmem.min") == f"{REGION} {GiB}\n"
    assert tree.read("/user.slice/user-1002.slice", "dmem.pin.max") == f"{REGION} {2 * GiB}\n"
    args = applied.spawn_args("mallory")
    assert args["uid"] == 1002 and args["memlock"] == (8 * MiB, 64 * MiB)
    mallory = applied.spawn(ws.system, "mallory", "pinhog")
    assert mallory.cgroup is tree.lookup("/user.slice/user-1002.slice")
    assert tree.read("/user.slice/user-1002.slice", "cgroup.procs") == f"{mallory.pid}\n"
    with pytest.raises(KernelError) as info:  # dmem.max 4 GiB: the allocation fails
        mallory.gem_create("gpu0", 5 * GiB, "vram")
    assert info.value.errno is Errno.ENOMEM
    fd = mallory.prime_handle_to_fd(mallory.gem_create("gpu0", 16 * MiB, "vram"))
    with pytest.raises(KernelError) as info:  # 16 MiB > RLIMIT_MEMLOCK 8 MiB
        mallory.ibv_reg_dmabuf_mr("efa0", fd, 0, 16 * MiB, ACCESS)
    assert info.value.errno is Errno.ENOMEM
    assert applied.proposals["memlock-dmabuf-pins"].denials == {"-ENOMEM": 1}
    mallory.setrlimit(8, 64 * MiB)
    mr = mallory.ibv_reg_dmabuf_mr("efa0", fd, 0, 16 * MiB, ACCESS)
    alice = applied.spawn(ws.system, "alice", "firefox")
    alice.gem_create("gpu0", GiB, "vram")

    console = Console(width=160, record=True)
    console.print(
        render_policy(
            tree, dmem, applied.proposals, usage=True, users=config.users, kernel=ws.kernel
        )
    )
    out = console.export_text()
    assert "user-1002.slice  max=4GiB  pin.max=2GiB" in out
    assert "current=16MiB" in out and "pinned=16MiB" in out and "1 proc" in out
    assert "-ENOMEM x1" in out and "gpu0 pinned 16MiB" in out
    mallory.ibv_dereg_mr(mr)
    mallory.exit()
    alice.exit()
    applied.uninstall()
    assert not ws.kernel.pin_hooks and not applied.proposals


def test_apply_refuses_what_the_machine_cannot_do() -> None:
    """Errors at apply time are one line too: revocable-pins outside 7.1, dmem limits on a
    kernel without dmem, a region this machine does not have."""
    ws, tree, dmem = _desktop_machine()
    on = parse_policy("[proposals.revocable-pins]\n", "p.toml")
    with pytest.raises(PolicyError) as info:
        apply_policy(on, ws.kernel, tree, dmem, ttm_devices=[ws.gpu.bdev], source="p.toml")
    assert str(info.value) == (
        "p.toml: proposals.revocable-pins: revocable-pins needs kernel profile 7.1 "
        "(dma_buf_invalidate_mappings and revocable pinned imports); this kernel is 6.16"
    )
    assert ws.gpu.bdev.revoke_pinned is None and not ws.kernel.pin_hooks

    ws71, tree71, dmem71 = _desktop_machine("7.1")
    applied = apply_policy(on, ws71.kernel, tree71, dmem71, ttm_devices=[ws71.gpu.bdev])
    assert ws71.gpu.bdev.revoke_pinned is not None
    applied.uninstall()
    assert ws71.gpu.bdev.revoke_pinned is None

    old = make_workstation("6.12")
    old_tree = CgroupTree()
    desktop = load_policy(EXAMPLES / "desktop.toml")
    with pytest.raises(PolicyError, match=r"profile 6\.14 or later.*found kernel 6\.12"):
        apply_policy(desktop, old.kernel, old_tree, DmemCgroupController(old_tree))

    other = parse_policy('[regions]\n"drm/0000:09:00.0/vram" = "8GiB"\n', "q.toml")
    with pytest.raises(PolicyError) as info:
        apply_policy(other, ws.kernel, tree, dmem, source="q.toml")
    assert str(info.value) == (
        'q.toml: regions."drm/0000:09:00.0/vram": expected a region registered on this machine '
        f'({REGION}), found "drm/0000:09:00.0/vram"'
    )


# -- pinlab policy show ----------------------------------------------------------------------------


def test_cli_policy_show_desktop(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "show", str(EXAMPLES / "desktop.toml")]) == 0
    out = capsys.readouterr().out
    for text in (
        "shared workstation",
        "user.slice  max=15GiB",
        "session-2.scope  low=2GiB",
        "compositor  min=1GiB",
        "user-1002.slice  max=4GiB  pin.max=2GiB",
        "mallory",
        "8MiB (hard 64MiB)",
        "memlock-dmabuf-pins",
        "device-pin-cap",
        "max_per_device=8GiB",
        "dmem-pin-max",
    ):
        assert text in out, text
    assert "revocable-pins" not in out


def test_cli_policy_show_and_check_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "desktop.toml"
    bad.write_text('[users.alice]\nuid = 1000\nmemlock = "lots"\n')
    assert main(["policy", "show", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"pinlab: error: {bad}: users.alice.memlock: {SIZE_MSG}"
    assert main(["policy", "check", str(EXAMPLES / "cluster.toml")]) == 0
    assert "ok -- 3 cgroups, 2 users, proposals: none" in capsys.readouterr().out
    assert main(["policy", "check", str(tmp_path / "missing.toml")]) == 2
    assert "no such file" in capsys.readouterr().err


# -- numbers out of range and names the kernel refuses (one line each, before any work) ----------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[users.a]\nuid = 1\nmemlock = "18446744073709551616"\n',
            'desktop.toml: users.a.memlock: expected a size like "64MiB" or "unlimited", found '
            '"18446744073709551616" (above RLIM_INFINITY (2^64-1))',
        ),
        (
            '[users.a]\nuid = 1\nmemlock = { soft = "1MiB", hard = "1e999999999" }\n',
            'desktop.toml: users.a.memlock.hard: expected a size like "64MiB" or "unlimited", '
            'found "1e999999999" (above RLIM_INFINITY (2^64-1))',
        ),
        (
            '[users.a]\nuid = 1\nmemlock = "inf"\n',
            'desktop.toml: users.a.memlock: expected a size like "64MiB" or "unlimited", found '
            '"inf" (not a finite number)',
        ),
        (
            '[regions]\nr = "1GiB"\n[cgroups.a]\n"dmem.max" = "r 18446744073709551616"\n',
            'desktop.toml: cgroups.a."dmem.max"[0]: expected a value in bytes, K/M/G, '
            'KiB/MiB/GiB or "max" after r, found "18446744073709551616" (above 2^64-1, the '
            "largest value memparse reads without wrapping)",
        ),
        (
            '[regions]\nr = "1GiB"\n[cgroups.a]\n"dmem.max" = "r 16384P"\n',
            'desktop.toml: cgroups.a."dmem.max"[0]: expected a value in bytes, K/M/G, '
            'KiB/MiB/GiB or "max" after r, found "16384P" (above 2^64-1, the largest value '
            "memparse reads without wrapping)",
        ),
        (
            '[proposals.device-pin-cap]\nmax_per_device = "1e400"\n',
            "desktop.toml: proposals.device-pin-cap.max_per_device: expected a size like "
            '"64MiB" or "unlimited", found "1e400" (above 2^64-1 bytes, the largest size)',
        ),
        (
            "[proposals.memlock-dmabuf-pins]\ndevice_memory_only = 1\n",
            "desktop.toml: proposals.memlock-dmabuf-pins.device_memory_only: expected true or "
            "false, found 1",
        ),
        (
            '[cgroups."a/b\\nc"]\n',
            'desktop.toml: cgroups."a/b\\nc": expected a path of cgroup names (no newline, not . '
            'or .., not the name of an interface file), found "b\\nc"',
        ),
        (
            '[cgroups."a/dmem.max"]\n',
            'desktop.toml: cgroups."a/dmem.max": expected a path of cgroup names (no newline, '
            'not . or .., not the name of an interface file), found "dmem.max"',
        ),
        (
            '[cgroups."cgroup.procs"]\n',
            'desktop.toml: cgroups."cgroup.procs": expected a path of cgroup names (no newline, '
            'not . or .., not the name of an interface file), found "cgroup.procs"',
        ),
        (
            "[users.a]\nuid = 99999999999999999999\n",
            "desktop.toml: users.a.uid: expected an integer within TOML's 64-bit range (-2^63 "
            "to 2^63-1), found 99999999999999999999",
        ),
    ],
)
def test_out_of_range_values_and_refused_names(text: str, expected: str) -> None:
    assert error_of(text) == expected


def test_a_dmem_max_never_wraps_to_zero() -> None:
    """memparse wraps at 64 bits (lib/cmdline.c): 2^64 written to dmem.max would be a limit of
    0. The largest value that does not wrap is accepted and reads back as written (P-19)."""
    text = f'[regions]\n"{REGION}" = "16GiB"\n[cgroups.a]\n"dmem.max" = "{REGION} {2**64 - 1}"\n'
    config = parse_policy(text, "p.toml")
    preview = preview_policy(config, "p.toml")
    assert preview.tree.read("/a", "dmem.max") != f"{REGION} 0\n"
    assert config.cgroups["a"].dmem_max[0].value == 2**64 - 1


def test_large_sizes_are_exact() -> None:
    """Integer arithmetic: 2^53 + 1 bytes is not rounded to 2^53 on the way."""
    config = parse_policy('[users.a]\nuid = 1\nmemlock = "9007199254740993"\n', "p.toml")
    assert config.users["a"].memlock.soft == 2**53 + 1
    config = parse_policy('[users.a]\nuid = 1\nmemlock = "8796093022207.5K"\n', "p.toml")
    assert config.users["a"].memlock.soft == 8796093022207 * 1024 + 512


def test_cli_policy_check_refuses_out_of_range_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "p.toml"
    bad.write_text('[users.a]\nuid = 1\nmemlock = "1e999999999"\n')
    assert main(["policy", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"pinlab: error: {bad}: users.a.memlock: expected a size like")
