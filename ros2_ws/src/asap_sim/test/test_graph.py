"""g1_sim in its own process, checked over DDS by this process: the issue's acceptance lines.

Every check decodes /lowstate with rclpy and asap_core (independent of the node's own encoder) and
waits for discovery and for simulated time instead of sleeping and hoping.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable

import mujoco
import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from asap_msgs.msg import WirelessRemote  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from unitree_hg.msg import LowCmd, LowState  # noqa: E402

from asap_core import g1, remote  # noqa: E402
from asap_core.crc import lowcmd_crc, lowstate_crc  # noqa: E402
from asap_sim.motor import MotorCommand  # noqa: E402
from asap_sim.twin import Twin  # noqa: E402
from asap_testing.dds import finish, spawn  # noqa: E402

pytestmark = pytest.mark.graph
IDLE_RAW_STEPS_PER_S = 22000
"""Raw mj_step rate of the twin's model below which this 2-core machine is busy with other work. Was 15000
for the implicitfast model; the Euler model with the drives in the engine steps ~1.5x faster on the same
machine (20.3k vs 13.5k/s measured back to back), so the same machine state now reads ~22000."""
BODY = g1.NUM_MOTORS
Responder = Callable[[LowState], LowCmd | None]


def lowcmd(q: np.ndarray, gains: str, mode_machine: int = 5, corrupt_crc: bool = False) -> LowCmd:
    """A LowCmd holding ``q`` with a named gain set, CRC by asap_core (or deliberately wrong)."""
    kp, kd = g1.gains(g1.MOTOR_ORDER, gains)
    msg = LowCmd(mode_machine=mode_machine)
    for i in range(BODY):
        m = msg.motor_cmd[i]
        m.mode, m.q, m.kp, m.kd = 1, float(q[i]), float(kp[i]), float(kd[i])
    msg.crc = lowcmd_crc(msg) ^ (1 if corrupt_crc else 0)
    return msg


def body_q(msg: LowState) -> np.ndarray:
    return np.array([m.q for m in msg.motor_state[:BODY]])


class SimUnderTest:
    """A g1_sim process and this process's view of it (spun on a background thread)."""

    def __init__(self, responder: Responder | None = None, listen: bool = True, rt_listener: bool = False,
                 **params: object) -> None:
        rclpy.init()
        self.node = rclpy.create_node("g1_sim_test_client")
        self.raw_states: list[tuple[float, bytes]] = []
        self.odometry: list[Odometry] = []
        self.joint_states: list[JointState] = []
        self.diagnostics: dict[str, str] = {}
        self.diagnostics_log: list[tuple[float, dict[str, str]]] = []
        self._responder = responder
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        if listen:
            self.node.create_subscription(LowState, "/lowstate", self._on_state, qos, raw=True)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, qos)
        self.cmd_pub = self.node.create_publisher(LowCmd, "/lowcmd", qos)
        self.remote_pub = self.node.create_publisher(WirelessRemote, "/sim/wireless_remote", qos)
        self.release_band = self.node.create_client(Trigger, "/sim/release_band")
        self.reset = self.node.create_client(Trigger, "/sim/reset")
        args = [f"{k}:={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items()]
        self.proc = spawn("-m asap_sim.g1_sim_node", "--ros-args", *[a for p in args for a in ("-p", p)])
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, args=(rt_listener,), daemon=True)
        self._thread.start()

    def _spin(self, realtime: bool) -> None:
        if realtime:  # the measuring instrument must not be what falls behind on a busy machine
            with contextlib.suppress(PermissionError):  # without CAP_SYS_NICE: normal scheduling
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(40))
        self.executor.spin()

    def watch_base(self) -> None:
        """Also record /odometry and /joint_states (the sim publishes them only when watched)."""
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(Odometry, "/odometry", self.odometry.append, qos)
        self.node.create_subscription(JointState, "/joint_states", self.joint_states.append, qos)

    def _on_state(self, data: bytes) -> None:
        self.raw_states.append((time.monotonic(), data))
        if self._responder is not None:  # a re-sent sync state means the answer was lost: answer again
            cmd = self._responder(deserialize_message(data, LowState))
            if cmd is not None:
                self.cmd_pub.publish(cmd)

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name == "g1_sim":  # /diagnostics is shared by every node
                self.diagnostics = {kv.key: kv.value for kv in status.values}
                self.diagnostics_log.append((time.monotonic(), self.diagnostics))

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                _, _, err = finish(self.proc, 1)
                raise AssertionError(f"timed out waiting for {what}; sim stderr:\n{err[-2000:]}")
            time.sleep(0.005)

    def last_state(self) -> LowState:
        return deserialize_message(self.raw_states[-1][1], LowState)

    def sim_time_s(self) -> float:
        return self.last_state().tick / 1000.0 if self.raw_states else 0.0

    def call(self, client) -> str:
        """Call a Trigger service of the sim, assert it succeeded, return its message."""
        assert client.wait_for_service(timeout_sec=10.0), f"{client.srv_name} not available"
        future = client.call_async(Trigger.Request())
        self.wait_until(future.done, 10.0, client.srv_name)
        assert future.result().success, future.result().message
        return future.result().message

    def call_release_band(self) -> None:
        self.call(self.release_band)

    def call_reset(self) -> str:
        return self.call(self.reset)

    def close(self) -> str:
        self.executor.shutdown()
        self.proc.send_signal(signal.SIGINT)  # a clean rclpy shutdown
        _, _, err = finish(self.proc, 10)
        self.node.destroy_node()
        rclpy.try_shutdown()
        return err


