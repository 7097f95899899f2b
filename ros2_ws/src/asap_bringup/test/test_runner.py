"""The asap-up runner: real node processes, parameters, clean stop, and a dead node's name."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asap_bringup import runner
from asap_bringup.dds import FASTDDS_PROFILE, disables_type_propagation
from asap_bringup.profile import ProfileError, launch_entries, load_profile

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONFIG = FIXTURES / "config"
needs_rclpy = pytest.mark.skipif(importlib.util.find_spec("rclpy") is None,
                                 reason="the fixture's nodes are rclpy nodes (make test-robot has no ROS)")


def _env(**overrides: str | None) -> dict[str, str]:
    env = {**os.environ, **overrides}
    env = {k: v for k, v in env.items() if v is not None}
    env["AMENT_PREFIX_PATH"] = f"{FIXTURES / 'prefix'}{os.pathsep}{env.get('AMENT_PREFIX_PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _start(*args: str, **env: str | None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "asap_bringup.runner", "--config-dir", str(CONFIG), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(**env))


def _read_until(proc: subprocess.Popen, needles: list[str], timeout_s: float = 30.0) -> str:
    seen, deadline = "", time.monotonic() + timeout_s
    while time.monotonic() < deadline and not all(n in seen for n in needles):
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen += line
    assert all(n in seen for n in needles), f"runner output lacks {needles}:\n{seen}"
    return seen


def _heartbeats() -> list[int]:
    """PIDs of the heartbeat nodes (they run in their own sessions, so look them up by name)."""
    out = subprocess.run(["pgrep", "-f", "fake_pkg/heartbeat"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@needs_rclpy
def test_profile_parameters_reach_the_nodes() -> None:
    proc = _start("pair", "greeting:=bonjour")
    try:
        out = _read_until(proc, ["first greeting=from_file period=0.5", "second greeting=bonjour period=0.5"])
        assert "started ['first', 'second']" in out
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(10)


@needs_rclpy
@pytest.mark.parametrize("user_profile", [None, "/etc/my_fastdds.xml"])
def test_nodes_load_the_shipped_fast_dds_profile_unless_the_user_names_one(user_profile: str | None) -> None:
    """Without it Fast DDS announces type objects CycloneDDS (the G1, Unitree's SDK) rejects."""
    proc = _start("pair", FASTDDS_DEFAULT_PROFILES_FILE=user_profile, FASTRTPS_DEFAULT_PROFILES_FILE=None)
    try:
        expected = user_profile or str(FASTDDS_PROFILE)
        _read_until(proc, [f"first fastdds_profile={expected}\n", f"second fastdds_profile={expected}\n"])
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(10)
    assert disables_type_propagation(FASTDDS_PROFILE)


def test_condition_argument_skips_a_node() -> None:
    cmd = [sys.executable, "-m", "asap_bringup.runner", "--config-dir", str(CONFIG), "--dry-run",
           "pair", "with_second:=false"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), check=True)
    assert out.stdout.strip().count("\n") == 0 and "__node:=first" in out.stdout


@needs_rclpy
def test_ctrl_c_stops_every_node_within_5s() -> None:
    proc = _start("pair")
    _read_until(proc, ["first greeting", "second greeting"])
    assert len(_heartbeats()) == 2
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    code = proc.wait(10)
    deadline = time.monotonic() + 5
    while _heartbeats() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert code == 0
    assert not _heartbeats(), "a node outlived the runner"
    assert time.monotonic() - t0 < 5.0


@needs_rclpy
def test_a_killed_node_makes_the_runner_fail_naming_it() -> None:
    proc = _start("pair")
    _read_until(proc, ["first greeting", "second greeting"])
    victim = next(p for p in _heartbeats()
                  if "__node:=second" in Path(f"/proc/{p}/cmdline").read_text().replace("\0", " "))
    os.kill(victim, signal.SIGKILL)
    code = proc.wait(15)
    err = proc.stderr.read()
    assert code != 0
    assert "node 'second' exited" in err
    assert not _heartbeats()


def test_runner_commands_equal_the_launch_entries() -> None:
    profile = load_profile("pair", CONFIG)
    args = runner.parse_arguments(profile, ["greeting:=hi"])
    entries = launch_entries(profile, args.__getitem__)
    for entry in entries:
        cmd = runner.node_command(entry, "/bin/x")
        assert cmd[:4] == ["/bin/x", "--ros-args", "-r", f"__node:={entry['name']}"]
        files = [cmd[i + 1] for i, c in enumerate(cmd) if c == "--params-file"]
        assert files == [p for p in entry["parameters"] if isinstance(p, str)]
    assert runner.node_command(entries[1], "/bin/x")[-2:] == ["-p", "greeting:=hi"]


def test_bad_profiles_are_explained(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "bad.yaml").write_text(
        "arguments: {}\nnodes:\n  - {name: a, package: p, executable: e, overrides: {x: $(nope)}}\n")
    with pytest.raises(ProfileError, match=r"undeclared argument \$\(nope\)"):
        load_profile("bad", tmp_path)
    with pytest.raises(ProfileError, match="available"):
        load_profile("missing", tmp_path)
    with pytest.raises(runner.RunnerError, match="no argument 'colour'"):
        runner.parse_arguments(load_profile("pair", CONFIG), ["colour:=red"])
