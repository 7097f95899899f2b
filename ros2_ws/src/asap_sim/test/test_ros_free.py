"""The physics modules that training imports (everything but the node) never import ROS."""

from __future__ import annotations

from pathlib import Path

from asap_testing.ros_free import ros_imports, run_with_ros_blocked

PKG = Path(__file__).resolve().parents[1] / "asap_sim"
ROS_FREE = sorted(p.stem for p in PKG.glob("*.py") if not p.stem.endswith("_node") and p.stem != "__init__")


def test_the_physics_modules_exist() -> None:
    assert {"model", "motor", "profiles"} <= set(ROS_FREE)


def test_no_ros_imports_in_source() -> None:
    for stem in ROS_FREE:
        path = PKG / f"{stem}.py"
        assert not ros_imports(path), f"{path.name} imports {ros_imports(path)}"


def test_imports_with_ros_blocked() -> None:
    run_with_ros_blocked(f"asap_sim.{m}" for m in ROS_FREE)
