"""The simulator seam: what the tracking MDP needs from a batch of G1 physics instances.

The MDP (observations, rewards, terminations, resets, randomization) only talks to a :class:`Simulator`,
in torch tensors on the simulator's :attr:`~Simulator.device`. The CPU backend
(:class:`asap_training.sim.mujoco_cpu.MujocoCpuSimulator`) steps N ``MjData`` with C MuJoCo on every core;
the MuJoCo Warp backend (:class:`asap_training.sim.mujoco_warp.MujocoWarpSimulator`) keeps its worlds on
the device, so on a GPU an MDP step copies nothing between host and device. Both derive :class:`SimState`
from the same MuJoCo arrays through :class:`StateLayout` and feed their drives through :class:`DriveInput`.
Backends are selected by ``TrackingEnvCfg.simulator`` (``--sim``) without touching the MDP. Contract:

* :attr:`state` is refreshed after :meth:`reset` and after every :meth:`step`; its tensors are views the
  MDP may read but not keep across steps, of one floating dtype (float64 on the CPU backend).
* :meth:`step` runs ``substeps`` physics steps of the model's drive actuators (``asap_sim.model``) fed
  ``asap_sim.motor.drive_ctrl`` of the command through the actuation latency: the PD law at physics rate.
* Inputs are tensors on :attr:`device` (the CPU backend also takes numpy arrays).
* Joints are in ``g1.MOTOR_ORDER``; bodies in :data:`asap_core.g1.RIGID_BODIES`; quaternions wxyz.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import mujoco
import numpy as np
import torch

from asap_core import quat
from asap_core.arrays import namespace
from asap_core.g1 import RIGID_BODIES
from asap_sim.model import FEET, G1Indices, as_slice
from asap_sim.motor import ControlDelay, MotorCommand, MotorParams, drive_ctrl


def to_numpy(x: Any) -> np.ndarray:
    """A numpy array of a tensor (a view of a CPU tensor, a copy from a device) or of an array-like: the
    backends' inputs, which the MDP hands over as tensors and tests and benchmarks as arrays."""
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


RAW_FIELDS = ("qpos", "qvel", "xpos", "xquat", "cvel", "subtree_com", "sensordata", "qfrc_actuator")
"""The ``MjData`` arrays a backend reads after a step (body poses and velocities brought up to the new
``qpos``/``qvel`` by ``kinematics``, ``comPos``, ``comVel``); :meth:`StateLayout.write` derives the state."""


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


@dataclass(frozen=True, eq=False)
class StateLayout:
    """Where the MDP's quantities sit in the G1 model's ``MjData`` arrays (resolved once per model)."""

    qpos: slice | np.ndarray
    """qpos of the joints, motor order (G1 joints are contiguous: a slice)."""
    qvel: slice | np.ndarray
    bodies: np.ndarray
    """Body ids of :data:`asap_core.g1.RIGID_BODIES`."""
    feet: tuple[slice, ...]
    """``sensordata`` of the left and right foot contact sensors (found flag, net force in world)."""

    @classmethod
    def from_model(cls, model: mujoco.MjModel) -> StateLayout:
        """Resolve by name (a model from ``asap_sim.model.build_model``)."""
        idx = G1Indices.from_model(model)
        return cls(
            qpos=as_slice(idx.qpos),
            qvel=as_slice(idx.qvel),
            bodies=np.array([model.body(n).id for n in RIGID_BODIES]),
            feet=tuple(idx.sensor[f"{side}_foot_contact"] for side in FEET),
        )

    def write(self, state: SimState, ids: Any, raw: dict[str, Any]) -> None:
        """Set envs ``ids`` of ``state`` from their raw arrays (:data:`RAW_FIELDS`, one row per id): numpy
        arrays (CPU backend) or tensors on the device (MuJoCo Warp), the same code."""
        s, b = state, self.bodies
        xp = namespace(raw["qpos"])
        qpos, qvel = raw["qpos"], raw["qvel"]
        s.root_pos_w[ids], s.root_quat_w[ids] = qpos[:, :3], qpos[:, 3:7]
        s.root_lin_vel_w[ids], s.root_ang_vel_b[ids] = qvel[:, :3], qvel[:, 3:6]
        s.joint_pos[ids], s.joint_vel[ids] = qpos[:, self.qpos], qvel[:, self.qvel]
        s.joint_torque[ids] = raw["qfrc_actuator"][:, self.qvel]
        xpos, cvel = raw["xpos"][:, b], raw["cvel"][:, b]
        s.body_pos_w[ids], s.body_quat_w[ids] = xpos, raw["xquat"][:, b]
        s.body_ang_vel_w[ids] = cvel[..., :3]
        # cvel's linear part is the velocity of the point at the subtree CoM: move it to each origin
        com = raw["subtree_com"][:, 0]
        s.body_lin_vel_w[ids] = cvel[..., 3:] + quat.cross(cvel[..., :3], xpos - com[:, None])
        sensor = raw["sensordata"]  # per foot: found flag, then the net force
        forces = [xp.linalg.norm(sensor[:, sl][:, 1:4], axis=1) for sl in self.feet]
        s.foot_force[ids] = xp.stack(forces, axis=-1)


