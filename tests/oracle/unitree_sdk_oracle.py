"""Independent oracle: Unitree's own Python SDK (unitree_sdk2py), run in .venv-oracle.

Reads a JSON request on stdin and answers on stdout:
  {"op": "crc", "type": "LowCmd"|"LowState", "messages": [field dicts]} -> [crc, ...]
  {"op": "deserialize", "type": ..., "cdr_hex": [...]} -> [field dicts]

The SDK package ``__init__`` imports a subpackage its wheel does not ship, and its CRC class
loads a native library the wheel lacks, so the package is entered without running ``__init__``
and the CRC class is told it is not on Linux, which selects its pure-Python ``_crc_py``.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

pkg_dir = next(Path(p) / "unitree_sdk2py" for p in sys.path if (Path(p) / "unitree_sdk2py").is_dir())
stub = types.ModuleType("unitree_sdk2py")
stub.__path__ = [str(pkg_dir)]
sys.modules["unitree_sdk2py"] = stub

import platform  # noqa: E402

from unitree_sdk2py.idl.unitree_hg.msg import dds_ as hg  # noqa: E402

_system = platform.system
platform.system = lambda: "Oracle"  # the SDK's CRC class uses its pure-Python CRC off Linux
from unitree_sdk2py.utils.crc import CRC  # noqa: E402

_crc = CRC()
platform.system = _system


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
        out = [_crc.Crc(build(req["type"], m)) for m in req["messages"]]
    elif req["op"] == "deserialize":
        cls = getattr(hg, req["type"] + "_")
        out = [to_dict(cls.deserialize(bytes.fromhex(h))) for h in req["cdr_hex"]]
    else:
        raise SystemExit(f"unknown op {req['op']!r}")
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
