"""asap-up brings up the real sim2sim graph (twin + policy node + recorder + monitor) and takes it down.

The same graph run also checks the monitoring acceptance: every topic the shipped RViz config and Foxglove
layout display is published by the graph (or is named in ``FULL_ROS_ONLY`` with the reason), the monitor's
markers and diagnostics flow, and the policy node reports motor temperatures.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")

pytestmark = pytest.mark.graph
NODES = ("g1_sim", "policy_node", "recorder", "monitor")
FULL_ROS_ONLY = {
    "/robot_description": "robot_state_publisher (profile argument state_publisher:=true) is not on PyPI; "
                          "the robot profile and the Docker images run it",
    "/tf": "published by robot_state_publisher and by the monitor only where tf2_msgs is installed "
           "(not on PyPI; a full ROS 2 install and the Docker images have it)",
    "/tf_static": "robot_state_publisher (not on PyPI); the G1 URDF has no fixed joints, so it stays empty",
}
"""Displayed topics that the PyPI-wheel graph here cannot publish, and why."""
REQUIRED_TOPICS = {"/lowstate", "/policy/status", "/diagnostics", "/monitor/markers"}


def _node_pids() -> dict[str, int]:
    """PIDs of this test's sim2sim node processes, by node name (from their --ros-args remaps).

    Only processes on this test run's ROS_DOMAIN_ID count: other graphs may run on the machine.
    """
    out = {}
    domain = f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if "--ros-args" not in cmd or domain not in (proc / "environ").read_bytes().split(b"\0"):
                continue
        except OSError:
            continue
        for name in NODES:
            if f"__node:={name} " in cmd:
                out[name] = int(proc.name)
    return out


def _start(tmp_path: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "asap_bringup.runner", "sim2sim",
                             f"episodes_dir:={tmp_path}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)


def _wait_graph(node, timeout_s: float = 60.0) -> set[str]:
    deadline = time.monotonic() + timeout_s
    seen: set[str] = set()
    while time.monotonic() < deadline:
        seen = {n for n, _ in node.get_node_names_and_namespaces()}
        topics = {t for t, _ in node.get_topic_names_and_types()}
        if set(NODES) <= seen and topics >= REQUIRED_TOPICS:
            return seen
        time.sleep(0.2)
    raise AssertionError(f"sim2sim graph incomplete after {timeout_s} s: nodes {sorted(seen)}")


@pytest.fixture
def observer():
    rclpy.init()
    node = rclpy.create_node("sim2sim_observer")
    yield node
    node.destroy_node()
    rclpy.shutdown()


def _assert_displayed_topics_are_published(node) -> None:
    """Every RViz/Foxglove topic has a publisher in the graph (RViz ones with the display's type)."""
    from asap_bringup.layouts import RVIZ_TYPES, displayed_topics, rviz_displays

    shown = displayed_topics()
    assert set(FULL_ROS_ONLY) <= set(shown), "FULL_ROS_ONLY names a topic no layout shows: drop it"
    deadline = time.monotonic() + 30.0  # discovery of every publisher may lag the node names
    while True:
        missing = {t: where for t, where in shown.items()
                   if t not in FULL_ROS_ONLY and not node.get_publishers_info_by_topic(t)}
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not missing, f"displayed but not published by the sim2sim graph: {missing}"
    for name, kind, topic in rviz_displays():
        if topic in FULL_ROS_ONLY or kind not in RVIZ_TYPES:
            continue
        types = {i.topic_type for i in node.get_publishers_info_by_topic(topic)}
        assert types == {RVIZ_TYPES[kind]}, f"RViz {name!r} reads {topic} as {RVIZ_TYPES[kind]}, not {types}"


def _assert_monitoring_flows(node) -> None:
    """Markers with the status text and the contact discs, monitor and motor diagnostics arrive."""
    from diagnostic_msgs.msg import DiagnosticArray
    from visualization_msgs.msg import MarkerArray

    from asap_testing.dds import spin_until

    markers: list[MarkerArray] = []
    diagnostics: dict[str, object] = {}
    node.create_subscription(MarkerArray, "/monitor/markers", markers.append, 10)
    node.create_subscription(DiagnosticArray, "/diagnostics",
                             lambda m: diagnostics.update({s.name: s for s in m.status}), 50)
    wanted = {"asap_monitor: tracking", "asap_policy: motors"}
    def status_text() -> str:
        shown = markers[-1].markers if markers else []
        return next((m.text for m in shown if (m.ns, m.id) == ("status", 0)), "")

    def arrived() -> bool:  # motor values come with the first /lowstate (before: STALE, no values)
        motors = diagnostics.get("asap_policy: motors")
        # under load the first markers can go out before the first /odometry or /policy/status reaches
        # the monitor
        text = status_text()
        return (len(markers) >= 2 and wanted <= set(diagnostics) and bool(motors and motors.values)
                and "base: odometry" in text and "policy: " in text)

    assert spin_until(node, arrived, 30.0), (
        f"markers {len(markers)}, diagnostics {sorted(diagnostics)}, status {status_text()!r}"
    )
    shown = {(m.ns, m.id): m for m in markers[-1].markers}
    text = shown["status", 0].text
    assert "policy: none loaded" in text  # no policy pushed in this graph
    assert "base: odometry" in text  # the twin's ground-truth base reached the monitor
    assert len(shown["robot", 0].points) == 27  # the measured tracked points
    assert {("contacts", 0), ("contacts", 1)} <= set(shown) and ("reference", 0) not in shown
    motors = {kv.key: kv.value for kv in diagnostics["asap_policy: motors"].values}
    assert motors["max_temperature_c"] == "25" and motors["faulty_motors"] == "0"  # the twin's constants


def test_ctrl_c_stops_the_whole_graph_within_5_s(observer, tmp_path: Path) -> None:
    runner = _start(tmp_path)
    try:
        _wait_graph(observer)
        assert set(_node_pids()) == set(NODES)
        _assert_displayed_topics_are_published(observer)
        _assert_monitoring_flows(observer)
        t0 = time.monotonic()
        runner.send_signal(signal.SIGINT)
        code = runner.wait(10)
        while _node_pids() and time.monotonic() - t0 < 5.0:
            time.sleep(0.05)
        assert code == 0, runner.stderr.read()
        assert not _node_pids(), f"still running after 5 s: {_node_pids()}"
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)


def test_a_dead_node_fails_the_runner_with_its_name(observer, tmp_path: Path) -> None:
    runner = _start(tmp_path)
    try:
        _wait_graph(observer)
        os.kill(_node_pids()["policy_node"], signal.SIGKILL)
        code = runner.wait(15)
        assert code != 0
        assert "node 'policy_node' exited" in runner.stderr.read()
        deadline = time.monotonic() + 5.0
        while _node_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _node_pids()
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
