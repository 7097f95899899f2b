"""The twin (Fast DDS) and Unitree's own Python SDK (CycloneDDS) on one private domain, over loopback.

The SDK side is unitree_sdk2py's channels in their own process (tests/oracle/unitree_sdk_peer.py), with
asap's CycloneDDS loopback config. The twin loads asap's Fast DDS profile from the environment
(scripts/env.sh): without it CycloneDDS discovers the twin and never matches it, and every test here
fails (test_the_sdk_receives_the_twins_lowstate_with_valid_sdk_crcs first, with that explanation).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from unitree_hg.msg import LowState  # noqa: E402
from unitree_oracle import SdkPeer  # noqa: E402

from asap_bringup.dds import loaded_fastdds_profile  # noqa: E402
from asap_core import g1  # noqa: E402
from asap_core.wire import decode_lowstate, lowstate_tick  # noqa: E402
from asap_testing.dds import finish, spawn, wait_for  # noqa: E402

pytestmark = pytest.mark.graph
ELBOW = g1.MOTOR_ORDER.index("left_elbow_joint")
DISCOVERY_S = 20.0


class TwinAndSdk:
    """A realtime twin process, Unitree's SDK peer, and this process's view of the twin's diagnostics."""

    def __init__(self) -> None:
        self.twin = spawn("-m asap_sim.g1_sim_node")
        self.peer = SdkPeer()
        rclpy.init()
        self.node = rclpy.create_node("sdk_interop_test")
        self.diagnostics: dict[str, str] = {}
        self.lowstates: dict[int, bytes] = {}  # /lowstate as rclpy received it, by tick (decoded on demand)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag,
                                      QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self.node.create_subscription(LowState, "/lowstate", self._on_state, QoSProfile(depth=100), raw=True)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()
        deadline = time.monotonic() + DISCOVERY_S
        self.first = self.peer.ask("state", seconds=0.5)
        while not self.first["count"] and time.monotonic() < deadline and self.twin.poll() is None:
            self.first = self.peer.ask("state", seconds=0.5)

    def _on_state(self, data: bytes) -> None:
        tick = lowstate_tick(data)
        self.lowstates[tick] = data
        self.lowstates.pop(tick - 10000, None)  # the last 10 s

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name == "g1_sim":
                self.diagnostics = {kv.key: kv.value for kv in status.values}

    def counter(self, key: str) -> int:
        return int(self.diagnostics.get(key, 0))

    def close(self) -> None:
        self.peer.close()
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown()
        finish(self.twin)


@pytest.fixture(scope="module")
def graph() -> Iterator[TwinAndSdk]:
    g = TwinAndSdk()
    try:
        yield g
    finally:
        g.close()


def test_the_sdk_receives_the_twins_lowstate_with_valid_sdk_crcs(graph: TwinAndSdk) -> None:
    profile = loaded_fastdds_profile(os.environ)
    assert graph.first["count"], (
        f"Unitree's SDK received no /lowstate from the twin in {DISCOVERY_S:.0f} s. Fast DDS profile: "
        f"{profile or 'none'}; without asap's (type propagation disabled) CycloneDDS discovers Fast DDS "
        "but never matches it: `source scripts/env.sh`")
    window = graph.peer.ask("state", seconds=2.0)
    assert window["count"] >= 200, window  # 1000 published; a Python listener keeps a share of them
    assert window["crc_checked"] >= 5 and window["crc_valid"] == window["crc_checked"], window
    assert window["mode_machines"] == [5]
    # the SDK decodes the joints of a sample as rclpy + asap_core decode the same sample (same tick)
    wait_for(lambda: all(tick in graph.lowstates for tick, _ in window["samples"]), 2.0)
    both = [(q, graph.lowstates[tick]) for tick, q in window["samples"] if tick in graph.lowstates]
    assert len(both) >= 3, f"{len(both)} of the SDK's samples also seen by rclpy"
    for q, data in both:
        np.testing.assert_array_equal(q, decode_lowstate(data).q)


