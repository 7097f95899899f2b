"""Per-joint gains of a fitted πΔ, set on the objective itself: the error of its open-loop replays.

The joint-linear πΔ is regressed onto per-transition targets (3-tick searches). Where those targets are
noisy the regression shrinks a joint's correction toward zero: a stance ankle's corrections move little
within 3 ticks, and its targets were the worst explained (R² 0.40-0.68 against 0.87 over all joints).
Multiplying each learned joint's Δa by a gain g_j, set to minimize the replay error over the horizon the
selection scores (the multi-step objective the paper's PPO optimizes), restores what the regression
shrank without refitting its weights.

Searched on every window, 23 gains fit some of the recordings' noise: on the twin-core data of
``random:8002`` (4 episodes, gains searched on episodes 0-2) the 1 s open loop went 19.2 → 15.7 mm on
all episodes and 17.6 → 18.9 on episode 3, left out (``random:8001``, 11 joints: 16.9 → 13.9 on it).
So the gains are searched on half the windows and shrunk toward 1 on the other half: Levenberg-Marquardt
on the windows of every other trajectory (or of a single trajectory's first half): each iteration replays
them with the current gains and with each gain moved by ``fd_step`` (k + 1 replays per window, batched as
envs: the Jacobian by finite differences), solves for a step under several dampings, replays those
candidates and keeps the best when it lowers the E_g-mpjpe itself (the least squares it solves is over
point errors, the score is their mean norm). Then the held-out windows choose how far to go: gains
1 + t (g − 1) for each t in ``shrinkage``, the best there kept. Gains stay within [0, ``max_gain``].

Measured on the twin-core data of ``random:8001``-``8005`` (tuning now; 4 excitation episodes each, the
demo's fit): 1 s open loop on all windows, none → the kept DAgger round → with its gains (shrinkage):
8001 24.6 → 15.1 → 13.0 (1), 8002 49.3 → 19.2 → 15.6 (0.75), 8003 38.3 → 17.5 → 16.1 (0.5), 8004 28.2
→ 10.0 → 8.9 (1), 8005 17.7 → 11.3 → 11.3 (0: the held-out half kept none). 1-4 min on 2 cores.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from asap_training.data.dataset import RealDataset
from asap_training.envs.delta_env import DeltaCfg
from asap_training.envs.delta_model import bounded_delta
from asap_training.eval.openloop import replay_points, scored_windows


@dataclass(frozen=True, kw_only=True)
class GainCalibrationCfg:
    """The gain calibration after πΔ's fit (``joint_linear`` model)."""

    iterations: int = 5
    """Levenberg-Marquardt iterations of the search for πΔ's per-joint gains on its open-loop replays,
    after the fit (``joint_linear``; 0: none, every gain 1)."""
    fd_step: float = 0.2
    """Finite-difference step of a gain."""
    max_gain: float = 3.0
    """Upper bound of a gain (the lower one is 0: the correction off)."""
    dampings: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0)
    """Candidate dampings per iteration, as fractions of the normal matrix's mean diagonal."""
    min_improvement_mm: float = 0.02
    """Stop when the best candidate lowers the score by less than this."""
    shrinkage: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    """How far toward the searched gains to go (0: gains 1), chosen on the held-out windows."""


@dataclass(frozen=True)
class GainCalibration:
    """The gains kept (one per learned joint); the search's score (mm, its windows) at the start and after
    each kept step; the held-out windows' score for each shrinkage (none: a single window, or no step
    kept) and the one chosen."""

    gains: np.ndarray
    scores_mm: tuple[float, ...]
    held_out_mm: dict[float, float]
    shrinkage: float
    elapsed_s: float


