"""Loaders for the motion formats users have, and the package's own ``.npz`` clip format.

- ASAP / PHC: joblib ``.pkl`` ``{clip: {root_trans_offset, pose_aa, fps, [action]}}``; joints are
  ``pose_aa[:, 1:24]`` (axis·angle, asap23 order), the root orientation ``pose_aa[:, 0]`` (rotation vector).
- BeyondMimic / mjlab: ``.npz`` with ``fps, joint_pos, body_pos_w, body_quat_w, ...``; joints in the
  training robot's order (name it), quaternions wxyz.
- Unitree LAFAN1 retargeting: ``.csv`` rows ``x y z qx qy qz qw`` + 29 joints in motor order.
- asap (this package): ``.npz`` with ``name, fps, root_pos_w, root_quat_w, joint_names, joint_pos,
  [action]``; joints by name, quaternions wxyz.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from asap_core import g1
from asap_training import quat
from asap_training.motion.clip import MotionClip
from asap_training.motion.safe_pickle import safe_load

ASAP_NPZ_VERSION = 1


class MotionFormatError(ValueError):
    """A motion file does not have the layout its format promises."""


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


def load_beyondmimic_npz(path: str | Path, joint_names: tuple[str, ...] | None = None) -> MotionClip:
    """A BeyondMimic/mjlab motion ``.npz``; the root is body 0 (the pelvis).

    Its ``joint_pos`` columns follow the training robot's joint order, which the file does not name:
    pass ``joint_names`` (BeyondMimic: ``g1.names("isaaclab")``; mjlab: ``g1.names("motor")``).
    """
    with np.load(path, allow_pickle=False) as z:
        missing = {"fps", "joint_pos", "body_pos_w", "body_quat_w"} - set(z.files)
        if missing:
            raise MotionFormatError(f"{path}: not a BeyondMimic/mjlab motion, lacks {sorted(missing)}")
        joint_pos = np.asarray(z["joint_pos"], dtype=np.float64)
        names = tuple(joint_names) if joint_names is not None else g1.names("isaaclab")
        if joint_pos.shape[1] != len(names):
            raise MotionFormatError(
                f"{path}: {joint_pos.shape[1]} joint columns but {len(names)} joint "
                "names; pass joint_names for this file's robot"
            )
        return MotionClip(
            name=Path(path).stem,
            fps=float(np.asarray(z["fps"]).reshape(-1)[0]),
            root_pos_w=np.asarray(z["body_pos_w"][:, 0], dtype=np.float64),
            root_quat_w=np.asarray(z["body_quat_w"][:, 0], dtype=np.float64),
            joint_names=names,
            joint_pos=joint_pos,
        )


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


def save_clip(clip: MotionClip, path: str | Path) -> None:
    """Write a clip in this package's ``.npz`` format (names travel with the data)."""
    arrays: dict[str, Any] = {  # Any: ** into savez_compressed, whose other keywords are not arrays
        "format_version": np.array(ASAP_NPZ_VERSION),
        "name": np.array(clip.name),
        "fps": np.array(clip.fps),
        "root_pos_w": clip.root_pos_w.astype(np.float32),
        "root_quat_w": clip.root_quat_w.astype(np.float32),
        "joint_names": np.array(clip.joint_names),
        "joint_pos": clip.joint_pos.astype(np.float32),
    }
    if clip.action is not None:
        arrays["action"] = clip.action.astype(np.float32)
    np.savez_compressed(path, **arrays)


def load_clip(path: str | Path) -> MotionClip:
    """Read a clip written by :func:`save_clip`."""
    with np.load(path, allow_pickle=False) as z:
        if "format_version" not in z.files or int(z["format_version"]) != ASAP_NPZ_VERSION:
            raise MotionFormatError(f"{path}: not an asap motion .npz (version {ASAP_NPZ_VERSION})")
        quat_w = np.asarray(z["root_quat_w"], dtype=np.float64)
        return MotionClip(
            name=str(z["name"]),
            fps=float(z["fps"]),
            root_pos_w=np.asarray(z["root_pos_w"], dtype=np.float64),
            root_quat_w=quat_w / np.linalg.norm(quat_w, axis=-1, keepdims=True),
            joint_names=tuple(str(n) for n in z["joint_names"]),
            joint_pos=np.asarray(z["joint_pos"], dtype=np.float64),
            action=np.asarray(z["action"], dtype=np.float64) if "action" in z.files else None,
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
        with np.load(path, allow_pickle=False) as z:
            ours = "format_version" in z.files
        return [load_clip(path)] if ours else [load_beyondmimic_npz(path, npz_joint_names)]
    raise MotionFormatError(f"{path}: unknown motion format {suffix!r}; known: .pkl, .npz, .csv")
