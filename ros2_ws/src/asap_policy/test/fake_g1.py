"""A MuJoCo-free stand-in for the G1 on its real topics, for node tests that must not need a twin.

It speaks exactly the robot's interface: /lowcmd (``unitree_hg/LowCmd``) in, /lowstate out with
a valid CRC, ``mode_machine`` 5, the wireless remote inside ``LowState.wireless_remote``. The
"physics" is one unit-inertia PD per joint (semi-implicit Euler at the publish rate), enough to
follow commanded targets and show what the motors were told. Tests read every received command
(with its CRC verdict), press remote buttons, and can stop /lowstate to simulate a dead robot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from unitree_hg.msg import LowCmd, LowState

from asap_core import g1, remote
from asap_core.crc import lowcmd_crc, lowstate_crc

INERTIA = 0.2  # kg m^2 per joint


@dataclass(frozen=True)
class ReceivedCmd:
    """One /lowcmd sample as it arrived (raw bytes; decoded on demand, the CRC by the slow path)."""

    t: float
    """time.monotonic() at reception."""
    data: bytes

    @property
    def _all_words(self) -> np.ndarray:
        # CDR payload after the 4-byte header: motor i occupies 28 bytes from 28 i: mode at +0, then
        # the floats q +4, dq +8, tau +12, kp +16, kd +20
        return np.frombuffer(self.data, dtype=np.uint8, offset=4)[:980].reshape(35, 28)

    @property
    def _words(self) -> np.ndarray:
        return self._all_words[: g1.NUM_MOTORS]

    @property
    def q(self) -> np.ndarray:
        return self._words[:, 4:8].copy().view("<f4")[:, 0].astype(np.float64)

    @property
    def kp(self) -> np.ndarray:
        return self._words[:, 16:20].copy().view("<f4")[:, 0].astype(np.float64)

    @property
    def kd(self) -> np.ndarray:
        return self._words[:, 20:24].copy().view("<f4")[:, 0].astype(np.float64)

    @property
    def msg(self) -> LowCmd:
        return deserialize_message(self.data, LowCmd)

    @property
    def floats(self) -> np.ndarray:
        """Every float field (q, dq, tau, kp, kd) of all 35 motor slots, as sent."""
        return self._all_words[:, 4:24].copy().view("<f4").astype(np.float64)

    @property
    def crc_ok(self) -> bool:
        """Checked through rclpy's deserializer and asap_core.crc, independent of asap_core.wire."""
        msg = self.msg
        return msg.crc == lowcmd_crc(msg)

    @property
    def is_damping(self) -> bool:
        return not self.kp.any() and bool((self.kd > 0).all())

    @property
    def is_zero_torque(self) -> bool:
        return not self.kp.any() and not self.kd.any()


class FakeG1(Node):
    """The stand-in robot; spin it in an executor. ``start()`` begins publishing /lowstate."""

    def __init__(self, rate_hz: float = 200.0, q0: np.ndarray | None = None) -> None:
        super().__init__("fake_g1")
        self.dt = 1.0 / rate_hz
        self.q = g1.default_pose(g1.MOTOR_ORDER, "asap") if q0 is None else q0.copy()
        self.dq = np.zeros(g1.NUM_MOTORS)
        self.keys = 0
        self.publishing = True
        self.tick_ms: Callable[[], int] | None = None
        """LowState.tick source (default: a count of states); a lock-step twin sends its sim time in ms."""
        self.q_override: dict[int, float] = {}
        """Motor index -> value published instead of the simulated q (e.g. NaN: a broken encoder)."""
        self.commands: list[ReceivedCmd] = []
        self.last_state_t = 0.0
        self._cmd: ReceivedCmd | None = None
        self._lock = threading.Lock()
        self._pub = self.create_publisher(LowState, "/lowstate", QoSProfile(depth=10))
        self.create_subscription(LowCmd, "/lowcmd", self._on_cmd,
                                 QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE), raw=True)
        self._msg = LowState()
        self._msg.mode_machine = 5
        self._running = True
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> FakeG1:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._running = False
        self._thread.join(timeout=2.0)

    def _on_cmd(self, data: bytes) -> None:
        cmd = ReceivedCmd(time.monotonic(), data)  # cheap: tests decode what they look at
        with self._lock:
            self._cmd = cmd
            self.commands.append(cmd)

    def _step(self) -> None:
        with self._lock:
            cmd = self._cmd
        if cmd is None:
            return
        q_des, kp, kd = cmd.q, cmd.kp, cmd.kd
        tau = np.clip(kp * (q_des - self.q) - kd * self.dq, -g1.joint_array("effort_limit", g1.MOTOR_ORDER),
                      g1.joint_array("effort_limit", g1.MOTOR_ORDER))
        self.dq += self.dt * tau / INERTIA
        self.q += self.dt * self.dq

    def _loop(self) -> None:
        t_next, tick = time.monotonic(), 0
        while self._running:
            self._step()
            if self.publishing:
                msg = self._msg
                msg.tick = tick if self.tick_ms is None else self.tick_ms()
                for i, m in enumerate(msg.motor_state[: g1.NUM_MOTORS]):
                    m.q, m.dq = self.q_override.get(i, float(self.q[i])), float(self.dq[i])
                msg.imu_state.quaternion = [1.0, 0.0, 0.0, 0.0]
                msg.wireless_remote = list(remote.encode(keys=self.keys))
                msg.crc = lowstate_crc(msg)
                self._pub.publish(msg)
                self.last_state_t = time.monotonic()
            tick += 1
            t_next += self.dt
            time.sleep(max(0.0, t_next - time.monotonic()))

    def commands_since(self, t: float) -> list[ReceivedCmd]:
        with self._lock:
            return [c for c in self.commands if c.t >= t]
