"""asap_core must import in a plain interpreter without rclpy or any ROS message package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "asap_core"
FORBIDDEN = ("rclpy", "unitree_hg", "unitree_api", "asap_msgs", "std_msgs", "sensor_msgs")


def test_no_ros_imports_in_source() -> None:
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad = [n for n in names if n.split(".")[0] in FORBIDDEN]
            assert not bad, f"{path.name} imports {bad}"


def test_imports_with_ros_blocked() -> None:
    modules = [p.stem for p in PKG.glob("*.py") if p.stem != "__init__"]
    code = (
        "import sys\n"
        f"for m in {FORBIDDEN!r}: sys.modules[m] = None\n"
        + "".join(f"import asap_core.{m}\n" for m in modules)
    )
    subprocess.run([sys.executable, "-c", code], check=True)
