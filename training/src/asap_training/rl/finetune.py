"""``asap-finetune``: continue PPO on a stage-1 policy in a corrected simulator and export it
(arXiv 2502.01143 §III-C).

The parent is a training run directory (``params/env.yaml``, ``params/ppo.yaml``, ``model_<it>.pt``; the
shipped policies under ``training/policies/`` have this layout). Fine-tuning copies its latest checkpoint
into a new run directory and continues for ``--iterations`` with one correction of the simulator:

- ``--delta delta.onnx``: ASAP, the frozen πΔ in the action path (a_sim = a + πΔ(s, a));
- ``--profile identified.yaml``: SysID, the simulator built with identified physics;
- ``--table-vi-dr``: DR, the paper's full Table VI randomization;
- ``FineTuneCfg.simulator`` (from Python): any simulator backend, e.g. a learned residual-dynamics one.

As in ASAP's fine-tuning config, pushes and the motion-far termination are off and the initial-state
noise is on. The exported artifact's provenance names the parent, the dataset and the delta model.

    asap-finetune --parent training/policies/arm_swing --delta runs/demo/delta/delta.onnx \\
        --run-dir runs/demo/finetune --iterations 100 --out runs/demo/policy_asap.onnx
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from asap_core.artifact import Provenance, load_artifact
from asap_training.envs.config import DomainRandCfg, TrackingEnvCfg
from asap_training.envs.delta_model import DeltaModel
from asap_training.rl.export import export_runner
from asap_training.rl.train import latest_checkpoint, read_params, train


@dataclass(kw_only=True)
class FineTuneCfg:
    """The budget and the simulator correction (at most one of delta / profile / DR / simulator)."""

    iterations: int = 100
    """PPO iterations added to the parent's."""
    num_envs: int | None = None
    """Parallel envs; None: the parent's."""
    delta_model: Path | None = None
    """ASAP: the frozen delta-action model πΔ (from asap-delta) in the action path."""
    profile: str | None = None
    """SysID: the dynamics profile (a name or an identified YAML) to fine-tune in; None: the parent's."""
    table_vi_dr: bool = False
    """DR baseline: the paper's full Table VI randomization."""
    simulator: str | None = None
    """Any simulator backend (``module:Class``), e.g. a learned residual-dynamics one."""
    simulator_args: dict = field(default_factory=dict)
    physics_dt: float | None = None
    """Physics step (s; the control period stays the parent's); None: the parent's."""
    init_noise: float = 1.0
    """Initial-state noise level (ASAP's ``noise_to_initial_level`` when fine-tuning)."""
    random_start: bool | None = None
    """Reference-state init at random motion times; None: the parent's. False keeps fine-tuning on the
    states the recorded episodes visited (from the motion start), where πΔ was fitted."""
    seed: int = 0
    """Random seed of the envs and the networks."""
    dataset_sha256: str = ""
    """Provenance: the dataset the correction was fitted on (asap-finetune: the delta model's, if empty)."""


def finetune_env_cfg(parent: TrackingEnvCfg, cfg: FineTuneCfg) -> TrackingEnvCfg:
    """The parent's MDP with ASAP's fine-tuning changes and the chosen correction."""
    physics_dt, decimation = parent.physics_dt, parent.decimation
    if cfg.physics_dt is not None:
        decimation = round(parent.dt / cfg.physics_dt)
        if decimation < 1 or abs(decimation * cfg.physics_dt - parent.dt) > 1e-9:
            raise ValueError(f"physics_dt {cfg.physics_dt} s does not divide the parent's control period "
                             f"{parent.dt} s")
        physics_dt = cfg.physics_dt
    env = replace(
        parent,
        physics_dt=physics_dt,
        decimation=decimation,
        seed=cfg.seed,
        num_envs=cfg.num_envs or parent.num_envs,
        random_start=parent.random_start if cfg.random_start is None else cfg.random_start,
        profile=cfg.profile or parent.profile,
        simulator=cfg.simulator or parent.simulator,
        simulator_args=dict(cfg.simulator_args) if cfg.simulator else parent.simulator_args,
        terminations=replace(parent.terminations, far_threshold=1e9, far_curriculum=False),
        domain_rand=replace(
            DomainRandCfg() if cfg.table_vi_dr else parent.domain_rand,
            push_interval_s=None,
            init_noise=cfg.init_noise,
        ),
    )
    if cfg.delta_model is not None:
        env.actions = replace(
            parent.actions,
            delta_action="asap_training.envs.delta_model:FrozenDelta",
            delta_action_args={"path": str(cfg.delta_model)},
        )
    return env


def fine_tune(parent_dir: Path, cfg: FineTuneCfg, run_dir: Path, out: Path, progress: bool = True) -> str:
    """Fine-tune the parent run's latest checkpoint; writes the artifact ``out``; returns its sha256."""
    checkpoint = latest_checkpoint(parent_dir)
    if checkpoint is None or not (parent_dir / "params" / "env.yaml").is_file():
        raise FileNotFoundError(
            f"{parent_dir}: not a training run (needs params/env.yaml, params/ppo.yaml and model_<it>.pt)"
        )
    parent_env, ppo = read_params(parent_dir)
    parent_it = int(checkpoint.stem.split("_")[1])
    run_dir.mkdir(parents=True, exist_ok=True)
    if latest_checkpoint(run_dir) is None:
        shutil.copy2(checkpoint, run_dir / checkpoint.name)
    env_cfg = finetune_env_cfg(parent_env, cfg)
    runner = train(
        env_cfg,
        replace(ppo, max_iterations=parent_it + cfg.iterations),
        run_dir,
        resume=True,
        progress=progress,
    )
    parent_onnx = parent_dir / "policy.onnx"
    provenance = Provenance(
        training_run=f"{run_dir.name} (fine-tuned from {parent_dir.name}/{checkpoint.name})",
        parent_sha256=load_artifact(parent_onnx).sha256 if parent_onnx.is_file() else "",
        dataset_sha256=cfg.dataset_sha256,
        delta_model_sha256=DeltaModel(cfg.delta_model).sha256 if cfg.delta_model else "",
    )
    return export_runner(runner, out, provenance=provenance)
