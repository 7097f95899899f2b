"""Unitree's Python SDK (unitree_sdk2py), entered the way its PyPI wheel allows; run in .venv-oracle.

The package ``__init__`` imports a subpackage the wheel does not ship, so the package is entered
without running it; the CRC class loads a native library the wheel lacks, so it is told it is not on
Linux, which selects its pure-Python ``_crc_py`` (the reference implementation).
"""

from __future__ import annotations

import platform
import sys
import types
from pathlib import Path

_pkg_dir = next(Path(p) / "unitree_sdk2py" for p in sys.path if (Path(p) / "unitree_sdk2py").is_dir())
_stub = types.ModuleType("unitree_sdk2py")
_stub.__path__ = [str(_pkg_dir)]
sys.modules.setdefault("unitree_sdk2py", _stub)

from unitree_sdk2py.idl import default  # noqa: E402
from unitree_sdk2py.idl.unitree_hg.msg import dds_ as hg  # noqa: E402

_system = platform.system
platform.system = lambda: "Oracle"
from unitree_sdk2py.utils.crc import CRC  # noqa: E402

_crc = CRC()
platform.system = _system

__all__ = ["crc", "default", "hg"]


def crc(msg) -> int:
    """The SDK's CRC of a ``unitree_hg`` LowCmd_ or LowState_."""
    return _crc.Crc(msg)
