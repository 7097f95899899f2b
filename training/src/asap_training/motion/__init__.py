"""Motion library: formats, FK on the G1, reference sampling, clip authoring."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from asap_training.motion.clip import MotionClip
from asap_training.motion.formats import load_clip, load_motion
from asap_training.motion.kinematics import G1Kinematics
from asap_training.motion.library import MotionLibrary, MotionState, ReferenceMotion, reference_from_clip

CLIP_DIR = Path(__file__).resolve().parent / "clips"
"""The clips the package ships (authored by ``asap-author``)."""


def shipped_clips() -> tuple[str, ...]:
    """Names of the shipped clips."""
    return tuple(sorted(p.stem for p in CLIP_DIR.glob("*.npz")))


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
    "CLIP_DIR",
    "G1Kinematics",
    "MotionClip",
    "MotionLibrary",
    "MotionState",
    "ReferenceMotion",
    "build_library",
    "load_clips",
    "reference_from_clip",
    "shipped_clips",
]
