"""Reward terms (paper Table I): pure functions ``f(env, **params) -> (N,)``; weights live in the config.

``ē`` below is the mean over the selected points and xyz of the squared error against the reference at the
same motion time, in the world frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from asap_training import quat
from asap_training.robot import LOWER_BODY, UPPER_BODY, point_indices

if TYPE_CHECKING:
    from asap_training.envs.tracking_env import TrackingEnv

_LOWER = point_indices(LOWER_BODY)
_UPPER = point_indices(UPPER_BODY)


def _mean_sq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mean over all non-env axes of the squared difference."""
    d = (a - b).reshape(a.shape[0], -1)
    return np.mean(d * d, axis=1)


def body_pos_upper_lower_exp(
    env: TrackingEnv, sigma_lower: float, sigma_upper: float, w_lower: float, w_upper: float
) -> np.ndarray:
    """ASAP's ``teleop_body_position_extend``: loose kernel on the lower body, tight on the upper."""
    p, r = env.points.pos_w, env.ref.pos_w
    return w_lower * np.exp(-_mean_sq(p[:, _LOWER], r[:, _LOWER]) / sigma_lower) + w_upper * np.exp(
        -_mean_sq(p[:, _UPPER], r[:, _UPPER]) / sigma_upper
    )


def points_pos_exp(env: TrackingEnv, points: Sequence[str], sigma: float) -> np.ndarray:
    """``exp(-ē/σ)`` over named points (VR 3-point: hands + head; feet)."""
    idx = point_indices(tuple(points))
    return np.exp(-_mean_sq(env.points.pos_w[:, idx], env.ref.pos_w[:, idx]) / sigma)


def body_rot_exp(env: TrackingEnv, sigma: float) -> np.ndarray:
    """``exp(-mean_b angle(q_ref q⁻¹)² / σ)`` over the tracked points."""
    ang = quat.angle(quat.mul(env.ref.quat_w, quat.conj(env.points.quat_w)))
    return np.exp(-np.mean(ang * ang, axis=1) / sigma)


def body_lin_vel_exp(env: TrackingEnv, sigma: float) -> np.ndarray:
    """``exp(-ē/σ)`` of point linear velocities."""
    return np.exp(-_mean_sq(env.points.lin_vel_w, env.ref.lin_vel_w) / sigma)


def body_ang_vel_exp(env: TrackingEnv, sigma: float) -> np.ndarray:
    """``exp(-ē/σ)`` of point angular velocities."""
    return np.exp(-_mean_sq(env.points.ang_vel_w, env.ref.ang_vel_w) / sigma)


def dof_pos_exp(env: TrackingEnv, sigma: float) -> np.ndarray:
    """``exp(-mean_j Δq² / σ)``."""
    return np.exp(-_mean_sq(env.q, env.ref.dof_pos) / sigma)


def dof_vel_exp(env: TrackingEnv, sigma: float) -> np.ndarray:
    """``exp(-mean_j Δq̇² / σ)``."""
    return np.exp(-_mean_sq(env.dq, env.ref.dof_vel) / sigma)


def torques_l2(env: TrackingEnv) -> np.ndarray:
    """``Σ τ²`` over the policy joints."""
    return np.sum(env.tau**2, axis=1)


def action_rate_l2(env: TrackingEnv) -> np.ndarray:
    """``Σ (a_t − a_{t−1})²``."""
    return np.sum((env.action - env.prev_action) ** 2, axis=1)


def feet_gravity_xy_norm(env: TrackingEnv) -> np.ndarray:
    """``Σ_feet ‖g_xy‖`` with g the gravity direction in the foot frame (0 when the sole is level)."""
    g = quat.rotate_inv(env.state.body_quat_w[:, env.feet], np.array([0.0, 0.0, -1.0]))
    return np.sum(np.linalg.norm(g[..., :2], axis=-1), axis=1)


def feet_heading_error(env: TrackingEnv) -> np.ndarray:
    """``Σ_feet |wrap(yaw_foot − yaw_root)|``."""
    diff = quat.yaw(env.state.body_quat_w[:, env.feet]) - quat.yaw(env.state.root_quat_w)[:, None]
    return np.sum(np.abs(np.arctan2(np.sin(diff), np.cos(diff))), axis=1)


def feet_slip_speed(env: TrackingEnv, force_threshold: float) -> np.ndarray:
    """``Σ_feet ‖v_foot‖ · [F_contact > threshold]``."""
    speed = np.linalg.norm(env.state.body_lin_vel_w[:, env.feet], axis=-1)
    return np.sum(speed * (env.state.foot_force > force_threshold), axis=1)


def dof_pos_limits(env: TrackingEnv) -> np.ndarray:
    """``Σ`` distance of q outside the soft position limits."""
    lo, hi = env.soft_pos_limits
    return np.sum(np.clip(lo - env.q, 0.0, None) + np.clip(env.q - hi, 0.0, None), axis=1)


def dof_vel_limits(env: TrackingEnv) -> np.ndarray:
    """``Σ clip(|q̇| − soft·q̇max, 0, 1)``."""
    return np.sum(np.clip(np.abs(env.dq) - env.soft_vel_limit, 0.0, 1.0), axis=1)


def torque_limits(env: TrackingEnv) -> np.ndarray:
    """``Σ clip(|τ| − soft·τmax, 0, 1)``."""
    return np.sum(np.clip(np.abs(env.tau) - env.soft_torque_limit, 0.0, 1.0), axis=1)


def terminated(env: TrackingEnv) -> np.ndarray:
    """1 on a non-timeout termination."""
    return env.terminated.astype(np.float64)


def action_norm_exp(env: TrackingEnv) -> np.ndarray:
    """``exp(‖a‖) − 1``: ASAP's minimal-action-norm penalty of the delta model (0 at a = 0)."""
    return np.expm1(np.linalg.norm(env.action, axis=1))
