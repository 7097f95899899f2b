"""Open-loop replay error (paper Table III): how well a simulator, with a correction, reproduces recordings.

Windows start at recorded states every ``stride_s``; the simulator replays the recorded actions (plus Δa
from πΔ when given) for the longest horizon; the simulated tracked points are compared with the FK of the
recorded states over each horizon with the stage-1 metrics (E_g-mpjpe, E_mpjpe, E_acc, E_vel, mm).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from asap_training.data.dataset import RealDataset
from asap_training.envs.delta_env import DeltaCfg, DeltaEnv, delta_env_cfg
from asap_training.envs.delta_model import DeltaModel
from asap_training.eval.metrics import ERROR_METRICS, tracking_metrics

HORIZONS_S = (0.25, 0.5, 1.0)
STRIDE_S = 0.25
"""A replay window starts every this many seconds of a recording (the scores' default)."""
MAX_WINDOWS = 128
"""The windows are evenly thinned to at most this many (the scores' default)."""


def replay_windows(
    dataset: RealDataset, steps: int, stride: int, max_windows: int
) -> tuple[np.ndarray, np.ndarray]:
    """(trajectory ids, start frames) of every window of ``steps`` recorded successors, evenly thinned to
    at most ``max_windows``."""
    ids, frames = [], []
    for i, tr in enumerate(dataset.trajectories):
        starts = np.arange(0, tr.num_steps - steps, stride)
        ids += [i] * len(starts)
        frames += starts.tolist()
    if not ids:
        longest = max(tr.num_steps for tr in dataset.trajectories)
        raise ValueError(f"no trajectory has {steps + 1} ticks for the replay horizon (longest: {longest})")
    keep = np.unique(np.linspace(0, len(ids) - 1, min(max_windows, len(ids))).round().astype(int))
    return np.asarray(ids)[keep], np.asarray(frames)[keep]


def scored_windows(
    dataset: RealDataset, steps: int, stride_s: float = STRIDE_S, max_windows: int = MAX_WINDOWS
) -> tuple[np.ndarray, np.ndarray]:
    """The windows :func:`open_loop_errors` replays for ``steps`` ticks: one every ``stride_s`` seconds
    (at least every tick), evenly thinned to ``max_windows``; (trajectory ids, start frames)."""
    return replay_windows(dataset, steps + 1, max(1, round(stride_s / dataset.control_dt)), max_windows)


def open_loop_errors(
    dataset: RealDataset,
    *,
    profile: str = "nominal",
    delta_model: Path | None = None,
    correction: Callable[[np.ndarray], np.ndarray] | None = None,
    horizons_s: Sequence[float] = HORIZONS_S,
    stride_s: float = STRIDE_S,
    max_windows: int = MAX_WINDOWS,
    env_overrides: dict[str, Any] | None = None,
) -> dict[str, dict[str, float]]:
    """Mean metrics over the windows for each horizon: ``{"0.25": {"e_g_mpjpe_mm": ...}, ...}``.

    The correction: a πΔ file (``delta_model``), or ``correction``, Δa over every action joint from πΔ's
    observations with ``DeltaCfg``'s default action history (a closed form to compare πΔ with).
    ``env_overrides`` replace fields of the delta env config (a baseline's simulator or profile).
    """
    dt = dataset.control_dt
    steps = round(max(horizons_s) / dt)
    ids, frames = scored_windows(dataset, steps, stride_s, max_windows)
    if delta_model is not None and correction is not None:
        raise ValueError("open_loop_errors: give a πΔ file (delta_model) or a correction, not both")
    history = DeltaCfg().action_history if correction is not None else 0
    if delta_model:
        model = DeltaModel(delta_model)
        correction, history = model, model.meta.action_history
    robot_w, ref_w = replay_points(
        dataset, ids, frames, steps, profile=profile, correction=correction, action_history=history,
        env_overrides=env_overrides,
    )  # fmt: skip
    result = {}
    for h in horizons_s:
        n = round(h / dt) + 1
        per_window = [tracking_metrics(robot_w[w, :n], ref_w[w, :n]).to_dict() for w in range(len(ids))]
        result[f"{h:g}"] = {k: float(np.mean([m[k] for m in per_window])) for k in ERROR_METRICS}
    return result


def replay_points(
    dataset: RealDataset,
    ids: np.ndarray,
    frames: np.ndarray,
    steps: int,
    *,
    profile: str = "nominal",
    correction: Callable[[np.ndarray], np.ndarray] | None = None,
    action_history: int = 0,
    env_overrides: dict[str, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Replay the recorded actions (plus ``correction(πΔ observations)``, Δa over every action joint, when
    given) from each window's start (trajectory ``ids``, start ``frames``: one env each) for ``steps``
    ticks; returns the simulated and the recorded tracked points, (W, steps + 1, P, 3) each."""
    cfg = delta_env_cfg(dataset, num_envs=len(ids), profile=profile)
    for key, value in (env_overrides or {}).items():
        setattr(cfg, key, value)
    # one extra step: the episode's last state is replaced by the next episode's start on reset
    horizon = DeltaCfg(horizon_s=(steps + 1) * dataset.control_dt, action_history=action_history)
    env = DeltaEnv(cfg, dataset, horizon, starts=(ids, frames))
    robot, ref = [env.points.pos_w.cpu().numpy()], [env.ref.pos_w.cpu().numpy()]
    obs = env.observations()["actor"]
    for _ in range(steps):
        delta = correction(obs.cpu().numpy()) if correction else np.zeros((env.num_envs, env.num_actions))
        out, *_ = env.step(delta)
        obs = out["actor"]
        robot.append(env.points.pos_w.cpu().numpy())
        ref.append(env.ref.pos_w.cpu().numpy())
    return np.stack(robot, axis=1), np.stack(ref, axis=1)
