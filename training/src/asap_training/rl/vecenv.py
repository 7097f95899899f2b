"""rsl_rl's ``VecEnv`` over the tracking env: its tensors handed over as they are (float32 observations)."""

from __future__ import annotations

import numpy as np
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from asap_training.envs.tracking_env import TrackingEnv


class RslRlVecEnv(VecEnv):
    """Adapter for ``rsl_rl.runners.OnPolicyRunner`` (observation groups ``actor`` and ``critic``)."""

    def __init__(self, env: TrackingEnv) -> None:
        """Wrap an env; the first observation is built here (building advances the history)."""
        self.env = env
        self.num_envs = env.num_envs
        self.num_actions = env.num_actions
        self.max_episode_length = int(np.ceil(float(env.motions.duration_s.max()) / env.dt)) + 1
        self.device = env.device
        self.cfg = env.cfg.to_dict()
        self._obs = self._to_td(env.observations())

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Current episode lengths (the env's counter itself)."""
        return self.env.episode_step

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_step[:] = value.to(self.env.episode_step)

    def _to_td(self, obs: dict[str, torch.Tensor]) -> TensorDict:
        return TensorDict({k: v.float() for k, v in obs.items()}, batch_size=[self.num_envs])

    def get_observations(self) -> TensorDict:
        """The latest observations (does not advance the env)."""
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """One policy step of every env."""
        obs, reward, done, extras = self.env.step(actions.detach())
        self._obs = self._to_td(obs)
        return self._obs, reward.float(), done, extras
