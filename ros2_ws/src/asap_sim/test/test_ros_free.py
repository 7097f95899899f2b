"""The physics modules that training imports (everything but the node) never import ROS."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "asap_sim"
FORBIDDEN = ("rclpy", "unitree_hg", "unitree_api", "asap_msgs", "std_msgs", "sensor_msgs", "nav_msgs",
             "rosgraph_msgs", "std_srvs", "diagnostic_msgs", "builtin_interfaces")
ROS_FREE = sorted(p.stem for p in PKG.glob("*.py") if not p.stem.endswith("_node") and p.stem != "__init__")


def test_the_physics_modules_exist() -> None:
    assert {"model", "motor", "profiles"} <= set(ROS_FREE)


def test_no_ros_imports_in_source() -> None:
    for stem in ROS_FREE:
        path = PKG / f"{stem}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad = [n for n in names if n.split(".")[0] in FORBIDDEN]
            assert not bad, f"{path.name} imports {bad}"


def test_imports_with_ros_blocked() -> None:
    code = (
        "import sys\n"
        f"for m in {FORBIDDEN!r}: sys.modules[m] = None\n"
        + "".join(f"import asap_sim.{m}\n" for m in ROS_FREE)
    )
    subprocess.run([sys.executable, "-c", code], check=True)
