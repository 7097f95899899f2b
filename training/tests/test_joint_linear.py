"""The joint-linear πΔ: what each joint's correction reads, the ridge fit, and its ONNX file."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asap_core import g1
from asap_training.delta.joint_linear import JointLinearDelta, feature_columns
from asap_training.delta.train import DeltaTrainCfg, train_delta
from asap_training.envs.delta_env import delta_obs_dim, delta_obs_layout
from asap_training.envs.delta_model import DeltaModel, DeltaModelMeta, export_delta_model

A, H = 23, 1
JOINTS = np.array([3, 4, 10])  # the learned subset (action-joint indices)


def _observations(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, delta_obs_dim(A, H)))


def test_each_joint_reads_its_own_columns_and_the_base_terms():
    own, base = feature_columns(A, H, JOINTS)
    layout = delta_obs_layout(A, H)
    for row, j in zip(own, JOINTS, strict=True):
        # action, one earlier action, previous Δa, position, velocity: joint j's column of each
        terms = ("action", "earlier_actions", "last_delta", "dof_pos", "dof_vel")
        expected = [layout[term].start + j for term in terms]
        assert row.tolist() == expected
    assert len(base) == 3 + 3 + 1 + 2 + 3 and base.max() == delta_obs_dim(A, H) - 1


def test_ridge_fit_recovers_a_per_joint_linear_correction():
    """A correction of the form a torque-scale gap gives (s - 1)(a_j - q_j) - (1 - s) c q̇_j, plus a base
    term and an offset, is recovered exactly; one that depends on another joint's action is not."""
    layout, obs = delta_obs_layout(A, H), _observations(400)
    col = lambda term, j: obs[:, layout[term].start + j]  # noqa: E731
    s = np.array([0.6, 0.8, 0.9])
    targets = np.stack(
        [(sj - 1) * (col("action", j) - col("dof_pos", j)) - (1 - sj) * 0.3 * col("dof_vel", j)
         + 0.2 * obs[:, layout["projected_gravity"].start + 2] + 0.05 * i
         for i, (j, sj) in enumerate(zip(JOINTS, s, strict=True))],
        axis=1,
    )  # fmt: skip
    model = JointLinearDelta(A, H, JOINTS)
    assert model.fit(obs, targets, ridge=1e-8) < 1e-10
    fresh = _observations(50, seed=1)
    f = lambda term, j: fresh[:, layout[term].start + j]  # noqa: E731
    with torch.no_grad():
        out = model(torch.as_tensor(fresh, dtype=torch.float32)).numpy()
    expected_0 = (s[0] - 1) * (f("action", 3) - f("dof_pos", 3)) - (1 - s[0]) * 0.3 * f("dof_vel", 3)
    expected_0 += 0.2 * fresh[:, layout["projected_gravity"].start + 2]
    np.testing.assert_allclose(out[:, 0], expected_0, atol=1e-5)
    # a correction driven by another joint's action is outside the model: it stays unexplained
    other = obs[:, layout["action"].start + 0:layout["action"].start + 1].repeat(len(JOINTS), axis=1)
    assert JointLinearDelta(A, H, JOINTS).fit(obs, other, ridge=1e-8) > 0.9 * other.var()


def test_ridge_shrinks_toward_the_mean_correction():
    obs = _observations(200)
    targets = obs[:, delta_obs_layout(A, H)["action"]][:, JOINTS] + 0.5
    loose, tight = JointLinearDelta(A, H, JOINTS), JointLinearDelta(A, H, JOINTS)
    loose.fit(obs, targets, ridge=1e-8)
    tight.fit(obs, targets, ridge=1e3)
    assert loose.weight[:, :-1].abs().sum() > 100 * tight.weight[:, :-1].abs().sum()
    np.testing.assert_allclose(tight.weight[:, -1], targets.mean(0), atol=1e-6)  # the unpenalized offset


def test_exports_to_the_delta_model_contract(tmp_path):
    obs = _observations(300)
    targets = np.tanh(obs[:, :3]) * 0.1
    model = JointLinearDelta(A, H, JOINTS)
    model.fit(obs, targets, ridge=1e-3)
    mask = np.zeros(A)
    mask[JOINTS] = 1.0
    meta = DeltaModelMeta(
        action_joints=tuple(g1.MOTOR_ORDER[:A]), mask=tuple(mask.tolist()), control_dt=0.02,
        obs_dim=delta_obs_dim(A, H), obs_scales={}, action_clip=1.0, horizon_s=1.0, dataset_sha256="d",
        profile="nominal", action_history=H,
    )  # fmt: skip
    export_delta_model(model, tmp_path / "delta.onnx", meta)
    loaded = DeltaModel(tmp_path / "delta.onnx")
    with torch.no_grad():
        direct = model(torch.as_tensor(obs, dtype=torch.float32)).numpy()
    full = loaded(obs)
    np.testing.assert_allclose(full[:, JOINTS], np.clip(direct, -1.0, 1.0), atol=1e-5)
    assert np.all(np.delete(full, JOINTS, axis=1) == 0.0)


def test_train_delta_refuses_an_unknown_model_and_a_joint_linear_fit_without_warm_start(tmp_path):
    # refused before the dataset is read
    with pytest.raises(ValueError, match="expected one of"):
        train_delta(None, tmp_path, DeltaTrainCfg(model="unknown"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="use model mlp"):
        train_delta(None, tmp_path, DeltaTrainCfg(model="joint_linear", warm_start=None))  # type: ignore[arg-type]
