"""Configuration of the tracking env: which terms, their weights and parameters, DR, curricula.

Everything the MDP does is selected here by name (terms live in :mod:`asap_training.envs.mdp`); new
behaviour is a new term function plus a config line, never an edit of the env loop. Defaults are ASAP's
stage-1 settings (arXiv 2502.01143 §II and ASAP's ``humanoidverse/config``) unless a comment says otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from asap_core import g1


@dataclass(kw_only=True)
class RewardTermCfg:
    """One reward term: ``weight * dt * func(env, **params)``."""

    func: str
    """Name of a function in :mod:`asap_training.envs.mdp.rewards`."""
    weight: float
    params: dict[str, Any] = field(default_factory=dict)
    penalty: bool = False
    """Scaled by the penalty curriculum (ASAP's ``reward_penalty_reward_names``)."""


def asap_rewards() -> dict[str, RewardTermCfg]:
    """Table I of the paper (= ``reward_motion_tracking_dm_2real.yaml``)."""
    r = RewardTermCfg
    return {
        "body_pos": r(
            func="body_pos_upper_lower_exp",
            weight=1.0,
            params={"sigma_lower": 0.1, "sigma_upper": 0.03, "w_lower": 0.5, "w_upper": 1.0},
        ),
        "vr_3point": r(
            func="points_pos_exp",
            weight=1.6,
            params={"points": ("left_hand_link", "right_hand_link", "head_link"), "sigma": 0.03},
        ),
        "feet_pos": r(
            func="points_pos_exp",
            weight=2.1,
            params={"points": ("left_ankle_roll_link", "right_ankle_roll_link"), "sigma": 0.03},
        ),
        "body_rot": r(func="body_rot_exp", weight=0.5, params={"sigma": 1.0}),
        "body_ang_vel": r(func="body_ang_vel_exp", weight=0.5, params={"sigma": 1.0}),
        "body_lin_vel": r(func="body_lin_vel_exp", weight=0.5, params={"sigma": 1.0}),
        "dof_pos": r(func="dof_pos_exp", weight=0.75, params={"sigma": 1.0}),
        "dof_vel": r(func="dof_vel_exp", weight=0.5, params={"sigma": 1.0}),
        "torques": r(func="torques_l2", weight=-1e-6, penalty=True),
        "action_rate": r(func="action_rate_l2", weight=-0.5, penalty=True),
        "feet_orientation": r(func="feet_gravity_xy_norm", weight=-2.0, penalty=True),
        "feet_heading": r(func="feet_heading_error", weight=-0.1, penalty=True),
        "slippage": r(func="feet_slip_speed", weight=-1.0, penalty=True, params={"force_threshold": 1.0}),
        "dof_pos_limits": r(func="dof_pos_limits", weight=-10.0, penalty=True),
        "dof_vel_limits": r(func="dof_vel_limits", weight=-5.0, penalty=True),
        "torque_limits": r(func="torque_limits", weight=-5.0, penalty=True),
        "termination": r(func="terminated", weight=-200.0),
    }


@dataclass(kw_only=True)
class ObservationCfg:
    """Actor: ASAP's deploy spec from ``asap_core.observation`` (shared with the policy node); critic:
    the actor's values without noise plus privileged terms from :mod:`asap_training.envs.mdp.observations`."""

    history: int = 4
    noise: dict[str, float] = field(
        default_factory=lambda: {
            "base_ang_vel": 0.3,
            "dof_pos": 0.01,
            "dof_vel": 1.0,
            "projected_gravity": 0.2,
        }
    )
    """Uniform noise half-width per actor term, before scaling (ASAP's LARGEnoise config)."""
    critic_terms: dict[str, float] = field(
        default_factory=lambda: {
            "base_lin_vel_b": 2.0,
            "base_height": 1.0,
            "dif_local_body_pos": 1.0,
            "local_ref_body_pos": 1.0,
            "feet_contact": 1.0,
        }
    )
    """Privileged critic term name → scale."""


@dataclass(kw_only=True)
class ActionCfg:
    """Joint-position action: ``q* = q_default + scale * (a + Δa)`` in the policy joints."""

    scale: float = 0.25
    clip: float = 100.0
    gain_set: str = "asap"
    """``asap_core.g1`` gain set for kp/kd (wrists, outside the policy, hold 0 with its wrist gains)."""
    default_pose: str = "asap"
    delta_action: str | None = None
    """Stage 2: ``"module:factory"`` returning a :class:`asap_training.envs.actions.DeltaActionSource`
    (e.g. a frozen πΔ); its Δa, in the same normalized units as ``a``, is added before scaling (one
    convention, scaled once). ``None``: no correction."""
    delta_action_args: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class TerminationCfg:
    """Gravity tilt and ASAP's motion-far termination with its curriculum."""

    gravity_xy: float = 0.8
    """Terminate when |g_x| or |g_y| (projected gravity) exceeds this."""
    far_threshold: float = 1.5
    """m: terminate when any tracked point is farther than this from its reference."""
    far_curriculum: bool = True
    far_range: tuple[float, float] = (0.3, 2.0)
    far_degree: float = 5e-5
    """Relative change of the threshold per finished episode. ASAP: 2.5e-5 with 4096 envs and ~100k
    iterations; a CPU run sees ~30k episodes, so the default is scaled up to reach ~0.5 m within one run."""

    def falls_only(self) -> TerminationCfg:
        """These terminations without the motion-far one: an episode ends when the robot falls or the
        motion does, as on the twin and the robot (evaluation, fine-tuning, open-loop replays)."""
        return replace(self, far_threshold=1e9, far_curriculum=False)


@dataclass(kw_only=True)
class CurriculumCfg:
    """Curricula driven by the average episode length (policy steps, EMA over episodes)."""

    penalty_scale: float = 0.1
    """Initial multiplier of penalty terms (ASAP: 0.1 → 1)."""
    penalty_degree: float = 1e-4
    """Relative change per finished episode (ASAP 1e-5 at GPU scale; scaled up for CPU-sized runs)."""
    length_low: float = 40.0
    """Below this average length the curricula ease (ASAP's thresholds for clips ≥ 92 frames)."""
    length_high: float = 42.0
    ema: float = 0.01
    """EMA factor per finished episode (ASAP averages over ~10k episodes; a CPU run has far fewer)."""
    soft_dof_pos: float = 0.9
    soft_dof_vel: float = 0.9
    soft_torque: float = 0.825


@dataclass(kw_only=True)
class DomainRandCfg:
    """Table VI of the paper; ``None`` disables an item."""

    friction_range: tuple[float, float] | None = (0.2, 1.1)
    friction_variants: int = 8
    """Model variants the friction range is sampled into (envs pick one at each reset)."""
    kp_scale_range: tuple[float, float] | None = (0.925, 1.05)
    delay_ms_range: tuple[float, float] | None = (20.0, 40.0)
    """Control delay, applied as whole policy steps of action lag."""
    push_interval_s: float | None = 10.0
    push_vel_xy: float = 0.5
    init_noise: float = 0.0
    """ASAP's ``noise_to_initial_level``: 0 in pre-training, 1 when fine-tuning."""

    @classmethod
    def off(cls) -> DomainRandCfg:
        """No randomization: every item disabled (evaluation, ``asap-train --no-dr``)."""
        return cls(friction_range=None, kp_scale_range=None, delay_ms_range=None, push_interval_s=None)


@dataclass(kw_only=True)
class TrackingEnvCfg:
    """The whole tracking MDP."""

    num_envs: int = 64
    """Parallel envs (per process under torchrun)."""
    motions: tuple[str, ...] = ("arm_swing",)
    """Shipped clip names (arm_swing, squat, side_step, kick) or .pkl/.npz/.csv paths.

    See :func:`asap_training.motion.load_clips`. Clips are grounded (lowest foot on the floor) before use:
    ASAP's retargeted clips float ~10 cm."""
    profile: str = "nominal"
    """asap_sim dynamics profile the physics is built with."""
    physics_dt: float = 0.005
    decimation: int = 4
    joint_names: tuple[str, ...] = g1.names("asap23")
    simulator: str = "asap_training.sim.mujoco_cpu:MujocoCpuSimulator"
    """Backend class (``module:Class``) implementing :class:`asap_training.sim.base.Simulator`."""
    simulator_args: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of the backend (e.g. a learned residual model's path)."""
    device: str = "cpu"
    """Where physics state and the MDP live: ``cpu`` (the MuJoCo CPU backend) or ``cuda[:N]`` (MuJoCo Warp);
    the networks follow the runner's ``--device``."""
    compile_mdp: bool | None = None
    """``torch.compile`` the per-step MDP (robot points and reference, terminations, rewards, observations):
    on a GPU its ~900 small torch ops per step, each a kernel launch from Python that costs more than the
    kernel, become a few fused kernels. None: on for a ``cuda`` device; on the CPU the first steps' compile
    (~25 s) buys nothing, physics dominates there."""
    threads: int = 0
    """CPU threads stepping physics (0: the process's ``--threads``, else every core). Trajectories do not
    depend on it."""
    seed: int = 0
    """Random seed (the envs'; under torchrun each process adds its rank)."""
    random_start: bool = True
    """Reference-state init at a uniform random motion time (ASAP's RSI); False: start every episode at 0."""
    observations: ObservationCfg = field(default_factory=ObservationCfg)
    actions: ActionCfg = field(default_factory=ActionCfg)
    rewards: dict[str, RewardTermCfg] = field(default_factory=asap_rewards)
    terminations: TerminationCfg = field(default_factory=TerminationCfg)
    curriculum: CurriculumCfg = field(default_factory=CurriculumCfg)
    domain_rand: DomainRandCfg = field(default_factory=DomainRandCfg)

    @property
    def dt(self) -> float:
        """Policy step (s)."""
        return self.physics_dt * self.decimation

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (YAML/JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrackingEnvCfg:
        """Inverse of :meth:`to_dict` (unknown keys raise TypeError naming them)."""
        data = dict(data)
        nested = {
            "observations": ObservationCfg,
            "actions": ActionCfg,
            "terminations": TerminationCfg,
            "curriculum": CurriculumCfg,
            "domain_rand": DomainRandCfg,
        }
        for key, typ in nested.items():
            if key in data:
                data[key] = typ(**_tuples(data[key]))
        if "rewards" in data:
            data["rewards"] = {k: RewardTermCfg(**_tuples(v)) for k, v in data["rewards"].items()}
        return cls(**_tuples(data))


def _tuples(d: dict[str, Any]) -> dict[str, Any]:
    """YAML gives lists where the dataclasses hold tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
