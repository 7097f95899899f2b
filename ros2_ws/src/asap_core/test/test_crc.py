"""LowCmd/LowState CRC: fast path vs the bit-by-bit algorithm (vs Unitree's own SDK:
tests/interfaces/test_unitree_wire_compat.py)."""

from __future__ import annotations

import numpy as np

from asap_core import crc
from asap_core.testing.messages import as_obj, random_lowcmd


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


def test_crc_changes_with_any_field() -> None:
    rng = np.random.default_rng(5)
    base = random_lowcmd(rng)
    ref = crc.lowcmd_crc(as_obj(base))
    base["motor_cmd"][34]["kd"] += 1.0
    assert crc.lowcmd_crc(as_obj(base)) != ref
