"""Batched quaternion maths in numpy. Convention: ``w, x, y, z`` (MuJoCo's and Unitree's), last axis.

Hot-loop functions of the env; written without scipy so they broadcast over ``(num_envs, bodies, 4)``.
"""

from __future__ import annotations

import numpy as np


def _out(*arrays: np.ndarray, last: int) -> np.ndarray:
    shape = np.broadcast_shapes(*(x.shape[:-1] for x in arrays))
    return np.empty((*shape, last), dtype=np.result_type(*arrays, np.float64))


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.cross`` over the last axis, without its axis juggling (it dominates small batches)."""
    out = _out(a, b, last=3)
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out[..., 0] = a1 * b2 - a2 * b1
    out[..., 1] = a2 * b0 - a0 * b2
    out[..., 2] = a0 * b1 - a1 * b0
    return out


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a ⊗ b``."""
    out = _out(a, b, last=4)
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    out[..., 0] = aw * bw - ax * bx - ay * by - az * bz
    out[..., 1] = aw * bx + ax * bw + ay * bz - az * by
    out[..., 2] = aw * by - ax * bz + ay * bw + az * bx
    out[..., 3] = aw * bz + ax * by - ay * bx + az * bw
    return out


def conj(q: np.ndarray) -> np.ndarray:
    """Conjugate (the inverse of a unit quaternion)."""
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4): body → world."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * cross(u, v)
    return v + w * t + cross(u, t)


def rotate_inv(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors by the inverse of ``q``: world → body."""
    return rotate(conj(q), v)


def from_rotvec(r: np.ndarray) -> np.ndarray:
    """Axis-angle vectors (..., 3) to unit quaternions."""
    angle = np.linalg.norm(r, axis=-1, keepdims=True)
    half = 0.5 * angle
    # sin(x/2)/x → 1/2 as x → 0; the Taylor branch keeps small angles exact.
    k = np.where(angle > 1e-8, np.sin(half) / np.maximum(angle, 1e-12), 0.5 - angle**2 / 48.0)
    return np.concatenate((np.cos(half), r * k), axis=-1)


def to_rotvec(q: np.ndarray) -> np.ndarray:
    """Unit quaternions to axis-angle vectors with angle in [0, π] (the shorter way round)."""
    q = np.where(q[..., :1] < 0.0, -q, q)
    s = np.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., :1])
    k = np.where(s > 1e-8, angle / np.maximum(s, 1e-12), 2.0)
    return q[..., 1:] * k


def angle(q: np.ndarray) -> np.ndarray:
    """Rotation angle of unit quaternions, in [0, π]."""
    return 2.0 * np.arctan2(np.linalg.norm(q[..., 1:], axis=-1), np.abs(q[..., 0]))


def slerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Spherical interpolation from ``a`` to ``b`` by ``t`` (broadcast to a trailing axis of 1)."""
    t = np.asarray(t)[..., None]
    dot = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(dot < 0.0, -b, b)
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    sin_theta = np.sin(theta)
    near = sin_theta < 1e-6  # nearly parallel: lerp is exact enough and avoids 0/0
    wa = np.where(near, 1.0 - t, np.sin((1.0 - t) * theta) / np.where(near, 1.0, sin_theta))
    wb = np.where(near, t, np.sin(t * theta) / np.where(near, 1.0, sin_theta))
    out = wa * a + wb * b
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def yaw(q: np.ndarray) -> np.ndarray:
    """Heading angle (rotation about world z) of unit quaternions."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def from_yaw(psi: np.ndarray) -> np.ndarray:
    """Quaternions of rotations by ``psi`` about world z."""
    zeros = np.zeros_like(psi)
    return np.stack((np.cos(0.5 * psi), zeros, zeros, np.sin(0.5 * psi)), axis=-1)


def from_xyzw(q: np.ndarray) -> np.ndarray:
    """Reorder scipy/Isaac Gym ``x, y, z, w`` quaternions to ``w, x, y, z``."""
    return np.concatenate((q[..., 3:], q[..., :3]), axis=-1)


def angular_velocity(q: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity from a time series of orientations (time on axis 0).

    Forward difference ``log(q[t+1] ⊗ q[t]⁻¹) / dt``; the last sample repeats the previous one.
    """
    dq = mul(q[1:], conj(q[:-1]))
    w = to_rotvec(dq) / dt
    return np.concatenate((w, w[-1:]), axis=0)
