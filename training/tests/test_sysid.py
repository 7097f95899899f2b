"""SysID baseline: the search recovers a gain gap that is in its parameter set, writes a loadable profile,
and its pieces (parameter groups, profile merge, pattern search) do what the module promises."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from asap_core import g1
from asap_sim.profiles import load_profile, profile_from_dict
from asap_training.baselines.sysid import (
    SysidCfg,
    base_profile_dict,
    identify,
    joint_groups,
    main,
    parameter_space,
    pattern_search,
    profile_dict,
)

POLICY = Path(__file__).resolve().parents[1] / "policies" / "arm_swing" / "policy.onnx"
LEGS = r"(left|right)_(hip|knee|ankle)_.*"

ASAP23 = g1.names("asap23")


@pytest.fixture(scope="module")
def soft_legs(tmp_path_factory):
    """The shipped policy on a twin whose leg drives are 10 % softer (kp × 0.9), a gap SysID can express."""
    from asap_core.artifact import load_artifact
    from asap_training.data.dataset import RealDataset
    from asap_training.envs.tracking_env import TrackingEnv
    from asap_training.eval.evaluate import eval_env_cfg, rollout_twin

    profile = tmp_path_factory.mktemp("profiles") / "soft_legs.yaml"
    profile.write_text(yaml.safe_dump({"kp_scale": {LEGS: 0.9}}))
    artifact = load_artifact(POLICY)
    r = rollout_twin(artifact, TrackingEnv(eval_env_cfg(artifact, None, "nominal")), str(profile))
    return RealDataset((r.trajectory,), 0.02, tuple(artifact.metadata.joint_names), artifact.sha256, 0)


def test_parameter_space_is_table_vii_with_grouped_gains():
    family = parameter_space(ASAP23)
    names = [p.name for p in family]
    assert names[:4] == ["com_x", "com_y", "com_z", "base_mass"]
    assert {p.step for p in family[:3]} == {0.02} and {p.step for p in family[3:]} == {0.05}
    # 13 left/right-tied families of the 23 policy joints, a kp and a kd ratio each
    assert len(joint_groups("family", ASAP23)) == 13 and len(family) == 4 + 2 * 13
    assert joint_groups("family", ASAP23)["knee"] == r"(left|right)_knee_joint"
    assert len(parameter_space(ASAP23, "joint")) == 4 + 2 * 23  # the paper's per-joint set
    limb = parameter_space(ASAP23, "limb", extended=True)
    assert [p.name for p in limb if p.key == "torque_scale"] == ["torque/legs", "torque/waist", "torque/arms"]
    with pytest.raises(ValueError, match="family"):
        joint_groups("per_motor", ASAP23)


def test_profile_dict_merges_into_the_base_and_identified_patterns_win():
    params = parameter_space(ASAP23, "limb")
    values = np.array([p.nominal for p in params])
    values[[0, 3]] = 0.02, 1.2  # com_x, base mass
    values[[p.name for p in params].index("kp/legs")] = 0.9
    base = {"kp_scale": {".*": 0.8, "waist_yaw_joint": 0.7}, "ground_friction": 0.6}
    profile = profile_from_dict(profile_dict(params, values, base), name="t")
    kp = {j: profile.kp_scale[g1.MOTOR_ORDER.index(j)] for j in ASAP23}
    assert kp["left_knee_joint"] == kp["right_ankle_roll_joint"] == 0.9
    assert kp["waist_yaw_joint"] == 1.0 and kp["left_elbow_joint"] == 1.0  # identified: nominal groups
    assert profile.ground_friction == 0.6  # untouched base keys survive
    assert profile.base_com_offset == (0.02, 0.0, 0.0)
    assert dict(profile.link_mass_scale)["pelvis"] == 1.2


def test_pattern_search_goes_beyond_the_grid_and_respects_the_budget():
    params = parameter_space(ASAP23, "limb")
    truth = np.array([p.nominal for p in params])
    truth[1], truth[4] = -0.03, 0.83  # com_y off-grid, kp/legs beyond the Table VII range
    steps = np.array([p.step for p in params])
    calls = []

    def objective(x: np.ndarray) -> float:
        calls.append(x)
        return float(np.sum(((x - truth) / steps) ** 2))

    x, best, used = pattern_search(objective, params, SysidCfg(max_evaluations=80))
    assert used == len(calls) <= 80
    np.testing.assert_allclose(x, truth, atol=0.01)
    assert best == pytest.approx(objective(x))
    again = pattern_search(objective, params, SysidCfg(max_evaluations=80))
    np.testing.assert_array_equal(again[0], x)  # deterministic
    small = pattern_search(objective, params, SysidCfg(max_evaluations=5))
    assert small[2] == 5 and small[1] <= objective(np.array([p.nominal for p in params]))


def test_identify_recovers_softer_leg_drives(soft_legs, tmp_path):
    out = tmp_path / "identified.yaml"
    cfg = SysidCfg(groups="limb", only=("com_x", "base_mass", "kp/.*"), max_evaluations=16, max_windows=4)
    result = identify(soft_legs, out, cfg, progress=False)
    value = dict(zip([p.name for p in result.params], result.values, strict=True))
    assert 0.8 <= value["kp/legs"] < 1.0, value  # moved from 1.0 toward the truth, 0.9
    assert result.objective_after < 0.7 * result.objective_before
    assert result.evaluations <= 16
    profile = load_profile(out)  # a valid asap_sim profile
    knee = g1.MOTOR_ORDER.index("left_knee_joint")
    assert profile.kp_scale[knee] == pytest.approx(value["kp/legs"])
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["dataset_sha256"] == soft_legs.sha256
    assert record["objective_after"] == result.objective_after
    assert len(record["history"]) == result.evaluations
    for h in ("0.25", "0.5", "1"):
        assert record["open_loop_after"][h]["e_g_mpjpe_mm"] < record["open_loop_before"][h]["e_g_mpjpe_mm"]


def test_cli_and_its_errors(soft_legs, tmp_path, capsys):
    data = soft_legs.save(tmp_path / "ds.npz")
    out = tmp_path / "id.yaml"
    args = ["--dataset", str(data), "--out", str(out), "--max-evals", "2", "--max-windows", "2", "--quiet"]
    main([*args, "--groups", "limb", "--only", "kp/legs"])
    assert load_profile(out).description.startswith("identified by asap-sysid")
    assert "open-loop e_g_mpjpe_mm" in capsys.readouterr().out
    with pytest.raises(ValueError, match="selects none"):
        main([*args, "--only", "kp/toes"])
    with pytest.raises(SystemExit, match="cannot read dataset"):
        main(["--dataset", str(tmp_path / "missing.npz"), "--out", str(out)])
    assert base_profile_dict("nominal")["kp_scale"] == 1.0
