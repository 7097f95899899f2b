"""``unitree_hg`` LowCmd / LowState as raw CDR bytes, vectorized with numpy.

A Python LowCmd or LowState message holds 35 motor objects: building one costs ~0.2-0.6 ms, and
deserializing /lowstate at 500 Hz takes a sizeable share of a core. The policy node and the twin
therefore publish and subscribe these two types raw; subscribers still see ordinary messages,
because the bytes are what rclpy itself would serialize (checked in tests).

The robot's CRC runs over the zero-padded C struct (``asap_core.crc.LOWCMD_DTYPE`` /
``LOWSTATE_DTYPE``); DDS carries the same fields as little-endian CDR (XCDR1, 4-byte
encapsulation header), where each primitive is aligned to its own size from the payload start and
structs add no padding of their own. Both layouts are fixed-size, so one byte permutation,
derived once from the C dtype (:func:`cdr_gather_index`), maps a C image to its CDR payload and
back: the C dtype is the single description of the layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asap_core.crc import LOWCMD_DTYPE, LOWSTATE_DTYPE, crc32_words, field_offset
from asap_core.g1 import NUM_MOTORS

CDR_LE_HEADER = b"\x00\x01\x00\x00"
"""Encapsulation header of a little-endian plain CDR payload (what rclpy/FastDDS write)."""


def _leaf_bytes(dtype: np.dtype, base: int) -> list[tuple[int, int]]:
    """(C offset, size) of every primitive, in declaration order."""
    if dtype.fields is None:
        if dtype.subdtype is not None:
            item, shape = dtype.subdtype
            count = int(np.prod(shape))
            return [leaf for i in range(count) for leaf in _leaf_bytes(item, base + i * item.itemsize)]
        return [(base, dtype.itemsize)]
    return [leaf for name in dtype.names or ()
            for leaf in _leaf_bytes(dtype.fields[name][0], base + dtype.fields[name][1])]


def cdr_gather_index(dtype: np.dtype) -> np.ndarray:
    """For each byte of the CDR payload, the byte of the C image it holds (padding: -1)."""
    index: list[int] = []
    for c_offset, size in _leaf_bytes(dtype, 0):
        index.extend([-1] * (-len(index) % size))  # align the primitive to its size
        index.extend(range(c_offset, c_offset + size))
    return np.array(index, dtype=np.intp)


class WireCodec:
    """Converts one fixed-size message type between its C image and its CDR bytes (thread-safe)."""

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        index = cdr_gather_index(dtype)
        self.payload_size = index.size
        self.wire_size = len(CDR_LE_HEADER) + index.size
        self._payload_pos = np.flatnonzero(index >= 0)  # integer gathers: much faster than masks
        self._c_pos = index[self._payload_pos]
        self._crc_offset = field_offset(dtype, "crc")
        # CDR padding read from a padding byte of the C struct (zero, as the robot's CRC requires):
        # serializing is then one gather, no zero-filled buffer to scatter into
        c_padding = np.setdiff1d(np.arange(dtype.itemsize), self._c_pos)
        if c_padding.size == 0:
            raise ValueError(f"{dtype}: no padding byte in the C layout to serve as CDR padding")
        self._cdr_from_c = np.where(index >= 0, index, c_padding[0])

    def to_cdr(self, image: np.ndarray) -> bytes:
        """The serialized message (header + payload) of a C image (its padding bytes zero)."""
        return CDR_LE_HEADER + image.reshape(-1).view(np.uint8)[self._cdr_from_c].tobytes()

    def from_cdr(self, data: bytes) -> np.ndarray:
        """The zero-padded C image of a serialized message (raises ValueError on a wrong size)."""
        if len(data) != self.wire_size:
            raise ValueError(f"expected {self.wire_size} bytes (header + CDR payload), got {len(data)}")
        payload = np.frombuffer(data, dtype=np.uint8, offset=len(CDR_LE_HEADER))
        c_bytes = np.zeros(self.dtype.itemsize, dtype=np.uint8)
        c_bytes[self._c_pos] = payload[self._payload_pos]
        return c_bytes.view(self.dtype).reshape(())

    def crc(self, image: np.ndarray) -> int:
        """The robot's CRC of a C image (every byte before the ``crc`` field)."""
        return crc32_words(image.reshape(-1).view(np.uint8)[: self._crc_offset])


