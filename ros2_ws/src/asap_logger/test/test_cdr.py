"""The vectorized CDR decoder agrees with real decoders: rosbags' and rclpy's (bytes rclpy produced)."""

from __future__ import annotations

import numpy as np
import pytest

from asap_logger.errors import DecodeError
from asap_logger.reader.cdr import decode, plan
from asap_logger.testing.bags import lowstate, odometry, typestore


@pytest.fixture(scope="module")
def store():
    return typestore()


def test_lowstate_layout_matches_rosbags(store) -> None:
    rng = np.random.default_rng(1)
    msgs = [lowstate(store, 100 + i, rng.normal(size=29)) for i in range(5)]
    blobs = [store.serialize_cdr(m, "unitree_hg/msg/LowState") for m in msgs]
    out = decode(
        store.fielddefs, "unitree_hg/msg/LowState", blobs, ["tick", "motor_state.q", "imu_state.gyroscope"]
    )
    for i, blob in enumerate(blobs):
        ref = store.deserialize_cdr(blob, "unitree_hg/msg/LowState")
        assert out["tick"][i, 0] == ref.tick
        np.testing.assert_array_equal(out["motor_state.q"][i], [m.q for m in ref.motor_state])
        np.testing.assert_array_equal(out["imu_state.gyroscope"][i], ref.imu_state.gyroscope)


def test_strings_of_varying_length_fall_back_to_per_layout_groups(store) -> None:
    msgs = [odometry(store, 10**9 * i, np.array([i, 2.0 * i, 3.0])) for i in range(6)]
    for i, m in enumerate(msgs):
        m.header.frame_id = "w" * i  # every message has its own layout
    blobs = [store.serialize_cdr(m, "nav_msgs/msg/Odometry") for m in msgs]
    fields = ["header.frame_id", "pose.pose.position.y", "twist.twist.angular.z", "header.stamp.sec"]
    out = decode(store.fielddefs, "nav_msgs/msg/Odometry", blobs, fields)
    assert [s for (s,) in out["header.frame_id"]] == ["w" * i for i in range(6)]
    np.testing.assert_array_equal(out["pose.pose.position.y"][:, 0], 2.0 * np.arange(6))
    np.testing.assert_array_equal(out["header.stamp.sec"][:, 0], np.arange(6))


def test_sequence_length_changes_are_reported(store) -> None:
    from asap_logger.testing.bags import record

    blobs = [
        store.serialize_cdr(record(store, 0, i, i, np.zeros(4 + (i == 2))), "asap_msgs/msg/PolicyRecord")
        for i in range(3)
    ]
    with pytest.raises(DecodeError, match=r"/r: message #2 .*'observation' changes length"):
        decode(store.fielddefs, "asap_msgs/msg/PolicyRecord", blobs, ["observation"], "/r")


def test_matches_rclpy_serialization(store) -> None:
    rclpy_serialization = pytest.importorskip("rclpy.serialization")
    from unitree_hg.msg import LowCmd, LowState

    msg = LowState(tick=77)
    msg.motor_state[3].q, msg.motor_state[28].tau_est, msg.imu_state.quaternion[0] = 1.5, -2.25, 0.5
    blob = rclpy_serialization.serialize_message(msg)
    assert plan(store.fielddefs, "unitree_hg/msg/LowState", blob).size == len(blob)
    out = decode(
        store.fielddefs,
        "unitree_hg/msg/LowState",
        [blob],
        ["tick", "motor_state.q", "motor_state.tau_est", "imu_state.quaternion"],
    )
    assert out["tick"][0, 0] == 77 and out["motor_state.q"][0, 3] == 1.5
    assert out["motor_state.tau_est"][0, 28] == -2.25 and out["imu_state.quaternion"][0, 0] == 0.5
    cmd = LowCmd()
    cmd.motor_cmd[10].kp = 42.0
    out = decode(
        store.fielddefs,
        "unitree_hg/msg/LowCmd",
        [rclpy_serialization.serialize_message(cmd)],
        ["motor_cmd.kp"],
    )
    assert out["motor_cmd.kp"][0, 10] == 42.0
