"""Motion library: loading clips (shipped or files), reference FK and sampling, clip authoring.

The clip type, its ``.npz`` layouts and the shipped clips are :mod:`asap_core.motion`; forward kinematics
is :mod:`asap_sim.kinematics` (both shared with the robot-side monitor).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from asap_core.motion import CLIP_DIR, MotionClip, load_clip, shipped_clips
from asap_sim.kinematics import G1Kinematics
from asap_training.motion.formats import load_motion
from asap_training.motion.library import MotionLibrary, MotionState, ReferenceMotion, reference_from_clip


def load_clips(names_or_paths: Sequence[str], kin: G1Kinematics) -> list[MotionClip]:
    """Shipped clip names (``"squat"``) or motion files (.pkl/.npz/.csv) → clips."""
    clips: list[MotionClip] = []
    for item in names_or_paths:
        path = Path(item)
        if path.suffix:
            clips += load_motion(path, kin.joint_axes())
        elif (CLIP_DIR / f"{item}.npz").is_file():
            clips.append(load_clip(CLIP_DIR / f"{item}.npz"))
        else:
            raise FileNotFoundError(
                f"no shipped clip {item!r} (shipped: {list(shipped_clips())}); "
                "or pass a path to a .pkl/.npz/.csv motion"
            )
    return clips


def build_library(
    names_or_paths: Sequence[str], kin: G1Kinematics, joint_names: Sequence[str], ground: bool = True
) -> MotionLibrary:
    """Load, (by default) ground, FK and concatenate motions for the given policy joints."""
    clips = load_clips(names_or_paths, kin)
    if ground:
        clips = [kin.grounded(c) for c in clips]
    return MotionLibrary([reference_from_clip(c, kin, joint_names) for c in clips])


__all__ = [
    "MotionLibrary",
    "MotionState",
    "ReferenceMotion",
    "build_library",
    "load_clips",
    "reference_from_clip",
]