def _elbow(graph: TwinAndSdk) -> float:
    return graph.peer.ask("state", seconds=0.1)["q"][ELBOW]


def test_an_sdk_lowcmd_stream_moves_a_twin_joint_to_its_target(graph: TwinAndSdk) -> None:
    accepted = graph.counter("lowcmd_accepted")
    start = _elbow(graph)
    target = start + 0.5 if start < 0.5 else start - 0.5
    sent = 0
    for _ in range(4):  # 1.5 s is plenty on an idle machine; a loaded one may slow the twin down
        answer = graph.peer.ask("command", seconds=1.5, rate_hz=200, q={str(ELBOW): target}, kp=60.0,
                                kd=2.0, crc="sdk", mode_machine=None)
        sent += answer["sent"]
        if abs(_elbow(graph) - target) < 0.05:
            break
    assert answer["mode_machine"] == 5  # echoed from the twin's LowState, as the SDK's examples do
    assert abs(_elbow(graph) - target) < 0.05, f"elbow {start:.3f} -> {_elbow(graph):.3f}, target {target}"
    # the SDK's default writer keeps 1 sample: under load some are replaced before they go out
    assert wait_for(lambda: graph.counter("lowcmd_accepted") >= accepted + sent // 2, 5.0)


@pytest.mark.parametrize(("what", "counter", "request_fields"), [
    ("a wrong CRC", "lowcmd_crc_errors", {"crc": "bad", "mode_machine": None}),
    ("another mode_machine", "lowcmd_mode_machine_mismatch", {"crc": "sdk", "mode_machine": 6}),
])
def test_sdk_lowcmds_with_a_bad_crc_or_mode_machine_are_rejected_and_counted(
        graph: TwinAndSdk, what: str, counter: str, request_fields: dict) -> None:
    held = _elbow(graph)
    graph.peer.ask("command", seconds=0.3, rate_hz=200, q={}, kp=40.0, kd=2.0, crc="sdk", mode_machine=None)
    before = graph.counter(counter)
    sent = graph.peer.ask("command", seconds=0.8, rate_hz=200, q={str(ELBOW): held + 0.6}, kp=40.0, kd=2.0,
                          **request_fields)
    assert abs(_elbow(graph) - held) < 0.05, f"a LowCmd with {what} moved the elbow"
    assert wait_for(lambda: graph.counter(counter) >= before + sent["sent"] // 2, 5.0), \
        f"{counter}: {before} -> {graph.counter(counter)} after {sent['sent']} LowCmds with {what}"


def test_the_wire_check_shows_the_sdk_participant_and_the_robot_topics(graph: TwinAndSdk) -> None:
    """`asap-dds-check` (README "Talking to a G1") while the SDK commands the twin."""
    # 5 s: on a loaded machine 3 s of listening missed the SDK's participant (discovery is slower there)
    check = spawn("-m asap_bringup.dds_check", "--seconds", "5")
    # longer than the check listens: its start-up (imports, discovery) takes seconds on a busy machine
    graph.peer.ask("command", seconds=12.0, rate_hz=100, q={}, kp=40.0, kd=2.0, crc="sdk", mode_machine=None)
    code, out, err = finish(check)
    assert code == 0, out + err
    assert "(type propagation disabled)" in out and "result: OK: /lowstate arrives with valid CRCs" in out
    assert "DDS participants that are not ROS nodes (robot firmware, Unitree SDK programs, simulators): 1" \
        in out
    lowcmd = out[out.index("  /lowcmd  [unitree_hg/msg/LowCmd]"):]
    assert lowcmd.startswith("  /lowcmd  [unitree_hg/msg/LowCmd]  publishers: 1 non-ROS  subscribers: "
                             "/g1_sim")
    assert "mode_machine [5]" in lowcmd.splitlines()[1] and " 0/" not in lowcmd.splitlines()[1]
