"""Fault injection inside the policy node (issue 16, item 1): an unexpected exception ends in DAMPING.

The node runs in this process (so a bug can be planted in it) with the executor ``main`` gives it,
driving the G1 test double over DDS. Before the fix an exception out of a service callback or a
timer ended the executor's spin: no reply, no status, no damping command, the robot left on the
last command the writer repeats.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
from asap_msgs.srv import SetMode  # noqa: E402
from policy_graph import Graph, fresh_domain  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from asap_core.modes import Mode  # noqa: E402
from asap_core.testing import policies  # noqa: E402
from asap_policy.control_loop import ControlLoop  # noqa: E402
from asap_policy.executor import InlineExecutor  # noqa: E402
from asap_policy.policy_node import PolicyNode  # noqa: E402

pytestmark = [pytest.mark.graph, pytest.mark.flaky(reruns=1)]
N = 23


class PlantedError(RuntimeError):
    """The bug planted in the node."""


@pytest.fixture
def node_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """(graph, arm): the node under test in this process; ``arm(name)`` makes the method ``name``
    of the node or of its control loop raise :class:`PlantedError` once, on its next call."""
    armed: set[str] = set()

    def plant(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def broken(self, *args, **kwargs):
            if name in armed:
                armed.discard(name)
                raise PlantedError(f"planted in {name}")
            return original(self, *args, **kwargs)

        broken.__name__ = original.__name__
        monkeypatch.setattr(cls, name, broken)

    plant(PolicyNode, "_publish_diagnostics")
    plant(ControlLoop, "submit")
    policy = policies.write(tmp_path / "sine.onnx", policies.sine(N, 0.2), motion_s=30.0, name="sine")
    rclpy.init(domain_id=fresh_domain())
    graph = Graph(tmp_path)
    node = PolicyNode(parameter_overrides=[
        Parameter("policy_path", value=str(policy)), Parameter("ramp_s", value=0.3),
        Parameter("stale_damp_ms", value=200.0), Parameter("status_rate_hz", value=20.0),
        Parameter("diagnostics_rate_hz", value=20.0)])
    node.configure()
    node.activate()
    executor = InlineExecutor(offload=node.offloaded_callbacks, on_error=node.internal_error)  # as main()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        graph.wait(lambda: graph.status is not None and graph.status.fault == "", 60.0, "the node ready")
        yield graph, armed.add
    finally:
        executor.shutdown()
        node.deactivate()
        node.destroy_node()
        graph.close()
        rclpy.shutdown()


def test_an_error_in_a_timer_damps_and_the_node_keeps_reporting(node_in_process) -> None:
    graph, arm = node_in_process
    graph.to_hold()
    t0 = time.monotonic()
    arm("_publish_diagnostics")
    graph.wait(lambda: graph.mode() is Mode.DAMPING, 10.0, "DAMPING after the planted error")
    fault = graph.status.fault
    assert "internal error in _publish_diagnostics" in fault and "PlantedError" in fault, fault
    assert any(c.is_damping for c in graph.fake.commands_since(t0))
    assert graph.set_mode(SetMode.Request.REQUEST_RESET).accepted  # the node still answers


def test_an_error_in_a_service_answers_with_the_reason_and_damps(node_in_process) -> None:
    graph, arm = node_in_process
    graph.to_hold()
    arm("submit")
    reply = graph.set_mode(SetMode.Request.REQUEST_POLICY)
    assert not reply.accepted and "internal error" in reply.message and "planted in submit" in reply.message
    graph.wait(lambda: graph.mode() is Mode.DAMPING, 5.0, "DAMPING after the planted error")
