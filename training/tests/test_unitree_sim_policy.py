"""The shipped policy for Unitree's simulator at its default 5 ms step (``arm_swing_unitree_sim``), on the
twin core with that simulator's held drive, run through a graph episode's sequence by the node's tick."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asap_core import g1
from asap_core.artifact import load_artifact
from asap_sim.twin import TwinConfig
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.eval.evaluate import eval_env_cfg, rollout_twin
from asap_training.eval.metrics import tracking_metrics

POLICIES = Path(__file__).resolve().parents[1] / "policies"
UNITREE_SIM_5MS = TwinConfig(physics_dt=0.005, drive="held")


def _on_the_held_drive_at_5_ms(name: str, hold_gains: str = "policy"):
    artifact = load_artifact(POLICIES / name / "policy.onnx")
    env = TrackingEnv(eval_env_cfg(artifact))
    run = rollout_twin(artifact, env, "nominal", seed=0, twin_config=UNITREE_SIM_5MS, hold_gains=hold_gains)
    return run, tracking_metrics(run.robot_pos_w, run.ref_pos_w, run.fell)


def test_the_unitree_sim_policy_carries_the_5_ms_gain_set_and_its_eval_env_too():
    artifact = load_artifact(POLICIES / "arm_swing_unitree_sim" / "policy.onnx")
    meta = artifact.metadata
    kp, kd = g1.gains(meta.joint_names, "unitree_mujoco_5ms")
    assert np.allclose(meta.kp, kp) and np.allclose(meta.kd, kd)
    env = TrackingEnv(eval_env_cfg(artifact))  # asap-eval's env: the artifact's gains, not ASAP's
    assert np.allclose(env.joint_map.gather(env.kd_motor).numpy(), kd)


def test_the_unitree_sim_policy_completes_where_arm_swing_falls():
    shipped, _ = _on_the_held_drive_at_5_ms("arm_swing", hold_gains="unitree_mujoco_5ms")
    assert shipped.fell or shipped.fault  # the drive this policy exists for
    run, metrics = _on_the_held_drive_at_5_ms("arm_swing_unitree_sim")
    assert not run.fell and not run.fault, run.fault
    assert len(run.robot_pos_w) * run.dt > 6.9  # the whole 7 s clip
    assert metrics.e_g_mpjpe_mm < 100.0  # tracks, not only survives (drifting fine-tunings: 183-246 mm)
