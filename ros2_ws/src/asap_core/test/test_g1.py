"""The G1 joint table: internal consistency and agreement with the models and documents it comes from."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from asap_core import g1

SHARED_ROBOT = Path(__file__).resolve().parents[5] / "shared" / "data" / "asap_g1" / "robot"


def test_motor_order_is_the_table_order() -> None:
    assert len(g1.JOINTS) == g1.NUM_MOTORS == 29
    assert [j.motor_index for j in g1.JOINTS] == list(range(29))
    assert len(set(g1.MOTOR_ORDER)) == 29


def test_isaaclab_order_as_documented() -> None:
    # BeyondMimic's / Isaac Lab's G1 joint order (whole_body_tracking's g1.py), written out in words
    words = ("L hip pitch, R hip pitch, waist yaw, L hip roll, R hip roll, waist roll, L hip yaw, "
             "R hip yaw, waist pitch, L knee, R knee, L shoulder pitch, R shoulder pitch, L ankle pitch, "
             "R ankle pitch, L shoulder roll, R shoulder roll, L ankle roll, R ankle roll, L shoulder yaw, "
             "R shoulder yaw, L elbow, R elbow, L wrist roll, R wrist roll, L wrist pitch, R wrist pitch, "
             "L wrist yaw, R wrist yaw")
    expected = []
    for w in words.split(", "):
        side, _, rest = w.partition(" ")
        name = {"L": "left_", "R": "right_"}.get(side, side + "_") + rest
        expected.append(name.replace(" ", "_") + "_joint")
    assert list(g1.ISAACLAB_ORDER) == expected
    assert sorted(g1.ISAACLAB_ORDER) == sorted(g1.MOTOR_ORDER)


def test_asap23_is_motor_order_without_wrists() -> None:
    assert len(g1.ASAP23_ORDER) == 23
    assert g1.ASAP23_ORDER[12:15] == ("waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint")
    assert g1.ASAP23_ORDER[15] == "left_shoulder_pitch_joint"
    assert g1.ASAP23_ORDER[19] == "right_shoulder_pitch_joint"
    assert not any("wrist" in n for n in g1.ASAP23_ORDER)


def test_limits_are_consistent() -> None:
    for j in g1.JOINTS:
        assert j.lower < 0.0 < j.upper or j.name.endswith("knee_joint"), j
        assert j.lower < j.upper and j.effort_limit > 0 and j.velocity_limit > 0
        assert j.actuator in g1.ARMATURE
    # left/right mirror: same effort and velocity, mirrored roll/yaw ranges
    for j in g1.JOINTS:
        if j.name.startswith("left_"):
            r = g1.JOINT_BY_NAME["right_" + j.name[5:]]
            assert (r.effort_limit, r.velocity_limit, r.actuator) == (j.effort_limit, j.velocity_limit,
                                                                      j.actuator)
            if "roll" in j.name:
                assert (r.lower, r.upper) == (-j.upper, -j.lower)


@pytest.mark.parametrize("pose", sorted(g1.DEFAULT_POSES))
def test_default_poses_inside_limits(pose: str) -> None:
    q = g1.default_pose(g1.MOTOR_ORDER, pose)
    lo, hi = g1.joint_array("lower", g1.MOTOR_ORDER), g1.joint_array("upper", g1.MOTOR_ORDER)
    assert np.all((lo < q) & (q < hi))


def test_asap_gains_and_pose_as_in_asap_config() -> None:
    kp, kd = g1.gains(g1.ASAP23_ORDER, "asap")
    assert kp.tolist() == [100, 100, 100, 200, 20, 20] * 2 + [400] * 3 + [90, 60, 20, 60] * 2
    assert kd.tolist() == [2.5, 2.5, 2.5, 5, 0.2, 0.1] * 2 + [5] * 3 + [2, 1, 0.4, 1] * 2
    q0 = g1.default_pose(g1.ASAP23_ORDER, "asap")
    assert q0.tolist() == [-0.1, 0, 0, 0.3, -0.2, 0] * 2 + [0] * 11


def test_beyondmimic_gains_match_published_values() -> None:
    # BeyondMimic's published values (arXiv 2508.08241; formula in asap_core/g1.py _armature_gains):
    # hip pitch 40.18/2.558, knee 99.10/6.309, ankle 28.50/1.814, arm 14.25/0.907,
    # wrist pitch 16.78/1.068; action scale 0.25 effort/kp: 0.548, 0.351, 0.439, 0.439, 0.0745
    names = ["left_hip_pitch_joint", "left_knee_joint", "left_ankle_pitch_joint",
             "left_shoulder_pitch_joint", "left_wrist_pitch_joint"]
    kp, kd = g1.gains(names, "beyondmimic")
    np.testing.assert_allclose(kp, [40.18, 99.10, 28.50, 14.25, 16.78], atol=0.01)
    np.testing.assert_allclose(kd, [2.558, 6.309, 1.814, 0.907, 1.068], atol=0.001)
    scale = 0.25 * g1.joint_array("effort_limit", names) / kp
    np.testing.assert_allclose(scale, [0.548, 0.351, 0.439, 0.439, 0.0745], atol=0.001)


def test_damping_set_has_no_stiffness() -> None:
    kp, kd = g1.gains(g1.MOTOR_ORDER, "damping")
    assert np.all(kp == 0) and np.all(kd == 8)


def test_the_unitree_mujoco_set_is_asaps_with_five_kd_groups_rescaled() -> None:
    asap_kp, asap_kd = g1.gains(g1.MOTOR_ORDER, "asap")
    kp, kd = g1.gains(g1.MOTOR_ORDER, "unitree_mujoco_5ms")
    np.testing.assert_array_equal(kp, asap_kp)
    expected = {"left_hip_pitch_joint": 0.625, "waist_yaw_joint": 1.25, "waist_pitch_joint": 1.25,
                "right_shoulder_pitch_joint": 2.8, "left_wrist_pitch_joint": 0.28}
    for name, value in expected.items():
        assert kd[g1.MOTOR_ORDER.index(name)] == pytest.approx(value)
    changed = {g1.MOTOR_ORDER[i] for i in np.flatnonzero(~np.isclose(kd, asap_kd))}
    assert changed == {f"{side}_{joint}" for side in ("left", "right")
                       for joint in ("hip_pitch_joint", "shoulder_pitch_joint", "wrist_pitch_joint")} | {
        "waist_yaw_joint", "waist_pitch_joint"}


@pytest.mark.parametrize("name", sorted(g1.GAINS))
def test_a_gain_set_is_found_from_its_gains(name: str) -> None:
    joints = g1.names("asap23")  # a policy's joints, in another order than the table's
    kp, kd = g1.gains(joints, name)
    assert g1.gain_set_of(joints, kp, kd) == name
    with pytest.raises(KeyError, match="no gain set"):
        g1.gain_set_of(joints, kp, kd * 1.1)


@pytest.mark.parametrize("name", sorted(g1.GAINS))
def test_every_gain_set_is_under_the_g1_gain_ceilings(name: str) -> None:
    kp, kd = g1.gains(g1.MOTOR_ORDER, name)
    kp_max, kd_max = g1.gain_ceilings(g1.MOTOR_ORDER)
    assert np.all(kp <= kp_max) and np.all(kd <= kd_max)


def test_unknown_names_are_explained() -> None:
    with pytest.raises(KeyError, match="known"):
        g1.names("urdf")
    with pytest.raises(KeyError, match="known"):
        g1.gains(g1.MOTOR_ORDER, "soft")


@pytest.mark.skipif(not SHARED_ROBOT.is_dir(), reason="../shared/data/asap_g1 not present")
def test_table_agrees_with_asap_urdf() -> None:
    root = ET.parse(SHARED_ROBOT / "g1_29dof_anneal_23dof.urdf").getroot()
    seen = 0
    for joint in root.iter("joint"):
        name, limit = joint.get("name"), joint.find("limit")
        if name not in g1.JOINT_BY_NAME or joint.get("type") != "revolute" or limit is None:
            continue
        j = g1.JOINT_BY_NAME[name]
        assert float(limit.get("lower")) == pytest.approx(j.lower, abs=2e-3), name
        assert float(limit.get("upper")) == pytest.approx(j.upper, abs=2e-3), name
        seen += 1
    assert seen >= 23


def test_mirror_pairs_every_sided_joint_with_one_in_the_table() -> None:
    assert g1.mirror("left_knee_joint") == "right_knee_joint"
    assert g1.mirror("right_wrist_yaw_joint") == "left_wrist_yaw_joint"
    assert g1.mirror("waist_yaw_joint") == "waist_yaw_joint"
    for name in g1.MOTOR_ORDER:
        assert g1.mirror(name) in g1.JOINT_BY_NAME
        assert g1.mirror(g1.mirror(name)) == name
    assert sum(g1.mirror(n) == n for n in g1.MOTOR_ORDER) == 3  # the waist