@pytest.fixture
def sims():
    started: list[SimUnderTest] = []

    def start(responder: Responder | None = None, **params: object) -> SimUnderTest:
        sim = SimUnderTest(responder, **params)
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.close()


@pytest.mark.slow
def test_realtime_lowstate_is_500_hz_for_30_s_with_valid_crcs(sims) -> None:
    """The loop thread runs SCHED_FIFO (rt_priority), as a robot-side deployment would; so does the
    subscriber that measures it (this machine is shared with other work)."""
    sim = sims(clock_mode="realtime", rt_priority=50, rt_listener=True)
    sim.wait_until(lambda: len(sim.raw_states) >= 50, 30.0, "the first /lowstate")
    start = len(sim.raw_states)
    sim.wait_until(lambda: len(sim.raw_states) > start and sim.raw_states[-1][0] - sim.raw_states[start][0]
                   >= 30.0, 45.0,
                   "30 s of /lowstate")
    window = sim.raw_states[start:]
    rate = (len(window) - 1) / (window[-1][0] - window[0][0])
    messages = [deserialize_message(data, LowState) for _, data in window]
    ticks = np.array([m.tick for m in messages])
    assert 490.0 <= rate <= 510.0, f"/lowstate at {rate:.1f} Hz over 30 s (500 Hz +- 2%)"
    assert all(m.crc == lowstate_crc(m) for m in messages), "a /lowstate with an invalid CRC"
    gaps = np.diff(ticks)
    assert gaps.min() == 2, "a state was repeated or out of order"
    lost = int(gaps.sum() / 2) - gaps.size  # the twin publishes every tick; losses are the transport's
    assert lost <= 0.01 * gaps.size, f"{lost} of {gaps.size} states lost in 30 s"
    assert {m.mode_machine for m in messages} == {5}


def test_virtual_remote_reaches_lowstate(sims) -> None:
    sim = sims(clock_mode="realtime")
    sim.wait_until(lambda: len(sim.raw_states) >= 10, 30.0, "the first /lowstate")
    sim.wait_until(lambda: sim.remote_pub.get_subscription_count() > 0, 10.0, "the remote subscription")
    sim.remote_pub.publish(WirelessRemote(keys=remote.keys_mask("L2", "B"), ly=0.5))
    sim.wait_until(lambda: remote.decode(sim.last_state().wireless_remote).is_pressed("L2", "B"), 5.0,
                   "L2+B in LowState.wireless_remote")
    assert remote.decode(sim.last_state().wireless_remote).ly == pytest.approx(0.5)


