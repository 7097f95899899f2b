"""Env policy-steps/s against raw ``mj_step`` on the same model in the same run, and PPO iteration time.

    python training/bench/bench_env.py [--envs 64] [--steps 100] [--iterations 3]

The raw baseline steps the same model (asap_sim, 200 Hz) from copies of the env's current states, holding
the torques the env last applied, in a bare loop of ``mj_step`` calls: what is left between the two is the
MDP (PD at physics rate, observations, rewards, terminations, resets, bookkeeping). Measurements are
interleaved so machine load hits both alike; single thread, so the ratio is per core. Absolute numbers vary
±15-25 % with load on shared machines: read the ratio.
"""

from __future__ import annotations

import argparse
import time

import mujoco
import numpy as np
import torch

from asap_core import g1
from asap_training.envs.config import DomainRandCfg, TrackingEnvCfg
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.rl.config import PpoCfg
from asap_training.rl.train import TrackingRunner
from asap_training.rl.vecenv import RslRlVecEnv


def raw_policy_steps_per_s(env: TrackingEnv, policy_steps: int) -> float:
    """Plain ``mj_step`` on copies of the env's states: ``decimation`` steps per policy step, held torques."""
    model = env.sim.models[0]
    datas = [mujoco.MjData(model) for _ in range(env.num_envs)]
    for d, src in zip(datas, env.sim.datas, strict=True):
        d.qpos[:], d.qvel[:], d.ctrl[:] = src.qpos, src.qvel, src.ctrl
        mujoco.mj_forward(model, d)
    start = time.perf_counter()
    for _ in range(policy_steps):
        for d in datas:
            for _ in range(env.cfg.decimation):
                mujoco.mj_step(model, d)
    return policy_steps * env.num_envs / (time.perf_counter() - start)


def env_policy_steps_per_s(env: TrackingEnv, policy_steps: int, rng: np.random.Generator) -> float:
    """The full MDP step (PD at physics rate, observations, rewards, terminations, resets)."""
    actions = rng.normal(scale=0.3, size=(policy_steps, env.num_envs, env.num_actions))
    start = time.perf_counter()
    for a in actions:
        env.step(a)
    return policy_steps * env.num_envs / (time.perf_counter() - start)


def main() -> None:
    """Print the figures."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=100, help="policy steps per measurement")
    p.add_argument("--iterations", type=int, default=3, help="PPO iterations to time")
    args = p.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    no_dr = DomainRandCfg(friction_range=None, kp_scale_range=None, delay_ms_range=None, push_interval_s=None)
    env = TrackingEnv(TrackingEnvCfg(num_envs=args.envs, domain_rand=no_dr))
    env.step(np.zeros((env.num_envs, env.num_actions)))  # warm up
    # interleave to share the machine's load fluctuations between the two measurements
    raw, ours = [], []
    for _ in range(3):
        raw.append(raw_policy_steps_per_s(env, args.steps // 3))
        ours.append(env_policy_steps_per_s(env, args.steps // 3, rng))
    raw_sps, env_sps = float(np.median(raw)), float(np.median(ours))
    print(
        f"G1 ({g1.NUM_MOTORS} motors), {env.num_envs} envs, {1 / env.cfg.physics_dt:.0f} Hz physics, "
        f"{1 / env.dt:.0f} Hz policy, 1 thread"
    )
    print(
        f"raw mj_step:        {raw_sps:8.0f} policy steps/s "
        f"({raw_sps * env.cfg.decimation:.0f} physics steps/s)"
    )
    print(f"tracking env:       {env_sps:8.0f} policy steps/s")
    print(f"ratio env / raw:    {env_sps / raw_sps:8.2f}   (target >= 0.70)")

    ppo = PpoCfg(max_iterations=args.iterations)
    runner = TrackingRunner(RslRlVecEnv(env), ppo.to_rsl_rl(), log_dir=None, progress=False)
    times = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        runner.learn(1)
        times.append(time.perf_counter() - start)
    samples = env.num_envs * ppo.num_steps_per_env
    print(
        f"PPO iteration:      {np.median(times):8.2f} s for {samples} samples "
        f"({samples / np.median(times):.0f} samples/s incl. update; 512-256-128 actor and critic)"
    )


if __name__ == "__main__":
    main()
