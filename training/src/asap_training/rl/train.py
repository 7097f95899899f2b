"""``asap-train``: PPO (rsl_rl) on the tracking env, with tensorboard logs, checkpoints, resume and export.

A run directory holds everything needed to reproduce and resume it::

    <run>/params/env.yaml, ppo.yaml    resolved configs (resume reads them back)
    <run>/model_<it>.pt                checkpoints (policy, critic, optimizer, env curricula)
    <run>/progress.jsonl               one line per iteration: reward, episode length, tracking reward, fps
    <run>/events.out.tfevents.*        tensorboard (tensorboard --logdir <run>)
    <run>/policy.onnx                  the exported artifact (asap_core.artifact), written at the end

Examples::

    asap-train --run-dir /work/runs/arm_swing --motion arm_swing --iterations 1500
    asap-train --run-dir /work/runs/arm_swing --resume --iterations 3000     # continue to 3000
    asap-train --run-dir /tmp/r --motion ../shared/data/asap_g1/motions/video_kick_level1_filter_amass.pkl
    torchrun --nproc_per_node 2 -m asap_training.cli.train --run-dir /work/runs/r --device cuda \\
        --num-envs 4096
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import torch
import yaml
from rsl_rl.runners import OnPolicyRunner
from tqdm import tqdm

from asap_training.envs.config import TrackingEnvCfg
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.parallel import distributed_rank
from asap_training.rl.config import PpoCfg
from asap_training.rl.vecenv import RslRlVecEnv

TRACKING_TERMS = (
    "body_pos",
    "vr_3point",
    "feet_pos",
    "body_rot",
    "body_ang_vel",
    "body_lin_vel",
    "dof_pos",
    "dof_vel",
)
"""The exp-kernel terms of Table I; the mean episode return of their sum is ``tracking_reward`` in
progress.jsonl (it grows with both tracking quality and survival)."""


class TrackingRunner(OnPolicyRunner):
    """rsl_rl's runner that also checkpoints the env's curricula and reports to a progress bar + JSONL."""

    def __init__(
        self,
        env: RslRlVecEnv,
        train_cfg: dict,
        log_dir: str | None,
        progress: bool = True,
        on_iteration: Callable[[TrackingRunner, int], None] | None = None,
        device: str = "cpu",
    ) -> None:
        """Create the runner; hook the logger so each iteration is summarized, not printed.

        ``on_iteration(runner, it)`` runs after iteration ``it``'s update (e.g. to score the policy);
        ``device``: where the networks and the PPO update run (the env hands over CPU tensors)."""
        with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints both networks in full
            super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        self.tracking_env: TrackingEnv = env.env
        self.history: list[dict] = []
        self._progress = progress
        self._on_iteration = on_iteration
        self._bar: tqdm | None = None
        self._log = self.logger.log
        self.logger.log = self._log_iteration

    def _configure_multi_gpu(self) -> None:
        """rsl_rl's multi-GPU set-up from torchrun's variables, for CPU processes too (gloo), so that a
        machine without GPUs (CI) runs the same distributed path; NCCL and one GPU per process otherwise."""
        if not self.device.startswith("cpu") or int(os.getenv("WORLD_SIZE", "1")) == 1:
            super()._configure_multi_gpu()
            return
        self.gpu_world_size = int(os.environ["WORLD_SIZE"])
        self.gpu_local_rank = int(os.getenv("LOCAL_RANK", "0"))
        self.gpu_global_rank = int(os.getenv("RANK", "0"))
        self.is_distributed = True
        self.cfg["multi_gpu"] = {"global_rank": self.gpu_global_rank, "local_rank": self.gpu_local_rank,
                                 "world_size": self.gpu_world_size}
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group("gloo", rank=self.gpu_global_rank,
                                                 world_size=self.gpu_world_size)

    @property
    def is_main_process(self) -> bool:
        """Rank 0 (or the only process): the one that logs, checkpoints and exports."""
        return not self.is_distributed or self.gpu_global_rank == 0

    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """rsl_rl's loop, with the progress bar closed at the end."""
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # and its git-state notice
                super().learn(num_learning_iterations, init_at_random_ep_len)
        finally:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def save(self, path: str, infos: dict | None = None) -> None:
        """Checkpoint with the env's curriculum state."""
        super().save(path, {"curriculum": self.tracking_env.curriculum_state(), **(infos or {})})

    def load(
        self, path: str, load_cfg: dict | None = None, strict: bool = True, map_location: str | None = None
    ) -> dict:
        """Restore models, optimizer and the env's curricula."""
        infos = super().load(path, load_cfg, strict, map_location) or {}
        if "curriculum" in infos:
            self.tracking_env.set_curriculum_state(infos["curriculum"])
        return infos

    def _log_iteration(
        self, it: int, start_it: int, total_it: int, collect_time: float, learn_time: float, **kwargs: object
    ) -> None:
        lg = self.logger
        terms: dict[str, list[float]] = {}
        for ep in lg.ep_extras:
            for key, value in ep.items():
                if key.startswith("Episode_Reward/"):
                    terms.setdefault(key.removeprefix("Episode_Reward/"), []).append(float(value))
        mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
        row = {
            "iteration": it,
            "mean_reward": mean(list(lg.rewbuffer)),
            "mean_episode_length": mean(list(lg.lenbuffer)),
            "tracking_reward": sum(mean(terms[k]) for k in TRACKING_TERMS if k in terms)
            if terms
            else float("nan"),
            "penalty_scale": self.tracking_env.penalty_scale,
            "far_threshold": self.tracking_env.far_threshold,
            "steps_per_s": self.env.num_envs * self.cfg["num_steps_per_env"] / (collect_time + learn_time),
            "collect_s": collect_time,
            "learn_s": learn_time,
            "time": time.time(),
        }
        self.history.append(row)
        if lg.log_dir and self.is_main_process:
            with open(Path(lg.log_dir) / "progress.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
        with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints a page per iteration
            self._log(
                it=it,
                start_it=start_it,
                total_it=total_it,
                collect_time=collect_time,
                learn_time=learn_time,
                **kwargs,
            )
        if self._progress and self.is_main_process:
            if self._bar is None:
                self._bar = tqdm(total=total_it, initial=start_it, desc="PPO", unit="it", dynamic_ncols=True)
            self._bar.update(1)
            self._bar.set_postfix(
                reward=f"{row['mean_reward']:.2f}",
                ep_len=f"{row['mean_episode_length']:.0f}",
                track=f"{row['tracking_reward']:.3f}",
                sps=f"{row['steps_per_s']:.0f}",
            )
        if self._on_iteration is not None:
            self._on_iteration(self, it)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint with the highest iteration in a run directory."""
    found = [
        (int(m.group(1)), p)
        for p in run_dir.glob("model_*.pt")
        if (m := re.fullmatch(r"model_(\d+)\.pt", p.name))
    ]
    return max(found)[1] if found else None


def write_params(run_dir: Path, env_cfg: TrackingEnvCfg, ppo_cfg: PpoCfg) -> None:
    """Resolved configs next to the checkpoints."""
    (run_dir / "params").mkdir(parents=True, exist_ok=True)
    (run_dir / "params" / "env.yaml").write_text(yaml.safe_dump(env_cfg.to_dict(), sort_keys=False))
    (run_dir / "params" / "ppo.yaml").write_text(yaml.safe_dump(ppo_cfg.to_dict(), sort_keys=False))


def read_params(run_dir: Path) -> tuple[TrackingEnvCfg, PpoCfg]:
    """Configs a run was started with."""
    env = yaml.safe_load((run_dir / "params" / "env.yaml").read_text())
    ppo = yaml.safe_load((run_dir / "params" / "ppo.yaml").read_text())
    return TrackingEnvCfg.from_dict(env), PpoCfg.from_dict(ppo)


def load_run(run_dir: Path, checkpoint: Path) -> TrackingRunner:
    """A run's policy at ``checkpoint``, in one env built from the run's saved configs (to export it)."""
    env_cfg, ppo_cfg = read_params(run_dir)
    env = RslRlVecEnv(TrackingEnv(dataclasses.replace(env_cfg, num_envs=1)))
    runner = TrackingRunner(env, ppo_cfg.to_rsl_rl(), log_dir=None, progress=False)
    runner.load(str(checkpoint))
    return runner


def train(
    env_cfg: TrackingEnvCfg,
    ppo_cfg: PpoCfg,
    run_dir: Path,
    resume: bool = False,
    progress: bool = True,
    env: TrackingEnv | None = None,
    before_learn: Callable[[TrackingRunner], None] | None = None,
    on_start: Callable[[TrackingRunner], None] | None = None,
    on_iteration: Callable[[TrackingRunner, int], None] | None = None,
    device: str = "cpu",
) -> TrackingRunner:
    """Train until ``ppo_cfg.max_iterations`` (counting the iterations of a resumed run).

    ``env`` (built from ``env_cfg``) replaces the default tracking env, e.g. stage 2's delta env;
    ``before_learn`` sees the runner before the first update of a fresh run (e.g. a warm start);
    ``on_start`` before the first update of this call, fresh or resumed (e.g. to score the loaded policy);
    ``on_iteration(runner, it)`` after each update. Under ``torchrun`` every process steps its own envs
    (seeded ``seed + rank``), gradients are averaged across processes and rank 0 writes the run directory;
    ``device`` ``cuda`` means this process's GPU (``cuda:<local rank>``).
    """
    rank, local_rank, _ = distributed_rank()
    if rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_params(run_dir, env_cfg, ppo_cfg)
    device, sim_device = (f"cuda:{local_rank}" if d == "cuda" else d for d in (device, env_cfg.device))
    torch.manual_seed(env_cfg.seed + rank)
    local = dataclasses.replace(env_cfg, seed=env_cfg.seed + rank, device=sim_device)
    env = RslRlVecEnv(env or TrackingEnv(local))
    runner = TrackingRunner(
        env,
        ppo_cfg.to_rsl_rl(),
        log_dir=str(run_dir),
        progress=progress,
        on_iteration=on_iteration,
        device=device,
    )
    checkpoint = latest_checkpoint(run_dir) if resume else None
    if checkpoint is not None:
        runner.load(str(checkpoint))
    elif before_learn is not None:
        before_learn(runner)
    if on_start is not None:
        on_start(runner)
    remaining = ppo_cfg.max_iterations - runner.current_learning_iteration
    if remaining > 0:
        runner.learn(remaining)
    return runner