def calibrate_gains(
    dataset: RealDataset,
    correction: Callable[[np.ndarray], np.ndarray],
    joints: np.ndarray,
    delta: DeltaCfg,
    *,
    profile: str = "nominal",
    cfg: GainCalibrationCfg | None = None,
    progress: Callable[[str], None] | None = None,
) -> GainCalibration:
    """Gains for ``correction`` (πΔ observations → Δa of the learned ``joints``, (N, k); ``delta``: its
    horizon, action history and bound) by the open-loop E_g-mpjpe at the horizon, replayed in ``profile``'s
    simulator: searched on half the windows that :func:`~asap_training.eval.openloop.open_loop_errors`
    scores by default and shrunk toward 1 by the other half (module docstring)."""
    cfg = cfg or GainCalibrationCfg()
    start = time.monotonic()
    horizon_s, max_delta = delta.horizon_s, delta.max_delta
    steps = round(horizon_s / dataset.control_dt)
    ids, frames = scored_windows(dataset, steps)
    trajectories = np.unique(ids)
    held = np.isin(ids, trajectories[1::2]) if len(trajectories) > 1 else frames > np.median(frames)
    k, num_actions = len(joints), len(dataset.action_joints)

    def replay(candidates: np.ndarray, chosen: np.ndarray) -> np.ndarray:
        """Point errors (C, W · steps · P · 3) of each candidate gain vector (C, k) on the ``chosen``
        windows (a mask)."""
        windows = np.flatnonzero(chosen)
        per_env = np.repeat(candidates, len(windows), axis=0)
        robot, ref = replay_points(
            dataset, np.tile(ids[windows], len(candidates)), np.tile(frames[windows], len(candidates)), steps,
            profile=profile, action_history=delta.action_history,
            correction=lambda obs: bounded_delta(per_env * correction(obs), joints, num_actions, max_delta),
        )  # fmt: skip
        return (robot - ref)[:, 1:].reshape(len(candidates), -1)  # frame 0 is the recorded start

    def score(errors: np.ndarray) -> np.ndarray:
        """E_g-mpjpe (mm) of each candidate: the mean point distance over windows, frames and points."""
        return np.linalg.norm(errors.reshape(len(errors), -1, 3), axis=2).mean(axis=1) * 1e3

    searched, scores = np.ones(k), list[float]()
    for it in range(cfg.iterations):
        probes = np.repeat(searched[None], k + 1, axis=0) + np.vstack([np.zeros(k), cfg.fd_step * np.eye(k)])
        errors = replay(probes, ~held)
        if not scores:
            scores.append(float(score(errors[:1])[0]))
        jacobian = (errors[1:] - errors[0]).T / cfg.fd_step  # (M, k)
        normal, gradient = jacobian.T @ jacobian, jacobian.T @ errors[0]
        if not np.trace(normal):  # no gain moves the replays (a zero fit): nothing to search
            break
        damped = [normal + d * float(np.trace(normal)) / k * np.eye(k) for d in cfg.dampings]
        moves = np.array([np.linalg.solve(m, gradient) for m in damped])
        candidates = np.clip(searched - moves, 0.0, cfg.max_gain)
        tried = score(replay(candidates, ~held))
        best = int(np.argmin(tried))
        if progress is not None:
            took = time.monotonic() - start
            progress(f"πΔ gains, iteration {it + 1}/{cfg.iterations}: {scores[-1]:.2f} -> "
                     f"{tried[best]:.2f} mm at {horizon_s:g} s ({took:.0f} s)")  # fmt: skip
        if tried[best] > scores[-1] - cfg.min_improvement_mm:
            break
        searched = candidates[best]
        scores.append(float(tried[best]))
    if not held.any():  # a single window: nothing to hold out
        return GainCalibration(searched, tuple(scores), {}, 1.0, time.monotonic() - start)
    if np.all(searched == 1.0):  # no step kept
        return GainCalibration(searched, tuple(scores), {}, 0.0, time.monotonic() - start)
    shrunk = np.array([1.0 + t * (searched - 1.0) for t in cfg.shrinkage])
    held_out = dict(zip(cfg.shrinkage, score(replay(shrunk, held)).tolist(), strict=True))
    chosen = min(held_out, key=held_out.__getitem__)
    if progress is not None:
        shown = ", ".join(f"{t:g}: {v:.2f}" for t, v in held_out.items())
        progress(f"πΔ gains on the held-out windows, by shrinkage: {shown} mm; kept {chosen:g}")
    gains = 1.0 + chosen * (searched - 1.0)
    return GainCalibration(gains, tuple(scores), held_out, chosen, time.monotonic() - start)
