"""Batched quaternion maths on numpy arrays or torch tensors. Convention: ``w, x, y, z`` (MuJoCo's and
Unitree's), last axis.

The env's hot loop runs them on torch tensors on the simulator's device; motion preparation, ingest and
evaluation on numpy arrays. Written component-wise (no scipy, no axis juggling) so they broadcast over
``(num_envs, bodies, 4)``; :func:`asap_core.arrays.namespace` picks numpy or torch by the input's kind.
"""

from __future__ import annotations

from typing import Any

from asap_core.arrays import namespace

Array = Any
"""A numpy array or a torch tensor (all arguments of one call of the same kind)."""


def cross(a: Array, b: Array) -> Array:
    """Cross product over the last axis."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return namespace(a).stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def mul(a: Array, b: Array) -> Array:
    """Hamilton product ``a ⊗ b``."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return namespace(a).stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        axis=-1,
    )


def conj(q: Array) -> Array:
    """Conjugate (the inverse of a unit quaternion)."""
    return namespace(q).concatenate((q[..., :1], -q[..., 1:]), axis=-1)


def rotate(q: Array, v: Array) -> Array:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4): body → world."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * cross(u, v)
    return v + w * t + cross(u, t)


def rotate_inv(q: Array, v: Array) -> Array:
    """Rotate vectors by the inverse of ``q``: world → body."""
    return rotate(conj(q), v)


def from_rotvec(r: Array) -> Array:
    """Axis-angle vectors (..., 3) to unit quaternions."""
    xp = namespace(r)
    angle = xp.linalg.norm(r, axis=-1, keepdims=True)
    half = 0.5 * angle
    # sin(x/2)/x → 1/2 as x → 0; the Taylor branch keeps small angles exact.
    k = xp.where(angle > 1e-8, xp.sin(half) / angle.clip(1e-12, None), 0.5 - angle**2 / 48.0)
    return xp.concatenate((xp.cos(half), r * k), axis=-1)


def to_rotvec(q: Array) -> Array:
    """Unit quaternions to axis-angle vectors with angle in [0, π] (the shorter way round)."""
    xp = namespace(q)
    q = xp.where(q[..., :1] < 0.0, -q, q)
    s = xp.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    angle = 2.0 * xp.arctan2(s, q[..., :1])
    k = xp.where(s > 1e-8, angle / s.clip(1e-12, None), 2.0)
    return q[..., 1:] * k


def angle(q: Array) -> Array:
    """Rotation angle of unit quaternions, in [0, π]."""
    xp = namespace(q)
    return 2.0 * xp.arctan2(xp.linalg.norm(q[..., 1:], axis=-1), xp.abs(q[..., 0]))


def slerp(a: Array, b: Array, t: Array) -> Array:
    """Spherical interpolation from ``a`` to ``b`` by ``t`` (broadcast to a trailing axis of 1)."""
    xp = namespace(a)
    t = t[..., None]
    dot = xp.sum(a * b, axis=-1, keepdims=True)
    b = xp.where(dot < 0.0, -b, b)
    dot = xp.abs(dot)
    theta = xp.arccos(dot.clip(-1.0, 1.0))
    sin_theta = xp.sin(theta)
    near = sin_theta < 1e-6  # nearly parallel: lerp is exact enough and avoids 0/0
    safe = xp.where(near, 1.0, sin_theta)
    wa = xp.where(near, 1.0 - t, xp.sin((1.0 - t) * theta) / safe)
    wb = xp.where(near, t, xp.sin(t * theta) / safe)
    out = wa * a + wb * b
    return out / xp.linalg.norm(out, axis=-1, keepdims=True)


def yaw(q: Array) -> Array:
    """Heading angle (rotation about world z) of unit quaternions."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return namespace(q).arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def from_yaw(psi: Array) -> Array:
    """Quaternions of rotations by ``psi`` about world z."""
    xp = namespace(psi)
    zeros = xp.zeros_like(psi)
    return xp.stack((xp.cos(0.5 * psi), zeros, zeros, xp.sin(0.5 * psi)), axis=-1)


def from_xyzw(q: Array) -> Array:
    """Reorder scipy/Isaac Gym ``x, y, z, w`` quaternions to ``w, x, y, z``."""
    return namespace(q).concatenate((q[..., 3:], q[..., :3]), axis=-1)


def angular_velocity(q: Array, dt: float) -> Array:
    """World-frame angular velocity from a time series of orientations (time on axis 0).

    Forward difference ``log(q[t+1] ⊗ q[t]⁻¹) / dt``; the last sample repeats the previous one.
    """
    dq = mul(q[1:], conj(q[:-1]))
    w = to_rotvec(dq) / dt
    return namespace(q).concatenate((w, w[-1:]), axis=0)
