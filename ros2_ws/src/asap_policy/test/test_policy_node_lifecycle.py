"""The node's steps (configure, activate, deactivate) in this process, against the G1 test double over
DDS: nothing is published before ``activate()``, ``deactivate()`` damps a held robot and takes the
node off the graph, and a second ``activate()`` starts damped and runs again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
from asap_msgs.srv import SetMode  # noqa: E402
from policy_graph import Graph, fresh_domain  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from asap_core import interfaces  # noqa: E402
from asap_core.modes import Mode  # noqa: E402
from asap_core.testing import policies  # noqa: E402
from asap_policy.executor import InlineExecutor  # noqa: E402
from asap_policy.policy_node import PolicyNode  # noqa: E402

pytestmark = [pytest.mark.graph, pytest.mark.flaky(reruns=1)]


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Graph]:
    rclpy.init(domain_id=fresh_domain())
    g = Graph(tmp_path)
    try:
        yield g
    finally:
        g.close()
        rclpy.shutdown()


def _spin(node: PolicyNode) -> Callable[[], None]:
    """Spin ``node`` as ``main`` does, on a thread; returns what stops it."""
    executor = InlineExecutor(offload=node.offloaded_callbacks, on_error=node.internal_error)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()

    def stop() -> None:
        executor.shutdown()
        thread.join(timeout=5.0)

    return stop


def _lowcmd_publishers(graph: Graph) -> int:
    return len(graph.node.get_publishers_info_by_topic(interfaces.LOWCMD))


def test_steps_out_of_order_are_refused_and_nothing_is_published_before_activate(graph: Graph) -> None:
    node = PolicyNode()
    try:
        with pytest.raises(RuntimeError, match=r"activate\(\) needs the node inactive; it is unconfigured"):
            node.activate()
        node.configure()
        with pytest.raises(RuntimeError, match=r"configure\(\) needs the node unconfigured; it is inactive"):
            node.configure()
        with pytest.raises(RuntimeError, match=r"deactivate\(\) needs the node active; it is inactive"):
            node.deactivate()
        assert node.get_publishers_info_by_topic(interfaces.LOWCMD) == []
        assert node.get_publishers_info_by_topic(interfaces.POLICY_STATUS) == []
    finally:
        node.destroy_node()


def test_configure_fails_fast_on_bad_parameters_and_artifacts(graph: Graph, tmp_path: Path) -> None:
    for override, error, message in (
            (Parameter("policy_sha256_allowlist", value="abc"), ValueError, "are not sha256 hex digests"),
            (Parameter("policy_path", value=str(tmp_path / "missing.onnx")), RuntimeError,
             "policy_path .*missing.onnx")):
        node = PolicyNode(parameter_overrides=[override])
        try:
            with pytest.raises(error, match=message):
                node.configure()
            assert node.lifecycle_state == "unconfigured"
        finally:
            node.destroy_node()


def test_deactivate_damps_a_held_robot_and_activate_again_starts_damped(graph: Graph, tmp_path: Path) -> None:
    policy = policies.write(tmp_path / "sine.onnx", policies.sine(23, 0.2), motion_s=30.0, name="sine")
    node = PolicyNode(parameter_overrides=[
        Parameter("policy_path", value=str(policy)), Parameter("ramp_s", value=0.3),
        Parameter("stale_damp_ms", value=200.0), Parameter("status_rate_hz", value=20.0)])
    node.configure()
    node.activate()
    stop = _spin(node)
    try:
        graph.wait(lambda: graph.status is not None and graph.status.fault == "", 60.0, "the node ready")
        graph.to_hold()
        stop()
        t_stop = time.monotonic()
        node.deactivate()
        graph.wait(lambda: sum(c.is_damping for c in graph.fake.commands_since(t_stop)) >= 3, 5.0,
                   "the safe-stop commands")
        assert graph.fake.commands[-1].is_damping
        graph.wait(lambda: _lowcmd_publishers(graph) == 0, 10.0, "the /lowcmd publisher gone")

        t_start = time.monotonic()
        node.activate()
        stop = _spin(node)
        graph.wait(lambda: graph.mode() is Mode.DAMPING, 10.0, "DAMPING after activating again")
        assert graph.status.fault == "stopped in HOLD: damped"
        graph.wait(lambda: len(graph.fake.commands_since(t_start)) >= 10, 10.0, "commands again")
        assert all(c.is_damping for c in graph.fake.commands_since(t_start)), "a stiff command after activate"
        assert graph.set_mode(SetMode.Request.REQUEST_RESET).accepted
        graph.to_hold()  # services, timers and the /lowcmd check (its own new publisher) work again
    finally:
        stop()
        if node.lifecycle_state == "active":
            node.deactivate()
        node.destroy_node()
