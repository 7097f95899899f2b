"""Reference motions after FK, and a library that samples them at arbitrary times (lerp/slerp)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.ndimage import gaussian_filter1d

from asap_core import quat
from asap_core.arrays import Array
from asap_core.motion import MotionClip, frame_blend, lerp_frames
from asap_sim.kinematics import G1Kinematics


@dataclass(frozen=True)
class MotionState:
    """The reference at a batch of times. Point 0 is the root (pelvis); world frame; ``(N, ...)``."""

    dof_pos: Array
    dof_vel: Array
    pos_w: Array
    """(N, 27, 3) tracked point positions."""
    quat_w: Array
    """(N, 27, 4) tracked point orientations (wxyz)."""
    lin_vel_w: Array
    ang_vel_w: Array


@dataclass(frozen=True)
class ReferenceMotion:
    """One clip after FK, frame-indexed, joints in the requested (policy) order."""

    name: str
    fps: float
    joint_names: tuple[str, ...]
    dof_pos: np.ndarray
    """(T, J)"""
    dof_vel: np.ndarray
    pos_w: np.ndarray
    """(T, 27, 3)"""
    quat_w: np.ndarray
    lin_vel_w: np.ndarray
    ang_vel_w: np.ndarray

    @property
    def num_frames(self) -> int:
        """Number of frames."""
        return self.dof_pos.shape[0]

    @property
    def duration_s(self) -> float:
        """``(T - 1) / fps``."""
        return (self.num_frames - 1) / self.fps


def reference_from_clip(
    clip: MotionClip, kin: G1Kinematics, joint_names: Sequence[str], smooth_frames: float = 2.0
) -> ReferenceMotion:
    """FK a clip and derive velocities as ASAP's motion library does.

    Point velocities are finite differences smoothed by a Gaussian of ``smooth_frames`` frames (ASAP: σ = 2),
    joint velocities plain finite differences. Joints the clip lacks take 0.
    """
    dt = 1.0 / clip.fps
    pos, rot = kin.points(kin.qpos(clip))
    lin = np.gradient(pos, dt, axis=0)
    ang = np.stack([quat.angular_velocity(rot[:, b], dt) for b in range(rot.shape[1])], axis=1)
    if smooth_frames > 0:
        lin = gaussian_filter1d(lin, smooth_frames, axis=0, mode="nearest")
        ang = gaussian_filter1d(ang, smooth_frames, axis=0, mode="nearest")
    dof = clip.joints(tuple(joint_names))  # joints the clip lacks take 0 (ASAP's wrists)
    dof_vel = np.gradient(dof, dt, axis=0)
    return ReferenceMotion(clip.name, clip.fps, tuple(joint_names), dof, dof_vel, pos, rot, lin, ang)


class MotionLibrary:
    """Several reference motions concatenated frame-wise, sampled per env by (motion id, time).

    Built from numpy motions; :meth:`to` gives the same library as torch tensors on a device, sampled
    there by the env with the same code."""

    def __init__(self, motions: Sequence[ReferenceMotion]) -> None:
        """Concatenate; all motions must share the same joint order."""
        if not motions:
            raise ValueError("a motion library needs at least one motion")
        names = {m.joint_names for m in motions}
        if len(names) != 1:
            raise ValueError("all motions of a library must use the same joint order")
        self.motions = tuple(motions)
        self.joint_names = motions[0].joint_names
        self.fps = np.array([m.fps for m in motions])
        self.num_frames = np.array([m.num_frames for m in motions])
        self.duration_s = np.array([m.duration_s for m in motions])
        self._start = np.concatenate(([0], np.cumsum(self.num_frames)[:-1]))
        cat = lambda field: np.concatenate([getattr(m, field) for m in motions], axis=0)  # noqa: E731
        self._dof_pos, self._dof_vel = cat("dof_pos"), cat("dof_vel")
        self._pos, self._quat = cat("pos_w"), cat("quat_w")
        self._lin, self._ang = cat("lin_vel_w"), cat("ang_vel_w")

    @property
    def num_motions(self) -> int:
        """Number of motions."""
        return len(self.motions)

    _ARRAYS = ("fps", "num_frames", "duration_s", "_start", "_dof_pos", "_dof_vel", "_pos", "_quat",
               "_lin", "_ang")

    def to(self, device: str | torch.device, dtype: torch.dtype = torch.float64) -> MotionLibrary:
        """The same library with its arrays as torch tensors on ``device`` (floats in ``dtype``)."""
        out = copy.copy(self)
        for name in self._ARRAYS:
            value = torch.as_tensor(getattr(self, name), device=device)
            setattr(out, name, value.to(dtype) if value.is_floating_point() else value)
        return out

    def phase(self, motion_ids: Array, times_s: Array) -> Array:
        """ASAP's phase ``t / T`` in [0, 1]."""
        return (times_s / self.duration_s[motion_ids]).clip(0.0, 1.0)

    def sample(self, motion_ids: Array, times_s: Array) -> MotionState:
        """The reference of each motion at each time (clamped to the clip), interpolated between frames
        (numpy arrays, or tensors after :meth:`to`)."""
        f0, f1, w = frame_blend(
            times_s, self.duration_s[motion_ids], self.fps[motion_ids], self.num_frames[motion_ids]
        )
        i0, i1 = self._start[motion_ids] + f0, self._start[motion_ids] + f1

        def lerp(a: np.ndarray) -> np.ndarray:
            return lerp_frames(a, i0, i1, w)

        return MotionState(
            dof_pos=lerp(self._dof_pos),
            dof_vel=lerp(self._dof_vel),
            pos_w=lerp(self._pos),
            quat_w=quat.slerp(self._quat[i0], self._quat[i1], w[:, None]),
            lin_vel_w=lerp(self._lin),
            ang_vel_w=lerp(self._ang),
        )
