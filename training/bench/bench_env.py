"""Training throughput per simulator configuration, against raw ``mj_step`` and the old single-thread path.

    python training/bench/bench_env.py                        # this machine: the baseline, then every core
    python training/bench/bench_env.py --json                 # one JSON object per configuration
    python training/bench/bench_env.py --configs mujoco:cpu:1024:0 --iterations 3

A configuration is ``sim:device:num_envs:threads`` (threads 0 = every core). For each one, in the same run:

* ``raw_mj_step_per_s``: a plain single-thread ``mj_step`` loop on the same model, from the states the env
  visits (its contact mix), with the env's own ctrl held;
* ``samples_per_s``: ``env_step`` (the tracking MDP with physics, wall clock), ``env_inference`` (rsl_rl's
  collection loop: policy inference + env step + storage) and ``env_inference_ppo`` (collection + the PPO
  update: what training gets);
* ``env_vs_raw``: ``env_step / (threads x raw / decimation)``, what the MDP and the threading keep of the raw
  physics rate; ``vs_baseline``: ``env_inference_ppo`` over the first configuration's.

The first configuration, ``legacy:cpu:64:1``, is the path training had before the drives moved into the
engine: the PD law in numpy between single physics steps of each env, the implicitfast integrator, one
thread, 64 envs (kept here, and only here, as the baseline this benchmark compares with). Wall-clock
figures: run on an idle machine (``uptime``), and compare ratios within a run, not numbers across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

import mujoco
import numpy as np
import torch
import torch._dynamo
import warp as wp

from asap_sim.model import G1Indices
from asap_sim.motor import EFFORT_LIMIT, MotorCommand, MotorParams, drive_ctrl
from asap_training.envs.config import DomainRandCfg, TrackingEnvCfg
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.parallel import available_cores, use_threads
from asap_training.rl.config import PpoCfg
from asap_training.rl.train import TrackingRunner
from asap_training.rl.vecenv import RslRlVecEnv
from asap_training.sim import SIMULATORS
from asap_training.sim.base import StateLayout
from asap_training.sim.mujoco_cpu import MujocoCpuSimulator

NO_DR = DomainRandCfg.off()
DEFAULT_CONFIGS = ("legacy:cpu:64:1", "mujoco:cpu:64:1", "mujoco:cpu:256:0", "mujoco:cpu:1024:0")


class LegacySimulator(MujocoCpuSimulator):
    """The old single-thread path (the baseline), as it stepped: envs in chunks of 8; per chunk and physics
    step the drive law in numpy on the chunk's joint state, then per env the torque as a plain motor
    command and one ``mj_step``; implicitfast integration; one thread."""

    def __init__(self, models, *args, **kwargs) -> None:
        models = [_with_integrator(m, mujoco.mjtIntegrator.mjINT_IMPLICITFAST) for m in models]
        super().__init__(models, *args, **{**kwargs, "threads": 1})
        self._bias_ctrl = self.idx.actuator
        self._command_ctrl = None

    def step(self, command, substeps: int) -> None:
        """Keep the command's drive terms for the per-step law."""
        ctrl = torch.as_tensor(drive_ctrl(command, self.motor_params)).numpy()
        self._command_ctrl = np.broadcast_to(ctrl, (self.num_envs, ctrl.shape[-1]))
        super().step(command, substeps)

    def _step_shard(self, envs: range, pieces: list) -> None:
        n, limit = len(self._bias_ctrl), EFFORT_LIMIT
        q, dq = self._state.joint_pos, self._state.joint_vel
        for start in range(envs.start, envs.stop, 8):
            chunk = slice(start, min(start + 8, envs.stop))
            datas, models = self.datas[chunk], [self.models[v] for v in self.variant[chunk]]
            bias, kp, kd = (self._command_ctrl[chunk, k * n : (k + 1) * n] for k in range(3))
            cq, cdq = q[chunk], dq[chunk]
            for _ in range(sum(k for _, k in pieces)):
                tau = np.minimum(np.maximum(bias - kp * cq - kd * cdq, -limit), limit)
                for k, d in enumerate(datas):
                    d.ctrl[self._bias_ctrl] = tau[k]
                    mujoco.mj_step(models[k], d)
                    cq[k], cdq[k] = d.qpos[self._qpos_sl], d.qvel[self._qvel_sl]
            for i, (model, d) in enumerate(zip(models, datas, strict=True), start=chunk.start):
                mujoco.mj_kinematics(model, d)
                mujoco.mj_comPos(model, d)
                mujoco.mj_comVel(model, d)
                self._copy_raw(i, d, self._raw)


