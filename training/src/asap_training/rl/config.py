"""PPO settings (ASAP's ``humanoidverse/config/algo/ppo.yaml``) and their rsl_rl 5.5 runner dictionary."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(kw_only=True)
class PpoCfg:
    """Runner, algorithm and network settings."""

    num_steps_per_env: int = 24
    max_iterations: int = 1000
    """Total PPO iterations (a resumed run counts those already done)."""
    save_interval: int = 50
    """Checkpoint every this many iterations (and at the end)."""
    hidden_dims: tuple[int, ...] = (512, 256, 128)
    activation: str = "elu"
    init_std: float = 0.8
    obs_normalization: bool = True
    """Empirical normalization; rsl_rl bakes it into the exported graph, so deploy feeds raw observations."""
    learning_rate: float = 1e-3
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    clip_param: float = 0.2
    gamma: float = 0.99
    lam: float = 0.95
    value_loss_coef: float = 1.0
    entropy_coef: float = 0.01
    desired_kl: float = 0.01
    max_grad_norm: float = 1.0
    schedule: str = "adaptive"

    def to_rsl_rl(self) -> dict[str, Any]:
        """The ``train_cfg`` dict of ``rsl_rl.runners.OnPolicyRunner``."""
        model = {
            "class_name": "MLPModel",
            "hidden_dims": list(self.hidden_dims),
            "activation": self.activation,
            "obs_normalization": self.obs_normalization,
        }
        return {
            "num_steps_per_env": self.num_steps_per_env,
            "save_interval": self.save_interval,
            "obs_groups": {"actor": ["actor"], "critic": ["critic"]},
            "logger": "tensorboard",
            "actor": model
            | {
                "distribution_cfg": {
                    "class_name": "GaussianDistribution",
                    "init_std": self.init_std,
                    "std_type": "scalar",
                }
            },
            "critic": dict(model),
            "algorithm": {
                "class_name": "PPO",
                "learning_rate": self.learning_rate,
                "num_learning_epochs": self.num_learning_epochs,
                "num_mini_batches": self.num_mini_batches,
                "clip_param": self.clip_param,
                "gamma": self.gamma,
                "lam": self.lam,
                "value_loss_coef": self.value_loss_coef,
                "entropy_coef": self.entropy_coef,
                "desired_kl": self.desired_kl,
                "max_grad_norm": self.max_grad_norm,
                "schedule": self.schedule,
            },
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PpoCfg:
        """Inverse of :meth:`to_dict`."""
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**fields)
