"""ASAP stage-1 motion tracking over a batch of simulated G1s, batched in torch on the simulator's device.

One policy step: action (→ optional Δa) → PD targets → ``decimation`` physics steps → reference at the new
motion time → rewards → terminations → resets (reference-state init) → observations. Every quantity that
enters an observation, reward or termination is a named term selected by :class:`TrackingEnvCfg`. All of it
runs on the simulator's device (``TrackingEnvCfg.device``) in its dtype: on a GPU backend no step copies
anything between host and device; on the CPU backend the tensors share memory with MuJoCo's arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType

import mujoco
import numpy as np
import torch

from asap_core import g1, quat
from asap_core.g1 import EXTENDED_POINTS, FEET, RIGID_BODIES
from asap_core.joint_map import JointMap
from asap_core.observation import ObservationBuilder, ObsInputs, asap_actor_spec, compute_terms
from asap_sim.kinematics import G1Kinematics
from asap_sim.model import build_model
from asap_sim.motor import MotorCommand, MotorParams, latency_steps
from asap_sim.profiles import load_profile
from asap_training.envs import actions as action_path
from asap_training.envs.config import TrackingEnvCfg
from asap_training.envs.mdp import observations as critic_terms
from asap_training.envs.mdp import rewards as reward_terms
from asap_training.motion import MotionLibrary, MotionState, build_library
from asap_training.sim.base import SimState


def _terms_of(module: ModuleType) -> dict[str, Callable]:
    """The public term functions a module defines."""
    return {
        n: f
        for n, f in vars(module).items()
        if callable(f) and not n.startswith("_") and getattr(f, "__module__", "") == module.__name__
    }


def _resolve_terms(module: ModuleType, names: dict[str, str]) -> dict[str, Callable]:
    """Config key → term function, refusing unknown names with the list of known ones."""
    known = _terms_of(module)
    unknown = {key: func for key, func in names.items() if func not in known}
    if unknown:
        raise ValueError(f"unknown terms {unknown} in {module.__name__}; known: {sorted(known)}")
    return {key: known[func] for key, func in names.items()}


class TrackingEnv:
    """N G1s tracking reference motions (see the module docstring)."""

    COMPILED: tuple[str, ...] = ("_refresh", "_check_termination", "_reward", "_observe")
    """The fixed-shape, every-env steps of the MDP that ``TrackingEnvCfg.compile_mdp`` compiles (resets,
    whose size varies from step to step, and random draws stay eager)."""

    def __init__(self, cfg: TrackingEnvCfg, motions: MotionLibrary | None = None) -> None:
        """Build physics (asap_sim), motions, joint maps, term tables and buffers; reset every env."""
        self.cfg = cfg
        self.num_envs = n = cfg.num_envs
        self.dt = cfg.dt
        self.device = torch.device(cfg.device)
        self.profile = load_profile(cfg.profile)
        models = self._build_models()
        self.latency_steps = latency_steps(self.profile.actuation_latency_ms, cfg.physics_dt)
        """The profile's actuation latency in physics steps."""
        self.kin = G1Kinematics(models[0])
        library = motions or build_library(cfg.motions, self.kin, cfg.joint_names)
        if library.joint_names != tuple(cfg.joint_names):
            raise ValueError("the motion library's joints differ from the env's policy joints")
        self.sim = action_path.resolve(cfg.simulator)(
            models,
            n,
            self._motor_params(torch.ones(n, g1.NUM_MOTORS, device=self.device, dtype=torch.float64)),
            self.latency_steps,
            threads=cfg.threads,
            device=cfg.device,
            **cfg.simulator_args,
        )
        self.dtype = self.sim.state.root_pos_w.dtype
        self.rng = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.motions = library.to(self.device, self.dtype)
        self.num_actions = self._action_dim()
        self._setup_joints()
        self._setup_terms()
        self.max_delay = (
            self._delay_steps(cfg.domain_rand.delay_ms_range[1]) if cfg.domain_rand.delay_ms_range else 0
        )
        self._queue = self._zeros(n, self.max_delay + 1, self.num_actions)
        self._env_index = torch.arange(n, device=self.device)
        self.delay = torch.zeros(n, dtype=torch.long, device=self.device)
        self.action = self._zeros(n, self.num_actions)
        self.prev_action = self._zeros(n, self.num_actions)
        self.motion_ids = torch.zeros(n, dtype=torch.long, device=self.device)
        self.motion_start_s = self._zeros(n)
        self.episode_step = torch.zeros(n, dtype=torch.long, device=self.device)
        self.terminated = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.time_out = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.push_timer_s = self._zeros(n)
        cur = cfg.curriculum
        # the curricula's values as the compiled MDP reads them: 0-dim tensors, updated in place (a float
        # would be a constant of the compiled code, recompiled at each change until torch.compile gives up)
        self._penalty_scale_t, self._far_threshold_t = self._zeros(), self._zeros()
        self.penalty_scale = cur.penalty_scale
        self.far_threshold = cfg.terminations.far_threshold
        self.avg_episode_length = 0.0
        self.episode_sums = {k: self._zeros(n) for k in self.reward_funcs}
        self.extras: dict = {}
        self._obs: dict[str, torch.Tensor] | None = None  # this state's observations, once built
        self._to_device()
        compile_mdp = cfg.compile_mdp if cfg.compile_mdp is not None else self.device.type == "cuda"
        if compile_mdp:
            for name in self.COMPILED:
                setattr(self, name, torch.compile(getattr(self, name)))
        self.reset(self._env_index)

    def _to_device(self) -> None:
        """Hook for subclasses: move their own data to :attr:`device` / :attr:`dtype` before the first
        reset."""

    # --- tensors on the env's device ----------------------------------------------------------------------
    def _zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(shape, device=self.device, dtype=self.dtype)

    def tensor(self, value: object) -> torch.Tensor:
        """``value`` (array, list, number) as a float tensor of the env's device and dtype."""
        return torch.as_tensor(value, device=self.device, dtype=self.dtype)

    def _uniform(self, low: float | torch.Tensor, high: float | torch.Tensor,
                 shape: tuple[int, ...]) -> torch.Tensor:
        u = torch.rand(shape, generator=self.rng, device=self.device, dtype=self.dtype)
        return low + (high - low) * u

    def _normal(self, std: float, shape: tuple[int, ...]) -> torch.Tensor:
        return std * torch.randn(shape, generator=self.rng, device=self.device, dtype=self.dtype)

    def _integers(self, low: int, high: int, count: int) -> torch.Tensor:
        """Uniform integers in [low, high)."""
        return torch.randint(low, high, (count,), generator=self.rng, device=self.device)

    # --- construction --------------------------------------------------------------------------------
    def _build_models(self) -> list[mujoco.MjModel]:
        dr = self.cfg.domain_rand
        if dr.friction_range is None:
            return [build_model(self.profile, timestep=self.cfg.physics_dt)]
        frictions = np.linspace(*dr.friction_range, dr.friction_variants)
        return [
            build_model(
                dataclasses.replace(self.profile, ground_friction=float(f)), timestep=self.cfg.physics_dt
            )
            for f in frictions
        ]

    def _motor_params(self, kp_scale: torch.Tensor) -> MotorParams:
        p = MotorParams.from_profile(self.profile)
        as_tensor = lambda a: torch.tensor(a, device=kp_scale.device, dtype=kp_scale.dtype)  # noqa: E731
        return MotorParams(kp_scale=as_tensor(p.kp_scale) * kp_scale, kd_scale=as_tensor(p.kd_scale))

    def _setup_joints(self) -> None:
        cfg, names, t = self.cfg, self.cfg.joint_names, self.tensor
        self.joint_map = JointMap.from_names(names, g1.MOTOR_ORDER)
        self.default_q = t(g1.default_pose(names, cfg.actions.default_pose))
        self.default_q_motor = t(g1.default_pose(g1.MOTOR_ORDER, cfg.actions.default_pose))
        self.kp_motor, self.kd_motor = (t(k) for k in g1.gains(g1.MOTOR_ORDER, cfg.actions.gain_set))
        lo, hi = g1.joint_array("lower", names), g1.joint_array("upper", names)
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        cur = cfg.curriculum
        self.soft_pos_limits = (t(mid - cur.soft_dof_pos * half), t(mid + cur.soft_dof_pos * half))
        self.soft_vel_limit = t(cur.soft_dof_vel * g1.joint_array("velocity_limit", names))
        self.soft_torque_limit = t(cur.soft_torque * g1.joint_array("effort_limit", names))
        self.feet = torch.tensor([RIGID_BODIES.index(f) for f in FEET], device=self.device)
        self._ext_parent = torch.tensor([RIGID_BODIES.index(p) for p, _ in EXTENDED_POINTS.values()],
                                        device=self.device)
        self._ext_offset = t([o for _, o in EXTENDED_POINTS.values()])
        self._down = t([0.0, 0.0, -1.0])

    def _setup_terms(self) -> None:
        cfg = self.cfg
        self.reward_funcs = _resolve_terms(reward_terms, {k: r.func for k, r in cfg.rewards.items()})
        self.critic_funcs = _resolve_terms(critic_terms, {k: k for k in cfg.observations.critic_terms})
        self.actor_spec = asap_actor_spec(len(cfg.joint_names), cfg.observations.history)
        self._actor, self._critic_hist = (
            ObservationBuilder(spec=self.actor_spec, batch_shape=(self.num_envs,), zeros=self._zeros_of)
            for _ in range(2)
        )
        unknown = set(cfg.observations.noise) - {t.name for t in self.actor_spec.terms}
        if unknown:
            raise ValueError(f"noise for unknown actor terms {sorted(unknown)}")
        self.delta_source = None
        if cfg.actions.delta_action:
            factory = action_path.resolve(cfg.actions.delta_action)
            self.delta_source = factory(self, **cfg.actions.delta_action_args)

    def _zeros_of(self, shape: tuple[int, ...]) -> torch.Tensor:
        return self._zeros(*shape)

    def _delay_steps(self, ms: float) -> int:
        return round(ms / 1000.0 / self.dt)

    # --- state views the terms read --------------------------------------------------------------------
    @property
    def state(self) -> SimState:
        """The simulator's batched state."""
        return self.sim.state

    @property
    def motion_time_s(self) -> torch.Tensor:
        """Motion time of the current state."""
        return self.motion_start_s + self.episode_step.to(self.dtype) * self.dt

    def _refresh(self) -> None:
        """Policy-order joint state, robot points and the reference at the current motion time."""
        s = self.sim.state
        self.q = self.joint_map.gather(s.joint_pos)
        self.dq = self.joint_map.gather(s.joint_vel)
        self.tau = self.joint_map.gather(s.joint_torque)
        parent_q = s.body_quat_w[:, self._ext_parent]
        arm = quat.rotate(parent_q, self._ext_offset)
        ang = s.body_ang_vel_w[:, self._ext_parent]
        self.points = MotionState(
            dof_pos=self.q,
            dof_vel=self.dq,
            pos_w=torch.cat((s.body_pos_w, s.body_pos_w[:, self._ext_parent] + arm), dim=1),
            quat_w=torch.cat((s.body_quat_w, parent_q), dim=1),
            lin_vel_w=torch.cat(
                (s.body_lin_vel_w, s.body_lin_vel_w[:, self._ext_parent] + quat.cross(ang, arm)), dim=1
            ),
            ang_vel_w=torch.cat((s.body_ang_vel_w, ang), dim=1),
        )
        self.ref = self.motions.sample(self.motion_ids, self.motion_time_s)
        self.phase = self.motions.phase(self.motion_ids, self.motion_time_s)

    # --- the MDP ----------------------------------------------------------------------------------------
    def step(self, action: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, dict]:
        """Advance one policy step; returns (observations, reward, done, extras)."""
        self.prev_action = self.action
        self._obs = None
        action = torch.as_tensor(action, device=self.device, dtype=self.dtype)
        self.action = action.clip(-self.cfg.actions.clip, self.cfg.actions.clip)
        self._queue = torch.roll(self._queue, 1, dims=1)
        self._queue[:, 0] = self.action
        applied = self._queue[self._env_index, self.delay]
        self.sim.step(self.motor_command(*self._compose_action(applied)), self.cfg.decimation)
        self.episode_step += 1
        self._push()
        self._refresh()
        self._check_termination()
        reward = self._reward()
        done = self.terminated | self.time_out
        self.extras = {"time_outs": self.time_out.clone(), "log": self._log()}
        self.reset(done.nonzero().squeeze(-1))
        return self.observations(), reward, done, self.extras

    def motor_command(self, action: torch.Tensor, delta: torch.Tensor | None) -> MotorCommand:
        """The drives' command for the action (and Δa) of every env: the one action path."""
        q_target = action_path.joint_targets(action, delta, self.default_q, self.cfg.actions.scale)
        return MotorCommand.position(
            self.joint_map.apply(q_target, fill=self.default_q_motor), self.kp_motor, self.kd_motor
        )

    def _action_dim(self) -> int:
        """Width of the agent's action: one per policy joint."""
        return len(self.cfg.joint_names)

    def _compose_action(self, applied: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(a, Δa) of this step from the (delayed) policy output: a = the policy's action, Δa from the
        configured frozen delta model (stage-2 fine-tuning) or None."""
        return applied, (self.delta_source(self, applied) if self.delta_source else None)

    def _push(self) -> None:
        dr = self.cfg.domain_rand
        if dr.push_interval_s is None:
            return
        self.push_timer_s += self.dt
        due = (self.push_timer_s >= dr.push_interval_s).nonzero().squeeze(-1)
        if due.numel():
            kick = self._zeros(due.numel(), 3)
            kick[:, :2] = self._uniform(-dr.push_vel_xy, dr.push_vel_xy, (due.numel(), 2))
            self.sim.push(due, kick)
            self.push_timer_s[due] = 0.0

    def _check_termination(self) -> None:
        t = self.cfg.terminations
        g = quat.rotate_inv(self.state.root_quat_w, self._down)
        tilt = (g[:, :2].abs() > t.gravity_xy).any(dim=1)
        dist = torch.linalg.norm(self.points.pos_w - self.ref.pos_w, dim=-1)
        far = (dist > self._far_threshold_t).any(dim=1)
        self.time_out = self.motion_time_s >= self.motions.duration_s[self.motion_ids] - 1e-9
        self.terminated = (tilt | far) & ~self.time_out

    def _reward(self) -> torch.Tensor:
        total = self._zeros(self.num_envs)
        for key, func in self.reward_funcs.items():
            term = self.cfg.rewards[key]
            value = func(self, **term.params) * term.weight * self.dt
            if term.penalty:
                value = value * self._penalty_scale_t
            self.episode_sums[key] += value
            total += value
        return total

    @property
    def penalty_scale(self) -> float:
        """The penalty curriculum's scale of the penalty rewards (ASAP's)."""
        return self._penalty_scale

    @penalty_scale.setter
    def penalty_scale(self, value: float) -> None:
        self._penalty_scale = float(value)
        self._penalty_scale_t.fill_(self._penalty_scale)

    @property
    def far_threshold(self) -> float:
        """The termination curriculum's distance (m) from the reference past which an episode ends."""
        return self._far_threshold

    @far_threshold.setter
    def far_threshold(self, value: float) -> None:
        self._far_threshold = float(value)
        self._far_threshold_t.fill_(self._far_threshold)

    def curriculum_state(self) -> dict[str, float]:
        """What a checkpoint must carry for a resumed run to continue the curricula."""
        return {
            "penalty_scale": self.penalty_scale,
            "far_threshold": self.far_threshold,
            "avg_episode_length": self.avg_episode_length,
        }

    def set_curriculum_state(self, state: dict[str, float]) -> None:
        """Restore :meth:`curriculum_state`."""
        self.penalty_scale = float(state["penalty_scale"])
        self.far_threshold = float(state["far_threshold"])
        self.avg_episode_length = float(state["avg_episode_length"])

    def _log(self) -> dict[str, float]:
        return {
            "Curriculum/penalty_scale": self.penalty_scale,
            "Curriculum/far_threshold": self.far_threshold,
            "Curriculum/avg_episode_length": self.avg_episode_length,
        }

    def reset(self, env_ids: torch.Tensor) -> None:
        """Reference-state init: random motion and start time, state copied from the reference. A reset env
        starts as a new one: observation history and action queue emptied, the actuation latency emptied
        or holding :meth:`_commands_in_flight`. (Called alone, not by :meth:`step`, on some envs: the next
        :meth:`observations` advances the others too.)"""
        env_ids = torch.as_tensor(env_ids, device=self.device)
        if env_ids.numel() == 0:
            return
        self._update_curricula(env_ids)
        self._log_episode_sums(env_ids)
        m, start = self._sample_starts(env_ids)
        self.motion_ids[env_ids], self.motion_start_s[env_ids] = m, start
        self.episode_step[env_ids] = 0
        self._randomize(env_ids)
        self.sim.reset(env_ids, *self._initial_state(m, start), in_flight=self._commands_in_flight())
        mask = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        mask[env_ids] = True
        self._obs = None
        self._actor.reset(mask)
        self._critic_hist.reset(mask)
        self.action[env_ids] = 0.0
        self.prev_action[env_ids] = 0.0
        self._queue[env_ids] = 0.0
        self.push_timer_s[env_ids] = 0.0
        self._refresh()

    def _commands_in_flight(self) -> tuple[MotorCommand, ...]:
        """Commands (every env's, oldest first, one per period) that a reset env's actuation latency holds
        at its start; none: its motors are off until its first command arrives, as a new episode's are."""
        return ()

    def _sample_starts(self, env_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(motion ids, start times) of the new episodes of ``env_ids``."""
        count = env_ids.numel()
        m = self._integers(0, self.motions.num_motions, count)
        duration = self.motions.duration_s[m]
        start = self._uniform(0.0, duration, (count,)) if self.cfg.random_start else self._zeros(count)
        return m, start

    def _initial_state(self, motion_ids: torch.Tensor, start_s: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Reference-state init (``Simulator.reset`` arguments), with ASAP's initial-noise level."""
        ref = self.motions.sample(motion_ids, start_s)
        root_pos, root_quat = ref.pos_w[:, 0].clone(), ref.quat_w[:, 0].clone()
        dof, dof_vel = ref.dof_pos.clone(), ref.dof_vel.clone()
        level = self.cfg.domain_rand.init_noise
        if level:
            root_pos += self._normal(0.05 * level, root_pos.shape)
            dof += self._normal(0.1 * level, dof.shape)
            dof_vel += self._normal(0.15 * level, dof_vel.shape)
        return (
            root_pos,
            root_quat,
            ref.lin_vel_w[:, 0],
            ref.ang_vel_w[:, 0],
            self.joint_map.apply(dof, fill=self.default_q_motor),
            self.joint_map.apply(dof_vel, fill=0.0),
        )

    def _randomize(self, env_ids: torch.Tensor) -> None:
        dr, count = self.cfg.domain_rand, env_ids.numel()
        if dr.friction_range is not None:
            self.sim.set_model_variant(env_ids, self._integers(0, dr.friction_variants, count))
        if dr.kp_scale_range is not None:
            params = self.sim.motor_params
            kp = params.kp_scale.expand(self.num_envs, g1.NUM_MOTORS).clone()
            kp[env_ids] = self._uniform(*dr.kp_scale_range, (count, 1)).to(kp) * kp.new_tensor(
                self.profile.kp_scale
            )
            self.sim.motor_params = dataclasses.replace(params, kp_scale=kp)
        if dr.delay_ms_range is not None:
            lo, hi = (self._delay_steps(v) for v in dr.delay_ms_range)
            self.delay[env_ids] = self._integers(lo, hi + 1, count)

    def _update_curricula(self, env_ids: torch.Tensor) -> None:
        cur, t = self.cfg.curriculum, self.cfg.terminations
        finished = self.episode_step[env_ids]
        finished = finished[finished > 0].tolist()
        for length in finished:
            self.avg_episode_length += (
                cur.ema * (length - self.avg_episode_length) if self.avg_episode_length else float(length)
            )
        k = len(finished)
        if k == 0:
            return
        if self.avg_episode_length > cur.length_high:
            self.penalty_scale = min(1.0, self.penalty_scale * (1 + cur.penalty_degree) ** k)
            if t.far_curriculum:
                self.far_threshold = max(t.far_range[0], self.far_threshold * (1 - t.far_degree) ** k)
        elif self.avg_episode_length < cur.length_low:
            self.penalty_scale = max(0.0, self.penalty_scale * (1 - cur.penalty_degree) ** k)
            if t.far_curriculum:
                self.far_threshold = min(t.far_range[1], self.far_threshold * (1 + t.far_degree) ** k)

    def _log_episode_sums(self, env_ids: torch.Tensor) -> None:
        """Mean over the finished episodes of each term's episode return (weighted, × dt)."""
        done = env_ids[self.episode_step[env_ids] > 0]
        if done.numel():
            log = self.extras.setdefault("log", {})
            sums = torch.stack(list(self.episode_sums.values()))  # (terms, envs)
            means = sums[:, done].mean(dim=1).tolist()  # one device->host copy for every term, not one each
            log.update({f"Episode_Reward/{key}": m for key, m in zip(self.episode_sums, means, strict=True)})
        for buf in self.episode_sums.values():
            buf[env_ids] = 0.0

    # --- observations -----------------------------------------------------------------------------------
    def obs_inputs(self) -> ObsInputs:
        """The deploy observation inputs for the current state (what the policy node would see)."""
        s = self.state
        return ObsInputs(
            q=self.q,
            dq=self.dq,
            quat_wxyz=s.root_quat_w,
            gyro_b=s.root_ang_vel_b,
            last_action=self.action,
            phase=self.phase,
            default_q=self.default_q,
        )

    def observations(self) -> dict[str, torch.Tensor]:
        """``actor`` (ASAP 380-dim, noisy) and ``critic`` (noise-free actor terms + privileged terms) of the
        current state. Built once per state, since building advances the observation history: asking again
        (e.g. a rollout's first observation after :meth:`step` began a new episode) returns the same."""
        if self._obs is None:
            dims = {t.name: t.dim for t in self.actor_spec.terms}
            noise = {name: self._uniform(-width, width, (self.num_envs, dims[name]))
                     for name, width in self.cfg.observations.noise.items()}
            self._obs = self._observe(noise)
        return self._obs

    def _observe(self, noise: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """:meth:`observations` given its noise, drawn before: torch.compile cannot trace the env's seeded
        generator, so the draw stays outside the compiled function."""
        values = compute_terms(self.actor_spec, self.obs_inputs())
        noisy = {name: value + noise[name] if name in noise else value for name, value in values.items()}
        actor = self._actor.build_from_values(noisy)
        privileged = [
            self.critic_funcs[k](self) * scale for k, scale in self.cfg.observations.critic_terms.items()
        ]
        critic = torch.cat([self._critic_hist.build_from_values(values), *privileged], dim=1)
        return {"actor": actor, "critic": critic.to(self.dtype)}
