"""policy_node: runs a policy artifact on the G1 (or its twin) at the artifact's rate, safely.

A thin rclpy shell over ``asap_core.control.Controller``. Threads:

- control thread: absolute deadlines on the node clock (steady time, or sim time with
  ``use_sim_time``); each tick decodes the newest raw /lowstate, runs the controller, publishes
  /lowcmd at once, then the per-tick record and joint states;
- command writer: repeats the latest command at ``writer_rate_hz`` between ticks and, if no tick
  completes for ``stall_timeout_ms``, sends DAMPING on its own and latches the fault;
- executor (``asap_policy.executor.InlineExecutor``): the raw /lowstate callback (stores bytes
  only) and /clock in the spinning thread; SetMode, LoadPolicy and the timers (the /lowcmd
  publisher check, status, diagnostics) each on a pool of their own, so a load never delays a
  mode request; the load itself runs on the one loader thread (``asap_policy.loader``).

Nothing raises out of the node: a fault or an internal error (control tick, any callback, the
writer) latches DAMPING, logged once; service callbacks always answer, with the reason.
"""

from __future__ import annotations

import array
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import rclpy
from asap_msgs.msg import PolicyRecord, PolicyStatus
from asap_msgs.srv import LoadPolicy, SetMode
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.time import Time
from sensor_msgs.msg import JointState
from unitree_hg.msg import LowCmd, LowState

from asap_core import g1
from asap_core.control import Controller, LoadedPolicy, MotorCommand, RobotState, TickOutput
from asap_core.modes import ACTIVE_MODES, Event, Mode, Transition, request_event
from asap_core.safety import Staleness
from asap_core.wire import NonFiniteCommandError, decode_lowstate, encode_lowcmd, lowstate_tick
from asap_policy import params
from asap_policy.executor import InlineExecutor
from asap_policy.loader import LoadRefusedError, PolicyLoader, prepare
from asap_policy.motion_switcher import MotionSwitcherClient
from asap_policy.motor_health import motor_health

TOPICS = {"lowcmd": "/lowcmd", "lowstate": "/lowstate", "record": "/policy/record",
          "status": "/policy/status", "joint_states": "/joint_states", "diagnostics": "/diagnostics",
          "set_mode": "/policy/set_mode", "load_policy": "/policy/load_policy"}
"""Every name the node uses (remappable with ``--ros-args -r``)."""
STATS_WINDOW_S = 60.0
"""Latency and jitter percentiles in PolicyStatus cover this many seconds of ticks."""
SIM_CLOCK_POLL_S = 0.1
"""Under sim time the control thread re-checks the clock at least this often (shutdown, missed jumps)."""
SYNC_STATE_WAIT_S = 0.05
"""Under sim time, how long (wall) a tick waits for the LowState of its own sim time before it runs on
the newest one (a simulator whose ticks are not its sim time in ms costs this much per tick)."""


@dataclass
class _Pending:
    """A request waiting for the control thread (SetMode event or a staged policy)."""

    event: Event | None = None
    policy: LoadedPolicy | None = None
    blend_ticks: int | None = None
    done: threading.Event = field(default_factory=threading.Event)
    result: Transition | None = None
    swap: str | None = None
    """The swap's outcome for a staged policy: "" swapped in, else why it was refused."""


class _Window:
    """A window of recent samples with percentiles (append and copy are atomic under the GIL)."""

    def __init__(self, size: int) -> None:
        self._values: deque[float] = deque(maxlen=size)

    def add(self, value: float) -> None:
        self._values.append(value)

    def percentile(self, q: float) -> float:
        values = list(self._values)
        return float(np.percentile(values, q)) if values else 0.0


def _descriptor(p: params.Param) -> ParameterDescriptor:
    d = ParameterDescriptor(description=p.description, read_only=True)
    if p.choices:
        d.additional_constraints = f"one of {list(p.choices)}"
    if p.bounds and isinstance(p.default, float):
        d.floating_point_range = [FloatingPointRange(from_value=float(p.bounds[0]),
                                                     to_value=float(p.bounds[1]))]
    elif p.bounds and isinstance(p.default, int) and not isinstance(p.default, bool):
        d.integer_range = [IntegerRange(from_value=int(p.bounds[0]), to_value=int(p.bounds[1]), step=1)]
    return d


