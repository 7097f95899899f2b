"""The G1 as the tracking task sees it: policy joints, tracked bodies and ASAP's extended points.

Joint facts (names, order, limits, gains, default pose) come from ``asap_core.g1``; this module only adds
the task's choice of bodies.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from asap_core import g1

POLICY_JOINTS: tuple[str, ...] = g1.names("asap23")
"""Policy order: ASAP's 23 DoF (motor order without the wrists, which are held at 0)."""

RIGID_BODIES: tuple[str, ...] = (
    "pelvis",
    "left_hip_pitch_link",
    "left_hip_roll_link",
    "left_hip_yaw_link",
    "left_knee_link",
    "left_ankle_pitch_link",
    "left_ankle_roll_link",
    "right_hip_pitch_link",
    "right_hip_roll_link",
    "right_hip_yaw_link",
    "right_knee_link",
    "right_ankle_pitch_link",
    "right_ankle_roll_link",
    "waist_yaw_link",
    "waist_roll_link",
    "torso_link",
    "left_shoulder_pitch_link",
    "left_shoulder_roll_link",
    "left_shoulder_yaw_link",
    "left_elbow_link",
    "right_shoulder_pitch_link",
    "right_shoulder_roll_link",
    "right_shoulder_yaw_link",
    "right_elbow_link",
)
"""ASAP's 24 rigid bodies of the 23-DoF G1, in its (depth-first) order."""

EXTENDED_POINTS = MappingProxyType(
    {
        # ASAP's extend_config: offsets in the parent body frame (m).
        "left_hand_link": ("left_elbow_link", (0.25, 0.0, 0.0)),
        "right_hand_link": ("right_elbow_link", (0.25, 0.0, 0.0)),
        "head_link": ("torso_link", (0.0, 0.0, 0.42)),
    }
)
"""name → (parent body, offset in the parent frame): hands 0.25 m along the elbow x axis, head 0.42 m
above the torso origin."""

TRACKED_POINTS: tuple[str, ...] = RIGID_BODIES + tuple(EXTENDED_POINTS)
"""The 27 points of ASAP's rewards, critic and metrics (24 bodies + 3 extended)."""

LOWER_BODY: tuple[str, ...] = RIGID_BODIES[:16]
"""Pelvis, legs, waist and torso: the loose (σ = 0.1) half of the body-position reward."""
UPPER_BODY: tuple[str, ...] = RIGID_BODIES[16:] + tuple(EXTENDED_POINTS)
"""Arm links, hands and head: the tight (σ = 0.03) half."""
VR_3_POINTS: tuple[str, ...] = ("left_hand_link", "right_hand_link", "head_link")
FEET: tuple[str, ...] = ("left_ankle_roll_link", "right_ankle_roll_link")


def point_indices(names: tuple[str, ...] | list[str]) -> np.ndarray:
    """Indices of named points in :data:`TRACKED_POINTS`."""
    missing = [n for n in names if n not in TRACKED_POINTS]
    if missing:
        raise KeyError(f"not tracked points: {missing}; tracked: {TRACKED_POINTS}")
    return np.array([TRACKED_POINTS.index(n) for n in names], dtype=np.intp)
