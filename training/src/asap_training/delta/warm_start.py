"""A warm start for πΔ: inverse-dynamics targets through the simulator, regressed into the actor.

PPO from a zero-initialized πΔ did not improve the open-loop error within CPU budgets here (measured on a
30 % ankle-torque gap: 120 iterations × 1536 samples, the deterministic πΔ ended worse than Δa = 0). The
paper's 5000 parallel envs are not available on 2 cores, so before PPO the actor is fitted by regression
to targets: from a state, the first Δa of the ``search_ticks`` corrections that make the simulator's next
frames closest to the recorded ones (tracked points and joint velocities), found by Gauss-Newton with
finite-difference Jacobians through the same delta env (batched: all starts are envs), a receding-horizon
expert. Targets come from the recorded states, then (``visited_rounds``) from the states the fitted πΔ
reaches in its own replays, added and the actor refitted (DAgger, with Data as Demonstrator's
"back to the recording" as the expert, where "the recording" is its transition from wherever the replay
stands: no few-tick correction undoes a drift). PPO then optimizes the paper's multi-step objective (Table II)
from there.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from rsl_rl.modules import EmpiricalNormalization
from tensordict import TensorDict
from torch import Tensor

from asap_core import g1, quat
from asap_training.data.dataset import RealDataset
from asap_training.envs.config import TrackingEnvCfg
from asap_training.envs.delta_env import DeltaCfg, DeltaEnv, delta_env_cfg
from asap_training.eval.openloop import replay_windows


@dataclass(kw_only=True)
class WarmStartCfg:
    """Target search and regression settings."""

    max_samples: int = 512
    """Starts used (evenly thinned); each is one env of the batched search."""
    search_ticks: int = 3
    """Ticks each target search looks ahead; its target is the first tick's Δa. One tick cannot steer a
    floating base back: on random:3 (twin-core data, 1 s open loop, none 69.4 mm, the gap's own simulator
    17.2) the exact one-tick targets replayed along the recording gave 63.7, and 3-tick targets applied
    from the replay's own state every tick (the expert itself) 8.8."""
    gauss_newton_iterations: int = 3
    fd_step: float = 0.05
    """Finite-difference step of Δa (normalized action units)."""
    damping: float = 1e-3
    """Levenberg-Marquardt damping of the normal equations."""
    point_weight: float = 10.0
    """Weight of tracked-point position errors (m, world frame: what E_g-mpjpe measures, the base's
    position and orientation included)."""
    velocity_weight: float = 0.1
    """Weight of joint velocity errors (rad/s)."""
    torque_weight: float = 0.02
    """Weight of motor torque errors (N m) against the torques the robot reported (``tau_est``), where the
    dataset has them. Motion alone leaves a stance leg's corrections undetermined: with the foot on the
    ground, hip, knee and ankle targets that press against each other move nothing in one tick, and the
    search's targets there were noise (correlation with the exact correction of a pure 21 ms latency
    0.47-0.64 on hip roll/pitch and ankle pitch, 0.98 on the arms); the torques tell them apart (0.85-1.0).
    0 matches motion only. The G1 estimates ``tau_est`` from motor current: a motor weak in its torque
    constant reports more than it gives."""
    epochs: int = 300
    """Regression epochs of the MLP πΔ."""
    learning_rate: float = 1e-3
    """Adam's rate in the MLP πΔ's regression."""
    ridge: float = 1e-4
    """L2 penalty per sample on the joint-linear πΔ's standardized weights (measured on random:3, 1 s
    open loop on held-out episodes: 36.8 mm at 1e-4, 37.2 at 1e-3)."""
    visited_rounds: int = 3
    """Rounds of targets at the states the fitted πΔ visits in replays (:func:`visited_targets`), each
    added to the data and the actor refitted (DAgger). Targets at recorded states alone fit a correction
    for states a replay leaves within a few ticks (random:3, 1 s open loop on an episode left out of the
    fit, with a plain MLP as the regressor: none 65.3 mm; recorded-state targets only 175.6; after 1, 2,
    3 rounds 44.2, 35.4, 41.1)."""


