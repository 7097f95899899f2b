"""DeltaDynamics baseline: the learned residual fits a weak-ankles twin recording, round-trips through its
file, and runs as the simulator backend of the tracking env."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from asap_core import quat
from asap_training.baselines.delta_dynamics import (
    SIMULATOR,
    DeltaDynamicsModel,
    DeltaDynCfg,
    FloatingState,
    apply_residual,
    main,
    simulator_overrides,
    state_residual,
    train_delta_dynamics,
)
from asap_training.eval.openloop import open_loop_errors

POLICY = Path(__file__).resolve().parents[1] / "policies" / "arm_swing" / "policy.onnx"


@pytest.fixture(scope="module")
def weak_ankles():
    """The shipped policy on the twin with half-strength ankles (it falls after ~1.4 s: 69 ticks)."""
    from asap_core.artifact import load_artifact
    from asap_training.data.dataset import RealDataset
    from asap_training.envs.tracking_env import TrackingEnv
    from asap_training.eval.evaluate import eval_env_cfg, rollout_twin

    artifact = load_artifact(POLICY)
    r = rollout_twin(artifact, TrackingEnv(eval_env_cfg(artifact, None, "nominal")), "weak_ankles")
    return RealDataset((r.trajectory,), 0.02, tuple(artifact.metadata.joint_names), artifact.sha256, 0)


@pytest.fixture(scope="module")
def fitted(weak_ankles, tmp_path_factory):
    torch.set_num_threads(1)
    cfg = DeltaDynCfg(k_steps=5, rounds=2, epochs=40, starts_per_round=64, num_envs=64)
    model, log = train_delta_dynamics(weak_ankles, cfg, progress=False)
    path = tmp_path_factory.mktemp("deltadyn") / "model.pt"
    model.save(path)
    return model, log, path


def _random_states(rng: np.random.Generator, n: int) -> FloatingState:
    q = rng.normal(size=(n, 4))
    return FloatingState(
        rng.normal(size=(n, 3)),
        q / np.linalg.norm(q, axis=1, keepdims=True),
        rng.normal(size=(n, 3)),
        rng.normal(size=(n, 3)),
        rng.normal(size=(n, 29)),
        rng.normal(size=(n, 29)),
    )


def test_residual_is_the_exact_inverse_of_its_application_and_independent_of_heading_and_place():
    rng = np.random.default_rng(0)
    real, sim = _random_states(rng, 16), _random_states(rng, 16)
    r = state_residual(real, sim)
    back = apply_residual(sim, r)
    for a, b in zip(back.arrays(), real.arrays(), strict=True):
        if a.shape[1] == 4:  # q and -q are one orientation
            np.testing.assert_allclose(quat.angle(quat.mul(quat.conj(a), b)), 0.0, atol=1e-7)
        else:
            np.testing.assert_allclose(a, b, atol=1e-12)
    # the same pair of states seen from another place and heading needs the same correction
    turn, shift = quat.from_yaw(np.full(16, 1.3)), np.array([2.0, -1.0, 0.0])

    def moved(s: FloatingState) -> FloatingState:
        return FloatingState(
            quat.rotate(turn, s.pos_w) + shift,
            quat.mul(turn, s.quat_w),
            quat.rotate(turn, s.lin_vel_w),
            s.ang_vel_b,
            s.q,
            s.dq,
        )

    np.testing.assert_allclose(state_residual(moved(real), moved(sim)), r, atol=1e-12)


def test_learned_residual_lowers_the_open_loop_error_of_weak_ankles(weak_ankles, fitted):
    _, log, path = fitted
    without = open_loop_errors(weak_ankles)
    with_model = open_loop_errors(weak_ankles, env_overrides=simulator_overrides(path))
    for h, factor in (("0.25", 0.75), ("1", 0.5)):  # measured: 9.8 -> 4.8 mm and 182 -> 19 mm
        assert with_model[h]["e_g_mpjpe_mm"] < factor * without[h]["e_g_mpjpe_mm"], (h, without, with_model)
    # data aggregation: the corrected K-step rollouts stay closer to the recording than uncorrected ones
    assert log[-1]["k_step_base_pos_mm"] < log[0]["k_step_base_pos_mm"]
    assert log[-1]["k_step_joint_pos_rad"] < log[0]["k_step_joint_pos_rad"]


def test_save_load_round_trip_predicts_identically(weak_ankles, fitted):
    model, _, path = fitted
    loaded = DeltaDynamicsModel.load(path)
    assert loaded.meta == model.meta
    assert loaded.meta.dataset_sha256 == weak_ankles.sha256
    assert loaded.sha256 == model.sha256 != ""
    s = FloatingState.of_dataset(weak_ankles)
    q_cmd = s.q + 0.01  # any position command
    x = model.features(s, q_cmd)
    np.testing.assert_array_equal(loaded(x), model(x))
    assert np.abs(model(x)).max() > 0  # a trained model, not the zero initialization


def test_bad_model_file_is_refused_naming_it(tmp_path):
    bad = tmp_path / "bad.pt"
    for content in ({"state_dict": {}}, None):
        if content is None:
            bad.write_text("not a model")
        else:
            torch.save(content, bad)
        with pytest.raises(ValueError, match=r"bad\.pt: not a DeltaDynamics model"):
            DeltaDynamicsModel.load(bad)


def test_simulator_backend_corrects_every_step_of_the_tracking_env(weak_ankles, fitted):
    from asap_training.envs.delta_env import delta_env_cfg
    from asap_training.envs.tracking_env import TrackingEnv

    _, _, path = fitted
    cfg = delta_env_cfg(weak_ankles, num_envs=2)
    env = TrackingEnv(replace(cfg, motions=("arm_swing",), **simulator_overrides(path)))
    assert type(env.sim).__name__ == SIMULATOR.rsplit(":", 1)[1]
    for _ in range(3):
        obs, reward, _, _ = env.step(np.zeros((2, env.num_actions)))
        moved = state_residual(env.sim.last_state, env.sim.last_raw)
        assert np.abs(moved).max() > 0  # the correction was applied to the physics state
        assert bool(obs["actor"].isfinite().all()) and bool(reward.isfinite().all())
    # a control period the model was not fitted for is refused
    slow = TrackingEnv(replace(cfg, motions=("arm_swing",), decimation=5, **simulator_overrides(path)))
    with pytest.raises(ValueError, match=r"corrects every 0\.02 s"):
        slow.step(np.zeros((2, slow.num_actions)))


def test_cli_writes_model_and_report(weak_ankles, tmp_path, capsys):
    data = weak_ankles.save(tmp_path / "ds.npz")
    out = tmp_path / "dd.pt"
    budget = ["--rounds", "1", "--epochs", "2", "--no-eval", "--quiet"]
    main(["--dataset", str(data), "--out", str(out), *budget])
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["sha256"] == DeltaDynamicsModel.load(out).sha256
    assert report["meta"]["dataset_sha256"] == weak_ankles.sha256
    assert [r["round"] for r in report["rounds"]] == [0, 1]
    assert str(out) in capsys.readouterr().out
