"""CRC of ``unitree_hg`` LowCmd / LowState exactly as the G1 computes it.

The robot runs CRC-32 with polynomial 0x04C11DB7, initial value 0xFFFFFFFF, no reflection and
no final XOR (the STM32 hardware CRC), fed 32-bit little-endian words MSB first, over the
zero-padded C struct up to (not including) the ``crc`` field: 1000 bytes for LowCmd, 2088 for
LowState. Padding must be zero: a reused struct with stale padding is silently ignored by the
robot (fan-ziqi/rl_sar#147), so every pack starts from a fresh zeroed buffer.

Fast path: feeding little-endian words MSB first is a byte-wise non-reflected CRC (CRC-32/MPEG-2)
of the byte-swapped words, and a non-reflected CRC of a byte stream equals the bit-reversed
reflected CRC (``zlib.crc32``) of the bit-reversed bytes: a byteswap, a ``bytes.translate`` and
zlib, a few microseconds for the 250 (LowCmd) or 522 (LowState) words.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from asap_core.g1 import NUM_MOTOR_SLOTS

_MOTOR_CMD = np.dtype(
    {"names": ["mode", "q", "dq", "tau", "kp", "kd", "reserve"],
     "formats": ["u1", "<f4", "<f4", "<f4", "<f4", "<f4", "<u4"],
     "offsets": [0, 4, 8, 12, 16, 20, 24], "itemsize": 28}
)
LOWCMD_DTYPE = np.dtype(
    {"names": ["mode_pr", "mode_machine", "motor_cmd", "reserve", "crc"],
     "formats": ["u1", "u1", (_MOTOR_CMD, NUM_MOTOR_SLOTS), ("<u4", 4), "<u4"],
     "offsets": [0, 1, 4, 984, 1000], "itemsize": 1004}
)
"""C layout of ``unitree_hg::msg::dds_::LowCmd_`` with natural alignment (1004 bytes)."""

_IMU_STATE = np.dtype(
    {"names": ["quaternion", "gyroscope", "accelerometer", "rpy", "temperature"],
     "formats": [("<f4", 4), ("<f4", 3), ("<f4", 3), ("<f4", 3), "<i2"],
     "offsets": [0, 16, 28, 40, 52], "itemsize": 56}
)
_MOTOR_STATE = np.dtype(
    {"names": ["mode", "q", "dq", "ddq", "tau_est", "temperature", "vol", "sensor",
               "motorstate", "reserve"],
     "formats": ["u1", "<f4", "<f4", "<f4", "<f4", ("<i2", 2), "<f4", ("<u4", 2), "<u4",
                 ("<u4", 4)],
     "offsets": [0, 4, 8, 12, 16, 20, 24, 28, 36, 40], "itemsize": 56}
)
LOWSTATE_DTYPE = np.dtype(
    {"names": ["version", "mode_pr", "mode_machine", "tick", "imu_state", "motor_state",
               "wireless_remote", "reserve", "crc"],
     "formats": [("<u4", 2), "u1", "u1", "<u4", _IMU_STATE, (_MOTOR_STATE, NUM_MOTOR_SLOTS),
                 ("u1", 40), ("<u4", 4), "<u4"],
     "offsets": [0, 8, 9, 12, 16, 72, 2032, 2072, 2088], "itemsize": 2092}
)
"""C layout of ``unitree_hg::msg::dds_::LowState_`` with natural alignment (2092 bytes)."""

_BITREV8_BYTES = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))
"""Bit reversal of every byte value, as a ``bytes.translate`` table."""


def crc32_words(data: bytes | np.ndarray) -> int:
    """Unitree's CRC over ``data`` (length a multiple of 4, little-endian 32-bit words)."""
    stream = np.frombuffer(data, dtype="<u4").byteswap().tobytes().translate(_BITREV8_BYTES)
    reflected = zlib.crc32(stream) ^ 0xFFFFFFFF  # zlib: init/final-xor 0xFFFFFFFF
    return int.from_bytes(reflected.to_bytes(4, "little").translate(_BITREV8_BYTES), "big")  # bit-reversed


def crc32_words_reference(data: bytes) -> int:
    """Bit-by-bit transcription of the robot's algorithm; slow, for tests and docs."""
    crc = 0xFFFFFFFF
    for (word,) in np.frombuffer(bytes(data), dtype="<u4").reshape(-1, 1):
        word = int(word)
        for bit in range(31, -1, -1):
            top = crc & 0x80000000
            crc = (crc << 1) & 0xFFFFFFFF
            if top ^ (((word >> bit) & 1) << 31):
                crc ^= 0x04C11DB7
    return crc


def pack_lowcmd(msg: Any) -> np.ndarray:
    """The zero-padded C image of a LowCmd-like object (fields as in ``unitree_hg/LowCmd``)."""
    buf = np.zeros((), dtype=LOWCMD_DTYPE)
    buf["mode_pr"] = msg.mode_pr
    buf["mode_machine"] = msg.mode_machine
    motors = buf["motor_cmd"]
    for i, m in enumerate(msg.motor_cmd):
        motors[i] = (m.mode, m.q, m.dq, m.tau, m.kp, m.kd, m.reserve)
    buf["reserve"] = msg.reserve
    return buf


def pack_lowstate(msg: Any) -> np.ndarray:
    """The zero-padded C image of a LowState-like object (fields as in ``unitree_hg/LowState``)."""
    buf = np.zeros((), dtype=LOWSTATE_DTYPE)
    buf["version"] = msg.version
    buf["mode_pr"] = msg.mode_pr
    buf["mode_machine"] = msg.mode_machine
    buf["tick"] = msg.tick
    imu = msg.imu_state
    buf["imu_state"] = (imu.quaternion, imu.gyroscope, imu.accelerometer, imu.rpy,
                        imu.temperature)
    motors = buf["motor_state"]
    for i, m in enumerate(msg.motor_state):
        motors[i] = (m.mode, m.q, m.dq, m.ddq, m.tau_est, m.temperature, m.vol, m.sensor,
                     m.motorstate, m.reserve)
    buf["wireless_remote"] = np.frombuffer(bytes(msg.wireless_remote), dtype=np.uint8)
    buf["reserve"] = msg.reserve
    return buf


def field_offset(dtype: np.dtype[Any], name: str) -> int:
    """Byte offset of field ``name`` in the structured ``dtype`` (one of the message layouts above)."""
    if dtype.fields is None:
        raise TypeError(f"{dtype} is not a structured dtype")
    return dtype.fields[name][1]


def _crc_of(buf: np.ndarray) -> int:
    return crc32_words(buf.tobytes()[: field_offset(buf.dtype, "crc")])


def lowcmd_crc(msg: Any) -> int:
    """CRC the robot expects in ``LowCmd.crc``."""
    return _crc_of(pack_lowcmd(msg))


def lowstate_crc(msg: Any) -> int:
    """CRC the robot puts in ``LowState.crc``."""
    return _crc_of(pack_lowstate(msg))
