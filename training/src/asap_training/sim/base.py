"""The simulator seam: what the tracking MDP needs from a batch of G1 physics instances.

The MDP (observations, rewards, terminations, resets, randomization) only talks to a :class:`Simulator`,
in torch tensors on the simulator's :attr:`~Simulator.device`. The CPU backend
(:class:`asap_training.sim.mujoco_cpu.MujocoCpuSimulator`) steps N ``MjData`` with C MuJoCo on every core; a
GPU backend (MuJoCo Warp) keeps its state on the GPU, so an MDP step copies nothing between host and device.
Backends are selected by ``TrackingEnvCfg.simulator`` (``--sim``) without touching the MDP. Contract:

* :attr:`state` is refreshed after :meth:`reset` and after every :meth:`step`; its tensors are views the
  MDP may read but not keep across steps, of one floating dtype (float64 on the CPU backend).
* :meth:`step` runs ``substeps`` physics steps of the model's drive actuators (``asap_sim.model``) fed
  ``asap_sim.motor.drive_ctrl`` of the command through the actuation latency: the PD law at physics rate.
* Inputs are tensors on :attr:`device` (the CPU backend also takes numpy arrays).
* Joints are in ``g1.MOTOR_ORDER``; bodies in :data:`asap_training.robot.RIGID_BODIES`; quaternions wxyz.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from asap_sim.motor import MotorCommand, MotorParams


@dataclass(eq=False)
class SimState:
    """Batched robot state, leading axis = env. World frame unless the name ends in ``_b``."""

    root_pos_w: torch.Tensor
    """(N, 3)"""
    root_quat_w: torch.Tensor
    """(N, 4)"""
    root_lin_vel_w: torch.Tensor
    root_ang_vel_b: torch.Tensor
    """(N, 3) pelvis angular velocity in the pelvis frame (what the IMU gyro measures)."""
    joint_pos: torch.Tensor
    """(N, 29) motor order."""
    joint_vel: torch.Tensor
    joint_torque: torch.Tensor
    """(N, 29) torques applied in the last physics substep."""
    body_pos_w: torch.Tensor
    """(N, 24, 3)"""
    body_quat_w: torch.Tensor
    body_lin_vel_w: torch.Tensor
    body_ang_vel_w: torch.Tensor
    foot_force: torch.Tensor
    """(N, 2) magnitude of the floor contact force on each foot (left, right), N."""

    @classmethod
    def zeros(cls, num_envs: int, num_joints: int, num_bodies: int) -> SimState:
        """Preallocated numpy state (a CPU backend fills it and hands out tensor views of it)."""
        z = np.zeros
        return cls(
            z((num_envs, 3)),
            np.tile([1.0, 0, 0, 0], (num_envs, 1)),
            z((num_envs, 3)),
            z((num_envs, 3)),
            z((num_envs, num_joints)),
            z((num_envs, num_joints)),
            z((num_envs, num_joints)),
            z((num_envs, num_bodies, 3)),
            np.tile([1.0, 0, 0, 0], (num_envs, num_bodies, 1)),
            z((num_envs, num_bodies, 3)),
            z((num_envs, num_bodies, 3)),
            z((num_envs, 2)),
        )


class Simulator(Protocol):
    """A batch of G1 physics instances (see the module docstring for the contract)."""

    device: torch.device
    num_envs: int
    physics_dt: float
    state: SimState
    motor_params: MotorParams
    """Drive scales; arrays broadcast to (N, 29) so domain randomization can vary them per env."""

    def reset(
        self,
        env_ids: torch.Tensor,
        root_pos_w: torch.Tensor,
        root_quat_w: torch.Tensor,
        root_lin_vel_w: torch.Tensor,
        root_ang_vel_w: torch.Tensor,
        joint_pos: torch.Tensor,
        joint_vel: torch.Tensor,
    ) -> None:
        """Teleport the given envs to a state (joint arrays (M, 29), motor order)."""

    def step(self, command: MotorCommand, substeps: int) -> None:
        """Hold ``command`` (batched (N, 29)) for ``substeps`` physics steps with the PD drive law."""

    def push(self, env_ids: torch.Tensor, delta_lin_vel_w: torch.Tensor) -> None:
        """Add a velocity kick (M, 3) to the pelvis of the given envs."""

    def set_model_variant(self, env_ids: torch.Tensor, variant: torch.Tensor) -> None:
        """Use model variant ``variant[i]`` (physics parameters, e.g. friction) for env ``env_ids[i]``."""
