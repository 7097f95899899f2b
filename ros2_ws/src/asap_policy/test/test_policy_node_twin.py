"""Acceptance against the simulated twin (asap_sim g1_sim), lock-step: a whole motion, no trip.

The twin steps MuJoCo and waits for one LowCmd after every state at a multiple of 20 ms sim time
(``wait_for_cmd``); the node runs on sim time (``use_sim_time``) with its command writer off, as
the twin's lock-step protocol asks. The robot hangs in the twin's gantry band (ASAP's default
pose with ASAP's gains does not stand without an active policy; see asap_sim's README).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("asap_sim.g1_sim_node", reason="the asap_sim twin is not built")
from asap_msgs.msg import PolicyRecord, PolicyStatus  # noqa: E402
from asap_msgs.srv import SetMode  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from unitree_hg.msg import LowCmd  # noqa: E402

from asap_core.crc import lowcmd_crc  # noqa: E402
from asap_core.modes import Mode  # noqa: E402
from asap_core.testing import policies  # noqa: E402
from asap_testing.dds import finish, spawn  # noqa: E402

pytestmark = [pytest.mark.graph, pytest.mark.slow]
MOTION_S = 2.0


def test_ramp_hold_policy_runs_the_whole_motion_on_the_lockstep_twin(tmp_path: Path) -> None:
    policy = policies.write(tmp_path / "sine.onnx", policies.sine(23, 0.2), motion_s=MOTION_S, name="sine")
    rclpy.init()
    node = rclpy.create_node("twin_acceptance")
    statuses: list[PolicyStatus] = []
    records: list[PolicyRecord] = []
    commands: list[bytes] = []
    node.create_subscription(PolicyStatus, "/policy/status", statuses.append, 100)
    node.create_subscription(PolicyRecord, "/policy/record", records.append, QoSProfile(depth=1000))
    node.create_subscription(LowCmd, "/lowcmd", commands.append,
                             QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE), raw=True)
    client = node.create_client(SetMode, "/policy/set_mode")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    twin = spawn("-m asap_sim.g1_sim_node", "--ros-args", "-p", "clock_mode:=lockstep",
                 "-p", "wait_for_cmd:=true", "-p", "sync_every:=10", "-p", "band_held:=true")
    policy_node = spawn("-m asap_policy.policy_node", "--ros-args", "-p", "use_sim_time:=true",
                        "-p", f"policy_path:={policy}", "-p", "writer_rate_hz:=0.0", "-p", "ramp_s:=1.0",
                        "-p", "status_rate_hz:=10.0")

    def mode() -> Mode | None:
        return Mode(statuses[-1].mode) if statuses else None

    def wait(predicate, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not predicate():
            time.sleep(0.02)
        assert predicate(), f"timed out waiting for {what}; last status {statuses[-1:]}"

    def request(value: int) -> SetMode.Response:
        assert client.wait_for_service(timeout_sec=30.0)
        future = client.call_async(SetMode.Request(request=value, reason="twin acceptance"))
        wait(future.done, 30.0, "SetMode reply")
        return future.result()

    try:
        wait(lambda: statuses and statuses[-1].fault == "" and commands, 60.0, "the node ready on the twin")
        reply = request(SetMode.Request.REQUEST_RAMP)
        assert reply.accepted, reply.message
        wait(lambda: mode() is Mode.HOLD, 120.0, "HOLD after the ramp")
        first = len(records)
        reply = request(SetMode.Request.REQUEST_POLICY)
        assert reply.accepted, reply.message
        wait(lambda: mode() is Mode.POLICY, 30.0, "POLICY")
        wait(lambda: mode() is Mode.HOLD, 300.0, "HOLD at the end of the motion")
        time.sleep(0.5)
    finally:
        for proc in (policy_node, twin):
            proc.send_signal(signal.SIGINT)
        _, _, node_log = finish(policy_node, timeout_s=10.0)
        finish(twin, timeout_s=10.0)
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown()
        print(node_log[-3000:])

    trips = [(s.mode_name, s.fault) for s in statuses if s.mode == Mode.DAMPING or (s.mode and s.fault)]
    assert not trips, f"a safety trip: {trips[:3]}"
    run = [r for r in records[first:] if r.mode == Mode.POLICY]
    phases = np.array([r.phase for r in run])
    assert phases[0] == 0.0 and phases[-1] == pytest.approx(1.0)
    assert len(run) == round(MOTION_S / 0.02) + 1  # every tick of the motion, none missed
    assert np.all(np.diff([r.tick for r in run]) == 1)
    msgs = [deserialize_message(c, LowCmd) for c in commands]
    assert len(msgs) > len(run)
    assert all(m.crc == lowcmd_crc(m) for m in msgs), "a LowCmd with a bad CRC"
    assert {m.mode_machine for m in msgs} == {5} and {m.mode_pr for m in msgs} == {0}
