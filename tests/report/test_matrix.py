"""``pinlab matrix``: every exporter × importer imported, pinned and mapped through the uapi.

The amdgpu/EFA cell follows the kernel history (K-49: GTT up to 6.15, VRAM from 6.16 with
MOVE_NOTIFY and in 7.1); habanalabs refuses what cannot do P2P (K-52, K-75); every cell runs
clean (no incident, no leak)."""

from __future__ import annotations

import json

import pytest

from pinlab.cli import main
from pinlab.drivers import EXPORTERS, IMPORTERS
from pinlab.kernel.profile import PRESETS, get_profile
from pinlab.report.matrix import (
    build_machine,
    build_matrix,
    column,
    columns,
    decided_by,
    error_stage,
    matrix_profile,
    run_cell,
)

COLUMNS = ["efa", "mlx5-odp", "mlx5-no-odp", "display", "gpu-import"]


def columns_in(profile: str) -> list[str]:
    """The matrix's columns under ``profile``: iommufd imports dma-bufs from 6.19 (K-108)."""
    return COLUMNS + (
        ["iommufd"] if get_profile(profile.removesuffix("+MN")).iommufd_dmabuf else []
    )


@pytest.mark.parametrize(
    ("profile", "mn", "outcome", "memory", "p2p"),
    [
        ("5.16", False, "migrated to GTT", "gtt", False),
        ("6.12", False, "migrated to GTT", "gtt", False),
        ("6.12", True, "migrated to GTT", "gtt", False),
        ("6.14", False, "migrated to GTT", "gtt", False),
        ("6.16", False, "migrated to GTT", "gtt", False),
        ("6.16", True, "device memory in place", "vram", True),
        ("7.1", False, "device memory in place", "vram", True),
    ],
)
def test_k49_amdgpu_efa_cell_follows_the_kernel_history(
    profile: str, mn: bool, outcome: str, memory: str, p2p: bool
) -> None:
    """K-49 (§10.1): amdgpu pinned exported buffers into GTT until 6.15; 6.16 pins into VRAM
    when MOVE_NOTIFY is on and every importer can do P2P; 7.1 drops the MN condition."""
    cell = run_cell("amdgpu", "efa", matrix_profile(profile, mn))
    assert (cell.outcome, cell.memory, cell.p2p, cell.pinned) == (outcome, memory, p2p, True)
    assert "K-49" in cell.items and "K-45" in cell.items
    assert cell.incidents == 0 and not cell.refused


@pytest.mark.parametrize("profile", list(PRESETS))
def test_k52_k97_habanalabs_display_is_refused_at_map(profile: str) -> None:
    """K-52: the display is a static importer, so it never has peer2peer and habanalabs
    refuses its map with ``-EPERM``. Both sides are static, so no preset maps at attach time
    (K-13/K-14 need differing dynamicness): the refusal is at map in every preset (K-97)."""
    cell = build_matrix(get_profile(profile)).cell("habanalabs", "display")
    assert cell.outcome == "refused -EPERM at map"
    assert (cell.errno, cell.stage, cell.p2p) == ("-EPERM", "map", None)
    assert "hl_map_dmabuf" in str(cell.error) and "K-52" in cell.items


@pytest.mark.parametrize(
    ("profile", "stage"),
    [("5.16", "attach"), ("6.12", "attach"), ("6.14", "attach"), ("6.16", "map"), ("7.1", "map")],
)
def test_k75_unreachable_dynamic_importer_of_habanalabs_is_refused_at_attach_or_map(
    profile: str, stage: str
) -> None:
    """K-75: without a P2P path (here CONFIG_PCI_P2PDMA=n, so every distance is -1) a dynamic
    importer of habanalabs is refused with ``-EPERM`` inside ``dma_buf_dynamic_attach`` in
    ≤6.15 (the attach-time map) and at the first map in ≥6.16 -- the matrix names the stage."""
    prof = get_profile(profile, pci_p2pdma=False)
    for importer in ("efa", "mlx5-odp", "gpu-import"):
        cell = run_cell("habanalabs", importer, prof)
        assert cell.outcome == f"refused -EPERM at {stage}", importer
        assert "K-75" in cell.items


