"""policy_node on sim time whose clock stops: a request no tick applies is refused and withdrawn.

The node applies SetMode requests on its control ticks and answers once one did. With a stopped
/clock (a paused or stalled simulator) no tick comes; the request is refused after its wait, and it
must not take effect later when the clock moves again (a "refused" RAMP that then ramps the motors).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
from asap_msgs.msg import PolicyRecord  # noqa: E402
from asap_msgs.srv import SetMode  # noqa: E402
from builtin_interfaces.msg import Time  # noqa: E402
from fake_g1 import FakeG1  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402

from asap_core.modes import Mode  # noqa: E402
from asap_core.testing import policies  # noqa: E402
from asap_testing.dds import finish, spawn  # noqa: E402

pytestmark = pytest.mark.graph
N = 23


def test_a_request_refused_for_want_of_a_tick_never_applies_later(tmp_path: Path) -> None:
    policy = policies.write(tmp_path / "sine.onnx", policies.sine(N, 0.2), motion_s=1.0, name="sine")
    rclpy.init()
    fake = FakeG1()
    node = rclpy.create_node("sim_clock_test")
    records: list[PolicyRecord] = []
    node.create_subscription(PolicyRecord, "/policy/record", records.append, QoSProfile(depth=1000))
    clock_pub = node.create_publisher(Clock, "/clock", 10)
    set_mode = node.create_client(SetMode, "/policy/set_mode")
    executor = SingleThreadedExecutor()
    executor.add_node(fake)
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    fake.start()
    sim_ns = [1_000_000_000]
    running = threading.Event()

    def tick_clock() -> None:  # 20 ms of sim time per 10 ms of wall time while running
        while not stopped.is_set():
            if running.is_set():
                sim_ns[0] += 20_000_000
            clock_pub.publish(Clock(clock=Time(sec=sim_ns[0] // 10**9, nanosec=sim_ns[0] % 10**9)))
            time.sleep(0.01)

    def request(value: int) -> SetMode.Response:
        assert set_mode.wait_for_service(timeout_sec=30.0)
        future = set_mode.call_async(SetMode.Request(request=value, reason="test"))
        deadline = time.monotonic() + 20.0
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert future.done(), "no SetMode reply"
        return future.result()

    def wait_for(predicate, what: str) -> None:
        deadline = time.monotonic() + 30.0
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.01)

    stopped = threading.Event()
    threading.Thread(target=tick_clock, daemon=True).start()
    proc = spawn("-m asap_policy.policy_node", "--ros-args", "-p", f"policy_path:={policy}",
                 "-p", "use_sim_time:=true")
    try:
        running.set()
        wait_for(lambda: len(records) >= 5, "ticks on the running clock")
        running.clear()
        time.sleep(0.3)  # the last ticks of the running clock land
        refused = request(SetMode.Request.REQUEST_RAMP)
        assert not refused.accepted and "no control tick" in refused.message, refused
        stalled = len(records)
        running.set()
        wait_for(lambda: len(records) >= stalled + 25, "25 ticks after the clock moves again")
        assert all(Mode(r.mode) is Mode.ZERO_TORQUE for r in records[stalled:]), "the refused RAMP applied"
        accepted = request(SetMode.Request.REQUEST_RAMP)  # control: with ticks, the same request applies
        assert accepted.accepted, accepted
        wait_for(lambda: Mode(records[-1].mode) in (Mode.RAMP, Mode.HOLD), "RAMP records")
    finally:
        stopped.set()
        fake.stop()
        executor.shutdown()
        proc.send_signal(signal.SIGINT)
        _, _, err = finish(proc, timeout_s=10.0)
        node.destroy_node()
        fake.destroy_node()
        rclpy.try_shutdown()
        print(err[-3000:])
