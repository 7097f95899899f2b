"""Motion clips: a root trajectory and joint angles by name at a fixed rate, their ``.npz`` files, the
clips asap ships, and sampling frames by time.

Training (motion library, ``asap-author``) and the robot-side monitor read the same files through this
module; a clip's forward kinematics is :mod:`asap_sim.kinematics` (MuJoCo). Two ``.npz`` layouts (no
pickle), told apart by their keys:

- asap (:func:`save_clip`): ``format_version, name, fps, root_pos_w, root_quat_w, joint_names, joint_pos,
  [action]``; joints by name, quaternions wxyz.
- BeyondMimic / mjlab: ``fps, joint_pos, body_pos_w, body_quat_w, ...``; joints in the training robot's
  order, which the file does not name; quaternions wxyz.

The ingest formats of training (ASAP's ``.pkl``, LAFAN1 ``.csv``) are ``asap_training.motion.formats``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from asap_core import g1
from asap_core.arrays import as_index, namespace
from asap_core.joint_map import JointMap

ASAP_NPZ_VERSION = 1
CLIP_DIR = Path(__file__).resolve().parent / "clips"
"""The clips asap ships (authored by ``asap-author``), tracked by the shipped policies."""


class MotionFormatError(ValueError):
    """A motion file does not have the layout its format promises."""


@dataclass(frozen=True)
class MotionClip:
    """A retargeted G1 motion sampled at a fixed rate. Units: m, rad; quaternions ``w, x, y, z``."""

    name: str
    fps: float
    root_pos_w: np.ndarray
    """(T, 3) pelvis position in the world."""
    root_quat_w: np.ndarray
    """(T, 4) pelvis orientation in the world."""
    joint_names: tuple[str, ...]
    """Names of the columns of ``joint_pos``; joints the clip lacks stay at 0 (e.g. ASAP's wrists)."""
    joint_pos: np.ndarray
    """(T, J) joint angles."""
    action: np.ndarray | None = field(default=None)
    """(T, 23) recorded policy actions in normalized units, when the clip was recorded from a policy."""

    def __post_init__(self) -> None:
        t = self.root_pos_w.shape[0]
        if self.root_pos_w.shape != (t, 3) or self.root_quat_w.shape != (t, 4):
            raise ValueError(
                f"clip {self.name!r}: root arrays must be (T,3) and (T,4), got "
                f"{self.root_pos_w.shape} and {self.root_quat_w.shape}"
            )
        if self.joint_pos.shape != (t, len(self.joint_names)):
            raise ValueError(
                f"clip {self.name!r}: joint_pos {self.joint_pos.shape} does not match "
                f"{t} frames x {len(self.joint_names)} joints"
            )
        if t < 2 or self.fps <= 0:
            raise ValueError(f"clip {self.name!r}: needs >= 2 frames and fps > 0 (got {t}, {self.fps})")

    @property
    def num_frames(self) -> int:
        """Number of frames T."""
        return int(self.root_pos_w.shape[0])

    @property
    def duration_s(self) -> float:
        """Length in seconds, ``(T - 1) / fps`` (ASAP's motion length)."""
        return (self.num_frames - 1) / self.fps

    def joints(self, joint_names: tuple[str, ...] | list[str]) -> np.ndarray:
        """(T, len(joint_names)) joint angles in that order: joints the clip lacks take 0 (ASAP's
        wrists), clip joints not asked for are left out."""
        shared = [n for n in self.joint_names if n in joint_names]
        columns = self.joint_pos[:, [self.joint_names.index(n) for n in shared]]
        return JointMap.from_names(shared, tuple(joint_names)).apply(columns)


def save_clip(clip: MotionClip, path: str | Path) -> None:
    """Write a clip in asap's ``.npz`` layout (names travel with the data)."""
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


def load_beyondmimic_npz(path: str | Path, joint_names: tuple[str, ...] | None = None) -> MotionClip:
    """A BeyondMimic/mjlab motion ``.npz``; the root is body 0 (the pelvis).

    Its ``joint_pos`` columns follow the training robot's joint order, which the file does not name:
    pass ``joint_names`` (BeyondMimic: ``g1.names("isaaclab")``, the default; mjlab: ``g1.names("motor")``).
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


def load_npz(path: str | Path, joint_names: tuple[str, ...] | None = None) -> MotionClip:
    """Either ``.npz`` layout, told apart by its keys (``joint_names``: see :func:`load_beyondmimic_npz`)."""
    with np.load(path, allow_pickle=False) as z:
        ours = "format_version" in z.files
    return load_clip(path) if ours else load_beyondmimic_npz(path, joint_names)


def shipped_clips() -> tuple[str, ...]:
    """Names of the shipped clips (files ``CLIP_DIR/<name>.npz``)."""
    return tuple(sorted(p.stem for p in CLIP_DIR.glob("*.npz")))


# --- sampling by time ---------------------------------------------------------------------------


def frame_blend(times_s: Any, duration_s: Any, fps: Any, num_frames: Any) -> tuple[Any, Any, Any]:
    """The two frames around each time and the weight of the second: ``(f0, f1, w)``.

    Times are clamped to ``[0, duration_s]``; per-sample arrays (numpy, or torch tensors on one device).
    """
    xp = namespace(times_s)
    f = xp.where(times_s < duration_s, times_s, duration_s).clip(0.0, None) * fps
    last = num_frames - 1
    f0 = xp.minimum(as_index(xp.floor(f)), last)
    f1 = xp.minimum(f0 + 1, last)
    return f0, f1, f - f0


def lerp_frames(frames: Any, i0: Any, i1: Any, w: Any) -> Any:
    """``(1 - w) frames[i0] + w frames[i1]`` per sample, ``w`` broadcast over the trailing axes."""
    wb = w.reshape(-1, *([1] * (frames.ndim - 1)))
    return (1.0 - wb) * frames[i0] + wb * frames[i1]
