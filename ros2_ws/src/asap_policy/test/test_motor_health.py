"""Motor temperatures and fault words reach the diagnostics report, by joint name, with the right level."""

from __future__ import annotations

import numpy as np
import pytest

from asap_core import g1
from asap_core.wire import LOWSTATE
from asap_policy.motor_health import ERROR, OK, WARN, MotorHealthCfg, motor_health


def _lowstate(temps: dict[str, tuple[int, int]] | None = None, faults: dict[str, int] | None = None) -> bytes:
    image = np.zeros((), dtype=LOWSTATE.dtype)
    motors = image["motor_state"]
    motors["temperature"][: g1.NUM_MOTORS] = 40
    motors["temperature"][g1.NUM_MOTORS :] = 120  # unused slots must not count
    for name, pair in (temps or {}).items():
        motors["temperature"][g1.MOTOR_ORDER.index(name)] = pair
    for name, code in (faults or {}).items():
        motors["motorstate"][g1.MOTOR_ORDER.index(name)] = code
    return LOWSTATE.to_cdr(image)


def test_cool_motors_without_faults_are_ok() -> None:
    h = motor_health(_lowstate())
    assert h.level == OK and h.values["max_temperature_c"] == "40" and h.values["faulty_motors"] == "0"
    assert h.values["left_knee_joint temperature_c"] == "40"


def test_the_hotter_of_surface_and_winding_counts_and_names_the_motor() -> None:
    h = motor_health(_lowstate({"left_knee_joint": (60, 87)}))
    assert h.level == WARN
    assert h.values["hottest_motor"] == "left_knee_joint" and "left_knee_joint 87 degC" in h.message
    assert motor_health(_lowstate({"waist_yaw_joint": (91, 50)})).level == ERROR
    assert motor_health(_lowstate({"waist_yaw_joint": (91, 50)}), MotorHealthCfg(80, 95)).level == WARN


def test_any_fault_word_is_an_error_named_by_joint() -> None:
    h = motor_health(_lowstate(faults={"right_ankle_roll_joint": 0x20}))
    assert h.level == ERROR and "right_ankle_roll_joint=0x00000020" in h.message
    assert h.values["right_ankle_roll_joint fault"] == "0x00000020" and h.values["faulty_motors"] == "1"


def test_a_truncated_message_is_refused() -> None:
    with pytest.raises(ValueError, match="bytes"):
        motor_health(_lowstate()[:-4])
