"""The shared test helpers themselves: the ROS-free check finds every ROS import, and isolation keeps
a domain the user chose."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from asap_testing.dds import isolate
from asap_testing.ros_free import ros_imports, run_with_ros_blocked


def test_ros_imports_finds_imports_inside_functions_and_of_message_packages(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("import numpy\n\ndef f():\n    import rclpy.node\n"
                      "    from std_msgs.msg import String\n")
    assert ros_imports(source) == ["rclpy.node", "std_msgs.msg"]


def test_a_module_that_imports_rclpy_fails_with_ros_blocked(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "needs_ros.py").write_text("import rclpy\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    assert run_with_ros_blocked(["json"], then="print('ok')").strip() == "ok"
    with pytest.raises(subprocess.CalledProcessError):
        run_with_ros_blocked(["needs_ros"])


def test_isolation_keeps_a_chosen_domain_and_stays_on_this_machine(monkeypatch) -> None:
    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET")
    isolate()
    assert os.environ["ROS_DOMAIN_ID"] == "42" and os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
