"""Independent oracle: Unitree's own Python SDK (unitree_sdk2py), run in .venv-oracle.

Reads a JSON request on stdin and answers on stdout:
  {"op": "crc", "type": "LowCmd"|"LowState", "messages": [field dicts]} -> [crc, ...]
  {"op": "deserialize", "type": ..., "cdr_hex": [...]} -> [field dicts]

How the SDK is imported from its wheel: see ``unitree_sdk.py``.
"""

from __future__ import annotations

import json
import sys

from unitree_sdk import crc, hg


def build(cls_name: str, fields: dict):
    """Build an SDK IDL object from a nested dict of fields."""
    cls = getattr(hg, cls_name + "_")
    kwargs = {}
    for name, value in fields.items():
        if name == "motor_cmd":
            value = [hg.MotorCmd_(**m) for m in value]
        elif name == "motor_state":
            value = [hg.MotorState_(**m) for m in value]
        elif name == "imu_state":
            value = hg.IMUState_(**value)
        kwargs[name] = value
    return cls(**kwargs)


def to_dict(obj) -> dict | list | int | float:
    """Plain data of an IDL object."""
    if hasattr(obj, "__dataclass_fields__"):
        return {k: to_dict(getattr(obj, k)) for k in obj.__dataclass_fields__}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, (bytes, bytearray)):
        return list(obj)
    return obj


def main() -> None:
    """Answer one request."""
    req = json.load(sys.stdin)
    if req["op"] == "crc":
        out = [crc(build(req["type"], m)) for m in req["messages"]]
    elif req["op"] == "deserialize":
        cls = getattr(hg, req["type"] + "_")
        out = [to_dict(cls.deserialize(bytes.fromhex(h))) for h in req["cdr_hex"]]
    else:
        raise SystemExit(f"unknown op {req['op']!r}")
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
