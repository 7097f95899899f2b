"""One check, used by every package that must stay importable without ROS (training imports them)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

FORBIDDEN = ("rclpy", "unitree_hg", "unitree_api", "asap_msgs", "std_msgs", "sensor_msgs", "nav_msgs",
             "rosgraph_msgs", "std_srvs", "diagnostic_msgs", "builtin_interfaces")
"""Top-level modules of rclpy and of every message package the project uses."""


def ros_imports(path: Path) -> list[str]:
    """The modules a source file imports that belong to ROS."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return [n for n in names if n.split(".")[0] in FORBIDDEN]


def run_with_ros_blocked(modules: Iterable[str], then: str = "") -> str:
    """Import ``modules`` (then run ``then``) in a fresh interpreter where ROS cannot be imported.

    Returns its stdout; a failed import raises ``CalledProcessError``.
    """
    code = ("import sys\n"
            f"for m in {FORBIDDEN!r}: sys.modules[m] = None\n"
            + "".join(f"import {m}\n" for m in modules) + then)
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