def _raw_mj_steps_per_s(seconds: float = 1.5) -> float:
    """mj_step alone on the twin's model, from a held standing state restored every 100 steps."""
    twin = Twin()
    kp, kd = g1.gains(g1.MOTOR_ORDER, "asap")
    twin.set_command(MotorCommand.position(g1.default_pose(g1.MOTOR_ORDER, "asap"), kp, kd))
    twin.step(250)
    data = mujoco.MjData(twin.model)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        mujoco.mj_copyData(data, twin.model, twin.data)
        mujoco.mj_step(twin.model, data, nstep=100)
        steps += 100
    return steps / (time.perf_counter() - start)


# Issue 3's acceptance line. The node steps at 0.36-0.42 of raw mj_step here (A/B builds alternated in
# one sitting; 0.26-0.29 before the band's mju_ calls, the CRC by byteswap + translate and rpy from
# tolist): 12.3-15.2x real time at raw 15-21k steps/s (implicitfast model; with the Euler model 0.32-0.39
# of its faster raw rate, 8.4-9.3x at raw 10.7-14.5k/s on a slower day, the old twin code 6.7-9.8x
# alternated with it). Below IDLE_RAW_STEPS_PER_S the machine is busy with other work and the test skips
# with its numbers (it still checks the node against raw mj_step).
def test_lockstep_runs_10x_faster_than_real_time_held_by_the_band() -> None:
    """Nobody listens to /lowstate (no policy); speed from the node's own /diagnostics."""
    raw_before = _raw_mj_steps_per_s()
    sim = SimUnderTest(listen=False, clock_mode="lockstep")
    try:
        sim.wait_until(lambda: len(sim.diagnostics_log) >= 2, 30.0, "lock-step diagnostics")
        first = len(sim.diagnostics_log) - 1
        sim.wait_until(lambda: len(sim.diagnostics_log) >= first + 5, 15.0, "5 s of diagnostics")
        (t0, a), (t1, b) = sim.diagnostics_log[first], sim.diagnostics_log[-1]
    finally:
        sim.close()
    raw = (raw_before + _raw_mj_steps_per_s()) / 2
    speedup = (float(b["sim_time_s"]) - float(a["sim_time_s"])) / (t1 - t0)
    steps_per_s = (int(b["physics_steps"]) - int(a["physics_steps"])) / (t1 - t0)
    assert b["band_held"] == "True"
    assert steps_per_s >= 0.05 * raw, (f"the node steps {steps_per_s:.0f}/s, {steps_per_s / raw:.2f} of raw "
                                      f"mj_step ({raw:.0f}/s) on this machine right now")
    if raw < IDLE_RAW_STEPS_PER_S:
        pytest.skip(f"machine too loaded to judge 10x real time: raw mj_step {raw:.0f}/s (< "
                    f"{IDLE_RAW_STEPS_PER_S}); node {speedup:.1f}x real time, {steps_per_s / raw:.2f} of raw")
    assert speedup >= 10.0, f"lock-step ran {speedup:.1f}x real time (raw mj_step {raw:.0f}/s)"


def _sync_run(seed: int, syncs: int = 50) -> dict[int, bytes]:
    """Lock-step with a command after every 10th state (50 Hz); returns the stream by tick."""
    q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")

    def respond(state: LowState) -> LowCmd | None:
        if state.tick % 20:
            return None
        k = state.tick // 20
        return lowcmd(q0 + 0.1 * np.sin(0.3 * k + np.arange(BODY)), "asap")

    sim = SimUnderTest(respond, clock_mode="lockstep", wait_for_cmd=True, sync_every=10,
                       profile="latency", seed=seed)
    try:
        sim.wait_until(lambda: sim.raw_states and sim.sim_time_s() >= 0.02 * syncs, 60.0,
                       f"{syncs} lock-step syncs")
        stream: dict[int, bytes] = {}
        for _, data in sim.raw_states:
            stream.setdefault(deserialize_message(data, LowState).tick, data)
        return stream
    finally:
        sim.close()