def _with_integrator(model: mujoco.MjModel, integrator: mujoco.mjtIntegrator) -> mujoco.MjModel:
    copy = model.__copy__()
    copy.opt.integrator = integrator
    return copy


def make_env(sim: str, device: str, num_envs: int, threads: int, physics_dt: float, decimation: int,
             compile_mdp: bool | None = None) -> TrackingEnv:
    """The bench env: default MDP, no randomization (one model), fixed seed."""
    target = f"{__name__}:LegacySimulator" if sim == "legacy" else SIMULATORS[sim]
    return TrackingEnv(TrackingEnvCfg(num_envs=num_envs, domain_rand=NO_DR, seed=0, threads=threads,
                                      physics_dt=physics_dt, decimation=decimation, simulator=target,
                                      device=device, compile_mdp=compile_mdp))


def reference_actions(env: TrackingEnv, noise: float = 0.1) -> torch.Tensor:
    """Open-loop tracking actions (the reference's next joint angles) plus noise: robots that stand, sway,
    sometimes fall and are reset, as during training."""
    nxt = env.motions.sample(env.motion_ids, env.motion_time_s + env.dt)
    a = (nxt.dof_pos - env.default_q) / env.cfg.actions.scale
    return a + noise * torch.randn(a.shape, generator=env.rng, device=env.device, dtype=env.dtype)


def raw_mj_step_per_s(env: TrackingEnv, max_envs: int = 64) -> float:
    """Single-thread C ``mj_step`` from the states the env is in (its contact mix; any backend's state),
    ``decimation`` steps each, holding the default pose with the env's gains."""
    model, data = env.sim.models[0], mujoco.MjData(env.sim.models[0])
    s = {k: v[:max_envs].double().cpu().numpy() for k, v in vars(env.sim.state).items()}
    layout = StateLayout.from_model(model)
    hold = MotorCommand.position(env.default_q_motor.cpu().numpy(), env.kp_motor.cpu().numpy(),
                                 env.kd_motor.cpu().numpy())
    ctrl = drive_ctrl(hold, MotorParams.from_profile(env.profile))
    elapsed, steps = 0.0, 0
    for i in list(range(len(s["root_pos_w"]))) * 2:
        mujoco.mj_resetData(model, data)
        data.qpos[:3], data.qpos[3:7], data.qpos[layout.qpos] = s["root_pos_w"][i], s["root_quat_w"][i], \
            s["joint_pos"][i]
        data.qvel[:3], data.qvel[3:6], data.qvel[layout.qvel] = s["root_lin_vel_w"][i], \
            s["root_ang_vel_b"][i], s["joint_vel"][i]
        data.ctrl[G1Indices.from_model(model).drive_ctrl] = ctrl
        start = time.perf_counter()
        mujoco.mj_step(model, data, env.cfg.decimation)
        elapsed += time.perf_counter() - start
        steps += env.cfg.decimation
    return steps / elapsed