def _transitions(dataset: RealDataset, count: int, ticks: int) -> tuple[np.ndarray, np.ndarray]:
    # a start needs ``ticks`` recorded successors, the last of them not its trajectory's last frame:
    # stepping onto that frame ends the episode, and the env's reset would replace the state compared
    counts = [max(tr.num_steps - 1 - ticks, 0) for tr in dataset.trajectories]
    ids = np.concatenate([np.full(c, i) for i, c in enumerate(counts)])
    frames = np.concatenate([np.arange(c) for c in counts])
    keep = _thin(len(ids), count)
    return ids[keep], frames[keep]


def _thin(total: int, count: int) -> np.ndarray:
    """Indices of at most ``count`` of ``total`` items, evenly spread."""
    return np.unique(np.linspace(0, total - 1, min(count, total)).round().astype(int))


class _SearchEnv(DeltaEnv):
    """A delta env started at recorded states, each env's search compared with its recorded frames."""

    def reference_points(self) -> Tensor:
        """The tracked points of every env's recorded frame at its motion time (world frame)."""
        return self.ref.pos_w


def _mismatch(env: _SearchEnv, rows: Tensor, cfg: WarmStartCfg) -> Tensor:
    """How far every env's simulated state is from the recorded frame ``rows``: tracked points (as
    :meth:`_SearchEnv.reference_points` places them), joint velocities and, where recorded, motor torques,
    weighted."""
    points = (env.points.pos_w - env.reference_points()).flatten(1)
    joint_vel = env.state.joint_vel - env._rec["joint_vel"][rows]
    terms = [cfg.point_weight * points, cfg.velocity_weight * joint_vel]
    if env.dataset.has_torque and cfg.torque_weight:
        torque = env.state.joint_torque.to(env.dtype) - env._rec["joint_torque"][rows]
        terms.append(cfg.torque_weight * torque)
    return torch.cat(terms, dim=1)


def _search(env: _SearchEnv, cfg: WarmStartCfg, max_delta: float) -> tuple[np.ndarray, float, float]:
    """For every env (one start each): the ``cfg.search_ticks`` Δa that bring the simulated next frames
    closest to the recorded ones; returns (the first tick's Δa* (N, k), mean mismatch over the window with
    Δa = 0, with Δa*)."""
    everyone = torch.arange(env.num_envs, device=env.device)
    ticks, k = cfg.search_ticks, env.num_actions
    starts = env.recorded_row()

    def residual(d: Tensor) -> Tensor:
        env.reset(everyone)  # the same starts again (one per env, in order)
        window = []
        for tick in range(ticks):
            env.step(d[:, tick * k : (tick + 1) * k])
            window.append(_mismatch(env, starts + tick + 1, cfg))
        return torch.cat(window, dim=1)

    n = ticks * k
    eye = torch.eye(n, device=env.device, dtype=env.dtype)
    d = env.tensor(np.zeros((env.num_envs, n)))
    r = residual(d)
    start_error = float(torch.linalg.norm(r, dim=1).mean())
    for _ in range(cfg.gauss_newton_iterations):
        jac = torch.stack([(residual(d + cfg.fd_step * eye[j]) - r) / cfg.fd_step for j in range(n)], dim=2)
        jtj = torch.einsum("nri,nrj->nij", jac, jac) + cfg.damping * eye
        step = torch.linalg.solve(jtj, -torch.einsum("nri,nr->ni", jac, r))
        candidate = (d + step).clip(-max_delta, max_delta)
        r_new = residual(candidate)
        better = torch.linalg.norm(r_new, dim=1) < torch.linalg.norm(r, dim=1)
        d[better], r[better] = candidate[better], r_new[better]
    return d[:, :k].cpu().numpy(), start_error, float(torch.linalg.norm(r, dim=1).mean())


Targets = tuple[np.ndarray, np.ndarray, float, float]
"""(πΔ observations (M, D), targets Δa* (M, k), mean mismatch with Δa = 0, with Δa*)."""