def test_lockstep_same_seed_and_commands_give_identical_streams() -> None:
    first, second, other_seed = _sync_run(seed=7), _sync_run(seed=7), _sync_run(seed=8)
    ticks = sorted(first)[:500]
    assert ticks == list(range(0, 1000, 2)), "lock-step lost or skipped states"
    assert all(first[t] == second[t] for t in ticks), "same seed and commands, different /lowstate"
    assert any(first[t] != other_seed[t] for t in ticks), "the seed does not change the stream"
    begin, end = (body_q(deserialize_message(first[t], LowState)) for t in (0, 998))
    moved = end - begin
    assert np.abs(moved).max() > 0.05, "the commands had no effect"


def test_bad_crc_or_wrong_mode_machine_changes_nothing(sims) -> None:
    sim = sims(clock_mode="realtime")
    sim.wait_until(lambda: sim.cmd_pub.get_subscription_count() > 0 and len(sim.raw_states) > 10, 30.0,
                   "the sim")
    q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")

    def send_for(seconds: float, cmd: LowCmd) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sim.cmd_pub.publish(cmd)
            time.sleep(0.02)

    send_for(2.0, lowcmd(q0, "asap"))
    held = body_q(sim.last_state())
    start = len(sim.raw_states)
    send_for(0.6, lowcmd(q0 + 0.4, "asap", corrupt_crc=True))
    send_for(0.6, lowcmd(q0 + 0.4, "asap", mode_machine=6))
    after = [body_q(deserialize_message(d, LowState)) for _, d in sim.raw_states[start:]]
    drift = max(np.abs(q - held).max() for q in after)
    assert drift < 0.05, f"ignored commands moved a joint by {drift:.3f} rad"
    sim.wait_until(lambda: int(sim.diagnostics.get("lowcmd_crc_errors", 0)) >= 5
                   and int(sim.diagnostics.get("lowcmd_mode_machine_mismatch", 0)) >= 5, 15.0,
                   "the rejections counted in /diagnostics")
    send_for(0.6, lowcmd(q0 + 0.4, "asap"))  # control: the same command with a valid CRC moves it
    assert np.abs(body_q(sim.last_state()) - held).max() > 0.2


def test_an_armed_band_lets_go_in_the_step_the_first_new_command_acts(sims) -> None:
    """Armed under a constant command (a policy node in HOLD), the band stays on while that command
    repeats and lets go in the same advance as the first different one (a policy's first tick)."""
    q0 = g1.default_pose(g1.MOTOR_ORDER, "asap")
    hold, moving = lowcmd(q0, "asap"), lowcmd(q0 + 0.05, "asap")
    plan: dict[str, int | None] = {"switch_after": None, "first_moving": None}

    def respond(state: LowState) -> LowCmd | None:
        if state.tick % 20:
            return None
        if plan["switch_after"] is None or state.tick < plan["switch_after"]:
            return hold
        if plan["first_moving"] is None:
            plan["first_moving"] = state.tick
        return moving

    sim = sims(respond, clock_mode="lockstep", wait_for_cmd=True, sync_every=10)
    arm = sim.node.create_client(Trigger, "/sim/release_band_on_new_command")
    sim.wait_until(lambda: sim.sim_time_s() >= 0.2, 30.0, "10 syncs under the hold command")
    sim.call(arm)
    plan["switch_after"] = round(sim.sim_time_s() * 1000) + 400  # 20 more syncs of the same command

    def released() -> bool:
        first = plan["first_moving"]
        return first is not None and sim.sim_time_s() >= first / 1000 + 0.1 and bool(sim.diagnostics.get(
            "band_released_s"))

    sim.wait_until(released, 60.0, "the first new command and the release")
    assert float(sim.diagnostics["band_released_s"]) == pytest.approx(plan["first_moving"] / 1000, abs=1e-6)
    assert sim.diagnostics["band_held"] == "False"


