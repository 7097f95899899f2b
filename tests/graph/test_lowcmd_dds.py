"""Two processes over real DDS: /lowcmd at 500 Hz arrives complete and with valid CRCs."""

from __future__ import annotations

from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from unitree_hg.msg import LowCmd  # noqa: E402

from asap_core.crc import lowcmd_crc  # noqa: E402
from asap_testing.dds import finish, spawn, spin_until  # noqa: E402

pytestmark = pytest.mark.graph
COUNT = 2500  # 5 s at 500 Hz
# Reliable delivery with room for a busy 2-core machine: a Python subscriber can fall a few hundred
# messages behind for a moment; the test is about the DDS path, not about the receiver's CPU.
QUEUE_DEPTH = 1000


def test_lowcmd_500hz_between_processes_with_crc() -> None:
    rclpy.init()
    node = rclpy.create_node("lowcmd_test_receiver")
    received: dict[int, LowCmd] = {}

    def on_cmd(msg: LowCmd) -> None:  # keep the callback cheap; verify CRCs afterwards
        received[int(msg.reserve[0])] = msg

    qos = QoSProfile(depth=QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(LowCmd, "/lowcmd", on_cmd, qos)
    proc = spawn(Path(__file__).with_name("lowcmd_publisher.py"), "--count", str(COUNT))
    try:
        spin_until(node, lambda: proc.poll() is not None, timeout_s=60)
        spin_until(node, lambda: len(received) >= COUNT, timeout_s=2)
    finally:
        code, out, err = finish(proc)
        node.destroy_node()
        rclpy.shutdown()
    assert code == 0, err
    assert f"sent {COUNT}" in out
    assert len(received) >= 0.99 * COUNT, f"received {len(received)}/{COUNT} after discovery"
    bad = [seq for seq, msg in received.items() if msg.crc != lowcmd_crc(msg)]
    assert not bad, f"messages {bad[:10]} arrived with a CRC that does not match their content"
