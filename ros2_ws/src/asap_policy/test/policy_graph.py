"""The test side of a policy-node graph: the G1 test double, observers, service clients.

Shared by the node's fault tests (``ros2_ws/src/asap_policy/test``) and the fault-injection suite
(``tests/faults``): the node under test runs in its own process (:func:`spawn_node`), everything here
talks to it over DDS.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import rclpy
from asap_msgs.msg import PolicyRecord, PolicyStatus
from asap_msgs.srv import LoadPolicy, SetMode
from builtin_interfaces.msg import Time
from fake_g1 import FakeG1
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock

from asap_core.modes import Mode
from asap_core.testing import policies
from asap_testing.dds import finish, spawn


class SimClock:
    """Publishes /clock every 10 ms of wall time: ``rate`` s of sim time per s while running, the
    same time while stopped (a paused simulator); :meth:`jump` moves it (back: a simulator reset)."""

    def __init__(self, node, start_s: float = 200.0, rate: float = 1.0) -> None:
        self.ns, self.rate, self.running = round(start_s * 1e9), rate, True
        self._pub = node.create_publisher(Clock, "/clock", 10)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def jump(self, delta_s: float) -> None:
        self.ns += round(delta_s * 1e9)

    def _loop(self) -> None:
        while not self._stop.wait(0.01):
            if self.running:
                self.ns += round(0.01 * self.rate * 1e9)
            self._pub.publish(Clock(clock=Time(sec=self.ns // 10**9, nanosec=self.ns % 10**9)))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)


class Graph:
    """The test's side of the graph: the fake robot, observers and service clients (and /clock,
    for a node on sim time)."""

    def __init__(self, tmp: Path, sim_clock: bool = False) -> None:
        self.tmp = tmp
        self.fake = FakeG1()
        self.node = rclpy.create_node("policy_test_observer")
        self.status: PolicyStatus | None = None
        self.records: list[PolicyRecord] = []
        self.node.create_subscription(PolicyStatus, "/policy/status", self._on_status, 10)
        self.node.create_subscription(PolicyRecord, "/policy/record", self.records.append,
                                      QoSProfile(depth=500))
        self.set_mode_client = self.node.create_client(SetMode, "/policy/set_mode")
        self.load_client = self.node.create_client(LoadPolicy, "/policy/load_policy")
        self.executor = SingleThreadedExecutor()  # a pool hand-off per 500 Hz LowCmd starved the fake robot
        self.executor.add_node(self.fake)
        self.executor.add_node(self.node)
        self._spin = threading.Thread(target=self.executor.spin, daemon=True)
        self._spin.start()
        self.fake.start()
        self.clock = SimClock(self.node) if sim_clock else None
        if self.clock is not None:  # states carry the sim time in ms, as the twin's do
            self.fake.tick_ms = lambda: self.clock.ns // 1_000_000

    def _on_status(self, msg: PolicyStatus) -> None:
        self.status = msg

    def wait(self, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.01)
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; status: {self.status}")

    def mode(self) -> Mode | None:
        return None if self.status is None else Mode(self.status.mode)

    def call(self, client, request, timeout_s: float = 20.0):
        assert client.wait_for_service(timeout_sec=20.0), "service not available"
        future = client.call_async(request)
        self.wait(future.done, timeout_s, f"reply of {client.srv_name}")
        return future.result()

    def set_mode(self, request: int) -> SetMode.Response:
        return self.call(self.set_mode_client, SetMode.Request(request=request, reason="test"))

    def load(self, path: Path) -> LoadPolicy.Response:
        return self.call(self.load_client, LoadPolicy.Request(path=str(path)))

    def _mode_since(self, tick: int) -> Mode | None:
        """The mode of a status newer than ``tick`` (None while the newest is not)."""
        status = self.status
        return Mode(status.mode) if status.tick > tick else None

    def to_hold(self, attempts: int = 3) -> None:
        """From wherever the node is, back to HOLD through reset and RAMP.

        On the shared 2-core build machines a loaded moment can starve the processes for more than
        the 50 ms stale limit, and the node then (correctly) damps; setting up a test retries that,
        the assertions of the tests themselves do not.
        """
        for _ in range(attempts):
            # the replies carry the mode after each request (the status may lag a tick behind)
            mode = Mode(self.set_mode(SetMode.Request.REQUEST_RESET).mode)  # refused outside DAMPING
            if mode is Mode.POLICY:
                mode = Mode(self.set_mode(SetMode.Request.REQUEST_HOLD).mode)
            if mode is not Mode.ZERO_TORQUE:
                self.set_mode(SetMode.Request.REQUEST_ZERO_TORQUE)
            asked_at = self.status.tick
            if self.set_mode(SetMode.Request.REQUEST_RAMP).accepted:
                with contextlib.suppress(AssertionError):
                    self.wait(lambda t=asked_at: self._mode_since(t) in (Mode.HOLD, Mode.DAMPING), 10.0,
                              "HOLD after RAMP")
            if self._mode_since(asked_at) is Mode.HOLD:
                return
            time.sleep(0.5)
        raise AssertionError(f"could not reach HOLD: {self.status}")

    def close(self) -> None:
        if self.clock is not None:
            self.clock.close()
        self.fake.stop()
        self.executor.shutdown()
        self.node.destroy_node()
        self.fake.destroy_node()


def fresh_domain() -> int:
    """A DDS domain other than the session's: a node of the previous test module still shutting
    down (or its endpoints, until DDS forgets them) must not answer this one's requests or block
    its start (the policy node refuses to leave ZERO_TORQUE beside another /lowcmd publisher)."""
    session = os.environ.get("ROS_DOMAIN_ID")
    return random.SystemRandom().choice([d for d in range(1, 102) if str(d) != session])


@contextlib.contextmanager
def running_graph(tmp: Path, *params: str, sim_clock: bool = False) -> Iterator[Graph]:
    """rclpy up, the test side of the graph, and ``policy_node`` in its own process with ``params``
    (``name:=value``; on sim time from :class:`SimClock` with ``sim_clock``), ready (first status
    and command, no start block); all torn down after."""
    domain = fresh_domain()
    rclpy.init(domain_id=domain)
    g = Graph(tmp, sim_clock)
    args = [a for p in (*params, *(["use_sim_time:=true"] if sim_clock else [])) for a in ("-p", p)]
    proc = spawn("-m asap_policy.policy_node", "--ros-args", *args,
                 env={**os.environ, "ROS_DOMAIN_ID": str(domain)})
    try:
        g.wait(lambda: g.status is not None and g.fake.commands, 60.0, "the node's first status and command")
        g.wait(lambda: g.status.fault == "", 20.0, "no start block")
        yield g
    finally:
        g.close()
        proc.send_signal(signal.SIGINT)
        _, _, err = finish(proc, timeout_s=10.0)
        rclpy.shutdown()
        print(err[-3000:])  # the node's log, shown when a test fails


@contextlib.contextmanager
def sine_policy_graph(tmp: Path, motion_s: float, *params: str, sim_clock: bool = False) -> Iterator[Graph]:
    """:func:`running_graph` whose node starts with a gentle 23-joint sine policy (``motion_s``
    long), ramping in 0.3 s and reporting status at 20 Hz."""
    policy = policies.write(tmp / "sine.onnx", policies.sine(23, 0.2), motion_s=motion_s, name="sine")
    with running_graph(tmp, f"policy_path:={policy}", "ramp_s:=0.3", "status_rate_hz:=20.0", *params,
                       sim_clock=sim_clock) as g:
        yield g
