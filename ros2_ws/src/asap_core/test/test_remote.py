"""Wireless remote decoding against hand-built byte vectors."""

from __future__ import annotations

import struct

import pytest

from asap_core import remote


def test_decode_hand_built_bytes() -> None:
    # head 0x55 0x51, keys: A (bit 8) + L2 (bit 5) = 0x0120 little-endian -> 20 01
    data = bytes([0x55, 0x51, 0x20, 0x01])
    data += struct.pack("<f", 0.5) + struct.pack("<f", -0.25) + struct.pack("<f", 1.0)
    data += struct.pack("<f", 0.75) + struct.pack("<f", -1.0)
    data += bytes(40 - len(data))
    s = remote.decode(data)
    assert s.keys == 0x0120
    assert s.pressed == {"A", "L2"}
    assert s.is_pressed("L2", "A") and not s.is_pressed("L2", "B")
    assert (s.lx, s.rx, s.ry, s.l2, s.ly) == (0.5, -0.25, 1.0, 0.75, -1.0)


@pytest.mark.parametrize("bit", range(16))
def test_each_bit_is_one_button(bit: int) -> None:
    data = bytes(2) + (1 << bit).to_bytes(2, "little") + bytes(36)
    assert remote.decode(data).pressed == {remote.BUTTONS[bit]}


def test_button_order_matches_unitree() -> None:
    assert remote.BUTTONS[:4] == ("R1", "L1", "start", "select")
    assert remote.button_bit("B") == 9 and remote.button_bit("left") == 15


def test_encode_round_trip() -> None:
    payload = remote.encode(remote.keys_mask("L2", "B"), lx=0.1, ly=-0.2)
    assert len(payload) == 40
    s = remote.decode(list(payload))
    assert s.pressed == {"L2", "B"}
    assert s.lx == pytest.approx(0.1) and s.ly == pytest.approx(-0.2)


def test_bad_input_is_explained() -> None:
    with pytest.raises(remote.RemoteError, match="40 bytes"):
        remote.decode(bytes(39))
    with pytest.raises(remote.RemoteError, match="unknown button"):
        remote.keys_mask("Z")
