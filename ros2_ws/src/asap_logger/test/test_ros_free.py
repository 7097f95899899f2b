"""Everything but the node imports without rclpy or any message package (training relies on it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "asap_logger"
FORBIDDEN = ("rclpy", "unitree_hg", "unitree_api", "asap_msgs", "std_msgs", "nav_msgs", "diagnostic_msgs")
NODE = "recorder_node"


def _modules() -> list[str]:
    return [
        ".".join(p.relative_to(PKG.parent).with_suffix("").parts) for p in PKG.rglob("*.py") if p.stem != NODE
    ]


def test_no_ros_imports_outside_the_node() -> None:
    for path in PKG.rglob("*.py"):
        if path.stem == NODE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not [n for n in names if n.split(".")[0] in FORBIDDEN], f"{path.name} imports {names}"


def test_reader_imports_and_works_with_ros_blocked(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        f"for m in {FORBIDDEN!r}: sys.modules[m] = None\n"
        + "".join(f"import {m}\n" for m in _modules())
        + "from asap_logger.reader import open_episode\n"
        + "from asap_logger.errors import BagNotFoundError\n"
        + f"try:\n    open_episode({str(tmp_path)!r})\nexcept BagNotFoundError:\n    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "ok"
