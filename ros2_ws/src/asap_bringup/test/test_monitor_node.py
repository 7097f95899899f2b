"""The monitor node in-process: a running policy's ghost, tracking error and ReferenceMotion arrive."""

from __future__ import annotations

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("mujoco", reason="the monitor's FK is asap_sim's, on MuJoCo")
from asap_msgs.msg import PolicyStatus, ReferenceMotion  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float32  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from asap_bringup.monitor_node import MonitorNode  # noqa: E402
from asap_core import g1, interfaces  # noqa: E402
from asap_testing.dds import spin_until  # noqa: E402

pytestmark = pytest.mark.node


@pytest.fixture
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


def test_a_running_policy_gets_its_ghost_error_and_reference(ros) -> None:
    monitor = MonitorNode(parameter_overrides=[Parameter("rate_hz", value=50.0)])
    if monitor.core.kinematics is None:
        pytest.skip(f"no G1 model: {monitor.core.kinematics_error}")
    peer = rclpy.create_node("monitor_peer")
    executor = SingleThreadedExecutor()
    executor.add_node(monitor)
    executor.add_node(peer)
    got: dict[str, list] = {"error": [], "local": [], "reference": [], "markers": []}
    peer.create_subscription(Float32, interfaces.MONITOR_ERROR, got["error"].append, 10)
    peer.create_subscription(Float32, interfaces.MONITOR_ERROR_LOCAL, got["local"].append, 10)
    peer.create_subscription(ReferenceMotion, interfaces.MONITOR_REFERENCE, got["reference"].append, 10)
    peer.create_subscription(MarkerArray, interfaces.MONITOR_MARKERS, got["markers"].append, 10)
    status_pub = peer.create_publisher(PolicyStatus, interfaces.POLICY_STATUS, 10)
    joints_pub = peer.create_publisher(JointState, interfaces.JOINT_STATES, 10)
    odom_pub = peer.create_publisher(Odometry, interfaces.ODOMETRY, 10)
    q = g1.default_pose(g1.MOTOR_ORDER)

    def feed() -> None:
        status = PolicyStatus(
            mode=PolicyStatus.MODE_POLICY,
            mode_name="POLICY",
            policy_name="p",
            policy_sha256="ab" * 32,
            motion_name="arm_swing",
            phase=0.25,
        )
        status_pub.publish(status)
        joints_pub.publish(JointState(name=list(g1.MOTOR_ORDER), position=q.tolist()))
        odom = Odometry()
        odom.pose.pose.position.z = monitor.core.kinematics.standing_height
        odom.pose.pose.orientation.w = 1.0
        odom_pub.publish(odom)

    peer.create_timer(0.05, feed)
    try:
        assert spin_until(peer, lambda: all(len(v) >= 3 for v in got.values()), 30.0, executor), {
            k: len(v) for k, v in got.items()
        }
    finally:
        executor.shutdown()
        monitor.destroy_node()
        peer.destroy_node()
    ref = got["reference"][-1]
    assert ref.motion_name == "arm_swing" and ref.phase == pytest.approx(0.25)
    assert list(ref.joint_names) == list(g1.MOTOR_ORDER)
    np.testing.assert_allclose(np.array(ref.joint_pos) - q, ref.joint_pos_error, atol=1e-5)
    assert 0.0 < got["error"][-1].data < 0.5 and 0.0 < got["local"][-1].data <= got["error"][-1].data + 0.05
    shown = {(m.ns, m.id): m for m in got["markers"][-1].markers}
    assert len(shown["reference", 0].points) == 27 and len(shown["robot", 0].points) == 27
    assert "motion arm_swing" in shown["status", 0].text and "tracking error" in shown["status", 0].text
