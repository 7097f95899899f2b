"""Random LowCmd / LowState contents as plain field dicts (JSON-able, for Unitree's SDK as an oracle) and
message-like objects of them (for :mod:`asap_core.crc`), without ROS."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

F32 = np.float32


def random_lowcmd(rng: np.random.Generator) -> dict[str, Any]:
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


def random_lowstate(rng: np.random.Generator) -> dict[str, Any]:
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


def as_obj(fields: dict[str, Any]) -> SimpleNamespace:
    """A message-like object (attribute access) from a field dict."""
    def conv(v: Any) -> Any:
        if isinstance(v, dict):
            return SimpleNamespace(**{k: conv(x) for k, x in v.items()})
        if isinstance(v, list) and v and isinstance(v[0], dict):
            return [conv(x) for x in v]
        return v
    return SimpleNamespace(**{k: conv(x) for k, x in fields.items()})
