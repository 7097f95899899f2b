"""Publish unitree_hg/LowCmd on /lowcmd at a fixed rate with absolute deadlines.

Waits until ``--subscribers`` readers have matched (DDS discovery) before the first message, so
the receiving side can count every message. The sequence number rides in ``reserve[0]`` (covered
by the CRC). Prints ``sent N`` at the end.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from unitree_hg.msg import LowCmd

from asap_core.crc import lowcmd_crc


def main() -> int:
    """Run the publisher."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--count", type=int, default=2500)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--subscribers", type=int, default=1)
    ap.add_argument("--discovery-timeout", type=float, default=20.0)
    args = ap.parse_args()

    rclpy.init()
    node = rclpy.create_node("lowcmd_test_publisher")
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(LowCmd, "/lowcmd", qos)
    deadline = time.monotonic() + args.discovery_timeout
    while pub.get_subscription_count() < args.subscribers:
        if time.monotonic() > deadline:
            print("no subscriber matched", file=sys.stderr)
            return 2
        time.sleep(0.01)

    rng = np.random.default_rng(0)
    period = 1.0 / args.rate
    t_next = time.monotonic()
    for seq in range(args.count):
        msg = LowCmd()
        msg.mode_machine = 5
        q = rng.uniform(-1.0, 1.0, 35)
        for i, m in enumerate(msg.motor_cmd):
            m.mode, m.q, m.kp, m.kd = 1, float(q[i]), 40.0, 1.0
        msg.reserve[0] = seq
        msg.crc = lowcmd_crc(msg)
        pub.publish(msg)
        t_next += period
        time.sleep(max(0.0, t_next - time.monotonic()))
    # let reliable delivery drain before the writer goes away
    time.sleep(0.5)
    print(f"sent {args.count}")
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
