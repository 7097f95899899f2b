"""A structured πΔ: each joint's correction is linear in that joint's own signals and the base's state.

    Δa_j = w_j · z_j,   z_j = standardized [a_j, a_{t-1,j} .. a_{t-H,j}, previous Δa_j, q_j, q̇_j,
                                          base angular and linear velocity, base height, foot forces,
                                          projected gravity, 1]

The paper's πΔ is a 512-256-128 MLP over the whole observation, trained with PPO on ~5000 parallel
replays. With the data a few robot episodes give (a few hundred warm-start targets), an MLP fitted to
those targets memorizes them: on `random:3` (twin-core data, 4 episodes, 256 targets and 3 DAgger rounds,
1 s open loop on 2 episodes left out of the fit) it replayed 66.5 -> 64.4 mm, this model 66.5 -> 36.8.
The reality gaps a drive shows are mostly a joint's own: a weaker or slower motor, friction, damping
and rotor inertia change what the joint does with its own target, velocity and recent commands, which a
per-joint linear map of those signals represents (a torque scale s makes the exact correction
(s - 1)(a_j - q_j) - (1 - s)(kd/kp) q̇_j in target units); the base terms carry what the whole body does
(mass, CoM, contacts). It has (H + 4 + 13) weights per joint, fitted in closed form by ridge regression.

It reads the same observation as the MLP (:func:`~asap_training.envs.delta_env.delta_observation`) and
exports to the same ONNX contract, so fine-tuning loads it unchanged.
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict
from torch import Tensor

from asap_training.envs.delta_env import delta_obs_layout

JOINT_TERMS = ("action", "earlier_actions", "last_delta", "dof_pos", "dof_vel")
"""Per-joint terms of the observation a joint's correction reads (its own column of each)."""
BASE_TERMS = ("base_ang_vel", "base_lin_vel", "base_height", "feet_force", "projected_gravity")
"""Whole-body terms every joint's correction reads."""


def feature_columns(
    num_actions: int, action_history: int, joints: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Observation columns of each learned joint's own signals (k, L) and of the base terms (G,)."""
    layout = delta_obs_layout(num_actions, action_history)
    own = []
    for j in joints:
        row = []
        for term in JOINT_TERMS:
            cols = np.arange(layout[term].start, layout[term].stop)
            row += cols[j::num_actions].tolist()  # earlier actions: one block of num_actions per tick
        own.append(row)
    base = np.concatenate([np.arange(layout[t].start, layout[t].stop) for t in BASE_TERMS])
    return np.array(own, dtype=np.int64), base


class JointLinearDelta(torch.nn.Module):
    """πΔ(obs) → Δa over the learned joints (N, k); ``fit`` sets it by ridge regression."""

    def __init__(self, num_actions: int, action_history: int, joints: np.ndarray) -> None:
        """``joints``: the action-joint indices Δa is learned for (the delta mask's columns)."""
        super().__init__()
        own, base = feature_columns(num_actions, action_history, joints)
        self.register_buffer("own", torch.as_tensor(own))
        self.register_buffer("base", torch.as_tensor(base))
        width = own.shape[1] + len(base) + 1
        self.register_buffer("mean", torch.zeros(len(joints), width))
        self.register_buffer("scale", torch.ones(len(joints), width))
        self.register_buffer("weight", torch.zeros(len(joints), width))

    def features(self, obs: Tensor) -> Tensor:
        """(N, k, F): each joint's own signals, the base terms and a constant."""
        own = obs[:, self.own]
        base = obs[:, self.base].unsqueeze(1).expand(-1, own.shape[1], -1)
        return torch.cat([own, base, torch.ones_like(own[:, :, :1])], dim=2)

    def forward(self, obs: Tensor | TensorDict) -> Tensor:
        """Δa for a batch of observations (a tensor, or rsl_rl's TensorDict with ``actor``)."""
        x = obs["actor"] if isinstance(obs, TensorDict) else obs
        z = (self.features(x.to(self.weight.dtype)) - self.mean) / self.scale
        return (z * self.weight).sum(dim=2)

    def fit(self, obs: np.ndarray, targets: np.ndarray, ridge: float) -> float:
        """Least squares per joint with an L2 penalty ``ridge`` × samples on the standardized weights (the
        constant unpenalized); returns the mean squared error on the data (in float64, as fitted)."""
        f = self.features(torch.as_tensor(obs, dtype=torch.float64))
        y = torch.as_tensor(targets, dtype=torch.float64)
        mean, scale = f.mean(dim=0), f.std(dim=0).clamp_min(1e-3)
        mean[:, -1], scale[:, -1] = 0.0, 1.0
        z = (f - mean) / scale
        penalty = ridge * len(y) * torch.eye(z.shape[2], dtype=torch.float64)
        penalty[-1, -1] = 0.0
        gram = torch.einsum("nki,nkj->kij", z, z) + penalty
        weight = torch.linalg.solve(gram, torch.einsum("nki,nk->ki", z, y))
        self.mean.copy_(mean), self.scale.copy_(scale), self.weight.copy_(weight)
        return float(torch.mean(((z * weight).sum(dim=2) - y) ** 2))
