"""N G1 instances on C MuJoCo, one ``MjData`` each, stepped in a tight loop; torques batched in numpy."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from asap_sim.model import FEET, G1Indices
from asap_sim.motor import CommandDelay, MotorCommand, MotorParams, pd_torque
from asap_training.robot import RIGID_BODIES
from asap_training.sim.base import SimState


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
    ) -> None:
        """Create the ``MjData`` and resolve indices once."""
        self.models = list(models)
        self.num_envs = num_envs
        m = self.models[0]
        self.physics_dt = float(m.opt.timestep)
        self.motor_params = motor_params
        self.idx = G1Indices.from_model(m)
        self.body_ids = np.array([m.body(n).id for n in RIGID_BODIES])
        self._foot_sensors = [self.idx.sensor[f"{side}_foot_contact"] for side in FEET]
        self.datas = [mujoco.MjData(m) for _ in range(num_envs)]
        self.variant = np.zeros(num_envs, dtype=np.intp)
        self.state = SimState.zeros(num_envs, len(self.idx.qpos), len(self.body_ids))
        self._q = self.state.joint_pos
        self._dq = self.state.joint_vel
        self._delay = CommandDelay(latency_steps, MotorCommand.off((num_envs,))) if latency_steps else None
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
        from asap_training import quat

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

    def step(self, command: MotorCommand, substeps: int) -> None:
        """PD at physics rate: torques for all envs in one numpy call, then one ``mj_step`` per env."""
        qadr, vadr, act = self.idx.qpos, self.idx.qvel, self.idx.actuator
        models = [self.models[v] for v in self.variant]
        for _ in range(substeps):
            applied = self._delay.push(command) if self._delay else command
            tau = pd_torque(applied, self._q, self._dq, self.motor_params)
            for i, d in enumerate(self.datas):
                d.ctrl[act] = tau[i]
                mujoco.mj_step(models[i], d)
                self._q[i] = d.qpos[qadr]
                self._dq[i] = d.qvel[vadr]
        self.state.joint_torque[:] = tau
        self._read_state()

    def _read_state(self, env_ids: np.ndarray | None = None) -> None:
        s, b = self.state, self.body_ids
        for i in range(self.num_envs) if env_ids is None else env_ids:
            d = self.datas[i]
            s.root_pos_w[i] = d.qpos[:3]
            s.root_quat_w[i] = d.qpos[3:7]
            s.root_lin_vel_w[i] = d.qvel[:3]
            s.root_ang_vel_b[i] = d.qvel[3:6]
            s.joint_pos[i] = d.qpos[self.idx.qpos]
            s.joint_vel[i] = d.qvel[self.idx.qvel]
            s.body_pos_w[i] = d.xpos[b]
            s.body_quat_w[i] = d.xquat[b]
            cvel = d.cvel[b]
            s.body_ang_vel_w[i] = cvel[:, :3]
            # cvel's linear part is the velocity of the point at the subtree CoM: move it to each origin
            s.body_lin_vel_w[i] = cvel[:, 3:] + np.cross(cvel[:, :3], d.xpos[b] - d.subtree_com[0])
            for k, sl in enumerate(self._foot_sensors):
                s.foot_force[i, k] = np.linalg.norm(d.sensordata[sl][1:4])
