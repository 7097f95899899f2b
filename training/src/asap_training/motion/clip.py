"""The motion clip every loader produces: a root trajectory and joint angles by name."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
        return self.root_pos_w.shape[0]

    @property
    def duration_s(self) -> float:
        """Length in seconds, ``(T - 1) / fps`` (ASAP's motion length)."""
        return (self.num_frames - 1) / self.fps
