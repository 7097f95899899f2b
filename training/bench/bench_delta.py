"""Stage 2 on 2 cores: delta-env samples/s against raw ``mj_step``, and the time to fit πΔ.

    python training/bench/bench_delta.py [--envs 32] [--steps 40] [--iterations 60] [--gap weak_ankles]

1. The delta env (open-loop replays at the twin's 500 Hz, Table II rewards, the πΔ observation) against
   single-thread ``mj_step`` from the states it visits, wall clock, every core (as ``bench_env.py``).
2. The wall time the πΔ fit (warm start, then PPO; ``asap-delta``'s defaults) needs to bring the open-loop
   replay error (1.0 s horizon, E_g-mpjpe) on a recording of the shipped policy on the twin with a reality
   gap below ``--target`` × the uncorrected error, scored every ``--check-every`` iterations (the curve).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch
from bench_env import env_step_per_s, raw_mj_step_per_s

from asap_core.artifact import load_artifact
from asap_training.data.dataset import RealDataset, RealTrajectory
from asap_training.delta.train import DeltaTrainCfg, train_delta
from asap_training.envs.delta_env import DeltaCfg, DeltaEnv, delta_env_cfg
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.eval.evaluate import eval_env_cfg, rollout_twin
from asap_training.eval.openloop import open_loop_errors
from asap_training.parallel import use_threads

SHIPPED = Path(__file__).resolve().parents[1] / "policies" / "arm_swing" / "policy.onnx"


def recording(gap: str, seeds: Sequence[int | None] = (None,), action_noise: float = 0.0) -> RealDataset:
    """The shipped policy on the twin core under ``gap``: the 'real' data, one episode per twin noise
    seed, with ``action_noise`` as the node's excitation (the demo's data episodes: 0.2)."""
    artifact = load_artifact(SHIPPED)

    def episode(seed: int | None) -> RealTrajectory | None:  # a fresh env each, as each episode starts anew
        env = TrackingEnv(eval_env_cfg(artifact))
        return rollout_twin(artifact, env, gap, seed=seed, action_noise=action_noise).trajectory

    meta = artifact.metadata
    return RealDataset(tuple(episode(seed) for seed in seeds), meta.control_dt, tuple(meta.joint_names),
                       artifact.sha256, 0)  # fmt: skip


def noisy_delta(env: TrackingEnv) -> torch.Tensor:
    """Exploration-sized Δa, as in early πΔ training."""
    shape = (env.num_envs, env.num_actions)
    return 0.1 * torch.randn(shape, generator=env.rng, device=env.device, dtype=env.dtype)


def main() -> None:
    """Print the figures."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", type=int, default=32, help="parallel replays")
    p.add_argument("--steps", type=int, default=40, help="policy steps per throughput measurement")
    p.add_argument("--gap", default="weak_ankles", help="twin dynamics profile of the recording")
    p.add_argument("--joints", nargs="+", default=[".*_ankle_.*"], help="joints πΔ corrects")
    p.add_argument("--target", type=float, default=0.7, help="fraction of the uncorrected 1 s error to reach")
    p.add_argument("--check-every", type=int, default=10, help="PPO iterations between error checks")
    p.add_argument("--iterations", type=int, default=60, help="PPO iterations after the warm start")
    args = p.parse_args()
    threads = use_threads(0)
    ds = recording(args.gap)
    delta_env = DeltaEnv(delta_env_cfg(ds, num_envs=args.envs), ds, DeltaCfg(joints=tuple(args.joints)))
    env = env_step_per_s(delta_env, args.steps, noisy_delta)
    raw = raw_mj_step_per_s(delta_env) / delta_env.cfg.decimation
    print(f"recording: shipped policy on the twin, '{args.gap}' gap, {ds.num_steps} ticks")
    print(f"delta env, 500 Hz physics, 50 Hz policy, {threads} threads; samples/s, wall clock")
    print(f"  raw mj_step (1 thread) {raw:8.0f} samples/s   delta env {env:8.0f} samples/s   "
          f"env / (threads x raw) {env / (threads * raw):.2f}")
    before = open_loop_errors(ds)["1"]["e_g_mpjpe_mm"]
    goal = args.target * before
    print(f"fit πΔ: open-loop 1.0 s E_g-mpjpe {before:.1f} mm uncorrected; target {goal:.1f} mm")
    print(f"  warm start, then {args.iterations} PPO iterations; scored every {args.check_every} "
          f"(wall time includes the warm start and the scoring)")  # fmt: skip
    run_dir = Path(tempfile.mkdtemp(prefix="bench_delta_"))
    budget = DeltaTrainCfg(iterations=args.iterations, num_envs=args.envs, select_every=args.check_every)
    train_delta(ds, run_dir, budget, delta=DeltaCfg(joints=tuple(args.joints)), progress=False)
    selection = json.loads((run_dir / "selection.json").read_text())
    reached = None
    for it, err in selection["scores"].items():
        wall = selection["elapsed_s"][it]
        print(f"  {int(it):5d} iterations  {wall:7.1f} s  open-loop 1.0 s E_g-mpjpe {err:7.1f} mm")
        if reached is None and err <= goal:
            reached = (err, wall, it)
    if reached:
        err, wall, it = reached
        print(f"reached {err:.1f} <= {goal:.1f} mm in {wall:.0f} s wall ({it} iterations)")
    else:
        print(f"not reached within {args.iterations} iterations")

if __name__ == "__main__":
    main()
