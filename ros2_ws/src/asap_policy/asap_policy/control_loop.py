"""The policy node's control loop, ROS-free: ticks on absolute deadlines, the command writer and its
stall watchdog, requests handed to the tick (SetMode events, hot-swapped policies), the last gate
before /lowcmd, and the loop's statistics.

The node (``asap_policy.policy_node``) owns everything ROS: it stores each raw /lowstate here
(:meth:`ControlLoop.on_lowstate`), hands requests over (:meth:`ControlLoop.submit`) and publishes what
reaches :class:`Outputs`. Time comes from the ``now_ns`` callable it passes in (steady time, or sim
time under ``use_sim_time``), so a test drives every decision with a clock of its own through
:meth:`ControlLoop.control_step` and :meth:`ControlLoop.write`, without ROS and without threads.

Nothing raises out of the loop: a fault or an internal error (in a tick, in the writer) latches
DAMPING, logged once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import InitVar, dataclass, field
from typing import Protocol

import numpy as np

from asap_core import g1
from asap_core.control import Controller, LoadedPolicy, MotorCommand, RobotState, TickOutput
from asap_core.modes import ACTIVE_MODES, Event, Mode, Transition
from asap_core.safety import Staleness
from asap_core.wire import NonFiniteCommandError, decode_lowstate, encode_lowcmd, lowstate_tick

STATS_WINDOW_S = 60.0
"""Latency and jitter percentiles cover this many seconds of ticks."""
SIM_CLOCK_POLL_S = 0.1
"""Under sim time the threads re-check the clock at least this often (shutdown, missed jumps)."""
SYNC_STATE_WAIT_S = 0.05
"""Under sim time, how long (wall) a tick waits for the LowState of its own sim time before it runs on
the newest one (a simulator whose ticks are not its sim time in ms costs this much per tick)."""
LOCKSTEP_STATE_WAIT_S = 0.8
"""The same wait when the newest LowState is at most one period older than the tick: the simulator's
ticks are its sim time, so the state is late or lost, and a lock-step twin re-sends it while it waits
for our command (its ``resend_s``, 0.5 s). Longer than that, so that a starved or dropped best-effort
/lowstate costs a pause, not a tick on an old state (seen on 2 busy cores: 3 such ticks in a row
latched 'stale'); shorter than a SetMode request's wait for a tick (1 s), which it would fail."""
JOIN_TIMEOUT_S = 1.0
"""How long :meth:`ControlLoop.stop` waits for each thread."""
SAFE_STOP_COMMANDS = 3
"""Damping commands :meth:`ControlLoop.stop` sends (one may be lost while DDS tears down)."""


@dataclass(frozen=True, kw_only=True)
class LoopCfg:
    """How the loop runs (the tick itself is configured by the controller's ``ControlCfg``)."""

    writer_rate_hz: float = 500.0
    """Command writer rate: repeats the latest command between ticks; 0 = ticks only."""
    stall_timeout_ms: float = 100.0
    """The writer sends DAMPING on its own when no tick completed for this long."""
    check_lowstate_crc: bool = True
    """Drop LowStates whose CRC does not match (counted)."""
    sim_time: bool = False
    """``now_ns`` is a simulator's time: wait on :meth:`ControlLoop.notify_clock`, answer a lock-step
    twin's re-sent states, keep deadlines on multiples of the period."""
    wait_for_release: bool = False
    """Send nothing until :meth:`ControlLoop.motion_switcher_released` (the real robot)."""


class Log(Protocol):
    """The logger the loop reports to (rclpy's node logger fits)."""

    def info(self, message: str, *, throttle_duration_sec: float = ...) -> object: ...

    def warning(self, message: str, *, throttle_duration_sec: float = ...) -> object: ...

    def error(self, message: str, *, throttle_duration_sec: float = ...) -> object: ...


@dataclass(frozen=True)
class TickReport:
    """One finished tick, for the node to publish (record, joint states, status on a mode change)."""

    out: TickOutput
    tick: int
    """Ticks run so far, this one included."""
    state: RobotState | None
    tau_est: np.ndarray
    received_ns: int | None
    """When the tick's state arrived, on the loop's clock (None: no state yet)."""
    mode_changed: bool


