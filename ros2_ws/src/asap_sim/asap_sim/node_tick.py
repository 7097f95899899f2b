"""The policy node's tick (``asap_core.control.Controller``) driving the twin core, with no ROS between:
what a graph episode does over DDS, for off-line rollouts (``asap-eval --backend twin``) and tests.

A module of its own so the twin node does not import the controller (and ONNX Runtime with it)."""

from __future__ import annotations

import numpy as np

from asap_core.control import Controller, RobotState, TickOutput
from asap_core.modes import Event
from asap_sim.motor import MotorCommand
from asap_sim.twin import Twin, TwinState


def node_tick(control: Controller, twin: Twin, state: TwinState, request: Event | None = None) -> TickOutput:
    """One node tick on the LowState ``state`` (read from ``twin`` once: reading draws the sensor noise),
    ``request`` handed over with it; the twin drives with the tick's command from its next physics step.
    The caller steps the twin."""
    out = control.tick(RobotState(q=state.q, dq=state.dq, quat_wxyz=state.imu_quat_wxyz, gyro_b=state.gyro_b),
                       0.0, () if request is None else (request,))
    c = out.command
    twin.set_command(MotorCommand(mode=np.ones_like(c.q), q=c.q, dq=c.dq, tau=c.tau, kp=c.kp, kd=c.kd))
    return out
