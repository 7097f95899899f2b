"""``asap-delta``: fit the delta-action model πΔ to a real-trajectory dataset with PPO
(arXiv 2502.01143 §III-B).

    asap-delta --dataset runs/demo/dataset.npz --run-dir runs/demo/delta --iterations 200
    asap-delta --dataset ds.npz --run-dir runs/delta_ankles --joints '.*_ankle_.*'   # 4-DoF ankle model

Writes ``<run-dir>/delta.onnx`` (πΔ + metadata, see :mod:`asap_training.envs.delta_model`), the PPO run
(checkpoints, tensorboard, progress.jsonl), ``<run-dir>/selection.json`` and ``<run-dir>/open_loop.json``:
the open-loop replay errors of the dataset with and without πΔ.

Two models (``--model``):

- ``joint_linear`` (default, :mod:`asap_training.delta.joint_linear`): each joint's Δa linear in its own
  signals and the base's state, fitted by ridge regression to the warm start's inverse-dynamics targets
  (:mod:`asap_training.delta.warm_start`) at recorded states, then at the states its own replays visit
  (DAgger rounds); the fit after each round is scored by its open-loop replay error at the training
  horizon on the dataset and the best is kept; then each joint's Δa gain is searched on the replays of half
  the data and shrunk toward 1 by the other half (:mod:`asap_training.delta.gains`), kept when the result
  replays better. No PPO: its few weights are set in closed form.
- ``mlp`` (the paper's): rsl_rl's actor regressed onto the same targets, its observation normalizer
  frozen, then PPO (Table II rewards) after ``critic_warmup`` iterations that train only the critic (an
  untrained critic's advantages are noise, and PPO steps on noise undo the regression). Every
  ``--select-every`` iterations (and at the start) the deterministic πΔ is scored the same way, and the
  best one is exported.

Measured on one 4-episode dataset (1 s open-loop E_g-mpjpe; no πΔ: 121.6 mm): warm start 49.5 mm; 5 PPO
iterations later 141.8 mm with the normalizer updating, 92.1 mm with it frozen, 49.5 -> 32.5 mm (10
iterations) -> 32.2 mm (30) with it frozen and 5 critic-only iterations first.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from asap_core.artifact import sha256_of
from asap_training.data.dataset import RealDataset
from asap_training.delta.gains import GainCalibrationCfg, calibrate_gains
from asap_training.delta.joint_linear import JointLinearDelta
from asap_training.delta.warm_start import (
    AUTO_JOINTS,
    Targets,
    WarmStartCfg,
    choose_joints,
    fit_actor,
    fit_dagger,
)
from asap_training.envs.delta_env import DeltaCfg, DeltaEnv, delta_env_cfg, delta_obs_dim
from asap_training.envs.delta_model import DeltaModelMeta, export_delta_model
from asap_training.eval.openloop import open_loop_errors
from asap_training.rl.config import PpoCfg
from asap_training.rl.train import TrackingRunner, train


def delta_ppo_cfg(iterations: int, warm_start: bool = False) -> PpoCfg:
    """ASAP trains πΔ with its stage-1 PPO settings; the initial std is small because Δa is a correction
    of a working policy's action (|Δa| ≈ 0.01–0.05 in the paper's Fig. 13), not a policy.

    From a warm start, a fixed learning rate of 1e-4: rsl_rl's adaptive schedule at 1e-3 raises the rate
    while the KL is small, and Adam moves every weight by about the rate per step, so the first actor
    iteration replaced the fitted πΔ (tired_ankles, twin core: 1 s open-loop error 62.5 -> 103 mm at
    iteration 10, with desired_kl 0.01 or 0.001, then flat); at 1e-4 fixed it stays near it (62.5 -> 63-65
    mm over 20 iterations; 3e-4: 70.6 mm by 40). At these budgets PPO has not improved on the warm start."""
    cfg = PpoCfg(
        max_iterations=iterations, hidden_dims=(256, 128), init_std=0.1, entropy_coef=0.0, save_interval=50
    )
    return replace(cfg, learning_rate=1e-4, schedule="fixed") if warm_start else cfg


MODELS = ("joint_linear", "mlp")
"""πΔ's function class: :class:`~asap_training.delta.joint_linear.JointLinearDelta`, or rsl_rl's MLP."""


@dataclass(frozen=True, kw_only=True)
class DeltaTrainCfg:
    """The πΔ fit: model, budget, the simulator it corrects, warm start and model selection."""

    model: str = "joint_linear"
    """``joint_linear``: per-joint linear, fitted by regression to the warm start's targets (no PPO);
    ``mlp``: the paper's MLP, regressed onto them, then PPO. Twin-core data (4 episodes; 1 s open loop on 2
    episodes left out, none → πΔ): on random:3 (tuning) the MLP 66.5 -> 64.4 mm, the linear model 36.8;
    on held-out random:1001-1004 the linear model 16-49 % below none (the top README)."""
    iterations: int = 200
    """PPO iterations (``mlp`` only)."""
    num_envs: int = 64
    """Parallel open-loop replays."""
    profile: str = "nominal"
    """Dynamics profile of the simulator being corrected."""
    seed: int = 0
    """Random seed of the replays and the networks."""
    warm_start: WarmStartCfg | None = field(default_factory=WarmStartCfg)
    """Warm start: PPO starts from the actor regressed onto inverse-dynamics targets. Off (None): from a
    zero-initialized πΔ, the paper's way, which needs far more samples than 2 cores give (``mlp``
    only: the joint-linear model is the warm start's regression)."""
    critic_warmup: int = 5
    """With a warm start, the first this many iterations update only the critic."""
    select_every: int = 5
    """Score πΔ by its open-loop error every this many iterations (and at the start) and keep the best
    (0: keep the last)."""
    gains: GainCalibrationCfg = field(default_factory=GainCalibrationCfg)
    """``joint_linear`` only: each learned joint's Δa gain, set after the fit on its open-loop replays
    (:mod:`asap_training.delta.gains`; ``iterations`` 0: off)."""


