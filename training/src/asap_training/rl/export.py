"""``asap-export``: a checkpoint → a policy artifact (ONNX + metadata) through ``asap_core.artifact``.

The metadata is derived from the env the policy was trained in (joints, default pose, gains, action scale,
control period, observation spec, motion), so nothing is typed twice. The exported graph includes the
observation normalizer; the file is validated by the same loader the policy node uses.

    asap-export --run-dir /work/runs/arm_swing [--checkpoint model_1500.pt] [--out policy.onnx]
"""

from __future__ import annotations

from pathlib import Path

from asap_core.artifact import Motion, PolicyMetadata, Provenance, export_torch_policy, load_artifact
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.rl.train import TrackingRunner


def policy_metadata(
    env: TrackingEnv, name: str, run_name: str = "", provenance: Provenance | None = None
) -> PolicyMetadata:
    """The artifact metadata of a policy trained in ``env`` (single-motion: the motion's name and length)."""
    cfg = env.cfg
    kp, kd = env.joint_map.gather(env.kp_motor), env.joint_map.gather(env.kd_motor)
    motion = env.motions.motions[0]
    return PolicyMetadata(
        name=name,
        joint_names=tuple(cfg.joint_names),
        default_joint_pos=tuple(env.default_q.tolist()),
        kp=tuple(kp.tolist()),
        kd=tuple(kd.tolist()),
        action_scale=(cfg.actions.scale,) * env.num_actions,
        action_clip=cfg.actions.clip,
        control_dt=env.dt,
        observation=env.actor_spec,
        motion=Motion(name=motion.name, length_s=motion.duration_s),
        onnx_input="actor_obs",
        onnx_output="action",
        provenance=provenance or Provenance(training_run=run_name),
    )


def export_runner(
    runner: TrackingRunner,
    path: Path,
    run_name: str = "",
    name: str | None = None,
    provenance: Provenance | None = None,
) -> str:
    """Export the runner's actor; returns the artifact's sha256."""
    env = runner.tracking_env
    module = runner.alg.get_policy().as_onnx(verbose=False)
    meta = policy_metadata(env, name or f"asap_{env.motions.motions[0].name}", run_name, provenance)
    sha = export_torch_policy(path, module.cpu(), meta)
    load_artifact(path)  # the node's loader: refuse to hand out a file it would reject
    return sha