def env_step_per_s(
    env: TrackingEnv, steps: int, act: Callable[[TrackingEnv], torch.Tensor] = reference_actions
) -> float:
    """Wall-clock env transitions per second of the MDP step alone (actions from ``act``)."""
    start = time.perf_counter()
    for _ in range(steps):
        env.step(act(env))
    synchronize(env.device)
    return steps * env.num_envs / (time.perf_counter() - start)


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work before reading the clock."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def training_per_s(env: TrackingEnv, iterations: int, device: str) -> tuple[float, float]:
    """(collection, collection + update) samples/s of rsl_rl PPO iterations (the first one warms up)."""
    ppo = PpoCfg(max_iterations=iterations + 1)
    runner = TrackingRunner(RslRlVecEnv(env), ppo.to_rsl_rl(), log_dir=None, progress=False, device=device)
    runner.learn(iterations + 1)
    rows = runner.history[1:]
    samples = env.num_envs * ppo.num_steps_per_env * len(rows)
    collect = sum(r["collect_s"] for r in rows)
    return samples / collect, samples / (collect + sum(r["learn_s"] for r in rows))


def measure(config: str, steps: int, iterations: int, physics_dt: float, decimation: int,
            compile_mdp: bool | None = None) -> dict:
    """Every figure of one configuration."""
    sim, device, num_envs, threads = config.split(":")
    num_envs, threads = int(num_envs), use_threads(int(threads))
    torch._dynamo.reset()  # each configuration compiles its own MDP (one training process has one env)
    env = make_env(sim, device, num_envs, threads, physics_dt, decimation, compile_mdp)
    env_step_per_s(env, 2)  # warm-up: kernel compilation and graph capture are not throughput
    env_sps = env_step_per_s(env, steps)
    raw = raw_mj_step_per_s(env)
    collect, total = training_per_s(env, iterations, device)
    return {
        "sim": sim,
        "device": device,
        "num_envs": num_envs,
        "threads": threads,
        "physics_dt": physics_dt,
        "decimation": decimation,
        "compile_mdp": TrackingEnv.COMPILED[0] in vars(env),
        "raw_mj_step_per_s": round(raw),
        "samples_per_s": {"env_step": round(env_sps), "env_inference": round(collect),
                          "env_inference_ppo": round(total)},
        "env_vs_raw": round(env_sps / (threads * raw / decimation), 3),
    }


def main() -> None:
    """Measure every configuration and print a table or JSON lines."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS),
                   help="sim:device:num_envs:threads, the first one is the baseline (default: %(default)s)")
    p.add_argument("--steps", type=int, default=24, help="policy steps timed for env_step (default 24)")
    p.add_argument("--iterations", type=int, default=2,
                   help="PPO iterations timed after one warm-up (default 2)")
    p.add_argument("--physics-dt", type=float, default=0.002,
                   help="physics step (default 0.002: the twin's)")
    p.add_argument("--decimation", type=int, default=10,
                   help="physics steps per 50 Hz policy step (default 10)")
    p.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                   help="torch.compile the MDP (TrackingEnvCfg.compile_mdp; auto: on for cuda)")
    p.add_argument("--json", action="store_true", help="one JSON object per configuration")
    args = p.parse_args()
    wp.config.log_level = wp.LOG_WARNING  # Warp's module-load lines would interleave with the output
    compile_mdp = {"auto": None, "on": True, "off": False}[args.compile]
    if not args.json:
        print(f"G1 29 motors, {1 / args.physics_dt:.0f} Hz physics, {args.decimation} steps per policy step, "
              f"{available_cores()} cores, load {os.getloadavg()[0]:.1f}; samples/s, wall clock")
        print(f"{'config':>22} {'raw mj_step':>11} {'env':>8} {'env+inf':>8} {'env+inf+ppo':>11} "
              f"{'env/raw':>7} {'vs base':>7}")
    baseline = None
    for config in args.configs:
        row = measure(config, args.steps, args.iterations, args.physics_dt, args.decimation, compile_mdp)
        total = row["samples_per_s"]["env_inference_ppo"]
        baseline = baseline or total
        row["vs_baseline"] = round(total / baseline, 2)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            s = row["samples_per_s"]
            print(f"{config:>22} {row['raw_mj_step_per_s']:>11} {s['env_step']:>8} {s['env_inference']:>8} "
                  f"{total:>11} {row['env_vs_raw']:>7} {row['vs_baseline']:>7}", flush=True)


if __name__ == "__main__":
    main()