def test_every_cell_runs_clean_under_every_profile() -> None:
    """Every profile (and 6.16 with MOVE_NOTIFY): each cell either succeeds with a mapping in
    the buffer's memory and no incident, is refused with a kernel errno, or does not exist
    (xe in 5.16). mlx5 without ODP refuses ON_DEMAND everywhere (§6)."""
    for profile in [*PRESETS, "6.16+MN"]:
        prof = matrix_profile(profile.removesuffix("+MN"), profile.endswith("+MN"))
        matrix = build_matrix(prof)
        cols = columns_in(profile)
        assert matrix.exporters == list(EXPORTERS) and matrix.importers == cols
        assert len(matrix.cells) == len(EXPORTERS) * len(cols)
        for cell in matrix.cells:
            assert cell.incidents == 0, cell
            if cell.importer == "mlx5-no-odp" and cell.memory is not None:
                assert cell.outcome == "refused -EOPNOTSUPP at registration"
                assert cell.items == ("§6",)
            elif cell.memory is None:  # xe entered in ≈6.8, vfio-pci's exporter in 6.19
                assert (cell.exporter, profile) == ("xe", "5.16") or (
                    cell.exporter == "vfio-pci" and not prof.iommufd_dmabuf
                )
                assert cell.outcome == f"n/a in {prof.name}"
            elif not cell.refused:
                assert cell.items and cell.p2p == (cell.memory in ("vram", "bar"))


def test_pin_in_place_migrate_on_pin_and_odp_side_by_side() -> None:
    """The settlement's first pillar in one row each (6.16 with MOVE_NOTIFY): habanalabs and
    nvidia-compute pin in place, the APU and i915 always migrate, amdgpu keeps VRAM for P2P
    pinners; an ODP import leaves amdgpu's buffer unpinned in VRAM."""
    matrix = build_matrix(matrix_profile("6.16", True))
    efa = {e: matrix.cell(e, "efa").outcome for e in EXPORTERS}
    assert efa == {
        "amdgpu": "device memory in place",
        "apu": "migrated to GTT",
        "habanalabs": "device memory in place",
        "nvidia-compute": "device memory in place",
        "xe": "migrated to GTT",
        "i915": "migrated to system memory",
        "vfio-pci": "n/a in 6.16",
    }
    odp = matrix.cell("amdgpu", "mlx5-odp")
    assert (odp.memory, odp.p2p, odp.pinned) == ("vram", True, False)
    assert matrix.cell("amdgpu", "display").outcome == "migrated to GTT"
    assert matrix.cell("xe", "efa").items == ("K-45", "K-26", "K-53")
    m = build_machine("xe", "7.1")
    assert decided_by(m.exporter, column(m, "efa"), get_profile("7.1")) == (
        "K-45",
        "K-26",
        "K-69",
        "K-53",
        "K-131",  # xe's 7.1 VRAM pin rule (kernel.md §1.6)
    )


def test_rows_and_columns_come_from_the_registries() -> None:
    """Every registered exporter is a row, every registered importer at least one column
    (an ODP-capable RDMA driver two: with and without ODP); 'dynamic' is the ops table's."""
    assert [c.label for c in columns(build_machine("amdgpu", "6.16"))] == COLUMNS
    m = build_machine("amdgpu", "6.19")
    labels = [c.label for c in columns(m)]
    assert labels == columns_in("6.19")
    assert {label.removesuffix("-odp").removesuffix("-no") for label in labels} == set(IMPORTERS)
    dynamic = {name: build_machine(name, "6.19").exporter.dynamic for name in EXPORTERS}
    assert dynamic == {
        "amdgpu": True,
        "apu": True,
        "habanalabs": False,
        "nvidia-compute": True,
        "xe": True,
        "i915": False,
        "vfio-pci": True,  # 6.19: a pin op that refuses every pin (K-101)
    }
    assert not build_machine("vfio-pci", "7.1").exporter.dynamic  # 7.1: no pin op


def test_error_stage_without_a_core_step_is_registration() -> None:
    try:
        raise ValueError("x")
    except ValueError as e:
        assert error_stage(e) == "registration"


def test_unknown_names_are_value_errors() -> None:
    with pytest.raises(ValueError, match="unknown importer"):
        run_cell("amdgpu", "nope", get_profile("6.16"))
    with pytest.raises(ValueError, match="unknown exporter"):
        run_cell("nope", "efa", get_profile("6.16"))


# -- CLI -------------------------------------------------------------------------------------


def test_cli_matrix_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--profile", "6.12"]) == 0
    out = capsys.readouterr().out
    assert "kernel 6.12 (CONFIG_DMABUF_MOVE_NOTIFY=n; cells that change with =y show both)" in out
    row = next(line for line in out.splitlines() if "amdgpu" in line and "efa" in line)
    assert "migrated to GTT" in row and "K-49" in row
    assert "MN=y" not in row  # <= 6.15 amdgpu pins in GTT whatever MOVE_NOTIFY says
    assert "refused -EPERM at map" in out and "refused -EOPNOTSUPP at registration" in out
    for exporter in EXPORTERS:
        assert exporter in out


