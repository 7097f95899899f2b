"""Publish LowState, LowCmd or PolicyRecord at a fixed rate as pre-serialized CDR, keeping what was sent.

    python stream_publisher.py lowstate --rate 500 --seconds 30 --out sent.bin

Waits until ``--subscribers`` subscriptions matched, publishes with absolute deadlines, waits for
every message to be acknowledged, writes the sent CDR blobs (u32 length + bytes each) to
``--out``, and prints ``sent <n>``. SIGTERM ends it early (still writing what was sent).
"""

from __future__ import annotations

import argparse
import signal
import struct
import sys
import time

import numpy as np
import rclpy
from asap_msgs.msg import PolicyRecord
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
from unitree_hg.msg import LowCmd, LowState


def _lowstate(i: int, rng: np.random.Generator) -> LowState:
    msg = LowState(tick=i, mode_machine=5)
    for k in range(29):
        msg.motor_state[k].q = float(rng.normal())
    msg.imu_state.quaternion = [1.0, 0.0, 0.0, 0.0]
    return msg


def _record(i: int, rng: np.random.Generator) -> PolicyRecord:
    msg = PolicyRecord(tick=i, mode=3, phase=i / 1500.0, lowstate_tick=10 * i, inference_ms=0.03)
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 10**9)
    msg.observation = rng.normal(size=380).astype(np.float32).tolist()
    msg.action = msg.action_raw = rng.normal(size=29).astype(np.float32).tolist()
    msg.q_target = rng.normal(size=29).astype(np.float32).tolist()
    return msg


def _lowcmd(i: int, rng: np.random.Generator) -> LowCmd:
    msg = LowCmd(mode_machine=5, crc=i)
    for k in range(29):
        msg.motor_cmd[k].q, msg.motor_cmd[k].kp, msg.motor_cmd[k].kd = float(rng.normal()), 100.0, 2.0
    return msg


KINDS = {
    "lowstate": (LowState, "/lowstate", _lowstate),
    "lowcmd": (LowCmd, "/lowcmd", _lowcmd),
    "record": (PolicyRecord, "/policy/record", _record),
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--subscribers", type=int, default=1)
    parser.add_argument("--out", default="")
    parser.add_argument("--fast", action="store_true", help="lowstate only: patch the tick into one template")
    args = parser.parse_args()
    msg_type, topic, make = KINDS[args.kind]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    rclpy.init(signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    node = rclpy.create_node(f"{args.kind}_publisher")
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(msg_type, topic, qos)
    deadline = time.monotonic() + 60
    while pub.get_subscription_count() < args.subscribers and time.monotonic() < deadline:
        time.sleep(0.01)
    if pub.get_subscription_count() < args.subscribers:
        print("no subscriber matched", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    sent: list[bytes] = []
    period, start = 1.0 / args.rate, time.monotonic()
    n = int(args.rate * args.seconds)
    print("started", flush=True)
    template = bytearray(serialize_message(make(0, rng)))
    for i in range(n):
        if stop:
            break
        if args.fast:  # LowState.tick is the u32 at CDR byte 16 (after the header, version[2], modes)
            struct.pack_into("<I", template, 16, i)
            blob = bytes(template)
        else:
            blob = serialize_message(make(i, rng))
        pub.publish(blob)
        sent.append(blob)
        time.sleep(max(0.0, start + (i + 1) * period - time.monotonic()))
    elapsed = time.monotonic() - start
    pub.wait_for_all_acked(rclpy.duration.Duration(seconds=10))
    if args.out:
        with open(args.out, "wb") as fh:
            for blob in sent:
                fh.write(struct.pack("<I", len(blob)) + blob)
    print(f"sent {len(sent)} in {elapsed:.2f} s", flush=True)
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
