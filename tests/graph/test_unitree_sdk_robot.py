"""The policy node against a stand-in robot built on Unitree's own Python SDK (CycloneDDS), over loopback.

The stand-in (tests/oracle/unitree_sdk_peer.py, op "robot") publishes LowState with the SDK's CRC and
mode_machine 5 and follows the LowCmds it receives; it checks their CRC with the SDK. The operator's
RAMP request goes through /policy/set_mode; the ramp must end in HOLD at the policy's default pose, with
the policy's gains, every command accepted by the SDK's CRC.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from asap_msgs.msg import PolicyStatus  # noqa: E402
from asap_msgs.srv import SetMode  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from unitree_oracle import SdkPeer  # noqa: E402

from asap_core import g1  # noqa: E402
from asap_core.artifact import load_artifact  # noqa: E402
from asap_core.joint_map import JointMap  # noqa: E402
from asap_core.modes import Mode  # noqa: E402
from asap_testing.dds import finish, spawn, wait_for  # noqa: E402

pytestmark = pytest.mark.graph
REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "training" / "policies" / "arm_swing" / "policy.onnx"
NODE_PARAMS = REPO / "ros2_ws" / "src" / "asap_policy" / "config" / "policy_node.yaml"
ROBOT_HZ = 50.0
"""The stand-in's LowState rate: the SDK's pure-Python CRC costs ~5 ms per LowState."""


class NodeAndSdkRobot:
    def __init__(self) -> None:
        # the stand-in publishes at 50 Hz, not 500, and a Python process on a busy 2-core machine may
        # pause for hundreds of ms: the node's staleness thresholds say so (staleness is tested elsewhere)
        self.node_proc = spawn("-m asap_policy.policy_node", "--ros-args", "--params-file", str(NODE_PARAMS),
                               "-p", f"policy_path:={POLICY}", "-p", "ramp_s:=1.0",
                               "-p", "stale_warn_ms:=200.0", "-p", "stale_damp_ms:=1500.0")
        self.peer = SdkPeer()
        rclpy.init()
        self.node = rclpy.create_node("sdk_robot_test")
        self.modes: list[Mode] = []
        self.status: PolicyStatus | None = None
        self.node.create_subscription(PolicyStatus, "/policy/status", self._on_status, 10)
        self.set_mode = self.node.create_client(SetMode, "/policy/set_mode")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()
        wait_for(lambda: self.status is not None or self.node_proc.poll() is not None, 60.0)  # node up

    def _on_status(self, msg: PolicyStatus) -> None:
        self.status = msg
        if not self.modes or self.modes[-1] is not Mode(msg.mode):
            self.modes.append(Mode(msg.mode))

    def close(self) -> None:
        self.peer.close()
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown()
        finish(self.node_proc)


@pytest.fixture(scope="module")
def graph() -> Iterator[NodeAndSdkRobot]:
    g = NodeAndSdkRobot()
    try:
        yield g
    finally:
        g.close()


def test_an_sdk_robot_takes_the_policy_node_through_ramp_to_hold(graph: NodeAndSdkRobot) -> None:
    policy = load_artifact(POLICY).metadata
    joint_map = JointMap.from_names(policy.joint_names, g1.MOTOR_ORDER)
    default = joint_map.apply(policy.array("default_joint_pos"), fill=g1.default_pose(g1.MOTOR_ORDER, "asap"))
    q0 = default.copy()
    q0[joint_map.index] += 0.1  # every policy joint starts 0.1 rad away from its default
    answer: dict = {}
    robot = threading.Thread(target=lambda: answer.update(graph.peer.ask(
        "robot", seconds=6.0, rate_hz=ROBOT_HZ, mode_machine=5, q0=q0.tolist(), remote=[])))
    robot.start()
    assert wait_for(lambda: graph.status is not None and 0.0 <= graph.status.lowstate_age_ms < 100.0, 6.0), \
        (f"the policy node does not see the SDK robot's LowState (is asap's Fast DDS profile loaded? "
         f"`source scripts/env.sh`); status: {graph.status}")
    assert graph.set_mode.wait_for_service(timeout_sec=10.0)
    ramp = SetMode.Request(request=SetMode.Request.REQUEST_RAMP, reason="sdk robot test")
    future = graph.set_mode.call_async(ramp)
    assert wait_for(future.done, 10.0) and future.result().accepted, future.result()
    assert wait_for(lambda: graph.modes[-1] is Mode.HOLD, 5.0), (graph.modes, graph.status.fault)
    assert graph.modes == [Mode.ZERO_TORQUE, Mode.RAMP, Mode.HOLD], graph.modes
    robot.join(timeout=15.0)  # the node damps once the stand-in stops publishing: not asserted here
    # what the robot received (its newest command with stiffness: HOLD's): SDK-valid CRCs, its own
    # mode_machine echoed, the default pose at the policy's gains
    assert answer["count"] > 50 and answer["crc_checked"] >= 3, answer
    assert answer["crc_valid"] == answer["crc_checked"] and answer["mode_machines"] == [5], answer
    np.testing.assert_allclose(answer["q"], default, atol=1e-5)
    np.testing.assert_allclose(joint_map.gather(np.array(answer["kp"])), policy.array("kp"))
