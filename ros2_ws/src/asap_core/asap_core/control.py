"""One control tick of the policy node, ROS-free: mode machine, policy, blending, safety -> command.

The node converts messages to :class:`RobotState`, calls :meth:`Controller.tick` at the policy
rate on its control thread, and publishes the returned :class:`MotorCommand`. Everything that
decides what the motors get lives here, so it is tested without DDS. ``tick`` never raises for
run-time problems: a fault latches DAMPING and is reported once in :attr:`TickOutput.fault`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from asap_core import g1, remote, variants
from asap_core.artifact import PolicyArtifact
from asap_core.inference import OnnxPolicy, PolicyOutputError
from asap_core.joint_map import JointMap
from asap_core.modes import ACTIVE_MODES, Event, Guards, Mode, Transition, next_mode, remote_events
from asap_core.observation import ObservationBuilder, ObsInputs, motion_phase
from asap_core.remote import RemoteState
from asap_core.safety import SafetyCfg, SafetyFilter, Staleness, non_finite, staleness
from asap_core.wire import LowStateArrays

MOTORS = g1.MOTOR_ORDER


@dataclass(frozen=True, kw_only=True)
class ControlCfg:
    """How the modes command the robot."""

    control_dt: float = 0.02
    """Tick period (s); a policy must have the same ``control_dt``."""
    ramp_s: float = 3.0
    """RAMP duration: measured pose -> default pose."""
    start_blend_ticks: int = 0
    """Ticks to blend from the HOLD target into the policy when POLICY starts (0 = none)."""
    swap_blend_ticks: int = 10
    """Ticks to blend from the old policy's last target into a hot-swapped one."""
    policy_start_tolerance_rad: float = 0.5
    """POLICY may start only when every policy joint is this close to the policy's default."""
    hold_gains: str = "policy"
    """Gains in RAMP/HOLD: ``policy`` (the artifact's kp/kd) or a ``g1.GAINS`` name."""
    passive_gains: str = "asap"
    """``g1.GAINS`` set for joints the policy does not drive (e.g. wrists of a 23-DoF policy)."""
    passive_pose: str = "asap"
    """``g1.DEFAULT_POSES`` entry for joints the policy does not drive."""
    damping_kd: float = 8.0
    """DAMPING: kp = 0, kd = this (N m s/rad) on every motor."""
    action_noise_std: float = 0.0
    """White noise (normalized action units) added to every policy action, which is then applied,
    recorded and fed back as the last action: excitation for stage-2 data. A delta-action model fitted
    on a noise-free run sees the action only as a function of the state and cannot learn how the
    robot answers other actions, which is what fine-tuning asks of it. 0 to evaluate or deploy."""
    action_noise_seed: int | None = None
    sim_mode_machine: int | None = None
    """Simulators only: a ``mode_machine`` no G1 reports, accepted as a 29-DoF G1 (Unitree's
    unitree_mujoco reports 0). None on the robot."""
    safety: SafetyCfg = field(default_factory=SafetyCfg)


@dataclass(frozen=True, kw_only=True)
class RobotState:
    """One LowState: body motors in motor order, the pelvis IMU, the remote."""

    q: np.ndarray
    dq: np.ndarray
    quat_wxyz: np.ndarray
    gyro_b: np.ndarray
    remote: RemoteState = field(default_factory=RemoteState)
    mode_machine: int = variants.SIM_MODE_MACHINE
    tick: int = 0

    @classmethod
    def from_lowstate(cls, s: LowStateArrays) -> RobotState:
        """The state of a decoded raw LowState."""
        return cls(q=s.q, dq=s.dq, quat_wxyz=s.quat_wxyz, gyro_b=s.gyro_b,
                   remote=remote.decode(s.wireless_remote), mode_machine=s.mode_machine, tick=s.tick)