def train_delta(
    dataset: RealDataset,
    run_dir: Path,
    cfg: DeltaTrainCfg | None = None,
    *,
    delta: DeltaCfg | None = None,
    ppo: PpoCfg | None = None,
    progress: bool = True,
    resume: bool = False,
) -> tuple[Path, str]:
    """Fit πΔ (``cfg.model``; module docstring) and export the one with the lowest open-loop error among
    the candidates scored: each DAgger round's fit (``joint_linear``), or the start and every
    ``cfg.select_every``-th PPO iteration (``mlp``; 0: the last one; ``resume`` continues ``run_dir``'s
    latest checkpoint); returns (``delta.onnx`` path, its sha256)."""
    cfg = cfg or DeltaTrainCfg()
    profile, warm_start = cfg.profile, cfg.warm_start
    if cfg.model not in MODELS:
        raise ValueError(f"unknown πΔ model {cfg.model!r}; expected one of {MODELS}")
    if cfg.model == "joint_linear" and warm_start is None:
        raise ValueError("the joint_linear πΔ is fitted by the warm start's regression; without a warm "
                         "start use model mlp")  # fmt: skip
    delta = delta or DeltaCfg()
    if warm_start is not None and warm_start.torque_weight and not dataset.has_torque:
        print("the dataset has no motor torques (ingested before they were kept, or merged with such a "
              "dataset): the warm-start targets match motion only; asap-ingest the bags again to use them",
              flush=True)  # fmt: skip
    shares: dict[str, float] = {}
    searched: Targets | None = None
    if delta.joints == AUTO_JOINTS:
        delta, shares, searched = choose_joints(dataset, delta, warm_start or WarmStartCfg(), profile)
        ranked = sorted(shares.items(), key=lambda kv: -kv[1])
        print(f"πΔ joints chosen from the data (pairs with at least {delta.auto_min_share:g}x an even "
              f"share of the corrections): "
              f"{', '.join(j.replace(chr(92), '') for j in delta.joints)}; shares "
              f"{', '.join(f'{j} {v:.0%}' for j, v in ranked[:8])}...", flush=True)  # fmt: skip
    meta = replace(_meta(dataset, delta, profile), joint_shares=shares)
    path, scratch = run_dir / "delta.onnx", run_dir / "candidate.onnx"
    run_dir.mkdir(parents=True, exist_ok=True)
    if cfg.model == "joint_linear":
        assert warm_start is not None  # refused above
        selector = _Selector(dataset, delta, meta, profile, scratch, "DAgger round")
        joints = np.flatnonzero(meta.mask)
        model = JointLinearDelta(len(dataset.action_joints), delta.action_history, joints)
        fit = functools.partial(model.fit, ridge=warm_start.ridge)
        kept_fit: dict[str, torch.Tensor] = {}

        def on_round(r: int) -> None:
            selector.score(model, r)
            if selector.kept == r:
                kept_fit.update({name: value.clone() for name, value in model.state_dict().items()})

        log = fit_dagger(dataset, delta, warm_start, model, fit, profile, on_round, recorded=searched)
        (run_dir / "warm_start.json").write_text(json.dumps(log, indent=2) + "\n")
        if cfg.gains.iterations:
            model.load_state_dict(kept_fit)
            _calibrate(dataset, model, joints, delta, profile, cfg.gains, selector)
        return path, selector.finish(path, run_dir / "selection.json")
    return _train_mlp(dataset, run_dir, cfg, delta, meta, ppo, progress, resume, searched)