@dataclass(frozen=True)
class Outputs:
    """Where the loop's results go (the node: its ROS publishers)."""

    send_lowcmd: Callable[[bytes], None]
    tick_done: Callable[[TickReport], None]
    ok: Callable[[], bool]
    """False once nothing can be published any more (ROS shut down)."""


@dataclass
class TickRequest:
    """A request waiting for the control thread: a SetMode event or a staged policy."""

    event: Event | None = None
    policy: LoadedPolicy | None = None
    blend_ticks: int | None = None
    done: threading.Event = field(default_factory=threading.Event)
    result: Transition | None = None
    swap: str | None = None
    """The swap's outcome for a staged policy: "" swapped in, else why it was refused."""


class Window:
    """A window of recent samples with percentiles (append and copy are atomic under the GIL)."""

    def __init__(self, size: int) -> None:
        self._values: deque[float] = deque(maxlen=size)

    def add(self, value: float) -> None:
        self._values.append(value)

    def percentile(self, q: float) -> float:
        values = list(self._values)
        return float(np.percentile(values, q)) if values else 0.0


@dataclass
class LoopStats:
    """What the loop measured, for PolicyStatus and /diagnostics; written by the control thread.
    ``tick``, ``phase`` and ``mode`` change together under :meth:`ControlLoop.finished_tick`."""

    window_ticks: InitVar[int]
    """Ticks the percentile windows cover."""
    tick: int = 0
    """Ticks run so far."""
    missed: int = 0
    """Deadlines skipped by late wake-ups (cumulative)."""
    crc_errors: int = 0
    """LowStates dropped for a bad CRC (cumulative)."""
    age_ms: float = 0.0
    """Age of the newest tick's state (ms); -1 when it had none."""
    phase: float = 0.0
    """Phase of the newest tick that ran the policy (kept after POLICY ends)."""
    mode: Mode = Mode.ZERO_TORQUE
    """The mode the newest tick left the controller in."""
    inference_ms: Window = field(init=False)
    jitter_ms: Window = field(init=False)
    """How late each tick woke (ms)."""
    state_to_cmd_ms: Window = field(init=False)
    """LowState received -> LowCmd published (ms)."""

    def __post_init__(self, window_ticks: int) -> None:
        self.inference_ms, self.jitter_ms, self.state_to_cmd_ms = (Window(window_ticks) for _ in range(3))


