"""rsl_rl's ``VecEnv`` over the numpy tracking env: torch tensors in and out, nothing else."""

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
        self.max_episode_length = int(np.ceil(env.motions.duration_s.max() / env.dt)) + 1
        self.device = "cpu"
        self.cfg = env.cfg.to_dict()
        self._obs = self._to_td(env.observations())

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Current episode lengths (a view of the env's counter)."""
        return torch.from_numpy(self.env.episode_step)

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_step[:] = value.cpu().numpy()

    def _to_td(self, obs: dict[str, np.ndarray]) -> TensorDict:
        return TensorDict(
            {k: torch.from_numpy(v.astype(np.float32)) for k, v in obs.items()}, batch_size=[self.num_envs]
        )

    def get_observations(self) -> TensorDict:
        """The latest observations (does not advance the env)."""
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """One policy step of every env."""
        obs, reward, done, extras = self.env.step(actions.detach().cpu().numpy().astype(np.float64))
        self._obs = self._to_td(obs)
        extras = {"time_outs": torch.from_numpy(extras["time_outs"]), "log": extras["log"]}
        return (self._obs, torch.from_numpy(reward.astype(np.float32)), torch.from_numpy(done), extras)
