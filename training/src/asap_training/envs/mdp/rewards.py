"""Reward terms (paper Table I): pure functions ``f(env, **params) -> (N,)``; weights live in the config.

``ē`` below is the mean over the selected points and xyz of the squared error against the reference at the
same motion time, in the world frame. The env's arrays are torch tensors on its device; the terms are
written for numpy arrays too (:func:`asap_core.arrays.namespace`), which the hand-computed tests use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from asap_core import quat
from asap_core.arrays import namespace
from asap_core.g1 import LOWER_BODY, UPPER_BODY, point_indices
from asap_core.quat import Array

if TYPE_CHECKING:
    from asap_training.envs.tracking_env import TrackingEnv

_LOWER = point_indices(LOWER_BODY)
_UPPER = point_indices(UPPER_BODY)


def _mean_sq(a: Array, b: Array) -> Array:
    """Mean over all non-env axes of the squared difference."""
    d = (a - b).reshape(a.shape[0], -1)
    return (d * d).mean(axis=1)


def body_pos_upper_lower_exp(
    env: TrackingEnv, sigma_lower: float, sigma_upper: float, w_lower: float, w_upper: float
) -> Array:
    """ASAP's ``teleop_body_position_extend``: loose kernel on the lower body, tight on the upper."""
    p, r = env.points.pos_w, env.ref.pos_w
    xp = namespace(p)
    return w_lower * xp.exp(-_mean_sq(p[:, _LOWER], r[:, _LOWER]) / sigma_lower) + w_upper * xp.exp(
        -_mean_sq(p[:, _UPPER], r[:, _UPPER]) / sigma_upper
    )


def points_pos_exp(env: TrackingEnv, points: Sequence[str], sigma: float) -> Array:
    """``exp(-ē/σ)`` over named points (VR 3-point: hands + head; feet)."""
    idx = point_indices(tuple(points))
    return namespace(env.q).exp(-_mean_sq(env.points.pos_w[:, idx], env.ref.pos_w[:, idx]) / sigma)


def body_rot_exp(env: TrackingEnv, sigma: float) -> Array:
    """``exp(-mean_b angle(q_ref q⁻¹)² / σ)`` over the tracked points."""
    ang = quat.angle(quat.mul(env.ref.quat_w, quat.conj(env.points.quat_w)))
    return namespace(ang).exp(-(ang * ang).mean(axis=1) / sigma)


def body_lin_vel_exp(env: TrackingEnv, sigma: float) -> Array:
    """``exp(-ē/σ)`` of point linear velocities."""
    return namespace(env.q).exp(-_mean_sq(env.points.lin_vel_w, env.ref.lin_vel_w) / sigma)


def body_ang_vel_exp(env: TrackingEnv, sigma: float) -> Array:
    """``exp(-ē/σ)`` of point angular velocities."""
    return namespace(env.q).exp(-_mean_sq(env.points.ang_vel_w, env.ref.ang_vel_w) / sigma)


def dof_pos_exp(env: TrackingEnv, sigma: float) -> Array:
    """``exp(-mean_j Δq² / σ)``."""
    return namespace(env.q).exp(-_mean_sq(env.q, env.ref.dof_pos) / sigma)


def dof_vel_exp(env: TrackingEnv, sigma: float) -> Array:
    """``exp(-mean_j Δq̇² / σ)``."""
    return namespace(env.q).exp(-_mean_sq(env.dq, env.ref.dof_vel) / sigma)


def torques_l2(env: TrackingEnv) -> Array:
    """``Σ τ²`` over the policy joints."""
    return (env.tau**2).sum(axis=1)


def action_rate_l2(env: TrackingEnv) -> Array:
    """``Σ (a_t − a_{t−1})²``."""
    return ((env.action - env.prev_action) ** 2).sum(axis=1)


def feet_gravity_xy_norm(env: TrackingEnv) -> Array:
    """``Σ_feet ‖g_xy‖`` with g the gravity direction in the foot frame (0 when the sole is level)."""
    feet_quat = env.state.body_quat_w[:, env.feet]
    xp = namespace(feet_quat)
    down = xp.zeros_like(feet_quat[..., 1:])
    down[..., 2] = -1.0
    return xp.linalg.norm(quat.rotate_inv(feet_quat, down)[..., :2], axis=-1).sum(axis=1)


def feet_heading_error(env: TrackingEnv) -> Array:
    """``Σ_feet |wrap(yaw_foot − yaw_root)|``."""
    diff = quat.yaw(env.state.body_quat_w[:, env.feet]) - quat.yaw(env.state.root_quat_w)[:, None]
    xp = namespace(diff)
    return xp.abs(xp.arctan2(xp.sin(diff), xp.cos(diff))).sum(axis=1)


def feet_slip_speed(env: TrackingEnv, force_threshold: float) -> Array:
    """``Σ_feet ‖v_foot‖ · [F_contact > threshold]``."""
    speed = namespace(env.q).linalg.norm(env.state.body_lin_vel_w[:, env.feet], axis=-1)
    return (speed * (env.state.foot_force > force_threshold)).sum(axis=1)


def dof_pos_limits(env: TrackingEnv) -> Array:
    """``Σ`` distance of q outside the soft position limits."""
    lo, hi = env.soft_pos_limits
    return ((lo - env.q).clip(0.0, None) + (env.q - hi).clip(0.0, None)).sum(axis=1)


def dof_vel_limits(env: TrackingEnv) -> Array:
    """``Σ clip(|q̇| − soft·q̇max, 0, 1)``."""
    return (abs(env.dq) - env.soft_vel_limit).clip(0.0, 1.0).sum(axis=1)


def torque_limits(env: TrackingEnv) -> Array:
    """``Σ clip(|τ| − soft·τmax, 0, 1)``."""
    return (abs(env.tau) - env.soft_torque_limit).clip(0.0, 1.0).sum(axis=1)


def terminated(env: TrackingEnv) -> Array:
    """1 on a non-timeout termination."""
    return env.terminated * 1.0


def action_norm_exp(env: TrackingEnv) -> Array:
    """``exp(‖a‖) − 1``: ASAP's minimal-action-norm penalty of the delta model (0 at a = 0)."""
    xp = namespace(env.action)
    return xp.expm1(xp.linalg.norm(env.action, axis=1))