@dataclass(frozen=True)
class MotorCommand:
    """The body-motor part of one LowCmd (motor order)."""

    q: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    dq: np.ndarray = field(default_factory=lambda: np.zeros(len(MOTORS)))
    tau: np.ndarray = field(default_factory=lambda: np.zeros(len(MOTORS)))

    @classmethod
    def zero_torque(cls) -> MotorCommand:
        """No stiffness, no damping, no torque."""
        zeros = np.zeros(len(MOTORS))
        return cls(zeros, zeros, zeros)

    @classmethod
    def damping(cls, kd: float, q: np.ndarray | None = None) -> MotorCommand:
        """kp = 0, kd on every motor: the robot sags slowly instead of falling freely.

        ``q`` (the measured pose, for the record: kp = 0 makes it irrelevant to the motors) is
        sent where finite and 0 elsewhere, so a NaN or inf in the state never reaches /lowcmd."""
        target = np.zeros(len(MOTORS)) if q is None else np.where(np.isfinite(q), q, 0.0)
        return cls(target, np.zeros(len(MOTORS)), np.full(len(MOTORS), kd))


DRY_RUNS = 200
"""Inference runs of a hot-swap dry run (its p99 is judged against half the control period)."""


class LoadedPolicy:
    """An artifact made ready to run: a warm session, its observation builder and joint map."""

    def __init__(self, artifact: PolicyArtifact, threads: int = 1) -> None:
        meta = artifact.metadata
        self.artifact = artifact
        self.network = OnnxPolicy(artifact, threads=threads)
        self.builder = ObservationBuilder(spec=meta.observation)
        self.joint_map = JointMap.from_names(meta.joint_names, MOTORS)
        self.default_q = meta.array("default_joint_pos")
        self.scale = meta.array("action_scale")
        self.kp, self.kd = meta.array("kp"), meta.array("kd")
        self.clip = np.inf if meta.action_clip is None else meta.action_clip

    @property
    def num_joints(self) -> int:
        """Policy joints (= action size)."""
        return len(self.default_q)

    def inputs(self, state: RobotState, last_action: np.ndarray, phase: float) -> ObsInputs:
        """The observation inputs of ``state`` in policy order."""
        return ObsInputs.from_motor_order(self.joint_map, q=state.q, dq=state.dq,
                                          quat_wxyz=state.quat_wxyz, gyro_b=state.gyro_b,
                                          last_action=last_action, phase=phase,
                                          default_q=self.default_q)

    def step(self, state: RobotState, last_action: np.ndarray,
             phase: float) -> tuple[np.ndarray, np.ndarray, float]:
        """(observation, raw action, inference seconds); advances the observation history."""
        obs = self.builder.build(self.inputs(state, last_action, phase))
        t0 = time.perf_counter()
        action = self.network(obs)
        return obs, action, time.perf_counter() - t0

    def dry_run(self, state: RobotState, budget_s: float) -> str:
        """Run :data:`DRY_RUNS` times on ``state`` (fresh history); "" if usable, else why not: a
        real output shape other than [1, joints], a non-finite output, or a p99 inference time
        above ``budget_s`` (stops as soon as more than 1 % of the runs were slower).

        The time is the calling thread's CPU time (ONNX Runtime computes in it with one intra-op
        thread): the graph's own cost, not the preemptions of a loaded machine, which would refuse
        a cheap policy at random. With ``inference_threads`` > 1 it undercounts the helper threads."""
        probe = ObservationBuilder(spec=self.builder.spec)
        obs = probe.build(self.inputs(state, np.zeros(self.num_joints), 0.0))
        slow = 0
        for i in range(DRY_RUNS):
            t0 = time.thread_time()
            try:
                action = self.network(obs)
            except PolicyOutputError as e:
                return str(e)
            slow += time.thread_time() - t0 > budget_s
            if slow > DRY_RUNS // 100:
                return (f"inference too slow: {slow} of {i + 1} runs took more than {budget_s * 1e3:.1f} ms "
                        "of CPU (half the control period); p99 must stay below it")
            if i == 0 and (bad := non_finite(self.artifact.metadata.joint_names, action)):
                return f"non-finite output on the current observation for {bad}"
        return ""


@dataclass
class TickOutput:
    """What one tick decided, for the command writer, the record and the status."""

    mode: Mode
    command: MotorCommand
    fault: str = ""
    """A fault that latched DAMPING in this tick (reported once)."""
    results: list[Transition] = field(default_factory=list)
    """One per requested event, in order."""
    phase: float = 0.0
    observation: np.ndarray | None = None
    action_raw: np.ndarray | None = None
    action: np.ndarray | None = None
    """The applied action after the safety filter, normalized units (policy order)."""
    q_target: np.ndarray | None = None
    """Targets sent for the policy joints (rad, policy order)."""
    inference_s: float = 0.0
    staleness: Staleness = Staleness.FRESH
    swap: str | None = None
    """None: no staged policy this tick; "": swapped in; else why the swap was refused."""


