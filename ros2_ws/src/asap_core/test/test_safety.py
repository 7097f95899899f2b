"""Safety layer against hand-computed numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from asap_core import g1
from asap_core.safety import (
    SafetyCfg,
    SafetyFilter,
    Staleness,
    clamp_torque_aware,
    non_finite,
    staleness,
    tilt_rad,
)

UPRIGHT = np.array([1.0, 0.0, 0.0, 0.0])


def test_torque_aware_clamp_hand_computed() -> None:
    # at rest: reach = effort / kp: 88/100 = 0.88, 50/20 = 2.5, kp 0 -> unlimited
    q = np.array([0.1, -0.2, 0.0])
    kp = np.array([100.0, 20.0, 0.0])
    kd, rest = np.array([2.0, 1.0, 1.0]), np.zeros(3)
    effort = np.array([88.0, 50.0, 25.0])
    q_des = np.array([1.5, -3.0, 9.0])
    np.testing.assert_allclose(clamp_torque_aware(q_des, q, kp, effort, kd, rest), [0.98, -2.7, 9.0])
    inside = np.array([0.5, 1.0, -9.0])
    np.testing.assert_allclose(clamp_torque_aware(inside, q, kp, effort, kd, rest), inside)


def test_torque_aware_clamp_counts_the_damping_torque_whatever_its_sign() -> None:
    # moving at 10 rad/s (either way) with kd 2: 20 N m of the 88 go to damping -> reach 68/100 = 0.68;
    # at 50 rad/s the damping alone exceeds the motor -> the target collapses onto q
    q, kp, kd, effort = np.zeros(4), np.full(4, 100.0), np.full(4, 2.0), np.full(4, 88.0)
    dq = np.array([10.0, -10.0, 50.0, -50.0])
    out = clamp_torque_aware(np.full(4, 1.0), q, kp, effort, kd, dq)
    np.testing.assert_allclose(out, [0.68, 0.68, 0.0, 0.0])
    # the PD never asks more than the motor gives: |kp (q_des - q)| + kd |dq| <= effort
    assert np.all(np.abs(kp * (out - q)) + np.minimum(kd * np.abs(dq), effort) <= effort + 1e-9)


def test_filter_clamps_torque_then_joint_limits() -> None:
    f = SafetyFilter.for_joints(["left_knee_joint", "left_ankle_roll_joint"], SafetyCfg())
    q, dq = np.array([2.8, 0.0]), np.zeros(2)
    kp, kd = np.array([200.0, 20.0]), np.array([5.0, 0.1])
    # knee: torque reach 139/200 = 0.695 -> 3.495, then the upper limit 2.8798
    # ankle roll: reach 50/20 = 2.5 -> -1.0 passes, then the lower limit -0.2618
    np.testing.assert_allclose(f.targets(np.array([4.0, -1.0]), q, dq, kp, kd), [2.8798, -0.2618])
    margin = SafetyFilter.for_joints(["left_knee_joint"], SafetyCfg(position_margin_rad=0.1))
    zero = np.array([0.0])
    assert margin.targets(np.array([9.0]), np.array([2.7]), zero, zero, zero)[0] == pytest.approx(2.7798)


def test_staleness_thresholds() -> None:
    cfg = SafetyCfg(stale_warn_s=0.010, stale_damp_s=0.050)
    assert staleness(0.002, cfg) is Staleness.FRESH
    assert staleness(0.011, cfg) is Staleness.WARN
    assert staleness(0.050, cfg) is Staleness.WARN
    assert staleness(0.051, cfg) is Staleness.STALE
    assert staleness(None, cfg) is Staleness.STALE
    assert staleness(math.nan, cfg) is Staleness.STALE
    # received "in the future": a receive-time race (fresh), or before the sim clock jumped back
    assert staleness(-0.001, cfg) is Staleness.FRESH
    assert staleness(-5.0, cfg) is Staleness.STALE


def test_tilt_hand_computed() -> None:
    s = math.sqrt(0.5)
    assert tilt_rad(UPRIGHT) == 0.0
    assert tilt_rad(np.array([s, s, 0, 0])) == pytest.approx(math.pi / 2)  # rolled 90°
    assert tilt_rad(np.array([math.cos(0.3), 0, math.sin(0.3), 0])) == pytest.approx(0.6)  # pitch 0.6
    assert tilt_rad(np.array([s, 0, 0, s])) == pytest.approx(0.0)  # yaw only


def test_state_detectors_name_the_cause() -> None:
    f = SafetyFilter.for_joints(g1.MOTOR_ORDER, SafetyCfg(velocity_limit_factor=1.5, max_tilt_rad=1.0))
    q, dq = np.zeros(29), np.zeros(29)
    assert f.state_fault(q, dq, UPRIGHT) == ""
    fast = dq.copy()
    fast[3] = 31.0  # left knee: 1.5 * 20 = 30 rad/s
    assert f.state_fault(q, fast, UPRIGHT) == "joint velocity left_knee_joint |dq|=31.0 rad/s > 30.0"
    fast[3] = 29.0
    assert f.state_fault(q, fast, UPRIGHT) == ""
    tilted = np.array([math.cos(0.55), math.sin(0.55), 0, 0])  # 1.1 rad roll
    assert f.state_fault(q, dq, tilted) == "tilt 1.10 rad > 1.00"
    nan_q = q.copy()
    nan_q[12] = np.nan
    assert "waist_yaw_joint" in f.state_fault(nan_q, dq, UPRIGHT)
    assert "IMU" in f.state_fault(q, dq, np.array([np.nan, 0, 0, 0]))


def test_non_finite_names() -> None:
    assert non_finite(("a", "b", "c"), np.array([0.0, np.inf, np.nan])) == ["b", "c"]