def recorded_targets(
    dataset: RealDataset, delta: DeltaCfg, cfg: WarmStartCfg, profile: str = "nominal"
) -> Targets:
    """The :data:`Targets` at recorded states."""
    ids, frames = _transitions(dataset, cfg.max_samples, cfg.search_ticks)
    env = _SearchEnv(
        delta_env_cfg(dataset, num_envs=len(ids), profile=profile),
        dataset,
        dataclasses.replace(delta, horizon_s=(cfg.search_ticks + 2) * dataset.control_dt),
        starts=(ids, frames),
    )
    obs = env.observations()["actor"].cpu().numpy()
    d, before, after = _search(env, cfg, delta.max_delta)
    # πΔ sees its previous output: give each sample the target of the transition before it (0 at a start),
    # as a replay with πΔ ≈ Δa* would (a constant 0 there would leave that input unnormalizable)
    previous = {(i, f): row for row, (i, f) in enumerate(zip(ids.tolist(), frames.tolist(), strict=True))}
    for row, (i, f) in enumerate(zip(ids.tolist(), frames.tolist(), strict=True)):
        before_row = previous.get((i, f - 1))
        obs[row, : len(dataset.action_joints)] = 0.0
        if before_row is not None:
            obs[row, env.delta_cols] = d[before_row]
    return obs, d, before, after


class _VisitedEnv(_SearchEnv):
    """A delta env whose env ``i`` starts at the given simulator state ``i`` instead of its recorded frame's
    (the frame still gives the recorded actions and the next frames the target). Where the corrected
    simulator has an actuation latency (a ``profile`` other than nominal), the commands in flight are the
    recorded ones, without the Δa the replay had added to them."""

    def __init__(self, cfg: TrackingEnvCfg, dataset: RealDataset, delta: DeltaCfg,
                 starts: tuple[np.ndarray, np.ndarray], states: tuple[np.ndarray, ...]) -> None:  # fmt: skip
        self._visited, self._resetting = states, np.arange(len(starts[0]))
        super().__init__(cfg, dataset, delta, starts)
        # every env stands at its visited start after construction, its reference at the recorded frame
        self._offset = self.points.pos_w - self.ref.pos_w

    def reference_points(self) -> Tensor:
        """The recorded frame's points, each moved by its own offset at the start: the search asks for the
        recorded *transition* from the visited state, not for the recorded state. A replay that led here
        drifted (position, heading, posture) and no few-tick correction undoes a drift; compared with the
        recorded frames (world frame), the search spent its Δa* on trying. Search mismatch left on
        random:2001's first round: 1.43 of 2.64 (world frame), 0.42 of 2.03 (here; recorded states: 0.33 of
        2.00). The fit's 1 s open-loop error, rounds 1-3, on random:2001's data: 22.5, 21.8, 16.8 mm (world
        frame); 15.0, 16.8, 16.9 (recorded frames moved with the base's position and heading); 12.8, 12.8,
        12.9 (here); on random:4003's: 26.3, 16.7, 14.1; 12.9, 11.9, 11.9; 11.5, 11.6, 11.6 (none 28.0)."""
        return self.ref.pos_w + self._offset

    def _sample_starts(self, env_ids: Tensor) -> tuple[Tensor, Tensor]:
        self._resetting = env_ids.cpu().numpy()
        return super()._sample_starts(env_ids)

    def _initial_state(self, motion_ids: Tensor, start_s: Tensor) -> tuple[Tensor, ...]:
        return tuple(self.tensor(s[self._resetting]) for s in self._visited)