@dataclass
class _Blend:
    """Blend from a frozen command to the live one over ``ticks`` ticks."""

    q: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    ticks: int
    done: int = 0

    def apply(self, q: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> tuple[np.ndarray, ...]:
        self.done += 1
        b = min(1.0, self.done / self.ticks)
        return tuple((1 - b) * old + b * new for old, new in ((self.q, q), (self.kp, kp), (self.kd, kd)))

    @property
    def finished(self) -> bool:
        return self.done >= self.ticks


class Controller:
    """The tick logic. Not thread-safe: the node calls it from its control thread only."""

    def __init__(self, cfg: ControlCfg, policy: LoadedPolicy | None = None) -> None:
        self.cfg = cfg
        self.safety = SafetyFilter.for_joints(MOTORS, cfg.safety)
        self.policy: LoadedPolicy | None = None
        self.mode = Mode.ZERO_TORQUE
        self.fault = ""
        self._passive_kp, self._passive_kd = g1.gains(MOTORS, cfg.passive_gains)
        self._passive_q = g1.default_pose(MOTORS, cfg.passive_pose)
        self._remote = RemoteState()
        self._staged: tuple[LoadedPolicy, int] | None = None
        self._last: MotorCommand | None = None
        self._ramp_from = self._hold_q = self._passive_q
        self._ticks_in_mode = 0
        self._blend: _Blend | None = None
        self._damped_in_tick = ""  # why DAMPING latched in the running tick (drops later events)
        self._last_action = np.zeros(0)
        self._action_noise = np.random.default_rng(cfg.action_noise_seed)
        if policy is not None:
            self._install(policy)

    # -- public ---------------------------------------------------------------------------------

    def stage(self, policy: LoadedPolicy, blend_ticks: int | None = None) -> None:
        """Swap ``policy`` in at the start of the next tick (the command blends over ``blend_ticks``
        in every stiff mode); in POLICY only if the robot is within the start-pose tolerance of its
        default pose (:attr:`TickOutput.swap` says)."""
        self._staged = (policy, self.cfg.swap_blend_ticks if blend_ticks is None else blend_ticks)

    @property
    def swap_pending(self) -> bool:
        """True between :meth:`stage` and the tick that performs the swap."""
        return self._staged is not None

    def tick(self, state: RobotState | None, state_age_s: float | None,
             requests: Sequence[Event] = (), start_block: str = "",
             external_fault: str = "") -> TickOutput:
        """Run one control tick and return the command to send.

        Order: staged swap, fault check, remote combos, then ``requests``. Once DAMPING is entered
        (or re-asserted) in a tick, every later event of that tick is dropped, so a queued RESET
        (or L2+start) can never skip the latched damping that the same tick's fault called for."""
        swap = None if self._staged is None else self._swap(*self._staged, state)
        stale = staleness(state_age_s, self.cfg.safety)
        fault = external_fault or self._check(state, stale)
        events: list[Event] = [Event.FAULT] if fault else []
        if state is not None:
            events += remote_events(self._remote, state.remote)
            self._remote = state.remote
        guards = self._guards(state, stale, start_block)
        self._damped_in_tick = ""
        for event in events:
            self._apply_in_tick(event, state, guards, fault)
        results = [self._apply_in_tick(event, state, guards, fault) for event in requests]
        out = self._command(state)
        out.fault = out.fault or fault
        out.results, out.staleness, out.swap = results, stale, swap
        if out.fault:
            self.fault = self.fault or out.fault
        return out

    # -- transitions ----------------------------------------------------------------------------

    def _apply_in_tick(self, event: Event, state: RobotState | None, guards: Guards,
                       fault: str) -> Transition:
        if self._damped_in_tick and event not in _DAMPING_EVENTS:
            return Transition(self.mode, False, f"dropped: DAMPING latched in the same tick "
                                                f"({self._damped_in_tick}); send it again")
        result = self._apply(event, state, guards)
        if result.accepted and result.mode is Mode.DAMPING:
            self._damped_in_tick = fault or event.name
        return result

    def _apply(self, event: Event, state: RobotState | None, guards: Guards) -> Transition:
        result = next_mode(self.mode, event, guards)
        if result.accepted and (result.mode is not self.mode or event is Event.REQUEST_RAMP):
            self._enter(result.mode, state)
        return result

    def _enter(self, mode: Mode, state: RobotState | None) -> None:
        if mode is Mode.ZERO_TORQUE:
            self.fault = ""
        if mode not in ACTIVE_MODES:
            self._blend = None
        if mode is Mode.RAMP:
            if self._last is not None and self.mode in ACTIVE_MODES:
                self._ramp_from = self._last.q
            else:
                assert state is not None, "RAMP starts only from a fresh LowState (Guards.start)"
                self._ramp_from = state.q.copy()
        if mode is Mode.HOLD:
            self._hold_q = self._last.q if self._last is not None else self._goal_q()
        if mode is Mode.POLICY:
            policy = self._running_policy()
            policy.builder.reset()
            self._last_action = np.zeros(policy.num_joints)
            self._blend = self._blend_from_last(self.cfg.start_blend_ticks)
        self.mode, self._ticks_in_mode = mode, 0

    def _guards(self, state: RobotState | None, stale: Staleness, start_block: str) -> Guards:
        start = start_block
        if not start and (state is None or stale is Staleness.STALE):
            start = "no fresh LowState"
        if not start and state is not None:  # (None already set start above)
            start = _variant_problem(state.mode_machine, self.cfg.sim_mode_machine) or \
                self.safety.state_fault(state.q, state.dq, state.quat_wxyz)
        return Guards(start=start, policy=self._pose_block(self.policy, state))

    def _pose_block(self, policy: LoadedPolicy | None, state: RobotState | None) -> str:
        """Why ``policy`` may not start from ``state`` now ("" = it may)."""
        if policy is None:
            return "no policy loaded (LoadPolicy first)"
        if state is None:
            return "no LowState"
        err = np.abs(policy.joint_map.gather(state.q) - policy.default_q)
        i = int(np.argmax(err))
        if not err[i] <= self.cfg.policy_start_tolerance_rad:  # NaN fails too
            name = policy.artifact.metadata.joint_names[i]
            return (f"pose too far from the policy's default: {name} off by {err[i]:.2f} rad > "
                    f"{self.cfg.policy_start_tolerance_rad:.2f} (ramp first)")
        return ""

    def _check(self, state: RobotState | None, stale: Staleness) -> str:
        if self.mode not in ACTIVE_MODES:
            return ""
        if state is None:
            return "no LowState received"
        if stale is Staleness.STALE:
            return f"LowState stale (> {self.cfg.safety.stale_damp_s * 1e3:.0f} ms old)"
        return self.safety.state_fault(state.q, state.dq, state.quat_wxyz)

    # -- commands -------------------------------------------------------------------------------

    def _command(self, state: RobotState | None) -> TickOutput:
        self._ticks_in_mode += 1
        if self.mode is Mode.ZERO_TORQUE:
            self._last = None
            return TickOutput(self.mode, MotorCommand.zero_torque())
        if self.mode is Mode.DAMPING:
            self._last = None
            return TickOutput(self.mode, MotorCommand.damping(
                self.cfg.damping_kd, None if state is None else state.q))
        assert state is not None, "the active modes fault to DAMPING without a LowState (_check)"
        if self.mode is Mode.POLICY:
            return self._policy_command(state)
        kp, kd = self._hold_gains()
        if self.mode is Mode.RAMP:
            frac = min(1.0, self._ticks_in_mode * self.cfg.control_dt / self.cfg.ramp_s)
            q_des = self._ramp_from + frac * (self._goal_q() - self._ramp_from)
        else:
            q_des = self._hold_q
        out = TickOutput(self.mode, self._safe(q_des, kp, kd, state))
        if self.mode is Mode.RAMP and frac >= 1.0:
            self._apply(Event.RAMP_DONE, state, Guards())
        return out

    def _policy_command(self, state: RobotState) -> TickOutput:
        p = self._running_policy()
        phase = motion_phase(self._ticks_in_mode - 1, self.cfg.control_dt,
                             p.artifact.metadata.motion.length_s)
        try:
            obs, raw, infer_s = p.step(state, self._last_action, phase)
        except PolicyOutputError as e:
            return self._policy_fault(state, str(e), phase)
        bad = non_finite(p.artifact.metadata.joint_names, raw)
        if bad:
            out = self._policy_fault(state, f"policy output non-finite for {bad}", phase)
            out.observation, out.action_raw, out.inference_s = obs, raw, infer_s
            return out
        action = np.clip(raw, -p.clip, p.clip)
        if self.cfg.action_noise_std > 0.0:
            action = action + self._action_noise.normal(0.0, self.cfg.action_noise_std, action.shape)
        q_des = p.joint_map.apply(p.default_q + p.scale * action, fill=self._passive_q)
        cmd = self._safe(q_des, *self._policy_gains(), state)
        q_target = p.joint_map.gather(cmd.q)
        self._last_action = action
        out = TickOutput(self.mode, cmd, phase=phase, observation=obs, action_raw=raw,
                         action=(q_target - p.default_q) / p.scale, q_target=q_target,
                         inference_s=infer_s)
        if phase >= 1.0:
            self._apply(Event.MOTION_DONE, state, Guards())
        return out

    def _policy_fault(self, state: RobotState, fault: str, phase: float) -> TickOutput:
        """DAMPING in this same tick, for a policy output that cannot be used."""
        self._apply(Event.FAULT, state, Guards())
        out = self._command(state)
        out.fault, out.phase = fault, phase
        return out

    def _safe(self, q_des: np.ndarray, kp: np.ndarray, kd: np.ndarray,
              state: RobotState) -> MotorCommand:
        """The stiff command of every mode: blended (POLICY start, hot swap), then clamped."""
        if self._blend is not None:
            q_des, kp, kd = self._blend.apply(q_des, kp, kd)
            self._blend = None if self._blend.finished else self._blend
        self._last = MotorCommand(self.safety.targets(q_des, state.q, state.dq, kp, kd), kp, kd)
        return self._last

    def _policy_gains(self) -> tuple[np.ndarray, np.ndarray]:
        p = self._running_policy()
        return p.joint_map.apply(p.kp, fill=self._passive_kp), p.joint_map.apply(p.kd, fill=self._passive_kd)

    def _hold_gains(self) -> tuple[np.ndarray, np.ndarray]:
        if self.cfg.hold_gains == "policy":
            if self.policy is None:
                return self._passive_kp, self._passive_kd
            return self._policy_gains()
        return g1.gains(MOTORS, self.cfg.hold_gains)

    def _goal_q(self) -> np.ndarray:
        """The default pose: the policy's for its joints, the passive pose elsewhere."""
        if self.policy is None:
            return self._passive_q
        return self.policy.joint_map.apply(self.policy.default_q, fill=self._passive_q)

    # -- hot swap -------------------------------------------------------------------------------

    def _running_policy(self) -> LoadedPolicy:
        """The installed policy, where one must be: POLICY starts only with one (Guards.policy), policy gains
        are asked only then or when one is loaded, and an installed policy is only ever replaced."""
        assert self.policy is not None, "no policy installed"
        return self.policy

    def _install(self, policy: LoadedPolicy) -> None:
        self.policy = policy
        policy.builder.reset()
        self._last_action = np.zeros(policy.num_joints)

    def _swap(self, policy: LoadedPolicy, blend_ticks: int, state: RobotState | None) -> str:
        """Install a staged policy; "" when swapped, else why not (the running one continues)."""
        self._staged = None
        if self.mode is Mode.POLICY and (problem := self._pose_block(policy, state)):
            return f"refused in POLICY: {problem}; to switch: HOLD, load, RAMP, then POLICY"
        self._install(policy)
        if self.mode in ACTIVE_MODES:  # gains and targets blend in RAMP and HOLD too
            self._blend = self._blend_from_last(blend_ticks)
        return ""

    def _blend_from_last(self, ticks: int) -> _Blend | None:
        if ticks <= 0 or self._last is None:
            return None
        return _Blend(self._last.q.copy(), self._last.kp.copy(), self._last.kd.copy(), ticks)


_DAMPING_EVENTS = frozenset({Event.FAULT, Event.REQUEST_DAMPING})


def _variant_problem(mode_machine: int, sim_mode_machine: int | None = None) -> str:
    if mode_machine == sim_mode_machine:
        return ""
    try:
        if variants.supports_full_body(mode_machine):
            return ""
        v = variants.variant(mode_machine)
        return f"mode_machine {mode_machine} is a {v.name}; this node drives all 29 body motors"
    except variants.UnknownVariantError as e:
        return str(e)
