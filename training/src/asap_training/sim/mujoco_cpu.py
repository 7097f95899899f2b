"""N G1 instances on C MuJoCo, one ``MjData`` each, stepped in cache-sized chunks of envs."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar

import mujoco
import numpy as np

from asap_core import g1
from asap_sim.model import FEET, G1Indices, as_slice
from asap_sim.motor import CommandDelay, DriveLaw, MotorCommand, MotorParams
from asap_training import quat
from asap_training.robot import RIGID_BODIES
from asap_training.sim.base import SimState

_Cmd = TypeVar("_Cmd", MotorCommand, MotorParams)


def _rows(obj: _Cmd, num_envs: int, sl: slice | None = None) -> _Cmd:
    """The same dataclass with every array as (N, 29) and, if given, only rows ``sl`` (views)."""
    shape, rows = (num_envs, g1.NUM_MOTORS), slice(None) if sl is None else sl
    fields = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        # batched commands are already (N, 29): slicing is cheap, broadcast_to is not
        fields[f.name] = (value if np.shape(value) == shape else np.broadcast_to(value, shape))[rows]
    return type(obj)(**fields)


class MujocoCpuSimulator:
    """CPU backend of :class:`asap_training.sim.base.Simulator`.

    ``models`` are variants of one G1 model built by ``asap_sim.model.build_model`` (same structure,
    different physics parameters, e.g. floor friction for domain randomization); each env steps with the
    variant it was assigned (variant 0 at start).
    """

    def __init__(
        self,
        models: Sequence[mujoco.MjModel],
        num_envs: int,
        motor_params: MotorParams,
        latency_steps: int = 0,
        chunk_size: int = 8,
    ) -> None:
        """Create the ``MjData`` and resolve indices once."""
        self.models = list(models)
        self.num_envs = num_envs
        m = self.models[0]
        self.physics_dt = float(m.opt.timestep)
        self.idx = G1Indices.from_model(m)
        self.body_ids = np.array([m.body(n).id for n in RIGID_BODIES])
        self._foot_sensors = [self.idx.sensor[f"{side}_foot_contact"] for side in FEET]
        self.datas = [mujoco.MjData(m) for _ in range(num_envs)]
        # numpy views of each MjData's buffers, taken once (attribute access costs ~1 µs per call)
        self._views = [(d.ctrl, d.qpos, d.qvel) for d in self.datas]
        self.variant = np.zeros(num_envs, dtype=np.intp)
        self.state = SimState.zeros(num_envs, len(self.idx.qpos), len(self.body_ids))
        self._chunks = [slice(i, min(i + chunk_size, num_envs)) for i in range(0, num_envs, chunk_size)]
        self.motor_params = motor_params
        # G1 joints, dofs and motors are contiguous in motor order: slices copy faster than index arrays
        self._qpos_sl, self._qvel_sl, self._ctrl_sl = (
            as_slice(a) for a in (self.idx.qpos, self.idx.qvel, self.idx.actuator)
        )
        d0 = self.datas[0]
        self._raw = {
            name: np.zeros((num_envs, *np.shape(arr)))
            for name, arr in (
                ("qpos", d0.qpos),
                ("qvel", d0.qvel),
                ("xpos", d0.xpos),
                ("xquat", d0.xquat),
                ("cvel", d0.cvel),
                ("com", d0.subtree_com[0]),
                ("sensor", d0.sensordata),
            )
        }
        # one latency FIFO per chunk: each chunk's commands go through its own line
        self._delays = [
            CommandDelay(latency_steps, MotorCommand.off((c.stop - c.start,))) if latency_steps else None
            for c in self._chunks
        ]
        for d in self.datas:
            mujoco.mj_forward(m, d)
        self._read_state()

    def set_model_variant(self, env_ids: np.ndarray, variant: np.ndarray) -> None:
        """Assign physics variants per env (takes effect at the next step)."""
        self.variant[env_ids] = variant

    def reset(
        self,
        env_ids: np.ndarray,
        root_pos_w: np.ndarray,
        root_quat_w: np.ndarray,
        root_lin_vel_w: np.ndarray,
        root_ang_vel_w: np.ndarray,
        joint_pos: np.ndarray,
        joint_vel: np.ndarray,
    ) -> None:
        """Teleport envs; free-joint qvel is (world linear, body angular) velocity."""
        ang_b = quat.rotate_inv(root_quat_w, root_ang_vel_w)
        for k, i in enumerate(env_ids):
            d = self.datas[i]
            mujoco.mj_resetData(self.models[self.variant[i]], d)
            d.qpos[:3], d.qpos[3:7] = root_pos_w[k], root_quat_w[k]
            d.qvel[:3], d.qvel[3:6] = root_lin_vel_w[k], ang_b[k]
            d.qpos[self.idx.qpos] = joint_pos[k]
            d.qvel[self.idx.qvel] = joint_vel[k]
            mujoco.mj_forward(self.models[self.variant[i]], d)
        self._read_state(env_ids)

    def push(self, env_ids: np.ndarray, delta_lin_vel_w: np.ndarray) -> None:
        """Kick the pelvis."""
        for k, i in enumerate(env_ids):
            self.datas[i].qvel[:3] += delta_lin_vel_w[k]

    @property
    def motor_params(self) -> MotorParams:
        """Drive scales, broadcast to (N, 29) (set them to randomize per env)."""
        return self._motor_params

    @motor_params.setter
    def motor_params(self, params: MotorParams) -> None:
        self._motor_params = params
        full = _rows(params, self.num_envs)
        self._chunk_params = [_rows(full, self.num_envs, sl) for sl in self._chunks]

    def step(self, command: MotorCommand, substeps: int) -> None:
        """Envs go in small chunks: within a chunk the PD law (``asap_sim.motor.DriveLaw``) is one
        batched call per physics step on the chunk's joint state, and the chunk's few MjData stay in
        cache across its substeps (stepping all N envs per substep evicts them: ~30 % slower)."""
        q, dq, act = self._qpos_sl, self._qvel_sl, self._ctrl_sl
        joint_q, joint_dq = self.state.joint_pos, self.state.joint_vel
        for c, sl in enumerate(self._chunks):
            datas, views = self.datas[sl], self._views[sl]
            models = [self.models[v] for v in self.variant[sl]]
            cmd, params, delay = _rows(command, self.num_envs, sl), self._chunk_params[c], self._delays[c]
            cq, cdq = joint_q[sl], joint_dq[sl]  # views: filled in place below
            law_of = None
            for _ in range(substeps):
                applied = delay.push(cmd) if delay else cmd
                if applied is not law_of:  # a delayed command changes once per control step, not per substep
                    law, law_of = DriveLaw(applied, params), applied
                tau = law.torque(cq, cdq)
                for k, d in enumerate(datas):
                    ctrl, qpos, qvel = views[k]
                    ctrl[act] = tau[k]
                    mujoco.mj_step(models[k], d)
                    cq[k], cdq[k] = qpos[q], qvel[dq]
            for k, d in enumerate(datas):
                # mj_step leaves body poses and velocities at the start of its last step: bring the ones
                # the MDP reads up to the new qpos/qvel (a 2-5 ms lag otherwise)
                mujoco.mj_kinematics(models[k], d)
                mujoco.mj_comPos(models[k], d)
                mujoco.mj_comVel(models[k], d)
            self.state.joint_torque[sl] = tau
        self._read_state()

    def _read_state(self, env_ids: np.ndarray | None = None) -> None:
        """Copy raw arrays env by env (plain slices), then derive everything batched."""
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids)
        raw = self._raw
        for i in ids:
            d = self.datas[i]
            raw["qpos"][i], raw["qvel"][i] = d.qpos, d.qvel
            raw["xpos"][i], raw["xquat"][i], raw["cvel"][i] = d.xpos, d.xquat, d.cvel
            raw["com"][i], raw["sensor"][i] = d.subtree_com[0], d.sensordata
        s, b = self.state, self.body_ids
        qpos, qvel = raw["qpos"][ids], raw["qvel"][ids]
        s.root_pos_w[ids], s.root_quat_w[ids] = qpos[:, :3], qpos[:, 3:7]
        s.root_lin_vel_w[ids], s.root_ang_vel_b[ids] = qvel[:, :3], qvel[:, 3:6]
        s.joint_pos[ids], s.joint_vel[ids] = qpos[:, self._qpos_sl], qvel[:, self._qvel_sl]
        xpos, cvel = raw["xpos"][ids][:, b], raw["cvel"][ids][:, b]
        s.body_pos_w[ids], s.body_quat_w[ids] = xpos, raw["xquat"][ids][:, b]
        s.body_ang_vel_w[ids] = cvel[..., :3]
        # cvel's linear part is the velocity of the point at the subtree CoM: move it to each origin
        s.body_lin_vel_w[ids] = cvel[..., 3:] + quat.cross(cvel[..., :3], xpos - raw["com"][ids][:, None])
        sensor = raw["sensor"][ids]
        s.foot_force[ids] = np.stack(
            [np.linalg.norm(sensor[:, sl][:, 1:4], axis=1) for sl in self._foot_sensors], axis=1
        )