def _calibrate(
    dataset: RealDataset, model: JointLinearDelta, joints: np.ndarray, delta: DeltaCfg, profile: str,
    cfg: GainCalibrationCfg, selector: _Selector,
) -> None:  # fmt: skip
    """Set the kept fit's per-joint gains on its replays (:mod:`asap_training.delta.gains`) and offer the
    result to the selection."""

    def correction(obs: np.ndarray) -> np.ndarray:
        return model(torch.as_tensor(obs, dtype=model.weight.dtype)).numpy()

    print(f"setting πΔ's gains on {len(joints)} joints by their open-loop replays", flush=True)
    found = calibrate_gains(dataset, correction, joints, delta, profile=profile, cfg=cfg,
                            progress=functools.partial(print, flush=True))  # fmt: skip
    # Δa_j is linear in w_j: the gain scales the joint's weights
    model.weight.mul_(torch.as_tensor(found.gains, dtype=model.weight.dtype)[:, None])
    names = [dataset.action_joints[j] for j in joints]
    selector.calibrated(model, {
        "gains": {n: round(float(g), 4) for n, g in zip(names, found.gains, strict=True)},
        "scores_mm": list(found.scores_mm),
        "held_out_mm_by_shrinkage": {f"{t:g}": v for t, v in found.held_out_mm.items()},
        "shrinkage": found.shrinkage,
        "elapsed_s": found.elapsed_s,
    })  # fmt: skip


def _train_mlp(
    dataset: RealDataset, run_dir: Path, cfg: DeltaTrainCfg, delta: DeltaCfg, meta: DeltaModelMeta,
    ppo: PpoCfg | None, progress: bool, resume: bool, searched: Targets | None,
) -> tuple[Path, str]:  # fmt: skip
    """The ``mlp`` model: warm start into rsl_rl's actor, then PPO with model selection."""
    iterations, profile, warm_start = cfg.iterations, cfg.profile, cfg.warm_start
    select_every, critic_warmup = cfg.select_every, cfg.critic_warmup
    ppo = replace(ppo or delta_ppo_cfg(iterations, warm_start is not None), max_iterations=iterations)
    env_cfg = delta_env_cfg(dataset, num_envs=cfg.num_envs, profile=profile, seed=cfg.seed)
    env = DeltaEnv(env_cfg, dataset, delta)
    path = run_dir / "delta.onnx"
    scratch = run_dir / "candidate.onnx"
    selector = _Selector(dataset, delta, meta, profile, scratch, "PPO iteration") if select_every else None
    log: dict[str, float] = {}

    def before_learn(runner: TrackingRunner) -> None:
        if warm_start is not None:
            actor = runner.alg.get_policy()
            fit = functools.partial(fit_actor, actor, cfg=warm_start)
            log.update(fit_dagger(dataset, delta, warm_start, actor, fit, profile, recorded=searched))
            if critic_warmup:
                runner.alg.actor.requires_grad_(False)
        if selector is not None:
            selector.score(runner.alg.get_policy().as_onnx(verbose=False), runner.current_learning_iteration)

    def on_iteration(runner: TrackingRunner, it: int) -> None:
        if warm_start is not None and it + 1 == critic_warmup:
            runner.alg.actor.requires_grad_(True)
        if selector is not None and ((it + 1) % select_every == 0 or it + 1 == iterations):
            selector.score(runner.alg.get_policy().as_onnx(verbose=False), it + 1)

    runner = train(
        env_cfg, ppo, run_dir, resume=resume, progress=progress, env=env, before_learn=before_learn,
        on_iteration=on_iteration,
    )  # fmt: skip
    if log:
        (run_dir / "warm_start.json").write_text(json.dumps(log, indent=2) + "\n")
    if selector is None or not selector.scores:
        return path, export_delta_model(runner.alg.get_policy().as_onnx(verbose=False), path, meta)
    return path, selector.finish(path, run_dir / "selection.json")


