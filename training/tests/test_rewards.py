"""Reward terms against numbers worked out by hand (a fake env that carries only what the terms read)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from asap_core.g1 import TRACKED_POINTS, UPPER_BODY, point_indices
from asap_training.envs.mdp import observations as obs_terms
from asap_training.envs.mdp import rewards as r
from asap_training.motion import MotionState

P = len(TRACKED_POINTS)
IDENTITY = np.array([1.0, 0, 0, 0])


def state(pos=None, quat=None, lin=None, ang=None, dof=None, dof_vel=None) -> MotionState:
    z = np.zeros((1, P, 3))
    return MotionState(
        dof_pos=np.zeros((1, 23)) if dof is None else dof,
        dof_vel=np.zeros((1, 23)) if dof_vel is None else dof_vel,
        pos_w=z.copy() if pos is None else pos,
        quat_w=np.tile(IDENTITY, (1, P, 1)) if quat is None else quat,
        lin_vel_w=z.copy() if lin is None else lin,
        ang_vel_w=z.copy() if ang is None else ang,
    )


def fake_env(**kw) -> SimpleNamespace:
    base = dict(
        points=state(),
        ref=state(),
        q=np.zeros((1, 23)),
        dq=np.zeros((1, 23)),
        tau=np.zeros((1, 23)),
        action=np.zeros((1, 23)),
        prev_action=np.zeros((1, 23)),
        feet=np.array([6, 12]),
        terminated=np.array([False]),
        soft_pos_limits=(np.full(23, -1.0), np.full(23, 1.0)),
        soft_vel_limit=np.full(23, 10.0),
        soft_torque_limit=np.full(23, 20.0),
        state=SimpleNamespace(
            body_quat_w=np.tile(IDENTITY, (1, 24, 1)),
            root_quat_w=IDENTITY[None],
            body_lin_vel_w=np.zeros((1, 24, 3)),
            foot_force=np.zeros((1, 2)),
            root_pos_w=np.zeros((1, 3)),
        ),
    )
    base.update(kw)
    return SimpleNamespace(**base)


def test_body_position_upper_lower():
    # every upper point off by 0.1 m in x: ē_upper = 0.1²/3 = 0.003333; lower exact
    pos = np.zeros((1, P, 3))
    pos[0, point_indices(UPPER_BODY), 0] = 0.1
    env = fake_env(points=state(pos=pos))
    got = r.body_pos_upper_lower_exp(env, sigma_lower=0.1, sigma_upper=0.03, w_lower=0.5, w_upper=1.0)
    assert got[0] == pytest.approx(0.5 * 1.0 + 1.0 * np.exp(-(0.01 / 3) / 0.03))  # 0.5 + 0.8948


def test_vr_3point_and_feet():
    pos = np.zeros((1, P, 3))
    pos[0, point_indices(("head_link",)), 2] = 0.3  # one of 3 points, one of 3 axes: ē = 0.09/9 = 0.01
    env = fake_env(points=state(pos=pos))
    got = r.points_pos_exp(env, points=("left_hand_link", "right_hand_link", "head_link"), sigma=0.03)
    assert got[0] == pytest.approx(np.exp(-0.01 / 0.03))
    assert (
        r.points_pos_exp(env, points=("left_ankle_roll_link", "right_ankle_roll_link"), sigma=0.03)[0] == 1.0
    )


def test_body_rotation_uses_the_squared_angle():
    quat = np.tile(IDENTITY, (1, P, 1))
    quat[0, 0] = [np.cos(0.25), np.sin(0.25), 0, 0]  # 0.5 rad about x on one point of 27
    got = r.body_rot_exp(fake_env(points=state(quat=quat)), sigma=1.0)
    assert got[0] == pytest.approx(np.exp(-(0.5**2) / P))


def test_dof_terms_and_velocities():
    q = np.zeros((1, 23))
    q[0, 3] = 0.46  # ē = 0.2116 / 23 = 0.0092
    env = fake_env(q=q, dq=np.full((1, 23), 2.0), points=state(lin=np.ones((1, P, 3))))
    assert r.dof_pos_exp(env, sigma=1.0)[0] == pytest.approx(np.exp(-0.0092))
    assert r.dof_vel_exp(env, sigma=1.0)[0] == pytest.approx(np.exp(-4.0))
    assert r.body_lin_vel_exp(env, sigma=1.0)[0] == pytest.approx(np.exp(-1.0))
    assert r.body_ang_vel_exp(env, sigma=1.0)[0] == 1.0


def test_penalties():
    a, prev = np.zeros((1, 23)), np.zeros((1, 23))
    a[0, :2] = [1.0, -2.0]
    q = np.zeros((1, 23))
    q[0, 0], q[0, 1] = 1.5, -1.2  # 0.5 and 0.2 outside ±1
    dq = np.zeros((1, 23))
    dq[0, 0], dq[0, 1] = 10.4, -13.0  # 0.4 over, and 3 over → clipped to 1
    tau = np.zeros((1, 23))
    tau[0, 0] = 25.0  # 5 over → 1
    env = fake_env(action=a, prev_action=prev, q=q, dq=dq, tau=tau)
    assert r.action_rate_l2(env)[0] == pytest.approx(5.0)
    assert r.dof_pos_limits(env)[0] == pytest.approx(0.7)
    assert r.dof_vel_limits(env)[0] == pytest.approx(1.4)
    assert r.torque_limits(env)[0] == pytest.approx(1.0)
    assert r.torques_l2(env)[0] == pytest.approx(625.0)
    assert r.terminated(fake_env(terminated=np.array([True])))[0] == 1.0


def test_feet_terms():
    body_q = np.tile(IDENTITY, (1, 24, 1))
    body_q[0, 6] = [np.cos(0.1), np.sin(0.1), 0, 0]  # left foot rolled 0.2 rad: ‖g_xy‖ = sin 0.2
    body_q[0, 12] = [np.cos(0.15), 0, 0, np.sin(0.15)]  # right foot yawed 0.3 rad
    lin = np.zeros((1, 24, 3))
    lin[0, 6] = [0.3, 0.4, 0]  # 0.5 m/s, left in contact
    lin[0, 12] = [1.0, 0, 0]  # right in the air
    st = SimpleNamespace(
        body_quat_w=body_q,
        root_quat_w=IDENTITY[None],
        body_lin_vel_w=lin,
        foot_force=np.array([[50.0, 0.5]]),
        root_pos_w=np.zeros((1, 3)),
    )
    env = fake_env(state=st)
    assert r.feet_gravity_xy_norm(env)[0] == pytest.approx(np.sin(0.2))
    assert r.feet_heading_error(env)[0] == pytest.approx(0.3)
    assert r.feet_slip_speed(env, force_threshold=1.0)[0] == pytest.approx(0.5)
    np.testing.assert_array_equal(obs_terms.feet_contact(env), [[1.0, 0.0]])


def test_critic_local_terms_use_the_heading_frame():
    # robot yawed 90°: a reference 1 m ahead in world x is 1 m to the robot's right (−y in its heading frame)
    yaw90 = np.array([np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)])
    ref = np.zeros((1, P, 3))
    ref[..., 0] = 1.0
    st = SimpleNamespace(
        root_quat_w=yaw90[None], root_pos_w=np.zeros((1, 3)), root_lin_vel_w=np.array([[0, 2.0, 0]])
    )
    env = fake_env(state=st, ref=state(pos=ref))
    d = obs_terms.dif_local_body_pos(env).reshape(1, P, 3)
    np.testing.assert_allclose(d[0, 0], [0, -1, 0], atol=1e-12)
    np.testing.assert_allclose(
        obs_terms.local_ref_body_pos(env).reshape(1, P, 3)[0, 5], [0, -1, 0], atol=1e-12
    )
    np.testing.assert_allclose(obs_terms.base_lin_vel_b(env), [[2.0, 0, 0]], atol=1e-12)
