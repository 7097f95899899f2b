"""Loaders for the motion formats users have; the ``.npz`` layouts (asap's and BeyondMimic's) are
:mod:`asap_core.motion`'s, which the robot side reads too.

- ASAP / PHC: joblib ``.pkl`` ``{clip: {root_trans_offset, pose_aa, fps, [action]}}``; joints are
  ``pose_aa[:, 1:24]`` (axis·angle, asap23 order), the root orientation ``pose_aa[:, 0]`` (rotation vector).
- Unitree LAFAN1 retargeting: ``.csv`` rows ``x y z qx qy qz qw`` + 29 joints in motor order.
- ``.npz``: :func:`asap_core.motion.load_npz`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from asap_core import g1, quat
from asap_core.motion import MotionClip, MotionFormatError, load_npz
from asap_training.motion.safe_pickle import safe_load


def load_asap_pkl(path: str | Path, joint_axes: Mapping[str, np.ndarray]) -> list[MotionClip]:
    """Clips of an ASAP/PHC ``.pkl`` (through the restricted unpickler).

    ``joint_axes`` maps each asap23 joint to its unit axis in its body frame (the model's ``jnt_axis``):
    ``pose_aa`` stores each 1-DoF joint as axis·angle, so the angle is its projection on the axis.
    """
    data = safe_load(path)
    if not isinstance(data, dict) or not data:
        raise MotionFormatError(f"{path}: expected a non-empty dict of clips, got {type(data).__name__}")
    names = g1.names("asap23")
    axes = np.stack([np.asarray(joint_axes[n], dtype=np.float64) for n in names])
    clips = []
    for key, c in data.items():
        missing = {"root_trans_offset", "pose_aa", "fps"} - set(c)
        if missing:
            raise MotionFormatError(f"{path}: clip {key!r} lacks {sorted(missing)}")
        pose_aa = np.asarray(c["pose_aa"], dtype=np.float64)
        if pose_aa.ndim != 3 or pose_aa.shape[1] < 1 + len(names):
            raise MotionFormatError(
                f"{path}: clip {key!r} pose_aa has shape {pose_aa.shape}, "
                f"expected (T, >= {1 + len(names)}, 3)"
            )
        action = c.get("action")
        clips.append(
            MotionClip(
                name=str(key),
                fps=float(c["fps"]),
                root_pos_w=np.asarray(c["root_trans_offset"], dtype=np.float64),
                root_quat_w=quat.from_rotvec(pose_aa[:, 0]),
                joint_names=names,
                joint_pos=np.einsum("tjk,jk->tj", pose_aa[:, 1 : 1 + len(names)], axes),
                action=None if action is None else np.asarray(action, dtype=np.float64),
            )
        )
    return clips


def load_lafan_csv(path: str | Path, fps: float = 30.0) -> MotionClip:
    """A Unitree LAFAN1-retargeting G1 ``.csv``: rows of root xyz, quaternion xyzw, 29 motor-order joints."""
    rows = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    names = g1.names("motor")
    if rows.shape[1] != 7 + len(names):
        raise MotionFormatError(
            f"{path}: {rows.shape[1]} columns, expected {7 + len(names)} "
            "(root xyz, quaternion xyzw, 29 joints)"
        )
    return MotionClip(
        name=Path(path).stem,
        fps=fps,
        root_pos_w=rows[:, :3],
        root_quat_w=quat.from_xyzw(rows[:, 3:7]),
        joint_names=names,
        joint_pos=rows[:, 7:],
    )


def load_motion(
    path: str | Path, joint_axes: Mapping[str, np.ndarray], npz_joint_names: tuple[str, ...] | None = None
) -> list[MotionClip]:
    """Load any supported file by its extension (and, for ``.npz``, its keys)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".pkl":
        return load_asap_pkl(path, joint_axes)
    if suffix == ".csv":
        return [load_lafan_csv(path)]
    if suffix == ".npz":
        return [load_npz(path, npz_joint_names)]
    raise MotionFormatError(f"{path}: unknown motion format {suffix!r}; known: .pkl, .npz, .csv")
