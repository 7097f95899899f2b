"""The policy node's control loop without ROS: deadlines, the writer and its stall watchdog, request
hand-over (mode events, hot swaps), the safe paths (NaN action, non-finite command, internal error,
stop), all on a clock the test moves. Commands are read back from the LowCmd bytes the loop publishes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from asap_core import g1
from asap_core.artifact import load_artifact
from asap_core.control import ControlCfg, Controller, LoadedPolicy, MotorCommand
from asap_core.modes import Event, Mode
from asap_core.testing import policies
from asap_core.wire import LOWCMD, LOWSTATE
from asap_policy.control_loop import ControlLoop, LoopCfg, Outputs, TickReport, TickRequest
from asap_testing.dds import wait_for
from asap_testing.ros_free import ros_imports, run_with_ros_blocked

PKG = Path(__file__).resolve().parents[1] / "asap_policy"
ROS_FREE = ("control_loop", "loader", "motor_health", "params")
N = 23  # joints of the test policies (ASAP's 23-DoF layout)
DT = 0.02
PERIOD = round(DT * 1e9)
MS = 1_000_000
DAMPING_KD = 8.0
DEFAULT_Q = g1.default_pose(g1.MOTOR_ORDER, "asap")


def test_the_loop_and_its_helpers_never_import_ros() -> None:
    for stem in ROS_FREE:
        path = PKG / f"{stem}.py"
        assert not ros_imports(path), f"{path.name} imports {ros_imports(path)}"
    run_with_ros_blocked(f"asap_policy.{m}" for m in ROS_FREE)


# -- the loop on a test clock, its outputs captured ----------------------------------------------


class ManualClock:
    """The loop's clock (ns), moved only by the test."""

    def __init__(self) -> None:
        self.t = 1000 * PERIOD

    def __call__(self) -> int:
        return self.t


@dataclass
class Log:
    lines: list[tuple[str, str]] = field(default_factory=list)

    def info(self, message: str, **kwargs: float) -> None:
        self.lines.append(("info", message))

    def warning(self, message: str, **kwargs: float) -> None:
        self.lines.append(("warning", message))

    def error(self, message: str, **kwargs: float) -> None:
        self.lines.append(("error", message))

    def errors(self) -> list[str]:
        return [m for level, m in self.lines if level == "error"]


def decode(data: bytes) -> MotorCommand:
    motors = LOWCMD.from_cdr(data)["motor_cmd"][: g1.NUM_MOTORS]
    return MotorCommand(q=motors["q"].astype(float), kp=motors["kp"].astype(float),
                        kd=motors["kd"].astype(float))


def is_damping(cmd: MotorCommand) -> bool:
    return not cmd.kp.any() and np.allclose(cmd.kd, DAMPING_KD)


def lowstate(q: np.ndarray = DEFAULT_Q, tick: int = 0, crc_ok: bool = True) -> bytes:
    image = np.zeros((), dtype=LOWSTATE.dtype)
    image["motor_state"]["q"][: g1.NUM_MOTORS] = q
    image["imu_state"]["quaternion"] = (1.0, 0.0, 0.0, 0.0)
    image["mode_machine"], image["tick"] = 5, tick  # a 29-DoF G1
    image["crc"] = LOWSTATE.crc(image) + (0 if crc_ok else 1)
    return LOWSTATE.to_cdr(image)


