"""N G1 instances on C MuJoCo, one ``MjData`` each, stepped by a pool of threads over env shards.

The drive law runs in the model's actuators (``asap_sim.model``), so one policy step of one env is one
``mj_step(model, data, nstep)`` call per command piece (two when an actuation latency splits the step):
C from start to end with the GIL released. ``threads`` workers step disjoint shards of envs at once; an
env's trajectory does not depend on which worker steps it, so 1 and N threads give the same numbers.

``held_drive_share`` of the envs (the first ones) drive their joints as Unitree's simulator does instead
(:func:`asap_sim.motor.hold_pd`: the PD of the previous physics step's joint state, held over the step;
``asap_sim.twin.TwinConfig.drive = "held"``), one ``mj_step`` per physics step: training on a mix keeps a
policy for both drives.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import mujoco
import numpy as np
import torch

from asap_core import quat
from asap_sim.model import G1Indices
from asap_sim.motor import MotorCommand, MotorParams, hold_pd
from asap_training.parallel import default_threads
from asap_training.sim.base import RAW_FIELDS, DriveInput, SimState, StateLayout, to_numpy


@functools.cache
def _worker_pool(threads: int) -> ThreadPoolExecutor:
    """One pool per thread count, shared by every simulator of the process and never shut down: a pool
    per simulator, stopped when it is garbage-collected, deadlocked with a thread being started."""
    return ThreadPoolExecutor(threads, "mujoco_cpu")


def check_share(name: str, share: float) -> None:
    """``ValueError`` unless ``share`` lies in [0, 1] (the held drive's share of envs and its lag)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"{name} is {share}, expected a share in [0, 1]")


class MujocoCpuSimulator:
    """CPU backend of :class:`asap_training.sim.base.Simulator`.

    ``models`` are variants of one G1 model built by ``asap_sim.model.build_model`` (same structure,
    different physics parameters, e.g. floor friction for domain randomization); each env steps with the
    variant it was assigned (variant 0 at start). ``threads``: workers stepping physics (0: the process's
    default, :func:`asap_training.parallel.default_threads`). Its state is float64 torch tensors on the
    CPU that share memory with the numpy arrays it fills; inputs may be tensors or arrays.
    """

    device = torch.device("cpu")

    def __init__(
        self,
        models: Sequence[mujoco.MjModel],
        num_envs: int,
        motor_params: MotorParams,
        latency_steps: int = 0,
        threads: int = 0,
        device: str = "cpu",
        held_drive_share: float = 0.0,
        held_drive_lag: float = 1.0,
    ) -> None:
        """Create the ``MjData`` and the worker pool; resolve indices once. ``held_drive_lag``: the held
        drive's ``lag`` (:func:`asap_sim.motor.hold_pd`)."""
        check_share("held_drive_share", held_drive_share)
        check_share("held_drive_lag", held_drive_lag)
        if torch.device(device).type != "cpu":
            raise ValueError(f"the MuJoCo CPU backend runs on the CPU, not {device}; on a GPU use "
                             f"--sim mujoco_warp")
        self.models = list(models)
        self.num_envs = num_envs
        m = self.models[0]
        self.physics_dt = float(m.opt.timestep)
        self.idx = G1Indices.from_model(m)
        self.layout = StateLayout.from_model(m)
        self.datas = [mujoco.MjData(m) for _ in range(num_envs)]
        self.variant = np.zeros(num_envs, dtype=np.intp)
        self._state = SimState.zeros(num_envs, len(self.idx.qpos), len(self.layout.bodies))
        self.state = SimState(**{k: torch.from_numpy(v) for k, v in vars(self._state).items()})
        self.motor_params = motor_params
        self.latency_steps = latency_steps
        self._drive = DriveInput(num_envs, latency_steps)
        self.threads = min(threads or default_threads(), num_envs)
        bounds = np.linspace(0, num_envs, self.threads + 1).round().astype(int)
        self._shards = [range(a, b) for a, b in itertools.pairwise(bounds)]
        self._pool = _worker_pool(self.threads) if self.threads > 1 else None
        # G1 joints, dofs and motors are contiguous in motor order: slices copy faster than index arrays
        self._qpos_sl, self._qvel_sl = self.layout.qpos, self.layout.qvel
        self._ctrl_sl = self.idx.drive_ctrl
        d0 = self.datas[0]
        self._raw = {name: np.zeros((num_envs, *np.shape(getattr(d0, name)))) for name in RAW_FIELDS}
        for d in self.datas:
            mujoco.mj_forward(m, d)
        self.held = np.arange(num_envs) < round(held_drive_share * num_envs)
        self.held_lag = held_drive_lag
        # the joint state each held drive last sensed (the start of the previous physics step)
        self._sensed_q = np.stack([d.qpos[self._qpos_sl] for d in self.datas])
        self._sensed_dq = np.stack([d.qvel[self._qvel_sl] for d in self.datas])
        self._read_state()

    def set_model_variant(self, env_ids: np.ndarray, variant: np.ndarray) -> None:
        """Assign physics variants per env (takes effect at the next step)."""
        self.variant[to_numpy(env_ids)] = to_numpy(variant)

    def reset(
        self,
        env_ids: np.ndarray,
        root_pos_w: np.ndarray,
        root_quat_w: np.ndarray,
        root_lin_vel_w: np.ndarray,
        root_ang_vel_w: np.ndarray,
        joint_pos: np.ndarray,
        joint_vel: np.ndarray,
        keep_latency: bool = False,
        in_flight: Sequence[MotorCommand] = (),
    ) -> None:
        """Start envs over (see :meth:`~asap_training.sim.base.Simulator.reset`); free-joint qvel is (world
        linear, body angular) velocity."""
        env_ids, root_pos_w, root_quat_w, root_lin_vel_w, joint_pos, joint_vel = (
            to_numpy(x) for x in (env_ids, root_pos_w, root_quat_w, root_lin_vel_w, joint_pos, joint_vel)
        )
        ang_b = quat.rotate_inv(root_quat_w, to_numpy(root_ang_vel_w))
        for k, i in enumerate(env_ids):
            d = self.datas[i]
            mujoco.mj_resetData(self.models[self.variant[i]], d)
            d.qpos[:3], d.qpos[3:7] = root_pos_w[k], root_quat_w[k]
            d.qvel[:3], d.qvel[3:6] = root_lin_vel_w[k], ang_b[k]
            d.qpos[self._qpos_sl] = self._sensed_q[i] = joint_pos[k]
            d.qvel[self._qvel_sl] = self._sensed_dq[i] = joint_vel[k]
            mujoco.mj_forward(self.models[self.variant[i]], d)
        if not keep_latency:
            self._drive.clear(env_ids, in_flight, self.motor_params)
        self._read_state(env_ids)

    def set_floating_state(
        self, pos_w: np.ndarray, quat_w: np.ndarray, lin_vel_w: np.ndarray, ang_vel_b: np.ndarray,
        q: np.ndarray, dq: np.ndarray,
    ) -> None:
        """Overwrite every env's base and joint positions and velocities (e.g. a learned correction),
        keeping everything else (solver warm start, ctrl), and refresh the state."""
        pos_w, quat_w, lin_vel_w, ang_vel_b = map(to_numpy, (pos_w, quat_w, lin_vel_w, ang_vel_b))
        q, dq = to_numpy(q), to_numpy(dq)
        for i, d in enumerate(self.datas):
            d.qpos[:3], d.qpos[3:7], d.qvel[:3], d.qvel[3:6] = pos_w[i], quat_w[i], lin_vel_w[i], ang_vel_b[i]
            d.qpos[self._qpos_sl], d.qvel[self._qvel_sl] = q[i], dq[i]
            self._sensed_q[i], self._sensed_dq[i] = q[i], dq[i]
            mujoco.mj_forward(self.models[self.variant[i]], d)
        self._read_state()

    def push(self, env_ids: np.ndarray, delta_lin_vel_w: np.ndarray) -> None:
        """Kick the pelvis."""
        env_ids, delta_lin_vel_w = to_numpy(env_ids), to_numpy(delta_lin_vel_w)
        for k, i in enumerate(env_ids):
            self.datas[i].qvel[:3] += delta_lin_vel_w[k]

    def step(self, command: MotorCommand, substeps: int) -> None:
        """Hold ``command`` for ``substeps`` physics steps (through the actuation latency), every shard of
        envs on its own worker."""
        pieces = [(to_numpy(ctrl), n) for ctrl, n in self._drive.pieces(command, self.motor_params, substeps)]
        if self._pool is None:
            self._step_shard(self._shards[0], pieces)
        else:
            for done in [self._pool.submit(self._step_shard, s, pieces) for s in self._shards]:
                done.result()
        self._read_state(copied=True)

    def _step_shard(self, envs: range, pieces: list[tuple[np.ndarray, int]]) -> None:
        """One worker's envs: physics in C (GIL released), then the raw arrays the MDP reads."""
        raw = self._raw
        for i in envs:
            model, d = self.models[self.variant[i]], self.datas[i]
            for ctrl, nstep in pieces:
                if self.held[i]:
                    self._step_held(i, model, d, ctrl[i], nstep)
                else:
                    d.ctrl[self._ctrl_sl] = ctrl[i]
                    mujoco.mj_step(model, d, nstep)
            # mj_step leaves body poses and velocities at the start of its last step: bring the ones the
            # MDP reads up to the new qpos/qvel (a 2-5 ms lag otherwise)
            mujoco.mj_kinematics(model, d)
            mujoco.mj_comPos(model, d)
            mujoco.mj_comVel(model, d)
            self._copy_raw(i, d, raw)

    def _step_held(
        self, i: int, model: mujoco.MjModel, d: mujoco.MjData, ctrl: np.ndarray, nstep: int
    ) -> None:
        """``nstep`` physics steps of env ``i`` with the held drive, its torque renewed every step."""
        sensed_q, sensed_dq = self._sensed_q[i], self._sensed_dq[i]
        q, dq, out = d.qpos[self._qpos_sl], d.qvel[self._qvel_sl], d.ctrl[self._ctrl_sl]  # views
        for _ in range(nstep):
            hold_pd(ctrl, sensed_q, sensed_dq, q, dq, out, self.held_lag)
            mujoco.mj_step(model, d)

    @staticmethod
    def _copy_raw(i: int, d: mujoco.MjData, raw: dict[str, np.ndarray]) -> None:
        raw["qpos"][i], raw["qvel"][i] = d.qpos, d.qvel
        raw["xpos"][i], raw["xquat"][i], raw["cvel"][i] = d.xpos, d.xquat, d.cvel
        raw["subtree_com"][i], raw["sensordata"][i] = d.subtree_com, d.sensordata
        raw["qfrc_actuator"][i] = d.qfrc_actuator

    def _read_state(self, env_ids: np.ndarray | None = None, copied: bool = False) -> None:
        """Derive the batched state from the raw arrays (copied here env by env unless ``copied``); every
        env by default, through views of the raw arrays rather than gathered copies."""
        ids = slice(None) if env_ids is None else np.asarray(env_ids)
        raw = self._raw
        if not copied:
            for i in range(self.num_envs) if isinstance(ids, slice) else ids:
                self._copy_raw(i, self.datas[i], raw)
        self.layout.write(self._state, ids, {name: a[ids] for name, a in raw.items()})
