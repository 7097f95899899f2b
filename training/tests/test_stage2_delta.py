"""Stage 2 without ROS: the delta env replays recordings, Δa is scaled once in both places, πΔ files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from asap_core import g1
from asap_core.artifact import load_artifact
from asap_training.data.dataset import RealDataset
from asap_training.delta.gains import GainCalibrationCfg, calibrate_gains
from asap_training.delta.warm_start import joint_shares, select_joints
from asap_training.envs import actions as action_path
from asap_training.envs.delta_env import DeltaCfg, DeltaEnv, delta_env_cfg, delta_obs_dim, delta_obs_layout
from asap_training.envs.delta_model import DeltaModel, DeltaModelMeta, FrozenDelta, export_delta_model
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.eval.evaluate import EvalCfg, eval_env_cfg, rollout_twin
from asap_training.eval.openloop import open_loop_errors, replay_points, scored_windows
from asap_training.rl.finetune import FineTuneCfg, finetune_env_cfg

SHIPPED = Path(__file__).resolve().parents[1] / "policies" / "arm_swing" / "policy.onnx"


def _recording(profile: str) -> RealDataset:
    artifact = load_artifact(SHIPPED)
    env = TrackingEnv(eval_env_cfg(artifact))
    trajectory = rollout_twin(artifact, env, profile).trajectory
    return RealDataset((trajectory,), 0.02, tuple(artifact.metadata.joint_names), artifact.sha256, 0)


@pytest.fixture(scope="module")
def nominal_recording() -> RealDataset:
    """The shipped policy on the twin core (nominal): states, actions, as a bag would give them."""
    return _recording("nominal")


@pytest.fixture(scope="module")
def weak_ankle_recording() -> RealDataset:
    return _recording("weak_ankles")


def test_zero_delta_replays_a_nominal_recording_exactly(nominal_recording, weak_ankle_recording):
    same = open_loop_errors(nominal_recording, horizons_s=(0.25, 1.0), max_windows=8)
    for horizon in same.values():
        assert horizon["e_g_mpjpe_mm"] < 1e-3  # float round-off only: same physics, same timing
    # the same replay of a recording made under another dynamics profile does drift
    gap = open_loop_errors(weak_ankle_recording, horizons_s=(0.25, 1.0), max_windows=8)
    assert gap["1"]["e_g_mpjpe_mm"] > 10.0
    assert gap["1"]["e_g_mpjpe_mm"] > gap["0.25"]["e_g_mpjpe_mm"]


def test_gain_calibration_finds_the_gains_that_make_a_known_correction_exact(nominal_recording):
    """A nominal recording whose stored actions are the applied ones minus a known offset d on two joints:
    only Δa = d replays it exactly. Given a correction of d/2 on one joint and 2d on the other, the gains
    are 2 and 0.5 and the replay error drops to round-off, on the windows searched and on those held out;
    the gains stay within their bounds."""
    names = nominal_recording.action_joints
    joints = np.array([names.index("left_knee_joint"), names.index("right_shoulder_pitch_joint")])
    offset = np.zeros(len(names))
    offset[joints] = 0.1
    shifted = replace(nominal_recording, trajectories=tuple(
        replace(t, action=t.action - offset) for t in nominal_recording.trajectories
    ))  # fmt: skip
    given = np.array([0.05, 0.2])  # half and twice the offset

    def calibrate(max_gain: float):
        return calibrate_gains(
            shifted, lambda obs: np.tile(given, (len(obs), 1)), joints, DeltaCfg(horizon_s=0.5),
            cfg=GainCalibrationCfg(max_gain=max_gain),
        )  # fmt: skip

    found = calibrate(3.0)
    assert found.gains == pytest.approx([2.0, 0.5], abs=0.02)
    assert found.scores_mm[0] > 1.0 and found.scores_mm[-1] < 0.05 * found.scores_mm[0], found.scores_mm
    assert list(found.scores_mm) == sorted(found.scores_mm, reverse=True)  # only steps that lowered it
    # searched on the first half of the recording, the whole step kept by the second half
    assert found.shrinkage == 1.0 and found.held_out_mm[1.0] < 0.05 * found.held_out_mm[0.0]
    bounded = calibrate(1.5)
    assert bounded.gains[0] == pytest.approx(1.5) and bounded.gains[1] == pytest.approx(0.5, abs=0.05)


def test_a_recording_with_a_latency_replays_exactly_in_its_own_simulator(tmp_path):
    """30 ms actuation latency (one and a half control periods), noise-free: every window starts with the
    commands the latency still holds, oldest first (the recorded ones, or the HOLD's default pose before the
    first frame), so the gap's own simulator reproduces the recording: the floor of the open-loop error is 0.
    Measured otherwise at 1 s: motors off for the latency 22 mm, the two commands in the wrong order 1.4."""
    gap = tmp_path / "late.yaml"
    gap.write_text("actuation_latency_ms: 30.0\n")
    recording = _recording(str(gap))
    own = open_loop_errors(recording, profile=str(gap), horizons_s=(0.25, 1.0), max_windows=8)
    nominal = open_loop_errors(recording, horizons_s=(0.25, 1.0), max_windows=8)
    assert own["1"]["e_g_mpjpe_mm"] < 1e-3  # float round-off only, as for a recording without a latency
    assert nominal["1"]["e_g_mpjpe_mm"] > 5.0
    # the torques the twin reported with each state are the ones the simulator computes one tick on
    frames = np.arange(0, recording.trajectories[0].num_steps - 2, 7)
    env = DeltaEnv(delta_env_cfg(recording, num_envs=len(frames), profile=str(gap)), recording,
                   starts=(np.zeros(len(frames), dtype=int), frames))  # fmt: skip
    env.step(torch.zeros(len(frames), env.num_actions))
    reported = recording.trajectories[0].joint_torque[frames + 1]
    np.testing.assert_allclose(env.state.joint_torque, reported, atol=1e-6)
    assert np.abs(reported).max() > 10.0


def test_a_closed_form_correction_of_a_one_period_latency_replays_its_recording(tmp_path):
    """A 20 ms latency holds each command for exactly one 20 ms period, so Δa = a_{t-1} - a_t (from πΔ's
    own inputs) makes the nominal simulator apply what the late motors applied: every window replays to
    round-off but the one at the trajectory's first frame (whose previous command was the HOLD's default
    pose, not the first action πΔ's input shows there); through ``open_loop_errors(correction=...)``, it
    removes nearly all of the error and half of it part."""
    gap = tmp_path / "one_period.yaml"
    gap.write_text("actuation_latency_ms: 20.0\n")
    recording = _recording(str(gap))
    cols = delta_obs_layout(len(recording.action_joints), DeltaCfg().action_history)

    def late(share: float):
        return lambda obs: share * (obs[:, cols["earlier_actions"]] - obs[:, cols["action"]])

    ids, frames = scored_windows(recording, 50, max_windows=8)
    later = frames > 0
    robot, ref = replay_points(recording, ids[later], frames[later], 50, correction=late(1.0),
                               action_history=DeltaCfg().action_history)  # fmt: skip
    assert np.abs(robot - ref).max() < 1e-9

    def error(**correction) -> float:
        errors = open_loop_errors(recording, horizons_s=(1.0,), max_windows=8, **correction)
        return errors["1"]["e_g_mpjpe_mm"]

    none, half, exact = error(), error(correction=late(0.5)), error(correction=late(1.0))
    assert exact < 0.1 * none < half < 0.75 * none


def test_delta_env_starts_at_recorded_states_and_observes_the_recorded_action(nominal_recording):
    ds = nominal_recording
    tr = ds.trajectories[0]
    frames = np.array([0, 7, 30])
    env = DeltaEnv(
        delta_env_cfg(ds, num_envs=3), ds, DeltaCfg(action_history=2), starts=(np.zeros(3, dtype=int), frames)
    )
    np.testing.assert_allclose(env.state.root_pos_w, tr.base_pos_w[frames], atol=1e-12)
    np.testing.assert_allclose(env.state.joint_pos, tr.joint_pos[frames], atol=1e-12)
    obs = env.observations()["actor"]
    a = len(ds.action_joints)
    assert obs.shape == (3, delta_obs_dim(a, 2))
    np.testing.assert_array_equal(obs[:, :a], 0.0)  # no previous Δa at an episode start
    np.testing.assert_allclose(obs[:, a : 2 * a], tr.action[frames])
    # the two recorded actions before, newest first; before the first frame the first one (held)
    np.testing.assert_allclose(obs[:, 2 * a : 3 * a], tr.action[[0, 6, 29]])
    np.testing.assert_allclose(obs[:, 3 * a : 4 * a], tr.action[[0, 5, 28]])
    # the layout other code reads the observation by (the joint-linear πΔ) names the same columns
    layout = delta_obs_layout(a, 2)
    assert list(layout) == [
        "last_delta", "action", "earlier_actions", "base_ang_vel", "base_lin_vel", "base_height", "dof_pos",
        "dof_vel", "feet_force", "projected_gravity",
    ]  # fmt: skip
    np.testing.assert_allclose(obs[:, layout["action"]], tr.action[frames])
    np.testing.assert_allclose(obs[:, layout["earlier_actions"]][:, a:], tr.action[[0, 5, 28]])
    np.testing.assert_allclose(obs[:, layout["base_height"]][:, 0], tr.base_pos_w[frames, 2], atol=1e-12)
    np.testing.assert_allclose(obs[:, layout["dof_pos"]], env.q - env.default_q)
    np.testing.assert_allclose(obs[:, layout["projected_gravity"]][:, 2], -1.0, atol=0.05)  # standing
    assert layout["projected_gravity"].stop == obs.shape[1]


def test_delta_is_scaled_once_by_the_same_function_in_delta_training_and_fine_tuning(
    nominal_recording, monkeypatch, tmp_path
):
    ds = nominal_recording
    calls = []
    real = action_path.joint_targets

    def spy(action, delta, default_q, scale):
        copy = lambda x: torch.as_tensor(x).numpy().copy()  # noqa: E731
        calls.append((copy(action), None if delta is None else copy(delta), scale))
        return real(action, delta, default_q, scale)

    monkeypatch.setattr(action_path, "joint_targets", spy)
    env = DeltaEnv(
        delta_env_cfg(ds, num_envs=1),
        ds,
        DeltaCfg(joints=(".*_ankle_.*",)),
        starts=(np.array([0]), np.array([5])),
    )
    assert env.num_actions == 4  # the agent acts on the four ankle joints only
    env.step(np.full((1, 4), 0.1))
    a_real, applied, scale = calls[-1]
    np.testing.assert_allclose(a_real[0], ds.trajectories[0].action[5])
    ankles = np.array(["ankle" in n for n in ds.action_joints])
    np.testing.assert_allclose(applied[0], np.where(ankles, 0.1, 0.0))  # restricted to the subset
    # fine-tuning: the frozen πΔ's output reaches the same function, with the action about to be applied
    model_path = _constant_delta_model(tmp_path, ds, value=0.1)
    parent = load_artifact(SHIPPED)
    cfg = eval_env_cfg(parent, EvalCfg(physics_hz=500))
    cfg.actions.delta_action = "asap_training.envs.delta_model:FrozenDelta"
    cfg.actions.delta_action_args = {"path": str(model_path)}
    tracking = TrackingEnv(cfg)
    action = np.full((1, len(ds.action_joints)), 0.3)
    tracking.step(action)
    a, d, scale_ft = calls[-1]
    np.testing.assert_allclose(a, action)
    np.testing.assert_allclose(d, 0.1)
    assert scale_ft == scale


def _constant_delta_model(tmp_path: Path, ds: RealDataset, value: float) -> Path:
    """A πΔ file whose network outputs ``value`` everywhere (bias only)."""
    a = len(ds.action_joints)
    net = torch.nn.Linear(delta_obs_dim(a, 0), a)
    torch.nn.init.zeros_(net.weight)
    torch.nn.init.constant_(net.bias, value)
    meta = DeltaModelMeta(
        action_joints=ds.action_joints,
        mask=(1.0,) * a,
        control_dt=ds.control_dt,
        obs_dim=delta_obs_dim(a, 0),
        obs_scales=DeltaCfg().obs_scales,
        action_clip=100.0,
        horizon_s=1.0,
        dataset_sha256=ds.sha256,
        profile="nominal",
    )
    path = tmp_path / "delta.onnx"
    export_delta_model(net, path, meta)
    return path


def test_fine_tuning_scales_each_envs_delta_per_joint_once_an_episode(nominal_recording, tmp_path):
    ds = nominal_recording
    model_path = _constant_delta_model(tmp_path, ds, value=0.1)
    ft = FineTuneCfg(delta_model=model_path, delta_scale_range=(0.5, 1.5))
    cfg = finetune_env_cfg(eval_env_cfg(load_artifact(SHIPPED), EvalCfg(physics_hz=500)), ft)
    tracking = TrackingEnv(replace(cfg, num_envs=3))
    source, action = tracking.delta_source, torch.zeros(3, len(ds.action_joints), dtype=tracking.dtype)
    first = source(tracking, action).numpy().copy()
    assert np.all((first >= 0.05) & (first <= 0.15))  # 0.1 × [0.5, 1.5]
    assert len(np.unique(first.round(9))) == first.size  # a factor per env and joint
    tracking.episode_step += 1
    np.testing.assert_allclose(source(tracking, action).numpy(), first)  # held through the episode
    tracking.reset(torch.tensor([0]))
    again = source(tracking, action).numpy()
    assert not np.allclose(again[0], first[0])  # drawn again when env 0 starts over
    np.testing.assert_allclose(again[1:], first[1:])
    unscaled = TrackingEnv(replace(finetune_env_cfg(cfg, replace(ft, delta_scale_range=None)), num_envs=3))
    np.testing.assert_allclose(unscaled.delta_source(unscaled, action).numpy(), 0.1, rtol=1e-6)
    with pytest.raises(ValueError, match="expected 0 <= low <= high"):
        FrozenDelta(tracking, str(model_path), scale_range=(1.5, 0.5))
    state = tracking.rng.get_state()
    constant = FrozenDelta(tracking, str(model_path), scale_range=(1.0, 1.0))
    np.testing.assert_allclose(constant(tracking, action).numpy(), 0.1, rtol=1e-6)
    assert torch.equal(tracking.rng.get_state(), state)  # (1, 1) draws nothing: the same run as no scaling
    assert finetune_env_cfg(cfg, FineTuneCfg(profile="nominal")).actions.delta_action is None  # SysID of it


def test_delta_model_file_round_trip_and_refusals(nominal_recording, tmp_path):
    ds = nominal_recording
    a = len(ds.action_joints)
    mask = tuple(float("ankle" in n) for n in ds.action_joints)
    net = torch.nn.Sequential(
        torch.nn.Linear(delta_obs_dim(a, 0), 16), torch.nn.Tanh(), torch.nn.Linear(16, int(sum(mask)))
    )
    meta = DeltaModelMeta(
        action_joints=ds.action_joints, mask=mask, control_dt=0.02, obs_dim=delta_obs_dim(a, 0),
        obs_scales=DeltaCfg().obs_scales, action_clip=100.0, horizon_s=1.0, dataset_sha256=ds.sha256,
        profile="nominal",
    )  # fmt: skip
    path = tmp_path / "d.onnx"
    sha = export_delta_model(net, path, meta)
    model = DeltaModel(path)
    assert model.sha256 == sha and model.meta == meta
    obs = np.random.default_rng(0).normal(size=(5, delta_obs_dim(a, 0)))
    with torch.no_grad():
        out = net(torch.as_tensor(obs, dtype=torch.float32)).numpy()
    expected = np.zeros((5, a))
    expected[:, np.flatnonzero(mask)] = out
    np.testing.assert_allclose(model(obs), expected, atol=1e-5)
    # a policy artifact is not a delta model
    with pytest.raises(ValueError, match="not a delta-action model"):
        DeltaModel(SHIPPED)

    class WrongEnv:
        cfg = type("C", (), {"joint_names": ("a", "b")})()
        dt, num_envs = 0.02, 1

    with pytest.raises(ValueError, match="joints differ"):
        FrozenDelta(WrongEnv(), str(path))


def test_joint_selection_keeps_the_joints_above_a_share_of_an_even_spread() -> None:
    joints = ("a", "b", "c", "d")
    targets = np.zeros((100, 4))
    targets[:, 1], targets[:, 3], targets[:, 0] = 3.0, 2.0, 1.0  # power 9, 4, 1, 0 of 14; even share 1/4
    shares = joint_shares(targets, joints)
    assert shares["b"] == pytest.approx(9 / 14) and shares["c"] == 0.0
    assert select_joints(shares, 1.0) == ("b", "d")  # 9/14 and 4/14 reach 1/4, 1/14 does not
    assert select_joints(shares, 0.25) == ("a", "b", "d")  # action order, not rank order
    assert select_joints(shares, 3.0) == ()


def test_joint_selection_keeps_every_joint_when_the_gap_is_spread_over_the_body() -> None:
    """A latency or weakness on many joints gives every joint about an even share: all stay, the single
    waist joints too (a coverage rule left the last 20 % out, and ranked them below the pairs)."""
    joints = tuple(j for j in g1.MOTOR_ORDER if j not in g1.WRIST_JOINTS)  # the 23-DoF policy's
    shares = dict(zip(joints, np.random.default_rng(0).uniform(0.7, 1.3, len(joints)), strict=True))
    total = sum(shares.values())
    shares = {j: v / total for j, v in shares.items()}
    assert select_joints(shares, 0.5) == tuple(shares)


def test_joint_selection_takes_both_sides_of_a_joint() -> None:
    """Mirror pairs are judged by their mean share: an ankle roll pair (6 % and 3 %: 4.5 %) stays where the
    right ankle roll alone would not; a hip pitch pair at 2 % goes; the waist stands alone."""
    shares = {"left_ankle_pitch_joint": 0.35, "right_ankle_pitch_joint": 0.35, "left_ankle_roll_joint": 0.06,
              "right_ankle_roll_joint": 0.03, "right_hip_pitch_joint": 0.02, "left_hip_pitch_joint": 0.02,
              "waist_yaw_joint": 0.17}  # fmt: skip
    # an even share is 1/7: keeping half of it (0.071) needs a mean above the ankle roll pair's 0.045
    assert select_joints(shares, 0.5) == (
        "left_ankle_pitch_joint", "right_ankle_pitch_joint", "waist_yaw_joint"
    )  # fmt: skip
    assert select_joints(shares, 0.3) == (
        "left_ankle_pitch_joint", "right_ankle_pitch_joint", "left_ankle_roll_joint",
        "right_ankle_roll_joint", "waist_yaw_joint",
    )  # fmt: skip


def test_auto_joints_find_a_gap_confined_to_the_ankles(weak_ankle_recording):
    """weak_ankles halves the ankle motors' torque and adds ankle friction, nothing else: the one-step
    corrections over all 23 joints put most of their weight on the four ankle joints, and the
    data-chosen πΔ joints are exactly those (an all-joints or arm choice would fail)."""
    from asap_training.delta.warm_start import WarmStartCfg, choose_joints

    chosen, shares, searched = choose_joints(
        weak_ankle_recording, DeltaCfg(joints=("auto",)), WarmStartCfg(max_samples=256)
    )
    ankles = {j for j in weak_ankle_recording.action_joints if "ankle" in j}
    assert sum(shares[j] for j in ankles) > 0.8
    mask = chosen.mask(weak_ankle_recording.action_joints)
    picked = {j for j, m in zip(weak_ankle_recording.action_joints, mask, strict=True) if m}
    assert picked <= ankles and len(picked) >= 2
    assert searched is None  # a subset's targets are searched again over the subset alone


def test_the_choice_search_serves_the_fit_where_every_joint_is_chosen(nominal_recording):
    """Where every joint is chosen, the all-joint search choose_joints ran is the fit's first search: the
    targets it hands on are exactly those :func:`recorded_targets` gives for the chosen joints."""
    from asap_training.delta.warm_start import WarmStartCfg, choose_joints, recorded_targets

    cfg = WarmStartCfg(max_samples=24)
    every_pair = DeltaCfg(joints=("auto",), auto_min_share=0.0)
    chosen, _, searched = choose_joints(nominal_recording, every_pair, cfg)
    assert chosen.mask(nominal_recording.action_joints).all() and searched is not None
    again = recorded_targets(nominal_recording, chosen, cfg)
    for handed_on, searched_again in zip(searched, again, strict=True):
        np.testing.assert_array_equal(handed_on, searched_again)


def test_the_delta_env_compiles_as_the_gpu_would_run_it(nominal_recording):
    """``compile_mdp`` (on by default on a GPU) on the delta env's own observation and termination terms:
    the same replays as eager torch, under inference mode as rsl_rl collects."""
    import dataclasses

    ds = nominal_recording
    starts = (np.zeros(3, dtype=int), np.array([0, 7, 30]))
    envs = [DeltaEnv(dataclasses.replace(delta_env_cfg(ds, num_envs=3), compile_mdp=c), ds,
                     DeltaCfg(action_history=2), starts=starts) for c in (True, False)]
    rng = np.random.default_rng(0)
    with torch.inference_mode():
        for _ in range(6):
            delta = torch.as_tensor(rng.normal(scale=0.3, size=(3, envs[0].num_actions)))
            (obs_c, rew_c, done_c, _), (obs_e, rew_e, done_e, _) = (env.step(delta) for env in envs)
            torch.testing.assert_close(obs_c["actor"], obs_e["actor"], atol=1e-9, rtol=0)
            torch.testing.assert_close(rew_c, rew_e, atol=1e-9, rtol=0)
            assert torch.equal(done_c, done_e)
    assert "observations" in vars(envs[0]) and "observations" not in vars(envs[1])