def test_cli_matrix_6_16_hints_at_move_notify(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--profile", "6.16"]) == 0
    assert "--move-notify" in capsys.readouterr().out
    assert main(["matrix", "--profile", "6.16", "--move-notify"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "amdgpu" in line and "efa" in line)
    assert "device memory in place" in row and "rerun with --move-notify" not in out


def test_cli_matrix_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--profile", "7.1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["profile"] == "7.1" and data["move_notify"] is True
    assert data["exporters"] == list(EXPORTERS) and data["importers"] == columns_in("7.1")
    assert len(data["cells"]) == len(EXPORTERS) * len(columns_in("7.1"))
    cell = next(c for c in data["cells"] if (c["exporter"], c["importer"]) == ("amdgpu", "efa"))
    assert cell["memory"] == "vram" and cell["p2p"] is True and "K-49" in cell["items"]


def test_cli_matrix_invalid_profile_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["matrix", "--profile", "9.9"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err.count("\n") == 1
        and "--profile: expected a kernel profile (5.16, " in captured.err
    )
    assert captured.err.rstrip().endswith("found '9.9'")
    assert "Traceback" not in captured.err


def test_cli_matrix_6_16_shows_the_vram_pin_with_move_notify(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Done-when of the driver issue: the amdgpu/EFA row differs between 6.12 and 6.16 as the
    kernel history says (K-49): 6.16 pins in VRAM once MOVE_NOTIFY is on."""
    assert main(["matrix", "--profile", "6.16"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "amdgpu" in line and "efa" in line)
    assert "migrated to GTT | MN=y: device memory in place" in row
    assert main(["matrix", "--profile", "6.16", "--no-move-notify"]) == 0
    out = capsys.readouterr().out
    assert "MN=y" not in out


def test_k101_k102_k108_cli_matrix_6_19_has_the_vfio_exporter_and_the_iommufd_importer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Done-when of issue 15: ``pinlab matrix --profile 6.19`` shows vfio-pci's BAR exporter
    and the iommufd importer. 6.19's VFIO pin op refuses pinned importers (K-101) and, with
    MOVE_NOTIFY off, every dynamic importer's map (K-102); iommufd never maps and takes the BAR
    (K-108, K-109, K-107); other exporters' buffers are refused by iommufd."""
    assert main(["matrix", "--profile", "6.19"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("│ vfio-pci") for line in out.splitlines())
    matrix = build_matrix(matrix_profile("6.19"))
    assert matrix.cell("vfio-pci", "efa").outcome == "refused -EOPNOTSUPP at pin"
    assert matrix.cell("vfio-pci", "mlx5-odp").outcome == "refused -EOPNOTSUPP at map"
    assert "K-102" in matrix.cell("vfio-pci", "mlx5-odp").items
    iommufd = matrix.cell("vfio-pci", "iommufd")
    assert (iommufd.outcome, iommufd.p2p) == ("device BAR in place", True)
    assert {"K-108", "K-109", "K-107"} <= set(iommufd.items)
    assert matrix.cell("amdgpu", "iommufd").outcome == "refused -EOPNOTSUPP at map"
    mn = build_matrix(matrix_profile("6.19", True))
    assert mn.cell("vfio-pci", "mlx5-odp").outcome == "device BAR in place"
    assert "iommufd" in out and "device BAR in place" in out
    amdgpu = run_cell("amdgpu", "iommufd", get_profile("7.1"))  # K-111: pinned, then refused
    assert amdgpu.outcome == "refused -EOPNOTSUPP at map" and "K-111" in amdgpu.items


def test_p61_p62_proposals_in_the_matrix() -> None:
    """``pinlab matrix --proposal``: the opt-in pin policies with their defaults. dmem-pinning
    (P-62) refuses every VRAM pin while no cgroup has a dmem.min, and the cell names it;
    pin-vram-percent (P-61) at its default 50 % lets the 16 MiB buffer stay pinned in VRAM."""
    prof = get_profile("7.1")
    refused = run_cell("xe", "efa", prof, ("dmem-pinning",))
    assert refused.outcome == "refused -ENOSPC at pin"
    assert refused.items[-1] == "proposal dmem-pinning"
    kept = run_cell("xe", "efa", prof, ("pin-vram-percent",))
    assert (kept.outcome, kept.pinned) == ("device memory in place", True)
    matrix = build_matrix(prof, ("dmem-peak", "dmem-peak"))
    assert matrix.proposals == ("dmem-peak",) and "dmem-peak" in matrix.notes()[-1]
    assert matrix.to_json()["proposals"] == ["dmem-peak"]
    with pytest.raises(ValueError, match="unknown proposal"):
        run_cell("xe", "efa", prof, ("nope",))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--proposal", "nope"], "--proposal: expected one of memlock-dmabuf-pins, "),
        (["--profile", "6.16", "--proposal", "revocable-pins"], "revocable-pins"),
    ],
)
def test_cli_matrix_bad_proposal_is_a_one_line_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["matrix", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
