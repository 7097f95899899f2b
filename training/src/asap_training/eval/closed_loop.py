"""Closed-loop tracking numbers (paper Table IV) of a recorded run: an ingested episode or a twin rollout.

The robot's tracked points are the FK of the recorded base (mocap) and joints; the reference is the policy's
motion at the phase the policy used, moved so that its pelvis starts where the robot's did (heading kept),
as the twin evaluation does. A run whose policy ticks end before the motion's end fell (or faulted). An
episode cut into segments by lost messages is one run: its segments are joined, and only the motion
across the cuts is left out of E_vel and E_acc (a lost message is not a fall).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asap_core import g1
from asap_core.motion import MotionClip
from asap_sim.kinematics import G1Kinematics
from asap_training.data.dataset import RealTrajectory
from asap_training.eval.metrics import ERROR_METRICS, TrackingMetrics, tracking_metrics
from asap_training.motion import MotionLibrary

END_PHASE = 0.98
"""A run that reached this phase ran the motion to its end (the last tick may fall short of 1.0)."""


@dataclass(frozen=True)
class ClosedLoopRun:
    """Points of one run and its metrics."""

    robot_pos_w: np.ndarray
    """(T, 27, 3)"""
    ref_pos_w: np.ndarray
    metrics: TrackingMetrics


def robot_points(traj: RealTrajectory, kin: G1Kinematics, fps: float) -> np.ndarray:
    """(T, 27, 3) tracked points of the recorded states."""
    clip = MotionClip(traj.name, fps, traj.base_pos_w, traj.base_quat_w, g1.MOTOR_ORDER, traj.joint_pos)
    return kin.points(kin.qpos(clip))[0]


def closed_loop_run(
    segments: Sequence[RealTrajectory],
    kin: G1Kinematics,
    motions: MotionLibrary,
    control_dt: float,
    motion_id: int = 0,
) -> ClosedLoopRun:
    """Metrics of one episode (its segments in time order) against motion ``motion_id`` of ``motions``
    (the policy's own motion)."""
    if not segments:
        raise ValueError("a closed-loop run needs at least one segment")
    robot = np.concatenate([robot_points(s, kin, 1.0 / control_dt) for s in segments])
    phase = np.concatenate([s.phase for s in segments])
    if np.any(np.diff(phase) < 0):
        raise ValueError("the segments of a closed-loop run must be in time order (phase going forward)")
    breaks = np.cumsum([s.num_steps for s in segments])[:-1].tolist()
    ref = motions.sample(np.full(len(phase), motion_id), phase * motions.duration_s[motion_id]).pos_w
    offset = robot[0, 0] - ref[0, 0]
    offset[2] = 0.0
    fell = bool(phase[-1] < END_PHASE)
    ref = ref + offset
    return ClosedLoopRun(robot, ref, tracking_metrics(robot, ref, fell, breaks=breaks))


def mean_metrics(runs: list[ClosedLoopRun]) -> dict[str, float]:
    """Table IV row over several runs: success rate and mean errors."""
    rows = [r.metrics.to_dict() for r in runs]
    return {
        "success_rate": float(np.mean([r["success"] for r in rows])),
        **{k: float(np.mean([r[k] for r in rows])) for k in ERROR_METRICS},
        "runs": len(rows),
    }
