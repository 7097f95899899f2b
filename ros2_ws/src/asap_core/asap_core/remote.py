"""The Unitree wireless remote as carried in ``LowState.wireless_remote`` (40 bytes).

Layout (unitree_ros2 ``gamepad.hpp``, unitree_rl_gym ``remote_controller.py``): bytes 0-1 head,
bytes 2-3 a little-endian 16-bit button field, then float32 lx, rx, ry, L2, ly at bytes 4, 8,
12, 16, 20; the rest is unused. Bit i of the button field is ``BUTTONS[i]``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

REMOTE_SIZE = 40
BUTTONS: tuple[str, ...] = ("R1", "L1", "start", "select", "R2", "L2", "F1", "F2",
                            "A", "B", "X", "Y", "up", "right", "down", "left")
_BIT = {name: i for i, name in enumerate(BUTTONS)}
_LAYOUT = struct.Struct("<2xH5f")  # head, keys, lx, rx, ry, L2, ly


class RemoteError(ValueError):
    """A remote payload or button name that does not fit the Unitree layout."""


@dataclass(frozen=True)
class RemoteState:
    """Decoded remote: pressed buttons and stick axes in [-1, 1] (L2 analog in [0, 1])."""

    keys: int = 0
    lx: float = 0.0
    rx: float = 0.0
    ry: float = 0.0
    l2: float = 0.0
    ly: float = 0.0
    pressed: frozenset[str] = field(default_factory=frozenset)

    def is_pressed(self, *buttons: str) -> bool:
        """True when every named button is held (a combo such as ``("L2", "B")``)."""
        return all(self.pressed_bit(b) for b in buttons)

    def pressed_bit(self, button: str) -> bool:
        """Whether one button is held."""
        return bool(self.keys >> button_bit(button) & 1)


def button_bit(button: str) -> int:
    """Bit index of a named button."""
    try:
        return _BIT[button]
    except KeyError:
        raise RemoteError(f"unknown button {button!r}; known: {list(BUTTONS)}") from None


def keys_mask(*buttons: str) -> int:
    """The 16-bit key field with the given buttons held."""
    mask = 0
    for b in buttons:
        mask |= 1 << button_bit(b)
    return mask


def decode(payload: bytes | bytearray | list[int]) -> RemoteState:
    """Decode the 40-byte ``wireless_remote`` field."""
    data = bytes(payload)
    if len(data) != REMOTE_SIZE:
        raise RemoteError(f"wireless_remote must be {REMOTE_SIZE} bytes, got {len(data)}")
    keys, lx, rx, ry, l2, ly = _LAYOUT.unpack_from(data)
    pressed = frozenset(b for b in BUTTONS if keys >> _BIT[b] & 1)
    return RemoteState(keys, lx, rx, ry, l2, ly, pressed)


def encode(keys: int = 0, lx: float = 0.0, rx: float = 0.0, ry: float = 0.0, l2: float = 0.0,
           ly: float = 0.0) -> bytes:
    """Build the 40-byte payload (used by the simulated twin's virtual remote)."""
    if not 0 <= keys <= 0xFFFF:
        raise RemoteError(f"keys must fit 16 bits, got {keys}")
    return _LAYOUT.pack(keys, lx, rx, ry, l2, ly).ljust(REMOTE_SIZE, b"\0")
