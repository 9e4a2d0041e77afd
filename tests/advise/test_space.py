"""The policy space of ``pinlab advise`` over a scenario's policy (``advise.space``)."""

from __future__ import annotations

from pinlab.advise.output import pareto_front
from pinlab.advise.space import build_space
from pinlab.policy.config import parse_policy
from pinlab.scenarios.config import load_scenario

REGIONS = {"drm/{gpu0}/vram": 8 << 30}


def _settlement() -> tuple[dict, list[dict]]:
    cfg = load_scenario("settlement")
    return (
        dict(cfg.resolve("settled").policy or {}),
        [dict(cfg.resolve(v).policy or {}) for v in cfg.variants],
    )


def test_knobs_cover_users_cgroups_regions_and_proposals() -> None:
    base, variants = _settlement()
    space = build_space(base, REGIONS, revocable=False, variants=variants)
    names = [k.name for k in space.knobs]
    assert names[0] == "proposals.pins"
    assert space.proposal.values == (
        "none",
        "memlock-dmabuf-pins",
        "device-pin-cap",
        "dmem-pin-max",
    )
    assert {"users.desktop.memlock", "users.hpc.memlock", "users.mallory.memlock"} <= set(names)
    for cgroup in ("user.slice/user-1000.slice", "user.slice/user-1002.slice", "hpc.slice"):
        for f in ("dmem.max", "dmem.min", "dmem.low", "dmem.pin.max"):
            assert f'cgroups."{cgroup}"."{f}".drm/{{gpu0}}/vram' in names
    # limits run from the tight end: memlock 64 KiB ... unlimited; dmem.low from 0
    memlock = space.knob("users.hpc.memlock")
    assert memlock.values[0] == 64 << 10 and memlock.values[-1] is None
    low = space.knob('cgroups."hpc.slice"."dmem.low".drm/{gpu0}/vram')
    assert low.values[0] == 0 and low.values[-1] == 8 << 30
    assert build_space(base, REGIONS, revocable=True).proposal.values[-1] == "revocable-pins"


def test_a_variants_policy_is_a_point_and_comes_back() -> None:
    base, variants = _settlement()
    space = build_space(base, REGIONS, revocable=False, variants=variants)
    values = space.knobs_of(base)
    assert values is not None
    doc = space.policy(values)
    assert doc["users"]["hpc"]["memlock"] == "unlimited"
    assert doc["users"]["mallory"]["memlock"] == "8MiB"  # the default, written out
    assert doc["cgroups"]["user.slice/user-1002.slice"] == {"dmem.max": "drm/{gpu0}/vram 4GiB"}
    assert doc["proposals"] == {"memlock-dmabuf-pins": {}}
    assert space.knobs_of(doc) == values
    # a cap of a proposal not chosen is not in the policy
    cap = space.knob("device-pin-cap.max_per_device")
    assert not space.active(values, cap)
    assert space.shown(values)[cap.name] == "-"


def test_every_point_is_a_valid_policy_file() -> None:
    import tomli_w

    base, variants = _settlement()
    space = build_space(base, REGIONS, revocable=False, variants=variants)
    for i, choice in enumerate(space.proposal.values):
        values = {k.name: (len(k.values) - 1) * (i % 2) for k in space.knobs}
        values["proposals.pins"] = i
        doc = space.policy(values)
        config = parse_policy(tomli_w.dumps(doc))  # the regions it names are declared
        assert choice == "none" or choice in config.proposals.enabled()


def test_pareto_front() -> None:
    pts = [(1.0, 0.0), (2.0, -1.0), (0.5, 0.5), (1.0, -0.5), (2.0, -2.0)]
    assert pareto_front(pts) == [2, 0, 1]