class Rig:
    """A loop, its clock, what it published and logged, and a robot that answers every tick."""

    def __init__(self, policy: LoadedPolicy | None, **cfg: object) -> None:
        self.clock, self.log = ManualClock(), Log()
        self.sent: list[bytes] = []
        self.reports: list[TickReport] = []
        self.up = True
        outputs = Outputs(send_lowcmd=self.sent.append, tick_done=self.reports.append, ok=lambda: self.up)
        controller = Controller(ControlCfg(control_dt=DT, ramp_s=0.1, damping_kd=DAMPING_KD), policy)
        self.loop = ControlLoop(LoopCfg(**cfg), controller, self.clock, self.log, outputs)
        self.loop.block_start("")  # the node's graph check: no other /lowcmd publisher
        self.deadline = self.clock.t + PERIOD
        self.robot_q = DEFAULT_Q.copy()
        self.robot_tick = 0

    def tick(self, late_ns: int = 0, state: bool = True) -> TickReport:
        """The tick due next, woken ``late_ns`` late; a fresh state 1 ms before it (``state``)."""
        if state:
            self.clock.t = self.deadline + late_ns - MS
            self.robot_tick += 1
            self.loop.on_lowstate(lowstate(self.robot_q, self.robot_tick))
        self.clock.t = self.deadline + late_ns
        before = len(self.reports)
        self.deadline = self.loop.control_step(self.deadline)
        assert len(self.reports) == before + 1, "no tick ran"
        return self.reports[-1]

    def request(self, event: Event) -> TickRequest:
        r = TickRequest(event=event)
        self.loop.queue(r)
        self.tick()
        assert r.done.is_set()
        return r

    def to_hold(self) -> None:
        assert self.request(Event.REQUEST_RAMP).result.accepted
        for _ in range(10):
            if self.tick().out.mode is Mode.HOLD:
                return
        raise AssertionError(f"no HOLD after RAMP: {self.loop.controller.mode}")

    def last_command(self) -> MotorCommand:
        return decode(self.sent[-1])


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], LoadedPolicy]:
    """name -> a fresh LoadedPolicy: zero (holds the default), plus (0.4 on every joint), nan (NaN past
    phase 0.5 of a 0.2 s motion)."""
    d = tmp_path_factory.mktemp("policies")
    files = {"zero": policies.write(d / "zero.onnx", policies.constant(N, 0.0), motion_s=10.0, name="zero"),
             "plus": policies.write(d / "plus.onnx", policies.constant(N, 0.4), motion_s=10.0, name="plus"),
             "nan": policies.write(d / "nan.onnx", policies.nan_after(N, 0.5), motion_s=0.2, name="nan")}
    return lambda name: LoadedPolicy(load_artifact(files[name]))


# -- deadlines ------------------------------------------------------------------------------------


