"""``unitree_hg`` LowCmd / LowState as raw CDR bytes, vectorized with numpy.

A Python LowCmd or LowState message holds 35 motor objects: building one costs ~0.2-0.6 ms and
deserializing /lowstate at 500 Hz a sizeable share of a core. The policy node therefore
subscribes to /lowstate raw and publishes /lowcmd raw, and these functions map the wire bytes
(XCDR1, little endian, 4-byte encapsulation header) to and from numpy arrays. Subscribers still
see ordinary messages: the bytes are what rclpy itself would serialize (checked in tests).

CDR aligns each primitive to its size relative to the payload start, not whole structs as C
does, so the wire layout differs from the CRC's C image (``asap_core.crc``). Payload offsets:

- LowCmd (1000 bytes): mode_pr 0, mode_machine 1; motor i: mode at 28 i (2 for i = 0),
  q, dq, tau, kp, kd at 28 i + 4 ... 28 i + 20, reserve at 28 i + 24; reserve[4] 980; crc 996.
- LowState (2088 bytes): version 0, mode_pr 8, mode_machine 9, tick 12, IMU quaternion 16,
  gyroscope 32, accelerometer 44, rpy 56, temperature 68; motor i: mode at 68 + 56 i (70 for
  i = 0), q at 72 + 56 i followed by dq, ddq, tau_est, temperature[2], vol, sensor[2],
  motorstate, reserve[4]; wireless_remote 2028; reserve 2068; crc 2084.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asap_core.crc import LOWCMD_DTYPE, LOWSTATE_DTYPE, crc32_words
from asap_core.g1 import NUM_MOTOR_SLOTS, NUM_MOTORS

ENCAPSULATION = b"\x00\x01\x00\x00"
"""CDR little-endian encapsulation header that precedes every payload."""
LOWCMD_WIRE_SIZE = 4 + 1000
LOWSTATE_WIRE_SIZE = 4 + 2088


def encode_lowcmd(*, mode_machine: int, q: np.ndarray, kp: np.ndarray, kd: np.ndarray,
                  dq: np.ndarray | None = None, tau: np.ndarray | None = None, mode: int = 1,
                  mode_pr: int = 0) -> bytes:
    """A complete LowCmd on the wire, CRC included, from body-motor arrays (motor order).

    Starts from freshly zeroed buffers every call (stale padding makes the robot drop commands);
    slots after the body motors stay zero (disabled).
    """
    image = np.zeros((), dtype=LOWCMD_DTYPE)  # the C struct the CRC covers
    image["mode_pr"], image["mode_machine"] = mode_pr, mode_machine
    motors = image["motor_cmd"]
    n = len(q)
    motors["mode"][:n] = mode
    for name, values in (("q", q), ("dq", dq), ("tau", tau), ("kp", kp), ("kd", kd)):
        if values is not None:
            motors[name][:n] = values
    crc = crc32_words(image.tobytes()[: LOWCMD_DTYPE.fields["crc"][1]])

    wire = np.zeros(LOWCMD_WIRE_SIZE, dtype=np.uint8)
    wire[:4] = np.frombuffer(ENCAPSULATION, dtype=np.uint8)
    payload = wire[4:]
    per_motor = payload[: 28 * NUM_MOTOR_SLOTS].reshape(NUM_MOTOR_SLOTS, 28)
    per_motor[1:, 0] = motors["mode"][1:]
    per_motor[0, :3] = (mode_pr, mode_machine, motors["mode"][0])
    words = per_motor.view("<f4")  # (35, 7): word 0 = mode + padding, 1-5 = q dq tau kp kd
    for k, name in enumerate(("q", "dq", "tau", "kp", "kd"), start=1):
        words[:, k] = motors[name]
    payload[996:1000].view("<u4")[0] = crc
    return wire.tobytes()


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


def _strided(payload: np.ndarray, offset: int, dtype: str, shape: tuple[int, ...] = ()) -> np.ndarray:
    """Per-motor field of LowState: one value (or ``shape`` values) every 56 bytes from ``offset``."""
    item = np.dtype(dtype)
    return np.ndarray((NUM_MOTOR_SLOTS, *shape), dtype=item, buffer=payload, offset=offset,
                      strides=(56, *(item.itemsize for _ in shape)))


def decode_lowstate(data: bytes, check_crc: bool = True) -> LowStateArrays:
    """Read a raw /lowstate sample; raises ValueError if the size is wrong."""
    if len(data) != LOWSTATE_WIRE_SIZE:
        raise ValueError(f"LowState must be {LOWSTATE_WIRE_SIZE} bytes on the wire, got {len(data)}")
    payload = np.frombuffer(data, dtype=np.uint8, offset=4)
    f4 = payload[:72].view("<f4")
    crc = int(payload[2084:2088].view("<u4")[0])
    q = _strided(payload, 72, "<f4")
    dq = _strided(payload, 76, "<f4")
    tau = _strided(payload, 84, "<f4")
    ok = (not check_crc) or crc == _lowstate_crc(payload)
    return LowStateArrays(
        q=q[:NUM_MOTORS].astype(np.float64), dq=dq[:NUM_MOTORS].astype(np.float64),
        tau_est=tau[:NUM_MOTORS].astype(np.float64), quat_wxyz=f4[4:8].astype(np.float64),
        gyro_b=f4[8:11].astype(np.float64), wireless_remote=payload[2028:2068].tobytes(),
        mode_machine=int(payload[9]), tick=int(payload[12:16].view("<u4")[0]), crc_ok=ok)


def _lowstate_crc(payload: np.ndarray) -> int:
    """The robot's CRC of a LowState payload: copy the fields into the zeroed C image, CRC it."""
    image = np.zeros((), dtype=LOWSTATE_DTYPE)
    image["version"] = payload[0:8].view("<u4")
    image["mode_pr"], image["mode_machine"] = payload[8], payload[9]
    image["tick"] = payload[12:16].view("<u4")[0]
    imu = image["imu_state"]
    f4 = payload[16:68].view("<f4")
    imu["quaternion"], imu["gyroscope"] = f4[0:4], f4[4:7]
    imu["accelerometer"], imu["rpy"] = f4[7:10], f4[10:13]
    imu["temperature"] = payload[68:70].view("<i2")[0]
    motors = image["motor_state"]
    motors["mode"] = np.concatenate([payload[70:71], payload[124:2028:56]])
    for name, off, dtype, shape in (("q", 72, "<f4", ()), ("dq", 76, "<f4", ()), ("ddq", 80, "<f4", ()),
                                    ("tau_est", 84, "<f4", ()), ("temperature", 88, "<i2", (2,)),
                                    ("vol", 92, "<f4", ()), ("sensor", 96, "<u4", (2,)),
                                    ("motorstate", 104, "<u4", ()), ("reserve", 108, "<u4", (4,))):
        motors[name] = _strided(payload, off, dtype, shape)
    image["wireless_remote"] = payload[2028:2068]
    image["reserve"] = payload[2068:2084].view("<u4")
    return crc32_words(image.tobytes()[: LOWSTATE_DTYPE.fields["crc"][1]])