class PolicyNode(Node):
    """The policy node (see the module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("policy_node", **kwargs)
        for p in params.PARAMS:
            self.declare_parameter(p.name, p.default, _descriptor(p))
        self.values = params.validate({p.name: self.get_parameter(p.name).value for p in params.PARAMS})
        v = self.values
        policy = self._load_initial(v["policy_path"])
        self.dt = policy.artifact.metadata.control_dt if policy else 1.0 / v["control_rate_hz"]
        self.controller = Controller(params.control_cfg(v, self.dt), policy)
        self._loader = PolicyLoader(params.loader_cfg(v, self.dt), self._current_state)
        self.use_sim_time = bool(self.get_parameter("use_sim_time").value)
        self.clock = self.get_clock()  # ROS time: sim time under use_sim_time; stamps otherwise
        # under sim time the control thread waits on this condition, notified on every /clock step
        # and every /lowstate
        self._sim_progress = threading.Condition()
        self._clock_jump = self.clock.create_jump_callback(
            JumpThreshold(min_forward=Duration(nanoseconds=1), min_backward=Duration(nanoseconds=-1),
                          on_clock_change=True),
            post_callback=self._notify_sim_progress,
        ) if self.use_sim_time else None

        # shared state (guarded by _lock unless noted)
        self._lock = threading.Lock()
        self._publish_lock = threading.Lock()
        # Status comes from the control thread (on mode changes) and the timer: built and published
        # under one lock from what the last finished tick reported, so modes never arrive out of order
        # (the recorder opens and closes episodes on them) and mode and phase belong to the same tick.
        self._status_lock = threading.Lock()
        self._status_mode = self.controller.mode
        self._raw_state: tuple[bytes, int] | None = None  # newest /lowstate bytes, receive time (ns)
        self._states_received = 0  # /lowstate samples so far (counted under sim time only)
        self._answered_tick = -1  # LowState.tick of the state the last command answered
        self._good_state: tuple[RobotState, int, np.ndarray] | None = None  # + receive ns, tau_est
        self._pending: list[_Pending] = []
        self._command: tuple[bytes, int, int] | None = None  # wire bytes, tick time ns, publish ns
        self._external_fault = ""  # a fault found outside the tick (writer, graph check, error)
        self._start_block = "starting up"  # why the robot may not leave ZERO_TORQUE now
        self._released = not v["release_motion_switcher"]
        self._release_block = "" if self._released else "waiting for the motion switcher release"
        self._running = True
        window = round(STATS_WINDOW_S / self.dt)
        self.stats = {"tick": 0, "missed": 0, "crc_errors": 0, "inference_ms": _Window(window),
                      "jitter_ms": _Window(window), "state_to_cmd_ms": _Window(window), "age_ms": 0.0,
                      "phase": 0.0}  # phase of the newest tick that ran the policy (kept after POLICY)

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        before = self._lowcmd_publisher_gids()
        self._lowcmd_pub = self.create_publisher(LowCmd, TOPICS["lowcmd"], reliable)
        self._own_lowcmd_gid = _own_gid(before, self._lowcmd_publisher_gids())
        self.create_subscription(LowState, TOPICS["lowstate"], self._on_lowstate,
                                 QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT),
                                 raw=True)
        self._record_pub = self.create_publisher(PolicyRecord, TOPICS["record"], QoSProfile(depth=100))
        self._status_pub = self.create_publisher(PolicyStatus, TOPICS["status"], reliable)
        self._joint_pub = self.create_publisher(JointState, TOPICS["joint_states"], QoSProfile(depth=10))
        self._diag_pub = self.create_publisher(DiagnosticArray, TOPICS["diagnostics"], QoSProfile(depth=10))
        # they block (waiting for a tick; waiting for the loader): pool threads, not the executor's
        # own, and a pool each, so a load never delays a mode request (an e-stop)
        mode_service, load_service = ReentrantCallbackGroup(), ReentrantCallbackGroup()
        # the timers query the graph and build messages (ms each): on a pool thread too, so the
        # /lowstate callback never waits behind them
        timers = MutuallyExclusiveCallbackGroup()
        self.offloaded_callbacks = {mode_service: 2, load_service: 2, timers: 1}
        self.create_service(SetMode, TOPICS["set_mode"], self._answering(self._on_set_mode),
                            callback_group=mode_service)
        self.create_service(LoadPolicy, TOPICS["load_policy"], self._answering(self._on_load_policy),
                            callback_group=load_service)
        self.create_timer(0.2, self._check_lowcmd_publishers, callback_group=timers)
        self.create_timer(1.0 / v["status_rate_hz"], self._publish_status, callback_group=timers)
        self.create_timer(1.0 / v["diagnostics_rate_hz"], self._publish_diagnostics, callback_group=timers)
        self._switcher = MotionSwitcherClient(self) if not self._released else None

        self._threads = [threading.Thread(target=self._control_loop, name="control", daemon=True)]
        if v["writer_rate_hz"] > 0:
            self._threads.append(threading.Thread(target=self._writer_loop, name="writer", daemon=True))
        if self._switcher is not None:
            self._threads.append(threading.Thread(target=self._release, name="release", daemon=True))
        for t in self._threads:
            t.start()
        name = policy.artifact.metadata.name if policy else "none"
        self.get_logger().info(f"ready: policy {name}, {1 / self.dt:.0f} Hz, "
                               f"{'sim' if self.use_sim_time else 'steady'} clock")

    # -- configure ------------------------------------------------------------------------------

    def _load_initial(self, path: str) -> LoadedPolicy | None:
        """Fail fast: an artifact that LoadPolicy would refuse is an error at start, not a warning."""
        if not path:
            return None
        try:
            policy = prepare(path, params.loader_cfg(self.values, 0.0), _standing_state(), check_dt=False)
        except LoadRefusedError as e:
            raise RuntimeError(f"policy_path {path}: {e}") from None
        self.get_logger().info(f"policy {policy.artifact.metadata.name} sha256 {policy.artifact.sha256}")
        return policy

    def _release(self) -> None:
        v = self.values
        ok, message = self._switcher.release(v["motion_switcher_attempts"], v["motion_switcher_timeout_s"])
        (self.get_logger().info if ok else self.get_logger().error)(f"motion switcher: {message}")
        with self._lock:
            self._released = ok
            self._release_block = "" if ok else f"motion switcher not released: {message}"

    # -- inputs ---------------------------------------------------------------------------------

    def _on_lowstate(self, data: bytes) -> None:
        now = self._now_ns()
        with self._lock:
            self._raw_state = (data, now)
        if self.use_sim_time:
            self._states_received += 1
            self._notify_sim_progress()

    def _lowcmd_publisher_gids(self) -> set[bytes]:
        return {bytes(i.endpoint_gid) for i in self.get_publishers_info_by_topic(TOPICS["lowcmd"])}

    def _check_lowcmd_publishers(self) -> None:
        """Any /lowcmd publisher but ours (by GID: a node name proves nothing) blocks leaving
        ZERO_TORQUE and, in an active mode, is a fault: two controllers fight over the motors."""
        others = sorted(f"{i.node_namespace.rstrip('/')}/{i.node_name} "
                        f"(gid {bytes(i.endpoint_gid).hex()[:24]})"
                        for i in self.get_publishers_info_by_topic(TOPICS["lowcmd"])
                        if bytes(i.endpoint_gid) != self._own_lowcmd_gid)
        conflict = f"another /lowcmd publisher: {others}" if others else ""
        with self._lock:
            self._start_block = self._release_block or conflict
            if conflict and self.controller.mode in ACTIVE_MODES and not self._external_fault:
                self._external_fault = conflict

    def _answering(self, callback):
        """A service callback that always answers: an unexpected error refuses the request with
        its reason and damps (it is a bug, and the robot must not run on in an unknown state)."""
        def answer(request, response):
            try:
                return callback(request, response)
            except Exception as e:
                self.internal_error(e, callback.__name__)
                response.accepted, response.message = False, f"internal error, not applied: {e!r}"
                return response
        answer.__name__ = callback.__name__  # errors are reported by callback name
        return answer

    def internal_error(self, error: BaseException, where: str = "a callback") -> None:
        """An unexpected exception anywhere in the node: log it, send DAMPING now, latch it next tick."""
        self.get_logger().error(f"internal error in {where}, DAMPING: {error!r}")
        with self._lock:
            self._external_fault = self._external_fault or f"internal error in {where}: {error!r}"
        if self.context.ok():
            self._send(MotorCommand.damping(self.values["damping_kd"]), self._now_ns())

    def _on_set_mode(self, request: SetMode.Request, response: SetMode.Response) -> SetMode.Response:
        try:
            event = request_event(request.request)
        except ValueError as e:
            response.accepted, response.mode, response.message = False, int(self.controller.mode), str(e)
            return response
        pending = self._submit(_Pending(event=event))
        result = pending.result or Transition(self.controller.mode, False, "no control tick ran "
                                              "within 1 s (is the clock running?)")
        response.accepted, response.mode, response.message = result.accepted, int(result.mode), result.reason
        if request.reason:
            self.get_logger().info(f"SetMode {event.name} ({request.reason}): "
                                   f"{'accepted' if result.accepted else 'refused: ' + result.reason}")
        return response

    def _on_load_policy(self, request: LoadPolicy.Request,
                        response: LoadPolicy.Response) -> LoadPolicy.Response:
        response.accepted, response.message = False, ""
        try:
            policy = self._loader.load(request.path)
        except LoadRefusedError as e:
            response.message = f"refused {request.path}: {e}"
            self.get_logger().warning(response.message)
            return response
        artifact, m = policy.artifact, policy.artifact.metadata
        pending = self._submit(_Pending(policy=policy, blend_ticks=request.blend_ticks or None))
        response.accepted = pending.swap == ""
        response.policy_sha256, response.policy_name = artifact.sha256, m.name
        if response.accepted:
            response.message = (f"swapped in {m.name} ({artifact.sha256[:12]}, {m.num_joints} joints, obs "
                                f"{m.observation.dim}, motion {m.motion.name} {m.motion.length_s:.2f} s)")
        else:
            response.message = f"refused {request.path}: " + (pending.swap or "no control tick ran within "
                                                               "1 s to swap it in")
        if response.accepted:  # two call sites: rclpy fixes a call site's severity at its first use
            self.get_logger().info(response.message)
        else:
            self.get_logger().warning(response.message)
        return response

    def _submit(self, pending: _Pending) -> _Pending:
        """Hand a request to the control thread and wait for the tick that applies it; without a tick
        in time the request is withdrawn, so a refusal never takes effect later (a paused clock)."""
        with self._lock:
            self._pending.append(pending)
        if not pending.done.wait(timeout=max(1.0, 10 * self.dt)):
            with self._lock:
                withdrawn = pending in self._pending
                if withdrawn:
                    self._pending.remove(pending)
            if not withdrawn:  # a tick took it just now: its answer is moments away
                pending.done.wait(timeout=max(1.0, 10 * self.dt))
        return pending

    def _current_state(self) -> RobotState:
        """The newest good state, or the robot standing at the default pose if none arrived."""
        with self._lock:
            good = self._good_state
        return _standing_state() if good is None else good[0]

    # -- control thread -------------------------------------------------------------------------

    def _sleep_until(self, deadline_ns: int, period_ns: int) -> bool:
        """Sleep until ``deadline_ns`` on the node clock; False when shutting down. Returns early
        when sim time is more than two periods behind the deadline: the clock jumped back (a
        simulator reset) and the caller re-anchors, instead of waiting for sim time to catch up.

        Steady time sleeps with ``time.sleep`` on CLOCK_MONOTONIC (rclpy's ``Clock.sleep_until``
        costs a jump-callback registration per call: ~40 % of a core at 500 Hz). Sim time waits on a
        condition that one jump callback, registered once, notifies after each /clock step. Not
        ``Clock.sleep_until``: it waits for the next jump without looking at the time, so a /clock
        that arrived between our check and its registration was lost, and a lock-step twin holding
        the clock at that sync state (re-sending the same time) was never answered: the graph
        stalled for good (seen in ~1 of 3 episodes on 2 busy cores).
        """
        if not self.use_sim_time:
            remaining = deadline_ns - time.monotonic_ns()
            if remaining > 0:
                time.sleep(remaining / 1e9)
            return self._running
        with self._sim_progress:
            seen = self._states_received
            while self._running and (now := self._now_ns()) < deadline_ns:
                if deadline_ns - now > 2 * period_ns:
                    return self._running
                self._sim_progress.wait(SIM_CLOCK_POLL_S)  # the timeout only bounds a shutdown
                if self._states_received != seen and self._newest_tick() == self._answered_tick:
                    # a lock-step twin re-sent the state we answered: our command was lost (e.g. sent
                    # before DDS matched its reader at start-up); answer the copy, as its protocol asks
                    self._resend_command()
                seen = self._states_received
            # A lock-step twin publishes the state of this tick, then its /clock, then waits for our
            # command; DDS does not order the two topics, so the state may still be in flight. Wait
            # for it (the twin's LowState.tick is its sim time in ms; asap_sim README, lock-step).
            wanted_tick, give_up = round(deadline_ns / 1e6), time.monotonic() + SYNC_STATE_WAIT_S
            while self._running and self._newest_tick() < wanted_tick and time.monotonic() < give_up:
                self._sim_progress.wait(SYNC_STATE_WAIT_S)
        return self._running

    def _resend_command(self) -> None:
        with self._publish_lock:
            if self._command is not None:
                self._lowcmd_pub.publish(self._command[0])

    def _newest_tick(self) -> int:
        raw = self._raw_state
        return -1 if raw is None else lowstate_tick(raw[0])

    def _notify_sim_progress(self, _jump: object = None) -> None:
        with self._sim_progress:
            self._sim_progress.notify_all()

    def _now_ns(self) -> int:
        return time.monotonic_ns() if not self.use_sim_time else self.clock.now().nanoseconds

    def _control_loop(self) -> None:
        period = round(self.dt * 1e9)
        deadline = self._now_ns() + period
        if self.use_sim_time:
            # Sim time may start at 0 and only advances when the twin steps; a lock-step twin
            # waits for a command after each state whose time is a multiple of the period. So
            # start once a LowState is in, and keep deadlines on multiples of the period.
            while self._running and self._raw_state is None:
                time.sleep(0.01)
            deadline = (self._now_ns() // period) * period
        while self._sleep_until(deadline, period) and rclpy.ok(context=self.context):
            now = self._now_ns()
            late = now - deadline
            if late < -period:  # the sim clock jumped back (a reset): re-anchor on the next period,
                # which also lets the state of the new time arrive; one older than the jump is stale
                self.get_logger().warning(f"sim clock jumped back {-late / 1e9:.3f} s: ticks re-anchored")
                deadline = (now // period + 1) * period
                continue
            if late > 1e9:  # a jump forward (sim reset, pause): re-anchor, not a miss
                deadline, late = (now // period) * period, 0
            skipped = late // period
            if skipped:
                self.stats["missed"] += skipped
                deadline += skipped * period
            self.stats["jitter_ms"].add(late / 1e6)
            self._guarded_tick(now)
            deadline += period

    def _guarded_tick(self, now_ns: int) -> None:
        try:
            self._tick(now_ns)
        except Exception as e:  # never let the loop die: damp, latch, log once
            if not self.context.ok():
                return  # shutting down: nothing to publish on
            self.get_logger().error(f"internal error in the control tick, DAMPING: {e!r}")
            with self._lock:
                self._external_fault = self._external_fault or f"internal error: {e!r}"
            self._send(MotorCommand.damping(self.values["damping_kd"]), now_ns)

    def _tick(self, now_ns: int) -> None:
        with self._lock:
            raw, pending, self._pending = self._raw_state, self._pending, []
            start_block, external_fault = self._start_block, self._external_fault
            self._external_fault = ""
        state, t_recv, tau = self._decode(raw)
        age = None if t_recv is None else (now_ns - t_recv) / 1e9
        staged = [p for p in pending if p.policy is not None]
        for p in staged[-1:]:  # loads run one at a time: at most one is staged
            self.controller.stage(p.policy, p.blend_ticks)
        events = [p for p in pending if p.event is not None]
        previous_mode = self.controller.mode
        out = self.controller.tick(state, age, [p.event for p in events], start_block, external_fault)
        if state is not None:
            self._send(out.command, now_ns)
            self._answered_tick = state.tick
            self.stats["state_to_cmd_ms"].add((self._now_ns() - t_recv) / 1e6)
        for p, result in zip(events, out.results, strict=True):
            p.result = result
        for p in staged:
            p.swap = out.swap if p is staged[-1] else "superseded by a later load"
        for p in (*events, *staged):
            p.done.set()
        self._after_tick(out, state, tau, t_recv, age, previous_mode)

    def _decode(self, raw: tuple[bytes, int] | None) -> tuple[RobotState | None, int | None, np.ndarray]:
        """The newest state with a good CRC (falling back to the previous good one)."""
        if raw is not None:
            s = decode_lowstate(raw[0], check_crc=self.values["check_lowstate_crc"])
            if s.crc_ok:
                with self._lock:
                    self._good_state = (RobotState.from_lowstate(s), raw[1], s.tau_est)
            else:
                self.stats["crc_errors"] += 1
        with self._lock:
            good = self._good_state
        return (None, None, np.zeros(0)) if good is None else good

    def _send(self, cmd: MotorCommand, now_ns: int) -> None:
        with self._lock:
            good, released = self._good_state, self._released
        if good is None or not released:
            return  # no mode_machine to echo yet, or the built-in controller still owns the robot
        try:
            data = encode_lowcmd(mode_machine=good[0].mode_machine, q=cmd.q, kp=cmd.kp, kd=cmd.kd,
                                 dq=cmd.dq, tau=cmd.tau)
        except NonFiniteCommandError as e:  # a bug upstream: the last gate sends damping instead
            self.get_logger().error(f"{e}; DAMPING", throttle_duration_sec=1.0)
            with self._lock:
                self._external_fault = self._external_fault or str(e)
            data = self._damping_bytes(good[0].mode_machine)
        with self._publish_lock:
            self._lowcmd_pub.publish(data)
            self._command = (data, now_ns, self._now_ns())

    def _after_tick(self, out: TickOutput, state: RobotState | None, tau: np.ndarray,
                    t_recv: int | None, age: float | None, previous_mode: Mode) -> None:
        with self._status_lock:
            self.stats["tick"] += 1
            if out.observation is not None:
                self.stats["phase"] = out.phase
            self._status_mode = self.controller.mode
        self.stats["age_ms"] = -1.0 if age is None else age * 1e3
        if out.inference_s:
            self.stats["inference_ms"].add(out.inference_s * 1e3)
        if out.fault:
            self.get_logger().error(f"DAMPING latched: {out.fault}")
        if out.staleness is Staleness.WARN and out.mode in ACTIVE_MODES:
            self.get_logger().warning(f"LowState {age * 1e3:.1f} ms old", throttle_duration_sec=1.0)
        if self.controller.mode is not previous_mode:
            self.get_logger().info(f"mode {previous_mode.name} -> {self.controller.mode.name}")
            self._publish_status()
        self._publish_record(out, state, t_recv)
        if state is not None:
            self._publish_joint_state(state, tau)

    def _publish_record(self, out: TickOutput, state: RobotState | None, t_recv: int | None) -> None:
        msg = PolicyRecord()
        if t_recv is not None:  # the state's receive time, on the ROS clock
            received = self.get_clock().now().nanoseconds - (self._now_ns() - t_recv)
            msg.header.stamp = Time(nanoseconds=received).to_msg()
        msg.tick, msg.mode, msg.phase = self.stats["tick"], int(out.mode), out.phase
        policy = self.controller.policy
        msg.policy_sha256 = policy.artifact.sha256 if policy else ""
        msg.lowstate_tick = state.tick if state is not None else 0
        for name in ("observation", "action_raw", "action", "q_target"):
            value = getattr(out, name)
            if value is not None:
                setattr(msg, name, array.array("f", np.asarray(value, dtype=np.float32).tobytes()))
        msg.inference_ms = out.inference_s * 1e3
        self._record_pub.publish(msg)

    def _publish_joint_state(self, state: RobotState, tau: np.ndarray) -> None:
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(g1.MOTOR_ORDER)
        msg.position, msg.velocity, msg.effort = state.q.tolist(), state.dq.tolist(), tau.tolist()
        self._joint_pub.publish(msg)

    # -- command writer -------------------------------------------------------------------------

    def _writer_loop(self) -> None:
        period = round(1e9 / self.values["writer_rate_hz"])
        deadline = self._now_ns() + period
        while self._sleep_until(deadline, period) and rclpy.ok(context=self.context):
            now = self._now_ns()
            # on time: the next period; late, or the sim clock jumped back: one period from now
            deadline = deadline + period if deadline <= now < deadline + period else now + period
            try:
                self._write(now, period)
            except Exception as e:
                self.internal_error(e, "the command writer")

    def _write(self, now: int, period: int) -> None:
        """Repeat the latest command, or damp on our own if the control loop stalled."""
        with self._publish_lock:
            last = self._command
        if last is None:
            return
        data, tick_ns, published_ns = last
        if now - tick_ns > self.values["stall_timeout_ms"] * 1e6 and self.controller.mode in ACTIVE_MODES:
            self._stalled(now - tick_ns)
        elif now - published_ns >= 0.9 * period:
            with self._publish_lock:
                if self._command is last:
                    self._lowcmd_pub.publish(data)
                    self._command = (data, tick_ns, now)

    def _stalled(self, since_ns: int) -> None:
        """The control loop stopped: damp on our own and make the next tick latch it."""
        with self._lock:
            first = not self._external_fault
            self._external_fault = f"control loop stalled for {since_ns / 1e6:.0f} ms"
            good = self._good_state
        if first:
            self.get_logger().error(f"{self._external_fault}: writer sends DAMPING")
        if good is not None:
            data = self._damping_bytes(good[0].mode_machine)
            with self._publish_lock:
                self._lowcmd_pub.publish(data)

    def _damping_bytes(self, mode_machine: int) -> bytes:
        """A damping LowCmd that needs nothing from the state (q = 0: kp = 0 makes it irrelevant)."""
        cmd = MotorCommand.damping(self.values["damping_kd"])
        return encode_lowcmd(mode_machine=mode_machine, q=cmd.q, kp=cmd.kp, kd=cmd.kd)

    # -- status ---------------------------------------------------------------------------------

    def _publish_status(self) -> None:
        c, s = self.controller, self.stats
        msg = PolicyStatus()
        if c.policy is not None:
            meta = c.policy.artifact.metadata
            msg.policy_name, msg.policy_sha256, msg.motion_name = meta.name, c.policy.artifact.sha256, \
                meta.motion.name
        msg.missed_ticks, msg.lowstate_crc_errors = s["missed"], s["crc_errors"]
        msg.inference_ms_p50 = s["inference_ms"].percentile(50)
        msg.inference_ms_p99 = s["inference_ms"].percentile(99)
        msg.loop_jitter_ms_p99 = s["jitter_ms"].percentile(99)
        msg.lowstate_to_lowcmd_ms_p50 = s["state_to_cmd_ms"].percentile(50)
        msg.lowstate_to_lowcmd_ms_p99 = s["state_to_cmd_ms"].percentile(99)
        msg.lowstate_age_ms = s["age_ms"]
        with self._lock:
            block = self._start_block
        with self._status_lock:  # the tick's mode, phase and count, published in tick order
            mode = self._status_mode
            msg.mode, msg.mode_name, msg.phase, msg.tick = int(mode), mode.name, s["phase"], s["tick"]
            msg.fault = c.fault or (block if mode is Mode.ZERO_TORQUE else "")
            msg.header.stamp = self.get_clock().now().to_msg()
            self._status_pub.publish(msg)

    def _publish_diagnostics(self) -> None:
        s, c = self.stats, self.controller
        level = DiagnosticStatus.OK
        if c.mode is Mode.DAMPING or s["age_ms"] < 0:
            level = DiagnosticStatus.ERROR
        elif s["missed"] or s["crc_errors"] or s["age_ms"] > self.values["stale_warn_ms"]:
            level = DiagnosticStatus.WARN
        values = {"mode": c.mode.name, "fault": c.fault, "ticks": s["tick"], "missed_ticks": s["missed"],
                  "loop_jitter_ms_p99": f"{s['jitter_ms'].percentile(99):.3f}",
                  "inference_ms_p99": f"{s['inference_ms'].percentile(99):.3f}",
                  "lowstate_age_ms": f"{s['age_ms']:.1f}", "lowstate_crc_errors": s["crc_errors"]}
        status = DiagnosticStatus(level=level, name="asap_policy: control loop",
                                  hardware_id="unitree_g1", message=c.fault or c.mode.name,
                                  values=[KeyValue(key=k, value=str(x)) for k, x in values.items()])
        msg = DiagnosticArray(status=[status, self._motor_diagnostics()])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(msg)

    def _motor_diagnostics(self) -> DiagnosticStatus:
        """Temperatures and fault words of the newest /lowstate (see asap_policy.motor_health)."""
        with self._lock:
            raw = self._raw_state
        status = DiagnosticStatus(name="asap_policy: motors", hardware_id="unitree_g1")
        if raw is None:
            status.level, status.message = DiagnosticStatus.STALE, "no /lowstate yet"
            return status
        try:
            health = motor_health(raw[0])
        except ValueError as e:
            status.level, status.message = DiagnosticStatus.ERROR, f"undecodable /lowstate: {e}"
            return status
        status.level, status.message = bytes([health.level]), health.message
        status.values = [KeyValue(key=k, value=v) for k, v in health.values.items()]
        return status

    def shutdown(self, crashed: bool = False) -> None:
        """Stop the threads; leave the robot damped if it was under stiffness control, or whatever
        the mode if the node is going down on an unexpected error."""
        self._running = False
        for t in self._threads:
            t.join(timeout=1.0)
        self._loader.close()
        if (crashed or self.controller.mode in ACTIVE_MODES) and rclpy.ok(context=self.context):
            for _ in range(3):
                self._send(MotorCommand.damping(self.values["damping_kd"]), self._now_ns())


def _standing_state() -> RobotState:
    """The robot standing at the default pose: the dry run's state before any LowState."""
    return RobotState(q=g1.default_pose(g1.MOTOR_ORDER), dq=np.zeros(g1.NUM_MOTORS),
                      quat_wxyz=np.array([1.0, 0, 0, 0]), gyro_b=np.zeros(3))


def _own_gid(before: set[bytes], after: set[bytes]) -> bytes:
    """The GID of the /lowcmd publisher that appeared between two graph snapshots: ours (the graph
    cache lists local endpoints at once). Ambiguous only if another appeared in those microseconds."""
    new = after - before
    if len(new) != 1:
        raise RuntimeError(f"cannot tell this node's /lowcmd publisher among {len(new)} new ones; "
                           "another node created one at the same moment: stop it and restart")
    return new.pop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(args: list[str] | None = None) -> None:
    """Run the node until SIGINT/SIGTERM; then leave an actively held robot damped. An error that
    escapes the executor ends the process too, after the same damping commands (never in silence)."""
    # rclpy's own handlers would invalidate the context before the final damping command goes out
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGTERM, _interrupt)
    node, crashed = None, False
    try:
        node = PolicyNode()
        executor = InlineExecutor(offload=node.offloaded_callbacks, on_error=node.internal_error)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        crashed = True
        raise
    finally:
        if node is not None:
            node.shutdown(crashed=crashed)
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
