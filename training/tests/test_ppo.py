"""A CI-sized PPO run learns (episode length and tracking return rise) and exports a loadable artifact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asap_core.artifact import load_artifact
from asap_core.inference import OnnxPolicy
from asap_training.cli.export import main as asap_export
from asap_training.envs.config import DomainRandCfg, ObservationCfg, TrackingEnvCfg
from asap_training.rl.config import PpoCfg
from asap_training.rl.export import export_runner
from asap_training.rl.train import latest_checkpoint, read_params, train

pytestmark = pytest.mark.slow

NO_DR = DomainRandCfg.off()
ITERATIONS = 30


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    torch.set_num_threads(1)
    run_dir = tmp_path_factory.mktemp("ppo")
    env_cfg = TrackingEnvCfg(
        num_envs=32, motions=("arm_swing",), observations=ObservationCfg(noise={}), domain_rand=NO_DR, seed=0
    )
    # a small network learns fastest from a CPU-sized batch; seeds make the run deterministic
    ppo = PpoCfg(max_iterations=ITERATIONS, save_interval=10, init_std=0.5, hidden_dims=(128, 128))
    return run_dir, train(env_cfg, ppo, run_dir, progress=False)


def test_episode_length_and_tracking_return_increase(run):
    _, runner = run
    hist = runner.history
    assert len(hist) == ITERATIONS
    # iteration 0 only sees the episodes that ended within its first 24 steps: start the comparison at 1
    early, late = hist[1:5], hist[-4:]
    mean = lambda rows, key: float(np.mean([r[key] for r in rows]))  # noqa: E731
    assert mean(late, "mean_episode_length") > mean(early, "mean_episode_length")
    assert mean(late, "tracking_reward") > mean(early, "tracking_reward")


def test_checkpoints_resume_and_export_an_artifact_the_node_loads(run, tmp_path):
    run_dir, runner = run
    assert latest_checkpoint(run_dir).name == f"model_{ITERATIONS - 1}.pt"
    infos = runner.load(str(latest_checkpoint(run_dir)))
    assert set(infos["curriculum"]) == {"penalty_scale", "far_threshold", "avg_episode_length"}
    sha = export_runner(runner, tmp_path / "policy.onnx", run_name="ci")
    artifact = load_artifact(tmp_path / "policy.onnx")
    assert artifact.sha256 == sha
    meta = artifact.metadata
    assert meta.observation.dim == 380 and meta.num_joints == 23 and meta.motion.name == "arm_swing"
    assert meta.control_dt == pytest.approx(0.02) and meta.provenance.training_run == "ci"
    # the graph (normalizer included) computes what the trained torch policy computes
    obs = runner.env.get_observations()
    torch_action = runner.alg.get_policy()(obs)[0].detach().numpy()
    onnx_action = OnnxPolicy(artifact)(obs["actor"][0].numpy())
    np.testing.assert_allclose(onnx_action, torch_action, atol=1e-4)


def test_asap_export_writes_the_latest_checkpoint_of_a_run(run, tmp_path, capsys):
    run_dir, runner = run
    checkpoint = latest_checkpoint(run_dir)
    asap_export(["--run-dir", str(run_dir), "--out", str(tmp_path / "cli.onnx")])
    assert f"{tmp_path / 'cli.onnx'}: sha256" in capsys.readouterr().out
    runner.load(str(checkpoint))
    export_runner(runner, tmp_path / "runner.onnx")
    cli, direct = load_artifact(tmp_path / "cli.onnx"), load_artifact(tmp_path / "runner.onnx")
    assert cli.metadata.provenance.training_run == f"{run_dir.name}/{checkpoint.name}"
    obs = np.random.default_rng(0).normal(size=cli.metadata.observation.dim).astype(np.float32)
    np.testing.assert_allclose(OnnxPolicy(cli)(obs), OnnxPolicy(direct)(obs), atol=1e-6)
    with pytest.raises(SystemExit, match="asap-export: no model_"):
        asap_export(["--run-dir", str(tmp_path)])


def test_resume_continues_from_the_latest_checkpoint(run):
    run_dir, runner = run
    env_cfg, ppo = read_params(run_dir)
    ppo.max_iterations = ITERATIONS + 1
    resumed = train(env_cfg, ppo, run_dir, resume=True, progress=False)
    # the checkpoint of iteration ITERATIONS-1 is reloaded and learning goes on from there
    assert [h["iteration"] for h in resumed.history] == [ITERATIONS - 1, ITERATIONS]
    assert resumed.tracking_env.penalty_scale == pytest.approx(runner.tracking_env.penalty_scale, rel=0.05)


def test_evaluate_writes_metrics_and_plot(run, tmp_path):
    from asap_training.eval.evaluate import EvalCfg, evaluate

    _, runner = run
    export_runner(runner, tmp_path / "policy.onnx")
    result = evaluate(tmp_path / "policy.onnx", EvalCfg(physics_hz=500.0), tmp_path / "eval")
    assert {"success", "e_g_mpjpe_mm", "e_mpjpe_mm", "e_acc_mm", "e_vel_mm"} <= set(result)
    assert result["motion"] == "arm_swing" and "500 Hz" in result["env"]
    assert (tmp_path / "eval" / "eval.json").is_file() and (tmp_path / "eval" / "eval.png").stat().st_size > 0


def test_evaluate_on_the_twin_core(run, tmp_path):
    from asap_training.eval.evaluate import EvalCfg, evaluate

    _, runner = run
    export_runner(runner, tmp_path / "policy.onnx")
    result = evaluate(tmp_path / "policy.onnx", EvalCfg(backend="twin"))
    assert "twin" in result["env"] and result["num_frames"] >= 4
    assert np.isfinite(result["e_g_mpjpe_mm"])
