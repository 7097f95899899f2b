"""The parameter table: the shipped YAML validates, bad values are refused naming the parameter."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from asap_policy import params

CONFIG = Path(__file__).resolve().parents[1] / "config" / "policy_node.yaml"


def test_shipped_yaml_sets_every_parameter_validly() -> None:
    values = yaml.safe_load(CONFIG.read_text())["policy_node"]["ros__parameters"]
    assert set(values) == set(params.PARAMS_BY_NAME)
    assert params.validate(values) == {p.name: p.default for p in params.PARAMS}


@pytest.mark.parametrize(("values", "words"), [
    ({"ramp_s": 0.0}, "ramp_s: 0.0 outside [0.1, 60.0]"),
    ({"hold_gains": "soft"}, "hold_gains: 'soft' not one of"),
    ({"swap_blend_ticks": 2.5}, "swap_blend_ticks: expected int"),
    ({"check_lowstate_crc": 1}, "check_lowstate_crc: expected bool"),
    ({"ramps": 3.0}, "unknown parameter 'ramps'"),
])
def test_invalid_values_are_refused(values: dict, words: str) -> None:
    with pytest.raises(ValueError, match="invalid policy_node parameters") as info:
        params.validate(values)
    assert words in str(info.value)


def test_ints_are_accepted_for_floats_and_map_to_the_control_cfg() -> None:
    v = params.validate({"ramp_s": 2, "stale_damp_ms": 80})
    cfg = params.control_cfg(v, 0.02)
    assert cfg.ramp_s == 2.0 and cfg.safety.stale_damp_s == pytest.approx(0.08)
    assert cfg.hold_gains == "policy" and cfg.control_dt == 0.02


ROBOT_PARAMS = Path(__file__).resolve().parents[2] / "asap_bringup" / "config" / "params" / "robot" / \
    "policy_node.yaml"


def test_a_simulator_mode_machine_is_refused_on_the_robot_profile_and_for_real_variants() -> None:
    robot = yaml.safe_load(ROBOT_PARAMS.read_text())["/**"]["ros__parameters"]
    with pytest.raises(ValueError, match=r"robot profile \(release_motion_switcher: true\)"):
        params.validate({**robot, "sim_mode_machine": 0})
    with pytest.raises(ValueError, match=r"sim_mode_machine 4 is a real G1 \(g1_23dof_rev_1_0\)"):
        params.validate({"sim_mode_machine": 4})
    assert params.control_cfg(params.validate(robot), 0.02).sim_mode_machine is None
    assert params.control_cfg(params.validate({"sim_mode_machine": 0}), 0.02).sim_mode_machine == 0


def test_every_bringup_parameter_file_of_the_node_validates() -> None:
    """robot, sim2sim, unitree_mujoco...: a profile whose node would refuse to start fails here."""
    files = sorted(ROBOT_PARAMS.parents[1].glob("*/policy_node.yaml"))
    assert {f.parent.name for f in files} >= {"robot", "sim2sim", "unitree_mujoco"}
    for f in files:
        values = yaml.safe_load(f.read_text())["/**"]["ros__parameters"]
        params.validate(values)
