"""Stage 2 training, CI-sized: the πΔ warm start, a short πΔ run, fine-tuning with provenance."""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tensordict import TensorDict

from asap_core import g1
from asap_core.artifact import load_artifact
from asap_core.inference import OnnxPolicy
from asap_training.cli import delta as delta_cli
from asap_training.cli import finetune as finetune_cli
from asap_training.cli.demo import DemoCfg, delta_train_cfg, fit_and_fine_tune, no_gain_reason, run_baselines
from asap_training.data.dataset import RealDataset
from asap_training.delta.train import DeltaTrainCfg, train_delta
from asap_training.delta.warm_start import (
    WarmStartCfg,
    _search,
    _VisitedEnv,
    recorded_targets,
    visited_targets,
)
from asap_training.envs.delta_env import DeltaCfg, delta_env_cfg, delta_obs_dim, delta_obs_layout
from asap_training.envs.delta_model import DeltaModel
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.eval.evaluate import eval_env_cfg, rollout_twin
from asap_training.eval.openloop import open_loop_errors
from asap_training.eval.suite import SYSID
from asap_training.rl.export import export_runner
from asap_training.rl.finetune import FineTuneCfg, IterateSelector, fine_tune, finetune_env_cfg
from asap_training.rl.train import TrackingRunner, latest_checkpoint, read_params
from asap_training.rl.vecenv import RslRlVecEnv

PARENT = Path(__file__).resolve().parents[1] / "policies" / "arm_swing"
ANKLES = DeltaCfg(joints=(".*_ankle_.*",))


@pytest.fixture(scope="module")
def weak_ankle_recording(tmp_path_factory) -> RealDataset:
    """The shipped policy on the twin core with tired_ankles' 65 % ankle torque but without its sensor
    noise (one-step targets explain noise-free transitions exactly): the "real" data."""
    gap = tmp_path_factory.mktemp("profile") / "tired_ankles_noise_free.yaml"
    gap.write_text('torque_scale: {".*_ankle_.*": 0.65}\n')
    artifact = load_artifact(PARENT / "policy.onnx")
    env = TrackingEnv(eval_env_cfg(artifact))
    trajectory = rollout_twin(artifact, env, str(gap)).trajectory
    return RealDataset((trajectory,), 0.02, tuple(artifact.metadata.joint_names), artifact.sha256, 0)


def test_recorded_targets_explain_the_recorded_transitions(weak_ankle_recording):
    obs, targets, before, after = recorded_targets(weak_ankle_recording, ANKLES, WarmStartCfg(max_samples=48))
    assert obs.shape[0] == targets.shape[0] == 48 and targets.shape[1] == 4
    assert after < 0.5 * before  # the simulator with Δa* reproduces the next states far better
    assert np.mean(targets) < 0.0  # weaker real ankles: the nominal simulator's ankle targets are pulled in


def test_reported_torques_pin_down_the_stance_legs_corrections(tmp_path):
    """A noise-free 20 ms latency (one control period): the exact correction is Δa = a_{t-1} - a_t. From
    motion alone a stance leg's one-tick targets are undetermined (targets that press the foot harder into
    the ground move nothing), so they match it poorly; with the torques the robot reported they do."""
    gap = tmp_path / "late.yaml"
    gap.write_text("actuation_latency_ms: 20.0\n")
    artifact = load_artifact(PARENT / "policy.onnx")
    env = TrackingEnv(eval_env_cfg(artifact))
    trajectory = rollout_twin(artifact, env, str(gap), seed=0, action_noise=0.2).trajectory
    ds = RealDataset((trajectory,), 0.02, tuple(artifact.metadata.joint_names), artifact.sha256, 0)
    layout, legs = delta_obs_layout(len(ds.action_joints), 1), [
        i for i, name in enumerate(ds.action_joints) if any(k in name for k in ("hip", "knee", "ankle"))
    ]

    def match(torque_weight: float) -> float:
        """Mean over the leg joints of the targets' correlation with the exact correction."""
        cfg = WarmStartCfg(max_samples=64, search_ticks=1, torque_weight=torque_weight)
        obs, targets, _, _ = recorded_targets(ds, DeltaCfg(), cfg)
        exact = obs[:, layout["earlier_actions"]] - obs[:, layout["action"]]
        return float(np.mean([np.corrcoef(exact[:, j], targets[:, j])[0, 1] for j in legs]))

    assert ds.has_torque
    with_torque, motion_only = match(WarmStartCfg().torque_weight), match(0.0)
    print(f"leg targets vs exact: {with_torque:.2f} with torques, {motion_only:.2f} without")
    assert with_torque > 0.95 and motion_only < 0.9