@pytest.mark.parametrize("clock_mode", ["realtime", "lockstep"])
def test_released_robot_stands_10_s(sims, clock_mode: str) -> None:
    """BeyondMimic's standby (its pose, stiff hold gains), released from the band, stands 10 s.

    (The ASAP pose with ASAP's own gains cannot stand on PD alone; see test_twin.py.)
    """
    stance = lowcmd(g1.default_pose(g1.MOTOR_ORDER, "beyondmimic"), "stiff_hold")
    lockstep = clock_mode == "lockstep"
    sim = sims((lambda state: stance if state.tick % 20 == 0 else None) if lockstep else None,
               clock_mode=clock_mode, initial_pose="beyondmimic", wait_for_cmd=lockstep, sync_every=10,
               odometry_every=10, joint_states_every=50)
    sim.watch_base()
    sim.wait_until(lambda: len(sim.raw_states) > 10, 30.0, "the first /lowstate")
    sender = None
    if not lockstep:  # a 50 Hz command writer
        stop = threading.Event()

        def write() -> None:
            while not stop.is_set():
                sim.cmd_pub.publish(stance)
                time.sleep(0.02)

        sender = threading.Thread(target=write, daemon=True)
        sender.start()
    try:
        sim.wait_until(lambda: sim.last_state().motor_state[0].mode == 1, 30.0, "the stance command applied")
        engaged = sim.sim_time_s()
        sim.wait_until(lambda: sim.sim_time_s() >= engaged + 0.5 and sim.odometry, 30.0, "0.5 s on the band")
        sim.call_release_band()
        sim.wait_until(lambda: sim.diagnostics.get("band_held") == "False", 5.0, "the band released")
        released, first = sim.sim_time_s(), len(sim.odometry)
        z0 = sim.odometry[-1].pose.pose.position.z
        sim.wait_until(lambda: sim.sim_time_s() >= released + 10.0, 60.0, "10 s released")
    finally:
        if sender is not None:
            stop.set()
            sender.join()
    heights = np.array([o.pose.pose.position.z for o in sim.odometry[first:]])
    assert heights.size >= 450, "expected /odometry at 50 Hz for 10 s"
    assert np.abs(heights - z0).max() < 0.05, f"pelvis height left {z0:.3f} +- 0.05 m"
    assert sim.joint_states[-1].name == list(g1.MOTOR_ORDER)
    assert sim.odometry[-1].header.frame_id == "world" and sim.odometry[-1].child_frame_id == "pelvis"


@pytest.mark.parametrize("clock_mode", ["realtime", "lockstep"])
def test_reset_puts_a_fallen_robot_back_in_the_band_and_time_runs_on(sims, clock_mode: str) -> None:
    """Released with motors off it collapses; /sim/reset stands it back where it started, held.

    Waits on the samples themselves: a free-running lock-step twin outpaces this subscriber.
    """
    sim = sims(clock_mode=clock_mode, odometry_every=10)
    sim.watch_base()
    sim.wait_until(lambda: sim.odometry and len(sim.raw_states) > 10, 30.0, "the first /odometry")
    z0 = sim.odometry[0].pose.pose.position.z

    def height() -> float:
        return sim.odometry[-1].pose.pose.position.z

    sim.call_release_band()
    sim.wait_until(lambda: height() < z0 - 0.3, 30.0, "the released robot, motors off, to fall")
    before = len(sim.raw_states)
    assert "held by the band" in sim.call_reset()
    after = len(sim.odometry)
    sim.wait_until(lambda: len(sim.odometry) >= after + 50 and int(sim.diagnostics.get("resets", 0)) == 1,
                   30.0, "1 s of /odometry after the reset")
    # back at the start height and staying there (the band holds it): the last 0.4 s of samples
    sim.wait_until(lambda: max(abs(o.pose.pose.position.z - z0) for o in sim.odometry[-20:]) < 0.05, 30.0,
                   f"the pelvis back at {z0:.3f} m")
    ticks = [deserialize_message(d, LowState).tick for _, d in sim.raw_states[before:]]
    assert np.all(np.diff(ticks) > 0), "LowState ticks went back at the reset"
    assert sim.diagnostics["band_held"] == "True"
