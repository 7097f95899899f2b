"""Closed-loop numbers of a recorded episode: segments cut by lost messages are one run, not a fall."""

from __future__ import annotations

import numpy as np
import pytest

from asap_core import g1
from asap_sim.kinematics import G1Kinematics
from asap_sim.model import build_model
from asap_training.data.dataset import RealTrajectory
from asap_training.eval.closed_loop import closed_loop_run
from asap_training.motion import MotionLibrary, build_library

DT = 0.02


@pytest.fixture(scope="module")
def kin_and_motion() -> tuple[G1Kinematics, MotionLibrary]:
    kin = G1Kinematics(build_model())
    return kin, build_library(["arm_swing"], kin, g1.MOTOR_ORDER)


def tracking_perfectly(motions: MotionLibrary, frames: np.ndarray, name: str) -> RealTrajectory:
    """A segment of a robot that is exactly at the reference at the given control ticks."""
    duration = float(motions.duration_s[0])
    phase = frames * DT / duration
    s = motions.sample(np.zeros(len(frames), dtype=int), phase * duration)
    zeros = np.zeros((len(frames), 3))
    return RealTrajectory(
        name=name,
        base_pos_w=s.pos_w[:, 0],
        base_quat_w=s.quat_w[:, 0],
        base_lin_vel_w=zeros,
        base_ang_vel_w=zeros,
        joint_pos=s.dof_pos,
        joint_vel=np.zeros_like(s.dof_pos),
        action=np.zeros((len(frames), 1)),
        phase=phase,
    )


def test_an_episode_cut_by_lost_messages_is_one_complete_run(kin_and_motion):
    kin, motions = kin_and_motion
    last = round(float(motions.duration_s[0]) / DT)
    # ticks lost near the end: the longer segment alone would stop mid-motion
    first, second = np.arange(0, last - 60), np.arange(last - 49, last + 1)
    run = closed_loop_run(
        [tracking_perfectly(motions, first, "ep#0"), tracking_perfectly(motions, second, "ep#1")],
        kin, motions, DT,
    )  # fmt: skip
    assert run.metrics.success and not run.metrics.fell
    assert run.metrics.num_frames == len(first) + len(second)
    assert run.metrics.e_g_mpjpe_mm < 1.0 and run.metrics.e_vel_mm < 1.0
    # the first segment alone ends mid-motion: that is a fall
    alone = closed_loop_run([tracking_perfectly(motions, first, "ep#0")], kin, motions, DT)
    assert alone.metrics.fell and not alone.metrics.success


def test_segments_out_of_order_are_refused(kin_and_motion):
    kin, motions = kin_and_motion
    a = tracking_perfectly(motions, np.arange(0, 50), "ep#0")
    b = tracking_perfectly(motions, np.arange(60, 100), "ep#1")
    with pytest.raises(ValueError, match="time order"):
        closed_loop_run([b, a], kin, motions, DT)
    with pytest.raises(ValueError, match="at least one segment"):
        closed_loop_run([], kin, motions, DT)