class _NoCorrection(torch.nn.Module):
    """A πΔ that outputs Δa = 0 on ``width`` joints (the replay then runs the plain simulator)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def forward(self, obs: TensorDict) -> torch.Tensor:
        return torch.zeros(obs["actor"].shape[0], self.width)


def test_visited_targets_start_at_the_states_the_replay_reached(weak_ankle_recording):
    ds, cfg = weak_ankle_recording, WarmStartCfg(max_samples=64)
    horizon = DeltaCfg(joints=ANKLES.joints, horizon_s=0.2)
    # the recording replayed in its own simulator is the recording: every visited state is a recorded one,
    # and each search env, started at its visited state, reproduces the recorded next frame
    artifact = load_artifact(PARENT / "policy.onnx")
    run = rollout_twin(artifact, TrackingEnv(eval_env_cfg(artifact)), "nominal").trajectory
    nominal = RealDataset((run,), 0.02, ds.action_joints, ds.sha256, 0)
    obs, targets, before, _ = visited_targets(nominal, horizon, cfg, _NoCorrection(4))
    width = delta_obs_dim(len(ds.action_joints), horizon.action_history)
    assert obs.shape == (64, width) and targets.shape == (64, 4)
    assert before < 1e-3
    # on the weak-ankle recording the nominal replay drifts, and the search brings the next states back
    _, _, drifted, after = visited_targets(ds, horizon, cfg, _NoCorrection(4))
    recorded = recorded_targets(ds, ANKLES, cfg)[2]
    assert drifted > recorded and after < drifted  # measured 0.28 -> 0.23 (recorded states: 0.12)


def test_a_visited_start_is_searched_for_the_recorded_transition_not_the_recorded_state():
    """The search does not ask a few ticks of Δa to undo what the replay before it drifted: a nominal
    recording's states moved (0.3, -0.2) m on the floor replay in the nominal simulator as the recording
    did, and their search starts at no mismatch (each point compared with its recorded motion from where it
    started); compared with the recorded frames they would start at the move."""
    artifact = load_artifact(PARENT / "policy.onnx")
    run = rollout_twin(artifact, TrackingEnv(eval_env_cfg(artifact)), "nominal").trajectory
    ds = RealDataset((run,), 0.02, tuple(artifact.metadata.joint_names), artifact.sha256, 0)
    frames = np.arange(20, 220, 25)
    states = (
        run.base_pos_w[frames] + np.array([0.3, -0.2, 0.0]),
        run.base_quat_w[frames],
        run.base_lin_vel_w[frames],
        run.base_ang_vel_w[frames],
        run.joint_pos[frames],
        run.joint_vel[frames],
    )
    delta = replace(ANKLES, horizon_s=0.1)
    starts = (np.zeros_like(frames), frames)
    env = _VisitedEnv(delta_env_cfg(ds, num_envs=len(frames)), ds, delta, starts, states)
    _, before, _ = _search(env, WarmStartCfg(gauss_newton_iterations=0), delta.max_delta)
    assert before < 1e-3
    world_frame = torch.linalg.norm(env.points.pos_w - env.ref.pos_w, dim=-1)
    assert float(world_frame.min()) > 0.1


def test_delta_model_lowers_open_loop_error_and_fine_tuning_records_provenance(
    weak_ankle_recording, tmp_path, capsys
):
    ds = weak_ankle_recording
    parent = load_artifact(PARENT / "policy.onnx")
    warm = WarmStartCfg(max_samples=96, epochs=150, visited_rounds=1)
    path, sha = train_delta(
        ds, tmp_path / "delta", DeltaTrainCfg(iterations=1, num_envs=8, warm_start=warm), delta=ANKLES,
        progress=False,
    )  # fmt: skip
    model = DeltaModel(path)
    assert model.sha256 == sha and model.meta.dataset_sha256 == ds.sha256
    assert sum(model.meta.mask) == 4 and model.meta.action_history == ANKLES.action_history
    replay = functools.partial(open_loop_errors, ds, horizons_s=(0.25,), max_windows=16)
    assert replay(delta_model=path)["0.25"]["e_g_mpjpe_mm"] < replay()["0.25"]["e_g_mpjpe_mm"]
    # the default model is the joint-linear one: each DAgger round's fit scored, the best one's per-joint
    # gains set on its replays, and the better of the two exported
    selection = json.loads((tmp_path / "delta" / "selection.json").read_text())
    assert selection["candidates"] == "DAgger round" and sorted(selection["scores"]) == ["0", "1"]
    gains, best_round = selection["gains"], min(selection["scores"].values())
    learned = [name for name, on in zip(ds.action_joints, model.meta.mask, strict=True) if on]
    assert sorted(gains["gains"]) == sorted(learned)
    assert gains["shrinkage"] in (0.0, 0.25, 0.5, 0.75, 1.0) and len(gains["held_out_mm_by_shrinkage"]) == 5
    assert gains["kept"] == (gains["error_mm"] < best_round)
    assert selection["chosen_error_mm"] == (gains["error_mm"] if gains["kept"] else best_round)
    assert selection["chosen_error_mm"] < selection["no_correction_error_mm"]
    exported = open_loop_errors(ds, delta_model=path, horizons_s=(1.0,))["1"]["e_g_mpjpe_mm"]
    assert exported == pytest.approx(selection["chosen_error_mm"], rel=1e-9)
    assert not (tmp_path / "delta" / "model_0.pt").exists()  # no PPO ran

    out = tmp_path / "policy_asap.onnx"
    cfg = FineTuneCfg(iterations=2, num_envs=4, delta_model=path, dataset_sha256=ds.sha256, select_every=1,
                      select_episodes=4)
    artifact_sha = fine_tune(PARENT, cfg, tmp_path / "finetune", out, progress=False)
    artifact = load_artifact(out)  # the policy node's loader
    assert artifact.sha256 == artifact_sha
    # the parent and both updates scored in the corrected simulator; the best one is the artifact
    selection = json.loads((tmp_path / "finetune" / "selection.json").read_text())
    scores = {int(k): v["e_g_mpjpe_mm"] for k, v in selection["scores"].items()}
    assert sorted(scores) == [0, 1, 2]
    assert len(set(scores.values())) == 3  # each update moved the policy
    # a new selector (the same draws) scores the exported artifact as the selection scored its iterate
    selector = IterateSelector(finetune_env_cfg(read_params(PARENT)[0], cfg), 1, 1, cfg.select_episodes)
    policy = OnnxPolicy(artifact)
    exported = selector.evaluate(lambda obs: np.stack([policy(o) for o in obs.cpu().numpy()]))
    # to 1e-3: the selection ran the torch actor, this the ONNX file; their float32 differences move the
    # falls of these barely trained rollouts by a tick, and with Δa's scale drawn at each reset the draws
    # after it (measured: 2e-4 apart; without the scaling within 1e-4; the iterates' scores 4 % apart)
    assert exported["e_g_mpjpe_mm"] == pytest.approx(selection["chosen_error_mm"], rel=1e-3)
    assert exported["fell"] == selection["chosen_fell"] and 0.0 <= exported["fell"] <= 1.0
    chosen = selection["scores"][str(selection["chosen_iterate"])]
    assert all((chosen["fell"], chosen["e_g_mpjpe_mm"]) <= (v["fell"], v["e_g_mpjpe_mm"])
               for v in selection["scores"].values())
    prov = artifact.metadata.provenance
    assert prov.parent_sha256 == parent.sha256
    assert prov.delta_model_sha256 == sha and prov.dataset_sha256 == ds.sha256
    assert artifact.metadata.observation.to_dict() == parent.metadata.observation.to_dict()

    # run again in the same folder with a larger budget: it continues from the run's latest checkpoint, says
    # so, and names that checkpoint (not the parent) as iterate 0
    last = latest_checkpoint(tmp_path / "finetune")
    capsys.readouterr()
    fine_tune(PARENT, replace(cfg, iterations=3), tmp_path / "finetune", out, progress=True)
    said = capsys.readouterr().out
    assert f"from {last.name} up to the parent's model_" in said
    assert f"(0: {last.name})" in said and "(0: the parent)" not in said


def test_critic_warmup_keeps_the_warm_start_and_the_best_delta_is_exported(weak_ankle_recording, tmp_path):
    ds, run = weak_ankle_recording, tmp_path / "delta"
    warm = WarmStartCfg(max_samples=96, epochs=150, visited_rounds=0)  # the warm start itself: other tests
    cfg = DeltaTrainCfg(
        model="mlp", iterations=4, num_envs=8, warm_start=warm, critic_warmup=2, select_every=1
    )
    path, sha = train_delta(ds, run, cfg, delta=ANKLES, progress=False)
    selection = json.loads((run / "selection.json").read_text())
    scores = {int(k): v for k, v in selection["scores"].items()}
    assert sorted(scores) == [0, 1, 2, 3, 4] and selection["candidates"] == "PPO iteration"
    # the actor (weights and input normalizer) stays the warm start while only the critic learns
    assert scores[0] == scores[1] == scores[2]
    # then PPO moves it gently (rsl_rl's adaptive rate replaced it in one iteration: delta_ppo_cfg)
    assert max(scores[3], scores[4]) < 1.1 * scores[0]  # measured 1.0 (adaptive: 1.25)
    assert selection["chosen_error_mm"] == min(scores.values())
    exported = open_loop_errors(ds, delta_model=path, horizons_s=(1.0,))["1"]["e_g_mpjpe_mm"]
    assert exported == pytest.approx(selection["chosen_error_mm"], rel=1e-9)
    assert DeltaModel(path).sha256 == sha and not (run / "candidate.onnx").exists()


def test_the_demo_matches_reported_torques_only_on_the_nominal_simulator() -> None:
    """SysID's gains emulate what the motors do not report, so the demo's targets on SysID's simulator
    match motion only unless told otherwise; on the nominal one they weigh the torques."""
    identified = "runs/demo/sysid/identified.yaml"
    assert delta_train_cfg(DemoCfg(), "nominal").warm_start.torque_weight == WarmStartCfg.torque_weight > 0
    assert delta_train_cfg(DemoCfg(), identified).warm_start.torque_weight == 0.0
    for base in ("nominal", identified):
        assert delta_train_cfg(DemoCfg(delta_torque_weight=0.05), base).warm_start.torque_weight == 0.05


def test_a_round_keeps_its_policy_when_the_delta_model_gains_too_little(weak_ankle_recording, tmp_path):
    selection = {"chosen_error_mm": 40.0, "no_correction_error_mm": 50.0, "metric": "1 s"}
    assert no_gain_reason(selection, 0.0) == "" and no_gain_reason(selection, 0.19) == ""
    assert "40.0 mm" in no_gain_reason(selection, 0.2) and "50.0 mm" in no_gain_reason(selection, 0.2)
    assert no_gain_reason(selection | {"chosen_error_mm": 50.0}, 0.0)  # no gain is not enough
    assert no_gain_reason(selection | {"chosen_error_mm": 60.0}, float("-inf")) == ""
    # a whole round: πΔ is fitted and scored, then the policy is kept (no πΔ removes all the error)
    cfg = DemoCfg(
        out=tmp_path, delta_iterations=0, num_envs=4, delta_joints=ANKLES.joints, finetune_min_gain=1.0
    )
    fit = fit_and_fine_tune(cfg, weak_ankle_recording, PARENT, "", "nominal")
    assert "is kept" in fit.kept and fit.artifact == PARENT / "policy.onnx" and fit.run_dir == PARENT
    assert (tmp_path / "delta" / "delta.onnx").is_file() and not (tmp_path / "finetune_asap").exists()


def test_a_round_on_sysids_simulator_fine_tunes_there_without_a_delta_model_that_gains_nothing(
    weak_ankle_recording, tmp_path
):
    """On an identified simulator Δa = 0 is the best correction found: the round fine-tunes in that
    simulator alone (the SysID baseline's run, which then is copied, not run again)."""
    base = str(tmp_path / "identified.yaml")
    Path(base).write_text('torque_scale: {".*_ankle_.*": 0.8}\n')
    cfg = DemoCfg(out=tmp_path, delta_iterations=0, num_envs=4, delta_joints=ANKLES.joints,
                  finetune_min_gain=1.0, finetune_iterations=1, finetune_envs=2,
                  baselines=("sysid",))  # fmt: skip
    fit = fit_and_fine_tune(cfg, weak_ankle_recording, PARENT, "", base)
    assert fit.kept == "" and "fine-tuned in that simulator without πΔ" in fit.without_delta
    assert fit.artifact == tmp_path / "policy_asap.onnx" and fit.artifact.is_file()
    options = yaml.safe_load((tmp_path / "finetune_asap" / "params" / "finetune.yaml").read_text())
    assert options["delta_model"] is None and options["profile"] == base
    artifacts = run_baselines(cfg, weak_ankle_recording, fit.common, {}, Path(base), fit.artifact)
    assert artifacts[SYSID].read_bytes() == fit.artifact.read_bytes()
    assert not (tmp_path / "finetune_sysid").exists()


def test_asap_delta_passes_the_warm_start_options_on():
    p = delta_cli.parser()
    argv = ["--dataset", "d", "--run-dir", "r", "--visited-rounds", "3", "--joints", ".*_knee_.*", "--ridge",
            "0.01", "--model", "mlp"]  # fmt: skip
    cfg, delta = delta_cli.configs(p, p.parse_args(argv))
    assert cfg.warm_start is not None and cfg.warm_start.visited_rounds == 3 and cfg.warm_start.ridge == 0.01
    assert cfg.model == "mlp" and delta_cli.configs(p, p.parse_args(argv[:4]))[0].model == "joint_linear"
    assert delta.joints == (".*_knee_.*",)
    cfg, _ = delta_cli.configs(p, p.parse_args(["--dataset", "d", "--run-dir", "r", "--no-warm-start"]))
    assert cfg.warm_start is None


def test_the_delta_scale_range_is_set_from_the_command_line_and_defaults_to_half_either_way():
    p = finetune_cli.parser()
    base = ["--parent", "p", "--run-dir", "r"]
    assert p.config(p.parse_args(base), FineTuneCfg).delta_scale_range == (0.5, 1.5)
    off = p.config(p.parse_args([*base, "--delta-scale-range", "1", "1"]), FineTuneCfg)
    assert off.delta_scale_range == (1.0, 1.0)
    with pytest.raises(SystemExit):  # two values, not one
        p.parse_args([*base, "--delta-scale-range", "0.8"])
    assert DemoCfg().delta_scale_range == FineTuneCfg().delta_scale_range


def test_fine_tune_refuses_a_parent_that_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a training run"):
        fine_tune(tmp_path, FineTuneCfg(iterations=1), tmp_path / "run", tmp_path / "p.onnx", progress=False)


def test_fine_tuning_for_unitree_sims_drive_sets_the_drive_gains_and_delay_of_every_env(tmp_path):
    """``--held-drive-lag``, ``--gain-set`` and ``--no-action-delay`` reach the env (every env on the held
    drive with that lag, the set's gains in its drives and in the exported artifact, no action delay);
    without them the fine-tuning keeps the parent's drive, gains and delay randomization."""
    p = finetune_cli.parser()
    base = ["--parent", str(PARENT), "--run-dir", "r"]
    parent, ppo = read_params(PARENT)
    kept_cfg = finetune_env_cfg(parent, p.config(p.parse_args(base), FineTuneCfg))
    kept = TrackingEnv(replace(kept_cfg, num_envs=2))
    argv = [*base, "--held-drive-lag", "0.9", "--gain-set", "unitree_mujoco_5ms", "--no-action-delay",
            "--anchor", "0.1", "--anchor-run", "a", "--physics-dt", "0.005"]
    cfg = p.config(p.parse_args(argv), FineTuneCfg)
    assert (cfg.anchor, cfg.anchor_run, cfg.physics_dt) == (0.1, Path("a"), 0.005)
    env = TrackingEnv(replace(finetune_env_cfg(parent, cfg), num_envs=2))
    assert env.sim.held.all() and env.sim.held_lag == 0.9 and not kept.sim.held.any()
    kp, kd = g1.gains(g1.MOTOR_ORDER, "unitree_mujoco_5ms")
    assert np.allclose(env.kd_motor.numpy(), kd) and np.allclose(env.kp_motor.numpy(), kp)
    assert not np.allclose(kept.kd_motor.numpy(), kd)  # the parent's are ASAP's
    assert env.max_delay == 0 and kept.max_delay > 0
    runner = TrackingRunner(RslRlVecEnv(env), ppo.to_rsl_rl(), log_dir=None, progress=False)
    export_runner(runner, tmp_path / "p.onnx")
    meta = load_artifact(tmp_path / "p.onnx").metadata
    assert np.allclose(meta.kd, g1.gains(meta.joint_names, "unitree_mujoco_5ms")[1])