class DriveInput:
    """What a batch's drive actuators receive during one policy step: the ``ctrl`` of each command
    (``asap_sim.motor.drive_ctrl``, numpy or torch as the command) through the actuation latency, as
    ``(ctrl (N, 87), physics steps)`` pieces (at most two per step, :class:`asap_sim.motor.ControlDelay`)."""

    def __init__(self, num_envs: int, latency_steps: int) -> None:
        self.num_envs, self.latency_steps = num_envs, latency_steps
        self._delay: ControlDelay | None = None  # made at the first step, which fixes the substeps
        self._before_first_step: list[tuple[Any, list[Any]]] = []  # clear()s waiting for the delay line

    def pieces(self, command: MotorCommand, params: MotorParams, substeps: int) -> list[tuple[Any, int]]:
        """The ctrl pieces of the ``substeps`` physics steps that hold ``command``."""
        ctrl = self._ctrl(command, params)
        if self._delay is None or self._delay.substeps != substeps:
            if self._delay is not None and self.latency_steps:
                raise ValueError(f"substeps changed {self._delay.substeps} -> {substeps} with a latency "
                                 f"in flight; step with one period")
            self._delay = ControlDelay(self.latency_steps, substeps, ctrl * 0.0)
            for env_ids, recent in self._before_first_step:
                self._clear(env_ids, recent)
            self._before_first_step = []
        return self._delay.push(ctrl)

    def clear(
        self, env_ids: Any, in_flight: Sequence[MotorCommand] = (), params: MotorParams | None = None
    ) -> None:
        """Reset envs start with their motors off, as a new batch does (no ctrl of the last episode left
        in the latency), or acting on ``in_flight`` (commands sent before, one per period, oldest first,
        batched over every env, the kind of the stepped commands; ``params`` their drive scales).
        ``env_ids``: numpy or a tensor on any device, whatever kind the ctrl are."""
        if not self.latency_steps:  # without a latency only the newest ctrl acts
            return
        if in_flight and params is None:
            raise ValueError("commands in flight need the drive scales (params) to make their ctrl")
        recent = [self._ctrl(c, params) for c in in_flight] if params is not None else []
        if self._delay is not None:
            self._clear(env_ids, recent)
        else:  # in order, so a later reset of the same envs overrides an earlier one; the caller's ids copied
            ids = env_ids.clone() if isinstance(env_ids, torch.Tensor) else np.array(env_ids, copy=True)
            self._before_first_step.append((ids, recent))

    def _ctrl(self, command: MotorCommand, params: MotorParams) -> Any:
        ctrl = drive_ctrl(command, params)
        return namespace(ctrl).broadcast_to(ctrl, (self.num_envs, ctrl.shape[-1]))

    def _clear(self, env_ids: Any, recent: list[Any]) -> None:
        assert self._delay is not None
        off = self._delay.off
        if isinstance(off, torch.Tensor):
            rows = torch.as_tensor(env_ids, device=off.device).long()
        else:
            rows = to_numpy(env_ids).astype(np.intp)
        self._delay.clear(rows, recent)


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
        keep_latency: bool = False,
        in_flight: Sequence[MotorCommand] = (),
    ) -> None:
        """Start the given envs over from a state (joint arrays (M, 29), motor order): solver warm start and
        ctrl cleared, and the actuation latency's ctrl in flight dropped (motors off until their next ctrl
        arrives), as a new batch starts. ``keep_latency``: keep the ctrl in flight (a teleport within an
        episode, as the lock-step parity tests do). ``in_flight``: the commands sent before this state
        instead (one per policy period, oldest first, batched over every env: rows ``env_ids`` used), which
        reach the motors through the latency as they would have (a start at a recorded state)."""

    def step(self, command: MotorCommand, substeps: int) -> None:
        """Hold ``command`` (batched (N, 29)) for ``substeps`` physics steps with the PD drive law."""

    def push(self, env_ids: torch.Tensor, delta_lin_vel_w: torch.Tensor) -> None:
        """Add a velocity kick (M, 3) to the pelvis of the given envs."""

    def set_model_variant(self, env_ids: torch.Tensor, variant: torch.Tensor) -> None:
        """Use model variant ``variant[i]`` (physics parameters, e.g. friction) for env ``env_ids[i]``."""
