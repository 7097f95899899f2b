"""Env policy-steps/s against raw ``mj_step`` on the same model in the same run, and PPO iteration time.

    python training/bench/bench_env.py [--envs 64 128 256] [--steps 50] [--iterations 3]

Both figures come from the same seeded run (64 G1s following the reference open loop with action noise:
standing, swaying, sometimes falling and being reset, as in training). The raw baseline replays that run's
trajectories with bare ``mj_step`` calls (state restored at each policy step, the applied torques held), so
contact configurations, and hence physics cost, are the same; what separates the two is the MDP (PD at
physics rate, observations, rewards, terminations, resets, bookkeeping). Times are CPU time of this
single-threaded process: per-core figures that do not depend on how busy a shared machine is.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable

import mujoco
import numpy as np
import torch

from asap_training.envs.config import DomainRandCfg, TrackingEnvCfg
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.rl.config import PpoCfg
from asap_training.rl.train import TrackingRunner
from asap_training.rl.vecenv import RslRlVecEnv

Actions = Callable[[TrackingEnv, np.random.Generator], np.ndarray]
"""The actions of one policy step for an env."""


def reference_actions(env: TrackingEnv, rng: np.random.Generator, noise: float = 0.1) -> np.ndarray:
    """Open-loop tracking actions (the reference's next joint angles) plus noise: robots that stand, sway,
    sometimes fall and are reset, as during training."""
    nxt = env.motions.sample(env.motion_ids, env.motion_time_s + env.dt)
    a = (nxt.dof_pos - env.default_q) / env.cfg.actions.scale
    return a + rng.normal(scale=noise, size=a.shape)


def make_env(num_envs: int) -> TrackingEnv:
    """The bench env: default MDP, no randomization (one model), fixed seed."""
    no_dr = DomainRandCfg(friction_range=None, kp_scale_range=None, delay_ms_range=None, push_interval_s=None)
    return TrackingEnv(TrackingEnvCfg(num_envs=num_envs, domain_rand=no_dr, seed=0))


def env_policy_steps_per_s(make: Callable[[], TrackingEnv], act: Actions, steps: int) -> float:
    """CPU time of the full MDP step (PD at physics rate, observations, rewards, terminations, resets)."""
    env, rng = make(), np.random.default_rng(0)
    start, elapsed = 0.0, 0.0
    for _ in range(steps):
        a = act(env, rng)
        start = time.process_time()
        env.step(a)
        elapsed += time.process_time() - start
    return steps * env.num_envs / elapsed


def raw_policy_steps_per_s(make: Callable[[], TrackingEnv], act: Actions, steps: int) -> float:
    """CPU time of bare ``mj_step`` replaying the same trajectories: the same seeded run is recorded
    (state at each policy step and the torques applied), then re-stepped ``decimation`` times per
    policy step with nothing else in the loop."""
    env, rng = make(), np.random.default_rng(0)
    frames = []
    for _ in range(steps):
        snap = [(d.qpos.copy(), d.qvel.copy(), d.qacc_warmstart.copy()) for d in env.sim.datas]
        env.step(act(env, rng))
        frames.append([(*s, d.ctrl.copy()) for s, d in zip(snap, env.sim.datas, strict=True)])
    model, data = env.sim.models[0], mujoco.MjData(env.sim.models[0])
    elapsed = 0.0
    for frame in frames:
        for qpos, qvel, warm, ctrl in frame:
            data.qpos[:], data.qvel[:], data.qacc_warmstart[:], data.ctrl[:] = qpos, qvel, warm, ctrl
            start = time.process_time()
            for _ in range(env.cfg.decimation):
                mujoco.mj_step(model, data)
            elapsed += time.process_time() - start
    return steps * env.num_envs / elapsed


def main() -> None:
    """Print the figures."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--envs",
        type=int,
        nargs="+",
        default=[64, 128, 256],
        help="env counts to measure (the MDP is vectorized: its cost per env falls with N)",
    )
    p.add_argument("--steps", type=int, default=50, help="policy steps per measurement")
    p.add_argument("--iterations", type=int, default=3, help="PPO iterations to time")
    args = p.parse_args()
    torch.set_num_threads(1)
    print("G1 (29 motors), 200 Hz physics (PD every step), 50 Hz policy, 1 thread, CPU time per core")
    print(f"{'envs':>6} {'raw mj_step':>22} {'tracking env':>22} {'env/raw':>8}   (target >= 0.70)")
    for n in args.envs:
        make = functools.partial(make_env, n)
        raw_sps = raw_policy_steps_per_s(make, reference_actions, args.steps)
        env_sps = env_policy_steps_per_s(make, reference_actions, args.steps)
        print(
            f"{n:>6} {raw_sps:>10.0f} policy steps/s {env_sps:>8.0f} policy steps/s {env_sps / raw_sps:>8.2f}"
        )
    env = make_env(args.envs[0])
    ppo = PpoCfg(max_iterations=args.iterations)
    runner = TrackingRunner(RslRlVecEnv(env), ppo.to_rsl_rl(), log_dir=None, progress=False)
    times = []
    for _ in range(args.iterations):
        start = time.process_time()
        runner.learn(1)
        times.append(time.process_time() - start)
    samples = env.num_envs * ppo.num_steps_per_env
    print(
        f"PPO iteration:      {np.median(times):8.2f} s for {samples} samples "
        f"({samples / np.median(times):.0f} samples/s incl. update; 512-256-128 actor and critic)"
    )


if __name__ == "__main__":
    main()
