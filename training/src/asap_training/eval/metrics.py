"""ASAP's tracking metrics on trajectories of tracked points, wherever they were recorded
(arXiv 2502.01143 §IV, Tables III-V).

Inputs are aligned arrays ``(T, P, 3)`` of robot and reference point positions (m, world frame, point 0 =
pelvis) sampled at one rate: from a training-env rollout or from a recorded episode of the twin or robot.
Errors are in mm; E_acc and E_vel per frame (mm/frame², mm/frame) as in smpl_sim's ``compute_metrics_lite``;
the first frame is excluded as in ASAP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

ERROR_METRICS = ("e_g_mpjpe_mm", "e_mpjpe_mm", "e_acc_mm", "e_vel_mm")
"""The error fields of :class:`TrackingMetrics`, in the paper's column order."""

SUCCESS_MEAN_DISTANCE_M = 0.5
"""Paper's success criterion: the mean point distance never exceeds this."""


@dataclass(frozen=True)
class TrackingMetrics:
    """One rollout's numbers."""

    success: bool
    """Not fallen and the mean point distance stayed below 0.5 m at every frame."""
    fell: bool
    e_g_mpjpe_mm: float
    e_mpjpe_mm: float
    e_acc_mm: float
    e_vel_mm: float
    max_mean_distance_m: float
    num_frames: int

    def to_dict(self) -> dict:
        """JSON-ready."""
        return asdict(self)


def per_frame_errors(robot: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(global, root-relative) mean point error per frame, m."""
    g = np.linalg.norm(robot - ref, axis=-1).mean(axis=1)
    local = np.linalg.norm((robot - robot[:, :1]) - (ref - ref[:, :1]), axis=-1).mean(axis=1)
    return g, local


def tracking_metrics(
    robot: np.ndarray, ref: np.ndarray, fell: bool = False, breaks: Sequence[int] = ()
) -> TrackingMetrics:
    """E_g-mpjpe, E_mpjpe, E_acc, E_vel and success of a rollout (see the module docstring).

    ``breaks``: frames that do not follow the frame before them (a recording with lost messages, cut into
    segments and joined again); velocity and acceleration differences across them are left out."""
    if robot.shape != ref.shape or robot.ndim != 3 or robot.shape[0] < 4:
        raise ValueError(f"need aligned (T >= 4, P, 3) arrays, got {robot.shape} and {ref.shape}")
    g, local = per_frame_errors(robot, ref)
    follows = np.ones(robot.shape[0], dtype=bool)  # frame t follows frame t-1
    follows[np.asarray(breaks, dtype=int)] = False
    follows[0] = True  # the first frame starts the rollout: nothing to leave out before it
    vel_kept = follows[1:].copy()
    vel_kept[0] = False  # the first frame's velocity is left out, as in ASAP
    vel = np.linalg.norm(np.diff(robot, axis=0) - np.diff(ref, axis=0), axis=-1)[vel_kept]
    acc = np.linalg.norm(np.diff(robot, 2, axis=0) - np.diff(ref, 2, axis=0), axis=-1)
    acc = acc[follows[1:-1] & follows[2:]]
    worst = float(g.max())
    return TrackingMetrics(
        success=bool(not fell and worst <= SUCCESS_MEAN_DISTANCE_M),
        fell=bool(fell),
        e_g_mpjpe_mm=float(g[1:].mean() * 1e3),
        e_mpjpe_mm=float(local[1:].mean() * 1e3),
        e_acc_mm=float(acc.mean() * 1e3),
        e_vel_mm=float(vel.mean() * 1e3),
        max_mean_distance_m=worst,
        num_frames=int(robot.shape[0]),
    )
