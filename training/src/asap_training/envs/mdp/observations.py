"""Privileged critic terms ``f(env) -> (N, dim)``. The actor's terms are asap_core's deploy terms
(``asap_core.observation.TERMS``), fed from the simulator state by the env, so train and deploy share code.
Tensors on the env's device, or numpy arrays (tests), like the reward terms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asap_core import quat
from asap_core.quat import Array

if TYPE_CHECKING:
    from asap_training.envs.tracking_env import TrackingEnv


def _heading_inv(env: TrackingEnv) -> Array:
    """Inverse heading rotation of the robot root (N, 1, 4): world vectors → its heading frame."""
    return quat.from_yaw(-quat.yaw(env.state.root_quat_w))[:, None]


def base_lin_vel_b(env: TrackingEnv) -> Array:
    """Pelvis linear velocity in the pelvis frame (not measured on the robot: privileged)."""
    return quat.rotate_inv(env.state.root_quat_w, env.state.root_lin_vel_w)


def base_height(env: TrackingEnv) -> Array:
    """Pelvis height above the floor."""
    return env.state.root_pos_w[:, 2:3]


def dif_local_body_pos(env: TrackingEnv) -> Array:
    """Reference − robot point positions, in the robot heading frame (ASAP's ``dif_local_rigid_body_pos``)."""
    d = quat.rotate(_heading_inv(env), env.ref.pos_w - env.points.pos_w)
    return d.reshape(d.shape[0], -1)


def local_ref_body_pos(env: TrackingEnv) -> Array:
    """Reference point positions relative to the robot root, heading frame (``local_ref_rigid_body_pos``)."""
    d = quat.rotate(_heading_inv(env), env.ref.pos_w - env.state.root_pos_w[:, None])
    return d.reshape(d.shape[0], -1)


def feet_contact(env: TrackingEnv) -> Array:
    """Per foot, 1 when the floor pushes on it (> 1 N)."""
    return (env.state.foot_force > 1.0) * 1.0
