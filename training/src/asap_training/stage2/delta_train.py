"""``asap-delta``: fit the delta-action model πΔ to a real-trajectory dataset with PPO (research §4.3).

    asap-delta --dataset runs/demo/dataset.npz --run-dir runs/demo/delta --iterations 200
    asap-delta --dataset ds.npz --run-dir runs/delta_ankles --joints '.*_ankle_.*'   # 4-DoF ankle model

Writes ``<run-dir>/delta.onnx`` (πΔ + metadata, see :mod:`asap_training.stage2.delta_model`), the PPO run
(checkpoints, tensorboard, progress.jsonl) and ``<run-dir>/open_loop.json``: the open-loop replay errors of
the dataset with and without πΔ.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch

from asap_training.rl.config import PpoCfg
from asap_training.rl.train import train
from asap_training.stage2.dataset import RealDataset, load_dataset_for
from asap_training.stage2.delta_env import DeltaCfg, DeltaEnv, delta_env_cfg, delta_obs_dim
from asap_training.stage2.delta_model import DeltaModelMeta, export_delta_model
from asap_training.stage2.warm_start import WarmStartCfg, fit_actor, one_step_targets


def delta_ppo_cfg(iterations: int) -> PpoCfg:
    """ASAP trains πΔ with its stage-1 PPO settings; the initial std is small because Δa is a correction
    of a working policy's action (|Δa| ≈ 0.01–0.05 in the paper's Fig. 13), not a policy."""
    return PpoCfg(
        max_iterations=iterations, hidden_dims=(256, 128), init_std=0.1, entropy_coef=0.0, save_interval=50
    )


def train_delta(
    dataset: RealDataset,
    run_dir: Path,
    *,
    delta: DeltaCfg | None = None,
    ppo: PpoCfg | None = None,
    iterations: int = 200,
    num_envs: int = 64,
    profile: str = "nominal",
    seed: int = 0,
    progress: bool = True,
    resume: bool = False,
    warm_start: WarmStartCfg | None = None,
) -> tuple[Path, str]:
    """Train πΔ in the delta env (continuing ``run_dir``'s latest checkpoint if ``resume``) and export it;
    returns (``delta.onnx`` path, its sha256)."""
    delta = delta or DeltaCfg()
    ppo = replace(ppo or delta_ppo_cfg(iterations), max_iterations=iterations)
    env_cfg = delta_env_cfg(dataset, num_envs=num_envs, profile=profile, seed=seed)
    env = DeltaEnv(env_cfg, dataset, delta)
    warm = None
    if warm_start is not None:
        obs, targets, before, after = one_step_targets(dataset, delta, warm_start, profile)
        warm = {"one_step_residual_before": before, "one_step_residual_after": after, "samples": len(obs)}

        def before_learn(runner: object) -> None:
            warm["regression_mse"] = fit_actor(runner.alg.get_policy(), obs, targets, warm_start)

    else:
        before_learn = None
    runner = train(
        env_cfg, ppo, run_dir, resume=resume, progress=progress, env=env, before_learn=before_learn
    )
    if warm is not None:
        (run_dir / "warm_start.json").write_text(json.dumps(warm, indent=2) + "\n")
    meta = DeltaModelMeta(
        action_joints=dataset.action_joints,
        mask=tuple(env.delta_mask.tolist()),
        control_dt=dataset.control_dt,
        obs_dim=delta_obs_dim(len(dataset.action_joints)),
        obs_scales=dict(delta.obs_scales),
        action_clip=delta.max_delta,
        horizon_s=delta.horizon_s,
        dataset_sha256=dataset.sha256,
        profile=profile,
    )
    path = run_dir / "delta.onnx"
    sha = export_delta_model(runner.alg.get_policy().as_onnx(verbose=False), path, meta)
    return path, sha


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    from asap_training.stage2.openloop import open_loop_errors

    p = argparse.ArgumentParser(
        prog="asap-delta", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--dataset", type=Path, required=True, help="dataset .npz from asap-ingest")
    p.add_argument("--run-dir", type=Path, required=True, help="output directory (outside git)")
    p.add_argument("--iterations", type=int, default=200, help="PPO iterations (default 200)")
    p.add_argument("--num-envs", type=int, default=64, help="parallel replays (default 64)")
    p.add_argument("--horizon", type=float, default=1.0, help="open-loop episode length, s (default 1.0)")
    p.add_argument("--joints", nargs="+", default=[".*"], help="regexes of the action joints Δa may change")
    p.add_argument("--profile", default="nominal", help="dynamics profile of the simulator being corrected")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    dataset = load_dataset_for("asap-delta", args.dataset)
    path, sha = train_delta(
        dataset,
        args.run_dir,
        delta=DeltaCfg(horizon_s=args.horizon, joints=tuple(args.joints)),
        iterations=args.iterations,
        num_envs=args.num_envs,
        profile=args.profile,
        seed=args.seed,
        progress=not args.quiet,
    )
    report = {
        "delta_model": str(path),
        "sha256": sha,
        "without_delta": open_loop_errors(dataset, profile=args.profile),
        "with_delta": open_loop_errors(dataset, profile=args.profile, delta_model=path),
    }
    (args.run_dir / "open_loop.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
