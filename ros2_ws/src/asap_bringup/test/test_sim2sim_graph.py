"""asap-up brings up the real sim2sim graph (twin + policy node + recorder) and takes it down."""

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
NODES = ("g1_sim", "policy_node", "recorder")


def _node_pids() -> dict[str, int]:
    """PIDs of the sim2sim node processes, by node name (from their --ros-args remaps)."""
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        for name in NODES:
            if f"__node:={name} " in cmd and "--params-file" in cmd:
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
        if set(NODES) <= seen and {"/lowstate", "/policy/status", "/diagnostics"} <= topics:
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


def test_ctrl_c_stops_the_whole_graph_within_5_s(observer, tmp_path: Path) -> None:
    runner = _start(tmp_path)
    try:
        _wait_graph(observer)
        assert set(_node_pids()) == set(NODES)
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
