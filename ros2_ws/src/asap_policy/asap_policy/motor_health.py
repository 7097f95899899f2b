"""Motor temperatures and fault codes from a raw /lowstate, for the policy node's /diagnostics (ROS-free).

The control tick reads only positions, velocities and the IMU; the diagnostics timer (1 Hz) decodes the
newest raw LowState once more to report what an operator must see before a motor cuts out: each body
motor's hotter temperature (``MotorState.temperature`` holds surface and winding, degC) and its
``motorstate`` fault word (0 = OK). Levels follow GR00T's deployment thresholds (warn 85 degC, error
90 degC); any non-zero fault word is an error. Reporting only: the safety layer does not act on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asap_core import g1
from asap_core.wire import LOWSTATE

OK, WARN, ERROR = 0, 1, 2
"""Levels, equal to ``diagnostic_msgs/DiagnosticStatus`` OK / WARN / ERROR."""


@dataclass(frozen=True)
class MotorHealthCfg:
    """Temperature thresholds (degC)."""

    warn_c: float = 85.0
    error_c: float = 90.0


@dataclass(frozen=True)
class MotorHealth:
    """One report: level, a one-line message and per-motor key/values."""

    level: int
    message: str
    values: dict[str, str]


def motor_health(raw_lowstate: bytes, cfg: MotorHealthCfg = MotorHealthCfg()) -> MotorHealth:
    """The report of one serialized ``unitree_hg/LowState`` (raises ValueError on a wrong size)."""
    motors = LOWSTATE.from_cdr(raw_lowstate)["motor_state"][: g1.NUM_MOTORS]
    temps = motors["temperature"].max(axis=1).astype(float)
    faults = motors["motorstate"].astype(np.uint32)
    hottest = int(np.argmax(temps))
    faulty = [(g1.MOTOR_ORDER[i], int(faults[i])) for i in np.flatnonzero(faults)]
    level = ERROR if faulty or temps[hottest] >= cfg.error_c else WARN if temps[hottest] >= cfg.warn_c else OK
    message = (
        f"faults: {', '.join(f'{n}=0x{c:08x}' for n, c in faulty)}; " if faulty else ""
    ) + f"hottest {g1.MOTOR_ORDER[hottest]} {temps[hottest]:.0f} degC"
    values = {
        "max_temperature_c": f"{temps[hottest]:.0f}",
        "hottest_motor": g1.MOTOR_ORDER[hottest],
        "faulty_motors": str(len(faulty)),
    }
    for name, t, f in zip(g1.MOTOR_ORDER, temps, faults, strict=True):
        values[f"{name} temperature_c"] = f"{t:.0f}"
        values[f"{name} fault"] = f"0x{int(f):08x}"
    return MotorHealth(level, message, values)
