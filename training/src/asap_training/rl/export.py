"""``asap-export``: a checkpoint → a policy artifact (ONNX + metadata) through ``asap_core.artifact``.

The metadata is derived from the env the policy was trained in (joints, default pose, gains, action scale,
control period, observation spec, motion), so nothing is typed twice. The exported graph includes the
observation normalizer; the file is validated by the same loader the policy node uses.

    asap-export --run-dir /work/runs/arm_swing [--checkpoint model_1500.pt] [--out policy.onnx]
"""

from __future__ import annotations

import argparse
import io
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from asap_core.artifact import Motion, PolicyMetadata, Provenance, load_artifact, write_artifact
from asap_training.envs.tracking_env import TrackingEnv


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


def export_torch_policy(
    path: str | Path, module: torch.nn.Module, meta: PolicyMetadata, opset: int = 17
) -> str:
    """Export a torch module (obs [batch, obs_dim] -> action [batch, n]) and write the artifact
    (:func:`asap_core.artifact.write_artifact` validates it first); returns its sha256.

    Uses the TorchScript exporter (``dynamo=False``: no onnxscript, deterministic) with a symbolic
    batch axis.
    """
    buf = io.BytesIO()
    example = torch.zeros(1, meta.observation.dim)
    names = (meta.onnx_input, meta.onnx_output)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy exporter is intended
        torch.onnx.export(module.eval(), (example,), buf, input_names=[names[0]],
                          output_names=[names[1]], opset_version=opset, dynamo=False,
                          dynamic_axes={n: {0: "batch"} for n in names})
    return write_artifact(path, buf.getvalue(), meta)


def export_runner(
    runner: object,
    path: Path,
    run_name: str = "",
    name: str | None = None,
    provenance: Provenance | None = None,
) -> str:
    """Export a :class:`asap_training.rl.train.TrackingRunner`'s actor; returns the artifact's sha256."""
    env: TrackingEnv = runner.tracking_env
    module = runner.alg.get_policy().as_onnx(verbose=False)
    meta = policy_metadata(env, name or f"asap_{env.motions.motions[0].name}", run_name, provenance)
    sha = export_torch_policy(path, module.cpu(), meta)
    load_artifact(path)  # the node's loader: refuse to hand out a file it would reject
    return sha


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    from asap_training.rl.train import TrackingRunner, latest_checkpoint, read_params
    from asap_training.rl.vecenv import RslRlVecEnv

    p = argparse.ArgumentParser(
        prog="asap-export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--run-dir", type=Path, required=True, help="training run directory")
    p.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the latest in --run-dir)")
    p.add_argument("--out", type=Path, help="artifact path (default <run-dir>/policy.onnx)")
    p.add_argument("--name", help="policy name in the metadata (default asap_<motion>)")
    args = p.parse_args(argv)
    env_cfg, ppo_cfg = read_params(args.run_dir)
    env_cfg.num_envs = 1
    checkpoint = args.checkpoint or latest_checkpoint(args.run_dir)
    if checkpoint is None:
        raise SystemExit(f"no model_*.pt in {args.run_dir}")
    runner = TrackingRunner(
        RslRlVecEnv(TrackingEnv(env_cfg)), ppo_cfg.to_rsl_rl(), log_dir=None, progress=False
    )
    runner.load(str(checkpoint))
    out = args.out or args.run_dir / "policy.onnx"
    sha = export_runner(runner, out, run_name=f"{args.run_dir.name}/{Path(checkpoint).name}", name=args.name)
    print(f"{out}: sha256 {sha}")


if __name__ == "__main__":
    main()
