"""asap_core must import in a plain interpreter without rclpy or any ROS message package."""

from __future__ import annotations

from pathlib import Path

from asap_testing.ros_free import ros_imports, run_with_ros_blocked

PKG = Path(__file__).resolve().parents[1] / "asap_core"


def test_no_ros_imports_in_source() -> None:
    for path in PKG.rglob("*.py"):
        assert not ros_imports(path), f"{path.name} imports {ros_imports(path)}"


def test_imports_with_ros_blocked() -> None:
    run_with_ros_blocked(f"asap_core.{p.stem}" for p in PKG.glob("*.py") if p.stem != "__init__")
