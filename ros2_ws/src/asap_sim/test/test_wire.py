"""C image <-> CDR bytes against rclpy's own serializer and asap_core's message CRC (the oracles)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

pytest.importorskip("rclpy")
from rclpy.serialization import deserialize_message, serialize_message
from rosgraph_msgs.msg import Clock
from unitree_hg.msg import LowCmd, LowState

from asap_core import g1, remote
from asap_core.crc import lowcmd_crc, lowstate_crc
from asap_sim.twin import Twin
from asap_sim.wire import LowCmdDecoder, LowStateEncoder, clock_cdr


def _f32(rng: np.random.Generator) -> float:
    return float(np.float32(rng.normal()))  # exactly representable on the wire


def _random_lowstate(rng: np.random.Generator) -> LowState:
    msg = LowState(version=[1, 2], mode_pr=1, mode_machine=5, tick=123456)
    imu = msg.imu_state
    imu.quaternion = [_f32(rng) for _ in range(4)]
    imu.gyroscope, imu.accelerometer, imu.rpy = ([_f32(rng) for _ in range(3)] for _ in range(3))
    imu.temperature = -7
    for i, m in enumerate(msg.motor_state):
        m.mode, m.q, m.dq, m.ddq, m.tau_est = i % 2, _f32(rng), _f32(rng), _f32(rng), _f32(rng)
        m.temperature, m.vol, m.sensor, m.motorstate, m.reserve = [i, -i], _f32(rng), [i, 7], i, [1, 2, 3, i]
    msg.wireless_remote = list(range(40))
    msg.reserve = [9, 8, 7, 6]
    msg.crc = lowstate_crc(msg)
    return msg


def _random_lowcmd(rng: np.random.Generator) -> LowCmd:
    msg = LowCmd(mode_pr=0, mode_machine=5, reserve=[1, 2, 3, 4])
    for i, m in enumerate(msg.motor_cmd):
        m.mode, m.q, m.dq, m.tau, m.kp, m.kd, m.reserve = 1, _f32(rng), _f32(rng), _f32(rng), 40.0, 1.0, i
    msg.crc = lowcmd_crc(msg)
    return msg


@pytest.mark.parametrize("seed", range(3))
def test_lowcmd_decoder_agrees_with_asap_core(seed: int) -> None:
    msg = _random_lowcmd(np.random.default_rng(seed))
    ok, mode_machine, cmd = LowCmdDecoder().decode(serialize_message(msg))
    assert ok and mode_machine == 5
    np.testing.assert_array_equal(cmd.q, [m.q for m in msg.motor_cmd[: g1.NUM_MOTORS]])
    np.testing.assert_array_equal(cmd.tau, [m.tau for m in msg.motor_cmd[: g1.NUM_MOTORS]])
    msg.crc ^= 1
    assert not LowCmdDecoder().decode(serialize_message(msg))[0]


def test_encoded_lowstate_carries_the_twin_state_and_a_valid_crc() -> None:
    twin = Twin()
    twin.step(10)
    state = twin.read_state()
    keys = remote.keys_mask("L2", "B")
    data = LowStateEncoder(mode_machine=6).encode(state, np.ones(g1.NUM_MOTORS), remote.encode(keys, lx=0.5))
    msg = deserialize_message(data, LowState)
    assert msg.crc == lowstate_crc(msg)
    assert (msg.mode_machine, msg.tick) == (6, 20)
    np.testing.assert_allclose([m.q for m in msg.motor_state[: g1.NUM_MOTORS]], state.q, atol=1e-6)
    np.testing.assert_allclose(msg.imu_state.quaternion, state.imu_quat_wxyz, atol=1e-6)
    np.testing.assert_allclose(msg.imu_state.rpy, state.rpy, atol=1e-6)
    assert remote.decode(msg.wireless_remote).is_pressed("L2", "B")
    assert [m.mode for m in msg.motor_state[:30]] == [1] * 29 + [0]


def test_clock_bytes() -> None:
    msg = deserialize_message(clock_cdr(12.3456789), Clock)
    assert (msg.clock.sec, msg.clock.nanosec) == (12, 345678900)
    assert clock_cdr(1.5)[4:] == struct.pack("<iI", 1, 500_000_000)
