"""The action path: ``a`` (policy, normalized) → ``a + Δa`` → ``q* = q_default + scale·(a + Δa)``.

Stage 2 plugs a frozen delta-action model πΔ into this path by configuration
(``ActionCfg.delta_action = "module:factory"``): the factory gets the env and
``ActionCfg.delta_action_args`` and returns a :class:`DeltaActionSource`. Δa is in the same normalized
units as ``a`` and is scaled once, together with ``a`` (ASAP's code scales Δa by 0.25 in delta training
but not in fine-tuning: a ×4 mismatch), and it sees the action about to be applied in delta training and
in fine-tuning alike (no one-step lag).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from asap_training.envs.tracking_env import TrackingEnv


class DeltaActionSource(Protocol):
    """Produces Δa (N, num_actions) for the action about to be applied."""

    def __call__(self, env: TrackingEnv, action: np.ndarray) -> np.ndarray:
        """Δa in normalized action units (zeros where the correction is restricted away)."""


def resolve(target: str) -> Any:
    """``"package.module:attr"`` → the attribute (raises ValueError naming the target)."""
    module, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"expected 'module:attr', got {target!r}")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"cannot resolve {target!r}: {err}") from None


def joint_targets(
    action: np.ndarray, delta: np.ndarray | None, default_q: np.ndarray, scale: float
) -> np.ndarray:
    """``q* = q_default + scale·(a + Δa)``: the one place the action scale is applied."""
    a = action if delta is None else action + delta
    return default_q + scale * a