class _Selector:
    """Scores the current πΔ by its open-loop replay error at the training horizon; keeps the best.
    ``elapsed_s`` counts from its creation (before the warm start's targets), scoring included."""

    def __init__(
        self, dataset: RealDataset, delta: DeltaCfg, meta: DeltaModelMeta, profile: str, scratch: Path,
        candidates: str,
    ) -> None:  # fmt: skip
        """``candidates``: what a score's number counts (``PPO iteration``, ``DAgger round``)."""
        self.dataset, self.delta, self.meta = dataset, delta, meta
        self.profile, self.scratch, self.candidates = profile, scratch, candidates
        self.scores: dict[int, float] = {}
        self.elapsed_s: dict[int, float] = {}
        self._start = time.monotonic()
        self.best: tuple[float, int, bytes] | None = None
        self.gains: dict | None = None

    @property
    def kept(self) -> int:
        """The candidate kept so far (its iteration or round)."""
        if self.best is None:
            raise RuntimeError("no candidate πΔ was scored yet")
        return self.best[1]

    def _replay(self, module: torch.nn.Module) -> float:
        """Export ``module`` (observation → Δa of the learned joints, deterministic) to the scratch file and
        return its open-loop error on the dataset at the horizon."""
        export_delta_model(module, self.scratch, self.meta)
        errors = open_loop_errors(
            self.dataset, profile=self.profile, delta_model=self.scratch, horizons_s=(self.delta.horizon_s,)
        )
        return next(iter(errors.values()))["e_g_mpjpe_mm"]

    def score(self, module: torch.nn.Module, iteration: int) -> None:
        """Score ``module``; ``iteration``: the PPO iteration or the DAgger round."""
        error = self._replay(module)
        self.scores[iteration] = error
        self.elapsed_s[iteration] = time.monotonic() - self._start
        if self.best is None or error < self.best[0]:
            self.best = (error, iteration, self.scratch.read_bytes())

    def calibrated(self, module: torch.nn.Module, gains: dict) -> None:
        """Offer the kept candidate with its gains set (``module``; ``gains``: their report): it replaces
        the kept one where it replays the data better."""
        if self.best is None:
            raise RuntimeError("no candidate πΔ was scored to set the gains of")
        before, kept, _ = self.best
        error = self._replay(module)
        self.gains = {**gains, "error_mm": error, "kept": bool(error < before)}
        if error < before:
            self.best = (error, kept, self.scratch.read_bytes())

    def finish(self, path: Path, report: Path) -> str:
        """Write the best πΔ to ``path`` and the scores to ``report``; returns the file's sha256. Warns when
        the best πΔ replays the data worse than no correction (the fit then misses the gap: fine-tuning
        in it would train against a simulator further from the robot than the nominal one)."""
        if self.best is None:
            raise RuntimeError("no candidate πΔ was scored (select_every must be within the iterations)")
        error, iteration, data = self.best
        path.write_bytes(data)
        self.scratch.unlink(missing_ok=True)
        rows = open_loop_errors(self.dataset, profile=self.profile, horizons_s=(self.delta.horizon_s,))
        without = next(iter(rows.values()))["e_g_mpjpe_mm"]
        if error >= without:
            print(f"WARNING: the best πΔ ({self.candidates} {iteration}) replays the data worse than no "
                  f"correction ({error:.1f} vs {without:.1f} mm at {self.delta.horizon_s:g} s)",
                  flush=True)  # fmt: skip
        report.write_text(json.dumps({
            "metric": f"open-loop E_g-mpjpe (mm) at {self.delta.horizon_s:g} s on the dataset",
            "scores": {str(k): v for k, v in self.scores.items()},
            "elapsed_s": {str(k): v for k, v in self.elapsed_s.items()},
            "candidates": self.candidates,
            "chosen_iteration": iteration,
            "chosen_error_mm": error,
            "no_correction_error_mm": without,
            **({"gains": self.gains} if self.gains else {}),
        }, indent=2) + "\n")  # fmt: skip
        return sha256_of(data)


def _meta(dataset: RealDataset, delta: DeltaCfg, profile: str) -> DeltaModelMeta:
    return DeltaModelMeta(
        action_joints=dataset.action_joints,
        mask=tuple(delta.mask(dataset.action_joints).tolist()),
        control_dt=dataset.control_dt,
        obs_dim=delta_obs_dim(len(dataset.action_joints), delta.action_history),
        action_history=delta.action_history,
        obs_scales=dict(delta.obs_scales),
        action_clip=delta.max_delta,
        horizon_s=delta.horizon_s,
        dataset_sha256=dataset.sha256,
        profile=profile,
    )