def test_a_late_wake_up_counts_the_skipped_deadlines_as_missed_and_keeps_the_grid(policy_file) -> None:
    rig = Rig(policy_file("zero"))
    first = rig.deadline
    rig.tick()
    assert rig.loop.stats.missed == 0 and rig.deadline == first + PERIOD
    rig.tick(late_ns=2 * PERIOD + PERIOD // 2)  # woke 2.5 periods late: two deadlines passed unserved
    assert rig.loop.stats.missed == 2
    assert rig.deadline == first + 4 * PERIOD  # the next deadline stays on the grid, after now
    assert rig.loop.stats.jitter_ms.percentile(100) == pytest.approx(2.5 * DT * 1e3)
    rig.tick()
    assert rig.loop.stats.missed == 2 and rig.loop.stats.tick == 3


def test_a_clock_jump_back_re_anchors_without_a_tick_and_a_jump_forward_without_a_miss(policy_file) -> None:
    rig = Rig(policy_file("zero"))
    rig.tick()
    rig.clock.t = rig.deadline - 100 * 10**9  # a simulator reset rewound the clock by 100 s
    ticks = rig.loop.stats.tick
    rig.deadline = rig.loop.control_step(rig.deadline)
    assert rig.loop.stats.tick == ticks, "a tick ran on the rewound clock"
    assert rig.deadline == (rig.clock.t // PERIOD + 1) * PERIOD
    assert any("jumped back" in m for level, m in rig.log.lines if level == "warning")
    rig.tick()
    rig.tick(late_ns=5 * 10**9)  # a 5 s jump forward (a pause): re-anchored, not 250 missed ticks
    assert rig.loop.stats.missed == 0 and rig.loop.stats.tick == ticks + 2
    assert rig.deadline % PERIOD == 0 and rig.deadline > rig.clock.t


def test_state_age_and_state_to_command_latency_are_measured_on_the_loop_clock(policy_file) -> None:
    rig = Rig(policy_file("zero"))
    report = rig.tick()  # the state arrived 1 ms before the tick
    assert report.received_ns == rig.clock.t - MS
    assert rig.loop.stats.age_ms == pytest.approx(1.0)
    assert rig.loop.stats.state_to_cmd_ms.percentile(50) == pytest.approx(1.0)
    rig.tick(state=False)  # no new state: the tick runs on the previous one, a period older
    assert rig.loop.stats.age_ms == pytest.approx(1.0 + DT * 1e3)
    assert rig.loop.stats.tick == 2


# -- command writer and stall watchdog ------------------------------------------------------------


def test_the_writer_repeats_the_latest_command_between_ticks(policy_file) -> None:
    rig = Rig(policy_file("zero"), writer_rate_hz=500.0)
    rig.to_hold()
    hold, count = rig.sent[-1], len(rig.sent)
    rig.loop.write(rig.clock.t + MS)  # less than 0.9 writer periods since the tick's command
    assert len(rig.sent) == count
    for k in range(1, 9):
        rig.loop.write(rig.clock.t + 2 * k * MS)
    assert rig.sent[count:] == [hold] * 8


def test_a_stalled_control_loop_is_damped_by_the_writer_and_latched_by_the_next_tick(policy_file) -> None:
    rig = Rig(policy_file("zero"), writer_rate_hz=500.0, stall_timeout_ms=100.0)
    rig.to_hold()
    assert not is_damping(rig.last_command())
    last_tick = rig.clock.t
    for after_ms in (99, 150, 152):  # within the timeout a repeat; then the writer damps on its own
        rig.clock.t = last_tick + after_ms * MS
        rig.loop.write(rig.clock.t)
        assert is_damping(rig.last_command()) is (after_ms > 100), after_ms
    assert rig.log.errors() == ["control loop stalled for 150 ms: writer sends DAMPING"]  # once
    report = rig.tick(late_ns=rig.clock.t - rig.deadline)  # the loop wakes again
    assert report.out.mode is Mode.DAMPING and is_damping(rig.last_command())
    assert rig.loop.controller.fault == "control loop stalled for 152 ms"


def test_the_writer_does_not_damp_a_robot_that_is_not_held(policy_file) -> None:
    rig = Rig(policy_file("zero"), writer_rate_hz=500.0, stall_timeout_ms=100.0)
    rig.tick()  # ZERO_TORQUE
    rig.loop.write(rig.clock.t + 500 * MS)
    assert rig.loop.controller.mode is Mode.ZERO_TORQUE and not decode(rig.sent[-1]).kd.any()
    assert rig.log.errors() == []


# -- requests and hot swap ------------------------------------------------------------------------


def test_mode_requests_are_answered_by_the_tick_that_applies_them(policy_file) -> None:
    rig = Rig(policy_file("zero"))
    refused = rig.request(Event.REQUEST_POLICY)
    assert not refused.result.accepted and refused.result.mode is Mode.ZERO_TORQUE
    rig.to_hold()
    assert not rig.tick().mode_changed
    accepted = rig.request(Event.REQUEST_POLICY)
    assert accepted.result.accepted and rig.reports[-1].out.mode is Mode.POLICY
    assert rig.reports[-1].mode_changed


def test_a_request_no_tick_takes_is_withdrawn_and_never_applied_later(policy_file) -> None:
    rig = Rig(policy_file("zero"))
    rig.tick()
    r = rig.loop.submit(TickRequest(event=Event.REQUEST_RAMP))  # no tick within the 1 s it waits
    assert r.result is None and not r.done.is_set()
    rig.tick()
    assert rig.loop.controller.mode is Mode.ZERO_TORQUE


def test_a_hot_swap_is_staged_by_the_next_tick_and_an_earlier_one_is_superseded(policy_file) -> None:
    rig = Rig(policy_file("zero"))
    rig.to_hold()
    rig.request(Event.REQUEST_POLICY)
    hold_q = rig.last_command().q
    first, second = TickRequest(policy=policy_file("zero")), TickRequest(policy=policy_file("plus"),
                                                                          blend_ticks=2)
    rig.loop.queue(first)
    rig.loop.queue(second)
    rig.tick()
    assert first.done.is_set() and second.done.is_set()
    assert first.swap == "superseded by a later load" and second.swap == ""
    assert rig.loop.controller.policy is second.policy
    plus_q = second.policy.joint_map.apply(second.policy.default_q + 0.4 * second.policy.scale,
                                           fill=hold_q)
    moved = [np.abs(rig.last_command().q - hold_q).max()]
    rig.tick()
    moved.append(np.abs(rig.last_command().q - hold_q).max())
    assert 0 < moved[0] < moved[1]  # blended over two ticks, then the new policy's target
    np.testing.assert_allclose(rig.last_command().q, plus_q, atol=1e-5)


# -- safe paths -----------------------------------------------------------------------------------


def test_a_nan_action_damps_in_the_same_tick_and_nothing_non_finite_is_sent(policy_file) -> None:
    rig = Rig(policy_file("nan"))
    rig.to_hold()
    rig.request(Event.REQUEST_POLICY)
    for _ in range(10):
        report = rig.tick()
        if report.out.mode is Mode.DAMPING:
            break
    assert report.out.fault.startswith("policy output non-finite")
    assert is_damping(rig.last_command()) and report.out.phase > 0.5
    assert all(np.isfinite(LOWCMD.from_cdr(d)["motor_cmd"]["q"]).all() for d in rig.sent)
    assert any(m.startswith("DAMPING latched: policy output non-finite") for m in rig.log.errors())


def test_a_non_finite_command_is_replaced_by_damping_at_the_last_gate(policy_file, monkeypatch) -> None:
    rig = Rig(policy_file("zero"))
    rig.to_hold()
    real_tick = rig.loop.controller.tick

    def bug_upstream(*args, **kwargs):  # a controller bug that lets a NaN target through
        out = real_tick(*args, **kwargs)
        q = out.command.q.copy()
        q[3] = np.nan
        out.command = MotorCommand(q=q, kp=out.command.kp, kd=out.command.kd)
        return out

    monkeypatch.setattr(rig.loop.controller, "tick", bug_upstream)
    rig.tick()
    assert is_damping(rig.last_command()) and not rig.last_command().q.any()
    monkeypatch.undo()
    report = rig.tick()
    assert report.out.mode is Mode.DAMPING and "non-finite" in rig.loop.controller.fault


def test_an_exception_in_the_tick_damps_at_once_and_latches(policy_file, monkeypatch) -> None:
    rig = Rig(policy_file("zero"))
    rig.to_hold()

    def broken(*args, **kwargs):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(rig.loop.controller, "tick", broken)
    rig.clock.t = rig.deadline
    rig.deadline = rig.loop.control_step(rig.deadline)
    assert is_damping(rig.last_command())
    assert rig.log.errors()[-1].startswith("internal error in the control tick, DAMPING")
    monkeypatch.undo()
    assert rig.tick().out.mode is Mode.DAMPING
    assert "internal error: ZeroDivisionError('planted')" in rig.loop.controller.fault


def test_crc_errors_are_counted_and_the_tick_uses_the_last_good_state(policy_file) -> None:
    rig = Rig(policy_file("zero"), check_lowstate_crc=True)
    good = rig.tick()
    rig.clock.t = rig.deadline - MS
    rig.loop.on_lowstate(lowstate(DEFAULT_Q + 0.1, tick=99, crc_ok=False))
    bad = rig.tick(state=False)
    assert rig.loop.stats.crc_errors == 1
    assert bad.state is good.state and bad.state.tick == good.state.tick


def test_nothing_is_sent_before_a_state_or_before_the_motion_switcher_releases(policy_file) -> None:
    rig = Rig(policy_file("zero"), wait_for_release=True)
    rig.tick(state=False)
    assert rig.sent == []  # no state: no mode_machine to echo
    rig.tick()
    assert rig.sent == []  # the built-in controller still owns the robot
    assert rig.loop.start_block == "waiting for the motion switcher release"
    rig.loop.motion_switcher_released(True, "no built-in mode active")
    rig.loop.block_start("")
    rig.tick()
    assert len(rig.sent) == 1 and rig.loop.start_block == ""


def test_stop_damps_a_held_robot_and_a_restart_begins_damped(policy_file) -> None:
    rig = Rig(policy_file("zero"))
    rig.to_hold()
    count = len(rig.sent)
    rig.loop.stop()
    assert len(rig.sent) == count + 3 and all(is_damping(decode(d)) for d in rig.sent[count:])
    rig.loop.write(rig.clock.t + 500 * MS)  # a restarted writer before the first tick: nothing to repeat
    assert len(rig.sent) == count + 3
    report = rig.tick()  # the first tick after a restart
    assert report.out.mode is Mode.DAMPING and rig.loop.controller.fault == "stopped in HOLD: damped"
    assert is_damping(rig.last_command())


def test_stop_sends_nothing_for_a_robot_in_zero_torque(policy_file) -> None:
    rig = Rig(policy_file("zero"))
    rig.tick()
    count = len(rig.sent)
    rig.loop.stop()
    assert len(rig.sent) == count
    assert rig.tick().out.mode is Mode.ZERO_TORQUE


def test_the_threads_tick_on_the_steady_clock_until_stopped(policy_file) -> None:
    sent: list[bytes] = []
    reports: list[TickReport] = []
    loop = ControlLoop(LoopCfg(writer_rate_hz=200.0), Controller(ControlCfg(control_dt=DT),
                                                                 policy_file("zero")),
                       time.monotonic_ns, Log(), Outputs(sent.append, reports.append, lambda: True))
    loop.on_lowstate(lowstate())
    loop.start()
    try:
        deadline = time.monotonic() + 10.0
        while len(reports) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        loop.stop()
    assert len(reports) >= 5 and [r.tick for r in reports] == list(range(1, len(reports) + 1))
    assert not [t for t in threading.enumerate() if t.name in ("control", "writer")]
    count = len(reports)
    time.sleep(3 * DT)
    assert len(reports) == count, "a tick ran after stop()"


def test_under_sim_time_a_tick_waits_for_its_own_lowstate_while_the_simulator_counts_ms(policy_file) -> None:
    clock, sent, reports = ManualClock(), [], []
    loop = ControlLoop(LoopCfg(writer_rate_hz=0.0, sim_time=True),
                       Controller(ControlCfg(control_dt=DT), policy_file("zero")), clock, Log(),
                       Outputs(sent.append, reports.append, lambda: True))
    start_ms = clock.t // MS
    loop.on_lowstate(lowstate(tick=start_ms))
    loop.start()
    try:
        assert wait_for(lambda: len(reports) == 1, 10.0)
        # a lock-step twin's next period: its states up to 2 ms before the deadline arrived, then its
        # /clock reached the deadline; the deadline's own state is late (a starved or lost best-effort sample)
        loop.on_lowstate(lowstate(tick=start_ms + 18))
        clock.t += PERIOD
        loop.notify_clock()
        time.sleep(0.3)  # six times the wait for a simulator whose ticks are not ms
        assert len(reports) == 1 and len(sent) == 1, "ticked on a state of the previous period"
        loop.on_lowstate(lowstate(tick=start_ms + 20))  # delivered (or re-sent by the twin)
        assert wait_for(lambda: len(reports) == 2, 10.0)
        assert reports[1].state is not None and reports[1].state.tick == start_ms + 20
        # a simulator whose LowState.tick is not its time in ms: the tick runs on its newest state soon
        loop.on_lowstate(lowstate(tick=7))
        clock.t += PERIOD
        loop.notify_clock()
        assert wait_for(lambda: len(reports) == 3, 0.5)
        assert reports[2].state is not None and reports[2].state.tick == 7
    finally:
        loop.stop()
