"""The monitor's numbers: ghost = the reference FK, zero error on it, contacts, honest fallbacks.

That the ghost equals training's reference (motion library) is training/tests/test_motion.py's check."""

from __future__ import annotations

import numpy as np
import pytest

from asap_bringup.monitor_core import MonitorCfg, MonitorCore, find_motion
from asap_core import g1
from asap_core.modes import Mode
from asap_core.motion import CLIP_DIR

MOTION = "arm_swing"


@pytest.fixture(scope="module")
def core() -> MonitorCore:
    pytest.importorskip("mujoco", reason="the monitor's FK is asap_sim's, on MuJoCo (not on the robot image)")
    c = MonitorCore(MonitorCfg())
    if c.kinematics is None:
        pytest.skip(f"no G1 model: {c.kinematics_error}")
    return c


def _status(core: MonitorCore, mode: Mode, phase: float, motion: str = MOTION) -> None:
    core.set_status(
        policy_name="p", policy_sha256="ab" * 32, motion_name=motion, mode=int(mode), phase=phase, fault=""
    )


def _put_robot_on_reference(core: MonitorCore, phase: float, shift=(0.0, 0.0, 0.0), now_s: float = 0.0):
    ref = core.reference().sample(phase)
    core.set_joints(g1.MOTOR_ORDER, ref.joint_pos)
    core.set_base(ref.points[0] + np.asarray(shift), ref.root_quat, now_s)
    return ref


def test_the_ghost_is_the_reference_and_tracking_it_exactly_is_zero_error(core) -> None:
    _status(core, Mode.HOLD, 0.0)
    _put_robot_on_reference(core, 0.0)
    core.frame(0.0)  # outside POLICY the ghost is placed on the robot
    _status(core, Mode.POLICY, 0.4)
    ref = _put_robot_on_reference(core, 0.4)
    f = core.frame(0.0)
    np.testing.assert_allclose(f.ref_points, ref.points, atol=1e-9)
    np.testing.assert_allclose(f.live_points, ref.points, atol=1e-6)  # same FK on both sides
    assert f.error_m == pytest.approx(0.0, abs=1e-6) and f.error_local_m == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_allclose(f.joint_error, 0.0, atol=1e-9)
    assert any(line.startswith("tracking error: 0.0 cm") for line in f.status_lines)


def test_a_lagging_robot_shows_the_error_in_meters(core) -> None:
    _status(core, Mode.HOLD, 0.0)
    _put_robot_on_reference(core, 0.0)
    core.frame(0.0)
    _status(core, Mode.POLICY, 0.5)
    _put_robot_on_reference(core, 0.5, shift=(0.10, 0.0, 0.0))  # whole robot 10 cm off the reference
    f = core.frame(0.0)
    assert f.error_m == pytest.approx(0.10, abs=1e-6)
    assert f.error_local_m == pytest.approx(0.0, abs=1e-6)  # same posture: root-relative error vanishes


def test_the_ghost_starts_where_the_robot_stands(core) -> None:
    _status(core, Mode.HOLD, 0.0)
    ref0 = _put_robot_on_reference(core, 0.0, shift=(1.5, -2.0, 0.0))
    f = core.frame(0.0)
    np.testing.assert_allclose(f.ref_points[0, :2], ref0.points[0, :2] + [1.5, -2.0], atol=1e-9)
    assert f.error_m is None  # errors only while the policy runs


def test_without_odometry_only_the_root_relative_error_is_reported(core) -> None:
    _status(core, Mode.POLICY, 0.3)
    _put_robot_on_reference(core, 0.3, now_s=0.0)
    f = core.frame(10.0)  # the pose is 10 s old
    assert f.base.source == "reference" and f.error_m is None
    assert f.error_local_m == pytest.approx(0.0, abs=1e-6)
    assert "base: reference" in f.status_lines


def test_feet_on_the_floor_are_in_contact_and_a_lifted_foot_is_not(core) -> None:
    _status(core, Mode.HOLD, 0.0, motion="")
    q = g1.default_pose(g1.MOTOR_ORDER)
    core.set_joints(g1.MOTOR_ORDER, q)
    core.set_base([0.0, 0.0, core.kinematics.standing_height], [1.0, 0, 0, 0], 0.0)
    assert all(contact for _, contact in core.frame(0.0).feet.values())
    bent = q.copy()
    for name, value in (("left_hip_pitch_joint", -0.8), ("left_knee_joint", 1.2)):
        bent[g1.MOTOR_ORDER.index(name)] = value
    core.set_joints(g1.MOTOR_ORDER, bent)
    feet = core.frame(0.0).feet
    assert feet["right_ankle_roll_link"][1] and not feet["left_ankle_roll_link"][1]


def test_an_unknown_motion_is_named_in_the_status_text(core) -> None:
    _status(core, Mode.POLICY, 0.2, motion="moonwalk")
    f = core.frame(0.0)
    assert f.ref_points is None and f.error_m is None
    assert any("motion 'moonwalk' unknown" in line and MOTION in line for line in f.status_lines)


def test_motions_outside_the_shipped_clips_are_found_on_the_motion_path(tmp_path) -> None:
    (tmp_path / "mine.npz").write_bytes(b"")
    assert find_motion("mine", f"/nonexistent:{tmp_path}") == tmp_path / "mine.npz"
    assert find_motion(MOTION) == CLIP_DIR / f"{MOTION}.npz" and find_motion("mine") is None


def test_without_forward_kinematics_the_monitor_still_reports_status() -> None:
    def broken():
        raise ImportError("No module named 'mujoco'")

    c = MonitorCore(MonitorCfg(), kinematics_factory=broken)
    c.set_status(
        policy_name="", policy_sha256="", motion_name="", mode=int(Mode.ZERO_TORQUE), phase=0.0, fault=""
    )
    f = c.frame(0.0)
    assert f.live_points is None
    assert f.status_lines[:2] == ("policy: none loaded", "mode: ZERO_TORQUE  phase 0.00")
    assert "No module named 'mujoco'" in f.status_lines[-1]


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="rate_hz"):
        MonitorCfg(rate_hz=0.0).validate()
