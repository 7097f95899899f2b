"""Repair the CMake exports of the ROS 2 PyPI wheels so colcon can build against them.

The wheels' exported targets (e.g. ``std_msgs::std_msgs__rosidl_generator_py``) carry the
include paths of the machine that built them (``/opt/python/cp311-cp311/...``), and CMake
refuses non-existent include paths. Rewrite them to this interpreter's include directory
and this venv's numpy. Idempotent: a second run finds nothing to change.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import numpy

BUILD_PREFIX = "/opt/python/cp311-cp311"
REPLACEMENTS = {
    f"{BUILD_PREFIX}/include/python3.11": sysconfig.get_paths()["include"],
    f"{BUILD_PREFIX}/lib/python3.11/site-packages/numpy/_core/include": numpy.get_include(),
}


def fix_file(path: Path) -> bool:
    """Rewrite the build-machine paths in one CMake file; return whether it changed."""
    text = path.read_text()
    fixed = text
    for old, new in REPLACEMENTS.items():
        fixed = fixed.replace(old, new)
    if fixed == text:
        return False
    path.write_text(fixed)
    return True


def main() -> int:
    """Fix every CMake export under ``<venv>/share``."""
    share = Path(sys.prefix) / "share"
    changed = [p for p in share.glob("*/cmake/*.cmake") if fix_file(p)]
    missing = [new for new in REPLACEMENTS.values() if not Path(new).is_dir()]
    if missing:
        print(f"error: include directories not found: {missing}; install the Python headers "
              "(python3.11-dev) and numpy into the venv", file=sys.stderr)
        return 1
    print(f"fix_ros_wheels: rewrote build-machine paths in {len(changed)} CMake files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
