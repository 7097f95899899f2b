"""The delta-action env: short open-loop replays of recorded real trajectories
(arXiv 2502.01143 §III-B).

Each episode starts the simulated G1 exactly at a recorded real state ``s_t`` (base from mocap, all 29
joints), then applies ``a_real_t + Δa_t`` where ``a_real`` is the recorded action and ``Δa = πΔ(s, a_real)``
is what the agent outputs; the reward compares the simulated robot with the recorded next states (Table II).
With ``Δa = 0`` and simulator dynamics equal to the recording's, the replay reproduces the recording.

It is the stage-1 :class:`~asap_training.envs.tracking_env.TrackingEnv` with four hooks changed (episode
starts, initial state, action composition, terminations) and the delta-model observation, so physics,
rewards and the action path (one ``joint_targets``, Δa scaled once) are the ones fine-tuning uses.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np
import torch

from asap_core import g1, quat
from asap_core.joint_map import JointMap
from asap_core.motion import MotionClip
from asap_core.quat import Array
from asap_sim.kinematics import G1Kinematics
from asap_sim.model import build_model
from asap_sim.motor import MotorCommand
from asap_sim.profiles import load_profile
from asap_training.data.dataset import RealDataset
from asap_training.envs.config import (
    CurriculumCfg,
    DomainRandCfg,
    ObservationCfg,
    RewardTermCfg,
    TerminationCfg,
    TrackingEnvCfg,
    asap_rewards,
)
from asap_training.envs.tracking_env import TrackingEnv
from asap_training.motion import MotionLibrary, reference_from_clip


@dataclass(kw_only=True)
class DeltaCfg:
    """What πΔ sees and corrects, and the replay horizon."""

    horizon_s: float = 1.0
    """Open-loop episode length (ASAP: 1.0 s, best closed-loop result in the paper's ablation)."""
    joints: tuple[str, ...] = (".*",)
    """Regexes over the action joints Δa may change (others get Δa = 0), or ``auto``: chosen from the
    data.

    E.g. ``(".*_ankle_.*",)`` for the 4-DoF ankle model ASAP fitted on hardware. ``("auto",)``: chosen by
    :func:`asap_training.delta.warm_start.choose_joints` (the paper's full-body πΔ needs no choice; a
    subset helps where data are scarce, as on ASAP's robot)."""
    auto_min_share: float = 0.5
    """With ``joints=("auto",)``: keep the joints (by mirror pair) whose corrections Δa* at recorded states
    carry at least this fraction of an even spread's share (mean Δa*² over the sum of all joints'):
    :func:`~asap_training.delta.warm_start.select_joints`."""
    action_history: int = 1
    """Earlier recorded actions πΔ sees besides a_t (a_{t-1}, ...): where commands act late (latency), the
    motion during tick t answers those, and a πΔ without them cannot tell. ASAP's πΔ sees none; with the
    MLP, 2 helped a little on one latency gap (1 s open loop 37.4 -> 33.4 mm, still worse than no
    correction). The random gaps' latency reaches 30 ms, past one control period, yet a second earlier
    action did not help the joint-linear πΔ: on a noise-free 30 ms latency (the shipped policy, one-tick
    targets at 128 recorded states) it explains 82.1 % of the targets' variance against 81.6 % with one,
    and on random:2001's twin-core data (21 ms) the 1 s open loop was 17.1 mm against 17.0."""
    max_delta: float = 1.0
    """|Δa| bound (normalized action units; 1.0 = 0.25 rad of target). πΔ is a correction fitted on the
    states and actions the data visited; unbounded, it extrapolates on the unseen ones fine-tuning explores
    (measured: |Δa| up to 28 under the policy's exploration noise, and the robot falls)."""
    obs_scales: dict[str, float] = field(
        default_factory=lambda: {
            "base_ang_vel": 0.25,
            "base_lin_vel": 2.0,
            "dof_vel": 0.05,
            "feet_force": 0.01,
        }
    )

    def mask(self, action_joints: tuple[str, ...]) -> np.ndarray:
        """(A,) 1 where Δa is learned; refuses patterns matching no joint."""
        hit = np.zeros(len(action_joints))
        for pattern in self.joints:
            rows = [i for i, n in enumerate(action_joints) if re.fullmatch(pattern, n)]
            if not rows:
                raise ValueError(f"delta joints pattern {pattern!r} matches none of {action_joints}")
            hit[rows] = 1.0
        return hit


def delta_rewards() -> dict[str, RewardTermCfg]:
    """Table II of the paper (arXiv 2502.01143), except the action-norm weight.

    ASAP's −0.1 (README; −0.2 in the paper) assumes small corrections (|Δa| ≈ 0.05). For a 30 % ankle
    torque gap the exact correction has |Δa| ≈ 1 per ankle joint, and at −0.1 a two-thirds correction
    out-scores it (measured mean episode returns: none 5.11, two-thirds 5.62, exact 5.50); at −0.01 the
    exact one scores best (5.94; half 5.62, none 5.11): the penalty still prefers the smallest of equal fits.
    """
    # Table I's terms (same functions and kernels), reweighted as Table II; no penalty curriculum
    table_ii = {
        "body_pos": 1.0, "vr_3point": 1.0, "feet_pos": 1.0, "body_rot": 0.5, "body_ang_vel": 0.5,
        "body_lin_vel": 0.5, "dof_pos": 0.5, "dof_vel": 0.5, "dof_pos_limits": -10.0, "dof_vel_limits": -5.0,
        "torque_limits": -0.1, "action_rate": -0.01,
    }  # fmt: skip
    table_i = asap_rewards()
    terms = {k: dataclasses.replace(table_i[k], weight=w, penalty=False) for k, w in table_ii.items()}
    return terms | {"action_norm": RewardTermCfg(func="action_norm_exp", weight=-0.01)}


def delta_env_cfg(
    dataset: RealDataset, num_envs: int = 64, profile: str = "nominal", seed: int = 0
) -> TrackingEnvCfg:
    """The simulator side of stage 2: the twin's physics rate, no randomization, no curricula, no
    noise (ASAP's ``NO_domain_rand``; nor its delta observation's ±1 m base-height noise,
    ``noise_scales.base_pos_z = 1.0`` in ASAP's ``obs/delta_a/open_loop.yaml``)."""
    return TrackingEnvCfg(
        num_envs=num_envs,
        motions=(),
        profile=profile,
        physics_dt=0.002,
        decimation=round(dataset.control_dt / 0.002),
        joint_names=dataset.action_joints,
        seed=seed,
        observations=ObservationCfg(noise={}),
        rewards=delta_rewards(),
        terminations=TerminationCfg().falls_only(),
        curriculum=CurriculumCfg(
            penalty_scale=1.0, penalty_degree=0.0, soft_dof_pos=0.95, soft_dof_vel=0.95, soft_torque=0.95
        ),
        domain_rand=DomainRandCfg.off(),
    )


def delta_observation(
    env: TrackingEnv,
    action: torch.Tensor,
    earlier_actions: torch.Tensor,
    last_delta: torch.Tensor,
    scales: dict[str, float],
) -> torch.Tensor:
    """πΔ's input for the current state, the action about to be applied and the ones before it (N, H·A,
    newest first); the one builder used in delta training and in fine-tuning (same terms, same timing)."""
    s = env.state
    quat_w = s.root_quat_w
    return torch.cat(
        [
            last_delta,
            action,
            earlier_actions,
            s.root_ang_vel_b * scales["base_ang_vel"],
            quat.rotate_inv(quat_w, s.root_lin_vel_w) * scales["base_lin_vel"],
            s.root_pos_w[:, 2:3],
            env.q - env.default_q,
            env.dq * scales["dof_vel"],
            s.foot_force * scales["feet_force"],
            quat.rotate_inv(quat_w, env.tensor([0.0, 0.0, -1.0])),
        ],
        dim=1,
    )


def expand_delta(delta: Array, cols: Array, num_actions: int) -> Array:
    """Δa over the learned joints (N, k) → over every action joint (N, A), 0 elsewhere (numpy or torch)."""
    shape = (delta.shape[0], num_actions)
    full = delta.new_zeros(shape) if isinstance(delta, torch.Tensor) else np.zeros(shape)
    full[:, cols] = delta
    return full


def delta_obs_layout(num_actions: int, action_history: int) -> dict[str, slice]:
    """Where each term of :func:`delta_observation` lies (its columns, in its order); per-joint terms are
    in action-joint order (``earlier_actions``: newest first, one block of ``num_actions`` per tick)."""
    widths = {
        "last_delta": num_actions, "action": num_actions, "earlier_actions": action_history * num_actions,
        "base_ang_vel": 3, "base_lin_vel": 3, "base_height": 1, "dof_pos": num_actions,
        "dof_vel": num_actions, "feet_force": 2, "projected_gravity": 3,
    }  # fmt: skip
    ends = np.cumsum(list(widths.values()))
    return {k: slice(int(end - w), int(end)) for (k, w), end in zip(widths.items(), ends, strict=True)}


def delta_obs_dim(num_actions: int, action_history: int) -> int:
    """Width of :func:`delta_observation`."""
    return list(delta_obs_layout(num_actions, action_history).values())[-1].stop


def dataset_library(dataset: RealDataset, kin: G1Kinematics) -> MotionLibrary:
    """Recorded trajectories as reference motions: FK of the recorded states, recorded velocities for the
    root and the joints (finite differences only for the other points' velocities)."""
    joint_map = JointMap.from_names(dataset.action_joints, g1.MOTOR_ORDER)
    motions = []
    for tr in dataset.trajectories:
        clip = MotionClip(
            tr.name, 1.0 / dataset.control_dt, tr.base_pos_w, tr.base_quat_w, g1.MOTOR_ORDER, tr.joint_pos
        )
        ref = reference_from_clip(clip, kin, dataset.action_joints)
        lin, ang = ref.lin_vel_w.copy(), ref.ang_vel_w.copy()
        lin[:, 0], ang[:, 0] = tr.base_lin_vel_w, tr.base_ang_vel_w
        motions.append(
            dataclasses.replace(ref, dof_vel=joint_map.gather(tr.joint_vel), lin_vel_w=lin, ang_vel_w=ang)
        )
    return MotionLibrary(motions)


class DeltaEnv(TrackingEnv):
    """Open-loop replays of a :class:`RealDataset` with the agent's Δa added (module docstring)."""

    COMPILED = ("_refresh", "_check_termination", "_reward", "observations")  # noise-free observations

    def __init__(
        self,
        cfg: TrackingEnvCfg,
        dataset: RealDataset,
        delta: DeltaCfg | None = None,
        starts: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """``starts`` = (trajectory ids, start frames) instead of uniform random ones: env ``i``'s n-th
        episode starts at entry ``(i + n·num_envs) mod len``, whatever the other envs do; with one entry
        per env every reset returns each env to its own recorded state (evaluation, target search)."""
        if tuple(cfg.joint_names) != dataset.action_joints:
            raise ValueError(f"env joints differ from the dataset's action joints {dataset.action_joints}")
        if not np.isclose(cfg.dt, dataset.control_dt):
            raise ValueError(
                f"env control period {cfg.dt} s differs from the dataset's {dataset.control_dt} s"
            )
        self.dataset = dataset
        self.delta_cfg = delta or DeltaCfg()
        self.horizon_steps = max(1, round(self.delta_cfg.horizon_s / cfg.dt))
        self.delta_mask = self.delta_cfg.mask(dataset.action_joints)
        self.delta_cols = np.flatnonzero(self.delta_mask)
        self._starts_np = starts
        kin = G1Kinematics(build_model(load_profile(cfg.profile), timestep=cfg.physics_dt))
        super().__init__(cfg, dataset_library(dataset, kin))

    def _to_device(self) -> None:
        """The recording as tensors of the env's device: rows of every trajectory concatenated."""
        trajectories = self.dataset.trajectories
        fields = ["joint_pos", "joint_vel", "action", "base_pos_w", "base_quat_w", "base_lin_vel_w",
                  "base_ang_vel_w"] + (["joint_torque"] if self.dataset.has_torque else [])  # fmt: skip
        self._rec = {k: self.tensor(np.concatenate([getattr(tr, k) for tr in trajectories])) for k in fields}
        index = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.long, device=self.device)  # noqa: E731
        lengths = np.array([tr.num_steps for tr in trajectories])
        self._lengths = index(lengths)
        self._first_row = index(np.concatenate(([0], np.cumsum(lengths)[:-1])))
        self._starts = None if self._starts_np is None else tuple(index(a) for a in self._starts_np)
        self._resets = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self._delta_index = index(self.delta_cols)  # the device's copy: torch.compile cannot guard numpy

    # --- the four hooks ---------------------------------------------------------------------------------
    def _sample_starts(self, env_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self._starts is not None:
            ids, frames = self._starts
            k = (env_ids + self._resets[env_ids] * self.num_envs) % len(ids)
            self._resets[env_ids] += 1
            return ids[k], frames[k].to(self.dtype) * self.dt
        # every frame with at least one recorded successor is an equally likely start
        valid = self._lengths - 1
        ends = torch.cumsum(valid, 0)
        flat = self._integers(0, int(ends[-1]), env_ids.numel())
        m = torch.searchsorted(ends, flat, right=True)
        frame = flat - (ends - valid)[m]
        return m, frame.to(self.dtype) * self.dt

    def _initial_state(self, motion_ids: torch.Tensor, start_s: torch.Tensor) -> tuple[torch.Tensor, ...]:
        row = self._row(motion_ids, start_s)
        r = self._rec
        return (
            r["base_pos_w"][row],
            r["base_quat_w"][row],
            r["base_lin_vel_w"][row],
            r["base_ang_vel_w"][row],
            r["joint_pos"][row],
            r["joint_vel"][row],
        )

    def _action_dim(self) -> int:
        return self.delta_cols.size  # the agent acts on the learned joints only: no noise elsewhere

    def _compose_action(self, applied: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bounded = applied.clip(-self.delta_cfg.max_delta, self.delta_cfg.max_delta)
        full = expand_delta(bounded, self._delta_index, len(self.dataset.action_joints))
        return self.recorded_action(), full

    def _check_termination(self) -> None:
        frame = torch.round(self.motion_time_s / self.dt).long()
        self.time_out = (self.episode_step >= self.horizon_steps) | (
            frame >= self._lengths[self.motion_ids] - 1
        )
        self.terminated = torch.zeros_like(self.time_out)

    # --- what πΔ sees -------------------------------------------------------------------------------------
    def _row(self, motion_ids: torch.Tensor, time_s: torch.Tensor) -> torch.Tensor:
        return self._first_row[motion_ids] + torch.round(time_s / self.dt).long()

    def recorded_action(self) -> torch.Tensor:
        """a_real at the current frame of every env: what the real policy applied from this state."""
        return self._rec["action"][self.recorded_row()]

    def recorded_row(self) -> torch.Tensor:
        """The dataset row (trajectories concatenated) of every env's current frame."""
        return self._row(self.motion_ids, self.motion_time_s)

    def earlier_recorded_actions(self) -> torch.Tensor:
        """a_real at the ``action_history`` frames before the current one, newest first (N, H·A); before a
        trajectory's first frame, its first action (an observation convention, the same in fine-tuning's
        :class:`~asap_training.envs.delta_model.FrozenDelta`)."""
        earlier = [self._rec["action"][row] for row, _ in self._earlier_rows(self.delta_cfg.action_history)]
        return torch.cat(earlier, dim=1) if earlier else self.recorded_action()[:, :0]

    def _earlier_rows(self, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """For the ``count`` frames before every env's current one, newest first: (dataset row, clamped to
        the trajectory's first, (N,); whether the frame lies before the trajectory's start, (N, 1))."""
        row, first = self.recorded_row(), self._first_row[self.motion_ids]
        return [(torch.maximum(row - k, first), (row - k < first).unsqueeze(1)) for k in range(1, count + 1)]

    def _commands_in_flight(self) -> tuple[MotorCommand, ...]:
        """The recorded commands of the periods before each start that the actuation latency still holds
        (before a trajectory's first frame: action 0, the policy's default pose that the node's HOLD
        commands before POLICY with the policy's gains, its default ``hold_gains``; a segment that ingest cut
        after a lost record had an unknown command in flight, and its first frames start from this one):
        on the robot they were in flight when the start state was read.
        Without them a replay in the gap's own simulator starts with its motors off for the latency (21 ms
        on a 20 ms period: the whole first tick limp) and misses the recording it should reproduce
        (measured, random:2001 without sensor noise, 1 s open loop: 20.5 mm with the motors off, 0.6 with
        the commands in flight)."""
        periods = -(-self.latency_steps // self.cfg.decimation)
        rows = self._earlier_rows(periods)
        actions = [self._rec["action"][row].masked_fill(before, 0.0) for row, before in rows]
        return tuple(self.motor_command(a, None) for a in reversed(actions))

    def observations(self) -> dict[str, torch.Tensor]:
        """``actor``: :func:`delta_observation`; ``critic``: the same plus the privileged terms."""
        last_delta = expand_delta(self.action, self._delta_index, len(self.dataset.action_joints))
        earlier, scales = self.earlier_recorded_actions(), self.delta_cfg.obs_scales
        actor = delta_observation(self, self.recorded_action(), earlier, last_delta, scales)
        privileged = [
            self.critic_funcs[k](self) * scale for k, scale in self.cfg.observations.critic_terms.items()
        ]
        return {"actor": actor, "critic": torch.cat([actor, *privileged], dim=1).to(self.dtype)}
