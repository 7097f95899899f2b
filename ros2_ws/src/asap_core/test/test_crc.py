"""LowCmd/LowState CRC: fast path vs the bit-by-bit algorithm vs Unitree's own SDK."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from unitree_oracle import sdk

from asap_core import crc

F32 = np.float32


def random_lowcmd(rng: np.random.Generator) -> dict:
    """Field dict of a random LowCmd (float32-representable values)."""
    motors = [
        {"mode": int(rng.integers(0, 2)), "q": float(F32(rng.uniform(-3, 3))),
         "dq": float(F32(rng.normal())), "tau": float(F32(rng.normal(scale=5))),
         "kp": float(F32(rng.uniform(0, 300))), "kd": float(F32(rng.uniform(0, 10))),
         "reserve": int(rng.integers(0, 2**32))}
        for _ in range(35)
    ]
    return {"mode_pr": int(rng.integers(0, 2)), "mode_machine": int(rng.integers(0, 256)),
            "motor_cmd": motors, "reserve": [int(v) for v in rng.integers(0, 2**32, 4)], "crc": 0}


def random_lowstate(rng: np.random.Generator) -> dict:
    """Field dict of a random LowState."""
    motors = [
        {"mode": int(rng.integers(0, 2)), "q": float(F32(rng.uniform(-3, 3))),
         "dq": float(F32(rng.normal())), "ddq": float(F32(rng.normal())),
         "tau_est": float(F32(rng.normal())), "temperature": [int(v) for v in rng.integers(-40, 120, 2)],
         "vol": float(F32(rng.uniform(20, 60))), "sensor": [int(v) for v in rng.integers(0, 2**32, 2)],
         "motorstate": int(rng.integers(0, 2**32)), "reserve": [int(v) for v in rng.integers(0, 2**32, 4)]}
        for _ in range(35)
    ]
    imu = {"quaternion": [float(F32(v)) for v in rng.normal(size=4)],
           "gyroscope": [float(F32(v)) for v in rng.normal(size=3)],
           "accelerometer": [float(F32(v)) for v in rng.normal(size=3)],
           "rpy": [float(F32(v)) for v in rng.normal(size=3)], "temperature": int(rng.integers(-40, 90))}
    return {"version": [int(v) for v in rng.integers(0, 2**32, 2)], "mode_pr": int(rng.integers(0, 2)),
            "mode_machine": int(rng.integers(0, 256)), "tick": int(rng.integers(0, 2**32)),
            "imu_state": imu, "motor_state": motors,
            "wireless_remote": [int(v) for v in rng.integers(0, 256, 40)],
            "reserve": [int(v) for v in rng.integers(0, 2**32, 4)], "crc": 0}


def as_obj(fields: dict) -> SimpleNamespace:
    """A message-like object (attribute access) from a field dict."""
    def conv(v):
        if isinstance(v, dict):
            return SimpleNamespace(**{k: conv(x) for k, x in v.items()})
        if isinstance(v, list) and v and isinstance(v[0], dict):
            return [conv(x) for x in v]
        return v
    return conv(fields)


def test_layout_sizes_match_the_c_structs() -> None:
    # the C struct sizes of unitree_ros2's unitree_hg messages (ros2_ws/src/unitree_hg/msg/) and the
    # SDK's pack formats (the oracle of test_unitree_wire_compat.py)
    assert crc.LOWCMD_DTYPE.itemsize == 1004
    assert crc.LOWSTATE_DTYPE.itemsize == 2092
    assert crc.LOWCMD_DTYPE.fields["crc"][1] == 1000
    assert crc.LOWSTATE_DTYPE.fields["crc"][1] == 2088


def test_fast_crc_equals_bitwise_reference() -> None:
    rng = np.random.default_rng(1)
    for n_words in (1, 2, 7, 250, 522):
        data = rng.integers(0, 256, 4 * n_words, dtype=np.uint8).tobytes()
        assert crc.crc32_words(data) == crc.crc32_words_reference(data)


def _crc32_mpeg2(data: bytes) -> int:
    """Textbook byte-stream CRC-32/MPEG-2 (poly 04C11DB7, init FFFFFFFF, no reflection)."""
    reg = 0xFFFFFFFF
    for byte in data:
        reg ^= byte << 24
        for _ in range(8):
            reg = ((reg << 1) ^ 0x04C11DB7 if reg & 0x80000000 else reg << 1) & 0xFFFFFFFF
    return reg


def test_crc_is_mpeg2_over_words_fed_msb_first() -> None:
    # the catalogue check value of CRC-32/MPEG-2 pins the textbook helper ...
    assert _crc32_mpeg2(b"123456789") == 0x0376E6E7
    # ... and the robot's CRC is that CRC over each little-endian word's bytes, MSB first
    rng = np.random.default_rng(6)
    data = rng.integers(0, 256, 1000, dtype=np.uint8).tobytes()
    msb_first = b"".join(data[i:i + 4][::-1] for i in range(0, len(data), 4))
    assert crc.crc32_words(data) == _crc32_mpeg2(msb_first)


def test_padding_is_zero_whatever_the_message() -> None:
    rng = np.random.default_rng(2)
    img = crc.pack_lowcmd(as_obj(random_lowcmd(rng))).tobytes()
    assert img[2:4] == b"\0\0"  # after mode_pr, mode_machine
    for i in range(35):
        assert img[4 + 28 * i + 1: 4 + 28 * i + 4] == b"\0\0\0"  # after each motor's mode


def test_lowcmd_crc_matches_unitree_sdk_on_1000_random_messages() -> None:
    rng = np.random.default_rng(3)
    msgs = [random_lowcmd(rng) for _ in range(1000)]
    expected = sdk({"op": "crc", "type": "LowCmd", "messages": msgs})
    ours = [crc.lowcmd_crc(as_obj(m)) for m in msgs]
    assert ours == expected


def test_lowstate_crc_matches_unitree_sdk_on_random_messages() -> None:
    rng = np.random.default_rng(4)
    msgs = [random_lowstate(rng) for _ in range(200)]
    expected = sdk({"op": "crc", "type": "LowState", "messages": msgs})
    assert [crc.lowstate_crc(as_obj(m)) for m in msgs] == expected


def test_crc_changes_with_any_field() -> None:
    rng = np.random.default_rng(5)
    base = random_lowcmd(rng)
    ref = crc.lowcmd_crc(as_obj(base))
    base["motor_cmd"][34]["kd"] += 1.0
    assert crc.lowcmd_crc(as_obj(base)) != ref