def visited_targets(
    dataset: RealDataset, delta: DeltaCfg, cfg: WarmStartCfg, actor: torch.nn.Module, profile: str = "nominal"
) -> Targets:
    """Targets at the states the current πΔ visits (DAgger; Data as Demonstrator, Venkatraman et al., AAAI
    2015): replay windows of ``delta.horizon_s`` with ``actor`` correcting, then at each visited simulator
    state the search's Δa* toward the recorded transition from there (:meth:`_VisitedEnv.reference_points`).
    Targets at recorded states alone do not make a replay follow the recording: open-loop humanoid replays
    are unstable, and a correction fitted only on the recording's states meets others after a few ticks.
    Returns what :func:`recorded_targets` does, the observations as πΔ saw them in the replay."""
    steps = max(1, round(delta.horizon_s / dataset.control_dt))
    ids, frames = replay_windows(dataset, steps + 1 + cfg.search_ticks, max(1, steps // 4), cfg.max_samples)
    env = DeltaEnv(
        delta_env_cfg(dataset, num_envs=len(ids), profile=profile),
        dataset,
        dataclasses.replace(delta, horizon_s=(steps + 1 + cfg.search_ticks) * dataset.control_dt),
        starts=(ids, frames),
    )
    seen: list[tuple[np.ndarray, ...]] = []
    obs = env.observations()["actor"]
    with torch.no_grad():
        for _ in range(steps):
            s = env.state
            rows = [env.motion_ids, torch.round(env.motion_time_s / env.dt).long()]
            ang_vel_w = quat.rotate(s.root_quat_w, s.root_ang_vel_b)
            state = [s.root_pos_w, s.root_quat_w, s.root_lin_vel_w, ang_vel_w, s.joint_pos, s.joint_vel]
            seen.append(tuple(t.cpu().numpy().copy() for t in [obs, *rows, *state]))
            out, *_ = env.step(actor(TensorDict({"actor": obs.float()}, batch_size=[env.num_envs])))
            obs = out["actor"]
    flat = [np.concatenate(column) for column in zip(*seen, strict=True)]
    keep = _thin(len(flat[0]), cfg.max_samples)
    obs_seen, vid, vframe, *states = (column[keep] for column in flat)
    search_env = _VisitedEnv(
        delta_env_cfg(dataset, num_envs=len(keep), profile=profile),
        dataset,
        dataclasses.replace(delta, horizon_s=(cfg.search_ticks + 2) * dataset.control_dt),
        (vid, vframe),
        tuple(states),
    )
    d, before, after = _search(search_env, cfg, delta.max_delta)
    return obs_seen, d, before, after


def fit_dagger(
    dataset: RealDataset,
    delta: DeltaCfg,
    cfg: WarmStartCfg,
    actor: torch.nn.Module,
    fit: Callable[[np.ndarray, np.ndarray], float],
    profile: str = "nominal",
    on_round: Callable[[int], None] | None = None,
    recorded: Targets | None = None,
) -> dict[str, float]:
    """Fit ``actor`` (through ``fit(observations, targets)`` → MSE) to the targets at recorded states, then
    ``cfg.visited_rounds`` times to those and every earlier round's plus the targets at the states it now
    visits (:func:`visited_targets`); ``on_round(r)`` after each fit (0: recorded states only). Returns the
    log: mismatches before and after each search, samples, the last regression MSE. ``recorded``: the
    targets at recorded states where they were searched already for the same joints (:func:`choose_joints`
    where it chose them all)."""
    if recorded is None:
        recorded = recorded_targets(dataset, delta, cfg, profile)
    obs, targets, before, after = recorded
    log = {"recorded_mismatch_before": before, "recorded_mismatch_after": after, "samples": float(len(obs))}
    data = [(obs, targets)]
    log["regression_mse"] = fit(obs, targets)
    for r in range(cfg.visited_rounds + 1):
        if r:
            seen, more, log[f"visited_{r}_mismatch_before"], log[f"visited_{r}_mismatch_after"] = (
                visited_targets(dataset, delta, cfg, actor, profile)
            )
            data.append((seen, more))
            log["regression_mse"] = fit(*(np.concatenate(column) for column in zip(*data, strict=True)))
        if on_round is not None:
            on_round(r)
    return log


def fit_actor(actor: torch.nn.Module, obs: np.ndarray, targets: np.ndarray, cfg: WarmStartCfg) -> float:
    """Regress rsl_rl's actor (normalizer + MLP, deterministic output) onto the targets; returns the MSE."""
    x = TensorDict({"actor": torch.as_tensor(obs, dtype=torch.float32)}, batch_size=[len(obs)])
    y = torch.as_tensor(targets, dtype=torch.float32)
    actor.update_normalization(x)
    normalizer = getattr(actor, "obs_normalizer", None)
    if isinstance(normalizer, EmpiricalNormalization):
        # freeze the input scaling the regression is fitted under: PPO would go on updating it with its
        # rollouts (exploration Δa fed back, drifting states) and so change what the fitted actor computes
        # (measured: the 1 s open-loop error of a warm start went 50 -> 142 mm in 5 PPO iterations)
        normalizer.until = int(normalizer.count)
    optimizer = torch.optim.Adam(actor.mlp.parameters(), lr=cfg.learning_rate)
    generator = torch.Generator().manual_seed(0)
    loss = torch.tensor(0.0)
    for _ in range(cfg.epochs):
        for batch in torch.randperm(len(y), generator=generator).split(256):
            loss = torch.nn.functional.mse_loss(actor(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(actor(x), y))


AUTO_JOINTS = ("auto",)
"""``DeltaCfg.joints`` value that asks :func:`choose_joints` to pick the joints from the data."""


def joint_shares(targets: np.ndarray, joints: tuple[str, ...]) -> dict[str, float]:
    """Each joint's share of the corrections at recorded states: mean Δa*² of the joint over the sum of all
    joints' (a joint the simulator already predicts needs Δa* ≈ 0 and gets a share ≈ 0)."""
    power = np.mean(np.square(targets), axis=0)
    return {j: float(p) for j, p in zip(joints, power / max(float(power.sum()), 1e-12), strict=True)}


def select_joints(shares: dict[str, float], min_share: float) -> tuple[str, ...]:
    """The mirror pairs (a joint and its other side, :func:`asap_core.g1.mirror`; a waist joint alone)
    whose joints' mean share is at least ``min_share`` of an even spread's (1 / number of joints); in action
    order. A threshold, not a coverage: where a gap acts on every joint (a latency, weakness spread over the
    body) the shares are all near the even one and every joint stays; a coverage left out the last 20 %
    there, and single waist joints ranked below pairs by their sum (on random:2001 it dropped the three
    waist joints, the yaw's motor at 50 % torque: 1 s open loop 17.0 mm against 11.5 with every joint,
    none 20.9). By pairs: noise splits a symmetric gap's corrections unevenly between the sides (measured on
    tired_ankles: left ankle roll 6.4 %, right 3.8 %), and a πΔ on one side only leaves fine-tuning a
    lopsided simulator."""
    groups: dict[frozenset[str], list[float]] = {}
    for joint, share in shares.items():
        groups.setdefault(frozenset(j for j in (joint, g1.mirror(joint)) if j in shares), []).append(share)
    even = 1.0 / max(len(shares), 1)
    keep = {j for pair, s in groups.items() if np.mean(s) >= min_share * even for j in pair}
    return tuple(j for j in shares if j in keep)


def choose_joints(
    dataset: RealDataset, delta: DeltaCfg, cfg: WarmStartCfg, profile: str = "nominal"
) -> tuple[DeltaCfg, dict[str, float], Targets | None]:
    """``delta`` with its joints chosen from the data (see ``DeltaCfg.auto_min_share``), every action
    joint's share and, where every joint is chosen, the targets searched for the choice: the fit's own
    first search (same joints, starts and simulator), one all-joint search fewer for :func:`fit_dagger`.
    The targets over all joints say where the simulator misses the recording: on a gap confined to some
    joints, the others' Δa* stay near zero."""
    searched = recorded_targets(dataset, dataclasses.replace(delta, joints=(".*",)), cfg, profile)
    shares = joint_shares(searched[1], dataset.action_joints)
    chosen = select_joints(shares, delta.auto_min_share)
    every_joint = len(chosen) == len(dataset.action_joints)
    return dataclasses.replace(delta, joints=tuple(re.escape(j) for j in chosen)), shares, (
        searched if every_joint else None
    )
