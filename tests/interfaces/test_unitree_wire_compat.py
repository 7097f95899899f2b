"""Our unitree_hg messages are the robot's: rclpy's CDR bytes decode field for field with the
IDL classes of Unitree's own SDK, and the SDK computes the same CRC for them."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
from rclpy.serialization import serialize_message
from unitree_hg.msg import LowCmd, LowState
from unitree_oracle import sdk

from asap_core.crc import lowcmd_crc, lowstate_crc


def test_lowcmd_cdr_decodes_in_unitree_sdk() -> None:
    rng = np.random.default_rng(0)
    msgs = []
    for k in range(20):
        m = LowCmd()
        m.mode_pr, m.mode_machine = k % 2, 5
        for i, c in enumerate(m.motor_cmd):
            c.mode, c.q, c.dq, c.kp, c.kd = 1, float(rng.uniform(-2, 2)), 0.5, 40.0 + i, 1.0
        m.reserve[1] = 7 + k
        m.crc = lowcmd_crc(m)
        msgs.append(m)
    decoded = sdk({"op": "deserialize", "type": "LowCmd",
                   "cdr_hex": [serialize_message(m).hex()
                               for m in msgs]})
    for m, d in zip(msgs, decoded, strict=True):
        assert (d["mode_pr"], d["mode_machine"], d["crc"]) == (m.mode_pr, m.mode_machine, m.crc)
        assert list(d["reserve"]) == list(m.reserve)
        for c, dc in zip(m.motor_cmd, d["motor_cmd"], strict=True):
            assert dc["mode"] == c.mode and dc["kp"] == pytest.approx(c.kp)
            assert dc["q"] == pytest.approx(c.q, abs=1e-6)
    # the SDK's CRC of what it decoded equals the CRC we put in the message
    assert sdk({"op": "crc", "type": "LowCmd", "messages": decoded}) == [m.crc for m in msgs]


def test_lowstate_cdr_decodes_in_unitree_sdk() -> None:
    m = LowState()
    m.tick, m.mode_machine = 123456, 6
    m.imu_state.quaternion = [1.0, 0.0, 0.0, 0.0]
    m.imu_state.gyroscope = [0.1, -0.2, 0.3]
    m.motor_state[3].q, m.motor_state[3].temperature = 0.25, [41, 55]
    m.wireless_remote = list(range(40))
    m.crc = lowstate_crc(m)
    (d,) = sdk({"op": "deserialize", "type": "LowState", "cdr_hex": [serialize_message(m).hex()]})
    assert (d["tick"], d["mode_machine"], d["crc"]) == (123456, 6, m.crc)
    assert d["imu_state"]["gyroscope"] == pytest.approx([0.1, -0.2, 0.3])
    assert d["motor_state"][3]["q"] == pytest.approx(0.25)
    assert list(d["motor_state"][3]["temperature"]) == [41, 55]
    assert list(d["wireless_remote"]) == list(range(40))
    assert sdk({"op": "crc", "type": "LowState", "messages": [d]}) == [m.crc]