class ControlLoop:
    """The loop's state and threads (see the module docstring). ``controller`` is touched by the
    control thread only, except for reads of its ``mode``, ``fault`` and ``policy``."""

    def __init__(self, cfg: LoopCfg, controller: Controller, now_ns: Callable[[], int], log: Log,
                 outputs: Outputs) -> None:
        self.cfg = cfg
        self.controller = controller
        self.now_ns = now_ns
        self.log = log
        self.outputs = outputs
        self.period_ns = round(controller.cfg.control_dt * 1e9)
        self.stats = LoopStats(round(STATS_WINDOW_S / controller.cfg.control_dt), mode=controller.mode)
        # shared state (guarded by _lock unless noted)
        self._lock = threading.Lock()
        self._publish_lock = threading.Lock()
        # Status comes from the control thread (on mode changes) and the node's timer: built and
        # published under one lock from what the last finished tick reported, so modes never arrive
        # out of order (the recorder opens and closes episodes on them) and mode and phase agree.
        self._status_lock = threading.Lock()
        # under sim time the threads wait on this condition, notified on every /clock step and /lowstate
        self._sim_progress = threading.Condition()
        self._raw_state: tuple[bytes, int] | None = None  # newest /lowstate bytes, receive time (ns)
        self._states_received = 0  # /lowstate samples so far (counted under sim time only)
        self._answered_tick = -1  # LowState.tick of the state the last command answered
        self._good_state: tuple[RobotState, int, np.ndarray] | None = None  # + receive ns, tau_est
        self._requests: list[TickRequest] = []
        self._command: tuple[bytes, int, int] | None = None  # wire bytes, tick time ns, publish ns
        self._external_fault = ""  # a fault found outside the tick (writer, graph check, error)
        self._start_block = "starting up"  # why the robot may not leave ZERO_TORQUE now
        self._released = not cfg.wait_for_release
        self._release_block = "" if self._released else "waiting for the motion switcher release"
        self._running = False
        self._threads: list[threading.Thread] = []

    # -- threads --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the control thread and, if ``writer_rate_hz`` > 0, the command writer."""
        self._running = True
        self._threads = [threading.Thread(target=self._run_control, name="control", daemon=True)]
        if self.cfg.writer_rate_hz > 0:
            self._threads.append(threading.Thread(target=self._run_writer, name="writer", daemon=True))
        for t in self._threads:
            t.start()

    def stop(self, crashed: bool = False) -> None:
        """Stop the threads; leave the robot damped if it was under stiffness control, or whatever
        the mode if the node is going down on an unexpected error. A robot left damped stays so:
        after a new :meth:`start` the writer has nothing to repeat until the first tick, which
        latches DAMPING."""
        self._running = False
        self._notify_sim_progress()
        for t in self._threads:
            t.join(timeout=JOIN_TIMEOUT_S)
        active = self.controller.mode in ACTIVE_MODES
        if (crashed or active) and self.outputs.ok():
            for _ in range(SAFE_STOP_COMMANDS):
                self._send(MotorCommand.damping(self.controller.cfg.damping_kd), self.now_ns())
        with self._publish_lock:
            self._command = None
        if active:
            with self._lock:
                self._external_fault = f"stopped in {self.controller.mode.name}: damped"

    def _run_control(self) -> None:
        """The control thread: :meth:`control_step` at every deadline until :meth:`stop`."""
        deadline = self._first_deadline()
        while self._sleep_until(deadline, self.period_ns, for_state=True) and self.outputs.ok():
            deadline = self.control_step(deadline)

    def _run_writer(self) -> None:
        """The writer thread: :meth:`write` every writer period until :meth:`stop`."""
        period = round(1e9 / self.cfg.writer_rate_hz)
        deadline = self.now_ns() + period
        while self._sleep_until(deadline, period) and self.outputs.ok():
            now = self.now_ns()
            # on time: the next period; late, or the sim clock jumped back: one period from now
            deadline = deadline + period if deadline <= now < deadline + period else now + period
            try:
                self.write(now)
            except Exception as e:
                self.internal_error(e, "the command writer")

    # -- inputs ---------------------------------------------------------------------------------

    def on_lowstate(self, data: bytes) -> None:
        """Store a raw /lowstate sample (decoded by the next tick)."""
        now = self.now_ns()
        with self._lock:
            self._raw_state = (data, now)
        if self.cfg.sim_time:
            self._states_received += 1
            self._notify_sim_progress()

    def notify_clock(self, _jump: object = None) -> None:
        """Sim time moved (a /clock step): wake the threads waiting for it."""
        self._notify_sim_progress()

    def newest_lowstate(self) -> bytes | None:
        """The newest raw /lowstate, whatever its CRC (for motor diagnostics)."""
        with self._lock:
            raw = self._raw_state
        return None if raw is None else raw[0]

    def current_state(self) -> RobotState:
        """The newest good state, or the robot standing at the default pose if none arrived."""
        with self._lock:
            good = self._good_state
        return standing_state() if good is None else good[0]

    def block_start(self, conflict: str) -> None:
        """The node's graph check: ``conflict`` (another /lowcmd publisher, "" = none) blocks leaving
        ZERO_TORQUE and, in an active mode, is a fault: two controllers fight over the motors."""
        with self._lock:
            self._start_block = self._release_block or conflict
            if conflict and self.controller.mode in ACTIVE_MODES and not self._external_fault:
                self._external_fault = conflict

    def motion_switcher_released(self, ok: bool, message: str) -> None:
        """The outcome of releasing Unitree's built-in controller: commands may go out once ``ok``."""
        with self._lock:
            self._released = ok
            self._release_block = "" if ok else f"motion switcher not released: {message}"

    @property
    def released(self) -> bool:
        """Commands may go out (the built-in controller no longer owns the robot)."""
        return self._released

    @property
    def start_block(self) -> str:
        """Why the robot may not leave ZERO_TORQUE now ("" = it may)."""
        with self._lock:
            return self._start_block

    def queue(self, request: TickRequest) -> None:
        """Hand a request to the next tick, without waiting (``request.done`` is set once applied)."""
        with self._lock:
            self._requests.append(request)

    def submit(self, request: TickRequest) -> TickRequest:
        """Hand a request to the control thread and wait for the tick that applies it; without a tick
        in time the request is withdrawn, so a refusal never takes effect later (a paused clock)."""
        timeout_s = max(1.0, 10 * self.controller.cfg.control_dt)
        self.queue(request)
        if not request.done.wait(timeout=timeout_s):
            with self._lock:
                withdrawn = request in self._requests
                if withdrawn:
                    self._requests.remove(request)
            if not withdrawn:  # a tick took it just now: its answer is moments away
                request.done.wait(timeout=timeout_s)
        return request

    def internal_error(self, error: BaseException, where: str = "a callback") -> None:
        """An unexpected exception anywhere in the node: log it, send DAMPING now, latch it next tick."""
        self.log.error(f"internal error in {where}, DAMPING: {error!r}")
        self._latch(f"internal error in {where}: {error!r}")
        if self.outputs.ok():
            self._send(MotorCommand.damping(self.controller.cfg.damping_kd), self.now_ns())

    @contextlib.contextmanager
    def finished_tick(self) -> Iterator[LoopStats]:
        """The stats held still between ticks: a status built and published inside leaves in tick
        order, with the mode, phase and count of one tick."""
        with self._status_lock:
            yield self.stats

    # -- control --------------------------------------------------------------------------------

    def control_step(self, deadline_ns: int) -> int:
        """Run the tick due at ``deadline_ns`` (now is the clock's) and return the next deadline.

        A late wake-up counts the deadlines it skipped as missed ticks; a jump forward of more than
        1 s (a sim reset, a pause) re-anchors without a miss; a jump back (a sim reset) re-anchors on
        the next period without a tick, which also lets the state of the new time arrive."""
        period = self.period_ns
        now = self.now_ns()
        late = now - deadline_ns
        if late < -period:
            self.log.warning(f"sim clock jumped back {-late / 1e9:.3f} s: ticks re-anchored")
            return (now // period + 1) * period
        if late > 1e9:
            deadline_ns, late = (now // period) * period, 0
        skipped = late // period
        if skipped:
            self.stats.missed += skipped
            deadline_ns += skipped * period
        self.stats.jitter_ms.add(late / 1e6)
        self._guarded_tick(now)
        return deadline_ns + period

    def _first_deadline(self) -> int:
        period = self.period_ns
        if not self.cfg.sim_time:
            return self.now_ns() + period
        # Sim time may start at 0 and only advances when the twin steps; a lock-step twin waits for
        # a command after each state whose time is a multiple of the period. So start once a
        # LowState is in, and keep deadlines on multiples of the period.
        while self._running and self._raw_state is None:
            time.sleep(0.01)
        return (self.now_ns() // period) * period

    def _guarded_tick(self, now_ns: int) -> None:
        try:
            self._tick(now_ns)
        except Exception as e:  # never let the loop die: damp, latch, log once
            if not self.outputs.ok():
                return  # shutting down: nothing to publish on
            self.log.error(f"internal error in the control tick, DAMPING: {e!r}")
            self._latch(f"internal error: {e!r}")
            self._send(MotorCommand.damping(self.controller.cfg.damping_kd), now_ns)

    def _tick(self, now_ns: int) -> None:
        with self._lock:
            raw, requests, self._requests = self._raw_state, self._requests, []
            start_block, external_fault = self._start_block, self._external_fault
            self._external_fault = ""
        state, t_recv, tau = self._decode(raw)
        age = None if t_recv is None else (now_ns - t_recv) / 1e9
        staged = [r for r in requests if r.policy is not None]
        for r in staged[-1:]:  # loads run one at a time: at most one is staged
            assert r.policy is not None
            self.controller.stage(r.policy, r.blend_ticks)
        events = [r for r in requests if r.event is not None]
        previous_mode = self.controller.mode
        out = self.controller.tick(state, age, [r.event for r in events if r.event is not None], start_block,
                                   external_fault)
        if state is not None and t_recv is not None:  # (they come together)
            self._send(out.command, now_ns)
            self._answered_tick = state.tick
            self.stats.state_to_cmd_ms.add((self.now_ns() - t_recv) / 1e6)
        for r, result in zip(events, out.results, strict=True):
            r.result = result
        for r in staged:
            r.swap = out.swap if r is staged[-1] else "superseded by a later load"
        for r in (*events, *staged):
            r.done.set()
        self._after_tick(out, state, tau, t_recv, age, previous_mode)

    def _decode(self, raw: tuple[bytes, int] | None) -> tuple[RobotState | None, int | None, np.ndarray]:
        """The newest state with a good CRC (falling back to the previous good one)."""
        if raw is not None:
            s = decode_lowstate(raw[0], check_crc=self.cfg.check_lowstate_crc)
            if s.crc_ok:
                with self._lock:
                    self._good_state = (RobotState.from_lowstate(s), raw[1], s.tau_est)
            else:
                self.stats.crc_errors += 1
        with self._lock:
            good = self._good_state
        return (None, None, np.zeros(0)) if good is None else good

    def _after_tick(self, out: TickOutput, state: RobotState | None, tau: np.ndarray,
                    t_recv: int | None, age: float | None, previous_mode: Mode) -> None:
        s = self.stats
        with self._status_lock:
            s.tick += 1
            if out.observation is not None:
                s.phase = out.phase
            s.mode = self.controller.mode
        s.age_ms = -1.0 if age is None else age * 1e3
        if out.inference_s:
            s.inference_ms.add(out.inference_s * 1e3)
        if out.fault:
            self.log.error(f"DAMPING latched: {out.fault}")
        if out.staleness is Staleness.WARN and out.mode in ACTIVE_MODES and age is not None:
            self.log.warning(f"LowState {age * 1e3:.1f} ms old", throttle_duration_sec=1.0)
        mode_changed = self.controller.mode is not previous_mode
        if mode_changed:
            self.log.info(f"mode {previous_mode.name} -> {self.controller.mode.name}")
        self.outputs.tick_done(TickReport(out, s.tick, state, tau, t_recv, mode_changed))

    # -- commands -------------------------------------------------------------------------------

    def _send(self, cmd: MotorCommand, tick_ns: int) -> None:
        """Encode and publish ``cmd`` as the latest command; a non-finite field sends damping
        instead and latches the fault. Nothing goes out before a good LowState (no ``mode_machine``
        to echo) or while the built-in controller still owns the robot."""
        with self._lock:
            good, released = self._good_state, self._released
        if good is None or not released:
            return
        try:
            data = encode_lowcmd(mode_machine=good[0].mode_machine, q=cmd.q, kp=cmd.kp, kd=cmd.kd,
                                 dq=cmd.dq, tau=cmd.tau)
        except NonFiniteCommandError as e:  # a bug upstream: the last gate sends damping instead
            self.log.error(f"{e}; DAMPING", throttle_duration_sec=1.0)
            self._latch(str(e))
            data = self._damping_bytes(good[0].mode_machine)
        with self._publish_lock:
            self.outputs.send_lowcmd(data)
            self._command = (data, tick_ns, self.now_ns())

    def write(self, now_ns: int) -> None:
        """The writer's turn: repeat the latest command if a writer period passed since it went
        out, or damp on our own if no tick completed for ``stall_timeout_ms`` in an active mode."""
        with self._publish_lock:
            last = self._command
        if last is None:
            return
        data, tick_ns, published_ns = last
        period = round(1e9 / self.cfg.writer_rate_hz)
        if now_ns - tick_ns > self.cfg.stall_timeout_ms * 1e6 and self.controller.mode in ACTIVE_MODES:
            self._stalled(now_ns - tick_ns)
        elif now_ns - published_ns >= 0.9 * period:
            with self._publish_lock:
                if self._command is last:
                    self.outputs.send_lowcmd(data)
                    self._command = (data, tick_ns, now_ns)

    def _stalled(self, since_ns: int) -> None:
        """The control loop stopped: damp on our own and make the next tick latch it."""
        with self._lock:
            first = not self._external_fault
            self._external_fault = f"control loop stalled for {since_ns / 1e6:.0f} ms"
            good = self._good_state
        if first:
            self.log.error(f"{self._external_fault}: writer sends DAMPING")
        if good is not None:
            data = self._damping_bytes(good[0].mode_machine)
            with self._publish_lock:
                self.outputs.send_lowcmd(data)

    def _damping_bytes(self, mode_machine: int) -> bytes:
        """A damping LowCmd that needs nothing from the state (q = 0: kp = 0 makes it irrelevant)."""
        cmd = MotorCommand.damping(self.controller.cfg.damping_kd)
        return encode_lowcmd(mode_machine=mode_machine, q=cmd.q, kp=cmd.kp, kd=cmd.kd)

    def _latch(self, fault: str) -> None:
        """Make the next tick latch DAMPING for ``fault`` (the first fault since the last tick wins)."""
        with self._lock:
            self._external_fault = self._external_fault or fault

    # -- waiting --------------------------------------------------------------------------------

    def _sleep_until(self, deadline_ns: int, period_ns: int, *, for_state: bool = False) -> bool:
        """Sleep until ``deadline_ns`` on the loop's clock; False once stopped. Returns early when
        sim time is more than two periods behind the deadline: the clock jumped back (a simulator
        reset) and the caller re-anchors, instead of waiting for sim time to catch up. Under sim time
        ``for_state`` (the control thread) then also waits for the LowState of the deadline.

        Steady time sleeps with ``time.sleep`` on CLOCK_MONOTONIC (rclpy's ``Clock.sleep_until``
        costs a jump-callback registration per call: ~40 % of a core at 500 Hz). Sim time waits on a
        condition that the node's one jump callback notifies after each /clock step
        (:meth:`notify_clock`). Not ``Clock.sleep_until``: it waits for the next jump without
        looking at the time, so a /clock that arrived between our check and its registration was
        lost, and a lock-step twin holding the clock at that sync state (re-sending the same time)
        was never answered: the graph stalled for good (seen in ~1 of 3 episodes on 2 busy cores).
        """
        if not self.cfg.sim_time:
            remaining = deadline_ns - self.now_ns()
            if remaining > 0:
                time.sleep(remaining / 1e9)
            return self._running
        with self._sim_progress:
            seen = self._states_received
            while self._running and (now := self.now_ns()) < deadline_ns:
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
            wanted_tick, t0 = round(deadline_ns / 1e6), time.monotonic()
            while for_state and self._running and (newest := self._newest_tick()) < wanted_tick:
                in_period = wanted_tick - newest <= period_ns / 1e6
                left = (LOCKSTEP_STATE_WAIT_S if in_period else SYNC_STATE_WAIT_S) - (time.monotonic() - t0)
                if left <= 0.0:
                    break
                self._sim_progress.wait(min(left, SIM_CLOCK_POLL_S))
        return self._running

    def _resend_command(self) -> None:
        with self._publish_lock:
            if self._command is not None:
                self.outputs.send_lowcmd(self._command[0])

    def _newest_tick(self) -> int:
        raw = self._raw_state
        return -1 if raw is None else lowstate_tick(raw[0])

    def _notify_sim_progress(self) -> None:
        with self._sim_progress:
            self._sim_progress.notify_all()


def standing_state() -> RobotState:
    """The robot standing at the default pose: the dry run's state before any LowState."""
    return RobotState(q=g1.default_pose(g1.MOTOR_ORDER), dq=np.zeros(g1.NUM_MOTORS),
                      quat_wxyz=np.array([1.0, 0, 0, 0]), gyro_b=np.zeros(3))
