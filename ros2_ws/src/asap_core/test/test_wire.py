"""Raw CDR LowCmd/LowState against rclpy's own serialization and asap_core.crc."""

from __future__ import annotations

import numpy as np
import pytest

from asap_core.crc import LOWCMD_DTYPE, LOWSTATE_DTYPE, lowcmd_crc, lowstate_crc, pack_lowstate
from asap_core.wire import (
    LOWSTATE_WIRE_SIZE,
    WireCodec,
    cdr_gather_index,
    decode_lowstate,
    encode_lowcmd,
    lowstate_tick,
)

pytest.importorskip("rclpy")
from rclpy.serialization import deserialize_message, serialize_message
from unitree_hg.msg import LowCmd, LowState


def test_encoded_lowcmd_is_what_rclpy_reads_with_a_valid_crc() -> None:
    rng = np.random.default_rng(0)
    q, kp, kd, dq, tau = (rng.normal(size=29) for _ in range(5))
    data = encode_lowcmd(mode_machine=5, q=q, kp=kp, kd=kd, dq=dq, tau=tau)
    msg = deserialize_message(data, LowCmd)
    assert (msg.mode_pr, msg.mode_machine) == (0, 5)
    for i, m in enumerate(msg.motor_cmd):
        expected = (1, q[i], dq[i], tau[i], kp[i], kd[i]) if i < 29 else (0, 0, 0, 0, 0, 0)
        np.testing.assert_allclose((m.mode, m.q, m.dq, m.tau, m.kp, m.kd), expected, rtol=1e-6)
        assert m.reserve == 0
    assert msg.crc == lowcmd_crc(msg)
    # and it is byte-identical to rclpy serializing the same message (padding aside: compare decoded)
    again = deserialize_message(serialize_message(msg), LowCmd)
    assert again == msg


def test_decode_lowstate_reads_every_field_it_exposes_and_checks_the_crc() -> None:
    rng = np.random.default_rng(1)
    msg = LowState()
    msg.version = [3, 4]
    msg.mode_pr, msg.mode_machine, msg.tick = 0, 5, 123456
    msg.imu_state.quaternion = rng.normal(size=4).astype(np.float32)
    msg.imu_state.gyroscope = rng.normal(size=3).astype(np.float32)
    msg.imu_state.accelerometer = rng.normal(size=3).astype(np.float32)
    msg.imu_state.temperature = 41
    for i, m in enumerate(msg.motor_state):
        m.mode, m.q, m.dq, m.ddq, m.tau_est = i % 2, rng.normal(), rng.normal(), rng.normal(), rng.normal()
        m.temperature = [30 + i, 40 + i]
        m.vol, m.sensor, m.motorstate, m.reserve = 24.0, [i, 2 * i], i, [1, 2, 3, i]
    msg.wireless_remote = list(range(40))
    msg.crc = lowstate_crc(msg)
    data = serialize_message(msg)
    assert len(data) == LOWSTATE_WIRE_SIZE
    s = decode_lowstate(data)
    assert s.crc_ok and (s.mode_machine, s.tick) == (5, 123456)
    np.testing.assert_array_equal(s.q, np.float32([m.q for m in msg.motor_state[:29]]))
    np.testing.assert_array_equal(s.dq, np.float32([m.dq for m in msg.motor_state[:29]]))
    np.testing.assert_array_equal(s.tau_est, np.float32([m.tau_est for m in msg.motor_state[:29]]))
    np.testing.assert_array_equal(s.quat_wxyz, msg.imu_state.quaternion)
    np.testing.assert_array_equal(s.gyro_b, msg.imu_state.gyroscope)
    assert s.wireless_remote == bytes(range(40))
    # any changed field breaks the CRC, including ones the node does not read
    msg.motor_state[34].reserve = [1, 2, 3, 99]
    assert not decode_lowstate(serialize_message(msg)).crc_ok
    assert decode_lowstate(serialize_message(msg), check_crc=False).crc_ok
    with pytest.raises(ValueError, match="2092 bytes"):
        decode_lowstate(data[:-4])


def _random_lowstate(rng: np.random.Generator) -> LowState:
    def f32() -> float:
        return float(np.float32(rng.normal()))  # exactly representable on the wire

    msg = LowState(version=[1, 2], mode_pr=1, mode_machine=5, tick=123456)
    imu = msg.imu_state
    imu.quaternion = [f32() for _ in range(4)]
    imu.gyroscope, imu.accelerometer, imu.rpy = ([f32() for _ in range(3)] for _ in range(3))
    imu.temperature = -7
    for i, m in enumerate(msg.motor_state):
        m.mode, m.q, m.dq, m.ddq, m.tau_est = i % 2, f32(), f32(), f32(), f32()
        m.temperature, m.vol, m.sensor, m.motorstate, m.reserve = [i, -i], f32(), [i, 7], i, [1, 2, 3, i]
    msg.wireless_remote = list(range(40))
    msg.reserve = [9, 8, 7, 6]
    msg.crc = lowstate_crc(msg)
    return msg


def test_cdr_layout_differs_from_c_only_by_alignment() -> None:
    index = cdr_gather_index(LOWSTATE_DTYPE)
    assert index.size + 4 == len(serialize_message(LowState()))  # 2088 payload bytes + header
    assert sorted(index[index >= 0]) == sorted(set(index[index >= 0]))  # each C byte at most once


@pytest.mark.parametrize("seed", range(3))
def test_lowstate_round_trip_matches_rclpy(seed: int) -> None:
    msg = _random_lowstate(np.random.default_rng(seed))
    msg.tick = 2**31 + 4097 * seed  # every byte of the uint32 in play
    codec = WireCodec(LOWSTATE_DTYPE)
    image = pack_lowstate(msg)
    image["crc"] = msg.crc
    assert deserialize_message(codec.to_cdr(image), LowState) == msg
    assert codec.from_cdr(serialize_message(msg)).tobytes() == image.tobytes()
    assert codec.crc(image) == lowstate_crc(msg)
    assert lowstate_tick(serialize_message(msg)) == msg.tick  # rclpy's own bytes


def test_lowcmd_wrong_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="expected 1004 bytes"):
        WireCodec(LOWCMD_DTYPE).from_cdr(b"\x00\x01\x00\x00" + bytes(10))
