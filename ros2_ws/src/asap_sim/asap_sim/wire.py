"""The twin's side of the wire: LowCmd bytes -> a motor command, twin state -> LowState bytes.

Both go through ``asap_core.wire``'s C-image <-> CDR codecs: the twin fills a numpy C image per
state (preallocated views, no per-field Python), takes the robot's CRC and publishes the CDR bytes:
~30 µs instead of ~600 µs for building a LowState message field by field (measured here), which is
what lets lock-step run many times faster than real time.
"""

from __future__ import annotations

import struct

import numpy as np

from asap_core.g1 import NUM_MOTORS
from asap_core.wire import CDR_LE_HEADER, LOWCMD, LOWSTATE
from asap_sim.motor import MotorCommand
from asap_sim.twin import TwinState

TEMPERATURE_C = 25
"""Motor and IMU temperature the twin reports (no thermal model)."""


class LowCmdDecoder:
    """Serialized ``unitree_hg/LowCmd`` -> (CRC valid, mode_machine, body motor command)."""

    def __init__(self) -> None:
        self._codec = LOWCMD

    def decode(self, data: bytes) -> tuple[bool, int, MotorCommand]:
        """Check the CRC like the robot and read the 29 body motor slots."""
        image = self._codec.from_cdr(data)
        body = image["motor_cmd"][:NUM_MOTORS]
        cmd = MotorCommand(mode=body["mode"].astype(np.float64), q=body["q"].astype(np.float64),
                           dq=body["dq"].astype(np.float64), tau=body["tau"].astype(np.float64),
                           kp=body["kp"].astype(np.float64), kd=body["kd"].astype(np.float64))
        return self._codec.crc(image) == int(image["crc"]), int(image["mode_machine"]), cmd


class LowStateEncoder:
    """A :class:`~asap_sim.twin.TwinState` -> serialized ``unitree_hg/LowState`` with a valid CRC.

    Not simulated, reported as constants: temperatures (:data:`TEMPERATURE_C`), ``vol``, ``sensor``,
    ``motorstate`` (0 = no fault). ``mode_pr`` is 0 (PR: ankles and waist as serial joints).
    """

    def __init__(self, mode_machine: int) -> None:
        self._codec = LOWSTATE
        self._image = image = np.zeros((), dtype=LOWSTATE.dtype)
        image["mode_machine"] = mode_machine
        image["imu_state"]["temperature"] = TEMPERATURE_C
        image["motor_state"]["temperature"][:NUM_MOTORS] = TEMPERATURE_C
        # views into the image, resolved once (a structured field lookup costs more than the copy)
        imu, motors = image["imu_state"], image["motor_state"][:NUM_MOTORS]
        self._tick, self._crc, self._remote = image["tick"], image["crc"], image["wireless_remote"]
        self._remote_bytes: bytes | None = None
        self._imu = tuple(imu[f] for f in ("quaternion", "gyroscope", "accelerometer", "rpy"))
        self._motors = tuple(motors[f] for f in ("mode", "q", "dq", "ddq", "tau_est"))

    def encode(self, state: TwinState, motor_mode: np.ndarray, wireless_remote: bytes) -> bytes:
        """The message bytes, ready for ``Publisher.publish``."""
        self._tick[...] = state.tick
        for view, value in zip(self._imu, (state.imu_quat_wxyz, state.gyro_b, state.acc_b, state.rpy),
                               strict=True):
            view[:] = value
        for view, value in zip(self._motors, (motor_mode != 0, state.q, state.dq, state.ddq, state.tau_est),
                               strict=True):
            view[:] = value
        if wireless_remote is not self._remote_bytes:  # changes only on a remote event
            self._remote[:] = np.frombuffer(wireless_remote, dtype=np.uint8)
            self._remote_bytes = wireless_remote
        self._crc[...] = self._codec.crc(self._image)
        return self._codec.to_cdr(self._image)


def clock_cdr(time_s: float) -> bytes:
    """A serialized ``rosgraph_msgs/Clock`` (builtin_interfaces/Time sec, nanosec)."""
    nanoseconds = round(time_s * 1e9)
    return CDR_LE_HEADER + struct.pack("<iI", nanoseconds // 1_000_000_000, nanoseconds % 1_000_000_000)