LOWCMD = WireCodec(LOWCMD_DTYPE)
LOWSTATE = WireCodec(LOWSTATE_DTYPE)
LOWCMD_WIRE_SIZE = LOWCMD.wire_size
LOWSTATE_WIRE_SIZE = LOWSTATE.wire_size
_TICK_AT = len(CDR_LE_HEADER) + int(
    np.flatnonzero(cdr_gather_index(LOWSTATE_DTYPE) == field_offset(LOWSTATE_DTYPE, "tick"))[0]
)


def lowstate_tick(data: bytes) -> int:
    """``tick`` of a raw /lowstate sample, read in place (no decode, no CRC check: for ordering)."""
    return int.from_bytes(data[_TICK_AT : _TICK_AT + 4], "little")


class NonFiniteCommandError(ValueError):
    """A LowCmd with a NaN or infinite field: never put on the wire."""


_FLOAT_FIELDS = ("q", "dq", "tau", "kp", "kd")


def encode_lowcmd(*, mode_machine: int, q: np.ndarray, kp: np.ndarray, kd: np.ndarray,
                  dq: np.ndarray | None = None, tau: np.ndarray | None = None, mode: int = 1,
                  mode_pr: int = 0) -> bytes:
    """A complete LowCmd on the wire, CRC included, from body-motor arrays (motor order).

    Starts from a freshly zeroed image every call (stale padding makes the robot drop commands);
    slots after the given motors stay zero (disabled). Raises :class:`NonFiniteCommandError` if
    any value is NaN or infinite as sent (float32: 1e39 overflows to inf): the last gate before
    the motors.
    """
    image = np.zeros((), dtype=LOWCMD_DTYPE)
    image["mode_pr"], image["mode_machine"] = mode_pr, mode_machine
    motors = image["motor_cmd"]
    n = len(q)
    motors["mode"][:n] = mode
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below, as inf
        for name, values in (("q", q), ("dq", dq), ("tau", tau), ("kp", kp), ("kd", kd)):
            if values is not None:
                motors[name][:n] = values
    bad = [name for name in _FLOAT_FIELDS if not np.isfinite(motors[name][:n]).all()]
    if bad:
        raise NonFiniteCommandError(f"LowCmd refused: non-finite {bad} (as float32)")
    image["crc"] = LOWCMD.crc(image)
    return LOWCMD.to_cdr(image)


@dataclass(frozen=True)
class LowStateArrays:
    """The parts of a LowState the policy node reads (body motors, motor order)."""

    q: np.ndarray
    dq: np.ndarray
    tau_est: np.ndarray
    quat_wxyz: np.ndarray
    gyro_b: np.ndarray
    wireless_remote: bytes
    mode_machine: int
    tick: int
    crc_ok: bool
    """Whether ``crc`` equals the CRC of the content (as the robot computes it)."""


def decode_lowstate(data: bytes, check_crc: bool = True) -> LowStateArrays:
    """Read a raw /lowstate sample; raises ValueError if the size is wrong."""
    image = LOWSTATE.from_cdr(data)
    motors, imu = image["motor_state"][:NUM_MOTORS], image["imu_state"]
    return LowStateArrays(
        q=motors["q"].astype(np.float64), dq=motors["dq"].astype(np.float64),
        tau_est=motors["tau_est"].astype(np.float64), quat_wxyz=imu["quaternion"].astype(np.float64),
        gyro_b=imu["gyroscope"].astype(np.float64), wireless_remote=image["wireless_remote"].tobytes(),
        mode_machine=int(image["mode_machine"]), tick=int(image["tick"]),
        crc_ok=(not check_crc) or LOWSTATE.crc(image) == int(image["crc"]))
